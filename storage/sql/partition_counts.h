// Rows and content of a dataset's table by partition, as every SQL engine
// counts and fingerprints them exactly: one scan grouped by the partition
// (the partition of each distinct value computed once), the rows of given
// partitions through their membership, and each partition's fingerprint
// (core/model/fingerprint.h) as staging fingerprints its inputs. An engine may
// keep statistics and fingerprints between calls (SQLite, PostgreSQL);
// these are what they are kept from and checked against.
//
// Stateless free functions over a connection their caller holds.

#ifndef BACKFILL_STORAGE_SQL_PARTITION_COUNTS_H_
#define BACKFILL_STORAGE_SQL_PARTITION_COUNTS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/model/catalog.h"
#include "core/ports/engine.h"
#include "storage/sql/connection.h"

namespace backfill::sql {

// A query giving, for the rows of `from` (a table as SQL names it) where
// `where` holds, each partition (NULL for rows of none; '' for an
// unpartitioned dataset) and its row count, grouped by the exact values of
// the partition columns first.
absl::StatusOr<std::string> PartitionCountsSql(Connection* conn,
                                               const DatasetSpec& dataset,
                                               const std::string& from,
                                               const std::string& where);

// The rows of the dataset's published table by partition (none when there
// is no table; an unpartitioned dataset has the one partition ""), and how
// many rows belong to no partition.
struct PartitionCounts {
  std::map<std::string, int64_t> rows;
  int64_t unmapped = 0;
};
absl::StatusOr<PartitionCounts> CountRowsByPartition(
    Connection* conn, const DatasetSpec& dataset);

// The rows of each of `partitions`, aligned with them (0 when empty),
// counted through their membership in one snapshot transaction of its own.
// INVALID_ARGUMENT for a partition of the wrong form or an undeclared key.
absl::StatusOr<std::vector<int64_t>> CountRowsInPartitions(
    Connection* conn, const DatasetSpec& dataset,
    const std::vector<std::string>& partitions);

// Statistics counted in full now (refresh "recount", stamped `now`).
absl::StatusOr<PartitionStats> RecountStatistics(Connection* conn,
                                                 const DatasetSpec& dataset,
                                                 absl::Time now);

// The fingerprint of each of `partitions` of the published table ("" for
// the whole of an unpartitioned dataset), as staging fingerprints an
// input, in one snapshot transaction of its own.
absl::StatusOr<std::map<std::string, InputFingerprint>> PartitionFingerprints(
    Connection* conn, const DatasetSpec& dataset,
    const std::vector<std::string>& partitions);

}  // namespace backfill::sql

#endif  // BACKFILL_STORAGE_SQL_PARTITION_COUNTS_H_
