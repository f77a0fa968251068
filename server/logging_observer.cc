#include "server/logging_observer.h"

#include "grpcpp/health_check_service_interface.h"
#include "server/log_text.h"
#include "spdlog/spdlog.h"

namespace backfill {
namespace {

constexpr char kServiceName[] = "backfill.v1.BackfillService";

const char* StorageName(JobObserver::Storage storage) {
  return storage == JobObserver::Storage::kStateStore ? "state store"
                                                      : "warehouse";
}

}  // namespace

void SetHealthServing(grpc::HealthCheckServiceInterface* health, bool serving) {
  health->SetServingStatus("", serving);
  health->SetServingStatus(kServiceName, serving);
}

LoggingObserver::LoggingObserver(JobObserver* next) : next_(next) {}

void LoggingObserver::SetHealth(grpc::HealthCheckServiceInterface* health) {
  absl::MutexLock lock(&mu_);
  health_ = health;
  UpdateHealthLocked();
}

void LoggingObserver::OnStorageFailing(Storage storage, const std::string& what,
                                       const absl::Status& status) {
  spdlog::error("{} write failing, retrying with backoff: {}: {}",
                StorageName(storage), LogText(what),
                LogText(status.ToString()));
  {
    absl::MutexLock lock(&mu_);
    failing_[static_cast<int>(storage)] = true;
    UpdateHealthLocked();
  }
  next_->OnStorageFailing(storage, what, status);
}

void LoggingObserver::OnStorageRecovered(Storage storage) {
  spdlog::info("{} writes work again", StorageName(storage));
  {
    absl::MutexLock lock(&mu_);
    failing_[static_cast<int>(storage)] = false;
    UpdateHealthLocked();
  }
  next_->OnStorageRecovered(storage);
}

void LoggingObserver::SetStorageUsable(Storage storage,
                                       const absl::Status& status) {
  if (status.ok()) {
    spdlog::info("{} can be used again", StorageName(storage));
  } else {
    spdlog::error("{} cannot be used: {}", StorageName(storage),
                  LogText(std::string(status.message())));
  }
  absl::MutexLock lock(&mu_);
  unusable_[static_cast<int>(storage)] = !status.ok();
  UpdateHealthLocked();
}

void LoggingObserver::OnJobTransition(const std::string& job_id, JobState from,
                                      JobState to, const std::string& message) {
  spdlog::info("job {}: {} -> {}: {}", LogText(job_id), JobStateName(from),
               JobStateName(to), LogText(message));
  next_->OnJobTransition(job_id, from, to, message);
}

void LoggingObserver::OnPartitionAttempt(bool ok, absl::Duration duration) {
  if (!ok) {
    spdlog::debug("partition attempt failed after {}",
                  absl::FormatDuration(duration));
  }
  next_->OnPartitionAttempt(ok, duration);
}

void LoggingObserver::OnPartitionStageTimings(const std::string& dataset,
                                              const StageTimings& timings) {
  next_->OnPartitionStageTimings(dataset, timings);
}

void LoggingObserver::OnJobValidationTime(const std::string& job_id,
                                          absl::Duration duration) {
  next_->OnJobValidationTime(job_id, duration);
}

void LoggingObserver::OnPartitionCheckpointed(const std::string& dataset,
                                              TaskState state, int64_t rows) {
  next_->OnPartitionCheckpointed(dataset, state, rows);
}

void LoggingObserver::OnJobPublished(
    const std::string& job_id, const std::vector<PublishedDataset>& datasets) {
  next_->OnJobPublished(job_id, datasets);
}

void LoggingObserver::OnCheckFailed(const std::string& dataset,
                                    const std::string& kind,
                                    CheckSeverity severity) {
  next_->OnCheckFailed(dataset, kind, severity);
}

void LoggingObserver::OnConsumerConfirmed(const std::string& dataset,
                                          const std::string& consumer,
                                          bool healthy,
                                          absl::Duration latency) {
  next_->OnConsumerConfirmed(dataset, consumer, healthy, latency);
}

void LoggingObserver::OnJobFinished(const std::string& job_id, JobState state,
                                    double estimated_cost, double actual_cost) {
  spdlog::info("job {} finished {}: cost estimated {} {}, actual {}",
               LogText(job_id), JobStateName(state), estimated_cost, kCostUnit,
               actual_cost);
  next_->OnJobFinished(job_id, state, estimated_cost, actual_cost);
}

void LoggingObserver::OnLeaseLost(const std::string& job_id) {
  spdlog::warn(
      "job {} was taken over by another replica (this replica's lease on it "
      "expired): dropped here, its writes are refused (LEASE_LOST)",
      job_id);
  next_->OnLeaseLost(job_id);
}

void LoggingObserver::OnLeaseTakeover(const std::string& job_id,
                                      const std::string& from_node) {
  spdlog::warn("job {} taken over from replica {} (its lease expired)",
               LogText(job_id), LogText(from_node));
  next_->OnLeaseTakeover(job_id, from_node);
}

void LoggingObserver::UpdateHealthLocked() {
  if (health_ == nullptr) return;
  const bool serving =
      !failing_[0] && !failing_[1] && !unusable_[0] && !unusable_[1];
  SetHealthServing(health_, serving);
}

}  // namespace backfill
