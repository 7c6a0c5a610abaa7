#include "scheduler/output_processor.h"

#include <algorithm>
#include <optional>

#include "scheduler/stop_checker.h"

namespace pagoda {

// One sample (sequence) of a request with its per-sample generation state.
struct OutputProcessor::SampleState {
  Sequence seq;
  RequestState* request = nullptr;
  // Created at the sample's first token.
  std::unique_ptr<Sampler> sampler;
  std::unique_ptr<StreamingDecoder> detok;
  std::unique_ptr<StopChecker> stop;
  std::optional<grammar::GrammarMatcher> matcher;  // structured output (Request::grammar)
  FinishReason finish = FinishReason::kNone;
  int32_t max_drafts = 0;  // the next proposal's length limit (speculative.h's rule)
};

struct OutputProcessor::RequestState {
  Request request;
  std::shared_ptr<RequestStream> stream;
  RequestTimes times;
  Usage usage;
  std::vector<std::unique_ptr<SampleState>> samples;  // [0] created at admission, rest at fork
  int32_t num_finished = 0;
  bool forked = false;  // sample 0 drew its first token; samples 1..n-1 exist
};

OutputProcessor::OutputProcessor(const Tokenizer& tokenizer, OutputLimits limits, CoreHooks hooks)
    : tokenizer_(tokenizer),
      limits_(std::move(limits)),
      hooks_(std::move(hooks)),
      structured_(tokenizer, limits_.eos_token_ids) {}

OutputProcessor::~OutputProcessor() = default;

Sequence& OutputProcessor::AddRequest(NewRequest request) {
  auto state = std::make_unique<RequestState>();
  RequestState& r = *state;
  r.request = std::move(request.request);
  r.stream = std::move(request.stream);
  r.times.arrival = request.arrival;
  r.usage.prompt_tokens = static_cast<int32_t>(r.request.prompt_token_ids.size());
  auto s = std::make_unique<SampleState>();
  s->request = &r;
  s->seq.seq_id = next_seq_id_++;
  s->seq.sample_index = 0;
  s->seq.priority = r.request.priority;
  s->seq.arrival_order = next_arrival_++;
  s->seq.token_ids = r.request.prompt_token_ids;
  s->seq.num_prompt_tokens = static_cast<int32_t>(r.request.prompt_token_ids.size());
  s->seq.num_unforked_samples = std::max(1, r.request.sampling.n) - 1;
  samples_by_seq_[s->seq.seq_id] = s.get();
  Sequence& seq = s->seq;
  r.samples.push_back(std::move(s));
  requests_[r.request.request_id] = std::move(state);
  return seq;
}

void OutputProcessor::RecordSchedule(const SchedulerOutput& out, EngineClock::time_point now) {
  for (const Sequence* seq : out.preempted) {
    SampleState& s = *samples_by_seq_.at(seq->seq_id);
    if (s.seq.sample_index == 0) ++s.request->times.num_preemptions;
  }
  for (const ScheduledSeq& sch : out.scheduled) {
    RequestTimes& times = samples_by_seq_.at(sch.seq->seq_id)->request->times;
    if (times.first_scheduled == EngineClock::time_point()) times.first_scheduled = now;
  }
}

void OutputProcessor::ProcessLogits(int64_t seq_id, std::span<const float> logits) {
  ProcessSampled(*samples_by_seq_.at(seq_id), logits);
  ProposeDrafts(seq_id);
}

int32_t OutputProcessor::ProcessDraftLogits(int64_t seq_id, std::span<const float> rows,
                                            std::span<const int32_t> drafts) {
  const size_t vocab = rows.size() / (drafts.size() + 1);
  SampleState& s = *samples_by_seq_.at(seq_id);
  int32_t accepted = 0;
  for (size_t i = 0; i <= drafts.size(); ++i) {
    const int32_t token = ProcessSampled(s, rows.subspan(i * vocab, vocab));
    // A finished sample's state may be gone (its request erased): look it up, do not touch s.
    if (i == drafts.size() || !samples_by_seq_.contains(seq_id) || token != drafts[i]) break;
    ++accepted;
  }
  ++spec_stats_.num_drafts;
  spec_stats_.num_draft_tokens += static_cast<int64_t>(drafts.size());
  spec_stats_.num_accepted_tokens += accepted;
  if (spec_stats_.accepted_per_position.size() < drafts.size()) {
    spec_stats_.accepted_per_position.resize(drafts.size());
  }
  for (int32_t i = 0; i < accepted; ++i) ++spec_stats_.accepted_per_position[i];
  auto it = samples_by_seq_.find(seq_id);
  if (it != samples_by_seq_.end()) {
    it->second->max_drafts = std::min(limits_.speculative.num_tokens, accepted + 1);
    ProposeDrafts(seq_id);
  }
  return accepted;
}

// Sets the live sample's next speculative tokens (none when speculation is off for it): at most
// its max_drafts, the output tokens left after the next sampled one, and the context left.
void OutputProcessor::ProposeDrafts(int64_t seq_id) {
  auto it = samples_by_seq_.find(seq_id);
  if (it == samples_by_seq_.end()) return;
  SampleState& s = *it->second;
  s.seq.draft_token_ids.clear();  // also defines it after Engine moved the last ones out
  const SpeculativeConfig& c = limits_.speculative;
  if (!c.enabled() || !s.request->request.speculative) return;
  const int32_t left_output =
      s.request->request.stopping.max_tokens - s.seq.num_output_tokens() - 1;
  const int32_t left_context = limits_.max_model_len - s.seq.num_tokens();
  const int32_t k = std::min({s.max_drafts, left_output, left_context});
  if (k <= 0) return;
  if (c.method == SpeculativeMethod::kDraft) {
    draft_requests_.emplace_back(seq_id, k);  // the engine runs the draft model after the step
    return;
  }
  s.seq.draft_token_ids = ProposeNgram(s.seq.token_ids, c.ngram_min, c.ngram_max, k);
  if (s.matcher) structured_.PruneProposals(*s.matcher, &s.seq.draft_token_ids);
}

std::vector<DraftRequest> OutputProcessor::TakeDraftRequests() {
  std::vector<DraftRequest> out;
  for (const auto& [seq_id, k] : draft_requests_) {
    auto it = samples_by_seq_.find(seq_id);
    if (it != samples_by_seq_.end()) out.push_back({&it->second->seq, k});
  }
  draft_requests_.clear();
  return out;
}

int32_t OutputProcessor::ProcessSampled(SampleState& s, std::span<const float> logits) {
  RequestState& r = *s.request;
  if (s.seq.sample_index == 0 && !r.forked) {
    r.forked = true;
    r.usage.cached_prompt_tokens = std::max(0, s.seq.num_cached_tokens_at_admission);
    ForkSamples(r, logits);
  }
  if (!s.sampler) {
    s.sampler = std::make_unique<Sampler>(r.request.sampling, s.seq.sample_index,
                                          std::span<const int32_t>(r.request.prompt_token_ids));
    s.max_drafts = limits_.speculative.num_tokens;
    if (r.request.grammar) s.matcher.emplace(r.request.grammar);
  }
  SampleResult sampled;
  if (!s.matcher) {
    s.sampler->Sample(logits, &sampled);
  } else if (!SampleConstrained(s, logits, &sampled)) {
    return -1;  // the sample ended
  }
  AppendToken(s, sampled);
  return sampled.token;
}

// Samples among the tokens the sample's grammar allows. Ends the sample with kError (and
// returns false) when no token of the vocabulary can continue the output.
bool OutputProcessor::SampleConstrained(SampleState& s, std::span<const float> logits,
                                        SampleResult* sampled) {
  const std::span<const uint64_t> allowed =
      structured_.AllowedTokens(*s.matcher, s.request->request.stopping);
  if (std::none_of(allowed.begin(), allowed.end(), [](uint64_t w) { return w != 0; })) {
    FinishSample(s, FinishReason::kError, {},
                 "structured output: no token of the vocabulary can continue the output");
    return false;
  }
  s.sampler->SampleAllowed(logits, allowed, sampled);
  return true;
}

// Creates samples 1..n-1 of a request as forks of sample 0 right after its prompt: they share
// the prompt's blocks (copy-on-write) and each draws its first token from the same logits.
void OutputProcessor::ForkSamples(RequestState& r, std::span<const float> logits) {
  const int32_t n = std::max(1, r.request.sampling.n);
  r.samples[0]->seq.num_unforked_samples = 0;  // the seats it held pass to the forks
  const SampleState& parent = *r.samples[0];
  for (int32_t i = 1; i < n; ++i) {
    auto child = std::make_unique<SampleState>();
    child->request = &r;
    child->seq = parent.seq;
    child->seq.seq_id = next_seq_id_++;
    child->seq.sample_index = i;
    SampleState& c = *child;
    r.samples.push_back(std::move(child));
    if (!hooks_.start_fork(parent.seq, c.seq).ok()) {
      FinishSample(c, FinishReason::kError, {}, "fork failed: KV cache exhausted");
      continue;
    }
    samples_by_seq_[c.seq.seq_id] = &c;
  }
  for (int32_t i = 1; i < static_cast<int32_t>(r.samples.size()); ++i) {
    SampleState& c = *r.samples[i];
    if (c.finish != FinishReason::kNone) continue;
    const int64_t seq_id = c.seq.seq_id;
    ProcessSampled(c, logits);
    ProposeDrafts(seq_id);
  }
}

void OutputProcessor::AppendToken(SampleState& s, const SampleResult& sampled) {
  RequestState& r = *s.request;
  const Request& req = r.request;
  const int32_t token = sampled.token;
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
  RequestOutput out;
  out.request_id = req.request_id;
  out.index = s.seq.sample_index;
  FinishReason finish = FinishReason::kNone;
  bool stop_string_matched = false;
  if (IsEndToken(req.stopping, token)) {
    finish = FinishReason::kStop;  // the end token itself is not part of the output
  } else {
    s.seq.token_ids.push_back(token);
    s.sampler->Observe(token);
    ++generation_tokens_;
    ++r.usage.completion_tokens;
    out.token_ids.push_back(token);
    if (req.sampling.logprobs || req.sampling.top_logprobs > 0) {
      out.logprobs.push_back({token, sampled.logprob, sampled.top_logprobs});
    }
    const StopCheckResult stop = s.stop->Push(s.detok->Push(token));
    out.text = stop.text;
    if (stop.stopped()) {
      finish = FinishReason::kStop;
      stop_string_matched = true;
    } else if (s.matcher && !structured_.Advance(*s.matcher, token)) {
      finish = FinishReason::kError;  // the mask allowed a token the grammar refuses: a bug
    } else if (s.matcher && s.matcher->IsTerminated()) {
      finish = FinishReason::kStop;  // the grammar is complete: nothing may follow
    } else if (s.seq.num_output_tokens() >= req.stopping.max_tokens ||
               s.seq.num_tokens() >= limits_.max_model_len) {
      finish = FinishReason::kLength;
    }
  }
  if (finish == FinishReason::kNone) {
    r.stream->Push(std::move(out));
    return;
  }
  if (!stop_string_matched) finish = ReleaseHeldText(s, finish, out.text);
  FinishSample(
      s, finish, std::move(out),
      finish == FinishReason::kError ? "structured output: the grammar refused a token" : "");
}

// EOS (unless ignore_eos) or one of the request's stop_token_ids.
bool OutputProcessor::IsEndToken(const StoppingCriteria& stopping, int32_t token) const {
  const auto& eos = limits_.eos_token_ids;
  const auto& stop_ids = stopping.stop_token_ids;
  const bool is_eos = !stopping.ignore_eos && std::count(eos.begin(), eos.end(), token) > 0;
  return is_eos || std::count(stop_ids.begin(), stop_ids.end(), token) > 0;
}

// The sample ends without a stop-string match: nothing can match any more, so the text held back
// by the detokenizer and the stop checker goes out -- unless it completes a stop string, which
// truncates it and makes the finish reason kStop.
FinishReason OutputProcessor::ReleaseHeldText(SampleState& s, FinishReason finish,
                                              std::string& text) {
  StopCheckResult tail = s.stop->Push(s.detok->Flush());
  if (!tail.stopped()) {
    const StopCheckResult rest = s.stop->Flush();
    tail.text += rest.text;
    tail.stop_index = rest.stop_index;
  }
  text += tail.text;
  return tail.stopped() ? FinishReason::kStop : finish;
}

void OutputProcessor::Abort(const std::string& request_id) {
  FinishLiveSamples(request_id, FinishReason::kAbort, "");
}

void OutputProcessor::FailScheduled(const SchedulerOutput& out, const std::string& error) {
  // Finishing a request destroys its samples: collect the ids first.
  std::vector<std::string> ids;
  for (const ScheduledSeq& sch : out.scheduled) {
    ids.push_back(samples_by_seq_.at(sch.seq->seq_id)->request->request.request_id);
  }
  for (const std::string& id : ids) FinishLiveSamples(id, FinishReason::kError, error);
}

void OutputProcessor::FinishLiveSamples(const std::string& request_id, FinishReason reason,
                                        const std::string& error) {
  auto it = requests_.find(request_id);
  if (it == requests_.end()) return;
  // Finishing the last sample erases the request; iterate over a copy of the pointers.
  std::vector<SampleState*> live;
  for (auto& s : it->second->samples) {
    if (s->finish == FinishReason::kNone) live.push_back(s.get());
  }
  for (SampleState* s : live) FinishSample(*s, reason, {}, error);
}

void OutputProcessor::FinishSample(SampleState& s, FinishReason reason, RequestOutput out,
                                   const std::string& error) {
  RequestState& r = *s.request;
  s.finish = reason;
  hooks_.release_sequence(s.seq);
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
    hooks_.request_finished(id);
  }
}

}  // namespace pagoda
