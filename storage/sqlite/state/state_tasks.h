// State tasks: a job's partition tasks in the SQLite state store's file
// (table tasks), one per planned (dataset, partition), each the
// checkpoint of its partition: state, attempts, error, rows, output and
// input fingerprints, duration. A task's ordinal is its place in the plan
// (datasets in plan order, then partitions); the plan's partition lists
// are read back from the tasks in that order. Also the sums over a job's
// tasks that a read of the job shows (core/model/task_tally.h).
//
// Free functions in the caller's transaction (see state_sql.h); every
// record read is checked against its checksum (DATA_LOSS naming the task
// when it fails), every record written is sealed with one.

#ifndef BACKFILL_STORAGE_SQLITE_STATE_STATE_TASKS_H_
#define BACKFILL_STORAGE_SQLITE_STATE_STATE_TASKS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "core/model/job.h"
#include "core/model/task_tally.h"
#include "core/ports/state_store.h"
#include "storage/sqlite/state/state_sql.h"

namespace backfill::sqlite_state {

// The sums over the tasks of job `id` (zero for a job without tasks).
absl::StatusOr<TaskTally> ComputeTaskTally(const StateDb& db,
                                           const std::string& id);

// Writes one PENDING task per planned (dataset, partition) of `plan` for
// job `id`, numbered in plan order, with its partition reason.
// INVALID_ARGUMENT when the plan lists a partition of a dataset twice.
absl::Status InsertTasks(const StateDb& db, const std::string& id,
                         const Plan& plan, absl::Time now);

// Fills each dataset's partitions and partition_reasons of `plan` (the
// plan of job `id`) from its tasks, in plan order. A dataset listed twice
// in the plan gets them in its last entry.
absl::Status ReadPlannedPartitions(const StateDb& db, const std::string& id,
                                   Plan* plan);

// StateStore::UpdateTasks: writes each task's checkpoint; NOT_FOUND when
// one does not exist. `sums` holds, by job, the sums the caller keeps for
// the jobs of `tasks` (nullopt: none): each task's share moves within its
// job's sums (out as it was, in as written), so that they stay right
// without a new pass over the job's tasks; a job whose task cannot be read
// before its write has its sums reset to nullopt.
absl::Status WriteTasks(const StateDb& db,
                        absl::Span<const PartitionTask> tasks,
                        std::map<std::string, std::optional<TaskTally>>* sums);

// StateStore::UpdateTasksInState (with `from` not empty).
absl::StatusOr<int64_t> UpdateTasksInState(const StateDb& db,
                                           const std::string& job_id,
                                           const std::vector<TaskState>& from,
                                           TaskState to, absl::Time now);

// A retry's reset: every FAILED, CANCELLED or RUNNING task of the job
// PENDING with no attempts. Returns how many.
absl::StatusOr<int64_t> ResetTasksForRetry(const StateDb& db,
                                           const std::string& job_id,
                                           absl::Time now);

// A publication's: every STAGED task of the job PUBLISHED.
absl::Status PublishStagedTasks(const StateDb& db, const std::string& job_id,
                                absl::Time now);

// StateStore::ListTasks and ListTaskPage.
absl::StatusOr<std::vector<PartitionTask>> ListTasks(const StateDb& db,
                                                     const std::string& job_id);
absl::StatusOr<std::vector<PartitionTask>> ListTaskPage(const StateDb& db,
                                                        const TaskQuery& query);

}  // namespace backfill::sqlite_state

#endif  // BACKFILL_STORAGE_SQLITE_STATE_STATE_TASKS_H_
