// DraftProposer: speculative proposals from a draft model (speculative.method draft) -- a smaller
// model with the target's vocabulary, run on its own Backend with its own paged KV cache (a
// KvCacheManager without prefix caching), proposing k tokens per sequence greedily (argmax). A
// greedy proposal is a point mass, so the OutputProcessor's accept rule keeps the target
// distribution exactly (speculative.h).
//
// Per call, for each sequence: the draft cache keeps the longest prefix of its KV that still
// matches seq.token_ids (accepted proposals stay, rejected ones are truncated), the rest of the
// tokens are run as prefill chunks (batched across sequences within the backend's step caps), the
// last row gives proposal 1, then k - 1 batched single-token decode steps give the others.
// Failures never fail a request: a sequence the draft cache cannot hold, or whose draft step
// fails, gets no proposals this step (its draft KV is dropped and rebuilt later).
//
// Ownership: the engine owns the proposer; the Backend (and its model) must outlive it. Sequences
// are the OutputProcessor's; Propose only writes their draft_token_ids. Release(seq_id) when a
// sequence finishes frees its draft blocks. Not thread-safe: the engine thread only.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "kernels/backend.h"
#include "kvcache/kv_cache_manager.h"
#include "scheduler/sequence.h"

namespace pagoda {

struct DraftRequest {
  Sequence* seq = nullptr;
  int32_t num_tokens = 0;  // proposals wanted (k >= 1)
};

class DraftProposer {
 public:
  explicit DraftProposer(Backend& backend);

  // Sets each request's seq->draft_token_ids to at most num_tokens proposals (fewer where the
  // draft model's context ends; none on a draft-side failure).
  void Propose(std::span<const DraftRequest> requests);
  // Frees the sequence's draft KV (unknown ids: no-op).
  void Release(int64_t seq_id);

  int32_t num_blocks_in_use() const { return kv_.num_blocks() - kv_.num_free_blocks(); }
  int32_t num_sequences() const { return kv_.num_sequences(); }

 private:
  struct Work {
    Sequence* seq = nullptr;
    int32_t num_tokens = 0;  // proposals wanted
    // cached_[seq->seq_id]: while catching up, its size is the position of the next token of
    // seq->token_ids to run (caught up when it reaches token_ids.size()).
    std::vector<int32_t>* cached = nullptr;
    std::vector<int32_t> proposals;
    bool failed = false;
    size_t left_to_catch_up() const { return seq->token_ids.size() - cached->size(); }
  };

  bool Reconcile(Work& w);
  void RunCatchUp(std::vector<Work>& works);
  void RunDecodeRounds(std::vector<Work>& works);
  // Runs one draft step over works[members[m]] with lens[m] tokens each (decode: the last
  // proposal; else the next tokens to catch up on); appends the argmax of the sequence's last row
  // to its proposals where wants_logits[m] != 0.
  void RunStep(std::vector<Work>& works, std::span<const size_t> members,
               std::span<const int32_t> lens, std::span<const char> wants_logits, bool decode);
  void Drop(Work& w);
  static const int32_t* StepTokens(const Work& w, bool decode);

  Backend& backend_;
  KvCacheManager kv_;
  // seq_id -> token ids whose KV is in the draft cache (positions 0, 1, ...).
  std::unordered_map<int64_t, std::vector<int32_t>> cached_;
  std::vector<int32_t> token_ids_, slot_mapping_;
  std::vector<StepSequence> step_seqs_;
  std::vector<float> logits_;
};

}  // namespace pagoda
