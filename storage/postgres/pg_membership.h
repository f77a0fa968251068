// Partition membership in PostgreSQL SQL: the one definition of "row belongs
// to partition P" (PartitionOfValue in core/model/partition.h,
// PartitionOfValues in core/model/partition_layout.h) written for the
// statements of the PostgreSQL warehouse engine, which cannot call the core's
// C++ function.
//
// Partition columns by kind (PgColumnKindOf reads a column's type):
//   DATE          a date is hour 00 of its day; its UTC ISO text is
//                 "YYYY-MM-DD"
//   TIMESTAMP     without a zone, meaning UTC: "YYYY-MM-DDTHH:MM:SS[.F]"
//   TIMESTAMPTZ   compared in UTC, whatever the session's TimeZone
//   TEXT, VARCHAR the text itself, exactly as PartitionOfValue accepts it
//   INTEGER       SMALLINT, INTEGER or BIGINT: key columns only; a value is
//                 its decimal text, so key "7" holds the rows of 7 and key
//                 "007" none
// A time grain's column (also the time column of a time x key dataset)
// may be DATE, TIMESTAMP, TIMESTAMPTZ or TEXT; a key grain's column (and
// the key column of a time x key dataset) TEXT or INTEGER. A typed value's
// UTC ISO text is always in an accepted format, so its partition is that
// text cut to the grain, as long as it lies in years 0001..9999 and not in
// the last partition of year 9999; any other value (BC dates, year 10000
// and later, 'infinity') belongs to no partition. For TEXT columns the
// definition runs in the database as the functions PartitionFunctionSql
// creates:
//
//   <schema>._bf_partition_of(grain text, value text) -> text or NULL
//   <schema>._bf_partition_of(time_grain text, time_value text,
//                             key_value text) -> "TIME|KEY" or NULL
//
// (PL/pgSQL, IMMUTABLE, PARALLEL SAFE; NULL for a value in no partition).
//
// What the statements use:
//   MembershipCondition  "the row belongs to partition P" over bound
//       parameters, whose values MembershipValues computes for each P.
//       Typed columns: a half-open range on the column itself, so that a
//       btree index on it serves (`col >= $1::date AND col < $2::date`;
//       TIMESTAMPTZ bounds carry an explicit +00). TEXT columns: the
//       candidate range of CandidateRangeOf under COLLATE "C" (byte order,
//       whatever the column's or the database's collation; an index on
//       (col COLLATE "C") serves it) and `_bf_partition_of(...) = P`. Keys:
//       an equality an index on the column serves; on an INTEGER column a
//       key that is not canonical decimal within BIGINT holds no row, and
//       the condition is then FALSE.
//   PartitionExpression  the partition of a row, as text or NULL, for
//       GROUP BY. Its value is COLLATE "C", so it groups and sorts by
//       bytes, as the core orders partition values.
// Like any SQL condition, a membership condition is NULL rather than FALSE
// for a row whose partition column is NULL: select the rows outside P with
// `(condition) IS NOT TRUE`, not NOT (condition).
//
// Values are always bound parameters ($n, text), never spliced: the only
// literals in the SQL are constants of this code (grain names, the bounds
// of years 0001..9999, formats). Identifiers (the schema, the columns and
// their qualifiers) come already quoted by the caller. A key's length is
// counted in bytes of the database encoding, which is the core's count in
// a UTF8 database (the engine's). Nothing depends on the session's
// TimeZone, DateStyle, search_path or collation.
//
// Stateless free functions; thread-safe.

#ifndef BACKFILL_STORAGE_POSTGRES_PG_MEMBERSHIP_H_
#define BACKFILL_STORAGE_POSTGRES_PG_MEMBERSHIP_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/model/catalog.h"
#include "core/model/partition.h"
#include "core/model/partition_layout.h"
#include "storage/postgres/pg_connection.h"

namespace backfill::postgres {

// The name of the SQL functions PartitionFunctionSql creates.
inline constexpr char kPartitionFunction[] = "_bf_partition_of";

enum class PgColumnKind {
  kDate,
  kTimestamp,    // timestamp without time zone
  kTimestampTz,  // timestamp with time zone
  kText,         // text, varchar, character varying(N)
  kInteger,      // smallint, integer, bigint
  kOther,        // anything else: no partition column
};

// "date", "timestamp", "timestamptz", "text", "integer", "other".
const char* PgColumnKindName(PgColumnKind kind);

// The kind of a column of type `type`, as the server's format_type() names
// it ("timestamp(3) without time zone", "character varying(32)",
// "bigint") or as a contract declares it, in any letter case ("DATE",
// "TIMESTAMPTZ", "TIMESTAMP WITH TIME ZONE", "VARCHAR(32)", "INT", "INT8",
// "SERIAL"). Type modifiers are ignored; arrays, CHAR(N), NUMERIC, domains
// and every other type are kOther.
PgColumnKind PgColumnKindOf(std::string_view type);

// The two CREATE OR REPLACE FUNCTION statements of
// <schema>._bf_partition_of (the two-argument form first, which the
// three-argument form calls), to be run one by one. `schema` is quoted.
std::vector<std::string> PartitionFunctionSql(std::string_view schema);

// The partition columns of one dataset, as its statements refer to them.
struct PgPartitionColumns {
  // The grain and, for a time x key dataset, its declared keys.
  PartitionLayout layout;
  // The partition column (the time column of a time x key dataset),
  // quoted and optionally qualified: "t"."day". Unused when unpartitioned.
  std::string column;
  PgColumnKind kind = PgColumnKind::kOther;
  // A TEXT time column whose collation orders by bytes ("C", "POSIX",
  // "ucs_basic", or the database's default when that is C or C.UTF-8): its
  // candidate range is compared in that collation, so that an index on the
  // column serves it. Otherwise in "C" (only an index created with
  // COLLATE "C" serves it).
  bool byte_ordered = false;
  // Time x key only: the key column, quoted and qualified as `column`.
  std::string key_column;
  PgColumnKind key_kind = PgColumnKind::kOther;
};

// The layout of `ds` with the given columns (quoted expressions) and kinds;
// the key column is used only when `ds` is time x key.
PgPartitionColumns PartitionColumnsOf(
    const DatasetSpec& ds, std::string column, PgColumnKind kind,
    std::string key_column = "", PgColumnKind key_kind = PgColumnKind::kOther);

// OK when the columns' kinds can hold the layout's partitions (see above);
// INVALID_ARGUMENT naming the kinds a column of that grain may have.
absl::Status CheckPartitionColumns(const PgPartitionColumns& columns);

// An SQL condition over the parameters $first .. $first + parameters - 1.
struct PgCondition {
  std::string sql;
  int parameters = 0;
};

// The condition "the row belongs to partition P" over the parameters from
// $`first_parameter` on (TRUE, with none, for an unpartitioned dataset).
// `schema` (quoted) holds the functions of PartitionFunctionSql, which a
// TEXT time column needs. Errors: CheckPartitionColumns, and a
// `first_parameter` below 1.
absl::StatusOr<PgCondition> MembershipCondition(
    const PgPartitionColumns& columns, std::string_view schema,
    int first_parameter);

// The values of MembershipCondition's parameters for `partition`, in order
// (text, or NULL for an INTEGER key column and a key that no BIGINT
// spells). `partition` must be valid for the layout (ValidatePartition of
// core/model/partition_layout.h; whether a key grain's key is declared is the
// caller's check): INVALID_ARGUMENT otherwise, e.g. for the last partition
// of year 9999.
absl::StatusOr<std::vector<PgValue>> MembershipValues(
    const PgPartitionColumns& columns, std::string_view partition);

// The partition of a row as an SQL expression of type text, COLLATE "C":
// PartitionOfValue (PartitionOfValues for time x key) of the row's values,
// or NULL when they belong to no partition; '' for an unpartitioned
// dataset. Errors: CheckPartitionColumns.
absl::StatusOr<std::string> PartitionExpression(
    const PgPartitionColumns& columns, std::string_view schema);

}  // namespace backfill::postgres

#endif  // BACKFILL_STORAGE_POSTGRES_PG_MEMBERSHIP_H_
