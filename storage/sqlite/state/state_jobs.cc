#include "storage/sqlite/state/state_jobs.h"

#include <map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/model/transition_guard.h"
#include "storage/sqlite/state/state_encoding.h"
#include "storage/sqlite/state/state_governance.h"
#include "storage/sqlite/state/state_lineage.h"
#include "storage/sqlite/state/state_record_checksums.h"
#include "storage/sqlite/state/state_tasks.h"

namespace backfill::sqlite_state {
namespace {

namespace sr = state_records;

using sqlite::Statement;

// The columns ReadJobRow reads, in its order.
constexpr const char* kJobColumns =
    "id, state, dataset, range_from, range_to, partitions, reason, ticket, "
    "requested_by, exclude_downstream, COALESCE(idempotency_key, ''), "
    "request_fingerprint, message, create_time, update_time, start_time, "
    "end_time, cost_backfill, cost_full_reload, priority, max_parallel, "
    "affected_by, auto_detect, override_frozen, approval_hold";
// How many they are: the column after them is the next one selected.
constexpr int kJobColumnCount = 25;

absl::StatusOr<Job> ReadJobRow(const Statement& q) {
  Job job;
  job.id = q.ColumnText(0);
  ASSIGN_OR_RETURN(job.state, ParseJobState(q.ColumnText(1)));
  job.request.dataset = q.ColumnText(2);
  job.request.from = q.ColumnText(3);
  job.request.to = q.ColumnText(4);
  ASSIGN_OR_RETURN(job.request.partitions, DecodeFields(q.ColumnText(5)));
  job.request.reason = q.ColumnText(6);
  job.request.ticket = q.ColumnText(7);
  job.request.requested_by = q.ColumnText(8);
  job.request.exclude_downstream = q.ColumnInt(9) != 0;
  job.idempotency_key = q.ColumnText(10);
  job.request_fingerprint = q.ColumnText(11);
  job.message = q.ColumnText(12);
  job.create_time = ColumnTime(q, 13);
  job.update_time = ColumnTime(q, 14);
  job.start_time = ColumnTime(q, 15);
  job.end_time = ColumnTime(q, 16);
  job.plan.cost.backfill = q.ColumnDouble(17);
  job.plan.cost.full_reload = q.ColumnDouble(18);
  job.request.priority = static_cast<int>(q.ColumnInt(19));
  job.request.max_parallel = static_cast<int>(q.ColumnInt(20));
  job.request.affected_by = q.ColumnText(21);
  job.request.auto_detect = q.ColumnInt(22) != 0;
  job.request.override_frozen = q.ColumnInt(23) != 0;
  job.approval_hold = q.ColumnText(24);
  return job;
}

// The id of the job created with `idempotency_key`, if any.
absl::StatusOr<std::optional<std::string>> JobIdByKey(
    const StateDb& db, const std::string& idempotency_key) {
  ASSIGN_OR_RETURN(
      Statement q,
      db.db->PrepareCached("SELECT id FROM jobs WHERE idempotency_key = ?1"));
  RETURN_IF_ERROR(q.BindText(1, idempotency_key));
  ASSIGN_OR_RETURN(bool row, q.Step());
  if (!row) return std::nullopt;
  return q.ColumnText(0);
}

// The next job number, from the counter row.
absl::StatusOr<int64_t> NextJobNumber(const StateDb& db) {
  ASSIGN_OR_RETURN(Statement q,
                   db.db->PrepareCached("UPDATE counters SET value = value + 1 "
                                        "WHERE name = 'job' RETURNING value"));
  ASSIGN_OR_RETURN(bool row, q.Step());
  if (!row) return absl::DataLossError("state store: job counter missing");
  const int64_t seq = q.ColumnInt(0);
  RETURN_IF_ERROR(q.Run());
  return seq;
}

// The row of a new job `id` (number `seq`) in jobs, QUEUED.
absl::Status InsertJobRow(const StateDb& db, const std::string& id, int64_t seq,
                          const Job& job, absl::Time now) {
  static const std::string& kInsert = Once(absl::StrCat(
      "INSERT INTO jobs (id, seq, state, dataset, range_from, range_to, "
      "partitions, reason, ticket, requested_by, exclude_downstream, "
      "idempotency_key, request_fingerprint, message, create_time, "
      "update_time, start_time, end_time, cost_backfill, "
      "cost_full_reload, priority, max_parallel, affected_by, "
      "auto_detect, override_frozen, approval_hold, checksum) VALUES "
      "(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, "
      "?15, ?15, NULL, NULL, ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23, ",
      sr::InsertSql(sr::Jobs(), {{"id", "?1"},
                                 {"seq", "?2"},
                                 {"state", "?3"},
                                 {"dataset", "?4"},
                                 {"range_from", "?5"},
                                 {"range_to", "?6"},
                                 {"partitions", "?7"},
                                 {"reason", "?8"},
                                 {"ticket", "?9"},
                                 {"requested_by", "?10"},
                                 {"exclude_downstream", "?11"},
                                 {"idempotency_key", "?12"},
                                 {"request_fingerprint", "?13"},
                                 {"message", "?14"},
                                 {"create_time", "?15"},
                                 {"update_time", "?15"},
                                 {"start_time", "NULL"},
                                 {"end_time", "NULL"},
                                 {"cost_backfill", "?16"},
                                 {"cost_full_reload", "?17"},
                                 {"priority", "?18"},
                                 {"max_parallel", "?19"},
                                 {"affected_by", "?20"},
                                 {"max_cost", "0.0"},
                                 {"auto_detect", "?21"},
                                 {"override_frozen", "?22"},
                                 {"approval_hold", "?23"}}),
      ")"));
  ASSIGN_OR_RETURN(Statement q, db.db->PrepareCached(kInsert));
  RETURN_IF_ERROR(q.BindText(1, id));
  RETURN_IF_ERROR(q.BindInt(2, seq));
  RETURN_IF_ERROR(q.BindText(3, JobStateText(JobState::kQueued)));
  RETURN_IF_ERROR(q.BindText(4, job.request.dataset));
  RETURN_IF_ERROR(q.BindText(5, job.request.from));
  RETURN_IF_ERROR(q.BindText(6, job.request.to));
  RETURN_IF_ERROR(q.BindText(7, EncodeFields(job.request.partitions)));
  RETURN_IF_ERROR(q.BindText(8, job.request.reason));
  RETURN_IF_ERROR(q.BindText(9, job.request.ticket));
  RETURN_IF_ERROR(q.BindText(10, job.request.requested_by));
  RETURN_IF_ERROR(q.BindInt(11, job.request.exclude_downstream ? 1 : 0));
  if (job.idempotency_key.empty()) {
    RETURN_IF_ERROR(q.BindNull(12));
  } else {
    RETURN_IF_ERROR(q.BindText(12, job.idempotency_key));
  }
  RETURN_IF_ERROR(q.BindText(13, job.request_fingerprint));
  RETURN_IF_ERROR(q.BindText(14, job.message));
  RETURN_IF_ERROR(BindTime(q, 15, now));
  RETURN_IF_ERROR(q.BindDouble(16, job.plan.cost.backfill));
  RETURN_IF_ERROR(q.BindDouble(17, job.plan.cost.full_reload));
  RETURN_IF_ERROR(q.BindInt(18, job.request.priority));
  RETURN_IF_ERROR(q.BindInt(19, job.request.max_parallel));
  RETURN_IF_ERROR(q.BindText(20, job.request.affected_by));
  RETURN_IF_ERROR(q.BindInt(21, job.request.auto_detect ? 1 : 0));
  RETURN_IF_ERROR(q.BindInt(22, job.request.override_frozen ? 1 : 0));
  RETURN_IF_ERROR(q.BindText(23, job.approval_hold));
  return q.Run();
}

// The plan's datasets of a new job `id`, in plan order.
absl::Status InsertPlan(const StateDb& db, const std::string& id,
                        const Plan& plan) {
  static const std::string& kInsertDataset = Once(absl::StrCat(
      "INSERT INTO job_datasets (job_id, ordinal, dataset, reason, "
      "cost_backfill, cost_full_reload, transform_version, checksum) "
      "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ",
      sr::InsertSql(sr::JobDatasets(), {{"job_id", "?1"},
                                        {"ordinal", "?2"},
                                        {"dataset", "?3"},
                                        {"reason", "?4"},
                                        {"cost_backfill", "?5"},
                                        {"cost_full_reload", "?6"},
                                        {"transform_version", "?7"},
                                        {"estimate_source", "''"},
                                        {"partitions_from_history", "0"},
                                        {"max_cost", "0.0"}}),
      ")"));
  ASSIGN_OR_RETURN(Statement ds, db.db->PrepareCached(kInsertDataset));
  for (size_t i = 0; i < plan.datasets.size(); ++i) {
    const DatasetPlan& dp = plan.datasets[i];
    RETURN_IF_ERROR(ds.Reset());
    RETURN_IF_ERROR(ds.BindText(1, id));
    RETURN_IF_ERROR(ds.BindInt(2, static_cast<int64_t>(i)));
    RETURN_IF_ERROR(ds.BindText(3, dp.dataset));
    RETURN_IF_ERROR(ds.BindText(4, dp.reason));
    RETURN_IF_ERROR(ds.BindDouble(5, dp.cost.backfill));
    RETURN_IF_ERROR(ds.BindDouble(6, dp.cost.full_reload));
    RETURN_IF_ERROR(ds.BindText(7, dp.transform_version));
    RETURN_IF_ERROR(ds.Run());
  }
  return absl::OkStatus();
}

// The plan's datasets of job `id` (without partitions), in plan order.
absl::Status ReadPlan(const StateDb& db, const std::string& id, Plan* plan) {
  static const std::string& kSql = Once(
      absl::StrCat("SELECT dataset, reason, cost_backfill, cost_full_reload, "
                   "transform_version, ",
                   sr::IntactSql(sr::JobDatasets()),
                   " FROM job_datasets WHERE job_id = ?1 ORDER BY ordinal"));
  ASSIGN_OR_RETURN(Statement q, db.db->PrepareCached(kSql));
  RETURN_IF_ERROR(q.BindText(1, id));
  while (true) {
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) break;
    if (q.ColumnInt(5) != 1) {
      return sr::Damaged(sr::PlanRecord(id, q.ColumnText(0)), db.path);
    }
    DatasetPlan dp;
    dp.dataset = q.ColumnText(0);
    dp.reason = q.ColumnText(1);
    dp.cost.backfill = q.ColumnDouble(2);
    dp.cost.full_reload = q.ColumnDouble(3);
    dp.transform_version = q.ColumnText(4);
    plan->datasets.push_back(std::move(dp));
  }
  return absl::OkStatus();
}

// The cost columns of a job (its budget, each dataset's estimate source
// and budget): written after CreateJob's inserts, read after LoadJob's.
absl::Status WriteJobCosts(const StateDb& db, const std::string& id,
                           const Job& job) {
  {
    static const std::string& kUpdate = Once(absl::StrCat(
        "UPDATE jobs SET max_cost = ?2, ",
        sr::ResealSql(sr::Jobs(), {{"max_cost", "?2"}}), " WHERE id = ?1"));
    ASSIGN_OR_RETURN(Statement q, db.db->PrepareCached(kUpdate));
    RETURN_IF_ERROR(q.BindText(1, id));
    RETURN_IF_ERROR(q.BindDouble(2, job.request.max_cost));
    RETURN_IF_ERROR(q.Run());
  }
  static const std::string& kUpdate = Once(absl::StrCat(
      "UPDATE job_datasets SET estimate_source = ?3, "
      "partitions_from_history = ?4, max_cost = ?5, ",
      sr::ResealSql(sr::JobDatasets(), {{"estimate_source", "?3"},
                                        {"partitions_from_history", "?4"},
                                        {"max_cost", "?5"}}),
      " WHERE job_id = ?1 AND ordinal = ?2"));
  ASSIGN_OR_RETURN(Statement q, db.db->PrepareCached(kUpdate));
  for (size_t i = 0; i < job.plan.datasets.size(); ++i) {
    const DatasetPlan& dp = job.plan.datasets[i];
    RETURN_IF_ERROR(q.Reset());
    RETURN_IF_ERROR(q.BindText(1, id));
    RETURN_IF_ERROR(q.BindInt(2, static_cast<int64_t>(i)));
    RETURN_IF_ERROR(q.BindText(3, dp.estimate_source));
    RETURN_IF_ERROR(q.BindInt(4, dp.partitions_from_history));
    RETURN_IF_ERROR(q.BindDouble(5, dp.cost.max_cost));
    RETURN_IF_ERROR(q.Run());
  }
  return absl::OkStatus();
}

absl::Status WriteJobKeys(const StateDb& db, const std::string& id,
                          const Job& job) {
  if (job.request.keys.empty()) return absl::OkStatus();
  ASSIGN_OR_RETURN(
      Statement q,
      db.db->PrepareCached("INSERT INTO job_keys (job_id, ordinal, key) "
                           "VALUES (?1, ?2, ?3)"));
  for (size_t i = 0; i < job.request.keys.size(); ++i) {
    RETURN_IF_ERROR(q.Reset());
    RETURN_IF_ERROR(q.BindText(1, id));
    RETURN_IF_ERROR(q.BindInt(2, static_cast<int64_t>(i)));
    RETURN_IF_ERROR(q.BindText(3, job.request.keys[i]));
    RETURN_IF_ERROR(q.Run());
  }
  return absl::OkStatus();
}

absl::Status ReadJobKeys(const StateDb& db, const std::string& id, Job* job) {
  ASSIGN_OR_RETURN(
      Statement q,
      db.db->PrepareCached("SELECT key FROM job_keys WHERE job_id = ?1 "
                           "ORDER BY ordinal"));
  RETURN_IF_ERROR(q.BindText(1, id));
  job->request.keys.clear();
  while (true) {
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) break;
    job->request.keys.push_back(q.ColumnText(0));
  }
  // The key filter applies to the target only (dependents go by partition).
  for (DatasetPlan& dp : job->plan.datasets) {
    dp.keys = dp.dataset == job->request.dataset ? job->request.keys
                                                 : std::vector<std::string>();
  }
  return absl::OkStatus();
}

absl::Status ReadJobCosts(const StateDb& db, const std::string& id, Job* job) {
  {
    ASSIGN_OR_RETURN(
        Statement q,
        db.db->PrepareCached("SELECT max_cost FROM jobs WHERE id = ?1"));
    RETURN_IF_ERROR(q.BindText(1, id));
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (row) {
      job->request.max_cost = q.ColumnDouble(0);
      job->plan.cost.max_cost = job->request.max_cost;
    }
  }
  std::map<std::string, DatasetPlan*> by_name;
  for (DatasetPlan& dp : job->plan.datasets) by_name[dp.dataset] = &dp;
  {
    ASSIGN_OR_RETURN(Statement q,
                     db.db->PrepareCached(
                         "SELECT dataset, estimate_source, "
                         "partitions_from_history, max_cost FROM job_datasets "
                         "WHERE job_id = ?1"));
    RETURN_IF_ERROR(q.BindText(1, id));
    while (true) {
      ASSIGN_OR_RETURN(bool row, q.Step());
      if (!row) break;
      auto it = by_name.find(q.ColumnText(0));
      if (it == by_name.end()) continue;
      it->second->estimate_source = q.ColumnText(1);
      it->second->partitions_from_history = q.ColumnInt(2);
      it->second->cost.max_cost = q.ColumnDouble(3);
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<JobState> StateOf(const StateDb& db, const std::string& job_id) {
  static const std::string& kSql = Once(absl::StrCat(
      "SELECT state, ", sr::IntactSql(sr::Jobs()), " FROM jobs WHERE id = ?1"));
  ASSIGN_OR_RETURN(Statement q, db.db->PrepareCached(kSql));
  RETURN_IF_ERROR(q.BindText(1, job_id));
  ASSIGN_OR_RETURN(bool row, q.Step());
  if (!row) return JobNotFound(job_id);
  if (q.ColumnInt(1) != 1) return sr::Damaged(sr::JobRecord(job_id), db.path);
  return ParseJobState(q.ColumnText(0));
}

absl::StatusOr<Job> LoadJob(const StateDb& db, const std::string& id,
                            bool with_partitions, StateReadCache* cache) {
  Job job;
  {
    static const std::string& kSql = Once(
        absl::StrCat("SELECT ", kJobColumns, ", ", sr::IntactSql(sr::Jobs()),
                     " FROM jobs WHERE id = ?1"));
    ASSIGN_OR_RETURN(Statement q, db.db->PrepareCached(kSql));
    RETURN_IF_ERROR(q.BindText(1, id));
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) return JobNotFound(id);
    if (q.ColumnInt(kJobColumnCount) != 1) {
      return sr::Damaged(sr::JobRecord(id), db.path);
    }
    ASSIGN_OR_RETURN(job, ReadJobRow(q));
  }
  RETURN_IF_ERROR(ReadPlan(db, id, &job.plan));
  ASSIGN_OR_RETURN(job.rollback, LoadRollbackInfo(db, id));
  if (with_partitions)
    RETURN_IF_ERROR(ReadPlannedPartitions(db, id, &job.plan));
  TaskTally tally;
  if (cache != nullptr) {
    ASSIGN_OR_RETURN(tally, cache->Tally(db, id));
  } else {
    ASSIGN_OR_RETURN(tally, ComputeTaskTally(db, id));
  }
  tally.FillIn(&job);
  ASSIGN_OR_RETURN(job.approval, LoadApproval(db, id));
  RETURN_IF_ERROR(ReadJobCosts(db, id, &job));
  RETURN_IF_ERROR(ReadJobKeys(db, id, &job));
  return job;
}

absl::StatusOr<CreateJobResult> CreateJob(const StateDb& db, const Job& job,
                                          absl::Time now) {
  if (!job.idempotency_key.empty()) {
    ASSIGN_OR_RETURN(std::optional<std::string> existing,
                     JobIdByKey(db, job.idempotency_key));
    if (existing.has_value()) {
      ASSIGN_OR_RETURN(Job found, LoadJob(db, *existing));
      return CreateJobResult{std::move(found), false};
    }
  }
  ASSIGN_OR_RETURN(int64_t seq, NextJobNumber(db));
  const std::string id = absl::StrCat("bf-", seq);
  RETURN_IF_ERROR(InsertJobRow(db, id, seq, job, now));
  RETURN_IF_ERROR(InsertPlan(db, id, job.plan));
  RETURN_IF_ERROR(InsertTasks(db, id, job.plan, now));
  RETURN_IF_ERROR(AppendAudit(db, id, "", JobStateText(JobState::kQueued),
                              job.message.empty() ? "created" : job.message,
                              now));
  RETURN_IF_ERROR(WriteJobCosts(db, id, job));
  RETURN_IF_ERROR(WriteJobKeys(db, id, job));
  ASSIGN_OR_RETURN(Job stored, LoadJob(db, id));
  return CreateJobResult{std::move(stored), true};
}

absl::StatusOr<std::optional<Job>> FindJobByKey(
    const StateDb& db, const std::string& idempotency_key) {
  ASSIGN_OR_RETURN(std::optional<std::string> id,
                   JobIdByKey(db, idempotency_key));
  if (!id.has_value()) return std::optional<Job>();
  ASSIGN_OR_RETURN(Job found, LoadJob(db, *id));
  return std::optional<Job>(std::move(found));
}

absl::Status WriteTransition(const StateDb& db, const std::string& job_id,
                             JobState from, JobState to,
                             const std::string& message, absl::Time now) {
  {
    constexpr char kStart[] =
        "CASE WHEN ?5 AND start_time IS NULL THEN ?4 ELSE start_time END";
    constexpr char kEnd[] =
        "CASE WHEN ?6 THEN ?4 WHEN ?7 THEN NULL "
        "ELSE end_time END";
    static const std::string& kUpdate = Once(absl::StrCat(
        "UPDATE jobs SET state = ?2, message = ?3, update_time = ?4, "
        "start_time = ",
        kStart, ", end_time = ", kEnd, ", ",
        sr::ResealSql(sr::Jobs(), {{"state", "?2"},
                                   {"message", "?3"},
                                   {"update_time", "?4"},
                                   {"start_time", kStart},
                                   {"end_time", kEnd}}),
        " WHERE id = ?1"));
    ASSIGN_OR_RETURN(Statement q, db.db->PrepareCached(kUpdate));
    RETURN_IF_ERROR(q.BindText(1, job_id));
    RETURN_IF_ERROR(q.BindText(2, JobStateText(to)));
    RETURN_IF_ERROR(q.BindText(3, message));
    RETURN_IF_ERROR(BindTime(q, 4, now));
    RETURN_IF_ERROR(q.BindInt(5, to == JobState::kRunning ? 1 : 0));
    RETURN_IF_ERROR(q.BindInt(6, IsTerminal(to) ? 1 : 0));
    // Leaving a terminal state (a retry): the job has not ended any more.
    RETURN_IF_ERROR(q.BindInt(7, IsTerminal(from) && !IsTerminal(to) ? 1 : 0));
    RETURN_IF_ERROR(q.Run());
  }
  return AppendAudit(db, job_id, JobStateText(from), JobStateText(to), message,
                     now);
}

absl::Status TransitionJob(const StateDb& db, const std::string& job_id,
                           std::optional<JobState> expected_from, JobState to,
                           const std::string& message, absl::Time now) {
  ASSIGN_OR_RETURN(JobState from, GuardTransition(job_id, StateOf(db, job_id),
                                                  expected_from, to));
  return WriteTransition(db, job_id, from, to, message, now);
}

absl::StatusOr<int64_t> RetryJob(const StateDb& db, const std::string& job_id,
                                 JobState expected_from, JobState to,
                                 const std::string& message, absl::Time now) {
  ASSIGN_OR_RETURN(JobState from,
                   GuardTransition(job_id, StateOf(db, job_id), expected_from,
                                   to, GuardedMove::kRetry));
  ASSIGN_OR_RETURN(int64_t reset, ResetTasksForRetry(db, job_id, now));
  RETURN_IF_ERROR(WriteTransition(db, job_id, from, to, message, now));
  return reset;
}

absl::Status SetJobMessage(const StateDb& db, const std::string& job_id,
                           JobState expected_state, const std::string& message,
                           absl::Time now) {
  RETURN_IF_ERROR(GuardState(job_id, StateOf(db, job_id), expected_state));
  static const std::string& kUpdate = Once(absl::StrCat(
      "UPDATE jobs SET message = ?2, update_time = ?3, ",
      sr::ResealSql(sr::Jobs(), {{"message", "?2"}, {"update_time", "?3"}}),
      " WHERE id = ?1"));
  ASSIGN_OR_RETURN(Statement q, db.db->PrepareCached(kUpdate));
  RETURN_IF_ERROR(q.BindText(1, job_id));
  RETURN_IF_ERROR(q.BindText(2, message));
  RETURN_IF_ERROR(BindTime(q, 3, now));
  return q.Run();
}

absl::Status ReserveJobNumbers(const StateDb& db, int64_t n) {
  ASSIGN_OR_RETURN(
      Statement q,
      db.db->PrepareCached("UPDATE counters SET value = MAX(value, ?1) "
                           "WHERE name = 'job'"));
  RETURN_IF_ERROR(q.BindInt(1, n));
  return q.Run();
}

}  // namespace backfill::sqlite_state
