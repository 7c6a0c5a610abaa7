#include "model/model_config.h"

#include <limits>

namespace pagoda {
namespace {

// Reads an integer key into an int32 field, requiring 1 <= value <= max.
Status ReadDim(const GgufFile& f, const std::string& key, int32_t* out, bool required,
               int64_t max = std::numeric_limits<int32_t>::max()) {
  auto v = f.GetInt(key);
  if (!v.ok()) {
    if (!required && v.status().code() == StatusCode::kNotFound) return Status::Ok();
    return v.status();
  }
  if (*v < 1 || *v > max) {
    return InvalidArgument("metadata '" + key + "': " + std::to_string(*v) + " (expected 1.." +
                           std::to_string(max) + ")");
  }
  *out = static_cast<int32_t>(*v);
  return Status::Ok();
}

Status ReadOptionalFloat(const GgufFile& f, const std::string& key, float* out) {
  auto v = f.GetFloat(key);
  if (!v.ok()) return v.status().code() == StatusCode::kNotFound ? Status::Ok() : v.status();
  if (!(*v > 0.0) || *v > 1e12) {
    return InvalidArgument("metadata '" + key + "': " + std::to_string(*v) +
                           " (expected a positive number)");
  }
  *out = static_cast<float>(*v);
  return Status::Ok();
}

Status ReadOptionalTokenId(const GgufFile& f, const std::string& key, int32_t* out) {
  auto v = f.GetInt(key);
  if (!v.ok()) return v.status().code() == StatusCode::kNotFound ? Status::Ok() : v.status();
  *out = (*v < 0 || *v > std::numeric_limits<int32_t>::max()) ? -1 : static_cast<int32_t>(*v);
  return Status::Ok();
}

Status ReadArchitecture(const GgufFile& f, ModelConfig* c) {
  PAGODA_ASSIGN_OR_RETURN(c->architecture, f.GetString("general.architecture"));
  if (c->architecture == "llama") {
    c->rope_layout = RopeLayout::kInterleaved;
  } else if (c->architecture == "qwen2") {
    c->rope_layout = RopeLayout::kHalves;
    c->has_qkv_bias = true;
  } else if (c->architecture == "qwen3") {
    c->rope_layout = RopeLayout::kHalves;
    c->has_qk_norm = true;
  } else {
    return Unimplemented("metadata 'general.architecture': '" + c->architecture +
                         "' is not supported (expected llama, qwen2 or qwen3)");
  }
  auto name = f.GetString("general.name");
  c->name = name.ok() ? *name : c->architecture;
  return Status::Ok();
}

}  // namespace

const char* RopeLayoutName(RopeLayout layout) {
  return layout == RopeLayout::kInterleaved ? "interleaved" : "halves";
}

Status ModelConfig::Validate() const {
  auto positive = [](int32_t v, const char* field) {
    return v > 0
               ? Status::Ok()
               : InvalidArgument(std::string(field) + ": " + std::to_string(v) + " (expected > 0)");
  };
  for (auto [v, f] : {std::pair{n_embd, "n_embd"},
                      {n_layers, "n_layers"},
                      {n_heads, "n_heads"},
                      {n_kv_heads, "n_kv_heads"},
                      {head_dim, "head_dim"},
                      {n_ff, "n_ff"},
                      {vocab_size, "vocab_size"},
                      {context_length, "context_length"}}) {
    PAGODA_RETURN_IF_ERROR(positive(v, f));
  }
  if (n_heads % n_kv_heads != 0) {
    return InvalidArgument("n_kv_heads: " + std::to_string(n_kv_heads) + " does not divide " +
                           "n_heads " + std::to_string(n_heads));
  }
  if (rope_dim <= 0 || rope_dim > head_dim || rope_dim % 2 != 0) {
    return InvalidArgument("rope_dim: " + std::to_string(rope_dim) +
                           " (expected an even number in 2..head_dim " + std::to_string(head_dim) +
                           ")");
  }
  if (bos_id >= vocab_size) return InvalidArgument("bos_id: outside the vocabulary");
  if (eos_id >= vocab_size) return InvalidArgument("eos_id: outside the vocabulary");
  return Status::Ok();
}

Result<ModelConfig> ModelConfigFromGguf(const GgufFile& f) {
  ModelConfig c;
  PAGODA_RETURN_IF_ERROR(ReadArchitecture(f, &c));
  const std::string a = c.architecture + ".";
  constexpr int64_t kMaxDim = 1 << 20;
  PAGODA_RETURN_IF_ERROR(ReadDim(f, a + "embedding_length", &c.n_embd, true, kMaxDim));
  PAGODA_RETURN_IF_ERROR(ReadDim(f, a + "block_count", &c.n_layers, true, 4096));
  PAGODA_RETURN_IF_ERROR(ReadDim(f, a + "feed_forward_length", &c.n_ff, true, kMaxDim));
  PAGODA_RETURN_IF_ERROR(ReadDim(f, a + "attention.head_count", &c.n_heads, true, 4096));
  c.n_kv_heads = c.n_heads;
  PAGODA_RETURN_IF_ERROR(ReadDim(f, a + "attention.head_count_kv", &c.n_kv_heads, false, 4096));
  PAGODA_RETURN_IF_ERROR(ReadDim(f, a + "context_length", &c.context_length, true, 1 << 24));
  c.head_dim = c.n_embd / c.n_heads;
  PAGODA_RETURN_IF_ERROR(ReadDim(f, a + "attention.key_length", &c.head_dim, false, 4096));
  c.rope_dim = c.head_dim;
  PAGODA_RETURN_IF_ERROR(ReadDim(f, a + "rope.dimension_count", &c.rope_dim, false, 4096));
  PAGODA_RETURN_IF_ERROR(ReadOptionalFloat(f, a + "rope.freq_base", &c.rope_theta));
  PAGODA_RETURN_IF_ERROR(ReadOptionalFloat(f, a + "attention.layer_norm_rms_epsilon", &c.rms_eps));

  const GgufTensor* embd = f.FindTensor("token_embd.weight");
  if (!embd || embd->ne.size() != 2) {
    return InvalidArgument("tensor 'token_embd.weight': missing or not 2-D");
  }
  if (embd->ne[1] > std::numeric_limits<int32_t>::max()) {
    return InvalidArgument("tensor 'token_embd.weight': vocabulary too large");
  }
  c.vocab_size = static_cast<int32_t>(embd->ne[1]);
  c.tied_embeddings = f.FindTensor("output.weight") == nullptr;
  PAGODA_RETURN_IF_ERROR(ReadOptionalTokenId(f, "tokenizer.ggml.bos_token_id", &c.bos_id));
  PAGODA_RETURN_IF_ERROR(ReadOptionalTokenId(f, "tokenizer.ggml.eos_token_id", &c.eos_id));
  PAGODA_RETURN_IF_ERROR(c.Validate());
  return c;
}

}  // namespace pagoda
