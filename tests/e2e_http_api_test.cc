// End-to-end: the HTTP/JSON API of the real daemon (--http-listen). The
// curl examples of docs/api.md ("### Examples") run as they stand, with
// bash and curl, against a daemon on the e2e warehouse whose daily_revenue
// requires approval: plan, submit, wait for approval, diff, approve, watch
// to the end, lineage, list, audit. What was published is then checked
// against plain SQL over the raw tables.

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/e2e_support.h"

namespace backfill {
namespace e2e_http_api_test {
namespace {

using namespace ::backfill::e2e;  // NOLINT: test support
using std::chrono::seconds;

// The first ```sh block after `heading` in `markdown`.
std::string ShellBlockAfter(const std::string& markdown,
                            const std::string& heading) {
  const size_t at = markdown.find(heading);
  if (at == std::string::npos) return "";
  const size_t open = markdown.find("```sh\n", at);
  if (open == std::string::npos) return "";
  const size_t start = open + 6;
  const size_t close = markdown.find("```", start);
  if (close == std::string::npos) return "";
  return markdown.substr(start, close - start);
}

class HttpApiExamplesTest : public E2eTest {};

TEST_F(HttpApiExamplesTest, TheCurlExamplesOfTheApiReferenceRunAsTheyStand) {
  ASSERT_NO_FATAL_FAILURE(Prepare(/*days=*/10, /*orders_per_day=*/20, false));
  // The examples approve: daily_revenue waits for approval here.
  ASSERT_NO_FATAL_FAILURE(RequireApprovalOfDailyRevenue());

  const int http_port = FreePort();
  Daemon& daemon = NewDaemon();
  daemon.set_extra_args(
      {"--http-listen", absl::StrCat("127.0.0.1:", http_port)});
  ASSERT_TRUE(daemon.Start());

  const std::string doc =
      ReadFile(absl::StrCat(BACKFILL_SOURCE_DIR, "/docs/api.md"));
  std::string block = ShellBlockAfter(doc, "### Examples");
  ASSERT_FALSE(block.empty()) << "no ```sh block after ### Examples";
  const std::string base = "B=http://127.0.0.1:8080";
  ASSERT_TRUE(absl::StrContains(block, base)) << block;
  absl::StrReplaceAll({{base, absl::StrCat("B=http://127.0.0.1:", http_port)}},
                      &block);
  // Each call must succeed (an HTTP error fails the script), and none may
  // hang.
  const std::string script = absl::StrCat(
      "set -euo pipefail\n",
      "curl() { command curl --fail-with-body --max-time 120 \"$@\"; }\n",
      block);
  ASSERT_NO_FATAL_FAILURE(WriteFile(root_ + "/examples.sh", script));
  RunResult run =
      RunProcess({"/bin/bash", root_ + "/examples.sh"}, root_, seconds(240));
  ASSERT_EQ(run.exit_code, 0) << run;
  // The plan, the job, the approval and the end of the watch, as JSON.
  EXPECT_THAT(run.out, ::testing::HasSubstr(R"("partitionCount":"3")"));
  EXPECT_THAT(run.out, ::testing::HasSubstr(R"("id":"bf-1")"));
  EXPECT_THAT(run.out,
              ::testing::HasSubstr(R"("state":"BACKFILL_STATE_SUCCEEDED")"));
  EXPECT_THAT(run.out, ::testing::HasSubstr("totals checked"));
  // The dataset's three published partitions, none stale.
  EXPECT_THAT(run.out,
              ::testing::HasSubstr(
                  R"({"dataset":"daily_revenue","total":"3","current":"3")"));
  EXPECT_EQ(PublishedRevenue(warehouse_, "2025-01-03", "2025-01-06"),
            ExpectedRevenue(warehouse_, "2025-01-03", "2025-01-06"));
  // Nothing outside the scope was published.
  EXPECT_TRUE(PublishedRevenue(warehouse_, "2025-01-01", "2025-01-03").empty());
  EXPECT_TRUE(PublishedRevenue(warehouse_, "2025-01-06", "2025-01-11").empty());
}

}  // namespace
}  // namespace e2e_http_api_test
}  // namespace backfill
