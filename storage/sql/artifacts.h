// What a job leaves in the warehouse besides the published rows, as every
// SQL engine lists and drops it: its staging (where it lives is the
// dialect's: Dialect::DropJobSpace, ListJobSpaces) and its rollback copies
// (Dialect::Copy), which outlive the staging until Rollback or retention
// drops them. Only jobs with the state store's ids, "bf-<digits>", are
// listed: their ids can be told apart from the dataset name that follows
// them in a name.
//
// Stateless free functions over a connection their caller holds.

#ifndef BACKFILL_STORAGE_SQL_ARTIFACTS_H_
#define BACKFILL_STORAGE_SQL_ARTIFACTS_H_

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/ports/engine.h"
#include "storage/sql/connection.h"

namespace backfill::sql {

// The job id of a name that goes on, after its prefix, with
// "bf_<digits>" (a state store's job id as Dialect::SafeJob spells it):
// "bf-<digits>" and what follows: nothing when `whole`, else '_' and at
// least one more character (returned without the '_'). nullopt otherwise.
std::optional<std::pair<std::string, std::string>> StoreJobOf(
    std::string_view rest, bool whole);

// The job ids of every staging in the warehouse (Dialect::ListJobSpaces).
absl::StatusOr<std::vector<std::string>> ListJobsWithStaging(Connection* conn);

// Drops a job's staging in a write transaction of its own.
absl::Status DropStaging(Connection* conn, const std::string& job_id);

// Every rollback copy of a store's job, in job (by number) then dataset
// order, read in a snapshot transaction of its own.
absl::StatusOr<std::vector<RollbackCopy>> ListRollbackCopies(Connection* conn);

// Drops these copies in one write transaction of its own (those already
// gone are skipped).
absl::Status DropRollbackCopies(Connection* conn,
                                const std::vector<RollbackCopy>& copies);

// Drops every rollback copy of `job_id` (and nothing else), in the
// caller's transaction.
absl::Status DropCopiesOf(Connection* conn, const std::string& job_id);

}  // namespace backfill::sql

#endif  // BACKFILL_STORAGE_SQL_ARTIFACTS_H_
