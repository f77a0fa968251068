#include "storage/sqlite/sqlite_connection.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"

namespace backfill::sqlite {

sql::Cell SqliteConnection::CellOf(const Statement& q, int i) {
  sql::Cell cell;
  switch (q.GetColumnType(i)) {
    case ColumnType::kNull:
      return cell;
    case ColumnType::kInteger:
      cell.type = sql::Cell::Type::kInteger;
      cell.integer = q.ColumnInt(i);
      cell.real = static_cast<double>(cell.integer);
      break;
    case ColumnType::kReal:
      cell.type = sql::Cell::Type::kReal;
      cell.real = q.ColumnDouble(i);
      cell.integer = static_cast<int64_t>(cell.real);
      break;
    case ColumnType::kText:
      cell.type = sql::Cell::Type::kText;
      cell.integer = q.ColumnInt(i);
      cell.real = q.ColumnDouble(i);
      break;
    case ColumnType::kBlob:
      cell.type = sql::Cell::Type::kBlob;
      break;
  }
  cell.text = q.ColumnText(i);
  return cell;
}

absl::StatusOr<Statement> SqliteConnection::Bound(
    std::string_view sql, absl::Span<const sql::Param> params) {
  ASSIGN_OR_RETURN(Statement q, db_->PrepareCached(sql));
  for (size_t i = 0; i < params.size(); ++i) {
    const int index = static_cast<int>(i) + 1;
    switch (params[i].kind()) {
      case sql::Param::Kind::kNull:
        RETURN_IF_ERROR(q.BindNull(index));
        break;
      case sql::Param::Kind::kInteger:
        RETURN_IF_ERROR(q.BindInt(index, params[i].integer()));
        break;
      case sql::Param::Kind::kText:
        RETURN_IF_ERROR(q.BindText(index, params[i].text()));
        break;
    }
  }
  return q;
}

absl::StatusOr<sql::Result> SqliteConnection::Exec(
    std::string_view sql, absl::Span<const sql::Param> params) {
  ASSIGN_OR_RETURN(Statement q, Bound(sql, params));
  sql::Result result;
  for (int i = 0; i < q.ColumnCount(); ++i) {
    result.columns.push_back(q.ColumnName(i));
  }
  while (true) {
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) break;
    sql::Row& cells = result.rows.emplace_back();
    for (int i = 0; i < q.ColumnCount(); ++i) cells.push_back(CellOf(q, i));
  }
  result.affected = q.IsReadOnly() ? 0 : db_->Changes();
  return result;
}

absl::Status SqliteConnection::ForEachRow(
    std::string_view sql, absl::Span<const sql::Param> params,
    const std::function<absl::Status(const sql::Row&)>& row) {
  ASSIGN_OR_RETURN(Statement q, Bound(sql, params));
  sql::Row cells;
  while (true) {
    ASSIGN_OR_RETURN(bool more, q.Step());
    if (!more) break;
    cells.clear();
    for (int i = 0; i < q.ColumnCount(); ++i) cells.push_back(CellOf(q, i));
    RETURN_IF_ERROR(row(cells));
  }
  return absl::OkStatus();
}

absl::Status SqliteConnection::Begin(sql::TxnMode mode) {
  if (txn_.has_value()) {
    return absl::FailedPreconditionError("a transaction is already open");
  }
  ASSIGN_OR_RETURN(Transaction txn,
                   Transaction::Begin(db_, mode == sql::TxnMode::kWrite
                                               ? Transaction::Mode::kImmediate
                                               : Transaction::Mode::kDeferred));
  txn_.emplace(std::move(txn));
  return absl::OkStatus();
}

absl::Status SqliteConnection::Commit() {
  if (!txn_.has_value()) {
    return absl::FailedPreconditionError("no transaction is open");
  }
  absl::Status status = txn_->Commit();
  txn_.reset();
  return status;
}

void SqliteConnection::Rollback() {
  if (!txn_.has_value()) return;
  txn_->Rollback();
  txn_.reset();
}

absl::StatusOr<bool> SqliteConnection::Exists(const sql::Relation& relation) {
  return db_->TableExists(relation.name, relation.schema);
}

absl::StatusOr<std::vector<std::string>> SqliteConnection::Tables(
    const std::string& schema, const std::string& prefix) {
  ASSIGN_OR_RETURN(
      sql::Result r,
      Exec(absl::StrCat("SELECT name FROM ", sql::Dialect::Quote(schema),
                        ".sqlite_master WHERE type = 'table' AND substr(name, "
                        "1, length(?1)) = ?1 ORDER BY name"),
           {prefix}));
  std::vector<std::string> out;
  for (const sql::Row& row : r.rows) out.push_back(row[0].text);
  return out;
}

absl::StatusOr<std::optional<std::vector<sql::Connection::Column>>>
SqliteConnection::Columns(const sql::Relation& relation) {
  ASSIGN_OR_RETURN(bool exists, Exists(relation));
  if (!exists) return std::optional<std::vector<Column>>();
  ASSIGN_OR_RETURN(Statement q,
                   db_->Prepare("SELECT name, type FROM pragma_table_info(?1, "
                                "?2) ORDER BY cid"));
  RETURN_IF_ERROR(q.BindText(1, relation.name));
  RETURN_IF_ERROR(q.BindText(2, relation.schema));
  std::vector<Column> columns;
  while (true) {
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) break;
    columns.push_back({q.ColumnText(0), q.ColumnText(1)});
  }
  return std::optional<std::vector<Column>>(std::move(columns));
}

absl::StatusOr<Fingerprint> SqliteConnection::HashRows(
    std::string_view columns, std::string_view rest,
    absl::Span<const sql::Param> params) {
  ASSIGN_OR_RETURN(FingerprintQuery fq, fingerprints_.Get(db_, columns, rest));
  ASSIGN_OR_RETURN(Statement q, Bound(fq.sql, params));
  return fq.Run(q);
}

}  // namespace backfill::sqlite
