// SqliteEngine's partition statistics (storage/sqlite/sqlite_partition_stats.h)
// and exact partition counts, compared with plain-SQL counts of the same
// table after appends, deletes, updates that move rows between partitions,
// a dropped and recreated table, a WITHOUT ROWID table and the engine's own
// publishes and rollbacks. Where the change signal cannot see a change (a
// delete in the middle of the table), the test pins down the documented
// bound: the next exact count of the partition, or the maximum age, brings
// the statistics back to the truth.

#include <sqlite3.h>
#include <stdlib.h>

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/sqlite/sqlite_engine.h"

namespace backfill {
namespace storage_partition_stats_test {
namespace {

namespace fs = std::filesystem;

class RawDb {
 public:
  explicit RawDb(const std::string& path) {
    EXPECT_EQ(sqlite3_open(path.c_str(), &db_), SQLITE_OK);
    sqlite3_busy_timeout(db_, 10000);
  }
  ~RawDb() { sqlite3_close(db_); }
  void Exec(const std::string& sql) {
    char* err = nullptr;
    ASSERT_EQ(sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err), SQLITE_OK)
        << (err ? err : "") << " in " << sql;
  }
  // First column -> second column (an integer) of every row.
  std::map<std::string, int64_t> Pairs(const std::string& sql) {
    std::map<std::string, int64_t> out;
    sqlite3_stmt* st = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db_, sql.c_str(), -1, &st, nullptr), SQLITE_OK)
        << sqlite3_errmsg(db_) << " in " << sql;
    while (st != nullptr && sqlite3_step(st) == SQLITE_ROW) {
      const unsigned char* k = sqlite3_column_text(st, 0);
      out[k ? reinterpret_cast<const char*>(k) : ""] =
          sqlite3_column_int64(st, 1);
    }
    sqlite3_finalize(st);
    return out;
  }
  int64_t Count(const std::string& sql) {
    auto rows = Pairs(absl::StrCat("SELECT 'n', (", sql, ")"));
    return rows.empty() ? -1 : rows.begin()->second;
  }

 private:
  sqlite3* db_ = nullptr;
};

// Rows of a day partition with plain SQL: values in the canonical forms
// "YYYY-MM-DD HH:MM:SS" or "YYYY-MM-DDTHH" belong to their first ten
// characters; anything else to none.
std::string PlainCountsSql(const std::string& table) {
  return absl::StrCat(
      "SELECT substr(ts, 1, 10), COUNT(*) FROM ", table,
      " WHERE ts GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9][ T]*' "
      "GROUP BY 1");
}

std::string Day(int d) { return absl::StrFormat("2025-03-%02d", d); }

class PartitionStatsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl =
        (fs::temp_directory_path() / "backfill-stats-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    path_ = (fs::path(dir_) / "warehouse.db").string();
    {
      RawDb raw(path_);
      raw.Exec(
          "CREATE TABLE events (id INTEGER PRIMARY KEY, ts TEXT, v INTEGER);"
          "CREATE INDEX events_ts ON events (ts);");
      // Day d holds 4 * d rows (d = 1..5), plus one row of no partition.
      std::string sql = "BEGIN;";
      for (int d = 1; d <= 5; ++d) {
        for (int i = 0; i < 4 * d; ++i) {
          absl::StrAppend(&sql, "INSERT INTO events (ts, v) VALUES ('", Day(d),
                          absl::StrFormat(" %02d:00:00", i % 24), "', ", i,
                          ");");
        }
      }
      absl::StrAppend(&sql,
                      "INSERT INTO events (ts, v) VALUES ('not a time', 0);"
                      "COMMIT;");
      raw.Exec(sql);
    }
    auto engine = SqliteEngine::Open(path_, 2);
    ASSERT_TRUE(engine.ok()) << engine.status();
    engine_ = *std::move(engine);
    engine_->SetStatsPolicy(absl::Hours(1), [this] { return now_; });
    ASSERT_TRUE(engine_->Claim("store-1", false).ok());
    events_.name = "events";
    events_.table = "events";
    events_.partition = PartitionSpec{"ts", Grain::kDay, {}};
  }

  void TearDown() override {
    engine_.reset();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  void Exec(const std::string& sql) {
    RawDb raw(path_);
    raw.Exec(sql);
  }
  std::map<std::string, int64_t> Plain(const std::string& table = "events") {
    RawDb raw(path_);
    return raw.Pairs(PlainCountsSql(table));
  }
  int64_t PlainTotal(const std::string& table = "events") {
    RawDb raw(path_);
    return raw.Count(absl::StrCat("SELECT COUNT(*) FROM ", table));
  }
  // Refreshes and checks the statistics against plain SQL; returns how
  // they were refreshed.
  std::string RefreshMatches(const DatasetSpec& ds,
                             const std::string& table = "events") {
    auto stats = engine_->PartitionStatistics(ds);
    EXPECT_TRUE(stats.ok()) << stats.status();
    if (!stats.ok()) return "";
    EXPECT_EQ(stats->rows, Plain(table)) << stats->refresh;
    EXPECT_EQ(stats->total_rows, PlainTotal(table)) << stats->refresh;
    return stats->refresh;
  }

  std::string dir_;
  std::string path_;
  absl::Time now_ = absl::FromUnixSeconds(1767225600);
  std::unique_ptr<SqliteEngine> engine_;
  DatasetSpec events_;
};

TEST_F(PartitionStatsTest, CountedOnceThenCurrentThenOnlyAppendsCounted) {
  EXPECT_EQ(RefreshMatches(events_), "recount");
  EXPECT_EQ(RefreshMatches(events_), "current");
  // Persisted in the warehouse, as plain SQL reads them.
  {
    RawDb raw(path_);
    EXPECT_EQ(raw.Pairs("SELECT \"partition\", rows FROM _bf_partition_stats "
                        "WHERE dataset = 'events'"),
              Plain());
  }
  // Appends to an existing day, a new day and a value of no partition.
  Exec(
      "INSERT INTO events (ts, v) VALUES ('2025-03-02 23:59:59', 1), "
      "('2025-03-02T07', 2), ('2025-03-09 01:00:00', 3), ('garbage', 4)");
  EXPECT_EQ(RefreshMatches(events_), "appended");
  EXPECT_EQ(RefreshMatches(events_), "current");
  // A new engine (a restart) uses the stored statistics.
  engine_.reset();
  auto engine = SqliteEngine::Open(path_, 1);
  ASSERT_TRUE(engine.ok());
  engine_ = *std::move(engine);
  engine_->SetStatsPolicy(absl::Hours(1), [this] { return now_; });
  EXPECT_EQ(RefreshMatches(events_), "current");
}

TEST_F(PartitionStatsTest, DeletingOrChangingTheEdgeRowsIsSeen) {
  ASSERT_EQ(RefreshMatches(events_), "recount");
  Exec("DELETE FROM events WHERE id = (SELECT MAX(id) FROM events)");
  EXPECT_EQ(RefreshMatches(events_), "recount");
  Exec("DELETE FROM events WHERE id = (SELECT MIN(id) FROM events)");
  EXPECT_EQ(RefreshMatches(events_), "recount");
  // The last row moved to another day.
  Exec(
      "UPDATE events SET ts = '2025-03-01 12:00:00' WHERE id = (SELECT "
      "MAX(id) FROM events)");
  EXPECT_EQ(RefreshMatches(events_), "recount");
  EXPECT_EQ(RefreshMatches(events_), "current");
}

TEST_F(PartitionStatsTest, AMiddleChangeIsCaughtByAnExactCountOrTheMaxAge) {
  ASSERT_EQ(RefreshMatches(events_), "recount");
  // Rows deleted from the middle of day 3 and a row of day 1 moved to day
  // 4: the signal cannot see it (the documented bound) ...
  Exec(
      "DELETE FROM events WHERE id IN (SELECT id FROM events WHERE ts LIKE "
      "'2025-03-03%' LIMIT 2);"
      "UPDATE events SET ts = '2025-03-04 05:00:00' WHERE id = (SELECT id "
      "FROM events WHERE ts LIKE '2025-03-01%' LIMIT 1)");
  auto stale = engine_->PartitionStatistics(events_);
  ASSERT_TRUE(stale.ok());
  EXPECT_EQ(stale->refresh, "current");
  EXPECT_EQ(stale->rows.at(Day(3)), 12);  // 3 * 4 before the delete
  EXPECT_EQ(Plain().at(Day(3)), 10);
  // ... until a plan counts one of those partitions exactly: the count is
  // right and the statistics are dropped, so the next refresh recounts.
  auto exact = engine_->CountRowsInPartitions(events_, {Day(3)});
  ASSERT_TRUE(exact.ok()) << exact.status();
  EXPECT_THAT(*exact, ::testing::ElementsAre(Plain().at(Day(3))));
  EXPECT_EQ(RefreshMatches(events_), "recount");

  // Or until the counts are older than the maximum age.
  Exec(
      "UPDATE events SET ts = '2025-03-05 05:00:00' WHERE id = (SELECT id "
      "FROM events WHERE ts LIKE '2025-03-02%' LIMIT 1)");
  now_ += absl::Minutes(59);
  EXPECT_EQ(engine_->PartitionStatistics(events_)->refresh, "current");
  now_ += absl::Minutes(2);
  EXPECT_EQ(RefreshMatches(events_), "recount");

  // A maximum age of zero counts every time.
  engine_->SetStatsPolicy(absl::ZeroDuration(), [this] { return now_; });
  EXPECT_EQ(RefreshMatches(events_), "recount");
  EXPECT_EQ(RefreshMatches(events_), "recount");
}

TEST_F(PartitionStatsTest, ADroppedAndRecreatedTableIsCountedAgain) {
  ASSERT_EQ(RefreshMatches(events_), "recount");
  // Recreated with the same statement and more rows than before, so that
  // its rowids reach past the old maximum.
  std::string sql =
      "DROP TABLE events; CREATE TABLE events (id INTEGER PRIMARY KEY, ts "
      "TEXT, v INTEGER); CREATE INDEX events_ts ON events (ts); BEGIN;";
  for (int i = 0; i < 80; ++i) {
    absl::StrAppend(&sql, "INSERT INTO events (ts, v) VALUES ('",
                    Day(7 + i % 3), " 10:00:00', ", i, ");");
  }
  sql += "COMMIT;";
  Exec(sql);
  EXPECT_EQ(RefreshMatches(events_), "recount");
  // And a dropped table has no rows.
  Exec("DROP TABLE events");
  auto gone = engine_->PartitionStatistics(events_);
  ASSERT_TRUE(gone.ok());
  EXPECT_TRUE(gone->rows.empty());
  EXPECT_EQ(gone->total_rows, 0);
  RawDb raw(path_);
  EXPECT_EQ(raw.Count("SELECT COUNT(*) FROM _bf_partition_stats WHERE "
                      "dataset = 'events'"),
            0);
}

TEST_F(PartitionStatsTest, AWithoutRowidTableIsCountedEveryTime) {
  Exec(
      "CREATE TABLE wr (ts TEXT, k INTEGER, PRIMARY KEY (ts, k)) WITHOUT "
      "ROWID;"
      "INSERT INTO wr VALUES ('2025-03-01 01:00:00', 1), ('2025-03-01 "
      "02:00:00', 2), ('2025-03-02 01:00:00', 3)");
  DatasetSpec wr = events_;
  wr.name = "wr";
  wr.table = "wr";
  EXPECT_EQ(RefreshMatches(wr, "wr"), "recount");
  Exec("INSERT INTO wr VALUES ('2025-03-02 05:00:00', 4)");
  EXPECT_EQ(RefreshMatches(wr, "wr"), "recount");
  Exec("DELETE FROM wr WHERE k = 1");
  EXPECT_EQ(RefreshMatches(wr, "wr"), "recount");
  RawDb raw(path_);
  EXPECT_EQ(raw.Count("SELECT COUNT(*) FROM _bf_partition_stats_meta WHERE "
                      "dataset = 'wr'"),
            0);
}

TEST_F(PartitionStatsTest, ExactCountsOfChosenPartitions) {
  Exec("INSERT INTO events (ts, v) VALUES ('2025-03-02T05', 9)");
  const std::map<std::string, int64_t> plain = Plain();
  const std::vector<std::string> asked = {Day(1), Day(2), Day(4), Day(5),
                                          "2025-04-01"};
  // Aligned with the partitions asked for.
  std::vector<int64_t> want;
  for (const std::string& p : asked) {
    want.push_back(plain.count(p) ? plain.at(p) : 0);
  }
  auto counted = engine_->CountRowsInPartitions(events_, asked);
  ASSERT_TRUE(counted.ok()) << counted.status();
  EXPECT_EQ(*counted, want);

  // Out of order and repeated: each place answered.
  const std::vector<std::string> shuffled = {Day(4), "2025-04-01", Day(1),
                                             Day(4), Day(2),       Day(1)};
  auto reordered = engine_->CountRowsInPartitions(events_, shuffled);
  ASSERT_TRUE(reordered.ok()) << reordered.status();
  EXPECT_THAT(*reordered,
              ::testing::ElementsAre(plain.at(Day(4)), 0, plain.at(Day(1)),
                                     plain.at(Day(4)), plain.at(Day(2)),
                                     plain.at(Day(1))));

  // The same without an index on the column (one scan instead of runs).
  Exec("CREATE TABLE noidx AS SELECT * FROM events");
  DatasetSpec noidx = events_;
  noidx.name = "noidx";
  noidx.table = "noidx";
  auto unindexed = engine_->CountRowsInPartitions(noidx, asked);
  ASSERT_TRUE(unindexed.ok()) << unindexed.status();
  EXPECT_EQ(*unindexed, want);

  // A table that does not exist holds no rows; a malformed partition is
  // refused.
  DatasetSpec missing = events_;
  missing.table = "missing";
  auto none = engine_->CountRowsInPartitions(missing, {Day(1), Day(1)});
  ASSERT_TRUE(none.ok());
  EXPECT_THAT(*none, ::testing::ElementsAre(0, 0));
  EXPECT_EQ(
      engine_->CountRowsInPartitions(events_, {"2025-3-1"}).status().code(),
      absl::StatusCode::kInvalidArgument);
}

TEST_F(PartitionStatsTest, ExactCountsOfHoursSomeEmptyAcrossDays) {
  // An hour grain over the same table: the hours asked for span three days
  // (one run of candidate ranges), some hold rows, some none, and other
  // hours of those days (not asked for) hold rows too.
  DatasetSpec hours = events_;
  hours.name = "events_by_hour";
  hours.partition = PartitionSpec{"ts", Grain::kHour, {}};
  Exec("INSERT INTO events (ts, v) VALUES ('2025-03-02T05', 9)");
  RawDb raw(path_);
  const std::map<std::string, int64_t> plain = raw.Pairs(
      "SELECT substr(ts, 1, 10) || 'T' || substr(ts, 12, 2), COUNT(*) FROM "
      "events WHERE ts GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9][ "
      "T][0-9][0-9]*' GROUP BY 1");
  const std::vector<std::string> asked = {"2025-03-02T05", "2025-03-02T23",
                                          "2025-03-03T00", "2025-03-03T11",
                                          "2025-03-04T02", "2025-03-04T15"};
  std::vector<int64_t> want;
  for (const std::string& p : asked) {
    want.push_back(plain.count(p) ? plain.at(p) : 0);
  }
  // By hand: day 2 holds hours 00..07, twice 05 (one more row); day 3
  // hours 00..11; day 4 hours 00..15.
  EXPECT_THAT(want, ::testing::ElementsAre(2, 0, 1, 1, 1, 1));
  auto counted = engine_->CountRowsInPartitions(hours, asked);
  ASSERT_TRUE(counted.ok()) << counted.status();
  EXPECT_EQ(*counted, want);
}

TEST_F(PartitionStatsTest, PublishAndRollbackKeepDerivedStatisticsExact) {
  DatasetSpec out;
  out.name = "per_event";
  out.kind = DatasetKind::kDerived;
  out.table = "per_event";
  out.partition = PartitionSpec{"ds", Grain::kDay, {}};
  out.upstream = {{"events", Mapping::kIdentity}};
  out.transform =
      "SELECT :partition AS ds, id AS n FROM events WHERE ts >= "
      ":partition_start AND ts < :partition_end";
  out.transform_version = "v1";
  out.columns = {{"ds", "TEXT"}, {"n", "INTEGER"}};
  auto run = [&](const std::string& job, std::vector<std::string> days) {
    JobLayout layout;
    layout.job_id = job;
    layout.items.push_back({&out, days});
    ASSERT_TRUE(engine_->PrepareJob(layout).ok());
    for (const std::string& d : days) {
      auto staged =
          engine_->StagePartition(job, out, d, {InputRef{&events_, d}});
      ASSERT_TRUE(staged.ok()) << staged.status();
    }
    ASSERT_TRUE(engine_->Publish(layout).ok());
    ASSERT_TRUE(engine_->DropStaging(job).ok());
  };
  auto plain_out = [&] {
    RawDb raw(path_);
    return raw.Pairs("SELECT ds, COUNT(*) FROM per_event GROUP BY ds");
  };
  auto check = [&](const std::string& want_refresh) {
    auto stats = engine_->PartitionStatistics(out);
    ASSERT_TRUE(stats.ok()) << stats.status();
    EXPECT_EQ(stats->refresh, want_refresh);
    EXPECT_EQ(stats->rows, plain_out());
    RawDb raw(path_);
    EXPECT_EQ(stats->total_rows, raw.Count("SELECT COUNT(*) FROM per_event"));
  };
  ASSERT_NO_FATAL_FAILURE(run("bf-1", {Day(1), Day(2), Day(3)}));
  // The first publish created the table and its statistics.
  ASSERT_NO_FATAL_FAILURE(check("current"));
  Exec(
      "INSERT INTO events (ts, v) VALUES ('2025-03-02 08:00:00', 1), "
      "('2025-03-02 09:00:00', 2)");
  ASSERT_NO_FATAL_FAILURE(run("bf-2", {Day(2), Day(4)}));
  ASSERT_NO_FATAL_FAILURE(check("current"));
  RollbackSpec rollback;
  rollback.layout.job_id = "bf-2";
  rollback.layout.items.push_back({&out, {Day(2), Day(4)}});
  rollback.marker.requested_by = "test";
  rollback.marker.reason = "undo";
  auto restored = engine_->Rollback(rollback);
  ASSERT_TRUE(restored.ok()) << restored.status();
  ASSERT_NO_FATAL_FAILURE(check("current"));
  EXPECT_EQ(plain_out().count(Day(4)), 0u);

  // Someone else writes the derived table: statistics that are not current
  // are dropped by the next publish, never carried forward wrong.
  Exec(
      "DELETE FROM per_event WHERE rowid = (SELECT MIN(rowid) FROM "
      "per_event)");
  ASSERT_NO_FATAL_FAILURE(run("bf-3", {Day(5)}));
  ASSERT_NO_FATAL_FAILURE(check("recount"));
}

}  // namespace
}  // namespace storage_partition_stats_test
}  // namespace backfill
