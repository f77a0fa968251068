// HeapTrimmer: gives the heap's free memory back to the system when a job
// moves on from one phase to the next, and when it ends.
//
// A large job builds big, short-lived structures phase by phase (the plan
// and its tasks, the staging checkpoints, the diff, the lineage: tens of MB
// each for 100,000 partitions), often on different threads. glibc keeps
// what a thread frees in that thread's arena for its own later use, so the
// next phase, allocating on another thread, grows another arena: the
// daemon's resident memory becomes the sum of its phases' peaks rather than
// the largest, and stays there after the job. malloc_trim(0) returns the
// free pages of every arena to the system.
//
// A trim of a few hundred MB of heap takes tens of milliseconds and locks
// each arena in turn, so it runs on a thread of its own ("bf-heap-trim"):
// Request() only marks a trim as wanted and returns. The thread trims once
// requests have stopped coming for `quiet` (or `longest_wait` after the
// first of them): a job's last transitions and its end cost one trim, and
// that trim comes after the job's memory is let go (by the runner at once,
// by a call that read the job's final state once its answer is sent).
// Requests that arrive while a trim runs get one more. As a JobObserver,
// every job transition and every job's end requests one.
//
// Thread-safe. Owns its thread, which Stop() (or the destructor) joins;
// requests after Stop() are ignored.

#ifndef BACKFILL_PLATFORM_HEAP_TRIMMER_H_
#define BACKFILL_PLATFORM_HEAP_TRIMMER_H_

#include <cstdint>
#include <functional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/run/job_observer.h"

namespace backfill {

class HeapTrimmer final : public JobObserver {
 public:
  struct Options {
    absl::Duration quiet = absl::Milliseconds(250);
    absl::Duration longest_wait = absl::Seconds(1);
  };

  // Trims with malloc_trim(0).
  HeapTrimmer();
  // Trims by calling `trim` (tests count and hold the calls).
  HeapTrimmer(Options options, std::function<void()> trim);
  ~HeapTrimmer() override;

  HeapTrimmer(const HeapTrimmer&) = delete;
  HeapTrimmer& operator=(const HeapTrimmer&) = delete;

  // Asks for a trim; returns at once.
  void Request();

  // Ends the thread after the trim it runs, if any; the requests not yet
  // served are dropped. Idempotent.
  void Stop();

  // The trims done so far.
  int64_t trims() const;

  void OnJobTransition(const std::string& job_id, JobState from, JobState to,
                       const std::string& message) override;
  void OnJobFinished(const std::string& job_id, JobState state,
                     double estimated_cost, double actual_cost) override;

 private:
  void Loop();

  const Options options_;
  const std::function<void()> trim_;
  mutable absl::Mutex mu_;
  bool wanted_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time first_request_ ABSL_GUARDED_BY(mu_);  // of those not served
  absl::Time last_request_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int64_t trims_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

}  // namespace backfill

#endif  // BACKFILL_PLATFORM_HEAP_TRIMMER_H_
