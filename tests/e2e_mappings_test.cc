// End-to-end: rollup and lookback mappings with the real daemon and CLI.
// daily_revenue (by day) feeds monthly_revenue (a rollup, by month) and
// revenue_7d (lookback 7: each day's revenue and the average of the 7 days
// before it). After an initial load with logic that ignores refunds, the
// logic is fixed and ONE day is backfilled: the job recomputes that day,
// its month and the 8 days whose window holds it, and nothing else. Every
// expectation is computed with plain SQL over the warehouse, and "nothing
// else" is a full ordered dump compared before and after.

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/e2e_support.h"

namespace backfill {
namespace e2e_mappings_test {
namespace {

using namespace ::backfill::e2e;  // NOLINT: test support
using std::chrono::seconds;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// The example pipeline (orders, customers, daily_revenue:
// tests/testing/revenue_pipeline.h) with `revenue` as daily_revenue's
// measure: "SUM(o.amount)" (ignores refunds) or "SUM(o.amount - o.refund)"
// (the fix), and two datasets over it.
std::string Pipeline(const std::string& revenue) {
  const std::string over_daily =
      fixtures::MonthlyRevenueYaml() + R"yaml(  - name: revenue_7d
    kind: derived
    table: revenue_7d
    partition: {column: ds, grain: day}
    upstream:
      - {dataset: daily_revenue, mapping: {lookback: 7}}
    transform: |
      SELECT :partition AS ds,
             TOTAL(CASE WHEN ds >= :partition_start THEN revenue END)
               AS revenue,
             TOTAL(CASE WHEN ds < :partition_start THEN revenue END) / 7.0
               AS prior_7d_avg
      FROM daily_revenue
      WHERE ds >= :window_start AND ds < :partition_end
    contract:
      columns: {ds: TEXT, revenue: REAL, prior_7d_avg: REAL}
      primary_key: [ds]
)yaml";
  const std::string example =
      fixtures::RevenuePipelineYaml(/*extra_condition=*/"", over_daily);
  const std::string fixed = "SUM(o.amount - o.refund)";
  EXPECT_NE(example.find(fixed), std::string::npos);
  return absl::StrCat("warehouse: {engine: sqlite, path: warehouse.db}\n",
                      absl::StrReplaceAll(example, {{fixed, revenue}}));
}

class MappingsTest : public E2eTest {
 protected:
  void SetUp() override {
    E2eTest::SetUp();
    // 2025-01-01 .. 2025-03-16.
    ASSERT_NO_FATAL_FAILURE(WriteWarehouse(warehouse_, 75, 20));
    WriteFile(pipelines_dir_ + "/revenue.yaml", Pipeline("SUM(o.amount)"));
  }

  Rows Query(const std::string& sql,
             const std::vector<std::string>& params = {}) {
    Sqlite db(warehouse_, /*read_only=*/true);
    auto rows = db.Query(sql, params);
    EXPECT_TRUE(rows.has_value()) << db.error();
    return rows.value_or(Rows{});
  }

  // Every row of `table`, ordered by every column.
  Rows Dump(const std::string& table, const std::string& where = "1") {
    return Query(absl::StrCat("SELECT * FROM ", table, " WHERE ", where,
                              " ORDER BY 1, 2, 3"));
  }

  // monthly_revenue recomputed by plain SQL from the published days.
  Rows MonthsFromDays(const std::string& where) {
    return Query(absl::StrCat(
        "SELECT substr(ds, 1, 7), region, SUM(revenue), SUM(orders) FROM "
        "daily_revenue WHERE ",
        where, " GROUP BY 1, 2 ORDER BY 1, 2"));
  }
  Rows PublishedMonths(const std::string& where) {
    return Query(absl::StrCat(
        "SELECT month, region, revenue, orders FROM monthly_revenue WHERE ",
        where, " ORDER BY 1, 2"));
  }

  // revenue_7d for `day` by plain SQL from the published days.
  std::vector<std::string> Expected7d(const std::string& day) {
    Rows rows = Query(
        "SELECT ?1, (SELECT TOTAL(revenue) FROM daily_revenue WHERE ds = ?1), "
        "(SELECT TOTAL(revenue) FROM daily_revenue WHERE ds >= date(?1, "
        "'-7 days') AND ds < ?1) / 7.0",
        {day});
    return rows.empty() ? std::vector<std::string>{} : rows[0];
  }

  std::string Submit(Daemon& daemon, std::vector<std::string> args) {
    return SubmitSucceeded(daemon, std::move(args));
  }
};

TEST_F(MappingsTest, OneFixedDayRecomputesItsMonthAndItsWindowOnly) {
  Daemon& first = NewDaemon();
  ASSERT_TRUE(first.Start());
  RunResult datasets = first.Ctl({"datasets"});
  ASSERT_EQ(datasets.exit_code, 0) << datasets;
  EXPECT_THAT(datasets.out, HasSubstr("daily_revenue(rollup)"));
  EXPECT_THAT(datasets.out, HasSubstr("daily_revenue(lookback 7)"));

  // Initial load of every day; the months and rolling days follow.
  const std::string load =
      Submit(first, {"daily_revenue", "--from", "2025-01-01", "--to",
                     "2025-03-17", "--reason", "initial load"});
  ASSERT_FALSE(load.empty());
  ASSERT_EQ(Query("SELECT COUNT(DISTINCT ds) FROM daily_revenue"),
            (Rows{{"75"}}));
  EXPECT_EQ(PublishedMonths("1"), MonthsFromDays("1"));
  ASSERT_EQ(PublishedMonths("1").size(), 12u);  // 3 months x 4 regions
  // revenue_7d: 75 days plus the 7 after the last (their windows hold it).
  ASSERT_EQ(Query("SELECT COUNT(*), MIN(ds), MAX(ds) FROM revenue_7d"),
            (Rows{{"82", "2025-01-01", "2025-03-23"}}));
  for (const std::string day :
       {"2025-01-01", "2025-01-08", "2025-02-28", "2025-03-23"}) {
    EXPECT_EQ(Dump("revenue_7d", absl::StrCat("ds = '", day, "'"))[0],
              Expected7d(day))
        << day;
  }
  ASSERT_NO_FATAL_FAILURE(ExpectCleanSigterm(first));

  // The fix: refunds count. Day D = 2025-02-27 had refunds.
  const std::string day = "2025-02-27";
  ASSERT_NE(Query("SELECT COUNT(*) FROM raw_orders WHERE order_date = ?1 AND "
                  "refund > 0",
                  {day}),
            (Rows{{"0"}}));
  WriteFile(pipelines_dir_ + "/revenue.yaml",
            Pipeline("SUM(o.amount - o.refund)"));
  Daemon& daemon = NewDaemon();
  ASSERT_TRUE(daemon.Start());

  const std::vector<std::string> window = {
      "2025-02-27", "2025-02-28", "2025-03-01", "2025-03-02",
      "2025-03-03", "2025-03-04", "2025-03-05", "2025-03-06"};
  const std::string lookback_reason =
      "downstream of daily_revenue via lookback 7";
  // The plan says what and why.
  RunResult plan =
      daemon.CtlJson({"plan", "daily_revenue", "--partitions", day});
  ASSERT_EQ(plan.exit_code, 0) << plan;
  EXPECT_THAT(PlanArray(plan.out, "daily_revenue", "partitions"),
              ElementsAre(day));
  EXPECT_THAT(PlanArray(plan.out, "daily_revenue", "partition_reasons"),
              ElementsAre("requested"));
  EXPECT_THAT(PlanArray(plan.out, "monthly_revenue", "partitions"),
              ElementsAre("2025-02"));
  EXPECT_THAT(PlanArray(plan.out, "monthly_revenue", "partition_reasons"),
              ElementsAre("downstream of daily_revenue via rollup"));
  EXPECT_EQ(PlanArray(plan.out, "revenue_7d", "partitions"), window);
  EXPECT_EQ(PlanArray(plan.out, "revenue_7d", "partition_reasons"),
            std::vector<std::string>(8, lookback_reason));
  EXPECT_EQ(JsonInt(plan.out, "total_partitions"), 10);
  RunResult text = daemon.Ctl({"plan", "daily_revenue", "--partitions", day});
  ASSERT_EQ(text.exit_code, 0) << text;
  EXPECT_THAT(text.out, HasSubstr("    2025-02-27 .. 2025-03-06  " +
                                  lookback_reason + " (8)\n"));
  EXPECT_THAT(text.out, HasSubstr("    2025-02  downstream of daily_revenue "
                                  "via rollup\n"));

  const Rows days_before = Dump("daily_revenue", "ds <> '2025-02-27'");
  const Rows months_before = Dump("monthly_revenue", "month <> '2025-02'");
  const Rows february_before = Dump("monthly_revenue", "month = '2025-02'");
  const Rows rolling_before =
      Dump("revenue_7d", "ds NOT BETWEEN '2025-02-27' AND '2025-03-06'");
  const Rows window_before =
      Dump("revenue_7d", "ds BETWEEN '2025-02-27' AND '2025-03-06'");

  const std::string job = Submit(
      daemon, {"daily_revenue", "--partitions", day, "--reason", "refunds"});
  ASSERT_FALSE(job.empty());

  // The status keeps the reasons.
  RunResult status = daemon.CtlJson({"status", job});
  ASSERT_EQ(status.exit_code, 0) << status;
  EXPECT_EQ(PlanArray(status.out, "revenue_7d", "partition_reasons"),
            std::vector<std::string>(8, lookback_reason));
  EXPECT_THAT(PlanArray(status.out, "monthly_revenue", "partition_reasons"),
              ElementsAre("downstream of daily_revenue via rollup"));
  RunResult status_text = daemon.Ctl({"status", job});
  EXPECT_THAT(status_text.out, HasSubstr("Why each partition:\n"));

  // The day is the fixed logic's; every other day is as it was.
  EXPECT_EQ(PublishedRevenue(warehouse_, day, "2025-02-28"),
            ExpectedRevenue(warehouse_, day, "2025-02-28"));
  EXPECT_EQ(Dump("daily_revenue", "ds <> '2025-02-27'"), days_before);
  // February is the sum of the published days, and it changed; the other
  // months are byte-identical.
  EXPECT_EQ(PublishedMonths("month = '2025-02'"),
            MonthsFromDays("ds >= '2025-02-01' AND ds < '2025-03-01'"));
  EXPECT_NE(Dump("monthly_revenue", "month = '2025-02'"), february_before);
  EXPECT_EQ(Dump("monthly_revenue", "month <> '2025-02'"), months_before);
  EXPECT_EQ(PublishedMonths("1"), MonthsFromDays("1"));
  // The 8 days whose window holds D match plain SQL and changed; the rest
  // are byte-identical.
  const Rows window_after =
      Dump("revenue_7d", "ds BETWEEN '2025-02-27' AND '2025-03-06'");
  ASSERT_EQ(window_after.size(), 8u);
  for (size_t i = 0; i < window.size(); ++i) {
    EXPECT_EQ(window_after[i], Expected7d(window[i])) << window[i];
    EXPECT_NE(window_after[i], window_before[i]) << window[i];
  }
  EXPECT_EQ(Dump("revenue_7d", "ds NOT BETWEEN '2025-02-27' AND '2025-03-06'"),
            rolling_before);

  // Lineage: the job published exactly those 10 partitions.
  Sqlite state(data_dir_ + "/state.db", /*read_only=*/true);
  auto published = state.Query(
      "SELECT dataset, COUNT(*), MIN(\"partition\"), MAX(\"partition\") FROM "
      "lineage WHERE job_id = ?1 GROUP BY dataset ORDER BY dataset",
      {job});
  ASSERT_TRUE(published.has_value()) << state.error();
  EXPECT_EQ(*published,
            (Rows{{"daily_revenue", "1", day, day},
                  {"monthly_revenue", "1", "2025-02", "2025-02"},
                  {"revenue_7d", "8", "2025-02-27", "2025-03-06"}}));
  ExpectCleanSigterm(daemon);
}

}  // namespace
}  // namespace e2e_mappings_test
}  // namespace backfill
