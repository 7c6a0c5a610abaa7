// What goes into the engine (Request) and what comes out (RequestOutput), plus the
// thread-safe per-request output stream (RequestStream) the submitter reads from.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "scheduler/grammar/grammar.h"
#include "scheduler/sampler.h"

namespace pagoda {

using EngineClock = std::chrono::steady_clock;

struct StoppingCriteria {
  int32_t max_tokens = 16;              // generated tokens per sample, >= 1
  std::vector<std::string> stop;        // stop strings (matched on detokenized text)
  std::vector<int32_t> stop_token_ids;  // extra end tokens
  bool ignore_eos = false;
  bool include_stop_str_in_output = false;
};

struct Request {
  std::string request_id;                 // unique among live requests
  std::vector<int32_t> prompt_token_ids;  // already tokenized, non-empty
  SamplingParams sampling;
  StoppingCriteria stopping;
  int32_t priority = 0;     // lower value = scheduled first ("priority" policy)
  bool speculative = true;  // false: no speculative tokens for this request (the config's else)
  // Structured output: every sample's text is a prefix of a sentence of this grammar, and ends
  // (kStop) only where the grammar accepts. nullptr: unconstrained. Shared, immutable.
  std::shared_ptr<const grammar::Grammar> grammar;
};

enum class FinishReason { kNone, kStop, kLength, kAbort, kError };
const char* FinishReasonName(FinishReason reason);

struct TokenLogprob {
  int32_t token_id = 0;
  float logprob = 0.0f;
  std::vector<std::pair<int32_t, float>> top;  // (token, logprob), best first
};

struct Usage {
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;     // summed over samples
  int32_t cached_prompt_tokens = 0;  // served from the prefix cache (first admission)
};

// Per-request lifecycle timestamps. first_token, token_times and num_preemptions are sample 0's;
// finished is when the request's last sample ended.
struct RequestTimes {
  EngineClock::time_point arrival, first_scheduled, first_token, finished;
  std::vector<EngineClock::time_point> token_times;  // one per generated token of sample 0
  int32_t num_preemptions = 0;
};

// One message of a request's stream: new tokens/text of one sample, and on that sample's last
// message its finish reason (and, on the request's very last message, usage and times).
struct RequestOutput {
  std::string request_id;
  int32_t index = 0;                   // sample index in [0, n)
  std::vector<int32_t> token_ids;      // new tokens
  std::string text;                    // new text (valid UTF-8)
  std::vector<TokenLogprob> logprobs;  // one per new token, when asked
  FinishReason finish_reason = FinishReason::kNone;
  std::string error;              // for kError
  bool request_finished = false;  // last message of the whole request
  Usage usage;                    // filled on the last message
  RequestTimes times;             // filled on the last message
};

// Thread-safe FIFO of RequestOutput from the engine thread to one consumer.
class RequestStream {
 public:
  void Push(RequestOutput out);
  // Blocks until a message is available or `deadline` passes (returns false then).
  bool Pop(RequestOutput* out, EngineClock::time_point deadline = EngineClock::time_point::max());
  bool finished() const;
  // `fn` is called (on the engine thread, outside the stream's lock) after every Push, and once
  // right away if messages are already queued; nullptr removes it. Used by async servers.
  void SetListener(std::function<void()> fn);

 private:
  mutable std::mutex mu_;
  std::function<void()> listener_;
  std::condition_variable cv_;
  std::deque<RequestOutput> queue_;
  bool finished_ = false;
};

}  // namespace pagoda
