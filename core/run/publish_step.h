// Publish step (step 5 of the playbook): a validated (or approved) job's
// partitions replace the published ones, every dataset of the job in one
// warehouse transaction, and the lineage of each published partition is
// recorded with the move to CONFIRMING.
//
//   PublishJob  the publish itself: exactly once across crashes — the
//       engine's Publish writes a publication marker (job and store) in
//       the same transaction, and a job resumed into PUBLISHING whose
//       marker is there records the publication without publishing again
//       (one that is not checks that its staging is still intact first).
//       Partitions the early cutoff let go of are not republished; a job
//       left with none leaves the warehouse as it is. The record (lineage,
//       tasks PUBLISHED, the move) is one store transaction, retried until
//       it is written.
//   LineageOf  the lineage a published job leaves, from its checkpoints.
//   EnforceRetention  the rollback copies a publish leaves behind are kept
//       only as long as their datasets' `retention` policies say
//       (core/governance/retention.h): called at start and after each publish.
//
// Stateless; thread-safe as the StepContext is. PublishJob takes the
// table's lock itself.

#ifndef BACKFILL_CORE_RUN_PUBLISH_STEP_H_
#define BACKFILL_CORE_RUN_PUBLISH_STEP_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/model/job.h"
#include "core/model/live_catalog.h"
#include "core/run/active_job.h"
#include "core/run/step_context.h"

namespace backfill {

// Publishes a PUBLISHING job (or records the publication the warehouse
// committed before a crash) and moves it to CONFIRMING, reporting what it
// replaced to the observer (OnJobPublished). An error before the warehouse
// committed leaves nothing published (the caller fails the job);
// CANCELLED when the warehouse committed but the store could not record it
// (stopping, or the store holds the job in another state): recovery finds
// the marker and records it.
absl::Status PublishJob(const StepContext& ctx, ActiveJob* job);

// One record per STAGED task; `versions` maps a dataset to the transform
// version the job computed it with. Of `job`, only its id, request and
// approval are read. `*rows` gets the rows published. The tasks are
// consumed: each record takes its task's fingerprints, and `tasks` is left
// empty, so that a large job's tasks and lineage are not held twice.
std::vector<LineageRecord> LineageOf(
    const Job& job, std::vector<PartitionTask>&& tasks,
    const std::map<std::string, std::string>& versions, absl::Time now,
    int64_t* rows);
// The same, appended to `*lineage`, with the rows added to `*rows`: the
// lineage of a job read a page of tasks at a time.
void AppendLineageOf(const Job& job, std::vector<PartitionTask>&& tasks,
                     const std::map<std::string, std::string>& versions,
                     absl::Time now, int64_t* rows,
                     std::vector<LineageRecord>* lineage);

// Drops the rollback copies that expired under the retention policies of
// the catalog in force (retention.h); a job being rolled back keeps its
// copies whatever their age. Best effort (a failure is retried the next
// time). Returns how many copies were dropped.
absl::StatusOr<int64_t> EnforceRetention(const StepContext& ctx,
                                         const LiveCatalog& catalog);

}  // namespace backfill

#endif  // BACKFILL_CORE_RUN_PUBLISH_STEP_H_
