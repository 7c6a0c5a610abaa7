// Randomized test of KvCacheManager + KvPool: thousands of random operations (new sequences
// whose prompts share prefixes, chunked prefill, decode, fork, free, allocate-until-exhausted,
// cache reset), with every invariant checked after every operation. Each "computed" token
// writes its id into the pool at its slot, so the content check catches wrong prefix-cache
// hits, missing copy-on-writes and slot collisions.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <optional>
#include <random>
#include <vector>

#include "kernels/cpu/kv_pool.h"
#include "kvcache/kv_cache_manager.h"
#include "tests/kvcache/kv_cache_manager_test_peer.h"

namespace pagoda {
namespace {

struct SimSequence {
  std::vector<int32_t> tokens;  // prompt + generated ids known so far
  int32_t num_reserved = 0;     // mirrors num_tokens()
  int32_t num_committed = 0;    // mirrors num_committed_tokens()
};

struct RandomRunTotals {
  int64_t operations = 0;
  int64_t copies = 0;
  int64_t exhausted = 0;
};

class RandomKvCacheRun {
 public:
  RandomKvCacheRun(uint32_t seed, int32_t block_size, int32_t num_blocks)
      : rng_(seed), block_size_(block_size) {
    KvCacheConfig config;
    config.block_size = block_size;
    config.num_blocks = num_blocks;
    config.dtype = KvDtype::kF32;
    config.n_layers = 2;
    config.n_kv_heads = 2;
    config.head_dim = 2;
    Result<KvCacheManager> manager = KvCacheManager::Create(config);
    Result<KvPool> pool = KvPool::Create(config);
    EXPECT_TRUE(manager.ok() && pool.ok());
    manager_.emplace(std::move(manager).value());
    pool_.emplace(std::move(pool).value());
    for (auto& base : base_prompts_) {
      base.resize(5 * block_size + 3);
      for (int32_t& t : base) t = Uniform(0, 3);
    }
  }

  void Run(int32_t num_operations) {
    for (int32_t i = 0; i < num_operations && !::testing::Test::HasFailure(); ++i) {
      Step();
      CheckInvariants();
      ++totals_.operations;
    }
    FreeEverything();
  }

  const RandomRunTotals& totals() const { return totals_; }
  const KvCacheManager& manager() const { return *manager_; }

 private:
  int32_t Uniform(int32_t lo, int32_t hi) {
    return std::uniform_int_distribution<int32_t>(lo, hi)(rng_);
  }

  int64_t RandomSequence() {
    auto it = sequences_.begin();
    std::advance(it, Uniform(0, static_cast<int32_t>(sequences_.size()) - 1));
    return it->first;
  }

  void Step() {
    const int32_t op = Uniform(0, 99);
    if (sequences_.empty() || op < 20) {
      AddSequence();
      return;
    }
    const int64_t seq = RandomSequence();
    if (op < 45) return Reserve(seq);
    if (op < 75) return Compute(seq);
    if (op < 83) return ForkSequence(seq);
    if (op < 95) return FreeSequence(seq);
    if (op < 98) return AllocateUntilExhausted();
    EXPECT_GE(KvCacheManagerTestPeer::ResetPrefixCache(*manager_), 0);
  }

  std::vector<int32_t> RandomPrompt() {
    const auto& base = base_prompts_[Uniform(0, 2)];
    std::vector<int32_t> prompt(base.begin(),
                                base.begin() + Uniform(0, static_cast<int32_t>(base.size())));
    const int32_t tail = Uniform(prompt.empty() ? 1 : 0, 2 * block_size_);
    for (int32_t i = 0; i < tail; ++i) prompt.push_back(Uniform(0, 3));
    return prompt;
  }

  // New sequence; reserves a random first chunk of its prompt.
  bool AddSequence() {
    const int64_t seq = next_seq_id_++;
    SimSequence sim;
    sim.tokens = RandomPrompt();
    const int32_t expected_cached = manager_->NumCachedPromptTokens(sim.tokens);
    const int32_t remaining = static_cast<int32_t>(sim.tokens.size()) - expected_cached;
    const int32_t chunk = Uniform(0, remaining);
    const int32_t free_before = manager_->num_free_blocks();
    Result<int32_t> cached = manager_->AllocatePrompt(seq, sim.tokens, chunk);
    if (!cached.ok()) {
      EXPECT_EQ(cached.status().code(), StatusCode::kResourceExhausted);
      EXPECT_FALSE(manager_->HasSequence(seq));
      EXPECT_EQ(manager_->num_free_blocks(), free_before);
      ++totals_.exhausted;
      return false;
    }
    EXPECT_EQ(*cached, expected_cached);
    EXPECT_EQ(*cached % block_size_, 0);
    EXPECT_LT(*cached, static_cast<int32_t>(sim.tokens.size()));
    sim.num_committed = *cached;
    sim.num_reserved = *cached + chunk;
    sequences_[seq] = sim;
    return true;
  }

  // Reserves the next prompt chunk, or generates new tokens (decode / speculative run).
  void Reserve(int64_t seq) {
    SimSequence& sim = sequences_[seq];
    int32_t n;
    if (sim.num_reserved < static_cast<int32_t>(sim.tokens.size())) {
      n = Uniform(1, static_cast<int32_t>(sim.tokens.size()) - sim.num_reserved);
    } else {
      n = Uniform(1, 3);
      for (int32_t i = 0; i < n; ++i) sim.tokens.push_back(Uniform(0, 3));
    }
    const int32_t free_before = manager_->num_free_blocks();
    const std::vector<int32_t> table_before(manager_->block_table(seq).begin(),
                                            manager_->block_table(seq).end());
    Status status = manager_->AllocateSlots(seq, n);
    if (!status.ok()) {
      EXPECT_EQ(status.code(), StatusCode::kResourceExhausted);
      EXPECT_EQ(manager_->num_free_blocks(), free_before);
      EXPECT_TRUE(std::ranges::equal(manager_->block_table(seq), table_before));
      ++totals_.exhausted;
      return;
    }
    sim.num_reserved += n;
  }

  // Runs the "step" for this sequence: pending copies, then K/V writes, then commit.
  void Compute(int64_t seq) {
    SimSequence& sim = sequences_[seq];
    if (sim.num_committed == sim.num_reserved) return;
    std::vector<BlockCopy> copies = manager_->TakePendingBlockCopies();
    totals_.copies += static_cast<int64_t>(copies.size());
    ASSERT_TRUE(pool_->CopyBlocks(copies).ok());
    const int32_t n = Uniform(1, sim.num_reserved - sim.num_committed);
    std::vector<int32_t> slots(n);
    ASSERT_TRUE(manager_->GetSlotMapping(seq, sim.num_committed, slots).ok());
    for (int32_t i = 0; i < n; ++i) WriteSlot(slots[i], sim.tokens[sim.num_committed + i]);
    auto ids = std::span(sim.tokens).subspan(sim.num_committed, n);
    ASSERT_TRUE(manager_->CommitTokens(seq, ids).ok());
    sim.num_committed += n;
  }

  void ForkSequence(int64_t seq) {
    const SimSequence& parent = sequences_[seq];
    const int64_t child = next_seq_id_++;
    Status status = manager_->Fork(seq, child);
    if (parent.num_committed != parent.num_reserved) {
      EXPECT_EQ(status.code(), StatusCode::kFailedPrecondition);
      return;
    }
    ASSERT_TRUE(status.ok()) << status.ToString();
    sequences_[child] = parent;
  }

  void FreeSequence(int64_t seq) {
    ASSERT_TRUE(manager_->Free(seq).ok());
    sequences_.erase(seq);
  }

  // Admits new sequences until the pool runs out, then frees a random half of them.
  void AllocateUntilExhausted() {
    std::vector<int64_t> added;
    while (true) {
      const int64_t seq = next_seq_id_;
      if (!AddSequence()) break;
      added.push_back(seq);
      if (added.size() > 64) break;  // only reachable with tiny prompts; keep it bounded
    }
    for (int64_t seq : added) {
      if (Uniform(0, 1) == 0) FreeSequence(seq);
    }
  }

  void WriteSlot(int32_t slot, int32_t token) {
    const KvPoolStrides& s = pool_->strides();
    for (int32_t layer = 0; layer < pool_->num_layers(); ++layer) {
      for (KvPart part : {KvPart::kKey, KvPart::kValue}) {
        float* block = pool_->Block<float>(layer, part, slot / block_size_);
        const float value = part == KvPart::kKey ? token + 1.0f : -(token + 1.0f) - layer;
        for (int32_t h = 0; h < 2; ++h) {
          for (int32_t d = 0; d < 2; ++d)
            block[h * s.head + (slot % block_size_) * s.token + d] = value;
        }
      }
    }
  }

  // Reads through the pending copies: a pending copy's destination shows its source's data.
  bool SlotHolds(int32_t slot, int32_t token) {
    const KvPoolStrides& s = pool_->strides();
    for (const BlockCopy& copy : KvCacheManagerTestPeer::pending_block_copies(*manager_)) {
      if (copy.dst_block == slot / block_size_) {
        slot = copy.src_block * block_size_ + slot % block_size_;
        break;
      }
    }
    const int64_t row = 1 * s.head + (slot % block_size_) * s.token + 1;  // last head, last dim
    return pool_->Block<float>(1, KvPart::kKey, slot / block_size_)[row] == token + 1.0f &&
           pool_->Block<float>(1, KvPart::kValue, slot / block_size_)[row] == -(token + 1.0f) - 1;
  }

  void CheckInvariants();
  void CheckBlockStates(const std::vector<int32_t>& expected_refs);
  void CheckSequence(int64_t seq, const SimSequence& sim);
  void FreeEverything();

  std::mt19937 rng_;
  int32_t block_size_;
  std::optional<KvCacheManager> manager_;
  std::optional<KvPool> pool_;
  std::vector<int32_t> base_prompts_[3];
  std::map<int64_t, SimSequence> sequences_;
  int64_t next_seq_id_ = 1;
  RandomRunTotals totals_;
};

void RandomKvCacheRun::CheckInvariants() {
  const BlockPool& blocks = KvCacheManagerTestPeer::block_pool(*manager_);
  std::vector<int32_t> expected_refs(blocks.num_blocks(), 0);
  for (const auto& [seq, sim] : sequences_) {
    for (int32_t b : manager_->block_table(seq)) ++expected_refs[b];
    CheckSequence(seq, sim);
  }
  CheckBlockStates(expected_refs);
  for (const BlockCopy& copy : KvCacheManagerTestPeer::pending_block_copies(*manager_)) {
    ASSERT_EQ(KvCacheManagerTestPeer::block_pool(*manager_).ref_count(copy.dst_block), 1)
        << "copy into a shared block";
  }
  EXPECT_EQ(manager_->num_sequences(), static_cast<int32_t>(sequences_.size()));
  EXPECT_GE(manager_->usage(), 0.0);
  EXPECT_LE(manager_->usage(), 1.0);
}

// Ref counts match the block tables; free / in-use / evictable states are consistent; cached
// blocks' stored tokens hash to their key and the cache finds them under it.
void RandomKvCacheRun::CheckBlockStates(const std::vector<int32_t>& expected_refs) {
  const BlockPool& blocks = KvCacheManagerTestPeer::block_pool(*manager_);
  int32_t num_free = 0, num_evictable = 0, num_cached = 0;
  for (int32_t b = 0; b < blocks.num_blocks(); ++b) {
    ASSERT_EQ(blocks.ref_count(b), expected_refs[b]) << "block " << b;
    const CachedBlockInfo* info = blocks.cached_block(b);
    switch (blocks.state(b)) {
      case BlockState::kFree:
        ASSERT_EQ(info, nullptr) << "free block " << b << " holds cached content";
        ++num_free;
        break;
      case BlockState::kEvictable:
        ASSERT_NE(info, nullptr) << "evictable block " << b << " has no cached content";
        ++num_evictable;
        break;
      case BlockState::kInUse:
        ASSERT_GT(expected_refs[b], 0) << "in-use block " << b << " is not referenced";
        break;
    }
    if (info == nullptr) continue;
    ++num_cached;
    auto tokens = blocks.cached_tokens(b);
    ASSERT_EQ(HashBlockTokens(info->parent_hash, tokens), info->hash) << "block " << b;
    ASSERT_EQ(blocks.FindCached(info->hash, info->parent_entry_id, tokens), b);
  }
  EXPECT_EQ(blocks.num_free_blocks(), num_free);
  EXPECT_EQ(blocks.num_evictable_blocks(), num_evictable);
  EXPECT_EQ(blocks.num_cached_blocks(), num_cached);
  EXPECT_EQ(manager_->num_free_blocks(), num_free + num_evictable);
}

// Counters mirror the simulation; the table has exactly the blocks the slots need, without
// duplicates; slots stay inside the sequence's own blocks; blocks still to be written are not
// shared; every committed position holds its token in the pool; cached full blocks hold the
// sequence's own tokens.
void RandomKvCacheRun::CheckSequence(int64_t seq, const SimSequence& sim) {
  ASSERT_EQ(manager_->num_tokens(seq), sim.num_reserved);
  ASSERT_EQ(manager_->num_committed_tokens(seq), sim.num_committed);
  auto table = manager_->block_table(seq);
  ASSERT_EQ(static_cast<int32_t>(table.size()), (sim.num_reserved + block_size_ - 1) / block_size_);
  std::vector<int32_t> sorted(table.begin(), table.end());
  std::ranges::sort(sorted);
  ASSERT_EQ(std::ranges::adjacent_find(sorted), sorted.end()) << "duplicate block in table";
  std::vector<int32_t> slots(sim.num_reserved);
  ASSERT_TRUE(manager_->GetSlotMapping(seq, 0, slots).ok());
  const BlockPool& blocks = KvCacheManagerTestPeer::block_pool(*manager_);
  for (int32_t p = 0; p < sim.num_reserved; ++p) {
    ASSERT_GE(slots[p], 0);
    ASSERT_EQ(slots[p] / block_size_, table[p / block_size_]);
    ASSERT_EQ(slots[p] % block_size_, p % block_size_);
    if (p >= sim.num_committed) {
      ASSERT_EQ(blocks.ref_count(table[p / block_size_]), 1) << "shared block would be written";
    } else {
      ASSERT_TRUE(SlotHolds(slots[p], sim.tokens[p])) << "seq " << seq << " position " << p;
    }
  }
  for (int32_t i = 0; i < sim.num_committed / block_size_; ++i) {
    if (blocks.cached_block(table[i]) == nullptr) continue;
    auto cached = blocks.cached_tokens(table[i]);
    ASSERT_TRUE(std::equal(cached.begin(), cached.end(), sim.tokens.begin() + i * block_size_));
  }
}

void RandomKvCacheRun::FreeEverything() {
  while (!sequences_.empty()) FreeSequence(sequences_.begin()->first);
  CheckInvariants();
  const BlockPool& blocks = KvCacheManagerTestPeer::block_pool(*manager_);
  for (int32_t b = 0; b < blocks.num_blocks(); ++b) ASSERT_EQ(blocks.ref_count(b), 0);
  EXPECT_EQ(manager_->num_free_blocks(), manager_->num_blocks());
  EXPECT_EQ(blocks.num_free_blocks() + blocks.num_evictable_blocks(), manager_->num_blocks());
  EXPECT_DOUBLE_EQ(manager_->usage(), 0.0);
  EXPECT_TRUE(manager_->TakePendingBlockCopies().empty());
}

struct RandomCase {
  uint32_t seed;
  int32_t block_size;
  int32_t num_blocks;
};

constexpr int32_t kOperationsPerRun = 3000;

class KvCacheRandomTest : public ::testing::TestWithParam<RandomCase> {};

TEST_P(KvCacheRandomTest, InvariantsHoldAfterEveryOperation) {
  const RandomCase& c = GetParam();
  RandomKvCacheRun run(c.seed, c.block_size, c.num_blocks);
  run.Run(kOperationsPerRun);
  const PrefixCacheStats stats = run.manager().stats();
  RecordProperty("operations", static_cast<int>(run.totals().operations));
  // The run must actually exercise the interesting paths.
  EXPECT_EQ(run.totals().operations, kOperationsPerRun);
  EXPECT_GT(stats.hit_tokens, 0);
  EXPECT_GT(stats.evicted_blocks, 0);
  if (c.block_size > 1) {
    EXPECT_GT(run.totals().copies, 0);  // size-1 blocks are never partly filled
  }
  EXPECT_GT(run.totals().exhausted, 0);
}

INSTANTIATE_TEST_SUITE_P(Seeds, KvCacheRandomTest,
                         ::testing::Values(RandomCase{1, 4, 40}, RandomCase{2, 4, 24},
                                           RandomCase{3, 2, 32}, RandomCase{4, 8, 20},
                                           RandomCase{5, 1, 32}, RandomCase{6, 16, 12},
                                           RandomCase{7, 4, 48}, RandomCase{8, 2, 16}));

}  // namespace
}  // namespace pagoda
