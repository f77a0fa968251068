// Rollback step: whether a published job can be rolled back, which later
// jobs a forced rollback takes along, and the lineage a rollback leaves.
// Pure functions over the job, the lineage history of its partitions and
// the later jobs; the job runner makes the engine and state store calls
// (Engine::Rollback, StateStore::RecordRollback). Stateless; thread-safe.
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

#ifndef BACKFILL_CORE_ROLLBACK_STEP_H_
#define BACKFILL_CORE_ROLLBACK_STEP_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/model/job.h"
#include "core/ports/engine.h"

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

}  // namespace backfill

#endif  // BACKFILL_CORE_ROLLBACK_STEP_H_
