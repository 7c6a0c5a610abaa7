#include "scheduler/engine.h"

#include <algorithm>
#include <chrono>

#include "scheduler/stop_checker.h"

namespace pagoda {

namespace {

// EngineConfig::max_model_len: 0, or more than the backend supports, means the backend's.
int32_t ResolveMaxModelLen(int32_t configured, const BackendCapabilities& caps) {
  return configured <= 0 || configured > caps.max_model_len ? caps.max_model_len : configured;
}

}  // namespace

Status ValidateEngineConfig(const EngineConfig& c) {
  PAGODA_RETURN_IF_ERROR(ValidateSchedulerConfig(c.scheduler));
  PAGODA_RETURN_IF_ERROR(
      CheckRange("server.max_waiting_requests", c.max_waiting_requests, kMaxWaitingRequestsRange));
  PAGODA_RETURN_IF_ERROR(CheckRange("engine.max_model_len", c.max_model_len, kMaxModelLenRange));
  PAGODA_RETURN_IF_ERROR(ValidateSpeculativeConfig(c.speculative));
  if (c.max_model_len == 1) {
    return InvalidArgument(
        "engine.max_model_len: 1 leaves no room for a prompt token and a generated one (0: the "
        "model's context length, else >= 2)");
  }
  return Status::Ok();
}

Result<std::unique_ptr<Engine>> Engine::Create(const Tokenizer& tokenizer, Backend& backend,
                                               const EngineConfig& config, Backend* draft_backend) {
  PAGODA_RETURN_IF_ERROR(ValidateEngineConfig(config));
  const BackendCapabilities& caps = backend.capabilities();
  if (config.scheduler.max_num_batched_tokens > caps.max_num_batched_tokens) {
    return InvalidArgument("engine.max_num_batched_tokens: " +
                           std::to_string(config.scheduler.max_num_batched_tokens) +
                           " exceeds the backend's " + std::to_string(caps.max_num_batched_tokens));
  }
  if (config.speculative.enabled() && !caps.multi_token_logits) {
    return InvalidArgument("speculative.method: the " + caps.name +
                           " backend cannot verify speculative tokens (no multi-token decode)");
  }
  if (config.scheduler.max_num_seqs > caps.max_num_seqs) {
    return InvalidArgument("engine.max_num_seqs: exceeds the backend's " +
                           std::to_string(caps.max_num_seqs));
  }
  if (config.speculative.method == SpeculativeMethod::kDraft) {
    if (draft_backend == nullptr) {
      return InvalidArgument("speculative.draft_model: the draft model's backend was not built");
    }
    if (draft_backend->vocab_size() != backend.vocab_size()) {
      return InvalidArgument("speculative.draft_model: its vocabulary has " +
                             std::to_string(draft_backend->vocab_size()) + " tokens, the model " +
                             std::to_string(backend.vocab_size()) + " (they must be the same)");
    }
  }
  return std::unique_ptr<Engine>(new Engine(tokenizer, backend, config, draft_backend));
}

Engine::Engine(const Tokenizer& tokenizer, Backend& backend, const EngineConfig& config,
               Backend* draft_backend)
    : backend_(backend),
      max_model_len_(ResolveMaxModelLen(config.max_model_len, backend.capabilities())),
      max_waiting_requests_(config.max_waiting_requests),
      kv_(backend.capabilities().num_blocks, backend.capabilities().block_size,
          config.enable_prefix_caching),
      scheduler_(config.scheduler, kv_, config.speculative.disable_by_batch_size),
      processor_(tokenizer, OutputLimits{config.eos_token_ids, max_model_len_, config.speculative},
                 MakeCoreHooks()) {
  scheduler_.SetCostEstimator(&step_cost_);
  if (config.speculative.method == SpeculativeMethod::kDraft) {
    draft_ = std::make_unique<DraftProposer>(*draft_backend);
  }
}

// The processor's window on the engine core: forks and finished sequences go to the KV cache
// and the scheduler here, finished request ids leave the inbox's live set.
CoreHooks Engine::MakeCoreHooks() {
  CoreHooks hooks;
  hooks.start_fork = [this](const Sequence& parent, Sequence& child) {
    PAGODA_RETURN_IF_ERROR(kv_.Fork(parent.seq_id, child.seq_id));
    scheduler_.AddRunning(&child);
    return Status::Ok();
  };
  hooks.release_sequence = [this](Sequence& seq) {
    scheduler_.Finish(&seq);
    if (draft_) draft_->Release(seq.seq_id);
  };
  hooks.request_finished = [this](const std::string& request_id) {
    std::lock_guard<std::mutex> lock(inbox_mu_);
    live_ids_.erase(request_id);
  };
  return hooks;
}

Engine::~Engine() { Stop(); }

Status Engine::ValidateRequest(const Request& r) const {
  const auto& ids = r.prompt_token_ids;
  if (ids.empty()) return InvalidArgument("prompt: empty (no tokens)");
  for (int32_t id : ids) {
    if (id < 0 || id >= backend_.vocab_size()) {
      return InvalidArgument("prompt_token_ids: " + std::to_string(id) +
                             " is outside the vocabulary [0, " +
                             std::to_string(backend_.vocab_size()) + ")");
    }
  }
  const int64_t n = static_cast<int64_t>(ids.size());
  if (n >= max_model_len_) {
    return InvalidArgument("prompt: " + std::to_string(n) + " tokens do not fit the context (" +
                           std::to_string(max_model_len_) +
                           " tokens, including at least one generated token)");
  }
  if (r.stopping.max_tokens < 1) return InvalidArgument("max_tokens: must be >= 1");
  PAGODA_RETURN_IF_ERROR(ValidateStopStrings(r.stopping.stop));
  for (int32_t id : r.stopping.stop_token_ids) {
    if (id < 0 || id >= backend_.vocab_size()) {
      return InvalidArgument("stop_token_ids: " + std::to_string(id) +
                             " is outside the vocabulary");
    }
  }
  PAGODA_RETURN_IF_ERROR(ValidateSamplingParams(r.sampling, backend_.vocab_size()));
  const int32_t max_num_seqs = scheduler_.config().max_num_seqs;  // fixed at construction
  if (r.sampling.n > max_num_seqs) {
    // Every sample is a sequence of the batch: more than the batch holds could never run.
    return InvalidArgument("n: " + std::to_string(r.sampling.n) +
                           " samples exceed engine.max_num_seqs (" + std::to_string(max_num_seqs) +
                           "), the sequences one step holds");
  }
  const int64_t need = std::min<int64_t>(n + r.stopping.max_tokens, max_model_len_);
  const int64_t capacity = int64_t{kv_.num_blocks()} * kv_.block_size();
  if (need > capacity) {
    return InvalidArgument("max_tokens: prompt + max_tokens needs " + std::to_string(need) +
                           " KV slots but the cache holds " + std::to_string(capacity));
  }
  return Status::Ok();
}

Result<std::shared_ptr<RequestStream>> Engine::Submit(Request request) {
  PAGODA_RETURN_IF_ERROR(ValidateRequest(request));
  NewRequest entry{std::move(request), std::make_shared<RequestStream>(), EngineClock::now()};
  auto stream = entry.stream;
  {
    std::lock_guard<std::mutex> lock(inbox_mu_);
    const std::string& id = entry.request.request_id;
    if (live_ids_.count(id)) return InvalidArgument("request_id: '" + id + "' is already live");
    if (num_inbox_waiting_ + num_waiting_published_.load() >= max_waiting_requests_) {
      return ResourceExhausted("the waiting queue is full (" +
                               std::to_string(max_waiting_requests_) + " requests)");
    }
    live_ids_[id] = true;
    ++num_inbox_waiting_;
    inbox_new_.push_back(std::move(entry));
  }
  inbox_cv_.notify_all();
  return stream;
}

void Engine::Abort(const std::string& request_id) {
  {
    std::lock_guard<std::mutex> lock(inbox_mu_);
    inbox_abort_.push_back(request_id);
  }
  inbox_cv_.notify_all();
}

void Engine::AbortAll() {
  {
    std::lock_guard<std::mutex> lock(inbox_mu_);
    for (const auto& [id, live] : live_ids_) inbox_abort_.push_back(id);
  }
  inbox_cv_.notify_all();
}

bool Engine::HasWork() const {
  {
    std::lock_guard<std::mutex> lock(inbox_mu_);
    if (!inbox_new_.empty() || !inbox_abort_.empty()) return true;
  }
  return scheduler_.num_running() > 0 || scheduler_.num_waiting() > 0;
}

void Engine::DrainInbox() {
  std::vector<NewRequest> added;
  std::vector<std::string> aborts;
  {
    std::lock_guard<std::mutex> lock(inbox_mu_);
    added.swap(inbox_new_);
    aborts.swap(inbox_abort_);
    num_inbox_waiting_ = 0;
  }
  for (NewRequest& r : added) scheduler_.AddWaiting(&processor_.AddRequest(std::move(r)));
  for (const std::string& id : aborts) processor_.Abort(id);
}

Status Engine::RunUntilIdle() {
  while (HasWork()) {
    Status st = Step();
    if (!st.ok() && st.code() != StatusCode::kInternal) return st;
  }
  return Status::Ok();
}

Status Engine::Step() {
  DrainInbox();
  const SchedulerOutput out = scheduler_.Schedule();
  processor_.RecordSchedule(out, EngineClock::now());
  Status st = out.empty() ? Status::Ok() : RunStep(out);
  UpdateStats();
  return st;
}

void Engine::UpdateStats() {
  const PrefixCacheStats pc = kv_.stats();
  std::lock_guard<std::mutex> lock(stats_mu_);
  stats_.num_running = scheduler_.num_running();
  stats_.num_waiting = scheduler_.num_waiting();
  num_waiting_published_ = stats_.num_waiting;
  stats_.kv_cache_usage = kv_.usage();
  stats_.num_blocks_in_use = kv_.num_blocks() - kv_.num_free_blocks();
  stats_.num_preemptions = scheduler_.num_preemptions();
  stats_.prefix_cache_queries = pc.queried_tokens;
  stats_.prefix_cache_hits = pc.hit_tokens;
  stats_.prompt_tokens = prompt_tokens_;
  stats_.generation_tokens = processor_.num_generation_tokens();
  stats_.num_steps = steps_;
  stats_.speculative = processor_.speculative_stats();
  stats_.structured_output = processor_.structured_output_stats();
  stats_.draft_num_blocks_in_use = draft_ ? draft_->num_blocks_in_use() : 0;
}

EngineStats Engine::stats() const {
  std::lock_guard<std::mutex> lock(stats_mu_);
  return stats_;
}

Status Engine::RunStep(const SchedulerOutput& out) {
  const auto start = std::chrono::steady_clock::now();
  PAGODA_ASSIGN_OR_RETURN(const int32_t logit_rows, BuildStepBatch(out));
  const std::vector<BlockCopy> copies = kv_.TakePendingBlockCopies();
  logits_.resize(static_cast<size_t>(logit_rows) * backend_.vocab_size());
  const StepBatch batch{token_ids_, slot_mapping_, step_seqs_, copies};
  const Status st = backend_.Execute(batch, logits_);
  ++steps_;
  if (!st.ok()) {
    processor_.FailScheduled(out, st.ToString());
    return Internal("backend step failed: " + st.ToString());
  }
  CommitStep(out);
  step_cost_.Observe(
      out.shape, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  if (draft_) {
    // The draft model runs only for proposals the next step may verify.
    std::vector<DraftRequest> requests = processor_.TakeDraftRequests();
    if (!scheduler_.speculation_allowed()) requests.clear();
    draft_->Propose(requests);
  }
  return Status::Ok();
}

// Fills token_ids_, slot_mapping_ and step_seqs_ in schedule order (decodes first). Returns the
// number of logits rows the step produces.
Result<int32_t> Engine::BuildStepBatch(const SchedulerOutput& out) {
  token_ids_.clear();
  slot_mapping_.clear();
  step_seqs_.clear();
  int32_t logit_rows = 0;
  for (const ScheduledSeq& sch : out.scheduled) {
    const Sequence& seq = *sch.seq;
    const int32_t start = static_cast<int32_t>(token_ids_.size());
    const auto first = seq.token_ids.begin() + seq.num_computed_tokens;
    const int32_t num_known = sch.num_new_tokens - sch.num_draft_tokens;
    token_ids_.insert(token_ids_.end(), first, first + num_known);
    token_ids_.insert(token_ids_.end(), seq.draft_token_ids.begin(),
                      seq.draft_token_ids.begin() + sch.num_draft_tokens);
    slot_mapping_.resize(token_ids_.size());
    PAGODA_RETURN_IF_ERROR(
        kv_.GetSlotMapping(seq.seq_id, seq.num_computed_tokens,
                           std::span<int32_t>(slot_mapping_).subspan(start, sch.num_new_tokens)));
    const bool needs_logits = seq.num_computed_tokens + num_known == seq.num_tokens();
    const int32_t num_logits = needs_logits ? 1 + sch.num_draft_tokens : 0;
    step_seqs_.push_back({start, sch.num_new_tokens, seq.num_computed_tokens,
                          kv_.block_table(seq.seq_id), sch.is_decode, num_logits});
    logit_rows += num_logits;
  }
  return logit_rows;
}

// After a successful step: commits each sequence's computed tokens to the KV cache (full
// blocks enter the prefix cache) and hands every sequence that has computed all its tokens to
// the processor with its logits row, in batch order.
void Engine::CommitStep(const SchedulerOutput& out) {
  const size_t vocab = static_cast<size_t>(backend_.vocab_size());
  size_t row = 0;
  for (size_t i = 0; i < out.scheduled.size(); ++i) {
    const ScheduledSeq& sch = out.scheduled[i];
    if (sch.num_draft_tokens > 0) {
      const size_t rows = static_cast<size_t>(step_seqs_[i].num_logits);
      CommitDecodeWithDrafts(sch,
                             std::span<const float>(logits_).subspan(row * vocab, rows * vocab));
      row += rows;
      continue;
    }
    Sequence& seq = *sch.seq;
    const int32_t* first = seq.token_ids.data() + seq.num_computed_tokens;
    (void)kv_.CommitTokens(seq.seq_id, std::span<const int32_t>(first, sch.num_new_tokens));
    seq.num_computed_tokens += sch.num_new_tokens;
    if (!sch.is_decode) prompt_tokens_ += sch.num_new_tokens;
    if (step_seqs_[i].num_logits == 0) continue;
    processor_.ProcessLogits(seq.seq_id,
                             std::span<const float>(logits_).subspan(row++ * vocab, vocab));
  }
}

// A decode that ran its last token and num_draft_tokens speculative ones: the last token's KV is
// committed, the processor samples the rows and keeps the accepted drafts (appended to
// token_ids), whose KV is committed too; the rejected drafts' slots go back to the cache.
void Engine::CommitDecodeWithDrafts(const ScheduledSeq& sch, std::span<const float> rows) {
  Sequence& seq = *sch.seq;
  const int64_t seq_id = seq.seq_id;
  const int32_t last = seq.token_ids[seq.num_computed_tokens];
  (void)kv_.CommitTokens(seq_id, std::span<const int32_t>(&last, 1));
  seq.num_computed_tokens += 1;
  // The processor proposes the next drafts into seq.draft_token_ids: take these out first.
  std::vector<int32_t> drafts = std::move(seq.draft_token_ids);
  drafts.resize(static_cast<size_t>(sch.num_draft_tokens));
  const int32_t accepted = processor_.ProcessDraftLogits(seq_id, rows, drafts);
  if (!kv_.HasSequence(seq_id)) return;  // finished: its blocks are already freed
  (void)kv_.CommitTokens(seq_id, std::span<const int32_t>(drafts.data(), accepted));
  seq.num_computed_tokens += accepted;
  (void)kv_.TruncateSlots(seq_id, seq.num_computed_tokens);
}

void Engine::Loop() {
  while (!stop_.load()) {
    if (!HasWork()) {
      std::unique_lock<std::mutex> lock(inbox_mu_);
      inbox_cv_.wait_for(lock, std::chrono::milliseconds(50), [&] {
        return stop_.load() || !inbox_new_.empty() || !inbox_abort_.empty();
      });
      continue;
    }
    (void)Step();
  }
}

void Engine::Start() {
  if (loop_.joinable()) return;
  stop_ = false;
  loop_ = std::thread([this] { Loop(); });
}

void Engine::Stop() {
  stop_ = true;
  inbox_cv_.notify_all();
  if (loop_.joinable()) loop_.join();
}

}  // namespace pagoda
