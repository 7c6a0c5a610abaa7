#include "scheduler/scheduler.h"

#include <algorithm>

namespace pagoda {

Status ValidateSchedulerConfig(const SchedulerConfig& c) {
  PAGODA_RETURN_IF_ERROR(CheckRange("engine.max_num_seqs", c.max_num_seqs, kMaxNumSeqsRange));
  PAGODA_RETURN_IF_ERROR(CheckRange("engine.max_num_batched_tokens", c.max_num_batched_tokens,
                                    kMaxNumBatchedTokensRange));
  PAGODA_RETURN_IF_ERROR(CheckRange("engine.max_num_partial_prefills", c.max_num_partial_prefills,
                                    kMaxNumPartialPrefillsRange));
  PAGODA_RETURN_IF_ERROR(
      CheckRange("engine.max_prefill_chunk", c.max_prefill_chunk, kMaxPrefillChunkRange));
  PAGODA_RETURN_IF_ERROR(CheckRange("engine.step_time_budget_percent", c.step_time_budget_percent,
                                    kStepTimeBudgetPercentRange));
  PAGODA_RETURN_IF_ERROR(
      CheckRange("engine.min_prefill_tokens", c.min_prefill_tokens, kMinPrefillTokensRange));
  if (c.step_time_budget_percent > 0 && c.step_time_budget_percent < 100) {
    return InvalidArgument(
        "engine.step_time_budget_percent: expected 0 (off) or >= 100 (a step "
        "with prefill takes at least its decodes' time), got " +
        std::to_string(c.step_time_budget_percent));
  }
  if (c.max_num_batched_tokens < c.max_num_seqs) {
    return InvalidArgument("engine.max_num_batched_tokens: must be >= engine.max_num_seqs (" +
                           std::to_string(c.max_num_seqs) + ") so every decode fits a step");
  }
  return Status::Ok();
}

int32_t Scheduler::ChunkLimit(int32_t budget) const {
  return config_.max_prefill_chunk > 0 ? std::min(budget, config_.max_prefill_chunk) : budget;
}

namespace {

// The shape of the step scheduled so far, from its sequences' state before it runs.
StepShape ShapeOf(const SchedulerOutput& out) {
  StepShape shape;
  for (const ScheduledSeq& s : out.scheduled) {
    (s.is_decode ? shape.decode_tokens : shape.prefill_tokens) += s.num_new_tokens;
    shape.attended += AttendedPositions(s.seq->num_computed_tokens, s.num_new_tokens);
  }
  return shape;
}

}  // namespace

// Called after the decodes are scheduled: with decodes in the step, the step's prefill must fit
// step_time_budget_percent of their predicted time; before the estimator predicts anything (the
// first steps), the minimum only.
void Scheduler::StartStepTimeBudget(const SchedulerOutput& out) {
  step_ = StepBudget{ShapeOf(out), false, 0.0};
  if (config_.step_time_budget_percent == 0 || cost_ == nullptr) return;
  if (step_.shape.decode_tokens == 0) return;  // nothing to stall: the whole token budget
  step_.active = true;
  const std::optional<double> decode = cost_->PredictSeconds(ReferenceShape());
  if (decode) step_.limit_seconds = *decode * config_.step_time_budget_percent / 100.0;
}

// The decode step the budget is relative to: this step's decodes, or, when more sequences are
// on their way (waiting or prefilling), one token for each seat of the full running set (up to
// max_num_seqs). With few sequences decoding (start-up, a burst of arrivals) a budget relative
// to their own step would cut prompts into chunks too small to be worth a step's fixed cost.
StepShape Scheduler::ReferenceShape() const {
  StepShape reference = step_.shape;
  int32_t seats = num_running_seats();
  for (const Sequence* seq : waiting_) {
    if (seats >= config_.max_num_seqs) break;
    seats += seq->seats();
  }
  reference.decode_tokens =
      std::max(reference.decode_tokens, std::min(seats, config_.max_num_seqs));
  return reference;
}

// The largest chunk of at most n tokens (after num_computed) whose step the time limit allows,
// and never less than what min_prefill_tokens still owes this step (prefill always progresses).
int32_t Scheduler::FitChunk(int32_t num_computed, int32_t n) const {
  if (!step_.active || n == 0) return n;
  const auto fits = [&](int32_t k) {
    StepShape s = step_.shape;
    s.prefill_tokens += k;
    s.attended += AttendedPositions(num_computed, k);
    const std::optional<double> t = cost_->PredictSeconds(s);
    return t.has_value() && *t <= step_.limit_seconds;
  };
  if (fits(n)) return n;
  int32_t lo = std::clamp(config_.min_prefill_tokens - step_.shape.prefill_tokens, 0, n);
  int32_t hi = n - 1;  // the largest fitting chunk is in [lo, hi] (lo: allowed regardless)
  while (lo < hi) {
    const int32_t mid = lo + (hi - lo + 1) / 2;
    if (fits(mid)) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

void Scheduler::AddPrefill(int32_t num_computed, int32_t n) {
  step_.shape.prefill_tokens += n;
  step_.shape.attended += AttendedPositions(num_computed, n);
}

bool ServesBefore(SchedulingPolicy policy, const Sequence& a, const Sequence& b) {
  if (policy == SchedulingPolicy::kPriority && a.priority != b.priority) {
    return a.priority < b.priority;
  }
  if (a.arrival_order != b.arrival_order) return a.arrival_order < b.arrival_order;
  return a.sample_index < b.sample_index;
}

void Scheduler::AddWaiting(Sequence* seq) {
  seq->status = SeqStatus::kWaiting;
  // Keep the queue in policy order (preempted sequences re-enter at their place, which is
  // ahead of everything that arrived after them).
  auto it = std::find_if(waiting_.begin(), waiting_.end(),
                         [&](const Sequence* w) { return ServesBefore(config_.policy, *seq, *w); });
  waiting_.insert(it, seq);
}

void Scheduler::AddRunning(Sequence* seq) {
  seq->status = SeqStatus::kRunning;
  running_.push_back(seq);
  SortRunning();
}

void Scheduler::SortRunning() {
  std::stable_sort(running_.begin(), running_.end(), [&](const Sequence* a, const Sequence* b) {
    return ServesBefore(config_.policy, *a, *b);
  });
}

void Scheduler::Finish(Sequence* seq) {
  running_.erase(std::remove(running_.begin(), running_.end(), seq), running_.end());
  waiting_.erase(std::remove(waiting_.begin(), waiting_.end(), seq), waiting_.end());
  if (kv_.HasSequence(seq->seq_id)) (void)kv_.Free(seq->seq_id);
  seq->status = SeqStatus::kFinished;
}

void Scheduler::Preempt(Sequence* seq) {
  running_.erase(std::remove(running_.begin(), running_.end(), seq), running_.end());
  (void)kv_.Free(seq->seq_id);
  seq->num_computed_tokens = 0;  // recompute: generated tokens are kept in token_ids
  seq->draft_token_ids.clear();
  ++num_preemptions_;
  AddWaiting(seq);
}

// The lowest-priority, newest running sequence that is not already in this step.
Sequence* Scheduler::PickVictim(const SchedulerOutput& out) const {
  for (auto it = running_.rbegin(); it != running_.rend(); ++it) {
    const bool in_step = std::any_of(out.scheduled.begin(), out.scheduled.end(),
                                     [&](const ScheduledSeq& s) { return s.seq == *it; });
    if (!in_step) return *it;
  }
  return nullptr;
}

// Allocates n slots for a running sequence, preempting victims (never one already scheduled
// this step) until it fits. Returns false if the sequence itself had to be preempted.
bool Scheduler::AllocateOrPreempt(Sequence* seq, int32_t n, SchedulerOutput& out) {
  while (!kv_.AllocateSlots(seq->seq_id, n).ok()) {
    Sequence* victim = PickVictim(out);
    if (victim == nullptr || victim == seq) {
      Preempt(seq);
      out.preempted.push_back(seq);
      return false;
    }
    Preempt(victim);
    out.preempted.push_back(victim);
  }
  return true;
}

bool Scheduler::speculation_allowed() const {
  if (speculative_batch_limit_ == 0) return true;
  const auto num_decoding = std::count_if(running_.begin(), running_.end(), [](const Sequence* s) {
    return s->status == SeqStatus::kRunning && s->is_decoding();
  });
  return num_decoding <= speculative_batch_limit_;
}

void Scheduler::ScheduleDecodes(SchedulerOutput& out, int32_t& budget) {
  const std::vector<Sequence*> snapshot = running_;
  const bool speculate = speculation_allowed();
  for (Sequence* seq : snapshot) {
    if (seq->status != SeqStatus::kRunning || !seq->is_decoding() || budget == 0) continue;
    // Speculative tokens only where budget and free blocks allow, never at another's expense.
    int32_t drafts =
        speculate ? std::min<int32_t>(static_cast<int32_t>(seq->draft_token_ids.size()), budget - 1)
                  : 0;
    if (drafts > 0 && !kv_.AllocateSlots(seq->seq_id, 1 + drafts).ok()) drafts = 0;
    if (drafts == 0 && !AllocateOrPreempt(seq, 1, out)) continue;
    out.scheduled.push_back({seq, 1 + drafts, true, drafts});
    budget -= 1 + drafts;
  }
}

void Scheduler::SchedulePartialPrefills(SchedulerOutput& out, int32_t& budget, int32_t& partial) {
  const std::vector<Sequence*> snapshot = running_;
  for (Sequence* seq : snapshot) {
    if (seq->status != SeqStatus::kRunning || seq->is_decoding()) continue;
    if (budget == 0 || partial >= config_.max_num_partial_prefills) break;
    const int32_t n = FitChunk(seq->num_computed_tokens,
                               std::min(seq->num_uncomputed_tokens(), ChunkLimit(budget)));
    if (n == 0) break;  // the step-time budget is spent
    if (!AllocateOrPreempt(seq, n, out)) continue;
    out.scheduled.push_back({seq, n, false});
    AddPrefill(seq->num_computed_tokens, n);
    budget -= n;
    ++partial;
  }
}

int32_t Scheduler::num_running_seats() const {
  int32_t seats = 0;
  for (const Sequence* seq : running_) seats += seq->seats();
  return seats;
}

void Scheduler::AdmitWaiting(SchedulerOutput& out, int32_t& budget, int32_t& partial) {
  int32_t seats = num_running_seats();
  while (!waiting_.empty() && budget > 0 && partial < config_.max_num_partial_prefills) {
    Sequence* seq = waiting_.front();
    if (seats + seq->seats() > config_.max_num_seqs) break;  // no room for all its samples
    const int32_t cached = kv_.NumCachedPromptTokens(seq->token_ids);
    const int32_t n = FitChunk(cached, std::min(seq->num_tokens() - cached, ChunkLimit(budget)));
    if (n == 0) break;  // the step-time budget is spent
    auto admitted = kv_.AllocatePrompt(seq->seq_id, seq->token_ids, n);
    if (!admitted.ok()) break;  // not enough blocks: keep the queue order, retry next step
    waiting_.pop_front();
    seq->num_computed_tokens = *admitted;
    if (seq->num_cached_tokens_at_admission < 0) seq->num_cached_tokens_at_admission = *admitted;
    seq->status = SeqStatus::kRunning;
    running_.push_back(seq);
    seats += seq->seats();
    const int32_t n_new = std::min(seq->num_tokens() - *admitted, n);
    out.scheduled.push_back({seq, n_new, false});
    AddPrefill(*admitted, n_new);
    budget -= n_new;
    ++partial;
  }
  SortRunning();
}

SchedulerOutput Scheduler::Schedule() {
  SchedulerOutput out;
  int32_t budget = config_.max_num_batched_tokens;
  int32_t partial = 0;
  ScheduleDecodes(out, budget);
  StartStepTimeBudget(out);
  SchedulePartialPrefills(out, budget, partial);
  AdmitWaiting(out, budget, partial);
  for (const ScheduledSeq& s : out.scheduled) out.num_batched_tokens += s.num_new_tokens;
  out.shape = step_.shape;  // the decodes' (StartStepTimeBudget) plus each chunk (AddPrefill)
  return out;
}

}  // namespace pagoda
