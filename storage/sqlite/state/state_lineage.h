// State lineage: the recorded history of published partition versions in
// the SQLite state store's file, and what a job found it would change.
//
//   - lineage: one record per version of a (dataset, partition), either a
//     job's publish (with the approval it was published with) or the
//     rollback of a job (which restored the rows that job replaced); a job
//     has at most one of each per partition (a unique index). Records are
//     append-only; their id is the order they were recorded in. Each
//     carries a checksum (DATA_LOSS naming it when it fails).
//   - rollbacks: how each rolled-back job was rolled back.
//   - job_diff_datasets and job_diff_partitions: the diff a job computed
//     before publishing (per dataset its columns, per partition its counts,
//     measure totals and sample rows), replaced as a whole.
//
// The publish and rollback bookkeeping (RecordPublication, RecordRollback)
// write the records, the tasks' and the jobs' moves together, after the
// transition guards (core/model/transition_guard.h) allowed them.
//
// Free functions in the caller's transaction (see state_sql.h).

#ifndef BACKFILL_STORAGE_SQLITE_STATE_STATE_LINEAGE_H_
#define BACKFILL_STORAGE_SQLITE_STATE_STATE_LINEAGE_H_

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/model/diff.h"
#include "core/model/job.h"
#include "core/ports/state_store.h"
#include "storage/sqlite/state/state_sql.h"

namespace backfill::sqlite_state {

// StateStore::RecordPublication and RecordRollback.
absl::Status RecordPublication(const StateDb& db, const std::string& job_id,
                               PublicationLineage& lineage, JobState to,
                               absl::Time now);
absl::Status RecordRollback(const StateDb& db, const std::string& job_id,
                            const RollbackInfo& info,
                            const std::vector<LineageRecord>& lineage,
                            const std::string& message,
                            const std::string& also_message, absl::Time now);

// How the job was rolled back, if it was.
absl::StatusOr<std::optional<RollbackInfo>> LoadRollbackInfo(
    const StateDb& db, const std::string& job_id);

// StateStore::GetLineage, NewestLineages, NewestLineageOf,
// GetLineageOverlapping and PublicationTimes.
absl::StatusOr<std::vector<LineageRecord>> GetLineage(
    const StateDb& db, const std::string& dataset,
    const std::string& partition);
absl::StatusOr<std::vector<std::optional<LineageRecord>>> NewestLineages(
    const StateDb& db,
    const std::vector<std::pair<std::string, std::string>>& keys);
absl::StatusOr<std::optional<LineageRecord>> NewestLineageOf(
    const StateDb& db, const std::string& dataset);
absl::StatusOr<std::vector<LineageRecord>> GetLineageOverlapping(
    const StateDb& db, const std::string& job_id);
absl::StatusOr<std::map<std::string, absl::Time>> PublicationTimes(
    const StateDb& db, const std::vector<std::string>& job_ids);

// StateStore::ReplaceJobDiff, GetJobDiff (as LoadJobDiff) and
// PartitionDiffs.
absl::Status ReplaceJobDiff(const StateDb& db, const JobDiffHeader& header,
                            DiffPages& pages);
// With `visit`, each partition is handed to it (with the index of its
// dataset in the diff, and that dataset without partitions) instead of
// kept: the diff comes back without them.
absl::StatusOr<std::optional<JobDiff>> LoadJobDiff(
    const StateDb& db, const std::string& job_id, const std::string& dataset,
    bool with_samples,
    const std::function<void(size_t index, const DatasetDiff& dataset,
                             PartitionDiff&& p)>& visit = nullptr);
absl::StatusOr<std::map<std::string, PartitionDiff>> PartitionDiffs(
    const StateDb& db, const std::string& dataset,
    const std::string& partition);

}  // namespace backfill::sqlite_state

#endif  // BACKFILL_STORAGE_SQLITE_STATE_STATE_LINEAGE_H_
