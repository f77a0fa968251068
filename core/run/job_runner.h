// JobRunner: runs every admitted job through the playbook on a worker pool.
// It schedules; the steps do the work, each in its own unit over the shared
// StepContext (step_context.h):
//
//   prepare     the job's staging and pins (recompute_step.h
//               PrepareStaging), then RUNNING
//   recompute   batches of its partitions, each with a durable checkpoint,
//               the early cutoff applied (recompute_step.h RunBatch)
//   validate    checks, lost staging recomputed, diff (diff_step.h), held
//               for a decision or on to publishing (validate_step.h)
//   publish     one warehouse transaction, lineage (publish_step.h), then
//               retention of rollback copies
//   confirm     downstream consumers (confirm_step.h), then the job's end
//
// What the runner keeps is the scheduling of those steps: which job starts
// (per partition, jobs run one at a time in admission order: admission.h),
// which job a free worker serves, how many partitions it takes at once,
// and the ends of jobs that fail, are cancelled or are superseded. The
// operators' decisions and a new job's admission are JobCommands
// (job_commands.h); what the store holds unfinished at start-up is
// recovery's (recovery.h); rollbacks are rollback_step.h's.
//
// Dispatch: free workers go to the runnable job with the highest priority,
// then to the one with the fewest partitions running (so a small urgent job
// is never starved by a huge one), within the job's and each dataset's
// max_parallel. A worker takes a batch of a job's ready partitions when they
// are short (about kBatchTime of staging, at most kMaxBatch, never more than
// an equal share of the ready ones per worker), hands back what it has not
// started when another job waits for a worker, and a free worker takes over
// the later half of what a batch holds and has not started.
//
// Durability: every state change and checkpoint is written to the state
// store before it takes effect in memory (StepContext::Move, Persist); a
// job never leaves memory — and so keeps its partitions — before its end is
// recorded.
//
// Catalog: each job holds the catalog snapshot (live_catalog.h) it was
// admitted with (a recovered job: the one in force at Start()) until it
// ends, so that a reload of the pipelines never changes the logic of a job
// already queued or running; retention and rollbacks use the catalog in
// force.
//
// Ownership: owns its worker pool, task writer, job table and commands; does
// not own the live catalog, store, engine, clock or observer, which must
// outlive it.
// Thread-safety: thread-safe: every public method may be called from any
// thread.

#ifndef BACKFILL_CORE_RUN_JOB_RUNNER_H_
#define BACKFILL_CORE_RUN_JOB_RUNNER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/base/clock.h"
#include "core/model/job.h"
#include "core/model/live_catalog.h"
#include "core/plan/scope.h"
#include "core/ports/engine.h"
#include "core/ports/state_store.h"
#include "core/run/active_job.h"
#include "core/run/job_commands.h"
#include "core/run/job_observer.h"
#include "core/run/job_table.h"
#include "core/run/step_context.h"
#include "core/run/task_writer.h"
#include "core/run/worker_pool.h"

namespace backfill {

class JobRunner : private JobScheduler {
 public:
  JobRunner(const LiveCatalog* catalog, StateStore* store, Engine* engine,
            const Clock* clock, JobObserver* observer, RunnerOptions options);
  ~JobRunner() override;  // calls Shutdown()

  JobRunner(const JobRunner&) = delete;
  JobRunner& operator=(const JobRunner&) = delete;

  // Resumes what the store holds unfinished (recovery.h) and starts
  // scheduling.
  absl::Status Start();
  // Stops taking work, lets running closures finish (partitions checkpoint)
  // and joins the pool. Unfinished jobs resume at the next Start().
  void Shutdown();

  // New jobs and the operators' decisions on jobs.
  JobCommands& commands() { return commands_; }

  // Blocks until the job changes after `*version` (0: returns at once) or
  // `deadline` passes; returns the job (in `first_view` when `*version` was
  // 0, progress only otherwise: no partition lists) and sets `*version`.
  absl::StatusOr<Job> WaitForChange(const std::string& id, uint64_t* version,
                                    absl::Time deadline,
                                    JobView first_view = JobView::kFull) {
    return jobs_.WaitForChange(id, version, deadline, first_view);
  }
  // Blocks until job `id` ends as this process runs it (at once for a job
  // it does not run) or `deadline` passes (JobTable::AwaitEnded).
  void AwaitEnded(const std::string& id, absl::Time deadline) {
    jobs_.AwaitEnded(id, deadline);
  }

 private:
  // --- JobScheduler; under the table's lock where named ...Locked ---
  void PumpLocked() override ABSL_EXCLUSIVE_LOCKS_REQUIRED(jobs_.mu());
  void StartFinishingIfDoneLocked(ActiveJob* job) override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(jobs_.mu());
  void FinishLocked(const std::string& id) override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(jobs_.mu());
  void Settle(ActiveJob* job) override;
  void Supersede(ActiveJob* held, const std::string& by) override;
  absl::StatusOr<std::optional<Job>> Forward(const std::string& id,
                                             const Decision& decision) override;
  void Created(const std::string& id) override;
  absl::Status ClaimEnded(const std::string& id, const std::string& step,
                          const Scope& scope) override;
  void Done(const std::string& id) override;

  // --- A replica of a group (job_runner_group.cc) ---
  bool InGroup() const { return ctx_.options().leases != nullptr; }
  // Start() of a replica: what no other replica runs is claimed by
  // ClaimScan, on the lease keeper's thread, from now on.
  absl::Status StartInGroup();
  // Claims the jobs nobody holds (a released or expired lease, or a new
  // job), each with every unfinished job it shares partitions with, so
  // that jobs that overlap always run on one replica, in order; then
  // recovers them here (recovery.h RecoverJob). `only`: claim only the
  // jobs that share partitions with it ("": every job nobody holds). A
  // periodic scan leaves a group of jobs none of which ever had a lease
  // (just submitted, or handed back by a replica that stopped) until it
  // has seen them so for kSubmitterGrace: the replica a job was submitted
  // to claims it first, so that jobs sent to different replicas run there.
  void ClaimScan(const std::string& only = "");
  // Recovers the claimed jobs into the table and starts them.
  void Adopt(const std::vector<std::string>& ids);
  // The leases of these jobs were taken over: they are dropped here,
  // nothing more recorded.
  void OnLeasesLost(const std::vector<std::string>& ids);
  // The live lease of another replica on job `id`, once this replica
  // tried to claim it (with the jobs it shares partitions with); nullopt
  // when this replica runs it, or nobody needs to (it ended).
  absl::StatusOr<std::optional<JobLease>> HolderElsewhere(
      const std::string& id);
  // Takes the decisions other replicas send this one (Forward), until
  // Shutdown; on a thread of its own.
  void ServeRequests();
  // Takes one decision sent here; what to answer.
  absl::Status TakeDecision(const NodeRequest& request);

  // --- Closures on the pool, run without the table's lock ---
  // Supersedes the held jobs the job overlaps, prepares its staging and
  // moves it to RUNNING.
  void Prepare(const std::string& id);
  // Runs batch number `batch` of the job's partitions (StartBatchLocked)
  // through the recompute step, then hands each partition back to the
  // graph. Of the partitions after the first it starts only those it still
  // holds (ActiveJob::held); those another batch took over are that
  // batch's.
  void RunTasks(const std::string& id, uint64_t batch,
                const std::vector<size_t>& indices);
  // Validates, publishes and confirms a job whose partitions are all
  // staged (or resumes it at the step it was in); a step that fails before
  // the publish commits fails the job, keeping its staging for a retry.
  void Finish(const std::string& id);
  // The end of a job recorded CANCELLED: its tasks are cancelled, its
  // staging dropped, and it is forgotten.
  void EndCancelled(ActiveJob* job);

  // --- Dispatch, under the table's lock ---
  // Gives free workers batches: of the best job's ready partitions, or of
  // partitions another batch holds and has not started when no job has
  // ready ones or the holder's job has the higher priority.
  void DispatchLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(jobs_.mu());
  // Hands `indices` (taken from the job's graph, or from another batch's
  // held partitions) to a worker as a new batch: the first starts at once,
  // the others are held (ActiveJob::held) until the batch gets to them or a
  // free worker takes them over.
  void StartBatchLocked(ActiveJob* job, std::vector<size_t> indices)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(jobs_.mu());
  // True when another job has partitions ready and would get a worker
  // before `job` (or take turns with it): a batch then hands back what it
  // has not started.
  bool OtherJobWaitsLocked(const ActiveJob& job) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(jobs_.mu());
  // How many ready partitions of `job` one worker takes at once.
  size_t BatchSizeLocked(const ActiveJob& job) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(jobs_.mu());
  // Adds a partition's staging time to the job's average.
  static void NoteStageTime(ActiveJob* job, absl::Duration took);
  void SubmitLocked(std::function<void()> fn)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(jobs_.mu());

  // A batch is sized to take about kBatchTime, at most kMaxBatch.
  static constexpr absl::Duration kBatchTime = absl::Milliseconds(5);
  static constexpr size_t kMaxBatch = 32;

  const LiveCatalog* const catalog_;
  JobTable jobs_;
  const StepContext ctx_;
  JobCommands commands_;

  // Guarded by the table's lock.
  int in_flight_ ABSL_GUARDED_BY(jobs_.mu()) = 0;  // batches running
  std::map<std::string, int> dataset_running_ ABSL_GUARDED_BY(jobs_.mu());
  uint64_t dispatch_seq_ ABSL_GUARDED_BY(jobs_.mu()) = 0;

  // Starts and checkpoints of partitions, group-committed (created by
  // Start; declared before pool_, whose closures wait for it).
  std::unique_ptr<TaskWriter> task_writer_;
  std::unique_ptr<WorkerPool> pool_;

  // In a group: the scopes of the unfinished jobs (a plan never changes),
  // the FAILED jobs known to have kept no staging (nothing to hold), and
  // the jobs this replica could not resume. One scan at a time.
  absl::Mutex scan_mu_;  // taken before the table's lock
  std::map<std::string, Scope> scopes_ ABSL_GUARDED_BY(scan_mu_);
  std::set<std::string> without_staging_ ABSL_GUARDED_BY(scan_mu_);
  std::set<std::string> unresumable_ ABSL_GUARDED_BY(scan_mu_);
  int scans_since_failed_ ABSL_GUARDED_BY(scan_mu_) = 0;
  // When a periodic scan first saw each job that has never had a lease
  // (absl::Now(), as the lease keeper's ticks): such a job is left to the
  // replica it was submitted to for kSubmitterGrace.
  std::map<std::string, absl::Time> unleased_since_ ABSL_GUARDED_BY(scan_mu_);
  // The thread of ServeRequests, and when it is to stop.
  std::thread requests_;
  absl::Mutex requests_mu_;
  bool requests_stop_ ABSL_GUARDED_BY(requests_mu_) = false;
};

}  // namespace backfill

#endif  // BACKFILL_CORE_RUN_JOB_RUNNER_H_
