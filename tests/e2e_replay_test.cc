// End-to-end: a replay policy kept by the real daemon on the real clock
// (check_every 1s). A year of daily_revenue and its monthly rollup are
// loaded (the frozen days too, by an override); then late rows land in the
// raw orders, behind the service's back, on three days inside the policy's
// window, one day outside it and one frozen day. Without anyone typing a
// backfill, exactly one job requested by the policy replays the three days
// and their months; the recomputed rows equal plain SQL over the raw
// tables, and the day outside the window and the frozen day stay as they
// were published.

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/time/civil_time.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/e2e_support.h"

namespace backfill {
namespace e2e_replay_test {
namespace {

using namespace ::backfill::e2e;  // NOLINT: test support
using std::chrono::seconds;
using ::testing::ElementsAre;

// The first day inside the window, whatever today is.
const absl::CivilDay kWindowStart(2025, 5, 1);

class ReplayTest : public E2eTest {
 protected:
  void SetUp() override {
    E2eTest::SetUp();
    ASSERT_NO_FATAL_FAILURE(WriteWarehouse(warehouse_, 365, 4));
    // The window reaches back to kWindowStart: its cutoff falls inside the
    // day before it (the days since, in whole days, plus a few hours).
    const absl::CivilDay today =
        absl::ToCivilDay(absl::Now(), absl::UTCTimeZone());
    const int64_t days = today - kWindowStart;
    const std::string policy =
        absl::StrCat("    replay: {on: [input_change], window: ", days,
                     "d, check_every: 1s}\n    frozen: {before: 2025-03-01}\n");
    const std::string yaml =
        absl::StrReplaceAll(PipelineYaml(false, fixtures::MonthlyRevenueYaml()),
                            {{"      primary_key: [ds, region]\n",
                              "      primary_key: [ds, region]\n" + policy}});
    ASSERT_NE(yaml.find("replay:"), std::string::npos);
    WriteFile(pipelines_dir_ + "/revenue.yaml", yaml);
  }

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

TEST_F(ReplayTest, LateRowsAreReplayedByThePolicyAlone) {
  Daemon& daemon = NewDaemon();
  ASSERT_TRUE(daemon.Start());
  const std::string load = SubmitSucceeded(
      daemon,
      {"daily_revenue", "--from", "2025-01-01", "--to", "2026-01-01",
       "--reason", "initial load", "--override-frozen"},
      seconds(600));
  ASSERT_FALSE(load.empty());
  ASSERT_EQ(Query(warehouse_, "SELECT COUNT(DISTINCT ds) FROM daily_revenue"),
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
      Sqlite db(warehouse_);
      ASSERT_TRUE(db.Exec(absl::StrCat(
          "INSERT INTO raw_orders (order_date, customer_id, amount, refund) "
          "VALUES ('",
          day, "', 7, 123, 0), ('", day, "', 8, 50, 10)")))
          << db.error();
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
    EXPECT_EQ(PublishedRevenue(warehouse_, day, next),
              ExpectedRevenue(warehouse_, day, next))
        << day;
  }
  for (const std::string& day : left) {
    absl::CivilDay civil;
    ASSERT_TRUE(absl::ParseCivilTime(day, &civil));
    const std::string next = absl::FormatCivilTime(civil + 1);
    EXPECT_NE(PublishedRevenue(warehouse_, day, next),
              ExpectedRevenue(warehouse_, day, next))
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

}  // namespace
}  // namespace e2e_replay_test
}  // namespace backfill
