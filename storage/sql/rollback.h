// The atomic rollback of a published job (Engine::Rollback) for every SQL
// engine: one transaction that checks the publication marker and the
// warehouse's owner, replaces each of the job's partitions with its
// rollback copy's rows, proving per partition that it deletes and restores
// exactly the rows that belong to it (Dialect::WriteProven) and that every
// row of the copy went back, drops the copies of the job and of the later
// jobs rolled back with it, and writes the rollback marker (markers.h). A
// job rolled back before is measured and reported `already`, never
// restored twice.
//
// Thread-safety: free functions over a connection their caller holds.

#ifndef BACKFILL_STORAGE_SQL_ROLLBACK_H_
#define BACKFILL_STORAGE_SQL_ROLLBACK_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/ports/engine.h"
#include "storage/sql/connection.h"
#include "storage/sql/replace_hooks.h"

namespace backfill::sql {

// `owner`: the store id of the claim.
// `fence`: the lease token the rollback runs under (see Publish); nullopt
// outside a group.
absl::StatusOr<RollbackResult> Rollback(
    Connection* conn, ReplaceHooks& hooks, const std::string& owner,
    const RollbackSpec& spec, std::optional<int64_t> fence = std::nullopt);

// The rows and fingerprint of each of the item's partitions of the
// published table (as staging fingerprints its output), in the caller's
// transaction.
absl::Status MeasurePartitions(Connection* conn, const JobLayout::Item& item,
                               std::vector<RestoredPartition>* out,
                               int64_t* rows);

}  // namespace backfill::sql

#endif  // BACKFILL_STORAGE_SQL_ROLLBACK_H_
