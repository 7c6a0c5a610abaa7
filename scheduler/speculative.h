// Speculative decoding: the `speculative:` config section, the n-gram (prompt lookup) proposer
// and the per-step rule for how many tokens a sequence proposes. The draft-model proposer is
// scheduler/draft_proposer.h.
//
// n-gram: a decoding sequence whose last n tokens (ngram_max >= n >= ngram_min, longest first)
// occurred earlier in its prompt + output proposes the tokens that followed the latest earlier
// occurrence (continued periodically past the end of the text). draft: a smaller model with the
// same vocabulary proposes its k greedy (argmax) tokens.
// The engine then runs the last sampled token and the k proposals as one multi-token decode
// (StepSequence::num_logits = k + 1) and the OutputProcessor samples each row in turn as it
// would without speculation, keeping proposal i while it equals the sampled token. For a point-
// mass proposal this is exactly the accept/reject rule of Leviathan et al. (accept with p(d),
// else resample from p without d), so greedy and seeded outputs do not change; only fewer steps.
// Rule for k (stated in docs/ARCHITECTURE.md): at most num_tokens, the last verification's
// accepted count + 1 (a sequence whose proposals fail drops to 1), the room left before
// max_tokens and the context; no proposals while more than disable_by_batch_size sequences
// decode (a large batch is compute-bound, where extra tokens cost time).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/field_check.h"
#include "common/status.h"
#include "kernels/backend.h"

namespace pagoda {

enum class SpeculativeMethod { kNone, kNgram, kDraft };
inline constexpr std::pair<std::string_view, SpeculativeMethod> kSpeculativeMethodNames[] = {
    {"none", SpeculativeMethod::kNone},
    {"ngram", SpeculativeMethod::kNgram},
    {"draft", SpeculativeMethod::kDraft}};

// The `speculative:` section of the config (each default and range declared here, once).
struct SpeculativeConfig {
  SpeculativeMethod method = SpeculativeMethod::kNone;
  int32_t num_tokens = 4;             // proposals per step and sequence (k)
  int32_t ngram_min = 2;              // shortest suffix looked up
  int32_t ngram_max = 4;              // longest suffix looked up
  int32_t disable_by_batch_size = 4;  // no proposals while more sequences decode; 0: no limit
  std::string draft_model;  // method draft: the draft model (a GGUF file or an HF directory)
  bool operator==(const SpeculativeConfig&) const = default;
  bool enabled() const { return method != SpeculativeMethod::kNone; }
};
inline constexpr IntRange kSpeculativeNumTokensRange{1, kMaxDecodeTokensPerSeq - 1};
inline constexpr IntRange kNgramRange{1, 64};
inline constexpr IntRange kDisableByBatchSizeRange{0, 1 << 16};

// Ranges above, ngram_min <= ngram_max, draft_model given exactly when method is draft; errors
// name the `speculative.` key.
Status ValidateSpeculativeConfig(const SpeculativeConfig& config);

// `k` tokens that followed the latest earlier occurrence of the longest suffix of `tokens` with
// length in [ngram_min, ngram_max] (where the text ends, the proposal repeats itself with the
// match's period); empty when no such suffix occurred before.
std::vector<int32_t> ProposeNgram(std::span<const int32_t> tokens, int32_t ngram_min,
                                  int32_t ngram_max, int32_t k);

}  // namespace pagoda
