// VersionChecks: what a job's validation found about one partition it
// published — the check results a version of a partition shows in its
// history (PartitionHistory, core/governance/partition_history.h), derived
// from the results the job stored (StateStore::ListCheckResults).
//
// A job stores, per check and dataset, one summary and the failing
// partitions, at most kMaxFailedResultsPerCheck of them
// (core/model/check_result.h); a passing partition has no result of its
// own. So per summary of the partition's dataset, the partition gets:
//   - its own stored result, as is, when the job kept one (a failure, with
//     observed, allowed, message and sample rows);
//   - else, when the job kept every failing partition of the check (their
//     number equals the summary's partitions_failed) and some partition
//     passed (partitions_checked > partitions_failed), a result derived
//     from the summary: same check, kind, severity, dataset and allowed,
//     this partition, passed, not a summary, message "passed";
//   - else (failures were left out, or no partition passed) the summary
//     itself: the partition's own outcome is not known.
// Then the job's results about the whole dataset (not summaries, partition
// ""). A stored result of this partition whose check has no summary comes
// as is. Nothing of another dataset is included.
//
// For an unpartitioned dataset (partition ""), results with partition ""
// are the dataset-wide ones: they come as is, and each summary comes by the
// same rules (derived "passed" when nothing failed, else the summary).
//
// Pure function over values; thread-safe.

#ifndef BACKFILL_CORE_GOVERNANCE_VERSION_CHECKS_H_
#define BACKFILL_CORE_GOVERNANCE_VERSION_CHECKS_H_

#include <string>
#include <vector>

#include "core/model/check_result.h"

namespace backfill {

// The message of a result derived from a complete summary.
inline constexpr char kDerivedPassedMessage[] = "passed";

// The check results of `partition` of `dataset` among `job_results` (all
// the results one job stored, in their stored order), in that order: each
// summary's result where the summary stands, the dataset-wide results
// where they stand. Empty when the job stored none for the dataset.
std::vector<CheckResult> VersionChecks(
    const std::vector<CheckResult>& job_results, const std::string& dataset,
    const std::string& partition);

}  // namespace backfill

#endif  // BACKFILL_CORE_GOVERNANCE_VERSION_CHECKS_H_
