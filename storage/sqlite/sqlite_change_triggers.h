// The change triggers of the SQLite warehouse (the triggers behind
// storage/sql/change_signal.h): for a published table `t`, triggers named
// `_bf_chg_<epoch>_<what>` bump `_bf_change_counts` (tbl, bucket, n) for
// every row a write touches:
//   _i   AFTER INSERT: the new row's bucket;
//   _u   AFTER UPDATE: the old row's bucket and the new row's (a row that
//        moves between partitions counts in both);
//   _d   AFTER DELETE: the old row's bucket (DELETE without WHERE too:
//        with triggers SQLite deletes row by row);
//   _ri, _ru  BEFORE INSERT / BEFORE UPDATE: the bucket of every row the
//        new values collide with on the rowid or a unique index, since a
//        REPLACE conflict resolution deletes such rows without firing
//        delete triggers (SQLite fires them only with recursive triggers,
//        a setting of each connection).
//
// The triggers are plain SQL, so every writer runs them, including
// connections that do not register `_bf_partition_of` (sqlite3, loaders).
// The bucket is therefore a pure-SQL key rather than the partition itself:
// the first characters of the value's text that CandidateRangeOf makes the
// candidate range of (the month for month partitions, the day for day and
// hour partitions: an hour's write moves the signal of every hour of its
// day), a key partition's key text, "TIME|KEY" for time x key, and '' for
// an unpartitioned table and rows whose partition column is NULL. Every
// member of partition P is counted under P's bucket (ChangeBucket); a
// bucket also counts values of no partition, which only costs a
// recompute.
//
// A table with a unique index on an expression is not followed (no
// triggers: its fingerprints are hashed on every read).
//
// Stateless free functions; thread-safe as far as each call uses its own
// connection.

#ifndef BACKFILL_STORAGE_SQLITE_SQLITE_CHANGE_TRIGGERS_H_
#define BACKFILL_STORAGE_SQLITE_SQLITE_CHANGE_TRIGGERS_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/model/catalog.h"
#include "storage/sql/connection.h"

namespace backfill::sqlite {

inline constexpr char kChangeTablesTable[] = "_bf_change_tables";
inline constexpr char kChangeCountsTable[] = "_bf_change_counts";
inline constexpr char kFingerprintCacheTable[] = "_bf_fingerprints";

// The bucket of a row of `ds` as SQL over the columns `qualifier` + name
// (e.g. "NEW."), never NULL.
std::string ChangeBucketExpression(const DatasetSpec& ds,
                                   std::string_view qualifier);

// Dialect::ChangeBucket of the SQLite dialect.
absl::StatusOr<std::string> ChangeBucketOf(const DatasetSpec& ds,
                                           const std::string& partition);

// Dialect::ChangeTriggerSql and ChangeIdentity of the SQLite dialect.
absl::StatusOr<std::vector<std::string>> ChangeTriggerStatements(
    sql::Connection* conn, const DatasetSpec& ds, const std::string& epoch);
absl::StatusOr<std::string> ChangeTableIdentity(sql::Connection* conn,
                                                const DatasetSpec& ds);

}  // namespace backfill::sqlite

#endif  // BACKFILL_STORAGE_SQLITE_SQLITE_CHANGE_TRIGGERS_H_
