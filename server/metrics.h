// Metrics: the Prometheus view of backfilld, exposed on /metrics.
//
// Two kinds of series:
//  * Event counters and the partition-duration histogram, fed by the
//    manager through the JobObserver interface, among them where the time
//    of partitions and jobs goes: backfill_partition_phase_seconds_total,
//    seconds spent per phase (transform, fingerprint and stage_write, as
//    the engine timed them in each staged attempt; validate, each
//    validation of a job's staging), every phase at 0 from the start.
//  * Gauges of jobs and partitions by state and of running-job progress,
//    computed at scrape time from StoreStats (a stats function, normally
//    the state store's Stats()), so they never go stale and are right
//    again after a restart.
//  * Per-dataset counters (partitions checkpointed and published, rows,
//    costs of published jobs), validation failures by check kind, the
//    health and confirmation latency of downstream consumers, and the jobs
//    this replica of a group took over from another
//    (backfill_lease_takeovers_total), fed by the other JobObserver events.
//  * The ETA of running jobs, computed at scrape time from the running
//    jobs (SetRunningJobs(); core/run/progress.h says how it is estimated), and
//    the health of downstream consumers, from the store's standings
//    (SetConsumerStandings()).
//  * gRPC requests and latency (server/grpc_metrics.h, fed by a server
//    interceptor) and the process_* metrics (server/process_collector.h).
// Every family of backfilld's own has a help text and a `backfill_` name;
// counters end in `_total`; no label carries a job id or a partition
// (cardinality is bounded by the state enums, the check kinds and the
// dataset and consumer names of the catalog). docs/operations.md lists
// every family.
//
// Metrics owns its registry, the scrape-time collector and, once Listen()
// succeeded, the HTTP exposer. The stats function must stay callable until
// Metrics is destroyed (or StopListening() returned). Thread-safe: the
// observer methods are called from manager and worker threads and scrapes
// come from the exposer's threads.

#ifndef BACKFILL_SERVER_METRICS_H_
#define BACKFILL_SERVER_METRICS_H_

#include <array>
#include <atomic>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "core/model/job.h"
#include "core/ports/state_store.h"
#include "core/run/job_observer.h"

namespace prometheus {
class Collectable;
class Counter;
class Exposer;
class Gauge;
template <typename T>
class Family;
class Histogram;
class Registry;
}  // namespace prometheus

namespace backfill {

class DownstreamCollector;
class EtaCollector;
class GrpcServerMetrics;

class Metrics final : public JobObserver {
 public:
  using StatsFn = std::function<absl::StatusOr<StoreStats>()>;

  Metrics(StatsFn stats, const std::string& version);
  ~Metrics() override;

  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // Whether an HTTP basic auth user name and password may scrape; called
  // on the exposer's threads for each request.
  using BasicAuthCheck = std::function<bool(const std::string& username,
                                            const std::string& password)>;

  // Serves /metrics on `address` ("HOST:PORT"; port 0 picks a free one).
  // With `basic_auth`, a scrape without HTTP basic auth credentials it
  // accepts is answered 401. UNAVAILABLE with the reason when the address
  // cannot be bound.
  absl::Status Listen(const std::string& address,
                      BasicAuthCheck basic_auth = {});
  // The bound port after Listen(), else 0.
  int port() const;
  // Stops serving /metrics, at once (it wakes the server's listening thread
  // rather than wait for its poll; server/listener_wake.h). Idempotent.
  void StopListening();

  // The exposition text of a scrape, as /metrics serves it.
  std::string Scrape() const;

  // The registry /metrics serves, for the series other parts of the daemon
  // keep themselves (e.g. server/openlineage_metrics.h).
  prometheus::Registry& registry();
  // Adds families collected at scrape time by `collectable` (e.g.
  // server/stale_partitions_collector.h) to /metrics and Scrape(). Call
  // before Listen(); not thread-safe against scrapes.
  void AddCollectable(std::shared_ptr<prometheus::Collectable> collectable);

  // The datasets of the catalog: their per-dataset series exist (at 0)
  // from the start, and a dataset name outside them is counted as
  // "other" (none given: every name is its own label). Called again after
  // a reload of the pipelines, it adds the new datasets (those declared
  // before keep their series: jobs planned with them may still report).
  void DeclareDatasets(const std::vector<std::string>& datasets);

  // Where the ETA gauges read the RUNNING jobs (with counts and recompute
  // times, as StateStore::ListJobs gives them) at scrape time; unset: no
  // job is running. Must stay callable while Metrics lives.
  using RunningJobsFn = std::function<absl::StatusOr<std::vector<Job>>()>;
  void SetRunningJobs(RunningJobsFn running);

  // The downstream consumers' standings (StateStore::ListConsumerStandings,
  // narrowed to the consumers the catalog declares), read at scrape time:
  // backfill_downstream_healthy is 0 for a consumer some DOWNSTREAM_UNHEALTHY
  // job found unhealthy, else 1, and survives restarts. Without it the gauge
  // shows the last confirmation this process made.
  using ConsumerStandingsFn =
      std::function<absl::StatusOr<std::vector<ConsumerStanding>>()>;
  void SetConsumerStandings(ConsumerStandingsFn standings);

  // The gRPC request metrics, whose interceptor factory the server
  // builder takes.
  GrpcServerMetrics* grpc() { return grpc_.get(); }

  // JobObserver.
  void OnJobTransition(const std::string& job_id, JobState from, JobState to,
                       const std::string& message) override;
  void OnPartitionAttempt(bool ok, absl::Duration duration) override;
  void OnPartitionStageTimings(const std::string& dataset,
                               const StageTimings& timings) override;
  void OnJobValidationTime(const std::string& job_id,
                           absl::Duration duration) override;
  void OnJobFinished(const std::string& job_id, JobState state,
                     double estimated_cost, double actual_cost) override;
  void OnStorageFailing(Storage storage, const std::string& what,
                        const absl::Status& status) override;
  void OnStorageRecovered(Storage storage) override;
  // The storage watch found `storage` unusable (its file removed, replaced
  // or truncated), or usable again. backfill_storage_failing is 1 while
  // its writes fail or it is unusable.
  void SetStorageUnusable(Storage storage, bool unusable);
  void OnPartitionCheckpointed(const std::string& dataset, TaskState state,
                               int64_t rows) override;
  void OnJobPublished(const std::string& job_id,
                      const std::vector<PublishedDataset>& datasets) override;
  void OnCheckFailed(const std::string& dataset, const std::string& kind,
                     CheckSeverity severity) override;
  void OnConsumerConfirmed(const std::string& dataset,
                           const std::string& consumer, bool healthy,
                           absl::Duration latency) override;
  // Counts backfill_lease_takeovers_total (no label: neither the job nor
  // the replica it came from).
  void OnLeaseTakeover(const std::string& job_id,
                       const std::string& from_node) override;

 private:
  // Declared before the collector, which reads it.
  std::atomic<bool> store_writes_failing_{false};
  std::shared_ptr<prometheus::Registry> registry_;
  std::shared_ptr<prometheus::Collectable> stats_collector_;
  std::shared_ptr<prometheus::Collectable> process_collector_;
  std::shared_ptr<EtaCollector> eta_collector_;
  std::shared_ptr<DownstreamCollector> downstream_collector_;
  std::unique_ptr<GrpcServerMetrics> grpc_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  // Listen()'s address, for WakeListener when stopping.
  std::string listen_address_;
  std::vector<std::shared_ptr<prometheus::Collectable>> added_collectables_;

  // Children of the registry's families (owned by the registry).
  // Children are added on first use (Family::Add is thread-safe): at most
  // 13 x 12 series, but usually a handful.
  prometheus::Family<prometheus::Counter>* transitions_ = nullptr;
  std::array<prometheus::Counter*, kJobStateCount> finished_{};
  prometheus::Counter* attempts_staged_ = nullptr;
  prometheus::Counter* attempts_failed_ = nullptr;
  prometheus::Histogram* partition_duration_ = nullptr;
  // backfill_partition_phase_seconds_total by phase.
  prometheus::Counter* phase_transform_ = nullptr;
  prometheus::Counter* phase_fingerprint_ = nullptr;
  prometheus::Counter* phase_stage_write_ = nullptr;
  prometheus::Counter* phase_validate_ = nullptr;
  // Per dataset (labels: dataset, and state for checkpoints).
  prometheus::Family<prometheus::Counter>* checkpointed_ = nullptr;
  prometheus::Family<prometheus::Counter>* published_partitions_ = nullptr;
  prometheus::Family<prometheus::Counter>* rows_written_ = nullptr;
  prometheus::Family<prometheus::Counter>* rows_published_ = nullptr;
  prometheus::Family<prometheus::Counter>* cost_estimated_ = nullptr;
  prometheus::Family<prometheus::Counter>* cost_actual_ = nullptr;
  prometheus::Family<prometheus::Counter>* cost_full_reload_ = nullptr;
  prometheus::Family<prometheus::Counter>* jobs_published_ = nullptr;
  prometheus::Family<prometheus::Counter>* check_failures_ = nullptr;
  // The declared datasets (empty: any name).
  mutable absl::Mutex datasets_mu_;
  std::set<std::string> datasets_ ABSL_GUARDED_BY(datasets_mu_);
  std::string DatasetLabel(const std::string& dataset) const;
  std::array<prometheus::Gauge*, 2> storage_failing_{};  // index: Storage
  // What backfill_storage_failing is made of, by Storage.
  absl::Mutex storage_mu_;
  std::array<bool, 2> writes_failing_ ABSL_GUARDED_BY(storage_mu_) = {};
  std::array<bool, 2> unusable_ ABSL_GUARDED_BY(storage_mu_) = {};
  std::array<prometheus::Counter*, 2> storage_errors_{};
  prometheus::Counter* lease_takeovers_ = nullptr;
};

}  // namespace backfill

#endif  // BACKFILL_SERVER_METRICS_H_
