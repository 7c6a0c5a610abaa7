#include "server/request_log.h"

#include <spdlog/spdlog.h>

namespace pagoda {
namespace {

double Ms(EngineClock::time_point from, EngineClock::time_point to) {
  if (from == EngineClock::time_point{} || to == EngineClock::time_point{}) return -1.0;
  return std::chrono::duration<double, std::milli>(to - from).count();
}

}  // namespace

void LogRequest(const RequestLogLine& l, const RequestOutput& last) {
  const RequestTimes& t = last.times;
  spdlog::info(
      "request api={} {} id={} status={} stream={} prompt_tokens={} completion_tokens={} "
      "cached_tokens={} finish={} queue_ms={:.1f} ttft_ms={:.1f} e2e_ms={:.1f}",
      l.api, l.method, l.id, l.status, l.stream, last.usage.prompt_tokens,
      last.usage.completion_tokens, last.usage.cached_prompt_tokens,
      FinishReasonName(last.finish_reason), Ms(t.arrival, t.first_scheduled),
      Ms(t.arrival, t.first_token), Ms(t.arrival, t.finished));
}

}  // namespace pagoda
