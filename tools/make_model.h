// Synthetic model writer behind `pagoda make-model`: a Llama-architecture GGUF with seeded
// random weights for a named shape preset and weight dtype, and a real vocabulary (copied from
// a tokenizer.model / GGUF, or a built-in byte-level one). Deterministic for a given seed.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "common/status.h"
#include "model/gguf.h"
#include "model/tensor_types.h"

namespace pagoda {

struct MakeModelOptions {
  std::string preset = "tiny";  // tiny | small | medium
  GgmlType dtype = GgmlType::kF32;
  std::string vocab_from;  // tokenizer.model or GGUF; empty: built-in byte-level vocab
  uint64_t seed = 1234;
  std::string output;
  // Overrides of the preset (0 = keep).
  int32_t n_layers = 0;
  int32_t context_length = 0;
  // "gguf", or "safetensors": `output` becomes a Hugging Face directory (config.json,
  // model.safetensors, tokenizer.model, tokenizer_config.json) holding the same weights as the
  // GGUF would (see GgufToHfDirectory). Needs dtype f32, f16 or bf16 and a SentencePiece
  // vocabulary (the built-in one, a tokenizer.model -- copied verbatim -- or a llama GGUF).
  std::string format = "gguf";
};

struct ModelShape {
  int32_t n_embd, n_layers, n_heads, n_kv_heads, n_ff, context_length;
  float rope_theta;
  bool tied_embeddings;
};
// Errors: INVALID_ARGUMENT for an unknown preset name.
Result<ModelShape> PresetShape(const std::string& preset);

// Writes a Llama GGUF with F32/F16/BF16 weights and a SentencePiece vocabulary as a Hugging
// Face directory `dir` (which must exist): config.json (LlamaForCausalLM), model.safetensors,
// tokenizer.model (built from tokenizer.ggml.*), tokenizer_config.json (bos/eos tokens,
// add_bos_token, chat_template). Q/K rows are permuted from GGUF's interleaved RoPE layout back
// to HF's halves layout -- the inverse of llama.cpp's converter permute() -- so both files
// compute the same logits.
Status GgufToHfDirectory(const GgufFile& gguf, const std::string& dir);

// Writes the model. `progress(done, total)` is called as tensors are generated.
Status MakeModel(const MakeModelOptions& options,
                 const std::function<void(int64_t, int64_t)>& progress = {});

}  // namespace pagoda
