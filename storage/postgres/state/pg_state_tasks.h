// The partition tasks of the PostgreSQL state store (table
// backfill_state.tasks): written with a job, checkpointed by UpdateTasks,
// moved in bulk on retry, recovery, cancel and publish, and read in plan
// order. The SQL of storage/sqlite/state/state_tasks.h on PostgreSQL; the
// count of tasks per job and state (task_state_counts) is kept by the
// schema's triggers, per job so that two jobs' writes never wait for each
// other.
//
// Free functions over the connection of the caller's transaction
// (pg_state_sql.h). Ownership: none; the connection is the caller's, for
// the call. Thread-safety: no state of their own; thread-safe as far as
// each connection is used by one thread at a time.

#ifndef BACKFILL_STORAGE_POSTGRES_STATE_PG_STATE_TASKS_H_
#define BACKFILL_STORAGE_POSTGRES_STATE_PG_STATE_TASKS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/model/job.h"
#include "core/model/task_tally.h"
#include "core/ports/state_store.h"
#include "storage/postgres/state/pg_state_sql.h"

namespace backfill::pg_state {

// The sums over job `id`'s tasks (counts, rows, times per dataset).
absl::StatusOr<TaskTally> ComputeTaskTally(PgConnection* conn,
                                           const std::string& id);

// One PENDING task per planned (dataset, partition) of job `id`, numbered
// in plan order; INVALID_ARGUMENT for a partition listed twice.
absl::Status InsertTasks(PgConnection* conn, const std::string& id,
                         const Plan& plan, absl::Time now);

// Fills in each dataset's partitions and their reasons, in plan order.
absl::Status ReadPlannedPartitions(PgConnection* conn, const std::string& id,
                                   Plan* plan);

// The checkpoint of each task; NOT_FOUND for a task that does not exist.
absl::Status WriteTasks(PgConnection* conn,
                        const std::vector<PartitionTask>& tasks);

absl::StatusOr<int64_t> UpdateTasksInState(PgConnection* conn,
                                           const std::string& job_id,
                                           const std::vector<TaskState>& from,
                                           TaskState to, absl::Time now);

// FAILED, CANCELLED and RUNNING tasks PENDING again, attempts reset.
absl::StatusOr<int64_t> ResetTasksForRetry(PgConnection* conn,
                                           const std::string& job_id,
                                           absl::Time now);

// Every STAGED task of the job PUBLISHED.
absl::Status PublishStagedTasks(PgConnection* conn, const std::string& job_id,
                                absl::Time now);

absl::StatusOr<std::vector<PartitionTask>> ListTasks(PgConnection* conn,
                                                     const std::string& job_id);
absl::StatusOr<std::vector<PartitionTask>> ListTaskPage(PgConnection* conn,
                                                        const TaskQuery& query);

}  // namespace backfill::pg_state

#endif  // BACKFILL_STORAGE_POSTGRES_STATE_PG_STATE_TASKS_H_
