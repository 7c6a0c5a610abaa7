// BoundedTaskQueue: a cpp-httplib TaskQueue that serves at most `workers` connections at once.
// A connection arriving when all workers are busy runs on one of `overflow_workers` extra
// "overflow" threads instead, where IsOverflowThread() is true: the server's pre-routing handler
// answers it 503 at once (so an overloaded server refuses quickly instead of queueing
// connections without bound) -- or serves it when it is a cheap probe (/health, /ready), so
// that connections which hold every worker (slow or half-sent requests) do not fail the probes.
#pragma once

#include <httplib.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace pagoda {

class BoundedTaskQueue final : public httplib::TaskQueue {
 public:
  BoundedTaskQueue(int workers, int overflow_workers);
  ~BoundedTaskQueue() override;

  void enqueue(std::function<void()> fn) override;
  void shutdown() override;
  bool IsOverflowThread() const;

 private:
  void Work(std::deque<std::function<void()>>* jobs);

  const size_t workers_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_, overflow_;
  size_t busy_ = 0;  // jobs taken by the workers and not finished
  bool shutdown_ = false;
  std::vector<std::thread> threads_;
  std::vector<std::thread::id> overflow_ids_;  // fixed once constructed
};

}  // namespace pagoda
