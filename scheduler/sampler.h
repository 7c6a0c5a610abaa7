// Sampler: picks the next token of ONE sequence (one sample of a request) from a logits row.
//
// Each step, in this order: logit_bias -> repetition / presence / frequency penalties ->
// temperature -> top-k -> top-p -> min-p -> draw (vLLM V1 applies logit_bias as a logits
// processor ahead of its penalties). Temperature < kGreedyTemperature is greedy: argmax after
// bias and penalties, lowest id on ties. top-k keeps exactly k tokens (lowest ids win ties); top-p
// keeps the most likely tokens while the mass before them is < top_p (at least one); min-p drops
// tokens with p < min_p * p_max. Filters after top-k see the renormalized distribution.
// Token counts are kept incrementally: the prompt is given at construction, each generated token
// is reported with Observe(), so penalties cost O(distinct tokens seen), not O(length x vocab).
// Randomness: a private mt19937_64 seeded from (request seed, sample index) only, so a seeded
// request yields the same tokens whatever else is in the batch; unseeded requests draw a
// nondeterministic seed. Logprobs, when asked for, are log_softmax of the RAW row (before
// logit_bias, penalties and temperature): the model's own distribution, as vLLM V1 returns
// them by default (logprobs_mode "raw_logprobs"). Only the first Sample() allocates (buffers
// reused); top-k and top-p never sort the whole vocabulary (selection + a prefilter + a growing
// sorted prefix). Thread-compatible: one thread at a time per Sampler; distinct Samplers share
// nothing.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "scheduler/sampling_params.h"

namespace pagoda {

struct SampleResult {
  int32_t token = -1;
  float logprob = 0.0f;  // log p(token) under the raw row; 0 unless logprobs / top_logprobs
  // The top_logprobs most likely tokens (id, logprob), most likely first, lowest id on ties.
  std::vector<std::pair<int32_t, float>> top_logprobs;
};

// Index of the largest value, lowest index on ties (NaN never wins; 0 for an empty row).
int32_t ArgMax(std::span<const float> logits);

// The generator seed of sample `sample_index` of a request seeded with `seed` (SplitMix64 mix).
uint64_t SampleStreamSeed(uint64_t seed, int32_t sample_index);

class Sampler {
 public:
  // `params` must pass ValidateSamplingParams. `prompt_tokens` feed the repetition penalty.
  explicit Sampler(const SamplingParams& params, int32_t sample_index = 0,
                   std::span<const int32_t> prompt_tokens = {});

  // Records a generated token of this sequence (call once per token appended to the output).
  void Observe(int32_t token);

  // Picks a token from `logits` (vocab-sized, non-empty). Does not call Observe().
  void Sample(std::span<const float> logits, SampleResult* out);
  SampleResult Sample(std::span<const float> logits);
  // As Sample, among the tokens whose bit is set in `allowed` (bit i of word i / 64; ids past
  // the words are not allowed): the others are dropped before every other step (structured
  // output). At least one token of the row must be allowed. Logprobs stay the raw row's.
  void SampleAllowed(std::span<const float> logits, std::span<const uint64_t> allowed,
                     SampleResult* out);

  // The logit_bias step alone, in place (ids outside `logits` are skipped).
  void ApplyLogitBias(std::span<float> logits) const;
  // The penalty step alone, in place (exposed for tests and diagnostics).
  void ApplyPenalties(std::span<float> logits) const;

  const SamplingParams& params() const { return params_; }

 private:
  struct TokenStat {
    int32_t output_count = 0;
    bool in_prompt = false;
  };
  using Candidate = std::pair<float, int32_t>;  // (logit, token id)

  void SampleRow(std::span<const float> logits, SampleResult* out);
  float Penalized(float logit, const TokenStat& stat) const;
  int32_t SampleRandom();
  // Fills candidates_ with a superset of the tokens the filters keep; returns the softmax mass
  // (relative to the row max) of the distribution the filters see.
  double GatherCandidates(float max_logit);
  void FillLogprobs(std::span<const float> logits, SampleResult* out);

  SamplingParams params_;
  bool penalties_active_;
  std::mt19937_64 rng_;
  std::unordered_map<int32_t, TokenStat> stats_;  // tokens seen (prompt and/or output)
  // Scratch, reused across calls.
  std::vector<float> row_;             // the row after penalties and temperature
  std::vector<float> select_;          // top-k threshold selection
  std::vector<Candidate> candidates_;  // tokens surviving the filters
  std::vector<int32_t> top_ids_;       // top_logprobs selection
};

}  // namespace pagoda
