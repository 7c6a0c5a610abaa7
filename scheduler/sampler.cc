#include "scheduler/sampler.h"

#include <algorithm>
#include <cmath>

namespace pagoda {

int32_t ArgMax(std::span<const float> logits) {
  int32_t best = 0;
  for (size_t i = 1; i < logits.size(); ++i) {
    if (logits[i] > logits[best]) best = static_cast<int32_t>(i);
  }
  return best;
}

int32_t Sampler::Sample(std::span<const float> logits) {
  if (params_.temperature <= 0.0f || logits.size() <= 1) return ArgMax(logits);
  candidates_.clear();
  const float inv_t = 1.0f / params_.temperature;
  for (size_t i = 0; i < logits.size(); ++i) {
    candidates_.emplace_back(logits[i] * inv_t, static_cast<int32_t>(i));
  }
  auto by_logit = [](const auto& a, const auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  size_t n = candidates_.size();
  if (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < n) {
    n = static_cast<size_t>(params_.top_k);
    std::partial_sort(candidates_.begin(), candidates_.begin() + n, candidates_.end(), by_logit);
  } else {
    std::sort(candidates_.begin(), candidates_.end(), by_logit);
  }
  // Softmax over the kept candidates (in place: .first becomes a probability).
  const float max_logit = candidates_[0].first;
  double sum = 0.0;
  for (size_t i = 0; i < n; ++i) {
    candidates_[i].first = std::exp(candidates_[i].first - max_logit);
    sum += candidates_[i].first;
  }
  for (size_t i = 0; i < n; ++i)
    candidates_[i].first = static_cast<float>(candidates_[i].first / sum);
  if (params_.top_p < 1.0f) {
    double cum = 0.0;
    size_t keep = 0;
    while (keep < n && (keep == 0 || cum < params_.top_p)) cum += candidates_[keep++].first;
    n = keep;
  }
  if (params_.min_p > 0.0f) {
    const float threshold = candidates_[0].first * params_.min_p;
    size_t keep = 1;
    while (keep < n && candidates_[keep].first >= threshold) ++keep;
    n = keep;
  }
  double total = 0.0;
  for (size_t i = 0; i < n; ++i) total += candidates_[i].first;
  const double u = std::uniform_real_distribution<double>(0.0, total)(rng_);
  double cum = 0.0;
  for (size_t i = 0; i < n; ++i) {
    cum += candidates_[i].first;
    if (u < cum) return candidates_[i].second;
  }
  return candidates_[n - 1].second;
}

}  // namespace pagoda
