// Lineage, rollbacks and the jobs' diffs in the PostgreSQL state store
// (backfill_state.lineage, rollbacks, job_diff_datasets,
// job_diff_partitions), and the reads of history across jobs: verified
// versions and the input rows of past runs. The SQL of
// storage/sqlite/state/state_lineage.h and state_queries.h on PostgreSQL.
//
// Free functions over the connection of the caller's transaction
// (pg_state_sql.h). Ownership: none; the connection is the caller's, for
// the call. Thread-safety: no state of their own; thread-safe as far as
// each connection is used by one thread at a time.

#ifndef BACKFILL_STORAGE_POSTGRES_STATE_PG_STATE_LINEAGE_H_
#define BACKFILL_STORAGE_POSTGRES_STATE_PG_STATE_LINEAGE_H_

#include <cstdint>
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
#include "storage/postgres/state/pg_state_sql.h"

namespace backfill::pg_state {

absl::Status RecordPublication(PgConnection* conn, const std::string& job_id,
                               PublicationLineage& lineage, JobState to,
                               absl::Time now);
absl::Status RecordRollback(PgConnection* conn, const std::string& job_id,
                            const RollbackInfo& info,
                            const std::vector<LineageRecord>& lineage,
                            const std::string& message,
                            const std::string& also_message, absl::Time now);
absl::StatusOr<std::optional<RollbackInfo>> LoadRollbackInfo(
    PgConnection* conn, const std::string& job_id);

absl::StatusOr<std::vector<LineageRecord>> GetLineage(
    PgConnection* conn, const std::string& dataset,
    const std::string& partition);
absl::StatusOr<std::vector<std::optional<LineageRecord>>> NewestLineages(
    PgConnection* conn,
    const std::vector<std::pair<std::string, std::string>>& keys);
absl::StatusOr<std::optional<LineageRecord>> NewestLineageOf(
    PgConnection* conn, const std::string& dataset);
absl::StatusOr<std::vector<LineageRecord>> GetLineageOverlapping(
    PgConnection* conn, const std::string& job_id);
absl::StatusOr<std::map<std::string, absl::Time>> PublicationTimes(
    PgConnection* conn, const std::vector<std::string>& job_ids);

absl::Status ReplaceJobDiff(PgConnection* conn, const JobDiffHeader& header,
                            DiffPages& pages);
absl::StatusOr<std::optional<JobDiff>> LoadJobDiff(PgConnection* conn,
                                                   const std::string& job_id,
                                                   const std::string& dataset,
                                                   bool with_samples);
absl::StatusOr<std::map<std::string, PartitionDiff>> PartitionDiffs(
    PgConnection* conn, const std::string& dataset,
    const std::string& partition);

absl::StatusOr<std::map<std::string, int64_t>> LastRunInputRows(
    PgConnection* conn, const std::string& dataset,
    const std::vector<std::string>& partitions);
absl::StatusOr<std::map<std::string, VerifiedVersion>> VerifiedVersions(
    PgConnection* conn, const std::string& dataset,
    const std::vector<std::string>& partitions);

}  // namespace backfill::pg_state

#endif  // BACKFILL_STORAGE_POSTGRES_STATE_PG_STATE_LINEAGE_H_
