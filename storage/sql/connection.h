// Connection: one connection to a warehouse database, as the SQL engine's
// shared units (storage/sql/) see it, whatever the engine: statements run
// with their values bound, rows read back as typed cells, transactions, and
// the few questions about the catalog and the rows that every unit asks.
// Each engine implements it over its own client library
// (storage/sqlite/sqlite_connection.h,
// storage/postgres/pg_sql_connection.h); what
// differs in the SQL text itself is the Dialect's (dialect.h).
//
//   Param        a value bound to a statement: NULL, an integer or text.
//                Statements mark their parameters with
//                Dialect::Placeholder(i) (`?1`, `$1`); values are never
//                spliced into SQL text.
//   Cell, Row    a value read back: its type, the client library's text of
//                it, and its number where it is one.
//   Result       the rows of one statement, its column names and the rows
//                it changed.
//   Transaction  a scope guard: Begin() starts one in a TxnMode, the
//                destructor rolls it back unless Commit() succeeded.
//   Lease        a connection lent by an engine's pool for one call, given
//                back when the lease is destroyed.
//
// Ownership: a Connection belongs to its engine's pool; units borrow it
// through a Lease for one call and keep no pointer to it afterwards.
// Thread-safety: a Connection is used by one thread at a time (its
// holder's); nothing here is synchronized.

#ifndef BACKFILL_STORAGE_SQL_CONNECTION_H_
#define BACKFILL_STORAGE_SQL_CONNECTION_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "core/model/fingerprint.h"

namespace backfill::sql {

class Dialect;
struct Relation;

// A value bound to a statement's parameter.
class Param {
 public:
  enum class Kind { kNull, kInteger, kText };
  Param() = default;  // NULL
  Param(std::nullopt_t) {}
  Param(std::string text) : kind_(Kind::kText), text_(std::move(text)) {}
  Param(const char* text) : kind_(Kind::kText), text_(text) {}
  Param(const std::optional<std::string>& value)
      : kind_(value ? Kind::kText : Kind::kNull), text_(value.value_or("")) {}
  static Param Int(int64_t value) {
    Param p;
    p.kind_ = Kind::kInteger;
    p.integer_ = value;
    p.text_ = std::to_string(value);
    return p;
  }

  Kind kind() const { return kind_; }
  bool null() const { return kind_ == Kind::kNull; }
  // The value as text (an integer's decimal digits; "" for NULL).
  const std::string& text() const { return text_; }
  int64_t integer() const { return integer_; }

 private:
  Kind kind_ = Kind::kNull;
  std::string text_;
  int64_t integer_ = 0;
};

using Params = std::vector<Param>;

// A value read from a row.
struct Cell {
  enum class Type { kNull, kInteger, kReal, kText, kBlob };
  Type type = Type::kNull;
  // The client library's text of the value ("" for NULL).
  std::string text;
  int64_t integer = 0;  // kInteger (and kReal, truncated)
  double real = 0;      // kReal (and kInteger)

  bool null() const { return type == Type::kNull; }
  std::optional<std::string> value() const {
    if (null()) return std::nullopt;
    return text;
  }
};

using Row = std::vector<Cell>;

struct Result {
  std::vector<std::string> columns;
  std::vector<Row> rows;
  // Rows the statement inserted, updated or deleted.
  int64_t affected = 0;
};

// What a transaction is for; each engine begins it as its mode needs.
enum class TxnMode {
  // Writes the warehouse (SQLite: BEGIN IMMEDIATE, the writer lock at
  // once; PostgreSQL: BEGIN).
  kWrite,
  // Reads one snapshot and writes nothing (SQLite: BEGIN, deferred;
  // PostgreSQL: REPEATABLE READ, READ ONLY).
  kSnapshot,
  // Reads, may fill temporary tables the session made before, and is
  // rolled back (SQLite: BEGIN; PostgreSQL: READ ONLY).
  kReadOnly,
  // May create temporary objects, and is rolled back (SQLite: BEGIN;
  // PostgreSQL: BEGIN).
  kScratch,
};

class Connection {
 public:
  virtual ~Connection() = default;

  virtual const Dialect& dialect() const = 0;

  // Runs one statement with `params` bound to its placeholders and returns
  // its rows (all of them: for statements whose rows fit in memory).
  virtual absl::StatusOr<Result> Exec(std::string_view sql,
                                      absl::Span<const Param> params = {}) = 0;
  // Runs one statement and hands each row to `row` as it comes; an error
  // from `row` stops the statement and is returned.
  virtual absl::Status ForEachRow(
      std::string_view sql, absl::Span<const Param> params,
      const std::function<absl::Status(const Row&)>& row) = 0;

  // The statement's one value (first row, first column); NOT_FOUND when it
  // returns no row.
  absl::StatusOr<Cell> Value(std::string_view sql,
                             absl::Span<const Param> params = {});
  absl::StatusOr<int64_t> Int(std::string_view sql,
                              absl::Span<const Param> params = {});

  // A statement as the database reads it, without running it: the text to
  // run (without a trailing semicolon, so that it can be wrapped as a
  // subquery), the names of its parameters in the order they are bound
  // (":partition", ...), its output columns, and whether it is a query
  // that writes nothing. INVALID_ARGUMENT, with the database's message,
  // when it does not compile.
  struct Shape {
    std::string text;
    std::vector<std::string> parameters;
    std::vector<std::string> columns;
    bool read_only = false;
  };
  virtual absl::StatusOr<Shape> Describe(std::string_view sql) = 0;

  // Each statement run until the current transaction ends stops after
  // `limit` with DEADLINE_EXCEEDED.
  virtual absl::Status LimitTime(absl::Duration limit) = 0;

  // Drops every temporary object of the session (tables and views the
  // engine made there).
  virtual absl::Status DropScratch() = 0;

  virtual absl::Status Begin(TxnMode mode) = 0;
  virtual absl::Status Commit() = 0;
  virtual void Rollback() = 0;

  // Whether the table or view exists.
  virtual absl::StatusOr<bool> Exists(const Relation& relation) = 0;

  // The names of the tables of `schema` (Relation::schema) that start with
  // `prefix`, sorted.
  virtual absl::StatusOr<std::vector<std::string>> Tables(
      const std::string& schema, const std::string& prefix) = 0;

  // The columns of a table as the warehouse names them and their types,
  // in the table's order; nullopt when there is no such table.
  struct Column {
    std::string name;
    std::string type;
  };
  virtual absl::StatusOr<std::optional<std::vector<Column>>> Columns(
      const Relation& relation) = 0;

  // The fingerprint (core/model/fingerprint.h) of the rows of
  // "SELECT <columns> <rest>" (`rest` from FROM on, its placeholders bound
  // to `params`), each row hashed as the engine hashes staged rows.
  virtual absl::StatusOr<Fingerprint> HashRows(
      std::string_view columns, std::string_view rest,
      absl::Span<const Param> params = {}) = 0;
  // The fingerprint of each group of the rows of "SELECT <columns>,
  // <group> <rest>" by the value of `group` (a text expression; rows where
  // it is NULL are left out), each row hashed as HashRows hashes it.
  virtual absl::StatusOr<std::map<std::string, Fingerprint>> HashRowsByGroup(
      std::string_view columns, std::string_view group, std::string_view rest,
      absl::Span<const Param> params = {}) = 0;
};

// A transaction on a connection, rolled back unless committed.
class Transaction {
 public:
  static absl::StatusOr<Transaction> Begin(Connection* conn, TxnMode mode);
  Transaction(Transaction&& other) noexcept
      : conn_(std::exchange(other.conn_, nullptr)) {}
  Transaction& operator=(Transaction&&) = delete;
  ~Transaction() { Rollback(); }

  absl::Status Commit();
  // Rolls back now (nothing when already ended).
  void Rollback();

 private:
  explicit Transaction(Connection* conn) : conn_(conn) {}
  Connection* conn_;  // nullptr once ended
};

// A connection lent for one call; the deleter gives it back to its pool.
using Lease = std::unique_ptr<Connection, std::function<void(Connection*)>>;

}  // namespace backfill::sql

#endif  // BACKFILL_STORAGE_SQL_CONNECTION_H_
