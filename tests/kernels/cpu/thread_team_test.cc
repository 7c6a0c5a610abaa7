// ThreadTeam (kernels/cpu/thread_team.h): every item runs exactly once per loop on a member in
// [0, size), claims shrink, loops after the helpers fell asleep still run, nested and oversized
// loops run inline, and ParallelFor without a team runs on oneTBB.
#include "kernels/cpu/thread_team.h"

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <atomic>
#include <chrono>
#include <random>
#include <thread>
#include <utility>
#include <vector>

namespace pagoda::cpu {
namespace {

// Runs one loop of n items; checks each item ran once and each member index was in range.
// Returns how many claims (body calls) the loop made.
int64_t RunAndCheck(ThreadTeam* team, int64_t n, int size) {
  std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
  std::atomic<int64_t> calls{0};
  std::atomic<bool> bad_member{false};
  ParallelFor(team, n, [&](int64_t begin, int64_t end, int member) {
    if (member < 0 || member >= size || begin >= end) bad_member = true;
    calls.fetch_add(1);
    for (int64_t i = begin; i < end; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
  });
  EXPECT_FALSE(bad_member.load()) << "n " << n;
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_EQ(hits[static_cast<size_t>(i)].load(), 1) << "item " << i << " of " << n;
  }
  return calls.load();
}

TEST(ThreadTeam, EveryItemOnceForRandomSizes) {
  for (int size : {1, 2, 3}) {
    ThreadTeam team(size);
    ASSERT_EQ(team.size(), size);
    std::mt19937 rng(size);
    for (int round = 0; round < 300; ++round) {
      const int64_t n = std::uniform_int_distribution<int64_t>(0, 2000)(rng);
      RunAndCheck(&team, n, size);
    }
  }
}

TEST(ThreadTeam, ClaimsShrinkTowardTheEnd) {
  // 1000 items on 2 members: claims of ceil(remaining / 4) take about 4 ln(1000) + 4 claims,
  // far fewer than one per item and more than one per member.
  ThreadTeam team(2);
  const int64_t calls = RunAndCheck(&team, 1000, 2);
  EXPECT_GT(calls, 8);
  EXPECT_LT(calls, 60);
}

TEST(ThreadTeam, BothMembersTakePart) {
  ThreadTeam team(2);
  std::atomic<bool> helper_ran{false};
  for (int round = 0; round < 200 && !helper_ran; ++round) {
    team.ParallelFor(64, [&](int64_t, int64_t, int member) {
      if (member == 1) helper_ran = true;
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    });
  }
  EXPECT_TRUE(helper_ran.load());
}

TEST(ThreadTeam, LoopsAfterTheHelpersSleep) {
  ThreadTeam team(3, std::chrono::microseconds(1));
  for (int round = 0; round < 20; ++round) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));  // the helpers sleep by now
    RunAndCheck(&team, 100 + round, 3);
  }
}

TEST(ThreadTeam, NestedLoopRunsInlineOnTheCaller) {
  ThreadTeam team(2);
  std::atomic<int64_t> inner_items{0};
  std::atomic<bool> inner_split{false};
  team.ParallelFor(8, [&](int64_t begin, int64_t end, int) {
    for (int64_t i = begin; i < end; ++i) {
      team.ParallelFor(10, [&](int64_t b, int64_t e, int member) {
        if (b != 0 || e != 10 || member != 0) inner_split = true;
        inner_items += e - b;
      });
    }
  });
  EXPECT_EQ(inner_items.load(), 80);
  EXPECT_FALSE(inner_split.load());
  RunAndCheck(&team, 500, 2);  // the team still works after nested calls
}

TEST(ThreadTeam, OversizedLoopRunsInline) {
  ThreadTeam team(2);
  int64_t calls = 0, items = 0;
  team.ParallelFor(ThreadTeam::kMaxItems + 1, [&](int64_t b, int64_t e, int member) {
    ++calls;  // inline: one call on the caller, no race
    items += e - b;
    EXPECT_EQ(member, 0);
  });
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(items, ThreadTeam::kMaxItems + 1);
}

TEST(ThreadTeam, OneItemRunsInlineOnTheCaller) {
  // On the team the spinning helper would win the only claim now and then.
  ThreadTeam team(2);
  for (int round = 0; round < 5000; ++round) {
    int member = -1;
    team.ParallelFor(1, [&](int64_t b, int64_t e, int m) {
      EXPECT_EQ(b, 0);
      EXPECT_EQ(e, 1);
      member = m;  // inline: no race
    });
    EXPECT_EQ(member, 0);
  }
}

TEST(ThreadTeam, WithoutATeamRunsOnTbb) {
  RunAndCheck(nullptr, 5000, Concurrency(nullptr));
  EXPECT_GE(Concurrency(nullptr), 1);
}

TEST(ThreadTeam, ManyShortLoopsBackToBack) {
  // The generation counter and claims across loops: a late helper never takes items of the
  // next loop (each item would then run twice or with a stale body).
  ThreadTeam team(2);
  for (int round = 0; round < 20000; ++round) RunAndCheck(&team, 1 + round % 7, 2);
}

TEST(ThreadTeam, FirstClaimIsTheLoopsFirstClaimOfEachMember) {
  ThreadTeam team(2);
  using Items = std::pair<int64_t, int64_t>;
  EXPECT_EQ(team.FirstClaim(1000, 0), Items(0, 250));
  EXPECT_EQ(team.FirstClaim(1000, 1), Items(250, 438));
  EXPECT_EQ(team.FirstClaim(1, 1), Items(1, 1));  // none left
  // In a loop whose claims take long enough for the helper to join, each member's first body
  // call is its FirstClaim.
  std::pair<int64_t, int64_t> first[2] = {{-1, -1}, {-1, -1}};
  team.ParallelFor(1000, [&](int64_t begin, int64_t end, int member) {
    if (first[member].first < 0) first[member] = {begin, end};
    std::this_thread::sleep_for(std::chrono::milliseconds(member == 0 ? 20 : 1));
  });
  EXPECT_EQ(first[0], team.FirstClaim(1000, 0));
  EXPECT_EQ(first[1], team.FirstClaim(1000, 1));
}

// Waits up to 5 s for member's prefetched bytes to reach `want`.
int64_t AwaitPrefetched(const ThreadTeam& team, int member, int64_t want) {
  for (int i = 0; i < 5000 && team.PrefetchedBytes(member) < want; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return team.PrefetchedBytes(member);
}

TEST(ThreadTeam, MembersPrefetchTheirRangesWhileTheyWait) {
  ThreadTeam team(2, std::chrono::seconds(10));  // the helper spins, never sleeps, here
  std::vector<uint8_t> buffer(1 << 20);
  // A helper between loops walks its ranges; at most kMaxPrefetchRanges of them are kept.
  std::vector<ThreadTeam::ByteRange> ranges;
  for (int i = 0; i < ThreadTeam::kMaxPrefetchRanges + 2; ++i) {
    ranges.push_back({buffer.data() + i * 100000, 70000});
  }
  team.SetPrefetch(1, ranges);
  ASSERT_EQ(team.PrefetchRanges(1).size(), size_t{ThreadTeam::kMaxPrefetchRanges});
  EXPECT_EQ(team.PrefetchRanges(1)[2].data, buffer.data() + 200000);
  EXPECT_EQ(AwaitPrefetched(team, 1, 70000 * ThreadTeam::kMaxPrefetchRanges),
            70000 * ThreadTeam::kMaxPrefetchRanges);
  // The caller walks its own while the helper holds the loop's last claim.
  const ThreadTeam::ByteRange mine[] = {{buffer.data(), 300000}};
  team.SetPrefetch(0, mine);
  EXPECT_EQ(team.PrefetchedBytes(0), 0);
  // (The caller's item takes long enough for the helper to claim the other.)
  team.ParallelFor(2, [&](int64_t, int64_t, int member) {
    std::this_thread::sleep_for(std::chrono::milliseconds(member == 0 ? 5 : 50));
  });
  EXPECT_EQ(team.PrefetchedBytes(0), 300000);
  // New ranges replace the old ones; addresses are only prefetched, never read, so pages
  // unmapped meanwhile are harmless (a read there would kill the test).
  constexpr size_t kPages = 64 * 1024;
  void* mapped = mmap(nullptr, kPages, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mapped, MAP_FAILED);
  ASSERT_EQ(munmap(mapped, kPages), 0);
  const ThreadTeam::ByteRange gone[] = {{static_cast<const uint8_t*>(mapped) + 4096, 8192}};
  const int64_t before = team.PrefetchedBytes(1);
  team.SetPrefetch(1, gone);
  EXPECT_EQ(AwaitPrefetched(team, 1, before + 8192), before + 8192);
  RunAndCheck(&team, 1000, 2);
}

}  // namespace
}  // namespace pagoda::cpu
