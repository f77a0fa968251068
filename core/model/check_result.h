// CheckResult: what one validation check found about one dataset of a job
// (one partition, or a summary over all of them), and the severities a
// pipeline file gives its checks. Plain value types; not synchronized (copy
// them across threads).
//
// A job stores, per check and dataset, one summary result (`summary`:
// partitions checked and failed) plus one result per failing partition, at
// most kMaxFailedResultsPerCheck of them; passing partitions are counted in
// the summary only. See docs/pipeline-spec.md#checks.

#ifndef BACKFILL_CORE_MODEL_CHECK_RESULT_H_
#define BACKFILL_CORE_MODEL_CHECK_RESULT_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace backfill {

// What a failing check does to its job.
enum class CheckSeverity {
  kError,  // the job ends VALIDATION_FAILED, nothing is published
  kHold,   // the job waits in AWAITING_APPROVAL
  kWarn,   // recorded and shown; the job publishes
};
const char* CheckSeverityName(CheckSeverity severity);  // "error", ...
absl::StatusOr<CheckSeverity> ParseCheckSeverity(std::string_view name);

// Failing partitions stored per check and dataset; the summary counts the
// rest.
inline constexpr int kMaxFailedResultsPerCheck = 100;
// Sample rows kept per failing result.
inline constexpr int kMaxSampleRows = 3;

struct CheckResult {
  std::string check;  // the check's name: "row_change", "no_negative", ...
  std::string kind;   // "row_change", ..., or an always-on check: "schema",
                      // "primary_key", "partition"
  CheckSeverity severity = CheckSeverity::kError;
  std::string dataset;
  // The partition; "" for a summary, for a result about the whole dataset
  // (schema, the job's total of a measure) and for an unpartitioned
  // dataset.
  std::string partition;
  bool passed = true;
  std::string observed;              // e.g. "120 rows, -60.0% vs 300 published"
  std::string allowed;               // e.g. "a change of at most 20%"
  std::string message;               // one readable sentence
  std::vector<std::string> samples;  // a few offending rows, as text
  bool summary = false;
  int64_t partitions_checked = 0;  // summary only
  int64_t partitions_failed = 0;   // summary only
};

}  // namespace backfill

#endif  // BACKFILL_CORE_MODEL_CHECK_RESULT_H_
