// Partition membership in SQLite SQL: the one definition of "row belongs to
// partition P" (PartitionOfValue in core/partition.h) made available to the
// statements the SQLite engine generates.
//
// The definition is not re-derived in SQL. Every connection registers the
// SQL function
//
//   _bf_partition_of(grain TEXT, value) -> TEXT or NULL
//
// which calls PartitionOfSqlValue below (and so PartitionOfValue). A
// membership condition is
//
//   <candidate pre-filter> AND _bf_partition_of('<grain>', col) = P
//
// where the pre-filter only lets an index on the column narrow the rows
// (a text range for time grains, see CandidateRangeOf; an equality for
// keys). Being implied by the function's equality, the pre-filter never
// changes the result; the property tests prove that on generated values.
//
// Values by storage class: TEXT values map as PartitionOfValue says; for a
// key grain an INTEGER value maps as its decimal text (so an INTEGER column
// can hold keys "1", "2"); every other value (REAL, BLOB, NULL, an INTEGER
// on a time grain) belongs to no partition.
//
// Stateless free functions; thread-safe. The SQL function holds no state.

#ifndef BACKFILL_STORAGE_SQLITE_MEMBERSHIP_H_
#define BACKFILL_STORAGE_SQLITE_MEMBERSHIP_H_

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "core/partition.h"
#include "storage/sqlite_db.h"

namespace backfill::sqlite {

// The name of the SQL function registered by RegisterPartitionFunction.
inline constexpr char kPartitionFunction[] = "_bf_partition_of";

// Registers _bf_partition_of on `db` (deterministic and innocuous).
absl::Status RegisterPartitionFunction(Database* db);

// The partition a value of storage class `type` (text in `text`: the value
// as sqlite3_column_text renders it) belongs to, or nullopt for none.
std::optional<std::string> PartitionOfSqlValue(Grain grain, ColumnType type,
                                               std::string_view text);

// The SQL condition "`column` belongs to the partition", with the
// partition's value and candidate range given as three SQL expressions
// (column references or parameters). "1" for an unpartitioned dataset.
// `column` must already be quoted.
std::string MembershipCondition(Grain grain, std::string_view column,
                                std::string_view value, std::string_view lo,
                                std::string_view hi);

// The same over the named parameters :_bf_p, :_bf_lo and :_bf_hi, which
// BindMembership binds.
std::string MembershipConditionParams(Grain grain, std::string_view column);

// Only the candidate pre-filter over :_bf_p, :_bf_lo and :_bf_hi (a
// superset of the members; "1" when unpartitioned).
std::string CandidateConditionParams(Grain grain, std::string_view column);

// Binds :_bf_p, :_bf_lo and :_bf_hi, where the statement has them, for
// `partition` of `grain` (validated).
absl::Status BindMembership(Statement& statement, Grain grain,
                            const std::string& partition);

// The candidate range stored beside a partition (e.g. in a job's partition
// list): the time grains' CandidateRangeOf, empty strings otherwise.
absl::StatusOr<CandidateRange> StoredRangeOf(Grain grain,
                                             const std::string& partition);

}  // namespace backfill::sqlite

#endif  // BACKFILL_STORAGE_SQLITE_MEMBERSHIP_H_
