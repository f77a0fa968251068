// JobRunner: runs admitted jobs through the playbook on a worker pool —
// prepare staging and pins, recompute partitions (recompute_step.h) with a
// durable checkpoint each, validate (validate_step.h), publish atomically
// and record lineage (publish_step.h), confirm (confirm_step.h) — and
// carries out the operators' decisions: pause, resume, retry, cancel,
// approve. Validation also stores the job's diff (diff_step.h) and, for a
// dataset that requires approval (approval.h), holds the job in
// AWAITING_APPROVAL.
//
// Pieces it composes:
//   Admission      which job may start: per partition, jobs run one at a
//                  time in admission order; jobs held for a decision are
//                  superseded by newer overlapping jobs
//   TaskGraph      per job: dependencies between its tasks, ready queue
//   job_state_machine.h  every move is one of the table's
// Dispatch: free workers go to the runnable job with the highest priority,
// then to the one with the fewest partitions running (so a small urgent job
// is never starved by a huge one), within the job's and each dataset's
// max_parallel.
//
// Durability: every state change and checkpoint is written to the state
// store before it takes effect in memory. A write that fails for a reason
// that may pass (disk full, I/O error, busy) is retried with backoff (the
// injected clock's SleepFor) and reported to the observer; a job never
// leaves memory — and so keeps its partitions — before its end is recorded.
// A partition whose staging write finds the warehouse full waits and tries
// again without spending an attempt.
//
// Timing: besides each partition attempt (the clock's time around
// StagePartition, with the engine's own timings of its phases), every
// validation of a job's staging is timed with the clock and reported to the
// observer.
//
// Recovery: Start() resumes what the store holds unfinished: queued and
// running jobs continue from their checkpoints, paused ones stay paused,
// jobs past validation finish, jobs held for a decision (with staging) stay
// held.
//
// Catalog: each job holds the catalog snapshot (live_catalog.h) it was
// admitted with (a recovered job: the one in force at Start()) until it
// ends, so that a reload of the pipelines never changes the logic of a job
// already queued or running; retention and rollbacks use the catalog in
// force.
//
// Ownership: owns its worker pool and its in-memory jobs; does not own the
// live catalog, store, engine, clock or observer, which must outlive it.
// Thread-safe: every public method may be called from any thread.

#ifndef BACKFILL_CORE_JOB_RUNNER_H_
#define BACKFILL_CORE_JOB_RUNNER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/admission.h"
#include "core/base/clock.h"
#include "core/model/catalog.h"
#include "core/model/job.h"
#include "core/model/live_catalog.h"
#include "core/plan/planner.h"
#include "core/ports/command_runner.h"
#include "core/ports/engine.h"
#include "core/ports/http_client.h"
#include "core/ports/state_store.h"
#include "core/rollback_step.h"
#include "core/run/job_observer.h"
#include "core/run/storage_alarm.h"
#include "core/run/task_graph.h"
#include "core/run/task_writer.h"
#include "core/run/worker_pool.h"
#include "core/validate_step.h"

namespace backfill {

// The most jobs a message names when it lists the jobs that hold
// partitions (JobRunner::Describe); the others are counted.
inline constexpr size_t kMaxJobsDescribed = 5;

struct RunnerOptions {
  int workers = 2;       // partitions recomputed at once, over all jobs
  int max_attempts = 3;  // per partition task (failures of the warehouse's
                         // storage, such as a full disk, do not count)
  absl::Duration retry_backoff = absl::Milliseconds(100);  // first wait
  absl::Duration max_backoff = absl::Seconds(10);
  // How many times a job recomputes partitions whose staged rows were lost
  // after their checkpoints before it gives up (VALIDATION_FAILED).
  int max_restage_rounds = 2;
  // How the confirm step reaches downstream consumers (confirm_step.h);
  // not owned, may be null (a consumer that needs one is then unhealthy).
  HttpClient* http = nullptr;
  CommandRunner* commands = nullptr;
};

class JobRunner {
 public:
  JobRunner(const LiveCatalog* catalog, StateStore* store, Engine* engine,
            const Clock* clock, JobObserver* observer, RunnerOptions options);
  ~JobRunner();  // calls Shutdown()

  JobRunner(const JobRunner&) = delete;
  JobRunner& operator=(const JobRunner&) = delete;

  // Resumes what the store holds unfinished and starts scheduling.
  absl::Status Start();
  // Stops taking work, lets running closures finish (partitions checkpoint)
  // and joins the pool. Unfinished jobs resume at the next Start().
  void Shutdown();

  // OK while running; UNAVAILABLE before Start() and once stopping.
  absl::Status Accepting();

  // How many jobs are QUEUED: admitted and waiting to start (behind
  // overlapping jobs, or about to be started).
  int64_t QueuedJobs();

  // A job the store has just created (QUEUED): admitted after every job
  // admitted so far; it starts as soon as no earlier job holds one of its
  // partitions. `catalog` is the snapshot it was planned with; it runs with
  // it to its end (null: the catalog in force).
  void Admit(const Job& job, std::shared_ptr<const Catalog> catalog = nullptr);

  // Jobs that hold partitions of `plan` (a job submitted with it would wait
  // for them), in admission order, skipping jobs submitted with
  // `own_key` (a repeated submit); `conflicts` gets up to `max` shared
  // partitions.
  std::vector<Admission::Overlap> Blocking(const Plan& plan,
                                           const std::string& own_key,
                                           std::vector<Conflict>* conflicts,
                                           size_t max);
  // "bf-3 (RUNNING, 12 shared partitions)" for messages: the first
  // kMaxJobsDescribed jobs, then how many more there are ("bf-1 (...), ...,
  // bf-5 (...), ... and 77 more jobs"), so that a message stays short however
  // many jobs overlap.
  std::string Describe(const std::vector<Admission::Overlap>& overlaps);

  // The operators' decisions. Each returns the job as stored afterwards.
  // Cancel: a queued, running, paused or held job ends CANCELLED, its
  // staging dropped (cancelling a cancelled job returns it). Pause: a queued
  // or running job stops starting partitions (running ones finish and
  // checkpoint) and keeps its partitions. Resume: a paused job continues
  // from its checkpoints. Retry: a FAILED job that kept its staging runs its
  // failed (and never-run) partitions again, keeping the staged ones and
  // its pinned inputs.
  // `actor`, when not empty, is who decided: the audit event's message says
  // "cancelled by <actor>: <reason>".
  absl::StatusOr<Job> Cancel(const std::string& id, const std::string& reason,
                             const std::string& actor = "");
  absl::StatusOr<Job> Pause(const std::string& id, const std::string& reason,
                            const std::string& actor = "");
  absl::StatusOr<Job> Resume(const std::string& id, const std::string& reason,
                             const std::string& actor = "");
  absl::StatusOr<Job> Retry(const std::string& id, const std::string& reason,
                            const std::string& actor = "");

  // Restores what a SUCCEEDED or DOWNSTREAM_UNHEALTHY job's publish
  // replaced, in every dataset of the job in one warehouse transaction
  // (rollback_step.h says when later jobs forbid it and what --force
  // does), and records it: the job (and the later jobs taken along) end
  // ROLLED_BACK, lineage gets a rollback version per partition. Refused
  // (FAILED_PRECONDITION, nothing changed) for a job in another state,
  // while a job that holds partitions (admission.h) shares one with it, or
  // when a rollback copy it needs expired under its dataset's retention
  // policy. While it runs it holds the job's partitions: jobs submitted
  // meanwhile wait for it. Jobs held for a decision (FAILED with staging,
  // VALIDATION_FAILED, AWAITING_APPROVAL) that share a partition with it
  // computed against the rows it withdraws: once the warehouse restored
  // them, they are superseded as by a newer overlapping job (CANCELLED,
  // "superseded by the rollback of ...", staging dropped); a refused or
  // failed rollback leaves them held. A ROLLED_BACK job is returned as it
  // is.
  absl::StatusOr<Job> Rollback(const std::string& id,
                               const RollbackRequest& request);

  // Confirms the consumers of a SUCCEEDED or DOWNSTREAM_UNHEALTHY job's
  // datasets again (confirm_step.h): the job moves to CONFIRMING (holding
  // its partitions: jobs submitted meanwhile wait), then to SUCCEEDED or
  // DOWNSTREAM_UNHEALTHY. Returns the job as stored once CONFIRMING.
  // FAILED_PRECONDITION (nothing changes) for a job in another state, one
  // being confirmed or rolled back, or while a job that holds partitions
  // shares one with it.
  absl::StatusOr<Job> Confirm(const std::string& id, const std::string& reason,
                              const std::string& actor = "");

  // Drops the rollback copies that expired under their datasets' retention
  // policies (retention.h). Called at Start() and after each publish; best
  // effort (a failure is retried the next time). Returns how many copies
  // were dropped.
  absl::StatusOr<int64_t> EnforceRetention();

  // Publishes a job held for an operator's approval: one AWAITING_APPROVAL,
  // or one VALIDATION_FAILED when `approval.override_validation` (its
  // staging is checked to be intact first; the checks it failed are not run
  // again, not even after a restart). Records the approval (who, why,
  // override, when) with the move to PUBLISHING and returns the job. A job
  // approved before returns as it is (nothing is published twice). Refused
  // (FAILED_PRECONDITION, nothing changes) in any other state, and while a
  // newer job overlapping it has started: that job supersedes it.
  absl::StatusOr<Job> Approve(const std::string& id, const Approval& approval);

  // Blocks until the job changes after `*version` (0: returns at once) or
  // `deadline` passes; returns the job (in `first_view` when `*version` was
  // 0, progress only otherwise: no partition lists) and sets `*version`.
  absl::StatusOr<Job> WaitForChange(const std::string& id, uint64_t* version,
                                    absl::Time deadline,
                                    JobView first_view = JobView::kFull);

 private:
  struct Active;
  enum class Phase {
    kWaiting,     // QUEUED: admitted, waiting for earlier overlapping jobs
    kPreparing,   // staging and pins are being prepared
    kRunning,     // RUNNING: partitions are dispatched
    kPaused,      // PAUSED: nothing starts; running partitions finish
    kFinishing,   // validating, publishing, confirming
    kFailing,     // a partition failed for good: draining
    kCancelling,  // cancelled: draining
    kSettling,    // drained; its end is being written
    kHeld,        // FAILED (staging kept) or VALIDATION_FAILED
    kDone,        // ended; forgotten once no closure uses it
  };

  // --- Steps, run on pool threads without mu_ ---
  void Prepare(const std::string& id);
  // Runs batch number `batch` of the job's partitions (StartBatchLocked):
  // stages each in turn, its start and checkpoint queued to the task
  // writer, then waits for those writes and hands each partition back to
  // the graph. A partition is done only once its checkpoint is committed,
  // as when it runs alone. Of the partitions after the first it starts
  // only those it still holds (Active::held); those another batch took
  // over are that batch's.
  void RunTasks(const std::string& id, uint64_t batch,
                const std::vector<size_t>& indices);
  // True when another job has partitions ready and would get a worker
  // before `job` (or take turns with it): a batch then hands back what it
  // has not started.
  bool OtherJobWaitsLocked(const Active& job) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // How many ready partitions of `job` one worker takes at once.
  size_t BatchSizeLocked(const Active& job) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Adds a partition's staging time to the job's average.
  void NoteStageTimeLocked(Active* job, absl::Duration took)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A batch is sized to take about kBatchTime, at most kMaxBatch.
  static constexpr absl::Duration kBatchTime = absl::Milliseconds(5);
  static constexpr size_t kMaxBatch = 32;
  void Finish(const std::string& id);
  // Validate / publish / confirm for Finish; OK when the job moved on as it
  // should (or was left for recovery: CANCELLED status).
  // Prepares the job's staging in the engine once per process (after a
  // restart a loaded job is not): idempotent, keeps staging and pins. Every
  // step that reads a loaded job's staging calls it first.
  absl::Status EnsurePrepared(Active* job);
  // PrepareJob with `layout` less the partitions the early cutoff let go of
  // (core/early_cutoff.h), then releases those in the engine again (a
  // restart may have come between a task's record and its release).
  absl::Status PrepareStaging(const JobLayout& layout,
                              const std::vector<PartitionTask>& tasks);
  // Early cutoff: the newest lineage record of a partition (nullopt: none),
  // read with retries; and the engine's release of one partition.
  absl::StatusOr<std::optional<LineageRecord>> LatestLineage(
      const std::string& dataset, const std::string& partition);
  absl::Status ReleaseCutOff(const std::string& id, const DatasetSpec& dataset,
                             const std::string& partition);
  absl::Status ValidateJob(Active* job, bool* done);
  // ValidateStaging of job `id`, timed with the clock and reported to the
  // observer (OnJobValidationTime), whatever its outcome.
  absl::StatusOr<ValidationOutcome> ValidateTimed(
      const std::string& id, const JobLayout& layout,
      const std::vector<PartitionTask>& tasks, const ValidateOptions& options);
  // `hold` checks failed (and no `error` one): AWAITING_APPROVAL.
  absl::Status HoldJob(Active* job, const ValidationOutcome& outcome,
                       bool* done);
  absl::Status PublishJob(Active* job);
  // Tells the observer what the publish of `id` replaced (`published`:
  // partitions and rows by dataset, from PublishedPerDataset) and what each
  // dataset cost.
  void ReportPublished(
      const std::string& id,
      const std::vector<JobObserver::PublishedDataset>& published);
  // Tells the observer about each failing check of a validation.
  void ReportCheckFailures(const std::vector<CheckResult>& results);
  // Computes the diff of the job's staging and stores it with the job.
  absl::Status RecordDiff(Active* job, const JobLayout& layout);
  void Settle(Active* job);
  // A move records the new state in the store before the job here follows
  // it: an operator who read AWAITING_APPROVAL may ask before the job is
  // held. Waits for a move in flight on a finishing job `id`, so that
  // Cancel and Approve decide on the state the operator saw.
  void AwaitMoveInFlight(const std::string& id);
  // Ends a job held for a decision CANCELLED, "superseded by `by`" (a
  // newer job or a rollback over some of its partitions); `held` was
  // reserved by ReserveHeldOverlapsLocked. Not recorded: it stays held.
  void Supersede(Active* held, const std::string& by);
  // The end of a job recorded CANCELLED: its tasks are cancelled, its
  // staging dropped, and it is forgotten.
  void EndCancelled(Active* job);
  // Loads tasks, layout and graph for a job (once).
  absl::Status Load(Active* job);
  absl::StatusOr<JobLayout> LayoutOf(const Catalog& catalog, const Job& job,
                                     bool* complete) const;

  // Records `to` (store first, retried while storage fails, then memory,
  // then the observer), if the job is still in `required` phase; ABORTED
  // otherwise. Serialized per job.
  // `then`: the phase the job ends in (EndLocked), set under the same lock
  // as its new state, so that no caller sees the new state in the old phase
  // (e.g. a cancel of a job just held for approval).
  absl::Status Move(Active* job, JobState to, const std::string& message,
                    std::optional<Phase> required,
                    std::optional<Phase> then = std::nullopt)
      ABSL_LOCKS_EXCLUDED(mu_);
  // A partition failed for good: the job fails (once).
  void FailJob(Active* job, const std::string& failure)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Runs `write` until it succeeds, fails for good (not a storage failure
  // that may pass), or the runner stops (CANCELLED).
  absl::Status Persist(JobObserver::Storage storage, const std::string& what,
                       const std::function<absl::Status()>& write);
  bool Stopping() ABSL_LOCKS_EXCLUDED(mu_);

  // --- Under mu_ ---
  Active* FindLocked(const std::string& id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Starts waiting jobs that are free to start, then dispatches tasks.
  void PumpLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Gives free workers batches: of the best job's ready partitions, or of
  // partitions another batch holds and has not started when no job has
  // ready ones or the holder's job has the higher priority.
  void DispatchLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Hands `indices` (taken from the job's graph, or from another batch's
  // held partitions) to a worker as a new batch: the first starts at once,
  // the others are held (Active::held) until the batch gets to them or a
  // free worker takes them over.
  void StartBatchLocked(Active* job, std::vector<size_t> indices)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // True (once) when a failing or cancelled job has drained: the caller
  // then runs Settle outside the lock.
  bool TakeSettleLocked(Active* job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Undoes a decision that could not be recorded.
  void RestorePhaseLocked(Active* job, Phase before)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A running job whose partitions are all staged, none still running,
  // goes on to validation (Finish).
  void StartFinishingIfDoneLocked(Active* job)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A closure of the job ended: forgets a done job once idle.
  void ReleaseLocked(Active* job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // ReleaseLocked, then TakeSettleLocked unless the job was forgotten.
  bool ReleaseAndTakeSettleLocked(Active* job)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The job ended (SUCCEEDED, CANCELLED) or is held: leaves admission (or
  // stops blocking), reports to the observer via `finished`.
  void EndLocked(Active* job, Phase phase) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void NotifyLocked(const std::string& id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A job records SUCCEEDED or DOWNSTREAM_UNHEALTHY before it lets go of its
  // partitions (metrics, retention): waits until its own run let go, so that
  // an action on the ended job is not refused as a conflict with itself.
  // FAILED_PRECONDITION while the job is being confirmed again, UNAVAILABLE
  // when the run does not let go in time or the runner stops.
  absl::Status AwaitOwnRunEndedLocked(const std::string& id,
                                      absl::string_view action)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The jobs held for a decision that share partitions with `id` (an
  // admitted job, or a rollback holding its job's partitions), reserved
  // for Supersede: none of them is approved, retried or cancelled
  // meanwhile.
  std::vector<Active*> ReserveHeldOverlapsLocked(const std::string& id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Gives reserved jobs back, held as before (the supersede did not
  // happen).
  void UnreserveHeldLocked(const std::vector<Active*>& reserved)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SubmitLocked(std::function<void()> fn)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string DescribeLocked(const std::vector<Admission::Overlap>& overlaps)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Non-held jobs sharing partitions with `id` that have started (are no
  // longer only waiting): a held job must not publish under them.
  std::vector<Admission::Overlap> StartedOverlapsLocked(const std::string& id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReportFinished(const std::string& id, JobState state, double estimate)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Drops staging left by jobs that ended (a crash between their end and
  // the cleanup).
  void SweepOrphans();
  // Records the rollbacks the warehouse committed but the store did not
  // (a crash in between): their markers name this store and their jobs are
  // still SUCCEEDED or DOWNSTREAM_UNHEALTHY. Nothing is restored again.
  // `recovered` gets the ids of the jobs whose rollback it recorded.
  absl::Status RecoverRollbacks(std::vector<std::string>* recovered);
  // The rollback's warehouse step and record (Rollback without the
  // admission bookkeeping). `with_ids`: null to decide which later jobs go
  // along (LaterJobs); else those of the warehouse's marker (recovery).
  // `restored_rows` (if set) runs once the warehouse restored the rows,
  // before the state store records the rollback.
  absl::StatusOr<Job> RollBack(const Job& job, const RollbackRequest& request,
                               const std::vector<std::string>* with_ids,
                               const std::function<void()>& restored_rows);

  const LiveCatalog* const catalog_;
  StateStore* const store_;
  Engine* const engine_;
  const Clock* const clock_;
  JobObserver* const observer_;
  const RunnerOptions options_;
  // Every durable write's outcome goes through it: failures, and the
  // recovery after them.
  StorageAlarm storage_alarm_{observer_};

  absl::Mutex mu_;
  absl::CondVar changed_;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::map<std::string, std::unique_ptr<Active>> jobs_ ABSL_GUARDED_BY(mu_);
  Admission admission_ ABSL_GUARDED_BY(mu_);
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;  // batches of partitions running
  std::map<std::string, int> dataset_running_ ABSL_GUARDED_BY(mu_);
  uint64_t dispatch_seq_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, uint64_t> versions_ ABSL_GUARDED_BY(mu_);
  // Jobs being rolled back: they hold their partitions in admission_.
  std::set<std::string> rolling_back_ ABSL_GUARDED_BY(mu_);
  uint64_t next_version_ ABSL_GUARDED_BY(mu_) = 2;

  // Starts and checkpoints of partitions, group-committed (created by
  // Start; declared before pool_, whose closures wait for it).
  std::unique_ptr<TaskWriter> task_writer_;
  std::unique_ptr<WorkerPool> pool_;
};

}  // namespace backfill

#endif  // BACKFILL_CORE_JOB_RUNNER_H_
