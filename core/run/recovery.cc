#include "core/run/recovery.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/governance/approval.h"
#include "core/governance/audit_log.h"
#include "core/run/crash_point.h"
#include "core/run/rollback_step.h"

namespace backfill {
namespace {

// The phase a job found in `state` resumes in.
JobPhase PhaseOf(JobState state) {
  switch (state) {
    case JobState::kQueued:
    case JobState::kRunning:
      return JobPhase::kWaiting;
    case JobState::kPaused:
      return JobPhase::kPaused;
    case JobState::kValidating:
    case JobState::kPublishing:
    case JobState::kConfirming:
      return JobPhase::kFinishing;
    default:
      return JobPhase::kHeld;
  }
}

// The unfinished jobs, in admission order.
absl::StatusOr<std::vector<Job>> UnfinishedJobs(const StepContext& ctx) {
  ASSIGN_OR_RETURN(
      std::vector<std::string> ids,
      ctx.store()->ListJobIds({JobState::kQueued, JobState::kRunning,
                               JobState::kPaused, JobState::kValidating,
                               JobState::kAwaitingApproval,
                               JobState::kPublishing, JobState::kConfirming}));
  // Jobs held for a decision are those that kept their staging.
  ASSIGN_OR_RETURN(std::vector<std::string> staged,
                   ctx.engine()->ListJobsWithStaging());
  ASSIGN_OR_RETURN(std::vector<std::string> held_ids,
                   ctx.store()->ListJobIds(
                       {JobState::kFailed, JobState::kValidationFailed}));
  const std::set<std::string> with_staging(staged.begin(), staged.end());
  for (const std::string& id : held_ids) {
    if (with_staging.count(id)) ids.push_back(id);
  }

  std::vector<Job> jobs;
  for (const std::string& id : ids) {
    ASSIGN_OR_RETURN(Job job, ctx.store()->GetJob(id));
    jobs.push_back(std::move(job));
  }
  // Admission order: jobs that had started keep their partitions ahead of
  // those that had not; then by job number.
  std::stable_sort(jobs.begin(), jobs.end(), [](const Job& a, const Job& b) {
    const bool sa = a.start_time != absl::InfinitePast();
    const bool sb = b.start_time != absl::InfinitePast();
    if (sa != sb) return sa;
    return JobNumberOf(a.id) < JobNumberOf(b.id);
  });
  return jobs;
}

// A job that cannot run again under the catalog in force (`why`), nothing
// of it published: it ends here, without staging to retry.
absl::Status EndUnresumable(const StepContext& ctx, const Job& job,
                            const absl::Status& why) {
  const JobState state = job.state;
  const JobState end =
      state == JobState::kPaused ? JobState::kCancelled : JobState::kFailed;
  const std::string message =
      absl::StrCat("cannot resume after restart: ", why.message(),
                   "; nothing was published");
  RETURN_IF_ERROR(ctx.store()->TransitionJob(job.id, state, end, message,
                                             ctx.clock()->Now()));
  RETURN_IF_ERROR(
      ctx.store()
          ->UpdateTasksInState(job.id,
                               {TaskState::kPending, TaskState::kRunning,
                                TaskState::kStaged, TaskState::kFailed},
                               TaskState::kCancelled, ctx.clock()->Now())
          .status());
  ctx.engine()->DropStaging(job.id).IgnoreError();
  // Its end is an end like any other for metrics and lineage.
  if (ctx.observer() != nullptr) {
    ctx.observer()->OnJobTransition(job.id, state, end, message);
  }
  ctx.ReportFinished(job.id, end, job.plan.cost.backfill);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<ActiveJob>> RecoverJob(
    const StepContext& ctx, std::shared_ptr<const Catalog> catalog, Job job) {
  const JobState state = job.state;
  const JobPhase phase = PhaseOf(state);
  if (state == JobState::kQueued || state == JobState::kRunning ||
      state == JobState::kPaused) {
    // Attempts in flight when the process died start over; their staging
    // writes are replaced by the next attempt.
    RETURN_IF_ERROR(ctx.store()
                        ->UpdateTasksInState(
                            job.id, {TaskState::kRunning, TaskState::kFailed},
                            TaskState::kPending, ctx.clock()->Now())
                        .status());
  }
  if (phase != JobPhase::kHeld) {
    bool complete = true;
    absl::StatusOr<JobLayout> layout = LayoutOf(*catalog, job, &complete);
    if (!layout.ok()) {
      if (state == JobState::kPublishing || state == JobState::kConfirming) {
        // It may have published: never fail it on a whim; refuse to start.
        return absl::FailedPreconditionError(absl::StrCat(
            "cannot resume job ", job.id, " (", JobStateName(state),
            "): ", layout.status().message()));
      }
      // Nothing of it was published, and running it again would fail the
      // same way.
      RETURN_IF_ERROR(EndUnresumable(ctx, job, layout.status()));
      return std::unique_ptr<ActiveJob>();
    }
  }
  auto active = std::make_unique<ActiveJob>();
  active->catalog = std::move(catalog);
  active->state = state;
  active->phase = phase;
  if (state == JobState::kConfirming) {
    // A confirmation asked for again (backfillctl confirm) of a job that
    // had ended: its end was reported then, and is not reported twice.
    ASSIGN_OR_RETURN(std::vector<AuditEvent> events,
                     ctx.store()->ListAuditEvents(job.id));
    active->reconfirming = EndedAConfirmation(events);
  }
  active->job = std::move(job);
  return active;
}

absl::StatusOr<RecoveredJobs> RecoverJobs(const StepContext& ctx,
                                          const LiveCatalog& live) {
  RecoveredJobs out;
  // Rollbacks the warehouse committed before a crash are recorded before
  // any job can publish over their partitions.
  RETURN_IF_ERROR(RecoverRollbacks(ctx, live, &out.rolled_back));
  // Recovered jobs run with the catalog in force now.
  const std::shared_ptr<const Catalog> catalog = live.Get();
  ASSIGN_OR_RETURN(std::vector<Job> jobs, UnfinishedJobs(ctx));
  for (Job& job : jobs) {
    ASSIGN_OR_RETURN(std::unique_ptr<ActiveJob> active,
                     RecoverJob(ctx, catalog, std::move(job)));
    if (active == nullptr) continue;
    out.jobs.push_back(std::move(active));
    if (out.jobs.size() == 1) CrashPoint("recovery");
  }
  return out;
}

void SweepOrphans(const StepContext& ctx, bool keep_failed) {
  // A crash between a job's end and its cleanup leaves staging (and tasks
  // that never ran) behind; the end is recorded, so finish the cleanup.
  // Best effort: what fails is retried at the next start.
  absl::StatusOr<std::vector<std::string>> ids =
      ctx.engine()->ListJobsWithStaging();
  if (!ids.ok()) return;
  for (const std::string& id : *ids) {
    {
      absl::MutexLock lock(ctx.jobs()->mu());
      if (ctx.jobs()->FindLocked(id) != nullptr) continue;
    }
    absl::StatusOr<Job> job = ctx.store()->GetJobProgress(id);
    if (job.ok() && !IsTerminal(job->state)) continue;
    if (job.ok() && keep_failed &&
        (job->state == JobState::kFailed ||
         job->state == JobState::kValidationFailed)) {
      continue;
    }
    if (job.ok()) {
      ctx.store()
          ->UpdateTasksInState(id, {TaskState::kPending, TaskState::kRunning},
                               TaskState::kCancelled, ctx.clock()->Now())
          .IgnoreError();
    } else if (job.status().code() != absl::StatusCode::kNotFound) {
      continue;
    }
    ctx.engine()->DropStaging(id).IgnoreError();
  }
}

}  // namespace backfill
