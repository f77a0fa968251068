// FanoutObserver: one JobObserver that passes every event on to several
// others, in the order given (e.g. the metrics and the OpenLineage
// emitter). It owns none of them; they must outlive it. Thread-safe as
// long as the observers are (the list is fixed at construction).

#ifndef BACKFILL_CORE_RUN_FANOUT_OBSERVER_H_
#define BACKFILL_CORE_RUN_FANOUT_OBSERVER_H_

#include <string>
#include <vector>

#include "core/run/job_observer.h"

namespace backfill {

class FanoutObserver final : public JobObserver {
 public:
  // Null entries are skipped.
  explicit FanoutObserver(std::vector<JobObserver*> observers);

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
  void OnJobFinished(const std::string& job_id, JobState state,
                     double estimated_cost, double actual_cost) override;
  void OnConsumerConfirmed(const std::string& dataset,
                           const std::string& consumer, bool healthy,
                           absl::Duration latency) override;
  void OnStorageFailing(Storage storage, const std::string& what,
                        const absl::Status& status) override;
  void OnStorageRecovered(Storage storage) override;
  void OnLeaseLost(const std::string& job_id) override;
  void OnLeaseTakeover(const std::string& job_id,
                       const std::string& from_node) override;

 private:
  const std::vector<JobObserver*> observers_;
};

}  // namespace backfill

#endif  // BACKFILL_CORE_RUN_FANOUT_OBSERVER_H_
