// The diff of one staged partition against its published version
// (Engine::DiffPartition) for every SQL engine: rows before and after, the
// totals of the measures, and, compared by the primary key (values with a
// NULL-safe comparison), the rows added, removed, changed and unchanged
// with samples of each; without a key, the rows compared as multisets.
//
// The two sides are relations the caller makes ready for the partition
// (DiffSides): tables it filled (SQLite copies them into indexed TEMP
// tables kept by the connection), or common table expressions that every
// statement starts with (DiffStagedPartition, every other engine). Either
// way the comparison is the same statements.
//
// Thread-safety: a free function over a connection its caller holds.

#ifndef BACKFILL_STORAGE_SQL_DIFF_H_
#define BACKFILL_STORAGE_SQL_DIFF_H_

#include <string>

#include "absl/status/statusor.h"
#include "core/model/diff.h"
#include "core/ports/engine.h"
#include "storage/sql/connection.h"

namespace backfill::sql {

// The partition's rows on each side, as the statements refer to them.
struct DiffSides {
  // What every statement starts with ("WITH _bf_after AS (...), ... "), or
  // "" when the sides are tables.
  std::string with;
  // The staged rows of the partition, and its published rows (none before
  // the first publish): a table or a name `with` defines.
  std::string after;
  std::string before;
  // The values of the placeholders in `with`, from Placeholder(1) on.
  Params params;
};

// Compares the sides, in the caller's transaction. Samples: at most
// `sample_limit` in all, changed rows first, then added, then removed.
absl::StatusOr<PartitionDiff> DiffOnePartition(
    Connection* conn, const DatasetSpec& dataset, const DiffColumns& columns,
    const DiffSides& sides, const std::string& partition, int sample_limit);

// The job's staged rows of `partition` against its published rows, the
// sides as common table expressions, in one snapshot transaction of its
// own. FAILED_PRECONDITION when nothing is staged for the dataset.
absl::StatusOr<PartitionDiff> DiffStagedPartition(Connection* conn,
                                                  const std::string& job_id,
                                                  const DatasetSpec& dataset,
                                                  const std::string& partition,
                                                  int sample_limit);

}  // namespace backfill::sql

#endif  // BACKFILL_STORAGE_SQL_DIFF_H_
