#include "kvcache/kv_cache_manager.h"

#include <algorithm>
#include <string>

namespace pagoda {
namespace {

std::string SeqName(int64_t seq_id) { return "sequence " + std::to_string(seq_id); }

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

Status NotEnoughBlocks(int64_t needed, int32_t available) {
  return ResourceExhausted("kv cache: need " + std::to_string(needed) + " blocks, " +
                           std::to_string(available) + " available");
}

}  // namespace

Result<KvCacheManager> KvCacheManager::Create(const KvCacheConfig& config) {
  PAGODA_ASSIGN_OR_RETURN(int32_t num_blocks, ResolveNumBlocks(config));
  return KvCacheManager(num_blocks, config.block_size, config.enable_prefix_caching);
}

KvCacheManager::KvCacheManager(int32_t num_blocks, int32_t block_size, bool enable_prefix_caching)
    : pool_(num_blocks, block_size), enable_prefix_caching_(enable_prefix_caching) {}

double KvCacheManager::usage() const {
  return 1.0 - static_cast<double>(num_free_blocks()) / static_cast<double>(num_blocks());
}

PrefixCacheStats KvCacheManager::stats() const {
  PrefixCacheStats stats = stats_;
  stats.evicted_blocks = pool_.num_evictions();
  return stats;
}

const KvCacheManager::SequenceState* KvCacheManager::FindSequence(int64_t seq_id) const {
  auto it = sequences_.find(seq_id);
  return it == sequences_.end() ? nullptr : &it->second;
}

int32_t KvCacheManager::num_tokens(int64_t seq_id) const {
  const SequenceState* seq = FindSequence(seq_id);
  return seq ? seq->num_tokens : 0;
}

int32_t KvCacheManager::num_committed_tokens(int64_t seq_id) const {
  const SequenceState* seq = FindSequence(seq_id);
  return seq ? seq->num_committed_tokens : 0;
}

std::span<const int32_t> KvCacheManager::block_table(int64_t seq_id) const {
  const SequenceState* seq = FindSequence(seq_id);
  return seq ? std::span<const int32_t>(seq->block_table) : std::span<const int32_t>();
}

Status KvCacheManager::GetSlotMapping(int64_t seq_id, int32_t start_position,
                                      std::span<int32_t> slots) const {
  const SequenceState* seq = FindSequence(seq_id);
  if (!seq) return NotFound(SeqName(seq_id) + " is not allocated");
  const int64_t end = static_cast<int64_t>(start_position) + static_cast<int64_t>(slots.size());
  if (start_position < 0 || end > seq->num_tokens) {
    return OutOfRange("kv cache: slot mapping for positions [" + std::to_string(start_position) +
                      ", " + std::to_string(end) + ") of " + SeqName(seq_id) + " with " +
                      std::to_string(seq->num_tokens) + " reserved slots");
  }
  for (size_t i = 0; i < slots.size(); ++i) {
    slots[i] =
        SlotForPosition(seq->block_table, block_size(), start_position + static_cast<int32_t>(i));
  }
  return Status::Ok();
}

KvCacheManager::PrefixMatch KvCacheManager::MatchCachedPrefix(
    std::span<const int32_t> prompt_token_ids) const {
  PrefixMatch match;
  if (!enable_prefix_caching_ || prompt_token_ids.empty()) return match;
  // The last prompt token is always computed (its logits are needed).
  const size_t max_blocks = (prompt_token_ids.size() - 1) / block_size();
  for (size_t i = 0; i < max_blocks; ++i) {
    auto tokens = prompt_token_ids.subspan(i * block_size(), block_size());
    const BlockHash hash = HashBlockTokens(match.last_hash, tokens);
    const int32_t block_id = pool_.FindCached(hash, match.last_entry_id, tokens);
    if (block_id < 0) break;
    match.blocks.push_back(block_id);
    match.last_hash = hash;
    match.last_entry_id = pool_.cached_block(block_id)->entry_id;
  }
  return match;
}

int32_t KvCacheManager::NumCachedPromptTokens(std::span<const int32_t> prompt_token_ids) const {
  return static_cast<int32_t>(MatchCachedPrefix(prompt_token_ids).blocks.size()) * block_size();
}

bool KvCacheManager::NeedsCopyOnWrite(const SequenceState& seq, int32_t num_new_tokens) const {
  return num_new_tokens > 0 && seq.num_tokens % block_size() != 0 &&
         pool_.ref_count(seq.block_table.back()) > 1;
}

int32_t KvCacheManager::NumBlocksToAllocate(const SequenceState& seq,
                                            int32_t num_new_tokens) const {
  const int64_t total = static_cast<int64_t>(seq.num_tokens) + num_new_tokens;
  const int64_t blocks =
      CeilDiv(total, block_size()) - static_cast<int64_t>(seq.block_table.size());
  const int64_t with_copy = blocks + (NeedsCopyOnWrite(seq, num_new_tokens) ? 1 : 0);
  return static_cast<int32_t>(std::min<int64_t>(with_copy, int64_t{num_blocks()} + 1));
}

Result<int32_t> KvCacheManager::NumBlocksToAllocate(int64_t seq_id, int32_t num_new_tokens) const {
  const SequenceState* seq = FindSequence(seq_id);
  if (!seq) return NotFound(SeqName(seq_id) + " is not allocated");
  if (num_new_tokens < 0) return InvalidArgument("kv cache: num_new_tokens must be >= 0");
  return NumBlocksToAllocate(*seq, num_new_tokens);
}

Result<int32_t> KvCacheManager::AllocatePrompt(int64_t seq_id,
                                               std::span<const int32_t> prompt_token_ids,
                                               int32_t num_new_tokens) {
  if (HasSequence(seq_id)) return FailedPrecondition(SeqName(seq_id) + " already exists");
  if (prompt_token_ids.empty()) return InvalidArgument("kv cache: prompt_token_ids is empty");
  if (num_new_tokens < 0) return InvalidArgument("kv cache: num_new_tokens must be >= 0");
  PrefixMatch match = MatchCachedPrefix(prompt_token_ids);
  const int32_t num_cached_tokens = static_cast<int32_t>(match.blocks.size()) * block_size();
  const int64_t total = static_cast<int64_t>(num_cached_tokens) + num_new_tokens;
  const int64_t new_blocks =
      CeilDiv(total, block_size()) - static_cast<int64_t>(match.blocks.size());
  // Hits on unreferenced cached blocks leave the evictor, so they are not available for new ones.
  const int64_t evictable_hits =
      std::count_if(match.blocks.begin(), match.blocks.end(),
                    [&](int32_t b) { return pool_.state(b) == BlockState::kEvictable; });
  const int64_t available = num_free_blocks() - evictable_hits;
  if (new_blocks > available) return NotEnoughBlocks(new_blocks, static_cast<int32_t>(available));

  SequenceState seq;
  seq.block_table = std::move(match.blocks);
  for (int32_t block_id : seq.block_table) pool_.IncRef(block_id);
  for (int64_t i = 0; i < new_blocks; ++i) seq.block_table.push_back(pool_.Allocate());
  seq.num_tokens = static_cast<int32_t>(total);
  seq.num_committed_tokens = num_cached_tokens;
  seq.last_full_block_hash = match.last_hash;
  seq.last_full_block_entry_id = match.last_entry_id;
  seq.partial_block_tokens.reserve(block_size());
  sequences_.emplace(seq_id, std::move(seq));

  ++stats_.num_queries;
  stats_.queried_tokens += static_cast<int64_t>(prompt_token_ids.size());
  stats_.hit_tokens += num_cached_tokens;
  return num_cached_tokens;
}

Status KvCacheManager::AllocateSlots(int64_t seq_id, int32_t num_new_tokens) {
  auto it = sequences_.find(seq_id);
  if (it == sequences_.end()) return NotFound(SeqName(seq_id) + " is not allocated");
  if (num_new_tokens < 0) return InvalidArgument("kv cache: num_new_tokens must be >= 0");
  SequenceState& seq = it->second;
  const int32_t needed = NumBlocksToAllocate(seq, num_new_tokens);
  if (needed > num_free_blocks()) return NotEnoughBlocks(needed, num_free_blocks());

  if (NeedsCopyOnWrite(seq, num_new_tokens)) {
    const int32_t shared = seq.block_table.back();
    const int32_t copy = pool_.Allocate();
    pending_copies_.push_back(BlockCopy{shared, copy});
    pool_.DecRef(shared);
    seq.block_table.back() = copy;
  }
  const int64_t total = static_cast<int64_t>(seq.num_tokens) + num_new_tokens;
  while (static_cast<int64_t>(seq.block_table.size()) * block_size() < total) {
    seq.block_table.push_back(pool_.Allocate());
  }
  seq.num_tokens = static_cast<int32_t>(total);
  return Status::Ok();
}

Status KvCacheManager::CommitTokens(int64_t seq_id, std::span<const int32_t> token_ids) {
  auto it = sequences_.find(seq_id);
  if (it == sequences_.end()) return NotFound(SeqName(seq_id) + " is not allocated");
  SequenceState& seq = it->second;
  const int64_t end = static_cast<int64_t>(seq.num_committed_tokens) + token_ids.size();
  if (end > seq.num_tokens) {
    return OutOfRange("kv cache: committing " + std::to_string(token_ids.size()) + " tokens to " +
                      SeqName(seq_id) + " with " +
                      std::to_string(seq.num_tokens - seq.num_committed_tokens) +
                      " uncommitted slots");
  }
  if (!enable_prefix_caching_) {
    seq.num_committed_tokens = static_cast<int32_t>(end);
    return Status::Ok();
  }
  for (int32_t token_id : token_ids) {
    seq.partial_block_tokens.push_back(token_id);
    ++seq.num_committed_tokens;
    if (static_cast<int32_t>(seq.partial_block_tokens.size()) == block_size()) {
      RegisterFullBlock(seq);
      seq.partial_block_tokens.clear();
    }
  }
  return Status::Ok();
}

void KvCacheManager::RegisterFullBlock(SequenceState& seq) {
  const int32_t block_id = seq.block_table[seq.num_committed_tokens / block_size() - 1];
  const BlockHash hash = HashBlockTokens(seq.last_full_block_hash, seq.partial_block_tokens);
  seq.last_full_block_entry_id =
      pool_.Register(block_id, hash, seq.last_full_block_hash, seq.last_full_block_entry_id,
                     seq.partial_block_tokens);
  seq.last_full_block_hash = hash;
}

Status KvCacheManager::Fork(int64_t parent_seq_id, int64_t child_seq_id) {
  const SequenceState* parent = FindSequence(parent_seq_id);
  if (!parent) return NotFound(SeqName(parent_seq_id) + " is not allocated");
  if (HasSequence(child_seq_id))
    return FailedPrecondition(SeqName(child_seq_id) + " already exists");
  if (parent->num_committed_tokens != parent->num_tokens) {
    return FailedPrecondition("kv cache: cannot fork " + SeqName(parent_seq_id) + ": " +
                              std::to_string(parent->num_tokens - parent->num_committed_tokens) +
                              " reserved slots are not committed yet");
  }
  SequenceState child = *parent;
  for (int32_t block_id : child.block_table) pool_.IncRef(block_id);
  sequences_.emplace(child_seq_id, std::move(child));
  return Status::Ok();
}

Status KvCacheManager::TruncateSlots(int64_t seq_id, int32_t num_tokens) {
  auto it = sequences_.find(seq_id);
  if (it == sequences_.end()) return NotFound(SeqName(seq_id) + " is not allocated");
  SequenceState& seq = it->second;
  if (num_tokens < seq.num_committed_tokens || num_tokens > seq.num_tokens) {
    return OutOfRange("kv cache: truncating " + SeqName(seq_id) + " to " +
                      std::to_string(num_tokens) + " positions; it has " +
                      std::to_string(seq.num_committed_tokens) + " committed and " +
                      std::to_string(seq.num_tokens) + " reserved");
  }
  const size_t keep = static_cast<size_t>((num_tokens + block_size() - 1) / block_size());
  while (seq.block_table.size() > keep) {  // uncommitted blocks: never in the prefix cache
    pool_.DecRef(seq.block_table.back());
    seq.block_table.pop_back();
  }
  seq.num_tokens = num_tokens;
  return Status::Ok();
}

Status KvCacheManager::Free(int64_t seq_id) {
  auto it = sequences_.find(seq_id);
  if (it == sequences_.end()) return NotFound(SeqName(seq_id) + " is not allocated");
  const std::vector<int32_t>& table = it->second.block_table;
  // Release the tail first: it becomes the least recently used, so it is evicted before the
  // prefix blocks it depends on.
  for (auto block = table.rbegin(); block != table.rend(); ++block) pool_.DecRef(*block);
  sequences_.erase(it);
  std::erase_if(pending_copies_, [&](const BlockCopy& copy) {
    return pool_.state(copy.dst_block) != BlockState::kInUse;
  });
  return Status::Ok();
}

std::vector<BlockCopy> KvCacheManager::TakePendingBlockCopies() {
  std::vector<BlockCopy> copies;
  copies.swap(pending_copies_);
  return copies;
}

}  // namespace pagoda
