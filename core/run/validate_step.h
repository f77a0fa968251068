// Validate step (step 4 of the playbook): checks a job's staging before
// anything is published, and decides where the job goes next.
//
//   ValidateStaging  per dataset the checks of core/checks/check_set.h —
//       always on: every staged row in a partition of the job, primary key
//       unique and not NULL, contract and schema drift; then those the
//       pipeline file declares — and that staging holds, per partition,
//       exactly the rows each partition's checkpoint recorded.
//   ValidateJob  a job whose partitions are all staged: validates it
//       (timed, ValidateTimed), recomputes partitions whose staged rows
//       were lost (up to RunnerOptions::max_restage_rounds, then
//       VALIDATION_FAILED), records the check results and the diff
//       (diff_step.h), and moves the job on: VALIDATION_FAILED (`error`
//       checks failed), AWAITING_APPROVAL (`hold` checks failed, or a
//       dataset requires approval: approval.h), else PUBLISHING. A held job
//       holds no partitions: a newer overlapping job supersedes it.
//   ValidateIntegrity  only that staging is still intact: before a job
//       resumed into PUBLISHING publishes, and before an override of
//       failed checks is accepted.
//
// Stateless; thread-safe as the StepContext is. The functions that take an
// ActiveJob take the table's lock themselves.

#ifndef BACKFILL_CORE_RUN_VALIDATE_STEP_H_
#define BACKFILL_CORE_RUN_VALIDATE_STEP_H_

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/model/catalog.h"
#include "core/model/check_result.h"
#include "core/model/job.h"
#include "core/ports/engine.h"
#include "core/run/active_job.h"
#include "core/run/step_context.h"

namespace backfill {

struct ValidationOutcome {
  // Failures of `error` checks, each "dataset partition: check: what is
  // wrong" (at most a few, then "and N more"); empty: nothing blocks.
  std::vector<std::string> failures;
  // Failures of `hold` and `warn` checks, in the same form.
  std::vector<std::string> holds;
  std::vector<std::string> warnings;
  // Every result to store with the job (see check_result.h).
  std::vector<CheckResult> results;
  // Indexes into the tasks whose staged rows differ from their checkpoint
  // (lost or changed after it); they can be recomputed. While some are,
  // only the partition and primary key checks run: the others would judge
  // incomplete staging.
  std::vector<size_t> lost;
  std::string lost_summary;  // e.g. "daily_revenue: 2025-01-01 (staged 0,
                             // checkpoint 4)"
};

struct ValidateOptions {
  // Resolves the datasets that `references` checks name; without it they
  // fail.
  const Catalog* catalog = nullptr;
  // Only the partition and primary key checks and the checkpoints (a
  // publish resumed after a restart checks that staging is still intact;
  // the other checks were decided on before).
  bool integrity_only = false;
};

// What validation compares staging with: per dataset and partition, the
// rows the task's checkpoint says it staged, and the task's index in the
// job's tasks. Tasks the early cutoff settled (UNCHANGED, SKIPPED) have
// nothing staged and are left out. Built from the tasks under the job's
// lock, it is all validation reads of them (a job of many partitions need
// not copy its tasks to validate).
struct Checkpoint {
  size_t task = 0;
  int64_t rows_written = 0;
};
using Checkpoints = std::map<std::string, std::map<std::string, Checkpoint>>;
Checkpoints CheckpointsOf(const TaskTable& tasks);

// `checkpoints` are those of the job's tasks (CheckpointsOf). `layout` is
// the job's layout without the partitions the early cutoff settled
// (WithoutCutOff), so the checks judge what the job would publish.
// ValidationOutcome::lost names tasks by their index.
absl::StatusOr<ValidationOutcome> ValidateStaging(
    Engine* engine, const JobLayout& layout, const Checkpoints& checkpoints,
    const ValidateOptions& options = {});
// The same, from the tasks themselves.
absl::StatusOr<ValidationOutcome> ValidateStaging(
    Engine* engine, const JobLayout& layout,
    const std::vector<PartitionTask>& tasks,
    const ValidateOptions& options = {});

// The failing results of `severity` as readable lines: "check on dataset
// [partition]: observed (allowed: ...)", at most `max` of them, then "and
// N more" counting every failing partition.
std::vector<std::string> DescribeFailures(
    const std::vector<CheckResult>& results, CheckSeverity severity,
    size_t max = 5);

// ValidateStaging of job `id`, timed with the clock and reported to the
// observer (OnJobValidationTime), whatever its outcome.
absl::StatusOr<ValidationOutcome> ValidateTimed(const StepContext& ctx,
                                                const std::string& id,
                                                const JobLayout& layout,
                                                const Checkpoints& checkpoints,
                                                const ValidateOptions& options);

// Validates a VALIDATING job (see above). `*done` is set when the job left
// the finishing steps: held (VALIDATION_FAILED, AWAITING_APPROVAL) or back
// to RUNNING to recompute lost partitions; otherwise, on OK, it is
// PUBLISHING. An error leaves the job VALIDATING (the caller fails it, or
// recovery validates it again).
absl::Status ValidateJob(const StepContext& ctx, ActiveJob* job, bool* done);

// Checks that the job's staging still holds what its checkpoints recorded
// and passes the partition and primary key checks (integrity_only), its
// staging prepared first if this process has not; timed as ValidateTimed.
// `layout` is what the job would publish (without its cut-off partitions).
absl::StatusOr<ValidationOutcome> ValidateIntegrity(const StepContext& ctx,
                                                    ActiveJob* job,
                                                    const JobLayout& layout);

}  // namespace backfill

#endif  // BACKFILL_CORE_RUN_VALIDATE_STEP_H_
