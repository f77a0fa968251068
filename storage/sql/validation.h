// Validation of a job's staged rows of one dataset (Engine::ValidateStaged)
// for every SQL engine: the staged rows per partition (by the one
// definition of membership) and the primary key's two rules, unique and
// never NULL, each broken rule reported with a count and one example.
//
// Thread-safety: a free function over a connection its caller holds.

#ifndef BACKFILL_STORAGE_SQL_VALIDATION_H_
#define BACKFILL_STORAGE_SQL_VALIDATION_H_

#include <string>

#include "absl/status/statusor.h"
#include "core/ports/engine.h"
#include "storage/sql/connection.h"

namespace backfill::sql {

// In a snapshot transaction of its own. FAILED_PRECONDITION when nothing
// is staged for the dataset in the job.
absl::StatusOr<ValidationReport> ValidateStaged(Connection* conn,
                                                const std::string& job_id,
                                                const DatasetSpec& dataset);

}  // namespace backfill::sql

#endif  // BACKFILL_STORAGE_SQL_VALIDATION_H_
