// GGUF round trip of a byte-level BPE vocabulary: write the GPT-2 tokens/merges/types/pre with
// GgufWriter, read them back with BpeVocabFromGguf, and check the reference encodings; plus
// errors naming the metadata key.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "model/gguf.h"
#include "model/gguf_bpe.h"
#include "model/gguf_writer.h"
#include "model/tokenizer/bpe_tokenizer.h"
#include "tests/model/tokenizer/bpe_test_util.h"

namespace pagoda {
namespace {

using ::pagoda::testing::Gpt2ReferenceCases;
using ::pagoda::testing::Gpt2Vocab;
using ::pagoda::testing::TempDir;
using ::testing::HasSubstr;

// Writes `v` as llama.cpp does for a "gpt2" tokenizer (bos = eos = `special_id`).
Result<std::unique_ptr<GgufFile>> WriteAndOpen(const BpeVocab& v, const TempDir& dir,
                                               const std::string& model = "gpt2",
                                               uint32_t special_id = 50256) {
  GgufWriter w;
  w.AddString("general.architecture", "gpt2");
  w.AddString("tokenizer.ggml.model", model);
  w.AddString("tokenizer.ggml.pre", v.pre_tokenizer);
  w.AddStringArray("tokenizer.ggml.tokens", v.tokens);
  std::vector<int32_t> types;
  for (TokenKind k : v.kinds) types.push_back(static_cast<int32_t>(k));
  w.AddInt32Array("tokenizer.ggml.token_type", types);
  std::vector<std::string> merges;
  for (const auto& [a, b] : v.merges) merges.push_back(a + " " + b);
  w.AddStringArray("tokenizer.ggml.merges", merges);
  w.AddUint32("tokenizer.ggml.bos_token_id", special_id);
  w.AddUint32("tokenizer.ggml.eos_token_id", special_id);
  w.AddUint32("tokenizer.ggml.unknown_token_id", 0xFFFFFFFFu);
  w.AddBool("tokenizer.ggml.add_bos_token", false);
  const std::string path = dir.File("bpe.gguf");
  PAGODA_RETURN_IF_ERROR(w.Write(path));
  return GgufFile::Open(path);
}

TEST(BpeGgufTest, RoundTripMatchesReference) {
  const BpeVocab& original = Gpt2Vocab();
  ASSERT_FALSE(original.tokens.empty());
  TempDir dir;
  auto file = WriteAndOpen(original, dir);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  auto vocab = BpeVocabFromGguf(**file);
  ASSERT_TRUE(vocab.ok()) << vocab.status().ToString();
  EXPECT_EQ(vocab->tokens, original.tokens);
  EXPECT_EQ(vocab->kinds, original.kinds);
  EXPECT_EQ(vocab->merges, original.merges);
  EXPECT_EQ(vocab->pre_tokenizer, "gpt2");
  EXPECT_EQ(vocab->bos_id, 50256);
  EXPECT_EQ(vocab->eos_id, 50256);
  EXPECT_EQ(vocab->unk_id, -1);
  EXPECT_FALSE(vocab->add_bos);
  EXPECT_FALSE(vocab->ignore_merges);
  auto tok = MakeBpeTokenizer(std::move(vocab).value());
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  int matched = 0;
  const nlohmann::json cases = Gpt2ReferenceCases();
  ASSERT_GE(cases.size(), 28u) << "too few reference cases";
  for (const auto& c : cases) {
    const auto want = c["gpt2_ids"].get<std::vector<int32_t>>();
    const std::vector<int32_t> ids = (*tok)->Encode(c["text"].get<std::string>(), false);
    EXPECT_EQ(ids, want) << c["text"];
    matched += ids == want;
  }
  std::printf("GGUF round trip: %d/%zu reference cases matched\n", matched, cases.size());
  EXPECT_EQ(matched, static_cast<int>(cases.size()));
}

TEST(BpeGgufTest, Llama3PreSetsIgnoreMergesAndAddBosDefault) {
  BpeVocab v = Gpt2Vocab();
  v.pre_tokenizer = "llama-bpe";
  TempDir dir;
  auto file = WriteAndOpen(v, dir);
  ASSERT_TRUE(file.ok());
  auto vocab = BpeVocabFromGguf(**file);
  ASSERT_TRUE(vocab.ok()) << vocab.status().ToString();
  EXPECT_TRUE(vocab->ignore_merges);
  EXPECT_FALSE(vocab->add_bos);  // the explicit key wins
  EXPECT_TRUE(MakeBpeTokenizer(std::move(vocab).value()).ok());
}

TEST(BpeGgufTest, ErrorsNameTheKey) {
  BpeVocab v;
  v.tokens = {"a", "b", "ab"};
  v.kinds.assign(3, TokenKind::kNormal);
  v.merges = {{"a", "b"}};
  TempDir dir;
  auto expect_error = [&](const std::string& model, uint32_t special_id, const std::string& what) {
    auto file = WriteAndOpen(v, dir, model, special_id);
    ASSERT_TRUE(file.ok()) << file.status().ToString();
    auto vocab = BpeVocabFromGguf(**file);
    ASSERT_FALSE(vocab.ok()) << what;
    EXPECT_THAT(vocab.status().message(), HasSubstr(what));
  };
  {
    auto file = WriteAndOpen(v, dir, "gpt2", 2);
    ASSERT_TRUE(file.ok());
    auto vocab = BpeVocabFromGguf(**file);
    ASSERT_TRUE(vocab.ok()) << vocab.status().ToString();
    EXPECT_EQ(vocab->pre_tokenizer, "gpt2");
  }
  expect_error("gpt2", 3, "tokenizer.ggml.bos_token_id");  // out of range
  expect_error("llama", 2, "tokenizer.ggml.model");
  v.merges = {{"a", "b"}, {"ab", ""}};
  expect_error("gpt2", 2, "tokenizer.ggml.merges'[1]");
  v.merges = {};
  v.kinds[1] = static_cast<TokenKind>(7);
  expect_error("gpt2", 2, "tokenizer.ggml.token_type'[1]");
}

}  // namespace
}  // namespace pagoda
