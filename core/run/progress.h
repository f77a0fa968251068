// Progress of a job as an operator follows it: the step of the playbook it
// is at (what it is doing now) and how long its recompute still takes (its
// ETA). Pure functions of a Job as the state store reads it (counts and
// recompute times filled in); stateless and thread-safe.
//
// How the ETA is estimated (only for a RUNNING job, and only once one of
// its partitions was recomputed: before that it is unknown, never a
// guess):
//   per partition  the mean duration of the job's partitions recomputed so
//                  far (Job::timed_seconds / Job::timed_partitions)
//   parallelism    the partitions of the job running now, at least 1 and at
//                  most the partitions left
//   remaining      pending + running partitions
//   ETA            ceil(remaining / parallelism) x per partition
// It covers the recompute only (step 3): validation, publish and
// confirmation come after it. Partitions already running count as whole
// ones, so the estimate leans long by at most one partition's duration.

#ifndef BACKFILL_CORE_RUN_PROGRESS_H_
#define BACKFILL_CORE_RUN_PROGRESS_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/time/time.h"
#include "core/model/job.h"

namespace backfill {

struct RecomputeEta {
  absl::Duration remaining;      // until every partition is recomputed
  absl::Duration per_partition;  // the mean it is estimated from
  int64_t parallelism = 1;
};

// The ETA of a RUNNING job's recompute (see above); nullopt when the job
// is not RUNNING or none of its partitions was recomputed yet.
std::optional<RecomputeEta> EstimateRecompute(const Job& job);

// The playbook step the job is at and what it is doing, one line:
// "steps 2-3 of 6, pin inputs and recompute in staging: 2 running,
// 5 pending, 3 of 10 done".
std::string CurrentStep(const Job& job);

}  // namespace backfill

#endif  // BACKFILL_CORE_RUN_PROGRESS_H_
