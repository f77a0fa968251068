#include "tests/testing/memory_state_store.h"

#include <algorithm>
#include <cstdint>
#include <random>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/base/status_macros.h"
#include "core/model/job_state_machine.h"
#include "core/model/transition_guard.h"
#include "tests/testing/as_stored.h"

namespace backfill::testing {
namespace {

std::string RandomStoreId() {
  std::random_device device;
  std::mt19937_64 gen((static_cast<uint64_t>(device()) << 32) ^ device());
  return absl::StrFormat("%016x%016x", gen(), gen());
}

bool Contains(const std::vector<JobState>& states, JobState s) {
  return std::find(states.begin(), states.end(), s) != states.end();
}

// A job with entity keys on `dataset`, its target: it recomputed only its
// keys' rows there (as SqliteStateStore, no verified version of them).
bool KeyedOn(const Job& job, const std::string& dataset) {
  return !job.request.keys.empty() && job.request.dataset == dataset;
}

}  // namespace

InMemoryStateStore::InMemoryStateStore()
    : InMemoryStateStore(RandomStoreId(), absl::Now()) {}

InMemoryStateStore::InMemoryStateStore(std::string store_id,
                                       absl::Time created_at)
    : store_id_(std::move(store_id)),
      created_at_(absl::FromUnixSeconds(absl::ToUnixSeconds(created_at))) {}

// ---- fault injection --------------------------------------------------------

void InMemoryStateStore::SetWriteHook(WriteHook hook) {
  faults_.SetHook(std::move(hook));
}

void InMemoryStateStore::FailWrites(absl::Status status) {
  faults_.FailWrites(std::move(status));
}

void InMemoryStateStore::FailNextWrites(int n, absl::Status status) {
  faults_.FailNextWrites(n, std::move(status));
}

int64_t InMemoryStateStore::write_calls() const { return faults_.calls(); }

int64_t InMemoryStateStore::write_calls(const std::string& method) const {
  return faults_.calls(method);
}

int64_t InMemoryStateStore::failed_writes() const { return faults_.failed(); }

// ---- jobs -------------------------------------------------------------------

MemoryJobRow* InMemoryStateStore::FindLocked(const std::string& id) {
  auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : &it->second;
}

absl::StatusOr<JobState> InMemoryStateStore::StateOf(const MemoryJobRow* row,
                                                     const std::string& id) {
  if (row == nullptr) return JobNotFound(id);
  return row->job().state;
}

void InMemoryStateStore::WriteTransitionLocked(MemoryJobRow* row, JobState from,
                                               JobState to,
                                               const std::string& message,
                                               absl::Time now) {
  row->Move(from, to, message, now);
  audit_.Append(row->job().id, JobStateName(from), JobStateName(to), message,
                now);
}

absl::StatusOr<StoreInfo> InMemoryStateStore::Info() {
  absl::MutexLock lock(&mu_);
  StoreInfo info;
  info.store_id = store_id_;
  info.created_at = created_at_;
  info.last_job_number = last_job_number_;
  return info;
}

absl::Status InMemoryStateStore::ReserveJobNumbers(int64_t n) {
  if (absl::Status s = faults_.Begin("ReserveJobNumbers"); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  last_job_number_ = std::max(last_job_number_, n);
  return absl::OkStatus();
}

absl::StatusOr<CreateJobResult> InMemoryStateStore::CreateJob(const Job& job,
                                                              absl::Time now) {
  if (absl::Status s = faults_.Begin("CreateJob"); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  if (!job.idempotency_key.empty()) {
    auto it = ids_by_key_.find(job.idempotency_key);
    if (it != ids_by_key_.end()) {
      return CreateJobResult{
          jobs_.at(it->second).Read(/*with_partitions=*/true), false};
    }
  }
  ASSIGN_OR_RETURN(MemoryJobRow row,
                   MemoryJobRow::Create(job, last_job_number_ + 1, now));
  const int64_t seq = ++last_job_number_;
  const std::string id = row.job().id;
  ids_by_seq_[seq] = id;
  if (!job.idempotency_key.empty()) ids_by_key_[job.idempotency_key] = id;
  const MemoryJobRow& inserted =
      jobs_.emplace(id, std::move(row)).first->second;
  audit_.Append(id, "", JobStateName(JobState::kQueued),
                job.message.empty() ? "created" : job.message, now);
  return CreateJobResult{inserted.Read(/*with_partitions=*/true), true};
}

absl::StatusOr<std::optional<Job>> InMemoryStateStore::FindJobByKey(
    const std::string& idempotency_key) {
  if (idempotency_key.empty()) return std::optional<Job>();
  absl::MutexLock lock(&mu_);
  auto it = ids_by_key_.find(idempotency_key);
  if (it == ids_by_key_.end()) return std::optional<Job>();
  const MemoryJobRow* row = FindLocked(it->second);
  if (row == nullptr) return std::optional<Job>();
  return std::optional<Job>(row->Read(/*with_partitions=*/true));
}

absl::StatusOr<Job> InMemoryStateStore::GetJob(const std::string& id) {
  absl::MutexLock lock(&mu_);
  const MemoryJobRow* row = FindLocked(id);
  if (row == nullptr) return JobNotFound(id);
  return row->Read(/*with_partitions=*/true);
}

absl::StatusOr<Job> InMemoryStateStore::GetJobProgress(const std::string& id) {
  absl::MutexLock lock(&mu_);
  const MemoryJobRow* row = FindLocked(id);
  if (row == nullptr) return JobNotFound(id);
  return row->Read(/*with_partitions=*/false);
}

absl::StatusOr<std::vector<std::string>> InMemoryStateStore::ListJobIds(
    const std::vector<JobState>& states) {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> ids;
  for (const auto& [seq, id] : ids_by_seq_) {
    if (Contains(states, jobs_.at(id).job().state)) ids.push_back(id);
  }
  return ids;
}

absl::StatusOr<std::vector<Job>> InMemoryStateStore::ListJobs(
    const JobFilter& filter) {
  absl::MutexLock lock(&mu_);
  std::vector<Job> jobs;
  for (auto it = ids_by_seq_.rbegin(); it != ids_by_seq_.rend(); ++it) {
    if (filter.limit > 0 && jobs.size() >= static_cast<size_t>(filter.limit)) {
      break;
    }
    if (filter.before_number > 0 && it->first >= filter.before_number) {
      continue;
    }
    const MemoryJobRow& row = jobs_.at(it->second);
    const Job& job = row.job();
    if (!filter.states.empty() && !Contains(filter.states, job.state)) {
      continue;
    }
    if (!filter.dataset.empty() &&
        std::none_of(job.plan.datasets.begin(), job.plan.datasets.end(),
                     [&](const DatasetPlan& dp) {
                       return dp.dataset == filter.dataset;
                     })) {
      continue;
    }
    jobs.push_back(row.Read(filter.view == JobView::kFull));
  }
  return jobs;
}

// ---- moves ------------------------------------------------------------------

absl::Status InMemoryStateStore::TransitionJob(
    const std::string& job_id, std::optional<JobState> expected_from,
    JobState to, const std::string& message, absl::Time now) {
  if (absl::Status s = faults_.Begin("TransitionJob"); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  MemoryJobRow* row = FindLocked(job_id);
  ASSIGN_OR_RETURN(JobState from, GuardTransition(job_id, StateOf(row, job_id),
                                                  expected_from, to));
  WriteTransitionLocked(row, from, to, message, now);
  return absl::OkStatus();
}

absl::StatusOr<int64_t> InMemoryStateStore::RetryJob(const std::string& job_id,
                                                     JobState expected_from,
                                                     JobState to,
                                                     const std::string& message,
                                                     absl::Time now) {
  if (absl::Status s = faults_.Begin("RetryJob"); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  MemoryJobRow* row = FindLocked(job_id);
  ASSIGN_OR_RETURN(JobState from,
                   GuardTransition(job_id, StateOf(row, job_id), expected_from,
                                   to, GuardedMove::kRetry));
  const int64_t reset = row->MoveTasks(
      {TaskState::kFailed, TaskState::kCancelled, TaskState::kRunning},
      TaskState::kPending, now, /*reset_attempts=*/true);
  WriteTransitionLocked(row, from, to, message, now);
  return reset;
}

absl::Status InMemoryStateStore::SetJobMessage(const std::string& job_id,
                                               JobState expected_state,
                                               const std::string& message,
                                               absl::Time now) {
  if (absl::Status s = faults_.Begin("SetJobMessage"); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  MemoryJobRow* row = FindLocked(job_id);
  RETURN_IF_ERROR(GuardState(job_id, StateOf(row, job_id), expected_state));
  row->mutable_job().message = message;
  row->mutable_job().update_time = StoredTime(now);
  return absl::OkStatus();
}

absl::Status InMemoryStateStore::ApproveJob(const std::string& job_id,
                                            JobState expected_from, JobState to,
                                            const Approval& approval,
                                            const std::string& message,
                                            absl::Time now) {
  if (absl::Status s = faults_.Begin("ApproveJob"); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  MemoryJobRow* row = FindLocked(job_id);
  ASSIGN_OR_RETURN(JobState from,
                   GuardTransition(job_id, StateOf(row, job_id), expected_from,
                                   to, GuardedMove::kApproval));
  if (row->job().approval) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", job_id, " was approved already"));
  }
  Approval stored = approval;
  stored.from_state = from;
  stored.approved_at = StoredTime(approval.approved_at == absl::InfinitePast()
                                      ? now
                                      : approval.approved_at);
  row->mutable_job().approval = std::move(stored);
  WriteTransitionLocked(row, from, to, message, now);
  return absl::OkStatus();
}

// ---- tasks ------------------------------------------------------------------

absl::StatusOr<std::vector<PartitionTask>> InMemoryStateStore::ListTasks(
    const std::string& job_id) {
  TaskQuery all;
  all.job_id = job_id;
  all.limit = 0;
  return ListTaskPage(all);
}

absl::StatusOr<std::vector<PartitionTask>> InMemoryStateStore::ListTaskPage(
    const TaskQuery& query) {
  absl::MutexLock lock(&mu_);
  const MemoryJobRow* row = FindLocked(query.job_id);
  if (row == nullptr) return JobNotFound(query.job_id);
  return row->Select(query);
}

absl::Status InMemoryStateStore::UpdateTask(const PartitionTask& task) {
  if (absl::Status s = faults_.Begin("UpdateTask"); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  return WriteTasksLocked(absl::MakeConstSpan(&task, 1));
}

absl::Status InMemoryStateStore::UpdateTasks(
    const std::vector<PartitionTask>& tasks) {
  if (absl::Status s = faults_.Begin("UpdateTasks"); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  return WriteTasksLocked(tasks);
}

absl::Status InMemoryStateStore::WriteTasksLocked(
    absl::Span<const PartitionTask> tasks) {
  // All or nothing: every task is found before any is written.
  std::vector<PartitionTask*> found;
  for (const PartitionTask& task : tasks) {
    MemoryJobRow* row = FindLocked(task.job_id);
    PartitionTask* t =
        row == nullptr ? nullptr : row->FindTask(task.dataset, task.partition);
    if (t == nullptr) {
      return absl::NotFoundError(absl::StrCat("no task ", task.dataset, "/",
                                              task.partition, " in job ",
                                              task.job_id));
    }
    found.push_back(t);
  }
  for (size_t i = 0; i < tasks.size(); ++i) {
    MemoryJobRow::Checkpoint(tasks[i], found[i]);
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> InMemoryStateStore::UpdateTasksInState(
    const std::string& job_id, const std::vector<TaskState>& from, TaskState to,
    absl::Time now) {
  if (absl::Status s = faults_.Begin("UpdateTasksInState"); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  MemoryJobRow* row = FindLocked(job_id);
  if (row == nullptr) return 0;
  return row->MoveTasks(from, to, now);
}

// ---- lineage ----------------------------------------------------------------

absl::Status InMemoryStateStore::RecordPublication(const std::string& job_id,
                                                   PublicationLineage& lineage,
                                                   JobState to,
                                                   absl::Time now) {
  if (absl::Status s = faults_.Begin("RecordPublication"); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  MemoryJobRow* row = FindLocked(job_id);
  ASSIGN_OR_RETURN(JobState from, StateOf(row, job_id));
  ASSIGN_OR_RETURN(
      bool record,
      GuardPublication(job_id, from, lineage_.HasPublished(job_id), to));
  if (!record) return absl::OkStatus();  // a repeat after a restart
  // Every page's records are appended together once all were built: a
  // refused record leaves nothing behind.
  std::vector<LineageRecord> all;
  RETURN_IF_ERROR(BuildPublicationLineage(
      job_id, lineage,
      [&](const TaskQuery& page) -> absl::StatusOr<std::vector<PartitionTask>> {
        return row->Select(page);
      },
      [&](const std::vector<LineageRecord>& records) {
        all.insert(all.end(), records.begin(), records.end());
        return absl::OkStatus();
      }));
  RETURN_IF_ERROR(lineage_.Append(LineageAction::kPublish, job_id, all, now));
  row->MoveTasks({TaskState::kStaged}, TaskState::kPublished, now);
  WriteTransitionLocked(row, from, to, lineage.Message(), now);
  return absl::OkStatus();
}

absl::Status InMemoryStateStore::RecordRollback(
    const std::string& job_id, const RollbackInfo& info,
    const std::vector<LineageRecord>& lineage, const std::string& message,
    const std::string& also_message, absl::Time now) {
  if (absl::Status s = faults_.Begin("RecordRollback"); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  MemoryJobRow* row = FindLocked(job_id);
  ASSIGN_OR_RETURN(JobState from, StateOf(row, job_id));
  if (from == JobState::kRolledBack) return absl::OkStatus();  // recorded
  std::vector<MemoryJobRow*> rows = {row};
  std::vector<std::pair<std::string, JobState>> states = {{job_id, from}};
  for (const std::string& other : info.also_rolled_back) {
    if (other == job_id) continue;
    MemoryJobRow* r = FindLocked(other);
    ASSIGN_OR_RETURN(JobState state, StateOf(r, other));
    rows.push_back(r);
    states.push_back({other, state});
  }
  RETURN_IF_ERROR(GuardRollback(states));
  // As the SQLite store's foreign key: records of jobs the store holds.
  for (const LineageRecord& rec : lineage) {
    const std::string& id = rec.job_id.empty() ? job_id : rec.job_id;
    if (FindLocked(id) == nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat("rollback lineage names job ", id,
                       ", which the store does not hold"));
    }
  }
  RETURN_IF_ERROR(
      lineage_.Append(LineageAction::kRollback, job_id, lineage, now));
  for (MemoryJobRow* r : rows) {
    const bool main = r == row;
    RollbackInfo stored;
    stored.requested_by = info.requested_by;
    stored.reason = info.reason;
    stored.at = StoredTime(info.at == absl::InfinitePast() ? now : info.at);
    stored.forced = info.forced;
    if (main) {
      stored.with_job = info.with_job;
      stored.also_rolled_back = info.also_rolled_back;
      stored.partitions = info.partitions;
      stored.rows = info.rows;
    } else {
      stored.with_job = job_id;
    }
    r->mutable_job().rollback = std::move(stored);
    WriteTransitionLocked(r, r->job().state, JobState::kRolledBack,
                          main ? message : also_message, now);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<LineageRecord>> InMemoryStateStore::GetLineage(
    const std::string& dataset, const std::string& partition) {
  absl::MutexLock lock(&mu_);
  return lineage_.Versions(dataset, partition);
}

absl::StatusOr<std::optional<LineageRecord>>
InMemoryStateStore::NewestLineageOf(const std::string& dataset) {
  absl::MutexLock lock(&mu_);
  return lineage_.NewestOf(dataset);
}

absl::StatusOr<std::vector<LineageRecord>>
InMemoryStateStore::GetLineageOverlapping(const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  if (FindLocked(job_id) == nullptr) return JobNotFound(job_id);
  return lineage_.Overlapping(job_id);
}

absl::StatusOr<std::map<std::string, absl::Time>>
InMemoryStateStore::PublicationTimes(const std::vector<std::string>& job_ids) {
  absl::MutexLock lock(&mu_);
  return lineage_.PublicationTimes(job_ids);
}

absl::Status InMemoryStateStore::ReplaceJobDiff(const JobDiffHeader& header,
                                                DiffPages& pages) {
  if (absl::Status s = faults_.Begin("ReplaceJobDiff"); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  if (FindLocked(header.job_id) == nullptr) return JobNotFound(header.job_id);
  // Every page is collected before the diff is replaced: a failure midway
  // leaves the old one.
  JobDiff diff = EmptyDiffOf(header);
  RETURN_IF_ERROR(WriteDiffPages(
      header, pages,
      [&](size_t dataset, const std::vector<PartitionDiff>& partitions) {
        std::vector<PartitionDiff>& to = diff.datasets[dataset].partitions;
        to.insert(to.end(), partitions.begin(), partitions.end());
        return absl::OkStatus();
      }));
  return diffs_.Replace(diff);
}

absl::StatusOr<std::optional<JobDiff>> InMemoryStateStore::GetJobDiff(
    const std::string& job_id, const std::string& dataset, bool with_samples) {
  absl::MutexLock lock(&mu_);
  if (FindLocked(job_id) == nullptr) return JobNotFound(job_id);
  return diffs_.Get(job_id, dataset, with_samples);
}

absl::Status InMemoryStateStore::SetReplayPolicyPause(
    const ReplayPolicyPause& pause, const std::string& message) {
  if (absl::Status s = faults_.Begin("SetReplayPolicyPause"); !s.ok()) {
    return s;
  }
  absl::MutexLock lock(&mu_);
  auto it = pauses_.find(pause.dataset);
  const bool was_paused = it != pauses_.end() && it->second.paused;
  ReplayPolicyPause stored = pause;
  stored.at = StoredTime(pause.at);
  pauses_[pause.dataset] = stored;
  audit_.AppendSubject(ReplayPolicySubject(pause.dataset),
                       was_paused ? "PAUSED" : "RUNNING",
                       pause.paused ? "PAUSED" : "RUNNING", message, pause.at);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<ReplayPolicyPause>>
InMemoryStateStore::ListReplayPolicyPauses() {
  absl::MutexLock lock(&mu_);
  std::vector<ReplayPolicyPause> out;
  for (const auto& [dataset, pause] : pauses_) out.push_back(pause);
  return out;
}

absl::StatusOr<std::map<std::string, PartitionDiff>>
InMemoryStateStore::PartitionDiffs(const std::string& dataset,
                                   const std::string& partition) {
  absl::MutexLock lock(&mu_);
  return diffs_.Of(dataset, partition);
}

// ---- governance -------------------------------------------------------------

absl::StatusOr<std::vector<AuditEvent>> InMemoryStateStore::ListAuditEvents(
    const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  return audit_.Of(job_id);
}

absl::StatusOr<std::vector<AuditEvent>> InMemoryStateStore::ListAuditLog(
    const AuditQuery& query) {
  absl::MutexLock lock(&mu_);
  return audit_.Select(query);
}

absl::Status InMemoryStateStore::ReplaceCheckResults(
    const std::string& job_id, const std::vector<CheckResult>& results) {
  if (absl::Status s = faults_.Begin("ReplaceCheckResults"); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  if (FindLocked(job_id) == nullptr) return JobNotFound(job_id);
  check_results_[job_id] = results;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<CheckResult>> InMemoryStateStore::ListCheckResults(
    const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  if (FindLocked(job_id) == nullptr) return JobNotFound(job_id);
  auto it = check_results_.find(job_id);
  if (it == check_results_.end()) return std::vector<CheckResult>();
  return it->second;
}

absl::Status InMemoryStateStore::ReplaceConsumerConfirmations(
    const std::string& job_id, const std::vector<ConsumerFinding>& results) {
  absl::MutexLock lock(&mu_);
  if (FindLocked(job_id) == nullptr) return JobNotFound(job_id);
  std::vector<ConsumerFinding>& stored = confirmations_[job_id];
  stored = results;
  for (ConsumerFinding& c : stored) {
    c.at = StoredTime(c.at);
    c.latency = StoredDuration(c.latency);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<ConsumerFinding>>
InMemoryStateStore::ListConsumerConfirmations(const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  if (FindLocked(job_id) == nullptr) return JobNotFound(job_id);
  auto it = confirmations_.find(job_id);
  if (it == confirmations_.end()) return std::vector<ConsumerFinding>();
  return it->second;
}

// ---- queries ----------------------------------------------------------------

absl::StatusOr<std::vector<ConsumerStanding>>
InMemoryStateStore::ListConsumerStandings() {
  absl::MutexLock lock(&mu_);
  std::map<std::pair<std::string, std::string>, ConsumerStanding> standings;
  // Jobs in creation order (ids "bf-<n>" by number).
  std::vector<std::pair<int64_t, std::string>> order;
  for (const auto& [id, results] : confirmations_) {
    order.emplace_back(std::stoll(id.substr(3)), id);
  }
  std::sort(order.begin(), order.end());
  for (const auto& [n, id] : order) {
    const MemoryJobRow* row = FindLocked(id);
    for (const ConsumerFinding& c : confirmations_[id]) {
      ConsumerStanding& s = standings[{c.dataset, c.consumer}];
      s.dataset = c.dataset;
      s.consumer = c.consumer;
      if (!c.healthy && row != nullptr &&
          row->job().state == JobState::kDownstreamUnhealthy &&
          (s.unhealthy_jobs.empty() || s.unhealthy_jobs.back() != id)) {
        s.unhealthy_jobs.push_back(id);
      }
    }
  }
  std::vector<ConsumerStanding> out;
  for (auto& [key, s] : standings) out.push_back(std::move(s));
  return out;
}

absl::StatusOr<StoreStats> InMemoryStateStore::Stats() {
  absl::MutexLock lock(&mu_);
  StoreStats stats;
  for (const auto& [id, row] : jobs_) {
    const JobState state = row.job().state;
    ++stats.jobs_by_state[static_cast<size_t>(state)];
    for (const PartitionTask& t : row.tasks()) {
      ++stats.tasks_by_state[static_cast<size_t>(t.state)];
      if (state == JobState::kRunning) {
        ++stats.running_tasks_total;
        if (t.state == TaskState::kStaged || t.state == TaskState::kPublished ||
            t.state == TaskState::kUnchanged ||
            t.state == TaskState::kSkipped) {
          ++stats.running_tasks_done;
        }
      }
    }
  }
  stats.last_lineage_id = lineage_.last_id();
  stats.last_audit_seq = audit_.last_seq();
  return stats;
}

absl::StatusOr<std::map<std::string, int64_t>>
InMemoryStateStore::LastRunInputRows(
    const std::string& dataset, const std::vector<std::string>& partitions) {
  absl::MutexLock lock(&mu_);
  std::map<std::string, int64_t> out;
  // Newest job first: the first PUBLISHED or UNCHANGED task of a partition
  // wins.
  for (auto it = ids_by_seq_.rbegin(); it != ids_by_seq_.rend(); ++it) {
    MemoryJobRow& row = jobs_.at(it->second);
    for (const std::string& p : partitions) {
      if (out.count(p) > 0) continue;
      const PartitionTask* task = row.FindTask(dataset, p);
      if (task == nullptr || (task->state != TaskState::kPublished &&
                              task->state != TaskState::kUnchanged)) {
        continue;
      }
      int64_t input_rows = 0;
      for (const InputFingerprint& in : task->inputs) input_rows += in.rows;
      out[p] = input_rows;
    }
  }
  return out;
}

absl::StatusOr<std::map<std::string, VerifiedVersion>>
InMemoryStateStore::VerifiedVersions(
    const std::string& dataset, const std::vector<std::string>& partitions) {
  absl::MutexLock lock(&mu_);
  const std::set<std::string> wanted(partitions.begin(), partitions.end());
  std::map<std::string, std::pair<int64_t, VerifiedVersion>> best;
  auto offer = [&best](int64_t seq, VerifiedVersion v) {
    auto it = best.find(v.partition);
    if (it == best.end() || seq > it->second.first) {
      std::string p = v.partition;
      best[p] = {seq, std::move(v)};
    }
  };
  // Publish records of jobs neither rolled back nor keyed on `dataset`.
  std::map<std::string, absl::Time> rolled_back_at;
  for (const LineageRecord* r : lineage_.Of(dataset, wanted)) {
    if (r->action == LineageAction::kRollback) {
      absl::Time& at =
          rolled_back_at.emplace(r->partition, absl::InfinitePast())
              .first->second;
      at = std::max(at, r->published_at);
      continue;
    }
    const MemoryJobRow* row = FindLocked(r->job_id);
    if (row == nullptr || row->job().state == JobState::kRolledBack ||
        KeyedOn(row->job(), dataset)) {
      continue;
    }
    VerifiedVersion v;
    v.partition = r->partition;
    v.job_id = r->job_id;
    v.transform_version = r->transform_version;
    v.inputs = r->inputs;
    offer(row->seq(), std::move(v));
  }
  // UNCHANGED tasks of jobs whose publish committed, unless a rollback of
  // the partition was recorded since the job ended.
  for (const auto& [seq, id] : ids_by_seq_) {
    const MemoryJobRow& row = jobs_.at(id);
    const Job& job = row.job();
    if (!HasPublished(job.state) || job.state == JobState::kRolledBack ||
        KeyedOn(job, dataset)) {
      continue;
    }
    std::string version;
    for (const DatasetPlan& dp : job.plan.datasets) {
      if (dp.dataset == dataset) version = dp.transform_version;
    }
    for (const PartitionTask& t : row.tasks()) {
      if (t.dataset != dataset || t.state != TaskState::kUnchanged) continue;
      if (!wanted.empty() && wanted.count(t.partition) == 0) continue;
      auto rb = rolled_back_at.find(t.partition);
      if (rb != rolled_back_at.end() && rb->second >= job.end_time) continue;
      VerifiedVersion v;
      v.partition = t.partition;
      v.job_id = id;
      v.unchanged = true;
      v.transform_version = version;
      v.inputs = t.inputs;
      offer(seq, std::move(v));
    }
  }
  std::map<std::string, VerifiedVersion> out;
  for (auto& [p, c] : best) out.emplace(p, std::move(c.second));
  return out;
}

}  // namespace backfill::testing
