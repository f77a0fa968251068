// End-to-end tests of the diff and of approvals with the real backfilld and
// backfillctl: a dataset with `require_approval: true` stops its job in
// AWAITING_APPROVAL with the published table byte-identical, `backfillctl
// diff` shows per partition what plain SQL says would change, the job is
// still held after a restart and publishes once approved (the approval in
// the audit log and lineage of state.db); a job that failed validation (a
// NULL in its primary key) is refused without --override and published with
// it.

#include <map>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/e2e_support.h"

namespace backfill {
namespace e2e_approval_test {
namespace {

using namespace ::backfill::e2e;  // NOLINT: test support
using std::chrono::seconds;
using ::testing::HasSubstr;

// daily_revenue with require_approval, and region_revenue whose transform
// leaves the region of the 'north' rows NULL: a NULL in its primary key.
std::string ApprovalPipeline() {
  std::string yaml = PipelineYaml(false, R"yaml(  - name: region_revenue
    kind: derived
    table: region_revenue
    partition: {column: ds, grain: day}
    upstream:
      - {dataset: orders, mapping: identity}
      - {dataset: customers, mapping: all}
    transform: |
      SELECT o.order_date AS ds,
             CASE WHEN c.region = 'north' THEN NULL ELSE c.region END AS region,
             SUM(o.amount) AS revenue
      FROM raw_orders o JOIN dim_customers c ON c.customer_id = o.customer_id
      WHERE o.order_date >= :partition_start AND o.order_date < :partition_end
      GROUP BY 1, 2
    contract:
      columns: {ds: TEXT, region: TEXT, revenue: REAL}
      primary_key: [ds, region]
)yaml");
  return absl::StrReplaceAll(yaml,
                             {{"  - name: daily_revenue\n    kind: derived\n",
                               "  - name: daily_revenue\n    kind: derived\n"
                               "    require_approval: true\n"}});
}

class ApprovalE2eTest : public E2eTest {
 protected:
  // Every row of a table, every column quoted, in a total order.
  std::string Dump(const std::string& table) {
    Sqlite db(warehouse_, /*read_only=*/true);
    auto rows = db.Query(absl::StrCat(
        "SELECT quote(ds), quote(region), quote(revenue), typeof(revenue)",
        table == "daily_revenue" ? ", quote(orders)" : "", " FROM ", table,
        " ORDER BY 1, 2, 3"));
    EXPECT_TRUE(rows.has_value()) << db.error();
    std::string out;
    for (const auto& r : rows.value_or(Rows{})) {
      absl::StrAppend(&out, absl::StrJoin(r, "|"), "\n");
    }
    return out;
  }
};

TEST_F(ApprovalE2eTest, RequireApprovalShowsTheDiffAndPublishesOnceApproved) {
  ASSERT_NO_FATAL_FAILURE(WriteWarehouse(warehouse_, 8, 40));
  ASSERT_NO_FATAL_FAILURE(
      WriteFile(pipelines_dir_ + "/e2e.yaml", PipelineYaml(false)));
  Daemon& first = NewDaemon();
  ASSERT_TRUE(first.Start());
  RunResult load =
      first.CtlJson({"submit", "daily_revenue", "--from", "2025-01-01", "--to",
                     "2025-01-09", "--reason", "initial load", "--wait"},
                    seconds(120));
  ASSERT_EQ(load.exit_code, 0) << load;
  ExpectCleanSigterm(first);

  // New refunds on two days; every job of daily_revenue now needs approval.
  {
    Sqlite db(warehouse_);
    ASSERT_TRUE(
        db.Exec("UPDATE raw_orders SET refund = amount - 1 WHERE "
                "order_date IN ('2025-01-03', '2025-01-05') AND "
                "order_id % 3 = 0"))
        << db.error();
  }
  ASSERT_NO_FATAL_FAILURE(
      WriteFile(pipelines_dir_ + "/e2e.yaml", ApprovalPipeline()));
  Daemon& daemon = NewDaemon();
  ASSERT_TRUE(daemon.Start());
  const std::string before = Dump("daily_revenue");
  // The diff's expectations, with plain SQL, before anything runs.
  const Rows expected =
      ExpectedRevenueDiff(warehouse_, "2025-01-02", "2025-01-07");
  ASSERT_EQ(expected.size(), 5u);

  RunResult submit =
      daemon.CtlJson({"submit", "daily_revenue", "--from", "2025-01-02", "--to",
                      "2025-01-07", "--reason", "late refunds", "--wait"},
                     seconds(120));
  EXPECT_EQ(submit.exit_code, 1) << submit;
  EXPECT_EQ(JsonString(submit.out, "state"),
            "BACKFILL_STATE_AWAITING_APPROVAL");
  const std::string id = JsonString(submit.out, "id");
  EXPECT_THAT(submit.err, HasSubstr("backfillctl approve " + id));
  EXPECT_THAT(JsonString(submit.out, "message"),
              HasSubstr("daily_revenue requires approval"));
  EXPECT_EQ(Dump("daily_revenue"), before);  // nothing published

  RunResult diff = daemon.Ctl({"diff", id, "--samples", "1"}, seconds(30));
  ASSERT_EQ(diff.exit_code, 0) << diff;
  for (const auto& e : expected) {
    // Only the refunded days change; the others were recomputed identical
    // to their published rows (early cutoff), so the diff leaves them out.
    const bool refunded = e[0] == "2025-01-03" || e[0] == "2025-01-05";
    EXPECT_EQ(e[3] != "0", refunded) << e[0];
    if (refunded) {
      ExpectRevenueDiffRow(diff.out, e);
    } else {
      EXPECT_TRUE(DiffTableRow(diff.out, e[0]).empty()) << e[0] << diff.out;
    }
  }
  EXPECT_THAT(diff.out, HasSubstr("Sample rows"));

  // Still held after a restart; a reason is required.
  ExpectCleanSigterm(daemon);
  Daemon& again = NewDaemon();
  ASSERT_TRUE(again.Start());
  RunResult held = again.CtlJson({"status", id}, seconds(30));
  EXPECT_EQ(JsonString(held.out, "state"), "BACKFILL_STATE_AWAITING_APPROVAL");
  EXPECT_EQ(again.Ctl({"approve", id}, seconds(30)).exit_code, 2);
  RunResult approve = again.Ctl(
      {"approve", id, "--reason", "refunds checked", "--approved-by", "erin"},
      seconds(30));
  ASSERT_EQ(approve.exit_code, 0) << approve;
  RunResult watch = again.CtlJson({"watch", id}, seconds(120));
  EXPECT_EQ(watch.exit_code, 0) << watch;
  EXPECT_EQ(PublishedRevenue(warehouse_, "2025-01-02", "2025-01-07"),
            ExpectedRevenue(warehouse_, "2025-01-02", "2025-01-07"));
  // Days outside the job are as before.
  const std::string after = Dump("daily_revenue");
  for (const char* day : {"'2025-01-01'", "'2025-01-07'", "'2025-01-08'"}) {
    for (absl::string_view line : absl::StrSplit(before, '\n')) {
      if (absl::StartsWith(line, day)) {
        EXPECT_THAT(after, HasSubstr(std::string(line))) << day;
      }
    }
  }

  // The approval in the audit log and in lineage; approving again changes
  // nothing.
  Sqlite state(data_dir_ + "/state.db", /*read_only=*/true);
  auto audit = state.Query(
      "SELECT from_state, message FROM audit_events WHERE job_id = ?1 AND "
      "to_state = 'PUBLISHING'",
      {id});
  ASSERT_TRUE(audit.has_value()) << state.error();
  ASSERT_EQ(audit->size(), 1u);
  EXPECT_EQ((*audit)[0][0], "AWAITING_APPROVAL");
  EXPECT_THAT((*audit)[0][1], HasSubstr("approved by erin: refunds checked"));
  auto lineage = state.Query(
      "SELECT COUNT(*), SUM(approved_by = 'erin' AND approval_reason = "
      "'refunds checked' AND approved_from = 'AWAITING_APPROVAL' AND "
      "approval_override = 0) FROM lineage WHERE job_id = ?1",
      {id});
  ASSERT_TRUE(lineage.has_value()) << state.error();
  // The two refunded days; the three unchanged ones keep their lineage.
  EXPECT_EQ((*lineage)[0], (std::vector<std::string>{"2", "2"}));
  RunResult twice =
      again.CtlJson({"approve", id, "--reason", "again"}, seconds(30));
  EXPECT_EQ(twice.exit_code, 0) << twice;
  EXPECT_EQ(JsonString(twice.out, "state"), "BACKFILL_STATE_SUCCEEDED");
  auto count =
      state.Query("SELECT COUNT(*) FROM lineage WHERE job_id = ?1", {id});
  EXPECT_EQ((*count)[0][0], "2");
  RunResult status = again.Ctl({"status", id}, seconds(30));
  EXPECT_THAT(status.out, HasSubstr("by erin"));
  EXPECT_THAT(status.out, HasSubstr("Diff daily_revenue"));
  ExpectCleanSigterm(again);
}

TEST_F(ApprovalE2eTest, AFailedValidationIsPublishedOnlyWithOverride) {
  ASSERT_NO_FATAL_FAILURE(WriteWarehouse(warehouse_, 4, 40));
  ASSERT_NO_FATAL_FAILURE(
      WriteFile(pipelines_dir_ + "/e2e.yaml", ApprovalPipeline()));
  Daemon& daemon = NewDaemon();
  ASSERT_TRUE(daemon.Start());
  RunResult submit =
      daemon.CtlJson({"submit", "region_revenue", "--from", "2025-01-01",
                      "--to", "2025-01-04", "--reason", "first load", "--wait"},
                     seconds(120));
  EXPECT_EQ(submit.exit_code, 1) << submit;
  EXPECT_EQ(JsonString(submit.out, "state"),
            "BACKFILL_STATE_VALIDATION_FAILED");
  EXPECT_THAT(JsonString(submit.out, "message"), HasSubstr("NULL"));
  const std::string id = JsonString(submit.out, "id");
  {
    Sqlite db(warehouse_, /*read_only=*/true);
    auto tables = db.Query(
        "SELECT COUNT(*) FROM sqlite_master WHERE name = 'region_revenue'");
    EXPECT_EQ((*tables)[0][0], "0");  // nothing published
  }
  // The diff was computed although the checks failed: a first load.
  RunResult diff = daemon.Ctl({"diff", id}, seconds(30));
  ASSERT_EQ(diff.exit_code, 0) << diff;
  EXPECT_THAT(diff.out, HasSubstr("VALIDATION_FAILED"));

  RunResult refused =
      daemon.Ctl({"approve", id, "--reason", "publish it"}, seconds(30));
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_THAT(refused.err, HasSubstr("FAILED_PRECONDITION"));
  EXPECT_THAT(refused.err, HasSubstr("--override"));

  // Overridden after a restart: the job is loaded again, its staging kept.
  ExpectCleanSigterm(daemon);
  Daemon& again = NewDaemon();
  ASSERT_TRUE(again.Start());
  RunResult approved = again.Ctl(
      {"approve", id, "--reason", "NULL regions are known", "--override"},
      seconds(30));
  ASSERT_EQ(approved.exit_code, 0) << approved;
  RunResult watch = again.CtlJson({"watch", id}, seconds(120));
  EXPECT_EQ(watch.exit_code, 0) << watch;
  Sqlite db(warehouse_, /*read_only=*/true);
  auto mismatch = db.Query(
      "WITH want AS (SELECT o.order_date AS ds, CASE WHEN c.region = 'north' "
      "THEN NULL ELSE c.region END AS region, SUM(o.amount) AS revenue FROM "
      "raw_orders o JOIN dim_customers c ON c.customer_id = o.customer_id "
      "WHERE o.order_date < '2025-01-04' GROUP BY 1, 2) "
      "SELECT (SELECT COUNT(*) FROM (SELECT * FROM want EXCEPT SELECT ds, "
      "region, revenue FROM region_revenue)) + (SELECT COUNT(*) FROM (SELECT "
      "ds, region, revenue FROM region_revenue EXCEPT SELECT * FROM want)), "
      "(SELECT COUNT(*) FROM region_revenue WHERE region IS NULL)");
  ASSERT_TRUE(mismatch.has_value()) << db.error();
  EXPECT_EQ((*mismatch)[0][0], "0");
  EXPECT_NE((*mismatch)[0][1], "0");
  Sqlite state(data_dir_ + "/state.db", /*read_only=*/true);
  auto lineage = state.Query(
      "SELECT COUNT(*), SUM(approval_override = 1 AND approved_from = "
      "'VALIDATION_FAILED') FROM lineage WHERE job_id = ?1",
      {id});
  EXPECT_EQ((*lineage)[0], (std::vector<std::string>{"3", "3"}));
  ExpectCleanSigterm(again);
}

}  // namespace
}  // namespace e2e_approval_test
}  // namespace backfill
