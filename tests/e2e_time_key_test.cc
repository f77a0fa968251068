// End-to-end: a dataset partitioned by time x key with the real daemon and
// CLI. revenue_by_region (day x region, from orders by day) feeds
// daily_total (day, identity: reads every region of its day) and
// monthly_by_region (month x region, rollup). After an initial load with
// logic that ignores refunds, the logic is fixed and ONE (day, region) is
// backfilled: exactly that partition's rows change, its day's total and its
// (month, region) follow, and every other row stays byte-identical (full
// ordered dumps before and after). A rollback then restores every table
// byte for byte. Expectations are plain SQL over the warehouse.

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/e2e_support.h"

namespace backfill {
namespace e2e_time_key_test {
namespace {

using namespace ::backfill::e2e;  // NOLINT: test support
using std::chrono::seconds;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// `revenue` is the measure: "SUM(o.amount)" (ignores refunds) or
// "SUM(o.amount - o.refund)" (the fix).
std::string Pipeline(const std::string& revenue) {
  return absl::StrReplaceAll(
      R"yaml(warehouse: {engine: sqlite, path: warehouse.db}
datasets:
  - name: orders
    kind: source
    table: raw_orders
    partition: {column: order_date, grain: day}
  - name: customers
    kind: source
    table: dim_customers
  - name: revenue_by_region
    kind: derived
    table: revenue_by_region
    partition: {column: ds, grain: day, key_column: region, keys: [north, south, east, west]}
    upstream:
      - {dataset: orders, mapping: identity}
      - {dataset: customers, mapping: all}
    transform: |
      SELECT o.order_date AS ds, c.region AS region,
             $REVENUE AS revenue, COUNT(*) AS orders
      FROM raw_orders o JOIN dim_customers c ON c.customer_id = o.customer_id
      WHERE o.order_date >= :partition_start AND o.order_date < :partition_end
        AND c.region = :partition_key
      GROUP BY 1, 2
    contract:
      columns: {ds: TEXT, region: TEXT, revenue: REAL, orders: INTEGER}
      primary_key: [ds, region]
  - name: daily_total
    kind: derived
    table: daily_total
    partition: {column: ds, grain: day}
    upstream:
      - {dataset: revenue_by_region, mapping: identity}
    transform: |
      SELECT ds, SUM(revenue) AS revenue, SUM(orders) AS orders
      FROM revenue_by_region WHERE ds = :partition GROUP BY 1
    contract:
      columns: {ds: TEXT, revenue: REAL, orders: INTEGER}
      primary_key: [ds]
  - name: monthly_by_region
    kind: derived
    table: monthly_by_region
    partition: {column: month, grain: month, key_column: region, keys: [north, south, east, west]}
    upstream:
      - {dataset: revenue_by_region, mapping: rollup}
    transform: |
      SELECT substr(ds, 1, 7) AS month, region, SUM(revenue) AS revenue,
             SUM(orders) AS orders
      FROM revenue_by_region
      WHERE ds >= :partition_start AND ds < :partition_end
        AND region = :partition_key
      GROUP BY 1, 2
    contract:
      columns: {month: TEXT, region: TEXT, revenue: REAL, orders: INTEGER}
      primary_key: [month, region]
)yaml",
      {{"$REVENUE", revenue}});
}

class TimeKeyTest : public E2eTest {
 protected:
  void SetUp() override {
    E2eTest::SetUp();
    // 2025-01-01 .. 2025-02-28.
    ASSERT_NO_FATAL_FAILURE(WriteWarehouse(warehouse_, 59, 20));
    WriteFile(pipelines_dir_ + "/revenue.yaml", Pipeline("SUM(o.amount)"));
  }

  Rows Query(const std::string& sql,
             const std::vector<std::string>& params = {}) {
    Sqlite db(warehouse_, /*read_only=*/true);
    auto rows = db.Query(sql, params);
    EXPECT_TRUE(rows.has_value()) << db.error();
    return rows.value_or(Rows{});
  }

  // Every row of `table`, ordered by every column (daily_total has 3, the
  // others 4).
  Rows Dump(const std::string& table, const std::string& where = "1") {
    return Query(absl::StrCat(
        "SELECT * FROM ", table, " WHERE ", where,
        table == "daily_total" ? " ORDER BY 1, 2, 3" : " ORDER BY 1, 2, 3, 4"));
  }

  // revenue_by_region by plain SQL from the raw tables.
  Rows ExpectedByRegion(const std::string& measure, const std::string& where) {
    return Query(absl::StrCat(
        "SELECT o.order_date, c.region, ", measure,
        ", COUNT(*) FROM raw_orders o JOIN dim_customers c ON c.customer_id = "
        "o.customer_id WHERE ",
        where, " GROUP BY 1, 2 ORDER BY 1, 2"));
  }
  Rows PublishedByRegion(const std::string& where) {
    return Query(absl::StrCat(
        "SELECT ds, region, revenue, orders FROM revenue_by_region WHERE ",
        where, " ORDER BY 1, 2"));
  }
  // daily_total and monthly_by_region by plain SQL from the published
  // revenue_by_region.
  Rows TotalsFromRegions() {
    return Query(
        "SELECT ds, SUM(revenue), SUM(orders) FROM revenue_by_region GROUP BY "
        "1 ORDER BY 1");
  }
  Rows PublishedTotals() {
    return Query("SELECT ds, revenue, orders FROM daily_total ORDER BY 1");
  }
  Rows MonthsFromRegions() {
    return Query(
        "SELECT substr(ds, 1, 7), region, SUM(revenue), SUM(orders) FROM "
        "revenue_by_region GROUP BY 1, 2 ORDER BY 1, 2");
  }
  Rows PublishedMonths() {
    return Query(
        "SELECT month, region, revenue, orders FROM monthly_by_region ORDER "
        "BY 1, 2");
  }

  std::string Submit(Daemon& daemon, std::vector<std::string> args) {
    args.insert(args.begin(), "submit");
    args.insert(args.end(), {"--wait"});
    RunResult r = daemon.CtlJson(args, seconds(300));
    EXPECT_EQ(r.exit_code, 0) << r;
    EXPECT_EQ(JsonString(r.out, "state"), "BACKFILL_STATE_SUCCEEDED") << r;
    return JsonString(r.out, "id");
  }
};

TEST_F(TimeKeyTest, OneDayOfOneRegionChangesExactlyItsRowsAndItsDependents) {
  Daemon& first = NewDaemon();
  ASSERT_TRUE(first.Start());
  RunResult datasets = first.Ctl({"datasets"});
  ASSERT_EQ(datasets.exit_code, 0) << datasets;
  EXPECT_THAT(datasets.out, HasSubstr("day:ds x key:region"));
  EXPECT_THAT(datasets.out, HasSubstr("month:month x key:region"));
  RunResult datasets_json = first.CtlJson({"datasets"});
  EXPECT_THAT(datasets_json.out, HasSubstr("\"partition_key_column\":"));

  // Initial load: every day x every region; the totals and months follow.
  const std::string load =
      Submit(first, {"revenue_by_region", "--from", "2025-01-01", "--to",
                     "2025-03-01", "--reason", "initial load"});
  ASSERT_FALSE(load.empty());
  const Rows loaded = PublishedByRegion("1");
  ASSERT_EQ(loaded,
            ExpectedByRegion("SUM(o.amount)", "o.order_date < '2025-03-01'"));
  ASSERT_GT(loaded.size(), 59u * 3u);  // nearly every (day, region) has rows
  EXPECT_EQ(PublishedTotals(), TotalsFromRegions());
  ASSERT_EQ(PublishedTotals().size(), 59u);
  EXPECT_EQ(PublishedMonths(), MonthsFromRegions());
  ASSERT_EQ(PublishedMonths().size(), 8u);  // 2 months x 4 regions
  ASSERT_NO_FATAL_FAILURE(ExpectCleanSigterm(first));

  // The fix: refunds count. The first (day, region) with a refund.
  const Rows refunded = Query(
      "SELECT o.order_date, c.region FROM raw_orders o JOIN dim_customers c "
      "ON c.customer_id = o.customer_id WHERE o.refund > 0 AND o.order_date "
      ">= '2025-01-02' ORDER BY 1, 2 LIMIT 1");
  ASSERT_EQ(refunded.size(), 1u);
  const std::string day = refunded[0][0];
  const std::string region = refunded[0][1];
  const std::string partition = absl::StrCat(day, "|", region);
  const std::string month = day.substr(0, 7);
  WriteFile(pipelines_dir_ + "/revenue.yaml",
            Pipeline("SUM(o.amount - o.refund)"));
  Daemon& daemon = NewDaemon();
  ASSERT_TRUE(daemon.Start());

  // Malformed scopes change nothing and say what is expected.
  RunResult bad =
      daemon.CtlJson({"plan", "revenue_by_region", "--partitions", day});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_THAT(bad.err, HasSubstr("YYYY-MM-DD|KEY"));
  bad = daemon.CtlJson({"plan", "revenue_by_region", "--from",
                        absl::StrCat(day, "|north"), "--to",
                        absl::StrCat(day.substr(0, 8), "28|south")});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_THAT(bad.err, HasSubstr("two keys"));

  // The plan: the partition, its day's total, its (month, region).
  RunResult plan =
      daemon.CtlJson({"plan", "revenue_by_region", "--partitions", partition});
  ASSERT_EQ(plan.exit_code, 0) << plan;
  EXPECT_THAT(PlanArray(plan.out, "revenue_by_region", "partitions"),
              ElementsAre(partition));
  EXPECT_THAT(PlanArray(plan.out, "daily_total", "partitions"),
              ElementsAre(day));
  EXPECT_THAT(PlanArray(plan.out, "daily_total", "partition_reasons"),
              ElementsAre("downstream of revenue_by_region"));
  EXPECT_THAT(PlanArray(plan.out, "monthly_by_region", "partitions"),
              ElementsAre(absl::StrCat(month, "|", region)));
  EXPECT_THAT(PlanArray(plan.out, "monthly_by_region", "partition_reasons"),
              ElementsAre("downstream of revenue_by_region via rollup"));
  EXPECT_EQ(JsonInt(plan.out, "total_partitions"), 3);
  RunResult text =
      daemon.Ctl({"plan", "revenue_by_region", "--partitions", partition});
  ASSERT_EQ(text.exit_code, 0) << text;
  EXPECT_THAT(text.out, HasSubstr("day x key"));

  const std::string in_partition =
      absl::StrCat("ds = '", day, "' AND region = '", region, "'");
  const Rows regions_before = Dump("revenue_by_region");
  const Rows others_before =
      Dump("revenue_by_region", absl::StrCat("NOT (", in_partition, ")"));
  const Rows partition_before = Dump("revenue_by_region", in_partition);
  const Rows totals_before = Dump("daily_total");
  const Rows other_totals_before =
      Dump("daily_total", absl::StrCat("ds <> '", day, "'"));
  const Rows months_before = Dump("monthly_by_region");
  const std::string in_month =
      absl::StrCat("month = '", month, "' AND region = '", region, "'");
  const Rows other_months_before =
      Dump("monthly_by_region", absl::StrCat("NOT (", in_month, ")"));

  const std::string job = Submit(daemon, {"revenue_by_region", "--partitions",
                                          partition, "--reason", "refunds"});
  ASSERT_FALSE(job.empty());

  // The partition is the fixed logic's, and it changed; every other row of
  // every table is byte-identical.
  EXPECT_EQ(PublishedByRegion(in_partition),
            ExpectedByRegion("SUM(o.amount - o.refund)",
                             absl::StrCat("o.order_date = '", day,
                                          "' AND c.region = '", region, "'")));
  EXPECT_NE(Dump("revenue_by_region", in_partition), partition_before);
  EXPECT_EQ(Dump("revenue_by_region", absl::StrCat("NOT (", in_partition, ")")),
            others_before);
  EXPECT_EQ(PublishedTotals(), TotalsFromRegions());
  EXPECT_NE(Dump("daily_total"), totals_before);
  EXPECT_EQ(Dump("daily_total", absl::StrCat("ds <> '", day, "'")),
            other_totals_before);
  EXPECT_EQ(PublishedMonths(), MonthsFromRegions());
  EXPECT_NE(Dump("monthly_by_region"), months_before);
  EXPECT_EQ(Dump("monthly_by_region", absl::StrCat("NOT (", in_month, ")")),
            other_months_before);

  // Lineage names the three partitions.
  Sqlite state(data_dir_ + "/state.db", /*read_only=*/true);
  auto published = state.Query(
      "SELECT dataset, \"partition\" FROM lineage WHERE job_id = ?1 ORDER BY "
      "1, 2",
      {job});
  ASSERT_TRUE(published.has_value()) << state.error();
  EXPECT_EQ(*published,
            (Rows{{"daily_total", day},
                  {"monthly_by_region", absl::StrCat(month, "|", region)},
                  {"revenue_by_region", partition}}));

  // A rollback restores every table byte for byte.
  RunResult rollback = daemon.CtlJson(
      {"rollback", job, "--reason", "undo the refund fix"}, seconds(120));
  ASSERT_EQ(rollback.exit_code, 0) << rollback;
  EXPECT_EQ(Dump("revenue_by_region"), regions_before);
  EXPECT_EQ(Dump("daily_total"), totals_before);
  EXPECT_EQ(Dump("monthly_by_region"), months_before);
  ExpectCleanSigterm(daemon);
}

}  // namespace
}  // namespace e2e_time_key_test
}  // namespace backfill
