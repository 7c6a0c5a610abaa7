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
  const bool draft = c.method == SpeculativeMethod::kDraft;
  if (draft && c.draft_model.empty()) {
    return InvalidArgument(
        "speculative.draft_model: method draft needs the draft model (a GGUF file or a Hugging "
        "Face directory with the target's vocabulary)");
  }
  if (!draft && !c.draft_model.empty()) {
    return InvalidArgument("speculative.draft_model: used only with speculative.method draft");
  }
  return Status::Ok();
}

std::vector<int32_t> ProposeNgram(std::span<const int32_t> tokens, int32_t ngram_min,
                                  int32_t ngram_max, int32_t k) {
  const int64_t len = static_cast<int64_t>(tokens.size());
  if (k <= 0) return {};
  // One pass over the ends e of earlier occurrences (something follows them: e <= len - 2),
  // latest first, measuring how many tokens up to e equal the text's last ones (at most
  // ngram_max). The longest match wins, the latest among equals (met first); a full-length
  // match ends the search.
  int64_t best_end = -1, best_len = ngram_min - 1;
  for (int64_t e = len - 2; e >= 0 && best_len < ngram_max; --e) {
    const int64_t cap = std::min<int64_t>(ngram_max, e + 1);
    int64_t m = 0;
    while (m < cap && tokens[e - m] == tokens[len - 1 - m]) ++m;
    if (m > best_len) best_len = m, best_end = e;
  }
  if (best_end < 0) return {};
  // What followed, continued with the proposal itself where the text ends (the match is then a
  // repeat with period len - best_end - 1, e.g. a list or a repeated line).
  std::vector<int32_t> out;
  for (int64_t i = best_end + 1; i <= best_end + k; ++i) {
    out.push_back(i < len ? tokens[i] : out[i - len]);
  }
  return out;
}

}  // namespace pagoda
