// The snapshot of a pinned input on the SQLite warehouse: the copy a job
// makes of a table every partition reads whole (`mapping: all`, e.g. a
// dimension), so that every partition joins the same version.
//
// CREATE TABLE ... AS SELECT would copy the rows but not the keys: a
// snapshot of `dim_customers(customer_id INTEGER PRIMARY KEY, ...)` would
// lose its rowid key, and every partition's join on it would build an
// automatic index and compare records instead of looking up an integer
// (measured: 12% more CPU for the demo's revenue transform). So the
// snapshot is declared like its table — the same columns and declared
// types (the same affinities), the same primary key (an INTEGER PRIMARY
// KEY stays the rowid), WITHOUT ROWID when the table is — and gets an
// index for each of the table's indexes on plain columns (including those
// of UNIQUE constraints; partial and expression indexes are left out),
// with their collations and orders. A table whose definition cannot be
// repeated that way (generated or hidden columns, a declared type of
// unusual text) is copied with CREATE TABLE ... AS SELECT as before.
//
// Stateless free function; thread-safe as far as each call uses its own
// connection.

#ifndef BACKFILL_STORAGE_SQLITE_SQLITE_PIN_SNAPSHOT_H_
#define BACKFILL_STORAGE_SQLITE_SQLITE_PIN_SNAPSHOT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "storage/sql/connection.h"
#include "storage/sql/dialect.h"

namespace backfill::sqlite {

// The statements that make `snapshot` a copy of `table` (both in the
// warehouse; the caller runs them in its transaction, in order).
absl::StatusOr<std::vector<std::string>> PinSnapshotStatements(
    sql::Connection* conn, const sql::Relation& table,
    const sql::Relation& snapshot);

}  // namespace backfill::sqlite

#endif  // BACKFILL_STORAGE_SQLITE_SQLITE_PIN_SNAPSHOT_H_
