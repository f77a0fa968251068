// Tests of server/metrics: names, labels and values of a scrape, the HTTP
// exposer, and (when promtool is installed) `promtool check metrics`.

#include <stdio.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/grpc_metrics.h"
#include "server/listener_wake.h"
#include "server/metrics.h"
#include "tests/testing/prometheus_text.h"

namespace backfill {
namespace server_metrics_test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

StoreStats SomeStats() {
  StoreStats stats;
  stats.jobs_by_state[static_cast<int>(JobState::kRunning)] = 2;
  stats.jobs_by_state[static_cast<int>(JobState::kSucceeded)] = 5;
  stats.tasks_by_state[static_cast<int>(TaskState::kStaged)] = 3;
  stats.tasks_by_state[static_cast<int>(TaskState::kPending)] = 1;
  stats.running_tasks_total = 4;
  stats.running_tasks_done = 3;
  return stats;
}

// Runs `promtool check metrics` on `text`; returns its combined output, or
// nullopt-like "<no promtool>" when it is not installed.
std::string PromtoolCheck(const std::string& text) {
  if (std::system("command -v promtool >/dev/null 2>&1") != 0) {
    return "<no promtool>";
  }
  const std::string path =
      absl::StrCat(::testing::TempDir(), "/metrics-", getpid(), ".txt");
  std::ofstream(path) << text;
  FILE* pipe = popen(
      absl::StrCat("promtool check metrics < ", path, " 2>&1").c_str(), "r");
  std::string out;
  char buf[512];
  while (pipe != nullptr && fgets(buf, sizeof buf, pipe) != nullptr) out += buf;
  if (pipe != nullptr) pclose(pipe);
  std::remove(path.c_str());
  return out;
}

TEST(MetricsTest, ScrapeHasEveryFamilyWithValues) {
  Metrics metrics([] { return SomeStats(); }, "1.2.3");
  metrics.OnJobTransition("bf-1", JobState::kQueued, JobState::kRunning, "");
  metrics.OnJobTransition("bf-1", JobState::kQueued, JobState::kRunning, "");
  metrics.OnPartitionAttempt(true, absl::Milliseconds(20));
  metrics.OnPartitionAttempt(false, absl::Seconds(2));
  metrics.OnJobFinished("bf-1", JobState::kSucceeded, 100, 90);
  metrics.OnJobPublished("bf-1", {{"daily_revenue", 3, 12, 100, 1000, 90}});

  const std::string text = metrics.Scrape();
  EXPECT_THAT(text, HasSubstr("backfill_jobs{state=\"running\"} 2"));
  EXPECT_THAT(text, HasSubstr("backfill_jobs{state=\"succeeded\"} 5"));
  EXPECT_THAT(text, HasSubstr("backfill_jobs{state=\"queued\"} 0"));
  EXPECT_THAT(text, HasSubstr("backfill_partitions{state=\"staged\"} 3"));
  EXPECT_THAT(text, HasSubstr("backfill_running_jobs_progress_ratio 0.75"));
  EXPECT_THAT(text, HasSubstr("backfill_state_store_up 1"));
  EXPECT_THAT(text, HasSubstr("backfill_job_state_transitions_total{from="
                              "\"queued\",to=\"running\"} 2"));
  EXPECT_THAT(text, HasSubstr("backfill_partition_attempts_total{result="
                              "\"staged\"} 1"));
  EXPECT_THAT(text, HasSubstr("backfill_partition_attempts_total{result="
                              "\"failed\"} 1"));
  EXPECT_THAT(text, HasSubstr("backfill_partition_duration_seconds_count 2"));
  EXPECT_THAT(text, HasSubstr("backfill_partition_duration_seconds_bucket{le="
                              "\"0.001\"} 0"));
  EXPECT_THAT(text,
              HasSubstr("backfill_jobs_finished_total{state=\"succeeded\"} 1"));
  EXPECT_THAT(text, HasSubstr("backfill_cost_estimated_input_rows_total{"
                              "dataset=\"daily_revenue\"} 100"));
  EXPECT_THAT(text, HasSubstr("backfill_cost_actual_input_rows_total{"
                              "dataset=\"daily_revenue\"} 90"));
  EXPECT_THAT(text, HasSubstr("backfill_build_info{version=\"1.2.3\"} 1"));
  EXPECT_THAT(text, Not(HasSubstr("_total_total")));
  EXPECT_THAT(text, Not(HasSubstr("bf-")));
}

TEST(MetricsTest, GaugesFollowTheStatsAtEveryScrape) {
  StoreStats stats;
  Metrics metrics([&stats] { return stats; }, "v");
  EXPECT_THAT(metrics.Scrape(),
              HasSubstr("backfill_running_jobs_progress_ratio 0\n"));
  stats.jobs_by_state[static_cast<int>(JobState::kQueued)] = 7;
  EXPECT_THAT(metrics.Scrape(), HasSubstr("backfill_jobs{state=\"queued\"} 7"));
}

TEST(MetricsTest, StoreErrorsShowAsStoreDown) {
  Metrics metrics(
      []() -> absl::StatusOr<StoreStats> {
        return absl::UnavailableError("disk gone");
      },
      "v");
  const std::string text = metrics.Scrape();
  EXPECT_THAT(text, HasSubstr("backfill_state_store_up 0"));
  EXPECT_THAT(text, Not(HasSubstr("backfill_jobs{")));
}

TEST(MetricsTest, PromtoolAcceptsTheScrape) {
  Metrics metrics([] { return SomeStats(); }, "0.1.0");
  metrics.OnJobTransition("bf-1", JobState::kRunning, JobState::kValidating,
                          "");
  metrics.OnPartitionAttempt(true, absl::Milliseconds(3));
  metrics.OnJobFinished("bf-1", JobState::kFailed, 10, 4);
  const std::string out = PromtoolCheck(metrics.Scrape());
  if (out == "<no promtool>") GTEST_SKIP() << "promtool is not installed";
  EXPECT_EQ(out, "") << metrics.Scrape();
}

TEST(MetricsTest, ServesOverHttp) {
  Metrics metrics([] { return SomeStats(); }, "0.1.0");
  ASSERT_TRUE(metrics.Listen("127.0.0.1:0").ok());
  ASSERT_GT(metrics.port(), 0);
  if (std::system("command -v curl >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "curl is not installed";
  }
  FILE* pipe = popen(
      absl::StrCat("curl -sf http://127.0.0.1:", metrics.port(), "/metrics")
          .c_str(),
      "r");
  ASSERT_NE(pipe, nullptr);
  std::string body;
  char buf[512];
  while (fgets(buf, sizeof buf, pipe) != nullptr) body += buf;
  EXPECT_EQ(pclose(pipe), 0);
  EXPECT_THAT(body, HasSubstr("backfill_build_info{version=\"0.1.0\"} 1"));
  EXPECT_THAT(body, HasSubstr("backfill_jobs{state=\"running\"} 2"));
  metrics.StopListening();
  EXPECT_EQ(metrics.port(), 0);
}

// The exposer's listening thread sees a stop only when its poll() returns,
// every 2 s when idle: four stops of an idle endpoint took about 7.6 s in
// all before StopListening woke it. The bound (5 s for four) is far above
// what a woken stop takes (about 10 ms) and below what unwoken ones take.
TEST(MetricsTest, StoppingAnIdleEndpointDoesNotWaitForItsPoll) {
  Metrics metrics([] { return SomeStats(); }, "0.1.0");
  absl::Duration stopping;
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(metrics.Listen("127.0.0.1:0").ok());
    const int port = metrics.port();
    ASSERT_GT(port, 0);
    absl::SleepFor(absl::Milliseconds(100));  // its thread is in poll() now
    const absl::Time start = absl::Now();
    metrics.StopListening();
    stopping += absl::Now() - start;
    EXPECT_EQ(metrics.port(), 0);
    // Nothing listens there any more.
    EXPECT_FALSE(WakeListener("127.0.0.1", port));
  }
  EXPECT_LT(stopping, absl::Seconds(5));
}

TEST(MetricsTest, ListenFailsClearlyOnABadAddress) {
  Metrics first([] { return StoreStats(); }, "v");
  ASSERT_TRUE(first.Listen("127.0.0.1:0").ok());
  Metrics second([] { return StoreStats(); }, "v");
  absl::Status status = second.Listen(absl::StrCat("127.0.0.1:", first.port()));
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_THAT(status.message(), HasSubstr("--metrics-listen"));
}

using ::backfill::testing::DeclaredFamilies;
using ::backfill::testing::ParseSamples;
using ::backfill::testing::SumOf;

Metrics::PublishedDataset Published(const std::string& dataset,
                                    int64_t partitions, int64_t rows,
                                    double estimated, double full_reload,
                                    double actual) {
  Metrics::PublishedDataset d;
  d.dataset = dataset;
  d.partitions = partitions;
  d.rows = rows;
  d.estimated_cost = estimated;
  d.full_reload_cost = full_reload;
  d.actual_cost = actual;
  return d;
}

TEST(MetricsTest, DeclaredDatasetsStartAtZeroAndOthersAreBounded) {
  Metrics metrics([] { return StoreStats(); }, "v");
  metrics.DeclareDatasets({"daily_revenue", "monthly_revenue"});
  auto samples = ParseSamples(metrics.Scrape());
  for (const char* d : {"daily_revenue", "monthly_revenue"}) {
    for (const char* state : {"staged", "unchanged", "skipped"}) {
      EXPECT_EQ(SumOf(samples, "backfill_partitions_checkpointed_total",
                      {{"dataset", d}, {"state", state}}),
                0)
          << d << " " << state;
    }
    for (const char* name :
         {"backfill_partitions_published_total", "backfill_rows_written_total",
          "backfill_rows_published_total",
          "backfill_cost_estimated_input_rows_total",
          "backfill_cost_actual_input_rows_total",
          "backfill_cost_full_reload_input_rows_total",
          "backfill_jobs_published_total"}) {
      EXPECT_EQ(SumOf(samples, name, {{"dataset", d}}), 0) << name << " " << d;
    }
  }
  // A name the catalog does not declare gets no series of its own.
  metrics.OnPartitionCheckpointed("not-in-catalog-2025-01-01",
                                  TaskState::kStaged, 5);
  samples = ParseSamples(metrics.Scrape());
  EXPECT_EQ(
      SumOf(samples, "backfill_rows_written_total", {{"dataset", "other"}}), 5);
  EXPECT_EQ(SumOf(samples, "backfill_rows_written_total",
                  {{"dataset", "not-in-catalog-2025-01-01"}}),
            -1);
}

TEST(MetricsTest, CheckpointsAndPublishesAreCountedPerDataset) {
  Metrics metrics([] { return StoreStats(); }, "v");
  metrics.DeclareDatasets({"daily_revenue", "monthly_revenue"});
  // 3 staged partitions of 4, 5 and 6 rows, one unchanged, two skipped.
  metrics.OnPartitionCheckpointed("daily_revenue", TaskState::kStaged, 4);
  metrics.OnPartitionCheckpointed("daily_revenue", TaskState::kStaged, 5);
  metrics.OnPartitionCheckpointed("daily_revenue", TaskState::kUnchanged, 0);
  metrics.OnPartitionCheckpointed("monthly_revenue", TaskState::kStaged, 6);
  metrics.OnPartitionCheckpointed("monthly_revenue", TaskState::kSkipped, 0);
  metrics.OnPartitionCheckpointed("monthly_revenue", TaskState::kSkipped, 0);
  metrics.OnJobPublished("bf-1",
                         {Published("daily_revenue", 2, 9, 50, 500, 40),
                          Published("monthly_revenue", 1, 6, 20, 80, 25)});
  metrics.OnJobPublished("bf-2",
                         {Published("daily_revenue", 0, 0, 10, 500, 8)});
  const auto samples = ParseSamples(metrics.Scrape());
  EXPECT_EQ(SumOf(samples, "backfill_partitions_checkpointed_total",
                  {{"dataset", "daily_revenue"}, {"state", "staged"}}),
            2);
  EXPECT_EQ(SumOf(samples, "backfill_partitions_checkpointed_total",
                  {{"dataset", "daily_revenue"}, {"state", "unchanged"}}),
            1);
  EXPECT_EQ(SumOf(samples, "backfill_partitions_checkpointed_total",
                  {{"dataset", "monthly_revenue"}, {"state", "skipped"}}),
            2);
  EXPECT_EQ(SumOf(samples, "backfill_rows_written_total",
                  {{"dataset", "daily_revenue"}}),
            4 + 5);
  EXPECT_EQ(SumOf(samples, "backfill_rows_written_total"), 4 + 5 + 6);
  EXPECT_EQ(SumOf(samples, "backfill_partitions_published_total",
                  {{"dataset", "daily_revenue"}}),
            2);
  EXPECT_EQ(SumOf(samples, "backfill_rows_published_total"), 9 + 6);
  EXPECT_EQ(SumOf(samples, "backfill_jobs_published_total",
                  {{"dataset", "daily_revenue"}}),
            2);
  EXPECT_EQ(SumOf(samples, "backfill_cost_estimated_input_rows_total",
                  {{"dataset", "daily_revenue"}}),
            50 + 10);
  EXPECT_EQ(SumOf(samples, "backfill_cost_actual_input_rows_total",
                  {{"dataset", "daily_revenue"}}),
            40 + 8);
  EXPECT_EQ(SumOf(samples, "backfill_cost_full_reload_input_rows_total",
                  {{"dataset", "daily_revenue"}}),
            500 + 500);
  EXPECT_EQ(SumOf(samples, "backfill_cost_full_reload_input_rows_total",
                  {{"dataset", "monthly_revenue"}}),
            80);
}

// A job that ends without publishing counts in neither cost counter, so
// the ratio of actual to estimated compares the same jobs; a job that
// failed, was retried and then published counts once.
TEST(MetricsTest, CancelledAndFailedJobsDoNotSkewTheCostCounters) {
  Metrics metrics([] { return StoreStats(); }, "v");
  metrics.DeclareDatasets({"daily_revenue"});
  metrics.OnJobFinished("bf-1", JobState::kCancelled, 1000, 3);
  metrics.OnJobFinished("bf-2", JobState::kFailed, 200, 150);
  metrics.OnJobFinished("bf-3", JobState::kValidationFailed, 70, 70);
  metrics.OnJobPublished("bf-2",
                         {Published("daily_revenue", 4, 4, 200, 900, 190)});
  metrics.OnJobFinished("bf-2", JobState::kSucceeded, 200, 190);
  const auto samples = ParseSamples(metrics.Scrape());
  EXPECT_EQ(SumOf(samples, "backfill_cost_estimated_input_rows_total"), 200);
  EXPECT_EQ(SumOf(samples, "backfill_cost_actual_input_rows_total"), 190);
  EXPECT_EQ(
      SumOf(samples, "backfill_jobs_finished_total", {{"state", "cancelled"}}),
      1);
}

TEST(MetricsTest, ValidationFailuresByKindAndSeverity) {
  Metrics metrics([] { return StoreStats(); }, "v");
  metrics.OnCheckFailed("daily_revenue", "row_change", CheckSeverity::kHold);
  metrics.OnCheckFailed("daily_revenue", "row_change", CheckSeverity::kHold);
  metrics.OnCheckFailed("daily_revenue", "not_null", CheckSeverity::kError);
  metrics.OnCheckFailed("daily_revenue", "partition", CheckSeverity::kError);
  metrics.OnCheckFailed("daily_revenue", "made up kind", CheckSeverity::kWarn);
  const auto samples = ParseSamples(metrics.Scrape());
  EXPECT_EQ(SumOf(samples, "backfill_validation_failures_total",
                  {{"kind", "row_change"}, {"severity", "hold"}}),
            2);
  EXPECT_EQ(SumOf(samples, "backfill_validation_failures_total",
                  {{"kind", "not_null"}, {"severity", "error"}}),
            1);
  EXPECT_EQ(SumOf(samples, "backfill_validation_failures_total",
                  {{"kind", "partition"}}),
            1);
  EXPECT_EQ(SumOf(samples, "backfill_validation_failures_total",
                  {{"kind", "other"}, {"severity", "warn"}}),
            1);
  // Every declared kind and severity exists before it fails.
  EXPECT_EQ(SumOf(samples, "backfill_validation_failures_total",
                  {{"kind", "assert"}, {"severity", "warn"}}),
            0);
  EXPECT_EQ(SumOf(samples, "backfill_validation_failures_total"), 5);
}

TEST(MetricsTest, DownstreamHealthFollowsTheLastConfirmation) {
  Metrics metrics([] { return StoreStats(); }, "v");
  // Declared, with no sample, before any consumer was confirmed.
  std::string text = metrics.Scrape();
  EXPECT_EQ(DeclaredFamilies(text)["backfill_downstream_healthy"], "gauge");
  EXPECT_EQ(DeclaredFamilies(text)["backfill_downstream_confirmation_seconds"],
            "histogram");
  EXPECT_EQ(SumOf(ParseSamples(text), "backfill_downstream_healthy"), -1);

  metrics.OnConsumerConfirmed("daily_revenue", "amount_cache", true,
                              absl::Seconds(2));
  metrics.OnConsumerConfirmed("daily_revenue", "amount_cache", false,
                              absl::Seconds(40));
  metrics.OnConsumerConfirmed("daily_revenue", "bi_extract", true,
                              absl::Milliseconds(300));
  auto samples = ParseSamples(metrics.Scrape());
  EXPECT_EQ(SumOf(samples, "backfill_downstream_healthy",
                  {{"dataset", "daily_revenue"}, {"consumer", "amount_cache"}}),
            0);
  EXPECT_EQ(SumOf(samples, "backfill_downstream_healthy",
                  {{"dataset", "daily_revenue"}, {"consumer", "bi_extract"}}),
            1);
  EXPECT_EQ(SumOf(samples, "backfill_downstream_confirmation_seconds_count",
                  {{"consumer", "amount_cache"}}),
            2);
  EXPECT_DOUBLE_EQ(
      SumOf(samples, "backfill_downstream_confirmation_seconds_sum",
            {{"consumer", "amount_cache"}}),
      42);
  // 2 s falls in the bucket le=2.5, 40 s only from le=60 on.
  EXPECT_EQ(SumOf(samples, "backfill_downstream_confirmation_seconds_bucket",
                  {{"consumer", "amount_cache"}, {"le", "2.5"}}),
            1);
  EXPECT_EQ(SumOf(samples, "backfill_downstream_confirmation_seconds_bucket",
                  {{"consumer", "amount_cache"}, {"le", "60"}}),
            2);
  // Healthy again after a later confirmation.
  metrics.OnConsumerConfirmed("daily_revenue", "amount_cache", true,
                              absl::Seconds(1));
  samples = ParseSamples(metrics.Scrape());
  EXPECT_EQ(SumOf(samples, "backfill_downstream_healthy",
                  {{"consumer", "amount_cache"}}),
            1);
}

TEST(MetricsTest, DownstreamHealthComesFromTheStandingsWhenSet) {
  Metrics metrics([] { return StoreStats(); }, "v");
  // What the store says: amount_cache is held unhealthy by a job, bi_extract
  // was last found healthy. The confirmations this process saw do not
  // override it (a restart forgets them; the store does not).
  std::vector<ConsumerStanding> standings(2);
  standings[0].dataset = "daily_revenue";
  standings[0].consumer = "amount_cache";
  standings[0].unhealthy_jobs = {"bf-4"};
  standings[1].dataset = "daily_revenue";
  standings[1].consumer = "bi_extract";
  bool failing = false;
  metrics.SetConsumerStandings(
      [&]() -> absl::StatusOr<std::vector<ConsumerStanding>> {
        if (failing) return absl::UnavailableError("disk I/O error");
        return standings;
      });
  metrics.OnConsumerConfirmed("daily_revenue", "amount_cache", true,
                              absl::Seconds(2));
  auto samples = ParseSamples(metrics.Scrape());
  EXPECT_EQ(SumOf(samples, "backfill_downstream_healthy",
                  {{"dataset", "daily_revenue"}, {"consumer", "amount_cache"}}),
            0);
  EXPECT_EQ(SumOf(samples, "backfill_downstream_healthy",
                  {{"dataset", "daily_revenue"}, {"consumer", "bi_extract"}}),
            1);
  // The latency is still this process's observation.
  EXPECT_EQ(SumOf(samples, "backfill_downstream_confirmation_seconds_count",
                  {{"consumer", "amount_cache"}}),
            1);
  // The job was rolled back or confirmed healthy: the store says so.
  standings[0].unhealthy_jobs.clear();
  samples = ParseSamples(metrics.Scrape());
  EXPECT_EQ(SumOf(samples, "backfill_downstream_healthy",
                  {{"consumer", "amount_cache"}}),
            1);
  // A store that cannot be read gives no sample, not a guess.
  failing = true;
  const std::string text = metrics.Scrape();
  EXPECT_EQ(DeclaredFamilies(text)["backfill_downstream_healthy"], "gauge");
  EXPECT_EQ(SumOf(ParseSamples(text), "backfill_downstream_healthy"), -1);
}

// backfill_partition_phase_seconds_total: every phase at 0 before anything
// ran, then the engine's timings of each staged attempt and the time of
// each validation of a job, in seconds.
TEST(MetricsTest, PhaseSecondsStartAtZeroAndAddUpTheTimings) {
  Metrics metrics([] { return StoreStats(); }, "v");
  std::string text = metrics.Scrape();
  EXPECT_EQ(DeclaredFamilies(text)["backfill_partition_phase_seconds_total"],
            "counter");
  auto samples = ParseSamples(text);
  for (const char* phase :
       {"transform", "fingerprint", "stage_write", "validate"}) {
    EXPECT_EQ(SumOf(samples, "backfill_partition_phase_seconds_total",
                    {{"phase", phase}}),
              0)
        << phase;
  }

  StageTimings first;
  first.transform = absl::Milliseconds(1500);
  first.fingerprint = absl::Milliseconds(120);
  first.stage_write = absl::Milliseconds(30);
  StageTimings second;
  second.transform = absl::Milliseconds(500);
  second.fingerprint = absl::Milliseconds(80);
  second.stage_write = absl::Milliseconds(20);
  metrics.OnPartitionStageTimings("daily_revenue", first);
  metrics.OnPartitionStageTimings("monthly_revenue", second);
  metrics.OnJobValidationTime("bf-1", absl::Milliseconds(250));
  // A negative duration (a clock set back) adds nothing.
  metrics.OnJobValidationTime("bf-2", absl::Milliseconds(-40));
  text = metrics.Scrape();
  samples = ParseSamples(text);
  EXPECT_DOUBLE_EQ(SumOf(samples, "backfill_partition_phase_seconds_total",
                         {{"phase", "transform"}}),
                   2.0);
  EXPECT_DOUBLE_EQ(SumOf(samples, "backfill_partition_phase_seconds_total",
                         {{"phase", "fingerprint"}}),
                   0.2);
  EXPECT_DOUBLE_EQ(SumOf(samples, "backfill_partition_phase_seconds_total",
                         {{"phase", "stage_write"}}),
                   0.05);
  EXPECT_DOUBLE_EQ(SumOf(samples, "backfill_partition_phase_seconds_total",
                         {{"phase", "validate"}}),
                   0.25);
  // One series per phase; no dataset or job label.
  int series = 0;
  for (const auto& sample : samples) {
    if (sample.name != "backfill_partition_phase_seconds_total") continue;
    ++series;
    EXPECT_EQ(sample.labels.size(), 1u);
  }
  EXPECT_EQ(series, 4);
  EXPECT_THAT(text, Not(HasSubstr("bf-")));
  const std::string out = PromtoolCheck(text);
  if (out == "<no promtool>") GTEST_SKIP() << "promtool is not installed";
  EXPECT_EQ(out, "") << text;
}

Job RunningJob(int64_t pending, int64_t running, int64_t done, int64_t timed,
               double seconds) {
  Job job;
  job.state = JobState::kRunning;
  job.counts.pending = pending;
  job.counts.running = running;
  job.counts.staged = done;
  job.counts.total = pending + running + done;
  job.timed_partitions = timed;
  job.timed_seconds = seconds;
  return job;
}

TEST(MetricsTest, EtaIsTheLongestKnownAndUnknownJobsAreCounted) {
  Metrics metrics([] { return StoreStats(); }, "v");
  // No running jobs: no ETA sample, none unknown.
  auto samples = ParseSamples(metrics.Scrape());
  EXPECT_EQ(SumOf(samples, "backfill_running_jobs_eta_seconds"), -1);
  EXPECT_EQ(SumOf(samples, "backfill_running_jobs_eta_unknown"), 0);

  std::vector<Job> running;
  metrics.SetRunningJobs([&running] { return running; });
  // A job that has not recomputed a partition yet: unknown, not 0.
  running = {RunningJob(10, 2, 0, 0, 0)};
  samples = ParseSamples(metrics.Scrape());
  EXPECT_EQ(SumOf(samples, "backfill_running_jobs_eta_seconds"), -1);
  EXPECT_EQ(SumOf(samples, "backfill_running_jobs_eta_unknown"), 1);

  // 7 left, 2 at once: 4 waves of 10 s (4 partitions took 40 s) = 40 s.
  // 3 left, 1 running: 3 waves of 50 s (2 took 100 s) = 150 s.
  running.push_back(RunningJob(5, 2, 4, 4, 40));
  running.push_back(RunningJob(2, 1, 2, 2, 100));
  samples = ParseSamples(metrics.Scrape());
  EXPECT_EQ(SumOf(samples, "backfill_running_jobs_eta_seconds"), 150);
  EXPECT_EQ(SumOf(samples, "backfill_running_jobs_eta_unknown"), 1);
}

TEST(MetricsTest, GrpcCallsByMethodAndCodeWithBoundedNames) {
  Metrics metrics([] { return StoreStats(); }, "v");
  GrpcServerMetrics* grpc = metrics.grpc();
  grpc->Record("/backfill.v1.BackfillService/GetBackfill", "unary",
               grpc::StatusCode::OK, absl::Milliseconds(3));
  grpc->Record("/backfill.v1.BackfillService/GetBackfill", "unary",
               grpc::StatusCode::NOT_FOUND, absl::Milliseconds(1));
  grpc->Record("/backfill.v1.BackfillService/GetBackfill", "unary",
               grpc::StatusCode::NOT_FOUND, absl::Milliseconds(2));
  grpc->Record("/grpc.health.v1.Health/Check", "unary", grpc::StatusCode::OK,
               absl::Milliseconds(1));
  // The type comes from the proto, whatever the call reported.
  grpc->Record("/backfill.v1.BackfillService/WatchBackfill", "bidi_stream",
               grpc::StatusCode::CANCELLED, absl::Seconds(30));
  // Names no proto of the server declares share one series.
  grpc->Record("/evil.Service/bf-123", "unary", grpc::StatusCode::UNIMPLEMENTED,
               absl::Milliseconds(1));
  grpc->Record("/backfill.v1.BackfillService/NoSuchMethod", "unary",
               grpc::StatusCode::UNIMPLEMENTED, absl::Milliseconds(1));
  const std::string text = metrics.Scrape();
  const auto samples = ParseSamples(text);
  EXPECT_EQ(SumOf(samples, "grpc_server_handled_total",
                  {{"grpc_service", "backfill.v1.BackfillService"},
                   {"grpc_method", "GetBackfill"},
                   {"grpc_type", "unary"},
                   {"grpc_code", "NOT_FOUND"}}),
            2);
  EXPECT_EQ(SumOf(samples, "grpc_server_handled_total",
                  {{"grpc_method", "GetBackfill"}, {"grpc_code", "OK"}}),
            1);
  EXPECT_EQ(SumOf(samples, "grpc_server_handled_total",
                  {{"grpc_service", "grpc.health.v1.Health"},
                   {"grpc_method", "Check"}}),
            1);
  EXPECT_EQ(SumOf(samples, "grpc_server_handled_total",
                  {{"grpc_service", "unknown"}, {"grpc_method", "unknown"}}),
            2);
  EXPECT_EQ(SumOf(samples, "grpc_server_handling_seconds_count",
                  {{"grpc_method", "GetBackfill"}}),
            3);
  EXPECT_DOUBLE_EQ(SumOf(samples, "grpc_server_handling_seconds_sum",
                         {{"grpc_method", "GetBackfill"}}),
                   0.006);
  EXPECT_EQ(SumOf(samples, "grpc_server_handled_total",
                  {{"grpc_method", "WatchBackfill"},
                   {"grpc_type", "server_stream"},
                   {"grpc_code", "CANCELLED"}}),
            1);
  EXPECT_THAT(text, Not(HasSubstr("bidi_stream")));
  EXPECT_THAT(text, Not(HasSubstr("bf-123")));
  EXPECT_THAT(text, Not(HasSubstr("NoSuchMethod")));
}

TEST(MetricsTest, CodeNamesAreTheCanonicalOnes) {
  EXPECT_EQ(GrpcCodeName(grpc::StatusCode::OK), "OK");
  EXPECT_EQ(GrpcCodeName(grpc::StatusCode::INVALID_ARGUMENT),
            "INVALID_ARGUMENT");
  EXPECT_EQ(GrpcCodeName(grpc::StatusCode::FAILED_PRECONDITION),
            "FAILED_PRECONDITION");
  EXPECT_EQ(GrpcCodeName(grpc::StatusCode::UNAUTHENTICATED), "UNAUTHENTICATED");
  EXPECT_EQ(GrpcCodeName(static_cast<grpc::StatusCode>(99)), "UNKNOWN");
}

TEST(MetricsTest, PromtoolAcceptsEveryNewFamily) {
  Metrics metrics([] { return SomeStats(); }, "0.1.0");
  metrics.DeclareDatasets({"daily_revenue"});
  metrics.OnPartitionCheckpointed("daily_revenue", TaskState::kStaged, 3);
  metrics.OnJobPublished("bf-1", {Published("daily_revenue", 1, 3, 5, 50, 4)});
  metrics.OnCheckFailed("daily_revenue", "min_rows", CheckSeverity::kError);
  metrics.OnConsumerConfirmed("daily_revenue", "amount_cache", true,
                              absl::Seconds(1));
  std::vector<Job> running = {RunningJob(1, 1, 1, 1, 2)};
  metrics.SetRunningJobs([&running] { return running; });
  metrics.grpc()->Record("/backfill.v1.BackfillService/ListBackfills", "unary",
                         grpc::StatusCode::OK, absl::Milliseconds(1));
  const std::string text = metrics.Scrape();
  for (const char* family :
       {"process_cpu_seconds_total", "process_resident_memory_bytes",
        "process_virtual_memory_bytes", "process_open_fds", "process_max_fds",
        "process_start_time_seconds"}) {
    EXPECT_THAT(text, HasSubstr(absl::StrCat("# TYPE ", family, " ")));
  }
  const std::string out = PromtoolCheck(text);
  if (out == "<no promtool>") GTEST_SKIP() << "promtool is not installed";
  EXPECT_EQ(out, "") << text;
}

}  // namespace
}  // namespace server_metrics_test
}  // namespace backfill
