// Model: a loaded model file with its config, bound weights and tokenizer.
//
// LoadModel owns the whole chain (open/mmap -> config -> weights -> tokenizer) and returns one
// object whose parts live exactly as long as it does. Errors name the file and the field.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "common/status.h"
#include "model/gguf.h"
#include "model/model_config.h"
#include "model/tokenizer.h"
#include "model/weights.h"

namespace pagoda {

struct Model {
  std::string path;
  std::unique_ptr<GgufFile> file;  // owns the mapping the weights point into
  ModelConfig config;
  ModelWeights weights;
  std::unique_ptr<Tokenizer> tokenizer;
};

// Loads a GGUF model. `progress` (optional) is called with a short stage description.
Result<std::unique_ptr<Model>> LoadModel(
    const std::string& path, const std::function<void(const std::string&)>& progress = {});

// Builds the tokenizer a GGUF file describes (tokenizer.ggml.*). Errors name the key.
Result<std::unique_ptr<Tokenizer>> LoadGgufTokenizer(const GgufFile& file);

}  // namespace pagoda
