// DraftProposer (scheduler/draft_proposer.h) on the fake backend, whose greedy token is a hash of
// the context it reads back through its KV cache: a proposal equals FakeGreedy's continuation
// only if the draft cache holds exactly the sequence's tokens (kept prefix, truncated rejects,
// caught-up new tokens). The engine with a draft model is tested in engine_test.cc.
#include "scheduler/draft_proposer.h"

#include <gtest/gtest.h>

#include "tests/scheduler/fake_backend.h"

namespace pagoda {
namespace {

using testing::ByteToken;
using testing::FakeBackend;
using testing::FakeGreedy;
using Tokens = std::vector<int32_t>;

Sequence Seq(int64_t id, Tokens tokens) {
  Sequence s;
  s.seq_id = id;
  s.num_prompt_tokens = static_cast<int32_t>(tokens.size());
  s.token_ids = std::move(tokens);
  return s;
}

Tokens Letters(const std::string& text) {
  Tokens t;
  for (char c : text) t.push_back(ByteToken(c));
  return t;
}

TEST(DraftProposerTest, ProposalsFollowAcceptsRejectsAndCatchUps) {
  SchedulerConfig caps;
  caps.max_num_batched_tokens = 8;  // the 21-token prompt catches up in three steps
  caps.max_num_seqs = 2;
  FakeBackend backend(64, 4, caps);
  DraftProposer proposer(backend);
  Sequence a = Seq(7, Letters("the quick brown foxes."));
  Sequence b = Seq(9, Letters("jumps"));
  proposer.Propose(std::vector<DraftRequest>{{&a, 4}, {&b, 3}});
  EXPECT_EQ(a.draft_token_ids, FakeGreedy(a.token_ids, 4));
  EXPECT_EQ(b.draft_token_ids, FakeGreedy(b.token_ids, 3));
  // a accepts two proposals and then samples something else; b accepts all and a bonus token.
  const Tokens a_drafts = a.draft_token_ids, b_drafts = b.draft_token_ids;
  a.token_ids.insert(a.token_ids.end(), a_drafts.begin(), a_drafts.begin() + 2);
  a.token_ids.push_back(ByteToken('Z'));
  b.token_ids.insert(b.token_ids.end(), b_drafts.begin(), b_drafts.end());
  b.token_ids.push_back(ByteToken('Y'));
  proposer.Propose(std::vector<DraftRequest>{{&a, 2}, {&b, 5}});
  EXPECT_EQ(a.draft_token_ids, FakeGreedy(a.token_ids, 2));
  EXPECT_EQ(b.draft_token_ids, FakeGreedy(b.token_ids, 5));
  EXPECT_TRUE(backend.rejected_steps.empty());
  EXPECT_GT(proposer.num_blocks_in_use(), 0);
  proposer.Release(7);
  proposer.Release(9);
  proposer.Release(9);  // unknown by now: no-op
  EXPECT_EQ(proposer.num_blocks_in_use(), 0);
  EXPECT_EQ(proposer.num_sequences(), 0);
}

TEST(DraftProposerTest, FullCacheOrContextEndMeansFewerOrNoProposals) {
  SchedulerConfig caps;
  caps.max_num_batched_tokens = 64;
  caps.max_num_seqs = 4;
  {
    FakeBackend backend(4, 4, caps, /*max_model_len=*/14);
    DraftProposer proposer(backend);
    Sequence a = Seq(1, Letters("0123456789"));  // 10 tokens: proposals up to position 13
    proposer.Propose(std::vector<DraftRequest>{{&a, 8}});
    EXPECT_EQ(a.draft_token_ids, FakeGreedy(a.token_ids, 5));  // 10 + 5 - 1 = 14 positions
    Sequence b = Seq(2, Letters("abcdef"));  // the pool (16 slots, 14 held) is full: nothing
    proposer.Propose(std::vector<DraftRequest>{{&b, 2}});
    EXPECT_TRUE(b.draft_token_ids.empty());
    proposer.Release(1);
    proposer.Propose(std::vector<DraftRequest>{{&b, 2}});
    EXPECT_EQ(b.draft_token_ids, FakeGreedy(b.token_ids, 2));
    proposer.Release(2);
    EXPECT_EQ(proposer.num_blocks_in_use(), 0);
    EXPECT_TRUE(backend.rejected_steps.empty());
  }
  FakeBackend backend(3, 4, caps);  // 12 slots: proposal 4 would need position 12
  DraftProposer proposer(backend);
  Sequence a = Seq(1, Letters("0123456789"));
  proposer.Propose(std::vector<DraftRequest>{{&a, 6}});
  EXPECT_EQ(a.draft_token_ids, FakeGreedy(a.token_ids, 3));
  EXPECT_TRUE(backend.rejected_steps.empty());
}

TEST(DraftProposerTest, AFailedDraftStepGivesNoProposalsAndRecovers) {
  FakeBackend backend(64, 4, SchedulerConfig{});
  DraftProposer proposer(backend);
  Sequence a = Seq(1, Letters("hello world"));
  backend.fail_next_step = true;
  proposer.Propose(std::vector<DraftRequest>{{&a, 3}});
  EXPECT_TRUE(a.draft_token_ids.empty());
  EXPECT_EQ(proposer.num_blocks_in_use(), 0);
  proposer.Propose(std::vector<DraftRequest>{{&a, 3}});
  EXPECT_EQ(a.draft_token_ids, FakeGreedy(a.token_ids, 3));
}

}  // namespace
}  // namespace pagoda
