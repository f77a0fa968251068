// Profiles for the validation checks (Engine::ProfileStaged,
// Engine::ProfilePublished) for every SQL engine: per partition, the rows,
// the sums of measures, NULLs in chosen columns, values whose type does not
// fit their column (where the engine lets a column hold other types) and
// references with no row to refer to, each with a few sample rows; and the
// rows and sums of the published partitions the job replaces.
//
// Thread-safety: free functions over a connection their caller holds.

#ifndef BACKFILL_STORAGE_SQL_PROFILES_H_
#define BACKFILL_STORAGE_SQL_PROFILES_H_

#include <string>

#include "absl/status/statusor.h"
#include "core/ports/engine.h"
#include "storage/sql/connection.h"

namespace backfill::sql {

// The staged rows of `dataset` of the job `layout` prepares, in a snapshot
// transaction of its own. FAILED_PRECONDITION when nothing is staged.
absl::StatusOr<Profile> ProfileStaged(Connection* conn, const JobLayout& layout,
                                      const DatasetSpec& dataset,
                                      const ProfileRequest& request);

// The published rows of the job's partitions of `dataset` (those it has
// released are not listed any more), in a snapshot transaction of its own;
// empty before the table exists. Only the measures the table has are
// summed (a drifted table lacks some; the schema check reports it).
absl::StatusOr<Profile> ProfilePublished(Connection* conn,
                                         const std::string& job_id,
                                         const DatasetSpec& dataset,
                                         const ProfileRequest& request);

}  // namespace backfill::sql

#endif  // BACKFILL_STORAGE_SQL_PROFILES_H_
