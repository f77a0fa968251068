// BackfillManager: the domain core of backfilld. It plans, admits and runs
// backfill jobs through the playbook — pin inputs, recompute partitions in
// staging on a worker pool with a durable checkpoint each, validate,
// publish every partition of the job atomically, record lineage — and
// resumes unfinished jobs after a restart.
//
// It owns its worker pool (the only threads it runs). It does not own the
// catalog, store, engine, clock or observer; they must outlive it.
// Thread-safe: every public method may be called from any thread (the gRPC
// handlers call it concurrently).

#ifndef BACKFILL_CORE_BACKFILL_MANAGER_H_
#define BACKFILL_CORE_BACKFILL_MANAGER_H_

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/catalog.h"
#include "core/clock.h"
#include "core/engine.h"
#include "core/job.h"
#include "core/job_observer.h"
#include "core/planner.h"
#include "core/state_store.h"
#include "core/worker_pool.h"

namespace backfill {

struct ManagerOptions {
  int workers = 2;
  int max_attempts = 3;  // per partition task
  absl::Duration retry_backoff = absl::Milliseconds(100);
  PlannerLimits planner;
};

struct SubmitResult {
  Job job;
  bool created = true;
};

class BackfillManager {
 public:
  BackfillManager(const Catalog* catalog, StateStore* store, Engine* engine,
                  const Clock* clock, JobObserver* observer,
                  ManagerOptions options);
  ~BackfillManager();  // calls Shutdown()

  BackfillManager(const BackfillManager&) = delete;
  BackfillManager& operator=(const BackfillManager&) = delete;

  // Resumes the jobs the store holds as unfinished and starts scheduling.
  absl::Status Start();

  // Stops taking new tasks, waits for running ones to checkpoint, and stops
  // the threads. Unfinished jobs stay in the store and resume on the next
  // Start(). Idempotent.
  void Shutdown();

  // Step 1 only: the plan with its conflicts against active jobs.
  absl::StatusOr<Plan> PlanBackfill(const BackfillRequest& request);

  // Plans and enqueues a job. INVALID_ARGUMENT for bad requests, a missing
  // reason, or an idempotency key reused with a different request;
  // FAILED_PRECONDITION when an active job covers a planned partition.
  absl::StatusOr<SubmitResult> Submit(const BackfillRequest& request,
                                      const std::string& idempotency_key);

  absl::StatusOr<Job> GetJob(const std::string& id);
  absl::StatusOr<std::vector<Job>> ListJobs(const JobFilter& filter);

  // Cancels an active job: no new partition starts, staging is dropped,
  // nothing is published. Cancelling a cancelled job returns it unchanged
  // (so a retried cancel is safe). FAILED_PRECONDITION for a job that ended
  // otherwise or is already validating or publishing.
  absl::StatusOr<Job> Cancel(const std::string& id, const std::string& reason);

  // Blocks until the job changes after `*version` (0: return at once) or
  // `deadline` passes; returns the job and sets `*version` to its current
  // change counter. With `*version` 0 the job is whole; later returns are
  // progress updates without the plan's partition lists.
  absl::StatusOr<Job> WaitForChange(const std::string& id, uint64_t* version,
                                    absl::Time deadline);

  const Catalog& catalog() const { return *catalog_; }

 private:
  struct ActiveJob;

  // Loads a job's tasks, builds its dependency graph and queues its
  // preparation (or, past RUNNING, its finish). On submit and on recovery.
  absl::Status Activate(const Job& job) ABSL_LOCKS_EXCLUDED(mu_);
  // Drops staging that a crash left behind for jobs already ended.
  void SweepOrphans() ABSL_LOCKS_EXCLUDED(mu_);
  ActiveJob* FindActive(const std::string& job_id) ABSL_LOCKS_EXCLUDED(mu_);
  bool Stopping() ABSL_LOCKS_EXCLUDED(mu_);

  // Pool closures.
  void PrepareAndRun(const std::string& job_id);
  void RunTask(const std::string& job_id, size_t index);
  // Validate, publish, record; resumable from any of its states.
  void Finish(const std::string& job_id);

  // Steps of Finish. Publish returns CANCELLED when the warehouse committed
  // but the publication could not be recorded before the process stops (or
  // ever, in this process): recovery then records it.
  absl::Status ValidateStaged(ActiveJob* job, std::string* failure);
  absl::Status Publish(ActiveJob* job);
  absl::Status RecordPublication(
      ActiveJob* job, const std::map<std::string, std::string>& versions);

  // Moves the job to `to` (store, then memory, then observer) if it is still
  // in phase `required_phase`; ABORTED otherwise. Serialized per job.
  absl::Status Move(ActiveJob* job, JobState to, const std::string& message,
                    int required_phase) ABSL_LOCKS_EXCLUDED(mu_);
  // Records a permanent failure (once) and stops the job's dispatch.
  void FailJob(ActiveJob* job, const std::string& failure)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Starts ready tasks while fewer than options_.workers run.
  void DispatchLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // True (once) when a failing or cancelled job has drained; the caller
  // then runs Settle outside the lock.
  bool TakeSettleLocked(ActiveJob* job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Settle(ActiveJob* job) ABSL_LOCKS_EXCLUDED(mu_);
  // Reports the end and forgets the job; `job` is dangling afterwards.
  void Retire(ActiveJob* job) ABSL_LOCKS_EXCLUDED(mu_);
  void NotifyLocked(const std::string& job_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::vector<Conflict> FindConflictsLocked(const Plan& plan,
                                            const std::string& own_key) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The job's datasets and pins. `complete` is false when a dataset of a
  // job past VALIDATING left the pipelines (it can still be recorded if
  // already published).
  absl::StatusOr<JobLayout> LayoutOf(const Job& job, bool* complete) const;

  const Catalog* const catalog_;
  StateStore* const store_;
  Engine* const engine_;
  const Clock* const clock_;
  JobObserver* const observer_;
  const ManagerOptions options_;
  const Planner planner_;

  // Serializes admission (conflict check + create) without holding mu_
  // across the store write.
  absl::Mutex admission_mu_ ABSL_ACQUIRED_BEFORE(mu_);

  absl::Mutex mu_;
  absl::CondVar changed_;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  // Unfinished jobs, by creation order of their numeric ids.
  std::map<std::string, std::unique_ptr<ActiveJob>> active_
      ABSL_GUARDED_BY(mu_);
  std::vector<std::string> order_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, uint64_t> versions_ ABSL_GUARDED_BY(mu_);
  uint64_t next_version_ ABSL_GUARDED_BY(mu_) = 2;

  std::unique_ptr<WorkerPool> pool_;
};

}  // namespace backfill

#endif  // BACKFILL_CORE_BACKFILL_MANAGER_H_
