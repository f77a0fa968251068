#include "storage/postgres/state/pg_state_store.h"

#include <optional>
#include <set>
#include <string>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/base/error_details.h"
#include "core/base/status_macros.h"
#include "storage/postgres/state/pg_state_governance.h"
#include "storage/postgres/state/pg_state_jobs.h"
#include "storage/postgres/state/pg_state_lineage.h"
#include "storage/postgres/state/pg_state_schema.h"
#include "storage/postgres/state/pg_state_tasks.h"

namespace backfill {
namespace {

namespace ps = pg_state;

using postgres::PgConnection;
using postgres::PgPool;
using postgres::PgResult;
using postgres::PgTransaction;

// Connections of a store: the manager, its workers and readers share them.
constexpr int kConnections = 4;
// Runs of a transaction that the server aborted (deadlock, serialization).
constexpr int kAttempts = 3;

}  // namespace

PgStateStore::PgStateStore(std::unique_ptr<PgPool> pool)
    : pool_(std::move(pool)) {}

PgStateStore::~PgStateStore() = default;

absl::StatusOr<std::unique_ptr<PgStateStore>> PgStateStore::Open(
    const std::string& dsn, absl::Duration idle_in_transaction_timeout) {
  postgres::PgPoolOptions options;
  options.application_name = "backfilld-state";
  options.idle_in_transaction_timeout = idle_in_transaction_timeout;
  ASSIGN_OR_RETURN(std::unique_ptr<PgPool> pool,
                   PgPool::Open(dsn, kConnections, options));
  {
    ASSIGN_OR_RETURN(PgPool::Lease conn, pool->Acquire());
    absl::Status migrated = postgres::MigrateStateSchema(conn.get());
    if (!migrated.ok()) {
      return absl::Status(migrated.code(),
                          absl::StrCat("state store: ", migrated.message()));
    }
  }
  std::unique_ptr<PgStateStore> store(new PgStateStore(std::move(pool)));
  RETURN_IF_ERROR(store->Info().status());
  return store;
}

template <typename Body>
auto PgStateStore::InTransaction(const char* mode, Body&& body) {
  return ps::InTransaction(pool_.get(), mode, kAttempts,
                           std::forward<Body>(body));
}

template <typename Body>
auto PgStateStore::Write(Body&& body) {
  return InTransaction(ps::kWriteMode, std::forward<Body>(body));
}

template <typename Body>
auto PgStateStore::Read(Body&& body) {
  return InTransaction(ps::kReadMode, std::forward<Body>(body));
}

absl::Status PgStateStore::CheckFence(PgConnection* conn,
                                      const std::string& job_id) const {
  if (fence_ == nullptr) return absl::OkStatus();
  const std::optional<int64_t> token = fence_->TokenFor(job_id);
  if (!token.has_value()) return absl::OkStatus();
  ASSIGN_OR_RETURN(
      PgResult r,
      conn->Exec("SELECT node, token FROM backfill_state.job_leases WHERE "
                 "job_id = $1 FOR SHARE",
                 {job_id}));
  std::string holder;
  int64_t current = 0;
  if (!r.rows.empty() && r.rows[0][0].has_value() && r.rows[0][1].has_value()) {
    holder = *r.rows[0][0];
    if (!absl::SimpleAtoi(*r.rows[0][1], &current)) current = 0;
  }
  if (*token != 0 && !holder.empty() && current == *token) {
    return absl::OkStatus();
  }
  return WithReason(
      absl::FailedPreconditionError(absl::StrCat(
          "this replica no longer holds the lease on job ", job_id,
          holder.empty() ? std::string(" (it was released)")
                         : absl::StrCat(" (replica ", holder,
                                        " holds it now, token ", current, ")"),
          ": the write was refused and nothing changed")),
      "LEASE_LOST", {{"backfill_id", job_id}});
}

// ---- jobs and tasks ---------------------------------------------------------

absl::StatusOr<StoreInfo> PgStateStore::Info() {
  return Read([](PgConnection* c) { return ps::Info(c); });
}

absl::StatusOr<std::vector<std::string>> PgStateStore::ListJobIds(
    const std::vector<JobState>& states) {
  if (states.empty()) return std::vector<std::string>();
  return Read([&](PgConnection* c) { return ps::ListJobIds(c, states); });
}

absl::Status PgStateStore::ReserveJobNumbers(int64_t n) {
  return Write([&](PgConnection* c) { return ps::ReserveJobNumbers(c, n); });
}

absl::StatusOr<CreateJobResult> PgStateStore::CreateJob(const Job& job,
                                                        absl::Time now) {
  return Write([&](PgConnection* c) { return ps::CreateJob(c, job, now); });
}

absl::StatusOr<std::optional<Job>> PgStateStore::FindJobByKey(
    const std::string& idempotency_key) {
  if (idempotency_key.empty()) return std::optional<Job>();
  return Read(
      [&](PgConnection* c) { return ps::FindJobByKey(c, idempotency_key); });
}

absl::StatusOr<Job> PgStateStore::GetJob(const std::string& id) {
  return Read([&](PgConnection* c) { return ps::LoadJob(c, id, true); });
}

absl::StatusOr<Job> PgStateStore::GetJobProgress(const std::string& id) {
  return Read([&](PgConnection* c) { return ps::LoadJob(c, id, false); });
}

absl::StatusOr<Job> PgStateStore::GetJobForReader(const std::string& id,
                                                  JobView view) {
  // One snapshot for the job and what is shown with it.
  return Read([&](PgConnection* c) -> absl::StatusOr<Job> {
    ASSIGN_OR_RETURN(Job job, ps::LoadJob(c, id, view == JobView::kFull));
    ASSIGN_OR_RETURN(job.checks, ps::ListCheckResults(c, id));
    ASSIGN_OR_RETURN(job.consumers, ps::ListConsumerConfirmations(c, id));
    ASSIGN_OR_RETURN(std::optional<JobDiff> diff,
                     ps::LoadJobDiff(c, id, "", /*with_samples=*/false));
    if (diff.has_value()) {
      std::vector<DiffSummary> sums;
      for (const DatasetDiff& d : diff->datasets) sums.push_back(Summarize(d));
      job.diff = std::move(sums);
    }
    return job;
  });
}

absl::StatusOr<std::vector<Job>> PgStateStore::ListJobs(
    const JobFilter& filter) {
  return Read([&](PgConnection* c) { return ps::ListJobs(c, filter); });
}

absl::StatusOr<std::vector<PartitionTask>> PgStateStore::ListTasks(
    const std::string& job_id) {
  return Read([&](PgConnection* c) { return ps::ListTasks(c, job_id); });
}

absl::StatusOr<std::vector<PartitionTask>> PgStateStore::ListTaskPage(
    const TaskQuery& query) {
  return Read([&](PgConnection* c) { return ps::ListTaskPage(c, query); });
}

absl::Status PgStateStore::TransitionJob(const std::string& job_id,
                                         std::optional<JobState> expected_from,
                                         JobState to,
                                         const std::string& message,
                                         absl::Time now) {
  return Write([&](PgConnection* c) -> absl::Status {
    RETURN_IF_ERROR(CheckFence(c, job_id));
    return ps::TransitionJob(c, job_id, expected_from, to, message, now);
  });
}

absl::Status PgStateStore::SetJobMessage(const std::string& job_id,
                                         JobState expected_state,
                                         const std::string& message,
                                         absl::Time now) {
  return Write([&](PgConnection* c) -> absl::Status {
    RETURN_IF_ERROR(CheckFence(c, job_id));
    return ps::SetJobMessage(c, job_id, expected_state, message, now);
  });
}

absl::Status PgStateStore::UpdateTask(const PartitionTask& task) {
  return UpdateTasks({task});
}

absl::Status PgStateStore::UpdateTasks(
    const std::vector<PartitionTask>& tasks) {
  if (tasks.empty()) return absl::OkStatus();
  return Write([&](PgConnection* c) -> absl::Status {
    std::set<std::string> jobs;
    for (const PartitionTask& task : tasks) jobs.insert(task.job_id);
    for (const std::string& job_id : jobs) {
      RETURN_IF_ERROR(CheckFence(c, job_id));
    }
    return ps::WriteTasks(c, tasks);
  });
}

absl::StatusOr<int64_t> PgStateStore::RetryJob(const std::string& job_id,
                                               JobState expected_from,
                                               JobState to,
                                               const std::string& message,
                                               absl::Time now) {
  return Write([&](PgConnection* c) -> absl::StatusOr<int64_t> {
    RETURN_IF_ERROR(CheckFence(c, job_id));
    return ps::RetryJob(c, job_id, expected_from, to, message, now);
  });
}

absl::StatusOr<int64_t> PgStateStore::UpdateTasksInState(
    const std::string& job_id, const std::vector<TaskState>& from, TaskState to,
    absl::Time now) {
  if (from.empty()) return 0;
  return Write([&](PgConnection* c) -> absl::StatusOr<int64_t> {
    RETURN_IF_ERROR(CheckFence(c, job_id));
    return ps::UpdateTasksInState(c, job_id, from, to, now);
  });
}

// ---- lineage ----------------------------------------------------------------

absl::Status PgStateStore::RecordPublication(const std::string& job_id,
                                             PublicationLineage& lineage,
                                             JobState to, absl::Time now) {
  return Write([&](PgConnection* c) -> absl::Status {
    RETURN_IF_ERROR(CheckFence(c, job_id));
    return ps::RecordPublication(c, job_id, lineage, to, now);
  });
}

absl::Status PgStateStore::RecordRollback(
    const std::string& job_id, const RollbackInfo& info,
    const std::vector<LineageRecord>& lineage, const std::string& message,
    const std::string& also_message, absl::Time now) {
  return Write([&](PgConnection* c) -> absl::Status {
    RETURN_IF_ERROR(CheckFence(c, job_id));
    return ps::RecordRollback(c, job_id, info, lineage, message, also_message,
                              now);
  });
}

absl::StatusOr<std::vector<LineageRecord>> PgStateStore::GetLineage(
    const std::string& dataset, const std::string& partition) {
  return Read(
      [&](PgConnection* c) { return ps::GetLineage(c, dataset, partition); });
}

absl::StatusOr<std::vector<std::optional<LineageRecord>>>
PgStateStore::NewestLineages(
    const std::vector<std::pair<std::string, std::string>>& keys) {
  return Read([&](PgConnection* c) { return ps::NewestLineages(c, keys); });
}

absl::StatusOr<std::optional<LineageRecord>> PgStateStore::NewestLineageOf(
    const std::string& dataset) {
  return Read([&](PgConnection* c) { return ps::NewestLineageOf(c, dataset); });
}

absl::StatusOr<std::vector<LineageRecord>> PgStateStore::GetLineageOverlapping(
    const std::string& job_id) {
  return Read(
      [&](PgConnection* c) { return ps::GetLineageOverlapping(c, job_id); });
}

absl::StatusOr<std::map<std::string, absl::Time>>
PgStateStore::PublicationTimes(const std::vector<std::string>& job_ids) {
  return Read(
      [&](PgConnection* c) { return ps::PublicationTimes(c, job_ids); });
}

absl::Status PgStateStore::ReplaceJobDiff(const JobDiffHeader& header,
                                          DiffPages& pages) {
  return Write([&](PgConnection* c) -> absl::Status {
    RETURN_IF_ERROR(CheckFence(c, header.job_id));
    return ps::ReplaceJobDiff(c, header, pages);
  });
}

absl::StatusOr<std::optional<JobDiff>> PgStateStore::GetJobDiff(
    const std::string& job_id, const std::string& dataset, bool with_samples) {
  return Read([&](PgConnection* c) {
    return ps::LoadJobDiff(c, job_id, dataset, with_samples);
  });
}

absl::StatusOr<std::map<std::string, PartitionDiff>>
PgStateStore::PartitionDiffs(const std::string& dataset,
                             const std::string& partition) {
  return Read([&](PgConnection* c) {
    return ps::PartitionDiffs(c, dataset, partition);
  });
}

// ---- queries ----------------------------------------------------------------

absl::StatusOr<std::map<std::string, int64_t>> PgStateStore::LastRunInputRows(
    const std::string& dataset, const std::vector<std::string>& partitions) {
  if (partitions.empty()) return std::map<std::string, int64_t>();
  return Read([&](PgConnection* c) {
    return ps::LastRunInputRows(c, dataset, partitions);
  });
}

absl::StatusOr<std::map<std::string, VerifiedVersion>>
PgStateStore::VerifiedVersions(const std::string& dataset,
                               const std::vector<std::string>& partitions) {
  return Read([&](PgConnection* c) {
    return ps::VerifiedVersions(c, dataset, partitions);
  });
}

absl::StatusOr<StoreStats> PgStateStore::Stats() {
  return Read([](PgConnection* c) { return ps::Stats(c); });
}

absl::StatusOr<std::vector<ConsumerStanding>>
PgStateStore::ListConsumerStandings() {
  return Read([](PgConnection* c) { return ps::ListConsumerStandings(c); });
}

// ---- governance -------------------------------------------------------------

absl::Status PgStateStore::ApproveJob(const std::string& job_id,
                                      JobState expected_from, JobState to,
                                      const Approval& approval,
                                      const std::string& message,
                                      absl::Time now) {
  return Write([&](PgConnection* c) -> absl::Status {
    RETURN_IF_ERROR(CheckFence(c, job_id));
    return ps::ApproveJob(c, job_id, expected_from, to, approval, message, now);
  });
}

absl::StatusOr<std::vector<AuditEvent>> PgStateStore::ListAuditEvents(
    const std::string& job_id) {
  return Read([&](PgConnection* c) { return ps::ListAuditEvents(c, job_id); });
}

absl::StatusOr<std::vector<AuditEvent>> PgStateStore::ListAuditLog(
    const AuditQuery& query) {
  return Read([&](PgConnection* c) { return ps::ListAuditLog(c, query); });
}

absl::Status PgStateStore::SetReplayPolicyPause(const ReplayPolicyPause& pause,
                                                const std::string& message) {
  return Write([&](PgConnection* c) {
    return ps::SetReplayPolicyPause(c, pause, message);
  });
}

absl::StatusOr<std::vector<ReplayPolicyPause>>
PgStateStore::ListReplayPolicyPauses() {
  return Read([](PgConnection* c) { return ps::ListReplayPolicyPauses(c); });
}

absl::Status PgStateStore::ReplaceCheckResults(
    const std::string& job_id, const std::vector<CheckResult>& results) {
  return Write([&](PgConnection* c) -> absl::Status {
    RETURN_IF_ERROR(CheckFence(c, job_id));
    return ps::ReplaceCheckResults(c, job_id, results);
  });
}

absl::StatusOr<std::vector<CheckResult>> PgStateStore::ListCheckResults(
    const std::string& job_id) {
  return Read([&](PgConnection* c) { return ps::ListCheckResults(c, job_id); });
}

absl::Status PgStateStore::ReplaceConsumerConfirmations(
    const std::string& job_id, const std::vector<ConsumerFinding>& results) {
  return Write([&](PgConnection* c) -> absl::Status {
    RETURN_IF_ERROR(CheckFence(c, job_id));
    return ps::ReplaceConsumerConfirmations(c, job_id, results);
  });
}

absl::StatusOr<std::vector<ConsumerFinding>>
PgStateStore::ListConsumerConfirmations(const std::string& job_id) {
  return Read([&](PgConnection* c) {
    return ps::ListConsumerConfirmations(c, job_id);
  });
}

}  // namespace backfill
