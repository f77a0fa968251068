// SqliteConnection: one pooled connection of the SQLite warehouse
// (sqlite::Database) as the SQL engine's shared units see it
// (storage/sql/connection.h). Statements go through the connection's
// statement cache (PrepareCached), placeholders are SQLite's `?N`,
// transactions are sqlite::Transaction (kWrite is BEGIN IMMEDIATE, every
// other mode a deferred BEGIN), and fingerprints are computed inside SQLite
// by the _bf_fingerprint aggregate (sqlite_fingerprint_function.h), whose
// statements it keeps per connection.
//
// Ownership: borrows the Database (the engine's pool owns it) and the
// Dialect, which must outlive it; owns its fingerprint statements' cache.
// Thread-safety: none; used by the thread holding its lease.

#ifndef BACKFILL_STORAGE_SQLITE_SQLITE_CONNECTION_H_
#define BACKFILL_STORAGE_SQLITE_SQLITE_CONNECTION_H_

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "storage/sql/connection.h"
#include "storage/sql/dialect.h"
#include "storage/sqlite/sqlite_db.h"
#include "storage/sqlite/sqlite_fingerprint_function.h"

namespace backfill::sqlite {

class SqliteConnection : public sql::Connection {
 public:
  SqliteConnection(Database* db, const sql::Dialect* dialect)
      : db_(db), dialect_(dialect) {}

  Database* db() const { return db_; }
  FingerprintQueryCache* fingerprint_queries() { return &fingerprints_; }
  // A change-signal identity (sqlite_change_triggers.h) this connection read
  // for a table, with the schema version (PRAGMA schema_version) it read it
  // under: still the identity while the version is the same.
  struct KnownIdentity {
    int64_t schema_version = -1;
    std::string identity;
  };
  std::map<std::string, KnownIdentity>& identities() { return identities_; }
  // What the objects of the session's temp schema were made for, as their
  // maker names it ("" for none); DropScratch forgets it.
  std::string& scratch_key() { return scratch_key_; }
  // The statement that made the session's staging group table
  // (sql::kGroupTable; "" for none); DropScratch keeps both.
  std::string& group_table_key() { return group_table_key_; }

  const sql::Dialect& dialect() const override { return *dialect_; }
  absl::StatusOr<sql::Result> Exec(
      std::string_view sql, absl::Span<const sql::Param> params) override;
  absl::Status ForEachRow(
      std::string_view sql, absl::Span<const sql::Param> params,
      const std::function<absl::Status(const sql::Row&)>& row) override;
  // The statement as SQLite prepares it (never from the statement cache).
  absl::StatusOr<Shape> Describe(std::string_view sql) override;
  // A progress handler stops a statement that ran longer (SQLite's
  // interrupt), which reads as DEADLINE_EXCEEDED.
  absl::Status LimitTime(absl::Duration limit) override;
  // Drops every table and view of the temp schema but a staging group's
  // table (sql::kGroupTable): it shadows nothing, its rows wait for the
  // group's write, and every group makes it again.
  absl::Status DropScratch() override;
  absl::Status Begin(sql::TxnMode mode) override;
  absl::Status Commit() override;
  void Rollback() override;
  absl::StatusOr<bool> Exists(const sql::Relation& relation) override;
  absl::StatusOr<std::vector<std::string>> Tables(
      const std::string& schema, const std::string& prefix) override;
  absl::StatusOr<std::optional<std::vector<Column>>> Columns(
      const sql::Relation& relation) override;
  absl::StatusOr<Fingerprint> HashRows(
      std::string_view columns, std::string_view rest,
      absl::Span<const sql::Param> params) override;
  absl::StatusOr<std::map<std::string, Fingerprint>> HashRowsByGroup(
      std::string_view columns, std::string_view group, std::string_view rest,
      absl::Span<const sql::Param> params) override;

  // The cell of column `i` of the row `q` is on.
  static sql::Cell CellOf(const Statement& q, int i);

 private:
  // Prepares `sql` (through the statement cache) with `params` bound.
  absl::StatusOr<Statement> Bound(std::string_view sql,
                                  absl::Span<const sql::Param> params);

  // Runs `statement` under the time limit, if any.
  absl::Status Limited(const std::function<absl::Status()>& statement);

  Database* db_;
  const sql::Dialect* dialect_;
  std::optional<Transaction> txn_;
  std::optional<absl::Duration> limit_;  // until the transaction ends
  std::string scratch_key_;
  std::string group_table_key_;
  FingerprintQueryCache fingerprints_;
  std::map<std::string, KnownIdentity> identities_;  // by table
};

}  // namespace backfill::sqlite

#endif  // BACKFILL_STORAGE_SQLITE_SQLITE_CONNECTION_H_
