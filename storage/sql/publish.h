// The atomic publish of a job (Engine::Publish) for every SQL engine: one
// transaction over every partition of every dataset of the job, which
// checks that this state store still owns the warehouse, keeps the rows it
// replaces in the rollback copy, deletes exactly the job's partitions and
// proves it (Dialect::WriteProven: every row copied and deleted belongs to
// its partition, and as many were copied as deleted), inserts the staged
// rows and writes the publication marker (markers.h). A job published
// before is a no-op.
//
// Thread-safety: a free function over a connection its caller holds.

#ifndef BACKFILL_STORAGE_SQL_PUBLISH_H_
#define BACKFILL_STORAGE_SQL_PUBLISH_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "core/ports/engine.h"
#include "storage/sql/connection.h"
#include "storage/sql/replace_hooks.h"

namespace backfill::sql {

// `owner`: the store id of the claim ("" before any claim: no ownership
// check). `fence`: the lease token the job is published under, checked
// against the warehouse's fence of the job in the transaction (markers.h
// CheckFence); nullopt outside a group.
absl::Status Publish(Connection* conn, ReplaceHooks& hooks,
                     const std::string& owner, const JobLayout& layout,
                     std::optional<int64_t> fence = std::nullopt);

}  // namespace backfill::sql

#endif  // BACKFILL_STORAGE_SQL_PUBLISH_H_
