// End-to-end: `--auto` with the real daemon and CLI. A year of
// daily_revenue (365 days) and its monthly rollup are loaded; then the raw
// data changes behind the service's back with plain SQL, and `plan --auto`
// must find exactly what no longer matches its lineage:
//   - late rows in 3 raw order days: those 3 days (the reason names the
//     input partition) and their months downstream; once submitted, nothing
//     is stale any more;
//   - one customer's region corrected: every day (each read the whole
//     customers table);
//   - a new transform version: every day, "transform version changed".
// Expected partitions are hand-picked; the recomputed rows are checked
// against plain SQL over the raw tables.

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/civil_time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/e2e_support.h"

namespace backfill {
namespace e2e_auto_test {
namespace {

using namespace ::backfill::e2e;  // NOLINT: test support
using std::chrono::seconds;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<std::string> EveryDayOf2025() {
  std::vector<std::string> days;
  for (absl::CivilDay d(2025, 1, 1); d < absl::CivilDay(2026, 1, 1); ++d) {
    days.push_back(absl::FormatCivilTime(d));
  }
  return days;
}

std::vector<std::string> EveryMonthOf2025() {
  std::vector<std::string> months;
  for (int m = 1; m <= 12; ++m)
    months.push_back(absl::StrFormat("2025-%02d", m));
  return months;
}

class AutoTest : public E2eTest {
 protected:
  void SetUp() override {
    E2eTest::SetUp();
    ASSERT_NO_FATAL_FAILURE(WriteWarehouse(warehouse_, 365, 4));
    WriteFile(pipelines_dir_ + "/revenue.yaml",
              PipelineYaml(false, fixtures::MonthlyRevenueYaml()));
  }

  Rows Query(const std::string& sql,
             const std::vector<std::string>& params = {}) {
    Sqlite db(warehouse_, /*read_only=*/true);
    auto rows = db.Query(sql, params);
    EXPECT_TRUE(rows.has_value()) << db.error();
    return rows.value_or(Rows{});
  }
  bool Write(const std::string& sql) {
    Sqlite db(warehouse_);
    const bool ok = db.Exec(sql);
    EXPECT_TRUE(ok) << db.error() << " in " << sql;
    return ok;
  }

  // monthly_revenue by plain SQL from the published days, and as published.
  Rows MonthsFromDays() {
    return Query(
        "SELECT substr(ds, 1, 7), region, SUM(revenue), SUM(orders) FROM "
        "daily_revenue GROUP BY 1, 2 ORDER BY 1, 2");
  }
  Rows PublishedMonths() {
    return Query(
        "SELECT month, region, revenue, orders FROM monthly_revenue ORDER BY "
        "1, 2");
  }

  std::string Submit(Daemon& daemon, std::vector<std::string> args) {
    return SubmitSucceeded(daemon, std::move(args), seconds(600));
  }

  void ExpectNothingStale(Daemon& daemon) {
    RunResult plan = daemon.Ctl({"plan", "daily_revenue", "--auto"});
    EXPECT_NE(plan.exit_code, 0) << plan;
    EXPECT_THAT(plan.err,
                HasSubstr("FAILED_PRECONDITION: nothing to backfill: every "
                          "published partition of daily_revenue matches its "
                          "lineage"))
        << plan;
    EXPECT_THAT(plan.err, ::testing::Not(HasSubstr("retry")));
  }
};

TEST_F(AutoTest, LateRowsACorrectedDimensionAndANewVersion) {
  Daemon& daemon = NewDaemon();
  ASSERT_TRUE(daemon.Start());

  RunResult before = daemon.Ctl({"plan", "daily_revenue", "--auto"});
  EXPECT_NE(before.exit_code, 0) << before;
  EXPECT_THAT(before.err, HasSubstr("no partition of daily_revenue was "
                                    "published"));
  // --auto is a scope of its own.
  RunResult both = daemon.Ctl({"plan", "daily_revenue", "--auto", "--from",
                               "2025-01-01", "--to", "2025-01-02"});
  EXPECT_EQ(both.exit_code, 2) << both;

  const std::string load =
      Submit(daemon, {"daily_revenue", "--from", "2025-01-01", "--to",
                      "2026-01-01", "--reason", "initial load"});
  ASSERT_FALSE(load.empty());
  ASSERT_EQ(Query("SELECT COUNT(DISTINCT ds) FROM daily_revenue"),
            (Rows{{"365"}}));
  ASSERT_EQ(PublishedMonths(), MonthsFromDays());
  ASSERT_EQ(Query("SELECT COUNT(DISTINCT month) FROM monthly_revenue"),
            (Rows{{"12"}}));
  // Untouched inputs compare equal to what the stages recorded.
  ExpectNothingStale(daemon);

  // Late rows in 3 raw days, behind the service's back.
  const std::vector<std::string> late = {"2025-02-10", "2025-06-30",
                                         "2025-11-05"};
  for (const std::string& day : late) {
    ASSERT_TRUE(Write(absl::StrCat(
        "INSERT INTO raw_orders (order_date, customer_id, amount, refund) "
        "VALUES ('",
        day, "', 7, 123, 0), ('", day, "', 8, 50, 10)")));
  }
  ASSERT_NE(PublishedRevenue(warehouse_, "2025-02-10", "2025-02-11"),
            ExpectedRevenue(warehouse_, "2025-02-10", "2025-02-11"));

  RunResult plan = daemon.CtlJson({"plan", "daily_revenue", "--auto"});
  ASSERT_EQ(plan.exit_code, 0) << plan;
  EXPECT_EQ(PlanArray(plan.out, "daily_revenue", "partitions"), late);
  EXPECT_THAT(PlanArray(plan.out, "daily_revenue", "partition_reasons"),
              ElementsAre("input orders/2025-02-10 changed",
                          "input orders/2025-06-30 changed",
                          "input orders/2025-11-05 changed"));
  EXPECT_THAT(PlanArray(plan.out, "monthly_revenue", "partitions"),
              ElementsAre("2025-02", "2025-06", "2025-11"));
  EXPECT_EQ(PlanArray(plan.out, "monthly_revenue", "partition_reasons"),
            std::vector<std::string>(3,
                                     "downstream of daily_revenue via "
                                     "rollup"));
  EXPECT_EQ(JsonInt(plan.out, "total_partitions"), 6);
  RunResult text = daemon.Ctl({"plan", "daily_revenue", "--auto"});
  ASSERT_EQ(text.exit_code, 0) << text;
  EXPECT_THAT(text.out,
              HasSubstr("    2025-06-30  input orders/2025-06-30 changed\n"));

  const Rows untouched_before = Query(
      "SELECT * FROM daily_revenue WHERE ds NOT IN ('2025-02-10', "
      "'2025-06-30', '2025-11-05') ORDER BY 1, 2");
  const std::string fix =
      Submit(daemon, {"daily_revenue", "--auto", "--reason", "late rows"});
  ASSERT_FALSE(fix.empty());
  RunResult status = daemon.CtlJson({"status", fix});
  ASSERT_EQ(status.exit_code, 0) << status;
  EXPECT_THAT(status.out, HasSubstr("\"auto_detect\": true"));
  for (const std::string& day : late) {
    absl::CivilDay civil;
    ASSERT_TRUE(absl::ParseCivilTime(day, &civil)) << day;
    const std::string next = absl::FormatCivilTime(civil + 1);
    EXPECT_EQ(PublishedRevenue(warehouse_, day, next),
              ExpectedRevenue(warehouse_, day, next))
        << day;
  }
  EXPECT_EQ(PublishedMonths(), MonthsFromDays());
  EXPECT_EQ(Query("SELECT * FROM daily_revenue WHERE ds NOT IN "
                  "('2025-02-10', '2025-06-30', '2025-11-05') ORDER BY 1, 2"),
            untouched_before);
  ExpectNothingStale(daemon);

  // A corrected dimension row: every day read the whole table.
  ASSERT_TRUE(
      Write("UPDATE dim_customers SET region = CASE region WHEN 'north' THEN "
            "'south' ELSE 'north' END WHERE customer_id = 5"));
  plan = daemon.CtlJson({"plan", "daily_revenue", "--auto"});
  ASSERT_EQ(plan.exit_code, 0) << plan;
  EXPECT_EQ(PlanArray(plan.out, "daily_revenue", "partitions"),
            EveryDayOf2025());
  EXPECT_EQ(PlanArray(plan.out, "daily_revenue", "partition_reasons"),
            std::vector<std::string>(365, "input customers changed"));
  EXPECT_EQ(PlanArray(plan.out, "monthly_revenue", "partitions"),
            EveryMonthOf2025());

  // A new transform version (an always-true condition changes the
  // transform's text): every day, whatever else changed.
  ASSERT_NO_FATAL_FAILURE(ExpectCleanSigterm(daemon));
  WriteFile(pipelines_dir_ + "/revenue.yaml",
            absl::StrCat(
                "warehouse: {engine: sqlite, path: warehouse.db}\n",
                fixtures::RevenuePipelineYaml("        AND o.amount >= 0\n",
                                              fixtures::MonthlyRevenueYaml())));
  Daemon& next = NewDaemon();
  ASSERT_TRUE(next.Start());
  plan = next.CtlJson({"plan", "daily_revenue", "--auto"});
  ASSERT_EQ(plan.exit_code, 0) << plan;
  EXPECT_EQ(PlanArray(plan.out, "daily_revenue", "partitions"),
            EveryDayOf2025());
  EXPECT_EQ(PlanArray(plan.out, "daily_revenue", "partition_reasons"),
            std::vector<std::string>(365, "transform version changed"));
  EXPECT_EQ(PlanArray(plan.out, "monthly_revenue", "partitions"),
            EveryMonthOf2025());
  RunResult grouped = next.Ctl({"plan", "daily_revenue", "--auto"});
  ASSERT_EQ(grouped.exit_code, 0) << grouped;
  EXPECT_THAT(grouped.out, HasSubstr("2025-01-01 .. 2025-12-31  transform "
                                     "version changed (365)"));
}

}  // namespace
}  // namespace e2e_auto_test
}  // namespace backfill
