// Sequence: one sample of a request as the scheduler sees it -- its tokens, how many of them
// have KV in the cache, and where it is in its life:
//
//        admit (blocks for the first chunk)          last token sampled: stop / length
//   WAITING ─────────────────────────────▶ RUNNING ─────────────────────────────▶ FINISHED
//      ▲                                     │  (prefill chunks, then one decode
//      └──────── preempt (blocks freed, ─────┘   token per step)
//                generated tokens kept; recomputed on re-admission)
//   abort: from any state to FINISHED, blocks freed at once.
#pragma once

#include <cstdint>
#include <vector>

#include "scheduler/request.h"

namespace pagoda {

enum class SeqStatus { kWaiting, kRunning, kFinished };

struct Sequence {
  int64_t seq_id = 0;
  int32_t sample_index = 0;
  int32_t priority = 0;
  uint64_t arrival_order = 0;      // monotonic submission counter (FCFS order)
  std::vector<int32_t> token_ids;  // prompt + generated
  int32_t num_prompt_tokens = 0;
  int32_t num_computed_tokens = 0;  // tokens whose KV is in the cache
  SeqStatus status = SeqStatus::kWaiting;
  int32_t num_cached_tokens_at_admission = -1;  // prefix-cache hit on first admission
  // Samples still to be forked from this sequence: n - 1 for a request's sample 0 until its first
  // token, else 0. The scheduler reserves a place in the batch for each (see seats()).
  int32_t num_unforked_samples = 0;
  // Speculative tokens proposed to follow token_ids (scheduler/speculative.h); the scheduler may
  // run fewer of them, and forgets them when it preempts the sequence.
  std::vector<int32_t> draft_token_ids;

  int32_t num_tokens() const { return static_cast<int32_t>(token_ids.size()); }
  int32_t num_output_tokens() const { return num_tokens() - num_prompt_tokens; }
  int32_t num_uncomputed_tokens() const { return num_tokens() - num_computed_tokens; }
  // Places this sequence takes in the running set (max_num_seqs): itself and its future forks.
  int32_t seats() const { return 1 + num_unforked_samples; }
  // Generating: all but the newest token computed and past the prompt -> one decode token.
  bool is_decoding() const {
    return num_computed_tokens >= num_prompt_tokens && num_uncomputed_tokens() == 1;
  }
};

}  // namespace pagoda
