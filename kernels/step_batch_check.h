// The StepBatch checks every backend's Execute makes (kernels/backend.h), and the engine tests'
// fake backend with them: the step's token and sequence counts against the capabilities (the
// config's engine caps), slots, token ids, its sequences' rows, order, block tables and the
// logits size. Header-only (kernels/ has no library of its own).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "common/status.h"
#include "kernels/backend.h"

namespace pagoda {

// INVALID_ARGUMENT unless the sequences cover token_ids in contiguous, ascending, non-empty row
// ranges, decodes first, each block table covers its sequence's positions with ids below
// caps.num_blocks, and `logits_size` is num_logits `vocab`-wide rows per sequence (0 <= num_logits
// <= query_len). A sequence ending past `max_len` returns `past_max_len(end)` (the backend's own
// OUT_OF_RANGE).
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
      if (blk < 0 || blk >= caps.num_blocks) return InvalidArgument("seqs: block id past the pool");
    }
    next_row += s.query_len;
    if (s.num_logits < 0 || s.num_logits > s.query_len) {
      return InvalidArgument("seqs: num_logits must be in [0, query_len]");
    }
    logit_rows += s.num_logits;
  }
  if (next_row != static_cast<int32_t>(b.token_ids.size())) {
    return InvalidArgument("seqs: do not cover token_ids");
  }
  if (logits_size != static_cast<size_t>(logit_rows) * vocab) {
    return InvalidArgument("logits: expected " + std::to_string(logit_rows) + " rows");
  }
  return Status::Ok();
}

// Every check of one step: 1..caps.max_num_batched_tokens tokens with ids in [0, vocab), a slot
// per token (< 0: not written) inside the pool, 1..caps.max_num_seqs sequences, then
// ValidateStepSequences. INVALID_ARGUMENT names the field and the expected range.
template <typename PastMaxLen>
Status ValidateStepBatch(const StepBatch& b, size_t logits_size, const BackendCapabilities& caps,
                         int32_t vocab, int64_t max_len, PastMaxLen&& past_max_len) {
  const int64_t n = static_cast<int64_t>(b.token_ids.size());
  if (n == 0 || n > caps.max_num_batched_tokens) {
    return InvalidArgument("token_ids: " + std::to_string(n) + " tokens (expected 1.." +
                           std::to_string(caps.max_num_batched_tokens) + ")");
  }
  if (static_cast<int64_t>(b.slot_mapping.size()) != n) {
    return InvalidArgument("slot_mapping: " + std::to_string(b.slot_mapping.size()) +
                           " slots for " + std::to_string(n) + " tokens");
  }
  const int64_t num_slots = int64_t{caps.num_blocks} * caps.block_size;
  for (int32_t slot : b.slot_mapping) {
    if (slot >= num_slots) {
      return InvalidArgument("slot_mapping: slot " + std::to_string(slot) + " past the pool (" +
                             std::to_string(num_slots) + " slots)");
    }
  }
  if (b.seqs.empty() || static_cast<int64_t>(b.seqs.size()) > caps.max_num_seqs) {
    return InvalidArgument("seqs: " + std::to_string(b.seqs.size()) + " sequences (expected 1.." +
                           std::to_string(caps.max_num_seqs) + ")");
  }
  for (int32_t id : b.token_ids) {
    if (id < 0 || id >= vocab) {
      return InvalidArgument("token_ids: " + std::to_string(id) +
                             " is outside the vocabulary [0, " + std::to_string(vocab) + ")");
    }
  }
  for (const BlockCopy& c : b.block_copies) {
    if (c.src_block < 0 || c.src_block >= caps.num_blocks || c.dst_block < 0 ||
        c.dst_block >= caps.num_blocks) {
      return InvalidArgument("block_copies: block id outside [0, " +
                             std::to_string(caps.num_blocks) + ")");
    }
  }
  return ValidateStepSequences(b, logits_size, caps, vocab, max_len,
                               std::forward<PastMaxLen>(past_max_len));
}

}  // namespace pagoda
