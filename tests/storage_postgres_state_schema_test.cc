// The state store's schema on PostgreSQL (storage/postgres/state/
// pg_state_schema.h): the same tables and columns as the SQLite state
// store's, read from both catalogs (but for the tables of a group of
// replicas, PostgreSQL's only); migrated once however many replicas start
// at once, and from an older version; a newer schema refused before
// anything is written; the audit tables append-only and the count of tasks
// per state kept by the database, as on SQLite.

#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/postgres/pg_connection.h"
#include "storage/postgres/state/pg_state_schema.h"
#include "storage/sqlite/sqlite_db.h"
#include "storage/sqlite/state/sqlite_state_store.h"
#include "tests/testing/postgres_suite.h"

namespace backfill {
namespace storage_postgres_state_schema_test {
namespace {

using postgres::MigrateStateSchema;
using postgres::PgConnection;
using postgres::ReadStateSchemaVersion;
using postgres::StateSchemaVersion;
using ::testing::HasSubstr;

class PgStateSchemaTest : public backfill::testing::PostgresSuite {
 protected:
  // Each test gets a database of its own.
  void SetUp() override {
    ASSERT_NE(server_, nullptr);
    static int next = 0;
    auto database = server_->CreateDatabase(absl::StrCat("state_", ++next));
    ASSERT_TRUE(database.ok()) << database.status();
    database_ = *database;
    conn_ = Connect();
    ASSERT_NE(conn_, nullptr);
  }

  std::unique_ptr<PgConnection> Connect() {
    auto conn = PgConnection::Connect(server_->Dsn(database_));
    EXPECT_TRUE(conn.ok()) << conn.status();
    return conn.ok() ? *std::move(conn) : nullptr;
  }

  // The rows of `sql`, each as "a|b|...".
  std::vector<std::string> Rows(const std::string& sql) {
    auto r = conn_->Exec(sql);
    EXPECT_TRUE(r.ok()) << r.status() << " in " << sql;
    std::vector<std::string> out;
    if (!r.ok()) return out;
    for (const auto& row : r->rows) {
      std::string line;
      for (size_t i = 0; i < row.size(); ++i) {
        absl::StrAppend(&line, i ? "|" : "", row[i].value_or("NULL"));
      }
      out.push_back(line);
    }
    return out;
  }

  void TearDown() override {
    conn_.reset();
    if (server_ != nullptr && !database_.empty()) {
      EXPECT_TRUE(server_->DropDatabase(database_).ok());
    }
  }

  std::string database_;
  std::unique_ptr<PgConnection> conn_;
};

// Table -> its columns in order, each "name type[ not null]" with SQLite's
// INTEGER, REAL and TEXT said as PostgreSQL's bigint, double precision and
// text; a key column's NOT NULL is left out (SQLite allows NULL in a text
// primary key, PostgreSQL never does).
using Schema = std::map<std::string, std::vector<std::string>>;

Schema SqliteSchema() {
  const std::string path = ::testing::TempDir() + "/state_schema_test.db";
  std::remove(path.c_str());
  EXPECT_TRUE(SqliteStateStore::Open(path).ok());
  auto db = sqlite::Database::Open(path);
  EXPECT_TRUE(db.ok()) << db.status();
  Schema out;
  if (!db.ok()) return out;
  auto q = (*db)->Prepare(
      "SELECT m.name, p.name, p.type, p.\"notnull\", p.pk FROM sqlite_master "
      "m, pragma_table_info(m.name) p WHERE m.type = 'table' ORDER BY m.name, "
      "p.cid");
  EXPECT_TRUE(q.ok()) << q.status();
  const std::map<std::string, std::string> types = {
      {"INTEGER", "bigint"}, {"REAL", "double precision"}, {"TEXT", "text"}};
  while (q.ok()) {
    auto row = q->Step();
    if (!row.ok() || !*row) break;
    auto type = types.find(q->ColumnText(2));
    EXPECT_NE(type, types.end()) << q->ColumnText(2);
    out[q->ColumnText(0)].push_back(absl::StrCat(
        q->ColumnText(1), " ", type == types.end() ? "?" : type->second,
        q->ColumnInt(3) && q->ColumnInt(4) == 0 ? " not null" : ""));
  }
  std::remove(path.c_str());
  return out;
}

TEST_F(PgStateSchemaTest, HasTheTablesAndColumnsOfTheSqliteStateStore) {
  auto before = ReadStateSchemaVersion(conn_.get());
  ASSERT_TRUE(before.ok()) << before.status();
  EXPECT_EQ(*before, 0);
  ASSERT_TRUE(MigrateStateSchema(conn_.get()).ok());
  EXPECT_EQ(*ReadStateSchemaVersion(conn_.get()), StateSchemaVersion());

  Schema pg;
  for (const std::string& row :
       Rows("SELECT c.table_name || '|' || c.column_name || '|' || "
            "c.data_type || '|' || c.is_nullable || '|' || (k.column_name "
            "IS NOT NULL) FROM information_schema.columns c LEFT JOIN "
            "(SELECT kcu.table_name, kcu.column_name FROM "
            "information_schema.table_constraints tc JOIN "
            "information_schema.key_column_usage kcu USING (constraint_schema, "
            "constraint_name) WHERE tc.constraint_type = 'PRIMARY KEY' AND "
            "tc.table_schema = 'backfill_state') k USING (table_name, "
            "column_name) WHERE c.table_schema = 'backfill_state' AND "
            "c.table_name <> 'schema_version' ORDER BY c.table_name, "
            "c.ordinal_position")) {
    std::vector<std::string> f = absl::StrSplit(row, '|');
    ASSERT_EQ(f.size(), 5u) << row;
    pg[f[0]].push_back(absl::StrCat(
        f[1], " ", f[2], f[3] == "NO" && f[4] == "false" ? " not null" : ""));
  }
  // The tables of a group of replicas sharing the database (the nodes,
  // their job leases and their requests, pg_lease_store.h) exist only here: a
  // SQLite state store belongs to one process, which is never part of a group.
  // They are left out of the comparison, and checked on their own.
  const Schema group = {
      {"job_leases",
       {"job_id text", "node text not null", "token bigint not null",
        "step text not null", "claimed_at bigint not null",
        "expires_at bigint not null"}},
      {"node_requests",
       {"id bigint", "node text not null", "job_id text not null",
        "kind text not null", "body text not null",
        "created_at bigint not null", "taken_at bigint", "answered_at bigint",
        "code integer not null", "message text not null"}},
      {"nodes",
       {"name text", "address text not null", "version text not null",
        "started_at bigint not null", "heartbeat_at bigint not null",
        "draining boolean not null"}}};
  for (const auto& [table, columns] : group) {
    ASSERT_EQ(pg.count(table), 1u) << table << " is missing on PostgreSQL";
    EXPECT_EQ(pg.at(table), columns) << table;
    pg.erase(table);
  }
  Schema sqlite = SqliteSchema();
  // Every table of state.db (the 17 of its latest version), column by
  // column.
  EXPECT_EQ(sqlite.size(), 17u);
  // The count of tasks is kept per job and state here, per state in
  // state.db: replicas checkpointing different jobs at once must not wait
  // for each other on one row per state; state.db has one writer.
  ASSERT_EQ(pg.count("task_state_counts"), 1u);
  EXPECT_EQ(pg.at("task_state_counts"),
            (std::vector<std::string>{"job_id text", "state text",
                                      "n bigint not null"}));
  EXPECT_EQ(sqlite.at("task_state_counts"),
            (std::vector<std::string>{"state text", "n bigint not null"}));
  pg.erase("task_state_counts");
  sqlite.erase("task_state_counts");
  EXPECT_EQ(sqlite.at("jobs").size(), 28u);
  EXPECT_EQ(pg, sqlite);
  EXPECT_EQ(Rows("SELECT value FROM backfill_state.counters WHERE name = "
                 "'job'"),
            std::vector<std::string>{"0"});
  std::vector<std::string> id =
      Rows("SELECT value FROM backfill_state.meta WHERE key = 'store_id'");
  ASSERT_EQ(id.size(), 1u);
  EXPECT_EQ(id[0].size(), 32u) << id[0];
}

TEST_F(PgStateSchemaTest, ReplicasStartingAtOnceMigrateItOnce) {
  constexpr int kReplicas = 6;
  std::vector<std::unique_ptr<PgConnection>> conns;
  for (int i = 0; i < kReplicas; ++i) conns.push_back(Connect());
  std::vector<absl::Status> results(kReplicas);
  std::vector<std::thread> threads;
  for (int i = 0; i < kReplicas; ++i) {
    threads.emplace_back(
        [&, i] { results[i] = MigrateStateSchema(conns[i].get()); });
  }
  for (std::thread& t : threads) t.join();
  for (const absl::Status& s : results) EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(*ReadStateSchemaVersion(conn_.get()), StateSchemaVersion());
  // One store, one identity, one counter.
  EXPECT_EQ(Rows("SELECT COUNT(*) FROM backfill_state.meta"),
            std::vector<std::string>{"2"});
  EXPECT_EQ(Rows("SELECT COUNT(*) FROM backfill_state.counters"),
            std::vector<std::string>{"1"});
  // Again: nothing to do.
  const std::vector<std::string> id =
      Rows("SELECT value FROM backfill_state.meta WHERE key = 'store_id'");
  ASSERT_TRUE(MigrateStateSchema(conn_.get()).ok());
  EXPECT_EQ(Rows("SELECT value FROM backfill_state.meta WHERE key = "
                 "'store_id'"),
            id);
}

TEST_F(PgStateSchemaTest, ADatabaseOfVersionOneGetsTheTablesOfAGroup) {
  // A database as version 1 left it, holding a job.
  ASSERT_TRUE(MigrateStateSchemaTo(conn_.get(), 1).ok());
  ASSERT_GE(StateSchemaVersion(), 2);
  ASSERT_TRUE(conn_
                  ->ExecScript("INSERT INTO backfill_state.jobs (id, seq, "
                               "state, dataset) VALUES ('bf-1', 1, "
                               "'RUNNING', 'd');"
                               "INSERT INTO backfill_state.tasks (job_id, "
                               "dataset, \"partition\", ordinal, state) "
                               "VALUES ('bf-1', 'd', 'p1', 0, 'STAGED'), "
                               "('bf-1', 'd', 'p2', 1, 'PENDING');")
                  .ok());
  EXPECT_EQ(*ReadStateSchemaVersion(conn_.get()), 1);
  EXPECT_EQ(Rows("SELECT to_regclass('backfill_state.job_leases') IS NULL"),
            std::vector<std::string>{"t"});

  ASSERT_TRUE(MigrateStateSchema(conn_.get()).ok());
  EXPECT_EQ(*ReadStateSchemaVersion(conn_.get()), StateSchemaVersion());
  EXPECT_EQ(Rows("SELECT id, state FROM backfill_state.jobs"),
            std::vector<std::string>{"bf-1|RUNNING"});
  // The new tables, empty and usable.
  ASSERT_TRUE(conn_
                  ->Exec("INSERT INTO backfill_state.job_leases (job_id, "
                         "node, token, claimed_at, expires_at) VALUES "
                         "('bf-1', 'node-a', 1, 10, 20)")
                  .ok());
  ASSERT_TRUE(conn_
                  ->Exec("INSERT INTO backfill_state.nodes (name, address, "
                         "version, started_at, heartbeat_at) VALUES "
                         "('node-a', 'h:1', 'v', 1, 2)")
                  .ok());
  EXPECT_EQ(Rows("SELECT job_id, node, token, step FROM "
                 "backfill_state.job_leases"),
            std::vector<std::string>{"bf-1|node-a|1|"});
  EXPECT_EQ(Rows("SELECT name, draining FROM backfill_state.nodes"),
            std::vector<std::string>{"node-a|f"});
  // The counts of tasks per state, kept by version 1's triggers, go on
  // from where they were under version 2's.
  ASSERT_TRUE(conn_
                  ->ExecScript("UPDATE backfill_state.tasks SET state = "
                               "'STAGED' WHERE \"partition\" = 'p2';"
                               "INSERT INTO backfill_state.tasks (job_id, "
                               "dataset, \"partition\", ordinal, state) "
                               "VALUES ('bf-1', 'd', 'p3', 2, 'FAILED');"
                               "DELETE FROM backfill_state.tasks WHERE "
                               "\"partition\" = 'p3';")
                  .ok());
  EXPECT_EQ(Rows("SELECT state, n FROM backfill_state.task_state_counts "
                 "WHERE n <> 0 ORDER BY 1"),
            std::vector<std::string>{"STAGED|2"});
}

TEST_F(PgStateSchemaTest,
       TheTaskCountsOfTwoJobsAreKeptApartAndTheirWritesNeverWait) {
  ASSERT_TRUE(MigrateStateSchema(conn_.get()).ok());
  ASSERT_TRUE(
      conn_
          ->ExecScript("SET search_path TO backfill_state;"
                       "INSERT INTO jobs (id, seq, state, dataset) VALUES "
                       "('bf-1', 1, 'RUNNING', 'd'), ('bf-2', 2, 'RUNNING', "
                       "'d');"
                       "INSERT INTO tasks (job_id, dataset, \"partition\", "
                       "ordinal, state) VALUES ('bf-1', 'd', 'a', 0, "
                       "'PENDING'), ('bf-1', 'd', 'b', 1, 'PENDING'), "
                       "('bf-2', 'd', 'a', 0, 'PENDING');"
                       "RESET search_path;")
          .ok());
  // One job's checkpoint holds its transaction open; another job's
  // checkpoint, on another connection, must not wait for it (it did while
  // the counts were one row per state).
  std::unique_ptr<PgConnection> other = Connect();
  ASSERT_NE(other, nullptr);
  ASSERT_TRUE(conn_
                  ->ExecScript("BEGIN; UPDATE backfill_state.tasks SET state "
                               "= 'STAGED' WHERE job_id = 'bf-1' AND "
                               "\"partition\" = 'a';")
                  .ok());
  auto not_waiting = other->ExecScript(
      "SET lock_timeout = '5s'; UPDATE backfill_state.tasks SET state = "
      "'STAGED' WHERE job_id = 'bf-2';");
  EXPECT_TRUE(not_waiting.ok()) << not_waiting;
  ASSERT_TRUE(conn_->ExecScript("COMMIT").ok());
  EXPECT_EQ(
      Rows("SELECT job_id, state, n FROM backfill_state.task_state_counts "
           "WHERE n <> 0 ORDER BY 1, 2"),
      (std::vector<std::string>{"bf-1|PENDING|1", "bf-1|STAGED|1",
                                "bf-2|STAGED|1"}));
  // A job's tasks deleted take its counts along.
  ASSERT_TRUE(
      conn_->Exec("DELETE FROM backfill_state.tasks WHERE job_id = 'bf-1'")
          .ok());
  EXPECT_EQ(Rows("SELECT COUNT(*) FROM backfill_state.task_state_counts "
                 "WHERE job_id = 'bf-1'"),
            (std::vector<std::string>{"0"}));
  EXPECT_EQ(
      Rows("SELECT job_id, state, n FROM backfill_state.task_state_counts "
           "WHERE n <> 0 ORDER BY 1, 2"),
      (std::vector<std::string>{"bf-2|STAGED|1"}));
}

TEST_F(PgStateSchemaTest, ANewerSchemaIsRefusedAndLeftAlone) {
  ASSERT_TRUE(MigrateStateSchema(conn_.get()).ok());
  const int newer = StateSchemaVersion() + 3;
  ASSERT_TRUE(
      conn_
          ->Exec(absl::StrCat(
              "UPDATE backfill_state.schema_version SET version = ", newer))
          .ok());
  absl::Status refused = MigrateStateSchema(conn_.get());
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(
      refused.message(),
      HasSubstr(absl::StrCat(
          "schema version ", newer, " is newer than this backfilld knows (",
          StateSchemaVersion(), "); run a newer backfilld")));
  EXPECT_EQ(*ReadStateSchemaVersion(conn_.get()), newer);
}

TEST_F(PgStateSchemaTest, TheDatabaseKeepsTheAuditLogAndTheTaskCounts) {
  ASSERT_TRUE(MigrateStateSchema(conn_.get()).ok());
  ASSERT_TRUE(
      conn_
          ->ExecScript("SET search_path TO backfill_state;"
                       "INSERT INTO jobs (id, seq, state, dataset) VALUES "
                       "('bf-1', 1, 'RUNNING', 'd');"
                       "INSERT INTO tasks (job_id, dataset, \"partition\", "
                       "ordinal, state) VALUES ('bf-1', 'd', 'a', 0, "
                       "'PENDING'), ('bf-1', 'd', 'b', 1, 'PENDING'), "
                       "('bf-1', 'd', 'c', 2, 'PENDING');"
                       "UPDATE tasks SET state = 'STAGED' WHERE \"partition\" "
                       "<> 'c';"
                       "UPDATE tasks SET attempts = 2;"
                       "DELETE FROM tasks WHERE \"partition\" = 'a';"
                       "INSERT INTO audit_events (job_id, from_state, "
                       "to_state) VALUES ('bf-1', '', 'QUEUED');"
                       "INSERT INTO policy_audit_events (subject, from_state, "
                       "to_state) VALUES ('replay_policy:d', 'RUNNING', "
                       "'PAUSED');"
                       "INSERT INTO audit_events (job_id, from_state, "
                       "to_state) VALUES ('bf-1', 'QUEUED', 'RUNNING');")
          .ok());
  EXPECT_EQ(Rows("SELECT state, n FROM backfill_state.task_state_counts "
                 "WHERE n <> 0 ORDER BY state"),
            (std::vector<std::string>{"PENDING|1", "STAGED|1"}));
  // One numbering for the events of jobs and of policies.
  EXPECT_EQ(Rows("SELECT seq FROM backfill_state.audit_events UNION ALL "
                 "SELECT seq FROM backfill_state.policy_audit_events ORDER "
                 "BY 1"),
            (std::vector<std::string>{"1", "2", "3"}));
  for (const char* write :
       {// The database must refuse these:
        // append-only-check: allowed
        "UPDATE backfill_state.audit_events SET message = 'x'",
        // append-only-check: allowed
        "DELETE FROM backfill_state.audit_events",
        "TRUNCATE backfill_state.audit_events CASCADE",
        "UPDATE backfill_state.policy_audit_events SET message = 'x'",
        "DELETE FROM backfill_state.policy_audit_events"}) {
    auto refused = conn_->Exec(write);
    EXPECT_FALSE(refused.ok()) << write;
    EXPECT_THAT(refused.status().message(), HasSubstr("is append-only"))
        << write;
  }
  EXPECT_EQ(Rows("SELECT COUNT(*) FROM backfill_state.audit_events"),
            std::vector<std::string>{"2"});
}

}  // namespace
}  // namespace storage_postgres_state_schema_test
}  // namespace backfill
