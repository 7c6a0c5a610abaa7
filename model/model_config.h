// ModelConfig: the hyper-parameters of a decoder-only transformer (Llama family), read from
// GGUF metadata. Everything the forward pass and the engine need to size buffers lives here.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"
#include "model/gguf.h"

namespace pagoda {

// How RoPE pairs the dimensions of a head: (x[2i], x[2i+1]) as in GGUF llama / llama2.c, or
// (x[i], x[i + rope_dim/2]) as in HF checkpoints and GGUF qwen2 ("NEOX").
enum class RopeLayout { kInterleaved, kHalves };
const char* RopeLayoutName(RopeLayout layout);

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

  int32_t q_dim() const { return n_heads * head_dim; }
  int32_t kv_dim() const { return n_kv_heads * head_dim; }
  // Checks the dims are positive and consistent; names the first bad field.
  Status Validate() const;
};

// Reads the config from GGUF metadata (and the tensor table for what metadata may omit).
// Errors name the missing or malformed key.
Result<ModelConfig> ModelConfigFromGguf(const GgufFile& file);

}  // namespace pagoda
