// Tests of the tokenizer.json and encoder.json + vocab.bpe loaders on small synthetic files:
// merge spellings, added tokens, pre-tokenizer recognition, BOS/EOS, and errors naming paths.
#include "model/tokenizer/tokenizer_json.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "model/tokenizer/bpe_tokenizer.h"
#include "model/tokenizer/pretokenizer.h"

namespace pagoda {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Json = nlohmann::json;

// A byte-level tokenizer.json: 256 byte symbols, "ab" (256), "abc" (257), merges (a b), (ab c).
Json SmallTokenizerJson() {
  Json vocab = Json::object();
  for (int b = 0; b < 256; ++b) vocab[ByteLevelEncode(std::string(1, char(b)))] = b;
  vocab["ab"] = 256;
  vocab["abc"] = 257;
  Json j;
  j["version"] = "1.0";
  j["added_tokens"] = Json::array({{{"id", 258}, {"content", "<|eot|>"}, {"special", true}},
                                   {{"id", 259}, {"content", "<x>"}, {"special", false}}});
  j["normalizer"] = nullptr;
  j["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}};
  j["decoder"] = {{"type", "ByteLevel"}};
  j["model"] = {{"type", "BPE"}, {"vocab", vocab}, {"merges", {"a b", "ab c"}}};
  return j;
}

Result<BpeVocab> Load(const Json& j) { return BpeVocabFromTokenizerJson(j.dump()); }

TEST(TokenizerJsonTest, LoadsSmallFile) {
  auto v = Load(SmallTokenizerJson());
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->tokens.size(), 260u);
  EXPECT_EQ(v->kinds[258], TokenKind::kControl);
  EXPECT_EQ(v->kinds[259], TokenKind::kUserDefined);
  EXPECT_EQ(v->pre_tokenizer, "gpt2");
  EXPECT_TRUE(v->pre_tokenizer_regexes.empty());
  auto tok = MakeBpeTokenizer(std::move(v).value());
  ASSERT_TRUE(tok.ok());
  EXPECT_THAT((*tok)->Encode("abc<x>ab<|eot|>", false), ElementsAre(257, 259, 256, 258));
}

TEST(TokenizerJsonTest, MergesAsPairs) {
  Json j = SmallTokenizerJson();
  j["model"]["merges"] = Json::array({Json::array({"a", "b"}), Json::array({"ab", "c"})});
  auto v = Load(j);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  ASSERT_EQ(v->merges.size(), 2u);
  EXPECT_EQ(v->merges[1], std::make_pair(std::string("ab"), std::string("c")));
}

TEST(TokenizerJsonTest, RecognisesLlama3AndQwen2Splits) {
  Json j = SmallTokenizerJson();
  const Json byte_level = {
      {"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}};
  auto with_split = [&](const std::string& regex) {
    j["pre_tokenizer"] = {{"type", "Sequence"},
                          {"pretokenizers",
                           {{{"type", "Split"},
                             {"pattern", {{"Regex", regex}}},
                             {"behavior", "Isolated"},
                             {"invert", false}},
                            byte_level}}};
    return Load(j);
  };
  const std::string llama3_hf =
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  auto v = with_split(llama3_hf);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->pre_tokenizer, "llama3");
  v = with_split(kQwen2Pattern);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->pre_tokenizer, "qwen2");
  v = with_split(R"(\d+|\D+)");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->pre_tokenizer, "custom");
  EXPECT_THAT(v->pre_tokenizer_regexes, ElementsAre(R"(\d+|\D+)"));
  auto tok = MakeBpeTokenizer(std::move(v).value());
  ASSERT_TRUE(tok.ok());
  EXPECT_THAT((*tok)->Encode("ab12", false), ElementsAre(256, '1', '2'));
}

TEST(TokenizerJsonTest, DigitsAndByteLevelSequence) {
  Json j = SmallTokenizerJson();
  j["pre_tokenizer"] = {{"type", "Sequence"},
                        {"pretokenizers",
                         {{{"type", "Digits"}, {"individual_digits", true}},
                          {{"type", "ByteLevel"}, {"add_prefix_space", false}}}}};
  auto v = Load(j);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_THAT(v->pre_tokenizer_regexes, ElementsAre(R"(\p{N})", kGpt2Pattern));
}

TEST(TokenizerJsonTest, BosFromTemplateAndIgnoreMerges) {
  Json j = SmallTokenizerJson();
  j["model"]["ignore_merges"] = true;
  j["post_processor"] = {{"type", "Sequence"},
                         {"processors",
                          {{{"type", "ByteLevel"}},
                           {{"type", "TemplateProcessing"},
                            {"single",
                             {{{"SpecialToken", {{"id", "<|eot|>"}, {"type_id", 0}}}},
                              {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}}}}}};
  auto v = Load(j);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->bos_id, 258);
  EXPECT_TRUE(v->add_bos);
  EXPECT_TRUE(v->ignore_merges);
}

TEST(TokenizerJsonTest, ErrorsNameThePath) {
  auto expect_error = [](Json j, StatusCode code, const std::string& what) {
    auto v = Load(j);
    ASSERT_FALSE(v.ok()) << what;
    EXPECT_EQ(v.status().code(), code) << v.status().ToString();
    EXPECT_THAT(v.status().message(), HasSubstr(what));
  };
  Json j = SmallTokenizerJson();
  j["model"]["type"] = "WordPiece";
  expect_error(j, StatusCode::kUnimplemented, "model.type");
  j = SmallTokenizerJson();
  j["model"]["merges"][1] = "abc";
  expect_error(j, StatusCode::kInvalidArgument, "model.merges[1]");
  j = SmallTokenizerJson();
  j["model"]["vocab"]["ab"] = -3;
  expect_error(j, StatusCode::kInvalidArgument, "model.vocab[\"ab\"]");
  j = SmallTokenizerJson();
  j["model"]["vocab"]["ab"] = 257;
  expect_error(j, StatusCode::kInvalidArgument, "is used twice");
  j = SmallTokenizerJson();
  j["added_tokens"][0]["id"] = "x";
  expect_error(j, StatusCode::kInvalidArgument, "added_tokens[0].id");
  j = SmallTokenizerJson();
  j["pre_tokenizer"] = {{"type", "Whitespace"}};
  expect_error(j, StatusCode::kUnimplemented, "pre_tokenizer.type");
  j = SmallTokenizerJson();
  j["pre_tokenizer"] = nullptr;
  j["decoder"] = nullptr;
  expect_error(j, StatusCode::kUnimplemented, "not a byte-level BPE");
  j = SmallTokenizerJson();
  j["normalizer"] = {{"type", "Lowercase"}};
  expect_error(j, StatusCode::kUnimplemented, "normalizer");
  j = SmallTokenizerJson();
  j.erase("model");
  expect_error(j, StatusCode::kInvalidArgument, "model");
  EXPECT_FALSE(BpeVocabFromTokenizerJson("{").ok());
  EXPECT_FALSE(BpeVocabFromTokenizerJson("").ok());
  EXPECT_FALSE(BpeVocabFromTokenizerJson("[1,2]").ok());
}

TEST(TokenizerJsonTest, Gpt2FilesErrors) {
  EXPECT_THAT(BpeVocabFromGpt2Files(R"({"a": 0, "b": 1, "ab": 2})", "#version: 0.2\na b\nab\n")
                  .status()
                  .message(),
              HasSubstr("vocab.bpe: line 3"));
  EXPECT_THAT(BpeVocabFromGpt2Files(R"({"a": 0, "b": 5})", "").status().message(),
              HasSubstr("encoder.json"));
  auto ok = BpeVocabFromGpt2Files(R"({"a": 0, "b": 1, "ab": 2})", "#version: 0.2\r\na b\r\n");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->merges.size(), 1u);
}

}  // namespace
}  // namespace pagoda
