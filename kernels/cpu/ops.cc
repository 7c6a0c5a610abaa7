#include "kernels/cpu/ops.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <cmath>
#include <vector>

#include "kernels/cpu/portable_math.h"

namespace pagoda::cpu {

// The sum of squares in 8 double lanes (a fixed order, vectorized by each clone): one chain of
// dependent double adds took 4 cycles a value, about 3 us for a 2048-wide row on the step's
// calling thread, twice a layer.
PAGODA_SIMD_CLONES void RmsNorm(const float* x, const float* weight, int64_t n, float eps,
                                float* out) {
  double acc[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int k = 0; k < 8; ++k) acc[k] += static_cast<double>(x[i + k]) * x[i + k];
  }
  double ss = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
  for (; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  const float scale = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(n) + eps));
  for (i = 0; i < n; ++i) out[i] = x[i] * scale * weight[i];
}

namespace {

// Rotates dim pair i (of rope_dim = 2 * half) of every head by theta.
inline void RotatePair(float* x, int32_t n_heads, int32_t head_dim, int32_t half, int32_t i,
                       double theta, RopeLayout layout) {
  const float c = static_cast<float>(std::cos(theta));
  const float s = static_cast<float>(std::sin(theta));
  const int32_t a = layout == RopeLayout::kInterleaved ? 2 * i : i;
  const int32_t b = layout == RopeLayout::kInterleaved ? 2 * i + 1 : i + half;
  for (int32_t h = 0; h < n_heads; ++h) {
    float* v = x + static_cast<int64_t>(h) * head_dim;
    const float x0 = v[a];
    const float x1 = v[b];
    v[a] = x0 * c - x1 * s;
    v[b] = x0 * s + x1 * c;
  }
}

}  // namespace

void ApplyRope(float* x, int32_t n_heads, int32_t head_dim, int32_t rope_dim, int64_t pos,
               float base, RopeLayout layout) {
  const int32_t half = rope_dim / 2;
  for (int32_t i = 0; i < half; ++i) {
    const double theta =
        static_cast<double>(pos) * std::pow(static_cast<double>(base), -2.0 * i / rope_dim);
    RotatePair(x, n_heads, head_dim, half, i, theta, layout);
  }
}

void ApplyRope(float* x, int32_t n_heads, int32_t head_dim, int64_t pos,
               std::span<const double> inv_freq, RopeLayout layout) {
  const auto half = static_cast<int32_t>(inv_freq.size());
  for (int32_t i = 0; i < half; ++i) {
    RotatePair(x, n_heads, head_dim, half, i, static_cast<double>(pos) * inv_freq[i], layout);
  }
}

// The attention's exp (ExpPortable, about 1 ulp) in a loop GCC vectorizes, with AVX-512 and AVX2
// clones chosen at load time: std::exp was a libm call per value, for every token's n_ff values
// on the step's calling thread (5 tokens x 5632: 100-175 us, now 20-26 us). ExpPortable holds
// up to 88, so g <= -88 (silu(g) below 1e-36) and NaN take g * 0 (-0, or NaN, as std::exp's form
// gives). Compiled without fp contraction (CMakeLists.txt): the same bits from every clone.
PAGODA_SIMD_CLONES void SwiGlu(float* gate, const float* up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    const float neg = -g < 88.0f ? -g : 88.0f;
    const float silu = g / (1.0f + ExpPortable(neg));
    gate[i] = (-g < 88.0f ? silu : g * 0.0f) * up[i];
  }
}

void EmbeddingRow(const WeightView& table, int32_t token, float* out) {
  DequantizeRow(table.type, table.row(token), out, table.cols);
}

}  // namespace pagoda::cpu

namespace pagoda::cpu {

void LayerScratch::Reserve(const ModelConfig& c, int64_t n) {
  h.resize(static_cast<size_t>(n * c.n_embd));
  q.resize(static_cast<size_t>(n * c.q_dim()));
  k.resize(static_cast<size_t>(n * c.kv_dim()));
  v.resize(static_cast<size_t>(n * c.kv_dim()));
  gate.resize(static_cast<size_t>(n * c.n_ff));
  up.resize(static_cast<size_t>(n * c.n_ff));
}

void QkvRope(const ModelConfig& c, const LayerWeights& w, const float* x, int64_t n,
             const int32_t* positions, std::span<const double> rope_inv_freq,
             const mm::MatMulOptions& options, LayerScratch& s) {
  for (int64_t t = 0; t < n; ++t) {
    RmsNorm(x + t * c.n_embd, w.attn_norm.data(), c.n_embd, c.rms_eps, s.h.data() + t * c.n_embd);
  }
  const WeightView* qkv[] = {&w.wq, &w.wk, &w.wv};
  float* const qkv_out[] = {s.q.data(), s.k.data(), s.v.data()};
  mm::MatMulSameInput(qkv, s.h.data(), n, qkv_out, options);
  for (int64_t t = 0; t < n; ++t) {
    float* q = s.q.data() + t * c.q_dim();
    float* k = s.k.data() + t * c.kv_dim();
    float* v = s.v.data() + t * c.kv_dim();
    if (c.has_qkv_bias) {
      for (int i = 0; i < c.q_dim(); ++i) q[i] += w.bq[i];
      for (int i = 0; i < c.kv_dim(); ++i) k[i] += w.bk[i], v[i] += w.bv[i];
    }
    if (c.has_qk_norm) {  // Qwen3: per-head RMSNorm of q and k before RoPE
      for (int h = 0; h < c.n_heads; ++h) {
        float* qh = q + h * c.head_dim;
        RmsNorm(qh, w.q_norm.data(), c.head_dim, c.rms_eps, qh);
      }
      for (int h = 0; h < c.n_kv_heads; ++h) {
        float* kh = k + h * c.head_dim;
        RmsNorm(kh, w.k_norm.data(), c.head_dim, c.rms_eps, kh);
      }
    }
    ApplyRope(q, c.n_heads, c.head_dim, positions[t], rope_inv_freq, c.rope_layout);
    ApplyRope(k, c.n_kv_heads, c.head_dim, positions[t], rope_inv_freq, c.rope_layout);
  }
}

void AddMlp(const ModelConfig& c, const LayerWeights& w, float* x, int64_t n,
            const mm::MatMulOptions& options, LayerScratch& s,
            std::span<const WeightView* const> next_weights) {
  for (int64_t t = 0; t < n; ++t) {
    RmsNorm(x + t * c.n_embd, w.ffn_norm.data(), c.n_embd, c.rms_eps, s.h.data() + t * c.n_embd);
  }
  const WeightView* gate_up[] = {&w.w_gate, &w.w_up};
  float* const gate_up_out[] = {s.gate.data(), s.up.data()};
  mm::MatMulOptions gate_up_options = options;
  const WeightView* down[] = {&w.w_down};
  gate_up_options.prefetch_next = down;
  mm::MatMulSameInput(gate_up, s.h.data(), n, gate_up_out, gate_up_options);
  SwiGlu(s.gate.data(), s.up.data(), n * c.n_ff);
  mm::MatMulOptions down_options = options;
  down_options.prefetch_next = next_weights;
  mm::MatMul(w.w_down, s.gate.data(), n, s.h.data(), down_options);
  for (int64_t i = 0; i < n * c.n_embd; ++i) x[i] += s.h[i];
}

}  // namespace pagoda::cpu
