// WorkerPool: a fixed number of threads running queued closures in FIFO
// order. Owns its threads. Shutdown() (and the destructor) drops closures
// not yet started and joins the threads once the running ones return.
// Thread-safe.

#ifndef BACKFILL_CORE_RUN_WORKER_POOL_H_
#define BACKFILL_CORE_RUN_WORKER_POOL_H_

#include <deque>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"

namespace backfill {

class WorkerPool {
 public:
  // Its threads are named `name`-1, `name`-2, ... (thread_name.h).
  explicit WorkerPool(int threads, const std::string& name = "bf-worker");
  ~WorkerPool();

  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Queues `fn`; returns false (and drops it) after Shutdown().
  bool Submit(std::function<void()> fn);

  // Closures queued or running.
  size_t Pending() const;

  // Drops queued closures, waits for running ones, joins. Idempotent.
  void Shutdown();

 private:
  void Loop();

  mutable absl::Mutex mu_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  size_t running_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace backfill

#endif  // BACKFILL_CORE_RUN_WORKER_POOL_H_
