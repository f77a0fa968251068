// Partition membership in SQLite SQL: the one definition of "row belongs to
// partition P" (PartitionOfValue in core/model/partition.h) made available to
// the statements the SQLite engine generates.
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
// Time x key datasets (core/model/partition_layout.h) use the three-argument
// form of the same function,
//
//   _bf_partition_of(time_grain TEXT, time_value, key_value) -> TEXT or NULL
//
// "TIME|KEY" by PartitionOfValues: the time value maps as for the time
// grain, the key value as for the key grain (and may not contain '|'); a
// row whose either value maps to nothing belongs to no partition. The
// pre-filter is the time part's candidate range. The functions below that
// take a DatasetSpec write and bind the right form for any dataset, so
// callers do not tell the layouts apart.
//
// Stateless free functions; thread-safe. The SQL function holds no state.

#ifndef BACKFILL_STORAGE_SQLITE_SQLITE_MEMBERSHIP_H_
#define BACKFILL_STORAGE_SQLITE_SQLITE_MEMBERSHIP_H_

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "core/model/catalog.h"
#include "core/model/partition.h"
#include "storage/sqlite/sqlite_db.h"

namespace backfill::sqlite {

// The name of the SQL function registered by RegisterPartitionFunction.
inline constexpr char kPartitionFunction[] = "_bf_partition_of";

// Registers _bf_partition_of on `db` (deterministic and innocuous).
absl::Status RegisterPartitionFunction(Database* db);

// The partition a value of storage class `type` (text in `text`: the value
// as sqlite3_column_text renders it) belongs to, or nullopt for none.
std::optional<std::string> PartitionOfSqlValue(Grain grain, ColumnType type,
                                               std::string_view text);

// The time x key form: the partition of a row whose time column holds a
// value of storage class `time_type` and whose key column one of
// `key_type` (PartitionOfValues; the time value must be TEXT, the key TEXT
// or INTEGER), or nullopt for none.
std::optional<std::string> PartitionOfSqlValues(Grain time_grain,
                                                ColumnType time_type,
                                                std::string_view time_text,
                                                ColumnType key_type,
                                                std::string_view key_text);

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

// ----------------------------------------- any dataset (1-D or time x key) --
// `qualifier` prefixes the (quoted) column names, e.g. "_bf_t.". A dataset
// without a partition is "1" / "" as above.

// The partition of a row of `ds` as an SQL expression:
// _bf_partition_of('<grain>', col) or _bf_partition_of('<grain>', col, key).
std::string PartitionExpression(const DatasetSpec& ds,
                                std::string_view qualifier = "");

// The partition columns for a GROUP BY on the exact values:
// `col COLLATE BINARY[, key COLLATE BINARY]`.
std::string PartitionGroupBy(const DatasetSpec& ds,
                             std::string_view qualifier = "");

// The partition columns (quoted and qualified) for a SELECT list:
// `col[, key]`.
std::string PartitionColumns(const DatasetSpec& ds,
                             std::string_view qualifier = "");

// MembershipCondition / MembershipConditionParams /
// CandidateConditionParams for the columns of `ds`.
std::string MembershipCondition(const DatasetSpec& ds,
                                std::string_view qualifier,
                                std::string_view value, std::string_view lo,
                                std::string_view hi);
std::string MembershipConditionParams(const DatasetSpec& ds,
                                      std::string_view qualifier = "");
std::string CandidateConditionParams(const DatasetSpec& ds,
                                     std::string_view qualifier = "");

// BindMembership and StoredRangeOf for a partition of `ds` (validated for
// its layout; a time x key partition's range is its time part's).
absl::Status BindMembership(Statement& statement, const DatasetSpec& ds,
                            const std::string& partition);
absl::StatusOr<CandidateRange> StoredRangeOf(const DatasetSpec& ds,
                                             const std::string& partition);

// The partition of a row of `ds` whose partition columns are the columns
// `first` (and `first + 1` for a time x key dataset) of `row`, as
// PartitionOfSqlValue; nullopt for none.
std::optional<std::string> PartitionOfRow(const DatasetSpec& ds,
                                          const Statement& row, int first);

}  // namespace backfill::sqlite

#endif  // BACKFILL_STORAGE_SQLITE_SQLITE_MEMBERSHIP_H_
