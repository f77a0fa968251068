#include "core/model/job.h"

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace backfill {

int64_t JobNumberOf(std::string_view id) {
  int64_t n = 0;
  if (id.substr(0, 3) == "bf-" &&
      absl::SimpleAtoi(absl::string_view(id.data() + 3, id.size() - 3), &n) &&
      n > 0) {
    return n;
  }
  return 0;
}
namespace {

constexpr const char* kJobStateNames[kJobStateCount] = {
    "QUEUED",
    "RUNNING",
    "VALIDATING",
    "AWAITING_APPROVAL",
    "PUBLISHING",
    "CONFIRMING",
    "SUCCEEDED",
    "FAILED",
    "CANCELLED",
    "PAUSED",
    "ROLLED_BACK",
    "VALIDATION_FAILED",
    "DOWNSTREAM_UNHEALTHY",
};

constexpr const char* kTaskStateNames[kTaskStateCount] = {
    "PENDING", "RUNNING",   "STAGED",    "PUBLISHED",
    "FAILED",  "CANCELLED", "UNCHANGED", "SKIPPED",
};

}  // namespace

const char* JobStateName(JobState state) {
  const int i = static_cast<int>(state);
  if (i < 0 || i >= kJobStateCount) return "UNKNOWN";
  return kJobStateNames[i];
}

// Names are matched case-insensitively so that CLI input such as "running"
// works; the canonical form is upper case.
absl::StatusOr<JobState> ParseJobState(std::string_view name) {
  const std::string upper = absl::AsciiStrToUpper(std::string(name));
  for (int i = 0; i < kJobStateCount; ++i) {
    if (upper == kJobStateNames[i]) return static_cast<JobState>(i);
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown job state \"", std::string(name), "\"; expected one of ",
      absl::StrJoin(kJobStateNames, ", ")));
}

bool IsTerminal(JobState state) {
  switch (state) {
    case JobState::kSucceeded:
    case JobState::kFailed:
    case JobState::kCancelled:
    case JobState::kRolledBack:
    case JobState::kValidationFailed:
    case JobState::kDownstreamUnhealthy:
      return true;
    default:
      return false;
  }
}

const char* TaskStateName(TaskState state) {
  const int i = static_cast<int>(state);
  if (i < 0 || i >= kTaskStateCount) return "UNKNOWN";
  return kTaskStateNames[i];
}

absl::StatusOr<TaskState> ParseTaskState(std::string_view name) {
  const std::string upper = absl::AsciiStrToUpper(std::string(name));
  for (int i = 0; i < kTaskStateCount; ++i) {
    if (upper == kTaskStateNames[i]) return static_cast<TaskState>(i);
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown task state \"", std::string(name), "\"; expected one of ",
      absl::StrJoin(kTaskStateNames, ", ")));
}

int64_t Plan::total_partitions() const {
  int64_t total = 0;
  for (const DatasetPlan& d : datasets) {
    total += static_cast<int64_t>(d.partitions.size());
  }
  return total;
}

const char* LineageActionName(LineageAction action) {
  return action == LineageAction::kRollback ? "rollback" : "publish";
}

absl::StatusOr<LineageAction> ParseLineageAction(std::string_view name) {
  if (name == "publish") return LineageAction::kPublish;
  if (name == "rollback") return LineageAction::kRollback;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown lineage action \"", std::string(name),
                   "\" (expected publish or rollback)"));
}

}  // namespace backfill
