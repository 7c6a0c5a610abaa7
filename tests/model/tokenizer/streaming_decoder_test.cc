// Tests of StreamingDecoder: deltas are always valid UTF-8, incomplete characters are held
// back, and the concatenated output equals Decode() of the whole sequence.
#include <gtest/gtest.h>

#include <chrono>
#include <random>
#include <string>
#include <vector>

#include "model/tokenizer/utf8.h"
#include "tests/model/tokenizer/llama_tokenizer.h"

namespace pagoda {
namespace {

using ::pagoda::testing::LlamaTokenizer;

TEST(StreamingDecoderTest, HoldsBackSplitCharacters) {
  const Tokenizer* tok = LlamaTokenizer();
  ASSERT_NE(tok, nullptr);
  StreamingDecoder d(*tok);
  EXPECT_EQ(d.Push(1), "");                    // <s>
  EXPECT_EQ(d.Push(29871), "");                // "▁" at the start: its space is dropped
  EXPECT_EQ(d.Push(243), "");                  // F0
  EXPECT_EQ(d.Push(162), "");                  // 9F
  EXPECT_EQ(d.Push(169), "");                  // A6
  EXPECT_EQ(d.Push(156), "\xF0\x9F\xA6\x99");  // 99 completes 🦙
  EXPECT_EQ(d.Push(15043), " Hello");
  EXPECT_EQ(d.Push(243), "");
  EXPECT_EQ(d.Flush(), "\xEF\xBF\xBD");  // incomplete tail
}

TEST(StreamingDecoderTest, InvalidBytesAreReplacedEagerly) {
  const Tokenizer* tok = LlamaTokenizer();
  ASSERT_NE(tok, nullptr);
  StreamingDecoder d(*tok);
  EXPECT_EQ(d.Push(15043), "Hello");
  EXPECT_EQ(d.Push(243), "");  // F0 could start a character
  EXPECT_EQ(d.Push(3 + 'A'),
            "\xEF\xBF\xBD"
            "A");  // 'A' proves it cannot
  EXPECT_EQ(d.Flush(), "");
}

// Random sequences biased towards byte tokens, controls, unk and "▁"-only pieces.
std::vector<int32_t> RandomIds(std::mt19937& rng, int32_t vocab_size) {
  std::vector<int32_t> ids(rng() % 40);
  for (int32_t& id : ids) {
    switch (rng() % 6) {
      case 0:
        id = 3 + static_cast<int32_t>(rng() % 256);  // byte token
        break;
      case 1:
        id = static_cast<int32_t>(rng() % 3);  // unk, <s>, </s>
        break;
      case 2:
        id = rng() % 2 ? 29871 : 259;  // "▁", "▁▁"
        break;
      case 3: {
        static const int32_t kUtf8Split[] = {243, 162, 169, 156, 230, 154};
        id = kUtf8Split[rng() % 6];
        break;
      }
      default:
        id = static_cast<int32_t>(rng() % vocab_size);
    }
  }
  return ids;
}

TEST(StreamingDecoderTest, RandomSequencesMatchDecode) {
  const Tokenizer* tok = LlamaTokenizer();
  ASSERT_NE(tok, nullptr);
  std::mt19937 rng(99);
  for (int iter = 0; iter < 3000; ++iter) {
    const std::vector<int32_t> ids = RandomIds(rng, tok->vocab_size());
    StreamingDecoder d(*tok);
    std::string streamed;
    for (int32_t id : ids) {
      const std::string delta = d.Push(id);
      ASSERT_TRUE(utf8::IsValid(delta));
      streamed += delta;
    }
    streamed += d.Flush();
    ASSERT_EQ(streamed, tok->Decode(ids)) << "iteration " << iter;
  }
}

TEST(StreamingDecoderTest, ConstantTimePerToken) {
  const Tokenizer* tok = LlamaTokenizer();
  ASSERT_NE(tok, nullptr);
  std::string text;
  for (int i = 0; i < 20000; ++i) text += "Once upon a time 🦙 日本語 ";
  const std::vector<int32_t> ids = tok->Encode(text, true);
  ASSERT_GT(ids.size(), 200000u);
  const auto start = std::chrono::steady_clock::now();
  StreamingDecoder d(*tok);
  std::string streamed;
  for (int32_t id : ids) streamed += d.Push(id);
  streamed += d.Flush();
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(streamed, text);
  EXPECT_LT(secs, 10.0) << ids.size() << " tokens took " << secs << " s";
}

TEST(Utf8Test, ExamineChar) {
  size_t len = 0;
  EXPECT_EQ(utf8::ExamineChar("a", &len), utf8::CharStatus::kValid);
  EXPECT_EQ(len, 1u);
  EXPECT_EQ(utf8::ExamineChar("\xE6\x97\xA5", &len), utf8::CharStatus::kValid);
  EXPECT_EQ(len, 3u);
  EXPECT_EQ(utf8::ExamineChar("\xE6\x97", &len), utf8::CharStatus::kIncomplete);
  EXPECT_EQ(utf8::ExamineChar("\xC0\x80", &len), utf8::CharStatus::kInvalid);      // overlong
  EXPECT_EQ(utf8::ExamineChar("\xED\xA0\x80", &len), utf8::CharStatus::kInvalid);  // surrogate
  EXPECT_EQ(utf8::ExamineChar("\xF4\x90", &len), utf8::CharStatus::kInvalid);      // > U+10FFFF
  EXPECT_EQ(utf8::ExamineChar("\x80", &len), utf8::CharStatus::kInvalid);
  EXPECT_EQ(utf8::MakeValid("a\xE6\x97"
                            "b"),
            "a\xEF\xBF\xBD\xEF\xBF\xBD"
            "b");
}

}  // namespace
}  // namespace pagoda
