// Fuzz-style tests: randomly corrupted tokenizer.json files must load or fail cleanly (never
// crash; run under ASan too), and random byte strings must encode without crashing, their
// TokenBytes must concatenate back to the input, and valid UTF-8 must decode back exactly.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "model/tokenizer/bpe_tokenizer.h"
#include "model/tokenizer/tokenizer_json.h"
#include "model/tokenizer/utf8.h"
#include "tests/model/tokenizer/bpe_test_util.h"

namespace pagoda {
namespace {

using ::pagoda::testing::Gpt2Path;
using ::pagoda::testing::MakeGpt2Tokenizer;
using ::pagoda::testing::ReadFileOrFail;
using Json = nlohmann::json;

// The GPT-2 tokenizer.json cut down to its first `merges` merges (and the tokens they make),
// so that a thousand loads stay fast; <|endoftext|> is kept as the last id.
std::string ReducedTokenizerJson(size_t merges) {
  Json j = Json::parse(ReadFileOrFail(Gpt2Path("tokenizer.json")));
  const auto limit = static_cast<int64_t>(256 + merges);
  Json vocab = Json::object();
  for (const auto& [token, id] : j["model"]["vocab"].items()) {
    if (id.get<int64_t>() < limit) vocab[token] = id;
  }
  vocab["<|endoftext|>"] = limit;
  j["model"]["vocab"] = vocab;
  Json& m = j["model"]["merges"];
  m.erase(m.begin() + static_cast<std::ptrdiff_t>(merges), m.end());
  j["added_tokens"][0]["id"] = limit;
  return j.dump();
}

// One random corruption of `text`: flips, deletions, insertions, duplications, truncation.
std::string Corrupt(std::string text, std::mt19937& rng) {
  static const char kChars[] = "{}[]\",:0123456789-truenullfalse \\u";
  const int edits = 1 + static_cast<int>(rng() % 4);
  for (int e = 0; e < edits && !text.empty(); ++e) {
    const size_t pos = rng() % text.size();
    switch (rng() % 6) {
      case 0:
        text[pos] = static_cast<char>(rng());
        break;
      case 1:
        text[pos] = kChars[rng() % (sizeof(kChars) - 1)];
        break;
      case 2:
        text.erase(pos, 1 + rng() % 16);
        break;
      case 3:
        text.insert(pos, 1, kChars[rng() % (sizeof(kChars) - 1)]);
        break;
      case 4:
        text.insert(pos, text.substr(rng() % text.size(), 1 + rng() % 64));
        break;
      default:
        text.resize(pos);
        break;
    }
  }
  return text;
}

// One random structural mutation of a parsed tokenizer.json (valid JSON, hostile content).
void Mutate(Json& j, std::mt19937& rng) {
  static const std::vector<Json> kValues = {nullptr,
                                            -1,
                                            0,
                                            1,
                                            2147483647,
                                            4294967296LL,
                                            -9223372036854775807LL,
                                            1.5,
                                            true,
                                            "",
                                            "a b",
                                            "a",
                                            " ",
                                            Json::array(),
                                            Json::object(),
                                            Json::array({"a", "b", "c"}),
                                            Json::array({1, 2}),
                                            "(",
                                            "\\p{Q}",
                                            "ByteLevel",
                                            "Sequence",
                                            "Split",
                                            "BPE"};
  std::vector<Json*> path = {&j};
  Json* node = &j;
  for (int depth = 0; depth < 5; ++depth) {
    if (node->is_object() && !node->empty()) {
      auto it = node->begin();
      std::advance(it, rng() % node->size());
      node = &it.value();
    } else if (node->is_array() && !node->empty()) {
      node = &(*node)[rng() % node->size()];
    } else {
      break;
    }
    if (rng() % 3 == 0) break;
  }
  *node = kValues[rng() % kValues.size()];
}

// The tokenizer a (corrupted) tokenizer.json loads into, or the error that refuses it.
Result<std::unique_ptr<Tokenizer>> LoadBpe(const std::string& text) {
  auto vocab = BpeVocabFromTokenizerJson(text);
  if (!vocab.ok()) return vocab.status();
  return MakeBpeTokenizer(std::move(vocab).value());
}

TEST(BpeFuzzTest, CorruptedTokenizerJsonNeverCrashes) {
  const std::string base = ReducedTokenizerJson(2000);
  ASSERT_TRUE(BpeVocabFromTokenizerJson(base).ok());
  const Json parsed = Json::parse(base);
  std::mt19937 rng(1234);
  int loaded = 0, rejected = 0;
  for (int i = 0; i < 1200; ++i) {
    std::string text;
    if (i % 2 == 0) {
      text = Corrupt(base, rng);
    } else {
      Json j = parsed;
      for (int k = 0, n = 1 + static_cast<int>(rng() % 3); k < n; ++k) Mutate(j, rng);
      text = j.dump();
    }
    auto tok = LoadBpe(text);
    if (!tok.ok()) {
      ++rejected;
      EXPECT_FALSE(tok.status().message().empty());
      continue;
    }
    ++loaded;
    const std::vector<int32_t> ids = (*tok)->Encode("Hello <|endoftext|> wörld 123!", true);
    (*tok)->Decode(ids);
  }
  std::printf("corrupted tokenizer.json: %d loaded, %d rejected\n", loaded, rejected);
  EXPECT_GT(loaded, 0);
  EXPECT_GT(rejected, 0);
}

// Corrupted copies of GPT-2's whole tokenizer.json: each is refused with a message, or loads
// into a tokenizer whose encodings stay inside its vocabulary.
TEST(BpeFuzzTest, CorruptedFullTokenizerJson) {
  const std::string base = ReadFileOrFail(Gpt2Path("tokenizer.json"));
  ASSERT_TRUE(BpeVocabFromTokenizerJson(base).ok());
  std::mt19937 rng(99);
  int rejected = 0;
  for (int i = 0; i < 20; ++i) {
    auto tok = LoadBpe(Corrupt(base, rng));
    if (!tok.ok()) {
      ++rejected;
      EXPECT_FALSE(tok.status().message().empty());
      continue;
    }
    const std::vector<int32_t> ids = (*tok)->Encode("Hello <|endoftext|> world 123!", false);
    EXPECT_FALSE(ids.empty());
    for (int32_t id : ids) {
      EXPECT_TRUE(id >= 0 && id < (*tok)->vocab_size()) << id;
    }
  }
  EXPECT_GT(rejected, 0);
}

// Deep nesting is refused before nlohmann's recursive parser sees it (it overflowed the stack).
TEST(BpeFuzzTest, DeeplyNestedTokenizerJsonIsRefused) {
  const std::string deep = std::string(200000, '[') + std::string(200000, ']');
  const Status st = BpeVocabFromTokenizerJson(deep).status();
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("tokenizer.json: JSON nested deeper than 256 levels"),
            std::string::npos)
      << st.ToString();
}

// Random strings: raw bytes, ASCII soup, and valid UTF-8 from assorted ranges.
std::string RandomText(std::mt19937& rng) {
  static const std::vector<std::string> kPieces = {" ",
                                                   "  ",
                                                   "\n",
                                                   "\r\n",
                                                   "\t",
                                                   "'s",
                                                   "'LL",
                                                   "a",
                                                   "Z",
                                                   "7",
                                                   "123",
                                                   ".",
                                                   "!?",
                                                   "é",
                                                   "ß",
                                                   "\xC2\xA0",
                                                   "日本",
                                                   "д",
                                                   "🦙",
                                                   "👩\u200d👧",
                                                   "\u200b",
                                                   "<|endoftext|>",
                                                   "<|",
                                                   "|>",
                                                   "  x",
                                                   "\xEF\xBF\xBD",
                                                   "\xF4\x8F\xBF\xBF"};
  std::string s;
  const int n = static_cast<int>(rng() % 64);
  const int mode = static_cast<int>(rng() % 3);
  for (int i = 0; i < n; ++i) {
    if (mode == 0) {
      s.push_back(static_cast<char>(rng()));
    } else if (mode == 1) {
      s.push_back(static_cast<char>(1 + rng() % 127));
    } else {
      s += kPieces[rng() % kPieces.size()];
    }
  }
  return s;
}

TEST(BpeFuzzTest, RandomStringsRoundTrip) {
  for (const char* pre : {"gpt2", "llama3", "qwen2", "starcoder", "falcon"}) {
    auto tok = MakeGpt2Tokenizer(pre);
    ASSERT_NE(tok, nullptr);
    std::mt19937 rng(7);
    int valid = 0;
    for (int i = 0; i < 1000; ++i) {
      const std::string s = RandomText(rng);
      const std::vector<int32_t> ids = tok->Encode(s, false);
      std::string raw;
      for (int32_t id : ids) {
        ASSERT_GE(id, 0);
        ASSERT_LT(id, tok->vocab_size());
        raw += tok->TokenBytes(id);
      }
      if (s.find("<|endoftext|>") == std::string::npos) {
        EXPECT_EQ(raw, s) << pre;
      }
      const std::string decoded = tok->Decode(ids);
      EXPECT_TRUE(utf8::IsValid(decoded));
      if (utf8::IsValid(s) && s.find("<|endoftext|>") == std::string::npos) {
        ++valid;
        EXPECT_EQ(decoded, s) << pre;
      }
    }
    EXPECT_GT(valid, 400) << pre;
  }
}

}  // namespace
}  // namespace pagoda
