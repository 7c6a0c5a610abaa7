// Model: a loaded model file with its config, bound weights and tokenizer.
//
// LoadModel owns the whole chain (open/mmap -> config -> weights -> tokenizer) and returns one
// object whose parts live exactly as long as it does. Errors name the file and the field.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "model/generation_defaults.h"
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
  // The default Jinja chat template, or "": GGUF tokenizer.chat_template; HF
  // tokenizer_config.json chat_template (a string, or the list entry named "default", else its
  // first entry), else chat_template.jinja.
  std::string chat_template;
  // Named templates: GGUF tokenizer.chat_template.<name>; HF the other named list entries.
  std::map<std::string, std::string> named_chat_templates;
  // Stop tokens, pad token and sampling defaults from the model files.
  GenerationDefaults generation;
  // Hugging Face directories: the safetensors shards the weights point into (file is null),
  // and copies of tensors whose data was not aligned to its element size in the file.
  std::unique_ptr<SafetensorsSet> safetensors;
  std::vector<std::vector<uint8_t>> aligned_copies;
};

// What a path given to a command names. Every command opens models through LoadModel /
// LoadTokenizer below, which take the same things.
enum class ModelPathKind {
  kGguf,           // a file starting with the GGUF magic
  kHfDirectory,    // a directory (config.json, *.safetensors, tokenizer files)
  kTokenizerJson,  // a Hugging Face tokenizer.json (a file whose name ends in .json)
  kSentencePiece,  // a SentencePiece tokenizer.model (a file whose name ends in .model)
};
// Other files count as GGUF (whose reader then says what is wrong with them).
// Errors: NOT_FOUND "<path>: no such file or directory"; INVALID_ARGUMENT for other non-files.
Result<ModelPathKind> ClassifyModelPath(const std::string& path);

// Loads a GGUF model or a Hugging Face model directory (see LoadHfModel in model/hf_model.h);
// a tokenizer file or a directory without config.json is an INVALID_ARGUMENT that says so.
// `progress` (optional) is called with a short stage description.
Result<std::unique_ptr<Model>> LoadModel(
    const std::string& path, const std::function<void(const std::string&)>& progress = {});

// The tokenizer alone of anything ClassifyModelPath accepts (a GGUF, an HF directory, a bare
// tokenizer.json or tokenizer.model), for `pagoda tokenize`.
Result<std::unique_ptr<Tokenizer>> LoadTokenizer(const std::string& path);

// Builds the tokenizer a GGUF file describes (tokenizer.ggml.*). Errors name the key.
Result<std::unique_ptr<Tokenizer>> LoadGgufTokenizer(const GgufFile& file);

}  // namespace pagoda
