#include "core/model/task_table.h"

#include <utility>

#include "absl/container/flat_hash_map.h"

namespace backfill {

TaskTable::TaskTable(const std::vector<PartitionTask>& tasks) {
  slots_.reserve(tasks.size());
  partition_end_.reserve(tasks.size());
  size_t partition_bytes = 0, fingerprint_bytes = 0;
  for (const PartitionTask& t : tasks) {
    partition_bytes += t.partition.size();
    fingerprint_bytes += t.output_fingerprint.size();
  }
  partitions_.reserve(partition_bytes);
  fingerprints_.reserve(fingerprint_bytes);
  for (const PartitionTask& t : tasks) Append(t);
}

void TaskTable::Reserve(size_t n) {
  // An hour partition is 13 characters, a fingerprint 16.
  slots_.reserve(n);
  partition_end_.reserve(n);
  partitions_.reserve(n * 13);
  fingerprints_.reserve(n * 16);
}

void TaskTable::Append(const PartitionTask& task) {
  if (slots_.empty()) job_id_ = task.job_id;
  auto [it, added] = dataset_index_.try_emplace(
      task.dataset, static_cast<uint32_t>(datasets_.size()));
  if (added) datasets_.push_back(task.dataset);
  Slot slot;
  slot.dataset = it->second;
  slots_.push_back(slot);
  partitions_ += task.partition;
  partition_end_.push_back(partitions_.size());
  Set(slots_.size() - 1, task);
}

std::string_view TaskTable::partition(size_t i) const {
  const uint64_t begin = i == 0 ? 0 : partition_end_[i - 1];
  return std::string_view(partitions_).substr(begin, partition_end_[i] - begin);
}

std::string_view TaskTable::output_fingerprint(size_t i) const {
  const Slot& s = slots_[i];
  return std::string_view(fingerprints_)
      .substr(s.fingerprint_at, s.fingerprint_size);
}

const std::string& TaskTable::last_error(size_t i) const {
  static const std::string* const kNone = new std::string();
  auto it = errors_.find(static_cast<uint32_t>(i));
  return it == errors_.end() ? *kNone : it->second;
}

PartitionTask TaskTable::Task(size_t i) const {
  PartitionTask t;
  t.job_id = job_id_;
  t.dataset = dataset(i);
  t.partition = std::string(partition(i));
  t.state = slots_[i].state;
  t.attempts = slots_[i].attempts;
  t.last_error = last_error(i);
  t.rows_written = slots_[i].rows_written;
  t.output_fingerprint = std::string(output_fingerprint(i));
  t.ordinal = static_cast<int64_t>(i);
  return t;
}

void TaskTable::Set(size_t i, const PartitionTask& task) {
  Slot& s = slots_[i];
  s.state = task.state;
  s.attempts = task.attempts;
  s.rows_written = task.rows_written;
  if (output_fingerprint(i) != task.output_fingerprint) {
    s.fingerprint_at = fingerprints_.size();
    s.fingerprint_size = static_cast<uint32_t>(task.output_fingerprint.size());
    fingerprints_ += task.output_fingerprint;
  }
  if (task.last_error.empty()) {
    errors_.erase(static_cast<uint32_t>(i));
  } else {
    errors_[static_cast<uint32_t>(i)] = task.last_error;
  }
}

size_t TaskTable::HeapBytes() const {
  size_t bytes = slots_.capacity() * sizeof(Slot) +
                 partition_end_.capacity() * sizeof(uint64_t) +
                 partitions_.capacity() + fingerprints_.capacity() +
                 datasets_.capacity() * sizeof(std::string);
  for (const std::string& d : datasets_) bytes += d.capacity();
  bytes += errors_.capacity() * (sizeof(uint32_t) + sizeof(std::string) + 1);
  for (const auto& [i, e] : errors_) bytes += e.capacity();
  return bytes;
}

}  // namespace backfill
