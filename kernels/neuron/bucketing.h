// Bucket choice (docs/neuron-backend.md 5.6): which compiled program runs a group of decode rows or
// a prefill chunk, and how a step is split so that some program can always run each part.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/neuron/manifest.h"

namespace pagoda::neuron {

// Smallest decode program that takes `n_seqs` sequences of up to `query_len` new tokens each
// (1 for a plain decode, k + 1 when verifying k drafts) with `ctx_blocks` blocks of context:
// among those with tokens_per_seq >= query_len, max_seqs >= n_seqs and max_ctx_blocks >=
// ctx_blocks, the smallest tokens_per_seq, then max_seqs, then max_ctx_blocks. -1 if none.
int PickDecodeProgram(const std::vector<ManifestProgram>& programs, int32_t n_seqs,
                      int32_t query_len, int32_t ctx_blocks);
// Smallest prefill program with max_tokens >= n_tokens and max_ctx_blocks >= ctx_blocks. -1 if
// none.
int PickPrefillProgram(const std::vector<ManifestProgram>& programs, int32_t n_tokens,
                       int32_t ctx_blocks);

// Largest context (in blocks) that both a decode and a prefill program reach: the backend's
// max_model_len is this times block_size. 0 if a phase has no program.
int32_t MaxContextBlocks(const std::vector<ManifestProgram>& programs);

// Largest tokens_per_seq / max_tokens any decode / prefill program takes with at least
// `ctx_blocks` of context (0 if none).
int32_t MaxTokensPerSeq(const std::vector<ManifestProgram>& programs, int32_t ctx_blocks);
int32_t MaxPrefillTokens(const std::vector<ManifestProgram>& programs, int32_t ctx_blocks);

inline int32_t CeilDiv(int64_t a, int64_t b) { return static_cast<int32_t>((a + b - 1) / b); }

}  // namespace pagoda::neuron
