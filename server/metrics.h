// Metrics: the Prometheus view of backfilld, exposed on /metrics.
//
// Two kinds of series:
//  * Event counters and the partition-duration histogram, fed by the
//    manager through the JobObserver interface.
//  * Gauges of jobs and partitions by state and of running-job progress,
//    computed at scrape time from StoreStats (a stats function, normally
//    the state store's Stats()), so they never go stale and are right
//    again after a restart.
// Every family has a help text and a `backfill_` name; counters end in
// `_total`; no label carries a job id or a partition (cardinality is
// bounded by the state enums).
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
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/job.h"
#include "core/job_observer.h"
#include "core/state_store.h"

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

class Metrics final : public JobObserver {
 public:
  using StatsFn = std::function<absl::StatusOr<StoreStats>()>;

  Metrics(StatsFn stats, const std::string& version);
  ~Metrics() override;

  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // Serves /metrics on `address` ("HOST:PORT"; port 0 picks a free one).
  // UNAVAILABLE with the reason when the address cannot be bound.
  absl::Status Listen(const std::string& address);
  // The bound port after Listen(), else 0.
  int port() const;
  // Stops serving /metrics. Idempotent.
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

  // JobObserver.
  void OnJobTransition(const std::string& job_id, JobState from, JobState to,
                       const std::string& message) override;
  void OnPartitionAttempt(bool ok, absl::Duration duration) override;
  void OnJobFinished(const std::string& job_id, JobState state,
                     double estimated_cost, double actual_cost) override;
  void OnStorageFailing(Storage storage, const std::string& what,
                        const absl::Status& status) override;
  void OnStorageRecovered(Storage storage) override;

 private:
  // Declared before the collector, which reads it.
  std::atomic<bool> store_writes_failing_{false};
  std::shared_ptr<prometheus::Registry> registry_;
  std::shared_ptr<prometheus::Collectable> stats_collector_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  std::vector<std::shared_ptr<prometheus::Collectable>> added_collectables_;

  // Children of the registry's families (owned by the registry).
  // Children are added on first use (Family::Add is thread-safe): at most
  // 13 x 12 series, but usually a handful.
  prometheus::Family<prometheus::Counter>* transitions_ = nullptr;
  std::array<prometheus::Counter*, kJobStateCount> finished_{};
  prometheus::Counter* attempts_staged_ = nullptr;
  prometheus::Counter* attempts_failed_ = nullptr;
  prometheus::Histogram* partition_duration_ = nullptr;
  prometheus::Counter* cost_estimated_ = nullptr;
  prometheus::Counter* cost_actual_ = nullptr;
  std::array<prometheus::Gauge*, 2> storage_failing_{};  // index: Storage
  std::array<prometheus::Counter*, 2> storage_errors_{};
};

}  // namespace backfill

#endif  // BACKFILL_SERVER_METRICS_H_
