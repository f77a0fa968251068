// End-to-end: the console (server/console/, served under /ui/) in a real
// headless Chromium against the real daemon with tokens. A backfill of
// daily_revenue (which requires approval here) is submitted with backfillctl
// by an operator and waits for approval; tests/browser/console_test.mjs
// (puppeteer-core driving Debian's /usr/bin/chromium, see
// tests/browser/README.md) then signs in as a viewer (the job, its
// partition grid of one cell per partition, no decision offered, an
// approval from the page refused 403 ROLE_REQUIRED, a partition's panel,
// the datasets and plan pages), signs out, signs in as an approver and
// approves with the keyboard; the job ends SUCCEEDED, with no console
// error, no uncaught exception and no request to another origin. What was
// published is then checked against plain SQL over the raw tables.
//
// Needs node, chromium and tests/browser/node_modules (`npm ci` in
// tests/browser). Screenshots go to $BACKFILL_CONSOLE_SHOTS when set, else
// into the test's temporary directory (kept when the test fails).

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "backfill/v1/backfill.pb.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tests/testing/e2e_support.h"
#include "tests/testing/token_file.h"

namespace backfill {
namespace e2e_console_browser_test {
namespace {

using namespace ::backfill::e2e;  // NOLINT: test support
namespace fs = std::filesystem;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr const char* kVera = "vera-console-5d2c8e1a7f3b9046";    // viewer
constexpr const char* kApril = "april-console-91e4b7c2d0a63f58";  // approver
constexpr const char* kOtto = "otto-console-3a7f0c9e5b1d2864";    // operator

// The job's scope: [kFrom, kTo) of the 10 days the warehouse holds.
constexpr const char* kFrom = "2025-01-03";
constexpr const char* kTo = "2025-01-07";

// An executable `name` on $PATH; "" when there is none.
std::string OnPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  for (absl::string_view dir :
       absl::StrSplit(path != nullptr ? path : "/usr/bin:/bin", ':')) {
    if (dir.empty()) continue;
    const std::string candidate = absl::StrCat(dir, "/", name);
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

class ConsoleBrowserTest : public E2eTest {
 protected:
  std::string WriteTokens() {
    const std::string path = root_ + "/tokens.yaml";
    WriteFile(path, testing::TokenFileText({{"vera", "viewer", kVera},
                                            {"april", "approver", kApril},
                                            {"otto", "operator", kOtto}}));
    return path;
  }

  // The job as `backfillctl --json status`, parsed; fails the test when it
  // cannot be read.
  v1::Backfill Status(const Daemon& daemon, const std::string& job) {
    v1::Backfill backfill;
    RunResult r = daemon.CtlJson({"status", job}, seconds(60));
    EXPECT_EQ(r.exit_code, 0) << r;
    const auto parsed =
        google::protobuf::util::JsonStringToMessage(r.out, &backfill);
    EXPECT_TRUE(parsed.ok()) << parsed << "\n" << r;
    return backfill;
  }

  // The distinct days published in daily_revenue.
  std::vector<std::string> PublishedDays() {
    Sqlite db(warehouse_, /*read_only=*/true);
    auto rows = db.Query("SELECT DISTINCT ds FROM daily_revenue ORDER BY 1");
    EXPECT_TRUE(rows.has_value()) << db.error();
    std::vector<std::string> days;
    for (const auto& row : rows.value_or(Rows{})) days.push_back(row[0]);
    return days;
  }
};

TEST_F(ConsoleBrowserTest, AViewerLooksAndAnApproverApprovesInARealBrowser) {
  // What the browser test needs, said plainly when missing.
  const std::string browser_dir =
      absl::StrCat(BACKFILL_SOURCE_DIR, "/tests/browser");
  const std::string node = OnPath("node");
  ASSERT_FALSE(node.empty())
      << "node is not on $PATH: the console's browser test needs Node 18 or "
         "later (scripts/install-deps.sh installs it)";
  const char* chromium_env = std::getenv("BACKFILL_CHROMIUM");
  const std::string chromium = chromium_env != nullptr && *chromium_env
                                   ? chromium_env
                                   : "/usr/bin/chromium";
  ASSERT_EQ(access(chromium.c_str(), X_OK), 0)
      << chromium
      << " is missing: the console's browser test runs Debian's chromium "
         "(scripts/install-deps.sh installs it; or set $BACKFILL_CHROMIUM)";
  ASSERT_TRUE(fs::exists(browser_dir + "/node_modules/puppeteer-core"))
      << browser_dir
      << "/node_modules/puppeteer-core is missing: run `npm ci` in "
         "tests/browser (see tests/browser/README.md)";

  ASSERT_NO_FATAL_FAILURE(Prepare(/*days=*/10, /*orders_per_day=*/20, false));
  // The job waits for approval: daily_revenue requires it here.
  ASSERT_NO_FATAL_FAILURE(RequireApprovalOfDailyRevenue());

  const std::string tokens = WriteTokens();
  const int http_port = FreePort();
  Daemon& daemon = NewDaemon();
  daemon.set_extra_args({"--http-listen", absl::StrCat("127.0.0.1:", http_port),
                         "--auth-tokens", tokens});
  daemon.set_ctl_token(kOtto);
  ASSERT_TRUE(daemon.Start());

  // The operator submits; the job stages its partitions and waits.
  RunResult submit = daemon.CtlJson(
      {"submit", "daily_revenue", "--from", kFrom, "--to", kTo, "--reason",
       "refunds were double-counted", "--ticket", "INC-7741"},
      seconds(120));
  ASSERT_EQ(submit.exit_code, 0) << submit;
  const std::string job = JsonString(submit.out, "id");
  ASSERT_EQ(job, "bf-1") << submit;
  v1::Backfill backfill;
  const auto deadline = Clock::now() + seconds(180);
  while (Clock::now() < deadline) {
    backfill = Status(daemon, job);
    if (backfill.state() == v1::BACKFILL_STATE_AWAITING_APPROVAL ||
        IsTerminalState(v1::BackfillState_Name(backfill.state()))) {
      break;
    }
    std::this_thread::sleep_for(milliseconds(250));
  }
  ASSERT_EQ(backfill.state(), v1::BACKFILL_STATE_AWAITING_APPROVAL)
      << backfill.DebugString();
  EXPECT_THAT(backfill.request().requested_by(), ::testing::StartsWith("otto"));

  // N: one cell per partition per dataset of the job.
  const int64_t partitions = backfill.partitions().total();
  int64_t planned = 0;
  for (const v1::DatasetPlan& plan : backfill.plan()) {
    planned += plan.partitions_size();
  }
  ASSERT_GT(partitions, 0) << backfill.DebugString();
  ASSERT_EQ(partitions, planned) << backfill.DebugString();
  const std::vector<std::string> job_days = {"2025-01-03", "2025-01-04",
                                             "2025-01-05", "2025-01-06"};
  ASSERT_EQ(backfill.plan_size(), 1) << backfill.DebugString();
  EXPECT_EQ(backfill.plan(0).dataset(), "daily_revenue");
  EXPECT_THAT(backfill.plan(0).partitions(),
              ::testing::ElementsAreArray(job_days));

  const char* shots_env = std::getenv("BACKFILL_CONSOLE_SHOTS");
  const std::string shots =
      shots_env != nullptr && *shots_env ? shots_env : root_ + "/shots";
  const std::string url = absl::StrCat("http://127.0.0.1:", http_port, "/ui/");
  // /usr/bin/env -C: the script runs in tests/browser, as its README shows.
  RunResult browser = RunProcess(
      {"/usr/bin/env", "-C", browser_dir, node, "console_test.mjs", "--url",
       url, "--job", job, "--viewer-token", kVera, "--approver-token", kApril,
       "--expect-partitions", std::to_string(partitions), "--shots", shots,
       "--timeout-seconds", "270"},
      root_, seconds(300));
  EXPECT_EQ(browser.exit_code, 0)
      << browser << "\nscreenshots: " << shots << "\nthe HTTP port: " << url;
  EXPECT_FALSE(browser.timed_out) << browser;
  // A line per check; the last says they all passed.
  EXPECT_THAT(browser.out, ::testing::HasSubstr("checks passed")) << browser;
  std::printf("%s", browser.out.c_str());
  std::printf("screenshots: %s%s\n", shots.c_str(),
              shots_env != nullptr && *shots_env
                  ? ""
                  : " (removed with the test's directory when the test "
                    "passes; set BACKFILL_CONSOLE_SHOTS=DIR to keep them)");

  // The approval given in the browser published the job's days, and only
  // them, as plain SQL computes them.
  backfill = Status(daemon, job);
  EXPECT_EQ(backfill.state(), v1::BACKFILL_STATE_SUCCEEDED)
      << backfill.DebugString();
  EXPECT_EQ(backfill.approval().approved_by(), "april")
      << backfill.DebugString();
  EXPECT_EQ(PublishedDays(), job_days);
  const Rows published = PublishedRevenue(warehouse_, kFrom, kTo);
  EXPECT_FALSE(published.empty());
  EXPECT_EQ(published, ExpectedRevenue(warehouse_, kFrom, kTo));
  EXPECT_TRUE(PublishedRevenue(warehouse_, "2025-01-01", kFrom).empty());
  EXPECT_TRUE(PublishedRevenue(warehouse_, kTo, "2025-01-11").empty());
  std::map<std::string, int> lineage = LineageCounts(job);
  std::vector<std::string> lineage_days;
  for (const auto& [day, count] : lineage) {
    EXPECT_EQ(count, 1) << day;
    lineage_days.push_back(day);
  }
  EXPECT_EQ(lineage_days, job_days);
  ASSERT_NO_FATAL_FAILURE(ExpectCleanSigterm(daemon));
}

}  // namespace
}  // namespace e2e_console_browser_test
}  // namespace backfill
