// BoundedTaskQueue: a cpp-httplib TaskQueue that serves at most `workers` connections at once.
// A connection arriving when all workers are busy runs on one extra "overflow" thread instead,
// where IsOverflowThread() is true: the server's pre-routing handler answers it 503 at once
// (so an overloaded server refuses quickly instead of queueing connections without bound).
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
  explicit BoundedTaskQueue(int workers);
  ~BoundedTaskQueue() override;

  void enqueue(std::function<void()> fn) override;
  void shutdown() override;
  bool IsOverflowThread() const { return std::this_thread::get_id() == overflow_id_; }

 private:
  void Work(std::deque<std::function<void()>>* jobs);

  const size_t workers_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_, overflow_;
  size_t busy_ = 0;  // jobs taken by the workers and not finished
  bool shutdown_ = false;
  std::vector<std::thread> threads_;
  std::thread::id overflow_id_;
};

}  // namespace pagoda
