// LoggingObserver: the JobObserver the daemon gives its BackfillManager. It
// logs job state changes, job ends, storage failures and jobs taken over
// from another replica of the group (the core does not log), forwards
// every event to the next observer (the daemon's fan-out to the metrics,
// the heap trimmer and OpenLineage), and keeps the gRPC health
// status: NOT_SERVING while writes to the state store or the warehouse fail
// or the storage watch (server/storage_watch.h) finds one unusable.
//
// Does not own the next observer or the health service; the next observer
// must outlive it, and the health service must stay valid until
// SetHealth(nullptr). Thread-safe.

#ifndef BACKFILL_SERVER_LOGGING_OBSERVER_H_
#define BACKFILL_SERVER_LOGGING_OBSERVER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/run/job_observer.h"

namespace grpc {
class HealthCheckServiceInterface;
}  // namespace grpc

namespace backfill {

// Sets the health status of the server as a whole ("") and of
// backfill.v1.BackfillService to SERVING or NOT_SERVING.
void SetHealthServing(grpc::HealthCheckServiceInterface* health, bool serving);

class LoggingObserver final : public JobObserver {
 public:
  explicit LoggingObserver(JobObserver* next);

  LoggingObserver(const LoggingObserver&) = delete;
  LoggingObserver& operator=(const LoggingObserver&) = delete;

  // The health service to mark NOT_SERVING while storage fails (nullptr:
  // none, e.g. while shutting down).
  void SetHealth(grpc::HealthCheckServiceInterface* health);

  // What the storage watch found (server/storage_watch.h): OK, or why the
  // storage cannot be used at all. Health is NOT_SERVING while it cannot.
  void SetStorageUsable(Storage storage, const absl::Status& status);

  // JobObserver.
  void OnStorageFailing(Storage storage, const std::string& what,
                        const absl::Status& status) override;
  void OnStorageRecovered(Storage storage) override;
  void OnJobTransition(const std::string& job_id, JobState from, JobState to,
                       const std::string& message) override;
  void OnPartitionAttempt(bool ok, absl::Duration duration) override;
  void OnPartitionStageTimings(const std::string& dataset,
                               const StageTimings& timings) override;
  void OnJobValidationTime(const std::string& job_id,
                           absl::Duration duration) override;
  void OnPartitionCheckpointed(const std::string& dataset, TaskState state,
                               int64_t rows) override;
  void OnJobPublished(const std::string& job_id,
                      const std::vector<PublishedDataset>& datasets) override;
  void OnCheckFailed(const std::string& dataset, const std::string& kind,
                     CheckSeverity severity) override;
  void OnConsumerConfirmed(const std::string& dataset,
                           const std::string& consumer, bool healthy,
                           absl::Duration latency) override;
  void OnJobFinished(const std::string& job_id, JobState state,
                     double estimated_cost, double actual_cost) override;
  void OnLeaseLost(const std::string& job_id) override;
  void OnLeaseTakeover(const std::string& job_id,
                       const std::string& from_node) override;

 private:
  void UpdateHealthLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  JobObserver* const next_;
  absl::Mutex mu_;
  grpc::HealthCheckServiceInterface* health_ ABSL_GUARDED_BY(mu_) = nullptr;
  bool failing_[2] ABSL_GUARDED_BY(mu_) = {false, false};
  bool unusable_[2] ABSL_GUARDED_BY(mu_) = {false, false};
};

}  // namespace backfill

#endif  // BACKFILL_SERVER_LOGGING_OBSERVER_H_
