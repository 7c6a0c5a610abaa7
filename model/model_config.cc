#include "model/model_config.h"

#include <algorithm>
#include <cmath>
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

// Stores the value `v` of metadata `key` into *out, requiring 0 < v <= 1e12.
Status SetPositiveFloat(const std::string& key, double v, float* out) {
  if (!(v > 0.0) || v > 1e12) {
    return InvalidArgument("metadata '" + key + "': " + std::to_string(v) +
                           " (expected a positive number)");
  }
  *out = static_cast<float>(v);
  return Status::Ok();
}

Status ReadOptionalFloat(const GgufFile& f, const std::string& key, float* out) {
  auto v = f.GetFloat(key);
  if (!v.ok()) return v.status().code() == StatusCode::kNotFound ? Status::Ok() : v.status();
  return SetPositiveFloat(key, *v, out);
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

// A RoPE scaling factor: absent or 0 leaves *out at 0; negative or huge is an error.
Status ReadScaleFactor(const GgufFile& f, const std::string& key, float* out) {
  auto v = f.GetFloat(key);
  if (!v.ok()) return v.status().code() == StatusCode::kNotFound ? Status::Ok() : v.status();
  if (*v == 0.0) return Status::Ok();
  return SetPositiveFloat(key, *v, out);
}

// rope_freqs.weight (llama.cpp's llama3 form): [rope_dim / 2] positive divisors.
Status ReadRopeFreqs(const GgufFile& f, ModelConfig* c) {
  const GgufTensor* t = f.FindTensor("rope_freqs.weight");
  if (!t) return Status::Ok();
  if (t->ne.size() != 1 || t->ne[0] != c->rope_dim / 2 || !TypeTraits(t->type).can_dequantize ||
      TypeTraits(t->type).block_size != 1) {
    return InvalidArgument("tensor 'rope_freqs.weight': shape " + t->ShapeString() + " type " +
                           TypeName(t->type) + " (expected [" + std::to_string(c->rope_dim / 2) +
                           "] F32, F16 or BF16)");
  }
  c->rope_freq_factors.resize(static_cast<size_t>(t->ne[0]));
  DequantizeRow(t->type, t->data, c->rope_freq_factors.data(), t->ne[0]);
  if (c->rope_scaling == RopeScaling::kNone) {
    c->rope_scaling = RopeScaling::kLlama3;
    c->rope_scaling_factor = 1.0f;
    for (float v : c->rope_freq_factors) {
      c->rope_scaling_factor = std::max(c->rope_scaling_factor, std::isfinite(v) ? v : 0.0f);
    }
  }
  return Status::Ok();
}

// {arch}.rope.scaling.type / .factor / .original_context_length, {arch}.rope.scale_linear.
Status ReadRopeScaling(const GgufFile& f, const std::string& a, ModelConfig* c) {
  const std::string type_key = a + "rope.scaling.type";
  auto type = f.GetString(type_key);
  if (!type.ok() && type.status().code() != StatusCode::kNotFound) return type.status();
  float factor = 0.0f;  // as llama.cpp: 0 or absent means no scaling
  PAGODA_RETURN_IF_ERROR(ReadScaleFactor(f, a + "rope.scaling.factor", &factor));
  if (factor == 0.0f) PAGODA_RETURN_IF_ERROR(ReadScaleFactor(f, a + "rope.scale_linear", &factor));
  PAGODA_RETURN_IF_ERROR(ReadDim(f, a + "rope.scaling.original_context_length",
                                 &c->rope_original_context, false, 1 << 24));
  const std::string t = type.ok() ? *type : (factor > 0.0f ? "linear" : "none");
  if (t == "linear" && factor > 0.0f && factor != 1.0f) {
    c->rope_scaling = RopeScaling::kLinear;
    c->rope_scaling_factor = factor;
  } else if (t != "none" && t != "linear") {
    return Unimplemented("metadata '" + type_key + "': '" + t +
                         "' is not supported (expected none or linear; llama3 scaling comes as "
                         "the rope_freqs.weight tensor)");
  }
  return ReadRopeFreqs(f, c);
}

}  // namespace

const char* RopeScalingName(RopeScaling scaling) {
  switch (scaling) {
    case RopeScaling::kLinear:
      return "linear";
    case RopeScaling::kLlama3:
      return "llama3";
    case RopeScaling::kNone:
      break;
  }
  return "none";
}

std::vector<double> RopeInvFreq(const ModelConfig& c) {
  const int32_t half = std::max(0, c.rope_dim / 2);
  std::vector<double> inv(static_cast<size_t>(half));
  for (int32_t i = 0; i < half; ++i) {
    inv[i] = std::pow(static_cast<double>(c.rope_theta), -2.0 * i / c.rope_dim);
  }
  if (!c.rope_freq_factors.empty() && static_cast<int32_t>(c.rope_freq_factors.size()) == half) {
    for (int32_t i = 0; i < half; ++i) inv[i] /= c.rope_freq_factors[i];
  } else if (c.rope_scaling == RopeScaling::kLlama3 && c.rope_original_context > 0) {
    const double factor = c.rope_scaling_factor, lo = c.rope_low_freq_factor;
    const double hi = c.rope_high_freq_factor, orig = c.rope_original_context;
    for (double& f : inv) {
      const Llama3RopeBand band = Llama3RopeBandOf(2.0 * M_PI / f, orig, lo, hi);
      if (band.kind == Llama3RopeBand::kScale) {
        f /= factor;
      } else if (band.kind == Llama3RopeBand::kSmooth) {
        f = (1.0 - band.smooth) * f / factor + band.smooth * f;
      }
    }
  }
  if (c.rope_scaling == RopeScaling::kLinear) {
    for (double& f : inv) f /= c.rope_scaling_factor;
  }
  return inv;
}

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
  PAGODA_RETURN_IF_ERROR(ValidateRopeScaling());
  if (bos_id >= vocab_size) return InvalidArgument("bos_id: outside the vocabulary");
  if (eos_id >= vocab_size) return InvalidArgument("eos_id: outside the vocabulary");
  return Status::Ok();
}

Status ModelConfig::ValidateRopeScaling() const {
  if (!rope_freq_factors.empty()) {
    if (static_cast<int32_t>(rope_freq_factors.size()) != rope_dim / 2) {
      return InvalidArgument("rope_freq_factors: " + std::to_string(rope_freq_factors.size()) +
                             " values (expected rope_dim / 2 = " + std::to_string(rope_dim / 2) +
                             ")");
    }
    for (float v : rope_freq_factors) {
      if (!(std::isfinite(v) && v > 0.0f)) {
        return InvalidArgument("rope_freq_factors: " + std::to_string(v) + " (expected > 0)");
      }
    }
  }
  if (rope_scaling == RopeScaling::kNone) return Status::Ok();
  if (!(std::isfinite(rope_scaling_factor) && rope_scaling_factor > 0.0f)) {
    return InvalidArgument("rope_scaling_factor: expected a positive number");
  }
  if (rope_scaling == RopeScaling::kLlama3 && rope_freq_factors.empty() &&
      (rope_original_context <= 0 || !(rope_low_freq_factor > 0.0f) ||
       !(rope_high_freq_factor > rope_low_freq_factor))) {
    return InvalidArgument(
        "llama3 rope scaling: needs rope_original_context > 0 and 0 < low_freq_factor < "
        "high_freq_factor (or rope_freq_factors)");
  }
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
  if (c.rope_dim <= c.head_dim && c.rope_dim % 2 == 0) {  // else Validate names rope_dim
    PAGODA_RETURN_IF_ERROR(ReadRopeScaling(f, a, &c));
  }

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
