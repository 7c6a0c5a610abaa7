#include "model/hf_model.h"

#include <sys/stat.h>

#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>

#include "common/json_depth.h"
#include "common/mapped_file.h"
#include "model/tokenizer/bpe_tokenizer.h"
#include "model/tokenizer/sentencepiece_model.h"
#include "model/tokenizer/spm_tokenizer.h"
#include "model/tokenizer/tokenizer_json.h"

namespace pagoda {
namespace {

using Json = nlohmann::json;

constexpr uint64_t kMaxJsonFileBytes = uint64_t{256} << 20;

bool FileExists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

Result<Json> ParseJsonText(std::string_view text, const std::string& what) {
  PAGODA_RETURN_IF_ERROR(CheckJsonDepth(text, what));
  try {
    Json j = Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) return InvalidArgument(what + ": not a JSON object");
    return j;
  } catch (const std::exception& e) {
    return InvalidArgument(what + ": " + e.what());
  }
}

// Reads `key` as an integer in [lo, hi]; absent or null keeps *out unless required.
Status GetInt(const Json& j, const char* key, bool required, int64_t lo, int64_t hi, int32_t* out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    return required ? InvalidArgument(std::string("config.json: ") + key + ": missing")
                    : Status::Ok();
  }
  if (!it->is_number_integer() ||
      (it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(hi)) ||
      it->get<int64_t>() < lo || it->get<int64_t>() > hi) {
    return InvalidArgument(std::string("config.json: ") + key + ": " + it->dump(-1).substr(0, 40) +
                           " (expected an integer in " + std::to_string(lo) + ".." +
                           std::to_string(hi) + ")");
  }
  *out = static_cast<int32_t>(it->get<int64_t>());
  return Status::Ok();
}

Status GetPositiveFloat(const Json& j, const char* key, const std::string& prefix, float* out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::Ok();
  if (!it->is_number() || !(it->get<double>() > 0.0) || it->get<double>() > 1e12) {
    return InvalidArgument(prefix + key + ": " + it->dump(-1).substr(0, 40) +
                           " (expected a positive number)");
  }
  *out = static_cast<float>(it->get<double>());
  return Status::Ok();
}

Result<bool> GetBool(const Json& j, const char* key, bool def) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return def;
  if (!it->is_boolean()) {
    return InvalidArgument(std::string("config.json: ") + key + ": expected true or false");
  }
  return it->get<bool>();
}

// bos_token_id / eos_token_id: an int, a list of ints, or null. Returns the ids (maybe none).
Result<std::vector<int32_t>> GetTokenIds(const Json& j, const char* key, const std::string& file) {
  std::vector<int32_t> ids;
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return ids;
  const Json list = it->is_array() ? *it : Json::array({*it});
  for (const Json& v : list) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 ||
        v.get<int64_t>() > std::numeric_limits<int32_t>::max()) {
      return InvalidArgument(file + ": " + key + ": " + v.dump(-1).substr(0, 40) +
                             " (expected a token id or a list of them)");
    }
    ids.push_back(static_cast<int32_t>(v.get<int64_t>()));
  }
  return ids;
}

Status ReadArchitecture(const Json& j, ModelConfig* c) {
  auto it = j.find("architectures");
  if (it == j.end() || !it->is_array() || it->empty() || !(*it)[0].is_string()) {
    return InvalidArgument("config.json: architectures: missing or not a list of strings");
  }
  const std::string arch = (*it)[0].get<std::string>();
  c->name = arch;
  c->rope_layout = RopeLayout::kHalves;
  if (arch == "LlamaForCausalLM" || arch == "MistralForCausalLM") {
    c->architecture = arch == "LlamaForCausalLM" ? "llama" : "mistral";
  } else if (arch == "Qwen2ForCausalLM") {
    c->architecture = "qwen2";
    c->has_qkv_bias = true;
  } else if (arch == "Qwen3ForCausalLM") {
    c->architecture = "qwen3";
    c->has_qk_norm = true;
  } else {
    return Unimplemented("config.json: architectures[0]: '" + arch +
                         "' is not supported (expected LlamaForCausalLM, MistralForCausalLM, "
                         "Qwen2ForCausalLM or Qwen3ForCausalLM)");
  }
  auto act = j.find("hidden_act");
  if (act != j.end() && !(act->is_string() && act->get<std::string>() == "silu")) {
    return Unimplemented("config.json: hidden_act: " + act->dump(-1).substr(0, 40) +
                         " is not supported (expected \"silu\")");
  }
  for (const char* key : {"attention_bias", "mlp_bias"}) {
    PAGODA_ASSIGN_OR_RETURN(bool bias, GetBool(j, key, false));
    if (bias && c->architecture != "qwen2") {
      return Unimplemented(std::string("config.json: ") + key + ": true is not supported");
    }
  }
  return Status::Ok();
}

Status ReadRopeScaling(const Json& j, ModelConfig* c) {
  auto it = j.find("rope_scaling");
  if (it == j.end() || it->is_null()) return Status::Ok();
  const std::string p = "config.json: rope_scaling.";
  if (!it->is_object()) return InvalidArgument("config.json: rope_scaling: expected an object");
  auto type = it->find("rope_type");
  if (type == it->end()) type = it->find("type");
  if (type == it->end() || !type->is_string()) return InvalidArgument(p + "type: missing");
  const std::string t = type->get<std::string>();
  if (t == "default") return Status::Ok();
  if (t != "linear" && t != "llama3") {
    return Unimplemented(p + "type: '" + t + "' is not supported (expected linear or llama3)");
  }
  c->rope_scaling = t == "linear" ? RopeScaling::kLinear : RopeScaling::kLlama3;
  if (!it->contains("factor")) return InvalidArgument(p + "factor: missing");
  PAGODA_RETURN_IF_ERROR(GetPositiveFloat(*it, "factor", p, &c->rope_scaling_factor));
  if (c->rope_scaling == RopeScaling::kLinear) return Status::Ok();
  PAGODA_RETURN_IF_ERROR(GetPositiveFloat(*it, "low_freq_factor", p, &c->rope_low_freq_factor));
  PAGODA_RETURN_IF_ERROR(GetPositiveFloat(*it, "high_freq_factor", p, &c->rope_high_freq_factor));
  if (!(c->rope_high_freq_factor > c->rope_low_freq_factor)) {
    return InvalidArgument(p + "high_freq_factor: must exceed low_freq_factor");
  }
  auto orig = it->find("original_max_position_embeddings");
  if (orig == it->end() || !orig->is_number_integer() || orig->get<int64_t>() < 1 ||
      orig->get<int64_t>() > (1 << 24)) {
    return InvalidArgument(p + "original_max_position_embeddings: missing or out of range");
  }
  c->rope_original_context = static_cast<int32_t>(orig->get<int64_t>());
  return Status::Ok();
}

Status ReadDims(const Json& j, ModelConfig* c) {
  constexpr int64_t kMaxDim = 1 << 20;
  PAGODA_RETURN_IF_ERROR(GetInt(j, "hidden_size", true, 1, kMaxDim, &c->n_embd));
  PAGODA_RETURN_IF_ERROR(GetInt(j, "num_hidden_layers", true, 1, 4096, &c->n_layers));
  PAGODA_RETURN_IF_ERROR(GetInt(j, "num_attention_heads", true, 1, 4096, &c->n_heads));
  c->n_kv_heads = c->n_heads;
  PAGODA_RETURN_IF_ERROR(GetInt(j, "num_key_value_heads", false, 1, 4096, &c->n_kv_heads));
  PAGODA_RETURN_IF_ERROR(GetInt(j, "intermediate_size", true, 1, kMaxDim, &c->n_ff));
  PAGODA_RETURN_IF_ERROR(GetInt(j, "vocab_size", true, 1, 1 << 24, &c->vocab_size));
  PAGODA_RETURN_IF_ERROR(
      GetInt(j, "max_position_embeddings", true, 1, 1 << 24, &c->context_length));
  c->head_dim = c->n_embd / c->n_heads;
  PAGODA_RETURN_IF_ERROR(GetInt(j, "head_dim", false, 1, 4096, &c->head_dim));
  c->rope_dim = c->head_dim;
  auto partial = j.find("partial_rotary_factor");
  if (partial != j.end() && !(partial->is_number() && partial->get<double>() == 1.0)) {
    return Unimplemented("config.json: partial_rotary_factor: only 1.0 is supported");
  }
  PAGODA_RETURN_IF_ERROR(GetPositiveFloat(j, "rms_norm_eps", "config.json: ", &c->rms_eps));
  PAGODA_RETURN_IF_ERROR(GetPositiveFloat(j, "rope_theta", "config.json: ", &c->rope_theta));
  PAGODA_ASSIGN_OR_RETURN(c->tied_embeddings, GetBool(j, "tie_word_embeddings", false));
  PAGODA_ASSIGN_OR_RETURN(bool use_window, GetBool(j, "use_sliding_window", false));
  if (c->architecture == "mistral" || use_window) {
    PAGODA_RETURN_IF_ERROR(GetInt(j, "sliding_window", false, 0, 1 << 24, &c->sliding_window));
  }
  return Status::Ok();
}

// Applies bos/eos ids from config.json or generation_config.json (`file`), if present.
Status ApplyTokenIds(const Json& j, const std::string& file, ModelConfig* c) {
  PAGODA_ASSIGN_OR_RETURN(auto bos, GetTokenIds(j, "bos_token_id", file));
  PAGODA_ASSIGN_OR_RETURN(auto eos, GetTokenIds(j, "eos_token_id", file));
  for (const auto& [ids, name] : {std::pair{&bos, "bos_token_id"}, {&eos, "eos_token_id"}}) {
    for (int32_t id : *ids) {
      if (c->vocab_size > 0 && id >= c->vocab_size) {
        return InvalidArgument(file + ": " + name + ": " + std::to_string(id) +
                               " is outside the vocabulary of " + std::to_string(c->vocab_size));
      }
    }
  }
  if (!bos.empty()) c->bos_id = bos[0];
  if (!eos.empty()) {
    c->eos_id = eos[0];
    c->eos_ids = eos;
  }
  return Status::Ok();
}

// ---- weights ----

struct Binder {
  const SafetensorsSet& set;
  std::vector<std::vector<uint8_t>>* copies;

  Result<const SafetensorsTensor*> Find(const std::string& name,
                                        const std::vector<int64_t>& shape) const {
    const SafetensorsTensor* t = set.Find(name);
    if (!t) return InvalidArgument("tensor '" + name + "' is missing");
    if (t->shape != shape) {
      SafetensorsTensor want;
      want.shape = shape;
      return InvalidArgument("tensor '" + name + "' (" + set.FileOf(name) + "): shape " +
                             t->ShapeString() + ", expected " + want.ShapeString());
    }
    Status st = t->CheckSupported();
    if (!st.ok()) return st.WithPrefix(set.FileOf(name));
    return t;
  }

  const uint8_t* Aligned(const SafetensorsTensor& t) const {
    const auto elem = static_cast<uintptr_t>(TypeTraits(*t.type).type_size);
    if (reinterpret_cast<uintptr_t>(t.data) % elem == 0) return t.data;
    copies->emplace_back(t.data, t.data + t.nbytes());
    return copies->back().data();
  }

  Result<WeightView> Matrix(const std::string& name, int64_t rows, int64_t cols) const {
    PAGODA_ASSIGN_OR_RETURN(const SafetensorsTensor* t, Find(name, {rows, cols}));
    return WeightView{*t->type, Aligned(*t), rows, cols, *RowBytes(*t->type, cols)};
  }

  Result<std::vector<float>> Vector(const std::string& name, int64_t n) const {
    PAGODA_ASSIGN_OR_RETURN(const SafetensorsTensor* t, Find(name, {n}));
    std::vector<float> v(static_cast<size_t>(n));
    DequantizeRow(*t->type, t->data, v.data(), n);  // byte-wise reads: alignment does not matter
    return v;
  }
};

Result<LayerWeights> BindHfLayer(const Binder& b, const ModelConfig& c, int layer) {
  const std::string p = "model.layers." + std::to_string(layer) + ".";
  const std::string a = p + "self_attn.";
  LayerWeights w;
  PAGODA_ASSIGN_OR_RETURN(w.attn_norm, b.Vector(p + "input_layernorm.weight", c.n_embd));
  PAGODA_ASSIGN_OR_RETURN(w.wq, b.Matrix(a + "q_proj.weight", c.q_dim(), c.n_embd));
  PAGODA_ASSIGN_OR_RETURN(w.wk, b.Matrix(a + "k_proj.weight", c.kv_dim(), c.n_embd));
  PAGODA_ASSIGN_OR_RETURN(w.wv, b.Matrix(a + "v_proj.weight", c.kv_dim(), c.n_embd));
  PAGODA_ASSIGN_OR_RETURN(w.wo, b.Matrix(a + "o_proj.weight", c.n_embd, c.q_dim()));
  if (c.has_qkv_bias) {
    PAGODA_ASSIGN_OR_RETURN(w.bq, b.Vector(a + "q_proj.bias", c.q_dim()));
    PAGODA_ASSIGN_OR_RETURN(w.bk, b.Vector(a + "k_proj.bias", c.kv_dim()));
    PAGODA_ASSIGN_OR_RETURN(w.bv, b.Vector(a + "v_proj.bias", c.kv_dim()));
  }
  if (c.has_qk_norm) {
    PAGODA_ASSIGN_OR_RETURN(w.q_norm, b.Vector(a + "q_norm.weight", c.head_dim));
    PAGODA_ASSIGN_OR_RETURN(w.k_norm, b.Vector(a + "k_norm.weight", c.head_dim));
  }
  PAGODA_ASSIGN_OR_RETURN(w.ffn_norm, b.Vector(p + "post_attention_layernorm.weight", c.n_embd));
  PAGODA_ASSIGN_OR_RETURN(w.w_gate, b.Matrix(p + "mlp.gate_proj.weight", c.n_ff, c.n_embd));
  PAGODA_ASSIGN_OR_RETURN(w.w_up, b.Matrix(p + "mlp.up_proj.weight", c.n_ff, c.n_embd));
  PAGODA_ASSIGN_OR_RETURN(w.w_down, b.Matrix(p + "mlp.down_proj.weight", c.n_embd, c.n_ff));
  return w;
}

// ---- tokenizer ----

// tokenizer_config.json chat_template: a string, or a list of {name, template} whose "default"
// (else first) entry is the default and whose other entries are named templates.
Status ReadChatTemplates(const Json& cfg, const std::string& file, Model* m) {
  auto it = cfg.find("chat_template");
  if (it == cfg.end() || it->is_null()) return Status::Ok();
  if (it->is_string()) {
    m->chat_template = it->get<std::string>();
    return Status::Ok();
  }
  if (!it->is_array()) {
    return InvalidArgument(file +
                           ": chat_template: expected a string or a list of {name, template}");
  }
  for (size_t i = 0; i < it->size(); ++i) {
    const Json& e = (*it)[i];
    if (!e.is_object() || !e.contains("name") || !e["name"].is_string() ||
        !e.contains("template") || !e["template"].is_string()) {
      return InvalidArgument(file + ": chat_template[" + std::to_string(i) +
                             "]: expected {\"name\": string, \"template\": string}");
    }
    m->named_chat_templates[e["name"].get<std::string>()] = e["template"].get<std::string>();
  }
  auto def = m->named_chat_templates.find("default");
  if (def == m->named_chat_templates.end() && !it->empty()) {
    def = m->named_chat_templates.find((*it)[0]["name"].get<std::string>());
  }
  if (def != m->named_chat_templates.end()) {
    m->chat_template = def->second;
    m->named_chat_templates.erase(def);
  }
  return Status::Ok();
}

// Stop tokens, pad token and sampling defaults (see model/generation_defaults.h).
Status ReadHfGenerationDefaults(const Json& config, const Json& gen, const Json& tok_cfg,
                                const std::string& gen_path, Model* m) {
  GenerationDefaults& d = m->generation;
  const Tokenizer& tok = *m->tokenizer;
  d.AddStopToken(tok.eos_id());
  for (int32_t id : m->config.eos_ids) d.AddStopToken(id);
  d.AddStopToken(m->config.eos_id);
  for (const Json* j : {&gen, &config}) {
    auto pad = j->find("pad_token_id");
    if (d.pad_id < 0 && pad != j->end() && pad->is_number_integer() && pad->get<int64_t>() >= 0 &&
        pad->get<int64_t>() < m->config.vocab_size) {
      d.pad_id = static_cast<int32_t>(pad->get<int64_t>());
    }
  }
  if (d.pad_id < 0) {
    d.pad_id = FindTokenId(
        tok.vocab_size(), [&](int64_t id) { return tok.Piece(static_cast<int32_t>(id)); },
        HfSpecialTokenText(tok_cfg, "pad_token"));
  }
  return ReadSamplingDefaults(gen, gen_path, &d);
}

int32_t FindToken(const std::vector<std::string>& tokens, std::string_view text) {
  return FindTokenId(
      static_cast<int64_t>(tokens.size()), [&](int64_t id) { return tokens[id]; }, text);
}

// Overrides from tokenizer_config.json, then the model config's ids when still unset.
template <typename Vocab>
void ApplyTokenizerConfig(const Json& cfg, const std::vector<std::string>& tokens,
                          const ModelConfig& c, Vocab* v) {
  const int32_t bos = FindToken(tokens, HfSpecialTokenText(cfg, "bos_token"));
  const int32_t eos = FindToken(tokens, HfSpecialTokenText(cfg, "eos_token"));
  if (bos >= 0) v->bos_id = bos;
  if (eos >= 0) v->eos_id = eos;
  const auto n = static_cast<int32_t>(tokens.size());
  if (v->bos_id < 0 && c.bos_id >= 0 && c.bos_id < n) v->bos_id = c.bos_id;
  if (v->eos_id < 0 && c.eos_id >= 0 && c.eos_id < n) v->eos_id = c.eos_id;
  auto add = cfg.find("add_bos_token");
  if (add != cfg.end() && add->is_boolean()) v->add_bos = add->get<bool>() && v->bos_id >= 0;
}

// The tokenizer from `json_path` (tokenizer.json; "" = none) or else `spm_path`
// (tokenizer.model; "" = none), with tokenizer_config.json's overrides.
Result<std::unique_ptr<Tokenizer>> LoadTokenizerFiles(const std::string& json_path,
                                                      const std::string& spm_path,
                                                      const Json& tok_cfg, const ModelConfig& c) {
  Status json_error = NotFound("neither tokenizer.json nor tokenizer.model exists");
  if (!json_path.empty() && FileExists(json_path)) {
    PAGODA_ASSIGN_OR_RETURN(std::string text, ReadSmallFile(json_path, kMaxJsonFileBytes));
    auto vocab = BpeVocabFromTokenizerJson(text);
    if (vocab.ok()) {
      ApplyTokenizerConfig(tok_cfg, vocab->tokens, c, &vocab.value());
      auto tok = MakeBpeTokenizer(std::move(vocab).value());
      if (!tok.ok()) return tok.status().WithPrefix(json_path);
      return tok;
    }
    json_error = vocab.status().WithPrefix(json_path);
    // Only a tokenizer kind the BPE reader does not take (UNIMPLEMENTED, e.g. a Unigram model)
    // falls back to tokenizer.model; a broken tokenizer.json is reported, never replaced.
    if (vocab.status().code() != StatusCode::kUnimplemented) return json_error;
  }
  if (spm_path.empty() || !FileExists(spm_path)) return json_error;
  PAGODA_ASSIGN_OR_RETURN(SpmVocab spm, LoadSentencePieceModel(spm_path));
  ApplyTokenizerConfig(tok_cfg, spm.pieces, c, &spm);
  auto tok = MakeSpmTokenizer(std::move(spm));
  if (!tok.ok()) return tok.status().WithPrefix(spm_path);
  return tok;
}

Result<std::unique_ptr<Tokenizer>> LoadHfTokenizer(const std::string& dir, const Json& tok_cfg,
                                                   const ModelConfig& c) {
  auto tok = LoadTokenizerFiles(dir + "/tokenizer.json", dir + "/tokenizer.model", tok_cfg, c);
  if (!tok.ok() && tok.status().code() == StatusCode::kNotFound) {
    return tok.status().WithPrefix(dir);
  }
  return tok;
}

// Reads an optional JSON file; an absent file gives an empty object.
Result<Json> ReadOptionalJson(const std::string& path) {
  if (!FileExists(path)) return Json::object();
  PAGODA_ASSIGN_OR_RETURN(std::string text, ReadSmallFile(path, kMaxJsonFileBytes));
  return ParseJsonText(text, path);
}

// config.json (its JSON in *json) with generation_config.json's token ids (its JSON in *gen).
Result<ModelConfig> ReadHfConfig(const std::string& dir, Json* json, Json* gen) {
  const std::string path = dir + "/config.json";
  PAGODA_ASSIGN_OR_RETURN(std::string text, ReadSmallFile(path, kMaxJsonFileBytes));
  auto config = HfConfigFromJson(text);
  if (!config.ok()) return config.status().WithPrefix(dir);
  *json = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  const std::string gen_path = dir + "/generation_config.json";
  PAGODA_ASSIGN_OR_RETURN(*gen, ReadOptionalJson(gen_path));
  PAGODA_RETURN_IF_ERROR(ApplyTokenIds(*gen, gen_path, &config.value()));
  return config;
}

}  // namespace

std::string HfSpecialTokenText(const Json& cfg, const char* key) {
  auto it = cfg.find(key);
  if (it == cfg.end()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object()) {
    auto c = it->find("content");
    if (c != it->end() && c->is_string()) return c->get<std::string>();
  }
  return "";
}

Result<ModelConfig> HfConfigFromJson(std::string_view text) {
  PAGODA_ASSIGN_OR_RETURN(Json j, ParseJsonText(text, "config.json"));
  ModelConfig c;
  PAGODA_RETURN_IF_ERROR(ReadArchitecture(j, &c));
  PAGODA_RETURN_IF_ERROR(ReadDims(j, &c));
  PAGODA_RETURN_IF_ERROR(ReadRopeScaling(j, &c));
  PAGODA_RETURN_IF_ERROR(ApplyTokenIds(j, "config.json", &c));
  auto st = c.Validate();
  if (!st.ok()) return st.WithPrefix("config.json");
  return c;
}

Result<ModelWeights> BindHfWeights(const SafetensorsSet& set, const ModelConfig& c,
                                   std::vector<std::vector<uint8_t>>* aligned_copies) {
  const Binder b{set, aligned_copies};
  ModelWeights w;
  PAGODA_ASSIGN_OR_RETURN(w.token_embd,
                          b.Matrix("model.embed_tokens.weight", c.vocab_size, c.n_embd));
  PAGODA_ASSIGN_OR_RETURN(w.output_norm, b.Vector("model.norm.weight", c.n_embd));
  if (c.tied_embeddings) {
    w.output = w.token_embd;
  } else {
    PAGODA_ASSIGN_OR_RETURN(w.output, b.Matrix("lm_head.weight", c.vocab_size, c.n_embd));
  }
  for (int l = 0; l < c.n_layers; ++l) {
    PAGODA_ASSIGN_OR_RETURN(LayerWeights lw, BindHfLayer(b, c, l));
    w.layers.push_back(std::move(lw));
  }
  return w;
}

Result<std::unique_ptr<Tokenizer>> LoadHfTokenizerAt(const std::string& path) {
  struct stat st {};
  const bool dir = ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
  const std::string base = dir ? path : std::filesystem::path(path).parent_path().string();
  const std::string folder = base.empty() ? "." : base;
  PAGODA_ASSIGN_OR_RETURN(Json tok_cfg, ReadOptionalJson(folder + "/tokenizer_config.json"));
  ModelConfig c;  // config.json's bos / eos ids when it is there and parses
  if (FileExists(folder + "/config.json")) {
    Json config_json, gen;
    if (auto read = ReadHfConfig(folder, &config_json, &gen); read.ok()) c = *read;
  }
  if (dir) return LoadHfTokenizer(path, tok_cfg, c);
  const bool is_json = path.ends_with(".json");
  return LoadTokenizerFiles(is_json ? path : "", is_json ? "" : path, tok_cfg, c);
}

Result<std::unique_ptr<Model>> LoadHfModel(const std::string& dir) {
  auto model = std::make_unique<Model>();
  model->path = dir;
  Json config_json, gen;
  PAGODA_ASSIGN_OR_RETURN(model->config, ReadHfConfig(dir, &config_json, &gen));
  PAGODA_ASSIGN_OR_RETURN(model->safetensors, SafetensorsSet::OpenDir(dir));
  auto weights = BindHfWeights(*model->safetensors, model->config, &model->aligned_copies);
  if (!weights.ok()) return weights.status().WithPrefix(dir);
  model->weights = std::move(weights).value();
  const std::string tok_cfg_path = dir + "/tokenizer_config.json";
  PAGODA_ASSIGN_OR_RETURN(Json tok_cfg, ReadOptionalJson(tok_cfg_path));
  PAGODA_ASSIGN_OR_RETURN(model->tokenizer, LoadHfTokenizer(dir, tok_cfg, model->config));
  if (model->tokenizer->vocab_size() > model->config.vocab_size) {
    return InvalidArgument(dir + ": the tokenizer has " +
                           std::to_string(model->tokenizer->vocab_size()) +
                           " tokens but model.embed_tokens.weight has only " +
                           std::to_string(model->config.vocab_size) + " rows");
  }
  PAGODA_RETURN_IF_ERROR(ReadChatTemplates(tok_cfg, tok_cfg_path, model.get()));
  if (model->chat_template.empty() && FileExists(dir + "/chat_template.jinja")) {
    PAGODA_ASSIGN_OR_RETURN(model->chat_template,
                            ReadSmallFile(dir + "/chat_template.jinja", kMaxJsonFileBytes));
  }
  PAGODA_RETURN_IF_ERROR(ReadHfGenerationDefaults(config_json, gen, tok_cfg,
                                                  dir + "/generation_config.json", model.get()));
  return model;
}

}  // namespace pagoda
