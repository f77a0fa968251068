// TaskTally: which tasks count in a job's figures, whether added one task
// at a time or by groups of tasks, and taken out again.

#include <string>

#include "core/model/job.h"
#include "core/model/task_tally.h"
#include "gtest/gtest.h"

namespace backfill {
namespace core_task_tally_test {
namespace {

PartitionTask Task(const std::string& dataset, TaskState state,
                   int64_t input_rows, int64_t rows_written, double duration) {
  PartitionTask t;
  t.dataset = dataset;
  t.partition = "2025-01-01";
  t.state = state;
  t.inputs = {{"orders", "2025-01-01", "f", input_rows - 1}, {"c", "", "g", 1}};
  t.rows_written = rows_written;
  t.duration_seconds = duration;
  return t;
}

TEST(TaskTallyTest, RecomputedTasksCountTheirInputsAndOnlyWrittenOnesRows) {
  TaskTally tally;
  tally.Add(Task("daily", TaskState::kPending, 100, 9, 1.0));
  tally.Add(Task("daily", TaskState::kStaged, 10, 3, 0.5));
  tally.Add(Task("daily", TaskState::kPublished, 20, 4, 0));
  tally.Add(Task("monthly", TaskState::kUnchanged, 30, 5, 1.5));
  tally.Add(Task("monthly", TaskState::kSkipped, 40, 6, 2.0));
  tally.Add(Task("monthly", TaskState::kFailed, 50, 7, 3.0));
  EXPECT_EQ(tally.counts.total, 6);
  EXPECT_EQ(tally.counts.pending, 1);
  EXPECT_EQ(tally.counts.staged, 1);
  EXPECT_EQ(tally.counts.published, 1);
  EXPECT_EQ(tally.counts.unchanged, 1);
  EXPECT_EQ(tally.counts.skipped, 1);
  EXPECT_EQ(tally.counts.failed, 1);
  EXPECT_EQ(tally.actual_cost, 60);  // staged, published, unchanged
  EXPECT_EQ(tally.rows_written, 7);  // staged, published
  EXPECT_EQ(tally.timed_partitions, 2);
  EXPECT_EQ(tally.timed_seconds, 2.0);

  Job job;
  DatasetPlan daily, monthly;
  daily.dataset = "daily";
  monthly.dataset = "monthly";
  job.plan.datasets = {daily, monthly};
  tally.FillIn(&job);
  EXPECT_EQ(job.counts.total, 6);
  EXPECT_EQ(job.actual_cost, 60);
  EXPECT_EQ(job.rows_written, 7);
  EXPECT_EQ(job.timed_partitions, 2);
  EXPECT_EQ(job.plan.datasets[0].partition_count, 3);
  EXPECT_EQ(job.plan.datasets[0].actual_cost, 30);
  EXPECT_EQ(job.plan.datasets[1].partition_count, 3);
  EXPECT_EQ(job.plan.datasets[1].actual_cost, 30);
}

TEST(TaskTallyTest, AGroupCountsAsItsTasksAndATaskIsTakenOutAgain) {
  TaskTally one_by_one, grouped;
  one_by_one.Add(Task("daily", TaskState::kStaged, 10, 3, 0.5));
  one_by_one.Add(Task("daily", TaskState::kStaged, 20, 4, 0));
  grouped.Add("daily", TaskState::kStaged, 2, 30, 7, 1, 0.5);
  EXPECT_EQ(one_by_one.counts.staged, grouped.counts.staged);
  EXPECT_EQ(one_by_one.actual_cost, grouped.actual_cost);
  EXPECT_EQ(one_by_one.rows_written, grouped.rows_written);
  EXPECT_EQ(one_by_one.timed_partitions, grouped.timed_partitions);
  EXPECT_EQ(one_by_one.by_dataset, grouped.by_dataset);

  // A checkpoint: the task's share out as it was, in as it is now.
  PartitionTask before = Task("daily", TaskState::kStaged, 10, 3, 0.5);
  PartitionTask after = Task("daily", TaskState::kPublished, 12, 3, 0.75);
  grouped.Add(before, -1);
  grouped.Add(after);
  EXPECT_EQ(grouped.counts.total, 2);
  EXPECT_EQ(grouped.counts.staged, 1);
  EXPECT_EQ(grouped.counts.published, 1);
  EXPECT_EQ(grouped.actual_cost, 32);
  EXPECT_EQ(grouped.timed_partitions, 1);
  EXPECT_EQ(grouped.timed_seconds, 0.75);
  EXPECT_EQ(grouped.by_dataset["daily"].first, 2);
}

}  // namespace
}  // namespace core_task_tally_test
}  // namespace backfill
