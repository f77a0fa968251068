#include "storage/postgres/pg_engine.h"

#include <algorithm>
#include <cctype>
#include <functional>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "core/affected_by.h"
#include "core/crash_point.h"
#include "core/diff.h"
#include "core/fingerprint.h"
#include "core/partition_layout.h"
#include "core/status_macros.h"
#include "core/stopwatch.h"
#include "core/transform_parameters.h"
#include "core/upstream_mapping.h"
#include "storage/postgres/pg_allow_list.h"
#include "storage/postgres/pg_contract.h"
#include "storage/postgres/pg_membership.h"
#include "storage/postgres/pg_sql_connection.h"
#include "storage/sql/diff.h"
#include "storage/sql/engine_checks.h"
#include "storage/sql/markers.h"
#include "storage/sql/named_parameters.h"
#include "storage/sql/partition_counts.h"
#include "storage/sql/profiles.h"
#include "storage/sql/publish.h"
#include "storage/sql/rollback.h"
#include "storage/sql/validation.h"

namespace backfill::postgres {
namespace {

// Whether the relation `qualified` ("schema"."name", quoted) exists;
// bound, never spliced.
absl::StatusOr<bool> RelationExists(PgConnection* conn,
                                    const std::string& qualified) {
  ASSIGN_OR_RETURN(PgResult r, conn->Exec("SELECT to_regclass($1) IS NOT NULL",
                                          {qualified}));
  return !r.rows.empty() && r.rows[0][0].value_or("f") == "t";
}

using sql::Annotate;

}  // namespace

std::string PostgresEngine::JobSchema(const std::string& job_id) {
  return PgDialect::JobSchema(job_id);
}

absl::StatusOr<std::unique_ptr<PostgresEngine>> PostgresEngine::Open(
    const std::string& dsn, int connections) {
  if (connections < 1) {
    return absl::InvalidArgumentError(
        "the PostgreSQL warehouse needs at least 1 connection");
  }
  PgPoolOptions options;
  options.application_name = "backfilld";
  ASSIGN_OR_RETURN(std::unique_ptr<PgPool> pool,
                   PgPool::Open(dsn, connections, options));
  std::string base;
  std::string database;
  std::unique_ptr<PgDialect> dialect;
  {
    ASSIGN_OR_RETURN(PgPool::Lease conn, pool->Acquire());
    ASSIGN_OR_RETURN(PgResult schema,
                     conn->Exec("SELECT current_schema(), current_database()"));
    if (!schema.rows.empty()) database = schema.rows[0][1].value_or("");
    if (schema.rows.empty() || !schema.rows[0][0]) {
      return absl::FailedPreconditionError(
          "the PostgreSQL warehouse's search_path names no schema that "
          "exists: set search_path (or create the schema) for the dsn's "
          "user");
    }
    base = *schema.rows[0][0];
    if (absl::StartsWith(base, "_bf")) {
      return absl::FailedPreconditionError(
          absl::StrCat("the PostgreSQL warehouse's first schema is ", base,
                       ", a name reserved for backfilld's own schemas"));
    }
    // Whether the database's default collation orders text by bytes (libc
    // C, POSIX or C.UTF-8, whose order is the code points', i.e. UTF-8's
    // bytes'): then membership ranges on a TEXT column with that collation
    // can use its indexes.
    ASSIGN_OR_RETURN(
        PgResult collation,
        conn->Exec("SELECT datlocprovider = 'c' AND datcollate IN ('C', "
                   "'POSIX', 'C.UTF-8', 'C.utf8') FROM pg_catalog.pg_database "
                   "WHERE datname = current_database()"));
    const bool default_byte_ordered =
        !collation.rows.empty() && collation.rows[0][0].value_or("f") == "t";
    dialect = std::make_unique<PgDialect>(base, default_byte_ordered);
    PgSqlConnection over(conn.get(), dialect.get());
    RETURN_IF_ERROR(
        Annotate(dialect->CreateServiceSchema(&over), "opening the warehouse"));
    PgTransaction txn(conn.get());
    RETURN_IF_ERROR(txn.Begin());
    RETURN_IF_ERROR(dialect->LockRecords(&over));
    for (const std::string& sql : PartitionFunctionSql(kServiceSchema)) {
      RETURN_IF_ERROR(Annotate(conn->Exec(sql).status(),
                               "creating the partition membership functions"));
    }
    RETURN_IF_ERROR(txn.Commit());
  }
  auto engine = std::unique_ptr<PostgresEngine>(
      new PostgresEngine(std::move(pool), std::move(dialect)));
  engine->database_ = std::move(database);
  return engine;
}

PostgresEngine::PostgresEngine(std::unique_ptr<PgPool> pool,
                               std::unique_ptr<PgDialect> dialect)
    : sql::SqlEngine(dialect.get()),
      pool_(std::move(pool)),
      dialect_(std::move(dialect)),
      base_(dialect_->base()),
      hooks_(std::make_unique<Hooks>(this)) {}

PostgresEngine::~PostgresEngine() = default;

void PostgresEngine::Interrupt() { pool_->InterruptAll(); }

absl::Status PostgresEngine::DropStaging(const std::string& job_id) {
  RETURN_IF_ERROR(sql::SqlEngine::DropStaging(job_id));
  absl::MutexLock lock(&checked_mu_);
  for (auto it = transforms_checked_.lower_bound({job_id, ""});
       it != transforms_checked_.end() && it->first == job_id;) {
    it = transforms_checked_.erase(it);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<std::vector<ColumnSpec>>>
PostgresEngine::DescribeTable(const DatasetSpec& dataset) {
  RETURN_IF_ERROR(dialect_->CheckName(dataset.table, "table"));
  ASSIGN_OR_RETURN(PgPool::Lease conn, pool_->Acquire());
  ASSIGN_OR_RETURN(std::optional<std::vector<PgColumn>> columns,
                   TableColumns(conn.get(), base_, dataset.table));
  if (!columns) return std::nullopt;
  // A column whose type is the contract's, as PostgreSQL names it, is
  // described in the contract's own words ("INT" rather than "integer"),
  // so that the schema check compares like with like.
  std::vector<PgColumn> contract;
  if (!dataset.columns.empty()) {
    absl::StatusOr<std::vector<PgColumn>> normalized =
        NormalizeContract(conn.get(), dataset.columns);
    if (normalized.ok()) contract = *std::move(normalized);
  }
  std::vector<ColumnSpec> out;
  for (const PgColumn& c : *columns) {
    ColumnSpec spec{c.name, c.type};
    for (size_t i = 0; i < contract.size(); ++i) {
      if (contract[i].name == c.name && contract[i].type == c.type) {
        spec.type = dataset.columns[i].type;
      }
    }
    out.push_back(std::move(spec));
  }
  return out;
}

}  // namespace backfill::postgres

namespace backfill::postgres {
namespace {

constexpr char kStartParam[] = ":partition_start";
constexpr char kEndParam[] = ":partition_end";
constexpr char kValueParam[] = ":partition";
constexpr char kKeyParam[] = ":partition_key";
constexpr char kKeysParam[] = ":keys";
constexpr char kWindowStartParam[] = ":window_start";

std::string StageName(const std::string& dataset) {
  return absl::StrCat("_bf_stage_", dataset);
}
// `"a", "b"` (each quoted, after `prefix`).
absl::StatusOr<std::string> ColumnList(PgConnection* conn,
                                       const DatasetSpec& ds,
                                       std::string_view prefix = "") {
  std::vector<std::string> cols;
  for (const ColumnSpec& c : ds.columns) {
    ASSIGN_OR_RETURN(std::string q, conn->QuoteIdentifier(c.name));
    cols.push_back(absl::StrCat(std::string(prefix), q));
  }
  return absl::StrJoin(cols, ", ");
}

using ::backfill::postgres::PgDialect;

std::string ByteOrderColumn(const DatasetSpec& ds) {
  return PgDialect::ByteOrderColumn(ds);
}

// `sql` without the semicolons and whitespace at its end, so that it can
// be wrapped as a subquery.
std::string WithoutTrailingSemicolons(std::string sql) {
  while (!sql.empty() &&
         (sql.back() == ';' ||
          std::isspace(static_cast<unsigned char>(sql.back())))) {
    sql.pop_back();
  }
  return sql;
}

// Whether a statement's text starts as a query does (SELECT, WITH, VALUES,
// TABLE or a parenthesis), after whitespace and comments.
bool LooksLikeQuery(std::string_view sql) {
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

using sql::CheckItemKeys;

}  // namespace

absl::StatusOr<PgPartitionColumns> PostgresEngine::ColumnsOf(
    PgConnection* conn, const DatasetSpec& ds, const std::string& qualifier) {
  return dialect_->ColumnsOf(conn, ds, qualifier);
}

absl::StatusOr<sql::Lease> PostgresEngine::Acquire() {
  ASSIGN_OR_RETURN(PgPool::Lease lease, pool_->Acquire());
  return sql::Lease(new PgSqlConnection(std::move(lease), dialect_.get()),
                    [](sql::Connection* conn) { delete conn; });
}

}  // namespace backfill::postgres

namespace backfill::postgres {

namespace {
// Defined with PartitionsMatching below.
absl::StatusOr<std::string> RefusedByPlan(
    PgConnection* conn, const PgValue& plan_json,
    const std::function<bool(const std::string&, const std::string&)>& may_read,
    const std::set<std::string>& engine_functions);
}  // namespace

// What the PostgreSQL engine adds to the shared publish, rollback and
// staging: each table replaced is locked against other writers until
// commit, and its kept partition statistics are forgotten after; a
// transform runs with the job's schema first on its search_path and is
// refused by its plan; two stagings of one partition take turns.
class PostgresEngine::Hooks : public sql::ReplaceHooks,
                              public sql::StagingHooks {
 public:
  explicit Hooks(PostgresEngine* engine) : engine_(engine) {}

  // ---- Staging
  // ---------------------------------------------------------------

  absl::StatusOr<sql::CompiledTransform> OpenTransform(
      sql::Connection* conn, const sql::TransformSetup& setup) override {
    const DatasetSpec& dataset = *setup.dataset;
    // The transform, with its named parameters made positional.
    absl::StatusOr<sql::PositionalSql> positional =
        sql::ToPositional(WithoutTrailingSemicolons(dataset.transform));
    if (!positional.ok()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "transform of ", dataset.name, ": ", positional.status().message()));
    }
    // The session's objects, made per call (not kept in the job's schema)
    // so that nothing in the warehouse depends on a published table
    // between two calls; what an earlier call left goes first. The output
    // table lives in the session: a read-only transaction may write it but
    // not create it.
    RETURN_IF_ERROR(conn->Exec("DISCARD TEMP").status());
    for (const std::string& sql : setup.statements) {
      RETURN_IF_ERROR(Annotate(conn->Exec(sql).status(), setup.where));
    }
    return sql::CompiledTransform{positional->text, positional->names};
  }

  // The transform in the read-only transaction (whatever it calls cannot
  // write the warehouse), with the job's schema first on its search_path:
  // run for its shape only, then, once per job and dataset, planned and
  // refused when the plan reads anything but its declared upstream
  // datasets (the job's views of them resolve to its own staging) or calls
  // a function outside the allow-list.
  absl::StatusOr<std::vector<std::string>> VetTransform(
      sql::Connection* conn, const sql::TransformSetup& setup,
      const sql::CompiledTransform& transform,
      const sql::Params& params) override {
    const DatasetSpec& dataset = *setup.dataset;
    const std::string& job_id = setup.job->layout().job_id;
    const std::string own_schema = JobSchema(job_id);
    RETURN_IF_ERROR(
        conn->Exec(absl::StrCat("SET LOCAL search_path TO ",
                                sql::Dialect::Quote(own_schema), ", ",
                                sql::Dialect::Quote(engine_->base_)))
            .status());
    absl::StatusOr<sql::Result> shape =
        conn->Exec(absl::StrCat("SELECT * FROM (\n", transform.text,
                                "\n) AS _bf_t LIMIT 0"),
                   params);
    if (!shape.ok()) {
      if (!LooksLikeQuery(WithoutTrailingSemicolons(dataset.transform)) ||
          absl::StrContains(shape.status().message(), "SQLSTATE 25006")) {
        return absl::FailedPreconditionError(absl::StrCat(
            "transform of ", dataset.name, " is not a read-only SELECT"));
      }
      return absl::FailedPreconditionError(
          absl::StrCat("transform of ", dataset.name,
                       " does not compile: ", shape.status().message()));
    }
    {
      absl::MutexLock lock(&engine_->checked_mu_);
      if (engine_->transforms_checked_.count({job_id, dataset.name}) > 0) {
        return shape->columns;
      }
    }
    ASSIGN_OR_RETURN(sql::Result plan,
                     conn->Exec(absl::StrCat("EXPLAIN (VERBOSE, FORMAT JSON) ",
                                             transform.text),
                                params));
    if (plan.rows.empty() || plan.rows[0][0].null()) {
      return absl::InternalError("EXPLAIN returned no plan");
    }
    std::set<std::string> tables;
    for (const InputRef& in : *setup.inputs) tables.insert(in.dataset->table);
    const std::string& base = engine_->base_;
    ASSIGN_OR_RETURN(
        std::string why,
        RefusedByPlan(
            static_cast<PgSqlConnection*>(conn)->pg(), plan.rows[0][0].value(),
            [&](const std::string& s, const std::string& t) {
              return s == own_schema || (s == base && tables.count(t));
            },
            {kPartitionFunction}));
    if (!why.empty()) {
      return TransformRefused(dataset, why, *setup.inputs, "PostgreSQL");
    }
    absl::MutexLock lock(&engine_->checked_mu_);
    engine_->transforms_checked_.insert({job_id, dataset.name});
    return shape->columns;
  }

  // Two stagings of one partition at once (a retry racing the attempt it
  // replaces) would each delete only the committed rows and both insert:
  // the partition's rows twice. A transaction lock on the job, dataset
  // and partition makes the second wait for the first's commit and then
  // delete what it wrote. A hash collision only makes two partitions wait
  // for each other.
  absl::Status LockPartition(sql::Connection* conn, const std::string& job_id,
                             const DatasetSpec& dataset,
                             const std::string& partition) override {
    return conn
        ->Exec("SELECT pg_advisory_xact_lock(hashtext($1), hashtext($2))",
               {absl::StrCat(job_id, "\n", dataset.name), partition})
        .status();
  }

  absl::Status CloseTransform(sql::Connection* conn) override {
    return conn->Exec("DISCARD TEMP").status();
  }

  // ---- Publish and rollback -------------------------------------------------

  absl::Status PrepareTable(sql::Connection* conn,
                            const DatasetSpec& ds) override {
    // No other writer between the proof of the deletes and the commit.
    return conn
        ->Exec(absl::StrCat(
            "LOCK TABLE ",
            engine_->dialect_->Name(engine_->dialect_->Published(ds)),
            " IN SHARE ROW EXCLUSIVE MODE"))
        .status();
  }

  void Replaced(const DatasetSpec& ds) override {
    engine_->ForgetStats(ds.name);
  }

 private:
  PostgresEngine* engine_;
};

sql::ReplaceHooks& PostgresEngine::replace_hooks() { return *hooks_; }
sql::StagingHooks& PostgresEngine::staging_hooks() { return *hooks_; }

}  // namespace backfill::postgres

namespace backfill::postgres {}  // namespace backfill::postgres

namespace backfill::postgres {}  // namespace backfill::postgres

namespace backfill::postgres {
namespace {

// Type OIDs (pg_type.oid) whose values read as numbers.
constexpr uint32_t kInt8Oid = 20, kInt2Oid = 21, kInt4Oid = 23,
                   kFloat4Oid = 700, kFloat8Oid = 701, kNumericOid = 1700;

// The values of a statement's named parameters for `partition` of
// `dataset`, in the order of `names` (ToPositional's).
absl::StatusOr<std::vector<PgValue>> PartitionParameters(
    const DatasetSpec& dataset, const std::string& partition,
    const std::vector<std::string>& names, const std::string& what) {
  const PartitionLayout layout = dataset.layout();
  RETURN_IF_ERROR(ValidatePartition(layout, partition));
  PartitionBounds bounds;
  std::string key;
  if (layout.grain != Grain::kNone) {
    ASSIGN_OR_RETURN(bounds, BoundsOf(layout, partition));
    if (layout.two_dimensional()) {
      ASSIGN_OR_RETURN(TimeKey tk, SplitTimeKey(layout, partition));
      key = std::move(tk.key);
    }
  }
  std::vector<PgValue> out;
  for (const std::string& name : names) {
    if (name == kStartParam) {
      out.push_back(bounds.start);
    } else if (name == kEndParam) {
      out.push_back(bounds.end);
    } else if (name == kValueParam) {
      out.push_back(partition);
    } else if (name == kKeyParam && layout.two_dimensional()) {
      out.push_back(key);
    } else {
      return absl::FailedPreconditionError(
          absl::StrCat(what, " uses ", name,
                       ", which is not bound; it may use :partition_start, "
                       ":partition_end, :partition",
                       layout.two_dimensional() ? " and :partition_key" : ""));
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<SqlValue> PostgresEngine::QueryValue(
    const DatasetSpec& dataset, const std::string& partition,
    const std::string& sql) {
  const std::string what = absl::StrCat("the expect query on ", dataset.name);
  absl::StatusOr<sql::PositionalSql> positional = sql::ToPositional(sql);
  if (!positional.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        what, " does not compile: ", positional.status().message()));
  }
  ASSIGN_OR_RETURN(
      std::vector<PgValue> params,
      PartitionParameters(dataset, partition, positional->names, what));
  ASSIGN_OR_RETURN(PgPool::Lease conn, pool_->Acquire());
  ASSIGN_OR_RETURN(std::string base, conn->QuoteIdentifier(base_));
  PgTransaction txn(conn.get());
  RETURN_IF_ERROR(txn.Begin("READ ONLY"));
  RETURN_IF_ERROR(conn->Exec("SET LOCAL statement_timeout = '10s'").status());
  RETURN_IF_ERROR(
      conn->Exec(absl::StrCat("SET LOCAL search_path TO ", base)).status());
  absl::StatusOr<PgResult> rows = conn->Exec(positional->text, params);
  if (!rows.ok()) {
    if (rows.status().code() == absl::StatusCode::kInvalidArgument) {
      return absl::FailedPreconditionError(
          absl::StrCat(what, " does not compile or is not a read-only SELECT: ",
                       rows.status().message()));
    }
    if (rows.status().code() == absl::StatusCode::kDeadlineExceeded) {
      return absl::DeadlineExceededError(
          absl::StrCat(what, " for partition ", partition,
                       " ran longer than 10s and was stopped"));
    }
    return Annotate(rows.status(),
                    absl::StrCat(what, " for partition ", partition));
  }
  SqlValue out;
  if (!rows->rows.empty() && !rows->columns.empty()) {
    const PgValue& v = rows->rows[0][0];
    const uint32_t type = rows->types[0];
    if (!v) {
      out.type = SqlValue::Type::kNull;
    } else if (type == kInt2Oid || type == kInt4Oid || type == kInt8Oid) {
      out.type = SqlValue::Type::kInteger;
      if (!absl::SimpleAtoi(*v, &out.integer)) {
        return absl::InternalError(
            absl::StrCat(what, " returned an integer that does not parse"));
      }
    } else if (type == kFloat4Oid || type == kFloat8Oid ||
               type == kNumericOid) {
      out.type = SqlValue::Type::kReal;
      if (!absl::SimpleAtod(*v, &out.real)) {
        return absl::InternalError(
            absl::StrCat(what, " returned a number that does not parse"));
      }
    } else {
      out.type = SqlValue::Type::kText;
      out.text = *v;
    }
  }
  return out;  // the READ ONLY transaction is rolled back on scope exit
}

namespace {

// What a plan printed by EXPLAIN (VERBOSE, FORMAT JSON) reads and calls,
// checked against what SQL text the engine did not write may: relations
// for which `may_read(schema, table)` is true, and built-in functions of
// the allow-list (pg_allow_list.h); no function or operator of the
// database's own (user-defined: oid 16384 and up) whatever its name, but
// for `engine_functions`, the engine's own that its views call. Empty when
// the plan passes, else what it does in words ("reads table x.y").
absl::StatusOr<std::string> RefusedByPlan(
    PgConnection* conn, const PgValue& plan_json,
    const std::function<bool(const std::string&, const std::string&)>& may_read,
    const std::set<std::string>& engine_functions) {
  // A node's schema sits beside its relation name; read them together.
  ASSIGN_OR_RETURN(
      PgResult scanned,
      conn->Exec("SELECT DISTINCT n ->> 'Schema', n ->> 'Relation Name' "
                 "FROM jsonb_path_query($1::jsonb, "
                 "'strict $.** ? (exists (@.\"Relation Name\"))') AS n",
                 {plan_json}));
  for (const std::vector<PgValue>& row : scanned.rows) {
    if (!may_read(row[0].value_or(""), row[1].value_or(""))) {
      return absl::StrCat("reads table ", row[0].value_or("?"), ".",
                          row[1].value_or("?"));
    }
  }
  // Functions it calls: names before '(' in the expressions PostgreSQL
  // printed, with literals and type modifiers taken out first. PostgreSQL
  // quotes a name that is not all lower case: a quoted name is looked up
  // as it is written. Operators: the runs of operator characters that name
  // only operators of the database's own (a symbol PostgreSQL also has
  // built in, such as =, cannot be told apart in the printed plan).
  ASSIGN_OR_RETURN(PgResult calls, conn->Exec(
                                       R"sql(
WITH e AS (
  SELECT regexp_replace(
           regexp_replace(v #>> '{}', '''([^'']|'''')*''', '''''', 'g'),
           '::[a-z ]+\([0-9, ]*\)', '', 'g') AS text
  FROM jsonb_path_query($1::jsonb, 'strict $.** ? (@.type() == "string")') AS v
), n AS (
  SELECT DISTINCT coalesce(lower(m[1]), replace(m[2], '""', '"')) AS name
  FROM e, regexp_matches(e.text, '(?:([A-Za-z_][A-Za-z0-9_$]*)|"((?:[^"]|"")+)")\s*\(', 'g') AS m
), o AS (
  SELECT DISTINCT m[1] AS name
  FROM e, regexp_matches(e.text, '([-+*/<>=~!@#%^&|`?]+)', 'g') AS m
)
SELECT name,
       EXISTS (SELECT 1 FROM pg_catalog.pg_proc p WHERE p.proname = n.name),
       EXISTS (SELECT 1 FROM pg_catalog.pg_proc p WHERE p.proname = n.name AND p.oid >= 16384),
       false
FROM n
UNION ALL
SELECT name, true, true, true FROM o
WHERE EXISTS (SELECT 1 FROM pg_catalog.pg_operator p
              WHERE p.oprname = o.name AND p.oid >= 16384)
  AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_operator p
                  WHERE p.oprname = o.name AND p.oid < 16384)
ORDER BY 1)sql",
                                       {plan_json}));
  for (const std::vector<PgValue>& row : calls.rows) {
    const std::string name = row[0].value_or("");
    if (row[3].value_or("f") == "t") {
      return absl::StrCat("uses operator ", name,
                          ", which is not built into PostgreSQL");
    }
    if (IsPgKeyword(name) || name == "normalize" || name == "collation" ||
        engine_functions.count(name) > 0) {
      continue;
    }
    if (row[2].value_or("f") == "t") {
      return absl::StrCat("calls function ", name,
                          ", which is not built into PostgreSQL");
    }
    if (row[1].value_or("f") == "t" && !IsAllowedPgFunction(name)) {
      return absl::StrCat("calls function ", name,
                          ", which is not on the allow-list of functions");
    }
  }
  return std::string();
}

}  // namespace

void PostgresEngine::SetPredicateTimeout(absl::Duration timeout) {
  absl::MutexLock lock(&predicate_mu_);
  predicate_timeout_ = timeout;
}

absl::StatusOr<std::vector<std::string>> PostgresEngine::PartitionsMatching(
    const DatasetSpec& dataset, const std::string& predicate,
    size_t max_partitions) {
  RETURN_IF_ERROR(CheckPredicate(predicate));
  const std::string quoted = QuotePredicate(predicate);
  const std::string where =
      absl::StrCat("table ", dataset.table, " of dataset ", dataset.name);
  // Nothing is bound to a predicate. A :name is found here; a $n is
  // refused by the lexer (sent as it is, the server would expect a value
  // and fail the protocol, which reads as a lost connection).
  absl::StatusOr<sql::PositionalSql> lexed = sql::ToPositional(predicate);
  if (!lexed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "affected_by: predicate ", quoted, " does not work against ", where,
        ": ", lexed.status().message()));
  }
  if (!lexed->names.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "affected_by: predicate ", quoted, " has a parameter (",
        lexed->names[0],
        "); write the values into the predicate (nothing is bound)"));
  }
  // The predicate checks (core/affected_by.h) know standard strings and
  // quoted names only: a string that could end where they do not expect
  // is refused.
  if (lexed->has_dollar_quote || lexed->has_escape_string) {
    return absl::InvalidArgumentError(absl::StrCat(
        "affected_by: predicate ", quoted, " uses ",
        lexed->has_dollar_quote ? "a dollar-quoted string ($$...$$)"
                                : "an escape string (E'...')",
        ", which a predicate may not; write strings as '...' (a quote "
        "inside doubled: '')"));
  }
  // Its calls, before the server plans it (planning folds immutable calls
  // on constants).
  absl::StatusOr<std::string> call = FirstRefusedCall(predicate);
  if (!call.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("affected_by: predicate ", quoted,
                     " is refused: ", call.status().message()));
  }
  if (!call->empty()) {
    return PredicateRefused(predicate, *call, where,
                            "call PostgreSQL's functions of the allow-list in "
                            "docs/pipeline-spec.md");
  }
  absl::Duration timeout;
  {
    absl::MutexLock lock(&predicate_mu_);
    timeout = predicate_timeout_;
  }
  ASSIGN_OR_RETURN(PgPool::Lease conn, pool_->Acquire());
  ASSIGN_OR_RETURN(std::string base, conn->QuoteIdentifier(base_));
  ASSIGN_OR_RETURN(std::string table, conn->QuoteIdentifier(dataset.table));
  PgTransaction txn(conn.get());
  RETURN_IF_ERROR(txn.Begin("ISOLATION LEVEL REPEATABLE READ, READ ONLY"));
  ASSIGN_OR_RETURN(bool exists,
                   RelationExists(conn.get(), absl::StrCat(base, ".", table)));
  if (!exists) return std::vector<std::string>{};
  RETURN_IF_ERROR(
      conn->Exec(absl::StrCat("SET LOCAL search_path TO ", base)).status());
  RETURN_IF_ERROR(
      conn->Exec(absl::StrCat(
                     "SET LOCAL statement_timeout = ",
                     std::max<int64_t>(1, absl::ToInt64Milliseconds(timeout))))
          .status());
  // Sorts and hashes of one predicate spill to disk beyond this.
  RETURN_IF_ERROR(conn->Exec("SET LOCAL work_mem = '4MB'").status());

  // Every failure of a statement that carries the predicate, as the client
  // should read it.
  auto failed = [&](const absl::Status& status) -> absl::Status {
    switch (status.code()) {
      case absl::StatusCode::kDeadlineExceeded:
        return PredicateRanTooLong(predicate, timeout, where);
      case absl::StatusCode::kCancelled:
        return PredicateInterrupted(predicate);
      case absl::StatusCode::kInvalidArgument:
      case absl::StatusCode::kFailedPrecondition:
      case absl::StatusCode::kPermissionDenied: {
        const std::string message(status.message());
        return absl::InvalidArgumentError(
            absl::StrCat("affected_by: predicate ", quoted,
                         " does not work against ", where, ": ", message,
                         absl::StrContains(message, "at end of input")
                             ? " (the expression is incomplete at its end)"
                             : ""));
      }
      default:
        return Annotate(status,
                        absl::StrCat("affected_by: predicate ", quoted));
    }
  };
  auto refused = [&](const std::string& why) {
    return PredicateRefused(predicate, why, where,
                            "call PostgreSQL's functions of the allow-list in "
                            "docs/pipeline-spec.md");
  };

  // The predicate alone, planned (never run): what it reads and calls.
  const std::string probe = absl::StrCat("SELECT 1 FROM ", base, ".", table,
                                         " WHERE (\n", predicate, "\n)");
  absl::StatusOr<PgResult> plan =
      conn->Exec(absl::StrCat("EXPLAIN (VERBOSE, FORMAT JSON) ", probe));
  if (!plan.ok()) {
    // A syntax error at the parenthesis after the predicate: parsed again
    // without it, a predicate that stops short fails "at end of input".
    // (A syntax error is reported before the aborted transaction is.)
    if (absl::StrContains(plan.status().message(), "(SQLSTATE 42601)") &&
        !absl::StrContains(plan.status().message(), "at end of input")) {
      absl::StatusOr<PgResult> open = conn->Exec(absl::StrCat(
          "EXPLAIN SELECT 1 FROM ", base, ".", table, " WHERE (\n", predicate));
      if (!open.ok() &&
          absl::StrContains(open.status().message(), "at end of input")) {
        return failed(open.status());
      }
    }
    return failed(plan.status());
  }
  if (plan->rows.empty() || !plan->rows[0][0]) {
    return absl::InternalError("EXPLAIN returned no plan");
  }
  const PgValue& plan_json = plan->rows[0][0];
  ASSIGN_OR_RETURN(
      std::string why,
      RefusedByPlan(conn.get(), plan_json,
                    [&](const std::string& schema, const std::string& table) {
                      return schema == base_ && table == dataset.table;
                    },
                    {}));
  if (!why.empty()) return refused(why);

  const Grain grain = dataset.grain();
  std::string sql;
  if (grain == Grain::kNone) {
    sql = absl::StrCat(probe, " LIMIT 1");
  } else {
    PgSqlConnection over(conn.get(), dialect_.get());
    ASSIGN_OR_RETURN(sql, sql::PartitionCountsSql(
                              &over, dataset, absl::StrCat(base, ".", table),
                              absl::StrCat("\n", predicate, "\n")));
  }
  absl::StatusOr<PgResult> rows = conn->Exec(sql);
  if (!rows.ok()) return failed(rows.status());
  std::set<std::string> matching;
  for (const std::vector<PgValue>& row : rows->rows) {
    if (grain == Grain::kNone) {
      matching.insert("");
      break;
    }
    if (!row[0]) continue;  // a row of no partition
    RETURN_IF_ERROR(AddMatchingPartition(dataset, predicate, max_partitions,
                                         *row[0], &matching));
  }
  return std::vector<std::string>(matching.begin(), matching.end());
}

}  // namespace backfill::postgres

namespace backfill::postgres {

void PostgresEngine::ForgetStats(const std::string& dataset_name) {
  absl::MutexLock lock(&stats_mu_);
  stats_.erase(dataset_name);
}

absl::StatusOr<PartitionStats> PostgresEngine::PartitionStatistics(
    const DatasetSpec& dataset) {
  ASSIGN_OR_RETURN(sql::Lease conn, Acquire());
  ASSIGN_OR_RETURN(
      sql::Result r,
      conn->Exec("SELECT c.oid::text || '/' || c.relfilenode::text || '/' || "
                 "(coalesce(s.n_tup_ins, 0) + coalesce(s.n_tup_upd, 0) + "
                 "coalesce(s.n_tup_del, 0))::text "
                 "FROM pg_catalog.pg_class c LEFT JOIN "
                 "pg_catalog.pg_stat_user_tables s ON s.relid = c.oid "
                 "WHERE c.oid = to_regclass($1)",
                 {dialect_->Name(dialect_->Published(dataset))}));
  const std::string signal =
      r.rows.empty() || r.rows[0][0].null() ? "none" : r.rows[0][0].text;
  const absl::Time now = StatsNow();
  const absl::Duration max_age = stats_max_age();
  {
    absl::MutexLock lock(&stats_mu_);
    auto kept = stats_.find(dataset.name);
    if (kept != stats_.end() && kept->second.signal == signal &&
        now - kept->second.stats.recounted_at < max_age) {
      PartitionStats out = kept->second.stats;
      out.refresh = "current";
      return out;
    }
  }
  ASSIGN_OR_RETURN(PartitionStats stats,
                   sql::RecountStatistics(conn.get(), dataset, now));
  absl::MutexLock lock(&stats_mu_);
  stats_[dataset.name] = KeptStats{stats, signal};
  return stats;
}

}  // namespace backfill::postgres

namespace backfill::postgres {
namespace {

// A value of a result as an SQL literal, as samples show it: NULL, a number
// as the server prints it, 'text' (quotes doubled).
std::string Literal(const PgValue& value, uint32_t type) {
  if (!value) return "NULL";
  if (type == kInt2Oid || type == kInt4Oid || type == kInt8Oid ||
      type == kFloat4Oid || type == kFloat8Oid || type == kNumericOid) {
    return *value;
  }
  return absl::StrCat("'", absl::StrReplaceAll(*value, {{"'", "''"}}), "'");
}

}  // namespace

absl::StatusOr<PartitionDiff> PostgresEngine::DiffPartition(
    const std::string& job_id, const DatasetSpec& dataset,
    const std::string& partition, int sample_limit) {
  RETURN_IF_ERROR(sql::CheckWritable(*dialect_, dataset));
  RETURN_IF_ERROR(sql::CheckPartition(dataset, partition));
  const DiffColumns columns = DiffColumnsOf(dataset);
  const sql::Relation stage = dialect_->Stage(job_id, dataset.name);
  const sql::Relation table = dialect_->Published(dataset);
  ASSIGN_OR_RETURN(sql::Lease conn, Acquire());
  ASSIGN_OR_RETURN(
      sql::Transaction txn,
      sql::Transaction::Begin(conn.get(), sql::TxnMode::kSnapshot));
  ASSIGN_OR_RETURN(bool staged, conn->Exists(stage));
  if (!staged) {
    return absl::FailedPreconditionError(
        absl::StrCat("nothing staged for ", dataset.name, " in job ", job_id));
  }
  ASSIGN_OR_RETURN(bool published, conn->Exists(table));
  ASSIGN_OR_RETURN(std::unique_ptr<sql::Membership> member,
                   dialect_->MembershipOf(conn.get(), dataset, ""));
  // The two sides as common table expressions: the staged rows of the
  // partition (after) and its published rows (before; none before the
  // first publish).
  const std::string cols = sql::ColumnList(dataset);
  const std::string in_partition = member->Condition(1);
  sql::DiffSides sides;
  sides.with = absl::StrCat(
      "WITH _bf_after AS (SELECT ", cols, " FROM ", dialect_->Name(stage),
      " WHERE ", in_partition, "), _bf_before AS (SELECT ", cols, " FROM ",
      dialect_->Name(published ? table : stage), " WHERE ",
      published ? in_partition : "FALSE", ") ");
  sides.after = "_bf_after";
  sides.before = "_bf_before";
  ASSIGN_OR_RETURN(sides.params, member->Values(partition));
  ASSIGN_OR_RETURN(PartitionDiff diff,
                   sql::DiffOnePartition(conn.get(), dataset, columns, sides,
                                         partition, sample_limit));
  RETURN_IF_ERROR(txn.Commit());
  return diff;
}

}  // namespace backfill::postgres

namespace backfill::postgres {

absl::StatusOr<std::map<std::string, CountWithSamples>>
PostgresEngine::RunAssertion(const std::string& job_id,
                             const DatasetSpec& dataset, const std::string& sql,
                             int samples) {
  ASSIGN_OR_RETURN(std::shared_ptr<const sql::JobRegistry::Job> job,
                   jobs().FindRecomputing(job_id, dataset.name));
  const std::vector<std::string> partitions = job->Partitions(dataset.name);
  const std::string what = absl::StrCat("assertion on ", dataset.name);
  const std::string body = WithoutTrailingSemicolons(sql);
  absl::StatusOr<sql::PositionalSql> positional = sql::ToPositional(body);
  if (!positional.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        what, " does not compile: ", positional.status().message()));
  }
  if (!LooksLikeQuery(body)) {
    return absl::FailedPreconditionError(
        absl::StrCat(what, " is not a read-only SELECT"));
  }
  ASSIGN_OR_RETURN(PgPool::Lease conn, pool_->Acquire());
  ASSIGN_OR_RETURN(std::string schema,
                   conn->QuoteIdentifier(JobSchema(job_id)));
  ASSIGN_OR_RETURN(std::string base, conn->QuoteIdentifier(base_));
  ASSIGN_OR_RETURN(std::string stage,
                   conn->QuoteIdentifier(StageName(dataset.name)));
  ASSIGN_OR_RETURN(std::string shadow, conn->QuoteIdentifier(dataset.table));
  ASSIGN_OR_RETURN(std::string defs,
                   ContractColumnDefinitions(conn.get(), dataset.columns,
                                             ByteOrderColumn(dataset)));
  ASSIGN_OR_RETURN(std::string cols, ColumnList(conn.get(), dataset));
  std::optional<PgPartitionColumns> pcols;
  std::optional<PgCondition> member;
  if (dataset.partition) {
    ASSIGN_OR_RETURN(pcols, ColumnsOf(conn.get(), dataset, ""));
    ASSIGN_OR_RETURN(member, MembershipCondition(*pcols, kServiceSchema, 1));
  }
  // The dataset's table name reads one partition's staged rows: a TEMP
  // table named like it, which the session resolves before any schema,
  // refilled per partition. It lives in the session (a read-only
  // transaction may write a temporary table but not create one) and goes
  // with DISCARD TEMP.
  struct Discard {
    PgConnection* conn;
    ~Discard() { conn->Exec("DISCARD TEMP").IgnoreError(); }
  } discard{conn.get()};
  RETURN_IF_ERROR(conn->Exec("DISCARD TEMP").status());
  RETURN_IF_ERROR(Annotate(
      conn->Exec(absl::StrCat("CREATE TEMP TABLE ", shadow, " (", defs, ")"))
          .status(),
      what));
  std::map<std::string, CountWithSamples> out;
  for (const std::string& partition : partitions) {
    ASSIGN_OR_RETURN(
        std::vector<PgValue> params,
        PartitionParameters(dataset, partition, positional->names, what));
    std::vector<PgValue> member_values;
    if (dataset.partition) {
      ASSIGN_OR_RETURN(member_values, MembershipValues(*pcols, partition));
    }
    PgTransaction txn(conn.get());
    RETURN_IF_ERROR(txn.Begin("ISOLATION LEVEL REPEATABLE READ, READ ONLY"));
    RETURN_IF_ERROR(
        conn->Exec(absl::StrCat("DELETE FROM pg_temp.", shadow)).status());
    RETURN_IF_ERROR(Annotate(
        conn->Exec(absl::StrCat("INSERT INTO pg_temp.", shadow, " (", cols,
                                ") SELECT ", cols, " FROM ", schema, ".", stage,
                                " WHERE ",
                                dataset.partition ? member->sql : "TRUE"),
                   member_values)
            .status(),
        what));
    RETURN_IF_ERROR(
        conn->Exec(absl::StrCat("SET LOCAL search_path TO ", base)).status());
    RETURN_IF_ERROR(conn->Exec("SET LOCAL statement_timeout = '60s'").status());
    // A subquery cannot modify anything (PostgreSQL refuses a
    // data-modifying WITH below the top level), and the transaction is
    // read-only for every other table.
    absl::StatusOr<PgResult> rows = conn->Exec(
        absl::StrCat("SELECT * FROM (\n", positional->text, "\n) AS _bf_a"),
        params);
    if (!rows.ok()) {
      if (rows.status().code() == absl::StatusCode::kInvalidArgument ||
          rows.status().code() == absl::StatusCode::kFailedPrecondition) {
        const bool writes =
            absl::StrContains(rows.status().message(), "SQLSTATE 25006") ||
            absl::StrContains(rows.status().message(), "data-modifying");
        return absl::FailedPreconditionError(
            writes ? absl::StrCat(what, " is not a read-only SELECT")
                   : absl::StrCat(
                         what, " does not compile: ", rows.status().message()));
      }
      return Annotate(rows.status(),
                      absl::StrCat(what, " for partition ", partition));
    }
    CountWithSamples& c = out[partition];
    c.count = static_cast<int64_t>(rows->rows.size());
    for (const std::vector<PgValue>& row : rows->rows) {
      if (static_cast<int>(c.samples.size()) >= samples) break;
      std::vector<std::string> values;
      for (size_t i = 0; i < row.size(); ++i) {
        values.push_back(absl::StrCat(rows->columns[i], "=",
                                      Literal(row[i], rows->types[i])));
      }
      c.samples.push_back(absl::StrCat("(", absl::StrJoin(values, ", "), ")"));
    }
  }  // each transaction is rolled back: nothing it did stays
  return out;
}

}  // namespace backfill::postgres

namespace backfill::postgres {

absl::StatusOr<QueryShape> PostgresEngine::DescribeQuery(
    const std::string& sql, const std::vector<const DatasetSpec*>& stand_ins,
    const DatasetSpec* own) {
  const std::string body = WithoutTrailingSemicolons(sql);
  absl::StatusOr<sql::PositionalSql> positional = sql::ToPositional(body);
  if (!positional.ok()) {
    return absl::InvalidArgumentError(positional.status().message());
  }
  ASSIGN_OR_RETURN(PgPool::Lease conn, pool_->Acquire());
  ASSIGN_OR_RETURN(std::string base, conn->QuoteIdentifier(base_));
  struct Discard {
    PgConnection* conn;
    ~Discard() { conn->Exec("DISCARD TEMP").IgnoreError(); }
  } discard{conn.get()};
  RETURN_IF_ERROR(conn->Exec("DISCARD TEMP").status());
  QueryShape shape;
  PgTransaction txn(conn.get());  // rolled back: the stand-ins go with it
  RETURN_IF_ERROR(txn.Begin());
  RETURN_IF_ERROR(
      conn->Exec(absl::StrCat("SET LOCAL search_path TO ", base)).status());
  std::set<std::string> made;
  auto stand_in = [&](const DatasetSpec& ds) -> absl::Status {
    if (ds.columns.empty() || !made.insert(ds.table).second) {
      return absl::OkStatus();
    }
    ASSIGN_OR_RETURN(std::string name, conn->QuoteIdentifier(ds.table));
    ASSIGN_OR_RETURN(
        std::string defs,
        ContractColumnDefinitions(conn.get(), ds.columns, ByteOrderColumn(ds)));
    absl::Status made_table =
        conn->Exec(absl::StrCat("CREATE TEMP TABLE ", name, " (", defs, ")"))
            .status();
    if (made_table.code() == absl::StatusCode::kInvalidArgument) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the contract of ", ds.name,
          " does not make a PostgreSQL table: ", made_table.message()));
    }
    return made_table;
  };
  if (own != nullptr) RETURN_IF_ERROR(stand_in(*own));
  for (const DatasetSpec* ds : stand_ins) {
    if (ds == nullptr) continue;
    ASSIGN_OR_RETURN(std::string name, conn->QuoteIdentifier(ds->table));
    ASSIGN_OR_RETURN(bool exists,
                     RelationExists(conn.get(), absl::StrCat(base, ".", name)));
    if (!exists) RETURN_IF_ERROR(stand_in(*ds));
  }
  absl::StatusOr<PgResult> described = conn->Describe(positional->text);
  if (!described.ok()) {
    if (described.status().code() == absl::StatusCode::kInvalidArgument ||
        described.status().code() == absl::StatusCode::kFailedPrecondition) {
      return absl::InvalidArgumentError(described.status().message());
    }
    return described.status();
  }
  shape.columns = described->columns;
  shape.parameters = positional->names;
  // Read-only: a query that still compiles as a subquery (PostgreSQL
  // allows a data-modifying WITH only at the top level).
  shape.read_only =
      LooksLikeQuery(body) &&
      conn->Describe(absl::StrCat("SELECT * FROM (\n", positional->text,
                                  "\n) AS _bf_t"))
          .ok();
  return shape;
}

}  // namespace backfill::postgres
