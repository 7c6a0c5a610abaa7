// The StepBatch checks every backend's Execute makes (kernels/backend.h): its sequences' rows,
// order, block tables and the logits size. Header-only (kernels/ has no library of its own);
// each backend checks its own limits (batch and sequence counts, vocabulary) around it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/status.h"
#include "kernels/backend.h"

namespace pagoda {

// INVALID_ARGUMENT unless the sequences cover token_ids in contiguous, ascending, non-empty row
// ranges, decodes first, each block table covers its sequence's positions with ids below
// caps.num_blocks, and `logits_size` is one `vocab`-wide row per sequence with needs_logits. A
// sequence ending past `max_len` returns `past_max_len(end)` (the backend's own OUT_OF_RANGE).
template <typename PastMaxLen>
Status ValidateStepSequences(const StepBatch& b, size_t logits_size,
                             const BackendCapabilities& caps, int32_t vocab, int64_t max_len,
                             PastMaxLen&& past_max_len) {
  int32_t next_row = 0, logit_rows = 0;
  bool seen_prefill = false;
  for (const StepSequence& s : b.seqs) {
    if (s.query_start != next_row || s.query_len < 1 || s.num_computed_tokens < 0) {
      return InvalidArgument("seqs: rows must be contiguous, ascending and non-empty");
    }
    if (s.is_decode && seen_prefill) return InvalidArgument("seqs: decodes must come first");
    seen_prefill |= !s.is_decode;
    const int64_t end = int64_t{s.num_computed_tokens} + s.query_len;
    if (end > max_len) return past_max_len(end);
    if (static_cast<int64_t>(s.block_table.size()) * caps.block_size < end) {
      return InvalidArgument("seqs: block_table does not cover the sequence's positions");
    }
    for (int32_t blk : s.block_table) {
      if (blk >= caps.num_blocks) return InvalidArgument("seqs: block id past the pool");
    }
    next_row += s.query_len;
    logit_rows += s.needs_logits ? 1 : 0;
  }
  if (next_row != static_cast<int32_t>(b.token_ids.size())) {
    return InvalidArgument("seqs: do not cover token_ids");
  }
  if (logits_size != static_cast<size_t>(logit_rows) * vocab) {
    return InvalidArgument("logits: expected " + std::to_string(logit_rows) + " rows");
  }
  return Status::Ok();
}

}  // namespace pagoda
