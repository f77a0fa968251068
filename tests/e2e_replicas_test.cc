// End-to-end: three replicas of backfilld sharing their state in
// PostgreSQL (--state-dsn, a database of its own) and publishing into a
// PostgreSQL warehouse (another database), each a real process on its own
// data dir and port, with leases of 2 s.
//
//   - A job submitted on one replica is watched on another; the replica
//     that runs it is killed (SIGKILL) in the middle of its partitions.
//     Another replica takes the job over from its checkpoints, the watch
//     ends SUCCEEDED, and the published rows equal plain SQL over the raw
//     tables, with one lineage record per partition.
//   - Twenty submits of one idempotency key, at once, spread over the three
//     replicas, create one job, and every submit answers with it.
//   - Decisions on a job (pause, resume, cancel) asked of replicas that do
//     not run it are taken by the one that does, and answered as it
//     answers.
//   - A rolling restart: the replica that runs a job gets SIGTERM. It
//     drains and hands the lease back (no takeover of an expired lease),
//     another replica carries the job on to SUCCEEDED, and a client whose
//     submit the draining replica refused sends it again, with its
//     idempotency key, to another replica: one job, no error.
//   - One replica whose state store's server restarts in the middle of a
//     job: its writes fail (UNAVAILABLE), are retried, and the job ends
//     SUCCEEDED as plain SQL says, without a restart of the daemon.
//
// Everything is checked with libpq and plain SQL, never through backfilld.

#include <libpq-fe.h>

#include <csignal>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/e2e_support.h"
#include "tests/testing/e2e_warehouses.h"
#include "tests/testing/postgres_test_server.h"
#include "tests/testing/revenue_pipeline.h"

namespace backfill {
namespace e2e_replicas_test {
namespace {

using namespace ::backfill::e2e;  // NOLINT: test support
using std::chrono::seconds;

class ReplicasTest : public E2eTest {
 protected:
  void SetUp() override {
    E2eTest::SetUp();
    ASSERT_NO_FATAL_FAILURE(WriteWarehouse(warehouse_, 120, 6));
    // Databases of their own, named after the test (folded to lower case,
    // as PostgreSQL folds unquoted names).
    const std::string test =
        absl::AsciiStrToLower(std::string(::testing::UnitTest::GetInstance()
                                              ->current_test_info()
                                              ->name()))
            .substr(0, 24);
    ASSERT_NO_FATAL_FAILURE(wh_.Open(warehouse_, absl::StrCat("wh_", test)));
    absl::StatusOr<std::string> state =
        wh_.server()->CreateDatabase(absl::StrCat("state_", test));
    ASSERT_TRUE(state.ok()) << state.status();
    state_dsn_ = wh_.server()->Dsn(*state);
    state_ = PQconnectdb(state_dsn_.c_str());
    ASSERT_EQ(PQstatus(state_), CONNECTION_OK) << PQerrorMessage(state_);
    // A partition takes a few tens of milliseconds (an uncorrelated count
    // computed once per statement), so that a job of ninety days is still
    // running when its replica is killed.
    const std::string spin =
        "        AND (WITH RECURSIVE spin(n) AS (SELECT 1 UNION ALL\n"
        "             SELECT n + 1 FROM spin WHERE n < 150000)\n"
        "             SELECT COUNT(*) FROM spin) > 0\n";
    WriteFile(
        pipelines_dir_ + "/revenue.yaml",
        absl::StrCat(wh_.Yaml(), wh_.Adapt(fixtures::RevenuePipelineYaml(
                                     spin, fixtures::MonthlyRevenueYaml()))));
    for (int i = 1; i <= 3; ++i) {
      const std::string dir = absl::StrCat(root_, "/replica-", i);
      Daemon& d = NewDaemonIn(dir, pipelines_dir_, 2);
      d.set_extra_args({"--state-dsn", state_dsn_, "--node-name",
                        absl::StrCat("r", i), "--lease-seconds", "2"});
      replicas_.push_back(&d);
    }
    for (Daemon* d : replicas_) ASSERT_TRUE(d->Start());
  }

  void TearDown() override {
    if (state_ != nullptr) PQfinish(state_);
    E2eTest::TearDown();
  }

  // Rows of `sql` on the state store's database.
  Rows State(const std::string& sql) { return PgRows(state_, sql); }
  int64_t StateCount(const std::string& sql) {
    const Rows rows = State(sql);
    int64_t n = -1;
    if (rows.size() == 1 && rows[0].size() == 1) {
      EXPECT_TRUE(absl::SimpleAtoi(rows[0][0], &n)) << rows[0][0];
    }
    return n;
  }
  // The replica (index into replicas_) holding the job's lease, waiting
  // for one; -1 if none within `timeout`.
  int Holder(const std::string& id, absl::Duration timeout) {
    const absl::Time deadline = absl::Now() + timeout;
    while (absl::Now() < deadline) {
      const Rows rows = State(absl::StrCat(
          "SELECT node FROM backfill_state.job_leases WHERE job_id = '", id,
          "' AND node <> ''"));
      if (rows.size() == 1) {
        for (size_t i = 0; i < replicas_.size(); ++i) {
          if (rows[0][0] == absl::StrCat("r", i + 1))
            return static_cast<int>(i);
        }
      }
      absl::SleepFor(absl::Milliseconds(50));
    }
    return -1;
  }

  PostgresTestWarehouse wh_;
  std::string state_dsn_;
  PGconn* state_ = nullptr;
  std::vector<Daemon*> replicas_;
};

TEST_F(ReplicasTest, AKilledReplicasJobIsTakenOverAndEndsAsPlainSqlSays) {
  RunResult submit = replicas_[0]->CtlJson(
      {"submit", "daily_revenue", "--from", "2025-01-01", "--to", "2025-04-01",
       "--reason", "late orders, replayed over replicas", "--idempotency-key",
       "failover-1"});
  ASSERT_EQ(submit.exit_code, 0) << submit;
  const std::string id = JsonString(submit.out, "id");
  ASSERT_FALSE(id.empty()) << submit.out;

  const int executor = Holder(id, absl::Seconds(30));
  ASSERT_GE(executor, 0) << "no replica claimed " << id;
  // Watched on a replica that does not run it.
  Daemon* watcher = replicas_[(executor + 1) % 3];
  RunResult watch;
  std::thread watching([&] {
    watch = watcher->CtlJson({"watch", id}, seconds(300));
  });

  // Killed once some partitions are checkpointed, well before the end.
  const absl::Time deadline = absl::Now() + absl::Seconds(120);
  int64_t staged = 0;
  while (absl::Now() < deadline && staged < 10) {
    staged = StateCount(absl::StrCat(
        "SELECT COUNT(*) FROM backfill_state.tasks WHERE job_id = '", id,
        "' AND state = 'STAGED'"));
    absl::SleepFor(absl::Milliseconds(20));
  }
  ASSERT_GE(staged, 10);
  ASSERT_LT(staged, 80) << "the job ran too fast to be interrupted";
  replicas_[executor]->Kill();

  const std::string survivor_json =
      WaitTerminal(*replicas_[(executor + 2) % 3], id, seconds(240));
  EXPECT_EQ(JsonString(survivor_json, "state"), "BACKFILL_STATE_SUCCEEDED")
      << survivor_json;
  watching.join();
  EXPECT_EQ(watch.exit_code, 0) << watch;
  EXPECT_NE(watch.out.find("SUCCEEDED"), std::string::npos) << watch.out;

  // Taken over: the lease changed hands (a larger token), to a survivor.
  const Rows lease = State(absl::StrCat(
      "SELECT token FROM backfill_state.job_leases WHERE job_id = '", id, "'"));
  ASSERT_EQ(lease.size(), 1u);
  int64_t token = 0;
  ASSERT_TRUE(absl::SimpleAtoi(lease[0][0], &token));
  EXPECT_GE(token, 2);
  const std::string taken =
      absl::StrCat("job ", id, " taken over from replica r", executor + 1);
  EXPECT_TRUE(
      absl::StrContains(ReadFile(replicas_[(executor + 1) % 3]->log()),
                        taken) ||
      absl::StrContains(ReadFile(replicas_[(executor + 2) % 3]->log()), taken))
      << "no survivor logged \"" << taken << "\"";
  // The group as operators see it: the killed replica missing, the others
  // live; the survivors counted one takeover between them.
  RunResult nodes = replicas_[(executor + 1) % 3]->Ctl({"nodes"});
  ASSERT_EQ(nodes.exit_code, 0) << nodes;
  for (int i = 0; i < 3; ++i) {
    const std::string name = absl::StrCat("r", i + 1);
    bool found = false;
    for (absl::string_view line : absl::StrSplit(nodes.out, '\n')) {
      if (!absl::StartsWith(line, name + " ")) continue;
      found = true;
      EXPECT_TRUE(absl::StrContains(line, i == executor ? "missing" : "live"))
          << line;
    }
    EXPECT_TRUE(found) << name << " not listed:\n" << nodes.out;
  }
  double takeovers = 0;
  for (int i = 1; i <= 2; ++i) {
    const std::string metrics =
        HttpGet(replicas_[(executor + i) % 3]->metrics_port(), "/metrics");
    for (absl::string_view line : absl::StrSplit(metrics, '\n')) {
      if (absl::StartsWith(line, "backfill_lease_takeovers_total ")) {
        double v = 0;
        EXPECT_TRUE(absl::SimpleAtod(line.substr(line.find(' ') + 1), &v));
        takeovers += v;
      }
    }
  }
  EXPECT_EQ(takeovers, 1);
  EXPECT_EQ(
      StateCount(absl::StrCat(
          "SELECT COUNT(*) FROM backfill_state.audit_events WHERE job_id = "
          "'",
          id, "' AND to_state = 'SUCCEEDED'")),
      1);

  // What was published is what plain SQL computes, every day of it.
  EXPECT_EQ(wh_.Published("2025-01-01", "2025-04-01"),
            wh_.Expected("2025-01-01", "2025-04-01"));
  EXPECT_GT(wh_.Published("2025-01-01", "2025-04-01").size(), 90u);
  // One publish record per partition: 90 days and their 3 months.
  EXPECT_EQ(StateCount(absl::StrCat(
                "SELECT COUNT(*) FROM backfill_state.lineage WHERE job_id = '",
                id, "'")),
            93);
  EXPECT_EQ(StateCount(absl::StrCat(
                "SELECT COUNT(*) FROM (SELECT dataset, \"partition\" FROM "
                "backfill_state.lineage WHERE job_id = '",
                id, "' GROUP BY 1, 2 HAVING COUNT(*) > 1) d")),
            0);
}

TEST_F(ReplicasTest, TwentySubmitsOfOneKeyOverThreeReplicasMakeOneJob) {
  std::vector<RunResult> results(20);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < results.size(); ++i) {
    threads.emplace_back([&, i] {
      results[i] = replicas_[i % 3]->CtlJson(
          {"submit", "daily_revenue", "--from", "2025-02-01", "--to",
           "2025-02-08", "--reason", "one key, many callers",
           "--idempotency-key", "same-key-20"});
    });
  }
  for (std::thread& t : threads) t.join();
  std::string id;
  for (const RunResult& r : results) {
    ASSERT_EQ(r.exit_code, 0) << r;
    const std::string got = JsonString(r.out, "id");
    if (id.empty()) id = got;
    EXPECT_EQ(got, id) << r.out;
  }
  EXPECT_EQ(StateCount("SELECT COUNT(*) FROM backfill_state.jobs"), 1);
  const std::string done = WaitTerminal(*replicas_[2], id, seconds(120));
  EXPECT_EQ(JsonString(done, "state"), "BACKFILL_STATE_SUCCEEDED") << done;
  EXPECT_EQ(wh_.Published("2025-02-01", "2025-02-08"),
            wh_.Expected("2025-02-01", "2025-02-08"));
}

TEST_F(ReplicasTest, ARollingRestartHandsTheJobOnWithoutATakeover) {
  RunResult submit = replicas_[1]->CtlJson(
      {"submit", "daily_revenue", "--from", "2025-01-01", "--to", "2025-04-01",
       "--reason", "rolling restart", "--idempotency-key", "rolling-1"});
  ASSERT_EQ(submit.exit_code, 0) << submit;
  const std::string id = JsonString(submit.out, "id");
  const int executor = Holder(id, absl::Seconds(30));
  ASSERT_GE(executor, 0);
  const absl::Time deadline = absl::Now() + absl::Seconds(120);
  while (absl::Now() < deadline &&
         StateCount(absl::StrCat(
             "SELECT COUNT(*) FROM backfill_state.tasks WHERE job_id = '", id,
             "' AND state = 'STAGED'")) < 10) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  replicas_[executor]->Signal(SIGTERM);
  // A client that submits meanwhile: the draining replica refuses it (or no
  // longer listens), and the same submit to another replica creates the
  // job once.
  RunResult refused = replicas_[executor]->CtlJson(
      {"submit", "daily_revenue", "--from", "2025-05-01", "--to", "2025-05-03",
       "--reason", "sent during a restart", "--idempotency-key", "during-1"},
      seconds(30));
  Daemon* other = replicas_[(executor + 1) % 3];
  RunResult again = other->CtlJson(
      {"submit", "daily_revenue", "--from", "2025-05-01", "--to", "2025-05-03",
       "--reason", "sent during a restart", "--idempotency-key", "during-1"});
  ASSERT_EQ(again.exit_code, 0) << again;
  const std::string during = JsonString(again.out, "id");
  if (refused.exit_code == 0) {
    EXPECT_EQ(JsonString(refused.out, "id"), during);
  }
  EXPECT_EQ(StateCount("SELECT COUNT(*) FROM backfill_state.jobs WHERE "
                       "idempotency_key = 'during-1'"),
            1);

  std::optional<int> code = replicas_[executor]->Wait(seconds(90));
  ASSERT_TRUE(code.has_value()) << "the replica still runs 90 s after SIGTERM";
  EXPECT_EQ(*code, 0);
  const std::string done = WaitTerminal(*other, id, seconds(240));
  EXPECT_EQ(JsonString(done, "state"), "BACKFILL_STATE_SUCCEEDED") << done;
  EXPECT_EQ(JsonString(WaitTerminal(*other, during, seconds(120)), "state"),
            "BACKFILL_STATE_SUCCEEDED");
  // Handed back, not taken over: no survivor logged a takeover of it.
  for (int i = 1; i <= 2; ++i) {
    EXPECT_FALSE(
        absl::StrContains(ReadFile(replicas_[(executor + i) % 3]->log()),
                          absl::StrCat("job ", id, " taken over")));
  }
  EXPECT_EQ(wh_.Published("2025-01-01", "2025-04-01"),
            wh_.Expected("2025-01-01", "2025-04-01"));
  EXPECT_EQ(StateCount(absl::StrCat(
                "SELECT COUNT(*) FROM backfill_state.lineage WHERE job_id = '",
                id, "'")),
            93);
}

TEST_F(ReplicasTest, AnyReplicaTakesADecisionOnAJobAnotherRuns) {
  RunResult submit = replicas_[0]->CtlJson(
      {"submit", "daily_revenue", "--from", "2025-01-01", "--to", "2025-04-01",
       "--reason", "decided elsewhere", "--idempotency-key", "decide-1"});
  ASSERT_EQ(submit.exit_code, 0) << submit;
  const std::string id = JsonString(submit.out, "id");
  const int executor = Holder(id, absl::Seconds(30));
  ASSERT_GE(executor, 0);
  Daemon* a = replicas_[(executor + 1) % 3];
  Daemon* b = replicas_[(executor + 2) % 3];
  auto state = [&] {
    return State(absl::StrCat("SELECT state FROM backfill_state.jobs WHERE id "
                              "= '",
                              id, "'"))
        .at(0)
        .at(0);
  };

  RunResult paused = a->Ctl({"pause", id, "--reason", "quarter close"});
  ASSERT_EQ(paused.exit_code, 0) << paused;
  EXPECT_EQ(state(), "PAUSED");
  // Still run by the same replica, which took the decision.
  EXPECT_EQ(Holder(id, absl::Seconds(5)), executor);

  RunResult resumed = b->Ctl({"resume", id, "--reason", "go on"});
  ASSERT_EQ(resumed.exit_code, 0) << resumed;
  EXPECT_NE(state(), "PAUSED");

  RunResult cancelled = a->Ctl({"cancel", id, "--reason", "not needed"});
  ASSERT_EQ(cancelled.exit_code, 0) << cancelled;
  const std::string done = WaitTerminal(*b, id, seconds(60));
  EXPECT_EQ(JsonString(done, "state"), "BACKFILL_STATE_CANCELLED") << done;
  // A refusal comes back as the replica that runs the job says it: a
  // cancelled job cannot be paused.
  RunResult refused = b->Ctl({"pause", id, "--reason", "too late"});
  EXPECT_NE(refused.exit_code, 0) << refused;
  EXPECT_THAT(refused.err, ::testing::HasSubstr("CANCELLED")) << refused;
  // The audit log names the decisions with their reasons.
  const Rows events = State(absl::StrCat(
      "SELECT to_state, message FROM backfill_state.audit_events WHERE job_id "
      "= '",
      id, "' ORDER BY seq"));
  std::string trail;
  for (const auto& e : events) absl::StrAppend(&trail, e[0], ": ", e[1], "\n");
  EXPECT_THAT(trail, ::testing::HasSubstr("quarter close"));
  EXPECT_THAT(trail, ::testing::HasSubstr("go on"));
  EXPECT_THAT(trail, ::testing::HasSubstr("not needed"));
}

// A server of its own, which the test restarts under the daemon.
class StateServerRestartTest : public E2eTest {};

TEST_F(StateServerRestartTest, AJobOutlivesARestartOfTheStateStoresServer) {
  ASSERT_NO_FATAL_FAILURE(WriteWarehouse(warehouse_, 120, 6));
  PostgresTestWarehouse wh;
  ASSERT_NO_FATAL_FAILURE(wh.Open(warehouse_, "wh", /*own_server=*/true));
  absl::StatusOr<std::string> state = wh.server()->CreateDatabase("state");
  ASSERT_TRUE(state.ok()) << state.status();
  const std::string spin =
      "        AND (WITH RECURSIVE spin(n) AS (SELECT 1 UNION ALL\n"
      "             SELECT n + 1 FROM spin WHERE n < 150000)\n"
      "             SELECT COUNT(*) FROM spin) > 0\n";
  WriteFile(
      pipelines_dir_ + "/revenue.yaml",
      absl::StrCat(wh.Yaml(), wh.Adapt(fixtures::RevenuePipelineYaml(
                                  spin, fixtures::MonthlyRevenueYaml()))));
  Daemon& daemon = NewDaemonIn(root_ + "/replica", pipelines_dir_, 2);
  daemon.set_extra_args({"--state-dsn", wh.server()->Dsn(*state), "--node-name",
                         "only", "--lease-seconds", "5"});
  ASSERT_TRUE(daemon.Start());
  RunResult submit = daemon.CtlJson(
      {"submit", "daily_revenue", "--from", "2025-01-01", "--to", "2025-04-01",
       "--reason", "through a restart", "--idempotency-key", "restart-1"});
  ASSERT_EQ(submit.exit_code, 0) << submit;
  const std::string id = JsonString(submit.out, "id");
  // Restarted once some partitions are checkpointed, well before the end.
  PGconn* state_conn = PQconnectdb(wh.server()->Dsn(*state).c_str());
  ASSERT_EQ(PQstatus(state_conn), CONNECTION_OK) << PQerrorMessage(state_conn);
  const std::string count =
      absl::StrCat("SELECT COUNT(*) FROM backfill_state.tasks WHERE job_id = '",
                   id, "' AND state = 'STAGED'");
  const absl::Time deadline = absl::Now() + absl::Seconds(120);
  int64_t staged = 0;
  while (absl::Now() < deadline && staged < 10) {
    PGresult* r = PQexec(state_conn, count.c_str());
    if (PQresultStatus(r) == PGRES_TUPLES_OK) {
      EXPECT_TRUE(absl::SimpleAtoi(PQgetvalue(r, 0, 0), &staged));
    }
    PQclear(r);
    absl::SleepFor(absl::Milliseconds(20));
  }
  PQfinish(state_conn);
  ASSERT_GE(staged, 10);
  ASSERT_LT(staged, 80) << "the job ran too fast to be interrupted";
  ASSERT_TRUE(wh.server()->Restart().ok());
  const std::string done = WaitTerminal(daemon, id, seconds(240));
  // The writes the restart broke failed UNAVAILABLE and were retried until
  // they succeeded, in the same process.
  const std::string log = ReadFile(daemon.log());
  EXPECT_TRUE(absl::StrContains(log, "write failing, retrying with backoff"))
      << log;
  EXPECT_TRUE(absl::StrContains(log, "UNAVAILABLE")) << log;
  EXPECT_TRUE(absl::StrContains(log, "writes work again")) << log;
  EXPECT_EQ(daemon.Wait(seconds(0)), std::nullopt) << "the daemon exited";
  EXPECT_EQ(JsonString(done, "state"), "BACKFILL_STATE_SUCCEEDED") << done;
  EXPECT_EQ(wh.Published("2025-01-01", "2025-04-01"),
            wh.Expected("2025-01-01", "2025-04-01"));
}

}  // namespace
}  // namespace e2e_replicas_test
}  // namespace backfill
