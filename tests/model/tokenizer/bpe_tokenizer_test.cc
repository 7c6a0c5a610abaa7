// Tests of the byte-level BPE tokenizer: the GPT-2 reference encodings (from tokenizer.json and
// from encoder.json + vocab.bpe), decoding, streaming, added/special tokens, merge order on
// small synthetic vocabularies, validation, thread safety and long inputs.
#include "model/tokenizer/bpe_tokenizer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "model/tokenizer/tokenizer_json.h"
#include "model/tokenizer/utf8.h"
#include "tests/model/tokenizer/bpe_test_util.h"

namespace pagoda {
namespace {

using ::pagoda::testing::Gpt2Path;
using ::pagoda::testing::Gpt2ReferenceCases;
using ::pagoda::testing::MakeGpt2Tokenizer;
using ::pagoda::testing::ReadFileOrFail;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string StreamDecode(const Tokenizer& tok, const std::vector<int32_t>& ids) {
  StreamingDecoder decoder(tok);
  std::string out;
  for (int32_t id : ids) {
    const std::string delta = decoder.Push(id);
    EXPECT_TRUE(utf8::IsValid(delta)) << "invalid UTF-8 delta after id " << id;
    out += delta;
  }
  return out + decoder.Flush();
}

// Checks every reference case; returns how many matched exactly.
int CheckReference(const Tokenizer& tok) {
  const nlohmann::json cases = Gpt2ReferenceCases();
  EXPECT_GE(cases.size(), 28u);
  int matched = 0;
  for (const auto& c : cases) {
    const std::string text = c["text"];
    const auto want = c["gpt2_ids"].get<std::vector<int32_t>>();
    const std::vector<int32_t> ids = tok.Encode(text, /*add_bos=*/false);
    EXPECT_EQ(ids, want) << "text: " << text;
    EXPECT_EQ(tok.Decode(ids), c["gpt2_decoded"].get<std::string>()) << "text: " << text;
    EXPECT_EQ(tok.Decode(want), text);
    EXPECT_EQ(StreamDecode(tok, want), text);
    matched += ids == want;
  }
  return matched;
}

TEST(BpeTokenizerTest, ReferenceFromTokenizerJson) {
  auto tok = MakeGpt2Tokenizer();
  ASSERT_NE(tok, nullptr);
  const int matched = CheckReference(*tok);
  EXPECT_EQ(matched, static_cast<int>(Gpt2ReferenceCases().size()));
  std::printf("tokenizer.json: %d/%zu reference cases matched\n", matched,
              Gpt2ReferenceCases().size());
  EXPECT_EQ(tok->vocab_size(), 50257);
  EXPECT_EQ(tok->eos_id(), 50256);
  EXPECT_EQ(tok->bos_id(), -1);
  EXPECT_FALSE(tok->add_bos_by_default());
}

TEST(BpeTokenizerTest, ReferenceFromEncoderJsonAndVocabBpe) {
  auto vocab = BpeVocabFromGpt2Files(ReadFileOrFail(Gpt2Path("encoder.json")),
                                     ReadFileOrFail(Gpt2Path("vocab.bpe")));
  ASSERT_TRUE(vocab.ok()) << vocab.status().ToString();
  EXPECT_EQ(vocab->merges.size(), 50000u);
  auto tok = MakeBpeTokenizer(std::move(vocab).value());
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  const int matched = CheckReference(**tok);
  EXPECT_EQ(matched, static_cast<int>(Gpt2ReferenceCases().size()));
  std::printf("encoder.json+vocab.bpe: %d/%zu reference cases matched\n", matched,
              Gpt2ReferenceCases().size());
  EXPECT_EQ((*tok)->eos_id(), 50256);
  EXPECT_EQ((*tok)->Kind(50256), TokenKind::kControl);
}

TEST(BpeTokenizerTest, TokenBytesAndPieces) {
  auto tok = MakeGpt2Tokenizer();
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->Piece(995), "\xC4\xA0world");  // "Ġworld"
  EXPECT_EQ(tok->TokenBytes(995), " world");
  EXPECT_EQ(tok->TokenBytes(198), "\n");
  EXPECT_EQ(tok->Kind(995), TokenKind::kNormal);
  EXPECT_EQ(tok->Piece(50256), "<|endoftext|>");
  EXPECT_EQ(tok->TokenBytes(50256), "");  // control
  EXPECT_EQ(tok->TokenBytes(-1), "");
  EXPECT_EQ(tok->TokenBytes(50257), "");
  EXPECT_EQ(tok->Piece(1 << 30), "");
  EXPECT_EQ(tok->Kind(-5), TokenKind::kUnused);
  // Byte tokens that are incomplete UTF-8 on their own.
  const std::vector<int32_t> ids = tok->Encode("\xF0\x9F\xA6\x99", false);  // 🦙
  std::string raw;
  for (int32_t id : ids) raw += tok->TokenBytes(id);
  EXPECT_EQ(raw, "\xF0\x9F\xA6\x99");
  ASSERT_GT(ids.size(), 1u);
  const std::string partial = tok->Decode(std::vector<int32_t>{ids[0]});
  EXPECT_TRUE(partial.starts_with("\xEF\xBF\xBD")) << partial;  // U+FFFD
  EXPECT_TRUE(utf8::IsValid(partial));
}

TEST(BpeTokenizerTest, ControlTokensAreMatchedBeforePreTokenization) {
  auto tok = MakeGpt2Tokenizer();
  ASSERT_NE(tok, nullptr);
  // "a<|endoftext|>b": the pre-tokenizer alone would split "<|" + "endoftext" + "|>".
  EXPECT_THAT(tok->Encode("a<|endoftext|>b", false), ElementsAre(64, 50256, 65));
  EXPECT_THAT(tok->Encode("<|endoftext|><|endoftext|>", false), ElementsAre(50256, 50256));
  EXPECT_THAT(tok->Encode(" <|endoftext|>", false), ElementsAre(220, 50256));
  // Decode skips control tokens.
  EXPECT_EQ(tok->Decode(tok->Encode("a<|endoftext|>b", false)), "ab");
  EXPECT_EQ(StreamDecode(*tok, {50256, 64, 50256, 65}), "ab");
  // A partial special token is plain text.
  EXPECT_EQ(tok->Decode(tok->Encode("<|endoftext|", false)), "<|endoftext|");

  BpeVocab v = testing::Gpt2Vocab();
  v.match_control_tokens = false;
  auto plain = MakeBpeTokenizer(std::move(v));
  ASSERT_TRUE(plain.ok());
  const std::vector<int32_t> ids = (*plain)->Encode("<|endoftext|>", false);
  EXPECT_GT(ids.size(), 1u);
  EXPECT_EQ((*plain)->Decode(ids), "<|endoftext|>");
}

TEST(BpeTokenizerTest, AddBos) {
  BpeVocab v = testing::Gpt2Vocab();
  v.bos_id = 50256;
  auto tok = MakeBpeTokenizer(v);
  ASSERT_TRUE(tok.ok());
  EXPECT_THAT((*tok)->Encode("Hello", true), ElementsAre(50256, 15496));
  EXPECT_THAT((*tok)->Encode("Hello", false), ElementsAre(15496));
  EXPECT_THAT((*tok)->Encode("", true), ElementsAre(50256));
}

// A tiny vocabulary: the 256 byte symbols, then `extra` tokens.
BpeVocab TinyVocab(const std::vector<std::string>& extra,
                   std::vector<std::pair<std::string, std::string>> merges) {
  BpeVocab v;
  for (int b = 0; b < 256; ++b) v.tokens.push_back(ByteLevelEncode(std::string(1, char(b))));
  for (const auto& t : extra) v.tokens.push_back(t);
  v.kinds.assign(v.tokens.size(), TokenKind::kNormal);
  v.merges = std::move(merges);
  return v;
}

TEST(BpeTokenizerTest, MergesApplyLowestRankFirstLeftmostOnTies) {
  // "aaa": the (a, a) merge applies to the leftmost pair first -> "aa" + "a".
  auto tok = MakeBpeTokenizer(TinyVocab({"aa", "aaa"}, {{"a", "a"}}));
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  EXPECT_THAT((*tok)->Encode("aaa", false), ElementsAre(256, 'a'));
  EXPECT_THAT((*tok)->Encode("aaaa", false), ElementsAre(256, 256));
  // Rank order, not length: (b, c) outranks (a, b) in "abc".
  auto tok2 = MakeBpeTokenizer(TinyVocab({"ab", "bc"}, {{"b", "c"}, {"a", "b"}}));
  ASSERT_TRUE(tok2.ok());
  EXPECT_THAT((*tok2)->Encode("abc", false), ElementsAre('a', 257));
  // A merge whose result is not a token is ignored.
  auto tok3 = MakeBpeTokenizer(TinyVocab({"xy"}, {{"x", "z"}, {"x", "y"}}));
  ASSERT_TRUE(tok3.ok());
  EXPECT_THAT((*tok3)->Encode("xzxy", false), ElementsAre('x', 'z', 256));
}

TEST(BpeTokenizerTest, IgnoreMergesEmitsWholeTokens) {
  // "abc" is a token but no merge sequence reaches it.
  BpeVocab v = TinyVocab({"abc", "ab"}, {{"a", "b"}});
  auto plain = MakeBpeTokenizer(v);
  ASSERT_TRUE(plain.ok());
  EXPECT_THAT((*plain)->Encode("abc", false), ElementsAre(257, 'c'));
  v.ignore_merges = true;
  auto ignoring = MakeBpeTokenizer(v);
  ASSERT_TRUE(ignoring.ok());
  EXPECT_THAT((*ignoring)->Encode("abc", false), ElementsAre(256));
}

TEST(BpeTokenizerTest, UserDefinedTokensLongestMatchRawText) {
  BpeVocab v = TinyVocab({"<a>", "<a><b>", "hi there", "<ctl>"}, {});
  v.kinds[256] = TokenKind::kUserDefined;
  v.kinds[257] = TokenKind::kUserDefined;
  v.kinds[258] = TokenKind::kUserDefined;
  v.kinds[259] = TokenKind::kControl;
  v.match_control_tokens = false;
  auto tok = MakeBpeTokenizer(v);
  ASSERT_TRUE(tok.ok());
  EXPECT_THAT((*tok)->Encode("x<a><b>y", false), ElementsAre('x', 257, 'y'));
  EXPECT_THAT((*tok)->Encode("<a><c>", false), ElementsAre(256, '<', 'c', '>'));
  EXPECT_THAT((*tok)->Encode("hi there", false), ElementsAre(258));
  EXPECT_EQ((*tok)->TokenBytes(258), "hi there");  // raw text, not byte-level decoded
  EXPECT_EQ((*tok)->Decode((*tok)->Encode("<ctl>hi there", false)), "<ctl>hi there");
}

// EncodeWithSpecials: control tokens only wholly inside the special spans (a chat template's
// own text); user-defined tokens anywhere; the text between encoded as Encode would.
TEST(BpeTokenizerTest, ControlTokensOnlyInsideSpecialSpans) {
  BpeVocab v = TinyVocab({"<|im_end|>", "<u>"}, {});
  v.kinds[256] = TokenKind::kControl;
  v.kinds[257] = TokenKind::kUserDefined;
  auto tok = MakeBpeTokenizer(v);
  ASSERT_TRUE(tok.ok());
  const std::string text = "a<|im_end|>b<|im_end|><u>";  // [0,1) a, [1,11) eot, 11 b, [12,22)
  const std::vector<TextSpan> first = {{0, 11}};
  EXPECT_THAT((*tok)->EncodeWithSpecials(text, first, false),
              ElementsAre('a', 256, 'b', '<', '|', 'i', 'm', '_', 'e', 'n', 'd', '|', '>', 257));
  const std::vector<TextSpan> all = {{0, text.size()}};
  EXPECT_EQ((*tok)->EncodeWithSpecials(text, all, false), (*tok)->Encode(text, false));
  EXPECT_THAT((*tok)->EncodeWithSpecials(text, all, true), ElementsAre('a', 256, 'b', 256, 257));
  // A token straddling the end of a span is plain text: "<|im_" template + "end|>" content.
  const std::vector<TextSpan> cut = {{1, 5}};
  EXPECT_EQ((*tok)->EncodeWithSpecials("a<|im_end|>", cut, false).size(), 11u);
  EXPECT_EQ((*tok)->EncodeWithSpecials("a<|im_end|>", {}, false).size(), 11u);
  // Spans after the text or several spans.
  const std::vector<TextSpan> two = {{0, 1}, {1, 10}, {30, 2}};
  EXPECT_THAT((*tok)->EncodeWithSpecials("a<|im_end|>", two, false), ElementsAre('a', 256));
}

TEST(BpeTokenizerTest, AddPrefixSpace) {
  BpeVocab v = TinyVocab({}, {});
  v.add_prefix_space = true;
  auto tok = MakeBpeTokenizer(v);
  ASSERT_TRUE(tok.ok());
  EXPECT_THAT((*tok)->Encode("a", false), ElementsAre(' ', 'a'));
  EXPECT_THAT((*tok)->Encode(" a", false), ElementsAre(' ', 'a'));
  EXPECT_THAT((*tok)->Encode("", false), ElementsAre());
}

TEST(BpeTokenizerTest, MissingByteSymbolsBecomeUnkOrAreDropped) {
  BpeVocab v;
  v.tokens = {"a", "b", "<unk>"};
  v.kinds = {TokenKind::kNormal, TokenKind::kNormal, TokenKind::kUnknown};
  auto tok = MakeBpeTokenizer(v);
  ASSERT_TRUE(tok.ok());
  EXPECT_THAT((*tok)->Encode("abc", false), ElementsAre(0, 1));
  v.unk_id = 2;
  auto with_unk = MakeBpeTokenizer(v);
  ASSERT_TRUE(with_unk.ok());
  EXPECT_THAT((*with_unk)->Encode("abc", false), ElementsAre(0, 1, 2));
}

TEST(BpeTokenizerTest, ByteLevelAlphabet) {
  EXPECT_EQ(ByteLevelEncode(" "), "\xC4\xA0");   // Ġ
  EXPECT_EQ(ByteLevelEncode("\n"), "\xC4\x8A");  // Ċ
  EXPECT_EQ(ByteLevelEncode("A!~"), "A!~");
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  const std::string encoded = ByteLevelEncode(all);
  EXPECT_TRUE(utf8::IsValid(encoded));
  auto decoded = ByteLevelDecode(encoded);
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(*decoded, all);
  EXPECT_FALSE(ByteLevelDecode(" ").ok());  // a raw space is not in the alphabet
  EXPECT_FALSE(ByteLevelDecode("\xE2\x96\x81").ok());
  EXPECT_FALSE(ByteLevelDecode("\xC4").ok());
}

TEST(BpeTokenizerTest, Validation) {
  BpeVocab v = TinyVocab({}, {});
  v.kinds.pop_back();
  EXPECT_THAT(MakeBpeTokenizer(v).status().message(), HasSubstr("BpeVocab.kinds has 255"));
  v = TinyVocab({}, {});
  v.kinds[3] = static_cast<TokenKind>(9);
  EXPECT_THAT(MakeBpeTokenizer(v).status().message(), HasSubstr("BpeVocab.kinds[3] = 9"));
  v = TinyVocab({}, {});
  v.eos_id = 256;
  EXPECT_THAT(MakeBpeTokenizer(v).status().message(), HasSubstr("BpeVocab.eos_id = 256"));
  v = TinyVocab({}, {});
  v.pre_tokenizer = "klingon";
  EXPECT_THAT(MakeBpeTokenizer(v).status().message(),
              HasSubstr("BpeVocab.pre_tokenizer = 'klingon'"));
  v = TinyVocab({}, {});
  v.pre_tokenizer_regexes = {"(unclosed"};
  const Status st = MakeBpeTokenizer(v).status();
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr("pre_tokenizer_regexes"));
  EXPECT_THAT(st.message(), HasSubstr("pattern [0]"));
  EXPECT_FALSE(MakeBpeTokenizer(BpeVocab()).ok());
}

TEST(BpeTokenizerTest, ConcurrentEncodeIsConsistent) {
  auto tok = MakeGpt2Tokenizer("llama3");
  ASSERT_NE(tok, nullptr);
  const std::string text = "Concurrent encoding 1234567 of naïve text, isn't it? 🦙\n\n  ok";
  const std::vector<int32_t> want = tok->Encode(text, false);
  std::vector<std::thread> threads;
  std::vector<int> bad(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) bad[t] += tok->Encode(text, false) != want;
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_THAT(bad, ElementsAre(0, 0, 0, 0));
}

TEST(BpeTokenizerTest, LongInputsAreFast) {
  auto tok = MakeGpt2Tokenizer("llama3");
  ASSERT_NE(tok, nullptr);
  for (const std::string& text :
       {std::string(1 << 20, 'a'), std::string(1 << 20, ' '), std::string(1 << 19, '7'),
        std::string(1 << 18, '\n') + std::string(1 << 18, ' ')}) {
    const auto start = std::chrono::steady_clock::now();
    const std::vector<int32_t> ids = tok->Encode(text, false);
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_LT(secs, 30.0);
    EXPECT_EQ(tok->Decode(ids), text);
  }
}

}  // namespace
}  // namespace pagoda
