// OutputProcessor: everything that happens to a request after the backend produced a logits row
// for it -- sampling, incremental detokenization, stop strings / stop ids / EOS / max_tokens /
// max_model_len, logprobs, the n > 1 forks after the prompt, finish reasons -- and the
// RequestOutput messages pushed to each request's RequestStream (the request's last message also
// goes to the finish observer); structured output (Request::grammar) masks each sample's tokens
// and ends it where its grammar is complete (structured_output.h). The step loop itself (inbox,
// Schedule, StepBatch, Backend, KV commits, stats) is the Engine's (engine.h).
//
// Ownership: the processor owns the state of every live request (RequestState) and of each of
// its samples (SampleState), and so each sample's Sequence. The Scheduler only points at those
// Sequences. The processor never touches the Scheduler or the KV cache; it asks the engine core
// through CoreHooks to start a fork and to release a finished sequence (the engine calls
// Scheduler::Finish there), and destroys a request's state right after its last message.
//
// Per step the engine calls RecordSchedule(), then ProcessLogits() for each sequence that has
// computed all its tokens, in batch order. Abort() and FailScheduled() end requests early.
// Not thread-safe: used by the engine thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "model/tokenizer.h"
#include "scheduler/draft_proposer.h"
#include "scheduler/request.h"
#include "scheduler/scheduler.h"
#include "scheduler/sequence.h"
#include "scheduler/speculative.h"
#include "scheduler/structured_output.h"

namespace pagoda {

// A validated request on its way in (Engine::Submit gathers it on the caller's thread).
struct NewRequest {
  Request request;
  std::shared_ptr<RequestStream> stream;
  EngineClock::time_point arrival;
};

struct OutputLimits {
  std::vector<int32_t> eos_token_ids;  // model end tokens: a sample stops on one (kStop)
  int32_t max_model_len = 0;           // a sample stops (kLength) at this many tokens
  SpeculativeConfig speculative;       // proposals made after each sampled token
};

// Speculative decoding counters, named as vLLM's spec_decode_* metrics.
struct SpeculativeStats {
  int64_t num_drafts = 0;           // verifications run (sequences x steps with proposals)
  int64_t num_draft_tokens = 0;     // tokens proposed and verified
  int64_t num_accepted_tokens = 0;  // of those, accepted
  std::vector<int64_t> accepted_per_position;  // [i]: verifications that accepted proposal i
};

// What the processor asks of the engine core. All three must be set.
struct CoreHooks {
  // Starts `child` -- a copy of `parent` right after its prompt, with its own seq_id -- as a
  // copy-on-write fork scheduled from the next step. On error the child ends with kError.
  std::function<Status(const Sequence& parent, Sequence& child)> start_fork;
  // A sample finished: take `seq` out of scheduling and free its KV blocks. Called once per
  // sample, before its last message; the Sequence is destroyed later, by the processor.
  std::function<void(Sequence& seq)> release_sequence;
  // The request's last message was pushed and its state destroyed: its id may be reused.
  std::function<void(const std::string& request_id)> request_finished;
};

class OutputProcessor {
 public:
  // `tokenizer` must outlive the processor.
  OutputProcessor(const Tokenizer& tokenizer, OutputLimits limits, CoreHooks hooks);
  ~OutputProcessor();

  // Called with the last message of every request, before it is pushed to the stream.
  void SetFinishObserver(std::function<void(const RequestOutput&)> fn) {
    finish_observer_ = std::move(fn);
  }

  // Takes a new request and creates its first sample; returns that sample's Sequence for
  // Scheduler::AddWaiting. Samples 1..n-1 are forked from it once its prompt is computed.
  Sequence& AddRequest(NewRequest request);
  // Notes a schedule on the requests: preemptions (of sample 0) and the first-scheduled time.
  void RecordSchedule(const SchedulerOutput& out, EngineClock::time_point now);
  // Sequence `seq_id` has computed all its tokens and `logits` is its last row: samples the
  // next token (first forking the request's other samples, which draw from the same row),
  // appends it, checks the stop conditions and pushes the sample's message(s).
  void ProcessLogits(int64_t seq_id, std::span<const float> logits);
  // Sequence `seq_id` ran its last token and `drafts` (its speculative tokens): `rows` holds
  // drafts.size() + 1 logits rows. Samples row i as ProcessLogits would and goes on to row i + 1
  // while the sampled token equals drafts[i] and the sample lives. Returns how many drafts were
  // accepted (their KV is valid; the caller releases the rest).
  int32_t ProcessDraftLogits(int64_t seq_id, std::span<const float> rows,
                             std::span<const int32_t> drafts);
  // Ends every live sample of the request with kAbort. Unknown ids: no-op.
  void Abort(const std::string& request_id);
  // Ends every live sample of every request with a sequence in `out.scheduled` with kError.
  void FailScheduled(const SchedulerOutput& out, const std::string& error);

  // The live sequences that asked for draft-model proposals (speculative.method draft) since the
  // last call, with how many each may take; their draft_token_ids are empty until the engine's
  // DraftProposer fills them.
  std::vector<DraftRequest> TakeDraftRequests();

  int32_t num_live_requests() const { return static_cast<int32_t>(requests_.size()); }
  int64_t num_generation_tokens() const { return generation_tokens_; }  // appended, all requests
  const SpeculativeStats& speculative_stats() const { return spec_stats_; }
  const StructuredOutputStats& structured_output_stats() const { return structured_.stats(); }

 private:
  struct SampleState;
  struct RequestState;

  int32_t ProcessSampled(SampleState& s, std::span<const float> logits);
  bool SampleConstrained(SampleState& s, std::span<const float> logits, SampleResult* sampled);
  void ProposeDrafts(int64_t seq_id);
  void ForkSamples(RequestState& r, std::span<const float> logits);
  void AppendToken(SampleState& s, const SampleResult& sampled);
  bool IsEndToken(const StoppingCriteria& stopping, int32_t token) const;
  FinishReason ReleaseHeldText(SampleState& s, FinishReason finish, std::string& text);
  void FinishLiveSamples(const std::string& request_id, FinishReason reason,
                         const std::string& error);
  // Ends a sample; `out` carries its last tokens/text (may be empty). Pushes its last message.
  void FinishSample(SampleState& s, FinishReason reason, RequestOutput out,
                    const std::string& error = "");

  const Tokenizer& tokenizer_;
  const OutputLimits limits_;
  const CoreHooks hooks_;
  std::function<void(const RequestOutput&)> finish_observer_;
  StructuredOutput structured_;

  std::map<std::string, std::unique_ptr<RequestState>> requests_;
  std::map<int64_t, SampleState*> samples_by_seq_;  // live samples only
  int64_t next_seq_id_ = 0;
  uint64_t next_arrival_ = 0;
  int64_t generation_tokens_ = 0;
  SpeculativeStats spec_stats_;
  std::vector<std::pair<int64_t, int32_t>> draft_requests_;  // seq_id, proposals wanted
};

}  // namespace pagoda
