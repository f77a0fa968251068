// The change triggers of the PostgreSQL warehouse (the triggers behind
// storage/sql/change_signal.h). For a published table they are one
// PL/pgSQL function `_bf."chg_<epoch>"()` (SECURITY DEFINER, owned by the
// daemon's role, search_path pg_catalog) and four statement-level triggers
// `_bf_chg_<epoch>_{i,u,d,t}`, each ENABLE ALWAYS (they fire under
// session_replication_role = replica too):
//   i, u, d  AFTER INSERT / UPDATE / DELETE FOR EACH STATEMENT with
//            transition tables: one upsert into `_bf.change_counts` per
//            statement, the rows it wrote grouped by their partition (the
//            engine's own membership expression, pg_membership.h: counters
//            are per partition exactly), in partition order; an UPDATE
//            counts its old rows and its new rows in the same upsert;
//   t        AFTER TRUNCATE: the table's epoch in `_bf.change_tables` is
//            replaced, so every fingerprint cached for it is unknown.
// Rows of no partition are counted under '' (as is every row of an
// unpartitioned table).
//
// A relation that is not an ordinary table (a view, a partitioned table)
// or whose name holds '$' is not followed.
//
// Stateless free functions; thread-safe as far as each call uses its own
// connection.

#ifndef BACKFILL_STORAGE_POSTGRES_PG_CHANGE_TRIGGERS_H_
#define BACKFILL_STORAGE_POSTGRES_PG_CHANGE_TRIGGERS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/model/catalog.h"
#include "storage/sql/connection.h"
#include "storage/sql/dialect.h"

namespace backfill::postgres {

// Dialect::ChangeTriggerSql and ChangeIdentity of the PostgreSQL dialect
// (`dialect` names the tables and the membership).
absl::StatusOr<std::vector<std::string>> ChangeTriggerStatements(
    const sql::Dialect& dialect, sql::Connection* conn, const DatasetSpec& ds,
    const std::string& epoch);
absl::StatusOr<std::string> ChangeTableIdentity(const sql::Dialect& dialect,
                                                sql::Connection* conn,
                                                const DatasetSpec& ds);

}  // namespace backfill::postgres

#endif  // BACKFILL_STORAGE_POSTGRES_PG_CHANGE_TRIGGERS_H_
