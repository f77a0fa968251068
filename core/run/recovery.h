// Recovery: what becomes, at start-up, of the jobs the store holds
// unfinished — the process may have died anywhere in their run.
//
//   - Rollbacks the warehouse committed but the store did not record are
//     recorded first (rollback_step.h RecoverRollbacks), before any job
//     can publish over their partitions.
//   - QUEUED and RUNNING jobs continue from their checkpoints: attempts
//     that were in flight start over (their tasks back to PENDING); tasks
//     recorded UNCHANGED or SKIPPED by the early cutoff stay settled.
//   - PAUSED jobs stay paused and keep their partitions.
//   - VALIDATING, PUBLISHING and CONFIRMING jobs finish (validating again
//     first if this process did not validate them itself; a publish the
//     warehouse committed is recorded, not repeated: publish_step.h).
//   - FAILED and VALIDATION_FAILED jobs that kept their staging, and
//     AWAITING_APPROVAL jobs, stay held for a decision.
//   - A job that can no longer run under the pipelines in force ends
//     FAILED (PAUSED: CANCELLED) with nothing published; one that may have
//     published refuses the start instead.
//   - Staging left by jobs that ended (a crash between their end and its
//     cleanup) is swept (SweepOrphans).
//
// Recovered jobs run with the catalog in force at start-up, and are
// admitted in this order: jobs that had started keep their partitions
// ahead of those that had not; then by job number.
//
// Stateless; thread-safe as the StepContext is.

#ifndef BACKFILL_CORE_RUN_RECOVERY_H_
#define BACKFILL_CORE_RUN_RECOVERY_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/model/live_catalog.h"
#include "core/run/active_job.h"
#include "core/run/step_context.h"

namespace backfill {

struct RecoveredJobs {
  // The jobs to hold in memory, in admission order, each in its phase:
  // kWaiting (QUEUED, RUNNING), kPaused, kFinishing (to be finished) or
  // kHeld.
  std::vector<std::unique_ptr<ActiveJob>> jobs;
  // The jobs whose rollback was recorded just now: it had restored its rows
  // before the process died, possibly before it superseded the held jobs
  // over its partitions, which are superseded once they are in memory.
  std::vector<std::string> rolled_back;
};

// Reads what the store holds unfinished and decides what becomes of each
// job (see above), writing what that changes; `catalog` is in force.
// FAILED_PRECONDITION when a job that may have published cannot be
// resumed.
absl::StatusOr<RecoveredJobs> RecoverJobs(const StepContext& ctx,
                                          const LiveCatalog& catalog);

// What RecoverJobs decides for one unfinished job (`job` as stored, to run
// with `catalog`): the job to hold in memory in its phase, or nullptr when
// it ended here (it cannot run under the pipelines in force; nothing of it
// was published). A replica of a group recovers each job it claims so
// (job_runner.h).
absl::StatusOr<std::unique_ptr<ActiveJob>> RecoverJob(
    const StepContext& ctx, std::shared_ptr<const Catalog> catalog, Job job);

// Drops the staging of jobs that ended (and is not held by a job in the
// table), cancelling their tasks that never ran. Best effort: what fails is
// retried at the next start. With `keep_failed` (a replica of a group,
// which holds only the jobs it claimed), FAILED and VALIDATION_FAILED jobs
// keep their staging: another replica may hold them for a retry.
void SweepOrphans(const StepContext& ctx, bool keep_failed = false);

}  // namespace backfill

#endif  // BACKFILL_CORE_RUN_RECOVERY_H_
