// Hugging Face model directories: config.json + *.safetensors + tokenizer files -> Model.
//
// Supported architectures (config.json "architectures"[0]): LlamaForCausalLM,
// MistralForCausalLM, Qwen2ForCausalLM (QKV bias) and Qwen3ForCausalLM (per-head q_norm /
// k_norm, bound into LayerWeights; ModelConfig::has_qk_norm is set). config.json keys read:
// hidden_size, num_hidden_layers, num_attention_heads, num_key_value_heads (default: heads),
// intermediate_size, vocab_size, max_position_embeddings, rms_norm_eps, rope_theta, head_dim
// (default hidden_size / heads; null allowed), tie_word_embeddings (default false),
// bos_token_id / eos_token_id (int, list or null), rope_scaling (null, "default", "linear" or
// "llama3", applied through RopeInvFreq; others are Unimplemented), sliding_window (Mistral, or
// Qwen with use_sliding_window), hidden_act (must be silu), attention_bias / mlp_bias (must be
// false for Llama / Mistral / Qwen3). HF checkpoints keep the RoPE halves layout, so rope_layout is
// kHalves whatever the architecture.
//
// Weights: model.embed_tokens.weight, model.layers.N.{input_layernorm, self_attn.{q,k,v,o}_proj,
// post_attention_layernorm, mlp.{gate,up,down}_proj}.weight, self_attn.{q,k,v}_proj.bias (Qwen2),
// self_attn.{q,k}_norm.weight (Qwen3), model.norm.weight, lm_head.weight (unless tied), in F32,
// F16 or BF16. A safetensors [out, in] matrix is a WeightView with rows = out, cols = in, viewed
// in place in the mapping (copied only when the file leaves it misaligned for its dtype).
//
// Tokenizer: tokenizer.json (byte-level BPE) or, if that is absent or unsupported,
// tokenizer.model (SentencePiece). tokenizer_config.json may override bos_token, eos_token
// (string or {"content": ...}) and add_bos_token, and gives chat_template (a string, or a list
// of {name, template} from which "default" is taken; chat_template.jinja is read otherwise).
// generation_config.json's bos_token_id / eos_token_id override config.json's. The tokenizer may
// have fewer tokens than the embedding has rows (padded vocabularies), never more.
// generation_config.json also gives the sampling defaults and, with the EOS ids, the stop
// tokens of Model::generation (model/generation_defaults.h); a list chat_template gives the
// named templates too.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>

#include "common/status.h"
#include "model/model.h"
#include "model/safetensors.h"

namespace pagoda {

// Parses config.json text. Errors: "config.json: <key>: ...".
Result<ModelConfig> HfConfigFromJson(std::string_view config_json);

// Binds the HF tensors of `set` for `config`. Misaligned tensors are copied into
// `aligned_copies` (which must outlive the weights, as must `set`). Errors name the tensor.
Result<ModelWeights> BindHfWeights(const SafetensorsSet& set, const ModelConfig& config,
                                   std::vector<std::vector<uint8_t>>* aligned_copies);

// Loads a Hugging Face model directory. Errors are prefixed with the file they concern.
Result<std::unique_ptr<Model>> LoadHfModel(const std::string& dir);

// The tokenizer alone of a Hugging Face directory, or of a bare tokenizer.json (a name ending
// in .json) or SentencePiece tokenizer.model, with the tokenizer_config.json (and config.json
// ids) of its directory when present.
Result<std::unique_ptr<Tokenizer>> LoadHfTokenizerAt(const std::string& path);

// A special-token entry of tokenizer_config.json (`key` = "bos_token", "pad_token", ...):
// "text" or {"content": "text", ...}; "" when absent or of another form.
std::string HfSpecialTokenText(const nlohmann::json& tokenizer_config, const char* key);

// The id of the first of the `n` tokens whose piece(id) is exactly `text`; -1 when there is
// none or `text` is empty.
template <typename PieceFn>
int32_t FindTokenId(int64_t n, const PieceFn& piece, std::string_view text) {
  if (text.empty()) return -1;
  for (int64_t id = 0; id < n; ++id) {
    if (piece(id) == text) return static_cast<int32_t>(id);
  }
  return -1;
}

}  // namespace pagoda
