// Row fingerprints computed inside SQLite: the SQL aggregate
//
//   _bf_fingerprint(v1, ..., vn) -> INTEGER
//
// returns the sum (modulo 2^64, as a signed 64-bit integer) of the hashes
// of its rows, each row hashed from its values exactly as HashCurrentRow
// (sqlite_db.h) hashes a statement's row of the same values. With COUNT(*)
// beside it, it gives the core/fingerprint.h Fingerprint that HashRows
// gives for "SELECT v1, ..., vn FROM ...", without returning every row to
// the caller: for a partition of tens of thousands of rows the rows never
// leave the virtual machine, which halves what a fingerprint costs beyond
// reading the rows.
//
// MakeFingerprintQuery builds the statement for a column list and the rest
// of a SELECT, expanding "*" into the columns it stands for (read from a
// statement compiled for the purpose, so in the order and with the names
// SQLite gives them, and kept only if each name selects the same table
// column again). It falls back to the plain SELECT, hashed row by row with
// HashRows, when the aggregate cannot take that many arguments or "*"
// cannot be named column by column (a view's computed column, two columns
// of one name).
//
// Free functions; thread-safe as far as each call uses its own connection.
// The SQL function holds no state between statements.

#ifndef BACKFILL_STORAGE_SQLITE_FINGERPRINT_FUNCTION_H_
#define BACKFILL_STORAGE_SQLITE_FINGERPRINT_FUNCTION_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/fingerprint.h"
#include "storage/sqlite_db.h"

namespace backfill::sqlite {

// The name of the SQL aggregate registered by RegisterFingerprintFunction.
inline constexpr char kFingerprintFunction[] = "_bf_fingerprint";

// The most columns the aggregate is given; a wider row is hashed by
// HashRows (SQLite's own limit on a function's arguments is 127 by
// default).
inline constexpr int kMaxFingerprintColumns = 100;

// Registers _bf_fingerprint on `db` (deterministic).
absl::Status RegisterFingerprintFunction(Database* db);

// A statement that fingerprints the rows of "SELECT <columns> <rest>".
struct FingerprintQuery {
  std::string sql;
  // True: `sql` is "SELECT _bf_fingerprint(<columns>), COUNT(*) <rest>";
  // false: it is the plain SELECT, for HashRows.
  bool aggregate = false;

  // Steps `q` (prepared from `sql`, its parameters bound) and returns the
  // fingerprint of the rows.
  absl::StatusOr<Fingerprint> Run(Statement& q) const;
};

// `columns`: a comma-separated list of quoted column names, or "*" (every
// column of what `rest` selects from); `rest`: the SELECT from its FROM on
// (parameters are left for the caller to bind). Expanding "*" compiles
// "SELECT * <rest>" on `db` (no transaction needed; none is left open).
absl::StatusOr<FingerprintQuery> MakeFingerprintQuery(Database* db,
                                                      std::string_view columns,
                                                      std::string_view rest);

}  // namespace backfill::sqlite

#endif  // BACKFILL_STORAGE_SQLITE_FINGERPRINT_FUNCTION_H_
