// End-to-end tests of validation checks with the real backfilld and
// backfillctl: each failure mode of a backfill (schema drift, a dirty
// dimension join, a row-count collapse, a measure jump, duplicate keys,
// rows outside the partition, failed assertions) is stopped on staging, and
// the published table is byte-identical afterwards: a full ordered dump of
// quote(column) values and the table's DDL, taken with plain SQL, before and
// after. Severities: error ends VALIDATION_FAILED, hold waits in
// AWAITING_APPROVAL (across a restart, superseded by a newer job), warn
// publishes with the warning recorded and shown (in the job, and on each
// published partition by `why`). Broken SQL is refused at plan time with
// FILE:LINE and logged at start.

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "backfill/v1/backfill.pb.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tests/testing/e2e_support.h"

namespace backfill {
namespace e2e_checks_test {
namespace {

using namespace ::backfill::e2e;  // NOLINT: test support
using std::chrono::seconds;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kGoodTransform[] =
    R"sql(SELECT o.order_date AS ds, c.region AS region,
             SUM(o.amount - o.refund) AS revenue, COUNT(*) AS orders
      FROM raw_orders o JOIN dim_customers c ON c.customer_id = o.customer_id
      WHERE o.order_date >= :partition_start AND o.order_date < :partition_end
      GROUP BY 1, 2)sql";

constexpr char kColumns[] =
    "{ds: TEXT, region: TEXT, revenue: REAL, orders: INTEGER}";

// The pipeline: sources orders and customers (with a contract, so that a
// references check can name its key), daily_revenue with `transform`,
// `columns` and the `checks` lines (each "      - {...}"), and
// customer_revenue (per customer, LEFT JOIN to the dimension) with
// `customer_checks`.
std::string Pipeline(const std::string& transform = kGoodTransform,
                     const std::string& checks = "",
                     const std::string& columns = kColumns,
                     const std::string& customer_checks = "") {
  std::string yaml =
      absl::StrCat(R"yaml(warehouse: {engine: sqlite, path: warehouse.db}
datasets:
  - name: orders
    kind: source
    table: raw_orders
    partition: {column: order_date, grain: day}
  - name: customers
    kind: source
    table: dim_customers
    contract:
      columns: {customer_id: INTEGER, name: TEXT, region: TEXT}
  - name: daily_revenue
    kind: derived
    table: daily_revenue
    partition: {column: ds, grain: day}
    upstream:
      - {dataset: orders, mapping: identity}
      - {dataset: customers, mapping: all}
    transform: |
      )yaml",
                   transform, R"yaml(
    contract:
      columns: )yaml",
                   columns, R"yaml(
      primary_key: [ds, region]
)yaml");
  if (!checks.empty()) absl::StrAppend(&yaml, "    checks:\n", checks);
  absl::StrAppend(&yaml, R"yaml(  - name: customer_revenue
    kind: derived
    table: customer_revenue
    partition: {column: ds, grain: day}
    upstream:
      - {dataset: orders, mapping: identity}
      - {dataset: customers, mapping: all}
    transform: |
      SELECT o.order_date AS ds, o.customer_id AS customer_id,
             c.region AS region, SUM(o.amount) AS revenue
      FROM raw_orders o LEFT JOIN dim_customers c
        ON c.customer_id = o.customer_id
      WHERE o.order_date >= :partition_start AND o.order_date < :partition_end
      GROUP BY 1, 2, 3
    contract:
      columns: {ds: TEXT, customer_id: INTEGER, region: TEXT, revenue: REAL}
      primary_key: [ds, customer_id]
)yaml");
  if (!customer_checks.empty()) {
    absl::StrAppend(&yaml, "    checks:\n", customer_checks);
  }
  return yaml;
}

// The 1-based line of the first line of `yaml` containing `needle`.
int LineOf(const std::string& yaml, const std::string& needle) {
  const size_t at = yaml.find(needle);
  EXPECT_NE(at, std::string::npos) << needle;
  return 1 +
         static_cast<int>(std::count(yaml.begin(), yaml.begin() + at, '\n'));
}

class ChecksTest : public E2eTest {
 protected:
  void SetUp() override {
    E2eTest::SetUp();
    ASSERT_NO_FATAL_FAILURE(WriteWarehouse(warehouse_, 10, 30));
  }

  void WritePipeline(const std::string& yaml) {
    yaml_ = yaml;
    WriteFile(pipelines_dir_ + "/e2e.yaml", yaml);
  }

  // Starts a daemon on `yaml` and loads the 10 days of `dataset`.
  Daemon& StartAndLoad(const std::string& yaml,
                       const std::string& dataset = "daily_revenue") {
    WritePipeline(yaml);
    Daemon& daemon = NewDaemon();
    EXPECT_TRUE(daemon.Start());
    RunResult r =
        daemon.CtlJson({"submit", dataset, "--from", "2025-01-01", "--to",
                        "2025-01-11", "--reason", "initial load", "--wait"},
                       seconds(120));
    EXPECT_EQ(r.exit_code, 0) << r;
    EXPECT_EQ(JsonString(r.out, "state"), "BACKFILL_STATE_SUCCEEDED") << r;
    return daemon;
  }

  // Stops the daemon (SIGTERM) and starts it again on `yaml`.
  void Restart(Daemon& daemon, const std::string& yaml) {
    daemon.Signal(SIGTERM);
    ASSERT_EQ(daemon.Wait(seconds(60)), std::optional<int>(0));
    WritePipeline(yaml);
    ASSERT_TRUE(daemon.Start());
  }

  // Every row of `table` as quote()d values in a total order, plus its DDL:
  // equal dumps mean byte-identical contents and schema.
  std::string Dump(const std::string& table = "daily_revenue") {
    Sqlite db(warehouse_, /*read_only=*/true);
    auto ddl =
        db.Query("SELECT sql FROM sqlite_master WHERE name = ?1", {table});
    EXPECT_TRUE(ddl.has_value()) << db.error();
    auto cols = db.Query("SELECT name FROM pragma_table_info(?1)", {table});
    EXPECT_TRUE(cols.has_value()) << db.error();
    std::vector<std::string> quoted;
    for (const auto& c : cols.value_or(Rows{})) {
      quoted.push_back(absl::StrCat("quote(\"", c[0], "\")"));
    }
    std::vector<std::string> order;
    for (size_t i = 1; i <= quoted.size(); ++i)
      order.push_back(std::to_string(i));
    auto rows = db.Query(absl::StrCat("SELECT ", absl::StrJoin(quoted, ", "),
                                      " FROM \"", table, "\" ORDER BY ",
                                      absl::StrJoin(order, ", ")));
    EXPECT_TRUE(rows.has_value()) << db.error();
    std::string out = ddl && !ddl->empty() ? (*ddl)[0][0] : "<no table>";
    for (const auto& r : rows.value_or(Rows{})) {
      absl::StrAppend(&out, "\n", absl::StrJoin(r, "|"));
    }
    return out;
  }

  int64_t LineageRows() {
    Sqlite db(data_dir_ + "/state.db", /*read_only=*/true);
    auto rows = db.Query("SELECT COUNT(*) FROM lineage");
    EXPECT_TRUE(rows.has_value()) << db.error();
    return rows && !rows->empty() ? std::stoll((*rows)[0][0]) : -1;
  }

  void Exec(const std::string& sql) {
    Sqlite db(warehouse_);
    ASSERT_TRUE(db.Exec(sql)) << db.error();
  }

  // Submits the 10 days again and waits; returns the job id. The exit code
  // is 0 only for SUCCEEDED.
  std::string Backfill(Daemon& daemon, const std::string& expected_state,
                       const std::string& dataset = "daily_revenue") {
    RunResult r =
        daemon.CtlJson({"submit", dataset, "--from", "2025-01-01", "--to",
                        "2025-01-11", "--reason", "again", "--wait"},
                       seconds(120));
    EXPECT_EQ(JsonString(r.out, "state"), expected_state) << r;
    EXPECT_EQ(r.exit_code == 0, expected_state == "BACKFILL_STATE_SUCCEEDED")
        << r;
    return JsonString(r.out, "id");
  }

  std::string yaml_;
};

// ---- Schema drift ----------------------------------------------------------

TEST_F(ChecksTest, ExtraColumnIsRefusedAtPlanTimeNamingFileLineAndColumn) {
  Daemon& daemon = StartAndLoad(Pipeline());
  const std::string before = Dump();
  const std::string extra = absl::StrReplaceAll(
      kGoodTransform,
      {{"COUNT(*) AS orders", "COUNT(*) AS orders, 1 AS bonus"}});
  ASSERT_NO_FATAL_FAILURE(Restart(daemon, Pipeline(extra)));
  const std::string at = absl::StrCat(
      pipelines_dir_, "/e2e.yaml:", LineOf(yaml_, "    transform: |"),
      ": dataset \"daily_revenue\"");
  // Logged at start, refused by plan and submit, nothing changed.
  EXPECT_THAT(ReadFile(daemon.log()), HasSubstr(at));
  for (const std::string command : {"plan", "submit"}) {
    std::vector<std::string> args = {
        command, "daily_revenue", "--from", "2025-01-01", "--to", "2025-01-11"};
    if (command == "submit") {
      args.insert(args.end(), {"--reason", "x"});
    }
    RunResult r = daemon.Ctl(args);
    EXPECT_NE(r.exit_code, 0) << r;
    EXPECT_THAT(r.err, HasSubstr(at)) << r;
    EXPECT_THAT(r.err, HasSubstr("bonus")) << r;
    EXPECT_THAT(r.err, HasSubstr("not in the contract")) << r;
  }
  EXPECT_EQ(Dump(), before);
  // No job was created.
  RunResult list = daemon.CtlJson({"list"});
  EXPECT_EQ(CountJobs(list.out), 1) << list;
}

TEST_F(ChecksTest, RenamedColumnIsRefusedAtPlanTime) {
  Daemon& daemon = StartAndLoad(Pipeline());
  const std::string before = Dump();
  const std::string renamed =
      absl::StrReplaceAll(kGoodTransform, {{"AS revenue,", "AS revenue_eur,"}});
  ASSERT_NO_FATAL_FAILURE(Restart(daemon, Pipeline(renamed)));
  RunResult r = daemon.Ctl(
      {"plan", "daily_revenue", "--from", "2025-01-01", "--to", "2025-01-11"});
  EXPECT_NE(r.exit_code, 0) << r;
  EXPECT_THAT(r.err, HasSubstr("does not output contract column revenue")) << r;
  EXPECT_THAT(r.err, HasSubstr("revenue_eur")) << r;
  EXPECT_EQ(Dump(), before);
}

TEST_F(ChecksTest, RetypedValuesFailValidationNamingTheColumn) {
  Daemon& daemon = StartAndLoad(Pipeline());
  const std::string before = Dump();
  const int64_t lineage = LineageRows();
  // revenue now comes out as text ("123.00 EUR"), which a REAL column keeps
  // as text.
  const std::string retyped = absl::StrReplaceAll(
      kGoodTransform, {{"SUM(o.amount - o.refund) AS revenue",
                        "printf('%.2f EUR', SUM(o.amount - o.refund)) AS "
                        "revenue"}});
  ASSERT_NO_FATAL_FAILURE(Restart(daemon, Pipeline(retyped)));
  const std::string id = Backfill(daemon, "BACKFILL_STATE_VALIDATION_FAILED");
  RunResult status = daemon.Ctl({"status", id});
  EXPECT_THAT(status.out, HasSubstr("FAILED  schema on daily_revenue"))
      << status;
  EXPECT_THAT(status.out, HasSubstr("revenue value that is not REAL"))
      << status;
  EXPECT_THAT(status.out, HasSubstr("EUR")) << status;  // a sample row
  EXPECT_EQ(Dump(), before);
  EXPECT_EQ(LineageRows(), lineage);
}

TEST_F(ChecksTest, ContractTypeChangedAgainstThePublishedTableFails) {
  Daemon& daemon = StartAndLoad(Pipeline());
  const std::string before = Dump();
  ASSERT_NO_FATAL_FAILURE(Restart(
      daemon, Pipeline(kGoodTransform, "",
                       "{ds: TEXT, region: TEXT, revenue: TEXT, orders: "
                       "INTEGER}")));
  const std::string id = Backfill(daemon, "BACKFILL_STATE_VALIDATION_FAILED");
  RunResult status = daemon.CtlJson({"status", id});
  EXPECT_THAT(JsonString(status.out, "message"),
              HasSubstr("\\\"revenue\\\" is REAL, the contract says TEXT"))
      << status;
  EXPECT_EQ(Dump(), before);
}

TEST_F(ChecksTest, PublishedTableWithAColumnOutsideTheContractFails) {
  Daemon& daemon = StartAndLoad(Pipeline());
  Exec("ALTER TABLE daily_revenue ADD COLUMN note TEXT");
  // Corrected orders: every day changes (a rerun of identical data would
  // publish nothing, and so check nothing: early cutoff).
  Exec("UPDATE raw_orders SET amount = amount + 1");
  const std::string before = Dump();
  const std::string id = Backfill(daemon, "BACKFILL_STATE_VALIDATION_FAILED");
  RunResult status = daemon.Ctl({"status", id});
  EXPECT_THAT(status.out,
              HasSubstr("the published table daily_revenue has a column not "
                        "in the contract: \"note\""))
      << status;
  EXPECT_EQ(Dump(), before);
}

// ---- Data checks -----------------------------------------------------------

TEST_F(ChecksTest, DirtyDimensionJoinFailsReferencesAndNotNull) {
  Daemon& daemon = StartAndLoad(
      Pipeline(kGoodTransform, "", kColumns,
               "      - {kind: references, column: customer_id, dataset: "
               "customers, key: customer_id, max_orphans: 0}\n"
               "      - {kind: not_null, columns: [region]}\n"),
      "customer_revenue");
  const std::string before = Dump("customer_revenue");
  // Two customers vanish from the dimension: their orders join to nothing.
  Exec("DELETE FROM dim_customers WHERE customer_id IN (3, 7)");
  Sqlite db(warehouse_, /*read_only=*/true);
  auto orphans = db.Query(
      "SELECT order_date, COUNT(DISTINCT customer_id) FROM raw_orders WHERE "
      "customer_id IN (3, 7) GROUP BY 1 ORDER BY 1");
  ASSERT_TRUE(orphans.has_value() && !orphans->empty()) << db.error();
  const std::string id =
      Backfill(daemon, "BACKFILL_STATE_VALIDATION_FAILED", "customer_revenue");
  RunResult json = daemon.CtlJson({"status", id});
  // One failing references result per day with orphans, each with the count
  // plain SQL finds.
  for (const auto& row : *orphans) {
    const std::string rows = row[1] == "1" ? "1 row" : row[1] + " rows";
    EXPECT_THAT(json.out,
                HasSubstr(absl::StrCat("\"partition\": \"", row[0], "\"")))
        << json;
    EXPECT_THAT(json.out, HasSubstr(absl::StrCat(rows,
                                                 " with no matching "
                                                 "customers.customer_id")))
        << json;
  }
  RunResult status = daemon.Ctl({"status", id});
  EXPECT_THAT(status.out, HasSubstr("FAILED  references(customer_id) on "
                                    "customer_revenue"))
      << status;
  EXPECT_THAT(status.out, HasSubstr("FAILED  not_null(region)")) << status;
  EXPECT_THAT(status.out, HasSubstr("e.g. (ds='")) << status;
  EXPECT_EQ(Dump("customer_revenue"), before);
}

TEST_F(ChecksTest, RowCountCollapseOnOneDayPublishesNoneOfTheTenDays) {
  Daemon& daemon = StartAndLoad(Pipeline(
      kGoodTransform, "      - {kind: row_change, max_change: 20%}\n"));
  const std::string before = Dump();
  const int64_t lineage = LineageRows();
  Sqlite db(warehouse_, /*read_only=*/true);
  auto published =
      db.Query("SELECT COUNT(*) FROM daily_revenue WHERE ds = '2025-01-05'");
  ASSERT_TRUE(published.has_value()) << db.error();
  // 2025-01-05 keeps the orders of one region only; every other day changes
  // its amounts (so a publish would be visible everywhere).
  Exec(
      "DELETE FROM raw_orders WHERE order_date = '2025-01-05' AND customer_id "
      "IN (SELECT customer_id FROM dim_customers WHERE region <> 'north');"
      "UPDATE raw_orders SET amount = amount + 1 WHERE order_date <> "
      "'2025-01-05'");
  const std::string id = Backfill(daemon, "BACKFILL_STATE_VALIDATION_FAILED");
  RunResult json = daemon.CtlJson({"status", id});
  const std::string message = JsonString(json.out, "message");
  EXPECT_THAT(message, HasSubstr("row_change on daily_revenue 2025-01-05: "
                                 "staged 1 row where " +
                                 (*published)[0][0] + " are published"))
      << json;
  EXPECT_THAT(message, Not(HasSubstr("2025-01-04"))) << json;
  RunResult status = daemon.Ctl({"status", id});
  EXPECT_THAT(status.out, HasSubstr("4 checks: 3 passed, 1 failed"))
      << status;  // partition, primary_key, schema, row_change
  EXPECT_EQ(Dump(), before);
  EXPECT_EQ(LineageRows(), lineage);
}

TEST_F(ChecksTest, MeasureJumpHoldsTheJobAcrossARestartUntilSuperseded) {
  const std::string yaml = Pipeline(
      kGoodTransform,
      "      - {kind: measure_change, column: revenue, max_change: 30%, "
      "severity: hold}\n");
  Daemon& daemon = StartAndLoad(yaml);
  const std::string before = Dump();
  Exec(
      "UPDATE raw_orders SET amount = amount * 10 WHERE order_date = "
      "'2025-01-03'");
  const std::string id = Backfill(daemon, "BACKFILL_STATE_AWAITING_APPROVAL");
  RunResult status = daemon.Ctl({"status", id});
  EXPECT_THAT(status.out, HasSubstr("HELD  measure_change(revenue) on "
                                    "daily_revenue 2025-01-03"))
      << status;
  EXPECT_EQ(Dump(), before);
  // A restart leaves it waiting.
  ASSERT_NO_FATAL_FAILURE(Restart(daemon, yaml));
  RunResult again = daemon.CtlJson({"status", id});
  EXPECT_EQ(JsonString(again.out, "state"), "BACKFILL_STATE_AWAITING_APPROVAL")
      << again;
  EXPECT_EQ(Dump(), before);
  // It holds no partitions: a newer job of the same days starts at once and
  // supersedes it (this one holds too: the data still jumps).
  Exec(
      "UPDATE raw_orders SET amount = amount / 10 WHERE order_date = "
      "'2025-01-03'");
  Backfill(daemon, "BACKFILL_STATE_SUCCEEDED");
  RunResult held = daemon.CtlJson({"status", id});
  EXPECT_EQ(JsonString(held.out, "state"), "BACKFILL_STATE_CANCELLED") << held;
}

TEST_F(ChecksTest, WarningIsRecordedShownAndTheJobPublishes) {
  Daemon& daemon = StartAndLoad(
      Pipeline(kGoodTransform,
               "      - {kind: assert, name: no_negative, sql: \"SELECT * FROM "
               "daily_revenue WHERE revenue < 0\", severity: warn}\n"));
  // Refunds above the amount on one day make a region's revenue negative;
  // the day before changes too, and passes.
  Exec(
      "UPDATE raw_orders SET refund = amount * 3 WHERE order_date = "
      "'2025-01-06';"
      "UPDATE raw_orders SET amount = amount + 1 WHERE order_date = "
      "'2025-01-05'");
  const std::string id = Backfill(daemon, "BACKFILL_STATE_SUCCEEDED");
  EXPECT_EQ(PublishedRevenue(warehouse_, "2025-01-01", "2025-01-11"),
            ExpectedRevenue(warehouse_, "2025-01-01", "2025-01-11"));
  RunResult status = daemon.Ctl({"status", id});
  EXPECT_THAT(status.out, HasSubstr("WARNED  no_negative on daily_revenue "
                                    "2025-01-06"))
      << status;
  RunResult json = daemon.CtlJson({"status", id});
  EXPECT_THAT(json.out, HasSubstr("\"severity\": \"CHECK_SEVERITY_WARN\""))
      << json;

  // `why` (ExplainPartition): this job's version of 2025-01-06 carries the
  // warning with its rows, its version of 2025-01-05 a pass (the job kept
  // its one failing partition, so every other one passed); the first
  // load's versions passed. Every region of 2025-01-06 has a negative
  // revenue: the assertion returns one row per region.
  Sqlite warehouse(warehouse_, /*read_only=*/true);
  auto regions = warehouse.Query(
      "SELECT COUNT(DISTINCT c.region) FROM raw_orders o JOIN dim_customers "
      "c ON c.customer_id = o.customer_id WHERE o.order_date = "
      "'2025-01-06'");
  ASSERT_TRUE(regions.has_value()) << warehouse.error();
  const int negative = std::stoi((*regions)[0][0]);
  ASSERT_GT(negative, 0);
  const std::string returned =
      absl::StrCat(negative, negative == 1 ? " row" : " rows", " returned");
  // The no_negative result of each version of `day`, newest first.
  auto no_negative = [&](const std::string& day) {
    std::vector<v1::CheckResult> out;
    RunResult why = daemon.CtlJson({"why", "daily_revenue", day});
    EXPECT_EQ(why.exit_code, 0) << why;
    v1::ExplainPartitionResponse history;
    EXPECT_TRUE(
        google::protobuf::util::JsonStringToMessage(why.out, &history).ok())
        << why.out;
    for (const v1::PartitionVersion& v : history.versions()) {
      int found = 0;
      for (const v1::CheckResult& c : v.checks()) {
        if (c.name() != "no_negative") continue;
        ++found;
        out.push_back(c);
      }
      EXPECT_EQ(found, 1) << why.out;
    }
    EXPECT_EQ(history.versions_size(), 2) << why.out;
    if (history.versions_size() > 0) {
      EXPECT_EQ(history.versions(0).backfill_id(), id) << why.out;
    }
    return out;
  };
  const std::vector<v1::CheckResult> day6 = no_negative("2025-01-06");
  ASSERT_EQ(day6.size(), 2u);
  EXPECT_FALSE(day6[0].passed());
  EXPECT_FALSE(day6[0].summary());
  EXPECT_EQ(day6[0].partition(), "2025-01-06");
  EXPECT_EQ(day6[0].severity(), v1::CHECK_SEVERITY_WARN);
  EXPECT_EQ(day6[0].observed(), returned);
  EXPECT_EQ(day6[0].allowed(), "no row returned");
  EXPECT_EQ(day6[0].sample_rows_size(), std::min(negative, 3));
  for (const std::string& row : day6[0].sample_rows()) {
    EXPECT_THAT(row, HasSubstr("2025-01-06"));
  }
  EXPECT_TRUE(day6[1].passed());
  EXPECT_EQ(day6[1].partition(), "2025-01-06");
  const std::vector<v1::CheckResult> day5 = no_negative("2025-01-05");
  ASSERT_EQ(day5.size(), 2u);
  for (const v1::CheckResult& c : day5) {
    EXPECT_TRUE(c.passed());
    EXPECT_FALSE(c.summary());
    EXPECT_EQ(c.partition(), "2025-01-05");
    EXPECT_EQ(c.message(), "passed");
  }
  RunResult text = daemon.Ctl({"why", "daily_revenue", "2025-01-06"});
  EXPECT_THAT(text.out,
              HasSubstr(absl::StrCat("no_negative (warn): FAILED: observed ",
                                     returned, "; allowed no row returned")))
      << text;
  EXPECT_THAT(text.out, HasSubstr("no_negative: passed")) << text;
}

TEST_F(ChecksTest, AssertionReadsOnlyThePartitionWithBoundParameters) {
  // Both assertions read daily_revenue, which is the partition's staged
  // rows: the first never finds a row of another day; the second fails on
  // 2025-01-04 only.
  Daemon& daemon = StartAndLoad(Pipeline());
  const std::string before = Dump();
  ASSERT_NO_FATAL_FAILURE(Restart(
      daemon,
      Pipeline(
          kGoodTransform,
          "      - {kind: assert, name: own_day, sql: \"SELECT * FROM "
          "daily_revenue WHERE ds < :partition_start OR ds >= "
          ":partition_end\"}\n"
          "      - {kind: assert, name: day_four, sql: \"SELECT ds, "
          "region FROM daily_revenue WHERE :partition = '2025-01-04'\"}\n")));
  // Every day changes, so that every partition is checked (the checks
  // judge what would be published).
  Exec("UPDATE raw_orders SET amount = amount + 1");
  const std::string id = Backfill(daemon, "BACKFILL_STATE_VALIDATION_FAILED");
  RunResult json = daemon.CtlJson({"status", id});
  const std::string message = JsonString(json.out, "message");
  EXPECT_THAT(message, HasSubstr("day_four on daily_revenue 2025-01-04"))
      << json;
  EXPECT_THAT(message, Not(HasSubstr("own_day"))) << json;
  Sqlite db(warehouse_, /*read_only=*/true);
  auto regions = db.Query(
      "SELECT COUNT(DISTINCT c.region) FROM raw_orders o JOIN dim_customers c "
      "USING (customer_id) WHERE o.order_date = '2025-01-04'");
  ASSERT_TRUE(regions.has_value()) << db.error();
  EXPECT_THAT(message,
              HasSubstr(absl::StrCat("returned ", (*regions)[0][0], " rows")))
      << json;
  EXPECT_EQ(Dump(), before);
}

TEST_F(ChecksTest, MinRowsFailsTheEmptyDay) {
  Daemon& daemon = StartAndLoad(
      Pipeline(kGoodTransform, "      - {kind: min_rows, min: 1}\n"));
  const std::string before = Dump();
  Exec("DELETE FROM raw_orders WHERE order_date = '2025-01-07'");
  const std::string id = Backfill(daemon, "BACKFILL_STATE_VALIDATION_FAILED");
  RunResult json = daemon.CtlJson({"status", id});
  EXPECT_THAT(JsonString(json.out, "message"),
              HasSubstr("min_rows on daily_revenue 2025-01-07: staged 0 rows"))
      << json;
  EXPECT_EQ(Dump(), before);
}

TEST_F(ChecksTest, DuplicateKeyFailsValidation) {
  Daemon& daemon = StartAndLoad(Pipeline());
  const std::string before = Dump();
  const std::string dup = absl::StrReplaceAll(
      kGoodTransform, {{"GROUP BY 1, 2", "GROUP BY 1, 2, o.customer_id % 2"}});
  ASSERT_NO_FATAL_FAILURE(Restart(daemon, Pipeline(dup)));
  const std::string id = Backfill(daemon, "BACKFILL_STATE_VALIDATION_FAILED");
  RunResult status = daemon.Ctl({"status", id});
  EXPECT_THAT(status.out, HasSubstr("FAILED  primary_key on daily_revenue"))
      << status;
  EXPECT_THAT(status.out, HasSubstr("not unique")) << status;
  EXPECT_EQ(Dump(), before);
}

TEST_F(ChecksTest, RowsOutsideThePartitionPublishNothing) {
  Daemon& daemon = StartAndLoad(Pipeline());
  const std::string before = Dump();
  const std::string shifted = absl::StrReplaceAll(
      kGoodTransform, {{"SELECT o.order_date AS ds",
                        "SELECT date(o.order_date, '+1 day') AS ds"}});
  ASSERT_NO_FATAL_FAILURE(Restart(daemon, Pipeline(shifted)));
  const std::string id = Backfill(daemon, "BACKFILL_STATE_FAILED");
  RunResult json = daemon.CtlJson({"status", id});
  EXPECT_THAT(JsonString(json.out, "message"), HasSubstr("fall outside"))
      << json;
  EXPECT_EQ(Dump(), before);
}

// ---- Static check
// ------------------------------------------------------------

TEST_F(ChecksTest, BrokenSqlIsLoggedAtStartAndRefusedAtPlanTime) {
  const std::string broken = absl::StrReplaceAll(
      kGoodTransform,
      {{"SUM(o.amount - o.refund)", "SUM(o.amount - o.refnud)"}});
  const std::string yaml =
      Pipeline(broken,
               "      - {kind: assert, name: bad, sql: \"SELECT * FROM "
               "no_such_table\"}\n");
  WritePipeline(yaml);
  Daemon& daemon = NewDaemon();
  ASSERT_TRUE(daemon.Start());  // reported, not fatal
  const std::string file = pipelines_dir_ + "/e2e.yaml";
  const std::string transform_at =
      absl::StrCat(file, ":", LineOf(yaml, "    transform: |"),
                   ": dataset \"daily_revenue\": the transform does not "
                   "compile: sqlite: prepare: no such column: o.refnud");
  const std::string assert_at =
      absl::StrCat(file, ":", LineOf(yaml, "name: bad"),
                   ": dataset \"daily_revenue\": check \"bad\": the assertion "
                   "does not compile: sqlite: prepare: no such table: "
                   "no_such_table");
  const std::string log = ReadFile(daemon.log());
  EXPECT_THAT(log, HasSubstr(transform_at));
  EXPECT_THAT(log, HasSubstr(assert_at));
  RunResult r = daemon.Ctl(
      {"plan", "daily_revenue", "--from", "2025-01-01", "--to", "2025-01-03"});
  EXPECT_NE(r.exit_code, 0) << r;
  EXPECT_THAT(r.err, HasSubstr(transform_at)) << r;
  EXPECT_THAT(r.err, HasSubstr(assert_at)) << r;
  // The other dataset is fine, and its table (created by its first
  // publish) not existing yet is no error.
  RunResult ok = daemon.Ctl({"plan", "customer_revenue", "--from", "2025-01-01",
                             "--to", "2025-01-03"});
  EXPECT_EQ(ok.exit_code, 0) << ok;
}

TEST_F(ChecksTest, DerivedUpstreamNotPublishedYetIsNoError) {
  // daily_total (per day) and region_totals (all of it) read
  // daily_revenue, which no publish has created yet.
  const std::string yaml = Pipeline() + fixtures::RevenueDependentsYaml();
  WritePipeline(yaml);
  Daemon& daemon = NewDaemon();
  ASSERT_TRUE(daemon.Start());
  EXPECT_THAT(ReadFile(daemon.log()), Not(HasSubstr("pipeline SQL:")));
  RunResult r =
      daemon.CtlJson({"submit", "daily_revenue", "--from", "2025-01-01", "--to",
                      "2025-01-04", "--reason", "first load", "--wait"});
  EXPECT_EQ(r.exit_code, 0) << r;
  Sqlite db(warehouse_, /*read_only=*/true);
  auto totals = db.Query("SELECT COUNT(*) FROM daily_total");
  ASSERT_TRUE(totals.has_value()) << db.error();
  EXPECT_EQ((*totals)[0][0], "3");
}

}  // namespace
}  // namespace e2e_checks_test
}  // namespace backfill
