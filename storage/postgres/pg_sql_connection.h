// PgSqlConnection: a PostgreSQL connection (PgConnection, lent by the
// engine's PgPool) as the SQL engine's shared units see it
// (storage/sql/connection.h). Values are bound as text ($1..$n), rows come
// back as text and are typed by their columns' type OIDs (integers, floats
// and numerics are numbers), transactions are BEGIN with the mode's
// isolation (kSnapshot: REPEATABLE READ, READ ONLY; kReadOnly: READ ONLY),
// and fingerprints hash each row's values as text (NULL apart), as the
// engine has always hashed them.
//
// Ownership: owns the pool's lease while it lives (the connection goes back
// to the pool when it is destroyed); borrows the Dialect.
// Thread-safety: none; used by the thread holding it.

#ifndef BACKFILL_STORAGE_POSTGRES_PG_SQL_CONNECTION_H_
#define BACKFILL_STORAGE_POSTGRES_PG_SQL_CONNECTION_H_

#include <functional>
#include <map>
#include <optional>
#include <string_view>
#include <vector>

#include "storage/postgres/pg_connection.h"
#include "storage/postgres/pg_pool.h"
#include "storage/sql/connection.h"
#include "storage/sql/dialect.h"

namespace backfill::postgres {

class PgSqlConnection : public sql::Connection {
 public:
  PgSqlConnection(PgPool::Lease lease, const sql::Dialect* dialect)
      : lease_(std::move(lease)), conn_(lease_.get()), dialect_(dialect) {}
  // Over a connection the caller owns (no pool).
  PgSqlConnection(PgConnection* conn, const sql::Dialect* dialect)
      : conn_(conn), dialect_(dialect) {}

  PgConnection* pg() const { return conn_; }

  const sql::Dialect& dialect() const override { return *dialect_; }
  absl::StatusOr<sql::Result> Exec(
      std::string_view sql, absl::Span<const sql::Param> params) override;
  absl::Status ForEachRow(
      std::string_view sql, absl::Span<const sql::Param> params,
      const std::function<absl::Status(const sql::Row&)>& row) override;
  // The statement with its named parameters made positional
  // (storage/sql/named_parameters.h), prepared and described by the
  // server, never run. It is read-only when it starts as a query does and
  // still compiles as a subquery (PostgreSQL allows a data-modifying WITH
  // only at the top level).
  absl::StatusOr<Shape> Describe(std::string_view sql) override;
  // SET LOCAL statement_timeout.
  absl::Status LimitTime(absl::Duration limit) override;
  // DISCARD TEMP.
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

  // The fingerprint of the rows `sql` returns: each row hashed over its
  // values as text (NULL apart), summed (core/model/fingerprint.h).
  static absl::StatusOr<Fingerprint> HashQuery(
      PgConnection* conn, std::string_view sql,
      const std::vector<PgValue>& params);
  // `sql` without the semicolons and whitespace at its end, so that it can
  // be wrapped as a subquery.
  static std::string WithoutTrailingSemicolons(std::string sql);
  // Whether a statement's text starts as a query does (SELECT, WITH,
  // VALUES, TABLE or a parenthesis), after whitespace and comments.
  static bool LooksLikeQuery(std::string_view sql);
  // A result of libpq as the shared units read it.
  static sql::Result ResultOf(PgResult result);
  static std::vector<PgValue> ValuesOf(absl::Span<const sql::Param> params);

 private:
  PgPool::Lease lease_;
  PgConnection* conn_;
  const sql::Dialect* dialect_;
  std::optional<PgTransaction> txn_;
};

}  // namespace backfill::postgres

#endif  // BACKFILL_STORAGE_POSTGRES_PG_SQL_CONNECTION_H_
