#include "tests/testing/memory_job_row.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "core/model/task_tally.h"
#include "tests/testing/as_stored.h"

namespace backfill::testing {
namespace {

bool Contains(const std::vector<TaskState>& states, TaskState s) {
  return std::find(states.begin(), states.end(), s) != states.end();
}

}  // namespace

absl::StatusOr<MemoryJobRow> MemoryJobRow::Create(const Job& job, int64_t seq,
                                                  absl::Time now) {
  std::set<std::pair<std::string, std::string>> planned;
  for (const DatasetPlan& dp : job.plan.datasets) {
    for (const std::string& partition : dp.partitions) {
      if (!planned.insert({dp.dataset, partition}).second) {
        return absl::InvalidArgumentError(absl::StrCat("plan lists partition '",
                                                       partition, "' of ",
                                                       dp.dataset, " twice"));
      }
    }
  }
  const std::string id = absl::StrCat("bf-", seq);
  const absl::Time at = StoredTime(now);
  MemoryJobRow row;
  row.seq_ = seq;
  Job& stored = row.job_;
  stored.id = id;
  stored.state = JobState::kQueued;
  stored.request = job.request;
  stored.idempotency_key = job.idempotency_key;
  stored.request_fingerprint = job.request_fingerprint;
  stored.message = job.message;
  stored.approval_hold = job.approval_hold;
  stored.create_time = at;
  stored.update_time = at;
  stored.plan.cost = job.plan.cost;
  // As the SQLite store: the budget kept is the request's, no refusal.
  stored.plan.cost.max_cost = job.request.max_cost;
  stored.plan.cost.refused.clear();
  for (const DatasetPlan& dp : job.plan.datasets) {
    DatasetPlan kept;
    kept.dataset = dp.dataset;
    kept.reason = dp.reason;
    kept.transform_version = dp.transform_version;
    kept.cost = dp.cost;
    kept.cost.refused.clear();
    kept.partitions_from_history = dp.partitions_from_history;
    kept.estimate_source = dp.estimate_source;
    // As the SQLite store: the request's keys, on the target only.
    if (dp.dataset == job.request.dataset) kept.keys = job.request.keys;
    stored.plan.datasets.push_back(std::move(kept));
    for (size_t k = 0; k < dp.partitions.size(); ++k) {
      PartitionTask task;
      task.job_id = id;
      task.dataset = dp.dataset;
      task.partition = dp.partitions[k];
      task.update_time = at;
      row.task_index_[{dp.dataset, task.partition}] = row.tasks_.size();
      row.tasks_.push_back(std::move(task));
      row.task_reasons_.push_back(
          k < dp.partition_reasons.size() ? dp.partition_reasons[k] : "");
    }
  }
  return row;
}

Job MemoryJobRow::Read(bool with_partitions) const {
  Job job = job_;
  if (with_partitions) {
    // As the SQLite store: a dataset's partitions are its tasks, found by
    // name (the last plan entry of a name gets them).
    std::map<std::string, size_t> index;
    for (size_t i = 0; i < job.plan.datasets.size(); ++i) {
      index[job.plan.datasets[i].dataset] = i;
    }
    for (size_t k = 0; k < tasks_.size(); ++k) {
      auto it = index.find(tasks_[k].dataset);
      if (it == index.end()) continue;
      DatasetPlan& dp = job.plan.datasets[it->second];
      dp.partitions.push_back(tasks_[k].partition);
      dp.partition_reasons.push_back(task_reasons_[k]);
    }
  }
  TaskTally tally;
  for (const PartitionTask& t : tasks_) tally.Add(t);
  tally.FillIn(&job);
  return job;
}

std::vector<PartitionTask> MemoryJobRow::Select(const TaskQuery& query) const {
  std::vector<PartitionTask> out;
  for (size_t k = 0; k < tasks_.size(); ++k) {
    if (query.limit > 0 && out.size() >= static_cast<size_t>(query.limit)) {
      break;
    }
    const PartitionTask& t = tasks_[k];
    if (static_cast<int64_t>(k) <= query.after_ordinal) continue;
    if (!query.dataset.empty() && t.dataset != query.dataset) continue;
    if (!query.states.empty() && !Contains(query.states, t.state)) continue;
    out.push_back(t);
    out.back().ordinal = static_cast<int64_t>(k);
    out.back().reason = task_reasons_[k];
  }
  return out;
}

PartitionTask* MemoryJobRow::FindTask(const std::string& dataset,
                                      const std::string& partition) {
  auto it = task_index_.find({dataset, partition});
  return it == task_index_.end() ? nullptr : &tasks_[it->second];
}

void MemoryJobRow::Checkpoint(const PartitionTask& from, PartitionTask* task) {
  task->state = from.state;
  task->attempts = from.attempts;
  task->last_error = from.last_error;
  task->rows_written = from.rows_written;
  task->output_fingerprint = from.output_fingerprint;
  task->inputs = from.inputs;
  task->duration_seconds = from.duration_seconds;
  task->update_time = StoredTime(from.update_time);
}

int64_t MemoryJobRow::MoveTasks(const std::vector<TaskState>& from,
                                TaskState to, absl::Time now,
                                bool reset_attempts) {
  int64_t moved = 0;
  for (PartitionTask& t : tasks_) {
    if (!Contains(from, t.state)) continue;
    t.state = to;
    if (reset_attempts) t.attempts = 0;
    t.update_time = StoredTime(now);
    ++moved;
  }
  return moved;
}

void MemoryJobRow::Move(JobState from, JobState to, const std::string& message,
                        absl::Time now) {
  const absl::Time at = StoredTime(now);
  job_.state = to;
  job_.message = message;
  job_.update_time = at;
  if (to == JobState::kRunning && job_.start_time == absl::InfinitePast()) {
    job_.start_time = at;
  }
  if (IsTerminal(to)) {
    job_.end_time = at;
  } else if (IsTerminal(from)) {
    job_.end_time = absl::InfinitePast();  // a retry: not ended any more
  }
}

}  // namespace backfill::testing
