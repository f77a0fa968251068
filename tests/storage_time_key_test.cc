// Time x key partitions on SQLite's dynamic types. The key column of the
// source table has no type (BLOB affinity), so its values keep the storage
// type they were written with: declared keys as TEXT, the key 7 both as
// the INTEGER 7 and as the TEXT '7', values that are no key at all ('|'
// inside, NULL, the REAL 1.5), time values in every accepted format (and
// some in none). The partition each row belongs to is written beside it by
// the generator (column `part`), not by the code under test. An INTEGER
// key value belongs to its key's partition, and a load, backfill and
// rollback keep every value's storage type. What every engine must do with
// time x key partitions is in storage_engine_conformance_time_key_test.cc.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/model/catalog.h"
#include "core/ports/engine.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/sqlite/sqlite_db.h"
#include "storage/sqlite/sqlite_engine.h"
#include "tests/testing/warehouse_test.h"

namespace backfill {
namespace storage_time_key_test {
namespace {

class TimeKeyEngineTest : public testing::WarehouseTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(testing::WarehouseTest::SetUp());
    // `k` has no type (BLOB affinity): an INTEGER key stays an INTEGER.
    Exec(
        "CREATE TABLE src (ts TEXT, k, v INTEGER, id INTEGER PRIMARY KEY, "
        "part TEXT);"
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
    const std::vector<Key> keys = {
        {"'eu'", "eu"}, {"'us'", "us"}, {"'apac'", "apac"}, {"7", "7"},
        {"'7'", "7"},   {"'zz'", "zz"}, {"'eu|us'", ""},    {"NULL", ""},
        {"1.5", ""},    {"''", ""}};
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
    // A time value of no format and an INTEGER time.
    Exec("INSERT INTO src VALUES ('2024-02-30', 'eu', 1, 100000, NULL)");
    Exec("INSERT INTO src VALUES (20240301, 'eu', 1, 100001, NULL)");
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
                  {"k", "BLOB"},
                  {"v", "INTEGER"},
                  {"id", "INTEGER"},
                  {"pk", "TEXT"}};
    d_.primary_key = {"id"};

    auto engine = SqliteEngine::Open(path_, 2);
    ASSERT_TRUE(engine.ok()) << engine.status();
    engine_ = *std::move(engine);
  }
  void TearDown() override {
    engine_.reset();
    testing::WarehouseTest::TearDown();
  }
  std::map<std::string, int64_t> Counts(const std::string& sql) {
    std::map<std::string, int64_t> out;
    auto q = db_->Prepare(sql);
    EXPECT_TRUE(q.ok()) << q.status();
    if (!q.ok()) return out;
    while (*q->Step()) out[q->ColumnText(0)] = q->ColumnInt(1);
    return out;
  }
  std::vector<std::string> Strings(const std::string& sql) {
    std::vector<std::string> out;
    auto q = db_->Prepare(sql);
    EXPECT_TRUE(q.ok()) << q.status();
    if (!q.ok()) return out;
    while (*q->Step()) out.push_back(q->ColumnText(0));
    return out;
  }
  void RunJob(const JobLayout& layout) {
    ASSERT_TRUE(engine_->PrepareJob(layout).ok());
    for (const JobLayout::Item& item : layout.items) {
      for (const std::string& p : item.partitions) {
        auto staged = engine_->StagePartition(layout.job_id, *item.dataset, p,
                                              {{&src_, p}});
        ASSERT_TRUE(staged.ok()) << p << ": " << staged.status();
      }
    }
    absl::Status published = engine_->Publish(layout);
    ASSERT_TRUE(published.ok()) << published;
    ASSERT_TRUE(engine_->DropStaging(layout.job_id).ok());
  }

  std::unique_ptr<SqliteEngine> engine_;
  DatasetSpec src_, d_;
};

TEST_F(TimeKeyEngineTest, AnUntypedKeyColumnKeepsIntegerKeys) {
  // The fixture holds what it says: INTEGER and REAL key values.
  EXPECT_EQ(Int("SELECT COUNT(*) FROM src WHERE typeof(k) = 'integer' AND "
                "part IS NOT NULL"),
            24);
  EXPECT_GT(Int("SELECT COUNT(*) FROM src WHERE typeof(k) = 'real'"), 0);
  const std::map<std::string, int64_t> want = Counts(
      "SELECT part, COUNT(*) FROM src WHERE part IS NOT NULL GROUP BY 1");
  // Key 7 as the INTEGER 7 and as the TEXT '7', 6 renderings each.
  EXPECT_EQ(want.at("2024-02-29|7"), 12);
  auto counts = engine_->CountRowsByPartition(src_);
  ASSERT_TRUE(counts.ok()) << counts.status();
  EXPECT_EQ(*counts, want);

  // A load of every declared partition into a table whose key column has
  // no type either: every value with its storage type (EXCEPT compares
  // the INTEGER 7 and the TEXT '7' as different values).
  const std::vector<std::string> declared = Strings(
      "SELECT DISTINCT part FROM src WHERE part IS NOT NULL AND part NOT LIKE "
      "'%|zz' ORDER BY 1");
  ASSERT_EQ(declared.size(), 16u);
  JobLayout load;
  load.job_id = "bf-1";
  load.items.push_back({&d_, declared});
  RunJob(load);
  EXPECT_EQ(Int("SELECT COUNT(*) FROM (SELECT ts, k, v, id FROM src WHERE "
                "part IS NOT NULL AND part NOT LIKE '%|zz' EXCEPT SELECT ts, "
                "k, v, id FROM d)"),
            0);
  EXPECT_EQ(Int("SELECT COUNT(*) FROM d WHERE typeof(k) = 'integer'"), 24);
  EXPECT_EQ(Int("SELECT COUNT(*) FROM d WHERE pk = '7'"), 48);

  // A backfill of key 7 of one day, rolled back: byte for byte as before.
  const std::string dump =
      "SELECT quote(ts) || typeof(k) || quote(k) || quote(v) || quote(id) || "
      "quote(pk) FROM d ORDER BY id";
  const std::vector<std::string> before = Strings(dump);
  Exec("UPDATE src SET v = v + 1000 WHERE part = '2024-03-01|7'");
  JobLayout scoped;
  scoped.job_id = "bf-2";
  scoped.items.push_back({&d_, {"2024-03-01|7"}});
  RunJob(scoped);
  EXPECT_EQ(Int("SELECT COUNT(*) FROM d JOIN src USING (id) WHERE part = "
                "'2024-03-01|7' AND d.v < 1000"),
            0);
  EXPECT_EQ(Int("SELECT COUNT(*) FROM d WHERE typeof(k) = 'integer'"), 24);
  RollbackSpec spec;
  spec.layout = scoped;
  spec.marker.reason = "undo";
  auto rolled = engine_->Rollback(spec);
  ASSERT_TRUE(rolled.ok()) << rolled.status();
  EXPECT_EQ(Strings(dump), before);
}

}  // namespace
}  // namespace storage_time_key_test
}  // namespace backfill
