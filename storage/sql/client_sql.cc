#include "storage/sql/client_sql.h"

#include <memory>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "core/base/status_macros.h"
#include "core/model/partition.h"
#include "storage/sql/dialect.h"
#include "storage/sql/engine_checks.h"
#include "storage/sql/partition_parameters.h"

namespace backfill::sql {
namespace {

// A value of a result as an SQL literal, as samples show it: NULL, a number
// as the client library prints it, 'text' (quotes doubled).
std::string Literal(const Cell& cell) {
  switch (cell.type) {
    case Cell::Type::kNull:
      return "NULL";
    case Cell::Type::kInteger:
    case Cell::Type::kReal:
      return cell.text;
    default:
      return absl::StrCat("'", absl::StrReplaceAll(cell.text, {{"'", "''"}}),
                          "'");
  }
}

// `sql` described, or FAILED_PRECONDITION starting with `what` when it
// does not compile or is not a read-only query.
absl::StatusOr<Connection::Shape> ReadOnlyShape(Connection* conn,
                                                const std::string& sql,
                                                const std::string& what) {
  absl::StatusOr<Connection::Shape> shape = conn->Describe(sql);
  if (!shape.ok()) {
    if (shape.status().code() != absl::StatusCode::kInvalidArgument) {
      return shape.status();
    }
    return absl::FailedPreconditionError(
        absl::StrCat(what, " does not compile: ", shape.status().message()));
  }
  if (!shape->read_only) {
    return absl::FailedPreconditionError(
        absl::StrCat(what, " is not a read-only SELECT"));
  }
  return shape;
}

}  // namespace

absl::StatusOr<std::map<std::string, CountWithSamples>> RunAssertion(
    Connection* conn, const std::string& job_id, const DatasetSpec& dataset,
    const std::vector<std::string>& partitions, const std::string& sql,
    int samples, std::optional<absl::Duration> limit) {
  const Dialect& d = conn->dialect();
  const std::string what = absl::StrCat("assertion on ", dataset.name);
  const std::string cols = ColumnList(dataset);
  const std::string stage = d.Name(d.Stage(job_id, dataset.name));
  const std::string shadow = d.Name(d.Scratch(dataset.table));
  // The temporary table lives in the session (a read-only transaction may
  // write it but not create it) until the end of the call.
  RETURN_IF_ERROR(conn->DropScratch());
  ASSIGN_OR_RETURN(std::string defs, d.ColumnDefinitions(dataset));
  RETURN_IF_ERROR(Annotate(
      conn->Exec(absl::StrCat("CREATE TEMP TABLE ",
                              Dialect::Quote(dataset.table), " (", defs, ")"))
          .status(),
      what));
  absl::StatusOr<std::map<std::string, CountWithSamples>> out =
      [&]() -> absl::StatusOr<std::map<std::string, CountWithSamples>> {
    Connection::Shape shape;
    {
      ASSIGN_OR_RETURN(Transaction txn,
                       Transaction::Begin(conn, TxnMode::kReadOnly));
      RETURN_IF_ERROR(d.ScopeClientSql(conn));
      ASSIGN_OR_RETURN(shape, ReadOnlyShape(conn, sql, what));
    }
    ASSIGN_OR_RETURN(std::unique_ptr<Membership> member,
                     d.MembershipOf(conn, dataset, ""));
    const std::string fill =
        absl::StrCat("INSERT INTO ", shadow, " (", cols, ") SELECT ", cols,
                     " FROM ", stage, " WHERE ", member->Condition(1));
    const std::string query =
        absl::StrCat("SELECT * FROM (\n", shape.text, "\n) AS _bf_a");
    std::map<std::string, CountWithSamples> counts;
    for (const std::string& partition : partitions) {
      ASSIGN_OR_RETURN(
          Params params,
          PartitionParameters(dataset, partition, shape.parameters,
                              CheckParameters(dataset), nullptr, what));
      ASSIGN_OR_RETURN(Params in_partition, member->Values(partition));
      // Each partition in a transaction of its own, rolled back: nothing
      // the assertion did stays.
      ASSIGN_OR_RETURN(Transaction txn,
                       Transaction::Begin(conn, TxnMode::kSnapshot));
      RETURN_IF_ERROR(
          conn->Exec(absl::StrCat("DELETE FROM ", shadow)).status());
      RETURN_IF_ERROR(Annotate(conn->Exec(fill, in_partition).status(), what));
      RETURN_IF_ERROR(d.ScopeClientSql(conn));
      if (limit.has_value()) RETURN_IF_ERROR(conn->LimitTime(*limit));
      CountWithSamples& c = counts[partition];
      absl::Status ran = conn->ForEachRow(query, params, [&](const Row& row) {
        ++c.count;
        if (static_cast<int>(c.samples.size()) < samples) {
          std::vector<std::string> values;
          for (size_t i = 0; i < row.size(); ++i) {
            values.push_back(
                absl::StrCat(i < shape.columns.size() ? shape.columns[i] : "?",
                             "=", Literal(row[i])));
          }
          c.samples.push_back(
              absl::StrCat("(", absl::StrJoin(values, ", "), ")"));
        }
        return absl::OkStatus();
      });
      if (!ran.ok()) {
        return Annotate(ran, absl::StrCat(what, " for partition ", partition));
      }
    }
    return counts;
  }();
  absl::Status dropped = conn->DropScratch();
  if (!out.ok()) return out.status();
  RETURN_IF_ERROR(dropped);
  return out;
}

absl::StatusOr<SqlValue> QueryValue(Connection* conn,
                                    const DatasetSpec& dataset,
                                    const std::string& partition,
                                    const std::string& sql,
                                    absl::Duration limit) {
  const std::string what = absl::StrCat("the expect query on ", dataset.name);
  RETURN_IF_ERROR(ValidatePartition(dataset.layout(), partition));
  // Read-only and rolled back, whatever the query calls.
  ASSIGN_OR_RETURN(Transaction txn,
                   Transaction::Begin(conn, TxnMode::kReadOnly));
  RETURN_IF_ERROR(conn->dialect().ScopeClientSql(conn));
  ASSIGN_OR_RETURN(Connection::Shape shape, ReadOnlyShape(conn, sql, what));
  ASSIGN_OR_RETURN(Params params, PartitionParameters(
                                      dataset, partition, shape.parameters,
                                      CheckParameters(dataset), nullptr, what));
  RETURN_IF_ERROR(conn->LimitTime(limit));
  absl::StatusOr<Result> rows = conn->Exec(shape.text, params);
  if (!rows.ok()) {
    if (rows.status().code() == absl::StatusCode::kDeadlineExceeded) {
      return absl::DeadlineExceededError(
          absl::StrCat(what, " for partition ", partition, " ran longer than ",
                       absl::FormatDuration(limit), " and was stopped"));
    }
    return Annotate(rows.status(),
                    absl::StrCat(what, " for partition ", partition));
  }
  SqlValue out;
  if (!rows->rows.empty() && !rows->rows[0].empty()) {
    const Cell& v = rows->rows[0][0];
    switch (v.type) {
      case Cell::Type::kNull:
        out.type = SqlValue::Type::kNull;
        break;
      case Cell::Type::kInteger:
        out.type = SqlValue::Type::kInteger;
        out.integer = v.integer;
        break;
      case Cell::Type::kReal:
        out.type = SqlValue::Type::kReal;
        out.real = v.real;
        break;
      default:
        out.type = SqlValue::Type::kText;
        out.text = v.text;
        break;
    }
  }
  return out;
}

absl::StatusOr<QueryShape> DescribeQuery(
    Connection* conn, const std::string& sql,
    const std::vector<const DatasetSpec*>& stand_ins, const DatasetSpec* own) {
  const Dialect& d = conn->dialect();
  RETURN_IF_ERROR(conn->DropScratch());
  absl::StatusOr<QueryShape> out = [&]() -> absl::StatusOr<QueryShape> {
    // Rolled back: the stand-ins go with it.
    ASSIGN_OR_RETURN(Transaction txn,
                     Transaction::Begin(conn, TxnMode::kScratch));
    RETURN_IF_ERROR(d.ScopeClientSql(conn));
    std::set<std::string> made;
    auto stand_in = [&](const DatasetSpec& ds) -> absl::Status {
      if (ds.columns.empty() ||
          !made.insert(absl::AsciiStrToLower(ds.table)).second) {
        return absl::OkStatus();
      }
      ASSIGN_OR_RETURN(std::string defs, d.ColumnDefinitions(ds));
      absl::Status created =
          conn->Exec(absl::StrCat("CREATE TEMP TABLE ",
                                  Dialect::Quote(ds.table), " (", defs, ")"))
              .status();
      if (created.code() == absl::StatusCode::kInvalidArgument) {
        return absl::InvalidArgumentError(
            absl::StrCat("the contract of ", ds.name, " does not make a ",
                         d.product(), " table: ", created.message()));
      }
      return created;
    };
    if (own != nullptr) RETURN_IF_ERROR(stand_in(*own));
    for (const DatasetSpec* ds : stand_ins) {
      if (ds == nullptr) continue;
      ASSIGN_OR_RETURN(bool exists, conn->Exists(d.Published(*ds)));
      if (!exists) RETURN_IF_ERROR(stand_in(*ds));
    }
    ASSIGN_OR_RETURN(Connection::Shape described, conn->Describe(sql));
    QueryShape shape;
    shape.columns = std::move(described.columns);
    shape.parameters = std::move(described.parameters);
    shape.read_only = described.read_only;
    return shape;
  }();
  absl::Status dropped = conn->DropScratch();
  if (!out.ok()) return out.status();
  RETURN_IF_ERROR(dropped);
  return out;
}

absl::StatusOr<std::optional<std::vector<ColumnSpec>>> DescribeTable(
    Connection* conn, const DatasetSpec& dataset) {
  const Dialect& d = conn->dialect();
  RETURN_IF_ERROR(d.CheckName(dataset.table, "table"));
  ASSIGN_OR_RETURN(std::optional<std::vector<Connection::Column>> columns,
                   conn->Columns(d.Published(dataset)));
  if (!columns) return std::optional<std::vector<ColumnSpec>>();
  // A column whose type is the contract's, as the catalog names it, is
  // described in the contract's own words ("INT" rather than "integer"),
  // so that the schema check compares like with like.
  std::vector<std::string> catalog_types;
  if (!dataset.columns.empty()) {
    absl::StatusOr<std::vector<std::string>> types =
        d.CatalogTypes(conn, dataset);
    if (types.ok()) catalog_types = *std::move(types);
  }
  std::vector<ColumnSpec> out;
  for (const Connection::Column& c : *columns) {
    ColumnSpec spec{c.name, c.type};
    for (size_t i = 0; i < catalog_types.size() && i < dataset.columns.size();
         ++i) {
      if (dataset.columns[i].name == c.name && catalog_types[i] == c.type) {
        spec.type = dataset.columns[i].type;
      }
    }
    out.push_back(std::move(spec));
  }
  return std::optional<std::vector<ColumnSpec>>(std::move(out));
}

}  // namespace backfill::sql
