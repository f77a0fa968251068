// Rollback step: a published job's partitions restored to what its
// publish replaced, in every dataset of the job in one warehouse
// transaction, and recorded: the job (and the later jobs a forced rollback
// takes along) ends ROLLED_BACK, lineage gets a rollback version per
// partition.
//
//   CheckRollbackable  whether the job's state and what it published allow
//       it at all (a job that published nothing is told so).
//   RollBack  the warehouse's restore (Engine::Rollback, which writes a
//       rollback marker in the same transaction) and its record
//       (StateStore::RecordRollback); refused while a rollback copy it
//       needs expired under its dataset's retention policy.
//   RecoverRollbacks  at start: records the rollbacks the warehouse
//       committed but the store did not (a crash in between), from their
//       markers; nothing is restored again.
//   LaterJobs, RollbackLineage  pure functions over the job, the lineage
//       history of its partitions and the later jobs: which later jobs
//       forbid it or go along, and the lineage it leaves.
//
// Jobs held for a decision over the restored partitions computed against
// the rows a rollback withdraws: once the warehouse restored them, they are
// superseded (SupersededByRollback names it); the operator's command
// (job_commands.h) holds the job's partitions and supersedes them.
// Stateless; thread-safe as the StepContext is.
//
// The current version of a (dataset, partition) is read from its lineage,
// in the order recorded: a rollback record of job X undoes X's publish of
// that partition, so the current version is the newest publish whose job
// has not been rolled back there. A job can be rolled back when, on every
// one of its partitions, no publish recorded after its own is still in
// force. Otherwise the later jobs must be rolled back first (newest
// first), or --force rolls them back together with it — allowed only when
// each later job is SUCCEEDED or DOWNSTREAM_UNHEALTHY and every partition
// it published lies within the job's partitions, so that restoring the
// job's rollback copy is exactly the state before the job and nothing
// outside the job's partitions changes.

#ifndef BACKFILL_CORE_RUN_ROLLBACK_STEP_H_
#define BACKFILL_CORE_RUN_ROLLBACK_STEP_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/model/job.h"
#include "core/model/live_catalog.h"
#include "core/ports/engine.h"
#include "core/run/step_context.h"

namespace backfill {

// What an operator asks for (RollbackBackfill).
struct RollbackRequest {
  std::string reason;        // required
  std::string requested_by;  // who, recorded in the job and lineage
  bool force = false;        // take later jobs along (see above)
};

// Looks a job up by id (the state store's GetJob).
using JobLookup = std::function<absl::StatusOr<Job>(const std::string& id)>;

// The later jobs whose publishes of `job`'s partitions are still in force,
// newest first; `history` is StateStore::GetLineageOverlapping(job.id).
// With none: an empty list. With some and !force: FAILED_PRECONDITION
// naming the newest and one of its partitions. With force: the list, or
// FAILED_PRECONDITION when one of them cannot be taken along (its state,
// or a partition of it outside `job`'s, named).
absl::StatusOr<std::vector<Job>> LaterJobs(
    const Job& job, const std::vector<LineageRecord>& history, bool force,
    const JobLookup& lookup);

// The rollback's lineage: one record per restored (dataset, partition) for
// `job`, and one per published partition of each of `with_jobs` (all
// within the restored ones), each with the restored rows' count and
// fingerprint, the transform version and inputs of the version restored
// (the newest publish before `job` still in force; empty when there was
// none), and `info`'s reason and requested_by.
std::vector<LineageRecord> RollbackLineage(
    const Job& job, const std::vector<Job>& with_jobs,
    const std::vector<LineageRecord>& history,
    const std::vector<RestoredPartition>& restored, const RollbackInfo& info,
    absl::Time now);

// OK when `job` may be rolled back as far as its own record goes: it is
// SUCCEEDED or DOWNSTREAM_UNHEALTHY and published some partition (not all
// of them were cut off early); FAILED_PRECONDITION saying why otherwise.
// (A ROLLED_BACK job is refused too: the caller returns it as it is.)
absl::Status CheckRollbackable(const StepContext& ctx, const Job& job);

// Restores and records the rollback of `job` under the catalog in force
// (`catalog`). `with_ids`: null to decide which later jobs go along
// (LaterJobs, with `request.force`); else those of the warehouse's marker
// (recovery). `restored_rows` (if set) runs once the warehouse restored the
// rows, before the state store records the rollback. Returns the job as
// stored afterwards; every job it rolled back is announced (NotifyLocked).
absl::StatusOr<Job> RollBack(const StepContext& ctx, const LiveCatalog& catalog,
                             const Job& job, const RollbackRequest& request,
                             const std::vector<std::string>* with_ids,
                             const std::function<void()>& restored_rows);

// Records the rollbacks the warehouse committed but the store did not
// (their markers name this store and their jobs are still SUCCEEDED or
// DOWNSTREAM_UNHEALTHY). `recovered` gets the ids of the jobs whose
// rollback it recorded.
absl::Status RecoverRollbacks(const StepContext& ctx,
                              const LiveCatalog& catalog,
                              std::vector<std::string>* recovered);

// How a job held for a decision names the rollback of `rolled_back` that
// superseded it.
std::string SupersededByRollback(const std::string& rolled_back);

}  // namespace backfill

#endif  // BACKFILL_CORE_RUN_ROLLBACK_STEP_H_
