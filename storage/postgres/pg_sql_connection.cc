#include "storage/postgres/pg_sql_connection.h"

#include <algorithm>
#include <cctype>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "storage/postgres/pg_contract.h"
#include "storage/sql/named_parameters.h"

namespace backfill::postgres {
namespace {

// Type OIDs (pg_type.oid) whose values read as numbers.
constexpr uint32_t kInt8Oid = 20, kInt2Oid = 21, kInt4Oid = 23,
                   kFloat4Oid = 700, kFloat8Oid = 701, kNumericOid = 1700;

sql::Cell CellOf(const PgValue& value, uint32_t type) {
  sql::Cell cell;
  if (!value) return cell;
  cell.text = *value;
  if (type == kInt2Oid || type == kInt4Oid || type == kInt8Oid) {
    cell.type = sql::Cell::Type::kInteger;
    absl::SimpleAtoi(cell.text, &cell.integer);
    cell.real = static_cast<double>(cell.integer);
  } else if (type == kFloat4Oid || type == kFloat8Oid || type == kNumericOid) {
    cell.type = sql::Cell::Type::kReal;
    absl::SimpleAtod(cell.text, &cell.real);
    cell.integer = static_cast<int64_t>(cell.real);
  } else {
    cell.type = sql::Cell::Type::kText;
    absl::SimpleAtoi(cell.text, &cell.integer);
  }
  return cell;
}

}  // namespace

std::vector<PgValue> PgSqlConnection::ValuesOf(
    absl::Span<const sql::Param> params) {
  std::vector<PgValue> values;
  values.reserve(params.size());
  for (const sql::Param& p : params) {
    if (p.null()) {
      values.push_back(std::nullopt);
    } else {
      values.push_back(p.text());
    }
  }
  return values;
}

sql::Result PgSqlConnection::ResultOf(PgResult result) {
  sql::Result out;
  out.columns = std::move(result.columns);
  out.affected = result.affected;
  out.rows.reserve(result.rows.size());
  for (const std::vector<PgValue>& row : result.rows) {
    sql::Row& cells = out.rows.emplace_back();
    cells.reserve(row.size());
    for (size_t i = 0; i < row.size(); ++i) {
      cells.push_back(
          CellOf(row[i], i < result.types.size() ? result.types[i] : 0));
    }
  }
  return out;
}

absl::StatusOr<sql::Result> PgSqlConnection::Exec(
    std::string_view sql, absl::Span<const sql::Param> params) {
  ASSIGN_OR_RETURN(PgResult result, conn_->Exec(sql, ValuesOf(params)));
  return ResultOf(std::move(result));
}

absl::Status PgSqlConnection::ForEachRow(
    std::string_view sql, absl::Span<const sql::Param> params,
    const std::function<absl::Status(const sql::Row&)>& row) {
  ASSIGN_OR_RETURN(sql::Result result, Exec(sql, params));
  for (const sql::Row& r : result.rows) RETURN_IF_ERROR(row(r));
  return absl::OkStatus();
}

std::string PgSqlConnection::WithoutTrailingSemicolons(std::string sql) {
  while (!sql.empty() &&
         (sql.back() == ';' ||
          std::isspace(static_cast<unsigned char>(sql.back())))) {
    sql.pop_back();
  }
  return sql;
}

bool PgSqlConnection::LooksLikeQuery(std::string_view sql) {
  size_t i = 0;
  while (i < sql.size()) {
    if (std::isspace(static_cast<unsigned char>(sql[i]))) {
      ++i;
    } else if (sql.substr(i, 2) == "--") {
      while (i < sql.size() && sql[i] != '\n') ++i;
    } else if (sql.substr(i, 2) == "/*") {
      const size_t end = sql.find("*/", i + 2);
      i = end == std::string_view::npos ? sql.size() : end + 2;
    } else {
      break;
    }
  }
  if (i < sql.size() && sql[i] == '(') return true;
  size_t j = i;
  while (j < sql.size() && std::isalpha(static_cast<unsigned char>(sql[j]))) {
    ++j;
  }
  const std::string word =
      absl::AsciiStrToLower(std::string(sql.substr(i, j - i)));
  return word == "select" || word == "with" || word == "values" ||
         word == "table";
}

absl::StatusOr<sql::Connection::Shape> PgSqlConnection::Describe(
    std::string_view sql) {
  const std::string body = WithoutTrailingSemicolons(std::string(sql));
  absl::StatusOr<sql::PositionalSql> positional = sql::ToPositional(body);
  if (!positional.ok()) {
    return absl::InvalidArgumentError(positional.status().message());
  }
  absl::StatusOr<PgResult> described = conn_->Describe(positional->text);
  if (!described.ok()) {
    if (described.status().code() == absl::StatusCode::kInvalidArgument ||
        described.status().code() == absl::StatusCode::kFailedPrecondition) {
      return absl::InvalidArgumentError(described.status().message());
    }
    return described.status();
  }
  Shape shape;
  shape.text = positional->text;
  shape.parameters = positional->names;
  shape.columns = described->columns;
  shape.read_only =
      LooksLikeQuery(body) &&
      conn_
          ->Describe(absl::StrCat("SELECT * FROM (\n", positional->text,
                                  "\n) AS _bf_t"))
          .ok();
  return shape;
}

absl::Status PgSqlConnection::LimitTime(absl::Duration limit) {
  return conn_
      ->Exec(
          absl::StrCat("SET LOCAL statement_timeout = ",
                       std::max<int64_t>(1, absl::ToInt64Milliseconds(limit))))
      .status();
}

absl::Status PgSqlConnection::DropScratch() {
  conn_->session_scratch() = {};
  return conn_->Exec("DISCARD TEMP").status();
}

absl::Status PgSqlConnection::Begin(sql::TxnMode mode) {
  if (txn_.has_value()) {
    return absl::FailedPreconditionError("a transaction is already open");
  }
  txn_.emplace(conn_);
  absl::Status begun;
  switch (mode) {
    case sql::TxnMode::kWrite:
    case sql::TxnMode::kScratch:
      begun = txn_->Begin();
      break;
    case sql::TxnMode::kSnapshot:
      begun = txn_->Begin("ISOLATION LEVEL REPEATABLE READ, READ ONLY");
      break;
    case sql::TxnMode::kReadOnly:
      begun = txn_->Begin("READ ONLY");
      break;
  }
  if (!begun.ok()) txn_.reset();
  return begun;
}

absl::Status PgSqlConnection::Commit() {
  if (!txn_.has_value()) {
    return absl::FailedPreconditionError("no transaction is open");
  }
  absl::Status status = txn_->Commit();
  txn_.reset();
  return status;
}

void PgSqlConnection::Rollback() { txn_.reset(); }

absl::StatusOr<bool> PgSqlConnection::Exists(const sql::Relation& relation) {
  ASSIGN_OR_RETURN(PgResult r, conn_->Exec("SELECT to_regclass($1) IS NOT NULL",
                                           {dialect_->Name(relation)}));
  return !r.rows.empty() && r.rows[0][0].value_or("f") == "t";
}

absl::StatusOr<std::vector<std::string>> PgSqlConnection::Tables(
    const std::string& schema, const std::string& prefix) {
  ASSIGN_OR_RETURN(PgResult r,
                   conn_->Exec("SELECT tablename FROM pg_tables WHERE "
                               "schemaname = $1 AND starts_with(tablename, "
                               "$2) ORDER BY 1",
                               {schema, prefix}));
  std::vector<std::string> out;
  for (const std::vector<PgValue>& row : r.rows) {
    out.push_back(row[0].value_or(""));
  }
  return out;
}

absl::StatusOr<std::optional<std::vector<sql::Connection::Column>>>
PgSqlConnection::Columns(const sql::Relation& relation) {
  ASSIGN_OR_RETURN(std::optional<std::vector<PgColumn>> columns,
                   TableColumns(conn_, relation.schema, relation.name));
  if (!columns) return std::optional<std::vector<Column>>();
  std::vector<Column> out;
  for (PgColumn& c : *columns) {
    out.push_back({std::move(c.name), std::move(c.type)});
  }
  return std::optional<std::vector<Column>>(std::move(out));
}

absl::StatusOr<Fingerprint> PgSqlConnection::HashRows(
    std::string_view columns, std::string_view rest,
    absl::Span<const sql::Param> params) {
  return HashQuery(
      conn_,
      absl::StrCat("SELECT ", std::string(columns), " ", std::string(rest)),
      ValuesOf(params));
}

absl::StatusOr<std::map<std::string, Fingerprint>>
PgSqlConnection::HashRowsByGroup(std::string_view columns,
                                 std::string_view group, std::string_view rest,
                                 absl::Span<const sql::Param> params) {
  ASSIGN_OR_RETURN(
      PgResult rows,
      conn_->Exec(absl::StrCat("SELECT ", std::string(columns), ", ",
                               std::string(group), " ", std::string(rest)),
                  ValuesOf(params)));
  std::map<std::string, Fingerprint> out;
  for (const std::vector<PgValue>& row : rows.rows) {
    if (row.empty() || !row.back()) continue;
    RowHasher h;
    for (size_t i = 0; i + 1 < row.size(); ++i) {
      if (row[i]) {
        h.AddText(*row[i]);
      } else {
        h.AddNull();
      }
    }
    out[*row.back()].AddRow(h.Finish());
  }
  return out;
}

absl::StatusOr<Fingerprint> PgSqlConnection::HashQuery(
    PgConnection* conn, std::string_view sql,
    const std::vector<PgValue>& params) {
  ASSIGN_OR_RETURN(PgResult rows, conn->Exec(sql, params));
  Fingerprint fp;
  for (const std::vector<PgValue>& row : rows.rows) {
    RowHasher h;
    for (const PgValue& v : row) {
      if (v) {
        h.AddText(*v);
      } else {
        h.AddNull();
      }
    }
    fp.AddRow(h.Finish());
  }
  return fp;
}

}  // namespace backfill::postgres
