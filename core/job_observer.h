// JobObserver: events the manager reports as jobs and partitions progress,
// so that metrics (server/metrics.h) can count them without the core knowing
// Prometheus. Called from worker and manager threads: implementations must
// be thread-safe and cheap (no I/O).

#ifndef BACKFILL_CORE_JOB_OBSERVER_H_
#define BACKFILL_CORE_JOB_OBSERVER_H_

#include <string>

#include "absl/time/time.h"
#include "core/job.h"

namespace backfill {

class JobObserver {
 public:
  virtual ~JobObserver() = default;

  // A job moved between states (from == to never happens); `message` is the
  // reason recorded with the change.
  virtual void OnJobTransition(const std::string& job_id, JobState from,
                               JobState to, const std::string& message) {}

  // A partition task attempt ended: staged (ok) or failed.
  virtual void OnPartitionAttempt(bool ok, absl::Duration duration) {}

  // A job reached a terminal state; costs are in kCostUnit.
  virtual void OnJobFinished(const std::string& job_id, JobState state,
                             double estimated_cost, double actual_cost) {}
};

}  // namespace backfill

#endif  // BACKFILL_CORE_JOB_OBSERVER_H_
