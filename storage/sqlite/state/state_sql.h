// What the parts of the SQLite state store (storage/sqlite/state/: jobs,
// tasks, lineage, governance, queries) share to run their statements:
// StateDb, the connection a part's functions run on with the path of the
// file, and the few helpers their SQL is built with.
//
// Every function of a part takes a StateDb and runs inside a transaction
// that its caller (SqliteStateStore) began on that connection and holds,
// with the connection's mutex held: a part never begins, commits or locks
// anything itself, so that one StateStore call is one transaction whatever
// parts it uses. Free functions and a plain struct; the helpers are
// thread-safe, a StateDb is used by one thread at a time (as its
// connection).

#ifndef BACKFILL_STORAGE_SQLITE_STATE_STATE_SQL_H_
#define BACKFILL_STORAGE_SQLITE_STATE_STATE_SQL_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "storage/sqlite/sqlite_db.h"

namespace backfill::sqlite_state {

// The connection a part's statements run on (not owned; _bf_row_hash is
// registered on it, for the records' checksums) and the path of its file,
// which a DATA_LOSS refusal of a damaged record names. `path` views a
// string that outlives the StateDb (the store's own).
struct StateDb {
  sqlite::Database* db;
  std::string_view path;
};

// SQL built once, at its first use, from parts (the record checksums'
// tables): a statement's text is its key in the statement cache, so it
// must not change between calls. Leaked on purpose: statements are
// prepared until the process ends.
const std::string& Once(std::string sql);

// "?3, ?4, ?5": `n` placeholders numbered from `first`.
std::string Placeholders(int first, size_t n);

// Deletes the rows of job `job_id` from `table` (one of the tables a
// StateStore call replaces whole: a job's check results, confirmations,
// diff).
absl::Status DeleteRowsOfJob(const StateDb& db, const char* table,
                             const std::string& job_id);

}  // namespace backfill::sqlite_state

#endif  // BACKFILL_STORAGE_SQLITE_STATE_STATE_SQL_H_
