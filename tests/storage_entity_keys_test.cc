// What only SqliteEngine does with entity keys (JobLayout::Item::keys): the
// text it binds as :keys is exactly the JSON array SQLite's json_array
// builds from the keys, and a keyed job's keys live in a table of the
// job's staging (SqliteEngine::KeysTable) that goes with it. What every
// engine must do with entity keys is in
// storage_engine_conformance_entity_keys_test.cc.

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/sqlite/sqlite_db.h"
#include "storage/sqlite/sqlite_engine.h"
#include "tests/testing/warehouse_test.h"

namespace backfill {
namespace storage_entity_keys_test {
namespace {

using ::testing::ElementsAre;

// The "new logic": revenue doubled, one row per (day, customer).
constexpr char kCustomerRevenueSql[] = R"sql(
  SELECT order_date AS ds, customer_id, SUM(amount) * 2 AS revenue,
         COUNT(*) AS orders
  FROM raw_orders
  WHERE order_date >= :partition_start AND order_date < :partition_end
  GROUP BY 1, 2
)sql";

class EntityKeysEngineTest : public testing::WarehouseTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(testing::WarehouseTest::SetUp());
    // Customers 1, 2, 3 and 42 (INTEGER keys) over three days.
    Exec(R"sql(
      CREATE TABLE raw_orders (order_id INTEGER PRIMARY KEY, order_date TEXT,
                               customer_id INTEGER, amount REAL);
      INSERT INTO raw_orders VALUES
        (1, '2025-01-01', 1, 10), (2, '2025-01-01', 2, 20),
        (3, '2025-01-01', 3, 30), (4, '2025-01-01', 1, 5),
        (5, '2025-01-02', 1, 40), (6, '2025-01-02', 2, 50),
        (7, '2025-01-02', 42, 7), (8, '2025-01-03', 3, 60),
        (9, '2025-01-01', 42, 1.5);
      -- Published with the old logic (revenue not doubled).
      CREATE TABLE customer_revenue (ds TEXT, customer_id INTEGER,
                                     revenue REAL, orders INTEGER,
                                     PRIMARY KEY (ds, customer_id));
      INSERT INTO customer_revenue
        SELECT order_date, customer_id, SUM(amount), COUNT(*)
        FROM raw_orders GROUP BY 1, 2;
    )sql");
    auto engine = SqliteEngine::Open(path_, 2);
    ASSERT_TRUE(engine.ok()) << engine.status();
    engine_ = *std::move(engine);
    ASSERT_TRUE(engine_->Claim("store-a", false).ok());

    orders_.name = "orders";
    orders_.kind = DatasetKind::kSource;
    orders_.table = "raw_orders";
    orders_.partition = PartitionSpec{"order_date", Grain::kDay, {}};

    revenue_.name = "customer_revenue";
    revenue_.kind = DatasetKind::kDerived;
    revenue_.table = "customer_revenue";
    revenue_.partition = PartitionSpec{"ds", Grain::kDay, {}};
    revenue_.upstream = {{"orders", Mapping::kIdentity}};
    revenue_.transform = kCustomerRevenueSql;
    revenue_.columns = {{"ds", "TEXT"},
                        {"customer_id", "INTEGER"},
                        {"revenue", "REAL"},
                        {"orders", "INTEGER"}};
    revenue_.primary_key = {"ds", "customer_id"};
    revenue_.entity_key = "customer_id";
  }

  void TearDown() override {
    engine_.reset();
    testing::WarehouseTest::TearDown();
  }

  JobLayout Layout(const std::string& job, const std::vector<std::string>& days,
                   const std::vector<std::string>& keys) {
    JobLayout layout;
    layout.job_id = job;
    layout.items.push_back({&revenue_, days, keys});
    return layout;
  }

  absl::StatusOr<StageResult> Stage(const std::string& job,
                                    const std::string& day) {
    return engine_->StagePartition(job, revenue_, day, {{&orders_, day}});
  }

  // Prepares, stages every day and publishes.
  void Run(const JobLayout& layout) {
    ASSERT_TRUE(engine_->PrepareJob(layout).ok());
    for (const std::string& day : layout.items[0].partitions) {
      auto staged = Stage(layout.job_id, day);
      ASSERT_TRUE(staged.ok()) << staged.status();
    }
    absl::Status published = engine_->Publish(layout);
    ASSERT_TRUE(published.ok()) << published;
  }

  std::unique_ptr<SqliteEngine> engine_;
  DatasetSpec orders_, revenue_;
};

TEST_F(EntityKeysEngineTest, TheKeysAreTheJsonArraySqliteBuilds) {
  // A key-scoped transform: it computes only the keys' rows. It records
  // how many keys :keys held (revenue), and whether :keys is, as text,
  // exactly the array SQLite itself builds from the keys (orders).
  revenue_.transform = R"sql(
    SELECT order_date AS ds, customer_id, json_array_length(:keys) AS revenue,
           :keys = json_array('2', 'a"b\c', 'été') AS orders
    FROM raw_orders
    WHERE order_date >= :partition_start AND order_date < :partition_end
      AND (:keys IS NULL OR CAST(customer_id AS TEXT) IN
           (SELECT value FROM json_each(:keys)))
    GROUP BY 1, 2
  )sql";
  const std::vector<std::string> keys = {"2", "a\"b\\c", "\xc3\xa9t\xc3\xa9"};
  Run(Layout("bf-1", {"2025-01-01"}, keys));
  EXPECT_THAT(Rows("SELECT customer_id, revenue FROM customer_revenue WHERE "
                   "ds = '2025-01-01' AND customer_id = 2"),
              ElementsAre("2|3.0"));
  EXPECT_THAT(Rows("SELECT orders FROM customer_revenue WHERE ds = "
                   "'2025-01-01' AND customer_id = 2"),
              ElementsAre("1"));
  // Without keys, :keys is NULL and so is the comparison.
  Run(Layout("bf-2", {"2025-01-03"}, {}));
  EXPECT_THAT(Rows("SELECT customer_id, quote(revenue), quote(orders) FROM "
                   "customer_revenue WHERE ds = '2025-01-03'"),
              ElementsAre("3|NULL|NULL"));
}

TEST_F(EntityKeysEngineTest, TheKeysTableIsStagingAndGoesWithIt) {
  Run(Layout("bf-1", {"2025-01-01"}, {"1", "42"}));
  EXPECT_THAT(Rows(absl::StrCat("SELECT * FROM ",
                                sqlite::QuoteIdentifier(SqliteEngine::KeysTable(
                                    "bf-1", revenue_.name)),
                                " ORDER BY 1")),
              ElementsAre("1", "42"));
  ASSERT_TRUE(engine_->DropStaging("bf-1").ok());
  EXPECT_FALSE(
      *db_->TableExists(SqliteEngine::KeysTable("bf-1", revenue_.name)));
  EXPECT_TRUE(
      *db_->TableExists(SqliteEngine::PrevTable("bf-1", revenue_.name)));
}

}  // namespace
}  // namespace storage_entity_keys_test
}  // namespace backfill
