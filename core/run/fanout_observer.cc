#include "core/run/fanout_observer.h"

#include <algorithm>
#include <utility>

namespace backfill {
namespace {

std::vector<JobObserver*> WithoutNulls(std::vector<JobObserver*> observers) {
  observers.erase(std::remove(observers.begin(), observers.end(), nullptr),
                  observers.end());
  return observers;
}

}  // namespace

FanoutObserver::FanoutObserver(std::vector<JobObserver*> observers)
    : observers_(WithoutNulls(std::move(observers))) {}

void FanoutObserver::OnJobTransition(const std::string& job_id, JobState from,
                                     JobState to, const std::string& message) {
  for (JobObserver* o : observers_)
    o->OnJobTransition(job_id, from, to, message);
}

void FanoutObserver::OnPartitionAttempt(bool ok, absl::Duration duration) {
  for (JobObserver* o : observers_) o->OnPartitionAttempt(ok, duration);
}

void FanoutObserver::OnPartitionStageTimings(const std::string& dataset,
                                             const StageTimings& timings) {
  for (JobObserver* o : observers_)
    o->OnPartitionStageTimings(dataset, timings);
}

void FanoutObserver::OnJobValidationTime(const std::string& job_id,
                                         absl::Duration duration) {
  for (JobObserver* o : observers_) o->OnJobValidationTime(job_id, duration);
}

void FanoutObserver::OnPartitionCheckpointed(const std::string& dataset,
                                             TaskState state, int64_t rows) {
  for (JobObserver* o : observers_) {
    o->OnPartitionCheckpointed(dataset, state, rows);
  }
}

void FanoutObserver::OnJobPublished(
    const std::string& job_id, const std::vector<PublishedDataset>& datasets) {
  for (JobObserver* o : observers_) o->OnJobPublished(job_id, datasets);
}

void FanoutObserver::OnCheckFailed(const std::string& dataset,
                                   const std::string& kind,
                                   CheckSeverity severity) {
  for (JobObserver* o : observers_) o->OnCheckFailed(dataset, kind, severity);
}

void FanoutObserver::OnJobFinished(const std::string& job_id, JobState state,
                                   double estimated_cost, double actual_cost) {
  for (JobObserver* o : observers_) {
    o->OnJobFinished(job_id, state, estimated_cost, actual_cost);
  }
}

void FanoutObserver::OnConsumerConfirmed(const std::string& dataset,
                                         const std::string& consumer,
                                         bool healthy, absl::Duration latency) {
  for (JobObserver* o : observers_) {
    o->OnConsumerConfirmed(dataset, consumer, healthy, latency);
  }
}

void FanoutObserver::OnStorageFailing(Storage storage, const std::string& what,
                                      const absl::Status& status) {
  for (JobObserver* o : observers_) o->OnStorageFailing(storage, what, status);
}

void FanoutObserver::OnStorageRecovered(Storage storage) {
  for (JobObserver* o : observers_) o->OnStorageRecovered(storage);
}

void FanoutObserver::OnLeaseLost(const std::string& job_id) {
  for (JobObserver* o : observers_) o->OnLeaseLost(job_id);
}

void FanoutObserver::OnLeaseTakeover(const std::string& job_id,
                                     const std::string& from_node) {
  for (JobObserver* o : observers_) o->OnLeaseTakeover(job_id, from_node);
}

}  // namespace backfill
