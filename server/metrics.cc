#include "server/metrics.h"

#include <atomic>
#include <exception>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "prometheus/collectable.h"
#include "prometheus/counter.h"
#include "prometheus/exposer.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/metric_family.h"
#include "prometheus/registry.h"
#include "prometheus/text_serializer.h"
#include "server/log_text.h"
#include "spdlog/spdlog.h"

namespace backfill {
namespace {

// Label values are the lower-case state names: "running", "succeeded", ...
std::string Label(JobState state) {
  return absl::AsciiStrToLower(JobStateName(state));
}
std::string Label(TaskState state) {
  return absl::AsciiStrToLower(TaskStateName(state));
}

prometheus::ClientMetric GaugeSample(std::string label, std::string value,
                                     double v) {
  prometheus::ClientMetric metric;
  if (!label.empty())
    metric.label.push_back({std::move(label), std::move(value)});
  metric.gauge.value = v;
  return metric;
}

// Collects the by-state gauges from a StoreStats at scrape time.
class StatsCollector final : public prometheus::Collectable {
 public:
  StatsCollector(Metrics::StatsFn stats,
                 const std::atomic<bool>* store_writes_failing)
      : stats_(std::move(stats)), store_writes_failing_(store_writes_failing) {}

  std::vector<prometheus::MetricFamily> Collect() const override {
    absl::StatusOr<StoreStats> stats = stats_();
    prometheus::MetricFamily up;
    up.name = "backfill_state_store_up";
    up.help =
        "1 when the last scrape read the job and partition counts from the "
        "state store and its writes are not failing, 0 otherwise.";
    up.type = prometheus::MetricType::Gauge;
    up.metric.push_back(GaugeSample(
        "", "", stats.ok() && !store_writes_failing_->load() ? 1 : 0));
    if (!stats.ok()) {
      spdlog::warn("metrics: cannot read state store stats: {}",
                   LogText(stats.status().ToString()));
      return {std::move(up)};
    }

    prometheus::MetricFamily jobs;
    jobs.name = "backfill_jobs";
    jobs.help = "Backfill jobs in the state store, by state.";
    jobs.type = prometheus::MetricType::Gauge;
    for (int i = 0; i < kJobStateCount; ++i) {
      jobs.metric.push_back(GaugeSample(
          "state", Label(static_cast<JobState>(i)), stats->jobs_by_state[i]));
    }

    prometheus::MetricFamily partitions;
    partitions.name = "backfill_partitions";
    partitions.help =
        "Partition tasks of all backfill jobs in the state store, by state.";
    partitions.type = prometheus::MetricType::Gauge;
    for (int i = 0; i < kTaskStateCount; ++i) {
      partitions.metric.push_back(GaugeSample(
          "state", Label(static_cast<TaskState>(i)), stats->tasks_by_state[i]));
    }

    prometheus::MetricFamily progress;
    progress.name = "backfill_running_jobs_progress_ratio";
    progress.help =
        "Over RUNNING jobs: partition tasks done (staged, published, "
        "unchanged or skipped) divided by "
        "all their tasks; 0 when no job runs.";
    progress.type = prometheus::MetricType::Gauge;
    progress.metric.push_back(
        GaugeSample("", "",
                    stats->running_tasks_total > 0
                        ? static_cast<double>(stats->running_tasks_done) /
                              static_cast<double>(stats->running_tasks_total)
                        : 0.0));

    return {std::move(up), std::move(jobs), std::move(partitions),
            std::move(progress)};
  }

 private:
  Metrics::StatsFn stats_;
  const std::atomic<bool>* store_writes_failing_;
};

const char* StorageLabel(JobObserver::Storage storage) {
  return storage == JobObserver::Storage::kStateStore ? "state_store"
                                                      : "warehouse";
}

}  // namespace

Metrics::Metrics(StatsFn stats, const std::string& version)
    : registry_(std::make_shared<prometheus::Registry>()),
      stats_collector_(std::make_shared<StatsCollector>(
          std::move(stats), &store_writes_failing_)) {
  auto& failing =
      prometheus::BuildGauge()
          .Name("backfill_storage_failing")
          .Help(
              "1 while writes to the storage fail (disk full, I/O error) and "
              "are being retried, else 0; storage is state_store or "
              "warehouse.")
          .Register(*registry_);
  auto& errors = prometheus::BuildCounter()
                     .Name("backfill_storage_write_errors_total")
                     .Help(
                         "Failed writes to the storage that were retried "
                         "(disk full, I/O error, busy).")
                     .Register(*registry_);
  for (JobObserver::Storage storage :
       {JobObserver::Storage::kStateStore, JobObserver::Storage::kWarehouse}) {
    const int i = static_cast<int>(storage);
    storage_failing_[i] = &failing.Add({{"storage", StorageLabel(storage)}});
    storage_errors_[i] = &errors.Add({{"storage", StorageLabel(storage)}});
  }

  transitions_ =
      &prometheus::BuildCounter()
           .Name("backfill_job_state_transitions_total")
           .Help("Backfill job state changes, by previous and new state.")
           .Register(*registry_);

  auto& finished = prometheus::BuildCounter()
                       .Name("backfill_jobs_finished_total")
                       .Help(
                           "Backfill jobs that reached a terminal state, "
                           "by that state.")
                       .Register(*registry_);
  for (int i = 0; i < kJobStateCount; ++i) {
    const auto state = static_cast<JobState>(i);
    if (IsTerminal(state)) {
      finished_[i] = &finished.Add({{"state", Label(state)}});
    }
  }

  auto& attempts = prometheus::BuildCounter()
                       .Name("backfill_partition_attempts_total")
                       .Help(
                           "Partition recompute attempts, by result: staged "
                           "(checkpointed in staging) or failed.")
                       .Register(*registry_);
  attempts_staged_ = &attempts.Add({{"result", "staged"}});
  attempts_failed_ = &attempts.Add({{"result", "failed"}});

  partition_duration_ =
      &prometheus::BuildHistogram()
           .Name("backfill_partition_duration_seconds")
           .Help("Wall time of one partition recompute attempt into staging.")
           .Register(*registry_)
           .Add({}, prometheus::Histogram::BucketBoundaries{
                        0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                        1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800});

  cost_estimated_ =
      &prometheus::BuildCounter()
           .Name("backfill_cost_estimated_input_rows_total")
           .Help(
               "Estimated input rows of finished backfill jobs (the plan's "
               "cost estimate).")
           .Register(*registry_)
           .Add({});
  cost_actual_ = &prometheus::BuildCounter()
                      .Name("backfill_cost_actual_input_rows_total")
                      .Help(
                          "Input rows actually read by finished backfill "
                          "jobs.")
                      .Register(*registry_)
                      .Add({});

  prometheus::BuildGauge()
      .Name("backfill_build_info")
      .Help("Always 1; the version label is the backfilld version.")
      .Register(*registry_)
      .Add({{"version", version}})
      .Set(1);
}

Metrics::~Metrics() { StopListening(); }

absl::Status Metrics::Listen(const std::string& address) {
  StopListening();
  try {
    // civetweb takes "HOST:PORT" as its listening_ports option.
    auto exposer = std::make_unique<prometheus::Exposer>(address, 2);
    exposer->RegisterCollectable(registry_);
    exposer->RegisterCollectable(stats_collector_);
    for (const auto& collectable : added_collectables_) {
      exposer->RegisterCollectable(collectable);
    }
    exposer_ = std::move(exposer);
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat(
        "cannot serve metrics on --metrics-listen ", address, ": ", e.what()));
  }
  return absl::OkStatus();
}

int Metrics::port() const {
  if (!exposer_) return 0;
  std::vector<int> ports = exposer_->GetListeningPorts();
  return ports.empty() ? 0 : ports.front();
}

void Metrics::StopListening() { exposer_.reset(); }

prometheus::Registry& Metrics::registry() { return *registry_; }
void Metrics::AddCollectable(
    std::shared_ptr<prometheus::Collectable> collectable) {
  if (exposer_) exposer_->RegisterCollectable(collectable);
  added_collectables_.push_back(std::move(collectable));
}

std::string Metrics::Scrape() const {
  std::vector<prometheus::MetricFamily> families = registry_->Collect();
  for (auto& family : stats_collector_->Collect()) {
    families.push_back(std::move(family));
  }
  for (const auto& collectable : added_collectables_) {
    for (auto& family : collectable->Collect()) {
      families.push_back(std::move(family));
    }
  }
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, families);
  return out.str();
}

void Metrics::OnJobTransition(const std::string& /*job_id*/, JobState from,
                              JobState to, const std::string& /*message*/) {
  const int f = static_cast<int>(from);
  const int t = static_cast<int>(to);
  if (f < 0 || f >= kJobStateCount || t < 0 || t >= kJobStateCount) return;
  transitions_->Add({{"from", Label(from)}, {"to", Label(to)}}).Increment();
}

void Metrics::OnStorageFailing(Storage storage, const std::string& /*what*/,
                               const absl::Status& /*status*/) {
  const int i = static_cast<int>(storage);
  storage_failing_[i]->Set(1);
  storage_errors_[i]->Increment();
  if (storage == Storage::kStateStore) store_writes_failing_ = true;
}

void Metrics::OnStorageRecovered(Storage storage) {
  const int i = static_cast<int>(storage);
  storage_failing_[i]->Set(0);
  if (storage == Storage::kStateStore) store_writes_failing_ = false;
}

void Metrics::OnPartitionAttempt(bool ok, absl::Duration duration) {
  (ok ? attempts_staged_ : attempts_failed_)->Increment();
  partition_duration_->Observe(absl::ToDoubleSeconds(duration));
}

void Metrics::OnJobFinished(const std::string& /*job_id*/, JobState state,
                            double estimated_cost, double actual_cost) {
  const int i = static_cast<int>(state);
  if (i >= 0 && i < kJobStateCount && finished_[i] != nullptr) {
    finished_[i]->Increment();
  }
  if (estimated_cost > 0) cost_estimated_->Increment(estimated_cost);
  if (actual_cost > 0) cost_actual_->Increment(actual_cost);
}

}  // namespace backfill
