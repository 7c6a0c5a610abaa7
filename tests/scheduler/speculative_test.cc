// The n-gram proposer and the speculative config's checks (scheduler/speculative.h). The engine
// with speculation is tested in engine_test.cc (NgramSpeculation*).
#include "scheduler/speculative.h"

#include <gtest/gtest.h>

#include <random>

namespace pagoda {
namespace {

using Tokens = std::vector<int32_t>;

TEST(ProposeNgramTest, LongestSuffixLatestOccurrence) {
  // Suffix "2 3" occurred at 1 and 5; the longest match is "1 2 3" at 0 (only there).
  const Tokens t = {1, 2, 3, 9, 7, 2, 3, 8, 1, 2, 3};
  EXPECT_EQ(ProposeNgram(t, 1, 3, 2), (Tokens{9, 7}));
  // Up to bigrams: "2 3" latest earlier at 5, followed by 8 1.
  EXPECT_EQ(ProposeNgram(t, 1, 2, 2), (Tokens{8, 1}));
  // k limits; the continuation runs into the suffix itself, then repeats with period 4.
  EXPECT_EQ(ProposeNgram(t, 1, 2, 1), (Tokens{8}));
  EXPECT_EQ(ProposeNgram(t, 1, 2, 6), (Tokens{8, 1, 2, 3, 8, 1}));
  EXPECT_EQ(ProposeNgram(Tokens{4, 5, 4}, 1, 1, 5), (Tokens{5, 4, 5, 4, 5}));
}

TEST(ProposeNgramTest, NothingWithoutAnEarlierOccurrence) {
  EXPECT_TRUE(ProposeNgram(Tokens{1, 2, 3, 4}, 1, 3, 4).empty());
  EXPECT_TRUE(ProposeNgram(Tokens{5}, 1, 3, 4).empty());
  EXPECT_TRUE(ProposeNgram(Tokens{}, 1, 3, 4).empty());
  EXPECT_TRUE(ProposeNgram(Tokens{1, 2, 1}, 1, 3, 0).empty());
  // ngram_min 2: the unigram "1" does not count.
  EXPECT_TRUE(ProposeNgram(Tokens{1, 2, 3, 1}, 2, 3, 4).empty());
  EXPECT_EQ(ProposeNgram(Tokens{1, 2, 3, 1}, 1, 3, 4), (Tokens{2, 3, 1, 2}));
}

// Against a brute-force statement of the rule on random short sequences.
TEST(ProposeNgramTest, MatchesBruteForceOnRandomSequences) {
  std::mt19937 rng(11);
  for (int iter = 0; iter < 2000; ++iter) {
    Tokens t(1 + rng() % 30);
    for (int32_t& v : t) v = static_cast<int32_t>(rng() % 4);
    const int32_t lo = 1 + static_cast<int32_t>(rng() % 3),
                  hi = lo + static_cast<int32_t>(rng() % 3);
    const int32_t k = 1 + static_cast<int32_t>(rng() % 5);
    Tokens expected;
    const int n_len = static_cast<int>(t.size());
    for (int n = hi; n >= lo && expected.empty(); --n) {
      if (n >= n_len) continue;
      for (int j = n_len - n - 1; j >= 0; --j) {
        bool eq = true;
        for (int q = 0; q < n; ++q) eq &= t[j + q] == t[n_len - n + q];
        if (!eq) continue;
        const int period = n_len - n - j;  // the text repeated from j + n on
        for (int q = 0; q < k; ++q) expected.push_back(t[j + n + q % period]);
        break;
      }
    }
    EXPECT_EQ(ProposeNgram(t, lo, hi, k), expected) << iter;
  }
}

TEST(SpeculativeConfigTest, RangesNameTheKey) {
  SpeculativeConfig c;
  EXPECT_TRUE(ValidateSpeculativeConfig(c).ok());
  c.num_tokens = 0;
  EXPECT_NE(ValidateSpeculativeConfig(c).message().find("speculative.num_tokens"),
            std::string::npos);
  c = {};
  c.ngram_min = 5;
  c.ngram_max = 3;
  EXPECT_NE(ValidateSpeculativeConfig(c).message().find("speculative.ngram_min"),
            std::string::npos);
  c = {};
  c.disable_by_batch_size = -1;
  EXPECT_NE(ValidateSpeculativeConfig(c).message().find("speculative.disable_by_batch_size"),
            std::string::npos);
}

}  // namespace
}  // namespace pagoda
