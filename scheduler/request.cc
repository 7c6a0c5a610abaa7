#include "scheduler/request.h"

namespace pagoda {

const char* FinishReasonName(FinishReason reason) {
  switch (reason) {
    case FinishReason::kNone:
      return "";
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kAbort:
      return "abort";
    case FinishReason::kError:
      return "error";
  }
  return "";
}

void RequestStream::Push(RequestOutput out) {
  std::function<void()> listener;
  {
    std::lock_guard<std::mutex> lock(mu_);
    finished_ = finished_ || out.request_finished;
    queue_.push_back(std::move(out));
    listener = listener_;
  }
  cv_.notify_all();
  if (listener) listener();
}

void RequestStream::SetListener(std::function<void()> fn) {
  bool pending = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    listener_ = fn;
    pending = !queue_.empty();
  }
  if (fn && pending) fn();
}

bool RequestStream::Pop(RequestOutput* out, EngineClock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  auto ready = [&] { return !queue_.empty(); };
  if (deadline == EngineClock::time_point::max()) {
    cv_.wait(lock, ready);
  } else if (!cv_.wait_until(lock, deadline, ready)) {
    return false;
  }
  *out = std::move(queue_.front());
  queue_.pop_front();
  return true;
}

bool RequestStream::finished() const {
  std::lock_guard<std::mutex> lock(mu_);
  return finished_;
}

}  // namespace pagoda
