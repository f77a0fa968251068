// Tests of server/metrics: names, labels and values of a scrape, the HTTP
// exposer, and (when promtool is installed) `promtool check metrics`.

#include <stdio.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/metrics.h"

namespace backfill {
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
  EXPECT_THAT(text, HasSubstr("backfill_cost_estimated_input_rows_total 100"));
  EXPECT_THAT(text, HasSubstr("backfill_cost_actual_input_rows_total 90"));
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

TEST(MetricsTest, ListenFailsClearlyOnABadAddress) {
  Metrics first([] { return StoreStats(); }, "v");
  ASSERT_TRUE(first.Listen("127.0.0.1:0").ok());
  Metrics second([] { return StoreStats(); }, "v");
  absl::Status status = second.Listen(absl::StrCat("127.0.0.1:", first.port()));
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_THAT(status.message(), HasSubstr("--metrics-listen"));
}

}  // namespace
}  // namespace backfill
