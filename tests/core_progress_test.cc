// Tests of core/progress: the ETA of a running job's recompute and its
// current step, against values worked out by hand.

#include "core/run/progress.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace backfill {
namespace core_progress_test {
namespace {

using ::testing::HasSubstr;

Job Running(int64_t pending, int64_t running, int64_t staged, int64_t timed,
            double seconds) {
  Job job;
  job.state = JobState::kRunning;
  job.counts.pending = pending;
  job.counts.running = running;
  job.counts.staged = staged;
  job.counts.total = pending + running + staged;
  job.timed_partitions = timed;
  job.timed_seconds = seconds;
  return job;
}

TEST(ProgressTest, EtaIsUnknownUntilAPartitionWasRecomputed) {
  EXPECT_FALSE(EstimateRecompute(Running(10, 2, 0, 0, 0)).has_value());
}

TEST(ProgressTest, EtaOnlyForRunningJobs) {
  Job job = Running(3, 0, 5, 5, 10);
  for (JobState state : {JobState::kQueued, JobState::kPaused,
                         JobState::kValidating, JobState::kSucceeded}) {
    job.state = state;
    EXPECT_FALSE(EstimateRecompute(job).has_value()) << JobStateName(state);
  }
}

TEST(ProgressTest, EtaIsWavesOfTheRunningPartitionsTimesTheMean) {
  // 5 pending + 2 running = 7 left, 2 at once: 4 waves; 4 partitions took
  // 40 s, 10 s each: 40 s.
  std::optional<RecomputeEta> eta = EstimateRecompute(Running(5, 2, 4, 4, 40));
  ASSERT_TRUE(eta.has_value());
  EXPECT_EQ(eta->remaining, absl::Seconds(40));
  EXPECT_EQ(eta->per_partition, absl::Seconds(10));
  EXPECT_EQ(eta->parallelism, 2);
  // 6 left, 3 at once: 2 waves of 1.5 s.
  eta = EstimateRecompute(Running(3, 3, 2, 2, 3));
  ASSERT_TRUE(eta.has_value());
  EXPECT_EQ(eta->remaining, absl::Seconds(3));
}

TEST(ProgressTest, NothingRunningCountsAsOneAtATime) {
  // Between two partitions nothing runs: 3 left one after the other, 20 s
  // each.
  std::optional<RecomputeEta> eta = EstimateRecompute(Running(3, 0, 1, 1, 20));
  ASSERT_TRUE(eta.has_value());
  EXPECT_EQ(eta->parallelism, 1);
  EXPECT_EQ(eta->remaining, absl::Seconds(60));
}

TEST(ProgressTest, NothingLeftIsZero) {
  std::optional<RecomputeEta> eta = EstimateRecompute(Running(0, 0, 4, 4, 8));
  ASSERT_TRUE(eta.has_value());
  EXPECT_EQ(eta->remaining, absl::ZeroDuration());
}

TEST(ProgressTest, CurrentStepNamesThePlaybookStep) {
  EXPECT_EQ(CurrentStep(Running(5, 2, 3, 3, 9)),
            "steps 2-3 of 6, pin inputs and recompute in staging: 2 running, "
            "5 pending, 3 of 10 done");
  Job job;
  job.state = JobState::kQueued;
  EXPECT_THAT(CurrentStep(job), HasSubstr("step 1 of 6"));
  job.state = JobState::kValidating;
  EXPECT_THAT(CurrentStep(job), HasSubstr("step 4 of 6"));
  job.state = JobState::kAwaitingApproval;
  EXPECT_THAT(CurrentStep(job), HasSubstr("approval"));
  job.state = JobState::kPublishing;
  EXPECT_THAT(CurrentStep(job), HasSubstr("step 5 of 6"));
  job.state = JobState::kConfirming;
  EXPECT_THAT(CurrentStep(job), HasSubstr("step 6 of 6"));
  job.state = JobState::kDownstreamUnhealthy;
  EXPECT_EQ(CurrentStep(job), "ended DOWNSTREAM_UNHEALTHY");
}

}  // namespace
}  // namespace core_progress_test
}  // namespace backfill
