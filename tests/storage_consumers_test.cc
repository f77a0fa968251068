// Engine::QueryValue (a consumer's `expect` query) against the real SQLite
// engine: the transform's parameters are bound for the partition, the first
// column of the first row comes back with its type, and a statement that
// would write is refused without changing anything. Expectations come from
// plain SQL on the same file.

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "core/model/catalog.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/sqlite/sqlite_engine.h"
#include "tests/testing/warehouse_test.h"

namespace backfill {
namespace storage_consumers_test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class QueryValueTest : public testing::WarehouseTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(testing::WarehouseTest::SetUp());
    Exec(R"sql(
      CREATE TABLE segment_daily (day TEXT, region TEXT, amount REAL);
      INSERT INTO segment_daily VALUES
        ('2025-03-01', 'eu', 10.125), ('2025-03-01', 'us', 2.5),
        ('2025-03-02', 'eu', 7), ('2025-03-31', 'us', 1),
        ('2025-04-01', 'eu', 1000);
    )sql");
    auto engine = SqliteEngine::Open(path_, 2);
    ASSERT_TRUE(engine.ok()) << engine.status();
    engine_ = *std::move(engine);
    ASSERT_TRUE(engine_->Claim("store", false).ok());
    daily_.name = "segment_daily";
    daily_.kind = DatasetKind::kDerived;
    daily_.table = "segment_daily";
    daily_.partition = PartitionSpec{"day", Grain::kDay, {}};
    daily_.columns = {{"day", "TEXT"}, {"region", "TEXT"}, {"amount", "REAL"}};
    monthly_ = daily_;
    monthly_.name = "segment_monthly";
    monthly_.partition = PartitionSpec{"day", Grain::kMonth, {}};
    keyed_ = daily_;
    keyed_.name = "segment_keyed";
    keyed_.partition =
        PartitionSpec{"day", Grain::kDay, {"eu", "us"}, "region"};
  }
  void TearDown() override {
    engine_.reset();
    testing::WarehouseTest::TearDown();
  }

  double Number(const std::string& sql) {
    std::vector<std::string> rows = Rows(sql);
    double v = 0;
    EXPECT_EQ(rows.size(), 1u);
    EXPECT_TRUE(!rows.empty() && absl::SimpleAtod(rows[0], &v)) << sql;
    return v;
  }

  std::unique_ptr<SqliteEngine> engine_;
  DatasetSpec daily_, monthly_, keyed_;
};

TEST_F(QueryValueTest, BindsThePartitionAndReturnsTheFirstValue) {
  auto v = engine_->QueryValue(
      daily_, "2025-03-01",
      "SELECT ROUND(SUM(amount), 2) FROM segment_daily WHERE day = "
      ":partition");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->type, SqlValue::Type::kReal);
  EXPECT_EQ(v->real, Number("SELECT ROUND(SUM(amount), 2) FROM segment_daily "
                            "WHERE day = '2025-03-01'"));

  // A month: :partition_start and :partition_end are its first days.
  v = engine_->QueryValue(monthly_, "2025-03",
                          "SELECT SUM(amount) FROM segment_daily WHERE day >= "
                          ":partition_start AND day < :partition_end");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->real, Number("SELECT SUM(amount) FROM segment_daily WHERE day "
                            ">= '2025-03-01' AND day < '2025-04-01'"));

  // Time x key: :partition_key is the key.
  v = engine_->QueryValue(keyed_, "2025-03-01|us",
                          "SELECT amount FROM segment_daily WHERE day = "
                          ":partition_start AND region = :partition_key");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->real, Number("SELECT amount FROM segment_daily WHERE day = "
                            "'2025-03-01' AND region = 'us'"));
}

TEST_F(QueryValueTest, TypesNullAndNoRow) {
  auto v = engine_->QueryValue(
      daily_, "2025-03-02",
      "SELECT COUNT(*) FROM segment_daily WHERE day = :partition");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->type, SqlValue::Type::kInteger);
  EXPECT_EQ(v->integer, 1);
  v = engine_->QueryValue(
      daily_, "2025-03-02",
      "SELECT region FROM segment_daily WHERE day = :partition");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->type, SqlValue::Type::kText);
  EXPECT_EQ(v->text, "eu");
  v = engine_->QueryValue(
      daily_, "2025-05-01",
      "SELECT SUM(amount) FROM segment_daily WHERE day = :partition");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->type, SqlValue::Type::kNull);
  v = engine_->QueryValue(
      daily_, "2025-05-01",
      "SELECT amount FROM segment_daily WHERE day = :partition");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->type, SqlValue::Type::kNoRow);
}

TEST_F(QueryValueTest, WritesAreRefusedAndChangeNothing) {
  const std::vector<std::string> before =
      Rows("SELECT * FROM segment_daily ORDER BY day, region");
  for (const char* sql :
       {"DELETE FROM segment_daily WHERE day = :partition",
        "UPDATE segment_daily SET amount = 0 WHERE day = :partition",
        "INSERT INTO segment_daily VALUES (:partition, 'x', 1)"}) {
    auto v = engine_->QueryValue(daily_, "2025-03-01", sql);
    EXPECT_EQ(v.status().code(), absl::StatusCode::kFailedPrecondition) << sql;
    EXPECT_THAT(v.status().message(), HasSubstr("not a read-only SELECT"));
  }
  EXPECT_EQ(Rows("SELECT * FROM segment_daily ORDER BY day, region"), before);
  auto bad = engine_->QueryValue(daily_, "2025-03-01", "SELECT nope FROM x");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(bad.status().message(), HasSubstr("does not compile"));
  auto form = engine_->QueryValue(daily_, "March", "SELECT 1");
  EXPECT_EQ(form.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(QueryValueTest, AnUnpartitionedDatasetHasNoPartitionValue) {
  DatasetSpec whole = daily_;
  whole.name = "segment_all";
  whole.partition.reset();
  auto v = engine_->QueryValue(whole, "",
                               "SELECT ROUND(SUM(amount), 2) FROM "
                               "segment_daily");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->type, SqlValue::Type::kReal);
  EXPECT_EQ(v->real, Number("SELECT ROUND(SUM(amount), 2) FROM segment_daily"));
}

TEST_F(QueryValueTest, ABlobReadsAsItsBytes) {
  // Bytes with a NUL inside and one that is no UTF-8: all of them come back.
  auto v = engine_->QueryValue(daily_, "2025-03-01", "SELECT X'6100FF62'");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->type, SqlValue::Type::kText);
  EXPECT_EQ(v->text, std::string("a\0\xff"
                                 "b",
                                 4));
  v = engine_->QueryValue(
      daily_, "2025-03-02",
      "SELECT CAST(region AS BLOB) FROM segment_daily WHERE day = :partition");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->text, "eu");
}

TEST_F(QueryValueTest, ReadsThePublishedTableWhileAJobHasStagedRows) {
  // A job recomputes 2025-03-01 from raw rows that differ from what is
  // published; until it publishes, the expect query sees the published
  // rows only.
  Exec(R"sql(
    CREATE TABLE raw_orders (day TEXT, region TEXT, amount REAL);
    INSERT INTO raw_orders VALUES
      ('2025-03-01', 'eu', 999.5), ('2025-03-01', 'us', 0.25);
  )sql");
  DatasetSpec orders;
  orders.name = "orders";
  orders.kind = DatasetKind::kSource;
  orders.table = "raw_orders";
  orders.partition = PartitionSpec{"day", Grain::kDay, {}};
  orders.columns = daily_.columns;
  DatasetSpec derived = daily_;
  derived.upstream = {{"orders", Mapping::kIdentity}};
  derived.transform =
      "SELECT day, region, amount FROM raw_orders WHERE day >= "
      ":partition_start AND day < :partition_end";
  JobLayout layout;
  layout.job_id = "bf-1";
  layout.items = {{&derived, {"2025-03-01"}}};
  ASSERT_TRUE(engine_->PrepareJob(layout).ok());
  auto staged = engine_->StagePartition("bf-1", derived, "2025-03-01",
                                        {{&orders, std::string("2025-03-01")}});
  ASSERT_TRUE(staged.ok()) << staged.status();
  EXPECT_EQ(staged->rows_written, 2);
  auto v = engine_->QueryValue(
      derived, "2025-03-01",
      "SELECT SUM(amount) FROM segment_daily WHERE day = :partition");
  ASSERT_TRUE(v.ok()) << v.status();
  // 10.125 + 2.5, the published rows; the staged ones would sum to 999.75.
  EXPECT_EQ(v->real, Number("SELECT SUM(amount) FROM segment_daily WHERE day "
                            "= '2025-03-01'"));
  EXPECT_EQ(v->real, 12.625);
  ASSERT_TRUE(engine_->DropStaging("bf-1").ok());
}

TEST_F(QueryValueTest, AQueryThatRunsTooLongIsStopped) {
  // Counts without end: only the query's own deadline stops it.
  auto v = engine_->QueryValue(
      daily_, "2025-03-01",
      "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) "
      "SELECT COUNT(*) FROM n");
  EXPECT_EQ(v.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(v.status().message(),
              HasSubstr("the expect query on segment_daily for partition "
                        "2025-03-01 ran longer than 10s and was stopped"));
  // The connection is usable again, without the bound's handler.
  auto after = engine_->QueryValue(
      daily_, "2025-03-02",
      "SELECT COUNT(*) FROM segment_daily WHERE day = :partition");
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->integer, 1);
}

}  // namespace
}  // namespace storage_consumers_test
}  // namespace backfill
