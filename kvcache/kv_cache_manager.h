// KvCacheManager: per-sequence block tables over a BlockPool, slot mapping, prefix caching and
// copy-on-write, in the spirit of vLLM's KVCacheManager. CPU-side bookkeeping only: the KV data
// lives in a KvPool (kv_pool.h), which the backend updates.
//
// Per step, for each scheduled sequence the scheduler calls AllocatePrompt (new sequence:
// reuses the cached prefix, reserves its first chunk) or AllocateSlots (more tokens), takes the
// pending block copies (TakePendingBlockCopies) for the backend to perform before the step,
// reads GetSlotMapping / block_table, and after the step calls CommitTokens with the token ids
// whose KV was computed, so that full blocks enter the prefix cache. Free releases a sequence.
// Allocation is all-or-nothing: ResourceExhausted leaves every state unchanged (preempt + retry).
//
// Terms: a sequence's "tokens" are positions with a reserved slot (num_tokens); "committed"
// tokens are those whose ids were reported via CommitTokens (KV written). Slots are
// block_id * block_size + offset; kPadSlot (-1) means "skip" (docs/seed-kernels.md 0.3).
// Hit counters are in tokens, like vLLM. Not thread-safe: one engine thread owns it.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "kvcache/block_pool.h"
#include "kvcache/kv_cache_config.h"
#include "kvcache/kv_types.h"

namespace pagoda {

struct PrefixCacheStats {
  int64_t num_queries = 0;     // successful AllocatePrompt calls
  int64_t queried_tokens = 0;  // prompt tokens looked up
  int64_t hit_tokens = 0;      // of those, served from cached blocks (num_cached_tokens)
  int64_t evicted_blocks = 0;  // cached blocks whose content was dropped to reuse the block
};

class KvCacheManager {
 public:
  // Validates `config` and sizes the pool (ResolveNumBlocks).
  static Result<KvCacheManager> Create(const KvCacheConfig& config);
  // Preconditions: num_blocks >= 1, block_size a power of two in [1, 256].
  KvCacheManager(int32_t num_blocks, int32_t block_size, bool enable_prefix_caching);

  int32_t block_size() const { return pool_.block_size(); }
  int32_t num_blocks() const { return pool_.num_blocks(); }
  bool prefix_caching_enabled() const { return enable_prefix_caching_; }
  // Blocks available to new allocations: free + evictable (cached but unreferenced).
  int32_t num_free_blocks() const { return pool_.num_available_blocks(); }
  int32_t num_evictable_blocks() const { return pool_.num_evictable_blocks(); }
  // Fraction of blocks referenced by some sequence, in [0, 1].
  double usage() const;
  bool CanAllocate(int32_t num_new_blocks) const { return num_new_blocks <= num_free_blocks(); }
  PrefixCacheStats stats() const;

  bool HasSequence(int64_t seq_id) const { return sequences_.contains(seq_id); }
  int32_t num_sequences() const { return static_cast<int32_t>(sequences_.size()); }
  // Positions with a reserved slot / with committed token ids; 0 for an unknown sequence.
  int32_t num_tokens(int64_t seq_id) const;
  int32_t num_committed_tokens(int64_t seq_id) const;
  // Physical block ids of the sequence, one per block_size positions; empty if unknown.
  std::span<const int32_t> block_table(int64_t seq_id) const;
  // Writes the slots of positions [start_position, start_position + slots.size()).
  // OutOfRange unless all those positions have reserved slots.
  Status GetSlotMapping(int64_t seq_id, int32_t start_position, std::span<int32_t> slots) const;

  // Tokens AllocatePrompt would take from the prefix cache now (no side effects).
  int32_t NumCachedPromptTokens(std::span<const int32_t> prompt_token_ids) const;
  // New blocks AllocateSlots(seq_id, num_new_tokens) would take (including a copy-on-write).
  Result<int32_t> NumBlocksToAllocate(int64_t seq_id, int32_t num_new_tokens) const;

  // Starts `seq_id`: reuses every cached full block of the prompt prefix (at most
  // prompt_len - 1 tokens, whole blocks), then reserves slots for `num_new_tokens` more
  // positions. Returns num_cached_tokens; those count as committed.
  Result<int32_t> AllocatePrompt(int64_t seq_id, std::span<const int32_t> prompt_token_ids,
                                 int32_t num_new_tokens);
  // Reserves slots for positions [num_tokens, num_tokens + num_new_tokens). Writing into a
  // partly filled block shared with another sequence first moves it to a fresh block and
  // queues a BlockCopy (see TakePendingBlockCopies).
  Status AllocateSlots(int64_t seq_id, int32_t num_new_tokens);
  // Reports the ids of the next committed tokens (their KV is in the pool). Each block that
  // becomes full is registered in the prefix cache. OutOfRange past the reserved slots.
  Status CommitTokens(int64_t seq_id, std::span<const int32_t> token_ids);
  // Gives back the reserved slots past the first `num_tokens` positions (speculative tokens that
  // were rejected): blocks no longer needed return to the pool. Committed positions stay, so
  // num_committed_tokens <= num_tokens <= the reserved count (OutOfRange otherwise).
  Status TruncateSlots(int64_t seq_id, int32_t num_tokens);
  // Makes `child_seq_id` share all of the parent's blocks. The parent must have no reserved
  // but uncommitted slots (FailedPrecondition), so the shared blocks are never written twice.
  Status Fork(int64_t parent_seq_id, int64_t child_seq_id);
  // Releases the sequence's blocks; cached ones stay reusable until evicted.
  Status Free(int64_t seq_id);
  // Copies queued by AllocateSlots since the last call; the backend performs them in order
  // (KvPool::CopyBlocks) before the step's writes. Copies into blocks freed meanwhile are dropped.
  std::vector<BlockCopy> TakePendingBlockCopies();

 private:
  friend struct KvCacheManagerTestPeer;  // tests/kvcache/kv_cache_manager_test_peer.h

  struct SequenceState {
    std::vector<int32_t> block_table;
    int32_t num_tokens = 0;
    int32_t num_committed_tokens = 0;
    std::vector<int32_t> partial_block_tokens;  // committed ids of the block being filled
    BlockHash last_full_block_hash = kRootBlockHash;
    uint64_t last_full_block_entry_id = kRootEntryId;
  };
  struct PrefixMatch {
    std::vector<int32_t> blocks;
    BlockHash last_hash = kRootBlockHash;
    uint64_t last_entry_id = kRootEntryId;
  };

  PrefixMatch MatchCachedPrefix(std::span<const int32_t> prompt_token_ids) const;
  int32_t NumBlocksToAllocate(const SequenceState& seq, int32_t num_new_tokens) const;
  bool NeedsCopyOnWrite(const SequenceState& seq, int32_t num_new_tokens) const;
  void RegisterFullBlock(SequenceState& seq);
  const SequenceState* FindSequence(int64_t seq_id) const;

  BlockPool pool_;
  bool enable_prefix_caching_;
  std::unordered_map<int64_t, SequenceState> sequences_;
  std::vector<BlockCopy> pending_copies_;
  PrefixCacheStats stats_;
};

}  // namespace pagoda
