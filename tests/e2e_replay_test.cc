// End-to-end: a replay policy kept by the real daemon on the real clock
// (check_every 1s). A year of daily_revenue and its monthly rollup are
// loaded (the frozen days too, by an override); then late rows land in the
// raw orders, behind the service's back, on three days inside the policy's
// window, one day outside it and one frozen day. Without anyone typing a
// backfill, exactly one job requested by the policy replays the three days
// and their months; the recomputed rows equal plain SQL over the raw
// tables, and the day outside the window and the frozen day stay as they
// were published.
//
// The whole life of a policy, in a second test: a frozen day that changes
// (not replayed; `policies` shows it), a pause that outlives a restart and
// a resume, a daemon killed right after an evaluation created its job (one
// job), a replay that fails (not resubmitted over a minute; a new change
// is), a change above max_cost (held for approval, nothing published),
// and a transform changed by SIGHUP (only the window is replayed).

#include <libpq-fe.h>

#include <csignal>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/time/civil_time.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/e2e_support.h"
#include "tests/testing/e2e_warehouses.h"
#include "tests/testing/postgres_test_server.h"

namespace backfill {
namespace e2e_replay_test {
namespace {

using namespace ::backfill::e2e;  // NOLINT: test support
using std::chrono::seconds;
using ::testing::ElementsAre;

// The first day inside the window, whatever today is.
const absl::CivilDay kWindowStart(2025, 5, 1);

// Each test runs on both engines: GetParam() is "sqlite" or "postgres"
// (the PostgreSQL server of the test run, or one of its own when run by
// hand).
class ReplayTest : public E2eTest,
                   public ::testing::WithParamInterface<std::string> {
 protected:
  void SetUp() override {
    E2eTest::SetUp();
    ASSERT_NO_FATAL_FAILURE(WriteWarehouse(warehouse_, 365, 4));
    if (GetParam() == "postgres") {
      auto pg = std::make_unique<PostgresTestWarehouse>();
      ASSERT_NO_FATAL_FAILURE(pg->Open(warehouse_));
      wh_ = std::move(pg);
    } else {
      wh_ = std::make_unique<SqliteTestWarehouse>(warehouse_);
    }
    // The window reaches back to kWindowStart: its cutoff falls inside the
    // day before it (the days since, in whole days, plus a few hours).
    const absl::CivilDay today =
        absl::ToCivilDay(absl::Now(), absl::UTCTimeZone());
    window_days_ = today - kWindowStart;
    ASSERT_NO_FATAL_FAILURE(WritePipeline(""));
  }

  // The pipeline: daily_revenue with the policy (and `transform_extra`
  // ANDed into its transform's WHERE clause), monthly_revenue over it.
  virtual std::string Policy() const {
    return absl::StrCat(
        "    replay: {on: [input_change], window: ", window_days_,
        "d, check_every: 1s}\n    frozen: {before: "
        "2025-03-01}\n");
  }
  void WritePipeline(const std::string& transform_extra) {
    const std::string yaml = absl::StrReplaceAll(
        absl::StrCat(wh_->Yaml(),
                     wh_->Adapt(fixtures::RevenuePipelineYaml(
                         transform_extra, fixtures::MonthlyRevenueYaml()))),
        {{"      primary_key: [ds, region]\n",
          "      primary_key: [ds, region]\n" + Policy()}});
    ASSERT_NE(yaml.find("replay:"), std::string::npos);
    WriteFile(pipelines_dir_ + "/revenue.yaml", yaml);
  }
  // A late order on each of `days`, in one statement.
  void InsertOrders(const std::vector<std::string>& days, int amount,
                    int refund) {
    const Rows last = wh_->Query("SELECT MAX(order_id) FROM raw_orders");
    ASSERT_EQ(last.size(), 1u);
    int64_t id = 0;
    ASSERT_TRUE(absl::SimpleAtoi(last[0][0], &id)) << last[0][0];
    std::vector<std::string> values;
    for (const std::string& day : days) {
      values.push_back(absl::StrCat("(", ++id, ", '", day, "', 7, ", amount,
                                    ", ", refund, ")"));
    }
    wh_->Exec(absl::StrCat(
        "INSERT INTO raw_orders (order_id, order_date, customer_id, amount, "
        "refund) VALUES ",
        absl::StrJoin(values, ", ")));
  }
  void InsertOrders(const std::string& day, int amount, int refund) {
    InsertOrders(std::vector<std::string>{day}, amount, refund);
  }
  // The policy's jobs that replay daily_revenue `day`.
  Rows PolicyJobsOf(const std::string& day) {
    return Query(data_dir_ + "/state.db",
                 absl::StrCat("SELECT j.id, j.state FROM jobs j JOIN tasks t "
                              "ON t.job_id = j.id WHERE j.requested_by = "
                              "'policy:daily_revenue' AND t.dataset = "
                              "'daily_revenue' AND t.partition = '",
                              day, "' ORDER BY j.seq"));
  }
  // Waits until the policy has made `n` jobs and the newest is in one of
  // `states`; that job's id ("" on timeout).
  std::string WaitPolicyJob(size_t n, const std::vector<std::string>& states) {
    const absl::Time deadline = absl::Now() + absl::Seconds(120);
    Rows jobs;
    while (absl::Now() < deadline) {
      jobs = PolicyJobs();
      if (jobs.size() == n) {
        for (const std::string& state : states) {
          if (jobs.back()[1] == state) return jobs.back()[0];
        }
      }
      absl::SleepFor(absl::Milliseconds(200));
    }
    ADD_FAILURE() << "no policy job #" << n
                  << " in a state wanted; jobs: " << jobs.size()
                  << (jobs.empty() ? "" : " last " + jobs.back()[1]);
    return "";
  }
  std::vector<std::string> TasksOf(const std::string& id,
                                   const std::string& dataset) {
    std::vector<std::string> out;
    for (const auto& row :
         Query(data_dir_ + "/state.db",
               absl::StrCat("SELECT partition FROM tasks WHERE job_id = '", id,
                            "' AND dataset = '", dataset,
                            "' ORDER BY partition"))) {
      out.push_back(row[0]);
    }
    return out;
  }

  int64_t window_days_ = 0;
  std::unique_ptr<TestWarehouse> wh_;

  Rows Query(const std::string& db, const std::string& sql) {
    Sqlite conn(db, /*read_only=*/true);
    auto rows = conn.Query(sql, {});
    EXPECT_TRUE(rows.has_value()) << conn.error();
    return rows.value_or(Rows{});
  }
  Rows PolicyJobs() {
    return Query(data_dir_ + "/state.db",
                 "SELECT id, state FROM jobs WHERE requested_by = "
                 "'policy:daily_revenue' ORDER BY seq");
  }
};

TEST_P(ReplayTest, LateRowsAreReplayedByThePolicyAlone) {
  Daemon& daemon = NewDaemon();
  ASSERT_TRUE(daemon.Start());
  const std::string load = SubmitSucceeded(
      daemon,
      {"daily_revenue", "--from", "2025-01-01", "--to", "2026-01-01",
       "--reason", "initial load", "--override-frozen"},
      seconds(600));
  ASSERT_FALSE(load.empty());
  ASSERT_EQ(wh_->Query("SELECT COUNT(DISTINCT ds) FROM daily_revenue"),
            (Rows{{"365"}}));
  // Nothing changed: the policy submits nothing.
  absl::SleepFor(absl::Seconds(3));
  EXPECT_THAT(PolicyJobs(), ::testing::IsEmpty());

  const std::vector<std::string> inside = {"2025-06-30", "2025-09-10",
                                           "2025-11-05"};
  const std::vector<std::string> left = {"2025-02-10",   // frozen
                                         "2025-04-10"};  // outside
  for (const std::vector<std::string>* days : {&inside, &left}) {
    for (const std::string& day : *days) {
      ASSERT_NO_FATAL_FAILURE(InsertOrders(day, 123, 0));
      ASSERT_NO_FATAL_FAILURE(InsertOrders(day, 50, 10));
    }
  }
  // One job of the policy, which succeeds.
  Rows jobs;
  const absl::Time deadline = absl::Now() + absl::Seconds(120);
  while (absl::Now() < deadline) {
    jobs = PolicyJobs();
    if (!jobs.empty() && jobs[0][1] == "SUCCEEDED") break;
    absl::SleepFor(absl::Milliseconds(200));
  }
  ASSERT_EQ(jobs.size(), 1u);
  ASSERT_EQ(jobs[0][1], "SUCCEEDED");
  const std::string id = jobs[0][0];
  EXPECT_EQ(Query(data_dir_ + "/state.db",
                  absl::StrCat("SELECT dataset, partition FROM tasks WHERE "
                               "job_id = '",
                               id, "' ORDER BY dataset, partition")),
            (Rows{{"daily_revenue", "2025-06-30"},
                  {"daily_revenue", "2025-09-10"},
                  {"daily_revenue", "2025-11-05"},
                  {"monthly_revenue", "2025-06"},
                  {"monthly_revenue", "2025-09"},
                  {"monthly_revenue", "2025-11"}}));
  for (const std::string& day : inside) {
    absl::CivilDay civil;
    ASSERT_TRUE(absl::ParseCivilTime(day, &civil));
    const std::string next = absl::FormatCivilTime(civil + 1);
    EXPECT_EQ(wh_->Published(day, next), wh_->Expected(day, next)) << day;
  }
  for (const std::string& day : left) {
    absl::CivilDay civil;
    ASSERT_TRUE(absl::ParseCivilTime(day, &civil));
    const std::string next = absl::FormatCivilTime(civil + 1);
    EXPECT_NE(wh_->Published(day, next), wh_->Expected(day, next))
        << day << " was replayed";
  }
  // The job's reason says what changed; nothing more is submitted.
  RunResult status = daemon.Ctl({"status", id});
  EXPECT_THAT(status.out,
              ::testing::HasSubstr("replay policy of daily_revenue: "
                                   "input_change: 3 partitions"));
  absl::SleepFor(absl::Seconds(3));
  EXPECT_EQ(PolicyJobs().size(), 1u);
}

// The whole life of a policy that reacts to input and transform changes,
// with a cost limit and a check that a bad row fails.
class ReplayLifecycleTest : public ReplayTest {
 protected:
  std::string Policy() const override {
    return absl::StrCat(
        "    replay: {on: [input_change, transform_change], window: ",
        window_days_,
        "d, check_every: 1s, max_cost: 5%}\n"
        "    frozen: {before: 2025-03-01}\n"
        "    checks:\n"
        "      - {kind: assert, name: no_negative, sql: \"SELECT * FROM "
        "daily_revenue WHERE revenue < 0\"}\n");
  }
};

TEST_P(ReplayLifecycleTest, PauseCrashFailureCostAndReload) {
  Daemon* daemon = &NewDaemon();
  ASSERT_TRUE(daemon->Start());
  ASSERT_FALSE(SubmitSucceeded(*daemon,
                               {"daily_revenue", "--from", "2025-01-01", "--to",
                                "2026-01-01", "--reason", "initial load",
                                "--override-frozen"},
                               seconds(600))
                   .empty());

  // (2) A frozen day's inputs change: nothing is replayed, and `policies`
  // shows the day as frozen.
  ASSERT_NO_FATAL_FAILURE(InsertOrders("2025-02-10", 40, 0));
  absl::SleepFor(absl::Seconds(3));
  EXPECT_THAT(PolicyJobs(), ::testing::IsEmpty());
  RunResult policies = daemon->Ctl({"policies"});
  EXPECT_EQ(policies.exit_code, 0) << policies;
  EXPECT_THAT(policies.out,
              ::testing::HasSubstr("frozen (frozen.before 2025-03-01): "
                                   "2025-02-10"));

  // (7) Paused: nothing is submitted, across a restart; resumed: the due
  // partition is.
  RunResult pause = daemon->Ctl(
      {"policies", "pause", "daily_revenue", "--reason", "quarter close"});
  ASSERT_EQ(pause.exit_code, 0) << pause;
  ASSERT_NO_FATAL_FAILURE(InsertOrders("2025-08-20", 70, 0));
  absl::SleepFor(absl::Seconds(3));
  EXPECT_THAT(PolicyJobs(), ::testing::IsEmpty());
  daemon->Signal(SIGTERM);
  ASSERT_TRUE(daemon->Wait(seconds(60)).has_value());
  daemon = &NewDaemon();
  ASSERT_TRUE(daemon->Start());
  absl::SleepFor(absl::Seconds(3));
  EXPECT_THAT(PolicyJobs(), ::testing::IsEmpty());
  policies = daemon->Ctl({"policies"});
  EXPECT_THAT(policies.out, ::testing::HasSubstr("quarter close"));
  EXPECT_THAT(policies.out, ::testing::HasSubstr("paused"));
  ASSERT_EQ(daemon->Ctl({"policies", "resume", "daily_revenue"}).exit_code, 0);
  std::string id = WaitPolicyJob(1, {"SUCCEEDED"});
  EXPECT_THAT(TasksOf(id, "daily_revenue"), ElementsAre("2025-08-20"));
  RunResult audit = daemon->Ctl({"audit"});
  EXPECT_THAT(audit.out, ::testing::HasSubstr(
                             "\"subject\":\"replay_policy:daily_revenue\""));
  EXPECT_THAT(audit.out, ::testing::HasSubstr("paused by"));

  // (5) The daemon dies (as with kill -9) right after an evaluation
  // created its job: after the restart there is exactly one job for that
  // change.
  daemon->Signal(SIGTERM);
  ASSERT_TRUE(daemon->Wait(seconds(60)).has_value());
  daemon = &NewDaemon();
  daemon->set_env({"BACKFILL_TEST_CRASH_AT=replay.after_submit"});
  ASSERT_TRUE(daemon->Start());
  ASSERT_NO_FATAL_FAILURE(InsertOrders("2025-09-15", 30, 0));
  std::optional<int> died = daemon->Wait(seconds(60));
  ASSERT_TRUE(died.has_value()) << "the crash point was not reached";
  daemon = &NewDaemon();
  ASSERT_TRUE(daemon->Start());
  id = WaitPolicyJob(2, {"SUCCEEDED"});
  absl::SleepFor(absl::Seconds(3));
  EXPECT_EQ(PolicyJobsOf("2025-09-15").size(), 1u);
  EXPECT_EQ(PolicyJobs().size(), 2u);

  // (6) A replay that fails (a refund larger than the day's revenue fails
  // the no_negative check) is not submitted again: over ten evaluations
  // (check_every 1s), one job.
  ASSERT_NO_FATAL_FAILURE(InsertOrders("2025-07-15", 0, 1000000));
  const std::string failed = WaitPolicyJob(3, {"VALIDATION_FAILED", "FAILED"});
  ASSERT_FALSE(failed.empty());
  const absl::Time failed_at = absl::Now();

  // (3) Meanwhile, a change above max_cost (5% of a full reload): the job
  // waits for an approval and publishes nothing.
  std::vector<std::string> october;
  for (int d = 1; d <= 30; ++d) {
    october.push_back(absl::FormatCivilTime(absl::CivilDay(2025, 10, d)));
  }
  ASSERT_NO_FATAL_FAILURE(InsertOrders(october, 20, 0));
  const std::string held = WaitPolicyJob(4, {"AWAITING_APPROVAL"});
  ASSERT_FALSE(held.empty());
  EXPECT_EQ(TasksOf(held, "daily_revenue"), october);
  EXPECT_NE(wh_->Published("2025-10-01", "2025-10-31"),
            wh_->Expected("2025-10-01", "2025-10-31"));
  EXPECT_THAT(daemon->Ctl({"status", held}).out,
              ::testing::HasSubstr("above the replay policy's max_cost of 5%"));
  ASSERT_EQ(
      daemon->Ctl({"cancel", held, "--reason", "too big for now"}).exit_code,
      0);

  const absl::Duration waited = absl::Now() - failed_at;
  if (waited < absl::Seconds(11)) absl::SleepFor(absl::Seconds(11) - waited);
  EXPECT_EQ(PolicyJobsOf("2025-07-15").size(), 1u);
  EXPECT_EQ(PolicyJobs().size(), 4u);
  policies = daemon->Ctl({"policies"});
  EXPECT_THAT(policies.out, ::testing::HasSubstr("replay did not succeed"));
  EXPECT_THAT(policies.out, ::testing::HasSubstr("2025-07-15"));
  // A new change (the bad row corrected in place: an UPDATE in the middle
  // of the table) is a new job.
  wh_->Exec("UPDATE raw_orders SET refund = 0 WHERE refund = 1000000");
  id = WaitPolicyJob(5, {"SUCCEEDED"});
  EXPECT_THAT(TasksOf(id, "daily_revenue"), ElementsAre("2025-07-15"));

  // (4) A changed transform, loaded by SIGHUP: only the window is replayed
  // (waiting for an approval: it costs more than 5%).
  ASSERT_NO_FATAL_FAILURE(WritePipeline("        AND o.amount >= 0\n"));
  daemon->Signal(SIGHUP);
  const std::string reload = WaitPolicyJob(6, {"AWAITING_APPROVAL"});
  ASSERT_FALSE(reload.empty());
  std::vector<std::string> window;
  for (absl::CivilDay d = kWindowStart; d < absl::CivilDay(2026, 1, 1); ++d) {
    window.push_back(absl::FormatCivilTime(d));
  }
  EXPECT_EQ(TasksOf(reload, "daily_revenue"), window);
  EXPECT_EQ(
      TasksOf(reload, "monthly_revenue"),
      (std::vector<std::string>{"2025-05", "2025-06", "2025-07", "2025-08",
                                "2025-09", "2025-10", "2025-11", "2025-12"}));
  ASSERT_EQ(daemon->Ctl({"approve", reload, "--reason", "new logic"}).exit_code,
            0);
  const absl::Time deadline = absl::Now() + absl::Seconds(120);
  while (PolicyJobs().back()[1] != "SUCCEEDED" && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(200));
  }
  EXPECT_EQ(PolicyJobs().back()[1], "SUCCEEDED");
  EXPECT_EQ(wh_->Published("2025-05-01", "2026-01-01"),
            wh_->Expected("2025-05-01", "2026-01-01"));
  // Outside the window, the late row of 2025-02-10 (frozen) is still not
  // published.
  EXPECT_NE(wh_->Published("2025-02-10", "2025-02-11"),
            wh_->Expected("2025-02-10", "2025-02-11"));
}

std::string EngineName(const ::testing::TestParamInfo<std::string>& info) {
  return info.param;
}

INSTANTIATE_TEST_SUITE_P(Engines, ReplayTest,
                         ::testing::Values("sqlite", "postgres"), EngineName);
INSTANTIATE_TEST_SUITE_P(Engines, ReplayLifecycleTest,
                         ::testing::Values("sqlite", "postgres"), EngineName);

}  // namespace
}  // namespace e2e_replay_test
}  // namespace backfill
