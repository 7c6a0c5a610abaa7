// Model: a loaded model file with its config, bound weights and tokenizer.
//
// LoadModel owns the whole chain (open/mmap -> config -> weights -> tokenizer) and returns one
// object whose parts live exactly as long as it does. Errors name the file and the field.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "model/gguf.h"
#include "model/model_config.h"
#include "model/safetensors.h"
#include "model/tokenizer.h"
#include "model/weights.h"

namespace pagoda {

struct Model {
  std::string path;
  std::unique_ptr<GgufFile> file;  // owns the mapping the weights point into
  ModelConfig config;
  ModelWeights weights;
  std::unique_ptr<Tokenizer> tokenizer;
  // The Jinja chat template (GGUF tokenizer.chat_template or HF tokenizer_config.json), or "".
  std::string chat_template;
  // Hugging Face directories: the safetensors shards the weights point into (file is null),
  // and copies of tensors whose data was not aligned to its element size in the file.
  std::unique_ptr<SafetensorsSet> safetensors;
  std::vector<std::vector<uint8_t>> aligned_copies;
};

// Loads a GGUF model, or a Hugging Face model directory when `path` is a directory (see
// LoadHfModel in model/hf_model.h). `progress` (optional) is called with a short stage description.
Result<std::unique_ptr<Model>> LoadModel(
    const std::string& path, const std::function<void(const std::string&)>& progress = {});

// Builds the tokenizer a GGUF file describes (tokenizer.ggml.*). Errors name the key.
Result<std::unique_ptr<Tokenizer>> LoadGgufTokenizer(const GgufFile& file);

}  // namespace pagoda
