#include "storage/sqlite/sqlite_connection.h"

#include <sqlite3.h>

#include <cctype>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/base/status_macros.h"
#include "core/base/sv.h"
#include "storage/sql/staging.h"

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

absl::Status SqliteConnection::Limited(
    const std::function<absl::Status()>& statement) {
  if (!limit_.has_value()) return statement();
  struct Watch {
    absl::Time deadline;
    bool timed_out = false;
    static int Progress(void* self) {
      auto* watch = static_cast<Watch*>(self);
      if (absl::Now() < watch->deadline) return 0;
      watch->timed_out = true;
      return 1;
    }
  } watch{absl::Now() + *limit_};
  sqlite3_progress_handler(db_->raw(), 1000, &Watch::Progress, &watch);
  absl::Status status = statement();
  sqlite3_progress_handler(db_->raw(), 0, nullptr, nullptr);
  if (!status.ok() && watch.timed_out) {
    return absl::DeadlineExceededError(
        absl::StrCat("the statement ran longer than ",
                     absl::FormatDuration(*limit_), " and was stopped"));
  }
  return status;
}

absl::StatusOr<sql::Result> SqliteConnection::Exec(
    std::string_view sql, absl::Span<const sql::Param> params) {
  sql::Result result;
  RETURN_IF_ERROR(Limited([&]() -> absl::Status {
    ASSIGN_OR_RETURN(Statement q, Bound(sql, params));
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
    return absl::OkStatus();
  }));
  return result;
}

absl::Status SqliteConnection::ForEachRow(
    std::string_view sql, absl::Span<const sql::Param> params,
    const std::function<absl::Status(const sql::Row&)>& row) {
  return Limited([&]() -> absl::Status {
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
  });
}

absl::StatusOr<sql::Connection::Shape> SqliteConnection::Describe(
    std::string_view sql) {
  absl::StatusOr<Statement> q = db_->Prepare(sql);
  if (!q.ok()) return absl::InvalidArgumentError(q.status().message());
  Shape shape;
  shape.text = q->Sql();
  while (!shape.text.empty() &&
         (shape.text.back() == ';' ||
          std::isspace(static_cast<unsigned char>(shape.text.back())))) {
    shape.text.pop_back();
  }
  for (int i = 1; i <= q->ParameterCount(); ++i) {
    shape.parameters.push_back(q->ParameterName(i));
  }
  for (int i = 0; i < q->ColumnCount(); ++i) {
    shape.columns.push_back(q->ColumnName(i));
  }
  shape.read_only = q->IsReadOnly();
  return shape;
}

absl::Status SqliteConnection::LimitTime(absl::Duration limit) {
  limit_ = limit;
  return absl::OkStatus();
}

absl::Status SqliteConnection::DropScratch() {
  scratch_key_.clear();
  std::vector<std::pair<std::string, std::string>> objects;
  {
    ASSIGN_OR_RETURN(Statement q,
                     db_->Prepare("SELECT type, name FROM temp.sqlite_master "
                                  "WHERE type IN ('view', 'table')"));
    while (true) {
      ASSIGN_OR_RETURN(bool row, q.Step());
      if (!row) break;
      objects.emplace_back(q.ColumnText(0), q.ColumnText(1));
    }
  }
  for (const auto& [type, name] : objects) {
    // A staging group's rows wait there for their write; the table shadows
    // nothing.
    if (name == sql::kGroupTable) continue;
    RETURN_IF_ERROR(
        db_->Exec(absl::StrCat(type == "view" ? "DROP VIEW IF EXISTS temp."
                                              : "DROP TABLE IF EXISTS "
                                                "temp.",
                               sql::Dialect::Quote(name))));
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
  limit_.reset();
  absl::Status status = txn_->Commit();
  txn_.reset();
  return status;
}

void SqliteConnection::Rollback() {
  limit_.reset();
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

absl::StatusOr<std::map<std::string, Fingerprint>>
SqliteConnection::HashRowsByGroup(std::string_view columns,
                                  std::string_view group, std::string_view rest,
                                  absl::Span<const sql::Param> params) {
  ASSIGN_OR_RETURN(Statement q, Bound(absl::StrCat("SELECT ", Sv(columns), ", ",
                                                   Sv(group), " ", Sv(rest)),
                                      params));
  const int n = q.ColumnCount() - 1;
  std::map<std::string, Fingerprint> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) break;
    if (q.ColumnIsNull(n)) continue;
    out[q.ColumnText(n)].AddRow(HashCurrentRow(q, n));
  }
  return out;
}

}  // namespace backfill::sqlite
