#include "storage/postgres/state/pg_state_tasks.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/model/transition_guard.h"

namespace backfill::pg_state {
namespace {

// The columns ReadTaskRow reads, in its order.
constexpr char kTaskColumns[] =
    "job_id, dataset, \"partition\", state, attempts, last_error, "
    "rows_written, output_fingerprint, inputs, duration_seconds, "
    "update_time, ordinal, reason";

absl::StatusOr<PartitionTask> ReadTaskRow(const Row& row) {
  PartitionTask t;
  t.job_id = ColText(row, 0);
  t.dataset = ColText(row, 1);
  t.partition = ColText(row, 2);
  ASSIGN_OR_RETURN(t.state, ParseTaskState(ColText(row, 3)));
  t.attempts = static_cast<int>(ColInt(row, 4));
  t.last_error = ColText(row, 5);
  t.rows_written = ColInt(row, 6);
  t.output_fingerprint = ColText(row, 7);
  ASSIGN_OR_RETURN(t.inputs, DecodeInputs(ColText(row, 8)));
  t.duration_seconds = ColDouble(row, 9);
  t.update_time = ColTime(row, 10);
  t.ordinal = ColInt(row, 11);
  t.reason = ColText(row, 12);
  return t;
}

absl::StatusOr<std::vector<PartitionTask>> ReadTaskRows(const PgResult& r) {
  std::vector<PartitionTask> out;
  out.reserve(r.rows.size());
  for (const Row& row : r.rows) {
    ASSIGN_OR_RETURN(PartitionTask t, ReadTaskRow(row));
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace

absl::StatusOr<TaskTally> ComputeTaskTally(PgConnection* conn,
                                           const std::string& id) {
  TaskTally out;
  ASSIGN_OR_RETURN(PgResult r,
                   conn->Exec("SELECT dataset, state, COUNT(*), "
                              "COALESCE(SUM(input_rows), 0)::float8, "
                              "COALESCE(SUM(rows_written), 0)::float8, "
                              "COUNT(*) FILTER (WHERE duration_seconds > 0), "
                              "COALESCE(SUM(duration_seconds) FILTER (WHERE "
                              "duration_seconds > 0), 0) "
                              "FROM backfill_state.tasks WHERE job_id = $1 "
                              "GROUP BY dataset, state",
                              {Text(id)}));
  for (const Row& row : r.rows) {
    ASSIGN_OR_RETURN(TaskState state, ParseTaskState(ColText(row, 1)));
    out.Add(ColText(row, 0), state, ColInt(row, 2), ColDouble(row, 3),
            ColDouble(row, 4), ColInt(row, 5), ColDouble(row, 6));
  }
  return out;
}

absl::Status InsertTasks(PgConnection* conn, const std::string& id,
                         const Plan& plan, absl::Time now) {
  // Up to kBatch tasks per statement (three values each, with the job,
  // state and time shared): a large plan costs few round trips.
  constexpr size_t kBatch = 1000;
  int64_t ordinal = 0;
  for (const DatasetPlan& dp : plan.datasets) {
    for (size_t start = 0; start < dp.partitions.size(); start += kBatch) {
      const size_t end = std::min(dp.partitions.size(), start + kBatch);
      Params params = {Text(id), Text(dp.dataset),
                       Text(TaskStateText(TaskState::kPending)), Time(now)};
      std::string sql =
          "INSERT INTO backfill_state.tasks (job_id, dataset, "
          "\"partition\", ordinal, state, update_time, reason) VALUES ";
      for (size_t k = start; k < end; ++k) {
        const int first = static_cast<int>(params.size()) + 1;
        absl::StrAppend(&sql, k > start ? ", " : "", "($1, $2, $", first, ", $",
                        first + 1, "::bigint, $3, $4::bigint, $", first + 2,
                        ")");
        params.push_back(Text(dp.partitions[k]));
        params.push_back(Int(ordinal++));
        params.push_back(Text(
            k < dp.partition_reasons.size() ? dp.partition_reasons[k] : ""));
      }
      absl::Status inserted = conn->Exec(sql, params).status();
      if (inserted.ok()) continue;
      // Which partition the plan lists twice (in this entry, or in an
      // earlier entry of the same dataset): the refusal names the key.
      std::set<std::string> seen;
      for (const DatasetPlan& other : plan.datasets) {
        if (other.dataset != dp.dataset) continue;
        for (const std::string& p : other.partitions) {
          if (!seen.insert(p).second) {
            return absl::InvalidArgumentError(
                absl::StrCat("plan lists partition '", p, "' of ", dp.dataset,
                             " twice: ", inserted.message()));
          }
        }
      }
      return inserted;
    }
  }
  return absl::OkStatus();
}

absl::Status ReadPlannedPartitions(PgConnection* conn, const std::string& id,
                                   Plan* plan) {
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < plan->datasets.size(); ++i) {
    index[plan->datasets[i].dataset] = i;
  }
  ASSIGN_OR_RETURN(PgResult r, conn->Exec("SELECT dataset, \"partition\", "
                                          "reason FROM backfill_state.tasks "
                                          "WHERE job_id = $1 ORDER BY ordinal",
                                          {Text(id)}));
  for (const Row& row : r.rows) {
    auto it = index.find(ColText(row, 0));
    if (it == index.end()) continue;  // cannot happen: written together
    DatasetPlan& dp = plan->datasets[it->second];
    dp.partitions.push_back(ColText(row, 1));
    dp.partition_reasons.push_back(ColText(row, 2));
  }
  return absl::OkStatus();
}

absl::Status WriteTasks(PgConnection* conn,
                        const std::vector<PartitionTask>& tasks) {
  for (const PartitionTask& task : tasks) {
    ASSIGN_OR_RETURN(
        PgResult r,
        conn->Exec(
            "UPDATE backfill_state.tasks SET state = $4, attempts = "
            "$5::bigint, last_error = $6, rows_written = $7::bigint, "
            "output_fingerprint = $8, inputs = $9, input_rows = "
            "$10::bigint, duration_seconds = $11::float8, update_time "
            "= $12::bigint WHERE job_id = $1 AND dataset = $2 AND "
            "\"partition\" = $3",
            {Text(task.job_id), Text(task.dataset), Text(task.partition),
             Text(TaskStateText(task.state)), Int(task.attempts),
             Text(task.last_error), Int(task.rows_written),
             Text(task.output_fingerprint), Text(EncodeInputs(task.inputs)),
             Int(InputRows(task.inputs)), Double(task.duration_seconds),
             Time(task.update_time)}));
    if (r.affected == 0) {
      return absl::NotFoundError(absl::StrCat("no task ", task.dataset, "/",
                                              task.partition, " in job ",
                                              task.job_id));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> UpdateTasksInState(PgConnection* conn,
                                           const std::string& job_id,
                                           const std::vector<TaskState>& from,
                                           TaskState to, absl::Time now) {
  Params params = {Text(TaskStateText(to)), Time(now), Text(job_id)};
  AppendStates(from, &params);
  ASSIGN_OR_RETURN(
      PgResult r,
      conn->Exec(absl::StrCat("UPDATE backfill_state.tasks SET state = $1, "
                              "update_time = $2::bigint WHERE job_id = $3 AND "
                              "state IN (",
                              Placeholders(4, from.size()), ")"),
                 params));
  return r.affected;
}

absl::StatusOr<int64_t> ResetTasksForRetry(PgConnection* conn,
                                           const std::string& job_id,
                                           absl::Time now) {
  ASSIGN_OR_RETURN(
      PgResult r,
      conn->Exec("UPDATE backfill_state.tasks SET state = 'PENDING', "
                 "attempts = 0, update_time = $2::bigint WHERE job_id = $1 "
                 "AND state IN ('FAILED', 'CANCELLED', 'RUNNING')",
                 {Text(job_id), Time(now)}));
  return r.affected;
}

absl::Status PublishStagedTasks(PgConnection* conn, const std::string& job_id,
                                absl::Time now) {
  return conn
      ->Exec(
          "UPDATE backfill_state.tasks SET state = $1, update_time = "
          "$2::bigint WHERE job_id = $3 AND state = $4",
          {Text(TaskStateText(TaskState::kPublished)), Time(now), Text(job_id),
           Text(TaskStateText(TaskState::kStaged))})
      .status();
}

absl::StatusOr<std::vector<PartitionTask>> ListTasks(
    PgConnection* conn, const std::string& job_id) {
  ASSIGN_OR_RETURN(PgResult exists,
                   conn->Exec("SELECT 1 FROM backfill_state.jobs WHERE id = $1",
                              {Text(job_id)}));
  if (exists.rows.empty()) return JobNotFound(job_id);
  ASSIGN_OR_RETURN(PgResult r,
                   conn->Exec(absl::StrCat("SELECT ", kTaskColumns,
                                           " FROM backfill_state.tasks "
                                           "WHERE job_id = $1 ORDER BY "
                                           "ordinal"),
                              {Text(job_id)}));
  return ReadTaskRows(r);
}

absl::StatusOr<std::vector<PartitionTask>> ListTaskPage(
    PgConnection* conn, const TaskQuery& query) {
  ASSIGN_OR_RETURN(PgResult exists,
                   conn->Exec("SELECT 1 FROM backfill_state.jobs WHERE id = $1",
                              {Text(query.job_id)}));
  if (exists.rows.empty()) return JobNotFound(query.job_id);
  std::string sql = absl::StrCat(
      "SELECT ", kTaskColumns,
      " FROM backfill_state.tasks WHERE job_id = $1 AND ordinal > $2::bigint "
      "AND ($3::text = '' OR dataset = $3::text)");
  Params params = {Text(query.job_id), Int(query.after_ordinal),
                   Text(query.dataset),
                   query.limit > 0 ? Int(query.limit) : Null()};
  if (!query.states.empty()) {
    absl::StrAppend(&sql, " AND state IN (",
                    Placeholders(5, query.states.size()), ")");
    AppendStates(query.states, &params);
  }
  absl::StrAppend(&sql, " ORDER BY ordinal LIMIT $4::bigint");
  ASSIGN_OR_RETURN(PgResult r, conn->Exec(sql, params));
  return ReadTaskRows(r);
}

}  // namespace backfill::pg_state
