// Partition fingerprints of the SQLite warehouse: the current content
// fingerprint of each partition of a dataset's published table, computed
// exactly as SqliteEngine::StagePartition fingerprints an input partition
// (the rows `_bf_partition_of` puts in the partition, the contract columns —
// every column for a source without declared columns — hashed with
// core/model/fingerprint.h), and cached in the warehouse so that `--auto` does
// not hash whole tables on every plan (Engine::CurrentFingerprints).
//
// Tables (reserved `_bf_` names):
//   _bf_partition_fingerprints       (dataset, partition, fingerprint, rows):
//                                    partitions with rows only
//   _bf_partition_fingerprints_meta  (dataset, signature, max_rowid,
//                                    min_rowid, last_row, computed_at)
//
// The change signal is the partition statistics' (sqlite_partition_stats.h:
// the table's signature, MIN/MAX(rowid) and the row at max_rowid; O(log n),
// no scan), and decides how a call gets the fingerprints:
//   - "current": no change signalled: the cached fingerprints;
//   - "appended": MAX(rowid) grew, nothing else changed: the partitions the
//     rows above the stored max_rowid fall in are hashed again (each with
//     the membership condition StagePartition uses, through the index on
//     the partition column when there is one), the others come from the
//     cache;
//   - "recompute" (one scan of the whole table, every partition hashed):
//     nothing cached, a changed signature, MIN(rowid) changed, MAX(rowid)
//     went down, the row at the stored max_rowid changed or is gone, or a
//     cache older than the maximum age (StatsPolicy::max_age, the
//     statistics' own; zero: every call recomputes);
//   - "uncached": a table without a usable rowid (WITHOUT ROWID, a view):
//     the partitions asked for are hashed on every call.
// The whole table (partition "") is hashed on every call: a dimension read
// whole is bounded by its own size, and any change to it is seen at once.
// What the signal cannot see is what the statistics cannot see: an UPDATE
// or DELETE in the middle of a partitioned table that leaves MIN/MAX(rowid)
// and the last row alone. Such a change shows at the latest when the cache
// reaches the maximum age. SqliteEngine drops a dataset's cache in the
// transaction of each Publish and Rollback that replaces its rows, so a
// derived table is recomputed in full on the next call after a write.
//
// Persisting: a call computes in one read transaction and writes in a short
// write transaction only when something changed, and only if the cache is
// still the one it started from (otherwise it writes nothing; its figures
// are right for the call).
//
// Free functions over a connection; thread-safe as far as each call uses
// its own connection.

#ifndef BACKFILL_STORAGE_SQLITE_SQLITE_PARTITION_FINGERPRINTS_H_
#define BACKFILL_STORAGE_SQLITE_SQLITE_PARTITION_FINGERPRINTS_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/model/catalog.h"
#include "core/model/job.h"
#include "storage/sqlite/sqlite_db.h"
#include "storage/sqlite/sqlite_partition_stats.h"

namespace backfill::sqlite {

inline constexpr char kFingerprintsTable[] = "_bf_partition_fingerprints";
inline constexpr char kFingerprintsMetaTable[] =
    "_bf_partition_fingerprints_meta";

// Creates the two tables if missing (its own transaction).
absl::Status CreatePartitionFingerprintTables(Database* db);

// Drops the cached fingerprints of `dataset`, in the caller's transaction
// (or none): the next call recomputes them in full.
absl::Status DropPartitionFingerprints(Database* db,
                                       const std::string& dataset);

struct FingerprintRefresh {
  // One per partition asked for, as Engine::CurrentFingerprints says.
  std::map<std::string, InputFingerprint> fingerprints;
  // How the partitions were got: "recompute", "appended", "current",
  // "uncached" (see above); "" when only the whole table was asked for or
  // the table does not exist.
  std::string refresh;
  // The partitions hashed by this call apart from the whole table (every
  // partition of the table for "recompute").
  int64_t partitions_hashed = 0;
};

// The fingerprints of `partitions` ("" for the whole table; others valid
// for the dataset's grain: INVALID_ARGUMENT otherwise) as the header says.
// Its own transactions; none may be open on `db`.
absl::StatusOr<FingerprintRefresh> CurrentPartitionFingerprints(
    Database* db, const DatasetSpec& dataset,
    const std::vector<std::string>& partitions, const StatsPolicy& policy,
    absl::Time now);

}  // namespace backfill::sqlite

#endif  // BACKFILL_STORAGE_SQLITE_SQLITE_PARTITION_FINGERPRINTS_H_
