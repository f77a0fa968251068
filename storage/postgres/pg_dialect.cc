#include "storage/postgres/pg_dialect.h"

#include <cctype>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/time/time.h"
#include "core/base/status_macros.h"
#include "storage/postgres/pg_change_triggers.h"
#include "storage/postgres/pg_contract.h"
#include "storage/postgres/pg_sql_connection.h"
#include "storage/sql/artifacts.h"
#include "storage/sql/engine_checks.h"
#include "storage/sql/markers.h"

namespace backfill::postgres {
namespace {

using sql::Annotate;

// `sql` (a membership condition over $first..) with each $k replaced by
// exprs[k - first]. The conditions come from pg_membership.h: their only
// literals are grain names and constants, so a '$' outside a single-quoted
// literal is always a parameter.
std::string OverExpressions(const std::string& sql, int first,
                            const std::vector<std::string>& exprs) {
  std::string out;
  bool quoted = false;
  for (size_t i = 0; i < sql.size(); ++i) {
    const char c = sql[i];
    if (c == '\'') quoted = !quoted;
    if (!quoted && c == '$' && i + 1 < sql.size() &&
        std::isdigit(static_cast<unsigned char>(sql[i + 1]))) {
      size_t j = i + 1;
      int n = 0;
      while (j < sql.size() &&
             std::isdigit(static_cast<unsigned char>(sql[j]))) {
        n = n * 10 + (sql[j] - '0');
        ++j;
      }
      const int k = n - first;
      if (k >= 0 && k < static_cast<int>(exprs.size())) {
        absl::StrAppend(&out, "(", exprs[k], ")");
        i = j - 1;
        continue;
      }
    }
    out.push_back(c);
  }
  return out;
}

// Membership by pg_membership.h over the columns of one dataset.
class PgMembership : public sql::Membership {
 public:
  PgMembership(PgPartitionColumns columns, PgCondition condition,
               std::string expression)
      : columns_(std::move(columns)),
        condition_(std::move(condition)),
        expression_(std::move(expression)) {}

  int parameters() const override { return condition_.parameters; }
  std::string Condition(int first) const override {
    std::vector<std::string> exprs;
    for (int i = 0; i < condition_.parameters; ++i) {
      exprs.push_back(absl::StrCat("$", first + i));
    }
    return OverExpressions(condition_.sql, 1, exprs);
  }
  absl::StatusOr<sql::Params> Values(
      const std::string& partition) const override {
    ASSIGN_OR_RETURN(std::vector<PgValue> values,
                     MembershipValues(columns_, partition));
    return sql::Params(values.begin(), values.end());
  }
  std::string Expression() const override { return expression_; }
  std::string OverList(std::string_view alias) const override {
    std::vector<std::string> exprs;
    for (int i = 1; i <= condition_.parameters; ++i) {
      exprs.push_back(absl::StrCat(std::string(alias), ".\"v", i, "\""));
    }
    return OverExpressions(condition_.sql, 1, exprs);
  }
  // The values of the condition's parameters: "v1" .. "vn".
  std::vector<std::string> ListColumns() const override {
    std::vector<std::string> out;
    for (int i = 1; i <= condition_.parameters; ++i) {
      out.push_back(absl::StrCat("\"v", i, "\" TEXT"));
    }
    return out;
  }
  absl::StatusOr<sql::Params> ListValues(
      const std::string& partition) const override {
    if (condition_.parameters == 0) return sql::Params();
    return Values(partition);
  }
  std::string Columns() const override {
    if (columns_.column.empty()) return "";
    if (columns_.key_column.empty()) return columns_.column;
    return absl::StrCat(columns_.column, ", ", columns_.key_column);
  }
  std::string GroupBy() const override { return Columns(); }

 private:
  const PgPartitionColumns columns_;
  const PgCondition condition_;  // over $1..
  const std::string expression_;
};

}  // namespace

std::string PgDialect::JobSchema(const std::string& job_id) {
  return absl::StrCat("_bf_", SafeJob(job_id));
}

std::string PgDialect::ByteOrderColumn(const DatasetSpec& ds) {
  if (!ds.partition || ds.grain() == Grain::kKey) return "";
  for (const ColumnSpec& c : ds.columns) {
    if (c.name == ds.partition->column &&
        PgColumnKindOf(c.type) == PgColumnKind::kText) {
      return c.name;
    }
  }
  return "";
}

absl::StatusOr<PgPartitionColumns> PgDialect::ColumnsOf(
    PgConnection* conn, const DatasetSpec& ds,
    const std::string& qualifier) const {
  if (!ds.partition) return PartitionColumnsOf(ds, "", PgColumnKind::kOther);
  // Whether the time column orders by bytes in every table the condition
  // reads: the published table's own column decides once it exists (a
  // source's table is the user's; a derived one may have been created
  // outside the service), and is remembered; until then the tables the
  // service creates declare it COLLATE "C" (ByteOrderColumn).
  std::optional<std::vector<PgColumn>> table_columns;
  bool byte_ordered = !ByteOrderColumn(ds).empty();
  bool known = false;
  {
    absl::MutexLock lock(&collation_mu_);
    auto it = byte_ordered_tables_.find(ds.table);
    if (it != byte_ordered_tables_.end()) {
      byte_ordered = it->second;
      known = true;
    }
  }
  if (!known) {
    ASSIGN_OR_RETURN(table_columns, TableColumns(conn, base_, ds.table));
    if (table_columns) {
      byte_ordered = false;
      for (const PgColumn& c : *table_columns) {
        if (c.name != ds.partition->column) continue;
        byte_ordered = c.collation == "C" || c.collation == "POSIX" ||
                       c.collation == "ucs_basic" ||
                       (c.collation == "default" && default_byte_ordered_);
      }
      absl::MutexLock lock(&collation_mu_);
      byte_ordered_tables_[ds.table] = byte_ordered;
    }
  }
  auto kind_of =
      [&](const std::string& column) -> absl::StatusOr<PgColumnKind> {
    for (const ColumnSpec& c : ds.columns) {
      if (c.name == column) return PgColumnKindOf(c.type);
    }
    if (!table_columns) {
      ASSIGN_OR_RETURN(table_columns, TableColumns(conn, base_, ds.table));
    }
    if (table_columns) {
      for (const PgColumn& c : *table_columns) {
        if (c.name == column) return PgColumnKindOf(c.type);
      }
    }
    return absl::FailedPreconditionError(
        absl::StrCat("dataset ", ds.name, ": partition column ", column,
                     " is neither a contract column nor a column of table ",
                     base_, ".", ds.table));
  };
  ASSIGN_OR_RETURN(PgColumnKind kind, kind_of(ds.partition->column));
  const std::string column = Quote(ds.partition->column);
  std::string key_column;
  PgColumnKind key_kind = PgColumnKind::kOther;
  if (ds.two_dimensional()) {
    ASSIGN_OR_RETURN(key_kind, kind_of(ds.partition->key_column));
    key_column = qualifier + Quote(ds.partition->key_column);
  }
  PgPartitionColumns out =
      PartitionColumnsOf(ds, qualifier + column, kind, key_column, key_kind);
  out.byte_ordered = byte_ordered;
  RETURN_IF_ERROR(
      Annotate(CheckPartitionColumns(out), absl::StrCat("dataset ", ds.name)));
  return out;
}

std::string PgDialect::Placeholder(int index) const {
  return absl::StrCat("$", index);
}

absl::Status PgDialect::CheckName(const std::string& name,
                                  const std::string& what) const {
  if (name.size() > kMaxName) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " \"", name, "\" is ", name.size(),
        " bytes long; PostgreSQL cuts names after 63 bytes, so it would "
        "name another object: choose a shorter name"));
  }
  return absl::OkStatus();
}

sql::Relation PgDialect::Published(const DatasetSpec& dataset) const {
  return {base_, dataset.table};
}
sql::Relation PgDialect::Stage(const std::string& job_id,
                               const std::string& dataset) const {
  return {JobSchema(job_id), absl::StrCat("_bf_stage_", dataset)};
}
sql::Relation PgDialect::Parts(const std::string& job_id,
                               const std::string& dataset) const {
  return {JobSchema(job_id), absl::StrCat("_bf_parts_", dataset)};
}
sql::Relation PgDialect::Keys(const std::string& job_id,
                              const std::string& dataset) const {
  return {JobSchema(job_id), absl::StrCat("_bf_keys_", dataset)};
}
sql::Relation PgDialect::Pin(const std::string& job_id,
                             const DatasetSpec& dataset) const {
  return {JobSchema(job_id), dataset.table};
}
sql::Relation PgDialect::Copies() const { return {kServiceSchema, "prev_"}; }
sql::Relation PgDialect::Scratch(const std::string& name) const {
  return {"pg_temp", name};
}

sql::Relation PgDialect::Meta() const { return {kServiceSchema, "meta"}; }
sql::Relation PgDialect::Publications() const {
  return {kServiceSchema, "publications"};
}
sql::Relation PgDialect::Rollbacks() const {
  return {kServiceSchema, "rollbacks"};
}
sql::Relation PgDialect::ChangeTables() const {
  return {kServiceSchema, "change_tables"};
}
sql::Relation PgDialect::ChangeCounts() const {
  return {kServiceSchema, "change_counts"};
}
sql::Relation PgDialect::FingerprintCache() const {
  return {kServiceSchema, "fingerprints"};
}
absl::StatusOr<std::vector<std::string>> PgDialect::ChangeTriggerSql(
    sql::Connection* conn, const DatasetSpec& dataset,
    const std::string& epoch) const {
  return ChangeTriggerStatements(*this, conn, dataset, epoch);
}
absl::StatusOr<std::string> PgDialect::ChangeIdentity(
    sql::Connection* conn, const DatasetSpec& dataset) const {
  return ChangeTableIdentity(*this, conn, dataset);
}
absl::StatusOr<std::string> PgDialect::ChangeBucket(
    const DatasetSpec& dataset, const std::string& partition) const {
  if (!dataset.partition || partition.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "no bucket for partition '", partition, "' of ", dataset.name));
  }
  return partition;
}

absl::Status PgDialect::CreateJobSpace(sql::Connection* conn,
                                       const std::string& job_id) const {
  return conn
      ->Exec(absl::StrCat("CREATE SCHEMA IF NOT EXISTS ",
                          Quote(JobSchema(job_id))))
      .status();
}

absl::Status PgDialect::DropJobSpace(sql::Connection* conn,
                                     const std::string& job_id) const {
  return conn
      ->Exec(absl::StrCat("DROP SCHEMA IF EXISTS ", Quote(JobSchema(job_id)),
                          " CASCADE"))
      .status();
}

absl::StatusOr<std::vector<std::string>> PgDialect::ListJobSpaces(
    sql::Connection* conn) const {
  ASSIGN_OR_RETURN(
      sql::Result schemas,
      conn->Exec("SELECT nspname FROM pg_namespace WHERE nspname LIKE "
                 "'\\_bf\\_bf\\_%' ORDER BY 1"));
  std::set<std::string> ids;
  for (const sql::Row& row : schemas.rows) {
    // "_bf_" then the job as SafeJob spells it.
    if (auto job = sql::StoreJobOf(std::string_view(row[0].text).substr(4),
                                   /*whole=*/true)) {
      ids.insert(job->first);
    }
  }
  return std::vector<std::string>(ids.begin(), ids.end());
}

absl::StatusOr<std::string> PgDialect::ColumnDefinitions(
    const DatasetSpec& dataset) const {
  const std::string byte_order = ByteOrderColumn(dataset);
  std::vector<std::string> definitions;
  for (const ColumnSpec& column : dataset.columns) {
    // The type is spliced into DDL (PostgreSQL binds no parameters there):
    // only what the catalog's rule accepts.
    if (absl::Status s = CheckColumnType(column.type); !s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("contract column \"", column.name, "\" has type \"",
                       column.type, "\": ", std::string(s.message())));
    }
    std::string definition = absl::StrCat(Quote(column.name), " ", column.type);
    if (!byte_order.empty() && column.name == byte_order) {
      absl::StrAppend(&definition, " COLLATE \"C\"");
    }
    definitions.push_back(std::move(definition));
  }
  return absl::StrJoin(definitions, ", ");
}

std::string PgDialect::Total(std::string_view expr) const {
  return absl::StrCat("coalesce(sum(", std::string(expr), ")::float8, 0)");
}

std::string PgDialect::QuoteValue(std::string_view expr) const {
  return absl::StrCat("quote_nullable(", std::string(expr), ")");
}

std::string PgDialect::RowText(const DatasetSpec& dataset,
                               std::string_view alias) const {
  std::vector<std::string> parts;
  for (const ColumnSpec& c : dataset.columns) {
    const std::string q = Quote(c.name);
    const std::string label =
        absl::StrCat("'", absl::StrReplaceAll(c.name, {{"'", "''"}}), "='");
    const std::string type = absl::AsciiStrToUpper(c.type);
    const bool number =
        absl::StrContains(type, "INT") || absl::StrContains(type, "REAL") ||
        absl::StrContains(type, "FLOA") || absl::StrContains(type, "DOUB") ||
        absl::StrContains(type, "NUMERIC") ||
        absl::StrContains(type, "DECIMAL");
    parts.push_back(absl::StrCat(
        label, " || ",
        number ? absl::StrCat("coalesce(", std::string(alias), ".", q,
                              "::text, 'NULL')")
               : absl::StrCat("quote_nullable(", std::string(alias), ".", q,
                              "::text)")));
  }
  return absl::StrCat("'(' || ", absl::StrJoin(parts, " || ', ' || "),
                      " || ')'");
}

std::string PgDialect::SampleLiteral(const sql::Cell& cell) const {
  switch (cell.type) {
    case sql::Cell::Type::kNull:
      return "NULL";
    case sql::Cell::Type::kInteger:
    case sql::Cell::Type::kReal:
      return cell.text;  // as the server prints it
    default:
      return absl::StrCat("'", absl::StrReplaceAll(cell.text, {{"'", "''"}}),
                          "'");
  }
}

std::string PgDialect::TimePlaceholder(int index) const {
  return absl::StrCat("$", index, "::timestamptz");
}

sql::Param PgDialect::TimeValue(absl::Time when) const {
  // UTC, to microseconds.
  return absl::FormatTime("%Y-%m-%d %H:%M:%E6S+00", when, absl::UTCTimeZone());
}

std::string PgDialect::BoolPlaceholder(int index) const {
  return absl::StrCat("$", index, "::boolean");
}

sql::Param PgDialect::BoolValue(bool value) const {
  return value ? "true" : "false";
}

std::string PgDialect::LockingRead(bool exclusive) const {
  return exclusive ? " FOR UPDATE" : " FOR SHARE";
}

std::string PgDialect::DropDependents() const { return " CASCADE"; }

std::string PgDialect::TimeType() const { return "TIMESTAMPTZ"; }

std::string PgDialect::BoolType() const { return "BOOLEAN"; }

absl::Status PgDialect::ScopeClientSql(sql::Connection* conn) const {
  return conn->Exec(absl::StrCat("SET LOCAL search_path TO ", Quote(base_)))
      .status();
}

absl::StatusOr<std::vector<std::string>> PgDialect::CatalogTypes(
    sql::Connection* conn, const DatasetSpec& dataset) const {
  ASSIGN_OR_RETURN(std::vector<PgColumn> normalized,
                   NormalizeContract(static_cast<PgSqlConnection*>(conn)->pg(),
                                     dataset.columns));
  std::vector<std::string> out;
  for (const PgColumn& c : normalized) out.push_back(c.type);
  return out;
}

absl::Status PgDialect::LockRecords(sql::Connection* conn) const {
  return conn
      ->Exec("SELECT pg_advisory_xact_lock($1::bigint)",
             {sql::Param::Int(kServiceLockKey)})
      .status();
}

absl::Status PgDialect::CreateServiceSchema(sql::Connection* conn) const {
  ASSIGN_OR_RETURN(sql::Transaction txn,
                   sql::Transaction::Begin(conn, sql::TxnMode::kWrite));
  RETURN_IF_ERROR(LockRecords(conn));
  const std::string what = "creating the warehouse's service schema _bf";
  RETURN_IF_ERROR(
      Annotate(conn->Exec(absl::StrCat("CREATE SCHEMA IF NOT EXISTS ",
                                       Quote(kServiceSchema)))
                   .status(),
               what));
  RETURN_IF_ERROR(Annotate(sql::CreateRecords(conn), what));
  return txn.Commit();
}

std::string PgDialect::InKeys(const DatasetSpec& dataset,
                              const sql::Relation& keys,
                              std::string_view qualifier) const {
  return absl::StrCat(
      "COALESCE(CAST(", std::string(qualifier), Quote(dataset.entity_key),
      " AS TEXT) IN (SELECT \"key\" FROM ", Name(keys), "), FALSE)");
}

absl::StatusOr<sql::Dialect::Proven> PgDialect::WriteProven(
    sql::Connection* conn, const DatasetSpec& dataset,
    const sql::Relation& source, const std::optional<sql::Relation>& target,
    const std::string& columns, const std::string& partition) const {
  ASSIGN_OR_RETURN(std::unique_ptr<sql::Membership> member,
                   MembershipOf(conn, dataset, ""));
  ASSIGN_OR_RETURN(sql::Params values, member->Values(partition));
  const std::string condition = member->Condition(1);
  const std::string p_param = Placeholder(member->parameters() + 1);
  values.push_back(partition);
  // Every row the statement writes maps to a partition by the partition
  // expression, a second formulation of the one definition.
  std::string write;
  if (!target) {
    write = absl::StrCat("DELETE FROM ", Name(source), " WHERE ", condition);
  } else {
    write = absl::StrCat("INSERT INTO ", Name(*target),
                         columns == "*" ? "" : absl::StrCat(" (", columns, ")"),
                         " SELECT ", columns, " FROM ", Name(source), " WHERE ",
                         condition);
  }
  ASSIGN_OR_RETURN(
      sql::Result r,
      conn->Exec(absl::StrCat("WITH _bf_w AS (", write, " RETURNING ",
                              member->Expression(),
                              " AS p) SELECT count(*), count(*) FILTER (WHERE "
                              "p IS NOT DISTINCT FROM ",
                              p_param, "::text) FROM _bf_w"),
                 values));
  Proven out;
  out.affected = r.rows.at(0)[0].integer;
  out.belonging = r.rows.at(0)[1].integer;
  return out;
}

absl::StatusOr<std::unique_ptr<sql::Membership>> PgDialect::MembershipOf(
    sql::Connection* conn, const DatasetSpec& dataset,
    std::string_view qualifier) const {
  auto* pg = static_cast<PgSqlConnection*>(conn);
  ASSIGN_OR_RETURN(PgPartitionColumns columns,
                   ColumnsOf(pg->pg(), dataset, std::string(qualifier)));
  ASSIGN_OR_RETURN(PgCondition condition,
                   MembershipCondition(columns, kServiceSchema, 1));
  ASSIGN_OR_RETURN(std::string expression,
                   PartitionExpression(columns, kServiceSchema));
  return std::make_unique<PgMembership>(
      std::move(columns), std::move(condition), std::move(expression));
}

}  // namespace backfill::postgres
