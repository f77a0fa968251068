#include "server/metrics.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <map>
#include <optional>
#include <sstream>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "core/run/progress.h"
#include "prometheus/collectable.h"
#include "prometheus/counter.h"
#include "prometheus/exposer.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/metric_family.h"
#include "prometheus/registry.h"
#include "prometheus/text_serializer.h"
#include "server/grpc_metrics.h"
#include "server/listener_wake.h"
#include "server/log_text.h"
#include "server/process_collector.h"
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

// A phase's seconds; nothing negative (a counter only grows).
double PhaseSeconds(absl::Duration d) {
  return std::max(0.0, absl::ToDoubleSeconds(d));
}

const char* StorageLabel(JobObserver::Storage storage) {
  return storage == JobObserver::Storage::kStateStore ? "state_store"
                                                      : "warehouse";
}

// The check kinds a validation failure can have (CheckResult::kind):
// those a pipeline file declares and the always-on ones.
constexpr const char* kDeclaredCheckKinds[] = {"row_change",     "min_rows",
                                               "measure_change", "references",
                                               "not_null",       "assert"};
constexpr const char* kAlwaysOnCheckKinds[] = {"schema", "primary_key",
                                               "partition"};

bool KnownCheckKind(const std::string& kind) {
  for (const char* k : kDeclaredCheckKinds) {
    if (kind == k) return true;
  }
  for (const char* k : kAlwaysOnCheckKinds) {
    if (kind == k) return true;
  }
  return false;
}

// The per-dataset checkpoint states (TaskState, lower case).
constexpr TaskState kCheckpointStates[] = {
    TaskState::kStaged, TaskState::kUnchanged, TaskState::kSkipped};

}  // namespace

// The ETA of running jobs, computed at scrape time (core/run/progress.h).
class EtaCollector final : public prometheus::Collectable {
 public:
  void Set(Metrics::RunningJobsFn running) {
    absl::MutexLock lock(&mu_);
    running_ = std::move(running);
  }

  std::vector<prometheus::MetricFamily> Collect() const override {
    prometheus::MetricFamily eta;
    eta.name = "backfill_running_jobs_eta_seconds";
    eta.help =
        "Over RUNNING jobs whose ETA is known: the longest time until one's "
        "partitions are all recomputed (remaining partitions in waves of "
        "the partitions running now, times the mean duration of its "
        "partitions recomputed so far). No sample when no running job has "
        "recomputed a partition yet.";
    eta.type = prometheus::MetricType::Gauge;
    prometheus::MetricFamily unknown;
    unknown.name = "backfill_running_jobs_eta_unknown";
    unknown.help =
        "RUNNING jobs whose ETA is not known yet: none of their partitions "
        "was recomputed.";
    unknown.type = prometheus::MetricType::Gauge;
    Metrics::RunningJobsFn running;
    {
      absl::MutexLock lock(&mu_);
      running = running_;
    }
    absl::StatusOr<std::vector<Job>> jobs =
        running ? running() : std::vector<Job>();
    if (!jobs.ok()) {
      spdlog::warn("metrics: cannot read the running jobs: {}",
                   LogText(jobs.status().ToString()));
      return {std::move(eta), std::move(unknown)};
    }
    std::optional<double> longest;
    int64_t not_known = 0;
    for (const Job& job : *jobs) {
      std::optional<RecomputeEta> e = EstimateRecompute(job);
      if (!e.has_value()) {
        if (job.state == JobState::kRunning) ++not_known;
        continue;
      }
      const double seconds = absl::ToDoubleSeconds(e->remaining);
      longest = longest.has_value() ? std::max(*longest, seconds) : seconds;
    }
    if (longest.has_value())
      eta.metric.push_back(GaugeSample("", "", *longest));
    unknown.metric.push_back(
        GaugeSample("", "", static_cast<double>(not_known)));
    return {std::move(eta), std::move(unknown)};
  }

 private:
  mutable absl::Mutex mu_;
  Metrics::RunningJobsFn running_ ABSL_GUARDED_BY(mu_);
};

// The health and confirmation latency of downstream consumers, per
// (dataset, consumer). Both families are declared in every scrape. The
// health has a sample per consumer of the store's standings (when set; else
// per consumer confirmed since the start), the latency one per consumer
// confirmed since the start.
class DownstreamCollector final : public prometheus::Collectable {
 public:
  void SetStandings(Metrics::ConsumerStandingsFn standings) {
    absl::MutexLock lock(&mu_);
    standings_ = std::move(standings);
  }

  void Record(const std::string& dataset, const std::string& consumer,
              bool healthy, absl::Duration latency) {
    absl::MutexLock lock(&mu_);
    auto [it, added] = consumers_.try_emplace({dataset, consumer});
    if (added) {
      it->second.latency = std::make_unique<prometheus::Histogram>(
          prometheus::Histogram::BucketBoundaries{0.1, 0.5, 1, 2.5, 5, 10, 30,
                                                  60, 120, 300, 600, 1800});
    }
    it->second.healthy = healthy;
    it->second.latency->Observe(absl::ToDoubleSeconds(latency));
  }

  std::vector<prometheus::MetricFamily> Collect() const override {
    prometheus::MetricFamily healthy;
    healthy.name = "backfill_downstream_healthy";
    healthy.help =
        "1 when the last confirmation of a downstream consumer of the "
        "dataset found it serving the published numbers, 0 when it did not. "
        "No sample for a consumer not confirmed since backfilld started.";
    healthy.type = prometheus::MetricType::Gauge;
    prometheus::MetricFamily latency;
    latency.name = "backfill_downstream_confirmation_seconds";
    latency.help =
        "Time to confirm a downstream consumer after a publish, from its "
        "invalidation to its last probe.";
    latency.type = prometheus::MetricType::Histogram;
    auto add_health = [&](const std::string& dataset,
                          const std::string& consumer, bool ok) {
      prometheus::ClientMetric h = GaugeSample("dataset", dataset, ok ? 1 : 0);
      h.label.push_back({"consumer", consumer});
      healthy.metric.push_back(std::move(h));
    };
    // The store is read without the lock: workers report confirmations
    // meanwhile.
    Metrics::ConsumerStandingsFn read;
    {
      absl::MutexLock lock(&mu_);
      read = standings_;
    }
    if (read) {
      absl::StatusOr<std::vector<ConsumerStanding>> standings = read();
      if (standings.ok()) {
        for (const ConsumerStanding& s : *standings) {
          add_health(s.dataset, s.consumer, s.unhealthy_jobs.empty());
        }
      } else {
        // No sample rather than a wrong one; backfill_storage_failing and
        // the log say why the store cannot be read.
        spdlog::warn("metrics: cannot read the consumers' standings: {}",
                     standings.status().ToString());
      }
    }
    absl::MutexLock lock(&mu_);
    for (const auto& [key, state] : consumers_) {
      if (!read) add_health(key.first, key.second, state.healthy);
      prometheus::ClientMetric l = state.latency->Collect();
      l.label = {{"dataset", key.first}, {"consumer", key.second}};
      latency.metric.push_back(std::move(l));
    }
    return {std::move(healthy), std::move(latency)};
  }

 private:
  struct Consumer {
    bool healthy = false;
    std::unique_ptr<prometheus::Histogram> latency;
  };
  mutable absl::Mutex mu_;
  Metrics::ConsumerStandingsFn standings_ ABSL_GUARDED_BY(mu_);
  std::map<std::pair<std::string, std::string>, Consumer> consumers_
      ABSL_GUARDED_BY(mu_);
};

Metrics::Metrics(StatsFn stats, const std::string& version)
    : registry_(std::make_shared<prometheus::Registry>()),
      stats_collector_(std::make_shared<StatsCollector>(
          std::move(stats), &store_writes_failing_)),
      process_collector_(std::make_shared<ProcessCollector>()),
      eta_collector_(std::make_shared<EtaCollector>()),
      downstream_collector_(std::make_shared<DownstreamCollector>()),
      grpc_(std::make_unique<GrpcServerMetrics>(registry_.get())) {
  auto& failing =
      prometheus::BuildGauge()
          .Name("backfill_storage_failing")
          .Help(
              "1 while writes to the storage fail (disk full, I/O error) and "
              "are being retried, or the storage cannot be used at all (its "
              "file removed, replaced or truncated), else 0; storage is "
              "state_store or warehouse.")
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
  lease_takeovers_ =
      &prometheus::BuildCounter()
           .Name("backfill_lease_takeovers_total")
           .Help(
               "Jobs this replica of the group took over from another "
               "replica whose lease on them expired (it stopped renewing: "
               "stopped, frozen or cut off from the state store).")
           .Register(*registry_)
           .Add({});

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

  // Where the time of partitions and jobs goes. The engine times the
  // phases of each attempt that staged (StageTimings); the runner times
  // each validation of a job's staging.
  auto& phases =
      prometheus::BuildCounter()
          .Name("backfill_partition_phase_seconds_total")
          .Help(
              "Seconds spent per phase: transform (the transform's SQL into "
              "the engine's output table), fingerprint (hashing every output "
              "and input row), stage_write (replacing the partition's staged "
              "rows), each as the engine timed it in every attempt that "
              "staged a partition; validate (every validation of a job's "
              "staging: ValidateStaged, profiles and checks).")
          .Register(*registry_);
  phase_transform_ = &phases.Add({{"phase", "transform"}});
  phase_fingerprint_ = &phases.Add({{"phase", "fingerprint"}});
  phase_stage_write_ = &phases.Add({{"phase", "stage_write"}});
  phase_validate_ = &phases.Add({{"phase", "validate"}});

  // Costs are counted once per job, when it publishes: a cancelled or
  // failed job, which never publishes, counts in neither, so the ratio of
  // actual to estimated compares the same jobs.
  cost_estimated_ =
      &prometheus::BuildCounter()
           .Name("backfill_cost_estimated_input_rows_total")
           .Help(
               "Estimated input rows (the plan's cost estimate) of published "
               "backfill jobs, by dataset; counted when the job publishes.")
           .Register(*registry_);
  cost_actual_ = &prometheus::BuildCounter()
                      .Name("backfill_cost_actual_input_rows_total")
                      .Help(
                          "Input rows actually read by the recompute of "
                          "published backfill jobs, by dataset; counted when "
                          "the job publishes.")
                      .Register(*registry_);
  cost_full_reload_ =
      &prometheus::BuildCounter()
           .Name("backfill_cost_full_reload_input_rows_total")
           .Help(
               "Estimated input rows of a full reload of the dataset, summed "
               "over published backfill jobs (the baseline their estimate "
               "is compared with); counted when the job publishes.")
           .Register(*registry_);
  jobs_published_ =
      &prometheus::BuildCounter()
           .Name("backfill_jobs_published_total")
           .Help("Backfill jobs whose publish included the dataset.")
           .Register(*registry_);
  checkpointed_ =
      &prometheus::BuildCounter()
           .Name("backfill_partitions_checkpointed_total")
           .Help(
               "Partition checkpoints recorded, by dataset and state: staged "
               "(recomputed into staging), unchanged (recomputed, identical "
               "to the published rows) or skipped (early cutoff, never "
               "run).")
           .Register(*registry_);
  published_partitions_ =
      &prometheus::BuildCounter()
           .Name("backfill_partitions_published_total")
           .Help("Partitions replaced by the publish of a backfill job.")
           .Register(*registry_);
  rows_written_ =
      &prometheus::BuildCounter()
           .Name("backfill_rows_written_total")
           .Help(
               "Rows written to staging by partitions recomputed and "
               "checkpointed as staged, by dataset.")
           .Register(*registry_);
  rows_published_ =
      &prometheus::BuildCounter()
           .Name("backfill_rows_published_total")
           .Help("Rows the published partitions hold, by dataset.")
           .Register(*registry_);
  check_failures_ =
      &prometheus::BuildCounter()
           .Name("backfill_validation_failures_total")
           .Help(
               "Validation checks that failed, once per check, dataset and "
               "validation of a job, by check kind and severity.")
           .Register(*registry_);
  for (const char* kind : kDeclaredCheckKinds) {
    for (CheckSeverity severity :
         {CheckSeverity::kError, CheckSeverity::kHold, CheckSeverity::kWarn}) {
      check_failures_->Add(
          {{"kind", kind}, {"severity", CheckSeverityName(severity)}});
    }
  }
  for (const char* kind : kAlwaysOnCheckKinds) {
    check_failures_->Add(
        {{"kind", kind},
         {"severity", CheckSeverityName(CheckSeverity::kError)}});
  }

  prometheus::BuildGauge()
      .Name("backfill_build_info")
      .Help("Always 1; the version label is the backfilld version.")
      .Register(*registry_)
      .Add({{"version", version}})
      .Set(1);
}

Metrics::~Metrics() { StopListening(); }

absl::Status Metrics::Listen(const std::string& address,
                             BasicAuthCheck basic_auth) {
  StopListening();
  try {
    // civetweb takes "HOST:PORT" as its listening_ports option.
    auto exposer = std::make_unique<prometheus::Exposer>(address, 2);
    exposer->RegisterCollectable(registry_);
    exposer->RegisterCollectable(stats_collector_);
    for (const auto& collectable : added_collectables_) {
      exposer->RegisterCollectable(collectable);
    }
    exposer->RegisterCollectable(eta_collector_);
    exposer->RegisterCollectable(downstream_collector_);
    exposer->RegisterCollectable(process_collector_);
    if (basic_auth) {
      exposer->RegisterAuth(std::move(basic_auth), "backfilld metrics",
                            "/metrics");
    }
    exposer_ = std::move(exposer);
    listen_address_ = address;
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

void Metrics::StopListening() {
  if (!exposer_) return;
  // The exposer's listening thread sees the stop only when its poll() of
  // the listening socket returns, every 2 s when no scrape comes: a
  // connection now and then during the stop makes it return at once (the
  // first may come before the stop is flagged, hence the loop).
  const std::string host = WakeHost(listen_address_);
  const int port = this->port();
  absl::Notification stopped;
  std::thread waker([&] {
    do {
      WakeListener(host, port);
    } while (!stopped.WaitForNotificationWithTimeout(absl::Milliseconds(50)));
  });
  exposer_.reset();
  stopped.Notify();
  waker.join();
}

prometheus::Registry& Metrics::registry() { return *registry_; }
void Metrics::AddCollectable(
    std::shared_ptr<prometheus::Collectable> collectable) {
  if (exposer_) exposer_->RegisterCollectable(collectable);
  added_collectables_.push_back(std::move(collectable));
}

std::string Metrics::Scrape() const {
  std::vector<prometheus::MetricFamily> families = registry_->Collect();
  for (const prometheus::Collectable* collector :
       {static_cast<const prometheus::Collectable*>(stats_collector_.get()),
        static_cast<const prometheus::Collectable*>(eta_collector_.get()),
        static_cast<const prometheus::Collectable*>(
            downstream_collector_.get()),
        static_cast<const prometheus::Collectable*>(
            process_collector_.get())}) {
    for (auto& family : collector->Collect()) {
      families.push_back(std::move(family));
    }
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
  storage_errors_[i]->Increment();
  if (storage == Storage::kStateStore) store_writes_failing_ = true;
  absl::MutexLock lock(&storage_mu_);
  writes_failing_[i] = true;
  storage_failing_[i]->Set(1);
}

void Metrics::OnStorageRecovered(Storage storage) {
  const int i = static_cast<int>(storage);
  if (storage == Storage::kStateStore) store_writes_failing_ = false;
  absl::MutexLock lock(&storage_mu_);
  writes_failing_[i] = false;
  storage_failing_[i]->Set(unusable_[i] ? 1 : 0);
}

void Metrics::OnLeaseTakeover(const std::string& /*job_id*/,
                              const std::string& /*from_node*/) {
  lease_takeovers_->Increment();
}

void Metrics::SetStorageUnusable(Storage storage, bool unusable) {
  const int i = static_cast<int>(storage);
  absl::MutexLock lock(&storage_mu_);
  unusable_[i] = unusable;
  storage_failing_[i]->Set(unusable || writes_failing_[i] ? 1 : 0);
}

void Metrics::OnPartitionAttempt(bool ok, absl::Duration duration) {
  (ok ? attempts_staged_ : attempts_failed_)->Increment();
  partition_duration_->Observe(absl::ToDoubleSeconds(duration));
}

void Metrics::OnPartitionStageTimings(const std::string& /*dataset*/,
                                      const StageTimings& timings) {
  phase_transform_->Increment(PhaseSeconds(timings.transform));
  phase_fingerprint_->Increment(PhaseSeconds(timings.fingerprint));
  phase_stage_write_->Increment(PhaseSeconds(timings.stage_write));
}

void Metrics::OnJobValidationTime(const std::string& /*job_id*/,
                                  absl::Duration duration) {
  phase_validate_->Increment(PhaseSeconds(duration));
}

void Metrics::OnJobFinished(const std::string& /*job_id*/, JobState state,
                            double estimated_cost, double actual_cost) {
  const int i = static_cast<int>(state);
  if (i >= 0 && i < kJobStateCount && finished_[i] != nullptr) {
    finished_[i]->Increment();
  }
  // Costs are counted by OnJobPublished: a job that ends without
  // publishing (cancelled, failed) would count an estimate with little or
  // nothing actually read, and a job that fails and is retried would count
  // its estimate twice.
  (void)estimated_cost;
  (void)actual_cost;
}

void Metrics::DeclareDatasets(const std::vector<std::string>& datasets) {
  absl::MutexLock lock(&datasets_mu_);
  for (const std::string& d : datasets) {
    if (!datasets_.insert(d).second) continue;
    for (TaskState state : kCheckpointStates) {
      checkpointed_->Add({{"dataset", d}, {"state", Label(state)}});
    }
    for (auto* family :
         {published_partitions_, rows_written_, rows_published_,
          cost_estimated_, cost_actual_, cost_full_reload_, jobs_published_}) {
      family->Add({{"dataset", d}});
    }
  }
}

void Metrics::SetRunningJobs(RunningJobsFn running) {
  eta_collector_->Set(std::move(running));
}

void Metrics::SetConsumerStandings(ConsumerStandingsFn standings) {
  downstream_collector_->SetStandings(std::move(standings));
}

std::string Metrics::DatasetLabel(const std::string& dataset) const {
  absl::MutexLock lock(&datasets_mu_);
  if (datasets_.empty() || datasets_.count(dataset) > 0) return dataset;
  return "other";
}

void Metrics::OnPartitionCheckpointed(const std::string& dataset,
                                      TaskState state, int64_t rows) {
  if (std::find(std::begin(kCheckpointStates), std::end(kCheckpointStates),
                state) == std::end(kCheckpointStates)) {
    return;
  }
  const std::string label = DatasetLabel(dataset);
  checkpointed_->Add({{"dataset", label}, {"state", Label(state)}}).Increment();
  if (rows > 0) {
    rows_written_->Add({{"dataset", label}})
        .Increment(static_cast<double>(rows));
  }
}

void Metrics::OnJobPublished(const std::string& /*job_id*/,
                             const std::vector<PublishedDataset>& datasets) {
  for (const PublishedDataset& d : datasets) {
    const prometheus::Labels labels = {{"dataset", DatasetLabel(d.dataset)}};
    jobs_published_->Add(labels).Increment();
    if (d.partitions > 0) {
      published_partitions_->Add(labels).Increment(
          static_cast<double>(d.partitions));
    }
    if (d.rows > 0) {
      rows_published_->Add(labels).Increment(static_cast<double>(d.rows));
    }
    if (d.estimated_cost > 0) {
      cost_estimated_->Add(labels).Increment(d.estimated_cost);
    }
    if (d.actual_cost > 0) cost_actual_->Add(labels).Increment(d.actual_cost);
    if (d.full_reload_cost > 0) {
      cost_full_reload_->Add(labels).Increment(d.full_reload_cost);
    }
  }
}

void Metrics::OnCheckFailed(const std::string& /*dataset*/,
                            const std::string& kind, CheckSeverity severity) {
  check_failures_
      ->Add({{"kind", KnownCheckKind(kind) ? kind : "other"},
             {"severity", CheckSeverityName(severity)}})
      .Increment();
}

void Metrics::OnConsumerConfirmed(const std::string& dataset,
                                  const std::string& consumer, bool healthy,
                                  absl::Duration latency) {
  downstream_collector_->Record(DatasetLabel(dataset), consumer, healthy,
                                latency);
}

}  // namespace backfill
