#include "model/model.h"

#include <sys/stat.h>

#include "model/hf_model.h"

namespace pagoda {

Result<std::unique_ptr<Model>> LoadModel(const std::string& path,
                                         const std::function<void(const std::string&)>& progress) {
  auto report = [&](const std::string& s) {
    if (progress) progress(s);
  };
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return LoadHfModel(path);
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
