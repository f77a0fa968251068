// JobObserver: events the core reports as jobs and partitions progress and
// as storage fails and recovers, and where a job's time goes (the engine's
// phases of each partition, the validation of the job), so that metrics,
// logs and health (server/) can follow them without the core knowing
// Prometheus or spdlog. Every method has an empty default: an observer
// overrides what it follows, and one that forwards events to another (as
// FanoutObserver does) must forward every method. Called from worker and
// manager threads: implementations must be thread-safe and cheap (no I/O).

#ifndef BACKFILL_CORE_RUN_JOB_OBSERVER_H_
#define BACKFILL_CORE_RUN_JOB_OBSERVER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "core/model/job.h"
#include "core/ports/engine.h"

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

  // Where an attempt that staged a partition of `dataset` (a name from the
  // catalog) spent its time in the engine, phase by phase, as the engine
  // measured it (StageTimings in core/ports/engine.h); reported right after its
  // OnPartitionAttempt(true, ...), whatever the early cutoff decides then.
  // A failed attempt reports none.
  virtual void OnPartitionStageTimings(const std::string& dataset,
                                       const StageTimings& timings) {}

  // A validation of the job's staging ran (core/run/validate_step.h
  // ValidateStaging: Engine::ValidateStaged, the profiles and the checks of
  // every dataset) and took `duration` on the runner's clock, whether it
  // passed, failed or ended in an error. Every run counts: the one before
  // publishing, a new one after partitions whose staging was lost are
  // recomputed, and the integrity check before a resumed or approved
  // publish. The diff the validation computes against the published rows
  // (Engine::DiffPartition of every partition) is reported by a call of
  // its own.
  virtual void OnJobValidationTime(const std::string& job_id,
                                   absl::Duration duration) {}

  // A partition task's checkpoint was recorded: `state` is STAGED
  // (recomputed into staging, `rows` rows written there), UNCHANGED
  // (recomputed, identical to the published rows) or SKIPPED (never run);
  // both early cutoff, `rows` 0. `dataset` is a name from the catalog.
  virtual void OnPartitionCheckpointed(const std::string& dataset,
                                       TaskState state, int64_t rows) {}

  // What a job's publish did to one of its datasets, and what the dataset
  // cost (kCostUnit): the plan's estimate and full reload, and the input
  // rows its tasks actually read (recomputed partitions, unchanged ones
  // included).
  struct PublishedDataset {
    std::string dataset;
    int64_t partitions = 0;  // partitions replaced by the publish
    int64_t rows = 0;        // rows they hold now
    double estimated_cost = 0;
    double full_reload_cost = 0;
    double actual_cost = 0;
  };
  // A job's publish was recorded (once per job: a job publishes at most
  // once), with every dataset of its plan.
  virtual void OnJobPublished(const std::string& job_id,
                              const std::vector<PublishedDataset>& datasets) {}

  // A validation check of `kind` (CheckResult::kind) and `severity` failed
  // on `dataset`: once per check, dataset and validation of a job.
  virtual void OnCheckFailed(const std::string& dataset,
                             const std::string& kind, CheckSeverity severity) {}

  // A job reached a terminal state; costs are in kCostUnit.
  virtual void OnJobFinished(const std::string& job_id, JobState state,
                             double estimated_cost, double actual_cost) {}

  // A downstream consumer of `dataset` was confirmed after a publish:
  // whether it serves the new numbers (healthy), and how long confirming
  // it took, from the invalidation to the last probe. `dataset` and
  // `consumer` are names from the catalog.
  virtual void OnConsumerConfirmed(const std::string& dataset,
                                   const std::string& consumer, bool healthy,
                                   absl::Duration latency) {}

  // Where durable writes go: the service's own state store, or the
  // warehouse.
  enum class Storage { kStateStore, kWarehouse };
  // A write to `storage` failed with an error that may pass (disk full, I/O
  // error, busy); `what` says which write. It is retried with backoff.
  virtual void OnStorageFailing(Storage storage, const std::string& what,
                                const absl::Status& status) {}
  // A write to `storage` succeeded again after OnStorageFailing.
  virtual void OnStorageRecovered(Storage storage) {}

  // This replica of a group took `job_id` over from replica `from_node`,
  // whose lease on the job had expired (it stopped renewing it: stopped,
  // frozen or cut off from the state store); the job resumes here from its
  // checkpoints. Once per takeover, after the claim succeeded.
  virtual void OnLeaseTakeover(const std::string& job_id,
                               const std::string& from_node) {}

  // Another replica took job `job_id` over from this one (its lease had
  // expired: this replica was frozen or cut off from the state store):
  // the job was dropped here, and any write this replica still tried for
  // it was refused (LEASE_LOST).
  virtual void OnLeaseLost(const std::string& job_id) {}
};

}  // namespace backfill

#endif  // BACKFILL_CORE_RUN_JOB_OBSERVER_H_
