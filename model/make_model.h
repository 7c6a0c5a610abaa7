// Synthetic model writer behind `pagoda make-model`: a GGUF (or HF directory) with seeded
// random weights for a named shape preset, architecture (llama, qwen2 with QKV biases, qwen3
// with per-head QK-norm), weight dtype and optional RoPE scaling, and a real vocabulary (copied
// from a tokenizer.model / GGUF, or a built-in byte-level one). Deterministic for a given seed.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "model/gguf.h"
#include "model/model_config.h"
#include "model/tensor_types.h"

namespace pagoda {

// RoPE scaling of a synthetic model. GGUF: kLinear writes {arch}.rope.scaling.type = "linear"
// and .factor; kLlama3 writes llama.cpp's rope_freqs.weight ([rope_dim / 2] F32 divisors
// 1 / ((1 - smooth) / factor + smooth), as convert_hf_to_gguf.py computes them). config.json:
// rope_scaling {"rope_type": "linear" | "llama3", "factor", ...}.
struct RopeScalingSpec {
  RopeScaling type = RopeScaling::kNone;
  float factor = 1.0f;
  float low_freq_factor = 1.0f;   // kLlama3
  float high_freq_factor = 4.0f;  // kLlama3
  int32_t original_context = 0;   // kLlama3; 0: the model's context length
};
// Parses "none", "linear:F" or "llama3:F[,LOW,HIGH[,ORIGINAL_CONTEXT]]" (defaults 1, 4 and the
// context length). Errors: INVALID_ARGUMENT quoting the text.
Result<RopeScalingSpec> ParseRopeScalingSpec(std::string_view text);

struct MakeModelOptions {
  std::string preset = "tiny";  // tiny | small | medium
  GgmlType dtype = GgmlType::kF32;
  std::string vocab_from;  // tokenizer.model or GGUF; empty: built-in byte-level vocab
  uint64_t seed = 1234;
  std::string output;
  // Overrides of the preset (0 = keep).
  int32_t n_layers = 0;
  int32_t context_length = 0;
  int32_t head_dim = 0;  // 0: n_embd / n_heads; may differ (Qwen3 checkpoints often do)
  // "llama" (GGUF Q/K rows in the interleaved RoPE layout), "qwen2" (+ Q/K/V biases) or "qwen3"
  // (+ per-head attn_q_norm / attn_k_norm); qwen2 / qwen3 use the halves layout in both formats.
  std::string arch = "llama";
  RopeScalingSpec rope_scaling;
  // "gguf", or "safetensors": `output` becomes a Hugging Face directory (config.json,
  // model.safetensors, tokenizer.model, tokenizer_config.json) holding the same weights as the
  // GGUF would (see GgufToHfDirectory). Needs dtype f32, f16 or bf16 and a SentencePiece
  // vocabulary (the built-in one, a tokenizer.model -- copied verbatim -- or a llama GGUF).
  std::string format = "gguf";
  // Chat testing: control tokens appended to the vocabulary (not with a GGUF --vocab-from), a
  // Jinja file written as tokenizer.chat_template, and the token written as
  // tokenizer.ggml.eot_token_id (GGUF only).
  std::vector<std::string> control_tokens;
  std::string chat_template_file;
  std::string eot_token;
};

struct ModelShape {
  int32_t n_embd, n_layers, n_heads, n_kv_heads, n_ff, context_length;
  float rope_theta;
  bool tied_embeddings;
  int32_t head_dim = 0;  // 0 in presets: n_embd / n_heads
};
// Errors: INVALID_ARGUMENT for an unknown preset name.
Result<ModelShape> PresetShape(const std::string& preset);

// Writes a llama / qwen2 / qwen3 GGUF with F32/F16/BF16 weights and a SentencePiece vocabulary
// as a Hugging Face directory `dir` (which must exist): config.json (LlamaForCausalLM,
// Qwen2ForCausalLM or Qwen3ForCausalLM, with rope_scaling), model.safetensors, tokenizer.model
// (built from tokenizer.ggml.*), tokenizer_config.json (bos/eos tokens, add_bos_token,
// chat_template). For llama, Q/K rows are permuted from GGUF's interleaved RoPE layout back to
// HF's halves layout -- the inverse of llama.cpp's converter permute() -- so both files compute
// the same logits; qwen2 / qwen3 GGUFs already use the halves layout. A GGUF with
// rope_freqs.weight (llama3 scaling) needs `llama3` (the HF parameters it was made from).
Status GgufToHfDirectory(const GgufFile& gguf, const std::string& dir,
                         const RopeScalingSpec& llama3 = {});

// Writes the model. `progress(done, total)` is called as tensors are generated.
Status MakeModel(const MakeModelOptions& options,
                 const std::function<void(int64_t, int64_t)>& progress = {});

}  // namespace pagoda
