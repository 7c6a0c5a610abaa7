// Engine: the continuous-batching loop (the engine core). Owns the KV block bookkeeping
// (KvCacheManager), the Scheduler and the OutputProcessor, and drives a Backend one step at a
// time; the OutputProcessor (output_processor.h) turns logits into each request's RequestOutput
// messages and owns all per-request state.
//
// Threading: Submit() and Abort() may be called from any thread; they only touch an inbox.
// Step() runs on one thread at a time -- either the engine's own loop thread (Start/Stop) or
// the caller's (tests, the CLI), never both.
//
// One step: drain inbox (new requests -> OutputProcessor::AddRequest + Scheduler::AddWaiting;
// aborts) -> Schedule -> build StepBatch (decodes first) -> Backend::Execute -> commit the
// computed tokens to the KV cache -> hand each sequence that completed its tokens, with its
// logits row, to the OutputProcessor (sample, detokenize, stop checks, n > 1 forks, messages)
// -> the step's measured time (batch build to commit) refits the StepCostModel that the
// scheduler's step-time budget predicts with -> (speculative.method draft) the draft model proposes
// for the sequences that asked -> publish stats. Through CoreHooks the processor has the engine
// start forks (KvCacheManager::Fork + Scheduler::AddRunning) and free finished sequences
// (Scheduler::Finish).
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"
#include "kernels/backend.h"
#include "kvcache/kv_cache_manager.h"
#include "model/tokenizer.h"
#include "scheduler/draft_proposer.h"
#include "scheduler/output_processor.h"
#include "scheduler/request.h"
#include "scheduler/scheduler.h"
#include "scheduler/speculative.h"
#include "scheduler/step_cost_model.h"

namespace pagoda {

// The engine's options: the `engine:` section (scheduler, max_model_len), the server's queue bound
// and the KV cache's prefix caching (the engine's KvCacheManager does it). Defaults declared once.
struct EngineConfig {
  SchedulerConfig scheduler;
  int32_t max_waiting_requests = 1024;  // server.max_waiting_requests; Submit beyond: EXHAUSTED
  int32_t max_model_len = 0;            // engine.max_model_len; 0: the backend's
  bool enable_prefix_caching = true;    // kv_cache.enable_prefix_caching
  std::vector<int32_t> eos_token_ids;   // model end tokens (EOS, end-of-turn, ...); from the model
  SpeculativeConfig speculative;        // the `speculative:` section
  bool operator==(const EngineConfig&) const = default;
};
inline constexpr IntRange kMaxWaitingRequestsRange{1, kInt32Max};
inline constexpr IntRange kMaxModelLenRange{0, kInt32Max};

// The scheduler's rules and the ranges above; errors name the config key.
Status ValidateEngineConfig(const EngineConfig& config);

struct EngineStats {
  int32_t num_running = 0;
  int32_t num_waiting = 0;
  double kv_cache_usage = 0.0;  // fraction of blocks referenced
  int32_t num_blocks_in_use = 0;
  int64_t num_preemptions = 0;
  int64_t prefix_cache_queries = 0;  // prompt tokens looked up
  int64_t prefix_cache_hits = 0;     // of those, found cached
  int64_t prompt_tokens = 0;
  int64_t generation_tokens = 0;
  int64_t num_steps = 0;
  SpeculativeStats speculative;         // as vLLM's spec_decode_* counters
  int32_t draft_num_blocks_in_use = 0;  // speculative.method draft: the draft model's KV blocks
  StructuredOutputStats structured_output;
};

class Engine {
 public:
  // `tokenizer`, `backend` and `draft_backend` must outlive the engine. `draft_backend` runs the
  // draft model of speculative.method draft (required then, with the backend's vocabulary size;
  // else unused). Errors name a bad config field.
  static Result<std::unique_ptr<Engine>> Create(const Tokenizer& tokenizer, Backend& backend,
                                                const EngineConfig& config,
                                                Backend* draft_backend = nullptr);
  ~Engine();

  // Validates and queues a request. INVALID_ARGUMENT names the bad field; RESOURCE_EXHAUSTED
  // when the waiting queue is full; ALREADY_EXISTS-style INVALID_ARGUMENT for a live id.
  Result<std::shared_ptr<RequestStream>> Submit(Request request);
  // Aborts a request in any state; its blocks are freed within one step. Unknown ids: no-op.
  void Abort(const std::string& request_id);
  // Aborts every live request (used at the end of a graceful shutdown).
  void AbortAll();

  // Runs one engine step (no-op when idle). An INTERNAL status means the backend failed: the
  // affected requests were finished with kError and the engine can go on.
  Status Step();
  bool HasWork() const;
  // Steps until nothing is waiting or running.
  Status RunUntilIdle();

  // Background loop thread: steps while there is work, sleeps on new submissions.
  void Start();
  void Stop();  // aborts nothing; returns after the loop exits

  EngineStats stats() const;
  // The longest sequence (prompt + generated tokens): engine.max_model_len resolved against the
  // backend's limit.
  int32_t max_model_len() const { return max_model_len_; }
  // The step-cost fit the scheduler's step-time budget uses (engine-thread state: read it only
  // when no loop thread runs, e.g. after RunUntilIdle).
  const StepCostModel& step_cost() const { return step_cost_; }

  // Called on the engine thread with the last message of every request (whoever reads the
  // stream), e.g. to record metrics. Set before Start().
  void SetFinishObserver(std::function<void(const RequestOutput&)> fn) {
    processor_.SetFinishObserver(std::move(fn));
  }

 private:
  Engine(const Tokenizer& tokenizer, Backend& backend, const EngineConfig& config,
         Backend* draft_backend);
  CoreHooks MakeCoreHooks();

  Status ValidateRequest(const Request& r) const;
  void DrainInbox();
  Status RunStep(const SchedulerOutput& out);
  Result<int32_t> BuildStepBatch(const SchedulerOutput& out);
  void CommitStep(const SchedulerOutput& out);
  void CommitDecodeWithDrafts(const ScheduledSeq& sch, std::span<const float> rows);
  void Loop();
  void UpdateStats();

  Backend& backend_;
  const int32_t max_model_len_;  // EngineConfig::max_model_len, resolved against the backend
  const int32_t max_waiting_requests_;
  KvCacheManager kv_;
  StepCostModel step_cost_;  // fitted to every step's measured time; the scheduler's budget
  Scheduler scheduler_;
  OutputProcessor processor_;             // owns every live request's state and Sequences
  std::unique_ptr<DraftProposer> draft_;  // speculative.method draft only

  // Engine-thread state: the step batch, reused across steps.
  std::vector<int32_t> token_ids_, slot_mapping_;
  std::vector<StepSequence> step_seqs_;
  std::vector<float> logits_;

  // Inbox (any thread).
  mutable std::mutex inbox_mu_;
  std::condition_variable inbox_cv_;
  std::vector<NewRequest> inbox_new_;
  std::vector<std::string> inbox_abort_;
  std::map<std::string, bool> live_ids_;  // submitted and not yet finished
  int32_t num_inbox_waiting_ = 0;
  std::atomic<int32_t> num_waiting_published_{0};

  // Published stats (read from any thread).
  mutable std::mutex stats_mu_;
  EngineStats stats_;
  int64_t prompt_tokens_ = 0, steps_ = 0;

  std::thread loop_;
  std::atomic<bool> stop_{false};
};

}  // namespace pagoda
