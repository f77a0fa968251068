// Engine conformance of entity keys (JobLayout::Item::keys), on every
// warehouse of ConformanceWarehouses(): a keyed job replaces only the rows
// of its keys in its partitions, every other row stays identical (value
// and type), the transform sees the keys as the JSON array :keys,
// dependents in the job read the whole partition, the output fingerprint is
// the published partition's, Publish refuses when other keys' rows changed
// since staging, and Rollback restores identical rows. Expectations come
// from plain SQL over the fixture, never from the engine.

#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/ports/engine.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/engine_conformance.h"
#include "tests/testing/warehouse_harness.h"

namespace backfill {
namespace storage_engine_conformance_entity_keys_test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using testing::WarehouseHarness;

// The "new logic": revenue doubled, one row per (day, customer).
constexpr char kCustomerRevenueSql[] = R"sql(
  SELECT order_date AS ds, customer_id, SUM(amount) * 2 AS revenue,
         COUNT(*) AS orders
  FROM raw_orders
  WHERE order_date >= :partition_start AND order_date < :partition_end
  GROUP BY 1, 2
)sql";

class EntityKeysConformanceTest : public testing::ConformanceTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(testing::ConformanceTest::SetUp());
    // Customers 1, 2, 3 and 42 (INTEGER keys) over three days.
    Exec(R"sql(
      CREATE TABLE raw_orders (order_id INTEGER PRIMARY KEY, order_date TEXT,
                               customer_id INTEGER,
                               amount DOUBLE PRECISION);
      INSERT INTO raw_orders VALUES
        (1, '2025-01-01', 1, 10), (2, '2025-01-01', 2, 20),
        (3, '2025-01-01', 3, 30), (4, '2025-01-01', 1, 5),
        (5, '2025-01-02', 1, 40), (6, '2025-01-02', 2, 50),
        (7, '2025-01-02', 42, 7), (8, '2025-01-03', 3, 60),
        (9, '2025-01-01', 42, 1.5);
      -- Published with the old logic (revenue not doubled).
      CREATE TABLE customer_revenue (ds TEXT, customer_id INTEGER,
                                     revenue DOUBLE PRECISION,
                                     orders INTEGER,
                                     PRIMARY KEY (ds, customer_id));
      INSERT INTO customer_revenue
        SELECT order_date, customer_id, SUM(amount), COUNT(*)
        FROM raw_orders GROUP BY 1, 2;
    )sql");
    ASSERT_TRUE(engine()->Claim("store-a", false).ok());

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
                        {"revenue", "DOUBLE PRECISION"},
                        {"orders", "INTEGER"}};
    revenue_.primary_key = {"ds", "customer_id"};
    revenue_.entity_key = "customer_id";

    total_.name = "daily_total";
    total_.kind = DatasetKind::kDerived;
    total_.table = "daily_total";
    total_.partition = PartitionSpec{"ds", Grain::kDay, {}};
    total_.upstream = {{"customer_revenue", Mapping::kIdentity}};
    total_.transform =
        "SELECT ds, SUM(revenue) AS revenue, COUNT(*) AS customers FROM "
        "customer_revenue WHERE ds >= :partition_start AND ds < "
        ":partition_end GROUP BY ds";
    total_.columns = {{"ds", "TEXT"},
                      {"revenue", "DOUBLE PRECISION"},
                      {"customers", "INTEGER"}};
    total_.primary_key = {"ds"};
  }

  // The select list of customer_revenue's columns, each value exactly
  // (ExactText).
  std::string ExactColumns() {
    const WarehouseHarness& h = warehouse();
    return absl::StrCat(h.ExactText("ds"), ", ", h.ExactText("customer_id"),
                        ", ", h.ExactText("revenue"), ", ",
                        h.ExactText("orders"));
  }

  // Every row of customer_revenue, each value exactly, in one order: what
  // "identical" compares. `where` selects a part.
  std::vector<std::string> Dump(const std::string& where = "TRUE") {
    return Rows(absl::StrCat("SELECT ", ExactColumns(),
                             " FROM customer_revenue WHERE ", where,
                             " ORDER BY ds, customer_id IS NULL, "
                             "customer_id"));
  }

  JobLayout Layout(const std::string& job, const std::vector<std::string>& days,
                   const std::vector<std::string>& keys,
                   bool with_total = false) {
    JobLayout layout;
    layout.job_id = job;
    layout.items.push_back({&revenue_, days, keys});
    if (with_total) layout.items.push_back({&total_, days, {}});
    return layout;
  }

  absl::StatusOr<StageResult> Stage(const std::string& job,
                                    const std::string& day) {
    return engine()->StagePartition(job, revenue_, day, {{&orders_, day}});
  }

  // Prepares, stages every day and publishes.
  void Run(const JobLayout& layout) {
    ASSERT_TRUE(engine()->PrepareJob(layout).ok());
    for (const JobLayout::Item& item : layout.items) {
      for (const std::string& day : item.partitions) {
        auto staged = item.dataset == &revenue_
                          ? Stage(layout.job_id, day)
                          : engine()->StagePartition(layout.job_id, total_, day,
                                                     {{&revenue_, day}});
        ASSERT_TRUE(staged.ok()) << staged.status();
      }
    }
    absl::Status published = engine()->Publish(layout);
    ASSERT_TRUE(published.ok()) << published;
  }

  DatasetSpec orders_, revenue_, total_;
};

INSTANTIATE_TEST_SUITE_P(Warehouses, EntityKeysConformanceTest,
                         ::testing::ValuesIn(testing::ConformanceWarehouses()),
                         testing::WarehouseParamName);

TEST_P(EntityKeysConformanceTest, OnlyTheKeysRowsOfThePartitionsAreReplaced) {
  // Everything but customer 1's and 42's rows of day 1, before.
  const std::string others =
      "NOT (ds = '2025-01-01' AND customer_id IN (1, 42))";
  const std::vector<std::string> before = Dump(others);
  ASSERT_EQ(before.size(), 6u);  // 8 published rows - 2

  Run(Layout("bf-1", {"2025-01-01"}, {"1", "42"}));

  EXPECT_EQ(Dump(others), before);
  // The keys' rows: the new logic, from plain SQL over the orders.
  EXPECT_EQ(Rows(absl::StrCat("SELECT ds, customer_id, ", Cents("revenue"),
                              ", orders FROM customer_revenue WHERE ds = "
                              "'2025-01-01' AND customer_id IN (1, 42) "
                              "ORDER BY customer_id")),
            Rows(absl::StrCat("SELECT order_date, customer_id, ",
                              Cents("SUM(amount) * 2"),
                              ", COUNT(*) FROM raw_orders WHERE order_date = "
                              "'2025-01-01' AND customer_id IN (1, 42) GROUP "
                              "BY 1, 2 ORDER BY 2")));
  // Still INTEGER keys (not text): the same storage type as before.
  const WarehouseHarness& h = warehouse();
  EXPECT_EQ(Int(absl::StrCat(
                "SELECT COUNT(*) FROM customer_revenue WHERE customer_id IS "
                "NOT NULL AND ",
                h.ExactText("customer_id"), " <> ",
                h.ExactText("CAST(customer_id AS INTEGER)"))),
            0);
  // The job's staging (with its keys) goes with DropStaging; the rollback
  // copy stays.
  EXPECT_THAT(StagingObjects("bf-1"), Not(IsEmpty()));
  ASSERT_TRUE(engine()->DropStaging("bf-1").ok());
  EXPECT_THAT(StagingObjects("bf-1"), IsEmpty());
  EXPECT_TRUE(Exists(warehouse().RollbackCopyTable("bf-1", revenue_.name)));
}

TEST_P(EntityKeysConformanceTest, KeysMatchLikeKeyPartitionsAndNullKeysNever) {
  // "042" is not the INTEGER 42, "1 " is not 1; a row without an entity
  // (NULL key) is no key's. A key that matches no row replaces nothing.
  revenue_.primary_key.clear();
  Exec(
      "CREATE TABLE t AS SELECT * FROM customer_revenue; DROP TABLE "
      "customer_revenue; ALTER TABLE t RENAME TO customer_revenue; INSERT "
      "INTO customer_revenue VALUES ('2025-01-01', NULL, 0.25, 0)");
  const std::vector<std::string> before = Dump();
  Run(Layout("bf-1", {"2025-01-01", "2025-01-02"}, {"042", "1 ", "zz"}));
  EXPECT_EQ(Dump(), before);

  const std::string kept_rows = "NOT (ds = '2025-01-02' AND customer_id = 42)";
  const std::vector<std::string> kept = Dump(kept_rows);
  ASSERT_EQ(kept.size(), before.size() - 1);
  Run(Layout("bf-2", {"2025-01-02"}, {"42"}));
  EXPECT_THAT(Rows(absl::StrCat("SELECT ", Cents("revenue"),
                                " FROM customer_revenue WHERE ds = "
                                "'2025-01-02' AND customer_id = 42")),
              ElementsAre("1400"));
  EXPECT_EQ(Dump(kept_rows), kept);
  EXPECT_THAT(Rows(absl::StrCat("SELECT ", Cents("revenue"),
                                " FROM customer_revenue WHERE customer_id IS "
                                "NULL")),
              ElementsAre("25"));
}

TEST_P(EntityKeysConformanceTest, TheTransformReadsTheKeysAsAJsonArray) {
  // A key-scoped transform: it computes only the keys' rows. It records
  // how many keys :keys held (revenue), and whether its elements are
  // exactly the job's keys (orders: 1), escapes and all.
  const WarehouseHarness& h = warehouse();
  const std::string keys = "CAST(:keys AS TEXT)";
  revenue_.transform = absl::StrCat(
      "SELECT order_date AS ds, customer_id, ", h.JsonArrayLength(keys),
      " AS revenue, CASE WHEN ", keys,
      " IS NULL THEN NULL WHEN (SELECT COUNT(*) FROM (",
      h.JsonArrayElements(keys),
      ") AS k WHERE k.value IN ('2', 'a\"b\\c', '\xc3\xa9t\xc3\xa9')) = 3 "
      "THEN 1 ELSE 0 END AS orders FROM raw_orders WHERE order_date >= "
      ":partition_start AND order_date < :partition_end AND (",
      keys, " IS NULL OR CAST(customer_id AS TEXT) IN (",
      h.JsonArrayElements(keys), ")) GROUP BY 1, 2");
  const std::vector<std::string> keys_of_job = {"2", "a\"b\\c",
                                                "\xc3\xa9t\xc3\xa9"};
  Run(Layout("bf-1", {"2025-01-01"}, keys_of_job));
  EXPECT_THAT(Rows(absl::StrCat("SELECT customer_id, ", Cents("revenue"),
                                " FROM customer_revenue WHERE ds = "
                                "'2025-01-01' AND customer_id = 2")),
              ElementsAre("2|300"));
  EXPECT_THAT(Rows("SELECT orders FROM customer_revenue WHERE ds = "
                   "'2025-01-01' AND customer_id = 2"),
              ElementsAre("1"));
  // Without keys, :keys is NULL and the transform covers every customer.
  Run(Layout("bf-2", {"2025-01-03"}, {}));
  EXPECT_THAT(Rows("SELECT customer_id, revenue FROM customer_revenue "
                   "WHERE ds = '2025-01-03'"),
              ElementsAre("3|NULL"));
  // ... and the key-scoped transform computed every customer of day 1 in
  // a run without keys too.
  Run(Layout("bf-3", {"2025-01-01"}, {}));
  EXPECT_THAT(Rows("SELECT COUNT(*) FROM customer_revenue WHERE ds = "
                   "'2025-01-01' AND revenue IS NULL AND orders IS NULL"),
              ElementsAre("4"));
}

TEST_P(EntityKeysConformanceTest,
       StagingAndItsFingerprintCoverTheWholePartition) {
  JobLayout layout = Layout("bf-1", {"2025-01-01"}, {"3"}, true);
  ASSERT_TRUE(engine()->PrepareJob(layout).ok());
  auto staged = Stage("bf-1", "2025-01-01");
  ASSERT_TRUE(staged.ok()) << staged.status();
  // Day 1 has customers 1, 2, 3 and 42: all staged.
  EXPECT_EQ(staged->rows_written, 4);
  auto total = engine()->StagePartition("bf-1", total_, "2025-01-01",
                                        {{&revenue_, "2025-01-01"}});
  ASSERT_TRUE(total.ok()) << total.status();
  auto report = engine()->ValidateStaged("bf-1", revenue_);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_THAT(report->failures, IsEmpty());
  ASSERT_TRUE(engine()->Publish(layout).ok());
  // The dependent summed the whole partition as published: plain SQL.
  EXPECT_EQ(Rows(absl::StrCat("SELECT ds, ", Cents("revenue"),
                              ", customers FROM daily_total")),
            Rows(absl::StrCat("SELECT ds, ", Cents("SUM(revenue)"),
                              ", COUNT(*) FROM customer_revenue WHERE ds = "
                              "'2025-01-01' GROUP BY ds")));
  // Customer 3's row doubled (30 -> 60), the sum moved by exactly that:
  // 15 + 20 + 60 + 1.5.
  EXPECT_THAT(
      Rows(absl::StrCat("SELECT ", Cents("revenue"), " FROM daily_total")),
      ElementsAre("9650"));
  // The fingerprint staged is the one of the partition now published.
  auto now = engine()->CurrentFingerprints(revenue_, {"2025-01-01"});
  ASSERT_TRUE(now.ok()) << now.status();
  EXPECT_EQ(now->at("2025-01-01").fingerprint, staged->output_fingerprint);
}

TEST_P(EntityKeysConformanceTest, ADiffShowsOnlyTheKeysRowsChanging) {
  JobLayout layout = Layout("bf-1", {"2025-01-01"}, {"1", "2"});
  ASSERT_TRUE(engine()->PrepareJob(layout).ok());
  ASSERT_TRUE(Stage("bf-1", "2025-01-01").ok());
  auto diff = engine()->DiffPartition("bf-1", revenue_, "2025-01-01", 10);
  ASSERT_TRUE(diff.ok()) << diff.status();
  EXPECT_EQ(diff->rows_before, 4);
  EXPECT_EQ(diff->rows_after, 4);
  EXPECT_EQ(diff->changed, 2);
  EXPECT_EQ(diff->unchanged, 2);
  EXPECT_EQ(diff->added, 0);
  EXPECT_EQ(diff->removed, 0);
}

TEST_P(EntityKeysConformanceTest,
       OtherKeysChangedSinceStagingRefuseThePublish) {
  JobLayout layout = Layout("bf-1", {"2025-01-01", "2025-01-02"}, {"1"});
  ASSERT_TRUE(engine()->PrepareJob(layout).ok());
  ASSERT_TRUE(Stage("bf-1", "2025-01-01").ok());
  ASSERT_TRUE(Stage("bf-1", "2025-01-02").ok());
  // Someone else writes customer 2's row of day 2 after staging.
  Exec(
      "UPDATE customer_revenue SET revenue = 51 WHERE ds = '2025-01-02' "
      "AND customer_id = 2");
  const std::vector<std::string> before = Dump();
  absl::Status published = engine()->Publish(layout);
  EXPECT_EQ(published.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(published.message(), HasSubstr("partition 2025-01-02"));
  EXPECT_THAT(published.message(), HasSubstr("nothing was published"));
  EXPECT_THAT(published.message(), HasSubstr("Submit the backfill again"));
  EXPECT_EQ(Dump(), before);
  auto done = engine()->IsPublished("bf-1");
  ASSERT_TRUE(done.ok());
  EXPECT_FALSE(*done);
  // Restaged from the current rows, it publishes.
  ASSERT_TRUE(Stage("bf-1", "2025-01-02").ok());
  ASSERT_TRUE(engine()->Publish(layout).ok());
  EXPECT_THAT(Rows(absl::StrCat("SELECT ", Cents("revenue"),
                                " FROM customer_revenue WHERE ds = "
                                "'2025-01-02' AND customer_id = 2")),
              ElementsAre("5100"));
}

TEST_P(EntityKeysConformanceTest, RollbackRestoresIdenticalRows) {
  const std::vector<std::string> before = Dump();
  JobLayout layout = Layout("bf-1", {"2025-01-01", "2025-01-03"}, {"3"});
  Run(layout);
  ASSERT_NE(Dump(), before);
  RollbackSpec spec;
  spec.layout = layout;
  spec.marker.reason = "wrong customer";
  auto result = engine()->Rollback(spec);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(Dump(), before);
}

TEST_P(EntityKeysConformanceTest, KeysNeedAnEntityKeyAndValidKeys) {
  revenue_.entity_key.clear();
  absl::Status s = engine()->PrepareJob(Layout("bf-1", {"2025-01-01"}, {"1"}));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("declares no entity_key"));
  revenue_.entity_key = "customer_id";
  s = engine()->PrepareJob(Layout("bf-1", {"2025-01-01"}, {"1", "bad\x01"}));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  s = engine()->PrepareJob(Layout("bf-1", {"2025-01-01"}, {""}));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  // Nothing was created by the refusals.
  EXPECT_THAT(StagingObjects("bf-1"), IsEmpty());
  // :keys in a transform of a dataset without entity_key is refused.
  revenue_.entity_key.clear();
  revenue_.transform =
      "SELECT order_date AS ds, customer_id, :keys AS revenue, 1 AS orders "
      "FROM raw_orders WHERE order_date >= :partition_start AND order_date "
      "< :partition_end";
  ASSERT_TRUE(engine()->PrepareJob(Layout("bf-2", {"2025-01-01"}, {})).ok());
  auto staged = Stage("bf-2", "2025-01-01");
  EXPECT_EQ(staged.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(
      staged.status().message(),
      HasSubstr(
          ":keys, which is bound only for a dataset with an `entity_key`"));
}

TEST_P(EntityKeysConformanceTest, ARestartedJobKeepsItsKeys) {
  JobLayout layout = Layout("bf-7", {"2025-01-01"}, {"2"});
  ASSERT_TRUE(engine()->PrepareJob(layout).ok());
  ASSERT_TRUE(Stage("bf-7", "2025-01-01").ok());
  auto listed = engine()->ListJobsWithStaging();
  ASSERT_TRUE(listed.ok());
  EXPECT_THAT(*listed, ElementsAre("bf-7"));
  // A new engine on the same warehouse, prepared again from the same layout.
  ASSERT_NO_FATAL_FAILURE(Restart());
  ASSERT_TRUE(engine()->Claim("store-a", false).ok());
  const std::vector<std::string> others =
      Dump("NOT (ds = '2025-01-01' AND customer_id = 2)");
  {
    absl::Status s = engine()->PrepareJob(layout);
    ASSERT_TRUE(s.ok()) << s;
  }
  ASSERT_TRUE(engine()->Publish(layout).ok());
  EXPECT_EQ(Dump("NOT (ds = '2025-01-01' AND customer_id = 2)"), others);
  EXPECT_THAT(Rows(absl::StrCat("SELECT ", Cents("revenue"),
                                " FROM customer_revenue WHERE ds = "
                                "'2025-01-01' AND customer_id = 2")),
              ElementsAre("4000"));
}

// Property: over generated rounds (random new amounts, random days, random
// keys including ones that match nothing or only look like a key, with and
// without the dependent, some rounds rolled back), the published table
// after a keyed run equals what plain SQL says it must be: the rows outside
// (days x keys) exactly as before, the keys' rows of those days recomputed
// from the raw orders.
TEST_P(EntityKeysConformanceTest, GeneratedRoundsReplaceExactlyTheKeysRows) {
  std::mt19937 rng(20261130);
  auto pick = [&rng](int lo, int hi) {
    return std::uniform_int_distribution<int>(lo, hi)(rng);
  };
  {
    // Ten days, customers 1..12, a few orders each.
    std::string sql = "BEGIN; DELETE FROM raw_orders;";
    int id = 0;
    for (int day = 1; day <= 10; ++day) {
      for (int c = 1; c <= 12; ++c) {
        for (int n = pick(0, 2); n > 0; --n) {
          absl::StrAppend(&sql, "INSERT INTO raw_orders VALUES (", ++id,
                          ", '2025-01-", day < 10 ? "0" : "", day, "', ", c,
                          ", ", pick(1, 500), ".25);");
        }
      }
    }
    sql +=
        "DELETE FROM customer_revenue; INSERT INTO customer_revenue "
        "SELECT order_date, customer_id, SUM(amount), COUNT(*) FROM "
        "raw_orders GROUP BY 1, 2; COMMIT;";
    Exec(sql);
  }
  // Every row of a query over customer_revenue's columns, each value
  // exactly.
  auto dump = [this](const std::string& from) {
    return Rows(absl::StrCat("SELECT ", ExactColumns(), " FROM (", from,
                             ") AS t ORDER BY 1, 2"));
  };
  for (int round = 0; round < 40; ++round) {
    SCOPED_TRACE(absl::StrCat("round ", round));
    Exec(absl::StrCat("UPDATE raw_orders SET amount = amount + ", pick(1, 9),
                      " WHERE order_id % ", pick(2, 5), " = ", pick(0, 1)));
    std::set<std::string> day_set;
    for (int n = pick(1, 4); n > 0; --n) {
      const int day = pick(1, 10);
      day_set.insert(absl::StrCat("2025-01-", day < 10 ? "0" : "", day));
    }
    std::set<std::string> key_set;
    std::set<int> matching;  // the INTEGER customers the keys name
    for (int n = pick(1, 5); n > 0; --n) {
      const int c = pick(1, 14);  // 13 and 14 have no orders
      switch (pick(0, 5)) {
        case 0:
          key_set.insert(absl::StrCat("0", c));  // never an INTEGER's digits
          break;
        case 1:
          key_set.insert(absl::StrCat("c", c));
          break;
        default:
          key_set.insert(absl::StrCat(c));
          matching.insert(c);
      }
    }
    const std::vector<std::string> days(day_set.begin(), day_set.end());
    const std::vector<std::string> keys(key_set.begin(), key_set.end());
    std::vector<std::string> quoted_days, ints;
    for (const std::string& d : days) quoted_days.push_back("'" + d + "'");
    for (int c : matching) ints.push_back(absl::StrCat(c));
    ints.push_back("NULL");  // IN () is not SQL
    const std::string in_days = absl::StrJoin(quoted_days, ", ");
    const std::string in_keys = absl::StrJoin(ints, ", ");
    const std::vector<std::string> before =
        dump("SELECT * FROM customer_revenue");
    const std::vector<std::string> expected = dump(absl::StrCat(
        "SELECT * FROM customer_revenue WHERE NOT (ds IN (", in_days,
        ") AND COALESCE(customer_id IN (", in_keys,
        "), FALSE)) UNION ALL SELECT order_date, customer_id, SUM(amount) * "
        "2, COUNT(*) FROM raw_orders WHERE order_date IN (",
        in_days, ") AND customer_id IN (", in_keys, ") GROUP BY 1, 2"));

    const bool with_total = pick(0, 1) == 1;
    const std::string job = absl::StrCat("bf-", 100 + round);
    JobLayout layout = Layout(job, days, keys, with_total);
    Run(layout);
    if (::testing::Test::HasFatalFailure()) return;
    EXPECT_EQ(dump("SELECT * FROM customer_revenue"), expected)
        << "days " << in_days << " keys " << absl::StrJoin(keys, ",");
    if (with_total) {
      EXPECT_EQ(
          Rows(absl::StrCat("SELECT ds, ", Cents("revenue"),
                            ", customers FROM daily_total WHERE ds IN (",
                            in_days, ") ORDER BY ds")),
          Rows(absl::StrCat("SELECT ds, ", Cents("SUM(revenue)"),
                            ", COUNT(*) FROM customer_revenue WHERE ds IN (",
                            in_days, ") GROUP BY ds ORDER BY ds")));
    }
    ASSERT_TRUE(engine()->DropStaging(job).ok());
    if (round % 4 == 3) {
      // Rolled back, the table is as before the round, value for value.
      RollbackSpec spec;
      spec.layout = layout;
      spec.marker.reason = "round";
      auto rolled = engine()->Rollback(spec);
      ASSERT_TRUE(rolled.ok()) << rolled.status();
      EXPECT_EQ(dump("SELECT * FROM customer_revenue"), before);
    }
  }
}

}  // namespace
}  // namespace storage_engine_conformance_entity_keys_test
}  // namespace backfill
