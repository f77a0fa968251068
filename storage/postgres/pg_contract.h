// Contract column types on PostgreSQL: what a published table's columns
// are, what a dataset's contract (core/model/catalog.h ColumnSpec) means to the
// server, and whether the two agree.
//
// A contract type is written by people in whatever spelling they like
// ("INT", "int4", "INTEGER"); PostgreSQL reports a column's type in one
// canonical spelling, format_type(atttypid, atttypmod) ("integer",
// "character varying(32)", "timestamp with time zone", "numeric(10,2)").
// NormalizeContract lets the server itself translate the contract: it
// creates a temporary table from the contract, exactly as the engine
// creates a published table (ContractColumnDefinitions), reads back the
// canonical types and rolls everything back. There is no alias table here
// to drift from the server's own rules, and types are never rewritten:
// what the contract declares is what the table gets.
//
// Types to declare. Pipelines written for SQLite carry SQLite's habits,
// which mean something else on PostgreSQL:
//   REAL     is PostgreSQL's 4-byte float (about 6 significant digits), not
//            SQLite's 8-byte one: sums of money drift and integers above
//            16777216 are no longer exact. Declare DOUBLE PRECISION (or
//            NUMERIC(p, s) for money) for measures.
//   INTEGER  is 4 bytes (up to 2147483647); declare BIGINT for counts and
//            ids that may grow past it.
// A contract that declares REAL gets a `real` column; comparisons report a
// mismatch involving `real` with this advice.
//
// Column names are quoted (QuoteIdentifier), so they are case-sensitive on
// PostgreSQL: a contract column "Revenue" is not a table column "revenue"
// (the comparison says so when that is the only difference).
//
// Comparison rule: the published table must have exactly the contract's
// columns with the contract's types; column order does not matter (the
// engine names its columns in every statement). A column the table has and
// the contract does not is a mismatch too: the engine writes only the
// contract's columns, so such a column would silently hold NULL (or its
// default) in every republished row.
//
// Thread-safety: free functions over a PgConnection that the caller owns
// and uses from one thread at a time (PgConnection's rule). They must not
// be called inside a transaction of the caller's: NormalizeContract runs
// its own transaction and rolls it back.

#ifndef BACKFILL_STORAGE_POSTGRES_PG_CONTRACT_H_
#define BACKFILL_STORAGE_POSTGRES_PG_CONTRACT_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/model/catalog.h"
#include "storage/postgres/pg_connection.h"

namespace backfill::postgres {

// A column as the server reports it.
struct PgColumn {
  std::string name;
  std::string type;  // format_type(atttypid, atttypmod): "integer", ...
  // The column's collation: "" for a type without one, "default" for the
  // database's, else pg_collation.collname ("C", "en_US", ...).
  std::string collation;

  bool operator==(const PgColumn& other) const {
    return name == other.name && type == other.type;
  }
};

// The columns of the relation `schema`.`table` (both names as they are,
// unquoted: the function quotes them; an empty schema resolves the name by
// the search_path) in their order (attnum),
// dropped columns left out; nullopt when no such table exists. The name is
// bound (to_regclass($1)), never spliced. FAILED_PRECONDITION when the name
// belongs to something that holds no rows (an index, a sequence, a type).
absl::StatusOr<std::optional<std::vector<PgColumn>>> TableColumns(
    PgConnection* conn, const std::string& schema, const std::string& table);

// The contract's column definitions for CREATE TABLE, `"name" TYPE, ...`:
// names quoted, each type checked by CheckColumnType and spliced as
// declared; the column named `byte_order_column` (if any) gets
// COLLATE "C", so that its indexes order by bytes. INVALID_ARGUMENT naming
// the column whose type does not pass.
absl::StatusOr<std::string> ContractColumnDefinitions(
    PgConnection* conn, const std::vector<ColumnSpec>& contract,
    const std::string& byte_order_column = "");

// The contract's columns with their types as PostgreSQL names them, in the
// contract's order: a TEMP table is created from ContractColumnDefinitions
// inside a transaction that is always rolled back, so nothing is left
// behind. INVALID_ARGUMENT naming the column when the server refuses it:
// a type it does not know (`BLOB`, `DATETIME`), a bad modifier
// (`VARCHAR(0)`), or a name of its system columns (`xmin`, `ctid`);
// UNAVAILABLE and others as PgConnection.
absl::StatusOr<std::vector<PgColumn>> NormalizeContract(
    PgConnection* conn, const std::vector<ColumnSpec>& contract);

// Compares a table's columns (TableColumns) with the contract (as declared,
// and as normalized by NormalizeContract, in the same order). OK when they
// match (see the comparison rule above); otherwise FAILED_PRECONDITION
// naming `table_name` and every difference: a missing column with its
// contract type, an extra column with its type, a column whose type
// differs with the contract's type (as declared and as PostgreSQL calls
// it) and the table's.
absl::Status CompareWithContract(const std::string& table_name,
                                 const std::vector<ColumnSpec>& contract,
                                 const std::vector<PgColumn>& normalized,
                                 const std::vector<PgColumn>& table);

// All of the above for a published table: OK when `schema`.`table` matches
// `contract`, FAILED_PRECONDITION (CompareWithContract) when it does not,
// NOT_FOUND when the table does not exist (yet).
absl::Status CheckTableContract(PgConnection* conn, const std::string& schema,
                                const std::string& table,
                                const std::vector<ColumnSpec>& contract);

}  // namespace backfill::postgres

#endif  // BACKFILL_STORAGE_POSTGRES_PG_CONTRACT_H_
