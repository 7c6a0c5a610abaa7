// BlockPool: the physical KV block allocator and the prefix-cache store behind KvCacheManager.
//
// Every block is in exactly one state:
//   kFree       ref count 0, no cached content, on the free list;
//   kInUse      ref count > 0 (held by that many block-table entries);
//   kEvictable  ref count 0 but holding cached content, kept in LRU order until reused.
// Allocate() takes a free block first and otherwise evicts the least recently freed evictable
// block (dropping its cache entry). All block operations are O(1); cache look-ups are O(1)
// hash-map operations plus an O(block_size) token comparison.
//
// Cache entries: a full block is registered under the chained hash of its content, together
// with its token ids and the entry id of its parent block's cache entry. Entry ids are never
// reused, so verifying (tokens, parent entry id) on a hit makes a wrong-content hit impossible
// even if two different prefixes ever had equal 128-bit hashes.
// Not thread-safe: owned and used by one engine thread.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "kvcache/block_hash.h"

namespace pagoda {

enum class BlockState : uint8_t { kFree, kInUse, kEvictable };

// Entry id of the (virtual) parent of a sequence's first block. Real entry ids start at 1.
inline constexpr uint64_t kRootEntryId = 0;

struct CachedBlockInfo {
  BlockHash hash;                // HashBlockTokens(parent_hash, tokens)
  BlockHash parent_hash;         // kRootBlockHash for a sequence's first block
  uint64_t entry_id = 0;         // unique per registration; 0 = block not cached
  uint64_t parent_entry_id = 0;  // kRootEntryId for a sequence's first block
};

class BlockPool {
 public:
  BlockPool(int32_t num_blocks, int32_t block_size);

  int32_t num_blocks() const { return static_cast<int32_t>(ref_counts_.size()); }
  int32_t block_size() const { return block_size_; }
  int32_t num_free_blocks() const { return static_cast<int32_t>(free_list_.size()); }
  int32_t num_evictable_blocks() const { return num_evictable_; }
  // Blocks an allocation can use: free + evictable.
  int32_t num_available_blocks() const { return num_free_blocks() + num_evictable_; }
  int32_t num_cached_blocks() const { return static_cast<int32_t>(cache_.size()); }
  int64_t num_evictions() const { return num_evictions_; }

  // A block with ref count 1, or -1 when none is available.
  int32_t Allocate();
  // ref++. An evictable block (a cache hit on freed content) leaves the evictor.
  void IncRef(int32_t block_id);
  // ref--. At zero the block becomes evictable if it holds cached content, else free.
  void DecRef(int32_t block_id);
  int32_t ref_count(int32_t block_id) const { return ref_counts_[block_id]; }
  BlockState state(int32_t block_id) const { return states_[block_id]; }

  // The cached block holding `token_ids` under `hash` after parent entry `parent_entry_id`,
  // or -1. Verifies the stored tokens and parent entry id; does not change any state.
  int32_t FindCached(const BlockHash& hash, uint64_t parent_entry_id,
                     std::span<const int32_t> token_ids) const;
  // Registers the full, in-use `block_id` as a cache entry. If a verified entry for the same
  // content already exists, the block stays uncached and that entry's id is returned; a stale
  // entry under the same hash that fails verification is dropped and replaced. Returns the
  // entry id the content is now cached under.
  uint64_t Register(int32_t block_id, const BlockHash& hash, const BlockHash& parent_hash,
                    uint64_t parent_entry_id, std::span<const int32_t> token_ids);
  // Cache metadata of `block_id`, or nullptr if it holds no cached content.
  const CachedBlockInfo* cached_block(int32_t block_id) const;
  // Stored token ids of a cached block (block_size of them).
  std::span<const int32_t> cached_tokens(int32_t block_id) const;
  // Drops the cached content of every evictable block (they become free). Returns the count.
  int32_t DropEvictable();

 private:
  void EvictorPushBack(int32_t block_id);
  void EvictorRemove(int32_t block_id);
  void Uncache(int32_t block_id);
  bool Verify(int32_t block_id, uint64_t parent_entry_id, std::span<const int32_t> token_ids) const;

  int32_t block_size_;
  std::vector<int32_t> ref_counts_;
  std::vector<BlockState> states_;
  std::vector<int32_t> free_list_;  // stack of kFree blocks
  // Evictor: intrusive doubly linked list over block ids, head = least recently freed.
  std::vector<int32_t> evictor_prev_;
  std::vector<int32_t> evictor_next_;
  int32_t evictor_head_ = -1;
  int32_t evictor_tail_ = -1;
  int32_t num_evictable_ = 0;
  // Prefix cache.
  std::vector<CachedBlockInfo> cached_info_;
  std::vector<int32_t> cached_token_ids_;  // [num_blocks][block_size]
  std::unordered_map<BlockHash, int32_t, BlockHashHasher> cache_;
  uint64_t next_entry_id_ = kRootEntryId + 1;
  int64_t num_evictions_ = 0;
};

}  // namespace pagoda
