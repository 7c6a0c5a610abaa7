// Test helpers: the shared Llama 2 SentencePiece tokenizer and its reference cases.
// Missing shared files make the calling test FAIL (never skip).
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "model/tokenizer.h"
#include "model/tokenizer/sentencepiece_model.h"
#include "tests/test_data.h"

namespace pagoda::testing {

inline std::string LlamaModelPath() { return SharedPath("tokenizers/llama2-spm/tokenizer.model"); }

// The Llama 2 tokenizer, loaded once; nullptr (after ADD_FAILURE) if it cannot be loaded.
inline const Tokenizer* LlamaTokenizer() {
  static const std::unique_ptr<Tokenizer> tokenizer = []() -> std::unique_ptr<Tokenizer> {
    auto vocab = LoadSentencePieceModel(LlamaModelPath());
    if (!vocab.ok()) return nullptr;
    auto tok = MakeSpmTokenizer(std::move(vocab).value());
    return tok.ok() ? std::move(tok).value() : nullptr;
  }();
  if (!tokenizer) ADD_FAILURE() << "cannot load the shared Llama tokenizer " << LlamaModelPath();
  return tokenizer.get();
}

inline nlohmann::json LlamaReferenceCases() {
  nlohmann::json ref = LoadJson(SharedPath("tokenizers/llama2-spm/reference.json"));
  if (!ref.is_object() || !ref.contains("cases")) return nlohmann::json::array();
  return ref["cases"];
}

}  // namespace pagoda::testing
