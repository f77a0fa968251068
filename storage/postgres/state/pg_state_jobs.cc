#include "storage/postgres/state/pg_state_jobs.h"

#include <map>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/model/job_state_machine.h"
#include "core/model/transition_guard.h"
#include "storage/postgres/state/pg_state_governance.h"
#include "storage/postgres/state/pg_state_lineage.h"
#include "storage/postgres/state/pg_state_tasks.h"

namespace backfill::pg_state {
namespace {

// The columns ReadJobRow reads, in its order.
constexpr const char* kJobColumns =
    "id, state, dataset, range_from, range_to, partitions, reason, ticket, "
    "requested_by, exclude_downstream, COALESCE(idempotency_key, ''), "
    "request_fingerprint, message, create_time, update_time, start_time, "
    "end_time, cost_backfill, cost_full_reload, priority, max_parallel, "
    "affected_by, auto_detect, override_frozen, approval_hold, max_cost";

absl::StatusOr<Job> ReadJobRow(const Row& row) {
  Job job;
  job.id = ColText(row, 0);
  ASSIGN_OR_RETURN(job.state, ParseJobState(ColText(row, 1)));
  job.request.dataset = ColText(row, 2);
  job.request.from = ColText(row, 3);
  job.request.to = ColText(row, 4);
  ASSIGN_OR_RETURN(job.request.partitions, DecodeFields(ColText(row, 5)));
  job.request.reason = ColText(row, 6);
  job.request.ticket = ColText(row, 7);
  job.request.requested_by = ColText(row, 8);
  job.request.exclude_downstream = ColInt(row, 9) != 0;
  job.idempotency_key = ColText(row, 10);
  job.request_fingerprint = ColText(row, 11);
  job.message = ColText(row, 12);
  job.create_time = ColTime(row, 13);
  job.update_time = ColTime(row, 14);
  job.start_time = ColTime(row, 15);
  job.end_time = ColTime(row, 16);
  job.plan.cost.backfill = ColDouble(row, 17);
  job.plan.cost.full_reload = ColDouble(row, 18);
  job.request.priority = static_cast<int>(ColInt(row, 19));
  job.request.max_parallel = static_cast<int>(ColInt(row, 20));
  job.request.affected_by = ColText(row, 21);
  job.request.auto_detect = ColInt(row, 22) != 0;
  job.request.override_frozen = ColInt(row, 23) != 0;
  job.approval_hold = ColText(row, 24);
  job.request.max_cost = ColDouble(row, 25);
  job.plan.cost.max_cost = job.request.max_cost;
  return job;
}

absl::StatusOr<std::optional<std::string>> JobIdByKey(
    PgConnection* conn, const std::string& idempotency_key) {
  ASSIGN_OR_RETURN(
      PgResult r,
      conn->Exec(
          "SELECT id FROM backfill_state.jobs WHERE idempotency_key = $1",
          {Text(idempotency_key)}));
  if (r.rows.empty()) return std::nullopt;
  return ColText(r.rows[0], 0);
}

// The next job number, from the counters row, locked until the
// transaction ends: concurrent creators (of any process) take turns.
absl::StatusOr<int64_t> NextJobNumber(PgConnection* conn) {
  ASSIGN_OR_RETURN(PgResult r, conn->Exec("SELECT value FROM "
                                          "backfill_state.counters WHERE "
                                          "name = 'job' FOR UPDATE"));
  if (r.rows.empty()) {
    return absl::DataLossError("state store: job counter missing");
  }
  const int64_t seq = ColInt(r.rows[0], 0) + 1;
  RETURN_IF_ERROR(conn->Exec("UPDATE backfill_state.counters SET value = "
                             "$1::bigint WHERE name = 'job'",
                             {Int(seq)})
                      .status());
  return seq;
}

absl::Status InsertJobRow(PgConnection* conn, const std::string& id,
                          int64_t seq, const Job& job, absl::Time now) {
  return conn
      ->Exec(
          "INSERT INTO backfill_state.jobs (id, seq, state, dataset, "
          "range_from, range_to, partitions, reason, ticket, requested_by, "
          "exclude_downstream, idempotency_key, request_fingerprint, "
          "message, create_time, update_time, start_time, end_time, "
          "cost_backfill, cost_full_reload, priority, max_parallel, "
          "affected_by, max_cost, auto_detect, override_frozen, "
          "approval_hold) VALUES ($1, $2::bigint, $3, $4, $5, $6, $7, $8, "
          "$9, $10, $11::bigint, $12, $13, $14, $15::bigint, $15::bigint, "
          "NULL, NULL, $16::float8, $17::float8, $18::bigint, $19::bigint, "
          "$20, $21::float8, $22::bigint, $23::bigint, $24)",
          {Text(id),
           Int(seq),
           Text(JobStateText(JobState::kQueued)),
           Text(job.request.dataset),
           Text(job.request.from),
           Text(job.request.to),
           Text(EncodeFields(job.request.partitions)),
           Text(job.request.reason),
           Text(job.request.ticket),
           Text(job.request.requested_by),
           Int(job.request.exclude_downstream ? 1 : 0),
           job.idempotency_key.empty() ? Null() : Text(job.idempotency_key),
           Text(job.request_fingerprint),
           Text(job.message),
           Time(now),
           Double(job.plan.cost.backfill),
           Double(job.plan.cost.full_reload),
           Int(job.request.priority),
           Int(job.request.max_parallel),
           Text(job.request.affected_by),
           Double(job.request.max_cost),
           Int(job.request.auto_detect ? 1 : 0),
           Int(job.request.override_frozen ? 1 : 0),
           Text(job.approval_hold)})
      .status();
}

absl::Status InsertPlan(PgConnection* conn, const std::string& id,
                        const Plan& plan) {
  for (size_t i = 0; i < plan.datasets.size(); ++i) {
    const DatasetPlan& dp = plan.datasets[i];
    RETURN_IF_ERROR(
        conn->Exec("INSERT INTO backfill_state.job_datasets (job_id, "
                   "ordinal, dataset, reason, cost_backfill, "
                   "cost_full_reload, transform_version, estimate_source, "
                   "partitions_from_history, max_cost) VALUES ($1, "
                   "$2::bigint, $3, $4, $5::float8, $6::float8, $7, $8, "
                   "$9::bigint, $10::float8)",
                   {Text(id), Int(static_cast<int64_t>(i)), Text(dp.dataset),
                    Text(dp.reason), Double(dp.cost.backfill),
                    Double(dp.cost.full_reload), Text(dp.transform_version),
                    Text(dp.estimate_source), Int(dp.partitions_from_history),
                    Double(dp.cost.max_cost)})
            .status());
  }
  return absl::OkStatus();
}

absl::Status ReadPlan(PgConnection* conn, const std::string& id, Plan* plan) {
  ASSIGN_OR_RETURN(
      PgResult r,
      conn->Exec("SELECT dataset, reason, cost_backfill, cost_full_reload, "
                 "transform_version, estimate_source, "
                 "partitions_from_history, max_cost FROM "
                 "backfill_state.job_datasets WHERE job_id = $1 ORDER BY "
                 "ordinal",
                 {Text(id)}));
  for (const Row& row : r.rows) {
    DatasetPlan dp;
    dp.dataset = ColText(row, 0);
    dp.reason = ColText(row, 1);
    dp.cost.backfill = ColDouble(row, 2);
    dp.cost.full_reload = ColDouble(row, 3);
    dp.transform_version = ColText(row, 4);
    dp.estimate_source = ColText(row, 5);
    dp.partitions_from_history = ColInt(row, 6);
    dp.cost.max_cost = ColDouble(row, 7);
    plan->datasets.push_back(std::move(dp));
  }
  return absl::OkStatus();
}

absl::Status WriteJobKeys(PgConnection* conn, const std::string& id,
                          const Job& job) {
  for (size_t i = 0; i < job.request.keys.size(); ++i) {
    RETURN_IF_ERROR(conn->Exec("INSERT INTO backfill_state.job_keys (job_id, "
                               "ordinal, key) VALUES ($1, $2::bigint, $3)",
                               {Text(id), Int(static_cast<int64_t>(i)),
                                Text(job.request.keys[i])})
                        .status());
  }
  return absl::OkStatus();
}

absl::Status ReadJobKeys(PgConnection* conn, const std::string& id, Job* job) {
  ASSIGN_OR_RETURN(PgResult r, conn->Exec("SELECT key FROM "
                                          "backfill_state.job_keys WHERE "
                                          "job_id = $1 ORDER BY ordinal",
                                          {Text(id)}));
  job->request.keys.clear();
  for (const Row& row : r.rows) job->request.keys.push_back(ColText(row, 0));
  // The key filter applies to the target only (dependents go by partition).
  for (DatasetPlan& dp : job->plan.datasets) {
    dp.keys = dp.dataset == job->request.dataset ? job->request.keys
                                                 : std::vector<std::string>();
  }
  return absl::OkStatus();
}

// Whether `status` is the refusal of a second job with an idempotency key
// that a job has already (the unique constraint of the column).
bool IsKeyTaken(const absl::Status& status) {
  return status.code() == absl::StatusCode::kFailedPrecondition &&
         absl::StrContains(status.message(), "idempotency_key");
}

}  // namespace

absl::StatusOr<JobState> StateOf(PgConnection* conn, const std::string& job_id,
                                 bool lock) {
  ASSIGN_OR_RETURN(
      PgResult r,
      conn->Exec(lock ? "SELECT state FROM backfill_state.jobs WHERE id = $1 "
                        "FOR UPDATE"
                      : "SELECT state FROM backfill_state.jobs WHERE id = $1",
                 {Text(job_id)}));
  if (r.rows.empty()) return JobNotFound(job_id);
  return ParseJobState(ColText(r.rows[0], 0));
}

absl::StatusOr<Job> LoadJob(PgConnection* conn, const std::string& id,
                            bool with_partitions) {
  Job job;
  {
    ASSIGN_OR_RETURN(
        PgResult r,
        conn->Exec(absl::StrCat("SELECT ", kJobColumns,
                                " FROM backfill_state.jobs WHERE id = $1"),
                   {Text(id)}));
    if (r.rows.empty()) return JobNotFound(id);
    ASSIGN_OR_RETURN(job, ReadJobRow(r.rows[0]));
  }
  const double max_cost = job.plan.cost.max_cost;
  RETURN_IF_ERROR(ReadPlan(conn, id, &job.plan));
  job.plan.cost.max_cost = max_cost;
  ASSIGN_OR_RETURN(job.rollback, LoadRollbackInfo(conn, id));
  if (with_partitions) {
    RETURN_IF_ERROR(ReadPlannedPartitions(conn, id, &job.plan));
  }
  ASSIGN_OR_RETURN(TaskTally tally, ComputeTaskTally(conn, id));
  tally.FillIn(&job);
  ASSIGN_OR_RETURN(job.approval, LoadApproval(conn, id));
  RETURN_IF_ERROR(ReadJobKeys(conn, id, &job));
  return job;
}

absl::StatusOr<CreateJobResult> CreateJob(PgConnection* conn, const Job& job,
                                          absl::Time now) {
  if (!job.idempotency_key.empty()) {
    ASSIGN_OR_RETURN(std::optional<std::string> existing,
                     JobIdByKey(conn, job.idempotency_key));
    if (existing.has_value()) {
      ASSIGN_OR_RETURN(Job found, LoadJob(conn, *existing));
      return CreateJobResult{std::move(found), false};
    }
  }
  // A creator of another process may hold the same key uncommitted: the
  // insert then waits for it, and fails once it commits. Back to the
  // savepoint (the job number too), and the winner's job is the answer.
  RETURN_IF_ERROR(conn->Exec("SAVEPOINT create_job").status());
  ASSIGN_OR_RETURN(int64_t seq, NextJobNumber(conn));
  const std::string id = absl::StrCat("bf-", seq);
  if (absl::Status inserted = InsertJobRow(conn, id, seq, job, now);
      !inserted.ok()) {
    if (!IsKeyTaken(inserted)) return inserted;
    RETURN_IF_ERROR(conn->Exec("ROLLBACK TO SAVEPOINT create_job").status());
    ASSIGN_OR_RETURN(std::optional<std::string> existing,
                     JobIdByKey(conn, job.idempotency_key));
    if (!existing.has_value()) return inserted;
    ASSIGN_OR_RETURN(Job found, LoadJob(conn, *existing));
    return CreateJobResult{std::move(found), false};
  }
  RETURN_IF_ERROR(conn->Exec("RELEASE SAVEPOINT create_job").status());
  RETURN_IF_ERROR(InsertPlan(conn, id, job.plan));
  RETURN_IF_ERROR(InsertTasks(conn, id, job.plan, now));
  RETURN_IF_ERROR(AppendAudit(conn, id, "", JobStateText(JobState::kQueued),
                              job.message.empty() ? "created" : job.message,
                              now));
  RETURN_IF_ERROR(WriteJobKeys(conn, id, job));
  ASSIGN_OR_RETURN(Job stored, LoadJob(conn, id));
  return CreateJobResult{std::move(stored), true};
}

absl::StatusOr<std::optional<Job>> FindJobByKey(
    PgConnection* conn, const std::string& idempotency_key) {
  ASSIGN_OR_RETURN(std::optional<std::string> id,
                   JobIdByKey(conn, idempotency_key));
  if (!id.has_value()) return std::optional<Job>();
  ASSIGN_OR_RETURN(Job found, LoadJob(conn, *id));
  return std::optional<Job>(std::move(found));
}

absl::Status WriteTransition(PgConnection* conn, const std::string& job_id,
                             JobState from, JobState to,
                             const std::string& message, absl::Time now) {
  RETURN_IF_ERROR(
      conn->Exec("UPDATE backfill_state.jobs SET state = $2, message = $3, "
                 "update_time = $4::bigint, start_time = CASE WHEN $5::int = 1 "
                 "AND start_time IS NULL THEN $4::bigint ELSE start_time END, "
                 "end_time = CASE WHEN $6::int = 1 THEN $4::bigint WHEN "
                 "$7::int = 1 THEN NULL ELSE end_time END WHERE id = $1",
                 {Text(job_id), Text(JobStateText(to)), Text(message),
                  Time(now), Int(to == JobState::kRunning ? 1 : 0),
                  Int(IsTerminal(to) ? 1 : 0),
                  // Leaving a terminal state (a retry): not ended any more.
                  Int(IsTerminal(from) && !IsTerminal(to) ? 1 : 0)})
          .status());
  return AppendAudit(conn, job_id, JobStateText(from), JobStateText(to),
                     message, now);
}

absl::Status TransitionJob(PgConnection* conn, const std::string& job_id,
                           std::optional<JobState> expected_from, JobState to,
                           const std::string& message, absl::Time now) {
  ASSIGN_OR_RETURN(
      JobState from,
      GuardTransition(job_id, StateOf(conn, job_id, true), expected_from, to));
  return WriteTransition(conn, job_id, from, to, message, now);
}

absl::StatusOr<int64_t> RetryJob(PgConnection* conn, const std::string& job_id,
                                 JobState expected_from, JobState to,
                                 const std::string& message, absl::Time now) {
  ASSIGN_OR_RETURN(JobState from,
                   GuardTransition(job_id, StateOf(conn, job_id, true),
                                   expected_from, to, GuardedMove::kRetry));
  ASSIGN_OR_RETURN(int64_t reset, ResetTasksForRetry(conn, job_id, now));
  RETURN_IF_ERROR(WriteTransition(conn, job_id, from, to, message, now));
  return reset;
}

absl::Status SetJobMessage(PgConnection* conn, const std::string& job_id,
                           JobState expected_state, const std::string& message,
                           absl::Time now) {
  RETURN_IF_ERROR(
      GuardState(job_id, StateOf(conn, job_id, true), expected_state));
  return conn
      ->Exec(
          "UPDATE backfill_state.jobs SET message = $2, update_time = "
          "$3::bigint WHERE id = $1",
          {Text(job_id), Text(message), Time(now)})
      .status();
}

absl::Status ReserveJobNumbers(PgConnection* conn, int64_t n) {
  return conn
      ->Exec(
          "UPDATE backfill_state.counters SET value = GREATEST(value, "
          "$1::bigint) WHERE name = 'job'",
          {Int(n)})
      .status();
}

absl::StatusOr<StoreInfo> Info(PgConnection* conn) {
  ASSIGN_OR_RETURN(
      PgResult r,
      conn->Exec("SELECT (SELECT value FROM backfill_state.meta WHERE key = "
                 "'store_id'), (SELECT value::bigint FROM backfill_state.meta "
                 "WHERE key = 'created_at'), (SELECT value FROM "
                 "backfill_state.counters WHERE name = 'job')"));
  if (r.rows.empty() || ColIsNull(r.rows[0], 0)) {
    return absl::DataLossError("state store: its identity (meta) is missing");
  }
  StoreInfo info;
  info.store_id = ColText(r.rows[0], 0);
  // To the second, as the SQLite store records it (the schema writes
  // now() in microseconds).
  info.created_at = absl::FromUnixSeconds(
      absl::ToUnixSeconds(absl::FromUnixMicros(ColInt(r.rows[0], 1))));
  info.last_job_number = ColInt(r.rows[0], 2);
  return info;
}

absl::StatusOr<std::vector<std::string>> ListJobIds(
    PgConnection* conn, const std::vector<JobState>& states) {
  std::vector<std::string> ids;
  if (states.empty()) return ids;
  Params params;
  AppendStates(states, &params);
  ASSIGN_OR_RETURN(
      PgResult r,
      conn->Exec(absl::StrCat("SELECT id FROM backfill_state.jobs WHERE "
                              "state IN (",
                              Placeholders(1, states.size()), ") ORDER BY seq"),
                 params));
  for (const Row& row : r.rows) ids.push_back(ColText(row, 0));
  return ids;
}

absl::StatusOr<std::vector<Job>> ListJobs(PgConnection* conn,
                                          const JobFilter& filter) {
  std::string sql = "SELECT id FROM backfill_state.jobs WHERE true";
  Params params;
  if (!filter.states.empty()) {
    absl::StrAppend(&sql, " AND state IN (",
                    Placeholders(1, filter.states.size()), ")");
    AppendStates(filter.states, &params);
  }
  if (!filter.dataset.empty()) {
    params.push_back(Text(filter.dataset));
    absl::StrAppend(&sql,
                    " AND EXISTS (SELECT 1 FROM backfill_state.job_datasets d "
                    "WHERE d.job_id = jobs.id AND d.dataset = $",
                    params.size(), ")");
  }
  if (filter.before_number > 0) {
    params.push_back(Int(filter.before_number));
    absl::StrAppend(&sql, " AND seq < $", params.size(), "::bigint");
  }
  params.push_back(filter.limit > 0 ? Int(filter.limit) : Null());
  absl::StrAppend(&sql, " ORDER BY seq DESC LIMIT $", params.size(),
                  "::bigint");
  ASSIGN_OR_RETURN(PgResult r, conn->Exec(sql, params));
  std::vector<Job> jobs;
  for (const Row& row : r.rows) {
    ASSIGN_OR_RETURN(
        Job job, LoadJob(conn, ColText(row, 0), filter.view == JobView::kFull));
    jobs.push_back(std::move(job));
  }
  return jobs;
}

}  // namespace backfill::pg_state
