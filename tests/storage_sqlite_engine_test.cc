// What only SqliteEngine does, on a temporary warehouse with a small
// orders / customers / daily_revenue fixture built with plain SQL: column
// types as SQLite takes them, a NULL in a primary key column, and job ids
// and rollback copies read back from the names of its tables, an empty file
// that must hold a warehouse left unwritten. What every engine
// must do is in the engine conformance suites
// (storage_engine_conformance_*_test.cc).

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/sqlite/sqlite_db.h"
#include "storage/sqlite/sqlite_engine.h"
#include "tests/testing/fault_vfs.h"
#include "tests/testing/warehouse_test.h"

namespace backfill {
namespace storage_sqlite_engine_test {
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
  }

  void TearDown() override {
    engine_.reset();
    testing::WarehouseTest::TearDown();
  }

  void ReopenEngine() {
    engine_.reset();
    auto engine = SqliteEngine::Open(path_, 2);
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
  DatasetSpec orders_, customers_, revenue_;
};

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

// SQLite lets a primary key column (other than an INTEGER PRIMARY KEY) hold
// NULL: a published row of no partition, which publish and rollback must
// leave as it is.
TEST_F(SqliteEngineTest, ARowWithANullPartitionValueIsNeverTouched) {
  ASSERT_TRUE(engine_->Claim("store-a", false).ok());
  RunRevenueJob("bf-1", {"2025-01-01", "2025-01-02"});
  Exec("INSERT INTO daily_revenue VALUES (NULL, 'YY', NULL, 1)");
  const std::string dump =
      "SELECT quote(ds), quote(region), quote(revenue), quote(orders) FROM "
      "daily_revenue ORDER BY 1, 2, 3, 4";
  const std::vector<std::string> before = Rows(dump);
  Exec("UPDATE raw_orders SET refund = amount / 3");
  RunRevenueJob("bf-2", {"2025-01-02"});
  EXPECT_THAT(Rows("SELECT quote(region), quote(revenue), orders FROM "
                   "daily_revenue WHERE ds IS NULL"),
              ElementsAre("'YY'|NULL|1"));
  RollbackSpec spec;
  spec.layout = Layout("bf-2", {{&revenue_, {"2025-01-02"}}});
  auto result = engine_->Rollback(spec);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->rows, 2);  // bf-1's two regions of day 2
  EXPECT_EQ(Rows(dump), before);
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

// StagePartition keeps its temp views and output table on its connection for
// the next partition. No other call may see them: the view standing in for
// dim_customers (the job's pinned copy) must not answer a count of the
// table itself once the table changed.
TEST_F(SqliteEngineTest, KeptStagingViewsNeverAnswerOtherCalls) {
  ASSERT_TRUE(engine_->Claim("store-a", false).ok());
  JobLayout layout =
      Layout("bf-1", {{&revenue_, {"2025-01-01", "2025-01-02"}}});
  ASSERT_TRUE(engine_->PrepareJob(layout).ok());
  ASSERT_TRUE(StageRevenue("bf-1", "2025-01-01").ok());
  Exec("INSERT INTO dim_customers VALUES (4, 'APAC')");
  // One call at a time: each gets the connection the stage used.
  auto counted = engine_->CountRowsByPartition(customers_);
  ASSERT_TRUE(counted.ok()) << counted.status();
  EXPECT_EQ(counted->at(""), 4);
  // And the job goes on staging after that call dropped its objects.
  auto staged = StageRevenue("bf-1", "2025-01-02");
  ASSERT_TRUE(staged.ok()) << staged.status();
  EXPECT_EQ(staged->rows_written, 2);  // EU and US on 2025-01-02
}

// The kept objects are made again when what they are made of differs, and
// the transform is compiled again with them: a transform that no longer
// compiles against a new job's inputs says so, as it does on a fresh
// connection, even right after the same text compiled for another job.
TEST_F(SqliteEngineTest, ATransformIsCompiledAgainForEachNewSetup) {
  ASSERT_TRUE(engine_->Claim("store-a", false).ok());
  JobLayout first = Layout("bf-1", {{&revenue_, {"2025-01-01"}}});
  ASSERT_TRUE(engine_->PrepareJob(first).ok());
  ASSERT_TRUE(StageRevenue("bf-1", "2025-01-01").ok());
  Exec("ALTER TABLE dim_customers RENAME COLUMN region TO area");
  JobLayout second = Layout("bf-2", {{&revenue_, {"2025-01-01"}}});
  ASSERT_TRUE(engine_->PrepareJob(second).ok());
  auto staged = StageRevenue("bf-2", "2025-01-01");
  ASSERT_FALSE(staged.ok());
  EXPECT_EQ(staged.status().code(), absl::StatusCode::kFailedPrecondition)
      << staged.status();
  EXPECT_THAT(staged.status().message(), HasSubstr("does not compile"));
  EXPECT_THAT(staged.status().message(), HasSubstr("region"));
}

// A transform reads its declared upstream datasets and calls the functions
// of the allow-list; anything else is refused before it runs, naming what
// it did and what it may read, and nothing is staged.
TEST_F(SqliteEngineTest, ATransformReadsOnlyItsUpstreamsAndAllowedFunctions) {
  ASSERT_TRUE(engine_->Claim("store-a", false).ok());
  Exec("CREATE TABLE secrets (ds TEXT, region TEXT)");
  Exec("INSERT INTO secrets VALUES ('2025-01-01', 'x')");
  struct Case {
    std::string transform;
    std::string refused;
  };
  const std::vector<Case> cases = {
      {"SELECT ds, region, 0.0 AS revenue, 0 AS orders FROM secrets WHERE "
       "ds = :partition",
       "reads table secrets"},
      {"SELECT :partition AS ds, job_id AS region, 0.0 AS revenue, 0 AS "
       "orders FROM _bf_publications",
       "reads table _bf_publications"},
      {"SELECT :partition AS ds, name AS region, 0.0 AS revenue, 0 AS "
       "orders FROM sqlite_schema",
       "reads table sqlite_master"},
      {"SELECT :partition AS ds, hex(fts3_tokenizer('simple')) AS region, "
       "0.0 AS revenue, 0 AS orders",
       "calls fts3_tokenizer, which is not on the allow-list"},
      {"SELECT :partition AS ds, 'r' AS region, 0.0 AS revenue, "
       "length(zeroblob(10)) AS orders",
       "calls zeroblob"},
      {"SELECT :partition AS ds, sqlite_version() AS region, 0.0 AS revenue, "
       "0 AS orders",
       "calls sqlite_version"},
      // A common table expression named like an upstream, or a job view.
      {"WITH raw_orders AS (SELECT job_id FROM _bf_publications) SELECT "
       ":partition AS ds, job_id AS region, 0.0 AS revenue, 0 AS orders "
       "FROM raw_orders",
       "reads table _bf_publications"},
      {"WITH dim_customers AS (SELECT name FROM sqlite_schema) SELECT "
       ":partition AS ds, name AS region, 0.0 AS revenue, 0 AS orders FROM "
       "dim_customers",
       "reads table sqlite_master"},
      // Virtual table modules that read the file or the schema.
      {"SELECT :partition AS ds, name AS region, 0.0 AS revenue, 0 AS "
       "orders FROM dbstat",
       "reads table dbstat"},
      {"SELECT :partition AS ds, name AS region, 0.0 AS revenue, 0 AS "
       "orders FROM pragma_table_list",
       ""},
  };
  int n = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.transform);
    const std::string job = absl::StrCat("bf-", ++n);
    revenue_.transform = c.transform;
    ASSERT_TRUE(
        engine_->PrepareJob(Layout(job, {{&revenue_, {"2025-01-01"}}})).ok());
    auto staged = StageRevenue(job, "2025-01-01");
    ASSERT_EQ(staged.status().code(), absl::StatusCode::kFailedPrecondition)
        << staged.status();
    EXPECT_THAT(staged.status().message(),
                HasSubstr(absl::StrCat("transform of daily_revenue is refused: "
                                       "it ",
                                       c.refused)));
    EXPECT_THAT(staged.status().message(),
                HasSubstr("may read only its declared upstream datasets "
                          "(orders (table raw_orders), customers (table "
                          "dim_customers))"));
    EXPECT_EQ(Rows(absl::StrCat("SELECT COUNT(*) FROM \"",
                                SqliteEngine::StageTable(job, "daily_revenue"),
                                "\"")),
              std::vector<std::string>{"0"});
  }
  // What it may do: its upstreams (the pinned one through the job's
  // snapshot), functions of the allow-list, json_each, recursion.
  revenue_.transform = R"sql(
    WITH RECURSIVE one(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM one
                              WHERE i < 1)
    SELECT o.order_date AS ds, upper(c.region) AS region,
           round(SUM(o.amount - o.refund), 2) AS revenue,
           COUNT(*) * (SELECT MAX(i) FROM one) AS orders
    FROM raw_orders o JOIN dim_customers c ON c.customer_id = o.customer_id
    WHERE o.order_date >= :partition_start AND o.order_date < :partition_end
      AND EXISTS (SELECT 1 FROM json_each(json_array(1)))
    GROUP BY 1, 2
  )sql";
  ASSERT_TRUE(
      engine_->PrepareJob(Layout("bf-ok", {{&revenue_, {"2025-01-01"}}})).ok());
  auto staged = StageRevenue("bf-ok", "2025-01-01");
  ASSERT_TRUE(staged.ok()) << staged.status();
  EXPECT_EQ(
      Rows(absl::StrCat("SELECT ds, region, revenue, orders FROM \"",
                        SqliteEngine::StageTable("bf-ok", "daily_revenue"),
                        "\" ORDER BY region")),
      Rows("SELECT o.order_date, upper(c.region), "
           "round(SUM(o.amount - o.refund), 2), COUNT(*) FROM "
           "raw_orders o JOIN dim_customers c USING (customer_id) "
           "WHERE o.order_date = '2025-01-01' GROUP BY 1, 2 ORDER BY "
           "2"));
}

// Probe: the warehouse file removed, replaced or truncated under the
// engine is seen without a write meeting it.
TEST_F(SqliteEngineTest, ProbeSeesTheFileRemovedReplacedOrTruncated) {
  ASSERT_TRUE(engine_->Claim("store-a", false).ok());
  ASSERT_TRUE(engine_->Probe().ok()) << engine_->Probe();
  // Truncated to half its pages, then to nothing.
  const std::string copy = path_ + ".copy";
  std::filesystem::copy_file(path_, copy);
  const auto size = std::filesystem::file_size(path_);
  ASSERT_GT(size, 4096u);
  std::filesystem::resize_file(path_, size / 2);
  absl::Status half = engine_->Probe();
  EXPECT_EQ(half.code(), absl::StatusCode::kFailedPrecondition) << half;
  EXPECT_THAT(half.message(), HasSubstr("was truncated while backfilld"));
  std::filesystem::resize_file(path_, 0);
  absl::Status empty = engine_->Probe();
  EXPECT_EQ(empty.code(), absl::StatusCode::kFailedPrecondition) << empty;
  EXPECT_THAT(empty.message(), HasSubstr("(0 bytes, no SQLite header)"));
  // Put back as it was (same file): usable again.
  {
    std::ifstream in(copy, std::ios::binary);
    std::ofstream out(path_, std::ios::binary | std::ios::in);
    out << in.rdbuf();
  }
  EXPECT_TRUE(engine_->Probe().ok()) << engine_->Probe();
  // Replaced by another file, then removed.
  std::filesystem::rename(copy, path_);
  absl::Status replaced = engine_->Probe();
  EXPECT_THAT(replaced.message(), HasSubstr("was replaced by another file"));
  std::filesystem::remove(path_);
  absl::Status removed = engine_->Probe();
  EXPECT_EQ(removed.code(), absl::StatusCode::kFailedPrecondition) << removed;
  EXPECT_THAT(removed.message(), HasSubstr("was removed"));
}

// A partition whose output outgrows SQLite's page cache (so that its
// session table spills to a file mid-transaction) and is then rejected
// leaves that connection's session tables sound: the next partition stages
// exactly its own rows, round after round.
TEST_F(SqliteEngineTest, ALargeRejectedOutputLeavesTheSessionTablesSound) {
  ASSERT_TRUE(engine_->Claim("store-a", false).ok());
  constexpr int kRows = 100000;  // about 5 MB: more than the 2 MB cache
  revenue_.transform = absl::StrCat(
      "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE "
      "i < ",
      kRows, ") SELECT CASE WHEN :partition = '2025-01-01' AND i = ", kRows,
      " THEN '2025-01-02' ELSE :partition END AS ds, printf('region-%08d-"
      "padding-padding', i) AS region, i * 1.0 AS revenue, i AS orders FROM n");
  JobLayout layout =
      Layout("bf-1", {{&revenue_, {"2025-01-01", "2025-01-03"}}});
  ASSERT_TRUE(engine_->PrepareJob(layout).ok());
  const std::string stage = absl::StrCat(
      "\"", SqliteEngine::StageTable("bf-1", "daily_revenue"), "\"");
  for (int round = 0; round < 3; ++round) {
    auto rejected = StageRevenue("bf-1", "2025-01-01");
    ASSERT_FALSE(rejected.ok());
    EXPECT_THAT(rejected.status().message(),
                HasSubstr("1 rows of daily_revenue fall outside partition"));
    auto staged = StageRevenue("bf-1", "2025-01-03");
    ASSERT_TRUE(staged.ok()) << staged.status();
    EXPECT_EQ(staged->rows_written, kRows);
    EXPECT_EQ(Rows(absl::StrCat("SELECT ds, COUNT(*), SUM(orders), "
                                "COUNT(DISTINCT region) FROM ",
                                stage, " GROUP BY ds")),
              (std::vector<std::string>{absl::StrCat(
                  "2025-01-03|", kRows, "|",
                  static_cast<int64_t>(kRows) * (kRows + 1) / 2, "|", kRows)}))
        << "round " << round;
  }
}

// A warehouse that must exist (the state store has published into it) is
// refused when its file is empty, as when there is none, and the file is
// left as it was: no tables, no switch to WAL, no -wal or -shm beside it.
TEST(SqliteEngineOpenTest, AnEmptyFileThatMustHoldAWarehouseIsLeftUnwritten) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() /
      absl::StrCat("sqlite_engine_empty_", ::getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string file = (dir / "warehouse.db").string();
  { std::ofstream touch(file); }
  auto engine = SqliteEngine::Open(file, 2, /*create_if_missing=*/false);
  ASSERT_FALSE(engine.ok());
  EXPECT_EQ(engine.status().code(), absl::StatusCode::kNotFound)
      << engine.status();
  EXPECT_THAT(engine.status().message(),
              HasSubstr(file + " is an empty file (0 bytes)"));
  EXPECT_EQ(std::filesystem::file_size(file), 0u);
  EXPECT_FALSE(std::filesystem::exists(file + "-wal"));
  EXPECT_FALSE(std::filesystem::exists(file + "-shm"));
  // One that may be created is: an empty file is an empty database.
  engine = SqliteEngine::Open(file, 1, /*create_if_missing=*/true);
  ASSERT_TRUE(engine.ok()) << engine.status();
  engine->reset();
  EXPECT_GT(std::filesystem::file_size(file), 0u);
  std::filesystem::remove_all(dir);
}

TEST_F(SqliteEngineTest, AGroupWrittenOnAFullDiskStagesNoneOfItsPartitions) {
  // The engine's connections through the fault-injecting VFS.
  ASSERT_TRUE(sqlite::FaultVfs::Install().ok());
  ReopenEngine();
  const std::string job = "bf-9";
  const std::vector<std::string> days = {"2025-01-01", "2025-01-02",
                                         "2025-01-03"};
  ASSERT_TRUE(engine_->PrepareJob(Layout(job, {{&revenue_, days}})).ok());
  const std::string count =
      absl::StrCat("SELECT COUNT(*) FROM \"",
                   SqliteEngine::StageTable(job, "daily_revenue"), "\"");
  auto inputs = [&](const std::string& day) -> std::vector<InputRef> {
    return {{&orders_, day}, {&customers_, {}}};
  };
  {
    absl::StatusOr<std::unique_ptr<StagingGroup>> group =
        engine_->OpenStagingGroup(job, revenue_);
    ASSERT_TRUE(group.ok() && *group != nullptr);
    for (const std::string& day : {days[0], days[1]}) {
      ASSERT_TRUE((*group)->Stage(day, inputs(day)).ok()) << day;
    }
    ASSERT_TRUE(
        sqlite::FaultVfs::Set("warehouse.db", sqlite::Fault::DiskFull()).ok());
    absl::StatusOr<absl::Duration> wrote = (*group)->Commit();
    sqlite::FaultVfs::ClearAll();
    // The code the runner reads as the warehouse's storage failing (no
    // attempt spent), and nothing of the group in staging.
    ASSERT_FALSE(wrote.ok());
    EXPECT_EQ(wrote.status().code(), absl::StatusCode::kResourceExhausted)
        << wrote.status();
    EXPECT_THAT(wrote.status().message(), HasSubstr("full"));
    EXPECT_EQ(Rows(count), std::vector<std::string>{"0"});
  }
  // With room again, the next group stages all three, as plain SQL
  // computes them.
  absl::StatusOr<std::unique_ptr<StagingGroup>> group =
      engine_->OpenStagingGroup(job, revenue_);
  ASSERT_TRUE(group.ok() && *group != nullptr);
  for (const std::string& day : days) {
    ASSERT_TRUE((*group)->Stage(day, inputs(day)).ok()) << day;
  }
  ASSERT_TRUE((*group)->Commit().ok());
  EXPECT_EQ(
      Rows(absl::StrCat("SELECT ds, region, round(revenue, 2), orders FROM \"",
                        SqliteEngine::StageTable(job, "daily_revenue"),
                        "\" ORDER BY 1, 2")),
      Rows("SELECT o.order_date, c.region, round(SUM(o.amount - o.refund), 2), "
           "COUNT(*) FROM raw_orders o JOIN dim_customers c USING "
           "(customer_id) GROUP BY 1, 2 ORDER BY 1, 2"));
}

}  // namespace
}  // namespace storage_sqlite_engine_test
}  // namespace backfill
