#include "storage/sqlite/state/state_read_cache.h"

#include <optional>
#include <utility>
#include <vector>

#include "core/base/status_macros.h"
#include "storage/sqlite/state/state_lineage.h"

namespace backfill::sqlite_state {

absl::Status StateReadCache::CheckDataVersion(sqlite::Database* db) {
  // Another connection's write to the file may have changed any job.
  ASSIGN_OR_RETURN(int64_t version, db->QueryInt("PRAGMA data_version"));
  if (version != data_version_) {
    tallies_.clear();
    diff_summaries_.clear();
    reader_answers_.clear();
    data_version_ = version;
  }
  return absl::OkStatus();
}

absl::StatusOr<TaskTally> StateReadCache::Tally(const StateDb& db,
                                                const std::string& id) {
  RETURN_IF_ERROR(CheckDataVersion(db.db));
  auto it = tallies_.find(id);
  if (it != tallies_.end()) return it->second;
  ASSIGN_OR_RETURN(TaskTally tally, ComputeTaskTally(db, id));
  if (tallies_.size() >= kMaxEntries) tallies_.clear();
  tallies_[id] = tally;
  return tally;
}

void StateReadCache::ForgetTally(const std::string& id) { tallies_.erase(id); }

std::map<std::string, std::optional<TaskTally>> StateReadCache::TakeTallies(
    absl::Span<const PartitionTask> tasks) {
  std::map<std::string, std::optional<TaskTally>> out;
  for (const PartitionTask& task : tasks) {
    auto [sums, first] = out.try_emplace(task.job_id);
    if (!first) continue;
    auto kept = tallies_.find(task.job_id);
    if (kept == tallies_.end()) continue;
    sums->second = std::move(kept->second);
    tallies_.erase(kept);
  }
  return out;
}

void StateReadCache::KeepTallies(
    std::map<std::string, std::optional<TaskTally>> sums) {
  for (auto& [job, kept] : sums) {
    if (kept.has_value()) tallies_[job] = *std::move(kept);
  }
}

absl::StatusOr<std::optional<std::vector<DiffSummary>>>
StateReadCache::DiffSummaries(const StateDb& db, const std::string& job_id) {
  RETURN_IF_ERROR(CheckDataVersion(db.db));
  auto it = diff_summaries_.find(job_id);
  if (it != diff_summaries_.end()) return it->second;
  // Summed as the partitions are read, never all in memory: a job's diff
  // may hold a million.
  std::vector<std::optional<DiffSummary>> sums;
  ASSIGN_OR_RETURN(std::optional<JobDiff> diff,
                   LoadJobDiff(db, job_id, "", /*with_samples=*/false,
                               [&sums](size_t i, const DatasetDiff& dataset,
                                       PartitionDiff&& p) {
                                 if (sums.size() <= i) sums.resize(i + 1);
                                 // `dataset` has no partitions: its empty
                                 // summary.
                                 if (!sums[i].has_value())
                                   sums[i] = Summarize(dataset);
                                 AddToSummary(p, &*sums[i]);
                               }));
  std::optional<std::vector<DiffSummary>> out;
  if (diff.has_value()) {
    out.emplace();
    for (size_t i = 0; i < diff->datasets.size(); ++i) {
      out->push_back(i < sums.size() && sums[i].has_value()
                         ? *std::move(sums[i])
                         : Summarize(diff->datasets[i]));
    }
  }
  if (diff_summaries_.size() >= kMaxEntries) diff_summaries_.clear();
  diff_summaries_[job_id] = out;
  return out;
}

void StateReadCache::ForgetDiffSummaries(const std::string& job_id) {
  diff_summaries_.erase(job_id);
}

const Job* StateReadCache::ReaderAnswer(const std::string& id,
                                        int64_t total_changes) {
  if (total_changes != reader_answers_changes_) {
    reader_answers_.clear();
    reader_answers_changes_ = total_changes;
  }
  auto it = reader_answers_.find(id);
  return it == reader_answers_.end() ? nullptr : &it->second;
}

void StateReadCache::KeepReaderAnswer(const std::string& id, const Job& job) {
  if (reader_answers_.size() >= kMaxEntries) reader_answers_.clear();
  reader_answers_[id] = job;
}

}  // namespace backfill::sqlite_state
