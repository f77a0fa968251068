// Partition fingerprints of the SQLite warehouse over the change signal
// (storage/sql/change_signal.h, storage/sqlite/sqlite_change_triggers.h,
// Engine::CurrentFingerprints): the cached figures against a fresh
// computation of the definition — the rows plain SQL selects for a day,
// hashed by the test with core/model/fingerprint.h's RowHasher — after
// inserts, updates in place and across days, deletes, a REPLACE, triggers
// dropped and a column added, with how many days each call hashed; and the
// proof that an untouched input compares equal to what StagePartition
// recorded.

#include <stdlib.h>

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/model/fingerprint.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/sql/change_signal.h"
#include "storage/sqlite/sqlite_connection.h"
#include "storage/sqlite/sqlite_db.h"
#include "storage/sqlite/sqlite_dialect.h"
#include "storage/sqlite/sqlite_engine.h"
#include "storage/sqlite/sqlite_fingerprint_function.h"
#include "storage/sqlite/sqlite_membership.h"
#include "tests/testing/warehouse_test.h"

namespace backfill {
namespace storage_partition_fingerprints_test {
namespace {

using ::testing::IsEmpty;

std::string Day(int d) { return absl::StrFormat("2025-01-%02d", d); }

class PartitionFingerprintsTest : public testing::WarehouseTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(testing::WarehouseTest::SetUp());
    ASSERT_TRUE(sqlite::RegisterPartitionFunction(db_.get()).ok());
    ASSERT_TRUE(sqlite::RegisterFingerprintFunction(db_.get()).ok());
    Exec(R"sql(
      CREATE TABLE raw_orders (order_id INTEGER PRIMARY KEY, order_date TEXT,
                               customer_id INTEGER, amount REAL, refund REAL);
      CREATE INDEX raw_orders_date ON raw_orders (order_date);
      CREATE TABLE dim_customers (customer_id INTEGER PRIMARY KEY,
                                  region TEXT);
      INSERT INTO dim_customers VALUES (1, 'EU'), (2, 'US'), (3, 'EU');
    )sql");
    // Day d (1..5) holds d + 1 orders; one order of no partition.
    std::string sql = "BEGIN;";
    for (int d = 1; d <= 5; ++d) {
      for (int i = 0; i <= d; ++i) {
        absl::StrAppend(&sql,
                        "INSERT INTO raw_orders (order_date, customer_id, "
                        "amount, refund) VALUES ('",
                        Day(d), "', ", 1 + i % 3, ", ", 10 * d + i, ", 0);");
      }
    }
    absl::StrAppend(&sql,
                    "INSERT INTO raw_orders (order_date, customer_id, amount, "
                    "refund) VALUES ('someday', 1, 1, 0); COMMIT;");
    Exec(sql);
    auto engine = SqliteEngine::Open(path_, 2);
    ASSERT_TRUE(engine.ok()) << engine.status();
    engine_ = *std::move(engine);
    engine_->SetStatsPolicy(absl::Hours(1), [this] { return now_; });

    orders_.name = "orders";
    orders_.kind = DatasetKind::kSource;
    orders_.table = "raw_orders";
    orders_.partition = PartitionSpec{"order_date", Grain::kDay, {}};
    customers_.name = "customers";
    customers_.kind = DatasetKind::kSource;
    customers_.table = "dim_customers";
  }

  void TearDown() override {
    engine_.reset();
    testing::WarehouseTest::TearDown();
  }

  // The definition, computed by the test: every row plain SQL selects,
  // every column, each hashed by its storage class.
  std::string Plain(const std::string& sql) {
    auto q = db_->Prepare(sql);
    EXPECT_TRUE(q.ok()) << q.status();
    Fingerprint fp;
    while (q.ok()) {
      auto row = q->Step();
      EXPECT_TRUE(row.ok()) << row.status();
      if (!row.ok() || !*row) break;
      RowHasher h;
      for (int i = 0; i < q->ColumnCount(); ++i) {
        switch (q->GetColumnType(i)) {
          case sqlite::ColumnType::kNull:
            h.AddNull();
            break;
          case sqlite::ColumnType::kInteger:
            h.AddInt(q->ColumnInt(i));
            break;
          case sqlite::ColumnType::kReal:
            h.AddReal(q->ColumnDouble(i));
            break;
          case sqlite::ColumnType::kText:
            h.AddText(q->ColumnText(i));
            break;
          case sqlite::ColumnType::kBlob:
            h.AddBlob(q->ColumnText(i));
            break;
        }
      }
      fp.AddRow(h.Finish());
    }
    return fp.ToString();
  }
  std::string PlainDay(const std::string& day) {
    return Plain(absl::StrCat("SELECT * FROM raw_orders WHERE order_date = '",
                              day, "'"));
  }

  std::vector<std::string> Days(int n) {
    std::vector<std::string> out;
    for (int d = 1; d <= n; ++d) out.push_back(Day(d));
    return out;
  }

  // What Engine::CurrentFingerprints does, with its counts.
  absl::StatusOr<sql::SignalledRead> Refresh(
      const std::vector<std::string>& partitions) {
    sqlite::SqliteConnection conn(db_.get(), &dialect_);
    return sql::SignalledFingerprints(&conn, orders_, partitions);
  }

  // Every day 1..n against the plain computation.
  void ExpectPlain(const sql::SignalledRead& got, int n) {
    for (int d = 1; d <= n; ++d) {
      auto it = got.fingerprints.find(Day(d));
      ASSERT_NE(it, got.fingerprints.end()) << Day(d);
      EXPECT_EQ(it->second.fingerprint, PlainDay(Day(d))) << Day(d);
      EXPECT_EQ(it->second.dataset, "orders");
      EXPECT_EQ(it->second.partition, Day(d));
    }
  }

  absl::Time now_ = absl::FromUnixSeconds(1700000000);
  sqlite::SqliteDialect dialect_;
  std::unique_ptr<SqliteEngine> engine_;
  DatasetSpec orders_, customers_;
};

TEST_F(PartitionFingerprintsTest, EveryWriteMovesTheSignalOfItsPartitions) {
  auto first = Refresh(Days(6));
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(first->signalled);
  EXPECT_EQ(first->hashed, 6);
  ExpectPlain(*first, 6);
  // Day 6 has no rows: the fingerprint of no rows, as a stage would read.
  EXPECT_EQ(first->fingerprints.at(Day(6)).fingerprint,
            Fingerprint().ToString());
  EXPECT_EQ(first->fingerprints.at(Day(6)).rows, 0);
  EXPECT_EQ(first->fingerprints.at(Day(3)).rows, 4);

  auto again = Refresh(Days(6));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->cached, 6);
  EXPECT_EQ(again->hashed, 0);
  ExpectPlain(*again, 6);

  // Each write (through this test's own connection, which has no
  // _bf_partition_of) moves the signal of exactly the days it touched.
  const std::pair<std::string, int> writes[] = {
      {"INSERT INTO raw_orders (order_date, customer_id, amount, refund) "
       "VALUES ('2025-01-02', 2, 99, 1), ('2025-01-06', 3, 5, 0)",
       2},
      {"UPDATE raw_orders SET amount = amount + 1 WHERE order_id = (SELECT "
       "MIN(order_id) FROM raw_orders WHERE order_date = '2025-01-03')",
       1},
      {"UPDATE raw_orders SET order_date = '2025-01-05' WHERE order_id = "
       "(SELECT MIN(order_id) FROM raw_orders WHERE order_date = "
       "'2025-01-04')",
       2},
      {"DELETE FROM raw_orders WHERE order_id = (SELECT MAX(order_id) FROM "
       "raw_orders WHERE order_date = '2025-01-01')",
       1},
      // A REPLACE deletes the colliding row of day 5 without a delete
      // trigger: the BEFORE INSERT trigger counts it.
      {"INSERT OR REPLACE INTO raw_orders (order_id, order_date, customer_id, "
       "amount, refund) SELECT MIN(order_id), '2025-01-01', 1, 7, 0 FROM "
       "raw_orders WHERE order_date = '2025-01-05'",
       2},
      {"UPDATE raw_orders SET customer_id = 3 WHERE order_date = 'someday'", 0},
  };
  for (const auto& [sql, touched] : writes) {
    Exec(sql);
    auto got = Refresh(Days(6));
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(got->hashed, touched) << sql;
    ExpectPlain(*got, 6);
  }

  // The whole table: cached until any write.
  auto whole = Refresh({""});
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ(whole->hashed, 1);
  whole = Refresh({""});
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ(whole->cached, 1);
  Exec("UPDATE raw_orders SET refund = 3 WHERE order_date = 'someday'");
  whole = Refresh({""});
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ(whole->hashed, 1);
  EXPECT_EQ(whole->fingerprints.at("").fingerprint,
            Plain("SELECT * FROM raw_orders"));

  // Triggers dropped, a write while they are absent, triggers back (by
  // the next call): the signal is unknown, every day is hashed again.
  auto names = db_->Prepare(
      "SELECT name FROM sqlite_master WHERE type = 'trigger' AND name LIKE "
      "'_bf_chg_%'");
  ASSERT_TRUE(names.ok());
  std::vector<std::string> triggers;
  while (true) {
    auto row = names->Step();
    ASSERT_TRUE(row.ok());
    if (!*row) break;
    triggers.push_back(names->ColumnText(0));
  }
  ASSERT_GE(triggers.size(), 3u);
  names = absl::InternalError("done");
  for (const std::string& t : triggers) {
    Exec(absl::StrCat("DROP TRIGGER \"", t, "\""));
  }
  Exec("UPDATE raw_orders SET amount = 1000 WHERE order_date = '2025-01-03'");
  auto dropped = Refresh(Days(6));
  ASSERT_TRUE(dropped.ok());
  EXPECT_TRUE(dropped->signalled);  // installed again, under a new epoch
  EXPECT_EQ(dropped->hashed, 6);
  ExpectPlain(*dropped, 6);
  auto back = Refresh(Days(6));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->cached, 6);

  // A column added: the table's identity changed, nothing cached stands.
  Exec("ALTER TABLE raw_orders ADD COLUMN note TEXT");
  auto altered = Refresh(Days(6));
  ASSERT_TRUE(altered.ok());
  EXPECT_EQ(altered->hashed, 6);
  ExpectPlain(*altered, 6);
}

TEST_F(PartitionFingerprintsTest, TheEngineCallAndItsArguments) {
  auto dim = engine_->CurrentFingerprints(customers_, {""});
  ASSERT_TRUE(dim.ok()) << dim.status();
  EXPECT_EQ(dim->at("").fingerprint, Plain("SELECT * FROM dim_customers"));
  Exec("UPDATE dim_customers SET region = 'APAC' WHERE customer_id = 2");
  dim = engine_->CurrentFingerprints(customers_, {""});
  ASSERT_TRUE(dim.ok());
  EXPECT_EQ(dim->at("").fingerprint, Plain("SELECT * FROM dim_customers"));

  EXPECT_EQ(
      engine_->CurrentFingerprints(orders_, {"2025-13-01"}).status().code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      engine_->CurrentFingerprints(customers_, {"2025-01-01"}).status().code(),
      absl::StatusCode::kInvalidArgument);
  DatasetSpec missing = orders_;
  missing.name = "later";
  missing.table = "not_there_yet";
  auto none = engine_->CurrentFingerprints(missing, {Day(1), ""});
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(none->at(Day(1)).fingerprint, Fingerprint().ToString());
  EXPECT_EQ(none->at("").rows, 0);
  // Nothing asked: nothing computed.
  auto empty = engine_->CurrentFingerprints(orders_, {});
  ASSERT_TRUE(empty.ok());
  EXPECT_THAT(*empty, IsEmpty());
}

TEST_F(PartitionFingerprintsTest, UntouchedInputsCompareEqualToWhatAStageRead) {
  DatasetSpec revenue;
  revenue.name = "daily_revenue";
  revenue.kind = DatasetKind::kDerived;
  revenue.table = "daily_revenue";
  revenue.partition = PartitionSpec{"ds", Grain::kDay, {}};
  revenue.upstream = {{"orders", Mapping::kIdentity},
                      {"customers", Mapping::kAll}};
  revenue.transform =
      "SELECT o.order_date AS ds, c.region AS region, SUM(o.amount) AS "
      "revenue FROM raw_orders o JOIN dim_customers c ON c.customer_id = "
      "o.customer_id WHERE o.order_date >= :partition_start AND "
      "o.order_date < :partition_end GROUP BY 1, 2";
  revenue.columns = {{"ds", "TEXT"}, {"region", "TEXT"}, {"revenue", "REAL"}};
  revenue.primary_key = {"ds", "region"};
  // Warm the cache first, so that the comparison also covers cached
  // figures.
  ASSERT_TRUE(engine_->CurrentFingerprints(orders_, Days(5)).ok());

  JobLayout layout;
  layout.job_id = "bf-1";
  layout.items = {{&revenue, Days(5)}};
  layout.pinned = {&customers_};
  ASSERT_TRUE(engine_->PrepareJob(layout).ok());
  std::map<std::string, StageResult> staged;
  for (const std::string& day : Days(5)) {
    auto r = engine_->StagePartition("bf-1", revenue, day,
                                     {{&orders_, day}, {&customers_, {}}});
    ASSERT_TRUE(r.ok()) << r.status();
    staged[day] = *r;
  }
  ASSERT_TRUE(engine_->ValidateStaged("bf-1", revenue).ok());
  ASSERT_TRUE(engine_->Publish(layout).ok());

  auto orders_now = engine_->CurrentFingerprints(orders_, Days(5));
  auto customers_now = engine_->CurrentFingerprints(customers_, {""});
  auto revenue_now = engine_->CurrentFingerprints(revenue, Days(5));
  ASSERT_TRUE(orders_now.ok() && customers_now.ok() && revenue_now.ok());
  for (const std::string& day : Days(5)) {
    const StageResult& r = staged[day];
    ASSERT_EQ(r.inputs.size(), 2u);
    EXPECT_EQ(r.inputs[0].fingerprint, orders_now->at(day).fingerprint) << day;
    EXPECT_EQ(r.inputs[0].rows, orders_now->at(day).rows) << day;
    EXPECT_EQ(r.inputs[1].fingerprint, customers_now->at("").fingerprint);
    // A published derived partition reads back as its stage's output (what
    // a dependent reading it records).
    EXPECT_EQ(r.output_fingerprint, revenue_now->at(day).fingerprint) << day;
  }
}

// A staging whose input partition's signal equals the one its cached
// fingerprint was read under takes the cached fingerprint without reading
// the rows again (a fingerprint planted in the cache comes back as is);
// a write to the partition makes it hash the rows again.
TEST_F(PartitionFingerprintsTest, StagingTakesAKeptFingerprintUntilAWrite) {
  DatasetSpec counts;
  counts.name = "daily_counts";
  counts.kind = DatasetKind::kDerived;
  counts.table = "daily_counts";
  counts.partition = PartitionSpec{"ds", Grain::kDay, {}};
  counts.upstream = {{"orders", Mapping::kIdentity}};
  counts.transform =
      "SELECT order_date AS ds, COUNT(*) AS n FROM raw_orders WHERE "
      "order_date >= :partition_start AND order_date < :partition_end GROUP "
      "BY 1";
  counts.columns = {{"ds", "TEXT"}, {"n", "INTEGER"}};
  JobLayout layout;
  layout.job_id = "bf-1";
  layout.items = {{&counts, Days(5)}};
  ASSERT_TRUE(engine_->PrepareJob(layout).ok());
  auto stage = [&](const std::string& day) {
    auto r = engine_->StagePartition("bf-1", counts, day, {{&orders_, day}});
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() && r->inputs.size() == 1 ? r->inputs[0].fingerprint
                                           : std::string();
  };
  // The first staging hashes the rows and keeps what it read.
  EXPECT_EQ(stage(Day(3)), PlainDay(Day(3)));
  Exec(
      "UPDATE _bf_fingerprints SET fingerprint = 'planted:4' WHERE dataset = "
      "'orders' AND \"partition\" = '2025-01-03'");
  EXPECT_EQ(stage(Day(3)), "planted:4");
  // Another day's write leaves it; a write to the day replaces it.
  Exec("UPDATE raw_orders SET refund = 2 WHERE order_date = '2025-01-04'");
  EXPECT_EQ(stage(Day(3)), "planted:4");
  EXPECT_EQ(stage(Day(4)), PlainDay(Day(4)));
  Exec("UPDATE raw_orders SET refund = 2 WHERE order_date = '2025-01-03'");
  EXPECT_EQ(stage(Day(3)), PlainDay(Day(3)));
  // Triggers gone: never the kept figure, whatever the counters say.
  Exec(
      "UPDATE _bf_fingerprints SET fingerprint = 'planted:4' WHERE dataset = "
      "'orders' AND \"partition\" = '2025-01-03'");
  std::vector<std::string> triggers;
  {
    auto names = db_->Prepare(
        "SELECT name FROM sqlite_master WHERE type = 'trigger' AND name LIKE "
        "'_bf_chg_%'");
    ASSERT_TRUE(names.ok());
    while (true) {
      auto row = names->Step();
      ASSERT_TRUE(row.ok());
      if (!*row) break;
      triggers.push_back(names->ColumnText(0));
    }
  }
  for (const std::string& t : triggers) {
    Exec(absl::StrCat("DROP TRIGGER \"", t, "\""));
  }
  EXPECT_EQ(stage(Day(3)), PlainDay(Day(3)));
}

}  // namespace
}  // namespace storage_partition_fingerprints_test
}  // namespace backfill
