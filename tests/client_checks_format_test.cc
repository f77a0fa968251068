// Tests of how backfillctl shows a job's validation check results: counts
// per severity, each failing result with what was allowed and sample rows,
// "and N more" for failing partitions beyond those shown or stored, escaped
// server text, and nothing without results; WaitsForOperator for --wait.

#include <string>

#include "backfill/v1/backfill.pb.h"
#include "client/job_format.h"
#include "client/value_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace backfill {
namespace cli {
namespace client_checks_format_test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

v1::CheckResult Result(const std::string& name, v1::CheckSeverity severity,
                       bool passed, const std::string& partition = "",
                       bool summary = false) {
  v1::CheckResult r;
  r.set_name(name);
  r.set_kind(name);
  r.set_severity(severity);
  r.set_dataset("daily_revenue");
  r.set_partition(partition);
  r.set_passed(passed);
  r.set_summary(summary);
  r.set_message(passed ? "" : "staged 1 row where 4 are published");
  r.set_allowed("a change of at most 20%");
  return r;
}

TEST(FormatChecksTest, NothingWithoutResults) {
  v1::Backfill job;
  EXPECT_EQ(FormatChecks(job), "");
  EXPECT_THAT(FormatBackfill(job), Not(HasSubstr("Checks")));
}

TEST(FormatChecksTest, CountsAndFailingResultsBySeverity) {
  v1::Backfill job;
  *job.add_checks() = Result("schema", v1::CHECK_SEVERITY_ERROR, true);
  v1::CheckResult summary = Result("row_change", v1::CHECK_SEVERITY_ERROR,
                                   false, "", /*summary=*/true);
  summary.set_partitions_checked(300);
  summary.set_partitions_failed(150);  // 100 stored, 50 only counted
  *job.add_checks() = summary;
  for (int i = 0; i < 100; ++i) {
    v1::CheckResult r = Result("row_change", v1::CHECK_SEVERITY_ERROR, false,
                               "2025-01-" + std::to_string(10 + i % 20));
    if (i == 0) r.add_sample_rows("(ds='2025-01-10', region='\x1b[31m')");
    *job.add_checks() = r;
  }
  *job.add_checks() =
      Result("no_negative", v1::CHECK_SEVERITY_WARN, false, "2025-01-06");
  *job.add_checks() = Result("measure_change(revenue)", v1::CHECK_SEVERITY_HOLD,
                             false, "2025-01-03");
  const std::string text = FormatChecks(job);
  EXPECT_THAT(text,
              HasSubstr("4 checks: 1 passed, 1 failed, 1 held, 1 warned"));
  EXPECT_THAT(text, HasSubstr("  FAILED  row_change on daily_revenue "
                              "2025-01-10: staged 1 row where 4 are "
                              "published\n      allowed: a change of at most "
                              "20%\n      e.g. (ds='2025-01-10', region='"));
  // 10 shown, 90 stored and 50 counted only.
  EXPECT_THAT(text, HasSubstr("  FAILED  and 140 more"));
  EXPECT_THAT(text, HasSubstr("  HELD  measure_change(revenue) on "
                              "daily_revenue 2025-01-03"));
  EXPECT_THAT(text, HasSubstr("  WARNED  no_negative on daily_revenue "
                              "2025-01-06"));
  EXPECT_THAT(text, Not(HasSubstr("\x1b"))) << "server text is escaped";
  // Errors come before holds, holds before warnings.
  EXPECT_LT(text.find("FAILED"), text.find("HELD"));
  EXPECT_LT(text.find("HELD"), text.find("WARNED"));
  EXPECT_THAT(FormatBackfill(job), HasSubstr(text));
}

TEST(FormatChecksTest, FollowingStopsAtAwaitingApproval) {
  EXPECT_TRUE(WaitsForOperator(v1::BACKFILL_STATE_AWAITING_APPROVAL));
  EXPECT_TRUE(IsTerminal(v1::BACKFILL_STATE_VALIDATION_FAILED));
  EXPECT_FALSE(WaitsForOperator(v1::BACKFILL_STATE_VALIDATING));
  EXPECT_FALSE(IsTerminal(v1::BACKFILL_STATE_VALIDATING));
  EXPECT_FALSE(WaitsForOperator(v1::BACKFILL_STATE_QUEUED));
}

}  // namespace
}  // namespace client_checks_format_test
}  // namespace cli
}  // namespace backfill
