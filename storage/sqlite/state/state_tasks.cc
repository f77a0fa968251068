#include "storage/sqlite/state/state_tasks.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/model/transition_guard.h"
#include "storage/sqlite/state/state_encoding.h"
#include "storage/sqlite/state/state_record_checksums.h"

namespace backfill::sqlite_state {
namespace {

namespace sr = state_records;

using sqlite::Statement;

// A job's tasks are read in the order of the primary key (job_id, dataset,
// partition): a range scan of the table. Their plan order is their ordinal
// (0, 1, ... as InsertTasks numbers them), but ORDER BY ordinal goes
// through tasks_by_job_ordinal and searches the table once per task for the
// other columns, three times as long for a large job. InPlanOrder sorts
// what was read (usually in plan order already: a plan sorts each
// dataset's partitions). The ORDER BY below names the key, so the planner
// keeps to it.
constexpr char kTasksOfJobInKeyOrder[] = " ORDER BY dataset, \"partition\"";

template <typename T>
void InPlanOrder(std::vector<T>* items) {
  auto by_ordinal = [](const T& a, const T& b) {
    return a.ordinal < b.ordinal;
  };
  if (!std::is_sorted(items->begin(), items->end(), by_ordinal)) {
    std::sort(items->begin(), items->end(), by_ordinal);
  }
}

// The columns ReadTaskRow reads, in its order.
constexpr char kTaskColumns[] =
    "job_id, dataset, \"partition\", state, attempts, last_error, "
    "rows_written, output_fingerprint, inputs, duration_seconds, "
    "update_time, ordinal, reason";

// kTaskColumns and whether the record is intact (column 13).
const std::string& TaskColumnsChecked() {
  static const std::string& sql =
      Once(absl::StrCat(kTaskColumns, ", ", sr::IntactSql(sr::Tasks())));
  return sql;
}

// A row of TaskColumnsChecked(); DATA_LOSS naming the task when its record
// fails its checksum.
absl::StatusOr<PartitionTask> ReadTaskRow(const Statement& q,
                                          std::string_view path) {
  if (q.ColumnInt(13) != 1) {
    return sr::Damaged(
        sr::TaskRecord(q.ColumnText(0), q.ColumnText(1), q.ColumnText(2)),
        path);
  }
  PartitionTask t;
  t.job_id = q.ColumnText(0);
  t.dataset = q.ColumnText(1);
  t.partition = q.ColumnText(2);
  ASSIGN_OR_RETURN(t.state, ParseTaskState(q.ColumnText(3)));
  t.attempts = static_cast<int>(q.ColumnInt(4));
  t.last_error = q.ColumnText(5);
  t.rows_written = q.ColumnInt(6);
  t.output_fingerprint = q.ColumnText(7);
  ASSIGN_OR_RETURN(t.inputs, DecodeInputs(q.ColumnText(8)));
  t.duration_seconds = q.ColumnDouble(9);
  t.update_time = ColumnTime(q, 10);
  t.ordinal = q.ColumnInt(11);
  t.reason = q.ColumnText(12);
  return t;
}

// Every row of `q` (which selects TaskColumnsChecked()), appended to `out`.
absl::Status ReadTaskRows(Statement& q, std::string_view path,
                          std::vector<PartitionTask>* out) {
  while (true) {
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) return absl::OkStatus();
    ASSIGN_OR_RETURN(PartitionTask t, ReadTaskRow(q, path));
    out->push_back(std::move(t));
  }
}

// Moves `task`'s share of `sums` from the task as stored to `task`; resets
// `sums` when the task cannot be read.
absl::Status MoveTaskShare(const StateDb& db, const PartitionTask& task,
                           std::optional<TaskTally>* sums) {
  static const std::string& kSql = Once(absl::StrCat(
      "SELECT state, input_rows, rows_written, duration_seconds, ",
      sr::IntactSql(sr::Tasks()),
      " FROM tasks WHERE job_id = ?1 AND dataset = ?2 AND \"partition\" "
      "= ?3"));
  ASSIGN_OR_RETURN(Statement q, db.db->PrepareCached(kSql));
  RETURN_IF_ERROR(q.BindText(1, task.job_id));
  RETURN_IF_ERROR(q.BindText(2, task.dataset));
  RETURN_IF_ERROR(q.BindText(3, task.partition));
  ASSIGN_OR_RETURN(bool row, q.Step());
  if (row && q.ColumnInt(4) != 1) {
    return sr::Damaged(
        sr::TaskRecord(task.job_id, task.dataset, task.partition), db.path);
  }
  absl::StatusOr<TaskState> was = row ? ParseTaskState(q.ColumnText(0))
                                      : absl::NotFoundError("no such task");
  if (!was.ok()) {
    sums->reset();
    return absl::OkStatus();
  }
  const double duration = q.ColumnDouble(3);
  (*sums)->Add(task.dataset, *was, -1, -static_cast<double>(q.ColumnInt(1)),
               -static_cast<double>(q.ColumnInt(2)), duration > 0 ? -1 : 0,
               duration > 0 ? -duration : 0);
  (*sums)->Add(task, +1);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TaskTally> ComputeTaskTally(const StateDb& db,
                                           const std::string& id) {
  // One pass over the job's tasks, grouped by dataset and state; which
  // states count their input rows, rows written and time is TaskTally's.
  TaskTally out;
  // With the count of the tasks whose records fail their checksums: the
  // sums would be wrong.
  static const std::string& kSql = Once(absl::StrCat(
      "SELECT dataset, state, COUNT(*), TOTAL(input_rows), "
      "TOTAL(rows_written), TOTAL(duration_seconds > 0), "
      "TOTAL(CASE WHEN duration_seconds > 0 THEN duration_seconds END), "
      "TOTAL(",
      sr::DamagedSql(sr::Tasks()),
      ") FROM tasks WHERE job_id = ?1 GROUP BY dataset, state"));
  ASSIGN_OR_RETURN(Statement q, db.db->PrepareCached(kSql));
  RETURN_IF_ERROR(q.BindText(1, id));
  bool damaged = false;
  while (true) {
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) break;
    if (q.ColumnDouble(7) > 0) {
      damaged = true;
      break;
    }
    ASSIGN_OR_RETURN(TaskState state, ParseTaskState(q.ColumnText(1)));
    out.Add(q.ColumnText(0), state, q.ColumnInt(2), q.ColumnDouble(3),
            q.ColumnDouble(4), static_cast<int64_t>(q.ColumnDouble(5)),
            q.ColumnDouble(6));
  }
  if (damaged) {
    static const std::string& kWhich = Once(
        absl::StrCat("SELECT dataset, \"partition\" FROM tasks WHERE job_id = "
                     "?1 AND ",
                     sr::DamagedSql(sr::Tasks()), " LIMIT 1"));
    ASSIGN_OR_RETURN(Statement which, db.db->PrepareCached(kWhich));
    RETURN_IF_ERROR(which.BindText(1, id));
    ASSIGN_OR_RETURN(bool row, which.Step());
    if (row) {
      return sr::Damaged(
          sr::TaskRecord(id, which.ColumnText(0), which.ColumnText(1)),
          db.path);
    }
    return sr::Damaged(absl::StrCat("a task record of job ", id), db.path);
  }
  return out;
}

absl::Status InsertTasks(const StateDb& db, const std::string& id,
                         const Plan& plan, absl::Time now) {
  static const std::string& kInsertTask = Once(absl::StrCat(
      "INSERT INTO tasks (job_id, dataset, \"partition\", ordinal, state, "
      "update_time, reason, checksum) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ",
      sr::InsertSql(sr::Tasks(), {{"job_id", "?1"},
                                  {"dataset", "?2"},
                                  {"partition", "?3"},
                                  {"ordinal", "?4"},
                                  {"state", "?5"},
                                  {"attempts", "0"},
                                  {"last_error", "''"},
                                  {"rows_written", "0"},
                                  {"output_fingerprint", "''"},
                                  {"inputs", "''"},
                                  {"input_rows", "0"},
                                  {"duration_seconds", "0.0"},
                                  {"update_time", "?6"},
                                  {"reason", "?7"}}),
      ")"));
  ASSIGN_OR_RETURN(Statement task, db.db->PrepareCached(kInsertTask));
  int64_t ordinal = 0;
  for (const DatasetPlan& dp : plan.datasets) {
    for (size_t k = 0; k < dp.partitions.size(); ++k) {
      const std::string& partition = dp.partitions[k];
      RETURN_IF_ERROR(task.Reset());
      RETURN_IF_ERROR(task.BindText(1, id));
      RETURN_IF_ERROR(task.BindText(2, dp.dataset));
      RETURN_IF_ERROR(task.BindText(3, partition));
      RETURN_IF_ERROR(task.BindInt(4, ordinal++));
      RETURN_IF_ERROR(task.BindText(5, TaskStateText(TaskState::kPending)));
      RETURN_IF_ERROR(BindTime(task, 6, now));
      RETURN_IF_ERROR(task.BindText(
          7, k < dp.partition_reasons.size() ? dp.partition_reasons[k] : ""));
      absl::Status inserted = task.Run();
      if (!inserted.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("plan lists partition '", partition, "' of ",
                         dp.dataset, " twice: ", inserted.message()));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status ReadPlannedPartitions(const StateDb& db, const std::string& id,
                                   Plan* plan) {
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < plan->datasets.size(); ++i) {
    index[plan->datasets[i].dataset] = i;
  }
  // In the primary key's order, then put in plan order (see
  // kTasksOfJobInKeyOrder).
  struct Planned {
    int64_t ordinal;
    size_t dataset;
    std::string partition;
    std::string reason;
  };
  std::vector<Planned> planned;
  static const std::string& kSql = Once(
      absl::StrCat("SELECT dataset, \"partition\", reason, ordinal, ",
                   sr::IntactSql(sr::Tasks()), " FROM tasks WHERE job_id = ?1",
                   kTasksOfJobInKeyOrder));
  ASSIGN_OR_RETURN(Statement q, db.db->PrepareCached(kSql));
  RETURN_IF_ERROR(q.BindText(1, id));
  while (true) {
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) break;
    if (q.ColumnInt(4) != 1) {
      return sr::Damaged(sr::TaskRecord(id, q.ColumnText(0), q.ColumnText(1)),
                         db.path);
    }
    auto it = index.find(q.ColumnText(0));
    if (it == index.end()) continue;  // cannot happen: written together
    planned.push_back(
        {q.ColumnInt(3), it->second, q.ColumnText(1), q.ColumnText(2)});
  }
  InPlanOrder(&planned);
  std::vector<size_t> sizes(plan->datasets.size());
  for (const Planned& p : planned) ++sizes[p.dataset];
  for (size_t i = 0; i < sizes.size(); ++i) {
    plan->datasets[i].partitions.reserve(sizes[i]);
    plan->datasets[i].partition_reasons.reserve(sizes[i]);
  }
  for (Planned& p : planned) {
    DatasetPlan& dp = plan->datasets[p.dataset];
    dp.partitions.push_back(std::move(p.partition));
    dp.partition_reasons.push_back(std::move(p.reason));
  }
  return absl::OkStatus();
}

absl::Status WriteTasks(const StateDb& db,
                        absl::Span<const PartitionTask> tasks,
                        std::map<std::string, std::optional<TaskTally>>* sums) {
  for (const PartitionTask& task : tasks) {
    // The job's sums, if kept, follow its tasks: each row's share out, the
    // new one in, so that a job's progress stays O(1) to read while it
    // runs.
    auto kept = sums->find(task.job_id);
    if (kept != sums->end() && kept->second.has_value()) {
      RETURN_IF_ERROR(MoveTaskShare(db, task, &kept->second));
    }
    static const std::string& kUpdate = Once(absl::StrCat(
        "UPDATE tasks SET state = ?4, attempts = ?5, last_error = ?6, "
        "rows_written = ?7, output_fingerprint = ?8, inputs = ?9, "
        "input_rows = ?10, duration_seconds = ?11, update_time = ?12, ",
        sr::ResealSql(sr::Tasks(), {{"state", "?4"},
                                    {"attempts", "?5"},
                                    {"last_error", "?6"},
                                    {"rows_written", "?7"},
                                    {"output_fingerprint", "?8"},
                                    {"inputs", "?9"},
                                    {"input_rows", "?10"},
                                    {"duration_seconds", "?11"},
                                    {"update_time", "?12"}}),
        " WHERE job_id = ?1 AND dataset = ?2 AND \"partition\" = ?3"));
    ASSIGN_OR_RETURN(Statement q, db.db->PrepareCached(kUpdate));
    RETURN_IF_ERROR(q.BindText(1, task.job_id));
    RETURN_IF_ERROR(q.BindText(2, task.dataset));
    RETURN_IF_ERROR(q.BindText(3, task.partition));
    RETURN_IF_ERROR(q.BindText(4, TaskStateText(task.state)));
    RETURN_IF_ERROR(q.BindInt(5, task.attempts));
    RETURN_IF_ERROR(q.BindText(6, task.last_error));
    RETURN_IF_ERROR(q.BindInt(7, task.rows_written));
    RETURN_IF_ERROR(q.BindText(8, task.output_fingerprint));
    RETURN_IF_ERROR(q.BindText(9, EncodeInputs(task.inputs)));
    RETURN_IF_ERROR(q.BindInt(10, InputRows(task.inputs)));
    RETURN_IF_ERROR(q.BindDouble(11, task.duration_seconds));
    RETURN_IF_ERROR(BindTime(q, 12, task.update_time));
    RETURN_IF_ERROR(q.Run());
    if (db.db->Changes() == 0) {
      return absl::NotFoundError(absl::StrCat("no task ", task.dataset, "/",
                                              task.partition, " in job ",
                                              task.job_id));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> UpdateTasksInState(const StateDb& db,
                                           const std::string& job_id,
                                           const std::vector<TaskState>& from,
                                           TaskState to, absl::Time now) {
  static const std::string& kSet = Once(absl::StrCat(
      "UPDATE tasks SET state = ?1, update_time = ?2, ",
      sr::ResealSql(sr::Tasks(), {{"state", "?1"}, {"update_time", "?2"}})));
  ASSIGN_OR_RETURN(Statement q, db.db->PrepareCached(absl::StrCat(
                                    kSet, " WHERE job_id = ?3 AND state IN (",
                                    Placeholders(4, from.size()), ")")));
  RETURN_IF_ERROR(q.BindText(1, TaskStateText(to)));
  RETURN_IF_ERROR(BindTime(q, 2, now));
  RETURN_IF_ERROR(q.BindText(3, job_id));
  RETURN_IF_ERROR(BindStates(q, 4, from));
  RETURN_IF_ERROR(q.Run());
  return db.db->Changes();
}

absl::StatusOr<int64_t> ResetTasksForRetry(const StateDb& db,
                                           const std::string& job_id,
                                           absl::Time now) {
  static const std::string& kReset = Once(absl::StrCat(
      "UPDATE tasks SET state = 'PENDING', attempts = 0, update_time = ?2, ",
      sr::ResealSql(
          sr::Tasks(),
          {{"state", "'PENDING'"}, {"attempts", "0"}, {"update_time", "?2"}}),
      " WHERE job_id = ?1 AND state IN ('FAILED', 'CANCELLED', 'RUNNING')"));
  ASSIGN_OR_RETURN(Statement q, db.db->PrepareCached(kReset));
  RETURN_IF_ERROR(q.BindText(1, job_id));
  RETURN_IF_ERROR(BindTime(q, 2, now));
  RETURN_IF_ERROR(q.Run());
  return db.db->Changes();
}

absl::Status PublishStagedTasks(const StateDb& db, const std::string& job_id,
                                absl::Time now) {
  // In slices of ordinals, each its own statement of the transaction: SQLite
  // keeps a statement's journal (the tasks table's triggers make it keep
  // one) in memory (temp_store=MEMORY) until the statement ends, and one
  // UPDATE of 100,000 tasks held 37 MB of it at once.
  constexpr int64_t kSlice = 4096;
  static const std::string& kPublish = Once(absl::StrCat(
      "UPDATE tasks SET state = ?1, update_time = ?2, ",
      sr::ResealSql(sr::Tasks(), {{"state", "?1"}, {"update_time", "?2"}}),
      " WHERE job_id = ?3 AND state = ?4 AND ordinal >= ?5 AND ordinal < ?6"));
  static const std::string& kLast =
      Once("SELECT MAX(ordinal) FROM tasks WHERE job_id = ?1");
  int64_t last = -1;
  {
    ASSIGN_OR_RETURN(Statement q, db.db->PrepareCached(kLast));
    RETURN_IF_ERROR(q.BindText(1, job_id));
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (row && !q.ColumnIsNull(0)) last = q.ColumnInt(0);
  }
  for (int64_t from = 0; from <= last; from += kSlice) {
    ASSIGN_OR_RETURN(Statement q, db.db->PrepareCached(kPublish));
    RETURN_IF_ERROR(q.BindText(1, TaskStateText(TaskState::kPublished)));
    RETURN_IF_ERROR(BindTime(q, 2, now));
    RETURN_IF_ERROR(q.BindText(3, job_id));
    RETURN_IF_ERROR(q.BindText(4, TaskStateText(TaskState::kStaged)));
    RETURN_IF_ERROR(q.BindInt(5, from));
    RETURN_IF_ERROR(q.BindInt(6, from + kSlice));
    RETURN_IF_ERROR(q.Run());
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<PartitionTask>> ListTasks(
    const StateDb& db, const std::string& job_id) {
  // The job's number of tasks (no row: no such job), so that the list is
  // allocated once at its size: a large job's list is tens of megabytes,
  // and grown by doubling it would hold up to twice that.
  int64_t count = 0;
  {
    ASSIGN_OR_RETURN(
        Statement q,
        db.db->PrepareCached("SELECT (SELECT COUNT(*) FROM tasks WHERE "
                             "job_id = ?1) FROM jobs WHERE id = ?1"));
    RETURN_IF_ERROR(q.BindText(1, job_id));
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) return JobNotFound(job_id);
    count = q.ColumnInt(0);
  }
  // In the primary key's order, then put in plan order (see
  // kTasksOfJobInKeyOrder).
  ASSIGN_OR_RETURN(Statement q, db.db->PrepareCached(absl::StrCat(
                                    "SELECT ", TaskColumnsChecked(),
                                    " FROM tasks WHERE job_id = ?1",
                                    kTasksOfJobInKeyOrder)));
  RETURN_IF_ERROR(q.BindText(1, job_id));
  std::vector<PartitionTask> tasks;
  tasks.reserve(static_cast<size_t>(count));
  RETURN_IF_ERROR(ReadTaskRows(q, db.path, &tasks));
  InPlanOrder(&tasks);
  return tasks;
}

absl::StatusOr<std::vector<PartitionTask>> ListTaskPage(
    const StateDb& db, const TaskQuery& query) {
  {
    ASSIGN_OR_RETURN(Statement q,
                     db.db->PrepareCached("SELECT 1 FROM jobs WHERE id = ?1"));
    RETURN_IF_ERROR(q.BindText(1, query.job_id));
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) return JobNotFound(query.job_id);
  }
  // The (job_id, ordinal) index serves the order and the start.
  std::string sql = absl::StrCat("SELECT ", TaskColumnsChecked(),
                                 " FROM tasks WHERE job_id = ?1 AND "
                                 "ordinal > ?2 AND (?3 = '' OR dataset = ?3)");
  if (!query.states.empty()) {
    absl::StrAppend(&sql, " AND state IN (",
                    Placeholders(5, query.states.size()), ")");
  }
  absl::StrAppend(&sql, " ORDER BY ordinal LIMIT ?4");
  ASSIGN_OR_RETURN(Statement q, db.db->PrepareCached(sql));
  RETURN_IF_ERROR(q.BindText(1, query.job_id));
  RETURN_IF_ERROR(q.BindInt(2, query.after_ordinal));
  RETURN_IF_ERROR(q.BindText(3, query.dataset));
  RETURN_IF_ERROR(q.BindInt(4, query.limit > 0 ? query.limit : -1));
  RETURN_IF_ERROR(BindStates(q, 5, query.states));
  std::vector<PartitionTask> tasks;
  RETURN_IF_ERROR(ReadTaskRows(q, db.path, &tasks));
  return tasks;
}

}  // namespace backfill::sqlite_state
