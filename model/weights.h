// Model weights as typed views into the mapped model file (no copies for matrices).
//
// A WeightView is a row-major matrix [rows][cols] stored in a GGML type: row r starts at
// data + r * RowBytes(type, cols). For GGUF tensors rows = ne[1], cols = ne[0], so a
// projection W maps a `cols`-vector to a `rows`-vector. 1-D tensors (norms, biases) are
// converted to owned fp32 vectors at load time.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "common/status.h"
#include "model/gguf.h"
#include "model/model_config.h"
#include "model/tensor_types.h"

namespace pagoda {

struct WeightView {
  GgmlType type = GgmlType::kF32;
  // Not owned: the rows in the model file mapping (or, for F16 matrices, in the CPU backend's
  // load-time huge-page copy of them, cpu::PackedWeights).
  const uint8_t* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t row_bytes = 0;
  // Optional copy of the rows in the CPU matmul's packed layout (cpu::mm::PackRows; row stride
  // cpu::mm::PackedRowBytes(type, cols), cpu::mm::PackedBytes in all), made at load time by the
  // CPU backend, which owns it; nullptr: none. `data` stays the file's rows.
  const uint8_t* packed = nullptr;
  const uint8_t* row(int64_t r) const { return data + r * row_bytes; }
};

struct LayerWeights {
  std::vector<float> attn_norm;       // [n_embd]
  WeightView wq, wk, wv, wo;          // [q_dim][n_embd], [kv_dim][n_embd] x2, [n_embd][q_dim]
  std::vector<float> bq, bk, bv;      // empty unless the architecture has QKV bias
  std::vector<float> q_norm, k_norm;  // [head_dim]; only when config.has_qk_norm (Qwen3)
  std::vector<float> ffn_norm;        // [n_embd]
  WeightView w_gate, w_up, w_down;    // [n_ff][n_embd] x2, [n_embd][n_ff]

  // The seven projection matrices, in the order of kLayerMatrixNames.
  std::array<WeightView*, 7> matrices() { return {&wq, &wk, &wv, &wo, &w_gate, &w_up, &w_down}; }
  std::array<const WeightView*, 7> matrices() const {
    return {&wq, &wk, &wv, &wo, &w_gate, &w_up, &w_down};
  }
};
inline constexpr const char* kLayerMatrixNames[7] = {"wq",     "wk",   "wv",    "wo",
                                                     "w_gate", "w_up", "w_down"};

struct ModelWeights {
  WeightView token_embd;  // [vocab][n_embd]
  std::vector<float> output_norm;
  WeightView output;  // [vocab][n_embd]; == token_embd when tied
  std::vector<LayerWeights> layers;
};

// What a token's forward reads and computes through the weight matrices (the LM head and every
// layer's projections; the embedding row lookup excluded, a tied LM head counted once).
struct StepWeights {
  int64_t bytes = 0;   // read once per decode step (in the matrices' file types)
  int64_t params = 0;  // multiply-adds per token
};
StepWeights WeightsPerToken(const ModelWeights& weights);

// Binds every tensor the architecture needs, checking names, shapes and that Pagoda can compute
// with their types. The views stay valid while `file` lives. Errors name the tensor.
Result<ModelWeights> BindGgufWeights(const GgufFile& file, const ModelConfig& config);

}  // namespace pagoda
