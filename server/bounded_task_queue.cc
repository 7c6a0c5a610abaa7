#include "server/bounded_task_queue.h"

#include <algorithm>

namespace pagoda {

BoundedTaskQueue::BoundedTaskQueue(int workers, int overflow_workers)
    : workers_(static_cast<size_t>(workers)) {
  // The threads read overflow_ids_ only after taking mu_ for a job: held here, it orders them
  // after these writes.
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < workers_; ++i) threads_.emplace_back([this] { Work(&jobs_); });
  for (int i = 0; i < overflow_workers; ++i) {
    threads_.emplace_back([this] { Work(&overflow_); });
    overflow_ids_.push_back(threads_.back().get_id());
  }
}

bool BoundedTaskQueue::IsOverflowThread() const {
  const std::thread::id self = std::this_thread::get_id();
  return std::find(overflow_ids_.begin(), overflow_ids_.end(), self) != overflow_ids_.end();
}

BoundedTaskQueue::~BoundedTaskQueue() { shutdown(); }

void BoundedTaskQueue::enqueue(std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    (busy_ + jobs_.size() < workers_ ? jobs_ : overflow_).push_back(std::move(fn));
  }
  cv_.notify_all();
}

void BoundedTaskQueue::shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    shutdown_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
}

void BoundedTaskQueue::Work(std::deque<std::function<void()>>* jobs) {
  const bool counted = jobs == &jobs_;
  while (true) {
    std::function<void()> fn;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return !jobs->empty() || shutdown_; });
      if (jobs->empty()) return;  // shut down and drained
      fn = std::move(jobs->front());
      jobs->pop_front();
      if (counted) ++busy_;
    }
    fn();
    if (counted) {
      std::lock_guard<std::mutex> lock(mu_);
      --busy_;
    }
  }
}

}  // namespace pagoda
