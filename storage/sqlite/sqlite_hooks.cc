#include "storage/sqlite/sqlite_hooks.h"

#include <cctype>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/status_macros.h"
#include "core/ports/engine.h"
#include "storage/sql/engine_checks.h"
#include "storage/sqlite/sqlite_membership.h"
#include "storage/sqlite/sqlite_partition_stats.h"
#include "storage/sqlite/sqlite_sandbox.h"

namespace backfill::sqlite {
namespace {

Database* DbOf(sql::Connection* conn) {
  return static_cast<SqliteConnection*>(conn)->db();
}

}  // namespace

SqliteHooks::Compiled& SqliteHooks::CompiledOn(const SqliteConnection* conn) {
  absl::MutexLock lock(&mu_);
  return compiled_[conn];
}

absl::Status SqliteHooks::StageTableReady(sql::Connection* conn,
                                          const sql::Relation& stage,
                                          const DatasetSpec& ds) {
  if (!ds.partition) return absl::OkStatus();
  return conn
      ->Exec(absl::StrCat("CREATE INDEX IF NOT EXISTS main.",
                          QuoteIdentifier(stage.name + "__partition"), " ON ",
                          QuoteIdentifier(stage.name), " (",
                          QuoteIdentifier(ds.partition->column), ")"))
      .status();
}

absl::StatusOr<sql::CompiledTransform> SqliteHooks::OpenTransform(
    sql::Connection* conn, const sql::TransformSetup& setup) {
  auto* sqlite_conn = static_cast<SqliteConnection*>(conn);
  Database* db = sqlite_conn->db();
  const DatasetSpec& dataset = *setup.dataset;
  // The transform is part of what the objects are made for: its check and
  // its text as compiled are kept with them.
  const std::string key = absl::StrCat(absl::StrJoin(setup.statements, ";\n"),
                                       ";\n-- transform\n", dataset.transform);
  Compiled& kept = CompiledOn(sqlite_conn);
  if (sqlite_conn->scratch_key() == key) return kept.transform;
  RETURN_IF_ERROR(sql::Annotate(conn->DropScratch(), setup.where));
  // Until the objects are complete and checked, they are for nothing (and
  // so dropped before the connection serves another call).
  sqlite_conn->scratch_key() = "-- incomplete";
  for (const std::string& sql : setup.statements) {
    RETURN_IF_ERROR(sql::Annotate(db->Exec(sql), setup.where));
  }
  // The transform alone: one read-only SELECT, compiled (never from the
  // statement cache) against the objects just made.
  absl::StatusOr<Statement> transform = db->Prepare(dataset.transform);
  if (!transform.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("transform of ", dataset.name,
                     " does not compile: ", transform.status().message()));
  }
  if (!transform->IsReadOnly()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "transform of ", dataset.name, " is not a read-only SELECT"));
  }
  // Compiled again in a sandbox: it may read its declared upstream
  // datasets only (through the job's views where the job recomputes or
  // pins them: the view, and the job's own tables the view reads) and call
  // the functions of the allow-list.
  Sandbox::Options allowed;
  allowed.tables = setup.reads;
  allowed.temp_tables = true;  // the job's views
  allowed.recursive = true;
  allowed.extra_functions = {kPartitionFunction};  // in the views
  for (const InputRef& in : *setup.inputs) {
    allowed.tables.insert(in.dataset->table);
  }
  std::string refused;
  {
    Sandbox sandbox(db, std::move(allowed));
    refused = db->Prepare(dataset.transform).ok() ? "" : sandbox.refused();
  }
  if (!refused.empty()) {
    return TransformRefused(dataset, refused, *setup.inputs, "SQLite");
  }
  kept.transform.text = transform->Sql();
  std::string& text = kept.transform.text;
  while (!text.empty() &&
         (text.back() == ';' ||
          std::isspace(static_cast<unsigned char>(text.back())))) {
    text.pop_back();
  }
  kept.transform.parameters.clear();
  for (int i = 1; i <= transform->ParameterCount(); ++i) {
    kept.transform.parameters.push_back(transform->ParameterName(i));
  }
  kept.outputs.clear();
  for (int i = 0; i < transform->ColumnCount(); ++i) {
    kept.outputs.push_back(transform->ColumnName(i));
  }
  sqlite_conn->scratch_key() = key;
  return kept.transform;
}

absl::StatusOr<std::vector<std::string>> SqliteHooks::VetTransform(
    sql::Connection* conn, const sql::TransformSetup&,
    const sql::CompiledTransform&, const sql::Params&) {
  return CompiledOn(static_cast<SqliteConnection*>(conn)).outputs;
}

absl::Status SqliteHooks::PrepareGroupTable(sql::Connection* conn,
                                            const std::string& create) {
  std::string& made = static_cast<SqliteConnection*>(conn)->group_table_key();
  if (made == create) {
    // Missing after all (dropped by hand): made again below.
    if (conn->Exec(absl::StrCat("DELETE FROM temp.",
                                sql::Dialect::Quote(sql::kGroupTable)))
            .ok()) {
      return absl::OkStatus();
    }
  }
  made.clear();
  RETURN_IF_ERROR(sql::StagingHooks::PrepareGroupTable(conn, create));
  made = create;
  return absl::OkStatus();
}

absl::Status SqliteHooks::CloseTransform(sql::Connection* conn,
                                         int64_t /*rows_staged*/) {
  return conn->Exec("DELETE FROM temp.\"_bf_out\"").status();
}

absl::StatusOr<std::function<absl::Status()>> SqliteHooks::BeforeReplacing(
    sql::Connection* conn, const DatasetSpec& ds,
    const std::vector<std::string>& partitions) {
  Database* db = DbOf(conn);
  ASSIGN_OR_RETURN(StatsWrite stats, StatsWrite::Begin(db, ds, partitions));
  auto kept = std::make_shared<StatsWrite>(std::move(stats));
  std::function<absl::Time()> now = now_;
  return std::function<absl::Status()>(
      [kept, db, now] { return kept->Finish(db, now()); });
}

absl::Status SqliteHooks::PrepareTable(sql::Connection* conn,
                                       const DatasetSpec& ds) {
  if (!ds.partition) return absl::OkStatus();
  // The partition column gets an index, so that replacing a partition
  // costs its rows, not the table.
  return conn
      ->Exec(absl::StrCat("CREATE INDEX IF NOT EXISTS main.",
                          QuoteIdentifier(absl::StrCat("_bf_idx_", ds.table)),
                          " ON ", QuoteIdentifier(ds.table), " (",
                          QuoteIdentifier(ds.partition->column), ")"))
      .status();
}

absl::Status SqliteHooks::CheckStaged(sql::Connection* conn,
                                      const DatasetSpec& ds,
                                      const sql::Relation& stage,
                                      const sql::Relation& parts,
                                      const std::string& where) {
  if (!ds.partition) return absl::OkStatus();
  // Every staged row must belong to one of the job's partitions of the
  // dataset: the insert then cannot reach outside them.
  ASSIGN_OR_RETURN(
      sql::Result r,
      conn->Exec(absl::StrCat(
          "SELECT COUNT(*), MIN(quote(", QuoteIdentifier(ds.partition->column),
          ")) FROM ", dialect_.Name(stage), " WHERE NOT EXISTS (SELECT 1 FROM ",
          dialect_.Name(parts), " AS _bf_p WHERE ",
          MembershipCondition(ds, "", "_bf_p.\"value\"", "_bf_p.\"lo\"",
                              "_bf_p.\"hi\""),
          ")")));
  if (const int64_t outside = r.rows.at(0)[0].integer; outside > 0) {
    return absl::InternalError(absl::StrCat(
        where, ": ", outside,
        " staged rows belong to none of the job's partitions (e.g. ",
        ds.partition->column, "=", r.rows[0][1].text,
        "); the transaction was rolled back and nothing was published"));
  }
  return absl::OkStatus();
}

}  // namespace backfill::sqlite
