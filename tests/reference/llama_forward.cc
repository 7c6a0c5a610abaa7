#include "tests/reference/llama_forward.h"

#include <algorithm>
#include <cmath>

#include "kernels/cpu/ops.h"

namespace pagoda::cpu {

LlamaForward::LlamaForward(const ModelConfig& config, const ModelWeights& weights,
                           int32_t max_context, const mm::MatMulOptions& matmul)
    : config_(config),
      weights_(weights),
      max_context_(std::min(max_context, config.context_length)),
      matmul_(matmul),
      rope_inv_freq_(RopeInvFreq(config)) {
  const size_t kv = static_cast<size_t>(config_.n_layers) * max_context_ * config_.kv_dim();
  k_cache_.assign(kv, 0.0f);
  v_cache_.assign(kv, 0.0f);
  scores_.resize(static_cast<size_t>(max_context_));
}

void LlamaForward::EnsureScratch(int64_t n) {
  scratch_.Reserve(config_, n);
  x_.resize(n * config_.n_embd);
  attn_.resize(n * config_.q_dim());
  positions_.resize(static_cast<size_t>(n));
  for (int64_t t = 0; t < n; ++t) positions_[t] = num_cached_ + static_cast<int32_t>(t);
}

Result<std::span<const float>> LlamaForward::Forward(std::span<const int32_t> tokens,
                                                     bool all_logits) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (n == 0) return InvalidArgument("tokens: empty");
  if (num_cached_ + n > max_context_) {
    return OutOfRange("tokens: position " + std::to_string(num_cached_ + n - 1) +
                      " is past the context length " + std::to_string(max_context_));
  }
  for (int32_t id : tokens) {
    if (id < 0 || id >= config_.vocab_size) {
      return InvalidArgument("tokens: id " + std::to_string(id) + " outside the vocabulary [0, " +
                             std::to_string(config_.vocab_size) + ")");
    }
  }
  EnsureScratch(n);
  for (int64_t t = 0; t < n; ++t) {
    EmbeddingRow(weights_.token_embd, tokens[t], x_.data() + t * config_.n_embd);
  }
  for (int l = 0; l < config_.n_layers; ++l) {
    AttentionLayer(l, n);
    MlpLayer(l, n);
  }
  num_cached_ += static_cast<int32_t>(n);

  const int64_t first = all_logits ? 0 : n - 1;
  const int64_t rows = n - first;
  for (int64_t t = first; t < n; ++t) {
    float* x = x_.data() + t * config_.n_embd;
    RmsNorm(x, weights_.output_norm.data(), config_.n_embd, config_.rms_eps,
            scratch_.h.data() + (t - first) * config_.n_embd);
  }
  logits_.resize(rows * config_.vocab_size);
  mm::MatMul(weights_.output, scratch_.h.data(), rows, logits_.data(), matmul_);
  return std::span<const float>(logits_);
}

void LlamaForward::AttentionLayer(int layer, int64_t n) {
  const LayerWeights& w = weights_.layers[layer];
  const auto& c = config_;
  QkvRope(c, w, x_.data(), n, positions_.data(), rope_inv_freq_, matmul_, scratch_);
  const size_t layer_off = static_cast<size_t>(layer) * max_context_ * c.kv_dim();
  for (int64_t t = 0; t < n; ++t) {
    const int64_t pos = num_cached_ + t;
    std::copy_n(scratch_.k.data() + t * c.kv_dim(), c.kv_dim(),
                k_cache_.begin() + layer_off + pos * c.kv_dim());
    std::copy_n(scratch_.v.data() + t * c.kv_dim(), c.kv_dim(),
                v_cache_.begin() + layer_off + pos * c.kv_dim());
  }
  for (int64_t t = 0; t < n; ++t) {
    Attend(layer, t, scratch_.q.data() + t * c.q_dim(), attn_.data() + t * c.q_dim());
  }
  mm::MatMul(w.wo, attn_.data(), n, scratch_.h.data(), matmul_);
  for (int64_t i = 0; i < n * c.n_embd; ++i) x_[i] += scratch_.h[i];
}

// Attention of chunk token t (position num_cached_ + t) over positions [0, pos].
void LlamaForward::Attend(int layer, int64_t t, const float* q, float* out) {
  const auto& c = config_;
  const int64_t pos = num_cached_ + t;
  const int group = c.n_heads / c.n_kv_heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  const size_t layer_off = static_cast<size_t>(layer) * max_context_ * c.kv_dim();
  for (int h = 0; h < c.n_heads; ++h) {
    const int kvh = h / group;
    const float* qh = q + h * c.head_dim;
    float max_score = -INFINITY;
    // Sliding window W: keys at positions > pos - W (pos itself included).
    const int64_t first =
        c.sliding_window > 0 ? std::max<int64_t>(0, pos - c.sliding_window + 1) : 0;
    for (int64_t p = 0; p < first; ++p) scores_[p] = -INFINITY;
    for (int64_t p = first; p <= pos; ++p) {
      const float* kp = k_cache_.data() + layer_off + p * c.kv_dim() + kvh * c.head_dim;
      float s = 0.0f;
      for (int d = 0; d < c.head_dim; ++d) s += qh[d] * kp[d];
      scores_[p] = s * scale;
      max_score = std::max(max_score, scores_[p]);
    }
    double sum = 0.0;
    for (int64_t p = 0; p <= pos; ++p) {
      scores_[p] = std::exp(scores_[p] - max_score);
      sum += scores_[p];
    }
    float* oh = out + h * c.head_dim;
    std::fill(oh, oh + c.head_dim, 0.0f);
    const float inv = static_cast<float>(1.0 / sum);
    for (int64_t p = 0; p <= pos; ++p) {
      const float* vp = v_cache_.data() + layer_off + p * c.kv_dim() + kvh * c.head_dim;
      const float a = scores_[p] * inv;
      for (int d = 0; d < c.head_dim; ++d) oh[d] += a * vp[d];
    }
  }
}

void LlamaForward::MlpLayer(int layer, int64_t n) {
  AddMlp(config_, weights_.layers[layer], x_.data(), n, matmul_, scratch_);
}

}  // namespace pagoda::cpu
