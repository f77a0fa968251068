// Tests of the engine calls that checks use, against the real SQLite engine,
// with expectations computed by plain SQL on the same file: per-partition
// profiles of staged rows (rows, sums, NULL counts, orphans against the
// job's pinned snapshot, values of the wrong type) and of published rows,
// assertions per partition with bound parameters, and the description of
// queries and tables. Also the SQLite state store's check results.

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "core/partition.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/sqlite_db.h"
#include "storage/sqlite_engine.h"
#include "storage/sqlite_state_store.h"
#include "tests/testing/warehouse_test.h"

namespace backfill {
namespace {

using ::testing::HasSubstr;

const std::vector<std::string> kDays = {"2025-01-01", "2025-01-02",
                                        "2025-01-03"};

class EngineChecksTest : public testing::WarehouseTest {
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

TEST_F(EngineChecksTest, StagedProfileMatchesPlainSql) {
  Stage("bf-1", cust_, kDays);
  // After the pin: customer 2 leaves the published dimension. Orphans are
  // judged against the job's snapshot, which still has it.
  Exec("DELETE FROM dim_customers WHERE customer_id = 2");
  ProfileRequest request;
  request.measures = {"revenue"};
  request.null_columns = {"region"};
  request.references = {{"customer_id", &customers_, "customer_id"}};
  request.types = true;
  auto profile = engine_->ProfileStaged("bf-1", cust_, request);
  ASSERT_TRUE(profile.ok()) << profile.status();

  const std::string pin = SqliteEngine::PinTable("bf-1", "customers");
  const auto rows = Map(
      "SELECT order_date, COUNT(DISTINCT customer_id) FROM raw_orders GROUP "
      "BY 1");
  const auto sums = Map(
      "SELECT order_date, printf('%.3f', SUM(amount)) FROM raw_orders GROUP "
      "BY 1");
  const auto orphans = Map(absl::StrCat(
      "SELECT d.order_date, (SELECT COUNT(DISTINCT customer_id) FROM "
      "raw_orders o WHERE o.order_date = d.order_date AND customer_id NOT IN "
      "(SELECT customer_id FROM \"",
      pin, "\")) FROM (SELECT DISTINCT order_date FROM raw_orders) d"));
  const auto nulls = Map(
      "SELECT d.order_date, (SELECT COUNT(DISTINCT customer_id) FROM "
      "raw_orders o WHERE o.order_date = d.order_date AND customer_id NOT IN "
      "(1, 2, 3)) FROM (SELECT DISTINCT order_date FROM raw_orders) d");
  ASSERT_EQ(profile->size(), rows.size());
  for (const auto& [day, p] : *profile) {
    EXPECT_EQ(absl::StrCat(p.rows), rows.at(day)) << day;
    EXPECT_EQ(absl::StrFormat("%.3f", p.sums.at("revenue")), sums.at(day))
        << day;
    EXPECT_EQ(absl::StrCat(p.nulls.at("region").count), nulls.at(day)) << day;
    ASSERT_EQ(p.orphans.size(), 1u);
    EXPECT_EQ(absl::StrCat(p.orphans[0].count), orphans.at(day)) << day;
    EXPECT_TRUE(p.type_mismatches.empty()) << day;
  }
  // Samples show the offending rows.
  ASSERT_EQ(profile->at("2025-01-02").orphans[0].samples.size(), 1u);
  EXPECT_EQ(profile->at("2025-01-02").orphans[0].samples[0],
            "(ds='2025-01-02', customer_id=5, region=NULL, revenue=55.0)");
}

TEST_F(EngineChecksTest, ValuesOfAnotherTypeAreCounted) {
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
      EXPECT_FALSE(p.type_mismatches.count("revenue")) << day;
      continue;
    }
    ASSERT_TRUE(p.type_mismatches.count("revenue")) << day;
    EXPECT_EQ(p.type_mismatches.at("revenue").count, want) << day;
    EXPECT_THAT(p.type_mismatches.at("revenue").samples[0],
                HasSubstr("revenue='unknown'"));
  }
}

TEST_F(EngineChecksTest, PublishedProfileCoversTheJobsPartitions) {
  JobLayout first = Stage("bf-1", cust_, {"2025-01-01", "2025-01-02"});
  ASSERT_TRUE(engine_->Publish(first).ok());
  Stage("bf-2", cust_, kDays);
  ProfileRequest request;
  request.measures = {"revenue"};
  auto profile = engine_->ProfilePublished("bf-2", cust_, request);
  ASSERT_TRUE(profile.ok()) << profile.status();
  const auto rows = Map("SELECT ds, COUNT(*) FROM cust_rev GROUP BY 1");
  const auto sums =
      Map("SELECT ds, printf('%.3f', SUM(revenue)) FROM cust_rev GROUP BY 1");
  ASSERT_EQ(profile->size(), 2u);  // 2025-01-03 was never published
  for (const auto& [day, p] : *profile) {
    EXPECT_EQ(absl::StrCat(p.rows), rows.at(day));
    EXPECT_EQ(absl::StrFormat("%.3f", p.sums.at("revenue")), sums.at(day));
  }
  // Before any publish the table does not exist: no rows.
  DatasetSpec other = cust_;
  other.table = "cust_rev_new";
  other.name = "cust_rev_new";
  JobLayout layout = Stage("bf-3", other, kDays);
  auto none = engine_->ProfilePublished("bf-3", other, request);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->empty());
}

TEST_F(EngineChecksTest, AssertionsReadThePartitionsStagedRows) {
  Stage("bf-1", cust_, kDays);
  // Published rows of the same table must not be seen.
  Exec(
      "CREATE TABLE cust_rev (ds TEXT, customer_id INTEGER, region TEXT, "
      "revenue REAL); INSERT INTO cust_rev VALUES ('2025-01-01', 9, NULL, "
      "1)");
  auto outside = engine_->RunAssertion(
      "bf-1", cust_,
      "SELECT * FROM cust_rev WHERE ds < :partition_start OR ds >= "
      ":partition_end OR ds <> :partition",
      3);
  ASSERT_TRUE(outside.ok()) << outside.status();
  ASSERT_EQ(outside->size(), 3u);
  for (const auto& [day, c] : *outside) EXPECT_EQ(c.count, 0) << day;

  auto nulls = engine_->RunAssertion(
      "bf-1", cust_, "SELECT customer_id FROM cust_rev WHERE region IS NULL",
      1);
  ASSERT_TRUE(nulls.ok()) << nulls.status();
  const auto expected = Map(
      "SELECT d.order_date, (SELECT COUNT(DISTINCT customer_id) FROM "
      "raw_orders o WHERE o.order_date = d.order_date AND customer_id NOT IN "
      "(1, 2, 3)) FROM (SELECT DISTINCT order_date FROM raw_orders) d");
  for (const auto& [day, c] : *nulls) {
    EXPECT_EQ(absl::StrCat(c.count), expected.at(day)) << day;
    EXPECT_LE(c.samples.size(), 1u);
  }
  EXPECT_EQ(nulls->at("2025-01-02").samples,
            std::vector<std::string>{"(customer_id=5)"});

  auto writes = engine_->RunAssertion("bf-1", cust_, "DELETE FROM cust_rev", 1);
  EXPECT_EQ(writes.status().code(), absl::StatusCode::kFailedPrecondition);
  auto broken =
      engine_->RunAssertion("bf-1", cust_, "SELECT nope FROM cust_rev", 1);
  EXPECT_EQ(broken.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(broken.status().message()), HasSubstr("nope"));
  // The published table is untouched.
  EXPECT_EQ(Map("SELECT COUNT(*), 1 FROM cust_rev").begin()->first, "1");
}

TEST_F(EngineChecksTest, DescribeQueryStandsInForTablesNotPublishedYet) {
  DatasetSpec total;
  total.name = "total";
  total.kind = DatasetKind::kDerived;
  total.table = "total";
  total.columns = {{"ds", "TEXT"}, {"revenue", "REAL"}};
  const std::string sql =
      "SELECT ds, SUM(revenue) AS revenue, :partition AS p FROM cust_rev "
      "GROUP BY ds";
  auto shape = engine_->DescribeQuery(sql, {&cust_, &total}, nullptr);
  ASSERT_TRUE(shape.ok()) << shape.status();
  EXPECT_EQ(shape->columns, (std::vector<std::string>{"ds", "revenue", "p"}));
  EXPECT_TRUE(shape->read_only);
  EXPECT_EQ(shape->parameters, std::vector<std::string>{":partition"});
  // Without the stand-in: no such table.
  auto missing = engine_->DescribeQuery(sql, {}, nullptr);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(missing.status().message()),
              HasSubstr("no such table: cust_rev"));
  // A source is never stood in for; a missing column is reported.
  auto column = engine_->DescribeQuery("SELECT refund FROM raw_orders",
                                       {&cust_}, nullptr);
  EXPECT_THAT(std::string(column.status().message()),
              HasSubstr("no such column: refund"));
  // `own` reads its contract even when the table exists with other columns.
  Exec("CREATE TABLE cust_rev (x INTEGER)");
  auto own = engine_->DescribeQuery("SELECT region FROM cust_rev", {}, &cust_);
  ASSERT_TRUE(own.ok()) << own.status();
  auto write = engine_->DescribeQuery("DELETE FROM raw_orders", {}, nullptr);
  ASSERT_TRUE(write.ok()) << write.status();
  EXPECT_FALSE(write->read_only);
  // Nothing was left behind or changed.
  EXPECT_EQ(Map("SELECT COUNT(*), 1 FROM raw_orders").begin()->first, "8");
}

TEST_F(EngineChecksTest, DescribeTableReportsDeclaredColumns) {
  auto before = engine_->DescribeTable(cust_);
  ASSERT_TRUE(before.ok()) << before.status();
  EXPECT_FALSE(before->has_value());
  Exec("CREATE TABLE cust_rev (ds TEXT, customer_id INTEGER, note VARCHAR(3))");
  auto after = engine_->DescribeTable(cust_);
  ASSERT_TRUE(after.ok() && after->has_value());
  ASSERT_EQ((*after)->size(), 3u);
  EXPECT_EQ((**after)[2].name, "note");
  EXPECT_EQ((**after)[2].type, "VARCHAR(3)");
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
}  // namespace backfill
