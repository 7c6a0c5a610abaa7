// Tests of the SentencePiece tokenizer: the Llama 2 reference encodings, special-token
// handling, byte fallback, decoding rules, vocabulary validation and BPE details on small
// synthetic vocabularies.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "model/tokenizer/spm_tokenizer.h"
#include "model/tokenizer/utf8.h"
#include "tests/model/tokenizer/llama_tokenizer.h"

namespace pagoda {
namespace {

using ::pagoda::testing::LlamaReferenceCases;
using ::pagoda::testing::LlamaTokenizer;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<std::string> Pieces(const Tokenizer& tok, const std::vector<int32_t>& ids) {
  std::vector<std::string> pieces;
  for (int32_t id : ids) pieces.emplace_back(tok.Piece(id));
  return pieces;
}

std::string StreamDecode(const Tokenizer& tok, const std::vector<int32_t>& ids) {
  StreamingDecoder decoder(tok);
  std::string out;
  for (int32_t id : ids) {
    const std::string delta = decoder.Push(id);
    EXPECT_TRUE(utf8::IsValid(delta)) << "invalid UTF-8 delta after id " << id;
    out += delta;
  }
  const std::string tail = decoder.Flush();
  EXPECT_TRUE(utf8::IsValid(tail));
  return out + tail;
}

TEST(LlamaSpmTest, ReferenceCasesMatchExactly) {
  const Tokenizer* tok = LlamaTokenizer();
  ASSERT_NE(tok, nullptr);
  const nlohmann::json cases = LlamaReferenceCases();
  ASSERT_GE(cases.size(), 20u) << "reference.json has too few cases";
  int passed = 0;
  for (const auto& c : cases) {
    const std::string text = c["text"];
    SCOPED_TRACE("text: '" + text + "'");
    const std::vector<int32_t> want_ids = c["ids_no_bos"];
    const std::vector<std::string> want_pieces = c["pieces"];
    const std::string want_decoded = c["decoded"];
    const std::vector<int32_t> ids = tok->Encode(text, /*add_bos=*/false);
    EXPECT_EQ(ids, want_ids);
    EXPECT_EQ(Pieces(*tok, ids), want_pieces);
    EXPECT_EQ(tok->Decode(want_ids), want_decoded);
    EXPECT_EQ(StreamDecode(*tok, want_ids), want_decoded);
    std::vector<int32_t> with_bos = {1};
    with_bos.insert(with_bos.end(), want_ids.begin(), want_ids.end());
    EXPECT_EQ(tok->Encode(text, /*add_bos=*/true), with_bos);
    EXPECT_EQ(tok->Decode(with_bos), want_decoded);
    EXPECT_EQ(StreamDecode(*tok, with_bos), want_decoded);
    passed += (ids == want_ids && tok->Decode(want_ids) == want_decoded) ? 1 : 0;
  }
  EXPECT_EQ(passed, static_cast<int>(cases.size()));
}

TEST(LlamaSpmTest, VocabularyBasics) {
  const Tokenizer* tok = LlamaTokenizer();
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->vocab_size(), 32000);
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_EQ(tok->eos_id(), 2);
  EXPECT_TRUE(tok->add_bos_by_default());
  EXPECT_EQ(tok->Piece(1), "<s>");
  EXPECT_EQ(tok->Kind(1), TokenKind::kControl);
  EXPECT_EQ(tok->Kind(0), TokenKind::kUnknown);
  EXPECT_EQ(tok->Kind(13), TokenKind::kByte);
  EXPECT_EQ(tok->Piece(13), "<0x0A>");
  EXPECT_EQ(tok->TokenBytes(13), "\n");
  EXPECT_EQ(tok->TokenBytes(15043), " Hello");  // raw bytes: no stripping
  EXPECT_EQ(tok->TokenBytes(1), "");
  EXPECT_EQ(tok->TokenBytes(243), "\xF0");
}

TEST(LlamaSpmTest, ControlTokenTextIsNotSpecial) {
  const Tokenizer* tok = LlamaTokenizer();
  ASSERT_NE(tok, nullptr);
  for (const char* text : {"<s>", "</s>", "<unk>", "a<s>b", "<s><s></s>"}) {
    for (int32_t id : tok->Encode(text, /*add_bos=*/false)) {
      EXPECT_NE(tok->Kind(id), TokenKind::kControl) << text;
      EXPECT_NE(id, 1) << text;
      EXPECT_NE(id, 2) << text;
    }
  }
  EXPECT_EQ(tok->Decode(tok->Encode("<s>", false)), "<s>");
}

// In special spans (a chat template's own text) "<s>" / "</s>" are the control tokens, and
// the text after each gets its dummy-prefix space (as llama.cpp and Hugging Face encode
// "<s>[INST]"); outside them they stay plain text.
TEST(LlamaSpmTest, ControlTokensInsideSpecialSpans) {
  const Tokenizer* tok = LlamaTokenizer();
  ASSERT_NE(tok, nullptr);
  const std::string text = "<s>Hello</s><s>world";
  const std::vector<TextSpan> all = {{0, text.size()}};
  const auto hello = tok->Encode("Hello", false);
  const auto world = tok->Encode("world", false);
  std::vector<int32_t> want = {1};
  want.insert(want.end(), hello.begin(), hello.end());
  want.push_back(2);
  want.push_back(1);
  want.insert(want.end(), world.begin(), world.end());
  EXPECT_EQ(tok->EncodeWithSpecials(text, all, false), want);
  EXPECT_EQ(tok->EncodeWithSpecials(text, {}, false), tok->Encode(text, false));
  const std::vector<TextSpan> head = {{0, 3}};  // only the first "<s>" is template text
  auto ids = tok->EncodeWithSpecials(text, head, true);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 1), 2);  // add_bos + the template's "<s>"
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 2), 0);
}

TEST(LlamaSpmTest, AddBos) {
  const Tokenizer* tok = LlamaTokenizer();
  ASSERT_NE(tok, nullptr);
  EXPECT_THAT(tok->Encode("Hello world", true), ElementsAre(1, 15043, 3186));
  EXPECT_THAT(tok->Encode("Hello world", false), ElementsAre(15043, 3186));
  EXPECT_THAT(tok->Encode("", true), ElementsAre(1));
  EXPECT_TRUE(tok->Encode("", false).empty());
}

TEST(LlamaSpmTest, ByteFallbackForEmojiAndRareCjk) {
  const Tokenizer* tok = LlamaTokenizer();
  ASSERT_NE(tok, nullptr);
  // U+1F999 llama is not in the vocabulary: four byte tokens F0 9F A6 99.
  EXPECT_THAT(tok->Encode("\xF0\x9F\xA6\x99", false), ElementsAre(29871, 243, 162, 169, 156));
  // A rare CJK extension-B character (U+20BB7 𠮷) also falls back to its bytes.
  const std::string rare = "\xF0\xA0\xAE\xB7";
  const std::vector<int32_t> ids = tok->Encode(rare, false);
  ASSERT_EQ(ids.size(), 5u);
  for (size_t i = 1; i < ids.size(); ++i) {
    EXPECT_EQ(tok->Kind(ids[i]), TokenKind::kByte);
    EXPECT_EQ(tok->TokenBytes(ids[i]), rare.substr(i - 1, 1));
  }
  EXPECT_EQ(tok->Decode(ids), rare);
  // Common CJK characters are whole pieces.
  EXPECT_THAT(tok->Encode("日本", false), ElementsAre(29871, 30325, 30346));
}

TEST(LlamaSpmTest, InvalidUtf8InputBecomesReplacementChar) {
  const Tokenizer* tok = LlamaTokenizer();
  ASSERT_NE(tok, nullptr);
  const std::vector<int32_t> ids = tok->Encode(
      "a\xFF"
      "b",
      false);
  EXPECT_EQ(tok->Decode(ids),
            "a\xEF\xBF\xBD"
            "b");
}

TEST(LlamaSpmTest, DecodeDropsOnlyTheFirstDummyPrefixSpace) {
  const Tokenizer* tok = LlamaTokenizer();
  ASSERT_NE(tok, nullptr);
  const std::vector<int32_t> hello_world = {15043, 3186};  // ▁Hello ▁world
  EXPECT_EQ(tok->Decode(hello_world), "Hello world");
  EXPECT_EQ(tok->Decode(std::vector<int32_t>{1, 15043, 3186}), "Hello world");
  EXPECT_EQ(tok->Decode(std::vector<int32_t>{29871, 15043}), " Hello");  // ▁ ▁Hello
  EXPECT_EQ(tok->Decode(std::vector<int32_t>{259}), " ");                // ▁▁
  EXPECT_EQ(tok->Decode(std::vector<int32_t>{3186, 15043}), "world Hello");
  EXPECT_EQ(tok->Decode(std::vector<int32_t>{11526, 3186}), "world world");  // world ▁world
  EXPECT_EQ(tok->Decode(std::vector<int32_t>{13, 15043}), "\n Hello");       // <0x0A> ▁Hello
  EXPECT_EQ(tok->Decode(std::vector<int32_t>{0, 15043}), " \xE2\x81\x87  Hello");  // unk
}

TEST(LlamaSpmTest, DecodeRepairsBrokenUtf8AndIgnoresBadIds) {
  const Tokenizer* tok = LlamaTokenizer();
  ASSERT_NE(tok, nullptr);
  // F0 9F then "x": each stray byte becomes one U+FFFD (SentencePiece's rule).
  EXPECT_EQ(tok->Decode(std::vector<int32_t>{243, 162, 29916}), "\xEF\xBF\xBD\xEF\xBF\xBDx");
  EXPECT_EQ(tok->Decode(std::vector<int32_t>{-1, 32000, 15043, 1 << 30}), "Hello");
  EXPECT_EQ(tok->TokenBytes(-7), "");
  EXPECT_EQ(tok->Piece(32000), "");
}

TEST(LlamaSpmTest, LongInputIsFastAndRoundTrips) {
  const Tokenizer* tok = LlamaTokenizer();
  ASSERT_NE(tok, nullptr);
  std::mt19937 rng(7);
  const std::vector<std::string> words = {"the", "quick", "ß",     "日本",   "🦙", "a",
                                          "\n",  "  ",    "naïve", "zzzzzz", "1234", "Здравствуй"};
  std::string text;
  while (text.size() < (1u << 20)) text += words[rng() % words.size()] + " ";
  text += std::string(200000, 'a');  // one long run without spaces
  const auto start = std::chrono::steady_clock::now();
  const std::vector<int32_t> ids = tok->Encode(text, false);
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(secs, 30.0) << "encoding 1.2 MB took " << secs << " s";
  EXPECT_EQ(tok->Decode(ids), text);
}

TEST(LlamaSpmTest, ConcurrentEncodeIsConsistent) {
  const Tokenizer* tok = LlamaTokenizer();
  ASSERT_NE(tok, nullptr);
  const nlohmann::json cases = LlamaReferenceCases();
  ASSERT_GE(cases.size(), 20u) << "reference.json has too few cases";
  std::vector<std::thread> threads;
  std::vector<int> failures(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 20; ++round) {
        for (const auto& c : cases) {
          const std::vector<int32_t> want = c["ids_no_bos"];
          if (tok->Encode(c["text"].get<std::string>(), false) != want) ++failures[t];
          if (tok->Decode(want) != c["decoded"].get<std::string>()) ++failures[t];
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_THAT(failures, ElementsAre(0, 0, 0, 0));
}

// ---- Synthetic vocabularies ----

SpmVocab TinyVocab() {
  SpmVocab v;
  auto add = [&v](std::string piece, float score, TokenKind kind) {
    v.pieces.push_back(std::move(piece));
    v.scores.push_back(score);
    v.kinds.push_back(kind);
  };
  add("<unk>", 0, TokenKind::kUnknown);         // 0
  add("<s>", 0, TokenKind::kControl);           // 1
  add("</s>", 0, TokenKind::kControl);          // 2
  add("\xE2\x96\x81", -1, TokenKind::kNormal);  // 3 ▁
  add("a", -1, TokenKind::kNormal);             // 4
  add("b", -1, TokenKind::kNormal);             // 5
  add("c", -1, TokenKind::kNormal);             // 6
  add("aa", 0, TokenKind::kNormal);             // 7
  add("bc", -0.5, TokenKind::kUnused);          // 8
  add("abc", 1, TokenKind::kNormal);            // 9
  add("<tag>", 0, TokenKind::kUserDefined);     // 10
  add("<0x41>", 0, TokenKind::kByte);           // 11 'A'
  add("s", -1, TokenKind::kNormal);             // 12
  add(">", -1, TokenKind::kNormal);             // 13
  add("<", -1, TokenKind::kNormal);             // 14
  v.unk_id = 0;
  v.bos_id = 1;
  v.eos_id = 2;
  v.add_dummy_prefix = false;
  return v;
}

std::unique_ptr<Tokenizer> Make(SpmVocab v) {
  auto tok = MakeSpmTokenizer(std::move(v));
  EXPECT_TRUE(tok.ok()) << tok.status().ToString();
  return tok.ok() ? std::move(tok).value() : nullptr;
}

TEST(SpmSyntheticTest, TiesMergeLeftmostFirst) {
  auto tok = Make(TinyVocab());
  ASSERT_NE(tok, nullptr);
  EXPECT_THAT(tok->Encode("aaa", false), ElementsAre(7, 4));
  EXPECT_THAT(tok->Encode("aaaa", false), ElementsAre(7, 7));
}

TEST(SpmSyntheticTest, UnusedPiecesAreResegmented) {
  auto tok = Make(TinyVocab());
  ASSERT_NE(tok, nullptr);
  EXPECT_THAT(tok->Encode("bc", false), ElementsAre(5, 6));  // "bc" is unused
  EXPECT_THAT(tok->Encode("abc", false), ElementsAre(9));    // but can merge on to "abc"
}

TEST(SpmSyntheticTest, UserDefinedPiecesMatchFirstButControlDoesNot) {
  auto tok = Make(TinyVocab());
  ASSERT_NE(tok, nullptr);
  EXPECT_THAT(tok->Encode("a<tag>a", false), ElementsAre(4, 10, 4));
  EXPECT_THAT(tok->Encode("<s>", false), ElementsAre(14, 12, 13));
}

TEST(SpmSyntheticTest, ByteFallbackAndUnknownRuns) {
  SpmVocab v = TinyVocab();
  auto with_bytes = Make(v);
  ASSERT_NE(with_bytes, nullptr);
  EXPECT_THAT(with_bytes->Encode("aAZ", false), ElementsAre(4, 11, 0));  // no <0x5A>: unk
  v.byte_fallback = false;
  auto no_bytes = Make(v);
  ASSERT_NE(no_bytes, nullptr);
  EXPECT_THAT(no_bytes->Encode("aXYZa", false), ElementsAre(4, 0, 4));  // one unk for the run
  EXPECT_EQ(no_bytes->Decode(std::vector<int32_t>{4, 0, 4}), "a \xE2\x81\x87 a");
}

TEST(SpmSyntheticTest, WhitespaceOptions) {
  SpmVocab v = TinyVocab();
  v.add_dummy_prefix = true;
  auto keep = Make(v);
  ASSERT_NE(keep, nullptr);
  EXPECT_THAT(keep->Encode(" a  b ", false), ElementsAre(3, 3, 4, 3, 3, 5, 3));
  v.remove_extra_whitespaces = true;
  auto squeeze = Make(v);
  ASSERT_NE(squeeze, nullptr);
  EXPECT_THAT(squeeze->Encode("  a   b  ", false), ElementsAre(3, 4, 3, 5));
  EXPECT_TRUE(squeeze->Encode("   ", false).empty());
  // With remove_extra_whitespaces every leading "▁" is dropped when decoding.
  EXPECT_EQ(squeeze->Decode(std::vector<int32_t>{3, 3, 4}), "a");
  EXPECT_EQ(keep->Decode(std::vector<int32_t>{3, 3, 4}), " a");
}

TEST(SpmValidationTest, ErrorsNameTheField) {
  auto expect_error = [](SpmVocab v, const std::string& needle) {
    auto tok = MakeSpmTokenizer(std::move(v));
    ASSERT_FALSE(tok.ok()) << needle;
    EXPECT_EQ(tok.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(tok.status().message(), HasSubstr(needle));
  };
  SpmVocab v = TinyVocab();
  v.scores.pop_back();
  expect_error(v, "scores");
  v = TinyVocab();
  v.kinds.push_back(TokenKind::kNormal);
  expect_error(v, "kinds");
  v = TinyVocab();
  v.kinds[5] = static_cast<TokenKind>(9);
  expect_error(v, "kinds[5]");
  v = TinyVocab();
  v.bos_id = 99;
  expect_error(v, "bos_id");
  v = TinyVocab();
  v.eos_id = -2;
  expect_error(v, "eos_id");
  v = TinyVocab();
  v.unk_id = 15;
  expect_error(v, "unk_id");
  v = TinyVocab();
  v.pieces[11] = "<0xZZ>";
  expect_error(v, "pieces[11]");
  v = TinyVocab();
  v.scores[4] = std::nanf("");
  expect_error(v, "scores[4]");
  expect_error(SpmVocab{}, "pieces is empty");
}

}  // namespace
}  // namespace pagoda
