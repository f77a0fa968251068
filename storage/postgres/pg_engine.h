// PostgresEngine: the warehouse on a PostgreSQL server, reached through
// libpq with a connection string (`warehouse: {engine: postgres, dsn: ...}`).
// Passwords come from libpq's own sources (PGPASSWORD, ~/.pgpass,
// PGPASSFILE), never from the pipeline file. It is the SQL engine of
// storage/sql/ (sql::SqlEngine) over PgDialect and PgSqlConnections of a
// PgPool; what it adds is PostgreSQL's own: the pool and cancellation,
// the service schema and membership functions it creates, plan-based
// refusal of transforms and predicates (PgHooks, pg_plan_check.h), table
// locks while publishing, and statistics kept between calls.
//
// Where things live in the database the connection string names:
//   <base>.<table>   published tables; <base> is the schema the connection's
//                    search_path creates tables in (current_schema() when
//                    the engine opens, normally "public"). Every statement
//                    names it explicitly.
//   _bf.*            the warehouse's own records (storage/sql/markers.h),
//                    the
//                    membership functions (pg_membership.h), and the
//                    rollback copies _bf."prev_<job>_<dataset>": the rows a
//                    Publish replaced, kept for Rollback until retention
//                    drops them.
//   _bf_<job>.*      one schema per job (<job> is the job id with every
//                    character outside [A-Za-z0-9] replaced by '_'):
//                      _bf_stage_<dataset>  staged rows, the contract's
//                                           columns and types (a TEXT time
//                                           partition column COLLATE "C",
//                                           as in every table the engine
//                                           creates from a contract, so
//                                           that its byte-order membership
//                                           ranges can use indexes)
//                      _bf_parts_<dataset>  the job's partitions of the
//                                           dataset and their membership
//                                           values (released ones removed)
//                      _bf_keys_<dataset>   entity keys of a keyed item
//                      <table>              a snapshot named like each
//                                           pinned (`mapping: all`) input,
//                                           taken once
//                    A transform runs with the job's schema first on its
//                    session's search_path (SET LOCAL, inside the staging
//                    transaction), and with TEMP views named like the
//                    tables it reads (storage/sql/staging.h; the
//                    session's temporary schema comes before any other),
//                    so its text is never rewritten.
//                    DropStaging drops the schema (CASCADE).
// A name longer than PostgreSQL's 63 bytes would be cut silently by the
// server: a dataset or table whose names would make one refuses with
// INVALID_ARGUMENT.
//
// Statements bind every value ($1..$n, text); transforms keep their
// :partition_start, :partition_end, :partition (and :partition_key,
// :window_start, :keys) parameters, translated to positional ones
// (storage/sql/named_parameters.h). Identifiers are quoted as standard SQL
// quotes them (sql::Dialect::Quote). Membership follows pg_membership.h: the
// one definition of partition membership, typed ranges on DATE, TIMESTAMP and
// TIMESTAMPTZ columns so that indexes serve them.
//
// Publish and Rollback (storage/sql/publish.h, rollback.h) check (FOR
// SHARE) that the claiming store still owns the warehouse and lock each
// published table against other writers (SHARE ROW EXCLUSIVE) until they
// commit. A connection lost mid-publish leaves a transaction that never
// committed.
//
// Ownership: the engine owns its pool (pg_pool.h, `connections`
// connections: the daemon's --workers plus a few for planning and reads),
// its dialect and its hooks. PrepareJob copies the layout but keeps its
// DatasetSpec pointers (sql_engine.h).
//
// Thread-safety: thread-safe. Each call leases one pooled connection for
// its duration. Interrupt() cancels every statement in flight (PQcancel)
// from any thread.

#ifndef BACKFILL_STORAGE_POSTGRES_PG_ENGINE_H_
#define BACKFILL_STORAGE_POSTGRES_PG_ENGINE_H_

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/ports/engine.h"
#include "storage/postgres/pg_dialect.h"
#include "storage/postgres/pg_hooks.h"
#include "storage/postgres/pg_pool.h"
#include "storage/sql/connection.h"
#include "storage/sql/sql_engine.h"

namespace backfill::postgres {

class PostgresEngine : public sql::SqlEngine {
 public:
  // Opens `connections` connections (at least 1) to `dsn`, creates the
  // service schema and the membership functions if missing. Errors are
  // those of PgPool::Open (never repeating a password).
  static absl::StatusOr<std::unique_ptr<PostgresEngine>> Open(
      const std::string& dsn, int connections);

  ~PostgresEngine() override;

  // The schema published tables live in.
  const std::string& base_schema() const { return base_; }
  // The database the connections use (current_database(), which the dsn
  // may leave to libpq's default).
  const std::string& database() const { return database_; }

  // The schema of a job's staging ("_bf_bf_12" for "bf-12"), unquoted.
  static std::string JobSchema(const std::string& job_id);

  // Also forgets which of the job's transforms passed their plan check.
  absl::Status DropStaging(const std::string& job_id) override;
  void Interrupt() override;
  // Counted in full (one GROUP BY scan, refresh "recount") the first time,
  // then kept and served again (refresh "current") while PostgreSQL's own
  // counters of the table's inserted, updated and deleted rows
  // (pg_stat_user_tables) and its storage (pg_class.relfilenode, which
  // TRUNCATE changes) are what they were, the engine has published or
  // rolled back nothing into it, and the counts are younger than the
  // maximum age (SetStatsPolicy). PostgreSQL reports a transaction's row
  // counts to those counters within a second or so after it commits, so a
  // plan right after another writer's load may still see the counts from
  // before it; they only feed cost estimates.
  absl::StatusOr<PartitionStats> PartitionStatistics(
      const DatasetSpec& dataset) override;
  // A predicate with a parameter (:name or $n) is refused before it
  // reaches the server: nothing is bound to it. It is then planned
  // (EXPLAIN, never run) and refused when the plan reads any relation but
  // the dataset's table or calls a function that is not built into
  // PostgreSQL or that reads more than its arguments (runs queries, reads
  // files, takes session locks); then it runs in a READ ONLY transaction
  // with a statement timeout (SetPredicateTimeout, default 20 s) and is
  // cancelled by Interrupt().
  absl::StatusOr<std::vector<std::string>> PartitionsMatching(
      const DatasetSpec& dataset, const std::string& predicate,
      size_t max_partitions) override;

 private:
  PostgresEngine(std::unique_ptr<PgPool> pool,
                 std::unique_ptr<PgDialect> dialect);
  // sql::SqlEngine: a pooled connection, as the shared units of
  // storage/sql/ take it, and the hooks.
  absl::StatusOr<sql::Lease> Acquire() override;
  // An assertion's statement runs for 60 s at most.
  std::optional<absl::Duration> AssertionTimeLimit() const override {
    return absl::Seconds(60);
  }
  sql::ReplaceHooks& replace_hooks() override;
  sql::StagingHooks& staging_hooks() override;

  std::unique_ptr<PgPool> pool_;
  // Keeps which published tables order their time partition column by
  // bytes.
  const std::unique_ptr<PgDialect> dialect_;
  const std::string base_;  // unquoted
  std::string database_;    // set by Open
  std::unique_ptr<PgHooks> hooks_;

  // Partition statistics kept by dataset name, with the table's change
  // signal when they were counted.
  struct KeptStats {
    PartitionStats stats;
    std::string signal;
  };
  void ForgetStats(const std::string& dataset_name);
  absl::Mutex stats_mu_;
  std::map<std::string, KeptStats> stats_ ABSL_GUARDED_BY(stats_mu_);
};

}  // namespace backfill::postgres

#endif  // BACKFILL_STORAGE_POSTGRES_PG_ENGINE_H_
