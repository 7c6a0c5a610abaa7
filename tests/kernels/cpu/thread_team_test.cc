// ThreadTeam (kernels/cpu/thread_team.h): every item runs exactly once per loop on a member in
// [0, size), claims shrink, loops after the helpers fell asleep still run, nested and oversized
// loops run inline, and ParallelFor without a team runs on oneTBB.
#include "kernels/cpu/thread_team.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <random>
#include <thread>
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

}  // namespace
}  // namespace pagoda::cpu
