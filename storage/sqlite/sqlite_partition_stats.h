// Partition statistics of the SQLite warehouse: rows per partition of a
// dataset's published table, kept in the warehouse so that planning does
// not count whole tables (core/ports/engine.h, Engine::PartitionStatistics),
// plus the exact count of chosen partitions (Engine::CountRowsInPartitions).
//
// Tables (reserved `_bf_` names):
//   _bf_partition_stats       (dataset, partition, rows): rows > 0 only
//   _bf_partition_stats_meta  (dataset, signature, max_rowid, min_rowid,
//                              last_row, total_rows, recounted_at,
//                              refreshed_at)
// `signature` identifies what was counted: the table's type, root page,
// WITHOUT ROWID flag and CREATE statement, with the dataset's grain and
// partition column. `last_row` is the fingerprint of the row at max_rowid.
//
// The change signal (all O(log n) lookups, no scan) decides how a refresh
// gets the counts:
//   - "current": same signature, MAX(rowid) and MIN(rowid) unchanged, the
//     row at max_rowid unchanged: the stored counts are returned;
//   - "appended": as above but MAX(rowid) grew: only rows with rowid above
//     max_rowid are counted (an index range on the rowid) and added;
//   - "recount" (one grouped scan of the whole table): no stored counts, a
//     changed signature (table dropped and recreated, altered, another
//     grain or column), MAX(rowid) went down, MIN(rowid) changed, the row
//     at max_rowid changed or is gone, a table without a usable rowid
//     (WITHOUT ROWID, a view, or every rowid alias shadowed by a column),
//     or counts older than the maximum age (StatsPolicy::max_age).
// What the signal cannot see: a DELETE or UPDATE in the middle of a source
// table that leaves MIN/MAX(rowid) and the last row alone. Such a change is
// reflected at the latest when the counts reach the maximum age, or earlier
// when a plan counts one of the partitions it touched (CountPartitions'
// cross-check finds the stored count wrong and drops the statistics).
// Derived tables are written by Publish and Rollback, which update the
// statistics of the partitions they replace in their own transaction
// (StatsWrite), so those stay exact.
//
// Persisting: a refresh computes in one read transaction and writes in a
// short write transaction only when something changed, and only if the
// stored statistics are still the ones it started from (another refresh or
// a publish may have written meanwhile: then it writes nothing).
//
// Free functions over a connection; the caller owns it and its
// transactions as each function says. Thread-safe as far as each call uses
// its own connection.

#ifndef BACKFILL_STORAGE_SQLITE_SQLITE_PARTITION_STATS_H_
#define BACKFILL_STORAGE_SQLITE_SQLITE_PARTITION_STATS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/model/catalog.h"
#include "core/ports/engine.h"
#include "storage/sqlite/sqlite_db.h"

namespace backfill::sqlite {

inline constexpr char kStatsTable[] = "_bf_partition_stats";
inline constexpr char kStatsMetaTable[] = "_bf_partition_stats_meta";

struct StatsPolicy {
  // Statistics counted in full longer ago than this are counted again.
  // Zero: every refresh counts the table in full.
  absl::Duration max_age = absl::Hours(1);
};

// Creates the two tables if missing (its own transaction).
absl::Status CreatePartitionStatsTables(Database* db);

// Exact rows of each partition of `partitions` in the dataset's table (0
// when none or no table), aligned with `partitions` (any order, repeats
// allowed), through the membership pre-filter: a time grain's partitions
// are merged into runs of consecutive days (months), each counted with one
// grouped statement over its candidate range (all runs as one range when
// no index starts with the partition column); a key is counted by
// equality. Holds nothing per partition besides the answer (and, for
// partitions not given in order, their order). In the caller's transaction
// (or none).
absl::StatusOr<std::vector<int64_t>> CountPartitions(
    Database* db, const DatasetSpec& dataset,
    const std::vector<std::string>& partitions);

// Compares exact counts of some partitions (`exact[i]` of `partitions[i]`,
// from CountPartitions in the same read transaction, which the caller
// holds) with the stored statistics: true when the statistics are known to
// be wrong — the signal says "current" (no append since) yet a partition's
// stored count differs.
absl::StatusOr<bool> StatsContradicted(
    Database* db, const DatasetSpec& dataset,
    const std::vector<std::string>& partitions,
    const std::vector<int64_t>& exact);

// Drops the stored statistics of `dataset` (its own transaction): the next
// refresh counts the table in full.
absl::Status DropPartitionStats(Database* db, const std::string& dataset);

// Refreshes and returns the statistics as the header says (its own
// transactions; none may be open on `db`).
absl::StatusOr<PartitionStats> RefreshPartitionStats(Database* db,
                                                     const DatasetSpec& dataset,
                                                     const StatsPolicy& policy,
                                                     absl::Time now);

// The statistics' change signal of a dataset's table as it is now.
// O(log n); in the caller's transaction.
struct TableSignal {
  bool exists = false;
  std::string rowid;      // a rowid alias no column shadows; "" when none
  std::string signature;  // as the statistics' `signature`
  int64_t max_rowid = 0;  // 0 without a usable rowid or rows
  int64_t min_rowid = 0;
};
absl::StatusOr<TableSignal> ReadTableSignal(Database* db,
                                            const DatasetSpec& dataset);
// The fingerprint of the row with rowid `at` ("" when there is none), as the
// statistics' `last_row`.
absl::StatusOr<std::string> RowFingerprintAt(Database* db,
                                             const DatasetSpec& dataset,
                                             const std::string& rowid,
                                             int64_t at);

// Keeps the statistics of a derived table exact across a write by the
// engine that replaces the rows of `partitions` and nothing else (Publish,
// Rollback), in the caller's write transaction: Begin before the write
// (exact counts of the partitions, and whether the stored statistics were
// current), Finish after it (the new counts; the meta follows the table).
// Statistics that were not current are dropped instead, so the next
// refresh counts in full. A table created by the write is counted whole.
class StatsWrite {
 public:
  static absl::StatusOr<StatsWrite> Begin(Database* db,
                                          const DatasetSpec& dataset,
                                          std::vector<std::string> partitions);
  absl::Status Finish(Database* db, absl::Time now);

 private:
  const DatasetSpec* dataset_ = nullptr;
  std::vector<std::string> partitions_;  // sorted, unique
  bool table_existed_ = false;
  bool current_ = false;         // the stored statistics matched the table
  std::vector<int64_t> before_;  // aligned with partitions_ when current_
};

}  // namespace backfill::sqlite

#endif  // BACKFILL_STORAGE_SQLITE_SQLITE_PARTITION_STATS_H_
