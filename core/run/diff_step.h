// Diff step (part of step 4 of the playbook, validation): compares a job's
// staged rows with the published ones, per (dataset, partition), through the
// engine's DiffPartitions (DiffStaging), and stores the diff with the job
// (RecordDiff), to be read before anything is published. Stateless;
// thread-safe.

#ifndef BACKFILL_CORE_RUN_DIFF_STEP_H_
#define BACKFILL_CORE_RUN_DIFF_STEP_H_

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/model/diff.h"
#include "core/ports/engine.h"
#include "core/run/step_context.h"

namespace backfill {

// The diff of every partition of the layout, datasets in layout order,
// with up to kDiffStoredSamples sample rows each. A partition whose diff
// fails for a reason that will not pass by itself keeps the error in
// PartitionDiff::error (the job goes on: the diff informs, the checks
// decide); a failure of the warehouse's storage that may pass (disk full,
// I/O error: RESOURCE_EXHAUSTED, UNAVAILABLE) is returned, to be retried.
//
// The partitions are compared in chunks; up to `parallelism` chunks at a
// time, each on a thread of its own (the calling thread is one of them), so
// that a large job's diff takes the engine's parallelism rather than one
// connection's. The result does not depend on `parallelism`.
absl::StatusOr<JobDiff> DiffStaging(Engine* engine, const JobLayout& layout,
                                    absl::Time now, int parallelism = 1);

// DiffStaging of job `id`'s `layout` (as many chunks at a time as the
// runner has workers) stored with the job (StateStore::ReplaceJobDiff),
// replacing an earlier one; both retried while storage fails.
absl::Status RecordDiff(const StepContext& ctx, const std::string& id,
                        const JobLayout& layout);

}  // namespace backfill

#endif  // BACKFILL_CORE_RUN_DIFF_STEP_H_
