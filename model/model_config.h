// ModelConfig: the hyper-parameters of a decoder-only transformer (Llama family), read from
// GGUF metadata. Everything the forward pass and the engine need to size buffers lives here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "model/gguf.h"

namespace pagoda {

// How RoPE pairs the dimensions of a head: (x[2i], x[2i+1]) as in GGUF llama / llama2.c, or
// (x[i], x[i + rope_dim/2]) as in HF checkpoints and GGUF qwen2 ("NEOX").
enum class RopeLayout { kInterleaved, kHalves };
const char* RopeLayoutName(RopeLayout layout);

// RoPE frequency scaling, applied through RopeInvFreq below by both forward paths.
//   kLinear: positions are divided by rope_scaling_factor (inv_freq / factor). HF
//            rope_scaling {"type": "linear"}; GGUF {arch}.rope.scaling.type = "linear" with
//            {arch}.rope.scaling.factor (or the older {arch}.rope.scale_linear).
//   kLlama3: Llama 3.1's per-frequency scaling. From HF rope_scaling {"rope_type": "llama3"}:
//            with wavelen = 2*pi / inv_freq, low = rope_original_context / rope_low_freq_factor,
//            high = rope_original_context / rope_high_freq_factor:
//            wavelen < high -> inv_freq unchanged; wavelen > low -> inv_freq / factor;
//            otherwise smooth = (rope_original_context / wavelen - low_freq_factor) /
//            (high_freq_factor - low_freq_factor) and
//            inv_freq = (1 - smooth) * inv_freq / factor + smooth * inv_freq.
//            From GGUF: llama.cpp's converter stores the per-dimension divisors instead, as the
//            tensor rope_freqs.weight ([rope_dim / 2] F32) -> ModelConfig::rope_freq_factors,
//            and the parameters are not recorded (rope_scaling_factor is the largest divisor).
enum class RopeScaling { kNone, kLinear, kLlama3 };
const char* RopeScalingName(RopeScaling scaling);  // "none", "linear", "llama3"

struct ModelConfig {
  std::string architecture;  // GGUF general.architecture, e.g. "llama"
  std::string name;          // general.name, or the file stem
  int32_t n_embd = 0;
  int32_t n_layers = 0;
  int32_t n_heads = 0;
  int32_t n_kv_heads = 0;
  int32_t head_dim = 0;
  int32_t n_ff = 0;
  int32_t vocab_size = 0;
  int32_t context_length = 0;
  float rms_eps = 1e-5f;
  float rope_theta = 10000.0f;
  int32_t rope_dim = 0;  // dims rotated per head (<= head_dim)
  RopeLayout rope_layout = RopeLayout::kInterleaved;
  bool tied_embeddings = false;  // no output.weight: the LM head reuses token_embd
  bool has_qkv_bias = false;
  int32_t bos_id = -1;
  int32_t eos_id = -1;

  // --- Added for Hugging Face directories (model/hf_model.h); defaults keep GGUF behaviour. ---
  // Every end-of-sequence id (HF eos_token_id may be a list); eos_id is the first. May be empty.
  std::vector<int32_t> eos_ids;
  RopeScaling rope_scaling = RopeScaling::kNone;
  float rope_scaling_factor = 1.0f;    // kLinear and kLlama3
  float rope_low_freq_factor = 1.0f;   // kLlama3
  float rope_high_freq_factor = 4.0f;  // kLlama3
  int32_t rope_original_context = 0;   // kLlama3: original_max_position_embeddings (0: unknown)
  // GGUF rope_freqs.weight: [rope_dim / 2] divisors of the inverse frequencies (llama.cpp's form
  // of kLlama3). Empty otherwise; when set, RopeInvFreq uses them instead of the HF formula.
  std::vector<float> rope_freq_factors;
  // Sliding-window attention span in tokens (Mistral; 0 = full attention): a query at position
  // p sees keys at positions > p - sliding_window. Applied by both forward paths.
  int32_t sliding_window = 0;
  // Qwen3: RMSNorm over each q / k head (LayerWeights::q_norm / k_norm) before RoPE.
  bool has_qk_norm = false;

  int32_t q_dim() const { return n_heads * head_dim; }
  int32_t kv_dim() const { return n_kv_heads * head_dim; }
  // Checks the dims are positive and consistent; names the first bad field.
  Status Validate() const;
  // The RoPE scaling part of Validate: positive factors, rope_freq_factors of rope_dim / 2.
  Status ValidateRopeScaling() const;
};

// The per-dimension RoPE inverse frequencies [rope_dim / 2]: dims pair i rotates by
// theta_i = pos * inv_freq[i]. Unscaled, inv_freq[i] = rope_theta^(-2i / rope_dim) computed in
// double exactly as ops.h ApplyRope always has (so unscaled results stay bit-identical); then
// divided by rope_freq_factors[i] if set, else scaled by the kLlama3 formula, and divided by
// rope_scaling_factor for kLinear. Computed once per model by the forward paths.
std::vector<double> RopeInvFreq(const ModelConfig& config);

// The kLlama3 band of a frequency with wavelength `wavelen` (see RopeScaling), shared by
// RopeInvFreq and make-model's rope_freqs.weight: kKeep when wavelen < orig / high, kScale (divide
// by the factor) when wavelen > orig / low, else kSmooth with smooth = (orig / wavelen - low) /
// (high - low). `Real` is the type high - low is taken in (float for make-model's float spec,
// double for RopeInvFreq), so that both give exactly the values they always have.
struct Llama3RopeBand {
  enum Kind { kKeep, kScale, kSmooth } kind;
  double smooth = 0.0;  // kSmooth only
};
template <typename Real>
Llama3RopeBand Llama3RopeBandOf(double wavelen, double orig, Real low, Real high) {
  if (wavelen < orig / high) return {Llama3RopeBand::kKeep, 0.0};
  if (wavelen > orig / low) return {Llama3RopeBand::kScale, 0.0};
  return {Llama3RopeBand::kSmooth, (orig / wavelen - low) / (high - low)};
}

// Reads the config from GGUF metadata (and the tensor table for what metadata may omit, and
// rope_freqs.weight). RoPE scaling keys: {arch}.rope.scaling.type ("none" or "linear"; others
// are Unimplemented), .factor, .original_context_length, the legacy {arch}.rope.scale_linear.
// Errors name the missing or malformed key.
Result<ModelConfig> ModelConfigFromGguf(const GgufFile& file);

}  // namespace pagoda
