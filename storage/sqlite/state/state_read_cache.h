// StateReadCache: what the SQLite state store keeps between reads of a
// job, so that reading one (GetBackfill, a watch, a listing) costs the
// same whatever its number of partitions:
//   - the sums over its tasks (core/model/task_tally.h), by job:
//     UpdateTasks moves its tasks' shares within them (a checkpoint keeps
//     them), every other write to a job's tasks forgets the job's entry
//     before it commits;
//   - its diff summed per dataset, by job, forgotten when the diff is
//     replaced;
//   - GetJobForReader's BASIC answer, by job, valid while no row of the
//     file has changed: kept with the connection's count of changed rows
//     when it was read, all forgotten once that count moves (any write
//     through the store, even one rolled back).
// A write by another connection to the file (PRAGMA data_version) forgets
// everything. Each part holds at most kMaxEntries entries (then emptied).
// Entries are only kept from reads of committed data, never inside a write
// transaction that may still roll back.
//
// Thread-compatible: the store calls it with its connection's mutex held.

#ifndef BACKFILL_STORAGE_SQLITE_STATE_STATE_READ_CACHE_H_
#define BACKFILL_STORAGE_SQLITE_STATE_STATE_READ_CACHE_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/model/diff.h"
#include "core/model/job.h"
#include "storage/sqlite/state/state_sql.h"
#include "storage/sqlite/state/state_tasks.h"

namespace backfill::sqlite_state {

class StateReadCache {
 public:
  static constexpr size_t kMaxEntries = 10000;

  // Forgets everything when another connection wrote to `db`'s file since
  // the last call.
  absl::Status CheckDataVersion(sqlite::Database* db);

  // The sums over job `id`'s tasks: kept ones, or computed and kept.
  absl::StatusOr<TaskTally> Tally(const StateDb& db, const std::string& id);
  void ForgetTally(const std::string& id);
  // For a write of `tasks`: takes the kept sums of their jobs out of the
  // cache, by job (nullopt for a job with none), to follow the write
  // (state_tasks.h, WriteTasks) and be kept again once it commits.
  std::map<std::string, std::optional<TaskTally>> TakeTallies(
      absl::Span<const PartitionTask> tasks);
  void KeepTallies(std::map<std::string, std::optional<TaskTally>> sums);

  // The job's diff summed per dataset (nullopt: none stored): kept, or
  // read and kept. NOT_FOUND for an unknown job.
  absl::StatusOr<std::optional<std::vector<DiffSummary>>> DiffSummaries(
      const StateDb& db, const std::string& job_id);
  void ForgetDiffSummaries(const std::string& job_id);

  // The BASIC answer kept for job `id` while the connection's count of
  // changed rows is `total_changes`, or null.
  const Job* ReaderAnswer(const std::string& id, int64_t total_changes);
  void KeepReaderAnswer(const std::string& id, const Job& job);

 private:
  absl::flat_hash_map<std::string, TaskTally> tallies_;
  absl::flat_hash_map<std::string, std::optional<std::vector<DiffSummary>>>
      diff_summaries_;
  absl::flat_hash_map<std::string, Job> reader_answers_;
  int64_t reader_answers_changes_ = -1;
  int64_t data_version_ = -1;
};

}  // namespace backfill::sqlite_state

#endif  // BACKFILL_STORAGE_SQLITE_STATE_STATE_READ_CACHE_H_
