// CpuBackend: the default Backend. Owns the paged KV pool (kvcache/KvPool) and per-step scratch
// sized once; runs each step layer by layer:
//   decode-only step -> attention_block_tkg (fused norm, QKV, RoPE, cache write, attention, out
//                       proj) with the same RoPE inverse-frequency table (RopeInvFreq) as prefill
//   otherwise        -> all rows: norm, QKV, RoPE, cache write, flash_paged_attention, out proj
//                       (decode rows of a mixed step too: each weight is read once per step);
//                       with options.batch_invariant, attention_block_tkg for every step
//                       (see there)
//   all rows         -> MLP; then final norm + LM head for the rows that need logits.
// Weights are the model's (mmap'd, in their file type); the model must outlive the backend. With
// options.pack_weights (default) the matrices of every block-quantized type also get a
// packed copy (packed_weights.h) that the SIMD matmul kernels read, and the float matrices a
// copy in huge pages (F16).
// Every kernel (matmul and both attention kernels) runs at the one SIMD level cap of the options;
// capabilities().kernels names the level in use.
#pragma once

#include <tbb/task_arena.h>

#include <memory>
#include <string_view>
#include <utility>
#include <vector>

#include "common/field_check.h"
#include "kernels/backend.h"
#include "kernels/cpu/attention/attention_block_tkg.h"
#include "kernels/cpu/kv_pool.h"
#include "kernels/cpu/matmul/matmul.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/packed_weights.h"
#include "kernels/cpu/simd_level.h"
#include "kernels/cpu/thread_team.h"
#include "kvcache/kv_cache_config.h"
#include "model/model_config.h"
#include "model/weights.h"

namespace pagoda::cpu {

// Whether a sequence's logits are batch-invariant (CpuBackendOptions::batch_invariance).
enum class BatchInvariance : int8_t {
  kAuto,  // on where it costs nothing: every matrix F32 or BF16 (their matmuls already are)
  kOn,
  kOff,
};
inline constexpr std::pair<std::string_view, BatchInvariance> kBatchInvarianceNames[] = {
    {"auto", BatchInvariance::kAuto},
    {"on", BatchInvariance::kOn},
    {"off", BatchInvariance::kOff},
    {"true", BatchInvariance::kOn},
    {"false", BatchInvariance::kOff}};

// The CPU backend's own options (the config's `backend:` section, and the CLI's kernel flags).
struct CpuBackendOptions {
  // Compute threads of the backend (0: one per core), the caller of Execute among them: a
  // spinning ThreadTeam (thread_team.h) that runs every parallel loop of a step when there are
  // no more threads than hardware threads, else the backend's own oneTBB arena. Either bounds
  // the kernels' parallelism independently of other threads (gRPC).
  int32_t threads = 0;
  // Microseconds the team's helpers spin after a parallel loop, waiting for the step's next one,
  // before they sleep (as llama.cpp's --poll); 0: no spinning team, the loops run in the
  // backend's oneTBB arena. YAML `backend.spin_us`.
  int32_t spin_us = 500;
  // Highest SIMD level of every kernel (simd_level.h); they run at min(max_simd_level, the
  // CPU's best). The default is the best this CPU has. Set by the CLI's --kernels (not YAML).
  SimdLevel max_simd_level = kMaxSimdLevel;
  // How F16 weights are multiplied in batches (kernels/cpu/matmul/matmul.h F16Matmul). Set by
  // the CLI's --f16-matmul (not YAML).
  mm::F16Matmul f16_matmul = mm::kDefaultF16Matmul;
  // Copy the matrices of every block-quantized type at load into the packed layout their SIMD
  // kernels read faster (decode, up to 3x; Q8_0: about 7%, and batch invariance for free), and
  // the F16 matrices as they are into huge pages (F16 decode ~20% faster); costs
  // as much memory again as those matrices. YAML `backend.pack_weights`.
  bool pack_weights = true;
  // On: a sequence's logits are bit for bit the same whichever sequences share its steps,
  // however its prompt is chunked and whether it comes from the prefix cache. Every step takes
  // the TKG path (keys read from the cache in tiles and splits at fixed positions) and the
  // matmuls their batch-invariant plans (matmul.h MatMulOptions::batch_invariant: prefill and
  // large batches without the int16 / token-lane kernels, so most quantized and F16 models pay
  // for it). kAuto: on where it is free (mm::FreeBatchInvariance): models whose matrices are all
  // F32 / BF16, or Q8_0 packed (pack_weights) at AVX512-VNNI.
  // YAML `backend.batch_invariant`; capabilities().batch_invariant tells the outcome.
  BatchInvariance batch_invariance = BatchInvariance::kAuto;
  bool operator==(const CpuBackendOptions&) const = default;
};
inline constexpr IntRange kCpuThreadsRange{0, 4096};
inline constexpr IntRange kCpuSpinUsRange{0, 1000000};
// Whether a backend with these options over `weights` is batch-invariant (kAuto resolved).
bool BatchInvariant(const CpuBackendOptions& options, const ModelWeights& weights);
// The ranges above; errors name the `backend.` key.
Status ValidateCpuBackendOptions(const CpuBackendOptions& options);
// The team the backend's loops run on for `options`: options.threads (0: every hardware thread
// this process may use) spinning options.spin_us between loops; null (the backend's oneTBB
// arena) when spin_us is 0 or the team would oversubscribe the cores.
std::shared_ptr<ThreadTeam> MakeThreadTeam(const CpuBackendOptions& options);

class CpuBackend final : public Backend {
 public:
  // `kv_cache` is the pool to allocate (geometry from the model), `limits` the largest step.
  // Errors: INVALID_ARGUMENT naming a bad option (backend.threads beyond 4 per hardware thread),
  // RESOURCE_EXHAUSTED if the pool or the step buffers (sized by max_num_batched_tokens; more
  // than half the machine's memory is refused before allocating) cannot be allocated.
  static Result<std::unique_ptr<CpuBackend>> Create(const ModelConfig& config,
                                                    const ModelWeights& weights,
                                                    const KvCacheConfig& kv_cache,
                                                    const StepLimits& limits,
                                                    const CpuBackendOptions& options);
  // The same on `team` (MakeThreadTeam's for these options, or one shared with another backend
  // that steps in turn on the same thread, as a draft model's does with its target: two
  // spinning teams would contend for the cores; null: the oneTBB arena).
  static Result<std::unique_ptr<CpuBackend>> Create(
      const ModelConfig& config, const ModelWeights& weights, const KvCacheConfig& kv_cache,
      const StepLimits& limits, const CpuBackendOptions& options, std::shared_ptr<ThreadTeam> team);

  Status Execute(const StepBatch& batch, std::span<float> logits) override;
  const BackendCapabilities& capabilities() const override { return caps_; }
  int32_t vocab_size() const override { return config_.vocab_size; }

  KvPool& kv_pool() { return pool_; }

 private:
  static Result<std::unique_ptr<CpuBackend>> CreateChecked(
      const ModelConfig& config, const ModelWeights& weights, const KvCacheConfig& kv_cache,
      const StepLimits& limits, const CpuBackendOptions& options, std::shared_ptr<ThreadTeam> team);
  CpuBackend(const ModelConfig& config, const ModelWeights& weights, KvPool pool,
             std::shared_ptr<ThreadTeam> team, TkgWorkspace workspace, const StepLimits& limits,
             const CpuBackendOptions& options);
  Status Validate(const StepBatch& batch, std::span<float> logits) const;
  Status ExecuteInArena(const StepBatch& batch, std::span<float> logits);
  PagedKvView LayerView(int layer);
  Status DecodeAttention(int layer, const StepBatch& batch, int32_t num_decode_rows);
  Status PrefillAttention(int layer, const StepBatch& batch);
  void Mlp(int layer, int64_t n);
  void Logits(const StepBatch& batch, std::span<float> logits);

  const ModelConfig& config_;
  PackedWeights packed_;  // the packed copies weights_ points into (options.pack_weights)
  ModelWeights weights_;  // the model's views (+ packed copies)
  KvPool pool_;
  std::shared_ptr<ThreadTeam> team_;  // null: the loops run in arena_ (see MakeThreadTeam)
  TkgWorkspace tkg_;
  BackendCapabilities caps_;
  mm::MatMulOptions matmul_;  // options.max_simd_level and f16_matmul, for every matmul
  // Scratch for up to max_num_batched_tokens rows.
  LayerScratch scratch_;
  std::vector<float> x_, attn_, attn_out_;
  std::vector<int32_t> positions_;
  std::vector<AttnSeq> decode_seqs_, prefill_seqs_;
  std::vector<double> rope_inv_freq_;       // RopeInvFreq(config_), shared by prefill and decode
  std::unique_ptr<tbb::task_arena> arena_;  // options.threads workers; Execute runs inside
};

}  // namespace pagoda::cpu
