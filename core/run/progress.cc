#include "core/run/progress.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace backfill {
namespace {

int64_t Done(const PartitionCounts& c) {
  return c.staged + c.published + c.unchanged + c.skipped;
}

}  // namespace

std::optional<RecomputeEta> EstimateRecompute(const Job& job) {
  if (job.state != JobState::kRunning || job.timed_partitions <= 0 ||
      job.timed_seconds < 0) {
    return std::nullopt;
  }
  RecomputeEta eta;
  eta.per_partition = absl::Seconds(job.timed_seconds /
                                    static_cast<double>(job.timed_partitions));
  const int64_t remaining = job.counts.pending + job.counts.running;
  if (remaining <= 0) {
    eta.remaining = absl::ZeroDuration();
    return eta;
  }
  eta.parallelism = std::clamp<int64_t>(job.counts.running, 1, remaining);
  const int64_t waves = (remaining + eta.parallelism - 1) / eta.parallelism;
  eta.remaining = eta.per_partition * waves;
  return eta;
}

std::string CurrentStep(const Job& job) {
  const PartitionCounts& c = job.counts;
  switch (job.state) {
    case JobState::kQueued:
      return "step 1 of 6, planned: waiting to start";
    case JobState::kRunning:
      // Inputs are pinned before the first partition starts: both steps
      // are RUNNING.
      return absl::StrCat(
          "steps 2-3 of 6, pin inputs and recompute in "
          "staging: ",
          c.running, " running, ", c.pending, " pending, ", Done(c), " of ",
          c.total, " done");
    case JobState::kValidating:
      return "step 4 of 6, validating the staged partitions";
    case JobState::kAwaitingApproval:
      return "step 4 of 6, validated: waiting for an operator's approval";
    case JobState::kPublishing:
      return "step 5 of 6, publishing every partition atomically";
    case JobState::kConfirming:
      return "step 6 of 6, confirming downstream consumers";
    case JobState::kPaused:
      return absl::StrCat("paused in step 3 of 6: ", Done(c), " of ", c.total,
                          " partitions done, nothing starts until resumed");
    case JobState::kSucceeded:
    case JobState::kFailed:
    case JobState::kCancelled:
    case JobState::kRolledBack:
    case JobState::kValidationFailed:
    case JobState::kDownstreamUnhealthy:
      break;
  }
  return absl::StrCat("ended ", JobStateName(job.state));
}

}  // namespace backfill
