// Tests of SqliteEngine on a temporary warehouse with a small
// orders / customers / daily_revenue fixture built with plain SQL. Results
// are compared with independent plain SQL queries over the fixture.

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/partition.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/sqlite_db.h"
#include "storage/sqlite_engine.h"
#include "tests/testing/warehouse_test.h"

namespace backfill {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr char kDailyRevenueSql[] = R"sql(
  SELECT o.order_date AS ds, c.region AS region,
         SUM(o.amount - o.refund) AS revenue, COUNT(*) AS orders
  FROM raw_orders o JOIN dim_customers c ON c.customer_id = o.customer_id
  WHERE o.order_date >= :partition_start AND o.order_date < :partition_end
  GROUP BY 1, 2
)sql";

// The same numbers computed independently, for any list of days.
std::string ExpectedDailyRevenue(const std::string& days_in) {
  return absl::StrCat(
      "SELECT o.order_date, c.region, SUM(o.amount - o.refund), COUNT(*) "
      "FROM raw_orders o, dim_customers c WHERE c.customer_id = "
      "o.customer_id AND o.order_date IN (",
      days_in, ") GROUP BY o.order_date, c.region ORDER BY 1, 2");
}

class SqliteEngineTest : public testing::WarehouseTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(testing::WarehouseTest::SetUp());
    Exec(R"sql(
      CREATE TABLE raw_orders (order_id INTEGER PRIMARY KEY, order_date TEXT,
                               customer_id INTEGER, amount REAL, refund REAL);
      CREATE TABLE dim_customers (customer_id INTEGER PRIMARY KEY,
                                  region TEXT);
      INSERT INTO dim_customers VALUES (1, 'EU'), (2, 'US'), (3, 'EU');
      INSERT INTO raw_orders VALUES
        (1, '2025-01-01', 1, 10, 0), (2, '2025-01-01', 2, 20, 5),
        (3, '2025-01-01', 3, 30, 0), (4, '2025-01-02', 1, 40, 10),
        (5, '2025-01-02', 2, 50, 0), (6, '2025-01-03', 3, 60, 0),
        (7, '2025-01-03', 1, 70, 7);
    )sql");
    ReopenEngine();

    orders_.name = "orders";
    orders_.kind = DatasetKind::kSource;
    orders_.table = "raw_orders";
    orders_.partition = PartitionSpec{"order_date", Grain::kDay, {}};

    customers_.name = "customers";
    customers_.kind = DatasetKind::kSource;
    customers_.table = "dim_customers";

    revenue_.name = "daily_revenue";
    revenue_.kind = DatasetKind::kDerived;
    revenue_.table = "daily_revenue";
    revenue_.partition = PartitionSpec{"ds", Grain::kDay, {}};
    revenue_.upstream = {{"orders", Mapping::kIdentity},
                         {"customers", Mapping::kAll}};
    revenue_.transform = kDailyRevenueSql;
    revenue_.columns = {{"ds", "TEXT"},
                        {"region", "TEXT"},
                        {"revenue", "REAL"},
                        {"orders", "INTEGER"}};
    revenue_.primary_key = {"ds", "region"};

    totals_.name = "region_count";
    totals_.kind = DatasetKind::kDerived;
    totals_.table = "region_count";
    totals_.partition = PartitionSpec{"ds", Grain::kDay, {}};
    totals_.upstream = {{"daily_revenue", Mapping::kIdentity}};
    totals_.transform =
        "SELECT ds, COUNT(*) AS regions, SUM(revenue) AS revenue "
        "FROM daily_revenue WHERE ds >= :partition_start AND ds < "
        ":partition_end GROUP BY ds;";
    totals_.columns = {
        {"ds", "TEXT"}, {"regions", "INTEGER"}, {"revenue", "REAL"}};
    totals_.primary_key = {"ds"};
  }

  void TearDown() override {
    engine_.reset();
    testing::WarehouseTest::TearDown();
  }

  void ReopenEngine(int connections = 2) {
    engine_.reset();
    auto engine = SqliteEngine::Open(path_, connections);
    ASSERT_TRUE(engine.ok()) << engine.status();
    engine_ = *std::move(engine);
  }

  JobLayout Layout(
      const std::string& job,
      std::vector<std::pair<const DatasetSpec*, std::vector<std::string>>>
          items) {
    JobLayout layout;
    layout.job_id = job;
    for (auto& [ds, parts] : items) layout.items.push_back({ds, parts});
    layout.pinned = {&customers_};
    return layout;
  }

  absl::StatusOr<StageResult> StageRevenue(const std::string& job,
                                           const std::string& day) {
    return engine_->StagePartition(job, revenue_, day,
                                   {{&orders_, day}, {&customers_, {}}});
  }

  // Prepares, stages, validates and publishes daily_revenue for `days`.
  void RunRevenueJob(const std::string& job,
                     const std::vector<std::string>& days) {
    JobLayout layout = Layout(job, {{&revenue_, days}});
    ASSERT_TRUE(engine_->PrepareJob(layout).ok());
    for (const std::string& day : days) {
      auto staged = StageRevenue(job, day);
      ASSERT_TRUE(staged.ok()) << staged.status();
    }
    auto report = engine_->ValidateStaged(job, revenue_);
    ASSERT_TRUE(report.ok()) << report.status();
    ASSERT_THAT(report->failures, IsEmpty());
    absl::Status published = engine_->Publish(layout);
    ASSERT_TRUE(published.ok()) << published;
  }

  std::unique_ptr<SqliteEngine> engine_;
  DatasetSpec orders_, customers_, revenue_, totals_;
};

TEST_F(SqliteEngineTest, StageAndPublishGiveThePlainSqlResult) {
  JobLayout layout =
      Layout("bf-1", {{&revenue_, {"2025-01-01", "2025-01-02"}}});
  ASSERT_TRUE(engine_->PrepareJob(layout).ok());
  auto r1 = StageRevenue("bf-1", "2025-01-01");
  ASSERT_TRUE(r1.ok()) << r1.status();
  EXPECT_EQ(r1->rows_written, 2);  // EU and US
  ASSERT_EQ(r1->inputs.size(), 2u);
  EXPECT_EQ(r1->inputs[0].dataset, "orders");
  EXPECT_EQ(r1->inputs[0].partition, "2025-01-01");
  EXPECT_EQ(r1->inputs[0].rows, 3);
  EXPECT_EQ(r1->inputs[1].dataset, "customers");
  EXPECT_EQ(r1->inputs[1].partition, "");
  EXPECT_EQ(r1->inputs[1].rows, 3);
  EXPECT_THAT(r1->output_fingerprint, HasSubstr(":2"));
  auto r2 = StageRevenue("bf-1", "2025-01-02");
  ASSERT_TRUE(r2.ok()) << r2.status();
  EXPECT_EQ(r2->inputs[1].fingerprint, r1->inputs[1].fingerprint);

  EXPECT_FALSE(*engine_->IsPublished("bf-1"));
  EXPECT_FALSE(Exists("daily_revenue"));
  ASSERT_TRUE(engine_->Publish(layout).ok());
  EXPECT_TRUE(*engine_->IsPublished("bf-1"));

  EXPECT_EQ(Rows("SELECT ds, region, revenue, orders FROM daily_revenue "
                 "ORDER BY 1, 2"),
            Rows(ExpectedDailyRevenue("'2025-01-01', '2025-01-02'")));
  // Created from the contract, with its primary key.
  EXPECT_THAT(Rows("SELECT name, type, pk FROM pragma_table_info("
                   "'daily_revenue') ORDER BY cid"),
              ElementsAre("ds|TEXT|1", "region|TEXT|2", "revenue|REAL|0",
                          "orders|INTEGER|0"));

  auto counts = engine_->CountRowsByPartition(revenue_);
  ASSERT_TRUE(counts.ok()) << counts.status();
  EXPECT_EQ(counts->size(), 2u);
  EXPECT_EQ(counts->at("2025-01-01"), 2);
  auto orders = engine_->CountRowsByPartition(orders_);
  EXPECT_EQ(orders->at("2025-01-03"), 2);
  auto customers = engine_->CountRowsByPartition(customers_);
  EXPECT_EQ(customers->at(""), 3);
  DatasetSpec missing = revenue_;
  missing.table = "nope";
  EXPECT_TRUE(engine_->CountRowsByPartition(missing)->empty());
}

TEST_F(SqliteEngineTest, SecondPublishReplacesOnlyItsPartitionsAndKeepsPrev) {
  RunRevenueJob("bf-1", {"2025-01-01", "2025-01-02", "2025-01-03"});
  auto before = Rows(
      "SELECT * FROM daily_revenue WHERE ds <> '2025-01-02' "
      "ORDER BY 1, 2");
  auto old_day2 = Rows(
      "SELECT * FROM daily_revenue WHERE ds = '2025-01-02' "
      "ORDER BY 1, 2");
  Exec("UPDATE raw_orders SET refund = amount");  // every day changes
  RunRevenueJob("bf-2", {"2025-01-02"});
  EXPECT_EQ(Rows("SELECT * FROM daily_revenue WHERE ds <> '2025-01-02' "
                 "ORDER BY 1, 2"),
            before);
  EXPECT_EQ(Rows("SELECT ds, region, revenue, orders FROM daily_revenue "
                 "WHERE ds = '2025-01-02' ORDER BY 1, 2"),
            Rows(ExpectedDailyRevenue("'2025-01-02'")));
  EXPECT_EQ(Rows(absl::StrCat("SELECT * FROM ",
                              sqlite::QuoteIdentifier(SqliteEngine::PrevTable(
                                  "bf-2", "daily_revenue")),
                              " ORDER BY 1, 2")),
            old_day2);
}

TEST_F(SqliteEngineTest, RowsOutsideThePartitionAreRejectedAndNothingStaged) {
  revenue_.transform =
      "SELECT o.order_date AS ds, 'all' AS region, SUM(o.amount) AS revenue, "
      "COUNT(*) AS orders FROM raw_orders o GROUP BY 1";
  JobLayout layout = Layout("bf-1", {{&revenue_, {"2025-01-01"}}});
  ASSERT_TRUE(engine_->PrepareJob(layout).ok());
  auto r = StageRevenue("bf-1", "2025-01-01");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(r.status().message(),
              HasSubstr("2 rows of daily_revenue fall outside partition "
                        "2025-01-01 (e.g. ds='2025-01-02')"));
  EXPECT_EQ(Count(SqliteEngine::StageTable("bf-1", "daily_revenue")), 0);
}

TEST_F(SqliteEngineTest, MissingContractColumnIsNamed) {
  revenue_.transform =
      "SELECT order_date AS ds, 'x' AS region, SUM(amount) AS revenue "
      "FROM raw_orders WHERE order_date = :partition GROUP BY 1";
  ASSERT_TRUE(
      engine_->PrepareJob(Layout("bf-1", {{&revenue_, {"2025-01-01"}}})).ok());
  auto r = StageRevenue("bf-1", "2025-01-01");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(r.status().message(), HasSubstr("contract column orders"));

  revenue_.transform = "DELETE FROM raw_orders";
  EXPECT_THAT(StageRevenue("bf-1", "2025-01-01").status().message(),
              HasSubstr("not a read-only SELECT"));
  revenue_.transform = "SELECT 1 AS ds; DELETE FROM raw_orders";
  EXPECT_FALSE(StageRevenue("bf-1", "2025-01-01").ok());
  revenue_.transform = "SELECT :other AS ds";
  EXPECT_THAT(StageRevenue("bf-1", "2025-01-01").status().message(),
              HasSubstr(":other"));
  EXPECT_EQ(Count("raw_orders"), 7);
}

TEST_F(SqliteEngineTest, PublishIsAtomicAcrossDatasets) {
  RunRevenueJob("bf-1", {"2025-01-01", "2025-01-02"});
  auto before = Rows("SELECT * FROM daily_revenue ORDER BY 1, 2");

  // Job 2 restages daily_revenue with new numbers and a second dataset
  // whose staged rows violate its primary key.
  Exec("UPDATE raw_orders SET refund = amount");
  DatasetSpec dups;
  dups.name = "dups";
  dups.kind = DatasetKind::kDerived;
  dups.table = "dups";
  dups.partition = PartitionSpec{"ds", Grain::kDay, {}};
  dups.transform =
      "SELECT order_date AS ds, 1 AS n FROM raw_orders WHERE order_date = "
      ":partition";
  dups.columns = {{"ds", "TEXT"}, {"n", "INTEGER"}};
  dups.primary_key = {"ds"};
  JobLayout layout =
      Layout("bf-2", {{&revenue_, {"2025-01-01"}}, {&dups, {"2025-01-01"}}});
  ASSERT_TRUE(engine_->PrepareJob(layout).ok());
  ASSERT_TRUE(StageRevenue("bf-2", "2025-01-01").ok());
  ASSERT_TRUE(engine_
                  ->StagePartition("bf-2", dups, "2025-01-01",
                                   {{&orders_, "2025-01-01"}})
                  .ok());
  auto report = engine_->ValidateStaged("bf-2", dups);
  ASSERT_TRUE(report.ok());
  ASSERT_EQ(report->failures.size(), 1u);
  EXPECT_THAT(report->failures[0], HasSubstr("('2025-01-01') appears 3 times"));

  absl::Status published = engine_->Publish(layout);
  EXPECT_FALSE(published.ok());
  EXPECT_THAT(published.message(), HasSubstr("dups"));
  EXPECT_EQ(Rows("SELECT * FROM daily_revenue ORDER BY 1, 2"), before);
  EXPECT_FALSE(Exists("dups"));
  EXPECT_FALSE(Exists(SqliteEngine::PrevTable("bf-2", "daily_revenue")));
  EXPECT_FALSE(*engine_->IsPublished("bf-2"));
}

TEST_F(SqliteEngineTest, RestagingAPartitionReplacesIt) {
  JobLayout layout =
      Layout("bf-1", {{&revenue_, {"2025-01-01", "2025-01-02"}}});
  ASSERT_TRUE(engine_->PrepareJob(layout).ok());
  ASSERT_TRUE(StageRevenue("bf-1", "2025-01-01").ok());
  ASSERT_TRUE(StageRevenue("bf-1", "2025-01-02").ok());
  Exec(
      "UPDATE raw_orders SET amount = amount * 2 WHERE order_date = "
      "'2025-01-01'");
  auto again = StageRevenue("bf-1", "2025-01-01");
  ASSERT_TRUE(again.ok()) << again.status();
  const std::string stage = sqlite::QuoteIdentifier(
      SqliteEngine::StageTable("bf-1", "daily_revenue"));
  EXPECT_EQ(Rows(absl::StrCat("SELECT * FROM ", stage, " ORDER BY 1, 2")),
            Rows(ExpectedDailyRevenue("'2025-01-01', '2025-01-02'")));
  EXPECT_EQ(Count(SqliteEngine::StageTable("bf-1", "daily_revenue")), 4);
}

TEST_F(SqliteEngineTest, PinnedDimensionIsIsolatedFromLaterChanges) {
  JobLayout layout =
      Layout("bf-1", {{&revenue_, {"2025-01-01", "2025-01-02"}}});
  ASSERT_TRUE(engine_->PrepareJob(layout).ok());
  auto expected = Rows(ExpectedDailyRevenue("'2025-01-01', '2025-01-02'"));
  Exec("UPDATE dim_customers SET region = 'APAC'");
  ASSERT_TRUE(StageRevenue("bf-1", "2025-01-01").ok());
  // A restart: a new engine, PrepareJob again, the same pinned version.
  ReopenEngine();
  ASSERT_TRUE(engine_->PrepareJob(layout).ok());
  auto r = StageRevenue("bf-1", "2025-01-02");
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(engine_->Publish(layout).ok());
  EXPECT_EQ(Rows("SELECT * FROM daily_revenue ORDER BY 1, 2"), expected);
  EXPECT_THAT(Rows("SELECT DISTINCT region FROM daily_revenue ORDER BY 1"),
              ElementsAre("EU", "US"));
}

TEST_F(SqliteEngineTest, DownstreamReadsUpstreamStagingThroughTheOverlay) {
  // Published state: daily_revenue and region_count for three days.
  {
    JobLayout layout = Layout(
        "bf-1", {{&revenue_, {"2025-01-01", "2025-01-02", "2025-01-03"}},
                 {&totals_, {"2025-01-01", "2025-01-02", "2025-01-03"}}});
    ASSERT_TRUE(engine_->PrepareJob(layout).ok());
    for (const char* day : {"2025-01-01", "2025-01-02", "2025-01-03"}) {
      ASSERT_TRUE(StageRevenue("bf-1", day).ok());
    }
    // The upstream table is not published yet: only its staging is read.
    for (const char* day : {"2025-01-01", "2025-01-02", "2025-01-03"}) {
      auto r = engine_->StagePartition("bf-1", totals_, day,
                                       {{&revenue_, std::string(day)}});
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_EQ(r->inputs[0].rows, day == std::string("2025-01-03") ? 1 : 2);
    }
    ASSERT_TRUE(engine_->Publish(layout).ok());
  }
  EXPECT_EQ(Rows("SELECT ds, regions, revenue FROM region_count ORDER BY 1"),
            Rows("SELECT ds, COUNT(*), SUM(revenue) FROM daily_revenue "
                 "GROUP BY ds ORDER BY 1"));
  auto day3_before = Rows("SELECT * FROM region_count WHERE ds = '2025-01-03'");

  // Job 2 recomputes daily_revenue for day 1 only, and region_count for
  // days 1 and 3: day 1 must see the staged new revenue, day 3 the
  // published one.
  Exec("UPDATE raw_orders SET refund = 0");
  JobLayout layout = Layout("bf-2", {{&revenue_, {"2025-01-01"}},
                                     {&totals_, {"2025-01-01", "2025-01-03"}}});
  ASSERT_TRUE(engine_->PrepareJob(layout).ok());
  ASSERT_TRUE(StageRevenue("bf-2", "2025-01-01").ok());
  for (const char* day : {"2025-01-01", "2025-01-03"}) {
    ASSERT_TRUE(engine_
                    ->StagePartition("bf-2", totals_, day,
                                     {{&revenue_, std::string(day)}})
                    .ok());
  }
  const std::string stage =
      sqlite::QuoteIdentifier(SqliteEngine::StageTable("bf-2", "region_count"));
  EXPECT_THAT(Rows(absl::StrCat("SELECT * FROM ", stage, " ORDER BY 1")),
              ElementsAre("2025-01-01|2|60.0", day3_before[0]));
  ASSERT_TRUE(engine_->Publish(layout).ok());
  EXPECT_EQ(Rows("SELECT ds, regions, revenue FROM region_count ORDER BY 1"),
            Rows("SELECT ds, COUNT(*), SUM(revenue) FROM daily_revenue "
                 "GROUP BY ds ORDER BY 1"));
}

TEST_F(SqliteEngineTest, PublishTwiceIsANoOpAndDropStagingKeepsPrev) {
  RunRevenueJob("bf-1", {"2025-01-01"});
  Exec("UPDATE daily_revenue SET revenue = -1");
  JobLayout layout = Layout("bf-1", {{&revenue_, {"2025-01-01"}}});
  ASSERT_TRUE(engine_->Publish(layout).ok());
  EXPECT_THAT(Rows("SELECT DISTINCT revenue FROM daily_revenue"),
              ElementsAre("-1.0"));

  ASSERT_TRUE(engine_->DropStaging("bf-1").ok());
  EXPECT_FALSE(Exists(SqliteEngine::StageTable("bf-1", "daily_revenue")));
  EXPECT_FALSE(Exists(SqliteEngine::PartsTable("bf-1", "daily_revenue")));
  EXPECT_FALSE(Exists(SqliteEngine::PinTable("bf-1", "customers")));
  EXPECT_TRUE(Exists(SqliteEngine::PrevTable("bf-1", "daily_revenue")));
  EXPECT_TRUE(*engine_->IsPublished("bf-1"));
  ASSERT_TRUE(engine_->DropStaging("bf-1").ok());  // idempotent
  EXPECT_EQ(StageRevenue("bf-1", "2025-01-01").status().code(),
            absl::StatusCode::kFailedPrecondition);  // not prepared anymore
}

TEST_F(SqliteEngineTest, ValidateReportsDuplicateAndNullKeys) {
  revenue_.transform =
      "SELECT order_date AS ds, CASE WHEN customer_id = 3 THEN NULL ELSE "
      "'EU' END AS region, amount AS revenue, 1 AS orders FROM raw_orders "
      "WHERE order_date = :partition";
  ASSERT_TRUE(
      engine_->PrepareJob(Layout("bf-1", {{&revenue_, {"2025-01-01"}}})).ok());
  ASSERT_TRUE(StageRevenue("bf-1", "2025-01-01").ok());
  auto report = engine_->ValidateStaged("bf-1", revenue_);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->rows, 3);
  EXPECT_THAT(report->failures,
              ElementsAre(HasSubstr("(ds, region) = ('2025-01-01', 'EU') "
                                    "appears 2 times"),
                          HasSubstr("1 staged row has a NULL in primary key "
                                    "(ds, region) (e.g. ('2025-01-01', "
                                    "NULL))")));
  EXPECT_EQ(engine_->ValidateStaged("bf-9", revenue_).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(SqliteEngineTest, IdentifiersAreAlwaysQuoted) {
  DatasetSpec weird;
  weird.name = "we\"ird";
  weird.kind = DatasetKind::kDerived;
  weird.table = "we\"ird table; DROP TABLE raw_orders";
  weird.partition = PartitionSpec{"d\"s", Grain::kDay, {}};
  weird.transform =
      "SELECT order_date AS \"d\"\"s\", COUNT(*) AS \"select\" FROM "
      "raw_orders WHERE order_date >= :partition_start AND order_date < "
      ":partition_end GROUP BY 1";
  weird.columns = {{"d\"s", "TEXT"}, {"select", "INTEGER"}};
  weird.primary_key = {"d\"s"};
  JobLayout layout = Layout("bf-1", {{&weird, {"2025-01-01", "2025-01-03"}}});
  ASSERT_TRUE(engine_->PrepareJob(layout).ok());
  for (const char* day : {"2025-01-01", "2025-01-03"}) {
    auto r = engine_->StagePartition("bf-1", weird, day, {});
    ASSERT_TRUE(r.ok()) << r.status();
  }
  EXPECT_THAT(engine_->ValidateStaged("bf-1", weird)->failures, IsEmpty());
  ASSERT_TRUE(engine_->Publish(layout).ok());
  EXPECT_THAT(
      Rows(absl::StrCat("SELECT * FROM ", sqlite::QuoteIdentifier(weird.table),
                        " ORDER BY 1")),
      ElementsAre("2025-01-01|3", "2025-01-03|2"));
  EXPECT_EQ((*engine_->CountRowsByPartition(weird))["2025-01-03"], 1);
  EXPECT_EQ(Count("raw_orders"), 7);
  ASSERT_TRUE(engine_->DropStaging("bf-1").ok());

  DatasetSpec bad_type = revenue_;
  bad_type.columns[0].type = "TEXT); DROP TABLE raw_orders; --";
  EXPECT_EQ(
      engine_->PrepareJob(Layout("bf-3", {{&bad_type, {"2025-01-01"}}})).code(),
      absl::StatusCode::kInvalidArgument);
}

TEST_F(SqliteEngineTest, ColumnTypesFollowTheCatalogRule) {
  // Constraints would be spliced into the staging and published DDL.
  for (const char* type : {"INTEGER PRIMARY KEY", "TEXT COLLATE NOCASE",
                           "INTEGER GENERATED ALWAYS AS (5)"}) {
    SCOPED_TRACE(type);
    DatasetSpec bad = revenue_;
    bad.columns[3].type = type;
    absl::Status s =
        engine_->PrepareJob(Layout("bf-1", {{&bad, {"2025-01-01"}}}));
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(s.message(), HasSubstr("is a constraint keyword"));
  }
  EXPECT_FALSE(Exists(SqliteEngine::StageTable("bf-1", "daily_revenue")));
  DatasetSpec good = revenue_;
  good.columns[2].type = "NUMERIC(10, 2)";
  good.columns[3].type = "BIG INT";
  EXPECT_TRUE(
      engine_->PrepareJob(Layout("bf-2", {{&good, {"2025-01-01"}}})).ok());
}

TEST_F(SqliteEngineTest, PartitionValuesAreValidatedOrBound) {
  const std::string evil = "2025-01-01'; DROP TABLE raw_orders; --";
  EXPECT_EQ(engine_->PrepareJob(Layout("bf-1", {{&revenue_, {evil}}})).code(),
            absl::StatusCode::kInvalidArgument);

  DatasetSpec by_key;
  by_key.name = "by_key";
  by_key.kind = DatasetKind::kDerived;
  by_key.table = "by_key";
  by_key.partition = PartitionSpec{"k", Grain::kKey, {}};
  by_key.transform = "SELECT :partition AS k, COUNT(*) AS n FROM raw_orders";
  by_key.columns = {{"k", "TEXT"}, {"n", "INTEGER"}};
  const std::string evil_key = "x'); DROP TABLE raw_orders; --";
  JobLayout layout = Layout("bf-2", {{&by_key, {evil_key, "plain"}}});
  ASSERT_TRUE(engine_->PrepareJob(layout).ok());
  ASSERT_TRUE(engine_->StagePartition("bf-2", by_key, evil_key, {}).ok());
  ASSERT_TRUE(engine_->StagePartition("bf-2", by_key, "plain", {}).ok());
  EXPECT_EQ(
      engine_->StagePartition("bf-2", by_key, "other", {}).status().code(),
      absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(engine_->Publish(layout).ok());
  EXPECT_THAT(Rows("SELECT k, n FROM by_key ORDER BY k"),
              ElementsAre("plain|7", evil_key + "|7"));
  EXPECT_EQ(Count("raw_orders"), 7);
  auto counts = engine_->CountRowsByPartition(by_key);
  EXPECT_EQ(counts->at(evil_key), 1);
}

TEST_F(SqliteEngineTest, UnpartitionedDatasetReplacesTheWholeTable) {
  DatasetSpec regions;
  regions.name = "regions";
  regions.kind = DatasetKind::kDerived;
  regions.table = "regions";
  regions.upstream = {{"customers", Mapping::kAll}};
  regions.transform =
      "SELECT region, COUNT(*) AS customers FROM dim_customers GROUP BY 1";
  regions.columns = {{"region", "TEXT"}, {"customers", "INTEGER"}};
  regions.primary_key = {"region"};
  for (const char* job : {"bf-1", "bf-2"}) {
    JobLayout layout = Layout(job, {{&regions, {""}}});
    ASSERT_TRUE(engine_->PrepareJob(layout).ok());
    auto r = engine_->StagePartition(job, regions, "", {{&customers_, {}}});
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_TRUE(engine_->Publish(layout).ok());
    Exec("UPDATE dim_customers SET region = 'APAC' WHERE customer_id = 1");
  }
  EXPECT_THAT(Rows("SELECT * FROM regions ORDER BY 1"),
              ElementsAre("APAC|1", "EU|1", "US|1"));
  EXPECT_EQ(engine_->CountRowsByPartition(regions)->at(""), 3);
}

TEST_F(SqliteEngineTest, ConcurrentStagingFromSeveralThreads) {
  ReopenEngine(3);
  std::vector<std::string> days = {"2025-01-01", "2025-01-02", "2025-01-03"};
  JobLayout layout = Layout("bf-1", {{&revenue_, days}});
  ASSERT_TRUE(engine_->PrepareJob(layout).ok());
  std::vector<std::thread> threads;
  for (int round = 0; round < 3; ++round) {
    for (const std::string& day : days) {
      threads.emplace_back([this, day] {
        auto r = StageRevenue("bf-1", day);
        EXPECT_TRUE(r.ok()) << r.status();
      });
    }
  }
  for (auto& t : threads) t.join();
  ASSERT_TRUE(engine_->Publish(layout).ok());
  EXPECT_EQ(Rows("SELECT ds, region, revenue, orders FROM daily_revenue "
                 "ORDER BY 1, 2"),
            Rows(ExpectedDailyRevenue("'2025-01-01', '2025-01-02', "
                                      "'2025-01-03'")));
}

TEST_F(SqliteEngineTest, ListJobsWithStagingParsesJobIdsFromTableNames) {
  auto none = engine_->ListJobsWithStaging();
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_THAT(*none, IsEmpty());

  // bf-1: staged and pinned; bf-12: prepared only; bf-2: published, then
  // its staging dropped (its rollback copy is not staging).
  JobLayout one = Layout("bf-1", {{&revenue_, {"2025-01-01"}}});
  ASSERT_TRUE(engine_->PrepareJob(one).ok());
  ASSERT_TRUE(StageRevenue("bf-1", "2025-01-01").ok());
  ASSERT_TRUE(
      engine_->PrepareJob(Layout("bf-12", {{&revenue_, {"2025-01-02"}}})).ok());
  RunRevenueJob("bf-2", {"2025-01-03"});
  ASSERT_TRUE(engine_->DropStaging("bf-2").ok());
  ASSERT_TRUE(Exists(SqliteEngine::PrevTable("bf-2", "daily_revenue")));
  // Look-alikes that are not a job's staging.
  Exec(R"sql(
    CREATE TABLE "_bf_stage_bf__x" (a);
    CREATE TABLE "_bf_stage_bf_7" (a);
    CREATE TABLE "_bf_stage_job_3_x" (a);
    CREATE TABLE "_bf_prev_bf_8_x" (a);
    CREATE TABLE "bf_stage_bf_9_x" (a);
  )sql");
  // A pin alone (e.g. a crash between tables) still counts.
  Exec(absl::StrCat(
      "CREATE TABLE ",
      sqlite::QuoteIdentifier(SqliteEngine::PinTable("bf-30", "customers")),
      " (a)"));

  auto ids = engine_->ListJobsWithStaging();
  ASSERT_TRUE(ids.ok()) << ids.status();
  EXPECT_THAT(*ids, ElementsAre("bf-1", "bf-12", "bf-30"));

  ASSERT_TRUE(engine_->DropStaging("bf-1").ok());
  ASSERT_TRUE(engine_->DropStaging("bf-12").ok());
  ids = engine_->ListJobsWithStaging();
  ASSERT_TRUE(ids.ok()) << ids.status();
  EXPECT_THAT(*ids, ElementsAre("bf-30"));
}

// The per-call bookkeeping of StagePartition must not grow with the job's
// size: it used to copy the whole layout (every partition string) and scan
// it linearly on every call, O(P) per call and O(P^2) per job. Staging one
// partition of a job of 300k partitions must cost about as much as staging
// one of a job of one partition.
// A full ordered dump of a table: every column as quote() text.
std::string DumpSql(const std::string& table) {
  return absl::StrCat(
      "SELECT quote(ds), quote(region), quote(revenue), "
      "quote(orders) FROM ",
      sqlite::QuoteIdentifier(table), " ORDER BY 1, 2, 3, 4");
}

TEST_F(SqliteEngineTest, RollbackRestoresByteIdenticalRowsOnlyInItsPartitions) {
  ASSERT_TRUE(engine_->Claim("store-a", false).ok());
  RunRevenueJob("bf-1", {"2025-01-01", "2025-01-02", "2025-01-03"});
  // Rows another writer put into the published table: a timestamp inside
  // day 2 (a member of partition 2025-01-02 by the one definition), a NULL,
  // a value of no partition, an integer in a text column, a day the jobs
  // never touch.
  Exec(
      "INSERT INTO daily_revenue VALUES ('2025-01-02 12:00:00', 'XX', 1.5, "
      "NULL), (NULL, 'YY', NULL, 1), ('junk', 'ZZ', 0.1, 2), "
      "('2025-01-09', 'EU', 99, 9)");
  const std::vector<std::string> before = Rows(DumpSql("daily_revenue"));
  Exec("UPDATE raw_orders SET refund = amount / 3");
  RunRevenueJob("bf-2", {"2025-01-02", "2025-01-04"});  // day 4: no orders
  const std::vector<std::string> published = Rows(DumpSql("daily_revenue"));
  ASSERT_NE(published, before);
  // The timestamp row of day 2 was replaced; the others stayed.
  EXPECT_THAT(published, ::testing::Not(::testing::Contains(
                             "'2025-01-02 12:00:00'|'XX'|1.5|NULL")));

  RollbackSpec spec;
  spec.layout = Layout("bf-2", {{&revenue_, {"2025-01-02", "2025-01-04"}}});
  spec.marker.reason = "refunds were wrong";
  auto result = engine_->Rollback(spec);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(Rows(DumpSql("daily_revenue")), before);
  // Restored: bf-1's two regions of day 2 plus the timestamp row.
  EXPECT_EQ(result->rows, 3);
  EXPECT_THAT(Rows("SELECT COUNT(*) FROM daily_revenue WHERE ds >= "
                   "'2025-01-02' AND ds < '2025-01-03'"),
              ElementsAre("3"));
  EXPECT_FALSE(Exists(SqliteEngine::PrevTable("bf-2", "daily_revenue")));
  EXPECT_TRUE(Exists(SqliteEngine::PrevTable("bf-1", "daily_revenue")));
  EXPECT_THAT(Rows("SELECT store_id, job_id, reason, forced, with_jobs FROM "
                   "_bf_rollbacks"),
              ElementsAre("store-a|bf-2|refunds were wrong|0|"));
}

TEST_F(SqliteEngineTest, RollbackFingerprintsMatchThePublishedVersion) {
  ASSERT_TRUE(engine_->Claim("store-a", false).ok());
  JobLayout layout = Layout("bf-1", {{&revenue_, {"2025-01-01"}}});
  ASSERT_TRUE(engine_->PrepareJob(layout).ok());
  auto staged = StageRevenue("bf-1", "2025-01-01");
  ASSERT_TRUE(staged.ok()) << staged.status();
  ASSERT_TRUE(engine_->Publish(layout).ok());
  Exec("UPDATE raw_orders SET refund = 1");
  RunRevenueJob("bf-2", {"2025-01-01"});
  RollbackSpec spec;
  spec.layout = Layout("bf-2", {{&revenue_, {"2025-01-01"}}});
  auto result = engine_->Rollback(spec);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->partitions.size(), 1u);
  // The rows restored are bf-1's: the same fingerprint as it staged.
  EXPECT_EQ(result->partitions[0].fingerprint, staged->output_fingerprint);
  EXPECT_EQ(result->partitions[0].rows, staged->rows_written);
}

TEST_F(SqliteEngineTest, RollbackIsAtomicAcrossDatasets) {
  ASSERT_TRUE(engine_->Claim("store-a", false).ok());
  const std::vector<std::string> days = {"2025-01-01", "2025-01-02"};
  auto run = [&](const std::string& job) {
    JobLayout layout = Layout(job, {{&revenue_, days}, {&totals_, days}});
    ASSERT_TRUE(engine_->PrepareJob(layout).ok());
    for (const std::string& day : days) {
      ASSERT_TRUE(StageRevenue(job, day).ok());
      ASSERT_TRUE(
          engine_->StagePartition(job, totals_, day, {{&revenue_, day}}).ok());
    }
    ASSERT_TRUE(engine_->Publish(layout).ok());
  };
  ASSERT_NO_FATAL_FAILURE(run("bf-1"));
  Exec("UPDATE raw_orders SET refund = amount");
  ASSERT_NO_FATAL_FAILURE(run("bf-2"));
  const std::vector<std::string> revenue = Rows(DumpSql("daily_revenue"));
  const std::vector<std::string> totals = Rows(
      "SELECT quote(ds), quote(regions), quote(revenue) FROM "
      "region_count ORDER BY 1, 2, 3");
  // The second dataset's copy is gone: the first is not restored either.
  Exec(absl::StrCat("DROP TABLE ",
                    sqlite::QuoteIdentifier(
                        SqliteEngine::PrevTable("bf-2", "region_count"))));
  RollbackSpec spec;
  spec.layout = Layout("bf-2", {{&revenue_, days}, {&totals_, days}});
  auto result = engine_->Rollback(spec);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kFailedPrecondition)
      << result.status();
  EXPECT_EQ(Rows(DumpSql("daily_revenue")), revenue);
  EXPECT_EQ(Rows("SELECT quote(ds), quote(regions), quote(revenue) FROM "
                 "region_count ORDER BY 1, 2, 3"),
            totals);
  EXPECT_TRUE(Exists(SqliteEngine::PrevTable("bf-2", "daily_revenue")));
  EXPECT_THAT(Rows("SELECT COUNT(*) FROM _bf_rollbacks"), ElementsAre("0"));
}

TEST_F(SqliteEngineTest, RollbackCopiesAreListedFromTableNames) {
  Exec(
      "CREATE TABLE _bf_prev_bf_12_daily_revenue (x); "
      "CREATE TABLE _bf_prev_bf_3_region_count (x); "
      "CREATE TABLE _bf_prev_other_daily_revenue (x); "
      "CREATE TABLE _bf_prev_bf_7 (x)");
  auto copies = engine_->ListRollbackCopies();
  ASSERT_TRUE(copies.ok()) << copies.status();
  ASSERT_EQ(copies->size(), 2u);
  EXPECT_EQ((*copies)[0].job_id, "bf-3");
  EXPECT_EQ((*copies)[0].dataset, "region_count");
  EXPECT_EQ((*copies)[1].job_id, "bf-12");
  EXPECT_EQ((*copies)[1].dataset, "daily_revenue");
  ASSERT_TRUE(engine_->DropRollbackCopies({(*copies)[1]}).ok());
  EXPECT_FALSE(Exists("_bf_prev_bf_12_daily_revenue"));
  EXPECT_TRUE(Exists("_bf_prev_bf_3_region_count"));
  EXPECT_TRUE(Exists("_bf_prev_other_daily_revenue"));
}

// A rollup reads the job's staged days plus the published other days; a
// lookback transform gets :window_start, the start of its window.
TEST_F(SqliteEngineTest, RollupAndLookbackReadStagedAndPublishedDays) {
  RunRevenueJob("bf-1", {"2025-01-01", "2025-01-02", "2025-01-03"});
  const auto day1_and_3 = Rows(
      "SELECT * FROM daily_revenue WHERE ds <> '2025-01-02' ORDER BY 1, 2");

  DatasetSpec monthly;
  monthly.name = "monthly_revenue";
  monthly.kind = DatasetKind::kDerived;
  monthly.table = "monthly_revenue";
  monthly.partition = PartitionSpec{"month", Grain::kMonth, {}};
  monthly.upstream = {{"daily_revenue", Mapping::kRollup}};
  monthly.transform =
      "SELECT substr(ds, 1, 7) AS month, region, SUM(revenue) AS revenue "
      "FROM daily_revenue WHERE ds >= :partition_start AND ds < "
      ":partition_end GROUP BY 1, 2";
  monthly.columns = {
      {"month", "TEXT"}, {"region", "TEXT"}, {"revenue", "REAL"}};
  monthly.primary_key = {"month", "region"};

  DatasetSpec rolling;
  rolling.name = "rolling_revenue";
  rolling.kind = DatasetKind::kDerived;
  rolling.table = "rolling_revenue";
  rolling.partition = PartitionSpec{"ds", Grain::kDay, {}};
  rolling.upstream = {{"daily_revenue", Mapping::kLookback, 1}};
  rolling.transform =
      "SELECT :partition AS ds, TOTAL(revenue) AS revenue, :window_start AS "
      "since FROM daily_revenue WHERE ds >= :window_start AND ds < "
      ":partition_end";
  rolling.columns = {{"ds", "TEXT"}, {"revenue", "REAL"}, {"since", "TEXT"}};
  rolling.primary_key = {"ds"};

  // Day 2 changes in the raw data; the job recomputes it, its month and the
  // two rolling days that read it.
  Exec("UPDATE raw_orders SET refund = 1 WHERE order_date = '2025-01-02'");
  JobLayout layout = Layout("bf-2", {{&revenue_, {"2025-01-02"}},
                                     {&monthly, {"2025-01"}},
                                     {&rolling, {"2025-01-02", "2025-01-03"}}});
  ASSERT_TRUE(engine_->PrepareJob(layout).ok());
  ASSERT_TRUE(StageRevenue("bf-2", "2025-01-02").ok());
  std::vector<InputRef> days;
  for (int d = 1; d <= 31; ++d) {
    days.push_back({&revenue_, absl::StrFormat("2025-01-%02d", d)});
  }
  auto month = engine_->StagePartition("bf-2", monthly, "2025-01", days);
  ASSERT_TRUE(month.ok()) << month.status();
  // One input fingerprint per day read; day 2 is the staged one (2 regions).
  ASSERT_EQ(month->inputs.size(), 31u);
  EXPECT_EQ(month->inputs[1].partition, "2025-01-02");
  EXPECT_EQ(month->inputs[1].rows, 2);
  EXPECT_EQ(month->inputs[3].rows, 0);
  for (const std::string day : {"2025-01-02", "2025-01-03"}) {
    auto r = engine_->StagePartition(
        "bf-2", rolling, day,
        {{&revenue_, day == "2025-01-02" ? "2025-01-01" : "2025-01-02"},
         {&revenue_, day}});
    ASSERT_TRUE(r.ok()) << r.status();
  }
  ASSERT_TRUE(engine_->Publish(layout).ok());

  // Independently: the month from the raw tables as they are now (day 2
  // recomputed from them, days 1 and 3 unchanged since bf-1).
  EXPECT_EQ(Rows("SELECT month, region, revenue FROM monthly_revenue "
                 "ORDER BY 1, 2"),
            Rows("SELECT substr(o.order_date, 1, 7), c.region, "
                 "SUM(o.amount - o.refund) FROM raw_orders o, dim_customers c "
                 "WHERE c.customer_id = o.customer_id GROUP BY 1, 2 "
                 "ORDER BY 1, 2"));
  EXPECT_EQ(Rows("SELECT ds, revenue, since FROM rolling_revenue ORDER BY 1"),
            Rows("SELECT '2025-01-02', SUM(amount - refund), '2025-01-01' "
                 "FROM raw_orders WHERE order_date BETWEEN '2025-01-01' AND "
                 "'2025-01-02' UNION ALL SELECT '2025-01-03', "
                 "SUM(amount - refund), '2025-01-02' FROM raw_orders WHERE "
                 "order_date BETWEEN '2025-01-02' AND '2025-01-03' "
                 "ORDER BY 1"));
  EXPECT_EQ(Rows("SELECT * FROM daily_revenue WHERE ds <> '2025-01-02' "
                 "ORDER BY 1, 2"),
            day1_and_3);
}

TEST_F(SqliteEngineTest, WindowStartOnlyForALookbackDataset) {
  RunRevenueJob("bf-1", {"2025-01-01"});
  totals_.transform =
      "SELECT ds, COUNT(*) AS regions, SUM(revenue) AS revenue FROM "
      "daily_revenue WHERE ds >= :window_start AND ds < :partition_end "
      "GROUP BY ds";
  JobLayout layout = Layout("bf-2", {{&totals_, {"2025-01-01"}}});
  ASSERT_TRUE(engine_->PrepareJob(layout).ok());
  auto r = engine_->StagePartition("bf-2", totals_, "2025-01-01",
                                   {{&revenue_, "2025-01-01"}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(r.status().message(), HasSubstr(":window_start"));
  EXPECT_THAT(r.status().message(), HasSubstr("a `lookback` upstream"));
}

}  // namespace
}  // namespace backfill
