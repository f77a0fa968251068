// End-to-end tests of `--affected-by "DATASET: PREDICATE"` with the real
// backfilld and backfillctl: the plan lists exactly the days that plain SQL
// finds refunds on, a submit recomputes exactly those days (and their
// dependents) while every other day stays byte-identical, and bad
// predicates are refused before anything is created.

#include <regex>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/e2e_support.h"
#include "tests/testing/token_file.h"

namespace backfill {
namespace e2e_affected_by_test {
namespace {

using namespace ::backfill::e2e;  // NOLINT: test support
using std::chrono::seconds;
using ::testing::HasSubstr;

class AffectedByE2eTest : public E2eTest {
 protected:
  void SetUp() override {
    E2eTest::SetUp();
    ASSERT_NO_FATAL_FAILURE(WriteWarehouse(warehouse_, /*days=*/30,
                                           /*orders_per_day=*/40));
    ASSERT_NO_FATAL_FAILURE(
        WriteFile(pipelines_dir_ + "/e2e.yaml",
                  PipelineYaml(false, fixtures::RevenueDependentsYaml())));
  }

  // Plain SQL over the raw table.
  std::vector<std::string> DaysWhere(const std::string& condition) {
    Sqlite db(warehouse_, /*read_only=*/true);
    auto rows = db.Query(
        absl::StrCat("SELECT DISTINCT order_date FROM raw_orders WHERE ",
                     condition, " ORDER BY 1"));
    EXPECT_TRUE(rows.has_value()) << db.error();
    std::vector<std::string> days;
    for (const auto& r : rows.value_or(Rows{})) days.push_back(r[0]);
    return days;
  }

  // Every row of a published table with its values SQL-quoted (storage
  // types included), in order, by partition ("" for region_totals).
  std::map<std::string, std::vector<std::string>> Dump(
      const std::string& table) {
    Sqlite db(warehouse_, /*read_only=*/true);
    const bool by_day = table != "region_totals";
    auto rows = db.Query(
        by_day ? absl::StrCat("SELECT ds, quote(ds) || '|' || ",
                              table == "daily_total"
                                  ? "quote(revenue)"
                                  : "quote(region) || '|' || quote(revenue) "
                                    "|| '|' || quote(orders)",
                              " FROM ", table, " ORDER BY 1, 2")
               : "SELECT '', quote(region) || '|' || quote(revenue) FROM "
                 "region_totals ORDER BY 2");
    EXPECT_TRUE(rows.has_value()) << db.error();
    std::map<std::string, std::vector<std::string>> out;
    for (const auto& r : rows.value_or(Rows{})) out[r[0]].push_back(r[1]);
    return out;
  }

  // The partitions of `dataset` in a plan printed with --json.
  static std::vector<std::string> PlannedPartitions(
      const std::string& json, const std::string& dataset) {
    const std::regex entry("\"dataset\"\\s*:\\s*\"" + dataset +
                           "\"[^\\]]*?\"partitions\"\\s*:\\s*\\[([^\\]]*)\\]");
    std::smatch m;
    if (!std::regex_search(json, m, entry)) return {};
    std::vector<std::string> out;
    for (absl::string_view item : absl::StrSplit(m[1].str(), ',')) {
      item = absl::StripAsciiWhitespace(item);
      if (absl::ConsumePrefix(&item, "\"") &&
          absl::ConsumeSuffix(&item, "\"")) {
        out.emplace_back(item);
      }
    }
    return out;
  }
};

TEST_F(AffectedByE2eTest, PlanAndSubmitRecomputeExactlyTheRefundDays) {
  Daemon& daemon = NewDaemon();
  ASSERT_TRUE(daemon.Start());
  RunResult load =
      daemon.CtlJson({"submit", "daily_revenue", "--from", "2025-01-01", "--to",
                      "2025-01-31", "--reason", "initial load", "--wait"});
  ASSERT_EQ(load.exit_code, 0) << load;

  const std::vector<std::string> refund_days = DaysWhere("refund > 0");
  // The fixture refunds on some days only (every third day at most).
  ASSERT_GE(refund_days.size(), 5u);
  ASSERT_LE(refund_days.size(), 10u);

  RunResult plan = daemon.CtlJson(
      {"plan", "daily_revenue", "--affected-by", "orders: refund > 0"});
  ASSERT_EQ(plan.exit_code, 0) << plan;
  EXPECT_EQ(PlannedPartitions(plan.out, "daily_revenue"), refund_days)
      << plan.out;
  EXPECT_EQ(PlannedPartitions(plan.out, "daily_total"), refund_days)
      << plan.out;
  // Protobuf JSON writes '>' as \u003e.
  EXPECT_THAT(absl::StrReplaceAll(plan.out, {{"\\u003e", ">"}}),
              HasSubstr("\"requested: affected by orders: refund > 0\""));

  RunResult human = daemon.Ctl(
      {"plan", "daily_revenue", "--affected-by", "orders: refund > 0"});
  ASSERT_EQ(human.exit_code, 0) << human;
  EXPECT_THAT(human.out,
              HasSubstr("requested: affected by orders: refund > 0"));
  // daily_revenue and daily_total by day, region_totals once.
  EXPECT_THAT(human.out,
              HasSubstr(absl::StrCat("Plan: ", 2 * refund_days.size() + 1,
                                     " partitions in 3 datasets")));

  // Every day's raw orders change; only the refund days may be recomputed.
  const auto revenue_before = Dump("daily_revenue");
  const auto total_before = Dump("daily_total");
  ASSERT_EQ(revenue_before.size(), 30u);
  {
    Sqlite db(warehouse_);
    ASSERT_TRUE(db.Exec("UPDATE raw_orders SET amount = amount + 1000"))
        << db.error();
  }
  RunResult submit = daemon.CtlJson({"submit", "daily_revenue", "--affected-by",
                                     "orders: refund > 0", "--reason",
                                     "revenue ignored refunds", "--wait"});
  ASSERT_EQ(submit.exit_code, 0) << submit;
  EXPECT_EQ(JsonString(submit.out, "state"), "BACKFILL_STATE_SUCCEEDED");
  EXPECT_EQ(JsonString(submit.out, "affected_by"), "orders: refund \\u003e 0");
  const std::string job = JsonString(submit.out, "id");

  // Lineage: exactly the refund days.
  std::set<std::string> lineage_days;
  for (const auto& [day, n] : LineageCounts(job)) {
    EXPECT_EQ(n, 1) << day;
    lineage_days.insert(day);
  }
  EXPECT_EQ(lineage_days,
            std::set<std::string>(refund_days.begin(), refund_days.end()));

  // The refund days hold what plain SQL computes now; every other day is
  // byte-identical to before.
  const std::set<std::string> recomputed(refund_days.begin(),
                                         refund_days.end());
  const auto revenue_after = Dump("daily_revenue");
  const auto total_after = Dump("daily_total");
  ASSERT_EQ(revenue_after.size(), 30u);
  for (const auto& [day, rows] : revenue_before) {
    SCOPED_TRACE(day);
    if (recomputed.count(day)) {
      EXPECT_NE(revenue_after.at(day), rows);
      Rows want = ExpectedRevenue(warehouse_, day, day + "~");
      EXPECT_EQ(PublishedRevenue(warehouse_, day, day + "~"), want);
      EXPECT_NE(total_after.at(day), total_before.at(day));
    } else {
      EXPECT_EQ(revenue_after.at(day), rows);
      EXPECT_EQ(total_after.at(day), total_before.at(day));
    }
  }

  // status shows the scope.
  RunResult status = daemon.Ctl({"status", job});
  ASSERT_EQ(status.exit_code, 0) << status;
  EXPECT_THAT(status.out,
              HasSubstr("daily_revenue affected by \"orders: refund > 0\""));
  ExpectCleanSigterm(daemon);
}

TEST_F(AffectedByE2eTest, BadPredicatesAreRefusedAndCreateNothing) {
  Daemon& daemon = NewDaemon();
  ASSERT_TRUE(daemon.Start());
  struct Case {
    std::string affected_by;
    std::string says;
  };
  const std::vector<Case> cases = {
      {"orders: refund >", "\"refund >\""},
      {"orders: 1) OR (1", "\"1) OR (1\""},
      {"orders: 1; DROP TABLE raw_orders", "contains ';'"},
      {"orders: order_id IN (SELECT customer_id FROM dim_customers)",
       "reads table dim_customers"},
      {"daily_total: revenue > 0", "is not upstream of \"daily_revenue\""},
  };
  const std::vector<std::string> days_before = DaysWhere("1");
  for (const Case& c : cases) {
    SCOPED_TRACE(c.affected_by);
    for (const char* command : {"plan", "submit"}) {
      std::vector<std::string> args = {command, "daily_revenue",
                                       "--affected-by", c.affected_by};
      if (std::string(command) == "submit") {
        args.insert(args.end(), {"--reason", "r"});
      }
      RunResult r = daemon.Ctl(args);
      EXPECT_EQ(r.exit_code, 1) << r;
      EXPECT_THAT(r.err, HasSubstr("INVALID_ARGUMENT")) << r;
      EXPECT_THAT(r.err, HasSubstr(c.says)) << r;
    }
  }
  // Together with a range: refused by backfillctl before sending.
  RunResult both =
      daemon.Ctl({"plan", "daily_revenue", "--from", "2025-01-01", "--to",
                  "2025-01-02", "--affected-by", "orders: refund > 0"});
  EXPECT_EQ(both.exit_code, 2) << both;
  EXPECT_THAT(both.err, HasSubstr("--affected-by"));

  RunResult none = daemon.Ctl(
      {"plan", "daily_revenue", "--affected-by", "orders: refund > 100000"});
  EXPECT_EQ(none.exit_code, 1) << none;
  EXPECT_THAT(none.err, HasSubstr("FAILED_PRECONDITION: no partition of "
                                  "orders has a row where refund > 100000; "
                                  "nothing to backfill"));

  RunResult list = daemon.CtlJson({"list"});
  ASSERT_EQ(list.exit_code, 0) << list;
  EXPECT_EQ(CountJobs(list.out), 0) << list.out;
  EXPECT_EQ(DaysWhere("1"), days_before);
  ExpectCleanSigterm(daemon);
}

// A viewer may plan, and so send predicates: none of them may plant or
// leak a pointer through fts3_tokenizer, or make a value of any size. An
// FTS4 table as a source still plans afterwards, and the daemon stops
// cleanly: it never crashed.
TEST_F(AffectedByE2eTest, AViewerCannotCrashTheDaemonOrReadItsMemory) {
  {
    Sqlite db(warehouse_);
    ASSERT_TRUE(
        db.Exec("CREATE VIRTUAL TABLE docs_fts USING fts4(body);"
                "INSERT INTO docs_fts VALUES ('late refund'), "
                "('on time');"))
        << db.error();
  }
  WriteFile(pipelines_dir_ + "/docs.yaml",
            "datasets:\n"
            "  - name: docs\n"
            "    kind: source\n"
            "    table: docs_fts\n"
            "  - name: doc_count\n"
            "    kind: derived\n"
            "    table: doc_count\n"
            "    upstream: [{dataset: docs, mapping: all}]\n"
            "    transform: \"SELECT COUNT(*) AS n FROM docs_fts WHERE "
            "body LIKE '%refund%'\"\n"
            "    contract: {columns: {n: INTEGER}}\n");
  const std::string tokens = root_ + "/tokens.yaml";
  constexpr char kViewer[] = "vera-viewer-token-0123456789";
  constexpr char kOperator[] = "olivia-operator-token-0123456789";
  WriteFile(tokens,
            testing::TokenFileText({{"vera", "viewer", kViewer},
                                    {"olivia", "operator", kOperator}}));
  Daemon& daemon = NewDaemon();
  daemon.set_extra_args({"--auth-tokens", tokens});
  daemon.set_ctl_token(kViewer);
  ASSERT_TRUE(daemon.Start());
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"orders: fts3_tokenizer('simple', x'4141414141414141') IS NOT NULL",
       "calls fts3_tokenizer, which is not on the allow-list"},
      {"orders: substr(hex(fts3_tokenizer('simple')),1,1)='6'",
       "calls fts3_tokenizer, which is not on the allow-list"},
      {"orders: length(hex(zeroblob(450000000))) > 0",
       "calls zeroblob, which is not on the allow-list"},
      {"orders: length(replace(printf('%.*c', 4000000, 'x'), 'x', 'xx')) > 0",
       "made a value larger than"},
  };
  for (const auto& [affected_by, says] : cases) {
    SCOPED_TRACE(affected_by);
    RunResult r =
        daemon.Ctl({"plan", "daily_revenue", "--affected-by", affected_by});
    EXPECT_EQ(r.exit_code, 1) << r;
    EXPECT_THAT(r.err, HasSubstr("INVALID_ARGUMENT")) << r;
    EXPECT_THAT(r.err, HasSubstr(says)) << r;
  }
  // The FTS table answers as before: planned (its rows counted) by a
  // viewer, then computed by an operator.
  RunResult plan = daemon.Ctl({"plan", "doc_count"});
  EXPECT_EQ(plan.exit_code, 0) << plan;
  daemon.set_ctl_token(kOperator);
  RunResult run = daemon.CtlJson(
      {"submit", "doc_count", "--reason", "count", "--wait"}, seconds(120));
  EXPECT_EQ(run.exit_code, 0) << run;
  Sqlite db(warehouse_, /*read_only=*/true);
  auto n = db.Query("SELECT n FROM doc_count");
  ASSERT_TRUE(n.has_value()) << db.error();
  EXPECT_EQ(*n, (Rows{{"1"}}));
  ExpectCleanSigterm(daemon);
}

}  // namespace
}  // namespace e2e_affected_by_test
}  // namespace backfill
