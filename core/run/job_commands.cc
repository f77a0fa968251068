#include "core/run/job_commands.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/error_details.h"
#include "core/base/plural.h"
#include "core/base/status_macros.h"
#include "core/governance/approval.h"
#include "core/plan/early_cutoff.h"
#include "core/run/confirm_step.h"
#include "core/run/validate_step.h"

namespace backfill {
namespace {

using Storage = JobObserver::Storage;

// " by <actor>" for the audit message of an operator's decision; "" when
// no one is named.
std::string By(const std::string& actor) {
  return actor.empty() ? "" : absl::StrCat(" by ", actor);
}

}  // namespace

// ---------------------------------------------------------------------------
// Admission

absl::StatusOr<CreateJobResult> JobCommands::AdmitNew(NewJob new_job) {
  JobTable* const jobs = ctx_->jobs();
  const RunnerOptions& options = ctx_->options();
  absl::ReleasableMutexLock admission(&admission_mu_);
  RETURN_IF_ERROR(jobs->Accepting());
  Job& job = new_job.job;
  {
    // Looked up again under the admission lock: a concurrent submit with
    // the same key may have created it meanwhile.
    ASSIGN_OR_RETURN(std::optional<Job> found,
                     ctx_->store()->FindJobByKey(job.idempotency_key));
    if (found.has_value()) return CreateJobResult{*std::move(found), false};
  }
  // Bounded queue: jobs waiting to start cost memory and admission work,
  // and a client in a submit loop must be told, not queued without end.
  const int64_t limit = std::max<int64_t>(1, options.max_queued_jobs);
  if (const int64_t queued = jobs->QueuedJobs(); queued >= limit) {
    return WithReason(
        absl::ResourceExhaustedError(absl::StrCat(
            "too many queued jobs: ", queued,
            queued == 1 ? " job is" : " jobs are",
            " QUEUED (waiting to start), the limit set by ",
            options.max_queued_jobs_source, " is ", limit,
            "; nothing was submitted: submit again once some have started "
            "(with the same `idempotency_key` a repeated submit never creates "
            "a second job), or raise the limit")),
        "QUEUED_JOBS_EXHAUSTED", {{"limit", absl::StrCat(limit)}});
  }
  std::vector<Admission::Overlap> blockers =
      jobs->Blocking(job.plan, job.idempotency_key, nullptr, 0);
  if (blockers.empty()) {
    job.message =
        absl::StrCat("queued: ", job.plan.total_partitions(), " partitions in ",
                     job.plan.datasets.size(), " dataset(s)");
  } else {
    const std::string who = jobs->Describe(blockers);
    if (new_job.no_wait) {
      // The ids of the jobs the message names (the earliest), and how many
      // there are in all.
      std::vector<std::string> named;
      for (size_t i = 0; i < blockers.size() && i < kMaxJobsDescribed; ++i) {
        named.push_back(blockers[i].job_id);
      }
      return WithFieldViolation(
          WithReason(absl::FailedPreconditionError(absl::StrCat(
                         "some planned partitions are held by ", who,
                         "; without `no_wait` the job would queue behind "
                         "them and start when they finish")),
                     "PARTITIONS_HELD",
                     {{"backfill_ids", absl::StrJoin(named, ",")},
                      {"backfill_count", absl::StrCat(blockers.size())}}),
          "no_wait", absl::StrCat("the planned partitions are held by ", who));
    }
    job.message = absl::StrCat("waiting for ", who,
                               " to finish: per partition, jobs run in the "
                               "order they were submitted");
  }
  absl::StrAppend(&job.message, "; ", new_job.submitted_by);
  if (new_job.abandoned) RETURN_IF_ERROR(new_job.abandoned());
  ASSIGN_OR_RETURN(CreateJobResult created,
                   ctx_->store()->CreateJob(job, ctx_->clock()->Now()));
  if (!created.created) return created;
  if (options.leases != nullptr) {
    // A replica of a group runs what it claims: this one first, unless it
    // shares partitions with jobs another replica runs (that one then
    // claims it, to run them in order).
    admission.Release();
    scheduler_->Created(created.job.id);
    return created;
  }
  auto active = std::make_unique<ActiveJob>();
  active->catalog =
      new_job.catalog != nullptr ? new_job.catalog : catalog_->Get();
  active->job = created.job;
  active->state = created.job.state;
  active->phase = JobPhase::kWaiting;
  Scope scope = ScopeOf(created.job.plan);
  absl::MutexLock lock(jobs->mu());
  jobs->admission().Add(created.job.id, std::move(scope));
  jobs->AddLocked(std::move(active));
  jobs->NotifyLocked(created.job.id);
  scheduler_->PumpLocked();
  return created;
}

std::vector<Admission::Overlap> JobCommands::Blocking(
    const Plan& plan, std::vector<Conflict>* conflicts, size_t max) {
  return ctx_->jobs()->Blocking(plan, "", conflicts, max);
}

// ---------------------------------------------------------------------------
// Cancel, pause, resume

void JobCommands::RestorePhaseLocked(ActiveJob* job, JobPhase before) {
  job->phase = before;
  if (before == JobPhase::kPreparing && !job->preparing) {
    // The preparation ended meanwhile and left the phase alone; it moved
    // the job to RUNNING unless the decision aborted that move.
    job->phase = job->prepared && job->state == JobState::kRunning
                     ? JobPhase::kRunning
                     : JobPhase::kWaiting;
  }
  if (job->phase == JobPhase::kRunning && job->graph) {
    job->graph->Requeue();
    // The last partition may have been staged meanwhile.
    scheduler_->StartFinishingIfDoneLocked(job);
  }
}

void JobCommands::AwaitMoveInFlight(const std::string& id) {
  JobTable* const jobs = ctx_->jobs();
  ActiveJob* job;
  {
    absl::MutexLock lock(jobs->mu());
    job = jobs->FindLocked(id);
    if (job == nullptr || job->phase != JobPhase::kFinishing) return;
    ++job->busy;  // pinned while waiting
  }
  { absl::MutexLock transition(&job->transition_mu); }
  bool settle;
  {
    absl::MutexLock lock(jobs->mu());
    settle = jobs->ReleaseAndTakeSettleLocked(job);
  }
  if (settle) scheduler_->Settle(job);
}

absl::StatusOr<Job> JobCommands::Cancel(const std::string& id,
                                        const std::string& reason,
                                        const std::string& actor) {
  // In a group, the replica that runs the job takes the decision.
  ASSIGN_OR_RETURN(
      std::optional<Job> elsewhere,
      scheduler_->Forward(id, Decision{"cancel", reason, actor, {}}));
  if (elsewhere.has_value()) return *std::move(elsewhere);
  JobTable* const jobs = ctx_->jobs();
  AwaitMoveInFlight(id);
  ActiveJob* job = nullptr;
  JobPhase before = JobPhase::kWaiting;
  {
    absl::MutexLock lock(jobs->mu());
    job = jobs->FindLocked(id);
    if (job != nullptr) {
      before = job->phase;
      switch (job->phase) {
        case JobPhase::kWaiting:
        case JobPhase::kPreparing:
        case JobPhase::kRunning:
        case JobPhase::kPaused:
        case JobPhase::kHeld:
          job->phase = JobPhase::kCancelling;
          if (job->graph) job->graph->ClearReady();
          break;
        case JobPhase::kCancelling:
        case JobPhase::kSettling:
        case JobPhase::kDone:
          job = nullptr;  // already ending: answer with the job
          break;
        case JobPhase::kFinishing:
          return absl::FailedPreconditionError(absl::StrCat(
              "job ", id, " is ", JobStateName(job->state),
              ": every partition is staged and it is being validated or "
              "published; it can no longer be cancelled"));
        case JobPhase::kFailing:
          return absl::FailedPreconditionError(
              absl::StrCat("job ", id, " is failing (", job->failure,
                           "); cancel it once it is FAILED"));
      }
    }
  }
  if (job == nullptr) {
    ASSIGN_OR_RETURN(Job stored, ctx_->store()->GetJob(id));
    if (stored.state == JobState::kCancelled || !IsTerminal(stored.state)) {
      return stored;
    }
    return absl::FailedPreconditionError(
        absl::StrCat("job ", id, " is already ", JobStateName(stored.state),
                     stored.state == JobState::kFailed ||
                             stored.state == JobState::kValidationFailed
                         ? " and kept no staging"
                         : "",
                     "; there is nothing to cancel"));
  }
  absl::Status moved = ctx_->Move(
      job, JobState::kCancelled,
      absl::StrCat("cancelled", By(actor), reason.empty() ? "" : ": ", reason),
      JobPhase::kCancelling);
  bool settle = false;
  {
    absl::MutexLock lock(jobs->mu());
    // Found again: once CANCELLED is recorded, a step of the job that was in
    // flight may have ended meanwhile, settled the job and forgotten it.
    job = jobs->FindLocked(id);
    if (!moved.ok()) {
      // Not recorded: the job goes on as before.
      if (job != nullptr) RestorePhaseLocked(job, before);
      scheduler_->PumpLocked();
    } else {
      settle = job != nullptr && job->TakeSettle();
    }
  }
  if (!moved.ok()) return moved;
  if (settle) scheduler_->Settle(job);
  return ctx_->store()->GetJob(id);
}

absl::StatusOr<Job> JobCommands::Pause(const std::string& id,
                                       const std::string& reason,
                                       const std::string& actor) {
  // In a group, the replica that runs the job takes the decision.
  ASSIGN_OR_RETURN(
      std::optional<Job> elsewhere,
      scheduler_->Forward(id, Decision{"pause", reason, actor, {}}));
  if (elsewhere.has_value()) return *std::move(elsewhere);
  JobTable* const jobs = ctx_->jobs();
  ActiveJob* job = nullptr;
  JobPhase before;
  int running = 0;
  {
    absl::MutexLock lock(jobs->mu());
    job = jobs->FindLocked(id);
    if (job == nullptr) {
      ASSIGN_OR_RETURN(Job stored, ctx_->store()->GetJob(id));
      return absl::FailedPreconditionError(
          absl::StrCat("job ", id, " is ", JobStateName(stored.state),
                       "; only queued or running jobs can be paused"));
    }
    before = job->phase;
    switch (job->phase) {
      case JobPhase::kWaiting:
      case JobPhase::kPreparing:
      case JobPhase::kRunning:
        job->phase = JobPhase::kPaused;
        if (job->graph) job->graph->ClearReady();
        running = job->running_tasks;
        break;
      case JobPhase::kPaused:
        job = nullptr;  // already paused: answer with the job
        break;
      default:
        return absl::FailedPreconditionError(absl::StrCat(
            "job ", id, " is ", JobStateName(job->state),
            job->phase == JobPhase::kFinishing
                ? ": every partition is staged and it is being validated or "
                  "published; it can no longer be paused"
                : "; only queued or running jobs can be paused"));
    }
  }
  if (job == nullptr) return ctx_->store()->GetJob(id);
  absl::Status moved = ctx_->Move(
      job, JobState::kPaused,
      absl::StrCat(
          "paused", By(actor), reason.empty() ? "" : ": ", reason,
          running > 0
              ? absl::StrCat(" (", Plural(running, "partition", "partitions"),
                             " finishing)")
              : ""),
      JobPhase::kPaused);
  {
    absl::MutexLock lock(jobs->mu());
    // Found again: a cancel that overtook the pause may have settled and
    // forgotten the job meanwhile.
    job = jobs->FindLocked(id);
    if (!moved.ok() && job != nullptr && job->phase == JobPhase::kPaused) {
      RestorePhaseLocked(job, before);
    }
    scheduler_->PumpLocked();
  }
  if (!moved.ok()) return moved;
  return ctx_->store()->GetJob(id);
}

absl::StatusOr<Job> JobCommands::Resume(const std::string& id,
                                        const std::string& reason,
                                        const std::string& actor) {
  // In a group, the replica that runs the job takes the decision.
  ASSIGN_OR_RETURN(
      std::optional<Job> elsewhere,
      scheduler_->Forward(id, Decision{"resume", reason, actor, {}}));
  if (elsewhere.has_value()) return *std::move(elsewhere);
  JobTable* const jobs = ctx_->jobs();
  ActiveJob* job = nullptr;
  {
    absl::MutexLock lock(jobs->mu());
    job = jobs->FindLocked(id);
    if (job == nullptr || job->phase != JobPhase::kPaused) {
      JobState state = job != nullptr ? job->state : JobState::kQueued;
      if (job == nullptr) {
        ASSIGN_OR_RETURN(Job stored, ctx_->store()->GetJob(id));
        state = stored.state;
      }
      if (state == JobState::kQueued || state == JobState::kRunning) {
        return ctx_->store()->GetJob(id);  // not paused: nothing to resume
      }
      return absl::FailedPreconditionError(
          absl::StrCat("job ", id, " is ", JobStateName(state),
                       "; only a paused job can be resumed"));
    }
  }
  RETURN_IF_ERROR(
      ctx_->Move(job, JobState::kQueued,
                 absl::StrCat("resumed", By(actor), reason.empty() ? "" : ": ",
                              reason, "; continuing from its checkpoints"),
                 JobPhase::kPaused));
  {
    absl::MutexLock lock(jobs->mu());
    // Found again: a cancel right after the resume may have settled and
    // forgotten the job meanwhile.
    job = jobs->FindLocked(id);
    if (job != nullptr && job->phase == JobPhase::kPaused) {
      job->phase = JobPhase::kWaiting;
      job->waiting_message.clear();
    }
    scheduler_->PumpLocked();
  }
  return ctx_->store()->GetJob(id);
}

// ---------------------------------------------------------------------------
// Retry, approve

absl::StatusOr<Job> JobCommands::Retry(const std::string& id,
                                       const std::string& reason,
                                       const std::string& actor) {
  // In a group, the replica that runs the job takes the decision.
  ASSIGN_OR_RETURN(
      std::optional<Job> elsewhere,
      scheduler_->Forward(id, Decision{"retry", reason, actor, {}}));
  if (elsewhere.has_value()) return *std::move(elsewhere);
  absl::MutexLock admission(&admission_mu_);
  JobTable* const jobs = ctx_->jobs();
  ActiveJob* job = nullptr;
  {
    absl::MutexLock lock(jobs->mu());
    job = jobs->FindLocked(id);
    // A job that just failed may still be draining the partitions that ran
    // when it failed: wait for that (bounded) rather than refuse.
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (job != nullptr &&
           (job->phase == JobPhase::kFailing ||
            (job->phase == JobPhase::kSettling &&
             job->settling_from == JobPhase::kFailing)) &&
           !jobs->StoppingLocked()) {
      if (jobs->WaitLocked(deadline)) break;
      job = jobs->FindLocked(id);
    }
    if (job != nullptr && job->phase == JobPhase::kHeld &&
        job->state == JobState::kFailed) {
      job->phase = JobPhase::kSettling;  // reserved for the retry
      ++job->busy;
    } else if (job != nullptr) {
      const JobState state = job->state;
      return absl::FailedPreconditionError(absl::StrCat(
          "job ", id, " is ", JobStateName(state),
          state == JobState::kValidationFailed
              ? ": its partitions were all recomputed and failed validation; "
                "running them again gives the same result. Fix the data or "
                "the transform and submit a new backfill"
              : "; only a FAILED job can be retried"));
    }
  }
  if (job == nullptr) {
    ASSIGN_OR_RETURN(Job stored, ctx_->store()->GetJob(id));
    if (stored.state == JobState::kFailed) {
      return absl::FailedPreconditionError(absl::StrCat(
          "job ", id,
          " failed and kept no staging to retry with (it was superseded, or "
          "could not be resumed after a restart): submit a new backfill"));
    }
    return absl::FailedPreconditionError(
        absl::StrCat("job ", id, " is ", JobStateName(stored.state),
                     "; only a FAILED job can be retried"));
  }
  {
    // A retry that would fail the same way is refused up front.
    Job copy;
    {
      absl::MutexLock lock(jobs->mu());
      copy = job->job;
      copy.state = job->state;
    }
    bool complete = true;
    absl::StatusOr<JobLayout> layout = LayoutOf(*job->catalog, copy, &complete);
    if (!layout.ok()) {
      absl::MutexLock lock(jobs->mu());
      job->phase = JobPhase::kHeld;
      jobs->ReleaseLocked(job);
      return absl::FailedPreconditionError(absl::StrCat(
          "job ", id, " cannot be retried: ", layout.status().message()));
    }
  }
  absl::StatusOr<Job> progress = ctx_->store()->GetJobProgress(id);
  const int64_t again =
      progress.ok() ? progress->counts.total - progress->counts.staged -
                          progress->counts.published -
                          progress->counts.unchanged - progress->counts.skipped
                    : 0;
  const int64_t kept = progress.ok() ? progress->counts.staged : 0;
  const std::string message = absl::StrCat(
      "retrying", By(actor),
      reason.empty() ? "" : absl::StrCat(" (", reason, ")"), ": ",
      Plural(again, "partition runs", "partitions run"), " again, ",
      Plural(kept, "staged partition is", "staged partitions are"), " kept");
  absl::Status s;
  {
    absl::MutexLock transition(&job->transition_mu);
    s = ctx_->Persist(Storage::kStateStore, absl::StrCat("retrying job ", id),
                      [&] {
                        return ctx_->store()
                            ->RetryJob(id, JobState::kFailed, JobState::kQueued,
                                       message, ctx_->clock()->Now())
                            .status();
                      });
  }
  if (!s.ok()) {
    absl::MutexLock lock(jobs->mu());
    job->phase = JobPhase::kHeld;
    jobs->ReleaseLocked(job);
    return s;
  }
  if (ctx_->observer() != nullptr) {
    ctx_->observer()->OnJobTransition(id, JobState::kFailed, JobState::kQueued,
                                      message);
  }
  {
    absl::MutexLock lock(jobs->mu());
    job->state = JobState::kQueued;
    job->job.message = message;
    job->loaded = false;
    job->prepared = false;
    job->validated = false;
    job->restage_rounds = 0;
    job->failure.clear();
    job->waiting_message.clear();
    job->phase = JobPhase::kWaiting;
    // Behind every job admitted meanwhile.
    jobs->admission().Add(id, ScopeOf(job->job.plan));
    jobs->ReleaseLocked(job);
    jobs->NotifyLocked(id);
    scheduler_->PumpLocked();
  }
  return ctx_->store()->GetJob(id);
}

absl::StatusOr<Job> JobCommands::Approve(const std::string& id,
                                         const Approval& request) {
  // In a group, the replica that runs the job takes the decision.
  ASSIGN_OR_RETURN(
      std::optional<Job> elsewhere,
      scheduler_->Forward(id, Decision{"approve", "", "", request}));
  if (elsewhere.has_value()) return *std::move(elsewhere);
  absl::MutexLock admission(&admission_mu_);
  JobTable* const jobs = ctx_->jobs();
  RETURN_IF_ERROR(CheckApprovalRequest(request));
  AwaitMoveInFlight(id);
  ActiveJob* job = nullptr;
  JobState from = JobState::kAwaitingApproval;
  bool held = false;
  {
    absl::MutexLock lock(jobs->mu());
    job = jobs->FindLocked(id);
    const bool approvable = job != nullptr && job->phase == JobPhase::kHeld &&
                            (job->state == JobState::kAwaitingApproval ||
                             (job->state == JobState::kValidationFailed &&
                              request.override_validation));
    held = job != nullptr && job->phase == JobPhase::kHeld;
    if (approvable) {
      std::vector<Admission::Overlap> started = jobs->StartedOverlapsLocked(id);
      if (!started.empty()) {
        return absl::FailedPreconditionError(absl::StrCat(
            "job ", id, " is ", JobStateName(job->state), " but ",
            jobs->DescribeLocked(started),
            " already recomputes some of its partitions; publishing ", id,
            " now could overwrite newer results, so it is not approved (the "
            "newer job supersedes it). Nothing was published"));
      }
      from = job->state;
      job->phase = JobPhase::kSettling;  // reserved for the approval
      ++job->busy;
      // From here it blocks newer overlapping jobs again, so that none of
      // them starts while it publishes.
      jobs->admission().SetHeld(id, false);
    } else {
      job = nullptr;
    }
  }
  if (job == nullptr) {
    ASSIGN_OR_RETURN(Job stored, ctx_->store()->GetJob(id));
    if (ApprovedAlready(stored)) return stored;
    return RefuseApproval(stored, request, held);
  }
  auto undo = [&](absl::Status s) {
    absl::MutexLock lock(jobs->mu());
    job->phase = JobPhase::kHeld;
    jobs->admission().SetHeld(id, true);
    jobs->ReleaseLocked(job);
    scheduler_->PumpLocked();
    return s;
  };
  absl::Status s = LoadJob(ctx_->store(), jobs->mu(), job);
  if (s.ok() && from == JobState::kValidationFailed) {
    // The operator overrides the checks, not lost staging: staging must
    // still hold what the partitions' checkpoints recorded.
    bool complete;
    JobLayout layout;
    {
      absl::MutexLock lock(jobs->mu());
      complete = job->layout_complete;
      layout = WithoutCutOff(job->layout, job->tasks);
    }
    if (!complete) {
      s = absl::FailedPreconditionError(absl::StrCat(
          "job ", id,
          " cannot be published: a dataset of it is no longer in the loaded "
          "pipelines"));
    } else {
      absl::StatusOr<ValidationOutcome> outcome =
          ValidateIntegrity(*ctx_, job, layout);
      if (!outcome.ok()) {
        s = outcome.status();
      } else if (!outcome->lost.empty()) {
        s = absl::FailedPreconditionError(absl::StrCat(
            "job ", id,
            " cannot be published: its staging no longer holds what the "
            "partition checkpoints recorded (",
            outcome->lost_summary,
            "); nothing was published. Submit a new backfill"));
      }
    }
  }
  if (!s.ok()) return undo(s);

  Approval approval = request;
  approval.from_state = from;
  approval.override_validation =
      request.override_validation && from == JobState::kValidationFailed;
  approval.approved_at = ctx_->clock()->Now();
  const std::string message = ApprovalMessage(approval);
  {
    absl::MutexLock transition(&job->transition_mu);
    s = ctx_->Persist(
        Storage::kStateStore, absl::StrCat("approving job ", id), [&] {
          return ctx_->store()->ApproveJob(id, from, JobState::kPublishing,
                                           approval, message,
                                           approval.approved_at);
        });
  }
  if (!s.ok()) return undo(s);
  if (ctx_->observer() != nullptr) {
    ctx_->observer()->OnJobTransition(id, from, JobState::kPublishing, message);
  }
  {
    absl::MutexLock lock(jobs->mu());
    job->state = JobState::kPublishing;
    job->job.message = message;
    job->job.approval = approval;
    // An override's staging was just checked; the failed checks are not
    // run again.
    if (approval.override_validation) job->validated = true;
    job->phase = JobPhase::kFinishing;
    jobs->NotifyLocked(id);
    // Finish releases the reservation.
    scheduler_->FinishLocked(id);
  }
  return ctx_->store()->GetJob(id);
}

// ---------------------------------------------------------------------------
// Confirm again, roll back

absl::StatusOr<Job> JobCommands::Confirm(const std::string& id,
                                         const std::string& reason,
                                         const std::string& actor) {
  // Serialized with submits: the overlap check and the admission of the
  // confirmation are one decision.
  absl::MutexLock admission(&admission_mu_);
  JobTable* const jobs = ctx_->jobs();
  ASSIGN_OR_RETURN(Job stored, ctx_->store()->GetJob(id));
  // The confirmation runs with the catalog in force now.
  const std::shared_ptr<const Catalog> catalog = catalog_->Get();
  RETURN_IF_ERROR(CheckConfirmable(stored, *catalog));
  Scope scope = ScopeOf(stored.plan);
  RETURN_IF_ERROR(scheduler_->ClaimEnded(id, "confirm", scope));
  ActiveJob* job = nullptr;
  {
    absl::MutexLock lock(jobs->mu());
    absl::Status accepting = jobs->AcceptingLocked();
    if (accepting.ok()) {
      accepting = jobs->AwaitOwnRunEndedLocked(id, "confirm");
    }
    if (!accepting.ok()) {
      if (jobs->FindLocked(id) == nullptr) scheduler_->Done(id);
      return accepting;
    }
    if (jobs->FindLocked(id) != nullptr || jobs->rolling_back().count(id)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "job ", id,
          " is being confirmed or rolled back right now; wait for it to "
          "end"));
    }
    std::vector<Conflict> conflicts;
    std::vector<Admission::Overlap> overlaps =
        jobs->admission().Overlapping(scope, &conflicts, 1);
    if (!overlaps.empty()) {
      scheduler_->Done(id);
      return absl::FailedPreconditionError(absl::StrCat(
          "job ", jobs->DescribeLocked(overlaps), " works on partitions of ",
          id,
          "; the warehouse may change under a confirmation. Wait until it "
          "ends, then confirm ",
          id, " again"));
    }
    auto active = std::make_unique<ActiveJob>();
    active->catalog = catalog;
    active->job = stored;
    active->state = stored.state;
    active->phase = JobPhase::kFinishing;
    active->reconfirming = true;
    active->busy = 1;  // the Finish closure below
    jobs->admission().Add(id, std::move(scope));
    job = jobs->AddLocked(std::move(active));
  }
  const std::string message =
      absl::StrCat("confirming downstream consumers again", By(actor),
                   reason.empty() ? "" : absl::StrCat(" (", reason, ")"));
  absl::Status s =
      ctx_->Move(job, JobState::kConfirming, message, JobPhase::kFinishing);
  {
    absl::MutexLock lock(jobs->mu());
    if (!s.ok()) {
      jobs->EndLocked(job, JobPhase::kDone);
      jobs->ReleaseLocked(job);  // forgets it
      scheduler_->PumpLocked();
      return s;
    }
    scheduler_->FinishLocked(id);
  }
  return ctx_->store()->GetJob(id);
}

absl::StatusOr<Job> JobCommands::Rollback(const std::string& id,
                                          const RollbackRequest& request) {
  JobTable* const jobs = ctx_->jobs();
  ASSIGN_OR_RETURN(Job job, ctx_->store()->GetJob(id));
  if (job.state == JobState::kRolledBack) return job;  // done before
  RETURN_IF_ERROR(CheckRollbackable(*ctx_, job));
  Scope scope = ScopeOf(job.plan);
  RETURN_IF_ERROR(scheduler_->ClaimEnded(id, "rollback", scope));
  // The lease is given back however the rollback ends.
  struct GiveBack {
    JobScheduler* scheduler;
    const std::string& id;
    ~GiveBack() { scheduler->Done(id); }
  } give_back{scheduler_, id};
  std::vector<ActiveJob*> held;
  {
    absl::MutexLock lock(jobs->mu());
    RETURN_IF_ERROR(jobs->AcceptingLocked());
    RETURN_IF_ERROR(jobs->AwaitOwnRunEndedLocked(id, "roll back"));
    std::vector<Conflict> conflicts;
    std::vector<Admission::Overlap> overlaps =
        jobs->admission().Overlapping(scope, &conflicts, 1);
    if (!overlaps.empty()) {
      const std::string& other = overlaps.front().job_id;
      const std::string partition =
          conflicts.empty()
              ? std::string()
              : (conflicts.front().partition.empty()
                     ? absl::StrCat(" (dataset ", conflicts.front().dataset,
                                    ")")
                     : absl::StrCat(" (e.g. ", conflicts.front().partition,
                                    " of ", conflicts.front().dataset, ")"));
      if (jobs->rolling_back().count(other)) {
        return absl::FailedPreconditionError(absl::StrCat(
            "the rollback of ", other, " is in progress on partitions of ", id,
            partition, "; wait for it to end, then try again"));
      }
      return absl::FailedPreconditionError(absl::StrCat(
          "job ", jobs->DescribeLocked(overlaps), " works on partitions of ",
          id, partition,
          "; a rollback never runs while another job holds its partitions. "
          "Wait until it ends (or cancel it), then roll back ",
          id));
    }
    // Hold the partitions: jobs submitted meanwhile wait for the rollback.
    jobs->admission().Add(id, std::move(scope));
    jobs->rolling_back().insert(id);
    // Jobs held for a decision over these partitions computed their staging
    // against the rows the rollback withdraws: a successful rollback
    // supersedes them, as a newer overlapping job would. Reserved now, so
    // that none of them is approved or retried meanwhile.
    held = jobs->ReserveHeldOverlapsLocked(id);
  }
  bool restored = false;
  absl::StatusOr<Job> result =
      RollBack(*ctx_, *catalog_, job, request, nullptr, [&] {
        restored = true;
        for (ActiveJob* h : held) {
          scheduler_->Supersede(h, SupersededByRollback(id));
        }
      });
  absl::MutexLock lock(jobs->mu());
  if (!restored) jobs->UnreserveHeldLocked(held);
  jobs->admission().Remove(id);
  jobs->rolling_back().erase(id);
  jobs->NotifyLocked(id);
  scheduler_->PumpLocked();
  return result;
}

}  // namespace backfill
