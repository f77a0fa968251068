// Row fingerprints computed inside SQLite: the SQL aggregate
//
//   _bf_fingerprint(v1, ..., vn) -> INTEGER
//
// returns the sum (modulo 2^64, as a signed 64-bit integer) of the hashes
// of its rows, each row hashed from its values exactly as HashCurrentRow
// (sqlite_db.h) hashes a statement's row of the same values. With COUNT(*)
// beside it, it gives the core/model/fingerprint.h Fingerprint that HashRows
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
// FingerprintQueryCache keeps MakeFingerprintQuery's answers for one
// connection, so that a statement run per partition is not compiled (twice,
// for "*") per partition only to learn its columns. An answer stands while
// the connection's main and temp schemas are as they were when it was made
// (their schema_version, read within the caller's transaction): any schema
// change, by this connection or another, makes every answer be made again.
//
// Free functions; thread-safe as far as each call uses its own connection.
// The SQL functions hold no state between statements. A
// FingerprintQueryCache is not thread-safe: it belongs to one connection
// and is used by whoever holds that connection.

#ifndef BACKFILL_STORAGE_SQLITE_SQLITE_FINGERPRINT_FUNCTION_H_
#define BACKFILL_STORAGE_SQLITE_SQLITE_FINGERPRINT_FUNCTION_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/model/fingerprint.h"
#include "storage/sqlite/sqlite_db.h"

namespace backfill::sqlite {

// The name of the SQL aggregate registered by RegisterFingerprintFunction.
inline constexpr char kFingerprintFunction[] = "_bf_fingerprint";

// The most columns the aggregate is given; a wider row is hashed by
// HashRows (SQLite's own limit on a function's arguments is 127 by
// default).
inline constexpr int kMaxFingerprintColumns = 100;

// Registers _bf_fingerprint on `db` (deterministic).
absl::Status RegisterFingerprintFunction(Database* db);

// The scalar companion of the aggregate:
//
//   _bf_row_hash(v1, ..., vn) -> INTEGER
//
// is the hash of the one row of its values (HashCurrentRow's, as a signed
// 64-bit integer). The state store keeps it beside each record as the
// record's checksum (state_record_checksums.h).
inline constexpr char kRowHashFunction[] = "_bf_row_hash";

// Registers _bf_row_hash on `db` (deterministic, innocuous).
absl::Status RegisterRowHashFunction(Database* db);

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

// MakeFingerprintQuery's answers on one connection (see the top of this
// file).
class FingerprintQueryCache {
 public:
  // The most answers kept; past it the cache starts again empty.
  static constexpr size_t kMaxEntries = 64;

  // MakeFingerprintQuery(db, columns, rest), from the cache while `db`'s
  // schemas are unchanged since the answer was made. `db` must be the same
  // connection on every call.
  absl::StatusOr<FingerprintQuery> Get(Database* db, std::string_view columns,
                                       std::string_view rest);

  size_t size() const { return entries_.size(); }

 private:
  // (main, temp) schema_version when the entries were made.
  std::pair<int64_t, int64_t> schema_{-1, -1};
  absl::flat_hash_map<std::pair<std::string, std::string>, FingerprintQuery>
      entries_;
};

}  // namespace backfill::sqlite

#endif  // BACKFILL_STORAGE_SQLITE_SQLITE_FINGERPRINT_FUNCTION_H_
