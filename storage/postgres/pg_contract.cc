#include "storage/postgres/pg_contract.h"

#include <map>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/status_macros.h"
#include "storage/sql/engine_checks.h"

namespace backfill::postgres {
namespace {

// The TEMP table NormalizeContract creates and always rolls back.
constexpr char kProbeTable[] = "_bf_contract_probe";

// `"schema"."table"`, or `"table"` without a schema.
absl::StatusOr<std::string> QualifiedName(PgConnection* conn,
                                          const std::string& schema,
                                          const std::string& table) {
  ASSIGN_OR_RETURN(std::string name, conn->QuoteIdentifier(table));
  if (schema.empty()) return name;
  ASSIGN_OR_RETURN(std::string space, conn->QuoteIdentifier(schema));
  return absl::StrCat(space, ".", name);
}

// One column's definition, `"name" TYPE`.
absl::StatusOr<std::string> ColumnDefinition(PgConnection* conn,
                                             const ColumnSpec& column) {
  // The type is spliced into DDL (PostgreSQL binds no parameters there):
  // only what the catalog's rule accepts.
  if (absl::Status s = CheckColumnType(column.type); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("contract column \"", column.name, "\" has type \"",
                     column.type, "\": ", std::string(s.message())));
  }
  absl::StatusOr<std::string> name = conn->QuoteIdentifier(column.name);
  if (!name.ok()) {
    return sql::Annotate(name.status(),
                         absl::StrCat("contract column \"", column.name, "\""));
  }
  return absl::StrCat(*name, " ", column.type);
}

// Creates the probe table with `definitions` in a transaction of its own,
// reads its columns when `columns` is not null, and rolls back.
absl::Status Probe(PgConnection* conn, const std::string& definitions,
                   std::vector<PgColumn>* columns) {
  PgTransaction txn(conn);  // rolls back on return, whatever happened
  RETURN_IF_ERROR(txn.Begin());
  // ON COMMIT DROP: should the transaction ever commit, the table goes too.
  RETURN_IF_ERROR(
      conn->Exec(absl::StrCat("CREATE TEMP TABLE ", kProbeTable, " (",
                              definitions, ") ON COMMIT DROP"))
          .status());
  if (columns == nullptr) return absl::OkStatus();
  ASSIGN_OR_RETURN(std::optional<std::vector<PgColumn>> read,
                   TableColumns(conn, "pg_temp", kProbeTable));
  if (!read.has_value()) {
    return absl::InternalError(
        "the temporary table made from the contract cannot be found");
  }
  *columns = *std::move(read);
  return absl::OkStatus();
}

// `"INT" (PostgreSQL: integer)`, or just `"INTEGER"` when the two differ
// only in letter case.
std::string Declared(const ColumnSpec& column, const std::string& normalized) {
  if (absl::EqualsIgnoreCase(column.type, normalized)) {
    return absl::StrCat("\"", column.type, "\"");
  }
  return absl::StrCat("\"", column.type, "\" (PostgreSQL: ", normalized, ")");
}

}  // namespace

absl::StatusOr<std::optional<std::vector<PgColumn>>> TableColumns(
    PgConnection* conn, const std::string& schema, const std::string& table) {
  ASSIGN_OR_RETURN(const std::string name, QualifiedName(conn, schema, table));
  // One statement, so that the relation and its columns are read at once;
  // a relation without columns gives one row of NULL columns.
  ASSIGN_OR_RETURN(
      PgResult r,
      conn->Exec("SELECT c.relkind::text, a.attname::text, "
                 "format_type(a.atttypid, a.atttypmod), "
                 "coalesce(co.collname::text, '') "
                 "FROM (SELECT to_regclass($1) AS oid) AS r "
                 "LEFT JOIN pg_catalog.pg_class AS c ON c.oid = r.oid "
                 "LEFT JOIN pg_catalog.pg_attribute AS a ON a.attrelid = c.oid "
                 "AND a.attnum > 0 AND NOT a.attisdropped "
                 "LEFT JOIN pg_catalog.pg_collation AS co "
                 "ON co.oid = a.attcollation "
                 "ORDER BY a.attnum",
                 {name}));
  if (r.rows.empty() || !r.rows[0][0].has_value()) {
    return std::optional<std::vector<PgColumn>>();
  }
  // Tables, partitioned tables, views, materialized views, foreign tables.
  const std::string kind = *r.rows[0][0];
  if (kind != "r" && kind != "p" && kind != "v" && kind != "m" && kind != "f") {
    return absl::FailedPreconditionError(absl::StrCat(
        name, " is not a table (PostgreSQL relation kind '", kind, "')"));
  }
  std::vector<PgColumn> columns;
  for (const std::vector<PgValue>& row : r.rows) {
    if (!row[1].has_value() || !row[2].has_value()) continue;
    columns.push_back({*row[1], *row[2], row[3].value_or("")});
  }
  return std::optional<std::vector<PgColumn>>(std::move(columns));
}

absl::StatusOr<std::string> ContractColumnDefinitions(
    PgConnection* conn, const std::vector<ColumnSpec>& contract,
    const std::string& byte_order_column) {
  std::vector<std::string> definitions;
  for (const ColumnSpec& column : contract) {
    ASSIGN_OR_RETURN(std::string definition, ColumnDefinition(conn, column));
    if (!byte_order_column.empty() && column.name == byte_order_column) {
      absl::StrAppend(&definition, " COLLATE \"C\"");
    }
    definitions.push_back(std::move(definition));
  }
  return absl::StrJoin(definitions, ", ");
}

absl::StatusOr<std::vector<PgColumn>> NormalizeContract(
    PgConnection* conn, const std::vector<ColumnSpec>& contract) {
  ASSIGN_OR_RETURN(const std::string definitions,
                   ContractColumnDefinitions(conn, contract));
  std::vector<PgColumn> columns;
  absl::Status made = Probe(conn, definitions, &columns);
  if (made.code() == absl::StatusCode::kInvalidArgument) {
    // The server refused a definition: find the column, one at a time.
    for (const ColumnSpec& column : contract) {
      ASSIGN_OR_RETURN(const std::string definition,
                       ColumnDefinition(conn, column));
      absl::Status alone = Probe(conn, definition, nullptr);
      if (alone.code() == absl::StatusCode::kInvalidArgument) {
        return absl::InvalidArgumentError(absl::StrCat(
            "PostgreSQL refuses contract column \"", column.name, "\" (",
            column.type, "): ", std::string(alone.message())));
      }
      RETURN_IF_ERROR(alone);
    }
    return sql::Annotate(made, "the contract's columns do not make a table");
  }
  if (!made.ok()) {
    return sql::Annotate(made,
                         "cannot read the contract's types from the server");
  }
  if (columns.size() != contract.size()) {
    return absl::InternalError(absl::StrCat("a table made from a contract of ",
                                            contract.size(), " columns has ",
                                            columns.size()));
  }
  for (size_t i = 0; i < columns.size(); ++i)
    columns[i].name = contract[i].name;
  return columns;
}

absl::Status CompareWithContract(const std::string& table_name,
                                 const std::vector<ColumnSpec>& contract,
                                 const std::vector<PgColumn>& normalized,
                                 const std::vector<PgColumn>& table) {
  if (normalized.size() != contract.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the normalized contract has ", normalized.size(),
                     " columns, the contract ", contract.size()));
  }
  std::map<std::string, const PgColumn*> present;
  for (const PgColumn& column : table) present[column.name] = &column;
  std::set<std::string> declared;
  for (const ColumnSpec& column : contract) declared.insert(column.name);

  std::vector<std::string> problems;
  std::set<std::string> explained;  // table columns a problem named already
  bool real = false;
  for (size_t i = 0; i < contract.size(); ++i) {
    const ColumnSpec& want = contract[i];
    const std::string& type = normalized[i].type;
    auto it = present.find(want.name);
    if (it == present.end()) {
      // The same name in another letter case, which no contract column
      // claims: a table created without quotes, or a contract retyped.
      const PgColumn* other = nullptr;
      for (const PgColumn& column : table) {
        if (absl::EqualsIgnoreCase(column.name, want.name) &&
            !declared.count(column.name) && !explained.count(column.name)) {
          other = &column;
          break;
        }
      }
      if (other != nullptr) {
        explained.insert(other->name);
        problems.push_back(absl::StrCat(
            "column \"", want.name, "\" (", Declared(want, type),
            ") is missing, but the table has \"", other->name, "\" (",
            other->type,
            "): quoted column names are case-sensitive on PostgreSQL"));
      } else {
        problems.push_back(absl::StrCat("column \"", want.name,
                                        "\" is missing (the contract declares ",
                                        Declared(want, type), ")"));
      }
      continue;
    }
    const PgColumn& have = *it->second;
    if (have.type != type) {
      real = real || have.type == "real" || type == "real";
      problems.push_back(absl::StrCat(
          "column \"", want.name, "\" is ", have.type,
          " in the table, but the contract declares ", Declared(want, type)));
    }
  }
  for (const PgColumn& column : table) {
    if (declared.count(column.name) || explained.count(column.name)) continue;
    problems.push_back(
        absl::StrCat("column \"", column.name, "\" (", column.type,
                     ") is in the table but not in the contract"));
  }
  if (problems.empty()) return absl::OkStatus();
  std::string message = absl::StrCat(
      "table ", table_name,
      " does not match its contract: ", absl::StrJoin(problems, "; "));
  if (real) {
    absl::StrAppend(
        &message,
        ". Note: REAL is PostgreSQL's 4-byte float (about 6 significant "
        "digits), not SQLite's 8-byte one; declare DOUBLE PRECISION for an "
        "8-byte float");
  }
  return absl::FailedPreconditionError(message);
}

absl::Status CheckTableContract(PgConnection* conn, const std::string& schema,
                                const std::string& table,
                                const std::vector<ColumnSpec>& contract) {
  ASSIGN_OR_RETURN(const std::string name, QualifiedName(conn, schema, table));
  ASSIGN_OR_RETURN(const std::optional<std::vector<PgColumn>> columns,
                   TableColumns(conn, schema, table));
  if (!columns.has_value()) {
    return absl::NotFoundError(absl::StrCat("table ", name, " does not exist"));
  }
  ASSIGN_OR_RETURN(const std::vector<PgColumn> normalized,
                   NormalizeContract(conn, contract));
  return CompareWithContract(name, contract, normalized, *columns);
}

}  // namespace backfill::postgres
