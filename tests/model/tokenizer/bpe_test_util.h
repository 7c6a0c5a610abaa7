// Test helpers: the shared GPT-2 byte-level BPE files and their reference cases.
// Missing shared files make the calling test FAIL (never skip).
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "model/tokenizer.h"
#include "model/tokenizer/bpe_tokenizer.h"
#include "model/tokenizer/tokenizer_json.h"
#include "tests/test_data.h"

namespace pagoda::testing {

inline std::string Gpt2Path(const std::string& name) {
  return SharedPath("tokenizers/gpt2-bpe/" + name);
}

inline std::string ReadFileOrFail(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    ADD_FAILURE() << "cannot open " << path << " (the shared test data must be beside the repo)";
    return {};
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline nlohmann::json Gpt2ReferenceCases() {
  nlohmann::json ref = LoadJson(Gpt2Path("reference.json"));
  if (!ref.is_object() || !ref.contains("cases")) return nlohmann::json::array();
  return ref["cases"];
}

// The GPT-2 vocabulary from tokenizer.json, loaded once (an empty vocab after a failure).
inline const BpeVocab& Gpt2Vocab() {
  static const BpeVocab vocab = [] {
    auto v = BpeVocabFromTokenizerJson(ReadFileOrFail(Gpt2Path("tokenizer.json")));
    EXPECT_TRUE(v.ok()) << v.status().ToString();
    return v.ok() ? std::move(v).value() : BpeVocab();
  }();
  return vocab;
}

// The GPT-2 tokenizer from tokenizer.json, optionally with another pre-tokenizer.
inline std::unique_ptr<Tokenizer> MakeGpt2Tokenizer(const std::string& pre = "gpt2") {
  BpeVocab v = Gpt2Vocab();
  v.pre_tokenizer = pre;
  auto tok = MakeBpeTokenizer(std::move(v));
  if (!tok.ok()) {
    ADD_FAILURE() << tok.status().ToString();
    return nullptr;
  }
  return std::move(tok).value();
}

}  // namespace pagoda::testing
