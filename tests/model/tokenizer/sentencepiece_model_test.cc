// Tests of the SentencePiece ModelProto loader: hand-built protos exercising the wire format,
// the real Llama 2 tokenizer.model, and >= 1000 truncated/corrupted copies of it (each must
// load or fail with a Status — never crash, hang or allocate wildly).
#include "model/tokenizer/sentencepiece_model.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "model/tokenizer/wire_reader.h"
#include "tests/model/tokenizer/llama_tokenizer.h"

namespace pagoda {
namespace {

using ::testing::HasSubstr;

// ---- A tiny protobuf writer for building test inputs ----

std::string Varint(uint64_t v) {
  std::string out;
  do {
    uint8_t b = v & 0x7F;
    v >>= 7;
    if (v) b |= 0x80;
    out.push_back(static_cast<char>(b));
  } while (v);
  return out;
}
std::string Key(uint32_t field, uint32_t wire_type) { return Varint((field << 3) | wire_type); }
std::string VarintField(uint32_t field, uint64_t v) { return Key(field, 0) + Varint(v); }
std::string LenField(uint32_t field, const std::string& payload) {
  return Key(field, 2) + Varint(payload.size()) + payload;
}
std::string FloatField(uint32_t field, float f) {
  uint32_t bits = 0;
  std::memcpy(&bits, &f, 4);
  std::string out = Key(field, 5);
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((bits >> (8 * i)) & 0xFF));
  return out;
}
std::string PieceMsg(const std::string& piece, float score, int type) {
  std::string msg = LenField(1, piece) + FloatField(2, score);
  if (type != 1) msg += VarintField(3, type);  // NORMAL is the default
  return LenField(1, msg);
}

std::string TinyPieces() {
  return PieceMsg("<unk>", 0, 2) + PieceMsg("<s>", 0, 3) + PieceMsg("</s>", 0, 3) +
         PieceMsg("\xE2\x96\x81", -1, 1) + PieceMsg("a", -2, 1) +
         PieceMsg(
             "\xE2\x96\x81"
             "a",
             -0.5f, 1) +
         PieceMsg("<0x62>", 0, 6);
}
std::string BpeTrainer(const std::string& extra = "") {
  return LenField(2, VarintField(3, 2) + VarintField(35, 1) + extra);
}
std::string Normalizer(bool remove_extra) {
  return LenField(3, LenField(1, "identity") + VarintField(3, 1) + VarintField(4, remove_extra));
}

Result<SpmVocab> Parse(const std::string& bytes) {
  return ParseSentencePieceModel(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
}

TEST(SentencePieceModelTest, ParsesHandBuiltModel) {
  auto vocab = Parse(TinyPieces() + BpeTrainer() + Normalizer(false));
  ASSERT_TRUE(vocab.ok()) << vocab.status().ToString();
  ASSERT_EQ(vocab->pieces.size(), 7u);
  EXPECT_EQ(vocab->pieces[5],
            "\xE2\x96\x81"
            "a");
  EXPECT_FLOAT_EQ(vocab->scores[5], -0.5f);
  EXPECT_EQ(vocab->kinds[0], TokenKind::kUnknown);
  EXPECT_EQ(vocab->kinds[1], TokenKind::kControl);
  EXPECT_EQ(vocab->kinds[4], TokenKind::kNormal);
  EXPECT_EQ(vocab->kinds[6], TokenKind::kByte);
  EXPECT_EQ(vocab->unk_id, 0);
  EXPECT_EQ(vocab->bos_id, 1);
  EXPECT_EQ(vocab->eos_id, 2);
  EXPECT_TRUE(vocab->byte_fallback);
  EXPECT_TRUE(vocab->add_dummy_prefix);
  EXPECT_FALSE(vocab->remove_extra_whitespaces);
  auto tok = MakeSpmTokenizer(std::move(vocab).value());
  ASSERT_TRUE(tok.ok());
  EXPECT_EQ((*tok)->Encode("ab a", true), (std::vector<int32_t>{1, 5, 6, 5}));
}

TEST(SentencePieceModelTest, DefaultsAndNegativeIds) {
  // bos_id = -1 is a 10-byte varint; unknown fields of every wire type are skipped.
  const std::string unknown = VarintField(99, 5) + LenField(98, "xyz") + FloatField(97, 1) +
                              Key(96, 1) + std::string(8, '\0');
  auto vocab = Parse(TinyPieces() + BpeTrainer(VarintField(41, uint64_t(-1)) + unknown) +
                     LenField(3, unknown) + unknown);
  ASSERT_TRUE(vocab.ok()) << vocab.status().ToString();
  EXPECT_EQ(vocab->bos_id, -1);
  EXPECT_FALSE(vocab->add_bos);
  EXPECT_TRUE(vocab->remove_extra_whitespaces);  // proto default
}

TEST(SentencePieceModelTest, RejectsUnsupportedModels) {
  auto unigram = Parse(TinyPieces() + LenField(2, VarintField(40, 0)));
  EXPECT_EQ(unigram.status().code(), StatusCode::kUnimplemented);
  EXPECT_THAT(unigram.status().message(), HasSubstr("model_type"));
  auto charsmap = Parse(TinyPieces() + BpeTrainer() + LenField(3, LenField(2, "\x01\x02")));
  EXPECT_EQ(charsmap.status().code(), StatusCode::kUnimplemented);
  EXPECT_THAT(charsmap.status().message(), HasSubstr("charsmap"));
}

TEST(SentencePieceModelTest, ErrorsNameWhatWasWrong) {
  struct Case {
    std::string bytes;
    std::string needle;
  };
  const std::vector<Case> cases = {
      {"", "no pieces"},
      {TinyPieces() + PieceMsg("x", 0, 9) + BpeTrainer(), "pieces[7]: type"},
      {LenField(1, Key(2, 0) + Varint(3)), "pieces[0]: score"},
      {Key(1, 2) + Varint(1000) + "abc", "exceeds"},
      {Key(1, 2) + Varint(uint64_t{1} << 62), "exceeds"},
      {Key(1, 2) + std::string(11, '\xFF'), "varint"},
      {Key(7, 3), "wire type"},
      {Key(0, 0) + Varint(1), "field number"},
      {"\x0F", "wire type"},
      {TinyPieces() + BpeTrainer(VarintField(40, 77)), "unk_id"},
      {TinyPieces() + BpeTrainer() + LenField(3, VarintField(3, 1)).substr(0, 3), "exceeds"},
      {TinyPieces() + BpeTrainer() + LenField(3, Key(3, 0) + "\x80"), "truncated varint"},
      {TinyPieces() + PieceMsg("<0xG1>", 0, 6) + BpeTrainer(), "pieces[7]"},
  };
  for (const Case& c : cases) {
    auto vocab = Parse(c.bytes);
    ASSERT_FALSE(vocab.ok()) << c.needle;
    EXPECT_THAT(vocab.status().message(), HasSubstr(c.needle));
  }
}

TEST(SentencePieceModelTest, MissingFileIsNotFound) {
  auto vocab = LoadSentencePieceModel("/nonexistent/tokenizer.model");
  EXPECT_EQ(vocab.status().code(), StatusCode::kNotFound);
}

std::vector<uint8_t> ReadLlamaModel() {
  std::ifstream in(testing::LlamaModelPath(), std::ios::binary);
  if (!in) {
    ADD_FAILURE() << "cannot open " << testing::LlamaModelPath();
    return {};
  }
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

TEST(SentencePieceModelTest, LoadsLlamaModel) {
  auto vocab = LoadSentencePieceModel(testing::LlamaModelPath());
  ASSERT_TRUE(vocab.ok()) << vocab.status().ToString();
  EXPECT_EQ(vocab->pieces.size(), 32000u);
  EXPECT_EQ(vocab->unk_id, 0);
  EXPECT_EQ(vocab->bos_id, 1);
  EXPECT_EQ(vocab->eos_id, 2);
  EXPECT_TRUE(vocab->add_bos);
  EXPECT_TRUE(vocab->byte_fallback);
  EXPECT_TRUE(vocab->add_dummy_prefix);
  EXPECT_FALSE(vocab->remove_extra_whitespaces);
  EXPECT_EQ(vocab->pieces[15043],
            "\xE2\x96\x81"
            "Hello");
  EXPECT_EQ(vocab->kinds[3], TokenKind::kByte);
}

// Applies one random corruption: truncation, byte flips, or overwrites near the ends (where
// the first pieces and the trainer/normalizer specs live).
std::vector<uint8_t> Corrupt(const std::vector<uint8_t>& good, std::mt19937& rng) {
  std::vector<uint8_t> bad = good;
  const size_t n = good.size();
  switch (rng() % 4) {
    case 0:
      bad.resize(rng() % n);
      break;
    case 1:
      for (int i = 0, flips = 1 + rng() % 8; i < flips; ++i) bad[rng() % n] ^= 1u << (rng() % 8);
      break;
    case 2:
      for (int i = 0, k = 1 + rng() % 4; i < k; ++i) bad[rng() % std::min<size_t>(n, 512)] = rng();
      break;
    default:
      for (int i = 0, k = 1 + rng() % 4; i < k; ++i)
        bad[n - 1 - rng() % std::min<size_t>(n, 1024)] = rng();
      break;
  }
  return bad;
}

TEST(SentencePieceModelTest, SurvivesThousandsOfCorruptions) {
  const std::vector<uint8_t> good = ReadLlamaModel();
  ASSERT_FALSE(good.empty());
  std::mt19937 rng(12345);
  int loaded = 0, rejected = 0;
  for (int iter = 0; iter < 1200; ++iter) {
    const std::vector<uint8_t> bad = Corrupt(good, rng);
    auto vocab = ParseSentencePieceModel(bad);
    if (!vocab.ok()) {
      EXPECT_FALSE(vocab.status().message().empty());
      ++rejected;
      continue;
    }
    ++loaded;
    auto tok = MakeSpmTokenizer(std::move(vocab).value());
    ASSERT_TRUE(tok.ok()) << "a parsed vocabulary failed validation: " << tok.status().ToString();
    const std::vector<int32_t> ids = (*tok)->Encode("Hello world \xF0\x9F\xA6\x99 <s>", true);
    (void)(*tok)->Decode(ids);
  }
  EXPECT_GT(loaded, 0);
  EXPECT_GT(rejected, 0);
  std::cout << "corruptions: " << loaded << " loaded, " << rejected << " rejected\n";
}

TEST(SentencePieceModelTest, EveryTruncationOfASmallModelIsHandled) {
  const std::string good = TinyPieces() + BpeTrainer() + Normalizer(false);
  int rejected = 0;
  for (size_t len = 0; len < good.size(); ++len) {
    auto vocab = Parse(good.substr(0, len));
    if (!vocab.ok()) {
      ++rejected;
    } else {
      // Only a cut at a field boundary after the trainer spec can still parse.
      EXPECT_EQ(vocab->pieces.size(), 7u) << "cut at " << len;
    }
  }
  EXPECT_GT(rejected, static_cast<int>(good.size()) * 9 / 10);
}

}  // namespace
}  // namespace pagoda
