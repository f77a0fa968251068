// JobCommands: every decision taken on jobs from outside their run — a new
// job's admission, and the operators' cancel, pause, resume, retry,
// approve, confirm again and roll back. Each returns the job as stored
// afterwards, or FAILED_PRECONDITION saying why the job's state refuses it
// (nothing changed).
//
// Admission decisions are taken one at a time, under the admission lock
// this unit owns: a new job's (what holds its partitions, the refusal of a
// full queue or of a `no_wait` submit that would wait, its creation in the
// store and its admission: AdmitNew), an approval's, a retry's and a
// confirmation's. What a submit found holding its partitions therefore
// stays true until its job is admitted. A rollback decides under the
// table's lock alone (it may take long, and it holds its partitions in
// admission itself while it runs).
//
// What a decision sets in motion — starting jobs, finishing one, settling
// a cancelled one, superseding held ones — is the scheduler's (JobScheduler,
// implemented by the job runner).
//
// Ownership: borrows the context, catalog and scheduler, which must
// outlive it. Thread-safety: thread-safe; every method may be called from
// any thread.

#ifndef BACKFILL_CORE_RUN_JOB_COMMANDS_H_
#define BACKFILL_CORE_RUN_JOB_COMMANDS_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "core/model/catalog.h"
#include "core/model/job.h"
#include "core/model/live_catalog.h"
#include "core/ports/state_store.h"
#include "core/run/active_job.h"
#include "core/run/admission.h"
#include "core/run/rollback_step.h"
#include "core/run/step_context.h"

namespace backfill {

// What the commands set in motion, done by the scheduler that runs the
// jobs (the job runner). The ...Locked methods need the table's lock.
// A decision on a job (JobCommands' cancel, pause, resume, retry or
// approve), as sent to the replica of a group that runs the job.
struct Decision {
  std::string kind;  // "cancel", "pause", "resume", "retry", "approve"
  std::string reason;
  std::string actor;
  Approval approval;  // "approve" only
};

class JobScheduler {
 public:
  virtual ~JobScheduler() = default;
  // Starts the waiting jobs that are free to start, then hands free
  // workers partitions.
  virtual void PumpLocked() = 0;
  // A running job whose partitions are all staged, none still running,
  // goes on to its finishing steps.
  virtual void StartFinishingIfDoneLocked(ActiveJob* job) = 0;
  // Runs the finishing steps (validate, publish, confirm) of job `id`, in
  // kFinishing, on a worker; the caller counted that closure in its `busy`.
  virtual void FinishLocked(const std::string& id) = 0;
  // Writes the end of a drained job (ActiveJob::TakeSettle): FAILED, held
  // with its staging; or CANCELLED, staging dropped, forgotten.
  virtual void Settle(ActiveJob* job) = 0;
  // Ends a job held for a decision (reserved by
  // JobTable::ReserveHeldOverlapsLocked) CANCELLED, "superseded by `by`";
  // if that cannot be recorded, it stays held.
  virtual void Supersede(ActiveJob* held, const std::string& by) = 0;
  // In a group: when another replica runs job `id`, sends it `decision`
  // and returns the job once that replica took it (or its refusal, as the
  // replica answered: the same codes and messages as here); nullopt when
  // the decision is this replica's to take (it runs the job, or nobody
  // does). Always nullopt for a single process.
  virtual absl::StatusOr<std::optional<Job>> Forward(const std::string& id,
                                                     const Decision& decision) {
    (void)id, (void)decision;
    return std::optional<Job>();
  }
  // In a group: a job was created here; claim it soon.
  virtual void Created(const std::string& id) { (void)id; }
  // In a group: claims ended job `id` for `step` ("confirm", "rollback")
  // and makes sure that no other replica runs a job over `scope`, claiming
  // those nobody runs. FAILED_PRECONDITION naming the replica otherwise.
  // The caller gives the lease back (Done) when the step ends, unless the
  // job stays in the table (it is then given back when forgotten).
  virtual absl::Status ClaimEnded(const std::string& id,
                                  const std::string& step, const Scope& scope) {
    (void)id, (void)step, (void)scope;
    return absl::OkStatus();
  }
  virtual void Done(const std::string& id) { (void)id; }
};

// A new job, planned and checked, for its admission (AdmitNew).
struct NewJob {
  // QUEUED, with its request, plan, idempotency key and request
  // fingerprint; the decision sets its message.
  Job job;
  // The catalog it was planned with; it runs with it to its end.
  std::shared_ptr<const Catalog> catalog;
  // Refuse (FAILED_PRECONDITION) instead of queueing behind an overlapping
  // job.
  bool no_wait = false;
  // Who asked and why, appended to the job's message ("submitted by ...").
  std::string submitted_by;
  // Asked just before the job is created: an error (whoever asked went
  // away) creates nothing. May be empty.
  std::function<absl::Status()> abandoned;
};

class JobCommands {
 public:
  JobCommands(const StepContext* ctx, const LiveCatalog* catalog,
              JobScheduler* scheduler)
      : ctx_(ctx), catalog_(catalog), scheduler_(scheduler) {}

  JobCommands(const JobCommands&) = delete;
  JobCommands& operator=(const JobCommands&) = delete;

  // Creates and admits a new job, as one admission decision: UNAVAILABLE
  // while the runner does not accept; the job already created with the
  // same idempotency key (a concurrent submit: `created` false), whatever
  // its request; RESOURCE_EXHAUSTED when RunnerOptions::max_queued_jobs
  // jobs are QUEUED; FAILED_PRECONDITION naming the jobs that hold some of
  // its partitions when `no_wait`; else the job the store created (or the
  // one it found with the key), admitted after every job admitted so far:
  // it starts as soon as no earlier job holds one of its partitions.
  absl::StatusOr<CreateJobResult> AdmitNew(NewJob new_job)
      ABSL_LOCKS_EXCLUDED(admission_mu_);

  // Jobs that hold partitions of `plan` (a job submitted with it would wait
  // for them), in admission order; `conflicts` gets up to `max` shared
  // partitions.
  std::vector<Admission::Overlap> Blocking(const Plan& plan,
                                           std::vector<Conflict>* conflicts,
                                           size_t max);

  // Cancel: a queued, running, paused or held job ends CANCELLED, its
  // staging dropped (cancelling a cancelled job returns it). Pause: a queued
  // or running job stops starting partitions (running ones finish and
  // checkpoint) and keeps its partitions. Resume: a paused job continues
  // from its checkpoints. Retry: a FAILED job that kept its staging runs its
  // failed (and never-run) partitions again, keeping the staged ones and
  // its pinned inputs, behind every job admitted meanwhile.
  // `actor`, when not empty, is who decided: the audit event's message says
  // "cancelled by <actor>: <reason>".
  absl::StatusOr<Job> Cancel(const std::string& id, const std::string& reason,
                             const std::string& actor = "");
  absl::StatusOr<Job> Pause(const std::string& id, const std::string& reason,
                            const std::string& actor = "");
  absl::StatusOr<Job> Resume(const std::string& id, const std::string& reason,
                             const std::string& actor = "");
  absl::StatusOr<Job> Retry(const std::string& id, const std::string& reason,
                            const std::string& actor = "")
      ABSL_LOCKS_EXCLUDED(admission_mu_);

  // Publishes a job held for an operator's approval: one AWAITING_APPROVAL,
  // or one VALIDATION_FAILED when `approval.override_validation` (its
  // staging is checked to be intact first; the checks it failed are not run
  // again, not even after a restart). Records the approval (who, why,
  // override, when) with the move to PUBLISHING and returns the job. A job
  // approved before returns as it is (nothing is published twice). Refused
  // (FAILED_PRECONDITION, nothing changes) in any other state, and while a
  // newer job overlapping it has started: that job supersedes it.
  absl::StatusOr<Job> Approve(const std::string& id, const Approval& approval)
      ABSL_LOCKS_EXCLUDED(admission_mu_);

  // Confirms the consumers of a SUCCEEDED or DOWNSTREAM_UNHEALTHY job's
  // datasets again (confirm_step.h): the job moves to CONFIRMING (holding
  // its partitions: jobs submitted meanwhile wait), then to SUCCEEDED or
  // DOWNSTREAM_UNHEALTHY. Returns the job as stored once CONFIRMING.
  // FAILED_PRECONDITION (nothing changes) for a job in another state, one
  // being confirmed or rolled back, or while a job that holds partitions
  // shares one with it.
  absl::StatusOr<Job> Confirm(const std::string& id, const std::string& reason,
                              const std::string& actor = "")
      ABSL_LOCKS_EXCLUDED(admission_mu_);

  // Restores what a SUCCEEDED or DOWNSTREAM_UNHEALTHY job's publish
  // replaced (rollback_step.h says when later jobs forbid it and what
  // `force` does). Refused (FAILED_PRECONDITION, nothing changed) for a job
  // in another state, while a job that holds partitions shares one with it,
  // or when a rollback copy it needs expired under its dataset's retention
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

 private:
  // A move records the new state in the store before the job here follows
  // it: an operator who read AWAITING_APPROVAL may ask before the job is
  // held. Waits for a move in flight on a finishing job `id`, so that
  // Cancel and Approve decide on the state the operator saw.
  void AwaitMoveInFlight(const std::string& id);
  // Undoes a decision that could not be recorded.
  void RestorePhaseLocked(ActiveJob* job, JobPhase before);

  const StepContext* const ctx_;
  const LiveCatalog* const catalog_;
  JobScheduler* const scheduler_;
  // Serializes admission decisions (see above). Taken before the table's
  // lock, never while holding it.
  absl::Mutex admission_mu_;
};

}  // namespace backfill

#endif  // BACKFILL_CORE_RUN_JOB_COMMANDS_H_
