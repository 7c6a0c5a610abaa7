// Tests of the pre-tokenizers: the GPT-2 and Llama 3 reference chunks, the digit-splitting
// variants, custom regexes, empty matches and invalid UTF-8.
#include "model/tokenizer/pretokenizer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/model/tokenizer/bpe_test_util.h"

namespace pagoda {
namespace {

using ::pagoda::testing::Gpt2ReferenceCases;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<std::string> Chunks(std::string_view name, std::string_view text) {
  auto r = PreTokenize(name, text);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : std::vector<std::string>();
}

void CheckReferenceChunks(const char* name, const char* field) {
  const nlohmann::json cases = Gpt2ReferenceCases();
  ASSERT_GE(cases.size(), 28u);
  int matched = 0;
  for (const auto& c : cases) {
    const std::string text = c["text"];
    const auto want = c[field].get<std::vector<std::string>>();
    EXPECT_EQ(Chunks(name, text), want) << name << " text: " << text;
    matched += Chunks(name, text) == want;
  }
  std::printf("%s: %d/%zu reference chunkings matched\n", field, matched, cases.size());
}

TEST(PreTokenizerTest, Gpt2ReferenceChunks) { CheckReferenceChunks("gpt2", "gpt2_pretokens"); }

TEST(PreTokenizerTest, Llama3ReferenceChunks) {
  CheckReferenceChunks("llama3", "llama3_pretokens");
  CheckReferenceChunks("llama-bpe", "llama3_pretokens");
}

TEST(PreTokenizerTest, DigitVariants) {
  EXPECT_THAT(Chunks("llama3", "x1234567"), ElementsAre("x", "123", "456", "7"));
  EXPECT_THAT(Chunks("qwen2", "x123"), ElementsAre("x", "1", "2", "3"));
  EXPECT_THAT(Chunks("starcoder", "ab 123 cd"), ElementsAre("ab", " ", "1", "2", "3", " cd"));
  EXPECT_THAT(Chunks("smollm", "a12"), ElementsAre("a", "1", "2"));
  EXPECT_THAT(Chunks("gpt2", "a 123"), ElementsAre("a", " 123"));
  EXPECT_THAT(Chunks("falcon", "1234567 ok!"), ElementsAre("123", "456", "7", " ok", "!"));
}

TEST(PreTokenizerTest, Qwen2ContractionsAreCaseInsensitive) {
  EXPECT_THAT(Chunks("qwen2", "IT'S"), ElementsAre("IT", "'S"));
  EXPECT_THAT(Chunks("gpt2", "IT'S"), ElementsAre("IT", "'", "S"));
}

TEST(PreTokenizerTest, UnknownNameAndBadRegex) {
  const auto r = PreTokenize("nope", "x");
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(r.status().message(), HasSubstr("'nope'"));
  const auto bad = PreTokenizer::Compile({"a", "[z-a]"});
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("pattern [1]"));
}

TEST(PreTokenizerTest, CustomRegexKeepsGapsAndSkipsEmptyMatches) {
  auto pt = PreTokenizer::Compile({"b*"});  // matches empty strings between non-b characters
  ASSERT_TRUE(pt.ok());
  EXPECT_THAT(pt->Split("abbcb"), ElementsAre("a", "bb", "c", "b"));
  auto end_anchor = PreTokenizer::Compile({"$", "(?=b)"});  // empty matches only
  ASSERT_TRUE(end_anchor.ok());
  EXPECT_THAT(end_anchor->Split("ab"), ElementsAre("ab"));
  auto none = PreTokenizer::Compile({});
  ASSERT_TRUE(none.ok());
  EXPECT_THAT(none->Split("a b"), ElementsAre("a b"));
  EXPECT_THAT(none->Split(""), ElementsAre());
}

TEST(PreTokenizerTest, InvalidUtf8BytesAreOwnChunks) {
  EXPECT_THAT(Chunks("gpt2",
                     "ab\xFF"
                     "cd \xC3"),
              ElementsAre("ab", "\xFF", "cd", " ", "\xC3"));
  EXPECT_THAT(Chunks("llama3", "\x80\x80"), ElementsAre("\x80", "\x80"));
}

}  // namespace
}  // namespace pagoda
