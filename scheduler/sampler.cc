#include "scheduler/sampler.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <functional>
#include <limits>

namespace pagoda {
namespace {

using Candidate = std::pair<float, int32_t>;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
// top-p first sorts this many candidates and doubles until the nucleus fits.
constexpr size_t kTopPFirstChunk = 64;
// Slack (in logits) below the top-p prefilter bound, so float rounding never drops a token.
constexpr float kPrefilterSlack = 1e-3f;

// NaN logits (a model bug) rank below everything instead of breaking the orderings below.
float Sanitized(float logit) { return std::isnan(logit) ? kNegInf : logit; }

float& Logit(float& v) { return v; }
float& Logit(Candidate& c) { return c.first; }
float Logit(const float& v) { return v; }
float Logit(const Candidate& c) { return c.first; }

// Higher logit first; lowest id on ties (a strict weak order on sanitized logits).
bool ByLogitDesc(const Candidate& a, const Candidate& b) {
  return a.first > b.first || (a.first == b.first && a.second < b.second);
}

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

uint64_t NondeterministicSeed() {
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) ^ device();
}

// Uniform in [0, 1) from the top 53 bits (identical on every standard library).
double UniformUnit(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

template <typename T>
float MaxLogit(const std::vector<T>& items) {
  float best = kNegInf;
  for (const T& item : items) best = std::max(best, Logit(item));
  return best;
}

// Sum of exp(logit - max_logit): the softmax normalizer relative to the max.
template <typename T>
double Mass(const std::vector<T>& items, float max_logit) {
  double total = 0.0;
  for (const T& item : items) total += std::exp(Logit(item) - max_logit);
  return total;
}

// Draws an index with probability softmax(logits); overwrites logits with weights.
template <typename T>
size_t DrawIndex(std::vector<T>* items, double u) {
  const float max_logit = MaxLogit(*items);
  double total = 0.0;
  for (T& item : *items) {
    Logit(item) = std::exp(Logit(item) - max_logit);
    total += Logit(item);
  }
  const double r = u * total;
  double cum = 0.0;
  for (size_t i = 0; i < items->size(); ++i) {
    cum += Logit((*items)[i]);
    if (r < cum) return i;
  }
  return items->size() - 1;  // rounding, or an all -inf row
}

// Exactly the k highest tokens of `row` (lowest ids on ties). Requires 0 < k < row.size().
void GatherTopK(const std::vector<float>& row, size_t k, std::vector<float>* select,
                std::vector<Candidate>* out) {
  select->assign(row.begin(), row.end());
  std::nth_element(select->begin(), select->begin() + (k - 1), select->end(), std::greater<>());
  const float kth = (*select)[k - 1];
  out->clear();
  for (size_t i = 0; i < row.size(); ++i) {
    if (row[i] > kth) out->emplace_back(row[i], static_cast<int32_t>(i));
  }
  for (size_t i = 0; i < row.size() && out->size() < k; ++i) {
    if (row[i] == kth) out->emplace_back(row[i], static_cast<int32_t>(i));
  }
}

// The tokens of `row` with logit >= floor.
void GatherAtLeast(const std::vector<float>& row, float floor, std::vector<Candidate>* out) {
  out->clear();
  for (size_t i = 0; i < row.size(); ++i) {
    if (row[i] >= floor) out->emplace_back(row[i], static_cast<int32_t>(i));
  }
}

// A token with p < (1 - top_p) / V is never in the nucleus: all such tokens together hold less
// than 1 - top_p, so the mass before the first of them is already > top_p. In logits:
// p < eps  <=>  logit < max_logit + log(eps * mass).
float TopPFloor(float top_p, size_t vocab, float max_logit, double mass) {
  const double eps = (1.0 - top_p) / static_cast<double>(vocab);
  return static_cast<float>(max_logit + std::log(eps * mass)) - kPrefilterSlack;
}

// Sorts the candidates by logit (descending) and keeps a token while the probability mass of
// the tokens before it is < top_p of `mass`. Sorts only a growing prefix.
void KeepTopP(std::vector<Candidate>* cands, float top_p, float max_logit, double mass) {
  const double target = top_p * mass;
  const size_t n = cands->size();
  const auto begin = cands->begin();
  double cum = 0.0;
  size_t keep = 0;
  for (size_t sorted = 0, m = std::min(kTopPFirstChunk, n);; sorted = m, m = std::min(2 * m, n)) {
    if (m < n) std::nth_element(begin + sorted, begin + m, cands->end(), ByLogitDesc);
    std::sort(begin + sorted, begin + m, ByLogitDesc);
    while (keep < m && cum < target) cum += std::exp((*cands)[keep++].first - max_logit);
    if (keep < m || cum >= target || m == n) break;
  }
  cands->resize(std::max<size_t>(keep, 1));
}

// Drops candidates with p < min_p * p_max, i.e. logit < max_logit + log(min_p).
void KeepMinP(std::vector<Candidate>* cands, float min_p) {
  const float threshold = MaxLogit(*cands) + std::log(min_p);
  std::erase_if(*cands, [threshold](const Candidate& c) { return c.first < threshold; });
}

double LogSumExp(std::span<const float> logits) {
  float max_logit = kNegInf;
  for (float v : logits) max_logit = std::max(max_logit, Sanitized(v));
  if (max_logit == kNegInf) return kNegInf;
  double sum = 0.0;
  for (float v : logits) sum += std::exp(Sanitized(v) - max_logit);
  return max_logit + std::log(sum);
}

}  // namespace

int32_t ArgMax(std::span<const float> logits) {
  if (logits.empty()) return 0;
  int32_t best = 0;
  float best_logit = Sanitized(logits[0]);
  for (size_t i = 1; i < logits.size(); ++i) {
    if (logits[i] > best_logit) {  // false for NaN
      best = static_cast<int32_t>(i);
      best_logit = logits[i];
    }
  }
  return best;
}

uint64_t SampleStreamSeed(uint64_t seed, int32_t sample_index) {
  return SplitMix64(SplitMix64(seed) ^ static_cast<uint64_t>(static_cast<uint32_t>(sample_index)));
}

Sampler::Sampler(const SamplingParams& params, int32_t sample_index,
                 std::span<const int32_t> prompt_tokens)
    : params_(params),
      penalties_active_(params.repetition_penalty != 1.0f || params.presence_penalty != 0.0f ||
                        params.frequency_penalty != 0.0f),
      rng_(params.seed ? SampleStreamSeed(*params.seed, sample_index) : NondeterministicSeed()) {
  if (params_.repetition_penalty == 1.0f) return;  // only repetition looks at the prompt
  for (int32_t token : prompt_tokens) {
    if (token >= 0) stats_[token].in_prompt = true;
  }
}

void Sampler::Observe(int32_t token) {
  if (penalties_active_ && token >= 0) ++stats_[token].output_count;
}

float Sampler::Penalized(float logit, const TokenStat& stat) const {
  const float rep = params_.repetition_penalty;  // every tracked token is in prompt or output
  if (rep != 1.0f) logit = logit > 0.0f ? logit / rep : logit * rep;
  if (stat.output_count > 0) {
    logit -= params_.frequency_penalty * static_cast<float>(stat.output_count) +
             params_.presence_penalty;
  }
  return logit;
}

void Sampler::ApplyLogitBias(std::span<float> logits) const {
  for (const auto& [token, bias] : params_.logit_bias) {
    if (token >= 0 && static_cast<size_t>(token) < logits.size()) logits[token] += bias;
  }
}

void Sampler::ApplyPenalties(std::span<float> logits) const {
  for (const auto& [token, stat] : stats_) {
    if (static_cast<size_t>(token) < logits.size()) logits[token] = Penalized(logits[token], stat);
  }
}

void Sampler::Sample(std::span<const float> logits, SampleResult* out) {
  assert(!logits.empty());
  row_.resize(logits.size());
  std::transform(logits.begin(), logits.end(), row_.begin(), Sanitized);
  SampleRow(logits, out);
}

void Sampler::SampleAllowed(std::span<const float> logits, std::span<const uint64_t> allowed,
                            SampleResult* out) {
  assert(!logits.empty());
  row_.resize(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) {
    const bool ok = i / 64 < allowed.size() && ((allowed[i / 64] >> (i % 64)) & 1u);
    row_[i] = ok ? Sanitized(logits[i]) : kNegInf;
  }
  SampleRow(logits, out);
}

// The steps after the row_ copy: logit_bias, penalties, then greedy or a random draw.
void Sampler::SampleRow(std::span<const float> logits, SampleResult* out) {
  ApplyLogitBias(row_);
  ApplyPenalties(row_);
  out->token = params_.temperature < kGreedyTemperature ? ArgMax(row_) : SampleRandom();
  FillLogprobs(logits, out);
}

SampleResult Sampler::Sample(std::span<const float> logits) {
  SampleResult result;
  Sample(logits, &result);
  return result;
}

int32_t Sampler::SampleRandom() {
  const float inv_t = 1.0f / params_.temperature;
  for (float& v : row_) v *= inv_t;
  const bool top_k = params_.top_k > 0 && static_cast<size_t>(params_.top_k) < row_.size();
  if (!top_k && params_.top_p >= 1.0f && params_.min_p <= 0.0f) {
    return static_cast<int32_t>(DrawIndex(&row_, UniformUnit(rng_)));
  }
  const float max_logit = MaxLogit(row_);
  const double mass = GatherCandidates(max_logit);
  if (params_.top_p < 1.0f) KeepTopP(&candidates_, params_.top_p, max_logit, mass);
  if (params_.min_p > 0.0f) KeepMinP(&candidates_, params_.min_p);
  return candidates_[DrawIndex(&candidates_, UniformUnit(rng_))].second;
}

double Sampler::GatherCandidates(float max_logit) {
  if (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < row_.size()) {
    GatherTopK(row_, params_.top_k, &select_, &candidates_);
    return Mass(candidates_, max_logit);
  }
  if (params_.top_p >= 1.0f) {  // min-p only: its threshold is already known
    GatherAtLeast(row_, max_logit + std::log(params_.min_p), &candidates_);
    return 0.0;
  }
  const double mass = Mass(row_, max_logit);
  GatherAtLeast(row_, TopPFloor(params_.top_p, row_.size(), max_logit, mass), &candidates_);
  return mass;
}

void Sampler::FillLogprobs(std::span<const float> logits, SampleResult* out) {
  out->top_logprobs.clear();
  out->logprob = 0.0f;
  if (!params_.logprobs && params_.top_logprobs <= 0) return;
  // The raw row (no logit_bias, penalties or temperature), as vLLM V1's default raw_logprobs.
  const double lse = LogSumExp(logits);
  out->logprob = static_cast<float>(Sanitized(logits[out->token]) - lse);
  const size_t k = std::min(static_cast<size_t>(std::max(params_.top_logprobs, 0)), logits.size());
  if (k == 0) return;
  // The k best ids (what partial_sort_copy over all ids gives): a heap whose front is the worst
  // kept, then sorted best first.
  auto better = [&logits](int32_t a, int32_t b) {
    return ByLogitDesc({Sanitized(logits[a]), a}, {Sanitized(logits[b]), b});
  };
  top_ids_.clear();
  for (int32_t id = 0; id < static_cast<int32_t>(logits.size()); ++id) {
    if (top_ids_.size() == k) {
      if (!better(id, top_ids_.front())) continue;
      std::pop_heap(top_ids_.begin(), top_ids_.end(), better);
      top_ids_.back() = id;
    } else {
      top_ids_.push_back(id);
    }
    std::push_heap(top_ids_.begin(), top_ids_.end(), better);
  }
  std::sort_heap(top_ids_.begin(), top_ids_.end(), better);
  for (int32_t id : top_ids_) {
    out->top_logprobs.emplace_back(id, static_cast<float>(Sanitized(logits[id]) - lse));
  }
}

}  // namespace pagoda
