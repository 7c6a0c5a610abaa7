#include "kvcache/block_pool.h"

#include <algorithm>
#include <cassert>

namespace pagoda {

BlockPool::BlockPool(int32_t num_blocks, int32_t block_size)
    : block_size_(block_size),
      ref_counts_(num_blocks, 0),
      states_(num_blocks, BlockState::kFree),
      evictor_prev_(num_blocks, -1),
      evictor_next_(num_blocks, -1),
      cached_info_(num_blocks),
      cached_token_ids_(static_cast<size_t>(num_blocks) * block_size, 0) {
  free_list_.reserve(num_blocks);
  // Pushed in reverse so that block 0 is handed out first.
  for (int32_t b = num_blocks - 1; b >= 0; --b) free_list_.push_back(b);
}

int32_t BlockPool::Allocate() {
  int32_t block_id;
  if (!free_list_.empty()) {
    block_id = free_list_.back();
    free_list_.pop_back();
  } else if (evictor_head_ >= 0) {
    block_id = evictor_head_;
    EvictorRemove(block_id);
    Uncache(block_id);
    ++num_evictions_;
  } else {
    return -1;
  }
  states_[block_id] = BlockState::kInUse;
  ref_counts_[block_id] = 1;
  return block_id;
}

void BlockPool::IncRef(int32_t block_id) {
  assert(states_[block_id] != BlockState::kFree && "IncRef on a free block");
  if (states_[block_id] == BlockState::kEvictable) {
    EvictorRemove(block_id);
    states_[block_id] = BlockState::kInUse;
  }
  ++ref_counts_[block_id];
}

void BlockPool::DecRef(int32_t block_id) {
  assert(ref_counts_[block_id] > 0 && "DecRef on an unreferenced block");
  if (--ref_counts_[block_id] > 0) return;
  if (cached_info_[block_id].entry_id != 0) {
    states_[block_id] = BlockState::kEvictable;
    EvictorPushBack(block_id);
  } else {
    states_[block_id] = BlockState::kFree;
    free_list_.push_back(block_id);
  }
}

int32_t BlockPool::FindCached(const BlockHash& hash, uint64_t parent_entry_id,
                              std::span<const int32_t> token_ids) const {
  auto it = cache_.find(hash);
  if (it == cache_.end() || !Verify(it->second, parent_entry_id, token_ids)) return -1;
  return it->second;
}

uint64_t BlockPool::Register(int32_t block_id, const BlockHash& hash, const BlockHash& parent_hash,
                             uint64_t parent_entry_id, std::span<const int32_t> token_ids) {
  assert(states_[block_id] == BlockState::kInUse);
  assert(static_cast<int32_t>(token_ids.size()) == block_size_);
  if (cached_info_[block_id].entry_id != 0) return cached_info_[block_id].entry_id;
  auto it = cache_.find(hash);
  if (it != cache_.end()) {
    const int32_t existing = it->second;
    if (Verify(existing, parent_entry_id, token_ids)) return cached_info_[existing].entry_id;
    // Stale entry (its parent entry was evicted) or a true hash collision: newest wins.
    if (states_[existing] == BlockState::kEvictable) {
      EvictorRemove(existing);
      Uncache(existing);
      states_[existing] = BlockState::kFree;
      free_list_.push_back(existing);
      ++num_evictions_;
    } else {
      Uncache(existing);  // its holders keep using it; it becomes free when released
    }
  }
  const uint64_t entry_id = next_entry_id_++;
  cached_info_[block_id] = CachedBlockInfo{hash, parent_hash, entry_id, parent_entry_id};
  std::copy(token_ids.begin(), token_ids.end(),
            cached_token_ids_.begin() + static_cast<size_t>(block_id) * block_size_);
  cache_[hash] = block_id;
  return entry_id;
}

const CachedBlockInfo* BlockPool::cached_block(int32_t block_id) const {
  return cached_info_[block_id].entry_id != 0 ? &cached_info_[block_id] : nullptr;
}

std::span<const int32_t> BlockPool::cached_tokens(int32_t block_id) const {
  return std::span<const int32_t>(cached_token_ids_)
      .subspan(static_cast<size_t>(block_id) * block_size_, block_size_);
}

int32_t BlockPool::DropEvictable() {
  int32_t dropped = 0;
  while (evictor_head_ >= 0) {
    const int32_t block_id = evictor_head_;
    EvictorRemove(block_id);
    Uncache(block_id);
    states_[block_id] = BlockState::kFree;
    free_list_.push_back(block_id);
    ++dropped;
  }
  return dropped;
}

void BlockPool::EvictorPushBack(int32_t block_id) {
  evictor_prev_[block_id] = evictor_tail_;
  evictor_next_[block_id] = -1;
  if (evictor_tail_ >= 0) {
    evictor_next_[evictor_tail_] = block_id;
  } else {
    evictor_head_ = block_id;
  }
  evictor_tail_ = block_id;
  ++num_evictable_;
}

void BlockPool::EvictorRemove(int32_t block_id) {
  const int32_t prev = evictor_prev_[block_id];
  const int32_t next = evictor_next_[block_id];
  (prev >= 0 ? evictor_next_[prev] : evictor_head_) = next;
  (next >= 0 ? evictor_prev_[next] : evictor_tail_) = prev;
  evictor_prev_[block_id] = -1;
  evictor_next_[block_id] = -1;
  --num_evictable_;
}

void BlockPool::Uncache(int32_t block_id) {
  CachedBlockInfo& info = cached_info_[block_id];
  if (info.entry_id == 0) return;
  auto it = cache_.find(info.hash);
  if (it != cache_.end() && it->second == block_id) cache_.erase(it);
  info = CachedBlockInfo{};
}

bool BlockPool::Verify(int32_t block_id, uint64_t parent_entry_id,
                       std::span<const int32_t> token_ids) const {
  const CachedBlockInfo& info = cached_info_[block_id];
  if (info.entry_id == 0 || info.parent_entry_id != parent_entry_id) return false;
  if (static_cast<int32_t>(token_ids.size()) != block_size_) return false;
  return std::equal(token_ids.begin(), token_ids.end(), cached_tokens(block_id).begin());
}

}  // namespace pagoda
