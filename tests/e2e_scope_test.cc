// End-to-end regression tests of exact scope: datasets whose transforms
// write the documented partition value (`:partition`, e.g.
// "2024-04-01T23" or "2025-03") into their partition column. A backfill of
// one hour, or of a range across midnight, changes exactly those partitions;
// an initial load across hour 23 and of several months succeeds. Every
// expectation is computed with plain SQL over the raw table.

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/civil_time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/e2e_support.h"

namespace backfill {
namespace e2e_scope_test {
namespace {

using namespace ::backfill::e2e;  // NOLINT: test support
using std::chrono::seconds;
using ::testing::HasSubstr;

constexpr char kPipeline[] =
    R"yaml(warehouse: {engine: sqlite, path: warehouse.db}
datasets:
  - name: events
    kind: source
    table: raw_events
    partition: {column: event_time, grain: hour}
  - name: hourly_amount
    kind: derived
    table: hourly_amount
    partition: {column: hr, grain: hour}
    upstream:
      - {dataset: events, mapping: identity}
    transform: |
      SELECT :partition AS hr, COUNT(*) AS events, TOTAL(amount) AS amount
      FROM raw_events
      WHERE event_time >= :partition_start AND event_time < :partition_end
    contract:
      columns: {hr: TEXT, events: INTEGER, amount: REAL}
      primary_key: [hr]
  - name: monthly
    kind: source
    table: raw_monthly
    partition: {column: month, grain: month}
  - name: monthly_amount
    kind: derived
    table: monthly_amount
    partition: {column: month, grain: month}
    upstream:
      - {dataset: monthly, mapping: identity}
    transform: |
      SELECT :partition AS month, TOTAL(amount) AS amount
      FROM raw_monthly WHERE month = :partition
    contract:
      columns: {month: TEXT, amount: REAL}
      primary_key: [month]
)yaml";

class ScopeTest : public E2eTest {
 protected:
  void SetUp() override {
    E2eTest::SetUp();
    Sqlite db(warehouse_);
    ASSERT_TRUE(db.error().empty()) << db.error();
    // Three days of events, one per 10 minutes, amount = minute of the day.
    std::string sql =
        "BEGIN; CREATE TABLE raw_events (event_id INTEGER PRIMARY KEY, "
        "event_time TEXT NOT NULL, amount REAL NOT NULL);"
        "CREATE INDEX raw_events_time ON raw_events (event_time);";
    int id = 0;
    for (int day = 31; day <= 33; ++day) {
      const absl::CivilDay d = absl::CivilDay(2024, 3, 31) + (day - 31);
      for (int minute = 0; minute < 24 * 60; minute += 10) {
        absl::StrAppend(
            &sql, "INSERT INTO raw_events VALUES (", ++id, ", '",
            absl::StrFormat("%s %02d:%02d:00", absl::FormatCivilTime(d),
                            minute / 60, minute % 60),
            "', ", minute, ");");
      }
    }
    absl::StrAppend(&sql,
                    "CREATE TABLE raw_monthly (month TEXT, amount REAL);");
    for (int m = 1; m <= 6; ++m) {
      absl::StrAppend(&sql, "INSERT INTO raw_monthly VALUES ('2025-0", m, "', ",
                      m * 10, ");");
    }
    sql += "COMMIT;";
    ASSERT_TRUE(db.Exec(sql)) << db.error();
    WriteFile(pipelines_dir_ + "/scope.yaml", kPipeline);
  }

  // hr -> "events|amount" of the published table.
  std::map<std::string, std::string> Published() {
    Sqlite db(warehouse_, /*read_only=*/true);
    auto rows = db.Query("SELECT hr, events, amount FROM hourly_amount");
    EXPECT_TRUE(rows.has_value()) << db.error();
    std::map<std::string, std::string> out;
    for (const auto& r : rows.value_or(Rows{})) {
      out[r[0]] = absl::StrCat(r[1], "|", r[2]);
    }
    return out;
  }

  // The same computed from raw_events with plain SQL, for the hours of
  // [from, to) (hour partitions "YYYY-MM-DDTHH").
  std::map<std::string, std::string> Expected(const std::string& from,
                                              const std::string& to) {
    Sqlite db(warehouse_, /*read_only=*/true);
    std::map<std::string, std::string> out;
    absl::CivilHour h, end;
    EXPECT_TRUE(absl::ParseCivilTime(from, &h));
    EXPECT_TRUE(absl::ParseCivilTime(to, &end));
    for (; h < end; ++h) {
      const std::string start = absl::StrFormat(
          "%04d-%02d-%02d %02d:00:00", h.year(), h.month(), h.day(), h.hour());
      const absl::CivilHour n = h + 1;
      const std::string stop = absl::StrFormat(
          "%04d-%02d-%02d %02d:00:00", n.year(), n.month(), n.day(), n.hour());
      auto rows = db.Query(
          "SELECT COUNT(*), TOTAL(amount) FROM raw_events WHERE event_time >= "
          "?1 AND event_time < ?2",
          {start, stop});
      EXPECT_TRUE(rows.has_value()) << db.error();
      out[absl::FormatCivilTime(h)] =
          absl::StrCat((*rows)[0][0], "|", (*rows)[0][1]);
    }
    return out;
  }

  // dataset/partition -> the job of its newest lineage record.
  std::map<std::string, std::string> LatestLineage() {
    Sqlite db(data_dir_ + "/state.db", /*read_only=*/true);
    auto rows = db.Query(
        "SELECT \"partition\", job_id FROM lineage l WHERE dataset = "
        "'hourly_amount' AND id = (SELECT MAX(id) FROM lineage m WHERE "
        "m.dataset = l.dataset AND m.\"partition\" = l.\"partition\")");
    EXPECT_TRUE(rows.has_value()) << db.error();
    std::map<std::string, std::string> out;
    for (const auto& r : rows.value_or(Rows{})) out[r[0]] = r[1];
    return out;
  }

  void AddEvents(const std::string& time, int count, double amount) {
    Sqlite db(warehouse_);
    for (int i = 0; i < count; ++i) {
      ASSERT_TRUE(db.Exec(
          absl::StrCat("INSERT INTO raw_events (event_time, amount) VALUES ('",
                       time, "', ", amount, ")")))
          << db.error();
    }
  }

  std::string Submit(Daemon& daemon, std::vector<std::string> scope,
                     const std::string& reason) {
    return SubmitSucceeded(daemon, std::move(scope), reason);
  }
};

TEST_F(ScopeTest, OneHourChangesExactlyThatHour) {
  Daemon& daemon = NewDaemon();
  ASSERT_TRUE(daemon.Start());
  // The initial load covers hour 23 and the earlier hours of the same days.
  const std::string load = Submit(
      daemon,
      {"hourly_amount", "--from", "2024-03-31T00", "--to", "2024-04-03T00"},
      "initial load");
  ASSERT_FALSE(load.empty());
  const std::map<std::string, std::string> loaded = Published();
  ASSERT_EQ(loaded.size(), 72u);
  EXPECT_EQ(loaded, Expected("2024-03-31T00", "2024-04-03T00"));

  // New raw events in hours 22 and 23 of April 1st and hour 00 of the 2nd;
  // only hour 23 is backfilled.
  ASSERT_NO_FATAL_FAILURE(AddEvents("2024-04-01 22:30:00", 5, 1000));
  ASSERT_NO_FATAL_FAILURE(AddEvents("2024-04-01 23:59:59", 7, 1000));
  ASSERT_NO_FATAL_FAILURE(AddEvents("2024-04-02 00:00:00", 3, 1000));
  const std::string one =
      Submit(daemon, {"hourly_amount", "--partitions", "2024-04-01T23"},
             "late events in hour 23");
  std::map<std::string, std::string> want = loaded;
  want["2024-04-01T23"] =
      Expected("2024-04-01T23", "2024-04-02T00")["2024-04-01T23"];
  ASSERT_NE(want["2024-04-01T23"], loaded.at("2024-04-01T23"));
  EXPECT_EQ(Published(), want);

  std::map<std::string, std::string> lineage = LatestLineage();
  ASSERT_EQ(lineage.size(), 72u);
  for (const auto& [hour, job] : lineage) {
    EXPECT_EQ(job, hour == "2024-04-01T23" ? one : load) << hour;
  }

  // A range across midnight: 22, 23, 00 and 01.
  const std::string across = Submit(
      daemon,
      {"hourly_amount", "--from", "2024-04-01T22", "--to", "2024-04-02T02"},
      "late events around midnight");
  for (const auto& [hour, value] : Expected("2024-04-01T22", "2024-04-02T02")) {
    want[hour] = value;
  }
  EXPECT_EQ(Published(), want);
  EXPECT_EQ(Published(), Expected("2024-03-31T00", "2024-04-03T00"));
  // Early cutoff: of the four hours only 22 and 00 changed; hour 23 kept
  // the version `one` published and hour 01 the load's.
  lineage = LatestLineage();
  for (const auto& [hour, job] : lineage) {
    const bool changed = hour == "2024-04-01T22" || hour == "2024-04-02T00";
    EXPECT_EQ(job, changed                   ? across
                   : hour == "2024-04-01T23" ? one
                                             : load)
        << hour;
  }
  ExpectCleanSigterm(daemon);
}

TEST_F(ScopeTest, SixMonthsWithTheMonthValueLoadAndOneMonthBackfills) {
  Daemon& daemon = NewDaemon();
  ASSERT_TRUE(daemon.Start());
  Submit(daemon, {"monthly_amount", "--from", "2025-01", "--to", "2025-07"},
         "initial load");
  Sqlite db(warehouse_);
  auto rows = db.Query("SELECT month, amount FROM monthly_amount ORDER BY 1");
  ASSERT_TRUE(rows.has_value()) << db.error();
  ASSERT_EQ(rows->size(), 6u);
  EXPECT_EQ((*rows)[1], (std::vector<std::string>{"2025-02", "20"}));
  ASSERT_TRUE(db.Exec("UPDATE raw_monthly SET amount = amount + 1"));
  Submit(daemon, {"monthly_amount", "--partitions", "2025-03"}, "march fix");
  rows = db.Query("SELECT month, amount FROM monthly_amount ORDER BY 1");
  ASSERT_TRUE(rows.has_value());
  const Rows want = {{"2025-01", "10"}, {"2025-02", "20"}, {"2025-03", "31"},
                     {"2025-04", "40"}, {"2025-05", "50"}, {"2025-06", "60"}};
  EXPECT_EQ(*rows, want);
  ExpectCleanSigterm(daemon);
}

}  // namespace
}  // namespace e2e_scope_test
}  // namespace backfill
