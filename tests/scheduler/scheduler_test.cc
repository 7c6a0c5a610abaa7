// Scheduler tests driving Scheduler + KvCacheManager directly (no engine, no backend): step
// composition, limits, chunked prefill, prefix-cache hits, admission order, preemption, forks
// and block accounting.
#include "scheduler/scheduler.h"

#include <gtest/gtest.h>

#include <memory>
#include <ostream>
#include <vector>

#include "kvcache/kv_cache_manager.h"

namespace pagoda {
namespace {

// One entry of SchedulerOutput::scheduled, comparable and printable.
struct Entry {
  int64_t seq_id = 0;
  int32_t num_new_tokens = 0;
  bool is_decode = false;
  friend bool operator==(const Entry&, const Entry&) = default;
  friend std::ostream& operator<<(std::ostream& os, const Entry& e) {
    return os << "{seq " << e.seq_id << ", " << e.num_new_tokens
              << (e.is_decode ? " decode}" : "}");
  }
};

std::vector<Entry> Entries(const SchedulerOutput& out) {
  std::vector<Entry> entries;
  for (const ScheduledSeq& s : out.scheduled) {
    entries.push_back({s.seq->seq_id, s.num_new_tokens, s.is_decode});
  }
  return entries;
}

std::vector<int64_t> Ids(const std::vector<Sequence*>& seqs) {
  std::vector<int64_t> ids;
  for (const Sequence* s : seqs) ids.push_back(s->seq_id);
  return ids;
}

SchedulerConfig Config(int32_t max_num_batched_tokens, int32_t max_num_seqs = 8) {
  SchedulerConfig c;
  c.max_num_batched_tokens = max_num_batched_tokens;
  c.max_num_seqs = max_num_seqs;
  return c;
}

class SchedulerTest : public ::testing::Test {
 protected:
  void Make(int32_t num_blocks, int32_t block_size, SchedulerConfig config,
            bool prefix_caching = false) {
    ASSERT_TRUE(ValidateSchedulerConfig(config).ok());
    kv_ = std::make_unique<KvCacheManager>(num_blocks, block_size, prefix_caching);
    scheduler_ = std::make_unique<Scheduler>(config, *kv_);
  }

  // Queues a new sequence; seq ids and arrival order follow creation order.
  Sequence& Add(std::vector<int32_t> prompt, int32_t priority = 0) {
    auto seq = std::make_unique<Sequence>();
    seq->seq_id = static_cast<int64_t>(seqs_.size());
    seq->arrival_order = static_cast<uint64_t>(seqs_.size());
    seq->priority = priority;
    seq->num_prompt_tokens = static_cast<int32_t>(prompt.size());
    seq->token_ids = std::move(prompt);
    scheduler_->AddWaiting(seq.get());
    seqs_.push_back(std::move(seq));
    return *seqs_.back();
  }
  // A prompt of `len` tokens no other sequence shares.
  Sequence& Add(int32_t len, int32_t priority = 0) { return Add(UniquePrompt(len), priority); }
  std::vector<int32_t> UniquePrompt(int32_t len) {
    std::vector<int32_t> p;
    for (int32_t i = 0; i < len; ++i) p.push_back(next_token_++);
    return p;
  }

  // Runs the step as the engine would: commits every scheduled chunk and appends one sampled
  // token to each sequence that has computed all its tokens.
  void Complete(const SchedulerOutput& out) {
    for (const ScheduledSeq& s : out.scheduled) Commit(*s.seq, s.num_new_tokens);
    for (const ScheduledSeq& s : out.scheduled) {
      if (s.seq->num_uncomputed_tokens() == 0) s.seq->token_ids.push_back(next_token_++);
    }
  }
  void Commit(Sequence& seq, int32_t n) {
    const int32_t* first = seq.token_ids.data() + seq.num_computed_tokens;
    ASSERT_TRUE(kv_->CommitTokens(seq.seq_id, std::span<const int32_t>(first, n)).ok());
    seq.num_computed_tokens += n;
  }
  SchedulerOutput Step() {
    SchedulerOutput out = scheduler_->Schedule();
    Complete(out);
    return out;
  }

  // Finishes every sequence and checks that all blocks came back.
  void ExpectNoLeakAfterFinishingAll() {
    for (auto& seq : seqs_) scheduler_->Finish(seq.get());
    EXPECT_EQ(kv_->num_free_blocks(), kv_->num_blocks());
    EXPECT_EQ(kv_->num_sequences(), 0);
    EXPECT_EQ(scheduler_->num_running() + scheduler_->num_waiting(), 0);
  }

  std::unique_ptr<KvCacheManager> kv_;
  std::unique_ptr<Scheduler> scheduler_;
  std::vector<std::unique_ptr<Sequence>> seqs_;
  int32_t next_token_ = 100;
};

TEST_F(SchedulerTest, DecodesFirstThenRunningPrefillChunksThenAdmissions) {
  SchedulerConfig c = Config(12);
  c.max_prefill_chunk = 6;
  Make(64, 4, c);
  Sequence& longp = Add(30);
  Sequence& shortp = Add(2);
  EXPECT_EQ(Entries(Step()), (std::vector<Entry>{{0, 6, false}, {1, 2, false}}));
  ASSERT_TRUE(shortp.is_decoding());
  ASSERT_FALSE(longp.is_decoding());
  Sequence& fresh = Add(4);
  const SchedulerOutput out = Step();
  // The decode of the newer sequence leads, then the older one's next chunk, then admission.
  EXPECT_EQ(Entries(out), (std::vector<Entry>{{1, 1, true}, {0, 6, false}, {2, 4, false}}));
  EXPECT_EQ(out.num_batched_tokens, 11);
  EXPECT_EQ(fresh.status, SeqStatus::kRunning);
  ExpectNoLeakAfterFinishingAll();
}

TEST_F(SchedulerTest, TokenBudgetChunksPromptsAcrossSteps) {
  Make(64, 4, Config(10));
  Sequence& a = Add(25);
  Sequence& b = Add(3);
  EXPECT_EQ(Entries(Step()), (std::vector<Entry>{{0, 10, false}}));  // b: no budget left
  EXPECT_EQ(b.status, SeqStatus::kWaiting);
  EXPECT_EQ(Entries(Step()), (std::vector<Entry>{{0, 10, false}}));
  EXPECT_EQ(a.num_computed_tokens, 20);
  const SchedulerOutput last = Step();
  EXPECT_EQ(Entries(last), (std::vector<Entry>{{0, 5, false}, {1, 3, false}}));
  EXPECT_EQ(last.num_batched_tokens, 8);
  EXPECT_EQ(Entries(Step()), (std::vector<Entry>{{0, 1, true}, {1, 1, true}}));
  ExpectNoLeakAfterFinishingAll();
}

TEST_F(SchedulerTest, MaxNumSeqsCapsTheRunningSet) {
  Make(64, 4, Config(64, 2));
  Sequence& a = Add(4);
  Add(4);
  Sequence& c = Add(4);
  EXPECT_EQ(Entries(Step()), (std::vector<Entry>{{0, 4, false}, {1, 4, false}}));
  EXPECT_EQ(scheduler_->num_running(), 2);
  EXPECT_EQ(scheduler_->num_waiting(), 1);
  EXPECT_EQ(Entries(Step()), (std::vector<Entry>{{0, 1, true}, {1, 1, true}}));
  EXPECT_EQ(c.status, SeqStatus::kWaiting);
  scheduler_->Finish(&a);
  EXPECT_EQ(Entries(Step()), (std::vector<Entry>{{1, 1, true}, {2, 4, false}}));
  ExpectNoLeakAfterFinishingAll();
}

// A request's sample 0 holds a place for each sample still to be forked from it: it is admitted
// only when all of them fit, and a later small request does not jump the queue past it.
TEST_F(SchedulerTest, UnforkedSamplesHoldTheirPlacesInTheRunningSet) {
  Make(64, 4, Config(64, 4));
  Sequence& a = Add(4);
  Sequence& wide = Add(4);
  wide.num_unforked_samples = 3;  // n = 4: needs all 4 places
  Add(4);
  EXPECT_EQ(Entries(Step()), (std::vector<Entry>{{0, 4, false}}));
  EXPECT_EQ(scheduler_->num_running_seats(), 1);
  EXPECT_EQ(wide.status, SeqStatus::kWaiting);
  scheduler_->Finish(&a);
  EXPECT_EQ(Entries(Step()), (std::vector<Entry>{{1, 4, false}}));  // seq 2 waits behind it
  EXPECT_EQ(scheduler_->num_running_seats(), 4);
  EXPECT_EQ(scheduler_->num_waiting(), 1);
  ExpectNoLeakAfterFinishingAll();
}

TEST_F(SchedulerTest, MaxNumPartialPrefillsLimitsConcurrentPrefills) {
  SchedulerConfig c = Config(64);
  c.max_prefill_chunk = 4;
  c.max_num_partial_prefills = 2;
  Make(64, 4, c);
  Add(10);
  Add(10);
  Sequence& third = Add(10);
  // Budget is left every step, but only two prefills may be in flight.
  EXPECT_EQ(Entries(Step()), (std::vector<Entry>{{0, 4, false}, {1, 4, false}}));
  EXPECT_EQ(Entries(Step()), (std::vector<Entry>{{0, 4, false}, {1, 4, false}}));
  EXPECT_EQ(Entries(Step()), (std::vector<Entry>{{0, 2, false}, {1, 2, false}}));
  EXPECT_EQ(third.status, SeqStatus::kWaiting);
  EXPECT_EQ(Entries(Step()), (std::vector<Entry>{{0, 1, true}, {1, 1, true}, {2, 4, false}}));
  ExpectNoLeakAfterFinishingAll();
}

TEST_F(SchedulerTest, MaxPrefillChunkCapsEachSequence) {
  SchedulerConfig c = Config(64);
  c.max_prefill_chunk = 3;
  Make(64, 4, c);
  Add(7);
  Add(2);
  EXPECT_EQ(Entries(Step()), (std::vector<Entry>{{0, 3, false}, {1, 2, false}}));
  EXPECT_EQ(Entries(Step()), (std::vector<Entry>{{1, 1, true}, {0, 3, false}}));
  EXPECT_EQ(Entries(Step()), (std::vector<Entry>{{1, 1, true}, {0, 1, false}}));
  EXPECT_EQ(Entries(Step()), (std::vector<Entry>{{0, 1, true}, {1, 1, true}}));
  ExpectNoLeakAfterFinishingAll();
}

TEST_F(SchedulerTest, PrefixCacheHitsCountAsComputed) {
  Make(64, 4, Config(64), /*prefix_caching=*/true);
  const std::vector<int32_t> prompt = UniquePrompt(10);
  std::vector<int32_t> shares_one_block = UniquePrompt(10);
  std::copy_n(prompt.begin(), 4, shares_one_block.begin());
  Add(prompt);
  EXPECT_EQ(Entries(Step()), (std::vector<Entry>{{0, 10, false}}));
  Sequence& same = Add(prompt);
  Sequence& partial = Add(shares_one_block);
  // Whole cached blocks only, never the last prompt token: 8 of 10, then 4 of 10.
  EXPECT_EQ(Entries(Step()), (std::vector<Entry>{{0, 1, true}, {1, 2, false}, {2, 6, false}}));
  EXPECT_EQ(same.num_cached_tokens_at_admission, 8);
  EXPECT_TRUE(same.is_decoding());  // 8 cached + 2 computed: the whole prompt
  EXPECT_TRUE(partial.is_decoding());
  EXPECT_EQ(partial.num_cached_tokens_at_admission, 4);
  EXPECT_EQ(kv_->stats().hit_tokens, 12);
  ExpectNoLeakAfterFinishingAll();
}

TEST_F(SchedulerTest, NoPrefixCacheHitsWhenCachingIsOff) {
  Make(64, 4, Config(64), /*prefix_caching=*/false);
  const std::vector<int32_t> prompt = UniquePrompt(10);
  Add(prompt);
  Step();
  Sequence& same = Add(prompt);
  EXPECT_EQ(Entries(Step()), (std::vector<Entry>{{0, 1, true}, {1, 10, false}}));
  EXPECT_EQ(same.num_cached_tokens_at_admission, 0);
  ExpectNoLeakAfterFinishingAll();
}

TEST_F(SchedulerTest, FcfsAdmitsInArrivalOrderWhateverThePriority) {
  Make(64, 4, Config(64));
  Add(3, /*priority=*/5);
  Add(3, /*priority=*/-1);
  Add(3, /*priority=*/-1);
  EXPECT_EQ(Entries(Step()), (std::vector<Entry>{{0, 3, false}, {1, 3, false}, {2, 3, false}}));
  ExpectNoLeakAfterFinishingAll();
}

TEST_F(SchedulerTest, PriorityAdmitsLowerValueFirstThenArrivalOrder) {
  SchedulerConfig c = Config(64);
  c.policy = SchedulingPolicy::kPriority;
  Make(64, 4, c);
  Add(3, /*priority=*/5);
  Add(3, /*priority=*/-1);
  Add(3, /*priority=*/-1);
  EXPECT_EQ(Entries(Step()), (std::vector<Entry>{{1, 3, false}, {2, 3, false}, {0, 3, false}}));
  Add(3, /*priority=*/-5);
  EXPECT_EQ(Entries(Step()),
            (std::vector<Entry>{{1, 1, true}, {2, 1, true}, {0, 1, true}, {3, 3, false}}));
  // Decodes follow the same order; the newcomer of highest priority leads from now on.
  EXPECT_EQ(Entries(Step()),
            (std::vector<Entry>{{3, 1, true}, {1, 1, true}, {2, 1, true}, {0, 1, true}}));
  ExpectNoLeakAfterFinishingAll();
}

TEST_F(SchedulerTest, WaitingHeadThatDoesNotFitBlocksLaterAdmissions) {
  Make(4, 4, Config(64));
  Add(7);  // 2 blocks, and its decodes stay inside the second one for now
  Step();
  Sequence& big = Add(12);   // needs 3 blocks, 2 free
  Sequence& small = Add(2);  // would fit, but must not overtake
  EXPECT_EQ(Entries(Step()), (std::vector<Entry>{{0, 1, true}}));
  EXPECT_EQ(big.status, SeqStatus::kWaiting);
  EXPECT_EQ(small.status, SeqStatus::kWaiting);
  ExpectNoLeakAfterFinishingAll();
}

// Three decoding sequences fill all 3 blocks; each decode now needs a new block.
TEST_F(SchedulerTest, PreemptsLowestPriorityThenNewestPossiblyItself) {
  SchedulerConfig c = Config(64);
  c.policy = SchedulingPolicy::kPriority;
  Make(3, 4, c);
  Sequence& a = Add(4, /*priority=*/0);
  Sequence& b = Add(4, /*priority=*/5);
  Sequence& newest = Add(4, /*priority=*/0);
  Step();
  ASSERT_EQ(kv_->num_free_blocks(), 0);
  const SchedulerOutput out = Step();
  // a's block comes from b (lowest priority); newest then finds no victim but itself.
  EXPECT_EQ(Entries(out), (std::vector<Entry>{{0, 1, true}}));
  EXPECT_EQ(Ids(out.preempted), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(scheduler_->num_preemptions(), 2);
  for (Sequence* s : {&b, &newest}) {
    EXPECT_EQ(s->status, SeqStatus::kWaiting);
    EXPECT_EQ(s->num_computed_tokens, 0);
    EXPECT_EQ(s->num_tokens(), 5);  // the generated token is kept for recompute
    EXPECT_FALSE(kv_->HasSequence(s->seq_id));
  }
  EXPECT_EQ(kv_->num_free_blocks(), 1);  // a holds 2 of 3
  EXPECT_EQ(a.status, SeqStatus::kRunning);
  ExpectNoLeakAfterFinishingAll();
}

TEST_F(SchedulerTest, FcfsPreemptsTheNewestAndReadmitsPreemptedFirst) {
  Make(3, 4, Config(64));
  Sequence& a = Add(4);
  Add(4);
  Add(4);
  Step();
  Sequence& later = Add(4);  // arrives after everything that will be preempted
  const SchedulerOutput out = Step();
  EXPECT_EQ(Entries(out), (std::vector<Entry>{{0, 1, true}}));
  EXPECT_EQ(Ids(out.preempted), (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(scheduler_->num_waiting(), 3);
  scheduler_->Finish(&a);
  EXPECT_EQ(kv_->num_free_blocks(), 3);
  // Sequence 1 comes back first and recomputes its prompt and generated token in one chunk;
  // sequence 2 (2 blocks) no longer fits and holds back `later` (1 block) behind it.
  EXPECT_EQ(Entries(Step()), (std::vector<Entry>{{1, 5, false}}));
  EXPECT_EQ(later.status, SeqStatus::kWaiting);
  EXPECT_EQ(scheduler_->num_preemptions(), 2);
  ExpectNoLeakAfterFinishingAll();
}

TEST_F(SchedulerTest, VictimIsNeverASequenceAlreadyScheduledThisStep) {
  SchedulerConfig c = Config(8);
  c.max_prefill_chunk = 4;
  Make(3, 4, c);
  Sequence& prefill = Add(12);
  Add(2);  // decodes inside its first block for two steps
  EXPECT_EQ(Entries(Step()), (std::vector<Entry>{{0, 4, false}, {1, 2, false}}));
  EXPECT_EQ(Entries(Step()), (std::vector<Entry>{{1, 1, true}, {0, 4, false}}));
  // The prefill's third chunk needs a block; the newer sequence already decodes this step, so
  // the prefill gives way itself (its 2 blocks freed), then is admitted again from scratch.
  const SchedulerOutput out = Step();
  EXPECT_EQ(Ids(out.preempted), (std::vector<int64_t>{0}));
  EXPECT_EQ(Entries(out), (std::vector<Entry>{{1, 1, true}, {0, 4, false}}));
  EXPECT_EQ(prefill.num_computed_tokens, 4);
  EXPECT_EQ(kv_->num_free_blocks(), 1);
  ExpectNoLeakAfterFinishingAll();
}

TEST_F(SchedulerTest, FinishInEveryStateReturnsEveryBlock) {
  SchedulerConfig c = Config(8);
  c.max_prefill_chunk = 4;
  c.max_num_partial_prefills = 2;
  Make(16, 4, c, /*prefix_caching=*/true);
  Sequence& decoding = Add(3);
  Sequence& prefilling = Add(20);  // its first, full block enters the prefix cache
  Sequence& waiting = Add(6);
  Step();
  ASSERT_TRUE(decoding.is_decoding());
  ASSERT_GT(prefilling.num_computed_tokens, 0);
  ASSERT_EQ(waiting.status, SeqStatus::kWaiting);
  ASSERT_LT(kv_->num_free_blocks(), kv_->num_blocks());
  ExpectNoLeakAfterFinishingAll();
  for (auto& seq : seqs_) EXPECT_EQ(seq->status, SeqStatus::kFinished);
  EXPECT_EQ(Entries(scheduler_->Schedule()), std::vector<Entry>{});
}

// A fork (n > 1) joins the running set sharing its parent's blocks; the first write into the
// shared, partly filled block copies it.
TEST_F(SchedulerTest, AddRunningForkDecodesBesideItsParent) {
  Make(8, 4, Config(64));
  Sequence& parent = Add(6);
  const SchedulerOutput out = scheduler_->Schedule();
  Commit(parent, out.scheduled[0].num_new_tokens);
  auto child = std::make_unique<Sequence>(parent);
  child->seq_id = 7;
  child->sample_index = 1;
  ASSERT_TRUE(kv_->Fork(parent.seq_id, child->seq_id).ok());
  scheduler_->AddRunning(child.get());
  EXPECT_EQ(scheduler_->num_running(), 2);
  EXPECT_EQ(kv_->num_free_blocks(), 6);  // shared, not copied
  parent.token_ids.push_back(1);
  child->token_ids.push_back(2);
  EXPECT_EQ(Entries(Step()), (std::vector<Entry>{{0, 1, true}, {7, 1, true}}));
  EXPECT_EQ(kv_->num_free_blocks(), 5);
  EXPECT_EQ(kv_->TakePendingBlockCopies().size(), 1u);
  scheduler_->Finish(child.get());
  ExpectNoLeakAfterFinishingAll();
}

// A step-cost estimator with known costs: 0.1 s per step, 5 ms per decode token,
// `per_prefill_token` seconds per prompt token, 1 us per attended position; nothing until ready.
class FakeCost : public StepCostEstimator {
 public:
  std::optional<double> PredictSeconds(const StepShape& s) const override {
    ++calls;
    if (!ready) return std::nullopt;
    return 0.1 + 0.005 * s.decode_tokens + per_prefill_token * s.prefill_tokens +
           1e-6 * static_cast<double>(s.attended);
  }
  bool ready = true;
  double per_prefill_token = 0.01;
  mutable int32_t calls = 0;
};

SchedulerConfig BudgetConfig(int32_t percent, int32_t min_prefill_tokens = 4) {
  SchedulerConfig c = Config(256);
  c.step_time_budget_percent = percent;
  c.min_prefill_tokens = min_prefill_tokens;
  return c;
}

TEST_F(SchedulerTest, StepTimeBudgetCutsPrefillBesideDecodes) {
  Make(64, 16, BudgetConfig(200));
  FakeCost cost;
  cost.per_prefill_token = 0.01;
  scheduler_->SetCostEstimator(&cost);
  Sequence& a = Add(9);
  // No decodes yet: nothing to stall, the whole prompt runs (256-token budget).
  EXPECT_EQ(Entries(Step()), (std::vector<Entry>{{0, 9, false}}));
  Sequence& b = Add(100);
  // a decodes after 9 computed tokens: 0.1 + 0.005 + 10e-6 = 0.10501 s. The budget is relative
  // to a decode step of both seats (b will decode too): 0.1 + 0.01 + 10e-6 = 0.11001 s, 200% =
  // 0.22002 s, which leaves 0.11501 s for b's chunk k: 0.01 k + 1e-6 k (k + 1) / 2 -> k = 11.
  EXPECT_EQ(Entries(Step()), (std::vector<Entry>{{0, 1, true}, {1, 11, false}}));
  // b continues after 11 computed tokens: 0.01 k + 1e-6 (11 k + k (k + 1) / 2) <= 0.115 -> 11.
  EXPECT_EQ(Entries(Step()), (std::vector<Entry>{{0, 1, true}, {1, 11, false}}));
  // A looser budget (400%) gives larger chunks; the budget is read per step.
  Make(64, 16, BudgetConfig(400));
  scheduler_->SetCostEstimator(&cost);
  seqs_.clear();
  Add(9);
  Step();
  Add(100);
  const SchedulerOutput out = Step();
  EXPECT_EQ(Entries(out), (std::vector<Entry>{{0, 1, true}, {1, 33, false}}));
  (void)a;
  (void)b;
}

// The reference decode step counts every seat that will decode: running and waiting sequences
// (up to max_num_seqs), so a burst of arrivals beside one decoding sequence gets chunks worth a
// full step, not chunks sized to that one sequence's short step.
TEST_F(SchedulerTest, StepTimeBudgetIsRelativeToTheFullRunningSet) {
  Make(64, 16, BudgetConfig(200));
  FakeCost cost;
  scheduler_->SetCostEstimator(&cost);
  Add(9);
  Step();
  Add(100);
  Add(100);
  Add(100);
  // 4 seats: 0.1 + 0.02 + 10e-6 = 0.12001 s, 200% = 0.24002 s; a's decode takes 0.10501 s, so
  // the prefill gets 0.13501 s: the first waiting prompt 13 tokens (0.01 k + 1e-6 k (k + 1) / 2),
  // nothing is left for the others (the minimum, 4 tokens, is already met).
  const SchedulerOutput out = Step();
  EXPECT_EQ(Entries(out), (std::vector<Entry>{{0, 1, true}, {1, 13, false}}));
  // The step's shape for the engine's cost model: a's token attends to 10 positions, the chunk's
  // 13 to 1..13.
  EXPECT_EQ(out.shape.decode_tokens, 1);
  EXPECT_EQ(out.shape.prefill_tokens, 13);
  EXPECT_EQ(out.shape.attended, 10 + 13 * 14 / 2);
}

TEST_F(SchedulerTest, StepTimeBudgetAppliesOnlyWithDecodes) {
  FakeCost cost;
  // The step in which a 9-token sequence first decodes beside a newly added 100-token prompt,
  // under `percent` with `estimator` (nullptr: none).
  const auto decode_beside_prompt = [&](int32_t percent, const StepCostEstimator* estimator) {
    seqs_.clear();
    Make(64, 16, BudgetConfig(percent));
    if (estimator != nullptr) scheduler_->SetCostEstimator(estimator);
    Add(9);
    Step();
    Add(100);
    return Entries(Step());
  };
  // Off (0): the whole token budget goes to prefill beside a decode.
  EXPECT_EQ(decode_beside_prompt(0, &cost), (std::vector<Entry>{{0, 1, true}, {1, 100, false}}));
  // No prediction yet (too few measured steps): the minimum only (4), so that the first steps
  // cannot stall the decodes either.
  cost.ready = false;
  EXPECT_EQ(decode_beside_prompt(200, &cost), (std::vector<Entry>{{0, 1, true}, {1, 4, false}}));
  // No estimator: no budget.
  EXPECT_EQ(decode_beside_prompt(200, nullptr),
            (std::vector<Entry>{{0, 1, true}, {1, 100, false}}));
  // Prompts only (no decode in the step): nothing to stall, so the estimator is not even asked.
  seqs_.clear();
  Make(64, 16, BudgetConfig(200));
  FakeCost ready;
  scheduler_->SetCostEstimator(&ready);
  Add(100);
  Add(100);
  EXPECT_EQ(Entries(Step()), (std::vector<Entry>{{0, 100, false}, {1, 100, false}}));
  EXPECT_EQ(ready.calls, 0);
}

TEST_F(SchedulerTest, PrefillAlwaysProgressesUnderATightBudget) {
  Make(64, 16, BudgetConfig(100, /*min_prefill_tokens=*/6));
  FakeCost cost;
  cost.per_prefill_token = 10.0;  // any prompt token breaks the budget
  scheduler_->SetCostEstimator(&cost);
  Add(5);
  Step();  // seq 0 now decodes
  Sequence& b = Add(40);
  Sequence& c = Add(40);
  int32_t steps = 0;
  while (!b.is_decoding()) {
    const SchedulerOutput out = Step();
    ++steps;
    // The step's minimum goes to the head of the queue; c waits its turn (FCFS) ...
    if (steps < 7) {
      EXPECT_EQ(Entries(out), (std::vector<Entry>{{0, 1, true}, {1, 6, false}})) << steps;
    }
    ASSERT_LT(steps, 100);
  }
  EXPECT_EQ(steps, 7);  // ceil(40 / 6)
  // ... and gets what b's last chunk leaves of the step's minimum (6 = 4 + 2).
  EXPECT_EQ(c.num_computed_tokens, 2);
  // Then c progresses by the minimum beside the two decodes.
  EXPECT_EQ(Entries(Step()), (std::vector<Entry>{{0, 1, true}, {1, 1, true}, {2, 6, false}}));
  EXPECT_EQ(c.num_computed_tokens, 8);
}

TEST_F(SchedulerTest, StepTimeBudgetLeaksNoBlocks) {
  Make(24, 4, BudgetConfig(150, 3), /*prefix_caching=*/true);
  FakeCost cost;
  cost.per_prefill_token = 0.004;
  scheduler_->SetCostEstimator(&cost);
  const std::vector<int32_t> shared = UniquePrompt(8);
  for (int32_t i = 0; i < 6; ++i) {
    std::vector<int32_t> p = shared;
    for (int32_t t : UniquePrompt(5 + 7 * i)) p.push_back(t);
    Add(p);
  }
  // Run until every sequence has 4 generated tokens, finishing each as it gets there (some are
  // preempted on the way: 24 blocks of 4 cannot hold everything).
  for (int32_t step = 0; step < 400 && scheduler_->num_running() + scheduler_->num_waiting() > 0;
       ++step) {
    const SchedulerOutput out = Step();
    for (const ScheduledSeq& s : out.scheduled) {
      EXPECT_GT(s.num_new_tokens, 0);
      if (s.seq->num_output_tokens() >= 4 && s.seq->num_uncomputed_tokens() == 1) {
        scheduler_->Finish(s.seq);
      }
    }
  }
  EXPECT_EQ(scheduler_->num_running() + scheduler_->num_waiting(), 0);
  ExpectNoLeakAfterFinishingAll();
}

TEST_F(SchedulerTest, ConfigValidationNamesTheField) {
  EXPECT_TRUE(ValidateSchedulerConfig(Config(64, 8)).ok());
  EXPECT_FALSE(ValidateSchedulerConfig(Config(64, 0)).ok());
  EXPECT_FALSE(ValidateSchedulerConfig(Config(4, 8)).ok());  // a step must fit every decode
  SchedulerConfig c = Config(64);
  c.max_num_partial_prefills = 0;
  const Status st = ValidateSchedulerConfig(c);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("max_num_partial_prefills"), std::string::npos);
  c = Config(64);
  c.max_prefill_chunk = -1;
  EXPECT_FALSE(ValidateSchedulerConfig(c).ok());
  for (const int32_t percent : {0, 100, 250}) {
    c = Config(64);
    c.step_time_budget_percent = percent;
    EXPECT_TRUE(ValidateSchedulerConfig(c).ok()) << percent;
  }
  for (const int32_t percent : {-1, 1, 99, 100001}) {
    c = Config(64);
    c.step_time_budget_percent = percent;
    const Status bad = ValidateSchedulerConfig(c);
    EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument) << percent;
    EXPECT_NE(bad.message().find("engine.step_time_budget_percent"), std::string::npos);
  }
  c = Config(64);
  c.min_prefill_tokens = 0;
  EXPECT_NE(ValidateSchedulerConfig(c).message().find("engine.min_prefill_tokens"),
            std::string::npos);
}

}  // namespace
}  // namespace pagoda
