#include "core/run/step_context.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/model/job_state_machine.h"

namespace backfill {

bool MayPass(const absl::Status& status) {
  return status.code() == absl::StatusCode::kResourceExhausted ||
         status.code() == absl::StatusCode::kUnavailable;
}

const char* LeaseStepOf(JobState state) {
  switch (state) {
    case JobState::kQueued:
    case JobState::kRunning:
    case JobState::kPaused:
      return "run";
    case JobState::kValidating:
      return "validate";
    case JobState::kPublishing:
      return "publish";
    case JobState::kConfirming:
      return "confirm";
    default:
      return "hold";
  }
}

absl::Status StepContext::Persist(
    Storage storage, const std::string& what,
    const std::function<absl::Status()>& write) const {
  absl::Duration backoff = options_.retry_backoff;
  while (true) {
    absl::Status s = write();
    if (s.ok()) {
      alarm_.Succeeded(storage);
      return s;
    }
    if (!MayPass(s)) return s;
    alarm_.Failed(storage, what, s);
    if (Stopping()) {
      return absl::CancelledError(
          absl::StrCat("stopping while ", what, " failed: ", s.message()));
    }
    clock_->SleepFor(backoff);
    backoff = std::min(backoff * 2, options_.max_backoff);
  }
}

absl::Status StepContext::Move(ActiveJob* job, JobState to,
                               const std::string& message,
                               std::optional<JobPhase> required,
                               std::optional<JobPhase> then) const {
  absl::MutexLock transition(&job->transition_mu);
  JobState from;
  const std::string id = job->job.id;
  {
    absl::MutexLock lock(jobs_->mu());
    if (required.has_value() && job->phase != *required) {
      return absl::AbortedError("superseded by another decision on the job");
    }
    from = job->state;
  }
  if (from == to) return absl::OkStatus();
  RETURN_IF_ERROR(CheckTransition(from, to));
  RETURN_IF_ERROR(Persist(
      Storage::kStateStore,
      absl::StrCat("recording job ", id, " ", JobStateName(from), " -> ",
                   JobStateName(to)),
      [&] {
        return store_->TransitionJob(id, from, to, message, clock_->Now());
      }));
  {
    absl::MutexLock lock(jobs_->mu());
    job->state = to;
    job->job.message = message;
    if (then.has_value()) jobs_->EndLocked(job, *then);
    jobs_->NotifyLocked(id);
  }
  if (options_.leases != nullptr) options_.leases->SetStep(id, LeaseStepOf(to));
  if (observer_ != nullptr) observer_->OnJobTransition(id, from, to, message);
  return absl::OkStatus();
}

void StepContext::ReportFinished(const std::string& id, JobState state,
                                 double estimate) const {
  if (observer_ == nullptr) return;
  double actual = 0;
  if (absl::StatusOr<Job> done = store_->GetJobProgress(id); done.ok()) {
    actual = done->actual_cost;
  }
  observer_->OnJobFinished(id, state, estimate, actual);
}

}  // namespace backfill
