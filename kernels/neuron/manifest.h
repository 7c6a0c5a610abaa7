// The artifact manifest (docs/neuron-backend.md 5.4): written by the offline compile tool,
// validated by Pagoda, never guessed. Also the I/O contract each program must have
// (ExpectedTensors), the diff against the runtime's own tensor info, and the NEFF header check.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "kernels/neuron/nrt_api.h"
#include "model/model_config.h"

namespace pagoda::neuron {

inline constexpr const char* kManifestFormat = "pagoda-neuron-manifest/1";
// Largest decode tokens_per_seq: the TKG kernel's S_tkg limit (docs/seed-kernels.md 2.1).
inline constexpr int32_t kMaxTokensPerSeq = 8;

// One compiled program (bucket). Per-token inputs (input_ids, position_ids, slot_mapping) hold
// tokens() entries and logits logit_rows() x vocab; block_table and context_lens hold rows().
// A decode program's token entries are row-major per sequence: sequence r owns entries
// [r * tokens_per_seq, (r + 1) * tokens_per_seq), its new tokens first, then padding.
struct ManifestProgram {
  std::string id;
  std::string phase;                      // "prefill" | "decode"
  std::string neff;                       // relative to the manifest's directory
  int32_t max_tokens = 0;                 // prefill: tokens per execution (one sequence)
  int32_t max_seqs = 1;                   // decode: sequences per execution
  int32_t tokens_per_seq = 1;             // decode: new tokens per sequence, 1..kMaxTokensPerSeq
  int32_t max_ctx_blocks = 0;             // block-table width
  std::map<std::string, std::string> io;  // role -> tensor name (kIoRoles)
  bool is_decode() const { return phase == "decode"; }
  int32_t rows() const { return is_decode() ? max_seqs : 1; }
  int32_t tokens() const { return is_decode() ? max_seqs * tokens_per_seq : max_tokens; }
  // Decode: one row per token slot; prefill: the last token's row.
  int32_t logit_rows() const { return is_decode() ? tokens() : 1; }
};

struct ManifestWeight {
  std::string name;  // tensor name bound in every program
  std::string file;  // raw bytes, relative to the manifest's directory
  std::string dtype;
  std::vector<uint32_t> shape;
};

struct NeuronManifest {
  std::string path, dir;  // the file and its directory
  std::string target, compiler;
  int32_t lnc = 0;
  std::string arch;
  int32_t n_layers = 0, vocab = 0, n_kv_heads = 0, head_dim = 0;
  int32_t num_blocks = 0, block_size = 0;
  std::string kv_dtype;        // f32 | bf16 | f16 | fp8_e4m3
  std::string k_name, v_name;  // templates with "{layer}"
  int32_t slot_pad = -1, table_pad = -1;
  std::string weights_mode;  // "embedded" | "separate"
  std::vector<ManifestWeight> weights;
  std::vector<ManifestProgram> programs;
};

// The per-step I/O roles every program maps to tensor names.
inline const std::vector<std::string>& IoRoles() {
  static const std::vector<std::string> kRoles = {"input_ids",   "position_ids", "slot_mapping",
                                                  "block_table", "context_lens", "logits"};
  return kRoles;
}

// Parses and checks the manifest's own consistency. Errors (FAILED_PRECONDITION) start with
// "neuron backend: manifest PATH: " and name the JSON key.
Result<NeuronManifest> ParseManifest(const std::string& json_text, const std::string& path);
Result<NeuronManifest> LoadManifest(const std::string& path);

// The manifest's model and KV dims against the model config and the configured LNC.
// FAILED_PRECONDITION naming both values.
Status CheckManifestAgainstModel(const NeuronManifest& m, const ModelConfig& model);
Status CheckLnc(const NeuronManifest& m, int32_t configured_lnc);
// FAILED_PRECONDITION unless the manifest has at least one prefill and one decode program.
Status CheckHasBothPhases(const NeuronManifest& m);

std::string LayerTensorName(const std::string& tmpl, int layer);

struct TensorSpec {
  std::string name;
  nrt_tensor_usage_t usage = NRT_TENSOR_USAGE_INPUT;
  nrt_dtype_t dtype = NRT_DTYPE_UNKNOWN;
  std::vector<uint32_t> shape;
  size_t bytes() const;
  std::string ToString() const;  // "input kv.0.k f32[64,4,16,16] (262144 bytes)"
};

Result<nrt_dtype_t> ParseDtype(const std::string& name);  // f32 bf16 f16 fp8_e4m3 i32 u8 ...
size_t DtypeSize(nrt_dtype_t dtype);
const char* DtypeName(nrt_dtype_t dtype);

// Everything program `p` must declare: the per-step I/O, every layer's K and V, every weight.
std::vector<TensorSpec> ExpectedTensors(const NeuronManifest& m, const ManifestProgram& p);
// "" when equal; otherwise a diff, one line per difference ("- expected" / "+ runtime").
std::string DiffTensors(const std::vector<TensorSpec>& expected,
                        const std::vector<TensorSpec>& actual);
std::vector<TensorSpec> FromTensorInfo(const nrt_tensor_info_array_t& info);

// NEFF header (1024 bytes): name and lnc_size. Errors: FAILED_PRECONDITION.
struct NeffHeader {
  std::string name;
  uint32_t lnc_size = 0;
};
inline constexpr size_t kNeffHeaderSize = 1024;
inline constexpr size_t kNeffNameOffset = 220, kNeffNameSize = 256, kNeffLncOffset = 552;
Result<NeffHeader> ParseNeffHeader(const void* data, size_t size, const std::string& path);

}  // namespace pagoda::neuron
