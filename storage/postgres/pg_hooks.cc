#include "storage/postgres/pg_hooks.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/ports/engine.h"
#include "storage/postgres/pg_membership.h"
#include "storage/postgres/pg_plan_check.h"
#include "storage/postgres/pg_sql_connection.h"
#include "storage/sql/engine_checks.h"
#include "storage/sql/named_parameters.h"

namespace backfill::postgres {

void PgHooks::Forget(const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  for (auto it = checked_.lower_bound({job_id, ""});
       it != checked_.end() && it->first == job_id;) {
    it = checked_.erase(it);
  }
}

absl::Status PgHooks::StageTableReady(sql::Connection* conn,
                                      const sql::Relation& stage,
                                      const DatasetSpec& dataset) {
  if (!dataset.partition) return absl::OkStatus();
  // Named "_bf_i_<dataset>" in the job's schema: shorter than the staging
  // table's own name ("_bf_stage_<dataset>", whose length is checked), and
  // "_bf_" is reserved, so no pinned table takes the name.
  return conn
      ->Exec(absl::StrCat(
          "CREATE INDEX IF NOT EXISTS ",
          sql::Dialect::Quote(absl::StrCat("_bf_i_", dataset.name)), " ON ",
          dialect_.Name(stage), " (",
          sql::Dialect::Quote(dataset.partition->column), ")"))
      .status();
}

absl::StatusOr<sql::CompiledTransform> PgHooks::OpenTransform(
    sql::Connection* conn, const sql::TransformSetup& setup) {
  const DatasetSpec& dataset = *setup.dataset;
  // The transform, with its named parameters made positional.
  absl::StatusOr<sql::PositionalSql> positional = sql::ToPositional(
      PgSqlConnection::WithoutTrailingSemicolons(dataset.transform));
  if (!positional.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "transform of ", dataset.name, ": ", positional.status().message()));
  }
  // The session's objects (not kept in the job's schema). Views over the
  // job's tables are made per call, so that nothing in the warehouse
  // depends on a published table between two calls; what an earlier call
  // left goes first. The output table lives in the session (a read-only
  // transaction may write it but not create it) and depends on nothing but
  // its column types: when it is all the call needs, one made by an earlier
  // call from the same statement is kept (StagePartition empties it before
  // the transform writes it).
  PgConnection::SessionScratch& kept =
      static_cast<PgSqlConnection*>(conn)->pg()->session_scratch();
  const bool keepable = setup.reads.empty() && setup.statements.size() == 1;
  if (keepable && !kept.key.empty() && kept.key == setup.statements[0]) {
    return sql::CompiledTransform{positional->text, positional->names};
  }
  RETURN_IF_ERROR(conn->DropScratch());
  for (const std::string& sql : setup.statements) {
    RETURN_IF_ERROR(sql::Annotate(conn->Exec(sql).status(), setup.where));
  }
  if (keepable) kept.key = setup.statements[0];
  return sql::CompiledTransform{positional->text, positional->names};
}

absl::StatusOr<std::vector<std::string>> PgHooks::VetTransform(
    sql::Connection* conn, const sql::TransformSetup& setup,
    const sql::CompiledTransform& transform, const sql::Params& params) {
  const DatasetSpec& dataset = *setup.dataset;
  const std::string& job_id = setup.job->layout().job_id;
  const std::string own_schema = PgDialect::JobSchema(job_id);
  const std::string& base = dialect_.base();
  RETURN_IF_ERROR(conn->Exec(absl::StrCat("SET LOCAL search_path TO ",
                                          sql::Dialect::Quote(own_schema), ", ",
                                          sql::Dialect::Quote(base)))
                      .status());
  // The transform alone, run for its shape only: one query that outputs
  // every contract column.
  absl::StatusOr<sql::Result> shape = conn->Exec(
      absl::StrCat("SELECT * FROM (\n", transform.text, "\n) AS _bf_t LIMIT 0"),
      params);
  if (!shape.ok()) {
    if (!PgSqlConnection::LooksLikeQuery(
            PgSqlConnection::WithoutTrailingSemicolons(dataset.transform)) ||
        absl::StrContains(shape.status().message(), "SQLSTATE 25006")) {
      return absl::FailedPreconditionError(absl::StrCat(
          "transform of ", dataset.name, " is not a read-only SELECT"));
    }
    return absl::FailedPreconditionError(
        absl::StrCat("transform of ", dataset.name,
                     " does not compile: ", shape.status().message()));
  }
  {
    absl::MutexLock lock(&mu_);
    if (checked_.count({job_id, dataset.name}) > 0) return shape->columns;
  }
  // What the transform reads and calls, from its plan, once per job and
  // dataset: its declared upstream datasets (the job's views of them
  // resolve to its own staging) and the functions of the allow-list.
  ASSIGN_OR_RETURN(sql::Result plan,
                   conn->Exec(absl::StrCat("EXPLAIN (VERBOSE, FORMAT JSON) ",
                                           transform.text),
                              params));
  if (plan.rows.empty() || plan.rows[0][0].null()) {
    return absl::InternalError("EXPLAIN returned no plan");
  }
  std::set<std::string> tables;
  for (const InputRef& in : *setup.inputs) tables.insert(in.dataset->table);
  ASSIGN_OR_RETURN(
      std::string why,
      RefusedByPlan(static_cast<PgSqlConnection*>(conn)->pg(),
                    plan.rows[0][0].value(),
                    [&](const std::string& s, const std::string& t) {
                      return s == own_schema || (s == base && tables.count(t));
                    },
                    {kPartitionFunction}));
  if (!why.empty()) {
    return TransformRefused(dataset, why, *setup.inputs, "PostgreSQL");
  }
  absl::MutexLock lock(&mu_);
  checked_.insert({job_id, dataset.name});
  return shape->columns;
}

absl::Status PgHooks::LockPartition(sql::Connection* conn,
                                    const std::string& job_id,
                                    const DatasetSpec& dataset,
                                    const std::string& partition) {
  // Two stagings of one partition at once (a retry racing the attempt it
  // replaces) would each delete only the committed rows and both insert:
  // the partition's rows twice. A transaction lock on the job, dataset and
  // partition makes the second wait for the first's commit and then delete
  // what it wrote. A hash collision only makes two partitions wait for each
  // other.
  return conn
      ->Exec("SELECT pg_advisory_xact_lock(hashtext($1), hashtext($2))",
             {absl::StrCat(job_id, "\n", dataset.name), partition})
      .status();
}

absl::Status PgHooks::CloseTransform(sql::Connection* conn,
                                     int64_t rows_staged) {
  // A kept output table grows by every call's rows (the next call's DELETE
  // leaves them dead, and nothing vacuums a temporary table): it is
  // dropped once it took kKeptScratchRows, counting each call as a row
  // more, so that emptying and scanning it stays cheap.
  PgConnection::SessionScratch& kept =
      static_cast<PgSqlConnection*>(conn)->pg()->session_scratch();
  if (!kept.key.empty()) {
    kept.rows += rows_staged + 1;
    if (kept.rows <= kKeptScratchRows) return absl::OkStatus();
  }
  return conn->DropScratch();
}

absl::Status PgHooks::PrepareTable(sql::Connection* conn,
                                   const DatasetSpec& ds) {
  // No other writer between the proof of the deletes and the commit.
  return conn
      ->Exec(absl::StrCat("LOCK TABLE ", dialect_.Name(dialect_.Published(ds)),
                          " IN SHARE ROW EXCLUSIVE MODE"))
      .status();
}

}  // namespace backfill::postgres
