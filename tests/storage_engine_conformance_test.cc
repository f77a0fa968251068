// Engine conformance: the life of a job (staging, validation, publish,
// restart, rollback) on every warehouse of ConformanceWarehouses(), with a
// small orders / customers / daily_revenue fixture built with plain SQL.
// Results are compared with independent plain SQL over the fixture (see
// tests/testing/engine_conformance.h for the rules the SQL follows).

#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/model/partition.h"
#include "core/ports/engine.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/engine_conformance.h"
#include "tests/testing/warehouse_harness.h"

namespace backfill {
namespace storage_engine_conformance_test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using testing::TableColumn;
using testing::WarehouseHarness;

constexpr char kDailyRevenueSql[] = R"sql(
  SELECT o.order_date AS ds, c.region AS region,
         SUM(o.amount - o.refund) AS revenue, COUNT(*) AS orders
  FROM raw_orders o JOIN dim_customers c ON c.customer_id = o.customer_id
  WHERE o.order_date >= :partition_start AND o.order_date < :partition_end
  GROUP BY 1, 2
)sql";

class EngineConformanceTest : public testing::ConformanceTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(testing::ConformanceTest::SetUp());
    Exec(R"sql(
      CREATE TABLE raw_orders (order_id INTEGER PRIMARY KEY, order_date TEXT,
                               customer_id INTEGER,
                               amount DOUBLE PRECISION,
                               refund DOUBLE PRECISION);
      CREATE TABLE dim_customers (customer_id INTEGER PRIMARY KEY,
                                  region TEXT);
      INSERT INTO dim_customers VALUES (1, 'EU'), (2, 'US'), (3, 'EU');
      INSERT INTO raw_orders VALUES
        (1, '2025-01-01', 1, 10, 0), (2, '2025-01-01', 2, 20, 5),
        (3, '2025-01-01', 3, 30, 0), (4, '2025-01-02', 1, 40, 10),
        (5, '2025-01-02', 2, 50, 0), (6, '2025-01-03', 3, 60, 0),
        (7, '2025-01-03', 1, 70, 7);
    )sql");

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
                        {"revenue", "DOUBLE PRECISION"},
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
    totals_.columns = {{"ds", "TEXT"},
                       {"regions", "INTEGER"},
                       {"revenue", "DOUBLE PRECISION"}};
    totals_.primary_key = {"ds"};
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
    return engine()->StagePartition(job, revenue_, day,
                                    {{&orders_, day}, {&customers_, {}}});
  }

  // Prepares, stages, validates and publishes daily_revenue for `days`.
  void RunRevenueJob(const std::string& job,
                     const std::vector<std::string>& days) {
    JobLayout layout = Layout(job, {{&revenue_, days}});
    ASSERT_TRUE(engine()->PrepareJob(layout).ok());
    for (const std::string& day : days) {
      auto staged = StageRevenue(job, day);
      ASSERT_TRUE(staged.ok()) << staged.status();
    }
    auto report = engine()->ValidateStaged(job, revenue_);
    ASSERT_TRUE(report.ok()) << report.status();
    ASSERT_THAT(report->failures, IsEmpty());
    absl::Status published = engine()->Publish(layout);
    ASSERT_TRUE(published.ok()) << published;
  }

  // The rows of a table with daily_revenue's columns (`relation` as SQL),
  // revenue in cents, in key order.
  std::vector<std::string> RevenueRows(const std::string& relation,
                                       const std::string& where = "TRUE") {
    return Rows(absl::StrCat("SELECT ds, region, ", Cents("revenue"),
                             ", orders FROM ", relation, " WHERE ", where,
                             " ORDER BY 1, 2"));
  }

  // The same numbers computed independently from the raw tables, for any
  // list of days.
  std::vector<std::string> ExpectedDailyRevenue(const std::string& days_in) {
    return Rows(absl::StrCat(
        "SELECT o.order_date, c.region, ", Cents("SUM(o.amount - o.refund)"),
        ", COUNT(*) FROM raw_orders o, dim_customers c WHERE c.customer_id = "
        "o.customer_id AND o.order_date IN (",
        days_in, ") GROUP BY o.order_date, c.region ORDER BY 1, 2"));
  }

  // Every row of daily_revenue, each value exactly (ExactText), in one
  // order: what "identical" compares.
  std::vector<std::string> Dump(const std::string& table) {
    const WarehouseHarness& h = warehouse();
    return Rows(
        absl::StrCat("SELECT ", h.ExactText("ds"), ", ", h.ExactText("region"),
                     ", ", h.ExactText("revenue"), ", ", h.ExactText("orders"),
                     " FROM ", Quote(table), " ORDER BY 1, 2, 3, 4"));
  }

  DatasetSpec orders_, customers_, revenue_, totals_;
};

INSTANTIATE_TEST_SUITE_P(Warehouses, EngineConformanceTest,
                         ::testing::ValuesIn(testing::ConformanceWarehouses()),
                         testing::WarehouseParamName);

TEST_P(EngineConformanceTest, StageAndPublishGiveThePlainSqlResult) {
  JobLayout layout =
      Layout("bf-1", {{&revenue_, {"2025-01-01", "2025-01-02"}}});
  ASSERT_TRUE(engine()->PrepareJob(layout).ok());
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

  EXPECT_FALSE(*engine()->IsPublished("bf-1"));
  EXPECT_FALSE(Exists(Quote("daily_revenue")));
  ASSERT_TRUE(engine()->Publish(layout).ok());
  EXPECT_TRUE(*engine()->IsPublished("bf-1"));

  EXPECT_EQ(RevenueRows(Quote("daily_revenue")),
            ExpectedDailyRevenue("'2025-01-01', '2025-01-02'"));
  // Created from the contract, with its primary key.
  auto columns = warehouse().Columns("daily_revenue");
  ASSERT_TRUE(columns.ok()) << columns.status();
  EXPECT_THAT(*columns, ElementsAre(TableColumn{"ds", "TEXT", 1},
                                    TableColumn{"region", "TEXT", 2},
                                    TableColumn{"revenue", "DOUBLE PRECISION"},
                                    TableColumn{"orders", "INTEGER"}));

  auto counts = engine()->CountRowsByPartition(revenue_);
  ASSERT_TRUE(counts.ok()) << counts.status();
  EXPECT_EQ(counts->size(), 2u);
  EXPECT_EQ(counts->at("2025-01-01"), 2);
  auto orders = engine()->CountRowsByPartition(orders_);
  EXPECT_EQ(orders->at("2025-01-03"), 2);
  auto customers = engine()->CountRowsByPartition(customers_);
  EXPECT_EQ(customers->at(""), 3);
  DatasetSpec missing = revenue_;
  missing.table = "nope";
  EXPECT_TRUE(engine()->CountRowsByPartition(missing)->empty());
}

TEST_P(EngineConformanceTest,
       SecondPublishReplacesOnlyItsPartitionsAndKeepsPrev) {
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
  EXPECT_EQ(RevenueRows(Quote("daily_revenue"), "ds = '2025-01-02'"),
            ExpectedDailyRevenue("'2025-01-02'"));
  EXPECT_EQ(
      Rows(absl::StrCat("SELECT * FROM ",
                        warehouse().RollbackCopyTable("bf-2", "daily_revenue"),
                        " ORDER BY 1, 2")),
      old_day2);
}

TEST_P(EngineConformanceTest,
       RowsOutsideThePartitionAreRejectedAndNothingStaged) {
  revenue_.transform =
      "SELECT o.order_date AS ds, 'all' AS region, SUM(o.amount) AS revenue, "
      "COUNT(*) AS orders FROM raw_orders o GROUP BY 1";
  JobLayout layout = Layout("bf-1", {{&revenue_, {"2025-01-01"}}});
  ASSERT_TRUE(engine()->PrepareJob(layout).ok());
  auto r = StageRevenue("bf-1", "2025-01-01");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(r.status().message(),
              HasSubstr("2 rows of daily_revenue fall outside partition "
                        "2025-01-01 (e.g. ds='2025-01-02')"));
  EXPECT_EQ(Count(warehouse().StagingTable("bf-1", "daily_revenue")), 0);
}

// A partition rejected after its transform ran leaves none of its rows to
// the next partition staged with the same transform (the engine's scratch
// space is reused from one partition to the next).
TEST_P(EngineConformanceTest, ARejectedPartitionLeavesNothingToTheNext) {
  revenue_.transform =
      "SELECT o.order_date AS ds, 'all' AS region, SUM(o.amount) AS revenue, "
      "COUNT(*) AS orders FROM raw_orders o WHERE o.order_date >= :partition "
      "GROUP BY 1";
  ASSERT_TRUE(engine()
                  ->PrepareJob(Layout(
                      "bf-1", {{&revenue_, {"2025-01-01", "2025-01-03"}}}))
                  .ok());
  for (int round = 0; round < 3; ++round) {
    auto rejected = StageRevenue("bf-1", "2025-01-01");
    ASSERT_FALSE(rejected.ok());
    EXPECT_THAT(rejected.status().message(),
                HasSubstr("2 rows of daily_revenue fall outside partition"));
    auto staged = StageRevenue("bf-1", "2025-01-03");
    ASSERT_TRUE(staged.ok()) << staged.status();
    EXPECT_EQ(staged->rows_written, 1);
    const std::string stage = warehouse().StagingTable("bf-1", "daily_revenue");
    EXPECT_EQ(
        RevenueRows(stage),
        Rows(absl::StrCat("SELECT order_date, 'all', ", Cents("SUM(amount)"),
                          ", COUNT(*) FROM raw_orders WHERE order_date = "
                          "'2025-01-03' GROUP BY 1")))
        << "round " << round;
  }
}

TEST_P(EngineConformanceTest, MissingContractColumnIsNamed) {
  revenue_.transform =
      "SELECT order_date AS ds, 'x' AS region, SUM(amount) AS revenue "
      "FROM raw_orders WHERE order_date = :partition GROUP BY 1";
  ASSERT_TRUE(
      engine()->PrepareJob(Layout("bf-1", {{&revenue_, {"2025-01-01"}}})).ok());
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
  EXPECT_EQ(Count(Quote("raw_orders")), 7);
}

// A transform reads its declared upstream datasets and calls the
// functions of the allow-list; a table it did not declare, or a function
// off the list, is refused before it runs, and nothing is staged.
TEST_P(EngineConformanceTest, ATransformReadsOnlyWhatItDeclares) {
  Exec("CREATE TABLE secrets (ds TEXT, region TEXT)");
  Exec("INSERT INTO secrets VALUES ('2025-01-01', 'x')");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"SELECT ds, region, 0.0 AS revenue, 0 AS orders FROM secrets WHERE "
       "ds = :partition",
       "secrets"},
      {"SELECT o.order_date AS ds, c.region AS region, SUM(o.amount) AS "
       "revenue, COUNT(*) AS orders FROM raw_orders o JOIN dim_customers c "
       "ON c.customer_id = o.customer_id WHERE o.order_date = :partition "
       "AND c.region NOT IN (SELECT region FROM secrets) GROUP BY 1, 2",
       "secrets"},
      {"SELECT order_date AS ds, 'r' AS region, SUM(amount) * random() AS "
       "revenue, COUNT(*) AS orders FROM raw_orders WHERE order_date = "
       ":partition GROUP BY 1",
       "random, which is not on the allow-list"},
  };
  int n = 0;
  for (const auto& [transform, what] : cases) {
    SCOPED_TRACE(transform);
    const std::string job = absl::StrCat("bf-", ++n);
    revenue_.transform = transform;
    ASSERT_TRUE(
        engine()->PrepareJob(Layout(job, {{&revenue_, {"2025-01-01"}}})).ok());
    auto staged = StageRevenue(job, "2025-01-01");
    ASSERT_EQ(staged.status().code(), absl::StatusCode::kFailedPrecondition)
        << staged.status();
    EXPECT_THAT(staged.status().message(),
                HasSubstr("transform of daily_revenue is refused: it "));
    EXPECT_THAT(staged.status().message(), HasSubstr(what));
    EXPECT_THAT(staged.status().message(),
                HasSubstr("orders (table raw_orders), customers (table "
                          "dim_customers)"));
    ASSERT_TRUE(engine()->DropStaging(job).ok());
  }
  // The declared upstreams, and only them, stage as before.
  revenue_.transform = kDailyRevenueSql;
  RunRevenueJob("bf-ok", {"2025-01-01"});
  EXPECT_EQ(RevenueRows(Quote("daily_revenue")),
            ExpectedDailyRevenue("'2025-01-01'"));
}

TEST_P(EngineConformanceTest, PublishIsAtomicAcrossDatasets) {
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
  ASSERT_TRUE(engine()->PrepareJob(layout).ok());
  ASSERT_TRUE(StageRevenue("bf-2", "2025-01-01").ok());
  ASSERT_TRUE(engine()
                  ->StagePartition("bf-2", dups, "2025-01-01",
                                   {{&orders_, "2025-01-01"}})
                  .ok());
  auto report = engine()->ValidateStaged("bf-2", dups);
  ASSERT_TRUE(report.ok());
  ASSERT_EQ(report->failures.size(), 1u);
  EXPECT_THAT(report->failures[0], HasSubstr("('2025-01-01') appears 3 times"));

  absl::Status published = engine()->Publish(layout);
  EXPECT_FALSE(published.ok());
  EXPECT_THAT(published.message(), HasSubstr("dups"));
  EXPECT_EQ(Rows("SELECT * FROM daily_revenue ORDER BY 1, 2"), before);
  EXPECT_FALSE(Exists(Quote("dups")));
  EXPECT_FALSE(Exists(warehouse().RollbackCopyTable("bf-2", "daily_revenue")));
  EXPECT_FALSE(*engine()->IsPublished("bf-2"));
}

TEST_P(EngineConformanceTest, RestagingAPartitionReplacesIt) {
  JobLayout layout =
      Layout("bf-1", {{&revenue_, {"2025-01-01", "2025-01-02"}}});
  ASSERT_TRUE(engine()->PrepareJob(layout).ok());
  ASSERT_TRUE(StageRevenue("bf-1", "2025-01-01").ok());
  ASSERT_TRUE(StageRevenue("bf-1", "2025-01-02").ok());
  Exec(
      "UPDATE raw_orders SET amount = amount * 2 WHERE order_date = "
      "'2025-01-01'");
  auto again = StageRevenue("bf-1", "2025-01-01");
  ASSERT_TRUE(again.ok()) << again.status();
  const std::string stage = warehouse().StagingTable("bf-1", "daily_revenue");
  EXPECT_EQ(RevenueRows(stage),
            ExpectedDailyRevenue("'2025-01-01', '2025-01-02'"));
  EXPECT_EQ(Count(stage), 4);
}

TEST_P(EngineConformanceTest, PinnedDimensionIsIsolatedFromLaterChanges) {
  JobLayout layout =
      Layout("bf-1", {{&revenue_, {"2025-01-01", "2025-01-02"}}});
  ASSERT_TRUE(engine()->PrepareJob(layout).ok());
  auto expected = ExpectedDailyRevenue("'2025-01-01', '2025-01-02'");
  Exec("UPDATE dim_customers SET region = 'APAC'");
  ASSERT_TRUE(StageRevenue("bf-1", "2025-01-01").ok());
  // A restart: a new engine, PrepareJob again, the same pinned version.
  ASSERT_NO_FATAL_FAILURE(Restart());
  ASSERT_TRUE(engine()->PrepareJob(layout).ok());
  auto r = StageRevenue("bf-1", "2025-01-02");
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(engine()->Publish(layout).ok());
  EXPECT_EQ(RevenueRows(Quote("daily_revenue")), expected);
  EXPECT_THAT(Rows("SELECT DISTINCT region FROM daily_revenue ORDER BY 1"),
              ElementsAre("EU", "US"));
}

TEST_P(EngineConformanceTest, DownstreamReadsUpstreamStagingThroughTheOverlay) {
  const std::string totals_rows = absl::StrCat(
      "SELECT ds, regions, ", Cents("revenue"), " FROM region_count");
  const std::string totals_expected =
      absl::StrCat("SELECT ds, COUNT(*), ", Cents("SUM(revenue)"),
                   " FROM daily_revenue GROUP BY ds ORDER BY 1");
  // Published state: daily_revenue and region_count for three days.
  {
    JobLayout layout = Layout(
        "bf-1", {{&revenue_, {"2025-01-01", "2025-01-02", "2025-01-03"}},
                 {&totals_, {"2025-01-01", "2025-01-02", "2025-01-03"}}});
    ASSERT_TRUE(engine()->PrepareJob(layout).ok());
    for (const char* day : {"2025-01-01", "2025-01-02", "2025-01-03"}) {
      ASSERT_TRUE(StageRevenue("bf-1", day).ok());
    }
    // The upstream table is not published yet: only its staging is read.
    for (const char* day : {"2025-01-01", "2025-01-02", "2025-01-03"}) {
      auto r = engine()->StagePartition("bf-1", totals_, day,
                                        {{&revenue_, std::string(day)}});
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_EQ(r->inputs[0].rows, day == std::string("2025-01-03") ? 1 : 2);
    }
    ASSERT_TRUE(engine()->Publish(layout).ok());
  }
  EXPECT_EQ(Rows(totals_rows + " ORDER BY 1"), Rows(totals_expected));
  auto day3_before = Rows(totals_rows + " WHERE ds = '2025-01-03'");
  ASSERT_EQ(day3_before.size(), 1u);

  // Job 2 recomputes daily_revenue for day 1 only, and region_count for
  // days 1 and 3: day 1 must see the staged new revenue, day 3 the
  // published one.
  Exec("UPDATE raw_orders SET refund = 0");
  JobLayout layout = Layout("bf-2", {{&revenue_, {"2025-01-01"}},
                                     {&totals_, {"2025-01-01", "2025-01-03"}}});
  ASSERT_TRUE(engine()->PrepareJob(layout).ok());
  ASSERT_TRUE(StageRevenue("bf-2", "2025-01-01").ok());
  for (const char* day : {"2025-01-01", "2025-01-03"}) {
    ASSERT_TRUE(engine()
                    ->StagePartition("bf-2", totals_, day,
                                     {{&revenue_, std::string(day)}})
                    .ok());
  }
  const std::string stage = warehouse().StagingTable("bf-2", "region_count");
  EXPECT_THAT(Rows(absl::StrCat("SELECT ds, regions, ", Cents("revenue"),
                                " FROM ", stage, " ORDER BY 1")),
              ElementsAre("2025-01-01|2|6000", day3_before[0]));
  ASSERT_TRUE(engine()->Publish(layout).ok());
  EXPECT_EQ(Rows(totals_rows + " ORDER BY 1"), Rows(totals_expected));
}

TEST_P(EngineConformanceTest, PublishTwiceIsANoOpAndDropStagingKeepsPrev) {
  RunRevenueJob("bf-1", {"2025-01-01"});
  Exec("UPDATE daily_revenue SET revenue = -1");
  JobLayout layout = Layout("bf-1", {{&revenue_, {"2025-01-01"}}});
  ASSERT_TRUE(engine()->Publish(layout).ok());
  EXPECT_THAT(Rows(absl::StrCat("SELECT DISTINCT ", Cents("revenue"),
                                " FROM daily_revenue")),
              ElementsAre("-100"));

  // Staged rows, partition list and pinned snapshot are staging; the
  // rollback copy is not.
  EXPECT_THAT(StagingObjects("bf-1"), Not(IsEmpty()));
  ASSERT_TRUE(engine()->DropStaging("bf-1").ok());
  EXPECT_THAT(StagingObjects("bf-1"), IsEmpty());
  EXPECT_TRUE(Exists(warehouse().RollbackCopyTable("bf-1", "daily_revenue")));
  EXPECT_TRUE(*engine()->IsPublished("bf-1"));
  ASSERT_TRUE(engine()->DropStaging("bf-1").ok());  // idempotent
  EXPECT_EQ(StageRevenue("bf-1", "2025-01-01").status().code(),
            absl::StatusCode::kFailedPrecondition);  // not prepared anymore
}

TEST_P(EngineConformanceTest, ValidateReportsDuplicateAndNullKeys) {
  revenue_.transform =
      "SELECT order_date AS ds, CASE WHEN customer_id = 3 THEN NULL ELSE "
      "'EU' END AS region, amount AS revenue, 1 AS orders FROM raw_orders "
      "WHERE order_date = :partition";
  ASSERT_TRUE(
      engine()->PrepareJob(Layout("bf-1", {{&revenue_, {"2025-01-01"}}})).ok());
  ASSERT_TRUE(StageRevenue("bf-1", "2025-01-01").ok());
  auto report = engine()->ValidateStaged("bf-1", revenue_);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->rows, 3);
  EXPECT_THAT(report->failures,
              ElementsAre(HasSubstr("(ds, region) = ('2025-01-01', 'EU') "
                                    "appears 2 times"),
                          HasSubstr("1 staged row has a NULL in primary key "
                                    "(ds, region) (e.g. ('2025-01-01', "
                                    "NULL))")));
  EXPECT_EQ(engine()->ValidateStaged("bf-9", revenue_).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_P(EngineConformanceTest, IdentifiersAreAlwaysQuoted) {
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
  ASSERT_TRUE(engine()->PrepareJob(layout).ok());
  for (const char* day : {"2025-01-01", "2025-01-03"}) {
    auto r = engine()->StagePartition("bf-1", weird, day, {{&orders_, day}});
    ASSERT_TRUE(r.ok()) << r.status();
  }
  EXPECT_THAT(engine()->ValidateStaged("bf-1", weird)->failures, IsEmpty());
  ASSERT_TRUE(engine()->Publish(layout).ok());
  EXPECT_THAT(
      Rows(absl::StrCat("SELECT * FROM ", Quote(weird.table), " ORDER BY 1")),
      ElementsAre("2025-01-01|3", "2025-01-03|2"));
  EXPECT_EQ((*engine()->CountRowsByPartition(weird))["2025-01-03"], 1);
  EXPECT_EQ(Count(Quote("raw_orders")), 7);
  ASSERT_TRUE(engine()->DropStaging("bf-1").ok());

  DatasetSpec bad_type = revenue_;
  bad_type.columns[0].type = "TEXT); DROP TABLE raw_orders; --";
  EXPECT_EQ(engine()
                ->PrepareJob(Layout("bf-3", {{&bad_type, {"2025-01-01"}}}))
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_P(EngineConformanceTest, PartitionValuesAreValidatedOrBound) {
  const std::string evil = "2025-01-01'; DROP TABLE raw_orders; --";
  EXPECT_EQ(engine()->PrepareJob(Layout("bf-1", {{&revenue_, {evil}}})).code(),
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
  ASSERT_TRUE(engine()->PrepareJob(layout).ok());
  const std::vector<InputRef> all_orders = {{&orders_, std::nullopt}};
  ASSERT_TRUE(
      engine()->StagePartition("bf-2", by_key, evil_key, all_orders).ok());
  ASSERT_TRUE(
      engine()->StagePartition("bf-2", by_key, "plain", all_orders).ok());
  EXPECT_EQ(engine()
                ->StagePartition("bf-2", by_key, "other", all_orders)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(engine()->Publish(layout).ok());
  EXPECT_THAT(Rows("SELECT k, n FROM by_key ORDER BY k"),
              ElementsAre("plain|7", evil_key + "|7"));
  EXPECT_EQ(Count(Quote("raw_orders")), 7);
  auto counts = engine()->CountRowsByPartition(by_key);
  EXPECT_EQ(counts->at(evil_key), 1);
}

TEST_P(EngineConformanceTest, UnpartitionedDatasetReplacesTheWholeTable) {
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
    ASSERT_TRUE(engine()->PrepareJob(layout).ok());
    auto r = engine()->StagePartition(job, regions, "", {{&customers_, {}}});
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_TRUE(engine()->Publish(layout).ok());
    Exec("UPDATE dim_customers SET region = 'APAC' WHERE customer_id = 1");
  }
  EXPECT_THAT(Rows("SELECT * FROM regions ORDER BY 1"),
              ElementsAre("APAC|1", "EU|1", "US|1"));
  EXPECT_EQ(engine()->CountRowsByPartition(regions)->at(""), 3);
}

TEST_P(EngineConformanceTest, ConcurrentStagingFromSeveralThreads) {
  ASSERT_NO_FATAL_FAILURE(Restart(3));
  std::vector<std::string> days = {"2025-01-01", "2025-01-02", "2025-01-03"};
  JobLayout layout = Layout("bf-1", {{&revenue_, days}});
  ASSERT_TRUE(engine()->PrepareJob(layout).ok());
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
  // Each day's rows once in staging, however the nine stagings interleaved:
  // no duplicate (ds, region).
  auto report = engine()->ValidateStaged("bf-1", revenue_);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_THAT(report->failures, IsEmpty());
  const absl::Status published = engine()->Publish(layout);
  ASSERT_TRUE(published.ok()) << published;
  EXPECT_EQ(RevenueRows(Quote("daily_revenue")),
            ExpectedDailyRevenue("'2025-01-01', '2025-01-02', "
                                 "'2025-01-03'"));
}

// Claims follow the ownership rules: the first claim stamps the markers
// that name no store (keeping a marker the store already wrote of the same
// job), another store is refused without take over and changes nothing, a
// take over keeps every marker's store and stamps nothing.
TEST_P(EngineConformanceTest, ClaimsFollowTheOwnershipRules) {
  absl::Status legacy = warehouse().AddLegacyPublications({"bf-1", "bf-2"});
  if (absl::IsUnimplemented(legacy)) GTEST_SKIP() << legacy;
  ASSERT_TRUE(legacy.ok()) << legacy;
  const WarehouseHarness& h = warehouse();
  const std::string meta = h.RecordsTable("meta");
  const std::string publications = h.RecordsTable("publications");
  const std::string owner =
      absl::StrCat("SELECT value FROM ", meta, " WHERE key = 'owner_store_id'");
  const std::string markers = absl::StrCat("SELECT store_id, job_id FROM ",
                                           publications, " ORDER BY 2, 1");
  // A marker store-a wrote of bf-1 before the warehouse had an owner.
  Exec(absl::StrCat("INSERT INTO ", publications,
                    " (store_id, job_id, published_at) SELECT 'store-a', "
                    "job_id, published_at FROM ",
                    publications, " WHERE job_id = 'bf-1'"));
  ASSERT_TRUE(engine()->Claim("store-a", false).ok());
  EXPECT_THAT(Strings(owner), ElementsAre("store-a"));
  EXPECT_THAT(Rows(markers), ElementsAre("store-a|bf-1", "store-a|bf-2"));

  ASSERT_TRUE(engine()->Claim("store-a", false).ok());
  const absl::Status refused = engine()->Claim("store-b", false);
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition) << refused;
  EXPECT_THAT(std::string(refused.message()),
              HasSubstr("belongs to state store store-a"));
  EXPECT_THAT(Strings(owner), ElementsAre("store-a"));

  Exec(absl::StrCat("INSERT INTO ", publications,
                    " (store_id, job_id, published_at) SELECT '', 'bf-9', "
                    "published_at FROM ",
                    publications, " WHERE job_id = 'bf-1'"));
  ASSERT_TRUE(engine()->Claim("store-b", true).ok());
  EXPECT_THAT(Strings(owner), ElementsAre("store-b"));
  EXPECT_THAT(Rows(markers),
              ElementsAre("store-a|bf-1", "store-a|bf-2", "|bf-9"));
  EXPECT_EQ(engine()->Claim("", false).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Strings(owner), ElementsAre("store-b"));
}

// A daemon that dies between staging and publishing: what it staged is
// still there after the restart, nothing is published until Publish (after
// PrepareJob again), and a Publish repeated after a second restart (the
// state store never recorded the first) publishes nothing more.
TEST_P(EngineConformanceTest, ACrashBetweenStagingAndPublishPublishesOnce) {
  ASSERT_TRUE(engine()->Claim("store-a", false).ok());
  const std::vector<std::string> days = {"2025-01-01", "2025-01-02"};
  const JobLayout layout = Layout("bf-1", {{&revenue_, days}});
  ASSERT_TRUE(engine()->PrepareJob(layout).ok());
  for (const std::string& day : days) {
    auto staged = StageRevenue("bf-1", day);
    ASSERT_TRUE(staged.ok()) << staged.status();
  }
  const std::vector<std::string> expected =
      ExpectedDailyRevenue("'2025-01-01', '2025-01-02'");
  ASSERT_EQ(expected.size(), 4u);

  ASSERT_NO_FATAL_FAILURE(Restart());
  ASSERT_TRUE(engine()->Claim("store-a", false).ok());
  EXPECT_FALSE(Exists(Quote("daily_revenue")));
  EXPECT_FALSE(*engine()->IsPublished("bf-1"));
  EXPECT_EQ(RevenueRows(warehouse().StagingTable("bf-1", "daily_revenue")),
            expected);
  EXPECT_THAT(*engine()->ListJobsWithStaging(), ElementsAre("bf-1"));
  // Later changes to the inputs do not reach what was staged.
  Exec("UPDATE raw_orders SET refund = amount");

  ASSERT_TRUE(engine()->PrepareJob(layout).ok());
  EXPECT_FALSE(*engine()->IsPublished("bf-1"));
  EXPECT_FALSE(Exists(Quote("daily_revenue")));
  ASSERT_TRUE(engine()->Publish(layout).ok());
  EXPECT_TRUE(*engine()->IsPublished("bf-1"));
  EXPECT_EQ(RevenueRows(Quote("daily_revenue")), expected);
  const std::vector<std::string> published = Dump("daily_revenue");

  // Crashed again before the state store recorded the publish: the
  // restarted daemon prepares and publishes again, which changes nothing,
  // and the rollback copy still holds what the one publish replaced (no
  // rows: the table did not exist).
  ASSERT_NO_FATAL_FAILURE(Restart());
  ASSERT_TRUE(engine()->Claim("store-a", false).ok());
  EXPECT_TRUE(*engine()->IsPublished("bf-1"));
  ASSERT_TRUE(engine()->PrepareJob(layout).ok());
  ASSERT_TRUE(engine()->Publish(layout).ok());
  EXPECT_EQ(Dump("daily_revenue"), published);
  EXPECT_EQ(Count(warehouse().RollbackCopyTable("bf-1", "daily_revenue")), 0);
}

TEST_P(EngineConformanceTest,
       RollbackRestoresIdenticalRowsOnlyInItsPartitions) {
  ASSERT_TRUE(engine()->Claim("store-a", false).ok());
  RunRevenueJob("bf-1", {"2025-01-01", "2025-01-02", "2025-01-03"});
  // Rows another writer put into the published table: a timestamp inside
  // day 2 (a member of partition 2025-01-02 by the one definition), a value
  // of no partition, a day the jobs never touch. (A NULL partition value
  // cannot be in a primary key column on every warehouse;
  // storage_sqlite_engine_test.cc has SQLite's case.)
  Exec(
      "INSERT INTO daily_revenue VALUES ('2025-01-02 12:00:00', 'XX', 1.5, "
      "NULL), ('junk', 'ZZ', 0.1, 2), ('2025-01-09', 'EU', 99, 9)");
  const std::vector<std::string> before = Dump("daily_revenue");
  Exec("UPDATE raw_orders SET refund = amount / 3");
  RunRevenueJob("bf-2", {"2025-01-02", "2025-01-04"});  // day 4: no orders
  const std::vector<std::string> published = Dump("daily_revenue");
  ASSERT_NE(published, before);
  // The timestamp row of day 2 was replaced; the others stayed.
  EXPECT_EQ(Int("SELECT COUNT(*) FROM daily_revenue WHERE ds = "
                "'2025-01-02 12:00:00'"),
            0);
  EXPECT_EQ(Int("SELECT COUNT(*) FROM daily_revenue WHERE region = 'ZZ' OR "
                "ds = '2025-01-09'"),
            2);

  RollbackSpec spec;
  spec.layout = Layout("bf-2", {{&revenue_, {"2025-01-02", "2025-01-04"}}});
  spec.marker.reason = "refunds were wrong";
  auto result = engine()->Rollback(spec);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(Dump("daily_revenue"), before);
  // Restored: bf-1's two regions of day 2 plus the timestamp row.
  EXPECT_EQ(result->rows, 3);
  EXPECT_THAT(Rows("SELECT COUNT(*) FROM daily_revenue WHERE ds >= "
                   "'2025-01-02' AND ds < '2025-01-03'"),
              ElementsAre("3"));
  EXPECT_FALSE(Exists(warehouse().RollbackCopyTable("bf-2", "daily_revenue")));
  EXPECT_TRUE(Exists(warehouse().RollbackCopyTable("bf-1", "daily_revenue")));
  // The rollback marker is in the warehouse: another engine on it reads it.
  auto other = warehouse().OpenAnother();
  ASSERT_TRUE(other.ok()) << other.status();
  auto info = (*other)->Inspect();
  ASSERT_TRUE(info.ok()) << info.status();
  ASSERT_EQ(info->rollbacks.size(), 1u);
  ASSERT_EQ(info->rollbacks.count("bf-2"), 1u);
  const RollbackMarker& marker = info->rollbacks.at("bf-2");
  EXPECT_EQ(marker.store_id, "store-a");
  EXPECT_EQ(marker.reason, "refunds were wrong");
  EXPECT_FALSE(marker.forced);
  EXPECT_THAT(marker.with_jobs, IsEmpty());
}

TEST_P(EngineConformanceTest, RollbackFingerprintsMatchThePublishedVersion) {
  ASSERT_TRUE(engine()->Claim("store-a", false).ok());
  JobLayout layout = Layout("bf-1", {{&revenue_, {"2025-01-01"}}});
  ASSERT_TRUE(engine()->PrepareJob(layout).ok());
  auto staged = StageRevenue("bf-1", "2025-01-01");
  ASSERT_TRUE(staged.ok()) << staged.status();
  ASSERT_TRUE(engine()->Publish(layout).ok());
  Exec("UPDATE raw_orders SET refund = 1");
  RunRevenueJob("bf-2", {"2025-01-01"});
  RollbackSpec spec;
  spec.layout = Layout("bf-2", {{&revenue_, {"2025-01-01"}}});
  auto result = engine()->Rollback(spec);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->partitions.size(), 1u);
  // The rows restored are bf-1's: the same fingerprint as it staged.
  EXPECT_EQ(result->partitions[0].fingerprint, staged->output_fingerprint);
  EXPECT_EQ(result->partitions[0].rows, staged->rows_written);
}

TEST_P(EngineConformanceTest, RollbackIsAtomicAcrossDatasets) {
  ASSERT_TRUE(engine()->Claim("store-a", false).ok());
  const std::vector<std::string> days = {"2025-01-01", "2025-01-02"};
  auto run = [&](const std::string& job) {
    JobLayout layout = Layout(job, {{&revenue_, days}, {&totals_, days}});
    ASSERT_TRUE(engine()->PrepareJob(layout).ok());
    for (const std::string& day : days) {
      ASSERT_TRUE(StageRevenue(job, day).ok());
      ASSERT_TRUE(
          engine()->StagePartition(job, totals_, day, {{&revenue_, day}}).ok());
    }
    ASSERT_TRUE(engine()->Publish(layout).ok());
  };
  ASSERT_NO_FATAL_FAILURE(run("bf-1"));
  Exec("UPDATE raw_orders SET refund = amount");
  ASSERT_NO_FATAL_FAILURE(run("bf-2"));
  const WarehouseHarness& h = warehouse();
  const std::string totals_dump = absl::StrCat(
      "SELECT ", h.ExactText("ds"), ", ", h.ExactText("regions"), ", ",
      h.ExactText("revenue"), " FROM region_count ORDER BY 1, 2, 3");
  const std::vector<std::string> revenue = Dump("daily_revenue");
  const std::vector<std::string> totals = Rows(totals_dump);
  // The second dataset's copy is gone: the first is not restored either.
  Exec(absl::StrCat("DROP TABLE ",
                    warehouse().RollbackCopyTable("bf-2", "region_count")));
  RollbackSpec spec;
  spec.layout = Layout("bf-2", {{&revenue_, days}, {&totals_, days}});
  auto result = engine()->Rollback(spec);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kFailedPrecondition)
      << result.status();
  EXPECT_EQ(Dump("daily_revenue"), revenue);
  EXPECT_EQ(Rows(totals_dump), totals);
  EXPECT_TRUE(Exists(warehouse().RollbackCopyTable("bf-2", "daily_revenue")));
  // No rollback marker was written.
  auto other = warehouse().OpenAnother();
  ASSERT_TRUE(other.ok()) << other.status();
  auto info = (*other)->Inspect();
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_THAT(info->rollbacks, IsEmpty());
}

// A rollup reads the job's staged days plus the published other days; a
// lookback transform gets :window_start, the start of its window.
TEST_P(EngineConformanceTest, RollupAndLookbackReadStagedAndPublishedDays) {
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
      {"month", "TEXT"}, {"region", "TEXT"}, {"revenue", "DOUBLE PRECISION"}};
  monthly.primary_key = {"month", "region"};

  DatasetSpec rolling;
  rolling.name = "rolling_revenue";
  rolling.kind = DatasetKind::kDerived;
  rolling.table = "rolling_revenue";
  rolling.partition = PartitionSpec{"ds", Grain::kDay, {}};
  rolling.upstream = {{"daily_revenue", Mapping::kLookback, 1}};
  rolling.transform =
      "SELECT :partition AS ds, COALESCE(SUM(revenue), 0) AS revenue, "
      ":window_start AS since FROM daily_revenue WHERE ds >= :window_start "
      "AND ds < :partition_end";
  rolling.columns = {
      {"ds", "TEXT"}, {"revenue", "DOUBLE PRECISION"}, {"since", "TEXT"}};
  rolling.primary_key = {"ds"};

  // Day 2 changes in the raw data; the job recomputes it, its month and the
  // two rolling days that read it.
  Exec("UPDATE raw_orders SET refund = 1 WHERE order_date = '2025-01-02'");
  JobLayout layout = Layout("bf-2", {{&revenue_, {"2025-01-02"}},
                                     {&monthly, {"2025-01"}},
                                     {&rolling, {"2025-01-02", "2025-01-03"}}});
  ASSERT_TRUE(engine()->PrepareJob(layout).ok());
  ASSERT_TRUE(StageRevenue("bf-2", "2025-01-02").ok());
  std::vector<InputRef> days;
  for (int d = 1; d <= 31; ++d) {
    days.push_back({&revenue_, absl::StrFormat("2025-01-%02d", d)});
  }
  auto month = engine()->StagePartition("bf-2", monthly, "2025-01", days);
  ASSERT_TRUE(month.ok()) << month.status();
  // One input fingerprint per day read; day 2 is the staged one (2 regions).
  ASSERT_EQ(month->inputs.size(), 31u);
  EXPECT_EQ(month->inputs[1].partition, "2025-01-02");
  EXPECT_EQ(month->inputs[1].rows, 2);
  EXPECT_EQ(month->inputs[3].rows, 0);
  for (const std::string day : {"2025-01-02", "2025-01-03"}) {
    auto r = engine()->StagePartition(
        "bf-2", rolling, day,
        {{&revenue_, day == "2025-01-02" ? "2025-01-01" : "2025-01-02"},
         {&revenue_, day}});
    ASSERT_TRUE(r.ok()) << r.status();
  }
  ASSERT_TRUE(engine()->Publish(layout).ok());

  // Independently: the month from the raw tables as they are now (day 2
  // recomputed from them, days 1 and 3 unchanged since bf-1).
  EXPECT_EQ(Rows(absl::StrCat("SELECT month, region, ", Cents("revenue"),
                              " FROM monthly_revenue ORDER BY 1, 2")),
            Rows(absl::StrCat("SELECT substr(o.order_date, 1, 7), c.region, ",
                              Cents("SUM(o.amount - o.refund)"),
                              " FROM raw_orders o, dim_customers c WHERE "
                              "c.customer_id = o.customer_id GROUP BY 1, 2 "
                              "ORDER BY 1, 2")));
  const std::string sum = Cents("SUM(amount - refund)");
  EXPECT_EQ(Rows(absl::StrCat("SELECT ds, ", Cents("revenue"),
                              ", since FROM rolling_revenue ORDER BY 1")),
            Rows(absl::StrCat(
                "SELECT '2025-01-02', ", sum,
                ", '2025-01-01' FROM raw_orders WHERE order_date BETWEEN "
                "'2025-01-01' AND '2025-01-02' UNION ALL SELECT '2025-01-03', ",
                sum,
                ", '2025-01-02' FROM raw_orders WHERE order_date BETWEEN "
                "'2025-01-02' AND '2025-01-03' ORDER BY 1")));
  EXPECT_EQ(Rows("SELECT * FROM daily_revenue WHERE ds <> '2025-01-02' "
                 "ORDER BY 1, 2"),
            day1_and_3);
}

TEST_P(EngineConformanceTest, WindowStartOnlyForALookbackDataset) {
  RunRevenueJob("bf-1", {"2025-01-01"});
  totals_.transform =
      "SELECT ds, COUNT(*) AS regions, SUM(revenue) AS revenue FROM "
      "daily_revenue WHERE ds >= :window_start AND ds < :partition_end "
      "GROUP BY ds";
  JobLayout layout = Layout("bf-2", {{&totals_, {"2025-01-01"}}});
  ASSERT_TRUE(engine()->PrepareJob(layout).ok());
  auto r = engine()->StagePartition("bf-2", totals_, "2025-01-01",
                                    {{&revenue_, "2025-01-01"}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(r.status().message(), HasSubstr(":window_start"));
  EXPECT_THAT(r.status().message(), HasSubstr("a `lookback` upstream"));
}

// Two jobs that publish the first partitions of a dataset at once (as
// replicas of a group may) both find its table missing: one creates it,
// the other publishes into it; neither fails.
TEST_P(EngineConformanceTest, TwoFirstPublishesAtOnceBothLand) {
  Restart(/*connections=*/4);
  const std::vector<std::string> days_a = {"2025-01-01", "2025-01-02"};
  const std::vector<std::string> days_b = {"2025-01-03"};
  JobLayout a = Layout("bf-1", {{&revenue_, days_a}});
  JobLayout b = Layout("bf-2", {{&revenue_, days_b}});
  for (auto& [layout, days] : {std::pair{&a, days_a}, std::pair{&b, days_b}}) {
    ASSERT_TRUE(engine()->PrepareJob(*layout).ok());
    for (const std::string& day : days) {
      auto staged = StageRevenue(layout->job_id, day);
      ASSERT_TRUE(staged.ok()) << staged.status();
    }
  }
  ASSERT_FALSE(Exists(Quote("daily_revenue")));
  absl::Status published_a, published_b;
  std::thread first([&] { published_a = engine()->Publish(a); });
  std::thread second([&] { published_b = engine()->Publish(b); });
  first.join();
  second.join();
  EXPECT_TRUE(published_a.ok()) << published_a;
  EXPECT_TRUE(published_b.ok()) << published_b;
  EXPECT_EQ(RevenueRows(Quote("daily_revenue")),
            ExpectedDailyRevenue("'2025-01-01', '2025-01-02', '2025-01-03'"));
}

}  // namespace
}  // namespace storage_engine_conformance_test
}  // namespace backfill
