// Early cutoff with the real daemon and CLI, over daily_revenue and its two
// dependents (daily_total by identity, region_totals reading all of it):
//   - a rerun with unchanged data and logic publishes nothing and runs no
//     dependent: the whole warehouse dump is byte-identical and state.db
//     holds no new lineage row; the daemon starts again after it;
//   - a rerun after a correction of some days publishes exactly those days
//     and their dependents, and runs no dependent of another day;
//   - a kill -9 in the middle (after partitions were recorded unchanged)
//     and a restart end with the same counts and nothing republished or
//     recomputed.
// Every expectation is read with plain SQL from warehouse.db and state.db.

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/time/civil_time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/e2e_support.h"
#include "tests/testing/revenue_pipeline.h"

namespace backfill {
namespace e2e_cutoff_test {
namespace {

using namespace ::backfill::e2e;  // NOLINT: test support
using std::chrono::seconds;
using ::testing::HasSubstr;

constexpr int kDays = 30;
constexpr char kFrom[] = "2025-01-01";
constexpr char kTo[] = "2025-01-31";

// A count of the job's `partitions` object in its JSON (other objects
// have fields of the same names, e.g. a diff's "unchanged").
int64_t Count(const std::string& json, const std::string& key) {
  const size_t start = json.find("\"partitions\": {");
  if (start == std::string::npos) return -1;
  const size_t end = json.find('}', start);
  return JsonInt(json.substr(start, end - start), key);
}

class CutoffTest : public E2eTest {
 protected:
  void SetUp() override {
    E2eTest::SetUp();
    ASSERT_NO_FATAL_FAILURE(WriteWarehouse(warehouse_, kDays, 20));
    ASSERT_NO_FATAL_FAILURE(WriteFile(
        pipelines_dir_ + "/e2e.yaml",
        PipelineYaml(/*slow=*/false, fixtures::RevenueDependentsYaml())));
  }

  // Submits the backfill of the 30 days with its dependents, waits, and
  // returns the job's JSON.
  std::string Backfill(Daemon& daemon, const std::string& reason) {
    RunResult r = daemon.CtlJson({"submit", "daily_revenue", "--from", kFrom,
                                  "--to", kTo, "--reason", reason, "--wait"},
                                 seconds(300));
    EXPECT_EQ(r.exit_code, 0) << r;
    return r.out;
  }

  // Every table and index of the warehouse: its definition, then all its
  // rows ordered by every column.
  std::string Dump() {
    Sqlite db(warehouse_, /*read_only=*/true);
    std::optional<Rows> objects = db.Query(
        "SELECT type, name, COALESCE(sql, '') FROM sqlite_master "
        "ORDER BY type, name");
    EXPECT_TRUE(objects.has_value()) << db.error();
    std::string out;
    for (const auto& o : objects.value_or(Rows{})) {
      absl::StrAppend(&out, o[0], " ", o[1], ": ", o[2], "\n");
      if (o[0] != "table") continue;
      std::optional<Rows> columns = db.Query(
          absl::StrCat("SELECT COUNT(*) FROM pragma_table_info('", o[1], "')"));
      const int n = columns ? std::stoi((*columns)[0][0]) : 0;
      std::vector<std::string> order;
      for (int i = 1; i <= n; ++i) order.push_back(absl::StrCat(i));
      std::optional<Rows> rows = db.Query(absl::StrCat(
          "SELECT * FROM \"", o[1], "\"",
          order.empty() ? "" : " ORDER BY " + absl::StrJoin(order, ", ")));
      EXPECT_TRUE(rows.has_value()) << db.error();
      for (const auto& row : rows.value_or(Rows{})) {
        absl::StrAppend(&out, "  ", absl::StrJoin(row, "|"), "\n");
      }
    }
    return out;
  }

  Rows State(const std::string& sql,
             const std::vector<std::string>& params = {}) {
    Sqlite db(data_dir_ + "/state.db", /*read_only=*/true);
    std::optional<Rows> rows = db.Query(sql, params);
    EXPECT_TRUE(rows.has_value()) << db.error();
    return rows.value_or(Rows{});
  }
  int64_t LineageRows() {
    return std::stoll(State("SELECT COUNT(*) FROM lineage")[0][0]);
  }
  // state -> tasks of the job in it, by plain SQL.
  std::map<std::string, int> TaskStates(const std::string& job) {
    std::map<std::string, int> out;
    for (const auto& row :
         State("SELECT state, COUNT(*) FROM tasks WHERE job_id = ?1 "
               "GROUP BY state",
               {job})) {
      out[row[0]] = std::stoi(row[1]);
    }
    return out;
  }
  // "dataset/partition" of the job's tasks in `state`.
  std::set<std::string> TasksIn(const std::string& job,
                                const std::string& state) {
    std::set<std::string> out;
    for (const auto& row :
         State("SELECT dataset || '/' || \"partition\" FROM tasks WHERE "
               "job_id = ?1 AND state = ?2",
               {job, state})) {
      out.insert(row[0]);
    }
    return out;
  }
  // "dataset/partition" of the lineage records the job left.
  std::set<std::string> LineageOf(const std::string& job) {
    std::set<std::string> out;
    for (const auto& row :
         State("SELECT dataset || '/' || \"partition\" FROM lineage WHERE "
               "job_id = ?1",
               {job})) {
      out.insert(row[0]);
    }
    return out;
  }
  // Corrects the orders of `days` (every amount + 7).
  void Correct(const std::vector<std::string>& days) {
    std::vector<std::string> quoted;
    for (const std::string& d : days) quoted.push_back("'" + d + "'");
    Sqlite db(warehouse_);
    ASSERT_TRUE(db.Exec(absl::StrCat(
        "UPDATE raw_orders SET amount = amount + 7 WHERE order_date IN (",
        absl::StrJoin(quoted, ", "), ")")))
        << db.error();
  }
  // daily_total and region_totals as the pipeline's logic computes them
  // from the raw tables, beside what is published.
  void ExpectDependentsMatchRawTables() {
    Sqlite db(warehouse_, /*read_only=*/true);
    const std::string revenue =
        "SELECT o.order_date AS ds, c.region AS region, "
        "SUM(o.amount - o.refund) AS revenue FROM raw_orders o JOIN "
        "dim_customers c ON c.customer_id = o.customer_id GROUP BY 1, 2";
    auto expected_total =
        db.Query(absl::StrCat("SELECT ds, printf('%.6f', SUM(revenue)) FROM (",
                              revenue, ") GROUP BY ds ORDER BY ds"));
    auto total = db.Query(
        "SELECT ds, printf('%.6f', revenue) FROM daily_total ORDER BY ds");
    ASSERT_TRUE(expected_total && total) << db.error();
    EXPECT_EQ(*total, *expected_total);
    auto expected_regions = db.Query(
        absl::StrCat("SELECT region, printf('%.6f', SUM(revenue)) FROM (",
                     revenue, ") GROUP BY region ORDER BY region"));
    auto regions = db.Query(
        "SELECT region, printf('%.6f', revenue) FROM region_totals "
        "ORDER BY region");
    ASSERT_TRUE(expected_regions && regions) << db.error();
    EXPECT_EQ(*regions, *expected_regions);
  }

  // Starts a daemon and loads the 30 days (61 partitions published).
  Daemon& Loaded() {
    Daemon& daemon = NewDaemon();
    EXPECT_TRUE(daemon.Start());
    const std::string load = Backfill(daemon, "initial load");
    EXPECT_EQ(JsonString(load, "state"), "BACKFILL_STATE_SUCCEEDED") << load;
    EXPECT_EQ(Count(load, "published"), 61) << load;
    return daemon;
  }
};

TEST_F(CutoffTest, ARerunWithUnchangedLogicRepublishesNothing) {
  Daemon& daemon = Loaded();
  ASSERT_FALSE(HasFailure());
  const std::string before = Dump();
  const int64_t lineage = LineageRows();

  const std::string out = Backfill(daemon, "rerun");
  const std::string job = JsonString(out, "id");
  EXPECT_EQ(JsonString(out, "state"), "BACKFILL_STATE_SUCCEEDED") << out;
  EXPECT_EQ(Count(out, "unchanged"), 30) << out;
  EXPECT_EQ(Count(out, "skipped"), 31) << out;
  EXPECT_EQ(Count(out, "published"), 0) << out;
  EXPECT_THAT(JsonString(out, "message"),
              HasSubstr("nothing changed: 30 partitions recomputed identical "
                        "to the published ones, 31 dependents skipped; "
                        "nothing published"));
  // The warehouse is byte for byte what it was; no lineage was recorded.
  EXPECT_EQ(Dump(), before);
  EXPECT_EQ(LineageRows(), lineage);
  EXPECT_THAT(LineageOf(job), ::testing::IsEmpty());
  // Only daily_revenue was recomputed; no dependent ever ran.
  EXPECT_EQ(TaskStates(job),
            (std::map<std::string, int>{{"SKIPPED", 31}, {"UNCHANGED", 30}}));
  EXPECT_EQ(State("SELECT COUNT(*) FROM tasks WHERE job_id = ?1 AND dataset "
                  "<> 'daily_revenue' AND (attempts > 0 OR rows_written > 0)",
                  {job}),
            (Rows{{"0"}}));
  EXPECT_EQ(State("SELECT DISTINCT dataset FROM tasks WHERE job_id = ?1 AND "
                  "state = 'UNCHANGED'",
                  {job}),
            (Rows{{"daily_revenue"}}));

  // The CLI shows the counts.
  RunResult status = daemon.Ctl({"status", job});
  ASSERT_EQ(status.exit_code, 0) << status;
  EXPECT_THAT(status.out, HasSubstr("61/61 done: 30 unchanged, 31 skipped"));
  RunResult list = daemon.Ctl({"list"});
  ASSERT_EQ(list.exit_code, 0) << list;
  EXPECT_THAT(list.out, HasSubstr("61/61 (30 unchanged, 31 skipped)"));
  // Nothing to roll back.
  RunResult rollback = daemon.Ctl({"rollback", job, "--reason", "undo"});
  EXPECT_NE(rollback.exit_code, 0) << rollback;
  EXPECT_THAT(rollback.err, HasSubstr("published nothing"));
  EXPECT_EQ(Dump(), before);
  ExpectCleanSigterm(daemon);

  // The job left no publication marker, and the next start (twice: the
  // first one claims nothing new) does not look for one.
  for (int start = 0; start < 2; ++start) {
    Daemon& again = NewDaemon();
    ASSERT_TRUE(again.Start()) << "start " << start;
    RunResult listed = again.Ctl({"status", job});
    ASSERT_EQ(listed.exit_code, 0) << listed;
    EXPECT_THAT(listed.out, HasSubstr("SUCCEEDED"));
    ExpectCleanSigterm(again);
  }
  EXPECT_EQ(Dump(), before);
}

TEST_F(CutoffTest, OnlyTheCorrectedDaysAndWhatReadsThemArePublished) {
  Daemon& daemon = Loaded();
  ASSERT_FALSE(HasFailure());
  const std::vector<std::string> days = {"2025-01-05", "2025-01-12",
                                         "2025-01-20"};
  ASSERT_NO_FATAL_FAILURE(Correct(days));
  Sqlite snapshot(warehouse_, /*read_only=*/true);
  auto others_before = snapshot.Query(
      "SELECT ds, region, revenue, orders FROM daily_revenue WHERE ds NOT IN "
      "('2025-01-05', '2025-01-12', '2025-01-20') ORDER BY 1, 2");
  ASSERT_TRUE(others_before.has_value()) << snapshot.error();
  const int64_t lineage = LineageRows();

  const std::string out = Backfill(daemon, "refund fix");
  const std::string job = JsonString(out, "id");
  ASSERT_EQ(JsonString(out, "state"), "BACKFILL_STATE_SUCCEEDED") << out;
  // 3 days of daily_revenue and of daily_total, and region_totals.
  EXPECT_EQ(Count(out, "published"), 7) << out;
  EXPECT_EQ(Count(out, "unchanged"), 27) << out;
  EXPECT_EQ(Count(out, "skipped"), 27) << out;

  std::set<std::string> changed = {"region_totals/"};
  for (const std::string& d : days) {
    changed.insert("daily_revenue/" + d);
    changed.insert("daily_total/" + d);
  }
  EXPECT_EQ(TasksIn(job, "PUBLISHED"), changed);
  EXPECT_EQ(LineageOf(job), changed);
  EXPECT_EQ(LineageRows(), lineage + 7);
  // Dependents of unchanged days never ran.
  std::set<std::string> skipped;
  for (int d = 0; d < kDays; ++d) {
    const std::string day =
        absl::FormatCivilTime(absl::CivilDay(2025, 1, 1) + d);
    if (std::find(days.begin(), days.end(), day) == days.end()) {
      skipped.insert("daily_total/" + day);
    }
  }
  EXPECT_EQ(TasksIn(job, "SKIPPED"), skipped);
  EXPECT_EQ(State("SELECT COUNT(*) FROM tasks WHERE job_id = ?1 AND state = "
                  "'SKIPPED' AND attempts > 0",
                  {job}),
            (Rows{{"0"}}));
  // What is published is what the raw tables give, and the other days
  // are the rows they were.
  EXPECT_EQ(PublishedRevenue(warehouse_, kFrom, kTo),
            ExpectedRevenue(warehouse_, kFrom, kTo));
  ExpectDependentsMatchRawTables();
  Sqlite after(warehouse_, /*read_only=*/true);
  auto others_after = after.Query(
      "SELECT ds, region, revenue, orders FROM daily_revenue WHERE ds NOT IN "
      "('2025-01-05', '2025-01-12', '2025-01-20') ORDER BY 1, 2");
  EXPECT_EQ(others_after, others_before);
  // The job's rollback copy holds the corrected days only.
  auto copy = after.Query(absl::StrCat("SELECT DISTINCT ds FROM \"_bf_prev_",
                                       absl::StrReplaceAll(job, {{"-", "_"}}),
                                       "_daily_revenue\" ORDER BY 1"));
  ASSERT_TRUE(copy.has_value()) << after.error();
  EXPECT_EQ(*copy, (Rows{{"2025-01-05"}, {"2025-01-12"}, {"2025-01-20"}}));
  ExpectCleanSigterm(daemon);
}

TEST_F(CutoffTest, AKillInTheMiddleStillEndsWithNothingRepublished) {
  {
    Daemon& loader = Loaded();
    ASSERT_FALSE(HasFailure());
    ExpectCleanSigterm(loader);
  }
  const std::vector<std::string> days = {"2025-01-03", "2025-01-25"};
  ASSERT_NO_FATAL_FAILURE(Correct(days));
  const int64_t lineage = LineageRows();
  const Rows published_before = PublishedRevenue(warehouse_, kFrom, kTo);

  // Dies at the 9th release of an unchanged or skipped partition: some
  // partitions are recorded UNCHANGED (one perhaps not released yet).
  Daemon& armed = NewDaemon();
  armed.set_env({"BACKFILL_TEST_CRASH_AT=cutoff.before_release:9"});
  ASSERT_TRUE(armed.Start());
  RunResult submitted =
      armed.CtlJson({"submit", "daily_revenue", "--from", kFrom, "--to", kTo,
                     "--reason", "late fix", "--idempotency-key", "late-fix"});
  ASSERT_EQ(submitted.exit_code, 0) << submitted;
  const std::string job = JsonString(submitted.out, "id");
  ASSERT_EQ(armed.Wait(seconds(120)), std::optional<int>(137))
      << "the armed daemon did not die at the crash point";
  // Nothing was published; some tasks were recorded unchanged.
  EXPECT_EQ(PublishedRevenue(warehouse_, kFrom, kTo), published_before);
  EXPECT_EQ(LineageRows(), lineage);
  const std::set<std::string> settled = TasksIn(job, "UNCHANGED");
  ASSERT_FALSE(settled.empty());
  const Rows attempts_before = State(
      "SELECT dataset, \"partition\", attempts FROM tasks WHERE job_id = ?1 "
      "AND state = 'UNCHANGED' ORDER BY 1, 2",
      {job});

  Daemon& second = NewDaemon();
  ASSERT_TRUE(second.Start());
  const std::string out = WaitTerminal(second, job, seconds(300));
  ASSERT_EQ(JsonString(out, "state"), "BACKFILL_STATE_SUCCEEDED") << out;
  EXPECT_EQ(Count(out, "published"), 5) << out;
  EXPECT_EQ(Count(out, "unchanged"), 28) << out;
  EXPECT_EQ(Count(out, "skipped"), 28) << out;
  // Tasks recorded unchanged before the kill were not recomputed after it.
  Rows attempts_after;
  for (const auto& row : attempts_before) {
    attempts_after.push_back(
        State("SELECT dataset, \"partition\", attempts FROM tasks WHERE "
              "job_id = ?1 AND dataset = ?2 AND \"partition\" = ?3 AND "
              "state = 'UNCHANGED'",
              {job, row[0], row[1]})
            .at(0));
  }
  EXPECT_EQ(attempts_after, attempts_before);
  // Exactly the corrected days and what reads them were published, once.
  std::set<std::string> changed = {"region_totals/"};
  for (const std::string& d : days) {
    changed.insert("daily_revenue/" + d);
    changed.insert("daily_total/" + d);
  }
  EXPECT_EQ(LineageOf(job), changed);
  EXPECT_EQ(LineageRows(), lineage + 5);
  EXPECT_EQ(PublishedRevenue(warehouse_, kFrom, kTo),
            ExpectedRevenue(warehouse_, kFrom, kTo));
  ExpectDependentsMatchRawTables();
  // No staging left behind.
  Sqlite db(warehouse_, /*read_only=*/true);
  EXPECT_EQ(db.Query("SELECT COUNT(*) FROM sqlite_master WHERE name LIKE "
                     "'\\_bf\\_stage\\_%' ESCAPE '\\' OR name LIKE "
                     "'\\_bf\\_parts\\_%' ESCAPE '\\'"),
            std::optional<Rows>(Rows{{"0"}}));
  ExpectCleanSigterm(second);
}

}  // namespace
}  // namespace e2e_cutoff_test
}  // namespace backfill
