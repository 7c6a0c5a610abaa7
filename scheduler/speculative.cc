#include "scheduler/speculative.h"

#include <algorithm>

namespace pagoda {

Status ValidateSpeculativeConfig(const SpeculativeConfig& c) {
  PAGODA_RETURN_IF_ERROR(
      CheckRange("speculative.num_tokens", c.num_tokens, kSpeculativeNumTokensRange));
  PAGODA_RETURN_IF_ERROR(CheckRange("speculative.ngram_min", c.ngram_min, kNgramRange));
  PAGODA_RETURN_IF_ERROR(CheckRange("speculative.ngram_max", c.ngram_max, kNgramRange));
  PAGODA_RETURN_IF_ERROR(CheckRange("speculative.disable_by_batch_size", c.disable_by_batch_size,
                                    kDisableByBatchSizeRange));
  if (c.ngram_min > c.ngram_max) {
    return InvalidArgument("speculative.ngram_min: " + std::to_string(c.ngram_min) +
                           " exceeds speculative.ngram_max (" + std::to_string(c.ngram_max) + ")");
  }
  return Status::Ok();
}

std::vector<int32_t> ProposeNgram(std::span<const int32_t> tokens, int32_t ngram_min,
                                  int32_t ngram_max, int32_t k) {
  const int64_t len = static_cast<int64_t>(tokens.size());
  for (int64_t n = std::min<int64_t>(ngram_max, len - 1); n >= ngram_min && k > 0; --n) {
    const auto suffix = tokens.subspan(static_cast<size_t>(len - n));
    // Latest start j < len - n whose n tokens equal the suffix (j + n <= len - 1: something
    // follows the occurrence).
    for (int64_t j = len - n - 1; j >= 0; --j) {
      if (!std::equal(suffix.begin(), suffix.end(), tokens.begin() + j)) continue;
      // What followed, continued with the proposal itself where the text ends (the match is
      // then a repeat with period len - n - j, e.g. a list or a repeated line).
      std::vector<int32_t> out;
      for (int64_t i = j + n; i < j + n + k; ++i) out.push_back(i < len ? tokens[i] : out[i - len]);
      return out;
    }
  }
  return {};
}

}  // namespace pagoda
