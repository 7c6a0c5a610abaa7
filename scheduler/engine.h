// Engine: the continuous-batching loop. Owns the scheduler and the KV block bookkeeping, drives
// a Backend one step at a time, samples, detokenizes, checks stop conditions and streams
// RequestOutput messages to each request's RequestStream.
//
// Threading: Submit() and Abort() may be called from any thread; they only touch an inbox.
// Step() runs on one thread at a time -- either the engine's own loop thread (Start/Stop) or
// the caller's (tests, the CLI), never both.
//
// One step: drain inbox (new requests, aborts) -> Schedule -> build StepBatch (decodes first)
// -> Backend::Execute -> for each sequence that completed its tokens: sample, append, detok,
// stop checks, emit; fork the samples of n > 1 requests after their prompt; free finished.
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
#include "scheduler/request.h"
#include "scheduler/scheduler.h"

namespace pagoda {

// The engine's options: the `engine:` section (scheduler, max_model_len), the server's queue bound
// and the KV cache's prefix caching (the engine's KvCacheManager does it). Defaults declared once.
struct EngineConfig {
  SchedulerConfig scheduler;
  int32_t max_waiting_requests = 1024;  // server.max_waiting_requests; Submit beyond: EXHAUSTED
  int32_t max_model_len = 0;            // engine.max_model_len; 0: the backend's
  bool enable_prefix_caching = true;    // kv_cache.enable_prefix_caching
  std::vector<int32_t> eos_token_ids;   // model end tokens (EOS, end-of-turn, ...); from the model
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
};

class Engine {
 public:
  // `tokenizer` and `backend` must outlive the engine. Errors name a bad config field.
  static Result<std::unique_ptr<Engine>> Create(const Tokenizer& tokenizer, Backend& backend,
                                                const EngineConfig& config);
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

  // Called on the engine thread with the last message of every request (whoever reads the
  // stream), e.g. to record metrics. Set before Start().
  void SetFinishObserver(std::function<void(const RequestOutput&)> fn) {
    finish_observer_ = std::move(fn);
  }

 private:
  struct SampleState;
  struct RequestState;
  Engine(const Tokenizer& tokenizer, Backend& backend, const EngineConfig& config);

  Status ValidateRequest(const Request& r) const;
  void DrainInbox();
  void AdmitRequest(std::unique_ptr<RequestState> state);
  void AbortNow(const std::string& request_id);
  Status RunStep(const SchedulerOutput& out);
  void ProcessSampled(SampleState& s, std::span<const float> logits);
  void ForkSamples(RequestState& r, std::span<const float> logits);
  void AppendToken(SampleState& s, int32_t token, const TokenLogprob* lp);
  // Ends a sample; `out` carries its last tokens/text (may be empty). Emits the final message.
  void FinishSample(SampleState& s, FinishReason reason, RequestOutput out,
                    const std::string& error = "");
  void FailStep(const SchedulerOutput& out, const Status& status);
  void Loop();
  void UpdateStats();

  const Tokenizer& tokenizer_;
  Backend& backend_;
  EngineConfig config_;
  KvCacheManager kv_;
  Scheduler scheduler_;

  // Engine-thread state.
  std::map<std::string, std::unique_ptr<RequestState>> requests_;
  std::map<int64_t, SampleState*> samples_by_seq_;
  int64_t next_seq_id_ = 0;
  uint64_t next_arrival_ = 0;
  std::vector<int32_t> token_ids_, slot_mapping_;
  std::vector<StepSequence> step_seqs_;
  std::vector<float> logits_;

  // Inbox (any thread).
  mutable std::mutex inbox_mu_;
  std::condition_variable inbox_cv_;
  std::vector<std::unique_ptr<RequestState>> inbox_new_;
  std::vector<std::string> inbox_abort_;
  std::map<std::string, bool> live_ids_;  // submitted and not yet finished
  int32_t num_inbox_waiting_ = 0;
  std::atomic<int32_t> num_waiting_published_{0};

  // Published stats (read from any thread).
  mutable std::mutex stats_mu_;
  EngineStats stats_;
  int64_t prompt_tokens_ = 0, generation_tokens_ = 0, steps_ = 0;

  std::function<void(const RequestOutput&)> finish_observer_;
  std::thread loop_;
  std::atomic<bool> stop_{false};
};

}  // namespace pagoda
