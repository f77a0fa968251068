#include "core/model/task_tally.h"

namespace backfill {
namespace {

// The count of `counts` that tasks in `state` add to.
int64_t* CountOf(TaskState state, PartitionCounts* counts) {
  switch (state) {
    case TaskState::kPending:
      return &counts->pending;
    case TaskState::kRunning:
      return &counts->running;
    case TaskState::kStaged:
      return &counts->staged;
    case TaskState::kPublished:
      return &counts->published;
    case TaskState::kFailed:
      return &counts->failed;
    case TaskState::kCancelled:
      return &counts->cancelled;
    case TaskState::kUnchanged:
      return &counts->unchanged;
    case TaskState::kSkipped:
      return &counts->skipped;
  }
  return &counts->pending;  // not reached: every state is listed
}

}  // namespace

bool CountsInputRows(TaskState state) {
  return state == TaskState::kStaged || state == TaskState::kPublished ||
         state == TaskState::kUnchanged;
}

bool CountsRowsWritten(TaskState state) {
  return state == TaskState::kStaged || state == TaskState::kPublished;
}

void TaskTally::Add(const std::string& dataset, TaskState state, int64_t n,
                    double input_rows, double rows, int64_t timed,
                    double seconds) {
  counts.total += n;
  *CountOf(state, &counts) += n;
  std::pair<int64_t, double>& of_dataset = by_dataset[dataset];
  of_dataset.first += n;
  if (CountsInputRows(state)) {
    actual_cost += input_rows;
    of_dataset.second += input_rows;
    timed_partitions += timed;
    timed_seconds += seconds;
  }
  if (CountsRowsWritten(state)) rows_written += static_cast<int64_t>(rows);
}

void TaskTally::Add(const PartitionTask& task, int sign) {
  int64_t input_rows = 0;
  for (const InputFingerprint& in : task.inputs) input_rows += in.rows;
  const bool timed = task.duration_seconds > 0;
  Add(task.dataset, task.state, sign, sign * static_cast<double>(input_rows),
      sign * static_cast<double>(task.rows_written), timed ? sign : 0,
      timed ? sign * task.duration_seconds : 0);
}

void TaskTally::FillIn(Job* job) const {
  job->counts = counts;
  job->actual_cost = actual_cost;
  job->rows_written = rows_written;
  job->timed_partitions = timed_partitions;
  job->timed_seconds = timed_seconds;
  for (DatasetPlan& dp : job->plan.datasets) {
    auto d = by_dataset.find(dp.dataset);
    if (d == by_dataset.end()) continue;
    dp.partition_count = d->second.first;
    dp.actual_cost = d->second.second;
  }
}

}  // namespace backfill
