// The change signal: an exact per-partition signal that every write to a
// published table moves, and the fingerprints cached against it, written
// once for every SQL engine over the Dialect's triggers (dialect.h).
//
// Reserved tables (Dialect::ChangeTables, ChangeCounts, FingerprintCache):
//   change tables   (tbl, epoch, identity): one row per table that carries
//                   the triggers; `epoch` is random per installation (and,
//                   on PostgreSQL, per TRUNCATE), `identity` the table's and
//                   its triggers' definition (Dialect::ChangeIdentity) as
//                   they were installed;
//   change counts   (tbl, bucket, n): what the triggers bump, per bucket
//                   (Dialect::ChangeBucket), for every row an INSERT,
//                   UPDATE (its old and its new row) or DELETE writes;
//   fingerprints    (dataset, partition, shape, epoch, counter, fingerprint,
//                   rows): a partition's fingerprint with the signal it was
//                   read under, in the same snapshot as its rows.
//
// A partition's signal is (epoch, its bucket's counter); the whole table's
// (partition "") is (epoch, the sum of the table's counters). The signal is
// known only when the table's identity now equals the one installed:
// triggers that are missing, were dropped and created again, or a table
// whose columns changed make it unknown, and an unknown signal never lets a
// cached fingerprint stand. A cached fingerprint stands when its shape (the
// dataset's table, columns and partitioning), epoch and counter equal the
// signal read in the caller's snapshot; otherwise the partition is hashed
// again (only that partition), exactly as StagePartition hashes an input.
//
// Installation (EnsureChangeSignal) is its own write transaction: it drops
// and creates the triggers under a new epoch and forgets the table's
// counters, so every fingerprint cached before is unknown. A table that
// cannot carry triggers (a view, no privilege) has no signal: its
// fingerprints are hashed on every call, as without the signal.
//
// Free functions over a connection the caller holds; thread-safe as far as
// each call uses its own connection.

#ifndef BACKFILL_STORAGE_SQL_CHANGE_SIGNAL_H_
#define BACKFILL_STORAGE_SQL_CHANGE_SIGNAL_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/model/catalog.h"
#include "core/model/job.h"
#include "storage/sql/connection.h"

namespace backfill::sql {

// Creates the reserved tables if missing, in the caller's write
// transaction (markers.h's CreateRecords calls it).
absl::Status CreateChangeSignalTables(Connection* conn);

// Installs the triggers of `dataset`'s published table unless they are in
// place as installed (own transactions; none may be open). Returns whether
// the table has a signal now; an installation that fails (a view, no
// privilege) is logged and answers false.
absl::StatusOr<bool> EnsureChangeSignal(Connection* conn,
                                        const DatasetSpec& dataset);

// A partition's signal read in the caller's snapshot.
struct PartitionSignal {
  std::string epoch;
  int64_t counter = 0;
};

// In the caller's transaction: the epoch of `dataset`'s table when its
// signal is known (identity as installed), nullopt otherwise.
absl::StatusOr<std::optional<std::string>> KnownEpoch(
    Connection* conn, const DatasetSpec& dataset);

// In the caller's transaction: the signal of `partition` ("" the whole
// table) under `epoch` (from KnownEpoch in the same transaction).
absl::StatusOr<PartitionSignal> ReadPartitionSignal(
    Connection* conn, const DatasetSpec& dataset, const std::string& epoch,
    const std::string& partition);

// In the caller's transaction: the cached fingerprint of `partition` when
// it was read under `signal` (and the dataset's shape now), else nullopt.
absl::StatusOr<std::optional<InputFingerprint>> CachedFingerprint(
    Connection* conn, const DatasetSpec& dataset, const std::string& partition,
    const PartitionSignal& signal);

// A fingerprint to cache with the signal it was read under.
struct SignalledFingerprint {
  const DatasetSpec* dataset = nullptr;
  InputFingerprint fingerprint;
  PartitionSignal signal;
};

// In the caller's write transaction: caches each fingerprint.
absl::Status StoreFingerprints(Connection* conn,
                               const std::vector<SignalledFingerprint>& items);

// What CurrentFingerprints did, for tests and logs.
struct SignalledRead {
  std::map<std::string, InputFingerprint> fingerprints;
  bool signalled = false;  // the table has a known signal
  bool refused = false;    // the table exists but its triggers failed
  int64_t cached = 0;      // partitions answered from the cache
  int64_t hashed = 0;      // partitions hashed by this call
};

// Engine::CurrentFingerprints over the signal: installs the triggers when
// needed (and `install`), answers unchanged partitions from the cache and
// hashes the others (one scan of the table when many are asked for), caching
// what it hashed. Own transactions; none may be open on `conn`.
absl::StatusOr<SignalledRead> SignalledFingerprints(
    Connection* conn, const DatasetSpec& dataset,
    const std::vector<std::string>& partitions, bool install = true);

}  // namespace backfill::sql

#endif  // BACKFILL_STORAGE_SQL_CHANGE_SIGNAL_H_
