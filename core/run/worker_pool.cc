#include "core/run/worker_pool.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "core/base/thread_name.h"

namespace backfill {

WorkerPool::WorkerPool(int threads, const std::string& name) {
  if (threads < 1) threads = 1;
  threads_.reserve(threads);
  for (int i = 0; i < threads; ++i) {
    threads_.emplace_back([this, n = absl::StrCat(name, "-", i + 1)] {
      NameThisThread(n);
      Loop();
    });
  }
}

WorkerPool::~WorkerPool() { Shutdown(); }

bool WorkerPool::Submit(std::function<void()> fn) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return false;
  queue_.push_back(std::move(fn));
  return true;
}

size_t WorkerPool::Pending() const {
  absl::MutexLock lock(&mu_);
  return queue_.size() + running_;
}

void WorkerPool::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_ && threads_.empty()) return;
    stopping_ = true;
    queue_.clear();
  }
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
}

void WorkerPool::Loop() {
  while (true) {
    std::function<void()> fn;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](WorkerPool* p) ABSL_NO_THREAD_SAFETY_ANALYSIS {
            return p->stopping_ || !p->queue_.empty();
          },
          this));
      if (queue_.empty()) return;  // stopping and drained
      fn = std::move(queue_.front());
      queue_.pop_front();
      ++running_;
    }
    fn();
    absl::MutexLock lock(&mu_);
    --running_;
  }
}

}  // namespace backfill
