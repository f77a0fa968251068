// PgConnection against a real PostgreSQL server: bound values (NULLs and
// hostile text included), the status codes the job runner's retry rules
// depend on (each provoked for real: a timeout, a cancel from another
// thread, a terminated backend, a constraint, a syntax error), identifier
// quoting, and transactions that roll back on scope exit or when a
// statement in them failed.

#include <atomic>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/postgres/pg_connection.h"
#include "tests/testing/postgres_suite.h"
#include "tests/testing/postgres_test_server.h"

namespace backfill::postgres {
namespace storage_postgres_connection_test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Optional;

class PgConnectionTest : public backfill::testing::PostgresSuite {
 protected:
  void SetUp() override {
    ASSERT_NE(server_, nullptr);
    auto conn = PgConnection::Connect(server_->Dsn());
    ASSERT_TRUE(conn.ok()) << conn.status();
    conn_ = *std::move(conn);
    ASSERT_TRUE(conn_->Exec("DROP TABLE IF EXISTS t").ok());
    ASSERT_TRUE(
        conn_->Exec("CREATE TABLE t (day DATE PRIMARY KEY, n INTEGER, s TEXT)")
            .ok());
  }

  // The number of rows of t, read on a connection of its own.
  int64_t Count() {
    auto other = PgConnection::Connect(server_->Dsn());
    EXPECT_TRUE(other.ok()) << other.status();
    if (!other.ok()) return -1;
    auto r = (*other)->Exec("SELECT count(*) FROM t");
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? std::stoll(*r->rows[0][0]) : -1;
  }

  std::unique_ptr<PgConnection> conn_;
};

TEST_F(PgConnectionTest, BindsValuesNullsAndHostileTextAsData) {
  const std::string hostile = "x'); DROP TABLE t; --\n\"\\";
  auto inserted = conn_->Exec(
      "INSERT INTO t VALUES ($1, $2, $3), ($4, $5, $6)",
      {"2025-01-31", "7", hostile, "2025-02-01", std::nullopt, std::nullopt});
  ASSERT_TRUE(inserted.ok()) << inserted.status();
  EXPECT_EQ(inserted->affected, 2);
  EXPECT_EQ(inserted->command, "INSERT 0 2");

  auto read = conn_->Exec("SELECT day, n, s FROM t ORDER BY day");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_THAT(read->columns, ElementsAre("day", "n", "s"));
  ASSERT_EQ(read->rows.size(), 2u);
  EXPECT_THAT(read->rows[0],
              ElementsAre(Optional(std::string("2025-01-31")),
                          Optional(std::string("7")), Optional(hostile)));
  EXPECT_THAT(read->rows[1], ElementsAre(Optional(std::string("2025-02-01")),
                                         std::nullopt, std::nullopt));
  // Text bound where a date is expected is the server's error, not SQL.
  auto bad = conn_->Exec("SELECT n FROM t WHERE day = $1", {hostile});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("SQLSTATE 22007"));
  EXPECT_EQ(Count(), 2);
}

TEST_F(PgConnectionTest, TimestampsWithoutZoneAreUtc) {
  auto r = conn_->Exec(
      "SELECT current_setting('TimeZone'), "
      "(TIMESTAMPTZ '2025-03-30 01:30:00+00')::timestamp::text");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(r->rows[0],
              ElementsAre(Optional(std::string("UTC")),
                          Optional(std::string("2025-03-30 01:30:00"))));
}

TEST_F(PgConnectionTest, ErrorsCarryTheCodesTheRunnerRetriesBy) {
  ASSERT_TRUE(conn_->Exec("INSERT INTO t VALUES ('2025-01-01', 1, 'a')").ok());
  struct Case {
    const char* sql;
    absl::StatusCode code;
    const char* sqlstate;
  };
  for (const Case& c : {
           Case{"INSERT INTO t VALUES ('2025-01-01', 2, 'b')",
                absl::StatusCode::kFailedPrecondition, "23505"},
           Case{"SELEC 1", absl::StatusCode::kInvalidArgument, "42601"},
           Case{"SELECT * FROM no_such_table",
                absl::StatusCode::kInvalidArgument, "42P01"},
           Case{"SELECT 1 / 0", absl::StatusCode::kInvalidArgument, "22012"},
       }) {
    SCOPED_TRACE(c.sql);
    auto r = conn_->Exec(c.sql);
    EXPECT_EQ(r.status().code(), c.code) << r.status();
    EXPECT_THAT(r.status().message(),
                HasSubstr(absl::StrCat("SQLSTATE ", c.sqlstate)));
    EXPECT_THAT(r.status().message(), HasSubstr(c.sql));
  }
  // The connection is still good after each of them.
  EXPECT_TRUE(conn_->Healthy());
  EXPECT_EQ(Count(), 1);
}

TEST_F(PgConnectionTest, SqlStatesMapToCodes) {
  EXPECT_EQ(StatusFromSqlState("08006", "x").code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(StatusFromSqlState("57P01", "x").code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(StatusFromSqlState("58030", "x").code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(StatusFromSqlState("53100", "x").code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(StatusFromSqlState("40001", "x").code(),
            absl::StatusCode::kAborted);
  EXPECT_EQ(StatusFromSqlState("40P01", "x").code(),
            absl::StatusCode::kAborted);
  EXPECT_EQ(StatusFromSqlState("57014", "x").code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(StatusFromSqlState("57014", "x", /*cancelled=*/true).code(),
            absl::StatusCode::kCancelled);
  EXPECT_EQ(StatusFromSqlState("25006", "x").code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(StatusFromSqlState("XX001", "x").code(),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(StatusFromSqlState("XX000", "x").code(),
            absl::StatusCode::kInternal);
}

TEST_F(PgConnectionTest, AStatementTimeoutStopsALongStatement) {
  ASSERT_TRUE(conn_->SetStatementTimeout(absl::Milliseconds(200)).ok());
  const absl::Time start = absl::Now();
  auto r = conn_->Exec("SELECT pg_sleep(30)");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded)
      << r.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(20));
  ASSERT_TRUE(conn_->SetStatementTimeout(absl::ZeroDuration()).ok());
  EXPECT_TRUE(conn_->Exec("SELECT pg_sleep(0.3)").ok());
}

TEST_F(PgConnectionTest, CancelFromAnotherThreadStopsTheStatement) {
  std::atomic<bool> done{false};
  absl::Status status;
  std::thread runner([&] {
    status = conn_->Exec("SELECT pg_sleep(30)").status();
    done = true;
  });
  // Cancel until the statement is gone: a cancel that arrives before the
  // statement started is lost, as with any client.
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (!done && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(100));
    if (!done) {
      EXPECT_TRUE(conn_->Cancel().ok());
    }
  }
  runner.join();
  EXPECT_EQ(status.code(), absl::StatusCode::kCancelled) << status;
  // The next statement is not taken for a cancelled one.
  EXPECT_TRUE(conn_->Exec("SELECT 1").ok());
}

TEST_F(PgConnectionTest, ALostConnectionIsUnavailable) {
  auto pid = conn_->Exec("SELECT pg_backend_pid()::text");
  ASSERT_TRUE(pid.ok()) << pid.status();
  auto killer = PgConnection::Connect(server_->Dsn());
  ASSERT_TRUE(killer.ok()) << killer.status();
  ASSERT_TRUE(
      (*killer)
          ->Exec("SELECT pg_terminate_backend($1::int)", {*pid->rows[0][0]})
          .ok());
  absl::Status s;
  // The backend may take a moment to go.
  for (int i = 0; i < 50 && s.ok(); ++i) {
    s = conn_->Exec("SELECT 1").status();
    if (s.ok()) absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_FALSE(conn_->Healthy());
}

TEST_F(PgConnectionTest, ConnectingWhereNoServerListensIsUnavailable) {
  auto conn = PgConnection::Connect(
      "host=127.0.0.1 port=1 dbname=postgres user=postgres", absl::Seconds(2));
  EXPECT_EQ(conn.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(conn.status().message(),
              HasSubstr("cannot connect to PostgreSQL"));
}

// A server of its own: the test edits its pg_hba.conf.
class PgConnectionServerTest : public PgConnectionTest {
 protected:
  static void SetUpTestSuite() { StartOwnServer(); }
};

// What retrying cannot fix is not UNAVAILABLE: the runner would retry it as
// if the server were only away.
TEST_F(PgConnectionServerTest, AConnectionThatCanNeverWorkIsNotUnavailable) {
  auto no_db = PgConnection::Connect(server_->Dsn("no_such_database"));
  EXPECT_EQ(no_db.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(no_db.status().message(), HasSubstr("no_such_database"));
  EXPECT_THAT(no_db.status().message(), HasSubstr("check the warehouse's dsn"));
  auto no_role =
      PgConnection::Connect(absl::StrCat(server_->Dsn(), " user=no_such_role"));
  EXPECT_EQ(no_role.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(no_role.status().message(), HasSubstr("no_such_role"));
  auto malformed = PgConnection::Connect("host=localhost nonsense_option=1");
  EXPECT_EQ(malformed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(malformed.status().message(), HasSubstr("nonsense_option"));
  // A password refused: a role that must log in with one (the test server
  // trusts every other connection).
  ASSERT_TRUE(conn_
                  ->Exec("DO $$ BEGIN CREATE ROLE locked LOGIN PASSWORD "
                         "'right'; EXCEPTION WHEN duplicate_object THEN NULL; "
                         "END $$")
                  .ok());
  const std::string hba = server_->dir() + "/data/pg_hba.conf";
  std::string rules;
  {
    std::ifstream in(hba);
    ASSERT_TRUE(in.good()) << hba;
    rules.assign(std::istreambuf_iterator<char>(in), {});
  }
  {
    std::ofstream out(hba, std::ios::trunc);
    out << "host all locked 127.0.0.1/32 scram-sha-256\n" << rules;
    ASSERT_TRUE(out.good());
  }
  ASSERT_TRUE(conn_->Exec("SELECT pg_reload_conf()").ok());
  const std::string dsn = absl::StrCat(server_->Dsn(), " user=locked");
  absl::Status refused;
  for (int i = 0; i < 50; ++i) {  // the server reloads in the background
    refused = PgConnection::Connect(absl::StrCat(dsn, " password=wrong-secret"))
                  .status();
    if (!refused.ok()) break;
    absl::SleepFor(absl::Milliseconds(100));
  }
  EXPECT_EQ(refused.code(), absl::StatusCode::kPermissionDenied) << refused;
  EXPECT_THAT(refused.message(), HasSubstr("PGPASSWORD or ~/.pgpass"));
  EXPECT_THAT(refused.message(), ::testing::Not(HasSubstr("wrong-secret")));
  // The right one gets in.
  auto allowed = PgConnection::Connect(absl::StrCat(dsn, " password=right"));
  EXPECT_TRUE(allowed.ok()) << allowed.status();
}

TEST_F(PgConnectionTest, QuotedIdentifiersNameExactlyTheirTable) {
  for (const std::string name :
       {"Mixed Case", "with\"quote", "semi; DROP TABLE t; --", "ümlaut"}) {
    SCOPED_TRACE(name);
    auto quoted = conn_->QuoteIdentifier(name);
    ASSERT_TRUE(quoted.ok()) << quoted.status();
    ASSERT_TRUE(
        conn_->Exec(absl::StrCat("CREATE TABLE ", *quoted, " (x INTEGER)"))
            .ok());
    auto found = conn_->Exec(
        "SELECT count(*) FROM pg_tables WHERE tablename = $1", {name});
    ASSERT_TRUE(found.ok()) << found.status();
    EXPECT_THAT(found->rows[0][0], Optional(std::string("1")));
    ASSERT_TRUE(conn_->Exec(absl::StrCat("DROP TABLE ", *quoted)).ok());
  }
  EXPECT_EQ(Count(), 0);  // t survived the hostile name
  EXPECT_EQ(conn_->QuoteIdentifier("").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(conn_->QuoteIdentifier(std::string("a\0b", 3)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(PgConnectionTest, ATransactionRollsBackUnlessCommitted) {
  {
    PgTransaction txn(conn_.get());
    ASSERT_TRUE(txn.Begin().ok());
    ASSERT_TRUE(
        conn_->Exec("INSERT INTO t VALUES ('2025-01-01', 1, 'a')").ok());
    EXPECT_EQ(Count(), 0);  // not visible to others before COMMIT
  }
  EXPECT_EQ(Count(), 0);
  {
    PgTransaction txn(conn_.get());
    ASSERT_TRUE(txn.Begin("ISOLATION LEVEL REPEATABLE READ").ok());
    ASSERT_TRUE(
        conn_->Exec("INSERT INTO t VALUES ('2025-01-01', 1, 'a')").ok());
    ASSERT_TRUE(txn.Commit().ok());
  }
  EXPECT_EQ(Count(), 1);
}

TEST_F(PgConnectionTest, ACommitAfterAFailedStatementIsAbortedNotSuccess) {
  PgTransaction txn(conn_.get());
  ASSERT_TRUE(txn.Begin().ok());
  ASSERT_TRUE(conn_->Exec("INSERT INTO t VALUES ('2025-01-01', 1, 'a')").ok());
  EXPECT_FALSE(conn_->Exec("INSERT INTO t VALUES ('2025-01-01', 2, 'b')").ok());
  // PostgreSQL answers this COMMIT with ROLLBACK, and no error.
  absl::Status committed = txn.Commit();
  EXPECT_EQ(committed.code(), absl::StatusCode::kAborted) << committed;
  EXPECT_EQ(Count(), 0);
  EXPECT_TRUE(conn_->Exec("SELECT 1").ok());  // usable again
}

TEST_F(PgConnectionTest, AReadOnlyTransactionRefusesWrites) {
  PgTransaction txn(conn_.get());
  ASSERT_TRUE(txn.Begin("READ ONLY").ok());
  auto r = conn_->Exec("INSERT INTO t VALUES ('2025-01-01', 1, 'a')");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("SQLSTATE 25006"));
}

}  // namespace
}  // namespace storage_postgres_connection_test
}  // namespace backfill::postgres
