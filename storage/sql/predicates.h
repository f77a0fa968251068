// What every SQL engine runs for an `affected_by` predicate
// (Engine::PartitionsMatching): the statement that finds the partitions of
// the published rows where the predicate holds, and how its rows become
// the answer. The predicate is text from a client, spliced where nothing
// can be bound; what makes that safe is each engine's own (SQLite: a
// read-only connection and a statement sandbox; PostgreSQL: a lexer, the
// plan and a read-only transaction), with CheckPredicate
// (core/plan/affected_by.h) before any of it.
//
// Stateless free functions.

#ifndef BACKFILL_STORAGE_SQL_PREDICATES_H_
#define BACKFILL_STORAGE_SQL_PREDICATES_H_

#include <cstddef>
#include <optional>
#include <set>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/model/catalog.h"
#include "storage/sql/connection.h"

namespace backfill::sql {

// The statement over `table` (the dataset's published table as SQL names
// it) that returns, for a partitioned dataset, the partition of the rows
// where `predicate` holds (grouped by the exact values first; NULL for rows
// of no partition) with their count; for an unpartitioned one, one row
// when any row matches. `predicate_end`: where the predicate's text ends
// in it (an error reported past it means the expression stopped short).
struct MatchingStatement {
  std::string sql;
  size_t predicate_end = 0;
};
absl::StatusOr<MatchingStatement> MatchingSql(Connection* conn,
                                              const DatasetSpec& dataset,
                                              const std::string& table,
                                              const std::string& predicate);

// Adds what a row of that statement says to `matching`: `partition` as
// AddMatchingPartition (core/plan/affected_by.h) takes it, nothing for a row of
// no partition (nullopt), "" for an unpartitioned dataset.
absl::Status AddMatchingRow(const DatasetSpec& dataset,
                            const std::string& predicate, size_t max_partitions,
                            const std::optional<std::string>& partition,
                            std::set<std::string>* matching);

}  // namespace backfill::sql

#endif  // BACKFILL_STORAGE_SQL_PREDICATES_H_
