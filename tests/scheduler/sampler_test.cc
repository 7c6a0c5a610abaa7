#include "scheduler/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "scheduler/sampling_params.h"

namespace pagoda {
namespace {

SamplingParams Seeded(uint64_t seed = 1234) {
  SamplingParams p;
  p.seed = seed;
  return p;
}

std::vector<float> LogitsFromProbs(const std::vector<double>& probs) {
  std::vector<float> logits;
  for (double p : probs) logits.push_back(static_cast<float>(std::log(p)));
  return logits;
}

// Counts the tokens drawn over `draws` steps from a fixed row.
std::vector<int> Histogram(Sampler& sampler, const std::vector<float>& logits, int draws) {
  std::vector<int> counts(logits.size(), 0);
  SampleResult r;
  for (int i = 0; i < draws; ++i) {
    sampler.Sample(logits, &r);
    ++counts.at(r.token);
  }
  return counts;
}

std::set<int32_t> DrawnSet(const SamplingParams& params, const std::vector<float>& logits,
                           int draws = 4000) {
  Sampler sampler(params);
  const std::vector<int> counts = Histogram(sampler, logits, draws);
  std::set<int32_t> drawn;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (counts[i] > 0) drawn.insert(static_cast<int32_t>(i));
  }
  return drawn;
}

// Each empirical frequency lies within 5 standard deviations of its expected probability.
void ExpectFrequencies(const std::vector<int>& counts, const std::vector<double>& expected) {
  int total = 0;
  for (int c : counts) total += c;
  for (size_t i = 0; i < counts.size(); ++i) {
    const double p = expected[i];
    const double sigma = std::sqrt(p * (1 - p) / total);
    EXPECT_NEAR(static_cast<double>(counts[i]) / total, p, 5 * sigma + 1e-12) << "token " << i;
  }
}

TEST(ArgMaxTest, LowestIndexOnTies) {
  EXPECT_EQ(ArgMax(std::vector<float>{1, 3, 2, 3}), 1);
  EXPECT_EQ(ArgMax(std::vector<float>{5}), 0);
  EXPECT_EQ(ArgMax(std::vector<float>{-2, -1, -1}), 1);
  EXPECT_EQ(ArgMax(std::vector<float>{std::nanf(""), 1, 2, std::nanf("")}), 2);
  EXPECT_EQ(ArgMax(std::vector<float>{}), 0);
}

TEST(SamplerTest, GreedyIsArgMaxWithLowestIdOnTies) {
  SamplingParams p;
  p.temperature = 0.0f;
  Sampler sampler(p);
  EXPECT_EQ(sampler.Sample(std::vector<float>{0.5f, 2.0f, -1.0f, 2.0f}).token, 1);
  EXPECT_EQ(sampler.Sample(std::vector<float>{7.0f, 7.0f}).token, 0);
  EXPECT_EQ(sampler.Sample(std::vector<float>{-3.0f, -2.0f, -2.5f}).token, 1);
  // Greedy ignores top-k / top-p / min-p and the seed.
  p.top_k = 1;
  p.top_p = 0.1f;
  p.min_p = 0.9f;
  Sampler filtered(p);
  EXPECT_EQ(filtered.Sample(std::vector<float>{0.0f, 1.0f, 3.0f, 3.0f}).token, 2);
}

TEST(SamplerTest, SampleAllowedDrawsOnlyAllowedTokensFromTheRenormalizedRow) {
  // 70 tokens (two mask words); allowed: 1, 3 and 66. Raw probabilities 0.1 / 0.3 / 0.2 of the
  // allowed ones renormalize to 1/6, 1/2, 1/3.
  std::vector<double> probs(70, 0.4 / 67);
  probs[1] = 0.1, probs[3] = 0.3, probs[66] = 0.2;
  const std::vector<float> logits = LogitsFromProbs(probs);
  const std::vector<uint64_t> allowed = {(1u << 1) | (1u << 3), uint64_t{1} << 2};
  SamplingParams p = Seeded();
  p.logprobs = true;
  Sampler sampler(p);
  std::vector<int> counts(3, 0);
  SampleResult r;
  for (int i = 0; i < 6000; ++i) {
    sampler.SampleAllowed(logits, allowed, &r);
    ASSERT_TRUE(r.token == 1 || r.token == 3 || r.token == 66) << r.token;
    ++counts[r.token == 1 ? 0 : r.token == 3 ? 1 : 2];
  }
  ExpectFrequencies(counts, {1.0 / 6, 1.0 / 2, 1.0 / 3});
  EXPECT_NEAR(r.logprob, std::log(probs[r.token]), 1e-5);  // the raw row's logprob
  // Greedy: the best allowed token even when a disallowed one is far ahead; ids past the mask
  // words are never allowed.
  SamplingParams g;
  g.temperature = 0.0f;
  Sampler greedy(g);
  std::vector<float> row(130, 0.0f);
  row[5] = 50.0f, row[129] = 60.0f, row[7] = 1.0f, row[9] = 2.0f;
  const std::vector<uint64_t> some = {(1u << 7) | (1u << 9)};
  greedy.SampleAllowed(row, some, &r);
  EXPECT_EQ(r.token, 9);
  // Logit bias cannot bring back a masked token.
  SamplingParams biased = g;
  biased.logit_bias = {{5, 100.0f}};
  Sampler b(biased);
  b.SampleAllowed(row, some, &r);
  EXPECT_EQ(r.token, 9);
}

TEST(SamplerTest, RepetitionPenaltyOverPromptAndOutput) {
  SamplingParams p;
  p.repetition_penalty = 2.0f;
  const std::vector<int32_t> prompt = {0, 1, 1};
  Sampler sampler(p, 0, prompt);
  sampler.Observe(3);
  sampler.Observe(3);
  std::vector<float> logits = {4.0f, -1.0f, 3.0f, 0.5f, 2.0f};
  sampler.ApplyPenalties(logits);
  // Seen tokens 0, 1, 3: positive logits divided by 2, non-positive multiplied by 2, once each.
  EXPECT_EQ(logits, (std::vector<float>{2.0f, -2.0f, 3.0f, 0.25f, 2.0f}));
}

TEST(SamplerTest, FrequencyAndPresencePenaltiesOverOutputOnly) {
  SamplingParams p;
  p.frequency_penalty = 0.5f;
  p.presence_penalty = 0.25f;
  const std::vector<int32_t> prompt = {0, 1};  // prompt tokens are not penalized here
  Sampler sampler(p, 0, prompt);
  for (int32_t t : {2, 2, 2, 3}) sampler.Observe(t);
  std::vector<float> logits = {1.0f, 1.0f, 1.0f, 1.0f, 1.0f};
  sampler.ApplyPenalties(logits);
  // token 2: 1 - 0.5 * 3 - 0.25 = -0.75; token 3: 1 - 0.5 - 0.25 = 0.25.
  EXPECT_EQ(logits, (std::vector<float>{1.0f, 1.0f, -0.75f, 0.25f, 1.0f}));
}

TEST(SamplerTest, RepetitionThenFrequencyThenPresence) {
  SamplingParams p;
  p.repetition_penalty = 2.0f;
  p.frequency_penalty = 1.0f;
  p.presence_penalty = -0.5f;
  Sampler sampler(p);
  sampler.Observe(0);
  sampler.Observe(0);
  sampler.Observe(1);
  std::vector<float> logits = {6.0f, -1.0f};
  sampler.ApplyPenalties(logits);
  // 6 / 2 - 1 * 2 + 0.5 = 1.5; -1 * 2 - 1 * 1 + 0.5 = -2.5.
  EXPECT_EQ(logits, (std::vector<float>{1.5f, -2.5f}));
}

TEST(SamplerTest, GreedyAppliesPenaltiesFirst) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.frequency_penalty = 1.0f;
  Sampler sampler(p);
  const std::vector<float> logits = {2.0f, 1.5f, 0.0f};
  EXPECT_EQ(sampler.Sample(logits).token, 0);
  sampler.Observe(0);  // 2 - 1 = 1 < 1.5
  EXPECT_EQ(sampler.Sample(logits).token, 1);
  sampler.Observe(1);  // 1.5 - 1 = 0.5 < 1
  EXPECT_EQ(sampler.Sample(logits).token, 0);
}

TEST(SamplerTest, ObserveIgnoresOutOfRangeTokens) {
  SamplingParams p;
  p.repetition_penalty = 2.0f;
  const std::vector<int32_t> prompt = {-1, 100};
  Sampler sampler(p, 0, prompt);
  sampler.Observe(-5);
  sampler.Observe(7);
  std::vector<float> logits = {1.0f, 1.0f};
  sampler.ApplyPenalties(logits);
  EXPECT_EQ(logits, (std::vector<float>{1.0f, 1.0f}));
}

TEST(SamplerTest, TemperatureReshapesDistribution) {
  const std::vector<double> probs = {0.1, 0.2, 0.3, 0.4};
  const std::vector<float> logits = LogitsFromProbs(probs);
  constexpr int kDraws = 40000;
  for (float t : {1.0f, 0.5f, 2.0f}) {
    SamplingParams p = Seeded(7);
    p.temperature = t;
    Sampler sampler(p);
    // softmax(log p / t) is proportional to p^(1/t).
    std::vector<double> expected;
    double z = 0.0;
    for (double q : probs) z += std::pow(q, 1.0 / t);
    for (double q : probs) expected.push_back(std::pow(q, 1.0 / t) / z);
    SCOPED_TRACE("temperature " + std::to_string(t));
    ExpectFrequencies(Histogram(sampler, logits, kDraws), expected);
  }
}

TEST(SamplerTest, TopKKeepsExactlyKWithLowestIdsOnTies) {
  SamplingParams p = Seeded();
  p.top_k = 2;
  EXPECT_EQ(DrawnSet(p, {1.0f, 4.0f, 3.0f, 2.0f, 0.0f}), (std::set<int32_t>{1, 2}));
  EXPECT_EQ(DrawnSet(p, {1.0f, 3.0f, 3.0f, 3.0f}), (std::set<int32_t>{1, 2}));
  p.top_k = 4;  // == vocab: off
  EXPECT_EQ(DrawnSet(p, {0.0f, 0.0f, 0.0f, 0.0f}), (std::set<int32_t>{0, 1, 2, 3}));
  p.top_k = -1;
  EXPECT_EQ(DrawnSet(p, {0.0f, 0.0f, 0.0f}), (std::set<int32_t>{0, 1, 2}));
}

TEST(SamplerTest, TopKRenormalizes) {
  SamplingParams p = Seeded(3);
  p.top_k = 2;
  Sampler sampler(p);
  const std::vector<float> logits = LogitsFromProbs({0.1, 0.2, 0.3, 0.4});
  ExpectFrequencies(Histogram(sampler, logits, 20000), {0.0, 0.0, 3.0 / 7, 4.0 / 7});
}

TEST(SamplerTest, TopPKeepsSmallestNucleus) {
  const std::vector<float> logits = LogitsFromProbs({0.05, 0.5, 0.15, 0.3});
  SamplingParams p = Seeded();
  p.top_p = 0.4f;
  EXPECT_EQ(DrawnSet(p, logits), (std::set<int32_t>{1}));
  p.top_p = 0.75f;
  EXPECT_EQ(DrawnSet(p, logits), (std::set<int32_t>{1, 3}));
  p.top_p = 0.85f;
  EXPECT_EQ(DrawnSet(p, logits), (std::set<int32_t>{1, 2, 3}));
  p.top_p = 0.99f;
  EXPECT_EQ(DrawnSet(p, logits), (std::set<int32_t>{0, 1, 2, 3}));
}

TEST(SamplerTest, TopPOnLargeVocabMatchesFullSort) {
  std::mt19937 gen(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> logits(3000);
  for (float& v : logits) v = normal(gen);
  for (float top_p : {0.3f, 0.5f, 0.9f}) {
    // Reference: sort the whole row, keep while the mass before a token is < top_p.
    std::vector<int32_t> order(logits.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
    std::sort(order.begin(), order.end(),
              [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
    double z = 0.0;
    for (float v : logits) z += std::exp(static_cast<double>(v));
    std::set<int32_t> expected;
    double before = 0.0;
    for (int32_t id : order) {
      if (before >= top_p) break;
      expected.insert(id);
      before += std::exp(static_cast<double>(logits[id])) / z;
    }
    ASSERT_GT(expected.size(), 64u) << "exercise the prefix growth";
    SamplingParams p = Seeded(11);
    p.top_p = top_p;
    const std::set<int32_t> drawn = DrawnSet(p, logits, 3000);
    EXPECT_TRUE(std::includes(expected.begin(), expected.end(), drawn.begin(), drawn.end()))
        << "top_p " << top_p;
  }
}

TEST(SamplerTest, MinPDropsUnlikelyTokens) {
  const std::vector<float> logits = LogitsFromProbs({0.15, 0.5, 0.05, 0.3});
  SamplingParams p = Seeded();
  p.min_p = 0.25f;  // threshold 0.125
  EXPECT_EQ(DrawnSet(p, logits), (std::set<int32_t>{0, 1, 3}));
  p.min_p = 0.5f;  // threshold 0.25
  EXPECT_EQ(DrawnSet(p, logits), (std::set<int32_t>{1, 3}));
  p.min_p = 1.0f;
  EXPECT_EQ(DrawnSet(p, logits), (std::set<int32_t>{1}));
}

TEST(SamplerTest, FiltersRunInOrderTopKThenTopPThenMinP) {
  const std::vector<float> logits = LogitsFromProbs({0.4, 0.3, 0.2, 0.1});
  SamplingParams p = Seeded();
  p.top_p = 0.5f;
  EXPECT_EQ(DrawnSet(p, logits), (std::set<int32_t>{0, 1}));
  // After top-k = 2 the mass is renormalized to {4/7, 3/7}: top-p 0.5 keeps token 0 only.
  p.top_k = 2;
  EXPECT_EQ(DrawnSet(p, logits), (std::set<int32_t>{0}));
  // min-p after top-p: {0.4, 0.3, 0.2} survive top-p 0.75; min-p 0.6 drops 0.2 (< 0.24).
  SamplingParams q = Seeded();
  q.top_p = 0.75f;
  q.min_p = 0.6f;
  EXPECT_EQ(DrawnSet(q, logits), (std::set<int32_t>{0, 1}));
}

TEST(SamplerTest, TemperatureAppliesAfterPenalties) {
  // Penalty first: 4 / 2 = 2 then / t. If temperature came first: 8 / 2 = 4, not 2.
  SamplingParams p = Seeded();
  p.repetition_penalty = 2.0f;
  p.temperature = 0.5f;
  Sampler sampler(p);
  sampler.Observe(0);
  const std::vector<float> logits = {4.0f, 3.0f};  // -> {2 / 0.5, 3 / 0.5} = {4, 6}
  const double p0 = 1.0 / (1.0 + std::exp(2.0));
  ExpectFrequencies(Histogram(sampler, logits, 20000), {p0, 1 - p0});
}

std::vector<int32_t> DrawSequence(Sampler& sampler, int steps) {
  std::mt19937 gen(99);
  std::uniform_real_distribution<float> uniform(-2.0f, 2.0f);
  std::vector<float> logits(50);
  std::vector<int32_t> tokens;
  for (int i = 0; i < steps; ++i) {
    for (float& v : logits) v = uniform(gen);
    tokens.push_back(sampler.Sample(logits).token);
  }
  return tokens;
}

TEST(SamplerTest, SameSeedSameStreamRegardlessOfOthers) {
  Sampler a(Seeded(42));
  const std::vector<int32_t> first = DrawSequence(a, 200);
  // Interleave with other samplers ("other requests in the batch").
  Sampler b(Seeded(42));
  Sampler other(Seeded(43));
  Sampler unseeded{SamplingParams{}};
  DrawSequence(other, 17);
  DrawSequence(unseeded, 5);
  EXPECT_EQ(DrawSequence(b, 200), first);
  Sampler c(Seeded(43));
  EXPECT_NE(DrawSequence(c, 200), first);
}

TEST(SamplerTest, SampleIndexSelectsADifferentStream) {
  Sampler s0(Seeded(42), 0);
  Sampler s1(Seeded(42), 1);
  Sampler s1_again(Seeded(42), 1);
  const std::vector<int32_t> seq1 = DrawSequence(s1, 200);
  EXPECT_NE(DrawSequence(s0, 200), seq1);
  EXPECT_EQ(DrawSequence(s1_again, 200), seq1);
  EXPECT_NE(SampleStreamSeed(42, 0), SampleStreamSeed(42, 1));
  EXPECT_NE(SampleStreamSeed(42, 0), SampleStreamSeed(43, 0));
  std::set<uint64_t> streams;  // every sample of a request draws from its own stream
  for (int32_t i = 0; i < 256; ++i) streams.insert(SampleStreamSeed(42, i));
  EXPECT_EQ(streams.size(), 256u);
}

TEST(SamplerTest, UnseededSamplersDiffer) {
  Sampler a{SamplingParams{}};
  Sampler b{SamplingParams{}};
  EXPECT_NE(DrawSequence(a, 200), DrawSequence(b, 200));
}

std::vector<double> LogSoftmax(const std::vector<float>& logits) {
  double m = *std::max_element(logits.begin(), logits.end());
  double z = 0.0;
  for (float v : logits) z += std::exp(v - m);
  std::vector<double> out;
  for (float v : logits) out.push_back(v - m - std::log(z));
  return out;
}

TEST(SamplerTest, LogprobsComeFromRawLogits) {
  const std::vector<float> logits = {1.0f, 3.0f, -2.0f, 3.0f, 0.5f, 2.0f};
  const std::vector<double> expected = LogSoftmax(logits);
  SamplingParams p = Seeded();
  p.logprobs = true;
  p.top_logprobs = 3;
  p.temperature = 0.3f;
  p.repetition_penalty = 3.0f;
  p.frequency_penalty = 1.5f;
  Sampler sampler(p);
  sampler.Observe(1);
  for (int i = 0; i < 50; ++i) {
    const SampleResult r = sampler.Sample(logits);
    EXPECT_NEAR(r.logprob, expected[r.token], 1e-5);
    ASSERT_EQ(r.top_logprobs.size(), 3u);
    EXPECT_EQ(r.top_logprobs[0].first, 1);  // tie with 3: lowest id first
    EXPECT_EQ(r.top_logprobs[1].first, 3);
    EXPECT_EQ(r.top_logprobs[2].first, 5);
    for (const auto& [id, lp] : r.top_logprobs) EXPECT_NEAR(lp, expected[id], 1e-5);
  }
}

TEST(SamplerTest, LogitBiasMakesGreedyPickOrAvoidAToken) {
  const std::vector<float> logits = {1.0f, 3.0f, -2.0f, 3.0f, 0.5f, 2.0f};
  SamplingParams p;
  p.temperature = 0.0f;
  EXPECT_EQ(Sampler(p).Sample(logits).token, 1);
  p.logit_bias = {{2, 100.0f}};  // the least likely token becomes the argmax
  EXPECT_EQ(Sampler(p).Sample(logits).token, 2);
  p.logit_bias = {{1, -100.0f}};  // banned: its tie partner wins
  EXPECT_EQ(Sampler(p).Sample(logits).token, 3);
  p.logit_bias = {{1, -100.0f}, {3, -100.0f}, {5, -1.5f}};  // 5: 2 - 1.5 < 1
  EXPECT_EQ(Sampler(p).Sample(logits).token, 0);
}

TEST(SamplerTest, LogitBiasBansATokenWhenSampling) {
  const std::vector<float> logits = {5.0f, 1.0f, 0.0f, 1.0f};
  SamplingParams p = Seeded();
  EXPECT_TRUE(DrawnSet(p, logits).contains(0));
  p.logit_bias = {{0, -100.0f}};
  EXPECT_EQ(DrawnSet(p, logits), (std::set<int32_t>{1, 2, 3}));
  p.top_k = 2;  // the filters see the biased row: the ban is not undone by top-k
  EXPECT_EQ(DrawnSet(p, logits), (std::set<int32_t>{1, 3}));
  p.top_k = 0;
  p.logit_bias = {{2, 100.0f}};
  EXPECT_EQ(DrawnSet(p, logits), (std::set<int32_t>{2}));
}

TEST(SamplerTest, LogitBiasAppliesBeforePenalties) {
  // Token 0 is in the prompt (repetition penalty 2). Bias first: (2 + 2.5) / 2 = 2.25 < 3, so
  // token 1 wins; penalty first would give 2 / 2 + 2.5 = 3.5 > 3 and pick token 0.
  const std::vector<float> logits = {2.0f, 3.0f};
  SamplingParams p;
  p.temperature = 0.0f;
  p.repetition_penalty = 2.0f;
  p.logit_bias = {{0, 2.5f}};
  const std::vector<int32_t> prompt = {0};
  Sampler sampler(p, 0, prompt);
  EXPECT_EQ(sampler.Sample(logits).token, 1);
  std::vector<float> row = logits;
  sampler.ApplyLogitBias(row);
  EXPECT_FLOAT_EQ(row[0], 4.5f);
  EXPECT_FLOAT_EQ(row[1], 3.0f);
}

TEST(SamplerTest, LogprobsIgnoreLogitBias) {
  // As vLLM V1's default (raw_logprobs): the model's distribution, not the biased one.
  const std::vector<float> logits = {1.0f, 3.0f, -2.0f, 3.0f};
  const std::vector<double> expected = LogSoftmax(logits);
  SamplingParams p;
  p.temperature = 0.0f;
  p.logprobs = true;
  p.top_logprobs = 1;
  p.logit_bias = {{2, 100.0f}};
  const SampleResult r = Sampler(p).Sample(logits);
  EXPECT_EQ(r.token, 2);
  EXPECT_NEAR(r.logprob, expected[2], 1e-5);
  ASSERT_EQ(r.top_logprobs.size(), 1u);
  EXPECT_EQ(r.top_logprobs[0].first, 1);
}

TEST(SamplerTest, TopLogprobsSortedOnRandomRows) {
  std::mt19937 gen(8);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  SamplingParams p = Seeded();
  p.top_logprobs = 20;
  Sampler sampler(p);
  SampleResult r;
  for (int round = 0; round < 20; ++round) {
    std::vector<float> logits(500);
    for (float& v : logits) v = normal(gen);
    const std::vector<double> expected = LogSoftmax(logits);
    sampler.Sample(logits, &r);
    EXPECT_NEAR(r.logprob, expected[r.token], 1e-4);
    std::vector<double> sorted = expected;
    std::sort(sorted.rbegin(), sorted.rend());
    ASSERT_EQ(r.top_logprobs.size(), 20u);
    for (size_t i = 0; i < 20; ++i) {
      EXPECT_NEAR(r.top_logprobs[i].second, sorted[i], 1e-4);
      EXPECT_NEAR(r.top_logprobs[i].second, expected[r.top_logprobs[i].first], 1e-4);
    }
  }
}

TEST(SamplerTest, LogprobsOnlyWhenAsked) {
  Sampler plain(Seeded());
  const SampleResult r = plain.Sample(std::vector<float>{1.0f, 2.0f});
  EXPECT_EQ(r.logprob, 0.0f);
  EXPECT_TRUE(r.top_logprobs.empty());
  SamplingParams p = Seeded();
  p.top_logprobs = 5;  // more than the vocab: clamped
  Sampler top(p);
  EXPECT_EQ(top.Sample(std::vector<float>{1.0f, 2.0f}).top_logprobs.size(), 2u);
}

TEST(SamplerTest, GreedyLogprob) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.logprobs = true;
  Sampler sampler(p);
  const SampleResult r = sampler.Sample(std::vector<float>{0.0f, 0.0f});
  EXPECT_EQ(r.token, 0);
  EXPECT_NEAR(r.logprob, std::log(0.5), 1e-6);
  EXPECT_TRUE(r.top_logprobs.empty());
}

void ExpectInvalid(const SamplingParams& p, const std::string& field) {
  const Status st = ValidateSamplingParams(p, 100);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << field;
  EXPECT_NE(st.message().find(field), std::string::npos) << st.message();
}

TEST(ValidateSamplingParamsTest, DefaultsAndBoundsAreValid) {
  EXPECT_TRUE(ValidateSamplingParams(SamplingParams{}, 100).ok());
  SamplingParams p;
  p.temperature = 0.0f;
  p.top_k = 100;
  p.top_p = 1.0f;
  p.min_p = 1.0f;
  p.repetition_penalty = 10.0f;
  p.presence_penalty = -2.0f;
  p.frequency_penalty = 2.0f;
  p.n = 64;
  p.top_logprobs = 20;
  EXPECT_TRUE(ValidateSamplingParams(p, 100).ok());
  p.top_k = -1;
  p.temperature = 100.0f;
  EXPECT_TRUE(ValidateSamplingParams(p, 100).ok());
}

TEST(ValidateSamplingParamsTest, ErrorsNameTheField) {
  const float nan = std::nanf("");
  const float inf = INFINITY;
  for (float t : {-0.1f, 100.5f, nan, inf}) {
    SamplingParams p;
    p.temperature = t;
    ExpectInvalid(p, "temperature");
  }
  for (float v : {0.0f, 1.01f, nan}) {
    SamplingParams p;
    p.top_p = v;
    ExpectInvalid(p, "top_p");
  }
  for (float v : {-0.1f, 1.5f}) {
    SamplingParams p;
    p.min_p = v;
    ExpectInvalid(p, "min_p");
  }
  for (int32_t k : {-2, 101}) {
    SamplingParams p;
    p.top_k = k;
    ExpectInvalid(p, "top_k");
  }
  for (float v : {0.0f, 10.5f, -1.0f}) {
    SamplingParams p;
    p.repetition_penalty = v;
    ExpectInvalid(p, "repetition_penalty");
  }
  SamplingParams p;
  p.presence_penalty = 2.5f;
  ExpectInvalid(p, "presence_penalty");
  p = {};
  p.frequency_penalty = -3.0f;
  ExpectInvalid(p, "frequency_penalty");
  for (int32_t n : {0, 65}) {
    p = {};
    p.n = n;
    ExpectInvalid(p, "n must be in [1, 64]");
  }
  for (int32_t k : {-1, 21}) {
    p = {};
    p.top_logprobs = k;
    ExpectInvalid(p, "top_logprobs");
  }
  EXPECT_EQ(ValidateSamplingParams(SamplingParams{}, 0).code(), StatusCode::kInvalidArgument);
}

TEST(ValidateSamplingParamsTest, LogitBiasChecksIdsValuesAndSize) {
  SamplingParams p;
  p.logit_bias = {{0, -100.0f}, {99, 100.0f}, {7, 0.0f}};
  EXPECT_TRUE(ValidateSamplingParams(p, 100).ok());
  const auto message = [](std::vector<std::pair<int32_t, float>> bias) {
    SamplingParams q;
    q.logit_bias = std::move(bias);
    const Status st = ValidateSamplingParams(q, 100);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
    return st.message();
  };
  EXPECT_EQ(message({{3, 1.0f}, {100, 1.0f}}),
            "logit_bias.100: token id outside the vocabulary [0, 100)");
  EXPECT_EQ(message({{-1, 1.0f}}), "logit_bias.-1: token id outside the vocabulary [0, 100)");
  EXPECT_EQ(message({{5, 100.5f}}), "logit_bias.5: bias must be in [-100, 100], got 100.5");
  EXPECT_EQ(message({{5, -101.0f}}), "logit_bias.5: bias must be in [-100, 100], got -101");
  EXPECT_NE(message({{5, std::nanf("")}}).find("logit_bias.5: bias"), std::string::npos);
  EXPECT_NE(message({{5, INFINITY}}).find("logit_bias.5: bias"), std::string::npos);
  EXPECT_EQ(message({{9, 1.0f}, {4, 2.0f}, {9, 3.0f}}), "logit_bias.9: token id given twice");
  std::vector<std::pair<int32_t, float>> many;
  for (int32_t id = 0; id < static_cast<int32_t>(kMaxLogitBiasEntries); ++id) {
    many.emplace_back(id, 1.0f);
  }
  p.logit_bias = many;
  EXPECT_TRUE(ValidateSamplingParams(p, 2048).ok());
  p.logit_bias.emplace_back(2000, 1.0f);
  EXPECT_EQ(ValidateSamplingParams(p, 2048).message(),
            "logit_bias: at most 1024 entries, got 1025");
}

TEST(ValidateSamplingParamsTest, MessageGivesRangeAndValue) {
  SamplingParams p;
  p.top_p = 1.5f;
  EXPECT_EQ(ValidateSamplingParams(p, 10).message(), "top_p must be in (0, 1], got 1.5");
}

}  // namespace
}  // namespace pagoda
