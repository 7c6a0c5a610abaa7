#include "model/model.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "model/hf_model.h"

namespace pagoda {
namespace {

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
    const std::pair<const char*, const WeightView*> matrices[] = {
        {"wq", &y.wq},         {"wk", &y.wk},     {"wv", &y.wv},        {"wo", &y.wo},
        {"w_gate", &y.w_gate}, {"w_up", &y.w_up}, {"w_down", &y.w_down}};
    for (const auto& [name, m] : matrices) PAGODA_RETURN_IF_ERROR(CheckMatrixSample(*m, p + name));
  }
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<Model>> LoadModel(const std::string& path,
                                         const std::function<void(const std::string&)>& progress) {
  auto report = [&](const std::string& s) {
    if (progress) progress(s);
  };
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    PAGODA_ASSIGN_OR_RETURN(std::unique_ptr<Model> hf, LoadHfModel(path));
    PAGODA_RETURN_IF_ERROR(CheckWeightsFinite(hf->weights).WithPrefix(path));
    return hf;
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
  if (auto tmpl = model->file->GetString("tokenizer.chat_template"); tmpl.ok()) {
    model->chat_template = *tmpl;
  }
  if (model->tokenizer->vocab_size() != model->config.vocab_size) {
    return InvalidArgument(
        path + ": tokenizer has " + std::to_string(model->tokenizer->vocab_size()) +
        " tokens but token_embd.weight has " + std::to_string(model->config.vocab_size) + " rows");
  }
  return model;
}

}  // namespace pagoda
