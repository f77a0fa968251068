// End-to-end: SIGHUP to the real backfilld reloads the pipelines directory
// and the token file. A dataset added to the directory is listed after the
// reload; a broken file keeps the datasets served before and the log names
// the file and line; a new token is admitted and a removed one refused; a
// broken token file keeps the tokens in force; a job running during a
// reload that changes its transform publishes what its original transform
// computes. Reloads are counted in backfill_config_reloads_total.
#include <signal.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/bearer_tokens.h"
#include "tests/testing/e2e_support.h"
#include "tests/testing/prometheus_text.h"
#include "tests/testing/token_file.h"

namespace backfill {
namespace e2e_reload_test {
namespace {

using namespace ::backfill::e2e;  // NOLINT: test support
using std::chrono::seconds;
using ::testing::HasSubstr;
using ::testing::Not;

// A derived dataset in a file of its own (it reads `orders` of e2e.yaml).
constexpr const char* kOrderCountsYaml = R"yaml(datasets:
  - name: order_counts
    kind: derived
    table: order_counts
    partition: {column: ds, grain: day}
    upstream:
      - {dataset: orders, mapping: identity}
    transform: |
      SELECT order_date AS ds, COUNT(*) AS n FROM raw_orders
      WHERE order_date >= :partition_start AND order_date < :partition_end
      GROUP BY 1
    contract:
      columns: {ds: TEXT, n: INTEGER}
      primary_key: [ds]
)yaml";

// Line 4 has a key the pipeline format does not know.
constexpr const char* kBrokenYaml = R"yaml(datasets:
  - name: broken
    kind: derived
    colour: blue
)yaml";

constexpr const char* kVera = "vera-5e0b9c1d7a3f42e8b6d1";
constexpr const char* kNina = "nina-a2c4e6f8b0d1e3f5a7c9";
constexpr const char* kAda = "ada-0f1e2d3c4b5a69788796";

class ReloadE2eTest : public E2eTest {
 protected:
  // Sends SIGHUP and waits (bounded) until the log has `n` more lines
  // containing `marker` than `before`: the reload was carried out.
  ::testing::AssertionResult HangUp(Daemon& daemon, const std::string& marker) {
    const int before = Count(ReadFile(daemon.log()), marker);
    daemon.Signal(SIGHUP);
    const auto deadline = Clock::now() + seconds(60);
    while (Clock::now() < deadline) {
      if (Count(ReadFile(daemon.log()), marker) > before) {
        return ::testing::AssertionSuccess();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return ::testing::AssertionFailure()
           << "no \"" << marker << "\" in the log 60 s after SIGHUP:\n"
           << ReadFile(daemon.log());
  }

  static int Count(const std::string& text, const std::string& what) {
    int n = 0;
    for (size_t at = text.find(what); at != std::string::npos;
         at = text.find(what, at + what.size())) {
      ++n;
    }
    return n;
  }

  double Reloads(Daemon& daemon, const std::string& kind,
                 const std::string& result) {
    const std::string scrape = HttpGet(daemon.metrics_port(), "/metrics");
    return backfill::testing::SumOf(
        backfill::testing::ParseSamples(
            scrape.substr(scrape.find("\r\n\r\n") + 4)),
        "backfill_config_reloads_total", {{"kind", kind}, {"result", result}});
  }

  std::string TokenFile(const std::vector<std::pair<std::string, std::string>>&
                            principals_and_tokens) {
    std::vector<testing::TokenGrant> grants;
    for (const auto& [principal, token] : principals_and_tokens) {
      grants.push_back({principal, "admin", token});
    }
    return testing::TokenFileText(grants);
  }

  // The transform version `datasets --json` gives daily_revenue ("" when
  // it is not listed or the output does not parse).
  static std::string RevenueVersion(const RunResult& datasets) {
    v1::ListDatasetsResponse response;
    if (!google::protobuf::util::JsonStringToMessage(datasets.out, &response)
             .ok()) {
      return "";
    }
    for (const v1::Dataset& d : response.datasets()) {
      if (d.name() == "daily_revenue") return d.transform_version();
    }
    return "";
  }

  RunResult As(const Daemon& daemon, const char* token,
               std::vector<std::string> args) {
    std::vector<std::string> argv = {"--server", daemon.address()};
    argv.insert(argv.end(), args.begin(), args.end());
    return RawCtl(argv, {absl::StrCat("BACKFILL_TOKEN=", token)});
  }
};

TEST_F(ReloadE2eTest, AddedDatasetIsServedAndABrokenFileKeepsTheOldCatalog) {
  ASSERT_NO_FATAL_FAILURE(Prepare(/*days=*/3, /*orders_per_day=*/5, false));
  Daemon& daemon = NewDaemon();
  ASSERT_TRUE(daemon.Start());
  RunResult before = daemon.CtlJson({"datasets"});
  ASSERT_EQ(before.exit_code, 0) << before;
  EXPECT_THAT(before.out, Not(HasSubstr("\"order_counts\"")));
  EXPECT_EQ(Reloads(daemon, "pipelines", "ok"), 0);

  WriteFile(pipelines_dir_ + "/order_counts.yaml", kOrderCountsYaml);
  ASSERT_TRUE(HangUp(daemon, "pipelines reloaded"));
  EXPECT_THAT(ReadFile(daemon.log()),
              HasSubstr("pipelines reloaded: 4 datasets (were 3)"));
  RunResult added = daemon.CtlJson({"datasets"});
  ASSERT_EQ(added.exit_code, 0) << added;
  EXPECT_THAT(added.out, HasSubstr("\"order_counts\""));
  EXPECT_THAT(added.out, HasSubstr("\"daily_revenue\""));
  EXPECT_EQ(Reloads(daemon, "pipelines", "ok"), 1);
  // The new dataset can be backfilled at once.
  SubmitSucceeded(daemon,
                  {"order_counts", "--from", "2025-01-01", "--to", "2025-01-03",
                   "--no-downstream"},
                  "reloaded dataset");

  WriteFile(pipelines_dir_ + "/broken.yaml", kBrokenYaml);
  ASSERT_TRUE(HangUp(daemon, "reload of the pipelines refused"));
  const std::string log = ReadFile(daemon.log());
  EXPECT_THAT(log, HasSubstr(pipelines_dir_ + "/broken.yaml:4"));
  EXPECT_THAT(log, HasSubstr("colour"));
  RunResult kept = daemon.CtlJson({"datasets"});
  ASSERT_EQ(kept.exit_code, 0) << kept;
  EXPECT_THAT(kept.out, HasSubstr("\"order_counts\""));
  EXPECT_THAT(kept.out, Not(HasSubstr("\"broken\"")));
  EXPECT_EQ(Reloads(daemon, "pipelines", "error"), 1);
  EXPECT_EQ(Reloads(daemon, "pipelines", "ok"), 1);

  ASSERT_NO_FATAL_FAILURE(ExpectCleanSigterm(daemon));
}

TEST_F(ReloadE2eTest, TokenFileReloadAdmitsNewTokensAndRefusesRemovedOnes) {
  ASSERT_NO_FATAL_FAILURE(Prepare(/*days=*/3, /*orders_per_day=*/5, false));
  const std::string tokens = root_ + "/tokens.yaml";
  WriteFile(tokens, TokenFile({{"vera", kVera}, {"ada", kAda}}));
  Daemon& daemon = NewDaemon();
  daemon.set_extra_args({"--auth-tokens", tokens});
  daemon.set_ctl_token(kAda);
  ASSERT_TRUE(daemon.Start());
  EXPECT_EQ(As(daemon, kVera, {"datasets"}).exit_code, 0);
  RunResult nina = As(daemon, kNina, {"datasets"});
  EXPECT_EQ(nina.exit_code, 1) << nina;
  EXPECT_THAT(nina.err, HasSubstr("UNAUTHENTICATED"));

  WriteFile(tokens, TokenFile({{"nina", kNina}, {"ada", kAda}}));
  ASSERT_TRUE(HangUp(daemon, "token file reloaded"));
  EXPECT_EQ(As(daemon, kNina, {"datasets"}).exit_code, 0);
  RunResult vera = As(daemon, kVera, {"datasets"});
  EXPECT_EQ(vera.exit_code, 1) << vera;
  EXPECT_THAT(vera.err, HasSubstr("UNAUTHENTICATED"));
  EXPECT_EQ(Reloads(daemon, "tokens", "ok"), 1);

  // Not a token file: the tokens in force stay.
  WriteFile(tokens, "tokens:\n  - {principal: eve, roles: [wizard]}\n");
  ASSERT_TRUE(HangUp(daemon, "reload of the token file refused"));
  EXPECT_THAT(ReadFile(daemon.log()), HasSubstr(tokens));
  EXPECT_EQ(As(daemon, kNina, {"datasets"}).exit_code, 0);
  EXPECT_EQ(As(daemon, kVera, {"datasets"}).exit_code, 1);
  EXPECT_EQ(Reloads(daemon, "tokens", "error"), 1);

  ASSERT_NO_FATAL_FAILURE(ExpectCleanSigterm(daemon));
}

TEST_F(ReloadE2eTest, RunningJobFinishesWithItsOriginalTransform) {
  constexpr int kDays = 60;
  ASSERT_NO_FATAL_FAILURE(Prepare(kDays, /*orders_per_day=*/50, true));
  Daemon& daemon = NewDaemon(/*workers=*/1);
  ASSERT_TRUE(daemon.Start());
  RunResult submit =
      daemon.CtlJson({"submit", "daily_revenue", "--from", "2025-01-01", "--to",
                      "2025-03-02", "--reason", "before the reload"});
  ASSERT_EQ(submit.exit_code, 0) << submit;
  const std::string job = JsonString(submit.out, "id");
  ASSERT_FALSE(job.empty()) << submit;
  RunResult old_datasets = daemon.CtlJson({"datasets"});
  const std::string old_version = RevenueVersion(old_datasets);
  ASSERT_FALSE(old_version.empty()) << old_datasets;

  // The same pipeline, but its transform now counts revenue a thousand
  // times over: a job of the new logic would publish other numbers.
  std::string changed = PipelineYaml(true);
  const std::string sum = "SUM(o.amount - o.refund) AS revenue";
  ASSERT_NE(changed.find(sum), std::string::npos);
  changed.replace(changed.find(sum), sum.size(),
                  "SUM(o.amount - o.refund) * 1000 AS revenue");
  WriteFile(pipelines_dir_ + "/e2e.yaml", changed);
  ASSERT_TRUE(HangUp(daemon, "pipelines reloaded"));
  RunResult during = daemon.CtlJson({"status", job});
  ASSERT_EQ(during.exit_code, 0) << during;
  ASSERT_FALSE(IsTerminalState(JsonString(during.out, "state")))
      << "the job ended before the reload; make the workload bigger:\n"
      << during;

  const std::string end = WaitTerminal(daemon, job, seconds(600));
  EXPECT_EQ(JsonString(end, "state"), "BACKFILL_STATE_SUCCEEDED") << end;
  const Rows expected = ExpectedRevenue(warehouse_, "2025-01-01", "2025-03-02");
  ASSERT_EQ(expected.size(), static_cast<size_t>(kDays) * 4u);
  EXPECT_EQ(PublishedRevenue(warehouse_, "0000", "9999"), expected);

  // New calls see the new transform.
  RunResult new_datasets = daemon.CtlJson({"datasets"});
  ASSERT_EQ(new_datasets.exit_code, 0) << new_datasets;
  const std::string new_version = RevenueVersion(new_datasets);
  EXPECT_FALSE(new_version.empty()) << new_datasets;
  EXPECT_NE(new_version, old_version);

  ASSERT_NO_FATAL_FAILURE(ExpectCleanSigterm(daemon));
}

}  // namespace
}  // namespace e2e_reload_test
}  // namespace backfill
