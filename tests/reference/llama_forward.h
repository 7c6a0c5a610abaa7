// LlamaForward: the fp32 forward pass of a Llama-family decoder for ONE sequence, with a
// contiguous per-sequence KV cache. Simple and obviously right: it is the reference the paged
// kernels are checked against, and what `pagoda generate` runs until the engine takes over.
//
// Per layer:  h = RmsNorm(x) ; q,k,v = Wq h (+bq), Wk h (+bk), Wv h (+bv) ;
//             per-head RmsNorm(q, k) (Qwen3) ; RoPE(q, k) with RopeInvFreq(config) (scaling) ;
//             x += Wo softmax(q k^T / sqrt(head_dim) + causal) v   (query head j -> kv head j/g)
//             x += Wdown(silu(Wgate RmsNorm(x)) * Wup RmsNorm(x))
// logits = Woutput RmsNorm(x)
//
// KV cache layout: k_cache_[layer][pos][kv_dim], v_cache_ likewise; fp32.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "common/status.h"
#include "kernels/cpu/matmul/matmul.h"
#include "kernels/cpu/ops.h"
#include "model/model_config.h"
#include "model/weights.h"

namespace pagoda::cpu {

class LlamaForward {
 public:
  // Both references must outlive this object. max_context <= config.context_length. The
  // matmuls run at `matmul` (default: the CPU's best level).
  LlamaForward(const ModelConfig& config, const ModelWeights& weights, int32_t max_context,
               const mm::MatMulOptions& matmul = {});

  // Feeds `tokens` at positions [num_cached(), num_cached() + tokens.size()) and returns the
  // logits: [tokens.size()][vocab] if all_logits, else only the last token's [vocab]. The span
  // stays valid until the next call. Errors: OUT_OF_RANGE past max_context, INVALID_ARGUMENT
  // for a token id outside the vocabulary (nothing is cached then).
  Result<std::span<const float>> Forward(std::span<const int32_t> tokens, bool all_logits);

  int32_t num_cached() const { return num_cached_; }
  void Reset() { num_cached_ = 0; }

 private:
  void AttentionLayer(int layer, int64_t n);
  void MlpLayer(int layer, int64_t n);
  void Attend(int layer, int64_t t, const float* q, float* out);
  void EnsureScratch(int64_t n);

  const ModelConfig& config_;
  const ModelWeights& weights_;
  int32_t max_context_;
  mm::MatMulOptions matmul_;
  int32_t num_cached_ = 0;
  std::vector<float> k_cache_, v_cache_;
  // Scratch, [n][...] for the n tokens of the current call.
  LayerScratch scratch_;
  std::vector<int32_t> positions_;
  std::vector<float> x_, attn_, logits_, scores_;
  std::vector<double> rope_inv_freq_;  // RopeInvFreq(config_), [rope_dim / 2]
};

}  // namespace pagoda::cpu
