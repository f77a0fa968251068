// SQLite-only tests of what checks read: values of another storage type than
// their column's declared one, which only SQLite's untyped staging tables can
// hold (the other check calls of the engine are in the conformance suite,
// storage_engine_conformance_checks_test.cc), with expectations computed by
// plain SQL on the same file. Also the SQLite state store's check results.

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "core/model/partition.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/sqlite/sqlite_db.h"
#include "storage/sqlite/sqlite_engine.h"
#include "storage/sqlite/state/sqlite_state_store.h"
#include "tests/testing/warehouse_test.h"

namespace backfill {
namespace storage_checks_test {
namespace {

using ::testing::HasSubstr;

const std::vector<std::string> kDays = {"2025-01-01", "2025-01-02",
                                        "2025-01-03"};

class SqliteEngineChecksTest : public testing::WarehouseTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(testing::WarehouseTest::SetUp());
    Exec(R"sql(
      CREATE TABLE raw_orders (order_id INTEGER PRIMARY KEY, order_date TEXT,
                               customer_id INTEGER, amount REAL);
      CREATE TABLE dim_customers (customer_id INTEGER PRIMARY KEY,
                                  region TEXT);
      INSERT INTO dim_customers VALUES (1, 'EU'), (2, 'US'), (3, 'EU');
      INSERT INTO raw_orders VALUES
        (1, '2025-01-01', 1, 10), (2, '2025-01-01', 2, 20),
        (3, '2025-01-01', 4, 30), (4, '2025-01-02', 1, 40),
        (5, '2025-01-02', 5, 50), (6, '2025-01-02', 5, 5),
        (7, '2025-01-03', 3, 70), (8, '2025-01-03', 2, 7);
    )sql");
    auto engine = SqliteEngine::Open(path_, 2);
    ASSERT_TRUE(engine.ok()) << engine.status();
    engine_ = *std::move(engine);
    ASSERT_TRUE(engine_->Claim("store", false).ok());

    orders_.name = "orders";
    orders_.kind = DatasetKind::kSource;
    orders_.table = "raw_orders";
    orders_.partition = PartitionSpec{"order_date", Grain::kDay, {}};
    customers_.name = "customers";
    customers_.kind = DatasetKind::kSource;
    customers_.table = "dim_customers";
    customers_.columns = {{"customer_id", "INTEGER"}, {"region", "TEXT"}};

    // Per customer and day; a customer missing from the dimension gets a
    // NULL region (LEFT JOIN).
    cust_.name = "cust_rev";
    cust_.kind = DatasetKind::kDerived;
    cust_.table = "cust_rev";
    cust_.partition = PartitionSpec{"ds", Grain::kDay, {}};
    cust_.upstream = {{"orders", Mapping::kIdentity},
                      {"customers", Mapping::kAll}};
    cust_.transform =
        "SELECT o.order_date AS ds, o.customer_id AS customer_id, c.region "
        "AS region, SUM(o.amount) AS revenue FROM raw_orders o LEFT JOIN "
        "dim_customers c ON c.customer_id = o.customer_id WHERE "
        "o.order_date >= :partition_start AND o.order_date < :partition_end "
        "GROUP BY 1, 2, 3";
    cust_.columns = {{"ds", "TEXT"},
                     {"customer_id", "INTEGER"},
                     {"region", "TEXT"},
                     {"revenue", "REAL"}};
    cust_.primary_key = {"ds", "customer_id"};
  }

  void TearDown() override {
    engine_.reset();
    testing::WarehouseTest::TearDown();
  }

  // "key -> value" of a two-column query.
  std::map<std::string, std::string> Map(const std::string& sql) {
    std::map<std::string, std::string> out;
    auto q = db_->Prepare(sql);
    EXPECT_TRUE(q.ok()) << q.status();
    if (!q.ok()) return out;
    while (true) {
      auto row = q->Step();
      EXPECT_TRUE(row.ok()) << row.status();
      if (!row.ok() || !*row) break;
      out[q->ColumnText(0)] = q->ColumnText(1);
    }
    return out;
  }

  JobLayout Stage(const std::string& job, const DatasetSpec& ds,
                  const std::vector<std::string>& days) {
    JobLayout layout;
    layout.job_id = job;
    layout.items = {{&ds, days}};
    layout.pinned = {&customers_};
    EXPECT_TRUE(engine_->PrepareJob(layout).ok());
    for (const std::string& day : days) {
      auto r = engine_->StagePartition(
          job, ds, day, {{&orders_, day}, {&customers_, std::nullopt}});
      EXPECT_TRUE(r.ok()) << r.status();
    }
    return layout;
  }

  std::unique_ptr<SqliteEngine> engine_;
  DatasetSpec orders_, customers_, cust_;
};

TEST_F(SqliteEngineChecksTest, ValuesOfAnotherTypeAreCounted) {
  DatasetSpec typed = cust_;
  typed.name = "typed";
  typed.table = "typed";
  typed.transform =
      "SELECT :partition AS ds, order_id AS customer_id, 'n/a' AS region, "
      "CASE WHEN order_id % 2 = 0 THEN 'unknown' ELSE amount END AS revenue "
      "FROM raw_orders WHERE order_date = :partition";
  Stage("bf-1", typed, kDays);
  ProfileRequest request;
  request.types = true;
  auto profile = engine_->ProfileStaged("bf-1", typed, request);
  ASSERT_TRUE(profile.ok()) << profile.status();
  const auto expected = Map(
      "SELECT order_date, SUM(order_id % 2 = 0) FROM raw_orders GROUP BY 1");
  for (const auto& [day, p] : *profile) {
    const int64_t want = std::stoll(expected.at(day));
    if (want == 0) {
      EXPECT_FALSE(p.type_mismatches().count("revenue")) << day;
      continue;
    }
    ASSERT_TRUE(p.type_mismatches().count("revenue")) << day;
    EXPECT_EQ(p.type_mismatches().at("revenue").count, want) << day;
    EXPECT_THAT(p.type_mismatches().at("revenue").samples[0],
                HasSubstr("revenue='unknown'"));
  }
}

// ---- State store
// ---------------------------------------------------------------

TEST(SqliteCheckResultsTest, ReplacedAtomicallyAndListedInOrder) {
  std::string tmpl = ::testing::TempDir() + "/state_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
  const std::string path = tmpl + "/state.db";
  auto store = SqliteStateStore::Open(path);
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_GE(SqliteStateStore::SchemaVersion(), 4);  // check_results: 4
  Job job;
  job.request.dataset = "d";
  job.request.reason = "r";
  DatasetPlan dp;
  dp.dataset = "d";
  dp.partitions = {"2025-01-01"};
  job.plan.datasets = {dp};
  auto created = (*store)->CreateJob(job, absl::Now());
  ASSERT_TRUE(created.ok()) << created.status();
  const std::string id = created->job.id;

  CheckResult a;
  a.check = "row_change";
  a.kind = "row_change";
  a.severity = CheckSeverity::kHold;
  a.dataset = "d";
  a.summary = true;
  a.partitions_checked = 10;
  a.partitions_failed = 1;
  a.passed = false;
  CheckResult b = a;
  b.summary = false;
  b.partition = "2025-01-01";
  b.observed = "1 row, -90.0% vs 10 published";
  b.samples = {"(x='a|b')", "(x='3:c')"};
  ASSERT_TRUE((*store)->ReplaceCheckResults(id, {a, b}).ok());
  ASSERT_TRUE((*store)->ReplaceCheckResults(id, {a, b}).ok());
  auto listed = (*store)->ListCheckResults(id);
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), 2u);
  EXPECT_TRUE((*listed)[0].summary);
  EXPECT_EQ((*listed)[0].severity, CheckSeverity::kHold);
  EXPECT_EQ((*listed)[0].partitions_failed, 1);
  EXPECT_EQ((*listed)[1].samples, b.samples);
  EXPECT_EQ((*listed)[1].observed, b.observed);
  ASSERT_TRUE((*store)->ReplaceCheckResults(id, {a}).ok());
  EXPECT_EQ((*store)->ListCheckResults(id)->size(), 1u);
  EXPECT_EQ((*store)->ReplaceCheckResults("bf-99", {a}).code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ((*store)->ListCheckResults("bf-99").status().code(),
            absl::StatusCode::kNotFound);
  store->reset();
  std::filesystem::remove_all(tmpl);
}

}  // namespace
}  // namespace storage_checks_test
}  // namespace backfill
