// End-to-end tests: the real backfilld and backfillctl binaries from
// the build's bin/ against a warehouse the test writes itself. Every
// expectation about published data is computed by the test with plain SQL
// over the raw tables, independently of the service.
//
// Each test starts its daemons on free ports in its own temporary directory
// and kills any daemon still running in TearDown. A failing test keeps its
// directory and prints the daemons' logs.

#include <signal.h>

#include <map>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/e2e_support.h"
#include "tests/testing/prometheus_text.h"

namespace backfill {
namespace e2e_backfill_test {
namespace {

using namespace ::backfill::e2e;  // NOLINT: test support
namespace fs = std::filesystem;
using std::chrono::milliseconds;
using std::chrono::seconds;
using ::testing::HasSubstr;
using ::testing::Not;

// (a) A backfill through the CLI publishes exactly what the transform
// computes from the raw tables; (e) SIGTERM then exits 0.
TEST_F(E2eTest, SubmitWaitPublishesExactlyTheExpectedRows) {
  ASSERT_NO_FATAL_FAILURE(Prepare(/*days=*/20, /*orders_per_day=*/60, false));
  Daemon& daemon = NewDaemon();
  ASSERT_TRUE(daemon.Start());
  EXPECT_THAT(ReadFile(daemon.log()),
              HasSubstr("backfilld listening on " + daemon.address()));

  RunResult datasets = daemon.CtlJson({"datasets"});
  ASSERT_EQ(datasets.exit_code, 0) << datasets;
  EXPECT_THAT(datasets.out, HasSubstr("\"daily_revenue\""));

  RunResult submit = daemon.CtlJson(
      {"submit", "daily_revenue", "--from", "2025-01-01", "--to", "2025-01-21",
       "--reason", "e2e initial load", "--ticket", "E2E-1", "--wait"});
  ASSERT_EQ(submit.exit_code, 0) << submit;
  EXPECT_EQ(JsonString(submit.out, "state"), "BACKFILL_STATE_SUCCEEDED")
      << submit;
  const std::string job = JsonString(submit.out, "id");
  EXPECT_THAT(job, ::testing::MatchesRegex("bf-[0-9]+"));
  EXPECT_EQ(JsonInt(submit.out, "total"), 20) << submit.out;
  EXPECT_EQ(JsonInt(submit.out, "published"), 20) << submit.out;
  EXPECT_EQ(JsonInt(submit.out, "rows_written"), 20 * 4) << submit.out;

  const Rows expected = ExpectedRevenue(warehouse_, "2025-01-01", "2025-01-21");
  ASSERT_EQ(expected.size(), 20u * 4u);  // every region orders every day
  EXPECT_EQ(PublishedRevenue(warehouse_, "0000", "9999"), expected);

  const std::map<std::string, int> lineage = LineageCounts(job);
  EXPECT_EQ(lineage.size(), 20u);
  for (const auto& [partition, n] : lineage) {
    EXPECT_EQ(n, 1) << "lineage rows for " << partition;
  }

  // A second backfill of a sub-range replaces those partitions in place.
  submit = daemon.CtlJson({"submit", "daily_revenue", "--partitions",
                           "2025-01-03,2025-01-05", "--reason", "e2e again",
                           "--wait"});
  ASSERT_EQ(submit.exit_code, 0) << submit;
  EXPECT_EQ(JsonInt(submit.out, "total"), 2) << submit.out;
  EXPECT_EQ(PublishedRevenue(warehouse_, "0000", "9999"), expected);

  RunResult status = daemon.Ctl({"status", job});
  EXPECT_EQ(status.exit_code, 0) << status;
  EXPECT_THAT(status.out, HasSubstr(job));

  ExpectCleanSigterm(daemon);
}

// (b) kill -9 while partitions are staged, restart on the same data dir:
// the job resumes, finishes, publishes the expected rows and writes
// lineage exactly once per partition.
TEST_F(E2eTest, RecoversAfterKill9WithoutDoublePublish) {
  constexpr int kDays = 100;
  ASSERT_NO_FATAL_FAILURE(Prepare(kDays, /*orders_per_day=*/200, true));
  Daemon& first = NewDaemon(/*workers=*/1);
  ASSERT_TRUE(first.Start());

  RunResult submit =
      first.CtlJson({"submit", "daily_revenue", "--from", "2025-01-01", "--to",
                     "2025-04-11", "--reason", "e2e crash recovery"});
  ASSERT_EQ(submit.exit_code, 0) << submit;
  const std::string job = JsonString(submit.out, "id");
  ASSERT_THAT(job, ::testing::MatchesRegex("bf-[0-9]+")) << submit;

  // Wait until some, not all, partitions are staged.
  const auto deadline = Clock::now() + seconds(120);
  RunResult status;
  int64_t staged = 0;
  while (Clock::now() < deadline) {
    status = first.CtlJson({"status", job}, seconds(30));
    ASSERT_EQ(status.exit_code, 0) << status;
    const std::string state = JsonString(status.out, "state");
    ASSERT_FALSE(IsTerminalState(state))
        << "the job finished before it could be interrupted; make the "
           "workload bigger:\n"
        << status;
    staged = JsonInt(status.out, "staged");
    if (staged >= 2 && staged < kDays) break;
    std::this_thread::sleep_for(milliseconds(20));
  }
  ASSERT_GE(staged, 2) << status;
  ASSERT_LT(staged, kDays) << status;

  std::printf("kill -9 backfilld with %lld of %d partitions staged\n",
              static_cast<long long>(staged), kDays);
  first.Signal(SIGKILL);
  std::optional<int> code = first.Wait(seconds(30));
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, 128 + SIGKILL);

  // Nothing of the job is visible before it publishes.
  {
    Sqlite db(warehouse_, /*read_only=*/true);
    auto rows = db.Query("SELECT COUNT(*) FROM daily_revenue");
    if (rows) {
      EXPECT_EQ((*rows)[0][0], "0") << "partial publication visible";
    }
  }

  Daemon& second = NewDaemon(/*workers=*/2);
  ASSERT_TRUE(second.Start());
  const std::string final_json = WaitTerminal(second, job, seconds(240));
  ASSERT_EQ(JsonString(final_json, "state"), "BACKFILL_STATE_SUCCEEDED")
      << final_json;
  EXPECT_EQ(JsonInt(final_json, "published"), kDays) << final_json;

  const Rows expected = ExpectedRevenue(warehouse_, "2025-01-01", "2025-04-11");
  ASSERT_EQ(expected.size(), static_cast<size_t>(kDays) * 4);
  EXPECT_EQ(PublishedRevenue(warehouse_, "0000", "9999"), expected);

  const std::map<std::string, int> lineage = LineageCounts(job);
  EXPECT_EQ(lineage.size(), static_cast<size_t>(kDays));
  for (const auto& [partition, n] : lineage) {
    EXPECT_EQ(n, 1) << "lineage rows for " << partition;
  }

  ExpectCleanSigterm(second);
}

// (c) Bad requests fail with a non-zero exit code and a one-line error on
// stderr, and create no job.
TEST_F(E2eTest, RejectsBadInputWithoutCreatingJobs) {
  ASSERT_NO_FATAL_FAILURE(Prepare(/*days=*/5, /*orders_per_day=*/20, false));
  Daemon& daemon = NewDaemon();
  ASSERT_TRUE(daemon.Start());

  RunResult before = daemon.CtlJson({"list"});
  ASSERT_EQ(before.exit_code, 0) << before;
  const int jobs_before = CountJobs(before.out);

  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {"unknown dataset",
       {"submit", "no_such_dataset", "--from", "2025-01-01", "--to",
        "2025-01-03", "--reason", "e2e"}},
      {"inverted range",
       {"submit", "daily_revenue", "--from", "2025-01-05", "--to", "2025-01-01",
        "--reason", "e2e"}},
      {"malformed partition",
       {"submit", "daily_revenue", "--partitions", "2025-13-45", "--reason",
        "e2e"}},
      {"missing --reason",
       {"submit", "daily_revenue", "--from", "2025-01-01", "--to",
        "2025-01-03"}},
      {"source dataset as target",
       {"submit", "orders", "--from", "2025-01-01", "--to", "2025-01-03",
        "--reason", "e2e"}},
  };
  for (const auto& [what, args] : cases) {
    SCOPED_TRACE(what);
    RunResult r = daemon.Ctl(args, seconds(60));
    EXPECT_NE(r.exit_code, 0) << r;
    EXPECT_FALSE(r.timed_out) << r;
    const std::string err(absl::StripAsciiWhitespace(r.err));
    EXPECT_FALSE(err.empty()) << r;
    EXPECT_EQ(err.find('\n'), std::string::npos)
        << "expected a one-line error:\n"
        << r;
  }

  RunResult after = daemon.CtlJson({"list"});
  ASSERT_EQ(after.exit_code, 0) << after;
  EXPECT_EQ(CountJobs(after.out), jobs_before) << after.out;

  ExpectCleanSigterm(daemon);
}

// Refusals that would be too large for the 8 KiB of trailers a gRPC client
// accepts by default still reach backfillctl as themselves, not as
// RESOURCE_EXHAUSTED about the size of its metadata: `status` of a 10 KB
// id, and a `--no-wait` submit behind a paused job and 70 jobs queued
// behind it (enough for a refusal naming all 71 to exceed the limit).
TEST_F(E2eTest, RefusalsTooLargeForAClientsTrailersArriveBounded) {
  ASSERT_NO_FATAL_FAILURE(Prepare(/*days=*/31, /*orders_per_day=*/5, true));
  Daemon& daemon = NewDaemon(/*workers=*/1);
  ASSERT_TRUE(daemon.Start());
  const std::vector<std::string> january = {
      "submit", "daily_revenue", "--from", "2025-01-01", "--to", "2025-02-01"};
  const auto submit = [&](const std::string& reason) {
    std::vector<std::string> args = january;
    args.insert(args.end(), {"--reason", reason});
    RunResult r = daemon.Ctl(args, seconds(60));
    EXPECT_EQ(r.exit_code, 0) << r;
    std::smatch id;
    EXPECT_TRUE(std::regex_search(r.out, id,
                                  std::regex("submitted backfill (bf-[0-9]+)")))
        << r;
    return id.size() > 1 ? id[1].str() : "";
  };
  const std::string held = submit("held");
  ASSERT_FALSE(held.empty());
  RunResult paused = daemon.Ctl({"pause", held, "--reason", "e2e"});
  ASSERT_EQ(paused.exit_code, 0) << paused;
  constexpr int kQueued = 70;
  for (int i = 0; i < kQueued; ++i) {
    ASSERT_FALSE(submit(absl::StrCat("queued ", i)).empty());
  }

  std::vector<std::string> no_wait = january;
  no_wait.insert(no_wait.end(), {"--no-wait", "--reason", "x"});
  RunResult refused = daemon.Ctl(no_wait, seconds(60));
  EXPECT_EQ(refused.exit_code, 1) << refused;
  EXPECT_THAT(refused.err, HasSubstr("FAILED_PRECONDITION"));
  EXPECT_THAT(refused.err,
              HasSubstr(absl::StrCat("paused job ", held, " (PAUSED")));
  EXPECT_THAT(refused.err, HasSubstr(absl::StrCat(", ... and ", kQueued + 1 - 5,
                                                  " more jobs")));
  EXPECT_THAT(refused.err, Not(HasSubstr("RESOURCE_EXHAUSTED")));

  const std::string long_id = absl::StrCat("bf-", std::string(10000, '1'));
  RunResult status = daemon.Ctl({"status", long_id}, seconds(60));
  EXPECT_EQ(status.exit_code, 1) << status;
  EXPECT_THAT(status.err, HasSubstr("INVALID_ARGUMENT: malformed backfill id"));
  EXPECT_LT(status.err.size(), 1024u) << status;
  EXPECT_THAT(status.err, Not(HasSubstr("RESOURCE_EXHAUSTED")));
}

// (d) /metrics serves backfill_ metrics in a format promtool accepts.
TEST_F(E2eTest, MetricsPassPromtoolLint) {
  ASSERT_NO_FATAL_FAILURE(Prepare(/*days=*/3, /*orders_per_day=*/20, false));
  Daemon& daemon = NewDaemon();
  ASSERT_TRUE(daemon.Start());
  RunResult submit =
      daemon.CtlJson({"submit", "daily_revenue", "--from", "2025-01-01", "--to",
                      "2025-01-04", "--reason", "e2e metrics", "--wait"});
  ASSERT_EQ(submit.exit_code, 0) << submit;

  const std::string response = HttpGet(daemon.metrics_port(), "/metrics");
  ASSERT_THAT(response, ::testing::StartsWith("HTTP/1."));
  const size_t header_end = response.find("\r\n\r\n");
  ASSERT_NE(header_end, std::string::npos) << response;
  EXPECT_THAT(response.substr(0, response.find("\r\n")), HasSubstr(" 200"));
  const std::string body = response.substr(header_end + 4);
  EXPECT_THAT(body, HasSubstr("backfill_"));

  const std::string promtool = "/usr/bin/promtool";
  if (fs::exists(promtool)) {
    const std::string scrape = root_ + "/metrics.txt";
    WriteFile(scrape, body);
    RunResult lint =
        RunProcess({promtool, "check", "metrics"}, root_, seconds(60), scrape);
    EXPECT_EQ(lint.exit_code, 0) << lint;
    EXPECT_EQ(lint.out + lint.err, "") << lint;
  }

  ExpectCleanSigterm(daemon);
}

// backfill_partition_phase_seconds_total on the real daemon: every phase at
// 0 before any job; after a job whose transform is slow on purpose (it
// counts to 200000 for each partition, over a few dozen input rows), every
// phase grew, the transform took longer than the fingerprints, and the
// engine's three phases fit in the partitions' own recompute time.
TEST_F(E2eTest, PhaseSecondsStartAtZeroAndGrowWithAJob) {
  ASSERT_NO_FATAL_FAILURE(Prepare(/*days=*/4, /*orders_per_day=*/20, true));
  Daemon& daemon = NewDaemon();
  ASSERT_TRUE(daemon.Start());
  const char* const kPhases[] = {"transform", "fingerprint", "stage_write",
                                 "validate"};
  const auto phase = [](const std::vector<testing::PromSample>& samples,
                        const std::string& name) {
    return testing::SumOf(samples, "backfill_partition_phase_seconds_total",
                          {{"phase", name}});
  };
  const auto scrape = [&] {
    const std::string response = HttpGet(daemon.metrics_port(), "/metrics");
    const size_t header_end = response.find("\r\n\r\n");
    EXPECT_NE(header_end, std::string::npos) << response;
    return testing::ParseSamples(
        header_end == std::string::npos ? "" : response.substr(header_end + 4));
  };
  std::vector<testing::PromSample> before = scrape();
  for (const char* p : kPhases) EXPECT_EQ(phase(before, p), 0) << p;

  SubmitSucceeded(
      daemon, {"daily_revenue", "--from", "2025-01-01", "--to", "2025-01-05"},
      "e2e phase seconds");
  const std::vector<testing::PromSample> after = scrape();
  for (const char* p : kPhases) EXPECT_GT(phase(after, p), 0) << p;
  EXPECT_EQ(testing::SumOf(after, "backfill_partition_attempts_total",
                           {{"result", "staged"}}),
            4);
  EXPECT_GT(phase(after, "transform"), phase(after, "fingerprint"));
  EXPECT_LE(phase(after, "transform") + phase(after, "fingerprint") +
                phase(after, "stage_write"),
            testing::SumOf(after, "backfill_partition_duration_seconds_sum"));

  ExpectCleanSigterm(daemon);
}

// (e) SIGTERM while a job runs: the daemon drains and exits 0, and the job
// completes (after a restart if the drain stopped it).
TEST_F(E2eTest, SigtermWhileRunningExitsZeroAndJobCompletes) {
  constexpr int kDays = 40;
  ASSERT_NO_FATAL_FAILURE(Prepare(kDays, /*orders_per_day=*/50, true));
  Daemon& first = NewDaemon(/*workers=*/1);
  ASSERT_TRUE(first.Start());
  RunResult submit =
      first.CtlJson({"submit", "daily_revenue", "--from", "2025-01-01", "--to",
                     "2025-02-10", "--reason", "e2e sigterm"});
  ASSERT_EQ(submit.exit_code, 0) << submit;
  const std::string job = JsonString(submit.out, "id");
  ASSERT_FALSE(job.empty()) << submit;
  std::this_thread::sleep_for(milliseconds(500));
  ASSERT_NO_FATAL_FAILURE(ExpectCleanSigterm(first));

  Daemon& second = NewDaemon();
  ASSERT_TRUE(second.Start());
  const std::string final_json = WaitTerminal(second, job, seconds(240));
  ASSERT_EQ(JsonString(final_json, "state"), "BACKFILL_STATE_SUCCEEDED")
      << final_json;
  EXPECT_EQ(PublishedRevenue(warehouse_, "0000", "9999"),
            ExpectedRevenue(warehouse_, "2025-01-01", "2025-02-10"));
  ExpectCleanSigterm(second);
}

// Global flags go after the subcommand too.
TEST_F(E2eTest, GlobalFlagsAfterTheSubcommand) {
  ASSERT_NO_FATAL_FAILURE(Prepare(/*days=*/3, /*orders_per_day=*/20, false));
  Daemon& daemon = NewDaemon();
  ASSERT_TRUE(daemon.Start());

  RunResult datasets =
      RawCtl({"datasets", "--server", daemon.address(), "--json"});
  ASSERT_EQ(datasets.exit_code, 0) << datasets;
  EXPECT_THAT(datasets.out, ::testing::StartsWith("{")) << datasets;
  EXPECT_THAT(datasets.out, HasSubstr("\"daily_revenue\"")) << datasets;

  RunResult submit =
      daemon.CtlJson({"submit", "daily_revenue", "--from", "2025-01-01", "--to",
                      "2025-01-03", "--reason", "e2e global flags", "--wait"});
  ASSERT_EQ(submit.exit_code, 0) << submit;
  const std::string job = JsonString(submit.out, "id");
  ASSERT_THAT(job, ::testing::MatchesRegex("bf-[0-9]+")) << submit;

  RunResult status =
      RawCtl({"status", job, "--json", "--server", daemon.address()});
  ASSERT_EQ(status.exit_code, 0) << status;
  EXPECT_THAT(status.out, ::testing::StartsWith("{")) << status;
  EXPECT_EQ(JsonString(status.out, "id"), job) << status;
  EXPECT_EQ(JsonString(status.out, "state"), "BACKFILL_STATE_SUCCEEDED")
      << status;

  // --timeout after the subcommand as well.
  RunResult list = RawCtl(
      {"list", "--json", "--timeout", "20", "--server", daemon.address()});
  ASSERT_EQ(list.exit_code, 0) << list;
  EXPECT_EQ(CountJobs(list.out), 1) << list;

  ExpectCleanSigterm(daemon);
}

// BACKFILL_SERVER is the address when --server is absent; --server wins
// over it.
TEST_F(E2eTest, ServerFromEnvironmentAndFlagOverridesIt) {
  ASSERT_NO_FATAL_FAILURE(Prepare(/*days=*/3, /*orders_per_day=*/20, false));
  Daemon& daemon = NewDaemon();
  ASSERT_TRUE(daemon.Start());
  const std::string dead = absl::StrCat("127.0.0.1:", FreePort());

  RunResult from_env =
      RawCtl({"datasets", "--json"}, {"BACKFILL_SERVER=" + daemon.address()});
  ASSERT_EQ(from_env.exit_code, 0) << from_env;
  EXPECT_THAT(from_env.out, HasSubstr("\"daily_revenue\"")) << from_env;

  // The variable really is used: pointed at a dead port, the call fails
  // and names that address.
  RunResult dead_env =
      RawCtl({"datasets", "--timeout", "10"}, {"BACKFILL_SERVER=" + dead});
  EXPECT_EQ(dead_env.exit_code, 1) << dead_env;
  EXPECT_THAT(dead_env.err, HasSubstr(dead)) << dead_env;

  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--server", daemon.address(), "datasets",
                                 "--json"},
        std::vector<std::string>{"datasets", "--json", "--server",
                                 daemon.address()}}) {
    RunResult overridden = RawCtl(args, {"BACKFILL_SERVER=" + dead});
    ASSERT_EQ(overridden.exit_code, 0) << overridden;
    EXPECT_THAT(overridden.out, HasSubstr("\"daily_revenue\"")) << overridden;
  }

  ExpectCleanSigterm(daemon);
}

// `submit` without a reason is a usage error (exit 2), says so in one line
// on stderr and never reaches the server.
TEST_F(E2eTest, SubmitWithoutReasonExitsTwoAndCreatesNoJob) {
  ASSERT_NO_FATAL_FAILURE(Prepare(/*days=*/3, /*orders_per_day=*/20, false));
  Daemon& daemon = NewDaemon();
  ASSERT_TRUE(daemon.Start());

  for (const std::vector<std::string>& reason :
       {std::vector<std::string>{}, std::vector<std::string>{"--reason", ""},
        std::vector<std::string>{"--reason", "   "}}) {
    std::vector<std::string> args = {"submit", "daily_revenue",
                                     "--from", "2025-01-01",
                                     "--to",   "2025-01-03"};
    args.insert(args.end(), reason.begin(), reason.end());
    RunResult r = daemon.Ctl(args, seconds(60));
    SCOPED_TRACE(r.command);
    EXPECT_EQ(r.exit_code, 2) << r;
    EXPECT_EQ(r.out, "") << r;
    const std::string err(absl::StripTrailingAsciiWhitespace(r.err));
    EXPECT_THAT(err, HasSubstr("--reason")) << r;
    EXPECT_EQ(err.find('\n'), std::string::npos)
        << "expected a one-line error:\n"
        << r;
  }

  RunResult list = daemon.CtlJson({"list"});
  ASSERT_EQ(list.exit_code, 0) << list;
  EXPECT_EQ(CountJobs(list.out), 0) << list.out;

  ExpectCleanSigterm(daemon);
}

// `submit --wait` exits 1 when the job ends in another state than
// SUCCEEDED: a transform that emits rows outside its partition fails the
// job, and nothing of it is published.
TEST_F(E2eTest, SubmitWaitExitsOneWhenTheJobFails) {
  ASSERT_NO_FATAL_FAILURE(WriteWarehouse(warehouse_, /*days=*/3, 20));
  ASSERT_NO_FATAL_FAILURE(WriteFile(
      pipelines_dir_ + "/e2e.yaml",
      PipelineYaml(false,
                   fixtures::OutOfPartitionDatasetYaml("misdated_counts"))));
  Daemon& daemon = NewDaemon();
  ASSERT_TRUE(daemon.Start());

  RunResult submit = daemon.CtlJson(
      {"submit", "misdated_counts", "--from", "2025-01-01", "--to",
       "2025-01-03", "--reason", "e2e failing transform", "--wait"},
      seconds(180));
  EXPECT_EQ(submit.exit_code, 1) << submit;
  EXPECT_FALSE(submit.timed_out) << submit;
  EXPECT_EQ(JsonString(submit.out, "state"), "BACKFILL_STATE_FAILED") << submit;
  const std::string job = JsonString(submit.out, "id");
  ASSERT_THAT(job, ::testing::MatchesRegex("bf-[0-9]+")) << submit;
  EXPECT_THAT(submit.err, HasSubstr(job)) << submit;

  // Nothing published: the table is absent (never created) or empty.
  Sqlite db(warehouse_, /*read_only=*/true);
  auto rows = db.Query(
      "SELECT COUNT(*) FROM sqlite_master WHERE name = 'misdated_counts'");
  ASSERT_TRUE(rows.has_value()) << db.error();
  if ((*rows)[0][0] != "0") {
    auto published = db.Query("SELECT COUNT(*) FROM misdated_counts");
    ASSERT_TRUE(published.has_value()) << db.error();
    EXPECT_EQ((*published)[0][0], "0") << "rows of a FAILED job published";
  }

  ExpectCleanSigterm(daemon);
}

// Without --pipelines, a data dir without pipelines/ starts with no
// datasets; an explicit --pipelines that does not exist is an error
// (exit 2) before anything starts.
TEST_F(E2eTest, PipelinesDefaultAndMissingExplicitDirectory) {
  Daemon& bare = NewDaemonIn(root_ + "/bare", "");
  ASSERT_TRUE(bare.Start());
  EXPECT_THAT(ReadFile(bare.log()), HasSubstr("no --pipelines given"));
  RunResult datasets = bare.Ctl({"datasets"});
  EXPECT_EQ(datasets.exit_code, 0) << datasets;
  ExpectCleanSigterm(bare);

  Daemon& missing = NewDaemonIn(root_ + "/missing", root_ + "/no-such-dir");
  std::optional<int> code = missing.SpawnExpectingExit(seconds(60));
  ASSERT_TRUE(code.has_value())
      << "backfilld started with a missing --pipelines directory; log:\n"
      << ReadFile(missing.log());
  EXPECT_EQ(*code, 2) << ReadFile(missing.log());
  EXPECT_TRUE(HasStartupError(ReadFile(missing.log()), "does not exist"))
      << ReadFile(missing.log());
}

// Health is not probed here: e2e_tests links no gRPC (there is no
// grpc_health_probe either); tests/server_service_test.cc covers
// grpc.health.v1.Health/Check on the service.

// A second backfilld on the same --data-dir refuses to start (the data dir
// is locked): exit 1, a line saying it is in use, and the first daemon
// keeps serving.
TEST_F(E2eTest, SecondDaemonOnTheSameDataDirRefusesToStart) {
  ASSERT_NO_FATAL_FAILURE(Prepare(/*days=*/3, /*orders_per_day=*/20, false));
  Daemon& first = NewDaemon();
  ASSERT_TRUE(first.Start());

  Daemon& second = NewDaemon();
  std::optional<int> code = second.SpawnExpectingExit(seconds(60));
  ASSERT_TRUE(code.has_value())
      << "a second backfilld started on the same --data-dir; log:\n"
      << ReadFile(second.log());
  EXPECT_EQ(*code, 1) << ReadFile(second.log());
  EXPECT_TRUE(HasStartupError(ReadFile(second.log()), "in use"))
      << ReadFile(second.log());

  RunResult datasets = first.CtlJson({"datasets"});
  EXPECT_EQ(datasets.exit_code, 0) << datasets;
  ExpectCleanSigterm(first);
}

// A second backfilld on another data dir but the same --listen address
// fails to start (no port sharing): exit 1 and a message naming the
// address; the first daemon keeps serving.
TEST_F(E2eTest, SecondDaemonOnTheSameListenAddressFailsToStart) {
  ASSERT_NO_FATAL_FAILURE(Prepare(/*days=*/3, /*orders_per_day=*/20, false));
  Daemon& first = NewDaemon();
  ASSERT_TRUE(first.Start());

  Daemon& second = NewDaemonIn(root_ + "/other-data", "");
  second.set_listen_port(first.port());
  std::optional<int> code = second.SpawnExpectingExit(seconds(60));
  ASSERT_TRUE(code.has_value())
      << "a second backfilld started on " << first.address() << "; log:\n"
      << ReadFile(second.log());
  EXPECT_EQ(*code, 1) << ReadFile(second.log());
  EXPECT_TRUE(HasStartupError(ReadFile(second.log()), first.address()))
      << ReadFile(second.log());

  RunResult datasets = first.CtlJson({"datasets"});
  ASSERT_EQ(datasets.exit_code, 0) << datasets;
  EXPECT_THAT(datasets.out, HasSubstr("\"daily_revenue\"")) << datasets;
  ExpectCleanSigterm(first);
}

TEST_F(E2eTest, APlanOverTheDaemonsPartitionLimitIsRefusedAndCreatesNothing) {
  ASSERT_NO_FATAL_FAILURE(Prepare(/*days=*/10, /*orders_per_day=*/5, false));
  Daemon& daemon = NewDaemon();
  daemon.set_extra_args({"--max-partitions-per-job", "3"});
  ASSERT_TRUE(daemon.Start());
  RunResult three = daemon.Ctl({"plan", "daily_revenue", "--from", "2025-01-01",
                                "--to", "2025-01-04", "--no-downstream"});
  EXPECT_EQ(three.exit_code, 0) << three;
  RunResult four =
      daemon.Ctl({"submit", "daily_revenue", "--from", "2025-01-01", "--to",
                  "2025-01-05", "--no-downstream", "--reason", "too many"});
  EXPECT_EQ(four.exit_code, 1) << four;
  EXPECT_THAT(four.err, HasSubstr("at most 3"));
  RunResult list = daemon.Ctl({"--json", "list"});
  EXPECT_EQ(list.exit_code, 0) << list;
  EXPECT_THAT(list.out, ::testing::Not(HasSubstr("bf-")));
}

}  // namespace
}  // namespace e2e_backfill_test
}  // namespace backfill
