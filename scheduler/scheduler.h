// Scheduler: iteration-level (continuous batching) policy over the paged KV cache.
//
// Each Schedule() builds one step under max_num_batched_tokens / max_num_seqs:
//   1. one token for every running decode (policy order, see ServesBefore), plus its
//      speculative tokens (Sequence::draft_token_ids) while no more than the speculative batch
//      limit decode, the budget allows and their blocks are free (else it runs without them);
//   2. the next chunk of running, partially prefilled sequences (chunked prefill);
//   3. admit waiting sequences (policy order; preempted ones re-enter ahead of everything that
//      arrived after them) while blocks, budget, max_num_seqs and max_num_partial_prefills
//      allow; a head that does not fit holds back the rest. Prefix-cache hits count as computed.
//      A request's sample 0 is admitted only with room for all n samples (Sequence::seats()):
//      its forks join the running set after its prompt without overflowing max_num_seqs, so
//      the running set's seats never exceed max_num_seqs (the Engine rejects n > max_num_seqs).
// When a sequence of 1. or 2. cannot get a block, a victim is preempted (PickVictim: the last
// running one in policy order -- under kPriority the lowest priority, then the newest -- that
// is not already in this step, possibly the sequence itself): its blocks are freed and it
// waits to be recomputed. Each sample of an n > 1 request is a sequence of its own, preempted
// and recomputed like any other (as vLLM V1 does for parallel sampling); the policy order puts
// a request's samples by sample index, so its newest samples are the first victims.
//
// Stall-free batching (Sarathi-Serve): while any sequence decodes, the chunks of 2. and 3. are
// cut so the step's predicted time (a StepCostEstimator; in the engine the StepCostModel fitted
// to measured steps) stays within step_time_budget_percent of the predicted time of a decode
// step of the full running set (one token per running or waiting seat, up to max_num_seqs; at
// least the step's own decodes). The step still carries min_prefill_tokens prompt tokens while
// prompts wait, so prefill always progresses; before the estimator predicts (the first steps)
// that minimum is all. Without decodes prefill takes the whole token budget.
//
// KV slots for everything scheduled are allocated here. The caller runs the step, commits the
// computed tokens (KvCacheManager::CommitTokens, Sequence::num_computed_tokens) and calls
// Finish() when a sequence ends (in Pagoda the Engine; its OutputProcessor appends sampled
// tokens and decides when a sequence ends). Used by one engine thread; not thread-safe.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "common/field_check.h"
#include "common/status.h"
#include "kvcache/kv_cache_manager.h"
#include "scheduler/sequence.h"
#include "scheduler/step_cost_model.h"

namespace pagoda {

enum class SchedulingPolicy { kFcfs, kPriority };
inline constexpr std::pair<std::string_view, SchedulingPolicy> kSchedulingPolicyNames[] = {
    {"fcfs", SchedulingPolicy::kFcfs}, {"priority", SchedulingPolicy::kPriority}};

// The `engine:` section of the config (each default and range declared here, once).
struct SchedulerConfig {
  int32_t max_num_seqs = 64;              // sequences per step
  int32_t max_num_batched_tokens = 2048;  // tokens per step; >= max_num_seqs
  int32_t max_num_partial_prefills = 4;
  int32_t max_prefill_chunk = 0;  // tokens of one sequence's prefill per step; 0 = budget only
  // While sequences decode, a step's predicted time may be at most this percentage of a decode
  // step of the full running set (ReferenceShape; prefill chunks are cut to fit); 0 = off. 0 or
  // >= 100.
  int32_t step_time_budget_percent = 200;
  // Prompt tokens a step carries whatever the step-time budget (while prompts wait).
  int32_t min_prefill_tokens = 16;
  SchedulingPolicy policy = SchedulingPolicy::kFcfs;
  bool operator==(const SchedulerConfig&) const = default;
};
// Backends size their step buffers by these caps (per token and per sequence): the upper bounds
// keep every size well inside int32 arithmetic and refuse values no machine could allocate.
inline constexpr IntRange kMaxNumSeqsRange{1, 1 << 16};
inline constexpr IntRange kMaxNumBatchedTokensRange{1, 1 << 20};
inline constexpr IntRange kMaxNumPartialPrefillsRange{1, 1 << 16};
inline constexpr IntRange kMaxPrefillChunkRange{0, 1 << 20};
inline constexpr IntRange kStepTimeBudgetPercentRange{0, 100000};
inline constexpr IntRange kMinPrefillTokensRange{1, 1 << 20};

// Ranges above, max_num_batched_tokens >= max_num_seqs and step_time_budget_percent 0 or >= 100;
// errors name the `engine.` key.
Status ValidateSchedulerConfig(const SchedulerConfig& config);

struct ScheduledSeq {
  Sequence* seq = nullptr;
  int32_t num_new_tokens = 0;  // tokens [num_computed_tokens, + num_new_tokens) run this step
  bool is_decode = false;
  // Of num_new_tokens, the speculative ones: seq->draft_token_ids[0, num_draft_tokens), after
  // the sequence's one uncomputed token.
  int32_t num_draft_tokens = 0;
};

struct SchedulerOutput {
  std::vector<ScheduledSeq> scheduled;  // decodes first
  std::vector<Sequence*> preempted;     // this step's victims (now waiting)
  int32_t num_batched_tokens = 0;
  StepShape shape;  // what the step computes, for the cost model (the engine times the step)
  bool empty() const { return scheduled.empty(); }
};

// True if `a` should be served before `b` under `policy`.
bool ServesBefore(SchedulingPolicy policy, const Sequence& a, const Sequence& b);

class Scheduler {
 public:
  // speculative_batch_limit: decodes run their speculative tokens only while at most this many
  // sequences decode (0: no limit; SpeculativeConfig::disable_by_batch_size).
  Scheduler(const SchedulerConfig& config, KvCacheManager& kv, int32_t speculative_batch_limit = 0)
      : config_(config), kv_(kv), speculative_batch_limit_(speculative_batch_limit) {}
  // Whether the decodes of the next step may run speculative tokens: at most the speculative
  // batch limit of running sequences are decoding (always, without a limit).
  bool speculation_allowed() const;
  // The step-time budget's predictor (not owned; null: no budget). Set before Schedule().
  void SetCostEstimator(const StepCostEstimator* cost) { cost_ = cost; }

  // Queues a new sequence (waiting). The Sequence is owned by the caller (the OutputProcessor)
  // and must stay alive until Finish().
  void AddWaiting(Sequence* seq);
  // Adds an already running sequence (a fork that shares its parent's blocks).
  void AddRunning(Sequence* seq);
  SchedulerOutput Schedule();
  // Removes a sequence in any state and frees its KV blocks.
  void Finish(Sequence* seq);

  int32_t num_running() const { return static_cast<int32_t>(running_.size()); }
  // Places the running set holds (<= max_num_seqs): running sequences and their unforked samples.
  int32_t num_running_seats() const;
  int32_t num_waiting() const { return static_cast<int32_t>(waiting_.size()); }
  int64_t num_preemptions() const { return num_preemptions_; }
  const SchedulerConfig& config() const { return config_; }

 private:
  void ScheduleDecodes(SchedulerOutput& out, int32_t& budget);
  void SchedulePartialPrefills(SchedulerOutput& out, int32_t& budget, int32_t& partial);
  void AdmitWaiting(SchedulerOutput& out, int32_t& budget, int32_t& partial);
  bool AllocateOrPreempt(Sequence* seq, int32_t n, SchedulerOutput& out);
  Sequence* PickVictim(const SchedulerOutput& out) const;
  void Preempt(Sequence* seq);
  void SortRunning();
  int32_t ChunkLimit(int32_t budget) const;
  void StartStepTimeBudget(const SchedulerOutput& out);
  StepShape ReferenceShape() const;
  int32_t FitChunk(int32_t num_computed, int32_t n) const;
  void AddPrefill(int32_t num_computed, int32_t n);

  // The step being built: its shape so far and, when the budget applies (active), the time the
  // step must fit in (0 without a prediction: only min_prefill_tokens fit).
  struct StepBudget {
    StepShape shape;
    bool active = false;
    double limit_seconds = 0;
  };

  SchedulerConfig config_;
  KvCacheManager& kv_;
  int32_t speculative_batch_limit_ = 0;
  const StepCostEstimator* cost_ = nullptr;
  StepBudget step_;
  std::vector<Sequence*> running_;
  std::deque<Sequence*> waiting_;
  int64_t num_preemptions_ = 0;
};

}  // namespace pagoda
