#include "scheduler/engine.h"

#include <algorithm>
#include <chrono>

#include "scheduler/stop_checker.h"

namespace pagoda {

// One sample (sequence) of a request with its per-sample generation state.
struct Engine::SampleState {
  Sequence seq;
  RequestState* request = nullptr;
  std::unique_ptr<Sampler> sampler;
  std::unique_ptr<StreamingDecoder> detok;
  std::unique_ptr<StopChecker> stop;
  FinishReason finish = FinishReason::kNone;
};

struct Engine::RequestState {
  Request request;
  std::shared_ptr<RequestStream> stream;
  RequestTimes times;
  Usage usage;
  std::vector<std::unique_ptr<SampleState>> samples;  // [0] created at admission, rest at fork
  int32_t num_finished = 0;
  bool forked = false;
};

Status ValidateEngineConfig(const EngineConfig& c) {
  PAGODA_RETURN_IF_ERROR(ValidateSchedulerConfig(c.scheduler));
  PAGODA_RETURN_IF_ERROR(CheckRange("server.max_waiting_requests", c.max_waiting_requests,
                                    kMaxWaitingRequestsRange));
  return CheckRange("engine.max_model_len", c.max_model_len, kMaxModelLenRange);
}

Result<std::unique_ptr<Engine>> Engine::Create(const Tokenizer& tokenizer, Backend& backend,
                                               const EngineConfig& config) {
  PAGODA_RETURN_IF_ERROR(ValidateEngineConfig(config));
  const BackendCapabilities& caps = backend.capabilities();
  if (config.scheduler.max_num_batched_tokens > caps.max_num_batched_tokens) {
    return InvalidArgument("engine.max_num_batched_tokens: " +
                           std::to_string(config.scheduler.max_num_batched_tokens) +
                           " exceeds the backend's " + std::to_string(caps.max_num_batched_tokens));
  }
  if (config.scheduler.max_num_seqs > caps.max_num_seqs) {
    return InvalidArgument("engine.max_num_seqs: exceeds the backend's " +
                           std::to_string(caps.max_num_seqs));
  }
  return std::unique_ptr<Engine>(new Engine(tokenizer, backend, config));
}

Engine::Engine(const Tokenizer& tokenizer, Backend& backend, const EngineConfig& config)
    : tokenizer_(tokenizer),
      backend_(backend),
      config_(config),
      kv_(backend.capabilities().num_blocks, backend.capabilities().block_size,
          config.enable_prefix_caching),
      scheduler_(config.scheduler, kv_) {
  const int32_t backend_len = backend.capabilities().max_model_len;
  if (config_.max_model_len <= 0 || config_.max_model_len > backend_len) {
    config_.max_model_len = backend_len;
  }
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
  if (n >= config_.max_model_len) {
    return InvalidArgument("prompt: " + std::to_string(n) + " tokens do not fit the context (" +
                           std::to_string(config_.max_model_len) +
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
  const int64_t need = std::min<int64_t>(n + r.stopping.max_tokens, config_.max_model_len);
  const int64_t capacity = int64_t{kv_.num_blocks()} * kv_.block_size();
  if (need > capacity) {
    return InvalidArgument("max_tokens: prompt + max_tokens needs " + std::to_string(need) +
                           " KV slots but the cache holds " + std::to_string(capacity));
  }
  return Status::Ok();
}

Result<std::shared_ptr<RequestStream>> Engine::Submit(Request request) {
  PAGODA_RETURN_IF_ERROR(ValidateRequest(request));
  auto state = std::make_unique<RequestState>();
  state->stream = std::make_shared<RequestStream>();
  state->times.arrival = EngineClock::now();
  state->usage.prompt_tokens = static_cast<int32_t>(request.prompt_token_ids.size());
  state->request = std::move(request);
  auto stream = state->stream;
  {
    std::lock_guard<std::mutex> lock(inbox_mu_);
    const std::string& id = state->request.request_id;
    if (live_ids_.count(id)) return InvalidArgument("request_id: '" + id + "' is already live");
    if (num_inbox_waiting_ + num_waiting_published_.load() >= config_.max_waiting_requests) {
      return ResourceExhausted("the waiting queue is full (" +
                               std::to_string(config_.max_waiting_requests) + " requests)");
    }
    live_ids_[id] = true;
    ++num_inbox_waiting_;
    inbox_new_.push_back(std::move(state));
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
  std::vector<std::unique_ptr<RequestState>> added;
  std::vector<std::string> aborts;
  {
    std::lock_guard<std::mutex> lock(inbox_mu_);
    added.swap(inbox_new_);
    aborts.swap(inbox_abort_);
    num_inbox_waiting_ = 0;
  }
  for (auto& r : added) AdmitRequest(std::move(r));
  for (const std::string& id : aborts) AbortNow(id);
}

void Engine::AdmitRequest(std::unique_ptr<RequestState> state) {
  RequestState& r = *state;
  auto s = std::make_unique<SampleState>();
  s->request = &r;
  s->seq.seq_id = next_seq_id_++;
  s->seq.sample_index = 0;
  s->seq.priority = r.request.priority;
  s->seq.arrival_order = next_arrival_++;
  s->seq.token_ids = r.request.prompt_token_ids;
  s->seq.num_prompt_tokens = static_cast<int32_t>(r.request.prompt_token_ids.size());
  samples_by_seq_[s->seq.seq_id] = s.get();
  scheduler_.AddWaiting(&s->seq);
  r.samples.push_back(std::move(s));
  requests_[r.request.request_id] = std::move(state);
}

void Engine::AbortNow(const std::string& request_id) {
  auto it = requests_.find(request_id);
  if (it == requests_.end()) return;
  RequestState& r = *it->second;
  // Finishing the last sample erases the request; iterate over a copy of the pointers.
  std::vector<SampleState*> live;
  for (auto& s : r.samples) {
    if (s->finish == FinishReason::kNone) live.push_back(s.get());
  }
  for (SampleState* s : live) FinishSample(*s, FinishReason::kAbort, {});
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
  for (Sequence* seq : out.preempted) {
    SampleState* s = samples_by_seq_[seq->seq_id];
    if (s->seq.sample_index == 0) ++s->request->times.num_preemptions;
  }
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
  stats_.generation_tokens = generation_tokens_;
  stats_.num_steps = steps_;
}

EngineStats Engine::stats() const {
  std::lock_guard<std::mutex> lock(stats_mu_);
  return stats_;
}

Status Engine::RunStep(const SchedulerOutput& out) {
  token_ids_.clear();
  slot_mapping_.clear();
  step_seqs_.clear();
  int32_t logit_rows = 0;
  const auto now = EngineClock::now();
  for (const ScheduledSeq& sch : out.scheduled) {
    Sequence& seq = *sch.seq;
    const int32_t start = static_cast<int32_t>(token_ids_.size());
    token_ids_.insert(token_ids_.end(), seq.token_ids.begin() + seq.num_computed_tokens,
                      seq.token_ids.begin() + seq.num_computed_tokens + sch.num_new_tokens);
    slot_mapping_.resize(token_ids_.size());
    PAGODA_RETURN_IF_ERROR(
        kv_.GetSlotMapping(seq.seq_id, seq.num_computed_tokens,
                           std::span<int32_t>(slot_mapping_).subspan(start, sch.num_new_tokens)));
    const bool needs_logits = seq.num_computed_tokens + sch.num_new_tokens == seq.num_tokens();
    step_seqs_.push_back({start, sch.num_new_tokens, seq.num_computed_tokens,
                          kv_.block_table(seq.seq_id), sch.is_decode, needs_logits});
    logit_rows += needs_logits ? 1 : 0;
    RequestState& r = *samples_by_seq_[seq.seq_id]->request;
    if (r.times.first_scheduled == EngineClock::time_point()) r.times.first_scheduled = now;
  }
  const std::vector<BlockCopy> copies = kv_.TakePendingBlockCopies();
  logits_.resize(static_cast<size_t>(logit_rows) * backend_.vocab_size());
  StepBatch batch{token_ids_, slot_mapping_, step_seqs_, copies};
  Status st = backend_.Execute(batch, logits_);
  ++steps_;
  if (!st.ok()) {
    FailStep(out, st);
    return Internal("backend step failed: " + st.ToString());
  }
  int32_t row = 0;
  for (size_t i = 0; i < out.scheduled.size(); ++i) {
    const ScheduledSeq& sch = out.scheduled[i];
    Sequence& seq = *sch.seq;
    SampleState* s = samples_by_seq_[seq.seq_id];
    const auto first = seq.token_ids.begin() + seq.num_computed_tokens;
    (void)kv_.CommitTokens(seq.seq_id, std::span<const int32_t>(&*first, sch.num_new_tokens));
    seq.num_computed_tokens += sch.num_new_tokens;
    if (!sch.is_decode) prompt_tokens_ += sch.num_new_tokens;
    if (!step_seqs_[i].needs_logits) continue;
    const size_t v = static_cast<size_t>(backend_.vocab_size());
    ProcessSampled(*s, std::span<const float>(logits_).subspan(row++ * v, v));
  }
  return Status::Ok();
}

void Engine::FailStep(const SchedulerOutput& out, const Status& status) {
  std::vector<std::string> ids;
  for (const ScheduledSeq& sch : out.scheduled) {
    ids.push_back(samples_by_seq_[sch.seq->seq_id]->request->request.request_id);
  }
  for (const std::string& id : ids) {
    auto it = requests_.find(id);
    if (it == requests_.end()) continue;
    std::vector<SampleState*> live;
    for (auto& s : it->second->samples) {
      if (s->finish == FinishReason::kNone) live.push_back(s.get());
    }
    for (SampleState* s : live) FinishSample(*s, FinishReason::kError, {}, status.ToString());
  }
}

void Engine::ProcessSampled(SampleState& s, std::span<const float> logits) {
  RequestState& r = *s.request;
  if (s.seq.sample_index == 0 && !r.forked) {
    r.forked = true;
    r.usage.cached_prompt_tokens = std::max(0, s.seq.num_cached_tokens_at_admission);
    ForkSamples(r, logits);
  }
  if (!s.sampler) {
    s.sampler = std::make_unique<Sampler>(r.request.sampling, s.seq.sample_index,
                                          std::span<const int32_t>(r.request.prompt_token_ids));
  }
  const SampleResult res = s.sampler->Sample(logits);
  TokenLogprob lp{res.token, res.logprob, res.top_logprobs};
  AppendToken(s, res.token, &lp);
}

// Creates samples 1..n-1 of a request as forks of sample 0 right after its prompt: they share
// the prompt's blocks (copy-on-write) and each draws its first token from the same logits.
void Engine::ForkSamples(RequestState& r, std::span<const float> logits) {
  const int32_t n = std::max(1, r.request.sampling.n);
  SampleState& parent = *r.samples[0];
  for (int32_t i = 1; i < n; ++i) {
    auto child = std::make_unique<SampleState>();
    child->request = &r;
    child->seq = parent.seq;
    child->seq.seq_id = next_seq_id_++;
    child->seq.sample_index = i;
    if (!kv_.Fork(parent.seq.seq_id, child->seq.seq_id).ok()) {
      r.samples.push_back(std::move(child));
      FinishSample(*r.samples.back(), FinishReason::kError, {}, "fork failed: KV cache exhausted");
      continue;
    }
    samples_by_seq_[child->seq.seq_id] = child.get();
    scheduler_.AddRunning(&child->seq);
    r.samples.push_back(std::move(child));
  }
  for (int32_t i = 1; i < static_cast<int32_t>(r.samples.size()); ++i) {
    SampleState& c = *r.samples[i];
    if (c.finish == FinishReason::kNone) ProcessSampled(c, logits);
  }
}

void Engine::AppendToken(SampleState& s, int32_t token, const TokenLogprob* lp) {
  RequestState& r = *s.request;
  const Request& req = r.request;
  const auto now = EngineClock::now();
  if (!s.detok) {
    s.detok = std::make_unique<StreamingDecoder>(tokenizer_);
    for (int32_t id : req.prompt_token_ids) s.detok->Push(id);
    s.stop =
        std::make_unique<StopChecker>(req.stopping.stop, req.stopping.include_stop_str_in_output);
  }
  if (s.seq.sample_index == 0) {
    if (r.times.first_token == EngineClock::time_point()) r.times.first_token = now;
    r.times.token_times.push_back(now);
  }
  const bool is_eos = !req.stopping.ignore_eos &&
                      std::count(config_.eos_token_ids.begin(), config_.eos_token_ids.end(), token);
  const bool is_stop_id =
      std::count(req.stopping.stop_token_ids.begin(), req.stopping.stop_token_ids.end(), token) > 0;
  RequestOutput out;
  out.request_id = req.request_id;
  out.index = s.seq.sample_index;
  FinishReason finish = FinishReason::kNone;
  bool stop_string_matched = false;
  if (is_eos || is_stop_id) {
    finish = FinishReason::kStop;  // the end token itself is not part of the output
  } else {
    s.seq.token_ids.push_back(token);
    s.sampler->Observe(token);
    ++generation_tokens_;
    ++r.usage.completion_tokens;
    out.token_ids.push_back(token);
    if (lp && (req.sampling.logprobs || req.sampling.top_logprobs > 0)) out.logprobs.push_back(*lp);
    const StopCheckResult stop = s.stop->Push(s.detok->Push(token));
    out.text = stop.text;
    if (stop.stopped()) {
      finish = FinishReason::kStop;
      stop_string_matched = true;
    } else if (s.seq.num_output_tokens() >= req.stopping.max_tokens ||
               s.seq.num_tokens() >= config_.max_model_len) {
      finish = FinishReason::kLength;
    }
  }
  if (finish == FinishReason::kNone) {
    r.stream->Push(std::move(out));
    return;
  }
  if (!stop_string_matched) {  // release held-back text: nothing can match any more
    StopCheckResult tail = s.stop->Push(s.detok->Flush());
    if (!tail.stopped()) {
      const StopCheckResult rest = s.stop->Flush();
      tail.text += rest.text;
      tail.stop_index = rest.stop_index;
    }
    out.text += tail.text;
    if (tail.stopped()) finish = FinishReason::kStop;
  }
  FinishSample(s, finish, std::move(out));
}

void Engine::FinishSample(SampleState& s, FinishReason reason, RequestOutput out,
                          const std::string& error) {
  RequestState& r = *s.request;
  s.finish = reason;
  scheduler_.Finish(&s.seq);
  samples_by_seq_.erase(s.seq.seq_id);
  out.request_id = r.request.request_id;
  out.index = s.seq.sample_index;
  out.finish_reason = reason;
  out.error = error;
  const int32_t n = std::max(1, r.request.sampling.n);
  // Samples not yet forked will never exist: count them finished too.
  r.num_finished = (!r.forked && s.seq.sample_index == 0) ? n : r.num_finished + 1;
  if (r.num_finished == n) {
    r.times.finished = EngineClock::now();
    out.request_finished = true;
    out.usage = r.usage;
    out.times = r.times;
  }
  const bool done = out.request_finished;
  const std::string id = r.request.request_id;
  if (done && finish_observer_) finish_observer_(out);
  r.stream->Push(std::move(out));
  if (done) {
    requests_.erase(id);
    std::lock_guard<std::mutex> lock(inbox_mu_);
    live_ids_.erase(id);
  }
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
