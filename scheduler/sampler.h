// Token sampling from one logits row: temperature -> top-k -> top-p -> min-p -> draw.
//
// Temperature 0 is greedy (argmax, lowest id on ties). The random stream belongs to the caller
// (one per request / sample), so a draw never depends on other requests in a batch.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace pagoda {

struct SamplingParams {
  float temperature = 1.0f;  // 0 = greedy
  int32_t top_k = 0;         // <= 0: off
  float top_p = 1.0f;        // 1: off
  float min_p = 0.0f;        // 0: off
  uint64_t seed = 0;
};

// Returns the index of the largest value (lowest index on ties).
int32_t ArgMax(std::span<const float> logits);

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params) : params_(params), rng_(params.seed) {}
  // Draws a token id from `logits` (vocab-sized). Allocates only on the first call.
  int32_t Sample(std::span<const float> logits);

 private:
  SamplingParams params_;
  std::mt19937_64 rng_;
  std::vector<std::pair<float, int32_t>> candidates_;
};

}  // namespace pagoda
