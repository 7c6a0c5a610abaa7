#include "model/model.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <string_view>
#include <vector>

#include "model/hf_model.h"

namespace pagoda {
namespace {

constexpr std::string_view kChatTemplateKey = "tokenizer.chat_template";

// tokenizer.chat_template and the named tokenizer.chat_template.<name> (string values).
void ReadGgufChatTemplates(const GgufFile& f, Model* m) {
  for (const auto& [key, value] : f.metadata()) {
    if (value.type != GgufType::kString || !key.starts_with(kChatTemplateKey)) continue;
    if (key.size() == kChatTemplateKey.size()) {
      m->chat_template = value.str;
    } else if (key[kChatTemplateKey.size()] == '.' && key.size() > kChatTemplateKey.size() + 1) {
      m->named_chat_templates[key.substr(kChatTemplateKey.size() + 1)] = value.str;
    }
  }
}

// A GGUF token-id key in the vocabulary, or -1 (absent, 0xFFFFFFFF "none", out of range).
int32_t GgufTokenId(const GgufFile& f, const char* key, const Tokenizer& tok) {
  auto v = f.GetInt(key);
  return v.ok() && *v >= 0 && *v < tok.vocab_size() ? static_cast<int32_t>(*v) : -1;
}

GenerationDefaults GgufGenerationDefaults(const GgufFile& f, const Tokenizer& tok) {
  GenerationDefaults d;
  d.AddStopToken(tok.eos_id());
  int32_t eot = GgufTokenId(f, "tokenizer.ggml.eot_token_id", tok);
  for (size_t i = 0; eot < 0 && i < std::size(kKnownEndOfTurnTexts); ++i) {
    const int32_t id = FindTokenId(
        tok.vocab_size(), [&](int64_t t) { return tok.Piece(static_cast<int32_t>(t)); },
        kKnownEndOfTurnTexts[i]);
    if (id >= 0 && tok.Kind(id) == TokenKind::kControl) eot = id;
  }
  d.AddStopToken(eot);
  d.AddStopToken(GgufTokenId(f, "tokenizer.ggml.eom_token_id", tok));
  d.pad_id = GgufTokenId(f, "tokenizer.ggml.padding_token_id", tok);
  return d;
}

Status CheckFinite(std::span<const float> v, const std::string& what, int64_t row = -1) {
  for (size_t i = 0; i < v.size(); ++i) {
    if (!std::isfinite(v[i])) {
      return InvalidArgument(what + ": " + (std::isnan(v[i]) ? "NaN" : "Inf") + " at " +
                             (row >= 0 ? "row " + std::to_string(row) + ", " : "") + "element " +
                             std::to_string(i) + " (the weights are corrupt)");
    }
  }
  return Status::Ok();
}

// Rows of a matrix checked at load: the first, the last and evenly spaced ones between.
constexpr int64_t kSampledRows = 8;

Status CheckMatrixSample(const WeightView& w, const std::string& what) {
  if (w.data == nullptr || w.rows < 1 || !TypeTraits(w.type).can_dequantize) return Status::Ok();
  std::vector<float> row(static_cast<size_t>(w.cols));
  const int64_t n = std::min(kSampledRows, w.rows);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t r = n == 1 ? 0 : i * (w.rows - 1) / (n - 1);
    DequantizeRow(w.type, w.row(r), row.data(), w.cols);
    PAGODA_RETURN_IF_ERROR(CheckFinite(row, what, r));
  }
  return Status::Ok();
}

// NaN / Inf weights would load silently and turn every logit into NaN: every norm and bias is
// checked in full, every matrix on a sample of rows (reading all of a large model would cost
// seconds at start-up).
Status CheckWeightsFinite(const ModelWeights& w) {
  PAGODA_RETURN_IF_ERROR(CheckMatrixSample(w.token_embd, "token_embd"));
  PAGODA_RETURN_IF_ERROR(CheckMatrixSample(w.output, "output"));
  PAGODA_RETURN_IF_ERROR(CheckFinite(w.output_norm, "output_norm"));
  for (size_t l = 0; l < w.layers.size(); ++l) {
    const LayerWeights& y = w.layers[l];
    const std::string p = "layer " + std::to_string(l) + " ";
    const std::pair<const char*, const std::vector<float>*> vectors[] = {
        {"attn_norm", &y.attn_norm},
        {"ffn_norm", &y.ffn_norm},
        {"q_norm", &y.q_norm},
        {"k_norm", &y.k_norm},
        {"bq", &y.bq},
        {"bk", &y.bk},
        {"bv", &y.bv}};
    for (const auto& [name, v] : vectors) PAGODA_RETURN_IF_ERROR(CheckFinite(*v, p + name));
    const auto matrices = y.matrices();
    for (size_t i = 0; i < matrices.size(); ++i) {
      PAGODA_RETURN_IF_ERROR(CheckMatrixSample(*matrices[i], p + kLayerMatrixNames[i]));
    }
  }
  return Status::Ok();
}

}  // namespace

Result<ModelPathKind> ClassifyModelPath(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return NotFound(path + ": no such file or directory");
  if (S_ISDIR(st.st_mode)) return ModelPathKind::kHfDirectory;
  if (!S_ISREG(st.st_mode)) {
    return InvalidArgument(path +
                           ": not a regular file or directory (expected a GGUF file, a "
                           "Hugging Face directory, tokenizer.json or tokenizer.model)");
  }
  char magic[4] = {};
  std::ifstream in(path, std::ios::binary);
  in.read(magic, sizeof(magic));
  if (in.gcount() == 4 && std::string_view(magic, 4) == "GGUF") return ModelPathKind::kGguf;
  if (path.ends_with(".json")) return ModelPathKind::kTokenizerJson;
  if (path.ends_with(".model")) return ModelPathKind::kSentencePiece;
  return ModelPathKind::kGguf;  // GgufFile::Open says what is wrong with it
}

Result<std::unique_ptr<Tokenizer>> LoadTokenizer(const std::string& path) {
  PAGODA_ASSIGN_OR_RETURN(const ModelPathKind kind, ClassifyModelPath(path));
  if (kind != ModelPathKind::kGguf) return LoadHfTokenizerAt(path);
  auto file = GgufFile::Open(path);
  if (!file.ok()) {  // perhaps a SentencePiece model under another name
    auto spm = LoadHfTokenizerAt(path);
    if (spm.ok()) return spm;
    return InvalidArgument(path + ": neither a GGUF (" + file.status().message() +
                           ") nor a SentencePiece model (" + spm.status().message() + ")");
  }
  auto tok = LoadGgufTokenizer(**file);
  if (!tok.ok()) return tok.status().WithPrefix(path);
  return tok;
}

Result<std::unique_ptr<Model>> LoadModel(const std::string& path,
                                         const std::function<void(const std::string&)>& progress) {
  auto report = [&](const std::string& s) {
    if (progress) progress(s);
  };
  PAGODA_ASSIGN_OR_RETURN(const ModelPathKind kind, ClassifyModelPath(path));
  if (kind == ModelPathKind::kHfDirectory) {
    struct stat st {};
    if (::stat((path + "/config.json").c_str(), &st) != 0) {
      return InvalidArgument(path +
                             ": a directory without config.json (expected a GGUF file or "
                             "a Hugging Face model directory)");
    }
    PAGODA_ASSIGN_OR_RETURN(std::unique_ptr<Model> hf, LoadHfModel(path));
    PAGODA_RETURN_IF_ERROR(CheckWeightsFinite(hf->weights).WithPrefix(path));
    return hf;
  }
  if (kind != ModelPathKind::kGguf) {
    return InvalidArgument(path +
                           ": a tokenizer file, not a model (expected a GGUF file or a "
                           "Hugging Face model directory)");
  }
  auto model = std::make_unique<Model>();
  model->path = path;
  report("mapping " + path);
  PAGODA_ASSIGN_OR_RETURN(model->file, GgufFile::Open(path));
  report("reading config");
  auto config = ModelConfigFromGguf(*model->file);
  if (!config.ok()) return config.status().WithPrefix(path);
  model->config = std::move(config).value();
  report("binding " + std::to_string(model->file->tensors().size()) + " tensors");
  auto weights = BindGgufWeights(*model->file, model->config);
  if (!weights.ok()) return weights.status().WithPrefix(path);
  model->weights = std::move(weights).value();
  PAGODA_RETURN_IF_ERROR(CheckWeightsFinite(model->weights).WithPrefix(path));
  report("loading tokenizer");
  auto tokenizer = LoadGgufTokenizer(*model->file);
  if (!tokenizer.ok()) return tokenizer.status().WithPrefix(path);
  model->tokenizer = std::move(tokenizer).value();
  ReadGgufChatTemplates(*model->file, model.get());
  if (model->tokenizer->vocab_size() != model->config.vocab_size) {
    return InvalidArgument(
        path + ": tokenizer has " + std::to_string(model->tokenizer->vocab_size()) +
        " tokens but token_embd.weight has " + std::to_string(model->config.vocab_size) + " rows");
  }
  model->generation = GgufGenerationDefaults(*model->file, *model->tokenizer);
  return model;
}

}  // namespace pagoda
