#include "core/governance/approval.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/error_details.h"

namespace backfill {

std::vector<std::string> DatasetsRequiringApproval(const JobLayout& layout) {
  std::vector<std::string> out;
  for (const JobLayout::Item& item : layout.items) {
    if (item.dataset != nullptr && item.dataset->require_approval) {
      out.push_back(item.dataset->name);
    }
  }
  return out;
}

std::string AwaitingApprovalMessage(const std::string& job_id,
                                    const std::vector<std::string>& datasets,
                                    const std::string& hold) {
  std::vector<std::string> why;
  if (!datasets.empty()) {
    why.push_back(absl::StrCat("dataset", datasets.size() == 1 ? " " : "s ",
                               absl::StrJoin(datasets, ", "),
                               datasets.size() == 1 ? " requires" : " require",
                               " approval before publishing"));
  }
  if (!hold.empty()) why.push_back(hold);
  return absl::StrCat(
      "validation passed; nothing was published: ", absl::StrJoin(why, "; "),
      ". Read the diff (`DiffBackfill` ", job_id,
      "), then publish with `ApproveBackfill` ", job_id,
      " and a `reason`, or drop it with `CancelBackfill` ", job_id);
}

absl::Status CheckApprovalRequest(const Approval& approval) {
  if (absl::StripAsciiWhitespace(approval.reason).empty()) {
    return InvalidFieldError(
        "reason", "REASON_REQUIRED",
        "an approval needs a `reason` (why publishing this job is right); it "
        "is recorded in the audit log and in lineage");
  }
  return absl::OkStatus();
}

bool ApprovedAlready(const Job& job) {
  if (!job.approval.has_value()) return false;
  switch (job.state) {
    case JobState::kPublishing:
    case JobState::kConfirming:
    case JobState::kSucceeded:
    case JobState::kDownstreamUnhealthy:
    case JobState::kRolledBack:
      return true;
    default:
      return false;
  }
}

absl::Status RefuseApproval(const Job& job, const Approval& approval,
                            bool held) {
  const std::string head =
      absl::StrCat("job ", job.id, " is ", JobStateName(job.state));
  switch (job.state) {
    case JobState::kAwaitingApproval:
      return absl::FailedPreconditionError(absl::StrCat(
          head,
          " but a decision on it (cancel, supersede or another approval) is "
          "being carried out right now; see `GetBackfill` ",
          job.id));
    case JobState::kValidationFailed:
      if (!held) {
        return absl::FailedPreconditionError(absl::StrCat(
            head,
            " and kept no staging (it was superseded, cancelled or could not "
            "be resumed): there is nothing to publish; submit a new "
            "backfill"));
      }
      if (!approval.override_validation) {
        return absl::FailedPreconditionError(absl::StrCat(
            head, ": ", job.message,
            ". Approving it publishes data that failed these checks: set "
            "`override_validation` only if you mean that, "
            "otherwise fix the data or the transform and submit a new "
            "backfill"));
      }
      return absl::FailedPreconditionError(absl::StrCat(
          head,
          " but a decision on it (cancel, supersede or another approval) is "
          "being carried out right now; see `GetBackfill` ",
          job.id));
    case JobState::kCancelled:
      return absl::FailedPreconditionError(
          absl::StrCat(head, " (", job.message,
                       "); nothing of it can be published any more"));
    case JobState::kFailed:
      return absl::FailedPreconditionError(absl::StrCat(
          head,
          "; approve publishes only jobs AWAITING_APPROVAL (or "
          "VALIDATION_FAILED, with override). Retry it (`RetryBackfill` ",
          job.id, ") or cancel it"));
    default:
      break;
  }
  if (job.approval.has_value()) {
    return absl::FailedPreconditionError(
        absl::StrCat(head, " after its approval; there is nothing to approve"));
  }
  if (IsTerminal(job.state)) {
    return absl::FailedPreconditionError(absl::StrCat(
        head,
        "; only a job AWAITING_APPROVAL (or VALIDATION_FAILED, with "
        "override) can be approved"));
  }
  return absl::FailedPreconditionError(absl::StrCat(
      head,
      "; only a job AWAITING_APPROVAL (or VALIDATION_FAILED, with override) "
      "can be approved. A job that needs approval stops in AWAITING_APPROVAL "
      "once it is validated (`WatchBackfill` ",
      job.id, ")"));
}

std::string ApprovalMessage(const Approval& approval) {
  return absl::StrCat("approved by ", approval.approved_by,
                      approval.override_validation &&
                              approval.from_state == JobState::kValidationFailed
                          ? " OVERRIDING the failed validation"
                          : "",
                      ": ", approval.reason, "; publishing");
}

}  // namespace backfill
