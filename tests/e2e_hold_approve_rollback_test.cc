// End-to-end tests of a job held by a check, approved, published and rolled
// back, with the real backfilld and backfillctl: a measure_change check of
// severity hold stops a revenue jump in AWAITING_APPROVAL with the published
// table byte-identical, `diff` shows the jump as plain SQL computes it,
// `approve` publishes exactly what plain SQL computes from the raw tables
// (the approval in the audit log and lineage, the warning still shown), and
// `rollback` restores the rows of before the job byte for byte. A job held
// for approval over partitions that a rollback restores is superseded by
// the rollback and can no longer publish.

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/e2e_support.h"

namespace backfill {
namespace e2e_hold_approve_rollback_test {
namespace {

using namespace ::backfill::e2e;  // NOLINT: test support
using std::chrono::seconds;
using ::testing::HasSubstr;
using ::testing::Not;

// The example pipeline; daily_revenue holds a job whose revenue of a day
// moves by more than 30% and warns from 5%.
std::string HoldPipeline() {
  return absl::StrCat(
      PipelineYaml(false),
      "    checks:\n"
      "      - {kind: measure_change, name: revenue_jump, column: revenue, "
      "max_change: 30%, severity: hold}\n"
      "      - {kind: measure_change, name: revenue_drift, column: revenue, "
      "max_change: 5%, severity: warn}\n");
}

class HoldApproveRollbackTest : public E2eTest {
 protected:
  void SetUp() override {
    E2eTest::SetUp();
    ASSERT_NO_FATAL_FAILURE(WriteWarehouse(warehouse_, 10, 30));
    ASSERT_NO_FATAL_FAILURE(
        WriteFile(pipelines_dir_ + "/e2e.yaml", HoldPipeline()));
  }

  // Starts a daemon and loads the 10 days.
  Daemon& StartAndLoad() {
    Daemon& daemon = NewDaemon();
    EXPECT_TRUE(daemon.Start());
    RunResult r = daemon.CtlJson(
        {"submit", "daily_revenue", "--from", "2025-01-01", "--to",
         "2025-01-11", "--reason", "initial load", "--wait"},
        seconds(120));
    EXPECT_EQ(r.exit_code, 0) << r;
    EXPECT_EQ(JsonString(r.out, "state"), "BACKFILL_STATE_SUCCEEDED") << r;
    return daemon;
  }

  // Submits daily_revenue over [from, to) and follows it; its last JSON.
  RunResult Submit(Daemon& daemon, const std::string& from,
                   const std::string& to, const std::string& reason) {
    return daemon.CtlJson({"submit", "daily_revenue", "--from", from, "--to",
                           to, "--reason", reason, "--wait"},
                          seconds(120));
  }

  void Exec(const std::string& sql) {
    Sqlite db(warehouse_);
    ASSERT_TRUE(db.Exec(sql)) << db.error();
  }

  // The table's DDL, then every row as quote()d values in a total order:
  // equal dumps mean byte-identical contents and schema.
  std::string Dump() {
    Sqlite db(warehouse_, /*read_only=*/true);
    auto ddl =
        db.Query("SELECT sql FROM sqlite_master WHERE name = 'daily_revenue'");
    EXPECT_TRUE(ddl.has_value()) << db.error();
    auto rows = db.Query(
        "SELECT quote(ds), quote(region), quote(revenue), quote(orders) FROM "
        "daily_revenue ORDER BY 1, 2, 3, 4");
    EXPECT_TRUE(rows.has_value()) << db.error();
    std::string out = ddl && !ddl->empty() ? (*ddl)[0][0] : "<no table>";
    for (const auto& r : rows.value_or(Rows{})) {
      absl::StrAppend(&out, "\n", absl::StrJoin(r, "|"));
    }
    return out;
  }

  // The dump's rows of days outside [from, to).
  static std::string Outside(const std::string& dump, const std::string& from,
                             const std::string& to) {
    std::string out;
    for (absl::string_view line : absl::StrSplit(dump, '\n')) {
      if (!absl::StartsWith(line, "'")) continue;
      const std::string day(line.substr(1, 10));
      if (day >= from && day < to) continue;
      absl::StrAppend(&out, line, "\n");
    }
    return out;
  }

  Rows StateQuery(const std::string& sql,
                  const std::vector<std::string>& params = {}) {
    Sqlite db(data_dir_ + "/state.db", /*read_only=*/true);
    auto rows = db.Query(sql, params);
    EXPECT_TRUE(rows.has_value()) << db.error() << "\n" << sql;
    return rows.value_or(Rows{});
  }
};

TEST_F(HoldApproveRollbackTest, HeldJumpIsDiffedApprovedPublishedRolledBack) {
  Daemon& daemon = StartAndLoad();
  const std::string before = Dump();

  // Revenue of 2025-01-03 jumps tenfold.
  ASSERT_NO_FATAL_FAILURE(
      Exec("UPDATE raw_orders SET amount = amount * 10 WHERE order_date = "
           "'2025-01-03'"));
  // What the diff must show, per day of the job, by plain SQL: published
  // rows, staged rows, changed rows and the revenue delta.
  const Rows expected_diff =
      ExpectedRevenueDiff(warehouse_, "2025-01-02", "2025-01-06");
  ASSERT_EQ(expected_diff.size(), 4u);

  RunResult held = Submit(daemon, "2025-01-02", "2025-01-06", "repricing");
  EXPECT_EQ(held.exit_code, 1) << held;
  ASSERT_EQ(JsonString(held.out, "state"), "BACKFILL_STATE_AWAITING_APPROVAL")
      << held;
  const std::string id = JsonString(held.out, "id");
  EXPECT_THAT(JsonString(held.out, "message"), HasSubstr("revenue_jump"));
  EXPECT_THAT(held.err, HasSubstr("backfillctl approve " + id));
  EXPECT_EQ(Dump(), before);  // nothing published

  RunResult status = daemon.Ctl({"status", id});
  ASSERT_EQ(status.exit_code, 0) << status;
  EXPECT_THAT(status.out, HasSubstr("AWAITING_APPROVAL"));
  EXPECT_THAT(status.out, HasSubstr(" passed, 1 held, 1 warned\n"))
      << status.out;
  EXPECT_THAT(status.out,
              HasSubstr("HELD  revenue_jump on daily_revenue 2025-01-03"))
      << status.out;
  EXPECT_THAT(status.out,
              HasSubstr("WARNED  revenue_drift on daily_revenue 2025-01-03"))
      << status.out;
  // Only the jumping day is held.
  EXPECT_THAT(status.out, Not(HasSubstr("HELD  revenue_jump on daily_revenue "
                                        "2025-01-02")));

  RunResult diff = daemon.Ctl({"diff", id, "--samples", "1"});
  ASSERT_EQ(diff.exit_code, 0) << diff;
  for (const auto& e : expected_diff) {
    EXPECT_EQ(e[3] != "0", e[0] == "2025-01-03") << e[0];  // the jump only
    // The other days came out identical (early cutoff): not in the diff.
    if (e[0] == "2025-01-03") {
      ExpectRevenueDiffRow(diff.out, e);
    } else {
      EXPECT_TRUE(DiffTableRow(diff.out, e[0]).empty()) << e[0] << diff.out;
    }
  }

  RunResult approve =
      daemon.Ctl({"approve", id, "--reason", "the price list changed",
                  "--approved-by", "erin"});
  ASSERT_EQ(approve.exit_code, 0) << approve;
  RunResult watch = daemon.CtlJson({"watch", id});
  EXPECT_EQ(watch.exit_code, 0) << watch;
  EXPECT_EQ(JsonString(watch.out, "state"), "BACKFILL_STATE_SUCCEEDED")
      << watch;
  // Every day equals the fixed logic over the raw tables; the days outside
  // the job are byte-identical.
  EXPECT_EQ(PublishedRevenue(warehouse_, "2025-01-01", "2025-01-11"),
            ExpectedRevenue(warehouse_, "2025-01-01", "2025-01-11"));
  const std::string published = Dump();
  EXPECT_NE(published, before);
  EXPECT_EQ(Outside(published, "2025-01-02", "2025-01-06"),
            Outside(before, "2025-01-02", "2025-01-06"));

  // The approval in the audit log and in the lineage of the one day that
  // changed (the 3 others were not republished).
  EXPECT_EQ(StateQuery("SELECT from_state, instr(message, 'approved by erin: "
                       "the price list changed') > 0 FROM audit_events WHERE "
                       "job_id = ?1 AND to_state = 'PUBLISHING'",
                       {id}),
            (Rows{{"AWAITING_APPROVAL", "1"}}));
  EXPECT_EQ(StateQuery("SELECT COUNT(*), SUM(approved_by = 'erin' AND "
                       "approval_reason = 'the price list changed' AND "
                       "approved_from = 'AWAITING_APPROVAL' AND "
                       "approval_override = 0) FROM lineage WHERE job_id = ?1",
                       {id}),
            (Rows{{"1", "1"}}));

  // The warning stays visible once published.
  status = daemon.Ctl({"status", id});
  ASSERT_EQ(status.exit_code, 0) << status;
  EXPECT_THAT(status.out, HasSubstr("SUCCEEDED"));
  EXPECT_THAT(status.out,
              HasSubstr("WARNED  revenue_drift on daily_revenue 2025-01-03"))
      << status.out;
  EXPECT_THAT(status.out, HasSubstr("Approved"));

  // The rollback restores exactly the rows of before the job.
  RunResult rollback =
      daemon.CtlJson({"rollback", id, "--reason", "the price list was a test"});
  ASSERT_EQ(rollback.exit_code, 0) << rollback;
  EXPECT_EQ(JsonString(rollback.out, "state"), "BACKFILL_STATE_ROLLED_BACK")
      << rollback;
  EXPECT_EQ(Dump(), before);
  EXPECT_EQ(StateQuery("SELECT COUNT(*) FROM lineage WHERE job_id = ?1 AND "
                       "action = 'rollback' AND reason = 'the price list was "
                       "a test'",
                       {id}),
            (Rows{{"1"}}));
  ExpectCleanSigterm(daemon);
}

TEST_F(HoldApproveRollbackTest, RollbackSupersedesAJobHeldOverItsPartitions) {
  Daemon& daemon = StartAndLoad();
  const std::string before = Dump();

  // A small repricing publishes (it only warns) ...
  ASSERT_NO_FATAL_FAILURE(
      Exec("UPDATE raw_orders SET amount = amount * 1.1 WHERE order_date = "
           "'2025-01-04'"));
  RunResult fix = Submit(daemon, "2025-01-02", "2025-01-06", "repricing");
  ASSERT_EQ(fix.exit_code, 0) << fix;
  const std::string fix_id = JsonString(fix.out, "id");
  ASSERT_NE(Dump(), before);

  // ... then a jump is held over some of its days.
  ASSERT_NO_FATAL_FAILURE(
      Exec("UPDATE raw_orders SET amount = amount * 10 WHERE order_date = "
           "'2025-01-03'"));
  RunResult held = Submit(daemon, "2025-01-03", "2025-01-05", "jump");
  ASSERT_EQ(JsonString(held.out, "state"), "BACKFILL_STATE_AWAITING_APPROVAL")
      << held;
  const std::string held_id = JsonString(held.out, "id");
  auto staging_tables = [&] {
    Sqlite db(warehouse_, /*read_only=*/true);
    auto rows = db.Query(
        "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name "
        "LIKE '\\_bf\\_stage\\_' || replace(?1, '-', '_') || '\\_%' ESCAPE "
        "'\\'",
        {held_id});
    EXPECT_TRUE(rows.has_value()) << db.error();
    return rows && !rows->empty() ? (*rows)[0][0] : "?";
  };
  ASSERT_EQ(staging_tables(), "1");

  // Rolling the repricing back withdraws the rows the held job was
  // compared with: it is superseded, its staging dropped.
  RunResult rollback =
      daemon.CtlJson({"rollback", fix_id, "--reason", "wrong prices"});
  ASSERT_EQ(rollback.exit_code, 0) << rollback;
  EXPECT_EQ(Dump(), before);
  RunResult status = daemon.CtlJson({"status", held_id});
  EXPECT_EQ(JsonString(status.out, "state"), "BACKFILL_STATE_CANCELLED")
      << status;
  EXPECT_THAT(JsonString(status.out, "message"),
              HasSubstr("superseded by the rollback of " + fix_id))
      << status;
  EXPECT_EQ(staging_tables(), "0");
  EXPECT_EQ(StateQuery("SELECT from_state FROM audit_events WHERE job_id = ?1 "
                       "AND to_state = 'CANCELLED'",
                       {held_id}),
            (Rows{{"AWAITING_APPROVAL"}}));

  // It can no longer publish what it computed against the withdrawn rows.
  RunResult approve =
      daemon.Ctl({"approve", held_id, "--reason", "looks fine"});
  EXPECT_EQ(approve.exit_code, 1) << approve;
  EXPECT_THAT(approve.err, HasSubstr("FAILED_PRECONDITION")) << approve;
  EXPECT_EQ(Dump(), before);
  ExpectCleanSigterm(daemon);
}

}  // namespace
}  // namespace e2e_hold_approve_rollback_test
}  // namespace backfill
