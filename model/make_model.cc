#include "model/make_model.h"

#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <tuple>

#include "common/mapped_file.h"
#include "model/gguf.h"
#include "model/gguf_writer.h"
#include "model/model_config.h"
#include "model/quantize.h"
#include "model/safetensors.h"
#include "model/tokenizer/sentencepiece_model.h"

namespace pagoda {
namespace {

// SplitMix64: a tiny, high-quality seeded generator; one stream per (tensor, row).
struct SplitMix64 {
  uint64_t state;
  uint64_t Next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
  // Standard normal via Box-Muller.
  float Normal() {
    const double u1 = std::max(Uniform(), 1e-300);
    const double u2 = Uniform();
    return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2));
  }
};

uint64_t HashName(const std::string& s, uint64_t seed) {
  uint64_t h = 1469598103934665603ull ^ seed;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// The vocabulary written into the model: either GGUF tokenizer keys copied verbatim, or
// explicit SentencePiece-style arrays.
struct VocabSource {
  std::unique_ptr<GgufFile> gguf;  // when copying from a GGUF
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;
  int32_t bos = 1, eos = 2, unk = 0;
  int64_t size() const;
};

// Output-row scales: 0.1 for control, unknown and byte tokens, so a random model rarely emits
// them (its text then stays readable), 1 for the others.
std::vector<float> OutputRowScales(const VocabSource& v) {
  std::vector<int64_t> types(v.types.begin(), v.types.end());
  if (v.gguf) {
    if (const GgufValue* t = v.gguf->FindArray("tokenizer.ggml.token_type")) types = t->arr_i;
  }
  std::vector<float> scales(static_cast<size_t>(v.size()), 1.0f);
  for (size_t i = 0; i < std::min(types.size(), scales.size()); ++i) {
    if (types[i] == 2 || types[i] == 3 || types[i] == 6) scales[i] = 0.1f;
  }
  return scales;
}

int64_t VocabSource::size() const {
  if (gguf) {
    const GgufValue* t = gguf->FindArray("tokenizer.ggml.tokens");
    return t ? static_cast<int64_t>(t->array_size()) : 0;
  }
  return static_cast<int64_t>(tokens.size());
}

// <unk>, <s>, </s>, the 256 byte tokens, "▁" and the printable ASCII characters.
VocabSource BuiltinVocab() {
  VocabSource v;
  auto add = [&](std::string piece, float score, int32_t type) {
    v.tokens.push_back(std::move(piece));
    v.scores.push_back(score);
    v.types.push_back(type);
  };
  add("<unk>", 0.0f, 2);
  add("<s>", 0.0f, 3);
  add("</s>", 0.0f, 3);
  static const char* kHex = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) add(std::string("<0x") + kHex[b >> 4] + kHex[b & 15] + ">", 0, 6);
  add("\xE2\x96\x81", -1.0f, 1);
  for (int c = 0x21; c < 0x7f; ++c) add(std::string(1, static_cast<char>(c)), -2.0f - c, 1);
  return v;
}

Result<VocabSource> LoadVocab(const std::string& path) {
  if (path.empty()) return BuiltinVocab();
  auto gguf = GgufFile::Open(path);
  if (gguf.ok()) {
    VocabSource v;
    v.gguf = std::move(gguf).value();
    if (!v.gguf->FindArray("tokenizer.ggml.tokens")) {
      return InvalidArgument(path + ": no tokenizer.ggml.tokens array to copy the vocabulary from");
    }
    return v;
  }
  auto spm = LoadSentencePieceModel(path);
  if (!spm.ok()) {
    return InvalidArgument("--vocab-from " + path + ": neither a GGUF (" + gguf.status().message() +
                           ") nor a SentencePiece model (" + spm.status().message() + ")");
  }
  VocabSource v;
  v.tokens = spm->pieces;
  v.scores = spm->scores;
  for (TokenKind k : spm->kinds) v.types.push_back(static_cast<int32_t>(k));
  v.bos = spm->bos_id;
  v.eos = spm->eos_id;
  v.unk = spm->unk_id;
  return v;
}

// --control-tokens: appended to a SentencePiece-style vocabulary as control tokens.
Status AddControlTokens(const std::vector<std::string>& tokens, VocabSource* v) {
  if (tokens.empty()) return Status::Ok();
  if (v->gguf) return InvalidArgument("--control-tokens: not with a GGUF --vocab-from");
  for (const std::string& t : tokens) {
    if (t.empty() || std::find(v->tokens.begin(), v->tokens.end(), t) != v->tokens.end()) {
      return InvalidArgument("--control-tokens: '" + t + "' is empty or already a token");
    }
    v->tokens.push_back(t);
    v->scores.push_back(0.0f);
    v->types.push_back(static_cast<int32_t>(TokenKind::kControl));
  }
  return Status::Ok();
}

// --chat-template and --eot-token: tokenizer.chat_template and tokenizer.ggml.eot_token_id.
Status WriteChatKeys(const MakeModelOptions& o, const VocabSource& v, GgufWriter& w) {
  if (!o.chat_template_file.empty()) {
    PAGODA_ASSIGN_OR_RETURN(std::string text, ReadSmallFile(o.chat_template_file, 16 << 20));
    w.AddString("tokenizer.chat_template", text);
  }
  if (o.eot_token.empty()) return Status::Ok();
  const GgufValue* copied = v.gguf ? v.gguf->FindArray("tokenizer.ggml.tokens") : nullptr;
  const std::vector<std::string>& tokens = copied ? copied->arr_str : v.tokens;
  const auto it = std::find(tokens.begin(), tokens.end(), o.eot_token);
  if (it == tokens.end()) return InvalidArgument("--eot-token: '" + o.eot_token + "' is no token");
  w.AddUint32("tokenizer.ggml.eot_token_id", static_cast<uint32_t>(it - tokens.begin()));
  return Status::Ok();
}

void WriteVocab(const VocabSource& v, const MakeModelOptions& o, GgufWriter& w) {
  if (v.gguf) {
    for (const auto& [key, value] : v.gguf->metadata()) {
      const bool replaced = (key == "tokenizer.chat_template" && !o.chat_template_file.empty()) ||
                            (key == "tokenizer.ggml.eot_token_id" && !o.eot_token.empty());
      if (key.rfind("tokenizer.", 0) == 0 && !replaced) w.AddValue(key, value);
    }
    return;
  }
  w.AddString("tokenizer.ggml.model", "llama");
  w.AddStringArray("tokenizer.ggml.tokens", v.tokens);
  w.AddFloat32Array("tokenizer.ggml.scores", v.scores);
  w.AddInt32Array("tokenizer.ggml.token_type", v.types);
  w.AddUint32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(v.bos));
  w.AddUint32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(v.eos));
  w.AddUint32("tokenizer.ggml.unknown_token_id", static_cast<uint32_t>(v.unk));
  w.AddBool("tokenizer.ggml.add_bos_token", true);
  w.AddBool("tokenizer.ggml.add_eos_token", false);
}

// general.file_type of a dtype written uniformly (those with a quantization mix take
// QuantMixFileType of their mix).
uint32_t FileType(GgmlType t) {
  switch (t) {
    case GgmlType::kF16:
      return 1;
    case GgmlType::kBF16:
      return 32;
    case GgmlType::kQ4_1:
      return 3;
    case GgmlType::kQ5_1:
      return 9;
    default:
      return 0;
  }
}

// Random [rows][cols] matrix, N(0, stddev) (or uniform [lo, hi) when lo < hi), stored as `type`.
std::vector<uint8_t> RandomTensor(const std::string& name, uint64_t seed, int64_t rows,
                                  int64_t cols, GgmlType type, float stddev, float lo = 0,
                                  float hi = 0, std::span<const float> row_scale = {}) {
  const int64_t row_bytes = *RowBytes(type, cols);
  std::vector<uint8_t> data(static_cast<size_t>(rows * row_bytes));
  const uint64_t base = HashName(name, seed);
  tbb::parallel_for(int64_t{0}, rows, [&](int64_t r) {
    SplitMix64 rng{base + static_cast<uint64_t>(r) * 0x632be59bd9b4e019ull};
    std::vector<float> row(static_cast<size_t>(cols));
    const float sd = row_scale.empty() ? stddev : stddev * row_scale[r];
    for (auto& x : row) {
      x = lo < hi ? lo + (hi - lo) * static_cast<float>(rng.Uniform()) : sd * rng.Normal();
    }
    QuantizeRow(type, row.data(), data.data() + r * row_bytes, cols);
  });
  return data;
}

}  // namespace

namespace {
Status MakeHfModel(const MakeModelOptions& o, const std::function<void(int64_t, int64_t)>& p);
}  // namespace

Result<ModelShape> PresetShape(const std::string& preset) {
  // n_embd, n_layers, n_heads, n_kv_heads, n_ff, context, rope theta, tied, head_dim (0: derived)
  if (preset == "tiny") return ModelShape{256, 4, 8, 2, 768, 1024, 10000.0f, false, 0};
  if (preset == "small") return ModelShape{576, 30, 9, 3, 1536, 2048, 100000.0f, true, 0};
  if (preset == "medium") return ModelShape{2048, 22, 32, 4, 5632, 2048, 10000.0f, false, 0};
  return InvalidArgument("--preset: '" + preset + "' (expected tiny, small or medium)");
}

Result<RopeScalingSpec> ParseRopeScalingSpec(std::string_view text) {
  const std::string t(text);
  const auto bad = [&](const std::string& why) {
    return InvalidArgument("--rope-scaling: '" + t + "': " + why +
                           " (expected none, linear:F or llama3:F[,LOW,HIGH[,ORIGINAL_CONTEXT]])");
  };
  RopeScalingSpec spec;
  if (t.empty() || t == "none") return spec;
  const size_t colon = t.find(':');
  const std::string kind = t.substr(0, colon);
  if (kind != "linear" && kind != "llama3") return bad("unknown type");
  if (colon == std::string::npos) return bad("missing factor");
  std::vector<double> v;
  const std::string rest = t.substr(colon + 1);
  for (size_t pos = 0; pos <= rest.size();) {
    const size_t comma = std::min(rest.find(',', pos), rest.size());
    const std::string item = rest.substr(pos, comma - pos);
    char* end = nullptr;
    const double x = std::strtod(item.c_str(), &end);
    if (item.empty() || end != item.c_str() + item.size() || !(x > 0.0) || x > 1e9) {
      return bad("'" + item + "' is not a positive number");
    }
    v.push_back(x);
    pos = comma + 1;
  }
  const bool count_ok =
      kind == "linear" ? v.size() == 1 : (v.size() == 1 || v.size() == 3 || v.size() == 4);
  if (!count_ok) return bad("wrong number of values");
  spec.type = kind == "linear" ? RopeScaling::kLinear : RopeScaling::kLlama3;
  spec.factor = static_cast<float>(v[0]);
  if (v.size() >= 3) {
    spec.low_freq_factor = static_cast<float>(v[1]);
    spec.high_freq_factor = static_cast<float>(v[2]);
  }
  if (v.size() == 4) spec.original_context = static_cast<int32_t>(v[3]);
  if (!(spec.high_freq_factor > spec.low_freq_factor)) return bad("HIGH must exceed LOW");
  return spec;
}

namespace {

// The preset with the option overrides, checked.
Result<ModelShape> ResolveShape(const MakeModelOptions& o) {
  PAGODA_ASSIGN_OR_RETURN(ModelShape s, PresetShape(o.preset));
  if (o.n_layers > 0) s.n_layers = o.n_layers;
  if (o.context_length > 0) s.context_length = o.context_length;
  s.head_dim = o.head_dim > 0 ? o.head_dim : s.n_embd / s.n_heads;
  if (s.head_dim % 2 != 0) return InvalidArgument("--head-dim: must be even");
  if (o.arch != "llama" && o.arch != "qwen2" && o.arch != "qwen3") {
    return InvalidArgument("--arch: '" + o.arch + "' (expected llama, qwen2 or qwen3)");
  }
  if (!CanQuantize(o.dtype)) {
    return InvalidArgument(std::string("--dtype: ") + TypeName(o.dtype) +
                           " cannot be written (expected f32, f16, bf16, q8_0, q4_0 or q4_k_m)");
  }
  return s;
}

// llama.cpp's rope_freqs.weight for Llama 3 scaling: per dim pair, the divisor of the inverse
// frequency (convert_hf_to_gguf.py LlamaModel.generate_extra_tensors).
std::vector<float> Llama3FreqFactors(const RopeScalingSpec& r, float theta, int32_t dim,
                                     int32_t context) {
  const double orig = r.original_context > 0 ? r.original_context : context;
  std::vector<float> factors;
  for (int32_t i = 0; i < dim / 2; ++i) {
    const double freq = 1.0 / std::pow(static_cast<double>(theta), 2.0 * i / dim);
    const Llama3RopeBand band =
        Llama3RopeBandOf(2.0 * M_PI / freq, orig, r.low_freq_factor, r.high_freq_factor);
    if (band.kind == Llama3RopeBand::kKeep) {
      factors.push_back(1.0f);
    } else if (band.kind == Llama3RopeBand::kScale) {
      factors.push_back(r.factor);
    } else {
      factors.push_back(static_cast<float>(1.0 / ((1.0 - band.smooth) / r.factor + band.smooth)));
    }
  }
  return factors;
}

void WriteModelMetadata(const MakeModelOptions& o, const ModelShape& s, int64_t n_vocab,
                        uint32_t file_type, GgufWriter& w) {
  const std::string a = o.arch + ".";
  w.AddString("general.architecture", o.arch);
  w.AddString("general.name",
              "pagoda-synthetic-" + o.preset + (o.arch == "llama" ? "" : "-" + o.arch));
  w.AddUint32("general.file_type", file_type);
  w.AddUint32("general.quantization_version", 2);
  w.AddUint32(a + "context_length", static_cast<uint32_t>(s.context_length));
  w.AddUint32(a + "embedding_length", static_cast<uint32_t>(s.n_embd));
  w.AddUint32(a + "block_count", static_cast<uint32_t>(s.n_layers));
  w.AddUint32(a + "feed_forward_length", static_cast<uint32_t>(s.n_ff));
  w.AddUint32(a + "attention.head_count", static_cast<uint32_t>(s.n_heads));
  w.AddUint32(a + "attention.head_count_kv", static_cast<uint32_t>(s.n_kv_heads));
  if (o.arch == "qwen3" || s.head_dim * s.n_heads != s.n_embd) {
    w.AddUint32(a + "attention.key_length", static_cast<uint32_t>(s.head_dim));
    w.AddUint32(a + "attention.value_length", static_cast<uint32_t>(s.head_dim));
  }
  w.AddUint32(a + "rope.dimension_count", static_cast<uint32_t>(s.head_dim));
  w.AddFloat32(a + "rope.freq_base", s.rope_theta);
  if (o.rope_scaling.type == RopeScaling::kLinear) {
    w.AddString(a + "rope.scaling.type", "linear");
    w.AddFloat32(a + "rope.scaling.factor", o.rope_scaling.factor);
  }
  w.AddFloat32(a + "attention.layer_norm_rms_epsilon", 1e-5f);
  w.AddUint32(a + "vocab_size", static_cast<uint32_t>(n_vocab));
}

// Generates and adds the random tensors, counting progress.
struct TensorAdder {
  const MakeModelOptions& o;
  const ModelShape& s;
  const std::optional<QuantMix>& mix;
  const std::vector<float>& output_scales;
  const std::function<void(int64_t, int64_t)>& progress;
  GgufWriter& w;
  int64_t total = 0, done = 0;

  void Tick() {
    if (progress) progress(++done, total);
  }
  // A [rows][cols] tensor (1-D when rows == 1) of N(0, stddev), or U[lo, hi) when lo < hi.
  Status Add(const std::string& name, int64_t rows, int64_t cols, GgmlType type, float stddev,
             float lo = 0, float hi = 0) {
    const bool is_output =
        name == "output.weight" || (s.tied_embeddings && name == "token_embd.weight");
    std::vector<int64_t> ne = rows == 1 ? std::vector<int64_t>{cols} : std::vector{cols, rows};
    if (mix) type = TensorTypeForMix(*mix, name, ne, MixContext{s.n_layers, !s.tied_embeddings});
    auto data =
        RandomTensor(name, o.seed, rows, cols, type, stddev, lo, hi,
                     is_output ? std::span<const float>(output_scales) : std::span<const float>());
    PAGODA_RETURN_IF_ERROR(w.AddTensor(name, type, std::move(ne), std::move(data)));
    Tick();
    return Status::Ok();
  }
  Status AddLayer(int l);
};

Status TensorAdder::AddLayer(int l) {
  const std::string p = "blk." + std::to_string(l) + ".";
  const auto f32 = GgmlType::kF32;
  const GgmlType t = o.dtype;
  const float in_std = 1.0f / std::sqrt(static_cast<float>(s.n_embd));
  const int64_t q_dim = int64_t{s.head_dim} * s.n_heads,
                kv_dim = int64_t{s.head_dim} * s.n_kv_heads;
  PAGODA_RETURN_IF_ERROR(Add(p + "attn_norm.weight", 1, s.n_embd, f32, 0, 0.5f, 1.5f));
  PAGODA_RETURN_IF_ERROR(Add(p + "attn_q.weight", q_dim, s.n_embd, t, 1.3f * in_std));
  PAGODA_RETURN_IF_ERROR(Add(p + "attn_k.weight", kv_dim, s.n_embd, t, 1.3f * in_std));
  PAGODA_RETURN_IF_ERROR(Add(p + "attn_v.weight", kv_dim, s.n_embd, t, in_std));
  if (o.arch == "qwen2") {
    PAGODA_RETURN_IF_ERROR(Add(p + "attn_q.bias", 1, q_dim, f32, 0.5f));
    PAGODA_RETURN_IF_ERROR(Add(p + "attn_k.bias", 1, kv_dim, f32, 0.5f));
    PAGODA_RETURN_IF_ERROR(Add(p + "attn_v.bias", 1, kv_dim, f32, 0.5f));
  }
  if (o.arch == "qwen3") {
    PAGODA_RETURN_IF_ERROR(Add(p + "attn_q_norm.weight", 1, s.head_dim, f32, 0, 0.5f, 1.5f));
    PAGODA_RETURN_IF_ERROR(Add(p + "attn_k_norm.weight", 1, s.head_dim, f32, 0, 0.5f, 1.5f));
  }
  PAGODA_RETURN_IF_ERROR(Add(p + "attn_output.weight", s.n_embd, q_dim, t,
                             1.0f / std::sqrt(static_cast<float>(q_dim))));
  PAGODA_RETURN_IF_ERROR(Add(p + "ffn_norm.weight", 1, s.n_embd, f32, 0, 0.5f, 1.5f));
  PAGODA_RETURN_IF_ERROR(Add(p + "ffn_gate.weight", s.n_ff, s.n_embd, t, in_std));
  PAGODA_RETURN_IF_ERROR(Add(p + "ffn_up.weight", s.n_ff, s.n_embd, t, in_std));
  return Add(p + "ffn_down.weight", s.n_embd, s.n_ff, t,
             1.0f / std::sqrt(static_cast<float>(s.n_ff)));
}

int64_t TensorsPerLayer(const std::string& arch) {
  return 9 + (arch == "qwen2" ? 3 : 0) + (arch == "qwen3" ? 2 : 0);
}

}  // namespace

Status MakeModel(const MakeModelOptions& o, const std::function<void(int64_t, int64_t)>& progress) {
  if (o.format == "safetensors") return MakeHfModel(o, progress);  // see GgufToHfDirectory
  PAGODA_ASSIGN_OR_RETURN(ModelShape s, ResolveShape(o));
  // Quantized dtypes follow `pagoda quantize`'s mix (Q4_K selects Q4_K_M), whose per-tensor
  // fallback handles rows that are not a multiple of the block size.
  const std::optional<QuantMix> mix = MixForDtype(o.dtype);
  if (!mix &&
      (s.n_embd % TypeTraits(o.dtype).block_size || s.n_ff % TypeTraits(o.dtype).block_size)) {
    return InvalidArgument("--dtype: the preset's dims are not a multiple of the block size");
  }
  PAGODA_ASSIGN_OR_RETURN(VocabSource vocab, LoadVocab(o.vocab_from));
  PAGODA_RETURN_IF_ERROR(AddControlTokens(o.control_tokens, &vocab));
  const int64_t n_vocab = vocab.size();
  GgufWriter w;
  WriteModelMetadata(o, s, n_vocab, mix ? QuantMixFileType(*mix) : FileType(o.dtype), w);
  WriteVocab(vocab, o, w);
  PAGODA_RETURN_IF_ERROR(WriteChatKeys(o, vocab, w));

  const std::vector<float> output_scales = OutputRowScales(vocab);
  TensorAdder add{
      o, s, mix, output_scales, progress, w, 3 + TensorsPerLayer(o.arch) * int64_t{s.n_layers}, 0};
  const float in_std = 1.0f / std::sqrt(static_cast<float>(s.n_embd));
  PAGODA_RETURN_IF_ERROR(add.Add("token_embd.weight", n_vocab, s.n_embd, o.dtype, 1.0f));
  PAGODA_RETURN_IF_ERROR(add.Add("output_norm.weight", 1, s.n_embd, GgmlType::kF32, 0, 0.5f, 1.5f));
  if (!s.tied_embeddings) {
    PAGODA_RETURN_IF_ERROR(add.Add("output.weight", n_vocab, s.n_embd, o.dtype, 2.5f * in_std));
  } else {
    add.Tick();
  }
  if (o.rope_scaling.type == RopeScaling::kLlama3) {
    const std::vector<float> f =
        Llama3FreqFactors(o.rope_scaling, s.rope_theta, s.head_dim, s.context_length);
    std::vector<uint8_t> bytes(f.size() * 4);
    std::memcpy(bytes.data(), f.data(), bytes.size());
    PAGODA_RETURN_IF_ERROR(w.AddTensor("rope_freqs.weight", GgmlType::kF32,
                                       {static_cast<int64_t>(f.size())}, std::move(bytes)));
  }
  for (int l = 0; l < s.n_layers; ++l) PAGODA_RETURN_IF_ERROR(add.AddLayer(l));
  return w.Write(o.output);
}

// ---- Hugging Face directory output (`--format safetensors`) ----
namespace {

void PutVarint(std::string* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}
void PutTag(std::string* out, uint32_t field, uint32_t wire) { PutVarint(out, field << 3 | wire); }
void PutInt(std::string* out, uint32_t field, int64_t v) {
  PutTag(out, field, 0);
  PutVarint(out, static_cast<uint64_t>(v));
}
void PutBytes(std::string* out, uint32_t field, std::string_view s) {
  PutTag(out, field, 2);
  PutVarint(out, s.size());
  out->append(s);
}

int64_t GgufIntOr(const GgufFile& f, std::string_view key, int64_t def) {
  auto v = f.GetInt(key);
  return v.ok() ? *v : def;
}

// A SentencePiece ModelProto (BPE) for a GGUF `llama` vocabulary: the inverse of
// ParseSentencePieceModel (model/tokenizer/sentencepiece_model.h).
Result<std::string> SentencePieceFromGguf(const GgufFile& f) {
  const GgufValue* tokens = f.FindArray("tokenizer.ggml.tokens");
  const GgufValue* scores = f.FindArray("tokenizer.ggml.scores");
  const GgufValue* types = f.FindArray("tokenizer.ggml.token_type");
  if (!tokens || tokens->elem_type != GgufType::kString) {
    return InvalidArgument("metadata 'tokenizer.ggml.tokens': missing or not a string array");
  }
  const size_t n = tokens->arr_str.size();
  std::string out;
  bool has_bytes = false;
  for (size_t i = 0; i < n; ++i) {
    std::string piece;
    PutBytes(&piece, 1, tokens->arr_str[i]);
    const float score =
        scores && i < scores->arr_f.size() ? static_cast<float>(scores->arr_f[i]) : 0;
    uint32_t bits = 0;
    std::memcpy(&bits, &score, 4);
    PutTag(&piece, 2, 5);
    for (int b = 0; b < 4; ++b) piece.push_back(static_cast<char>(bits >> (8 * b)));
    const int64_t type = types && i < types->arr_i.size() ? types->arr_i[i] : 1;
    has_bytes |= type == 6;
    PutInt(&piece, 3, type);
    PutBytes(&out, 1, piece);
  }
  std::string trainer;
  PutInt(&trainer, 3, 2);  // model_type = BPE
  PutInt(&trainer, 35, has_bytes ? 1 : 0);
  PutInt(&trainer, 40, GgufIntOr(f, "tokenizer.ggml.unknown_token_id", 0));
  PutInt(&trainer, 41, GgufIntOr(f, "tokenizer.ggml.bos_token_id", 1));
  PutInt(&trainer, 42, GgufIntOr(f, "tokenizer.ggml.eos_token_id", 2));
  PutBytes(&out, 2, trainer);
  std::string normalizer;
  PutBytes(&normalizer, 1, "identity");
  auto dummy = f.GetBool("tokenizer.ggml.add_space_prefix");
  PutInt(&normalizer, 3, dummy.ok() ? *dummy : 1);
  auto extra = f.GetBool("tokenizer.ggml.remove_extra_whitespaces");
  PutInt(&normalizer, 4, extra.ok() ? *extra : 0);
  PutInt(&normalizer, 5, 1);
  PutBytes(&out, 3, normalizer);
  return out;
}

Status WriteTextFile(const std::string& path, std::string_view text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return NotFound(path + ": cannot create");
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  return out.flush() ? Status::Ok() : DataLoss(path + ": write failed");
}

// The HF [rows][cols] bytes of a GGUF tensor. Q and K rows (`n_head` heads) are put back from
// GGUF's interleaved RoPE layout into HF's halves layout: the inverse of llama.cpp
// convert_hf_to_gguf.py's permute(), i.e. hf[h*hd + j*hd/2 + i] = gguf[h*hd + 2*i + j].
Result<SafetensorsWriteTensor> HfTensor(const GgufTensor& t, const std::string& hf_name,
                                        int64_t n_head) {
  SafetensorsWriteTensor out;
  out.name = hf_name;
  if (t.type == GgmlType::kF32 || t.type == GgmlType::kF16 || t.type == GgmlType::kBF16) {
    out.dtype = TypeName(t.type);
  } else {
    return Unimplemented("tensor '" + t.name + "': type " + TypeName(t.type) +
                         " cannot be written to safetensors (expected f32, f16 or bf16)");
  }
  out.shape.assign(t.ne.rbegin(), t.ne.rend());
  out.data.assign(t.data, t.data + t.nbytes);
  if (n_head == 0) return out;
  const int64_t rows = t.ne[1], row_bytes = static_cast<int64_t>(t.nbytes) / rows;
  const int64_t hd = rows / n_head;
  if (rows % n_head != 0 || hd % 2 != 0) {
    return InvalidArgument("tensor '" + t.name + "': rows do not split into even-sized heads");
  }
  for (int64_t h = 0; h < n_head; ++h) {
    for (int64_t i = 0; i < hd / 2; ++i) {
      for (int64_t j = 0; j < 2; ++j) {
        std::memcpy(out.data.data() + (h * hd + j * hd / 2 + i) * row_bytes,
                    t.data + (h * hd + 2 * i + j) * row_bytes, static_cast<size_t>(row_bytes));
      }
    }
  }
  return out;
}

// (GGUF name, HF name, heads to un-permute or 0) of every tensor of the model.
std::vector<std::tuple<std::string, std::string, int64_t>> HfTensorNames(const GgufFile& f,
                                                                         const ModelConfig& c) {
  std::vector<std::tuple<std::string, std::string, int64_t>> names = {
      {"token_embd.weight", "model.embed_tokens.weight", 0},
      {"output_norm.weight", "model.norm.weight", 0}};
  if (f.FindTensor("output.weight")) names.emplace_back("output.weight", "lm_head.weight", 0);
  const bool permute = c.rope_layout == RopeLayout::kInterleaved;
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const std::string g = "blk." + std::to_string(l) + ".";
    const std::string h = "model.layers." + std::to_string(l) + ".";
    names.emplace_back(g + "attn_norm.weight", h + "input_layernorm.weight", 0);
    names.emplace_back(g + "attn_q.weight", h + "self_attn.q_proj.weight", permute ? c.n_heads : 0);
    names.emplace_back(g + "attn_k.weight", h + "self_attn.k_proj.weight",
                       permute ? c.n_kv_heads : 0);
    names.emplace_back(g + "attn_v.weight", h + "self_attn.v_proj.weight", 0);
    if (c.has_qkv_bias) {
      for (const char* x : {"q", "k", "v"}) {
        names.emplace_back(g + "attn_" + x + ".bias", h + "self_attn." + x + "_proj.bias", 0);
      }
    }
    if (c.has_qk_norm) {
      names.emplace_back(g + "attn_q_norm.weight", h + "self_attn.q_norm.weight", 0);
      names.emplace_back(g + "attn_k_norm.weight", h + "self_attn.k_norm.weight", 0);
    }
    names.emplace_back(g + "attn_output.weight", h + "self_attn.o_proj.weight", 0);
    names.emplace_back(g + "ffn_norm.weight", h + "post_attention_layernorm.weight", 0);
    names.emplace_back(g + "ffn_gate.weight", h + "mlp.gate_proj.weight", 0);
    names.emplace_back(g + "ffn_up.weight", h + "mlp.up_proj.weight", 0);
    names.emplace_back(g + "ffn_down.weight", h + "mlp.down_proj.weight", 0);
  }
  return names;
}

Result<std::vector<SafetensorsWriteTensor>> HfTensors(const GgufFile& f, const ModelConfig& c) {
  std::vector<SafetensorsWriteTensor> out;
  for (const auto& [gguf_name, hf_name, heads] : HfTensorNames(f, c)) {
    const GgufTensor* t = f.FindTensor(gguf_name);
    if (!t) return InvalidArgument("tensor '" + gguf_name + "' is missing");
    PAGODA_ASSIGN_OR_RETURN(auto st, HfTensor(*t, hf_name, heads));
    out.push_back(std::move(st));
  }
  return out;
}

// config.json "rope_scaling" for the GGUF's scaling (llama3: the parameters in `llama3`).
Result<nlohmann::json> HfRopeScalingJson(const ModelConfig& c, const RopeScalingSpec& llama3) {
  if (c.rope_scaling == RopeScaling::kLinear) {
    return nlohmann::json{
        {"rope_type", "linear"}, {"type", "linear"}, {"factor", c.rope_scaling_factor}};
  }
  if (c.rope_scaling != RopeScaling::kLlama3) return nlohmann::json();
  if (llama3.type != RopeScaling::kLlama3) {
    return Unimplemented(
        "tensor 'rope_freqs.weight': llama3 RoPE scaling cannot be written to config.json "
        "without its parameters (factor, low/high_freq_factor, original context)");
  }
  return nlohmann::json{{"rope_type", "llama3"},
                        {"factor", llama3.factor},
                        {"low_freq_factor", llama3.low_freq_factor},
                        {"high_freq_factor", llama3.high_freq_factor},
                        {"original_max_position_embeddings",
                         llama3.original_context > 0 ? llama3.original_context : c.context_length}};
}

Result<nlohmann::json> HfConfigJson(const ModelConfig& c, const RopeScalingSpec& llama3) {
  const std::string hf_arch = c.architecture == "qwen2"   ? "Qwen2ForCausalLM"
                              : c.architecture == "qwen3" ? "Qwen3ForCausalLM"
                                                          : "LlamaForCausalLM";
  nlohmann::json j = {{"architectures", {hf_arch}},
                      {"model_type", c.architecture},
                      {"hidden_act", "silu"},
                      {"hidden_size", c.n_embd},
                      {"intermediate_size", c.n_ff},
                      {"num_attention_heads", c.n_heads},
                      {"num_hidden_layers", c.n_layers},
                      {"num_key_value_heads", c.n_kv_heads},
                      {"head_dim", c.head_dim},
                      {"max_position_embeddings", c.context_length},
                      {"rms_norm_eps", c.rms_eps},
                      {"rope_theta", c.rope_theta},
                      {"vocab_size", c.vocab_size},
                      {"tie_word_embeddings", c.tied_embeddings}};
  if (c.architecture == "qwen3") j["attention_bias"] = false;
  PAGODA_ASSIGN_OR_RETURN(j["rope_scaling"], HfRopeScalingJson(c, llama3));
  if (c.bos_id >= 0) j["bos_token_id"] = c.bos_id;
  if (c.eos_id >= 0) j["eos_token_id"] = c.eos_id;
  return j;
}

// Whether `path` starts with the GGUF magic.
bool HasGgufMagic(const std::string& path) {
  char magic[4] = {};
  std::ifstream in(path, std::ios::binary);
  return in.read(magic, 4) && std::string_view(magic, 4) == "GGUF";
}

// GgufToHfDirectory, with tokenizer.model copied from `tokenizer_model_from` (a SentencePiece
// model file) instead of built from the GGUF's vocabulary when that is not empty.
Status WriteHfDirectory(const GgufFile& f, const std::string& dir, const RopeScalingSpec& llama3,
                        const std::string& tokenizer_model_from) {
  PAGODA_ASSIGN_OR_RETURN(ModelConfig c, ModelConfigFromGguf(f));
  if (c.rope_dim != c.head_dim) {
    return Unimplemented("only GGUFs with full-head RoPE can be converted to safetensors");
  }
  auto tok_model = f.GetString("tokenizer.ggml.model");
  if (!tok_model.ok() || *tok_model != "llama") {
    return Unimplemented(
        "metadata 'tokenizer.ggml.model': only SentencePiece (llama) "
        "vocabularies can be written as an HF tokenizer (pass a tokenizer.model "
        "or SentencePiece GGUF as --vocab-from)");
  }
  PAGODA_ASSIGN_OR_RETURN(nlohmann::json config_json, HfConfigJson(c, llama3));
  PAGODA_ASSIGN_OR_RETURN(auto tensors, HfTensors(f, c));
  PAGODA_RETURN_IF_ERROR(WriteSafetensors(dir + "/model.safetensors", tensors, {{"format", "pt"}}));
  PAGODA_RETURN_IF_ERROR(WriteTextFile(dir + "/config.json", config_json.dump(2)));
  if (tokenizer_model_from.empty()) {
    PAGODA_ASSIGN_OR_RETURN(std::string spm, SentencePieceFromGguf(f));
    PAGODA_RETURN_IF_ERROR(WriteTextFile(dir + "/tokenizer.model", spm));
  }
  const GgufValue* toks = f.FindArray("tokenizer.ggml.tokens");
  auto piece = [&](int32_t id) {
    return toks && id >= 0 && static_cast<size_t>(id) < toks->arr_str.size() ? toks->arr_str[id]
                                                                             : "";
  };
  auto add_bos = f.GetBool("tokenizer.ggml.add_bos_token");
  nlohmann::json tc = {{"add_bos_token", add_bos.ok() ? *add_bos : true},
                       {"bos_token", piece(c.bos_id)},
                       {"eos_token", piece(c.eos_id)}};
  if (auto t = f.GetString("tokenizer.chat_template"); t.ok()) tc["chat_template"] = *t;
  PAGODA_RETURN_IF_ERROR(WriteTextFile(dir + "/tokenizer_config.json", tc.dump(2)));
  if (tokenizer_model_from.empty()) return Status::Ok();
  std::error_code ec;
  std::filesystem::copy_file(tokenizer_model_from, dir + "/tokenizer.model",
                             std::filesystem::copy_options::overwrite_existing, ec);
  if (ec) {
    return NotFound("--vocab-from " + tokenizer_model_from + ": cannot copy: " + ec.message());
  }
  return Status::Ok();
}

Status MakeHfModel(const MakeModelOptions& o, const std::function<void(int64_t, int64_t)>& p) {
  if (o.dtype != GgmlType::kF32 && o.dtype != GgmlType::kF16 && o.dtype != GgmlType::kBF16) {
    return InvalidArgument(std::string("--dtype: ") + TypeName(o.dtype) +
                           " cannot be written to safetensors (expected f32, f16 or bf16)");
  }
  std::error_code ec;
  std::filesystem::create_directories(o.output, ec);
  if (ec) return NotFound("--output " + o.output + ": cannot create directory: " + ec.message());
  MakeModelOptions g = o;
  g.format = "gguf";
  g.output = o.output + "/.make-model.tmp.gguf";
  PAGODA_RETURN_IF_ERROR(MakeModel(g, p));
  // MakeModel read --vocab-from as a GGUF or else as a tokenizer.model (a protobuf, which cannot
  // start with "GGUF"); a tokenizer.model is copied verbatim.
  const std::string spm_from =
      !o.vocab_from.empty() && !HasGgufMagic(o.vocab_from) ? o.vocab_from : "";
  auto gguf = GgufFile::Open(g.output);
  Status st =
      gguf.ok() ? WriteHfDirectory(**gguf, o.output, o.rope_scaling, spm_from) : gguf.status();
  std::filesystem::remove(g.output, ec);
  return st;
}

}  // namespace

Status GgufToHfDirectory(const GgufFile& f, const std::string& dir, const RopeScalingSpec& llama3) {
  return WriteHfDirectory(f, dir, llama3, "");
}

}  // namespace pagoda
