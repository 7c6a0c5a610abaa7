#include "kvcache/kv_cache_manager.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "kernels/cpu/kv_pool.h"
#include "tests/kvcache/kv_cache_manager_test_peer.h"

namespace pagoda {
namespace {

std::vector<int32_t> Iota(int32_t count, int32_t first = 100) {
  std::vector<int32_t> tokens(count);
  std::iota(tokens.begin(), tokens.end(), first);
  return tokens;
}

std::vector<int32_t> Slots(const KvCacheManager& m, int64_t seq, int32_t start, int32_t count) {
  std::vector<int32_t> slots(count, kPadSlot);
  EXPECT_TRUE(m.GetSlotMapping(seq, start, slots).ok());
  return slots;
}

// Runs a full prefill of `prompt` for a new sequence and commits it.
int32_t Prefill(KvCacheManager& m, int64_t seq, const std::vector<int32_t>& prompt) {
  const int32_t cached = m.NumCachedPromptTokens(prompt);
  Result<int32_t> got = m.AllocatePrompt(seq, prompt, static_cast<int32_t>(prompt.size()) - cached);
  EXPECT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, cached);
  EXPECT_TRUE(m.CommitTokens(seq, std::span(prompt).subspan(cached)).ok());
  return cached;
}

TEST(KvCacheManagerTest, AllocatePromptReservesBlocksAndSlots) {
  KvCacheManager m(8, 4, true);
  Result<int32_t> cached = m.AllocatePrompt(1, Iota(10), 10);
  ASSERT_TRUE(cached.ok());
  EXPECT_EQ(*cached, 0);
  ASSERT_EQ(m.block_table(1).size(), 3u);
  EXPECT_EQ(m.num_tokens(1), 10);
  EXPECT_EQ(m.num_committed_tokens(1), 0);
  EXPECT_EQ(m.num_free_blocks(), 5);
  EXPECT_DOUBLE_EQ(m.usage(), 3.0 / 8.0);
  std::vector<int32_t> slots = Slots(m, 1, 0, 10);
  auto table = m.block_table(1);
  for (int32_t p = 0; p < 10; ++p) EXPECT_EQ(slots[p], table[p / 4] * 4 + p % 4);
  std::vector<int32_t> too_many(11);
  EXPECT_EQ(m.GetSlotMapping(1, 0, too_many).code(), StatusCode::kOutOfRange);
  EXPECT_EQ(m.GetSlotMapping(1, -1, std::span(too_many).first(1)).code(), StatusCode::kOutOfRange);
}

TEST(KvCacheManagerTest, ChunkedPrefillThenDecode) {
  KvCacheManager m(8, 4, true);
  const std::vector<int32_t> prompt = Iota(9);
  ASSERT_EQ(*m.AllocatePrompt(1, prompt, 5), 0);
  EXPECT_EQ(m.block_table(1).size(), 2u);
  ASSERT_TRUE(m.CommitTokens(1, std::span(prompt).first(5)).ok());
  ASSERT_TRUE(m.AllocateSlots(1, 4).ok());
  EXPECT_EQ(m.block_table(1).size(), 3u);
  ASSERT_TRUE(m.CommitTokens(1, std::span(prompt).subspan(5)).ok());
  ASSERT_TRUE(m.AllocateSlots(1, 1).ok());  // decode step
  EXPECT_EQ(m.num_tokens(1), 10);
  EXPECT_EQ(*m.NumBlocksToAllocate(1, 2), 0);
  EXPECT_EQ(*m.NumBlocksToAllocate(1, 3), 1);
  EXPECT_TRUE(m.TakePendingBlockCopies().empty());
}

// Speculative tokens: slots reserved for 1 + k positions, only the accepted ones committed, the
// rest given back; a later prefix lookup sees exactly the committed tokens.
TEST(KvCacheManagerTest, TruncateSlotsReturnsRejectedSpeculativeSlots) {
  KvCacheManager m(8, 4, true);
  const std::vector<int32_t> prompt = Iota(6);
  Prefill(m, 1, prompt);                    // blocks: [0..3] full, [4..5]
  ASSERT_TRUE(m.AllocateSlots(1, 7).ok());  // positions 6..12: two more blocks
  EXPECT_EQ(m.block_table(1).size(), 4u);
  EXPECT_EQ(m.num_free_blocks(), 4);
  ASSERT_TRUE(m.CommitTokens(1, Iota(3, 106)).ok());                  // the last token + 2 accepted
  EXPECT_EQ(m.TruncateSlots(1, 8).code(), StatusCode::kOutOfRange);   // below committed (9)
  EXPECT_EQ(m.TruncateSlots(1, 14).code(), StatusCode::kOutOfRange);  // above reserved (13)
  ASSERT_TRUE(m.TruncateSlots(1, 9).ok());
  EXPECT_EQ(m.num_tokens(1), 9);
  EXPECT_EQ(m.block_table(1).size(), 3u);
  EXPECT_EQ(m.num_free_blocks(), 5);
  // Two full blocks are cached: [100..103], [104..107]; position 8 (108) is in a partial block.
  EXPECT_EQ(m.NumCachedPromptTokens(Iota(12)), 8);
  EXPECT_EQ(m.TruncateSlots(2, 1).code(), StatusCode::kNotFound);
  ASSERT_TRUE(m.Free(1).ok());
  EXPECT_EQ(m.num_free_blocks(), 8);
}

TEST(KvCacheManagerTest, OutOfBlocksIsResourceExhaustedWithNoPartialAllocation) {
  KvCacheManager m(4, 4, true);
  ASSERT_TRUE(m.AllocatePrompt(1, Iota(8), 8).ok());
  Result<int32_t> big = m.AllocatePrompt(2, Iota(12), 12);
  EXPECT_EQ(big.status().code(), StatusCode::kResourceExhausted);
  EXPECT_FALSE(m.HasSequence(2));
  EXPECT_EQ(m.num_free_blocks(), 2);
  ASSERT_TRUE(m.CommitTokens(1, Iota(8)).ok());
  EXPECT_EQ(m.AllocateSlots(1, 9).code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(m.num_tokens(1), 8);
  EXPECT_EQ(m.block_table(1).size(), 2u);
  EXPECT_EQ(m.num_free_blocks(), 2);
  EXPECT_FALSE(m.CanAllocate(3));
  EXPECT_TRUE(m.CanAllocate(2));
  ASSERT_TRUE(m.AllocateSlots(1, 8).ok());  // exactly the rest fits
  EXPECT_EQ(m.num_free_blocks(), 0);
  ASSERT_TRUE(m.Free(1).ok());
  EXPECT_EQ(m.num_free_blocks(), 4);
}

TEST(KvCacheManagerTest, ErrorsOnBadInput) {
  KvCacheManager m(4, 4, true);
  EXPECT_EQ(m.AllocateSlots(9, 1).code(), StatusCode::kNotFound);
  EXPECT_EQ(m.CommitTokens(9, Iota(1)).code(), StatusCode::kNotFound);
  EXPECT_EQ(m.Free(9).code(), StatusCode::kNotFound);
  EXPECT_EQ(m.Fork(9, 10).code(), StatusCode::kNotFound);
  EXPECT_EQ(m.NumBlocksToAllocate(9, 1).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(m.AllocatePrompt(1, {}, 0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(m.AllocatePrompt(1, Iota(3), -1).status().code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(m.AllocatePrompt(1, Iota(3), 3).ok());
  EXPECT_EQ(m.AllocatePrompt(1, Iota(3), 3).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(m.AllocateSlots(1, -2).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(m.CommitTokens(1, Iota(4)).code(), StatusCode::kOutOfRange);
  EXPECT_EQ(m.num_committed_tokens(1), 0);
  EXPECT_EQ(m.AllocateSlots(1, 1 << 30).code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(m.block_table(42).empty());
}

TEST(KvCacheManagerTest, CreateFromConfig) {
  KvCacheConfig config;
  config.n_layers = 2;
  config.n_kv_heads = 2;
  config.head_dim = 16;
  config.dtype = KvDtype::kF16;
  config.memory_bytes = KvBytesPerBlock(config) * 12;
  Result<KvCacheManager> m = KvCacheManager::Create(config);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->num_blocks(), 12);
  EXPECT_EQ(m->block_size(), 16);
  config.block_size = 5;
  EXPECT_EQ(KvCacheManager::Create(config).status().code(), StatusCode::kInvalidArgument);
}

TEST(KvCacheManagerTest, PrefixCacheReusesFullBlocksOfFreedSequence) {
  KvCacheManager m(16, 4, true);
  const std::vector<int32_t> prompt = Iota(10);
  EXPECT_EQ(Prefill(m, 1, prompt), 0);
  const std::vector<int32_t> first_blocks(m.block_table(1).begin(), m.block_table(1).begin() + 2);
  ASSERT_TRUE(m.Free(1).ok());
  EXPECT_EQ(m.num_evictable_blocks(), 2);
  EXPECT_EQ(m.num_free_blocks(), 16);

  EXPECT_EQ(m.NumCachedPromptTokens(prompt), 8);
  EXPECT_EQ(Prefill(m, 2, prompt), 8);
  EXPECT_EQ(m.block_table(2)[0], first_blocks[0]);
  EXPECT_EQ(m.block_table(2)[1], first_blocks[1]);
  EXPECT_EQ(m.num_evictable_blocks(), 0);
  // A running sequence's blocks are shared too (ref count 2).
  std::vector<int32_t> longer = Iota(12);
  longer[10] = 7;
  EXPECT_EQ(Prefill(m, 3, longer), 8);
  EXPECT_EQ(KvCacheManagerTestPeer::block_pool(m).ref_count(first_blocks[0]), 2);
  // A different first block breaks the chain: no hit even though block 2 matches.
  std::vector<int32_t> other = Iota(10);
  other[0] = 1;
  EXPECT_EQ(m.NumCachedPromptTokens(other), 0);

  PrefixCacheStats stats = m.stats();
  EXPECT_EQ(stats.num_queries, 3);
  EXPECT_EQ(stats.queried_tokens, 10 + 10 + 12);
  EXPECT_EQ(stats.hit_tokens, 16);
}

TEST(KvCacheManagerTest, LastPromptTokenIsNeverCached) {
  KvCacheManager m(16, 4, true);
  const std::vector<int32_t> prompt = Iota(8);  // exactly two blocks
  Prefill(m, 1, prompt);
  EXPECT_EQ(m.NumCachedPromptTokens(prompt), 4);
  EXPECT_EQ(m.NumCachedPromptTokens(Iota(9)), 8);
  EXPECT_EQ(m.NumCachedPromptTokens(Iota(1)), 0);
}

TEST(KvCacheManagerTest, EvictionDropsLeastRecentlyFreedTailFirst) {
  KvCacheManager m(4, 2, true);
  Prefill(m, 1, Iota(7));  // 4 blocks, 3 full ones cached
  ASSERT_TRUE(m.Free(1).ok());
  EXPECT_EQ(m.num_evictable_blocks(), 3);
  EXPECT_EQ(m.NumCachedPromptTokens(Iota(7)), 6);
  // Needs 2 blocks: 1 free + evicts the LRU cached block, which is the tail (tokens 4-5).
  ASSERT_TRUE(m.AllocatePrompt(2, Iota(4, 500), 4).ok());
  EXPECT_EQ(m.stats().evicted_blocks, 1);
  EXPECT_EQ(m.NumCachedPromptTokens(Iota(7)), 4);
  ASSERT_TRUE(m.Free(2).ok());
  EXPECT_EQ(KvCacheManagerTestPeer::ResetPrefixCache(m), 2);
  EXPECT_EQ(m.NumCachedPromptTokens(Iota(7)), 0);
  EXPECT_EQ(m.num_free_blocks(), 4);
}

TEST(KvCacheManagerTest, CacheHitsOnEvictableBlocksCountAgainstAvailability) {
  KvCacheManager m(3, 2, true);
  Prefill(m, 1, Iota(5));  // 3 blocks, 2 cached
  ASSERT_TRUE(m.Free(1).ok());
  // 2 hits taken from the evictor leave 1 block: 4 more tokens need 2 -> exhausted.
  EXPECT_EQ(m.AllocatePrompt(2, Iota(5), 4).status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(m.num_evictable_blocks(), 2);
  EXPECT_EQ(m.NumCachedPromptTokens(Iota(5)), 4);
  EXPECT_EQ(*m.AllocatePrompt(2, Iota(5), 2), 4);
  EXPECT_EQ(m.num_free_blocks(), 0);
}

TEST(KvCacheManagerTest, PrefixCachingDisabled) {
  KvCacheManager m(8, 2, false);
  Prefill(m, 1, Iota(6));
  ASSERT_TRUE(m.Free(1).ok());
  EXPECT_EQ(m.NumCachedPromptTokens(Iota(6)), 0);
  EXPECT_EQ(m.num_evictable_blocks(), 0);
  EXPECT_EQ(KvCacheManagerTestPeer::block_pool(m).num_cached_blocks(), 0);
}

TEST(KvCacheManagerTest, ForkSharesBlocksAndRequiresCommittedSlots) {
  KvCacheManager m(8, 4, true);
  ASSERT_TRUE(m.AllocatePrompt(1, Iota(6), 6).ok());
  EXPECT_EQ(m.Fork(1, 2).code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(m.CommitTokens(1, Iota(6)).ok());
  ASSERT_TRUE(m.Fork(1, 2).ok());
  EXPECT_EQ(m.Fork(1, 2).code(), StatusCode::kFailedPrecondition);
  ASSERT_EQ(m.block_table(2).size(), 2u);
  for (int32_t b : m.block_table(1))
    EXPECT_EQ(KvCacheManagerTestPeer::block_pool(m).ref_count(b), 2);
  EXPECT_EQ(m.num_free_blocks(), 6);
  EXPECT_EQ(*m.NumBlocksToAllocate(2, 1), 1);  // copy-on-write of the partial block
  EXPECT_EQ(*m.NumBlocksToAllocate(2, 3), 2);
}

float KeyAt(KvPool& pool, int32_t layer, int32_t slot, int32_t head, int32_t bs) {
  const int32_t block = slot / bs;
  const int64_t row = head * pool.strides().head + (slot % bs) * pool.strides().token;
  return pool.Block<float>(layer, KvPart::kKey, block)[row];
}

void WriteToken(KvPool& pool, int32_t slot, float value, int32_t bs) {
  for (int32_t layer = 0; layer < pool.num_layers(); ++layer) {
    for (KvPart part : {KvPart::kKey, KvPart::kValue}) {
      float* block = pool.Block<float>(layer, part, slot / bs);
      for (int32_t head = 0; head < pool.config().n_kv_heads; ++head) {
        float* row = block + head * pool.strides().head + (slot % bs) * pool.strides().token;
        for (int32_t d = 0; d < pool.config().head_dim; ++d) {
          row[d] = part == KvPart::kKey ? value : -value;
        }
      }
    }
  }
}

TEST(KvCacheManagerTest, CopyOnWriteAfterForkLeavesParentUnchanged) {
  KvCacheConfig config;
  config.block_size = 4;
  config.num_blocks = 8;
  config.dtype = KvDtype::kF32;
  config.n_layers = 2;
  config.n_kv_heads = 2;
  config.head_dim = 3;
  Result<KvPool> pool = KvPool::Create(config);
  Result<KvCacheManager> m = KvCacheManager::Create(config);
  ASSERT_TRUE(pool.ok() && m.ok());
  const int32_t bs = 4;

  const std::vector<int32_t> prompt = Iota(6);
  ASSERT_TRUE(m->AllocatePrompt(1, prompt, 6).ok());
  for (int32_t p = 0; p < 6; ++p) WriteToken(*pool, Slots(*m, 1, p, 1)[0], prompt[p], bs);
  ASSERT_TRUE(m->CommitTokens(1, prompt).ok());
  ASSERT_TRUE(m->Fork(1, 2).ok());
  const int32_t shared_full = m->block_table(1)[0];
  const int32_t shared_partial = m->block_table(1)[1];

  // The child writes position 6, inside the shared partial block: it gets a copy.
  ASSERT_TRUE(m->AllocateSlots(2, 1).ok());
  EXPECT_EQ(m->block_table(2)[0], shared_full);  // full shared blocks are never copied
  const int32_t child_block = m->block_table(2)[1];
  EXPECT_NE(child_block, shared_partial);
  EXPECT_EQ(m->block_table(1)[1], shared_partial);
  EXPECT_EQ(KvCacheManagerTestPeer::block_pool(*m).ref_count(shared_partial), 1);
  EXPECT_EQ(KvCacheManagerTestPeer::block_pool(*m).ref_count(shared_full), 2);
  std::vector<BlockCopy> copies = m->TakePendingBlockCopies();
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_EQ(copies[0], (BlockCopy{shared_partial, child_block}));
  EXPECT_TRUE(m->TakePendingBlockCopies().empty());

  ASSERT_TRUE(pool->CopyBlocks(copies).ok());
  WriteToken(*pool, Slots(*m, 2, 6, 1)[0], 999.0f, bs);
  ASSERT_TRUE(m->CommitTokens(2, std::vector<int32_t>{999}).ok());
  // The parent then writes its own position 6 in its (now exclusive) block: no copy.
  ASSERT_TRUE(m->AllocateSlots(1, 1).ok());
  EXPECT_TRUE(m->TakePendingBlockCopies().empty());
  WriteToken(*pool, Slots(*m, 1, 6, 1)[0], 555.0f, bs);

  for (int32_t layer = 0; layer < 2; ++layer) {
    for (int32_t head = 0; head < 2; ++head) {
      for (int32_t p = 0; p < 6; ++p) {
        EXPECT_EQ(KeyAt(*pool, layer, Slots(*m, 1, p, 1)[0], head, bs), prompt[p]);
        EXPECT_EQ(KeyAt(*pool, layer, Slots(*m, 2, p, 1)[0], head, bs), prompt[p]);
      }
      EXPECT_EQ(KeyAt(*pool, layer, Slots(*m, 1, 6, 1)[0], head, bs), 555.0f);
      EXPECT_EQ(KeyAt(*pool, layer, Slots(*m, 2, 6, 1)[0], head, bs), 999.0f);
    }
  }
}

TEST(KvCacheManagerTest, PendingCopyIntoFreedSequenceIsDropped) {
  KvCacheManager m(8, 4, true);
  ASSERT_TRUE(m.AllocatePrompt(1, Iota(2), 2).ok());
  ASSERT_TRUE(m.CommitTokens(1, Iota(2)).ok());
  ASSERT_TRUE(m.Fork(1, 2).ok());
  ASSERT_TRUE(m.AllocateSlots(2, 1).ok());
  ASSERT_TRUE(m.Free(2).ok());  // preempted before the step ran
  EXPECT_TRUE(m.TakePendingBlockCopies().empty());
  EXPECT_EQ(m.num_free_blocks(), 7);
}

}  // namespace
}  // namespace pagoda
