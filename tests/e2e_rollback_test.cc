// End-to-end tests of `backfillctl rollback` against the real daemon: a
// rollback restores byte-identical rows (day and hour grains, an initial
// load, a dataset with a dependent), is refused while a later job's
// publish is in force (naming it) unless --force may take it along, is
// idempotent, survives a crash between the warehouse commit and the state
// store's record, and the rollback copies are bounded by the retention
// policy. Every expectation is checked with plain SQL over the warehouse
// and state.db: full ordered dumps of the published tables (quote() of
// every column), lineage rows and the tables in sqlite_master.

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/e2e_pipelines.h"
#include "tests/testing/e2e_support.h"

namespace backfill {
namespace e2e_rollback_test {
namespace {

using namespace ::backfill::e2e;  // NOLINT: test support
using std::chrono::seconds;
using ::testing::HasSubstr;

// daily_revenue keeps 3 versions; hourly_amount is by hour.
const std::string kPipeline = OrdersToDayTotalsYaml(
    "    retention: {versions: 3}\n", R"yaml(  - name: events
    kind: source
    table: raw_events
    partition: {column: event_time, grain: hour}
  - name: hourly_amount
    kind: derived
    table: hourly_amount
    partition: {column: hr, grain: hour}
    upstream:
      - {dataset: events, mapping: identity}
    transform: |
      SELECT :partition AS hr, COUNT(*) AS events, TOTAL(amount) AS amount
      FROM raw_events
      WHERE event_time >= :partition_start AND event_time < :partition_end
    contract:
      columns: {hr: TEXT, events: INTEGER, amount: REAL}
      primary_key: [hr]
)yaml");

constexpr const char* kTables[] = {"daily_revenue", "day_totals",
                                   "hourly_amount"};

class RollbackTest : public E2eTest {
 protected:
  void SetUp() override {
    E2eTest::SetUp();
    Sqlite db(warehouse_);
    ASSERT_TRUE(db.error().empty()) << db.error();
    std::string sql =
        "BEGIN; CREATE TABLE raw_orders (order_id INTEGER PRIMARY KEY, "
        "order_date TEXT NOT NULL, region TEXT NOT NULL, amount REAL NOT "
        "NULL);"
        "CREATE TABLE raw_events (event_id INTEGER PRIMARY KEY, event_time "
        "TEXT NOT NULL, amount REAL NOT NULL);";
    for (int day = 1; day <= 10; ++day) {
      for (int i = 0; i < 6; ++i) {
        absl::StrAppend(&sql,
                        "INSERT INTO raw_orders (order_date, region, amount) "
                        "VALUES ('",
                        absl::StrFormat("2025-01-%02d", day), "', '",
                        i % 2 ? "north" : "south", "', ", day * 10 + i, ");");
      }
    }
    for (int hour = 0; hour < 12; ++hour) {
      for (int i = 0; i < 3; ++i) {
        absl::StrAppend(
            &sql,
            "INSERT INTO raw_events (event_time, amount) VALUES "
            "('",
            absl::StrFormat("2024-03-31 %02d:%02d:00", hour, i * 20), "', ",
            hour + i, ");");
      }
    }
    sql += "COMMIT;";
    ASSERT_TRUE(db.Exec(sql)) << db.error();
    WriteFile(pipelines_dir_ + "/rollback.yaml", kPipeline);
  }

  // Every published table, every row, every column as quote() text, in a
  // total order: "table|'2025-01-01'|'north'|30.0|3" lines. A table that
  // does not exist dumps as nothing.
  std::vector<std::string> Dump() {
    Sqlite db(warehouse_, /*read_only=*/true);
    std::vector<std::string> out;
    for (const char* table : kTables) {
      auto exists = db.Query(
          "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name "
          "= ?1",
          {table});
      EXPECT_TRUE(exists.has_value()) << db.error();
      if (!exists || (*exists)[0][0] == "0") continue;
      auto cols = db.Query(absl::StrCat("SELECT name FROM pragma_table_info('",
                                        table, "') ORDER BY cid"));
      EXPECT_TRUE(cols.has_value()) << db.error();
      std::vector<std::string> quoted, order;
      for (size_t i = 0; i < cols->size(); ++i) {
        quoted.push_back(absl::StrCat("quote(\"", (*cols)[i][0], "\")"));
        order.push_back(absl::StrCat(i + 1));
      }
      auto rows = db.Query(absl::StrCat("SELECT ", absl::StrJoin(quoted, ", "),
                                        " FROM \"", table, "\" ORDER BY ",
                                        absl::StrJoin(order, ", ")));
      EXPECT_TRUE(rows.has_value()) << db.error();
      for (const auto& r : rows.value_or(Rows{})) {
        out.push_back(absl::StrCat(table, "|", absl::StrJoin(r, "|")));
      }
    }
    return out;
  }

  // Names of the warehouse's rollback copies of `dataset`.
  std::vector<std::string> Copies(const std::string& dataset) {
    Sqlite db(warehouse_, /*read_only=*/true);
    auto rows = db.Query(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE "
        "'\\_bf\\_prev\\_%' ESCAPE '\\' AND name LIKE ?1 ESCAPE '\\' ORDER BY "
        "name",
        {absl::StrCat("%\\_", dataset)});
    EXPECT_TRUE(rows.has_value()) << db.error();
    std::vector<std::string> out;
    for (const auto& r : rows.value_or(Rows{})) out.push_back(r[0]);
    return out;
  }

  // state.db, read with plain SQL.
  Rows StateQuery(const std::string& sql,
                  const std::vector<std::string>& params = {}) {
    Sqlite db(data_dir_ + "/state.db", /*read_only=*/true);
    auto rows = db.Query(sql, params);
    EXPECT_TRUE(rows.has_value()) << db.error();
    return rows.value_or(Rows{});
  }

  void Change(const std::string& sql) {
    Sqlite db(warehouse_);
    ASSERT_TRUE(db.Exec(sql)) << db.error();
  }

  std::string Submit(Daemon& daemon, std::vector<std::string> scope,
                     const std::string& reason) {
    return SubmitSucceeded(daemon, std::move(scope), reason);
  }

  RunResult Rollback(Daemon& daemon, const std::string& job,
                     std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"rollback", job, "--reason",
                                     "bad data in " + job};
    args.insert(args.end(), extra.begin(), extra.end());
    return daemon.CtlJson(args, seconds(120));
  }

  std::string State(Daemon& daemon, const std::string& job) {
    RunResult r = daemon.CtlJson({"status", job});
    EXPECT_EQ(r.exit_code, 0) << r;
    return JsonString(r.out, "state");
  }

  // Rows per (dataset, partition) of the published tables, by plain SQL:
  // "daily_revenue/2025-01-02" -> rows.
  std::map<std::string, std::string> RowCounts() {
    Sqlite db(warehouse_, /*read_only=*/true);
    std::map<std::string, std::string> out;
    for (const char* table : {"daily_revenue", "day_totals"}) {
      auto rows = db.Query(
          absl::StrCat("SELECT day, COUNT(*) FROM ", table, " GROUP BY day"));
      for (const auto& r : rows.value_or(Rows{})) {
        out[absl::StrCat(table, "/", r[0])] = r[1];
      }
    }
    return out;
  }
};

TEST_F(RollbackTest, RestoresByteIdenticalRowsOnDaysWithDependents) {
  Daemon& daemon = NewDaemon();
  ASSERT_TRUE(daemon.Start());
  const std::string load = Submit(
      daemon, {"daily_revenue", "--from", "2025-01-01", "--to", "2025-01-04"},
      "initial load");
  const std::vector<std::string> before = Dump();
  ASSERT_EQ(before.size(), 3u * 2 + 3u);  // 2 regions a day, 1 total a day

  // New numbers on days 2 and 3; day 4 is loaded for the first time.
  ASSERT_NO_FATAL_FAILURE(Change(
      "UPDATE raw_orders SET amount = amount * 3 WHERE order_date IN "
      "('2025-01-02', '2025-01-03'); DELETE FROM raw_orders WHERE order_date "
      "= '2025-01-03' AND region = 'north'"));
  const std::string fix = Submit(
      daemon, {"daily_revenue", "--from", "2025-01-02", "--to", "2025-01-05"},
      "reprice");
  const std::vector<std::string> published = Dump();
  ASSERT_NE(published, before);
  ASSERT_EQ(Copies("daily_revenue").size(), 2u);

  RunResult r = Rollback(daemon, fix);
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_EQ(JsonString(r.out, "state"), "BACKFILL_STATE_ROLLED_BACK") << r;
  // The job's 3 days of both datasets; the rows put back: days 2 and 3
  // held 2 + 1 rows each before, day 4 none.
  EXPECT_EQ(JsonInt(r.out, "partitions_restored"), 6) << r.out;
  EXPECT_EQ(JsonInt(r.out, "rows_restored"), 6) << r.out;
  EXPECT_THAT(JsonString(r.out, "message"),
              HasSubstr("restored 6 partitions (6 rows) of 2 datasets"));
  EXPECT_EQ(Dump(), before);  // day 4 is empty again
  // Its copies served and are gone; the load's stay.
  EXPECT_EQ(Copies("daily_revenue"),
            std::vector<std::string>{absl::StrCat(
                "_bf_prev_", absl::StrReplaceAll(load, {{"-", "_"}}),
                "_daily_revenue")});

  // Lineage: one rollback record per (dataset, partition) of the job, with
  // the restored rows counted by plain SQL.
  const Rows lineage = StateQuery(
      "SELECT dataset, \"partition\", row_count, reason FROM lineage WHERE "
      "job_id = ?1 AND action = 'rollback' ORDER BY 1, 2",
      {fix});
  const std::map<std::string, std::string> counts = RowCounts();
  ASSERT_EQ(lineage.size(), 6u);
  for (const auto& row : lineage) {
    auto it = counts.find(absl::StrCat(row[0], "/", row[1]));
    EXPECT_EQ(row[2], it == counts.end() ? "0" : it->second) << row[1];
    EXPECT_EQ(row[3], "bad data in " + fix);
  }
  EXPECT_EQ(StateQuery("SELECT state FROM jobs WHERE id = ?1", {fix}),
            (Rows{{"ROLLED_BACK"}}));
  EXPECT_EQ(StateQuery("SELECT COUNT(*) FROM audit_events WHERE job_id = ?1 "
                       "AND to_state = 'ROLLED_BACK'",
                       {fix}),
            (Rows{{"1"}}));

  // Twice: the same job back, nothing restored again.
  r = Rollback(daemon, fix);
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_EQ(JsonString(r.out, "state"), "BACKFILL_STATE_ROLLED_BACK");
  EXPECT_EQ(Dump(), before);
  EXPECT_EQ(StateQuery("SELECT COUNT(*) FROM lineage WHERE job_id = ?1 AND "
                       "action = 'rollback'",
                       {fix}),
            (Rows{{"6"}}));

  // A later job over the rolled-back partitions, rolled back in turn,
  // restores the rolled-back state (not the first fix).
  const std::string again =
      Submit(daemon, {"daily_revenue", "--partitions", "2025-01-03"},
             "recompute after the rollback");
  ASSERT_NE(Dump(), before);
  r = Rollback(daemon, again);
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_EQ(Dump(), before);

  // The status shows who rolled back and why.
  r = daemon.Ctl({"status", fix});
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_THAT(r.out, HasSubstr("Rolled back"));
  EXPECT_THAT(r.out, HasSubstr("bad data in " + fix));
  ExpectCleanSigterm(daemon);
}

TEST_F(RollbackTest, RestoresByteIdenticalRowsOnHoursIncludingAnInitialLoad) {
  Daemon& daemon = NewDaemon();
  ASSERT_TRUE(daemon.Start());
  Submit(daemon,
         {"hourly_amount", "--from", "2024-03-31T00", "--to", "2024-03-31T06"},
         "initial load");
  const std::vector<std::string> before = Dump();
  ASSERT_EQ(before.size(), 6u);
  ASSERT_NO_FATAL_FAILURE(
      Change("INSERT INTO raw_events (event_time, amount) VALUES "
             "('2024-03-31 04:59:59', 1000), ('2024-03-31 05:00:00', 7)"));
  const std::string job = Submit(
      daemon,
      {"hourly_amount", "--from", "2024-03-31T03", "--to", "2024-03-31T09"},
      "late events");
  ASSERT_EQ(Dump().size(), 9u);
  RunResult r = Rollback(daemon, job);
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_EQ(Dump(), before);  // hours 06..08 did not exist before: gone
  // Hour 03 came out identical and was not republished (early cutoff):
  // the rollback restores the 5 hours the job replaced, rows in 04 and 05.
  EXPECT_EQ(JsonInt(r.out, "partitions_restored"), 5) << r.out;
  EXPECT_EQ(JsonInt(r.out, "rows_restored"), 2) << r.out;
  ExpectCleanSigterm(daemon);
}

TEST_F(RollbackTest, RefusedWhileALaterJobsPublishIsInForceAndForce) {
  Daemon& daemon = NewDaemon();
  ASSERT_TRUE(daemon.Start());
  Submit(daemon,
         {"daily_revenue", "--from", "2025-01-01", "--to", "2025-01-07",
          "--no-downstream"},
         "base");
  const std::vector<std::string> before_a = Dump();
  ASSERT_NO_FATAL_FAILURE(Change("UPDATE raw_orders SET amount = amount + 1"));
  const std::string a = Submit(daemon,
                               {"daily_revenue", "--from", "2025-01-01", "--to",
                                "2025-01-05", "--no-downstream"},
                               "A");
  ASSERT_NO_FATAL_FAILURE(Change("UPDATE raw_orders SET amount = amount + 1"));
  const std::string b = Submit(daemon,
                               {"daily_revenue", "--from", "2025-01-02", "--to",
                                "2025-01-04", "--no-downstream"},
                               "B inside A");
  ASSERT_NO_FATAL_FAILURE(Change("UPDATE raw_orders SET amount = amount + 1"));
  const std::string c = Submit(daemon,
                               {"daily_revenue", "--from", "2025-01-04", "--to",
                                "2025-01-06", "--no-downstream"},
                               "C across A's end");
  const std::vector<std::string> now = Dump();

  // Plain: refused, naming the newest later job and a partition of it.
  RunResult r = Rollback(daemon, a);
  EXPECT_EQ(r.exit_code, 1) << r;
  EXPECT_THAT(r.err, HasSubstr("FAILED_PRECONDITION"));
  EXPECT_THAT(r.err, HasSubstr(absl::StrCat("job ", c,
                                            " has published "
                                            "partition 2025-01-04")));
  EXPECT_THAT(r.err, HasSubstr(b));
  EXPECT_EQ(Dump(), now);
  // --force: refused, C published 2025-01-05, outside A.
  r = Rollback(daemon, a, {"--force"});
  EXPECT_EQ(r.exit_code, 1) << r;
  EXPECT_THAT(r.err, HasSubstr(absl::StrCat("later job ", c,
                                            " also published partition "
                                            "2025-01-05")));
  EXPECT_EQ(Dump(), now);
  EXPECT_EQ(State(daemon, a), "BACKFILL_STATE_SUCCEEDED");

  // Newest first: C, then A with B (inside A) taken along by --force.
  r = Rollback(daemon, c);
  ASSERT_EQ(r.exit_code, 0) << r;
  r = Rollback(daemon, a);
  EXPECT_EQ(r.exit_code, 1) << r;  // B is still in force
  EXPECT_THAT(r.err, HasSubstr(absl::StrCat("job ", b, " has published")));
  r = Rollback(daemon, a, {"--force"});
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_EQ(JsonString(r.out, "state"), "BACKFILL_STATE_ROLLED_BACK");
  // The JSON is the API's message, in its terms (`force`); the status line
  // in the CLI's (--force).
  EXPECT_THAT(
      JsonString(r.out, "message"),
      HasSubstr(absl::StrCat("together with the later job ", b, " (`force`)")));
  RunResult status = daemon.Ctl({"status", a});
  ASSERT_EQ(status.exit_code, 0) << status;
  EXPECT_THAT(status.out, HasSubstr(absl::StrCat("together with the later job ",
                                                 b, " (--force)")));
  EXPECT_EQ(Dump(), before_a);
  EXPECT_EQ(State(daemon, b), "BACKFILL_STATE_ROLLED_BACK");
  EXPECT_EQ(StateQuery("SELECT with_job FROM rollbacks WHERE job_id = ?1", {b}),
            (Rows{{a}}));
  // The lineage of every day of A ends in rollbacks of everything after
  // "base": the current version is base's again.
  EXPECT_EQ(StateQuery("SELECT COUNT(*) FROM lineage WHERE action = "
                       "'rollback' AND job_id IN (?1, ?2, ?3)",
                       {a, b, c}),
            (Rows{{"8"}}));  // A: 4 days, B: 2, C: 2
  ExpectCleanSigterm(daemon);
}

TEST_F(RollbackTest, RefusalsChangeNothing) {
  Daemon& daemon = NewDaemon();
  ASSERT_TRUE(daemon.Start());
  const std::string job =
      Submit(daemon, {"daily_revenue", "--partitions", "2025-01-01"}, "load");
  const std::vector<std::string> before = Dump();
  RunResult r = daemon.Ctl({"rollback", "bf-999", "--reason", "x"});
  EXPECT_EQ(r.exit_code, 1) << r;
  EXPECT_THAT(r.err, HasSubstr("NOT_FOUND"));
  r = daemon.Ctl({"rollback", job});
  EXPECT_EQ(r.exit_code, 2) << r;
  EXPECT_THAT(r.err, HasSubstr("rollback requires --reason"));
  r = daemon.Ctl({"rollback", job, "--reason", "  "});
  EXPECT_EQ(r.exit_code, 2) << r;
  EXPECT_EQ(Dump(), before);
  EXPECT_EQ(State(daemon, job), "BACKFILL_STATE_SUCCEEDED");
  ExpectCleanSigterm(daemon);
}

TEST_F(RollbackTest, CrashBetweenTheWarehouseCommitAndTheRecordIsRecovered) {
  Daemon& first = NewDaemon();
  ASSERT_TRUE(first.Start());
  Submit(first, {"daily_revenue", "--from", "2025-01-01", "--to", "2025-01-03"},
         "load");
  const std::vector<std::string> before = Dump();
  ASSERT_NO_FATAL_FAILURE(Change("UPDATE raw_orders SET amount = -amount"));
  const std::string job = Submit(
      first, {"daily_revenue", "--from", "2025-01-02", "--to", "2025-01-04"},
      "negative");
  ExpectCleanSigterm(first);

  Daemon& armed = NewDaemon();
  armed.set_env({"BACKFILL_TEST_CRASH_AT=rollback.before_record"});
  ASSERT_TRUE(armed.Start());
  RunResult r = Rollback(armed, job);
  EXPECT_NE(r.exit_code, 0) << r;  // the daemon died under it
  ASSERT_EQ(armed.Wait(seconds(30)), std::optional<int>(137))
      << "the armed daemon did not die at the crash point";
  // The warehouse committed; the state store did not record it.
  EXPECT_EQ(Dump(), before);
  EXPECT_EQ(StateQuery("SELECT state FROM jobs WHERE id = ?1", {job}),
            (Rows{{"SUCCEEDED"}}));

  Daemon& second = NewDaemon();
  ASSERT_TRUE(second.Start());
  EXPECT_EQ(State(second, job), "BACKFILL_STATE_ROLLED_BACK");
  EXPECT_EQ(Dump(), before);  // nothing restored twice
  EXPECT_EQ(StateQuery("SELECT COUNT(*) FROM lineage WHERE job_id = ?1 AND "
                       "action = 'rollback'",
                       {job}),
            (Rows{{"4"}}));  // 2 days of daily_revenue and day_totals
  EXPECT_EQ(StateQuery("SELECT requested_by <> '', reason FROM rollbacks "
                       "WHERE job_id = ?1",
                       {job}),
            (Rows{{"1", "bad data in " + job}}));
  r = Rollback(second, job);
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_EQ(Dump(), before);
  ExpectCleanSigterm(second);
}

TEST_F(RollbackTest, RetentionKeepsTheCopiesBounded) {
  Daemon& daemon = NewDaemon();
  ASSERT_TRUE(daemon.Start());
  std::vector<std::string> jobs;
  for (int i = 0; i < 20; ++i) {
    ASSERT_NO_FATAL_FAILURE(
        Change(absl::StrCat("UPDATE raw_orders SET amount = amount + ", i)));
    jobs.push_back(Submit(
        daemon, {"daily_revenue", "--from", "2025-01-01", "--to", "2025-01-03"},
        absl::StrCat("run ", i)));
    // versions: 3 for daily_revenue; the default (10) for day_totals.
    ASSERT_EQ(Copies("daily_revenue").size(), std::min<size_t>(i + 1, 3));
    ASSERT_EQ(Copies("day_totals").size(), std::min<size_t>(i + 1, 10));
  }
  // The 3 newest jobs keep their copies.
  for (int i = 17; i < 20; ++i) {
    EXPECT_EQ(Copies("daily_revenue")[i - 17].find(
                  absl::StrReplaceAll(jobs[i], {{"-", "_"}})),
              9u);
  }
  // An older job's copy expired: it can no longer be rolled back.
  const std::vector<std::string> now = Dump();
  RunResult r = Rollback(daemon, jobs[5]);
  EXPECT_EQ(r.exit_code, 1) << r;
  EXPECT_THAT(r.err, HasSubstr("expired under the retention policy of "
                               "daily_revenue, which keeps the 3 newest "
                               "rollback copies"));
  EXPECT_EQ(Dump(), now);
  // The newest still can (its data goes back to run 18's).
  r = Rollback(daemon, jobs[19]);
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_EQ(Copies("daily_revenue").size(), 2u);
  ExpectCleanSigterm(daemon);
}

}  // namespace
}  // namespace e2e_rollback_test
}  // namespace backfill
