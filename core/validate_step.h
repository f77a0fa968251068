// Validate step (step 4 of the playbook): checks a job's staging before
// anything is published. Today: the engine's checks per dataset (primary
// key unique and not null) and that staging holds, per partition, exactly
// the rows each partition's checkpoint recorded. Stateless; thread-safe.

#ifndef BACKFILL_CORE_VALIDATE_STEP_H_
#define BACKFILL_CORE_VALIDATE_STEP_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/engine.h"
#include "core/job.h"

namespace backfill {

struct ValidationOutcome {
  // Check failures, each "dataset: what is wrong"; empty: passed.
  std::vector<std::string> failures;
  // Indexes into the tasks whose staged rows differ from their checkpoint
  // (lost or changed after it); they can be recomputed.
  std::vector<size_t> lost;
  std::string lost_summary;  // e.g. "daily_revenue: 2025-01-01 (staged 0,
                             // checkpoint 4)"
};

// `tasks` are the job's tasks with their checkpoints.
absl::StatusOr<ValidationOutcome> ValidateStaging(
    Engine* engine, const JobLayout& layout,
    const std::vector<PartitionTask>& tasks);

}  // namespace backfill

#endif  // BACKFILL_CORE_VALIDATE_STEP_H_
