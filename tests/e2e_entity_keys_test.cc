// End-to-end: a backfill restricted to entity keys (`--keys`) through the
// real daemon and CLI. Only the keys' rows of the chosen days change; every
// other row stays byte-identical (full ordered dumps with storage types);
// the month rollup that reads the days is recomputed by partition; a
// rollback restores both tables byte for byte. Expectations are computed
// with plain SQL over the raw table.

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/e2e_support.h"

namespace backfill {
namespace e2e_entity_keys_test {
namespace {

using namespace ::backfill::e2e;  // NOLINT: test support
using std::chrono::seconds;
using ::testing::HasSubstr;

// The transform reads :keys, so a keyed run computes only its customers.
constexpr char kPipeline[] =
    R"yaml(warehouse: {engine: sqlite, path: warehouse.db}
datasets:
  - name: orders
    kind: source
    table: raw_orders
    partition: {column: order_date, grain: day}
  - name: customer_revenue
    kind: derived
    table: customer_revenue
    partition: {column: ds, grain: day}
    entity_key: customer_id
    upstream:
      - {dataset: orders, mapping: identity}
    transform: |
      SELECT order_date AS ds, customer_id,
             SUM(amount - refund) AS revenue, COUNT(*) AS orders
      FROM raw_orders
      WHERE order_date >= :partition_start AND order_date < :partition_end
        AND (:keys IS NULL
             OR CAST(customer_id AS TEXT) IN (SELECT value FROM json_each(:keys)))
      GROUP BY order_date, customer_id
    contract:
      columns: {ds: TEXT, customer_id: INTEGER, revenue: REAL, orders: INTEGER}
      primary_key: [ds, customer_id]
  - name: monthly_revenue
    kind: derived
    table: monthly_revenue
    partition: {column: month, grain: month}
    upstream:
      - {dataset: customer_revenue, mapping: rollup}
    transform: |
      SELECT :partition AS month, TOTAL(revenue) AS revenue,
             COUNT(DISTINCT customer_id) AS customers
      FROM customer_revenue
      WHERE ds >= :partition_start AND ds < :partition_end
    contract:
      columns: {month: TEXT, revenue: REAL, customers: INTEGER}
      primary_key: [month]
)yaml";

class EntityKeysTest : public E2eTest {
 protected:
  void SetUp() override {
    E2eTest::SetUp();
    Sqlite db(warehouse_);
    ASSERT_TRUE(db.error().empty()) << db.error();
    // March 2025: customers 1..6 order every day, amounts differ by day
    // and customer.
    std::string sql =
        "BEGIN; CREATE TABLE raw_orders (order_id INTEGER PRIMARY KEY, "
        "order_date TEXT NOT NULL, customer_id INTEGER NOT NULL, amount REAL "
        "NOT NULL, refund REAL NOT NULL DEFAULT 0);";
    for (int day = 1; day <= 31; ++day) {
      for (int c = 1; c <= 6; ++c) {
        absl::StrAppend(&sql,
                        "INSERT INTO raw_orders (order_date, customer_id, "
                        "amount) VALUES ('2025-03-",
                        day < 10 ? "0" : "", day, "', ", c, ", ", day * 10 + c,
                        ".5);");
      }
    }
    sql += "COMMIT;";
    ASSERT_TRUE(db.Exec(sql)) << db.error();
    WriteFile(pipelines_dir_ + "/keys.yaml", kPipeline);
  }

  // Every row of a table with the storage type of each value, in one order.
  std::vector<std::string> Dump(const std::string& table,
                                const std::string& where = "1") {
    Sqlite db(warehouse_, /*read_only=*/true);
    auto cols = db.Query(absl::StrCat("SELECT name FROM pragma_table_info('",
                                      table, "') ORDER BY cid"));
    EXPECT_TRUE(cols.has_value()) << db.error();
    std::vector<std::string> parts;
    for (const auto& c : cols.value_or(Rows{})) {
      parts.push_back(absl::StrCat("quote(\"", c[0], "\") || ':' || typeof(\"",
                                   c[0], "\")"));
    }
    std::string select = "SELECT ";
    for (size_t i = 0; i < parts.size(); ++i) {
      absl::StrAppend(&select, i ? " || '|' || " : "", parts[i]);
    }
    absl::StrAppend(&select, " FROM \"", table, "\" WHERE ", where,
                    " ORDER BY 1");
    auto rows = db.Query(select);
    EXPECT_TRUE(rows.has_value()) << db.error();
    std::vector<std::string> out;
    for (const auto& r : rows.value_or(Rows{})) out.push_back(r[0]);
    return out;
  }

  Rows Query(const std::string& sql) {
    Sqlite db(warehouse_, /*read_only=*/true);
    auto rows = db.Query(sql);
    EXPECT_TRUE(rows.has_value()) << db.error();
    return rows.value_or(Rows{});
  }

  std::string Submit(Daemon& daemon, std::vector<std::string> scope,
                     const std::string& reason) {
    return SubmitSucceeded(daemon, std::move(scope), reason);
  }
};

TEST_F(EntityKeysTest, TwoCustomersOfOneDayChangeAndNothingElse) {
  Daemon& daemon = NewDaemon();
  ASSERT_TRUE(daemon.Start());
  Submit(daemon,
         {"customer_revenue", "--from", "2025-03-01", "--to", "2025-04-01"},
         "initial load");
  ASSERT_EQ(Query("SELECT COUNT(*) FROM customer_revenue"), (Rows{{"186"}}));

  // Refunds land for customers 2, 5 and 6 on March 5th; only 2 and 5 are
  // backfilled (6 is someone else's ticket).
  {
    Sqlite db(warehouse_);
    ASSERT_TRUE(
        db.Exec("UPDATE raw_orders SET refund = 3.25 WHERE order_date "
                "= '2025-03-05' AND customer_id IN (2, 5, 6)"))
        << db.error();
  }
  const std::string keyed_rows = "ds = '2025-03-05' AND customer_id IN (2, 5)";
  const std::vector<std::string> others_before =
      Dump("customer_revenue", absl::StrCat("NOT (", keyed_rows, ")"));
  ASSERT_EQ(others_before.size(), 184u);
  const std::vector<std::string> revenue_before = Dump("customer_revenue");
  const std::vector<std::string> monthly_before = Dump("monthly_revenue");

  // The plan says which rows and what follows.
  RunResult plan = daemon.Ctl({"plan", "customer_revenue", "--partitions",
                               "2025-03-05", "--keys", "5,2"});
  ASSERT_EQ(plan.exit_code, 0) << plan;
  EXPECT_THAT(plan.out,
              HasSubstr("Only the rows of customer_revenue with 2 keys: 2, 5"));
  EXPECT_THAT(plan.out, HasSubstr("monthly_revenue"));

  const std::string job = Submit(
      daemon,
      {"customer_revenue", "--partitions", "2025-03-05", "--keys", "5,2"},
      "refunds of customers 2 and 5 on March 5th");
  ASSERT_FALSE(job.empty());

  // Every other row is byte-identical, customer 6's stale row included.
  EXPECT_EQ(Dump("customer_revenue", absl::StrCat("NOT (", keyed_rows, ")")),
            others_before);
  // The two customers' rows are the raw orders' sums.
  EXPECT_EQ(Query(absl::StrCat("SELECT ds, customer_id, revenue, orders FROM "
                               "customer_revenue WHERE ",
                               keyed_rows, " ORDER BY customer_id")),
            Query("SELECT order_date, customer_id, SUM(amount - refund), "
                  "COUNT(*) FROM raw_orders WHERE order_date = '2025-03-05' "
                  "AND customer_id IN (2, 5) GROUP BY 1, 2 ORDER BY 2"));
  EXPECT_NE(Query("SELECT revenue FROM customer_revenue WHERE ds = "
                  "'2025-03-05' AND customer_id = 6"),
            Query("SELECT SUM(amount - refund) FROM raw_orders WHERE "
                  "order_date = '2025-03-05' AND customer_id = 6"));
  // The month rollup was recomputed from the whole month as now published.
  EXPECT_EQ(Query("SELECT month, revenue, customers FROM monthly_revenue"),
            Query("SELECT '2025-03', TOTAL(revenue), COUNT(DISTINCT "
                  "customer_id) FROM customer_revenue WHERE ds >= "
                  "'2025-03-01' AND ds < '2025-04-01'"));
  EXPECT_NE(Dump("monthly_revenue"), monthly_before);

  // status shows the keys.
  RunResult status = daemon.Ctl({"status", job});
  ASSERT_EQ(status.exit_code, 0) << status;
  EXPECT_THAT(status.out, HasSubstr("Keys"));
  EXPECT_THAT(status.out, HasSubstr("2, 5"));

  // The lineage says which rows the job recomputed; the rollup's does not
  // (it was recomputed whole).
  {
    Sqlite state(data_dir_ + "/state.db", /*read_only=*/true);
    auto reasons = state.Query(
        "SELECT dataset, \"partition\", reason FROM lineage WHERE job_id = "
        "?1 ORDER BY dataset",
        {job});
    ASSERT_TRUE(reasons.has_value()) << state.error();
    EXPECT_EQ(*reasons,
              (Rows{{"customer_revenue", "2025-03-05",
                     "refunds of customers 2 and 5 on March 5th (recomputed "
                     "only the rows of entity keys 2, 5)"},
                    {"monthly_revenue", "2025-03",
                     "refunds of customers 2 and 5 on March 5th"}}));
  }

  // Rolled back, both tables are byte-identical to before the job.
  RunResult rolled = daemon.CtlJson(
      {"rollback", job, "--reason", "wrong refunds"}, seconds(120));
  ASSERT_EQ(rolled.exit_code, 0) << rolled;
  EXPECT_EQ(JsonString(rolled.out, "state"), "BACKFILL_STATE_ROLLED_BACK")
      << rolled;
  EXPECT_EQ(Dump("customer_revenue"), revenue_before);
  EXPECT_EQ(Dump("monthly_revenue"), monthly_before);
  ExpectCleanSigterm(daemon);
}

TEST_F(EntityKeysTest, KeysOnADatasetWithoutEntityKeyChangeNothing) {
  Daemon& daemon = NewDaemon();
  ASSERT_TRUE(daemon.Start());
  Submit(daemon,
         {"customer_revenue", "--from", "2025-03-01", "--to", "2025-03-03"},
         "initial load");
  const std::vector<std::string> before = Dump("monthly_revenue");
  RunResult r = daemon.Ctl({"submit", "monthly_revenue", "--partitions",
                            "2025-03", "--keys", "1", "--reason", "x"});
  EXPECT_EQ(r.exit_code, 1) << r;
  EXPECT_THAT(r.err, HasSubstr("INVALID_ARGUMENT"));
  EXPECT_THAT(r.err, HasSubstr("entity_key"));
  EXPECT_EQ(Dump("monthly_revenue"), before);
  Sqlite state(data_dir_ + "/state.db", /*read_only=*/true);
  EXPECT_EQ(state.Query("SELECT COUNT(*) FROM jobs"), (Rows{{"1"}}));
  ExpectCleanSigterm(daemon);
}

}  // namespace
}  // namespace e2e_entity_keys_test
}  // namespace backfill
