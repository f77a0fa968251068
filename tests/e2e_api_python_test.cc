// End-to-end: the API from another language. The Python client of
// examples/python (modules generated from the proto by its generate.sh,
// run with Debian's python3-grpcio) lists, plans, reads the details of a
// refused submit (google.rpc.Status: ErrorInfo and BadRequest) and runs a
// backfill against the real daemon; the published rows are then checked
// against plain SQL over the raw tables.

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/e2e_support.h"

namespace backfill {
namespace e2e_api_python_test {
namespace {

using namespace ::backfill::e2e;  // NOLINT: test support
using std::chrono::seconds;

constexpr char kPython[] = "/usr/bin/python3";

// The "key: value" lines of the example's output.
std::map<std::string, std::string> Facts(const std::string& out) {
  std::map<std::string, std::string> facts;
  for (absl::string_view line : absl::StrSplit(out, '\n')) {
    const size_t colon = line.find(": ");
    if (colon == absl::string_view::npos) continue;
    facts[std::string(line.substr(0, colon))] =
        std::string(absl::StripAsciiWhitespace(line.substr(colon + 2)));
  }
  return facts;
}

class PythonClientTest : public E2eTest {};

TEST_F(PythonClientTest, TheExampleClientPlansReadsErrorDetailsAndBackfills) {
  ASSERT_TRUE(fs::exists(kPython)) << kPython << " (Debian's python3)";
  ASSERT_NO_FATAL_FAILURE(Prepare(/*days=*/10, /*orders_per_day=*/20, false));
  Daemon& daemon = NewDaemon();
  ASSERT_TRUE(daemon.Start());

  const std::string examples =
      absl::StrCat(BACKFILL_SOURCE_DIR, "/examples/python");
  const std::string modules = root_ + "/py";
  RunResult generated = RunProcess(
      {"/bin/bash", examples + "/generate.sh", modules}, root_, seconds(120));
  ASSERT_EQ(generated.exit_code, 0) << generated;

  RunResult run =
      RunProcess({kPython, examples + "/backfill_example.py", "--server",
                  daemon.address(), "--dataset", "daily_revenue", "--from",
                  "2025-01-03", "--to", "2025-01-06"},
                 root_, seconds(300), "/dev/null", {"PYTHONPATH=" + modules});
  ASSERT_EQ(run.exit_code, 0) << run;
  std::map<std::string, std::string> facts = Facts(run.out);

  EXPECT_THAT(
      absl::StrSplit(facts["datasets"], ','),
      ::testing::UnorderedElementsAre("orders", "customers", "daily_revenue"));
  EXPECT_EQ(facts["grain"], "GRAIN_DAY");
  // Three days, and nothing reads daily_revenue.
  EXPECT_EQ(facts["planned_partitions"], "3");
  // The refused submit, as the details say it.
  EXPECT_EQ(facts["refused"], "INVALID_ARGUMENT");
  EXPECT_EQ(facts["reason"], "REASON_REQUIRED");
  EXPECT_EQ(facts["domain"], "backfilld");
  EXPECT_EQ(facts["fields"], "request.reason");
  // The backfill.
  EXPECT_EQ(facts["state"], "BACKFILL_STATE_SUCCEEDED");
  EXPECT_EQ(facts["published"], "3");
  EXPECT_EQ(PublishedRevenue(warehouse_, "2025-01-03", "2025-01-06"),
            ExpectedRevenue(warehouse_, "2025-01-03", "2025-01-06"));
  // Only the refused submit is missing: one job.
  RunResult list = daemon.CtlJson({"list"});
  ASSERT_EQ(list.exit_code, 0) << list;
  EXPECT_EQ(CountJobs(list.out), 1) << list.out;
}

}  // namespace
}  // namespace e2e_api_python_test
}  // namespace backfill
