// MemoryJobRow: one job of the in-memory state store (memory_state_store.h)
// as it keeps it, with what SqliteStateStore keeps of a job: the request,
// state, message and times (as stored, as_stored.h), the plan's datasets
// with their reasons, versions and costs (the request's budget, no
// refusal; the request's entity keys on the target only), and one task per
// planned (dataset, partition) in plan order with its reason. A read
// assembles the job as the SQLite store does: the plan's partition lists
// from the tasks, the figures summed over them (core/model/task_tally.h).
//
// Thread-compatible: the store calls it with its own mutex held.

#ifndef BACKFILL_TESTS_TESTING_MEMORY_JOB_ROW_H_
#define BACKFILL_TESTS_TESTING_MEMORY_JOB_ROW_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/model/job.h"
#include "core/ports/state_store.h"

namespace backfill::testing {

class MemoryJobRow {
 public:
  // Job "bf-<seq>", QUEUED, created at `now` from `job` (its id, state and
  // figures are the store's, not the caller's). INVALID_ARGUMENT when the
  // plan lists a partition of a dataset twice.
  static absl::StatusOr<MemoryJobRow> Create(const Job& job, int64_t seq,
                                             absl::Time now);

  int64_t seq() const { return seq_; }
  // The stored fields: the plan's datasets without partitions, no figures.
  const Job& job() const { return job_; }
  Job& mutable_job() { return job_; }
  const std::vector<PartitionTask>& tasks() const { return tasks_; }

  // The job as read: with its plan's partition lists when
  // `with_partitions`, its figures summed over its tasks.
  Job Read(bool with_partitions) const;

  // The tasks `query` selects (its job id aside), in plan order, each with
  // its ordinal and reason.
  std::vector<PartitionTask> Select(const TaskQuery& query) const;

  // The task of (dataset, partition), or null.
  PartitionTask* FindTask(const std::string& dataset,
                          const std::string& partition);
  // Writes the checkpoint of `from` (state, attempts, error, rows,
  // fingerprints, inputs, duration, time) into `task`.
  static void Checkpoint(const PartitionTask& from, PartitionTask* task);
  // Moves every task in one of `from` to `to` at `now`, with no attempts
  // when `reset_attempts`; returns how many moved.
  int64_t MoveTasks(const std::vector<TaskState>& from, TaskState to,
                    absl::Time now, bool reset_attempts = false);

  // The job's fields a move sets: its state and message, start_time on the
  // first move to RUNNING, end_time on a move to a terminal state (and
  // none any more on a move out of one).
  void Move(JobState from, JobState to, const std::string& message,
            absl::Time now);

 private:
  MemoryJobRow() = default;

  int64_t seq_ = 0;
  Job job_;
  std::vector<PartitionTask> tasks_;       // plan order
  std::vector<std::string> task_reasons_;  // aligned with tasks_
  std::map<std::pair<std::string, std::string>, size_t> task_index_;
};

}  // namespace backfill::testing

#endif  // BACKFILL_TESTS_TESTING_MEMORY_JOB_ROW_H_
