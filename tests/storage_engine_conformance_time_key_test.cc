// Engine conformance of time x key partitions, on every warehouse of
// ConformanceWarehouses(). A source table holds rows whose time values come
// in every accepted format (and some in none) and whose key values are
// declared keys, an undeclared key, a key written as an integer literal,
// and values that are no key at all ('|' inside, NULL, ''). The
// partition each row belongs to is written beside it by the generator
// (column `part`, from the day and key it was rendered from), not by the
// code under test. Row counts, statistics, exact counts, fingerprints,
// affected-by and a derived dataset's load, backfill and rollback are then
// checked against plain SQL over `part`.

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/model/catalog.h"
#include "core/ports/engine.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/engine_conformance.h"
#include "tests/testing/warehouse_harness.h"

namespace backfill {
namespace storage_engine_conformance_time_key_test {
namespace {

using testing::WarehouseHarness;

class TimeKeyConformanceTest : public testing::ConformanceTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(testing::ConformanceTest::SetUp());
    Exec(
        "CREATE TABLE src (ts TEXT, k TEXT, v INTEGER, id INTEGER PRIMARY "
        "KEY, part TEXT);"
        "CREATE INDEX src_ts ON src (ts);");
    int64_t id = 0;
    const std::vector<std::string> days = {"2024-02-28", "2024-02-29",
                                           "2024-03-01", "2024-03-02"};
    // Renderings of a day that belong to it.
    const std::vector<std::string> suffixes = {
        "", " 00:00", "T23", " 23:59:59.999Z", "T07:30:00", " 12:00:00Z"};
    // Renderings that belong to no day.
    const std::vector<std::string> bad_suffixes = {" 23", "+01:00", "x", "T24"};
    struct Key {
      std::string sql;   // the value as an SQL literal
      std::string text;  // its key, "" when it is none
    };
    // 7 as an integer literal is stored as the text '7' in the TEXT column
    // (storage_time_key_test.cc has SQLite's untyped column, where the
    // INTEGER 7 and the REAL 1.5 keep their types).
    const std::vector<Key> keys = {
        {"'eu'", "eu"},  {"'us'", "us"}, {"'apac'", "apac"},
        {"7", "7"},      {"'7'", "7"},   {"'zz'", "zz"},
        {"'eu|us'", ""}, {"NULL", ""},   {"''", ""}};
    Exec("BEGIN");
    for (const std::string& day : days) {
      for (const Key& key : keys) {
        for (const std::string& s : suffixes) {
          ++id;
          const std::string part =
              key.text.empty() ? "NULL"
                               : absl::StrCat("'", day, "|", key.text, "'");
          Exec(absl::StrCat("INSERT INTO src VALUES ('", day, s, "', ", key.sql,
                            ", ", id % 100, ", ", id, ", ", part, ")"));
        }
        for (const std::string& s : bad_suffixes) {
          ++id;
          Exec(absl::StrCat("INSERT INTO src VALUES ('", day, s, "', ", key.sql,
                            ", ", id % 100, ", ", id, ", NULL)"));
        }
      }
    }
    // A time value of no format and one written as a number.
    Exec("INSERT INTO src VALUES ('2024-02-30', 'eu', 1, 100000, NULL)");
    Exec("INSERT INTO src VALUES ('20240301', 'eu', 1, 100001, NULL)");
    Exec("COMMIT");

    src_.name = "src";
    src_.kind = DatasetKind::kSource;
    src_.table = "src";
    src_.partition =
        PartitionSpec{"ts", Grain::kDay, {"eu", "us", "apac", "7"}, "k"};

    d_.name = "d";
    d_.kind = DatasetKind::kDerived;
    d_.table = "d";
    d_.partition = src_.partition;
    d_.transform =
        "SELECT ts, k, v, id, :partition_key AS pk FROM src WHERE part = "
        ":partition";
    d_.columns = {{"ts", "TEXT"},
                  {"k", "TEXT"},
                  {"v", "INTEGER"},
                  {"id", "INTEGER"},
                  {"pk", "TEXT"}};
    d_.primary_key = {"id"};
  }

  // A query of (text, integer) rows as a map.
  std::map<std::string, int64_t> Counts(const std::string& sql) {
    std::map<std::string, int64_t> out;
    auto rows = warehouse().Query(sql);
    EXPECT_TRUE(rows.ok()) << rows.status();
    if (!rows.ok()) return out;
    for (const WarehouseHarness::Row& row : *rows) {
      int64_t n = 0;
      EXPECT_TRUE(row[0].has_value() && row[1].has_value() &&
                  absl::SimpleAtoi(*row[1], &n));
      out[row[0].value_or("NULL")] = n;
    }
    return out;
  }

  void RunJob(const JobLayout& layout) {
    ASSERT_TRUE(engine()->PrepareJob(layout).ok());
    for (const JobLayout::Item& item : layout.items) {
      for (const std::string& p : item.partitions) {
        auto staged = engine()->StagePartition(layout.job_id, *item.dataset, p,
                                               {{&src_, p}});
        ASSERT_TRUE(staged.ok()) << p << ": " << staged.status();
      }
    }
    absl::Status published = engine()->Publish(layout);
    ASSERT_TRUE(published.ok()) << published;
    ASSERT_TRUE(engine()->DropStaging(layout.job_id).ok());
  }

  DatasetSpec src_, d_;
};

INSTANTIATE_TEST_SUITE_P(Warehouses, TimeKeyConformanceTest,
                         ::testing::ValuesIn(testing::ConformanceWarehouses()),
                         testing::WarehouseParamName);

TEST_P(TimeKeyConformanceTest,
       CountsAndStatisticsAreThoseOfTheGeneratedPartitions) {
  const std::map<std::string, int64_t> want = Counts(
      "SELECT part, COUNT(*) FROM src WHERE part IS NOT NULL GROUP BY 1");
  // 4 days x 5 keys ("7" twice) x 6 renderings.
  ASSERT_EQ(want.size(), 20u);
  EXPECT_EQ(want.at("2024-02-29|7"), 12);
  auto counts = engine()->CountRowsByPartition(src_);
  ASSERT_TRUE(counts.ok()) << counts.status();
  EXPECT_EQ(*counts, want);
  auto stats = engine()->PartitionStatistics(src_);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->rows, want);
  EXPECT_EQ(stats->total_rows, Int("SELECT COUNT(*) FROM src"));

  const std::vector<std::string> chosen = {"2024-02-28|eu", "2024-02-29|7",
                                           "2024-03-02|apac", "2024-03-01|us"};
  auto exact = engine()->CountRowsInPartitions(src_, chosen);
  ASSERT_TRUE(exact.ok()) << exact.status();
  ASSERT_EQ(exact->size(), chosen.size());
  for (size_t i = 0; i < chosen.size(); ++i) {
    EXPECT_EQ((*exact)[i], want.at(chosen[i])) << chosen[i];
  }
  // An undeclared key is no partition to ask for.
  EXPECT_FALSE(engine()->CountRowsInPartitions(src_, {"2024-02-28|zz"}).ok());
  EXPECT_FALSE(engine()->CountRowsInPartitions(src_, {"2024-02-28"}).ok());
}

TEST_P(TimeKeyConformanceTest, AffectedByIsExactlyThePlainSqlPartitions) {
  auto matching = engine()->PartitionsMatching(src_, "v % 7 = 3", 1000);
  ASSERT_TRUE(matching.ok()) << matching.status();
  EXPECT_EQ(*matching,
            Strings("SELECT DISTINCT part FROM src WHERE v % 7 = 3 AND part IS "
                    "NOT NULL AND part NOT LIKE '%|zz' ORDER BY 1"));
  EXPECT_FALSE(matching->empty());
}

TEST_P(TimeKeyConformanceTest, FingerprintsChangeForTheTouchedPartitionOnly) {
  const std::vector<std::string> asked = {"2024-02-29|eu", "2024-02-29|us",
                                          "2024-03-01|eu"};
  auto before = engine()->CurrentFingerprints(src_, asked);
  ASSERT_TRUE(before.ok()) << before.status();
  ASSERT_EQ(before->size(), 3u);
  EXPECT_EQ(before->at("2024-02-29|eu").rows, 6);
  // A late row of 2024-02-29|eu, and rows of no declared partition.
  Exec(
      "INSERT INTO src VALUES ('2024-02-29 18:00', 'eu', 5, 200000, "
      "'2024-02-29|eu');"
      "INSERT INTO src VALUES ('2024-02-29 18:00', 'zz', 5, 200001, "
      "'2024-02-29|zz');"
      "INSERT INTO src VALUES ('2024-02-29 18:00', NULL, 5, 200002, NULL);");
  auto after = engine()->CurrentFingerprints(src_, asked);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_NE(after->at("2024-02-29|eu").fingerprint,
            before->at("2024-02-29|eu").fingerprint);
  EXPECT_EQ(after->at("2024-02-29|eu").rows, 7);
  EXPECT_EQ(after->at("2024-02-29|us").fingerprint,
            before->at("2024-02-29|us").fingerprint);
  EXPECT_EQ(after->at("2024-03-01|eu").fingerprint,
            before->at("2024-03-01|eu").fingerprint);
}

TEST_P(TimeKeyConformanceTest,
       LoadBackfillAndRollbackTouchExactlyTheirPartitions) {
  // The derived table exists already and holds rows of no partition: no
  // publish or rollback may touch them.
  Exec(
      "CREATE TABLE d (ts TEXT, k TEXT, v INTEGER, id INTEGER PRIMARY KEY, pk "
      "TEXT);"
      "INSERT INTO d SELECT ts, k, v, -id, 'foreign' FROM src WHERE part IS "
      "NULL;");
  const int64_t foreign = Int("SELECT COUNT(*) FROM d");
  ASSERT_GT(foreign, 50);
  const std::vector<std::string> declared = Strings(
      "SELECT DISTINCT part FROM src WHERE part IS NOT NULL AND part NOT LIKE "
      "'%|zz' ORDER BY 1");
  ASSERT_EQ(declared.size(), 16u);

  // 1. The initial load: staging refuses any row outside its partition, so
  //    the engine's membership agrees with `part` on every row.
  JobLayout load;
  load.job_id = "bf-1";
  load.items.push_back({&d_, declared});
  RunJob(load);
  const std::string in_declared = "part IS NOT NULL AND part NOT LIKE '%|zz'";
  EXPECT_EQ(Int(absl::StrCat("SELECT COUNT(*) FROM (SELECT ts, k, v, id FROM "
                             "src WHERE ",
                             in_declared,
                             " EXCEPT SELECT ts, k, v, id FROM d) AS t")),
            0);
  EXPECT_EQ(Int("SELECT COUNT(*) FROM d"),
            foreign + Int(absl::StrCat("SELECT COUNT(*) FROM src WHERE ",
                                       in_declared)));
  // :partition_key is the key of each row's partition.
  EXPECT_EQ(Int("SELECT COUNT(*) FROM d JOIN src USING (id) WHERE pk IS "
                "DISTINCT FROM substr(part, 12)"),
            0);
  EXPECT_EQ(Int("SELECT COUNT(*) FROM d WHERE pk = '7'"), 48);

  // 2. Backfill one key of one day and the key "7" of another.
  Exec("CREATE TABLE d_before AS SELECT * FROM d");
  const std::set<std::string> chosen = {"2024-02-29|eu", "2024-03-01|7"};
  Exec(
      "UPDATE src SET v = v + 1000 WHERE part IN ('2024-02-29|eu', "
      "'2024-03-01|7', '2024-02-29|us')");
  JobLayout scoped;
  scoped.job_id = "bf-2";
  scoped.items.push_back(
      {&d_, std::vector<std::string>(chosen.begin(), chosen.end())});
  RunJob(scoped);
  const std::string in_chosen = "part IN ('2024-02-29|eu', '2024-03-01|7')";
  EXPECT_EQ(
      Int(absl::StrCat("SELECT COUNT(*) FROM (SELECT ts, k, v, id FROM "
                       "src WHERE ",
                       in_chosen, " EXCEPT SELECT ts, k, v, id FROM d) AS t")),
      0);
  const std::string chosen_ids =
      absl::StrCat("(SELECT id FROM src WHERE ", in_chosen, ")");
  EXPECT_EQ(Int(absl::StrCat("SELECT COUNT(*) FROM d WHERE id IN ", chosen_ids,
                             " AND v < 1000")),
            0);
  // 2024-02-29|us changed in the source but was not backfilled.
  EXPECT_EQ(Int("SELECT COUNT(*) FROM d JOIN src USING (id) WHERE part = "
                "'2024-02-29|us' AND d.v >= 1000"),
            0);
  for (const char* order : {"SELECT * FROM d EXCEPT SELECT * FROM d_before",
                            "SELECT * FROM d_before EXCEPT SELECT * FROM d"}) {
    EXPECT_EQ(Int(absl::StrCat("SELECT COUNT(*) FROM (", order,
                               ") AS t WHERE id NOT IN ", chosen_ids)),
              0)
        << order;
  }
  EXPECT_EQ(Int("SELECT COUNT(*) FROM d WHERE pk = 'foreign'"), foreign);

  // 3. Rolling the backfill back restores the table value for value.
  RollbackSpec spec;
  spec.layout = scoped;
  spec.marker.requested_by = "ann";
  spec.marker.reason = "undo";
  auto rolled = engine()->Rollback(spec);
  ASSERT_TRUE(rolled.ok()) << rolled.status();
  const WarehouseHarness& h = warehouse();
  const std::string exact =
      absl::StrCat("SELECT ", h.ExactText("ts"), ", ", h.ExactText("k"), ", ",
                   h.ExactText("v"), ", ", h.ExactText("id"), ", ",
                   h.ExactText("pk"), " FROM ");
  EXPECT_EQ(Rows(absl::StrCat(exact, "d ORDER BY id")),
            Rows(absl::StrCat(exact, "d_before ORDER BY id")));
}

TEST_P(TimeKeyConformanceTest, ARowOfAnotherKeyIsRefusedAtStaging) {
  DatasetSpec bad = d_;
  bad.transform =
      "SELECT ts, k, v, id, :partition_key AS pk FROM src WHERE part = "
      ":partition OR (part = '2024-02-28|us' AND id % 6 = 0)";
  JobLayout layout;
  layout.job_id = "bf-3";
  layout.items.push_back({&bad, {"2024-02-28|eu"}});
  ASSERT_TRUE(engine()->PrepareJob(layout).ok());
  auto staged = engine()->StagePartition("bf-3", bad, "2024-02-28|eu",
                                         {{&src_, "2024-02-28|eu"}});
  ASSERT_FALSE(staged.ok());
  EXPECT_EQ(staged.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(staged.status().message()),
              ::testing::HasSubstr("fall outside partition 2024-02-28|eu"));
  EXPECT_THAT(std::string(staged.status().message()),
              ::testing::HasSubstr("k='us'"));
}

}  // namespace
}  // namespace storage_engine_conformance_time_key_test
}  // namespace backfill
