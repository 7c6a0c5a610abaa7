#include "kvcache/block_pool.h"

#include <gtest/gtest.h>

#include <vector>

namespace pagoda {
namespace {

std::vector<int32_t> Tokens(int32_t first, int32_t count) {
  std::vector<int32_t> tokens(count);
  for (int32_t i = 0; i < count; ++i) tokens[i] = first + i;
  return tokens;
}

TEST(BlockPoolTest, AllocatesEveryBlockOnceThenFails) {
  BlockPool pool(4, 2);
  std::vector<bool> seen(4, false);
  for (int i = 0; i < 4; ++i) {
    const int32_t b = pool.Allocate();
    ASSERT_GE(b, 0);
    ASSERT_FALSE(seen[b]);
    seen[b] = true;
    EXPECT_EQ(pool.ref_count(b), 1);
    EXPECT_EQ(pool.state(b), BlockState::kInUse);
  }
  EXPECT_EQ(pool.Allocate(), -1);
  EXPECT_EQ(pool.num_available_blocks(), 0);
}

TEST(BlockPoolTest, RefCountsReturnBlocksToFreeList) {
  BlockPool pool(2, 4);
  const int32_t b = pool.Allocate();
  pool.IncRef(b);
  EXPECT_EQ(pool.ref_count(b), 2);
  pool.DecRef(b);
  EXPECT_EQ(pool.state(b), BlockState::kInUse);
  pool.DecRef(b);
  EXPECT_EQ(pool.state(b), BlockState::kFree);
  EXPECT_EQ(pool.num_free_blocks(), 2);
}

TEST(BlockPoolTest, CachedBlocksBecomeEvictableInLruOrder) {
  BlockPool pool(3, 2);
  const int32_t a = pool.Allocate();
  const int32_t b = pool.Allocate();
  const int32_t c = pool.Allocate();
  const BlockHash ha = HashBlockTokens(kRootBlockHash, Tokens(0, 2));
  const BlockHash hb = HashBlockTokens(kRootBlockHash, Tokens(10, 2));
  pool.Register(a, ha, kRootBlockHash, kRootEntryId, Tokens(0, 2));
  pool.Register(b, hb, kRootBlockHash, kRootEntryId, Tokens(10, 2));
  EXPECT_EQ(pool.num_cached_blocks(), 2);
  pool.DecRef(b);  // b freed first: least recently used
  pool.DecRef(a);
  pool.DecRef(c);  // uncached: plain free
  EXPECT_EQ(pool.num_free_blocks(), 1);
  EXPECT_EQ(pool.num_evictable_blocks(), 2);
  EXPECT_EQ(pool.num_available_blocks(), 3);
  EXPECT_EQ(pool.Allocate(), c);  // free blocks go first
  EXPECT_EQ(pool.Allocate(), b);  // then the LRU cached block, evicted
  EXPECT_EQ(pool.num_evictions(), 1);
  EXPECT_EQ(pool.FindCached(hb, kRootEntryId, Tokens(10, 2)), -1);
  EXPECT_EQ(pool.FindCached(ha, kRootEntryId, Tokens(0, 2)), a);
  pool.IncRef(a);  // a cache hit takes it out of the evictor
  EXPECT_EQ(pool.state(a), BlockState::kInUse);
  EXPECT_EQ(pool.num_evictable_blocks(), 0);
  EXPECT_EQ(pool.Allocate(), -1);
}

TEST(BlockPoolTest, HashCollisionNeverReturnsWrongTokens) {
  BlockPool pool(2, 2);
  const int32_t a = pool.Allocate();
  const BlockHash forged{1, 2};  // pretend two contents share this hash
  pool.Register(a, forged, kRootBlockHash, kRootEntryId, Tokens(0, 2));
  EXPECT_EQ(pool.FindCached(forged, kRootEntryId, Tokens(0, 2)), a);
  EXPECT_EQ(pool.FindCached(forged, kRootEntryId, Tokens(5, 2)), -1);
  EXPECT_EQ(pool.FindCached(forged, /*parent_entry_id=*/99, Tokens(0, 2)), -1);
}

TEST(BlockPoolTest, DuplicateContentReusesEntryAndStaleEntryIsReplaced) {
  BlockPool pool(3, 2);
  const int32_t a = pool.Allocate();
  const int32_t b = pool.Allocate();
  const BlockHash h = HashBlockTokens(kRootBlockHash, Tokens(0, 2));
  const uint64_t entry = pool.Register(a, h, kRootBlockHash, kRootEntryId, Tokens(0, 2));
  EXPECT_EQ(pool.Register(b, h, kRootBlockHash, kRootEntryId, Tokens(0, 2)), entry);
  EXPECT_EQ(pool.cached_block(b), nullptr);  // the duplicate stays uncached
  pool.DecRef(a);                            // a: evictable
  // Same hash, different parent entry (a stale chain): the newest registration wins.
  const uint64_t replaced =
      pool.Register(b, h, kRootBlockHash, /*parent_entry_id=*/77, Tokens(0, 2));
  EXPECT_NE(replaced, entry);
  EXPECT_EQ(pool.state(a), BlockState::kFree);
  EXPECT_EQ(pool.FindCached(h, 77, Tokens(0, 2)), b);
  EXPECT_EQ(pool.num_cached_blocks(), 1);
}

TEST(BlockPoolTest, DropEvictableFreesCachedContent) {
  BlockPool pool(2, 1);
  const int32_t a = pool.Allocate();
  const BlockHash h = HashBlockTokens(kRootBlockHash, Tokens(3, 1));
  pool.Register(a, h, kRootBlockHash, kRootEntryId, Tokens(3, 1));
  pool.DecRef(a);
  EXPECT_EQ(pool.DropEvictable(), 1);
  EXPECT_EQ(pool.num_free_blocks(), 2);
  EXPECT_EQ(pool.num_cached_blocks(), 0);
  EXPECT_EQ(pool.cached_block(a), nullptr);
}

TEST(BlockHashTest, ChainsParentAndTokens) {
  const BlockHash h1 = HashBlockTokens(kRootBlockHash, Tokens(0, 4));
  EXPECT_EQ(h1, HashBlockTokens(kRootBlockHash, Tokens(0, 4)));
  EXPECT_FALSE(h1 == HashBlockTokens(kRootBlockHash, Tokens(1, 4)));
  EXPECT_FALSE(h1 == HashBlockTokens(h1, Tokens(0, 4)));
  std::vector<int32_t> swapped = {1, 0, 2, 3};
  EXPECT_FALSE(h1 == HashBlockTokens(kRootBlockHash, swapped));
}

}  // namespace
}  // namespace pagoda
