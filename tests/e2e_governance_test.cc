// End-to-end tests of the governance commands against the real daemon:
// `backfillctl why` after a backfill, a second backfill and a rollback;
// `backfillctl audit --job` and `--since`; and a dependent left stale by a
// backfill with --no-downstream, as `plan --auto`, `why` and the
// backfill_stale_partitions gauge show it. Expectations come from plain
// SQL over state.db and the warehouse, never from the service's output.

#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "backfill/v1/backfill.pb.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tests/testing/e2e_pipelines.h"
#include "tests/testing/e2e_support.h"

namespace backfill {
namespace e2e_governance_test {
namespace {

using namespace ::backfill::e2e;  // NOLINT: test support
using std::chrono::seconds;
using ::testing::HasSubstr;

const std::string kPipeline = OrdersToDayTotalsYaml();

class GovernanceTest : public E2eTest {
 protected:
  void SetUp() override {
    E2eTest::SetUp();
    Sqlite db(warehouse_);
    ASSERT_TRUE(db.error().empty()) << db.error();
    std::string sql =
        "BEGIN; CREATE TABLE raw_orders (order_id INTEGER PRIMARY KEY, "
        "order_date TEXT NOT NULL, region TEXT NOT NULL, amount REAL NOT "
        "NULL);";
    for (int day = 1; day <= 5; ++day) {
      for (int i = 0; i < 4; ++i) {
        absl::StrAppend(&sql,
                        "INSERT INTO raw_orders (order_date, region, amount) "
                        "VALUES ('",
                        absl::StrFormat("2025-01-%02d", day), "', '",
                        i % 2 ? "north" : "south", "', ", day * 10 + i, ");");
      }
    }
    sql += "COMMIT;";
    ASSERT_TRUE(db.Exec(sql)) << db.error();
    WriteFile(pipelines_dir_ + "/governance.yaml", kPipeline);
  }

  std::vector<std::vector<std::string>> State(
      const std::string& sql, const std::vector<std::string>& params = {}) {
    Sqlite db(data_dir_ + "/state.db", /*read_only=*/true);
    auto rows = db.Query(sql, params);
    EXPECT_TRUE(rows.has_value()) << db.error();
    return rows.value_or(std::vector<std::vector<std::string>>{});
  }

  void Warehouse(const std::string& sql) {
    Sqlite db(warehouse_);
    ASSERT_TRUE(db.Exec(sql)) << db.error();
  }
};

TEST_F(GovernanceTest, WhyAndAuditAfterTwoBackfillsAndARollback) {
  Daemon& d = NewDaemon();
  ASSERT_TRUE(d.Start());
  const std::string first =
      SubmitSucceeded(d, {"daily_revenue", "--from", "2025-01-01", "--to",
                          "2025-01-04", "--reason", "initial load", "--ticket",
                          "T-1", "--requested-by", "alice"});
  ASSERT_FALSE(first.empty());
  Warehouse(
      "UPDATE raw_orders SET amount = amount + 1 WHERE order_date = "
      "'2025-01-02'");
  const std::string second = SubmitSucceeded(
      d, {"daily_revenue", "--partitions", "2025-01-02", "--reason",
          "late orders", "--ticket", "T-2", "--requested-by", "bob"});
  ASSERT_FALSE(second.empty());
  RunResult rb = d.Ctl(
      {"rollback", second, "--reason", "wrong fix", "--requested-by", "carol"});
  ASSERT_EQ(rb.exit_code, 0) << rb;

  // The versions lineage holds, newest first, from plain SQL.
  auto expected = State(
      "SELECT l.job_id, CASE l.action WHEN 'publish' THEN "
      "'VERSION_KIND_BACKFILL' ELSE 'VERSION_KIND_ROLLBACK' END, j.state, "
      "l.reason, l.ticket, l.requested_by, "
      "l.transform_version, l.row_count, l.output_fingerprint FROM lineage l "
      "JOIN jobs j ON j.id = l.job_id WHERE l.dataset = 'daily_revenue' AND "
      "l.\"partition\" = '2025-01-02' ORDER BY l.published_at DESC, l.id DESC");
  ASSERT_EQ(expected.size(), 3u);

  RunResult why = d.CtlJson({"why", "daily_revenue", "2025-01-02"});
  ASSERT_EQ(why.exit_code, 0) << why;
  v1::ExplainPartitionResponse history;
  ASSERT_TRUE(
      google::protobuf::util::JsonStringToMessage(why.out, &history).ok())
      << why.out;
  ASSERT_EQ(history.versions_size(), 3) << why.out;
  for (int i = 0; i < 3; ++i) {
    const v1::PartitionVersion& v = history.versions(i);
    std::vector<std::string> got = {
        v.backfill_id(),
        v1::VersionKind_Name(v.kind()),
        std::string(absl::StripPrefix(v1::BackfillState_Name(v.state()),
                                      "BACKFILL_STATE_")),
        v.reason(),
        v.ticket(),
        v.requested_by(),
        v.transform_version(),
        absl::StrCat(v.rows()),
        v.output_fingerprint()};
    EXPECT_EQ(got, expected[i]) << "version " << i;
  }
  // The job ids and kinds as the test ran them.
  EXPECT_EQ(history.versions(0).backfill_id(), second);
  EXPECT_EQ(history.versions(0).kind(), v1::VERSION_KIND_ROLLBACK);
  EXPECT_EQ(history.versions(0).requested_by(), "carol");
  EXPECT_EQ(history.versions(1).backfill_id(), second);
  EXPECT_EQ(history.versions(1).state(), v1::BACKFILL_STATE_ROLLED_BACK);
  EXPECT_EQ(history.versions(2).backfill_id(), first);
  EXPECT_EQ(history.versions(2).requested_by(), "alice");
  // The second backfill's inputs and diff: the day's 4 orders read, the two
  // region rows changed by +2 revenue each (one order of each region
  // had +1).
  const v1::PartitionVersion& changed = history.versions(1);
  ASSERT_EQ(changed.inputs_size(), 1);
  EXPECT_EQ(changed.inputs(0).dataset(), "orders");
  EXPECT_EQ(changed.inputs(0).partition(), "2025-01-02");
  EXPECT_EQ(changed.inputs(0).rows(), 4);
  ASSERT_TRUE(changed.has_diff());
  EXPECT_EQ(changed.diff().changed(), 2);
  EXPECT_EQ(changed.diff().added(), 0);
  EXPECT_EQ(changed.diff().removed(), 0);
  bool revenue_seen = false;
  for (const v1::MeasureDelta& m : changed.diff().measures()) {
    if (m.column() == "revenue") {
      revenue_seen = true;
      EXPECT_DOUBLE_EQ(m.delta(), 4.0);
    }
  }
  EXPECT_TRUE(revenue_seen) << why.out;
  EXPECT_FALSE(history.stale());

  // The text form names the jobs, newest first.
  RunResult text = d.Ctl({"why", "daily_revenue", "2025-01-02"});
  ASSERT_EQ(text.exit_code, 0) << text;
  EXPECT_THAT(text.out, HasSubstr("3 versions, newest first"));
  EXPECT_LT(text.out.find("#1"), text.out.find("#3"));
  EXPECT_THAT(text.out, HasSubstr("late orders"));
  std::printf("%s\n", text.out.c_str());  // a sample, in the test log

  // audit --job: one JSON object per line, oldest first, as state.db has.
  auto events = State(
      "SELECT seq, from_state, to_state, message FROM audit_events WHERE "
      "job_id = ?1 ORDER BY seq",
      {second});
  ASSERT_GE(events.size(), 5u);
  RunResult audit = d.Ctl({"audit", "--job", second});
  ASSERT_EQ(audit.exit_code, 0) << audit;
  std::istringstream lines(audit.out);
  std::string line;
  size_t n = 0;
  while (std::getline(lines, line)) {
    ASSERT_LT(n, events.size()) << audit.out;
    v1::AuditEvent e;
    ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(line, &e).ok())
        << line;
    EXPECT_THAT(line, HasSubstr("\"backfill_id\":"));  // proto field names
    EXPECT_EQ(absl::StrCat(e.seq()), events[n][0]);
    EXPECT_EQ(e.backfill_id(), second);
    const std::string from =
        events[n][1].empty() ? "BACKFILL_STATE_UNSPECIFIED"
                             : absl::StrCat("BACKFILL_STATE_", events[n][1]);
    EXPECT_EQ(v1::BackfillState_Name(e.from_state()), from);
    EXPECT_EQ(v1::BackfillState_Name(e.to_state()),
              absl::StrCat("BACKFILL_STATE_", events[n][2]));
    EXPECT_EQ(e.message(), events[n][3]);
    ++n;
  }
  EXPECT_EQ(n, events.size());

  // --since far in the future selects nothing; an unknown job is NOT_FOUND;
  // a malformed time is a usage error.
  RunResult none = d.Ctl({"audit", "--since", "9999-01-01T00:00:00Z"});
  EXPECT_EQ(none.exit_code, 0) << none;
  EXPECT_EQ(none.out, "");
  RunResult unknown = d.Ctl({"audit", "--job", "bf-999"});
  EXPECT_EQ(unknown.exit_code, 1) << unknown;
  EXPECT_THAT(unknown.err, HasSubstr("bf-999"));
  RunResult bad_time = d.Ctl({"audit", "--since", "yesterday"});
  EXPECT_EQ(bad_time.exit_code, 2) << bad_time;
  EXPECT_THAT(bad_time.err, HasSubstr("RFC 3339"));

  // Every event of the store, all pages.
  auto all = State("SELECT COUNT(*) FROM audit_events");
  RunResult everything = d.Ctl({"audit"});
  ASSERT_EQ(everything.exit_code, 0) << everything;
  EXPECT_EQ(absl::StrCat(
                std::count(everything.out.begin(), everything.out.end(), '\n')),
            all[0][0]);
}

TEST_F(GovernanceTest, WhyRefusesUnknownDatasetAndMalformedPartition) {
  Daemon& d = NewDaemon();
  ASSERT_TRUE(d.Start());
  RunResult unknown = d.Ctl({"why", "no_such", "2025-01-01"});
  EXPECT_EQ(unknown.exit_code, 1) << unknown;
  EXPECT_THAT(unknown.err, HasSubstr("NOT_FOUND"));
  EXPECT_THAT(unknown.err, HasSubstr("no_such"));
  RunResult bad = d.Ctl({"why", "daily_revenue", "2025-13-01"});
  EXPECT_EQ(bad.exit_code, 1) << bad;
  EXPECT_THAT(bad.err, HasSubstr("INVALID_ARGUMENT"));
  EXPECT_THAT(bad.err, HasSubstr("YYYY-MM-DD"));
  RunResult never = d.Ctl({"why", "daily_revenue", "2025-01-01"});
  EXPECT_EQ(never.exit_code, 0) << never;
  EXPECT_THAT(never.out, HasSubstr("never published"));
}

TEST_F(GovernanceTest, NoDownstreamLeavesDependentsStaleInAutoWhyAndMetric) {
  Daemon& d = NewDaemon();
  ASSERT_TRUE(d.Start());
  ASSERT_FALSE(SubmitSucceeded(d, {"daily_revenue", "--from", "2025-01-01",
                                   "--to", "2025-01-06", "--reason", "load"})
                   .empty());
  // Two days change; only daily_revenue is recomputed.
  Warehouse(
      "UPDATE raw_orders SET amount = amount * 2 WHERE order_date IN "
      "('2025-01-02', '2025-01-04')");
  const std::string narrow = SubmitSucceeded(
      d, {"daily_revenue", "--partitions", "2025-01-02,2025-01-04",
          "--no-downstream", "--reason", "refunds fixed"});
  ASSERT_FALSE(narrow.empty());
  // The stale days, independently: day_totals partitions whose recorded
  // daily_revenue input differs from daily_revenue's newest lineage.
  auto stale_days = State(
      "SELECT DISTINCT t.\"partition\" FROM lineage t JOIN lineage u ON "
      "u.dataset = 'daily_revenue' AND u.\"partition\" = t.\"partition\" AND "
      "u.job_id = ?1 WHERE t.dataset = 'day_totals' ORDER BY 1",
      {narrow});
  ASSERT_EQ(stale_days.size(), 2u);

  // plan --auto names the job that replaced the input.
  RunResult plan = d.CtlJson({"plan", "day_totals", "--auto"});
  ASSERT_EQ(plan.exit_code, 0) << plan;
  v1::PlanBackfillResponse p;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(plan.out, &p).ok());
  ASSERT_GE(p.datasets_size(), 1);
  ASSERT_EQ(p.datasets(0).dataset(), "day_totals");
  ASSERT_EQ(p.datasets(0).partitions_size(), 2) << plan.out;
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(p.datasets(0).partitions(i), stale_days[i][0]);
    EXPECT_EQ(p.datasets(0).partition_reasons(i),
              absl::StrCat("input daily_revenue/", stale_days[i][0],
                           " changed: republished by ", narrow,
                           " with `exclude_downstream`"));
  }

  // why says so.
  RunResult why = d.CtlJson({"why", "day_totals", stale_days[0][0]});
  ASSERT_EQ(why.exit_code, 0) << why;
  v1::ExplainPartitionResponse history;
  ASSERT_TRUE(
      google::protobuf::util::JsonStringToMessage(why.out, &history).ok());
  EXPECT_TRUE(history.stale());
  ASSERT_EQ(history.stale_inputs_size(), 1);
  EXPECT_EQ(history.stale_inputs(0).backfill_id(), narrow);
  EXPECT_TRUE(history.stale_inputs(0).excluded_downstream());
  RunResult fresh = d.CtlJson({"why", "day_totals", "2025-01-01"});
  ASSERT_EQ(fresh.exit_code, 0) << fresh;
  EXPECT_THAT(fresh.out, HasSubstr("\"stale\": false"));

  // The gauge, per dataset.
  std::string scrape = HttpGet(d.metrics_port(), "/metrics");
  EXPECT_THAT(scrape,
              HasSubstr("backfill_stale_partitions{dataset=\"day_totals\"} 2"));
  EXPECT_THAT(
      scrape,
      HasSubstr("backfill_stale_partitions{dataset=\"daily_revenue\"} 0"));

  // Recomputing them (with --auto) clears it everywhere.
  ASSERT_FALSE(
      SubmitSucceeded(d, {"day_totals", "--auto", "--reason", "catch up"})
          .empty());
  scrape = HttpGet(d.metrics_port(), "/metrics");
  EXPECT_THAT(scrape,
              HasSubstr("backfill_stale_partitions{dataset=\"day_totals\"} 0"));
  RunResult after = d.CtlJson({"why", "day_totals", stale_days[0][0]});
  EXPECT_THAT(after.out, HasSubstr("\"stale\": false"));
}

}  // namespace
}  // namespace e2e_governance_test
}  // namespace backfill
