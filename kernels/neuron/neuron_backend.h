// NeuronBackend: a Backend that executes pre-compiled whole-model programs (NEFFs, one per phase
// and bucket, described by manifest.json) through the Neuron runtime C API, loaded with dlopen.
//
// Device state is allocated once and shared by every program: the paged KV pool (per layer, K and
// V, each [num_blocks][n_kv_heads][block_size][head_dim]) and the "separate" weights, bound by
// name into each program's input set. Per-step inputs (ids, positions, slots, block tables,
// context lengths) go into preallocated tensors; logits come back to the host, where the engine
// samples. A step runs as decode execution(s) then prefill execution(s), each on the smallest
// program (bucket) that fits, padded with the manifest's sentinels; a step larger than every
// bucket is split over several executions, so any batch within capabilities() can run. Decode
// programs with tokens_per_seq > 1 take several new tokens per sequence (speculative
// verification: the last accepted token and k drafts) and return the logits of each.
//
// Status handling (docs/neuron-backend.md 2.2): request-level codes (1002/1003/1006) fail the step
// (INTERNAL) and the backend keeps serving; NRT_QUEUE_FULL is retried; every other code fails
// the step and marks the backend unhealthy (healthy() false; later steps fail fast).
// Ownership: the backend owns every runtime object it creates and releases them in its
// destructor (tensor sets, tensors, models, then nrt_close). One engine thread calls Execute.
#pragma once

#include <atomic>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "common/status.h"
#include "kernels/backend.h"
#include "kernels/neuron/manifest.h"
#include "kernels/neuron/neuron_options.h"
#include "kernels/neuron/nrt_loader.h"
#include "model/model_config.h"

namespace pagoda {

namespace neuron {

class NeuronBackend final : public Backend {
 public:
  // Runs the start-up sequence of docs/neuron-backend.md 5.5. `config` must outlive the backend.
  // `limits` are reported as capabilities (steps are split over buckets). Errors follow the
  // start-up code contract of kernels/backend.h; every message starts with "neuron backend: ".
  static Result<std::unique_ptr<NeuronBackend>> Create(const ModelConfig& config,
                                                       const NeuronOptions& options,
                                                       const StepLimits& limits);
  ~NeuronBackend() override;

  // See Backend::Execute. INTERNAL names the program and the runtime status on device failure.
  Status Execute(const StepBatch& batch, std::span<float> logits) override;
  const BackendCapabilities& capabilities() const override { return caps_; }
  int32_t vocab_size() const override { return manifest_.vocab; }

  bool healthy() const override { return healthy_.load(); }
  int64_t num_executions() const { return num_executions_; }

 private:
  // Tokens [off, off + len) of a decode sequence's query, run in one execution.
  struct DecodePiece {
    const StepSequence* seq = nullptr;
    int32_t off = 0, len = 0;
  };
  struct Program {
    ManifestProgram spec;
    nrt_model_t* model = nullptr;
    nrt_tensor_set_t* inputs = nullptr;
    nrt_tensor_set_t* outputs = nullptr;
    std::vector<nrt_tensor_t*> io;  // by IoRoles() index (owned)
  };

  NeuronBackend(neuron::LoadedNrt nrt, NeuronManifest manifest, const NeuronOptions& options);
  Status Init();
  Status LoadProgram(const ManifestProgram& spec);
  Status AllocateState();
  Status BindProgram(Program& p);
  Status Warmup();
  Status Check(NRT_STATUS s, const std::string& what);
  Status Validate(const StepBatch& b, std::span<float> logits) const;
  Status CopyBlocks(std::span<const BlockCopy> copies);
  // Runs the decode sequences from b.seqs[next] on as few executions as the buckets allow and
  // advances `next` past them (docs/neuron-backend.md 5.6).
  Status RunDecodes(const StepBatch& b, size_t& next, float*& out);
  Status RunSplitDecode(const StepBatch& b, const StepSequence& s, float*& out);
  // One execution of pieces_ (each at most `query_len` tokens, contexts within `ctx_blocks`).
  Status RunDecodePieces(const StepBatch& b, int32_t query_len, int32_t ctx_blocks, float*& out);
  void StageDecodePiece(const StepBatch& b, const ManifestProgram& spec, int32_t row);
  Status RunPrefill(const StepBatch& b, const StepSequence& s, float*& out);
  // Executes `p` on the staged inputs and reads logits rows [first_row, first_row + n_rows).
  Status RunProgram(Program& p, int32_t first_row, int32_t n_rows, float* out);
  // Executes `p` and appends its logits rows `rows` (ascending) to `out`.
  Status RunProgramRows(Program& p, const std::vector<int32_t>& rows, float*& out);
  void ResetStaging(const Program& p);
  Status Allocate(size_t bytes, const std::string& name, nrt_tensor_t** t);

  LoadedNrt nrt_;
  const NrtApi& api_;
  NeuronManifest manifest_;
  NeuronOptions options_;
  BackendCapabilities caps_;
  bool initialized_ = false;
  std::atomic<bool> healthy_{true};  // written by the engine thread, read by any
  int64_t num_executions_ = 0;
  std::vector<Program> programs_;  // programs_[i].spec == manifest_.programs[i]
  std::vector<nrt_tensor_t*> kv_;  // [layer * 2 + (v ? 1 : 0)]
  size_t kv_block_bytes_ = 0;      // one block of one K or V pool
  std::vector<nrt_tensor_t*> weights_;
  // Host staging, sized for the largest program (no per-step allocation).
  std::vector<int32_t> ids_, pos_, slots_, table_, ctx_;
  std::vector<float> decode_logits_;  // decode logits, when an unwanted row precedes a wanted one
  std::vector<DecodePiece> pieces_;   // the decode execution being staged, one per sequence row
  std::vector<int32_t> wanted_;       // its logits rows to return, ascending
};

}  // namespace neuron

// The factory runtime/runtime.cc calls for `backend.type: neuron`.
Result<std::unique_ptr<Backend>> CreateNeuronBackend(const ModelConfig& config,
                                                     const NeuronOptions& options,
                                                     const StepLimits& limits);

// `pagoda inspect --neuron-manifest PATH`: validates the manifest and prints its buckets.
Status InspectNeuronManifest(const std::string& path, std::ostream& out);

}  // namespace pagoda
