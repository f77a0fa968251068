// TaskTable: the partition tasks of one job as the runner keeps them in
// memory while the job is admitted, packed. A job may have a million
// tasks: a vector of PartitionTask costs 300 bytes and more per task (a
// dozen strings, its inputs), the table 40 bytes plus the characters of
// its partition and output fingerprint.
//
// Per task, in plan order (the order of the store's ListTasks), it keeps
// what running the job reads back: the dataset, the partition, the state,
// the attempts, the rows written, the output fingerprint, and the last
// error of a task that has one. It leaves out what only the store needs:
// the inputs a task read (recorded by its checkpoint, read back by the
// store when the job publishes its lineage), its duration, its update time
// and why it was planned. Task(i) therefore gives a PartitionTask without
// those: write it to the store only as a task that did not stage (its
// start, a failure, a reopening), or after setting them.
//
// Ownership: a value; the job that runs the tasks owns its table.
// Thread-safety: not thread-safe; the job table's lock guards a job's.

#ifndef BACKFILL_CORE_MODEL_TASK_TABLE_H_
#define BACKFILL_CORE_MODEL_TASK_TABLE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "core/model/job.h"

namespace backfill {

class TaskTable {
 public:
  TaskTable() = default;
  // The tasks of one job, in plan order (every task has the same job id).
  explicit TaskTable(const std::vector<PartitionTask>& tasks);

  // Room for `n` tasks of hour-sized partitions and fingerprints.
  void Reserve(size_t n);
  // Adds `task` after the others (a task of the same job).
  void Append(const PartitionTask& task);

  size_t size() const { return slots_.size(); }
  bool empty() const { return slots_.empty(); }
  const std::string& job_id() const { return job_id_; }

  const std::string& dataset(size_t i) const {
    return datasets_[slots_[i].dataset];
  }
  std::string_view partition(size_t i) const;
  TaskState state(size_t i) const { return slots_[i].state; }
  int attempts(size_t i) const { return slots_[i].attempts; }
  int64_t rows_written(size_t i) const { return slots_[i].rows_written; }
  std::string_view output_fingerprint(size_t i) const;
  // "" when the task has none.
  const std::string& last_error(size_t i) const;

  void set_state(size_t i, TaskState state) { slots_[i].state = state; }

  // Task i as a PartitionTask: job id, dataset, partition, state, attempts,
  // last error, rows written, output fingerprint and ordinal (i); no
  // inputs, duration, update time or reason.
  PartitionTask Task(size_t i) const;
  // Records what `task` says of task i: its state, attempts, last error,
  // rows written and output fingerprint (its dataset and partition must be
  // task i's).
  void Set(size_t i, const PartitionTask& task);

  // Bytes the table holds on the heap (for tests and the performance
  // suite).
  size_t HeapBytes() const;

 private:
  struct Slot {
    int64_t rows_written = 0;
    uint64_t fingerprint_at = 0;  // into fingerprints_
    int32_t attempts = 0;
    uint32_t fingerprint_size = 0;
    uint32_t dataset = 0;  // into datasets_
    TaskState state = TaskState::kPending;
  };

  std::string job_id_;
  std::vector<std::string> datasets_;
  absl::flat_hash_map<std::string, uint32_t> dataset_index_;
  std::vector<Slot> slots_;
  // The partitions, end to end: task i's ends at partition_end_[i].
  std::string partitions_;
  std::vector<uint64_t> partition_end_;
  // Output fingerprints, end to end. A task's new fingerprint is appended
  // (the old one's bytes stay): a fingerprint changes once per staging.
  std::string fingerprints_;
  absl::flat_hash_map<uint32_t, std::string> errors_;  // by task
};

}  // namespace backfill

#endif  // BACKFILL_CORE_MODEL_TASK_TABLE_H_
