// Basic fp32 CPU ops used by the model forward: RMSNorm, RoPE (both layouts, optionally with a
// scaled inverse-frequency table), SwiGLU, embedding lookup, and the attention-input and MLP
// sublayers built from them with kernels/cpu/matmul/matmul.h's mm::MatMul (which says how each
// weight type, SIMD level and batch size is computed).
//
// Layouts: activations are row-major [n_tokens][dim] fp32. A WeightView is [rows][cols] in
// its storage type; a matmul computes y[t][r] = sum_c W[r][c] * x[t][c], at the caller's
// mm::MatMulOptions (its SIMD level cap and F16 mode).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kernels/cpu/matmul/matmul.h"
#include "model/model_config.h"
#include "model/weights.h"

namespace pagoda::cpu {

// out[i] = x[i] / sqrt(mean(x^2) + eps) * weight[i]; out may alias x.
void RmsNorm(const float* x, const float* weight, int64_t n, float eps, float* out);

// Rotates the first rope_dim dims of each of n_heads heads (head-major [n_heads][head_dim]) of
// one token at position pos. theta_i = pos * base^(-2i/rope_dim) (no scaling).
void ApplyRope(float* x, int32_t n_heads, int32_t head_dim, int32_t rope_dim, int64_t pos,
               float base, RopeLayout layout);

// The same rotation with a precomputed inverse-frequency table (model_config.h RopeInvFreq,
// which carries the RoPE scaling): rope_dim = 2 * inv_freq.size(), theta_i = pos * inv_freq[i].
// For an unscaled config the result is bit-identical to the overload above.
void ApplyRope(float* x, int32_t n_heads, int32_t head_dim, int64_t pos,
               std::span<const double> inv_freq, RopeLayout layout);

// gate[i] = silu(gate[i]) * up[i]
void SwiGlu(float* gate, const float* up, int64_t n);

// out = row `token` of the embedding table, as fp32.
void EmbeddingRow(const WeightView& table, int32_t token, float* out);

}  // namespace pagoda::cpu

namespace pagoda::cpu {

// Per-token scratch rows for the layer helpers below, each [n_tokens][dim].
struct LayerScratch {
  std::vector<float> h, q, k, v, gate, up;
  void Reserve(const ModelConfig& c, int64_t n_tokens);
};

// The attention input of a layer for n tokens of x [n][n_embd]:
//   s.h = RmsNorm(x) * attn_norm; s.q, s.k, s.v = Wq/Wk/Wv h (+ bias); per-head RmsNorm of q and
//   k when the model has QK-norm (Qwen3); RoPE(q, k) at positions[t] with `rope_inv_freq`
//   (RopeInvFreq(c), computed once per model by the caller). Layouts: s.q [n][n_heads][head_dim],
//   s.k / s.v [n][n_kv_heads][head_dim].
void QkvRope(const ModelConfig& c, const LayerWeights& w, const float* x, int64_t n,
             const int32_t* positions, std::span<const double> rope_inv_freq,
             const mm::MatMulOptions& options, LayerScratch& s);

// The MLP sublayer with its residual: x += Wdown(silu(Wgate h) * Wup h), h = RmsNorm(x) * ffn_norm.
// next_weights: the caller's next matmul on options.team (mm::MatMulOptions::prefetch_next).
void AddMlp(const ModelConfig& c, const LayerWeights& w, float* x, int64_t n,
            const mm::MatMulOptions& options, LayerScratch& s,
            std::span<const WeightView* const> next_weights = {});

}  // namespace pagoda::cpu
