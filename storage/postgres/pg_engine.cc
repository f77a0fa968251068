#include "storage/postgres/pg_engine.h"

#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/plan/affected_by.h"
#include "storage/postgres/pg_allow_list.h"
#include "storage/postgres/pg_hooks.h"
#include "storage/postgres/pg_membership.h"
#include "storage/postgres/pg_plan_check.h"
#include "storage/postgres/pg_sql_connection.h"
#include "storage/sql/engine_checks.h"
#include "storage/sql/named_parameters.h"
#include "storage/sql/partition_counts.h"
#include "storage/sql/predicates.h"

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
      hooks_(std::make_unique<PgHooks>(
          dialect_.get(),
          [this](const std::string& dataset) { ForgetStats(dataset); })) {}

PostgresEngine::~PostgresEngine() = default;

void PostgresEngine::Interrupt() { pool_->InterruptAll(); }

absl::Status PostgresEngine::DropStaging(const std::string& job_id) {
  RETURN_IF_ERROR(sql::SqlEngine::DropStaging(job_id));
  hooks_->Forget(job_id);
  return absl::OkStatus();
}

absl::StatusOr<sql::Lease> PostgresEngine::Acquire() {
  ASSIGN_OR_RETURN(PgPool::Lease lease, pool_->Acquire());
  return sql::Lease(new PgSqlConnection(std::move(lease), dialect_.get()),
                    [](sql::Connection* conn) { delete conn; });
}

sql::ReplaceHooks& PostgresEngine::replace_hooks() { return *hooks_; }
sql::StagingHooks& PostgresEngine::staging_hooks() { return *hooks_; }

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
  // The predicate checks (core/plan/affected_by.h) know standard strings and
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
  const absl::Duration timeout = predicate_timeout();
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

  PgSqlConnection over(conn.get(), dialect_.get());
  ASSIGN_OR_RETURN(const sql::MatchingStatement statement,
                   sql::MatchingSql(&over, dataset,
                                    absl::StrCat(base, ".", table), predicate));
  absl::StatusOr<PgResult> rows = conn->Exec(statement.sql);
  if (!rows.ok()) return failed(rows.status());
  std::set<std::string> matching;
  for (const std::vector<PgValue>& row : rows->rows) {
    RETURN_IF_ERROR(sql::AddMatchingRow(dataset, predicate, max_partitions,
                                        row[0], &matching));
  }
  return std::vector<std::string>(matching.begin(), matching.end());
}

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
