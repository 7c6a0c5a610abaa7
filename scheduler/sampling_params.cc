#include "scheduler/sampling_params.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

namespace pagoda {
namespace {

std::string FormatNumber(double value) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", value);
  return buf;
}

Status RangeError(const char* field, const std::string& range, double value) {
  return InvalidArgument(std::string(field) + " must be in " + range + ", got " +
                         FormatNumber(value));
}

// NaN fails every comparison, so each check below also rejects NaN.
bool InClosed(float v, float lo, float hi) { return v >= lo && v <= hi; }

Status ValidateFloats(const SamplingParams& p) {
  if (!InClosed(p.temperature, 0.0f, 100.0f)) {
    return RangeError("temperature", "[0, 100] (finite)", p.temperature);
  }
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) return RangeError("top_p", "(0, 1]", p.top_p);
  if (!InClosed(p.min_p, 0.0f, 1.0f)) return RangeError("min_p", "[0, 1]", p.min_p);
  if (!(p.repetition_penalty > 0.0f && p.repetition_penalty <= 10.0f)) {
    return RangeError("repetition_penalty", "(0, 10]", p.repetition_penalty);
  }
  if (!InClosed(p.presence_penalty, -2.0f, 2.0f)) {
    return RangeError("presence_penalty", "[-2, 2]", p.presence_penalty);
  }
  if (!InClosed(p.frequency_penalty, -2.0f, 2.0f)) {
    return RangeError("frequency_penalty", "[-2, 2]", p.frequency_penalty);
  }
  return Status::Ok();
}

Status ValidateInts(const SamplingParams& p, int32_t vocab_size) {
  if (p.top_k < -1 || p.top_k > vocab_size) {
    return RangeError("top_k", "[-1, " + std::to_string(vocab_size) + "] (0 or -1 = off)", p.top_k);
  }
  if (p.n < 1 || p.n > 64) return RangeError("n", "[1, 64]", p.n);
  if (p.top_logprobs < 0 || p.top_logprobs > 20) {
    return RangeError("top_logprobs", "[0, 20]", p.top_logprobs);
  }
  return Status::Ok();
}

Status ValidateLogitBias(std::span<const std::pair<int32_t, float>> bias, int32_t vocab_size) {
  if (bias.size() > kMaxLogitBiasEntries) {
    return InvalidArgument("logit_bias: at most " + std::to_string(kMaxLogitBiasEntries) +
                           " entries, got " + std::to_string(bias.size()));
  }
  std::vector<int32_t> ids;
  ids.reserve(bias.size());
  for (const auto& [id, value] : bias) {
    const std::string field = "logit_bias." + std::to_string(id);
    if (id < 0 || id >= vocab_size) {
      return InvalidArgument(field + ": token id outside the vocabulary [0, " +
                             std::to_string(vocab_size) + ")");
    }
    if (!InClosed(value, -kMaxLogitBias, kMaxLogitBias)) {
      return InvalidArgument(field + ": bias must be in [-100, 100], got " + FormatNumber(value));
    }
    ids.push_back(id);
  }
  std::sort(ids.begin(), ids.end());
  if (const auto dup = std::adjacent_find(ids.begin(), ids.end()); dup != ids.end()) {
    return InvalidArgument("logit_bias." + std::to_string(*dup) + ": token id given twice");
  }
  return Status::Ok();
}

}  // namespace

Status ValidateSamplingParams(const SamplingParams& params, int32_t vocab_size) {
  if (vocab_size <= 0) {
    return InvalidArgument("vocab_size must be positive, got " + std::to_string(vocab_size));
  }
  PAGODA_RETURN_IF_ERROR(ValidateFloats(params));
  PAGODA_RETURN_IF_ERROR(ValidateInts(params, vocab_size));
  return ValidateLogitBias(params.logit_bias, vocab_size);
}

}  // namespace pagoda
