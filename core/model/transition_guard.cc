#include "core/model/transition_guard.h"

#include "absl/strings/str_cat.h"
#include "core/base/error_details.h"
#include "core/model/job_state_machine.h"

namespace backfill {
namespace {

// "job <id> is <state>, not <expected>".
std::string NotInState(const std::string& job_id, JobState state,
                       JobState expected) {
  return absl::StrCat("job ", job_id, " is ", JobStateName(state), ", not ",
                      JobStateName(expected));
}

// CheckTransition's refusal, naming the job.
absl::Status CheckMove(const std::string& job_id, JobState from, JobState to) {
  absl::Status s = CheckTransition(from, to);
  if (s.ok()) return s;
  return absl::FailedPreconditionError(
      absl::StrCat("job ", job_id, ": ", s.message()));
}

}  // namespace

absl::Status JobNotFound(const std::string& job_id) {
  return WithReason(absl::NotFoundError(absl::StrCat("no job ", job_id)),
                    "BACKFILL_NOT_FOUND", {{"backfill_id", job_id}});
}

absl::StatusOr<JobState> GuardTransition(const std::string& job_id,
                                         absl::StatusOr<JobState> current,
                                         std::optional<JobState> expected_from,
                                         JobState to, GuardedMove move) {
  if (!current.ok()) return current.status();
  const JobState from = *current;
  if (expected_from.has_value() && *expected_from != from) {
    std::string message = NotInState(job_id, from, *expected_from);
    switch (move) {
      case GuardedMove::kMove:
        absl::StrAppend(&message, "; cannot move it to ", JobStateName(to));
        break;
      case GuardedMove::kRetry:
        break;
      case GuardedMove::kApproval:
        absl::StrAppend(&message, "; cannot approve it");
        break;
    }
    return absl::FailedPreconditionError(message);
  }
  if (absl::Status s = CheckMove(job_id, from, to); !s.ok()) return s;
  return from;
}

absl::Status GuardState(const std::string& job_id,
                        absl::StatusOr<JobState> current, JobState expected) {
  if (!current.ok()) return current.status();
  if (*current == expected) return absl::OkStatus();
  return absl::FailedPreconditionError(NotInState(job_id, *current, expected));
}

absl::StatusOr<bool> GuardPublication(const std::string& job_id, JobState from,
                                      bool publication_recorded, JobState to) {
  if (HasPublished(from) ||
      (from == JobState::kPublishing && publication_recorded)) {
    return false;
  }
  if (from != JobState::kPublishing) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot record the publication of job ", job_id,
                     ": it is ", JobStateName(from), ", not PUBLISHING"));
  }
  if (absl::Status s = CheckMove(job_id, from, to); !s.ok()) return s;
  return true;
}

absl::Status GuardRollback(
    const std::vector<std::pair<std::string, JobState>>& jobs) {
  for (const auto& [id, state] : jobs) {
    if (state != JobState::kSucceeded &&
        state != JobState::kDownstreamUnhealthy) {
      return absl::FailedPreconditionError(absl::StrCat(
          "cannot record the rollback of job ", id, ": it is ",
          JobStateName(state), ", not SUCCEEDED or DOWNSTREAM_UNHEALTHY"));
    }
  }
  return absl::OkStatus();
}

}  // namespace backfill
