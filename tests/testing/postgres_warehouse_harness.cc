#include "tests/testing/postgres_warehouse_harness.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/synchronization/mutex.h"
#include "tests/testing/postgres_test_server.h"

namespace backfill::testing {
namespace {

using postgres::PgConnection;
using postgres::PgResult;
using postgres::PostgresEngine;

// The test binary's database on the ctest run's shared server (or its
// own server), made on first use and dropped (or stopped) at exit.
absl::StatusOr<PostgresTestServer*> Server() {
  static absl::Mutex mu(absl::kConstInit);
  static PostgresTestServer* server = nullptr;
  absl::MutexLock lock(&mu);
  if (server == nullptr) {
    auto started = PostgresTestServer::StartOrShare();
    if (!started.ok()) return started.status();
    server = started->release();
    std::atexit([] { delete server; });
  }
  return server;
}

}  // namespace

absl::StatusOr<std::unique_ptr<PostgresWarehouseHarness>>
PostgresWarehouseHarness::Create() {
  auto server = Server();
  if (!server.ok()) return server.status();
  static std::atomic<int> next{0};
  const std::string database =
      absl::StrCat("warehouse_", getpid(), "_", ++next);
  {
    auto admin = PgConnection::Connect((*server)->Dsn());
    if (!admin.ok()) return admin.status();
    auto created = (*admin)->Exec(
        absl::StrCat("CREATE DATABASE ", database,
                     " TEMPLATE template0 ENCODING 'UTF8' LC_COLLATE 'C' "
                     "LC_CTYPE 'C'"));
    if (!created.ok()) return created.status();
  }
  std::unique_ptr<PostgresWarehouseHarness> h(
      new PostgresWarehouseHarness(database, (*server)->Dsn(database)));
  auto conn = PgConnection::Connect(h->dsn_);
  if (!conn.ok()) return conn.status();
  h->conn_ = *std::move(conn);
  if (absl::Status s = h->Reopen(kDefaultConnections); !s.ok()) return s;
  return h;
}

PostgresWarehouseHarness::~PostgresWarehouseHarness() {
  engine_.reset();
  conn_.reset();
  auto server = Server();
  if (!server.ok()) return;
  auto admin = PgConnection::Connect((*server)->Dsn());
  if (admin.ok()) {
    (*admin)
        ->Exec(absl::StrCat("DROP DATABASE IF EXISTS ", database_,
                            " WITH (FORCE)"))
        .IgnoreError();
  }
}

absl::Status PostgresWarehouseHarness::Reopen(int connections) {
  engine_.reset();
  connections_ = connections;
  auto engine = PostgresEngine::Open(dsn_, connections);
  if (!engine.ok()) return engine.status();
  engine_ = *std::move(engine);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Engine>>
PostgresWarehouseHarness::OpenAnother() {
  auto engine = PostgresEngine::Open(dsn_, 1);
  if (!engine.ok()) return engine.status();
  return std::unique_ptr<Engine>(*std::move(engine));
}

absl::Status PostgresWarehouseHarness::Exec(const std::string& sql) {
  return conn_->ExecScript(sql);
}

absl::StatusOr<std::vector<WarehouseHarness::Row>>
PostgresWarehouseHarness::Query(const std::string& sql) {
  auto result = conn_->Exec(sql);
  if (!result.ok()) return result.status();
  return std::move(result->rows);
}

absl::StatusOr<bool> PostgresWarehouseHarness::Exists(
    const std::string& relation) {
  auto r = conn_->Exec("SELECT to_regclass($1) IS NOT NULL", {relation});
  if (!r.ok()) return r.status();
  return r->rows[0][0].value_or("f") == "t";
}

absl::StatusOr<std::vector<TableColumn>> PostgresWarehouseHarness::Columns(
    const std::string& table) {
  auto r = conn_->Exec(
      "SELECT a.attname, upper(format_type(a.atttypid, a.atttypmod)), "
      "coalesce((SELECT k.n FROM unnest(i.indkey) WITH ORDINALITY AS k(attnum, "
      "n) WHERE k.attnum = a.attnum), 0) FROM "
      "pg_attribute a LEFT JOIN pg_index i ON i.indrelid = a.attrelid AND "
      "i.indisprimary WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 "
      "AND NOT a.attisdropped ORDER BY a.attnum",
      {Quote(table)});
  if (!r.ok()) return r.status();
  std::vector<TableColumn> out;
  for (const Row& row : r->rows) {
    out.push_back({row[0].value_or(""), row[1].value_or(""),
                   std::stoi(row[2].value_or("0"))});
  }
  return out;
}

std::string PostgresWarehouseHarness::StagingTable(
    const std::string& job_id, const std::string& dataset) const {
  return absl::StrCat(Quote(PostgresEngine::JobSchema(job_id)), ".",
                      Quote(absl::StrCat("_bf_stage_", dataset)));
}

std::string PostgresWarehouseHarness::RollbackCopyTable(
    const std::string& job_id, const std::string& dataset) const {
  std::string safe = job_id;
  for (char& c : safe) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return absl::StrCat("_bf.", Quote(absl::StrCat("prev_", safe, "_", dataset)));
}

absl::StatusOr<std::vector<std::string>>
PostgresWarehouseHarness::StagingObjects(const std::string& job_id) {
  auto r = conn_->Exec(
      "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = "
      "c.relnamespace WHERE n.nspname = $1 AND c.relkind IN ('r', 'v') "
      "ORDER BY 1",
      {PostgresEngine::JobSchema(job_id)});
  if (!r.ok()) return r.status();
  std::vector<std::string> out;
  for (const Row& row : r->rows) out.push_back(row[0].value_or(""));
  return out;
}

absl::Status PostgresWarehouseHarness::AddLegacyPublications(
    const std::vector<std::string>& jobs) {
  engine_.reset();
  if (absl::Status s = conn_->ExecScript(
          "DELETE FROM _bf.publications; DELETE FROM _bf.meta");
      !s.ok()) {
    return s;
  }
  for (const std::string& job : jobs) {
    auto r = conn_->Exec("INSERT INTO _bf.publications VALUES ('', $1, now())",
                         {job});
    if (!r.ok()) return r.status();
  }
  return Reopen(connections_);
}

std::string PostgresWarehouseHarness::RecordsTable(
    const std::string& which) const {
  return absl::StrCat("_bf.", Quote(which));
}

void PostgresWarehouseHarness::SetPredicateTimeout(absl::Duration timeout) {
  engine_->SetPredicateTimeout(timeout);
}

std::string PostgresWarehouseHarness::ExactText(const std::string& expr) const {
  return absl::StrCat("quote_nullable(", expr, ")");
}

std::string PostgresWarehouseHarness::JsonArrayLength(
    const std::string& json) const {
  return absl::StrCat("json_array_length(CAST(", json, " AS json))");
}

std::string PostgresWarehouseHarness::JsonArrayElements(
    const std::string& json) const {
  return absl::StrCat("SELECT value FROM json_array_elements_text(CAST(", json,
                      " AS json)) AS e(value)");
}

WarehouseHarnessFactory PostgresWarehouse() {
  return {PostgresWarehouseHarness::kName,
          []() -> absl::StatusOr<std::unique_ptr<WarehouseHarness>> {
            auto h = PostgresWarehouseHarness::Create();
            if (!h.ok()) return h.status();
            return std::unique_ptr<WarehouseHarness>(*std::move(h));
          }};
}

}  // namespace backfill::testing
