// End-to-end tests of cost before running, with the real backfilld and
// backfillctl: a second backfill of the same partitions is estimated at what
// the first one actually read (history), and budgets (--max-cost, a
// dataset's `max_cost:`) refuse a submit with FAILED_PRECONDITION creating
// nothing. Every expected figure is computed with plain SQL over the raw
// table.

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/e2e_support.h"

namespace backfill {
namespace e2e_cost_test {
namespace {

using namespace ::backfill::e2e;  // NOLINT: test support
using std::chrono::seconds;
using ::testing::HasSubstr;

constexpr char kPipeline[] =
    R"yaml(warehouse: {engine: sqlite, path: warehouse.db}
datasets:
  - name: orders
    kind: source
    table: raw_orders
    partition: {column: order_date, grain: day}
  - name: daily_amount
    kind: derived
    table: daily_amount
    partition: {column: ds, grain: day}
    upstream:
      - {dataset: orders, mapping: identity}
    transform: |
      SELECT :partition AS ds, COUNT(*) AS orders, TOTAL(amount) AS amount
      FROM raw_orders
      WHERE order_date >= :partition_start AND order_date < :partition_end
    contract:
      columns: {ds: TEXT, orders: INTEGER, amount: REAL}
      primary_key: [ds]
  - name: daily_capped
    kind: derived
    table: daily_capped
    partition: {column: ds, grain: day}
    upstream:
      - {dataset: orders, mapping: identity}
    transform: |
      SELECT :partition AS ds, COUNT(*) AS orders
      FROM raw_orders
      WHERE order_date >= :partition_start AND order_date < :partition_end
    contract:
      columns: {ds: TEXT, orders: INTEGER}
      primary_key: [ds]
    max_cost: 20
)yaml";

class CostE2eTest : public E2eTest {
 protected:
  void SetUp() override {
    E2eTest::SetUp();
    Sqlite db(warehouse_);
    ASSERT_TRUE(db.error().empty()) << db.error();
    // Day d of March holds 3 * d orders (d = 1..10).
    std::string sql =
        "BEGIN; CREATE TABLE raw_orders (order_id INTEGER PRIMARY KEY, "
        "order_date TEXT NOT NULL, amount REAL NOT NULL);"
        "CREATE INDEX raw_orders_date ON raw_orders (order_date);";
    for (int d = 1; d <= 10; ++d) {
      for (int i = 0; i < 3 * d; ++i) {
        absl::StrAppend(&sql,
                        "INSERT INTO raw_orders (order_date, amount) VALUES ('",
                        absl::StrFormat("2025-03-%02d %02d:00:00", d, i % 24),
                        "', ", i, ");");
      }
    }
    sql += "COMMIT;";
    ASSERT_TRUE(db.Exec(sql)) << db.error();
    WriteFile(pipelines_dir_ + "/cost.yaml", kPipeline);
  }

  int64_t Count(const std::string& sql) {
    Sqlite db(warehouse_, /*read_only=*/true);
    auto rows = db.Query(sql);
    EXPECT_TRUE(rows.has_value() && !rows->empty()) << db.error();
    return rows && !rows->empty() ? std::stoll((*rows)[0][0]) : -1;
  }
  // Orders in [from, to) with plain SQL.
  int64_t Orders(const std::string& from, const std::string& to) {
    return Count(
        absl::StrCat("SELECT COUNT(*) FROM raw_orders WHERE order_date >= '",
                     from, "' AND order_date < '", to, "'"));
  }
};

TEST_F(CostE2eTest, ASecondBackfillIsEstimatedAtWhatTheFirstOneRead) {
  Daemon& daemon = NewDaemon();
  ASSERT_TRUE(daemon.Start());
  const std::vector<std::string> scope = {"daily_amount", "--from",
                                          "2025-03-02", "--to", "2025-03-05"};
  const int64_t first_rows = Orders("2025-03-02", "2025-03-05");
  ASSERT_EQ(first_rows, 6 + 9 + 12);

  std::vector<std::string> plan = {"plan"};
  plan.insert(plan.end(), scope.begin(), scope.end());
  RunResult planned = daemon.CtlJson(plan);
  ASSERT_EQ(planned.exit_code, 0) << planned;
  EXPECT_EQ(JsonInt(planned.out, "backfill"), first_rows) << planned.out;
  EXPECT_EQ(JsonString(planned.out, "estimate_source"),
            "ESTIMATE_SOURCE_ROW_COUNTS");
  EXPECT_EQ(JsonInt(planned.out, "full_reload"),
            Count("SELECT COUNT(*) FROM raw_orders"));

  std::vector<std::string> submit = {"submit"};
  submit.insert(submit.end(), scope.begin(), scope.end());
  submit.insert(submit.end(), {"--reason", "first", "--wait"});
  RunResult first = daemon.CtlJson(submit, seconds(120));
  ASSERT_EQ(first.exit_code, 0) << first;
  EXPECT_EQ(JsonInt(first.out, "actual_cost"), first_rows) << first.out;

  // Late orders on the 3rd: the next plan still estimates from what the
  // first run read; the second run reads the new rows too.
  {
    Sqlite db(warehouse_);
    ASSERT_TRUE(db.Exec(
        "INSERT INTO raw_orders (order_date, amount) VALUES ('2025-03-03 "
        "23:00:00', 1), ('2025-03-03 23:10:00', 1), ('2025-03-03 23:20:00', "
        "1), ('2025-03-03 23:30:00', 1), ('2025-03-03 23:40:00', 1)"))
        << db.error();
  }
  RunResult again = daemon.CtlJson(plan);
  ASSERT_EQ(again.exit_code, 0) << again;
  EXPECT_EQ(JsonInt(again.out, "backfill"), JsonInt(first.out, "actual_cost"))
      << again.out;
  EXPECT_EQ(JsonString(again.out, "estimate_source"),
            "ESTIMATE_SOURCE_HISTORY");
  EXPECT_EQ(JsonInt(again.out, "partitions_from_history"), 3);
  RunResult human = daemon.Ctl(plan);
  ASSERT_EQ(human.exit_code, 0) << human;
  EXPECT_THAT(human.out, HasSubstr("Estimated from: daily_amount history (3/3 "
                                   "partitions)"));

  submit[submit.size() - 2] = "second";
  RunResult second = daemon.CtlJson(submit, seconds(120));
  ASSERT_EQ(second.exit_code, 0) << second;
  const int64_t second_rows = Orders("2025-03-02", "2025-03-05");
  ASSERT_EQ(second_rows, first_rows + 5);
  // Per dataset: the estimate (the first run's actual) and the actual.
  EXPECT_EQ(JsonInt(second.out, "estimated"), first_rows) << second.out;
  EXPECT_EQ(JsonInt(second.out, "actual"), second_rows) << second.out;
  EXPECT_EQ(JsonString(second.out, "source"), "ESTIMATE_SOURCE_HISTORY");
  const std::string id = JsonString(second.out, "id");
  RunResult status = daemon.Ctl({"status", id});
  ASSERT_EQ(status.exit_code, 0) << status;
  EXPECT_THAT(status.out,
              HasSubstr(absl::StrCat("estimated ", first_rows,
                                     " input_rows from history; actual ",
                                     second_rows, " input_rows")));
  RunResult list = daemon.Ctl({"list"});
  ASSERT_EQ(list.exit_code, 0) << list;
  EXPECT_THAT(list.out, HasSubstr(absl::StrCat(first_rows, "/", second_rows,
                                               " input_rows")));
}

TEST_F(CostE2eTest, BudgetsRefuseASubmitAndCreateNothing) {
  Daemon& daemon = NewDaemon();
  ASSERT_TRUE(daemon.Start());
  const int64_t rows = Orders("2025-03-02", "2025-03-05");
  const int64_t full = Count("SELECT COUNT(*) FROM raw_orders");
  const std::string refusal =
      absl::StrCat("estimated cost ", rows,
                   " input_rows exceeds --max-cost 10 (a full "
                   "reload costs ",
                   full, " input_rows): narrow the scope or raise the limit");

  RunResult refused =
      daemon.Ctl({"submit", "daily_amount", "--from", "2025-03-02", "--to",
                  "2025-03-05", "--reason", "too big", "--max-cost", "10"});
  EXPECT_NE(refused.exit_code, 0) << refused;
  EXPECT_THAT(refused.err,
              HasSubstr(absl::StrCat("FAILED_PRECONDITION: ", refusal)))
      << refused;

  // The plan is shown, saying a submit would be refused.
  RunResult plan = daemon.Ctl({"plan", "daily_amount", "--from", "2025-03-02",
                               "--to", "2025-03-05", "--max-cost", "10"});
  ASSERT_EQ(plan.exit_code, 0) << plan;
  EXPECT_THAT(plan.out, HasSubstr("Budget: --max-cost 10 input_rows"));
  EXPECT_THAT(plan.out,
              HasSubstr(absl::StrCat("A submit of this plan WOULD BE REFUSED: ",
                                     refusal)));
  RunResult plan_json =
      daemon.CtlJson({"plan", "daily_amount", "--from", "2025-03-02", "--to",
                      "2025-03-05", "--max-cost", "10"});
  ASSERT_EQ(plan_json.exit_code, 0) << plan_json;
  // The plan's total carries the refusal (the dataset has no budget), as
  // the API says it: the field, where the CLI says its flag.
  EXPECT_THAT(
      plan_json.out,
      HasSubstr(absl::StrCat(
          "\"refused\": \"",
          absl::StrReplaceAll(refusal, {{"--max-cost", "`max_cost`"}}), "\"")));

  // The dataset's own budget (max_cost: 20 in the pipeline file).
  RunResult capped =
      daemon.Ctl({"submit", "daily_capped", "--from", "2025-03-02", "--to",
                  "2025-03-05", "--reason", "too big for the dataset"});
  EXPECT_NE(capped.exit_code, 0) << capped;
  EXPECT_THAT(capped.err,
              HasSubstr(absl::StrCat(
                  "FAILED_PRECONDITION: estimated cost of dataset "
                  "daily_capped ",
                  rows, " input_rows exceeds its max_cost 20 (declared at ")))
      << capped;
  RunResult datasets = daemon.CtlJson({"datasets"});
  ASSERT_EQ(datasets.exit_code, 0) << datasets;
  EXPECT_THAT(datasets.out, HasSubstr("\"max_cost\": 20"));

  // A negative budget is a usage error.
  RunResult negative =
      daemon.Ctl({"submit", "daily_amount", "--from", "2025-03-02", "--to",
                  "2025-03-05", "--reason", "r", "--max-cost", "-5"});
  EXPECT_EQ(negative.exit_code, 2) << negative;

  RunResult list = daemon.CtlJson({"list"});
  ASSERT_EQ(list.exit_code, 0) << list;
  EXPECT_EQ(CountJobs(list.out), 0) << list.out;

  // Within the budgets the same submits run.
  RunResult ok = daemon.CtlJson(
      {"submit", "daily_capped", "--from", "2025-03-02", "--to", "2025-03-03",
       "--reason", "small enough", "--max-cost",
       absl::StrCat(Orders("2025-03-02", "2025-03-03")), "--wait"},
      seconds(120));
  ASSERT_EQ(ok.exit_code, 0) << ok;
  EXPECT_EQ(JsonString(ok.out, "state"), "BACKFILL_STATE_SUCCEEDED");
}

}  // namespace
}  // namespace e2e_cost_test
}  // namespace backfill
