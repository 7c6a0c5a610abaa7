// Token masks: the trie walk against a naive reference (every token tried on a copy of the
// matcher) over random vocabularies and random grammar states, end ids, the LRU cache, and
// (printed, never asserted) the walk's cost on a 32000-token vocabulary.
#include "scheduler/grammar/token_mask.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <random>
#include <string>
#include <vector>

namespace pagoda::grammar {
namespace testing {
extern const char kJsonGbnf[];  // grammar_matcher_test.cc
}
namespace {

std::shared_ptr<const Grammar> Parse(const std::string& text) {
  auto g = ParseGbnf(text);
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  return g.ok() ? *g : nullptr;
}

// The reference: token i allowed iff it has bytes, is no end id and a copy accepts it; end ids
// iff accepting.
TokenMask NaiveMask(const GrammarMatcher& m, const std::vector<std::string>& vocab,
                    const std::vector<int32_t>& end_ids) {
  TokenMask mask;
  mask.words.assign((vocab.size() + 63) / 64, 0);
  auto set = [&](size_t i) { mask.words[i / 64] |= uint64_t{1} << (i % 64); };
  for (size_t i = 0; i < vocab.size(); ++i) {
    const bool is_end =
        std::find(end_ids.begin(), end_ids.end(), static_cast<int32_t>(i)) != end_ids.end();
    if (is_end) {
      if (m.IsAccepting()) set(i);
    } else if (!vocab[i].empty() && m.CanAccept(vocab[i])) {
      set(i);
    }
  }
  return mask;
}

// Random tokens over `alphabet` (whole strings picked as units, so multi-byte characters can
// be split by taking single bytes too), 1..max_len pieces, plus some empty tokens.
std::vector<std::string> RandomVocab(std::mt19937& rng, const std::vector<std::string>& alphabet,
                                     size_t size, int max_len) {
  std::vector<std::string> vocab;
  std::uniform_int_distribution<size_t> pick(0, alphabet.size() - 1);
  std::uniform_int_distribution<int> len(1, max_len);
  for (size_t i = 0; i < size; ++i) {
    std::string t;
    if (i % 97 != 5) {
      for (int k = len(rng); k > 0; --k) t += alphabet[pick(rng)];
    }
    vocab.push_back(t);
  }
  vocab.push_back(vocab[10]);  // a duplicate
  return vocab;
}

std::vector<std::string> JsonAlphabet() {
  std::vector<std::string> a = {"{",        "}",
                                "[",        "]",
                                "\"",       ":",
                                ",",        " ",
                                "\n",       "0",
                                "1",        "9",
                                "-",        ".",
                                "e",        "E",
                                "+",        "t",
                                "r",        "u",
                                "f",        "a",
                                "l",        "s",
                                "n",        "\\",
                                "x",        "k",
                                "ey",       "\": ",
                                "\xC3\xA9", "\xC3",
                                "\xA9",     "\xE4\xB8\xAD",
                                "\x01",     "\xFF",
                                "true",     "null",
                                "\\u00"};
  return a;
}

// Walks random allowed tokens; at each state compares the masker with the reference.
void CompareAlongRandomWalks(const std::string& grammar, const std::vector<std::string>& alphabet,
                             uint32_t seed, size_t memo_positions = size_t{1} << 23) {
  std::mt19937 rng(seed);
  auto g = Parse(grammar);
  ASSERT_NE(g, nullptr);
  const std::vector<std::string> vocab = RandomVocab(rng, alphabet, 1500, 5);
  const std::vector<int32_t> end_ids = {3, 7};
  const TokenTrie trie(vocab, end_ids);
  TokenMasker masker(memo_positions);
  for (int walk = 0; walk < 6; ++walk) {
    GrammarMatcher m(g);
    for (int step = 0; step < 25; ++step) {
      TokenMask mask;
      masker.Compute(m, trie, &mask);
      const TokenMask expected = NaiveMask(m, vocab, end_ids);
      ASSERT_EQ(mask.words, expected.words) << "walk " << walk << " step " << step;
      std::vector<int32_t> text_tokens;
      for (int32_t i = 0; i < static_cast<int32_t>(vocab.size()); ++i) {
        if (mask.Allowed(i) && i != 3 && i != 7) text_tokens.push_back(i);
      }
      if (text_tokens.empty()) break;
      const int32_t t = text_tokens[rng() % text_tokens.size()];
      ASSERT_TRUE(m.Accept(vocab[static_cast<size_t>(t)]));
    }
  }
}

TEST(TokenMask, MatchesNaiveReferenceOnJson) {
  for (uint32_t seed = 1; seed <= 4; ++seed) {
    CompareAlongRandomWalks(testing::kJsonGbnf, JsonAlphabet(), seed);
  }
}

TEST(TokenMask, MatchesNaiveReferenceOnAmbiguousAndUnicodeGrammars) {
  const std::vector<std::string> alphabet = {"a",    "b",    "c",        "\xC3\xA9",         "\xC3",
                                             "\xA9", "\xE4", "\xB8\xAD", "\xF0\x9F\x98\x80", "\x9F",
                                             "-"};
  CompareAlongRandomWalks(R"(root ::= ("a" | "ab")* "b" [^a]{0,3} (. "-")*)", alphabet, 11);
  CompareAlongRandomWalks(R"(root ::= x+ "c"
x ::= "a" x "b" | "a" | [é中]+)",
                          alphabet, 12);
}

TEST(TokenMask, MatchesNaiveReferenceWhenTheMemoIsFull) {
  // With room for a few states only, most of the walk runs on unmemoized (transient) states.
  CompareAlongRandomWalks(testing::kJsonGbnf, JsonAlphabet(), 21, /*memo_positions=*/64);
}

TEST(TokenMask, OneMaskerServesGrammarsInTurn) {
  auto json = Parse(testing::kJsonGbnf);
  auto digits = Parse(R"(root ::= [0-9]+ ("," [0-9]+)*)");
  const std::vector<std::string> vocab = {"1", "12", ",", "{", "\"a\"", "1,2", "x", "{\"", "}"};
  const TokenTrie trie(vocab, std::vector<int32_t>{});
  TokenMasker masker;
  GrammarMatcher a(json), b(digits);
  TokenMask mask;
  for (int round = 0; round < 3; ++round) {
    masker.Compute(a, trie, &mask);
    EXPECT_EQ(mask.words, NaiveMask(a, vocab, {}).words) << round;
    masker.Compute(b, trie, &mask);
    EXPECT_EQ(mask.words, NaiveMask(b, vocab, {}).words) << round;
    ASSERT_TRUE(a.Accept(round == 0 ? "{\"" : "a"));
    ASSERT_TRUE(b.Accept("1,"));
  }
}

TEST(TokenMask, EndIdsOnlyWhenAccepting) {
  auto g = Parse(R"(root ::= "ab" "c"?)");
  const std::vector<std::string> vocab = {"a", "b", "c", "</s>", "ab", "", "abc"};
  const TokenTrie trie(vocab, std::vector<int32_t>{3, 99, -1});
  GrammarMatcher m(g);
  TokenMask mask;
  ComputeTokenMask(m, trie, &mask);
  EXPECT_TRUE(mask.Allowed(0));
  EXPECT_FALSE(mask.Allowed(1));
  EXPECT_FALSE(mask.Allowed(3));
  EXPECT_TRUE(mask.Allowed(4));
  EXPECT_FALSE(mask.Allowed(5));  // no bytes: never text
  EXPECT_TRUE(mask.Allowed(6));
  EXPECT_EQ(mask.Count(), 3u);
  ASSERT_TRUE(m.Accept("ab"));
  ComputeTokenMask(m, trie, &mask);
  EXPECT_TRUE(mask.Allowed(2));
  EXPECT_TRUE(mask.Allowed(3));  // accepting: EOS may end the output
  EXPECT_EQ(mask.Count(), 2u);
  ASSERT_TRUE(m.Accept("c"));
  ComputeTokenMask(m, trie, &mask);
  EXPECT_EQ(mask.Count(), 1u);  // terminated: only EOS
  EXPECT_TRUE(mask.Allowed(3));
}

TEST(TokenMaskCache, HitsEqualFreshComputationAndEvictLeastRecentlyUsed) {
  auto g = Parse(testing::kJsonGbnf);
  std::mt19937 rng(5);
  const std::vector<std::string> vocab = RandomVocab(rng, JsonAlphabet(), 800, 4);
  auto trie = std::make_shared<const TokenTrie>(vocab, std::vector<int32_t>{0});
  TokenMaskCache cache(trie, 2);
  GrammarMatcher a(g), b(g), c(g);
  ASSERT_TRUE(b.Accept("{\"k"));
  ASSERT_TRUE(c.Accept("[1"));
  TokenMask fresh;
  const TokenMask first = cache.Get(b);
  EXPECT_EQ(cache.misses(), 1u);
  GrammarMatcher b2(g);
  ASSERT_TRUE(b2.Accept("{\"kxyz"));  // the same state inside the string
  EXPECT_EQ(cache.Get(b2).words, first.words);
  EXPECT_EQ(cache.hits(), 1u);
  ComputeTokenMask(b2, *trie, &fresh);
  EXPECT_EQ(first.words, fresh.words);
  cache.Get(a);  // miss; cache holds b, a
  cache.Get(b);  // hit; b most recent
  cache.Get(c);  // miss; evicts a
  EXPECT_EQ(cache.misses(), 3u);
  cache.Get(b);
  EXPECT_EQ(cache.hits(), 3u);
  ComputeTokenMask(a, *trie, &fresh);
  EXPECT_EQ(cache.Get(a).words, fresh.words);  // recomputed after eviction
  EXPECT_EQ(cache.misses(), 4u);
}

// A synthetic 32000-token vocabulary shaped like a BPE one: bytes, words with and without a
// leading space, digit runs, punctuation runs, CJK characters.
std::vector<std::string> SyntheticVocab() {
  std::mt19937 rng(42);
  std::vector<std::string> vocab;
  for (int b = 0; b < 256; ++b) vocab.emplace_back(1, static_cast<char>(b));
  const std::string letters = "etaoinshrdlcumwfgypbvkjxqz";
  const std::vector<std::string> punct = {"\"",  ",",   ":",   "{",  "}",  "[", "]",   "\":", "\",",
                                          "\"}", "{\"", " \"", "\n", "  ", ".", "\\n", "'"};
  while (vocab.size() < 32000) {
    const int kind = static_cast<int>(rng() % 10);
    std::string t;
    if (kind < 6) {
      if (rng() % 2) t += ' ';
      for (int n = 2 + static_cast<int>(rng() % 8); n > 0; --n) t += letters[rng() % 26];
    } else if (kind == 6) {
      for (int n = 1 + static_cast<int>(rng() % 3); n > 0; --n)
        t += static_cast<char>('0' + rng() % 10);
    } else if (kind < 9) {
      for (int n = 1 + static_cast<int>(rng() % 3); n > 0; --n) t += punct[rng() % punct.size()];
    } else {
      const uint32_t cp = 0x4E00 + rng() % 0x5000;
      t += static_cast<char>(0xE0 | (cp >> 12));
      t += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      t += static_cast<char>(0x80 | (cp & 0x3F));
    }
    vocab.push_back(t);
  }
  return vocab;
}

double CpuMicros() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
}

// Prints the cost of a mask (thread CPU time): cold = a new masker, warm = the same state again
// with the automaton already built (a TokenMaskCache hit would not even walk).
TEST(TokenMask, TimingOn32kVocabularyIsPrinted) {
  auto g = Parse(testing::kJsonGbnf);
  const std::vector<std::string> vocab = SyntheticVocab();
  const TokenTrie trie(vocab, std::vector<int32_t>{2});
  for (const char* prefix : {"", "{", R"({"name": "abc)", R"({"n": 12)", R"({"a": [1, {"b": )"}) {
    GrammarMatcher m(g);
    ASSERT_TRUE(m.Accept(prefix));
    TokenMask mask;
    const int iters = 10;
    double cold = 0, warm = 0;
    for (int i = 0; i < iters; ++i) {
      TokenMasker masker;
      const double t0 = CpuMicros();
      masker.Compute(m, trie, &mask);
      const double t1 = CpuMicros();
      masker.Compute(m, trie, &mask);
      warm += CpuMicros() - t1;
      cold += t1 - t0;
    }
    std::printf(
        "[ timing ] vocab %zu (%zu trie nodes), after '%s': %zu allowed, cold %.0f us, "
        "warm %.0f us\n",
        vocab.size(), trie.num_nodes(), prefix, mask.Count(), cold / iters, warm / iters);
    EXPECT_EQ(mask.words, NaiveMask(m, vocab, {2}).words);
  }
}

}  // namespace
}  // namespace pagoda::grammar
