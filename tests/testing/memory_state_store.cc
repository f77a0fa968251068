#include "tests/testing/memory_state_store.h"

#include <algorithm>
#include <cstdint>
#include <random>
#include <set>
#include <tuple>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/job_state_machine.h"
#include "core/status_macros.h"
#include "core/task_tally.h"
#include "core/transition_guard.h"

namespace backfill::testing {
namespace {

// A time as SqliteStateStore reads it back: unix microseconds (rounded
// down); an infinite time is NULL, which reads as InfinitePast.
// A double as the SQLite store keeps it: printed with 17 digits.
double Stored17(double v) {
  double out = 0;
  return absl::SimpleAtod(absl::StrFormat("%.17g", v), &out) ? out : v;
}

absl::Time Stored(absl::Time t) {
  if (t == absl::InfinitePast() || t == absl::InfiniteFuture()) {
    return absl::InfinitePast();
  }
  return absl::FromUnixMicros(absl::ToUnixMicros(t));
}

std::string RandomStoreId() {
  std::random_device device;
  std::mt19937_64 gen((static_cast<uint64_t>(device()) << 32) ^ device());
  return absl::StrFormat("%016x%016x", gen(), gen());
}

bool Contains(const std::vector<TaskState>& states, TaskState s) {
  return std::find(states.begin(), states.end(), s) != states.end();
}

bool Contains(const std::vector<JobState>& states, JobState s) {
  return std::find(states.begin(), states.end(), s) != states.end();
}

int64_t InputRows(const std::vector<InputFingerprint>& inputs) {
  int64_t sum = 0;
  for (const InputFingerprint& in : inputs) sum += in.rows;
  return sum;
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
  absl::MutexLock lock(&mu_);
  hook_ = std::move(hook);
}

void InMemoryStateStore::FailWrites(absl::Status status) {
  absl::MutexLock lock(&mu_);
  fail_writes_ = std::move(status);
}

void InMemoryStateStore::FailNextWrites(int n, absl::Status status) {
  absl::MutexLock lock(&mu_);
  fail_next_ = std::max(n, 0);
  fail_next_status_ = std::move(status);
}

int64_t InMemoryStateStore::write_calls() const {
  absl::MutexLock lock(&mu_);
  int64_t total = 0;
  for (const auto& [method, n] : write_calls_) total += n;
  return total;
}

int64_t InMemoryStateStore::write_calls(const std::string& method) const {
  absl::MutexLock lock(&mu_);
  auto it = write_calls_.find(method);
  return it == write_calls_.end() ? 0 : it->second;
}

int64_t InMemoryStateStore::failed_writes() const {
  absl::MutexLock lock(&mu_);
  return failed_writes_;
}

absl::Status InMemoryStateStore::BeginWrite(const std::string& method) {
  WriteHook hook;
  {
    absl::MutexLock lock(&mu_);
    ++write_calls_[method];
    hook = hook_;
  }
  absl::Status status = hook ? hook(method) : absl::OkStatus();
  absl::MutexLock lock(&mu_);
  if (status.ok() && fail_next_ > 0 && !fail_next_status_.ok()) {
    --fail_next_;
    status = fail_next_status_;
  }
  if (status.ok()) status = fail_writes_;
  if (!status.ok()) ++failed_writes_;
  return status;
}

// ---- reads
// -------------------------------------------------------------------

absl::StatusOr<std::map<std::string, int64_t>>
InMemoryStateStore::LastRunInputRows(
    const std::string& dataset, const std::vector<std::string>& partitions) {
  absl::MutexLock lock(&mu_);
  std::map<std::string, int64_t> out;
  // Newest job first: the first PUBLISHED or UNCHANGED task of a partition
  // wins.
  for (auto it = ids_by_seq_.rbegin(); it != ids_by_seq_.rend(); ++it) {
    const JobRow& row = jobs_.at(it->second);
    for (const std::string& p : partitions) {
      if (out.count(p) > 0) continue;
      auto t = row.task_index.find({dataset, p});
      if (t == row.task_index.end()) continue;
      const PartitionTask& task = row.tasks[t->second];
      if (task.state == TaskState::kPublished ||
          task.state == TaskState::kUnchanged) {
        out[p] = InputRows(task.inputs);
      }
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
  std::map<std::string, absl::Time> rolled_back_at;
  for (const auto& [key, rows] : lineage_) {
    if (key.first != dataset) continue;
    if (!wanted.empty() && wanted.count(key.second) == 0) continue;
    for (const LineageRow& r : rows) {
      if (r.record.action == LineageAction::kRollback) {
        absl::Time& at =
            rolled_back_at.emplace(key.second, absl::InfinitePast())
                .first->second;
        at = std::max(at, r.record.published_at);
        continue;
      }
      auto job = jobs_.find(r.record.job_id);
      if (job == jobs_.end() ||
          job->second.job.state == JobState::kRolledBack ||
          KeyedOn(job->second.job, dataset)) {
        continue;
      }
      VerifiedVersion v;
      v.partition = key.second;
      v.job_id = r.record.job_id;
      v.transform_version = r.record.transform_version;
      v.inputs = r.record.inputs;
      offer(job->second.seq, std::move(v));
    }
  }
  for (const auto& [seq, id] : ids_by_seq_) {
    const JobRow& row = jobs_.at(id);
    // A rolled-back job vouches for nothing, as its lineage does not.
    const JobState state = row.job.state;
    if (!HasPublished(state) || state == JobState::kRolledBack ||
        KeyedOn(row.job, dataset)) {
      continue;
    }
    std::string version;
    for (const DatasetPlan& dp : row.job.plan.datasets) {
      if (dp.dataset == dataset) version = dp.transform_version;
    }
    for (const PartitionTask& t : row.tasks) {
      if (t.dataset != dataset || t.state != TaskState::kUnchanged) continue;
      if (!wanted.empty() && wanted.count(t.partition) == 0) continue;
      auto rb = rolled_back_at.find(t.partition);
      if (rb != rolled_back_at.end() && rb->second >= row.job.end_time) {
        continue;
      }
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

InMemoryStateStore::JobRow* InMemoryStateStore::FindLocked(
    const std::string& id) {
  auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : &it->second;
}

absl::StatusOr<JobState> InMemoryStateStore::StateOf(const JobRow* row,
                                                     const std::string& id) {
  if (row == nullptr) return JobNotFound(id);
  return row->job.state;
}

Job InMemoryStateStore::LoadLocked(const JobRow& row,
                                   bool with_partitions) const {
  Job job = row.job;
  if (with_partitions) {
    // As the SQLite store: a dataset's partitions are its tasks, found by
    // name (the last plan entry of a name gets them).
    std::map<std::string, size_t> index;
    for (size_t i = 0; i < job.plan.datasets.size(); ++i) {
      index[job.plan.datasets[i].dataset] = i;
    }
    for (size_t k = 0; k < row.tasks.size(); ++k) {
      const PartitionTask& t = row.tasks[k];
      auto it = index.find(t.dataset);
      if (it != index.end()) {
        DatasetPlan& dp = job.plan.datasets[it->second];
        dp.partitions.push_back(t.partition);
        dp.partition_reasons.push_back(
            k < row.task_reasons.size() ? row.task_reasons[k] : "");
      }
    }
  }
  TaskTally tally;
  for (const PartitionTask& t : row.tasks) tally.Add(t);
  tally.FillIn(&job);
  return job;
}

absl::StatusOr<StoreInfo> InMemoryStateStore::Info() {
  absl::MutexLock lock(&mu_);
  StoreInfo info;
  info.store_id = store_id_;
  info.created_at = created_at_;
  info.last_job_number = last_job_number_;
  return info;
}

absl::StatusOr<std::vector<std::string>> InMemoryStateStore::ListJobIds(
    const std::vector<JobState>& states) {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> ids;
  for (const auto& [seq, id] : ids_by_seq_) {
    if (Contains(states, jobs_.at(id).job.state)) ids.push_back(id);
  }
  return ids;
}

absl::StatusOr<std::optional<Job>> InMemoryStateStore::FindJobByKey(
    const std::string& idempotency_key) {
  if (idempotency_key.empty()) return std::optional<Job>();
  absl::MutexLock lock(&mu_);
  auto it = ids_by_key_.find(idempotency_key);
  if (it == ids_by_key_.end()) return std::optional<Job>();
  const JobRow* row = FindLocked(it->second);
  if (row == nullptr) return std::optional<Job>();
  return std::optional<Job>(LoadLocked(*row, /*with_partitions=*/true));
}

absl::StatusOr<Job> InMemoryStateStore::GetJob(const std::string& id) {
  absl::MutexLock lock(&mu_);
  const JobRow* row = FindLocked(id);
  if (row == nullptr) return JobNotFound(id);
  return LoadLocked(*row, /*with_partitions=*/true);
}

absl::StatusOr<Job> InMemoryStateStore::GetJobProgress(const std::string& id) {
  absl::MutexLock lock(&mu_);
  const JobRow* row = FindLocked(id);
  if (row == nullptr) return JobNotFound(id);
  return LoadLocked(*row, /*with_partitions=*/false);
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
    const JobRow& row = jobs_.at(it->second);
    if (!filter.states.empty() && !Contains(filter.states, row.job.state)) {
      continue;
    }
    if (!filter.dataset.empty() &&
        std::none_of(row.job.plan.datasets.begin(), row.job.plan.datasets.end(),
                     [&](const DatasetPlan& dp) {
                       return dp.dataset == filter.dataset;
                     })) {
      continue;
    }
    jobs.push_back(LoadLocked(row, filter.view == JobView::kFull));
  }
  return jobs;
}

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
  const JobRow* row = FindLocked(query.job_id);
  if (row == nullptr) return JobNotFound(query.job_id);
  std::vector<PartitionTask> tasks;
  for (size_t k = 0; k < row->tasks.size(); ++k) {
    if (query.limit > 0 && tasks.size() >= static_cast<size_t>(query.limit)) {
      break;
    }
    const PartitionTask& t = row->tasks[k];
    if (static_cast<int64_t>(k) <= query.after_ordinal) continue;
    if (!query.dataset.empty() && t.dataset != query.dataset) continue;
    if (!query.states.empty() && !Contains(query.states, t.state)) continue;
    PartitionTask out = t;
    out.ordinal = static_cast<int64_t>(k);
    out.reason = k < row->task_reasons.size() ? row->task_reasons[k] : "";
    tasks.push_back(std::move(out));
  }
  return tasks;
}

absl::StatusOr<std::vector<LineageRecord>> InMemoryStateStore::GetLineage(
    const std::string& dataset, const std::string& partition) {
  absl::MutexLock lock(&mu_);
  auto it = lineage_.find({dataset, partition});
  if (it == lineage_.end()) return std::vector<LineageRecord>();
  std::vector<const LineageRow*> rows;
  for (const LineageRow& r : it->second) rows.push_back(&r);
  // Newest first: the later record first, whatever the clocks said.
  std::sort(
      rows.begin(), rows.end(),
      [](const LineageRow* a, const LineageRow* b) { return a->id > b->id; });
  std::vector<LineageRecord> out;
  for (const LineageRow* r : rows) out.push_back(r->record);
  return out;
}

absl::StatusOr<std::optional<LineageRecord>>
InMemoryStateStore::NewestLineageOf(const std::string& dataset) {
  absl::MutexLock lock(&mu_);
  const LineageRow* newest = nullptr;
  for (const auto& [key, rows] : lineage_) {
    if (key.first != dataset) continue;
    for (const LineageRow& r : rows) {
      if (newest == nullptr || r.id > newest->id) newest = &r;
    }
  }
  if (newest == nullptr) return std::optional<LineageRecord>();
  return std::optional<LineageRecord>(newest->record);
}

absl::StatusOr<std::vector<AuditEvent>> InMemoryStateStore::ListAuditEvents(
    const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  auto it = audit_.find(job_id);
  if (it == audit_.end()) return std::vector<AuditEvent>();
  return it->second;
}

absl::Status InMemoryStateStore::ReplaceCheckResults(
    const std::string& job_id, const std::vector<CheckResult>& results) {
  if (absl::Status s = BeginWrite("ReplaceCheckResults"); !s.ok()) return s;
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
    c.at = Stored(c.at);
    // As the SQLite store keeps it: whole microseconds.
    c.latency = absl::Microseconds(absl::ToInt64Microseconds(c.latency));
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
    const JobRow* row = FindLocked(id);
    for (const ConsumerFinding& c : confirmations_[id]) {
      ConsumerStanding& s = standings[{c.dataset, c.consumer}];
      s.dataset = c.dataset;
      s.consumer = c.consumer;
      if (!c.healthy && row != nullptr &&
          row->job.state == JobState::kDownstreamUnhealthy &&
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
    ++stats.jobs_by_state[static_cast<size_t>(row.job.state)];
    for (const PartitionTask& t : row.tasks) {
      ++stats.tasks_by_state[static_cast<size_t>(t.state)];
      if (row.job.state == JobState::kRunning) {
        ++stats.running_tasks_total;
        if (t.state == TaskState::kStaged || t.state == TaskState::kPublished ||
            t.state == TaskState::kUnchanged ||
            t.state == TaskState::kSkipped) {
          ++stats.running_tasks_done;
        }
      }
    }
  }
  stats.last_lineage_id = next_lineage_id_ - 1;
  stats.last_audit_seq = next_audit_seq_ - 1;
  return stats;
}

// ---- writes
// ------------------------------------------------------------------

absl::Status InMemoryStateStore::ReserveJobNumbers(int64_t n) {
  if (absl::Status s = BeginWrite("ReserveJobNumbers"); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  last_job_number_ = std::max(last_job_number_, n);
  return absl::OkStatus();
}

absl::StatusOr<CreateJobResult> InMemoryStateStore::CreateJob(const Job& job,
                                                              absl::Time now) {
  if (absl::Status s = BeginWrite("CreateJob"); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  if (!job.idempotency_key.empty()) {
    auto it = ids_by_key_.find(job.idempotency_key);
    if (it != ids_by_key_.end()) {
      return CreateJobResult{
          LoadLocked(jobs_.at(it->second), /*with_partitions=*/true), false};
    }
  }
  // Everything is checked before anything is written.
  std::set<std::pair<std::string, std::string>> planned;
  for (const DatasetPlan& dp : job.plan.datasets) {
    for (const std::string& partition : dp.partitions) {
      if (!planned.insert({dp.dataset, partition}).second) {
        return absl::InvalidArgumentError(absl::StrCat("plan lists partition '",
                                                       partition, "' of ",
                                                       dp.dataset, " twice"));
      }
    }
  }
  const int64_t seq = ++last_job_number_;
  const std::string id = absl::StrCat("bf-", seq);
  const absl::Time at = Stored(now);

  JobRow row;
  row.seq = seq;
  Job& stored = row.job;
  stored.id = id;
  stored.state = JobState::kQueued;
  stored.request = job.request;
  stored.idempotency_key = job.idempotency_key;
  stored.request_fingerprint = job.request_fingerprint;
  stored.message = job.message;
  stored.create_time = at;
  stored.update_time = at;
  stored.plan.cost = job.plan.cost;
  // As the SQLite store: the budget kept is the request's, no refusal.
  stored.plan.cost.max_cost = job.request.max_cost;
  stored.plan.cost.refused.clear();
  for (const DatasetPlan& dp : job.plan.datasets) {
    DatasetPlan kept;
    kept.dataset = dp.dataset;
    kept.reason = dp.reason;
    kept.transform_version = dp.transform_version;
    kept.cost = dp.cost;
    kept.cost.refused.clear();
    kept.partitions_from_history = dp.partitions_from_history;
    kept.estimate_source = dp.estimate_source;
    // As the SQLite store: the request's keys, on the target only.
    if (dp.dataset == job.request.dataset) kept.keys = job.request.keys;
    stored.plan.datasets.push_back(std::move(kept));
    for (size_t k = 0; k < dp.partitions.size(); ++k) {
      const std::string& partition = dp.partitions[k];
      row.task_reasons.push_back(
          k < dp.partition_reasons.size() ? dp.partition_reasons[k] : "");
      PartitionTask task;
      task.job_id = id;
      task.dataset = dp.dataset;
      task.partition = partition;
      task.update_time = at;
      row.task_index[{dp.dataset, partition}] = row.tasks.size();
      row.tasks.push_back(std::move(task));
    }
  }
  ids_by_seq_[seq] = id;
  if (!job.idempotency_key.empty()) ids_by_key_[job.idempotency_key] = id;
  JobRow& inserted = jobs_[id] = std::move(row);
  AppendAuditLocked(id, "", JobStateName(JobState::kQueued),
                    job.message.empty() ? "created" : job.message, now);
  return CreateJobResult{LoadLocked(inserted, /*with_partitions=*/true), true};
}

void InMemoryStateStore::AppendAuditLocked(const std::string& job_id,
                                           std::string from_state,
                                           std::string to_state,
                                           const std::string& message,
                                           absl::Time at) {
  AuditEvent e;
  e.seq = next_audit_seq_++;
  e.job_id = job_id;
  e.from_state = std::move(from_state);
  e.to_state = std::move(to_state);
  e.message = message;
  e.at = Stored(at);
  audit_[job_id].push_back(std::move(e));
}

void InMemoryStateStore::WriteTransitionLocked(JobRow* row, JobState from,
                                               JobState to,
                                               const std::string& message,
                                               absl::Time now) {
  Job& job = row->job;
  const absl::Time at = Stored(now);
  job.state = to;
  job.message = message;
  job.update_time = at;
  if (to == JobState::kRunning && job.start_time == absl::InfinitePast()) {
    job.start_time = at;
  }
  if (IsTerminal(to)) {
    job.end_time = at;
  } else if (IsTerminal(from)) {
    job.end_time = absl::InfinitePast();  // a retry: not ended any more
  }
  AppendAuditLocked(job.id, JobStateName(from), JobStateName(to), message, now);
}

absl::Status InMemoryStateStore::TransitionJob(
    const std::string& job_id, std::optional<JobState> expected_from,
    JobState to, const std::string& message, absl::Time now) {
  if (absl::Status s = BeginWrite("TransitionJob"); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  JobRow* row = FindLocked(job_id);
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
  if (absl::Status s = BeginWrite("RetryJob"); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  JobRow* row = FindLocked(job_id);
  ASSIGN_OR_RETURN(JobState from,
                   GuardTransition(job_id, StateOf(row, job_id), expected_from,
                                   to, GuardedMove::kRetry));
  int64_t reset = 0;
  for (PartitionTask& t : row->tasks) {
    if (t.state == TaskState::kFailed || t.state == TaskState::kCancelled ||
        t.state == TaskState::kRunning) {
      t.state = TaskState::kPending;
      t.attempts = 0;
      t.update_time = Stored(now);
      ++reset;
    }
  }
  WriteTransitionLocked(row, from, to, message, now);
  return reset;
}

absl::Status InMemoryStateStore::SetJobMessage(const std::string& job_id,
                                               JobState expected_state,
                                               const std::string& message,
                                               absl::Time now) {
  if (absl::Status s = BeginWrite("SetJobMessage"); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  JobRow* row = FindLocked(job_id);
  RETURN_IF_ERROR(GuardState(job_id, StateOf(row, job_id), expected_state));
  row->job.message = message;
  row->job.update_time = Stored(now);
  return absl::OkStatus();
}

absl::Status InMemoryStateStore::UpdateTask(const PartitionTask& task) {
  if (absl::Status s = BeginWrite("UpdateTask"); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  return WriteTasksLocked(absl::MakeConstSpan(&task, 1));
}

absl::Status InMemoryStateStore::UpdateTasks(
    const std::vector<PartitionTask>& tasks) {
  if (absl::Status s = BeginWrite("UpdateTasks"); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  return WriteTasksLocked(tasks);
}

absl::Status InMemoryStateStore::WriteTasksLocked(
    absl::Span<const PartitionTask> tasks) {
  // All or nothing: every task is found before any is written.
  std::vector<PartitionTask*> found;
  for (const PartitionTask& task : tasks) {
    JobRow* row = FindLocked(task.job_id);
    PartitionTask* t = nullptr;
    if (row != nullptr) {
      auto it = row->task_index.find({task.dataset, task.partition});
      if (it != row->task_index.end()) t = &row->tasks[it->second];
    }
    if (t == nullptr) {
      return absl::NotFoundError(absl::StrCat("no task ", task.dataset, "/",
                                              task.partition, " in job ",
                                              task.job_id));
    }
    found.push_back(t);
  }
  for (size_t i = 0; i < tasks.size(); ++i) {
    const PartitionTask& task = tasks[i];
    PartitionTask& t = *found[i];
    t.state = task.state;
    t.attempts = task.attempts;
    t.last_error = task.last_error;
    t.rows_written = task.rows_written;
    t.output_fingerprint = task.output_fingerprint;
    t.inputs = task.inputs;
    t.duration_seconds = task.duration_seconds;
    t.update_time = Stored(task.update_time);
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> InMemoryStateStore::UpdateTasksInState(
    const std::string& job_id, const std::vector<TaskState>& from, TaskState to,
    absl::Time now) {
  if (absl::Status s = BeginWrite("UpdateTasksInState"); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  JobRow* row = FindLocked(job_id);
  if (row == nullptr) return 0;
  int64_t changed = 0;
  for (PartitionTask& t : row->tasks) {
    if (!Contains(from, t.state)) continue;
    t.state = to;
    t.update_time = Stored(now);
    ++changed;
  }
  return changed;
}

absl::Status InMemoryStateStore::RecordPublication(
    const std::string& job_id, const std::vector<LineageRecord>& lineage,
    JobState to, const std::string& message, absl::Time now) {
  if (absl::Status s = BeginWrite("RecordPublication"); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  JobRow* row = FindLocked(job_id);
  ASSIGN_OR_RETURN(JobState from, StateOf(row, job_id));
  auto count = lineage_per_job_.find(job_id);
  const int64_t recorded = count == lineage_per_job_.end() ? 0 : count->second;
  ASSIGN_OR_RETURN(bool record,
                   GuardPublication(job_id, from, recorded > 0, to));
  if (!record) return absl::OkStatus();  // a repeat after a restart
  // One version per (job, dataset, partition): a list with a duplicate is
  // refused as a whole.
  std::set<std::pair<std::string, std::string>> seen;
  for (const LineageRecord& rec : lineage) {
    if (!seen.insert({rec.dataset, rec.partition}).second) {
      return absl::FailedPreconditionError(
          absl::StrCat("lineage of job ", job_id, " lists ", rec.dataset, "/",
                       rec.partition, " twice"));
    }
  }
  for (const LineageRecord& rec : lineage) {
    LineageRow r;
    r.id = next_lineage_id_++;
    r.record = rec;
    r.record.id = r.id;
    r.record.job_id = job_id;
    r.record.action = LineageAction::kPublish;
    r.record.published_at = Stored(
        rec.published_at == absl::InfinitePast() ? now : rec.published_at);
    if (r.record.approval) {
      r.record.approval->approved_at = Stored(r.record.approval->approved_at);
    }
    lineage_[{rec.dataset, rec.partition}].push_back(std::move(r));
    ++lineage_per_job_[job_id];
  }
  for (PartitionTask& t : row->tasks) {
    if (t.state != TaskState::kStaged) continue;
    t.state = TaskState::kPublished;
    t.update_time = Stored(now);
  }
  WriteTransitionLocked(row, from, to, message, now);
  return absl::OkStatus();
}

absl::Status InMemoryStateStore::RecordRollback(
    const std::string& job_id, const RollbackInfo& info,
    const std::vector<LineageRecord>& lineage, const std::string& message,
    const std::string& also_message, absl::Time now) {
  if (absl::Status s = BeginWrite("RecordRollback"); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  JobRow* row = FindLocked(job_id);
  ASSIGN_OR_RETURN(JobState from, StateOf(row, job_id));
  if (from == JobState::kRolledBack) return absl::OkStatus();  // recorded
  std::vector<JobRow*> rows = {row};
  std::vector<std::pair<std::string, JobState>> states = {{job_id, from}};
  for (const std::string& other : info.also_rolled_back) {
    if (other == job_id) continue;
    JobRow* r = FindLocked(other);
    ASSIGN_OR_RETURN(JobState state, StateOf(r, other));
    rows.push_back(r);
    states.push_back({other, state});
  }
  RETURN_IF_ERROR(GuardRollback(states));
  // As the SQLite store's unique index and foreign key: one rollback
  // record per (job, dataset, partition), of a job the store holds.
  std::set<std::tuple<std::string, std::string, std::string>> seen;
  for (const LineageRecord& rec : lineage) {
    const std::string id = rec.job_id.empty() ? job_id : rec.job_id;
    if (FindLocked(id) == nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat("rollback lineage names job ", id,
                       ", which the store does not hold"));
    }
    if (!seen.insert({id, rec.dataset, rec.partition}).second) {
      return absl::FailedPreconditionError(
          absl::StrCat("rollback lineage of job ", id, " lists ", rec.dataset,
                       "/", rec.partition, " twice"));
    }
  }
  for (const LineageRecord& rec : lineage) {
    LineageRow r;
    r.id = next_lineage_id_++;
    r.record = rec;
    r.record.id = r.id;
    if (r.record.job_id.empty()) r.record.job_id = job_id;
    r.record.action = LineageAction::kRollback;
    r.record.approval.reset();  // restored rows come with no approval
    r.record.published_at = Stored(
        rec.published_at == absl::InfinitePast() ? now : rec.published_at);
    lineage_[{rec.dataset, rec.partition}].push_back(std::move(r));
  }
  for (JobRow* r : rows) {
    const bool main = r == row;
    RollbackInfo stored;
    stored.requested_by = info.requested_by;
    stored.reason = info.reason;
    stored.at = Stored(info.at == absl::InfinitePast() ? now : info.at);
    stored.forced = info.forced;
    if (main) {
      stored.with_job = info.with_job;
      stored.also_rolled_back = info.also_rolled_back;
      stored.partitions = info.partitions;
      stored.rows = info.rows;
    } else {
      stored.with_job = job_id;
    }
    r->job.rollback = std::move(stored);
    WriteTransitionLocked(r, r->job.state, JobState::kRolledBack,
                          main ? message : also_message, now);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<LineageRecord>>
InMemoryStateStore::GetLineageOverlapping(const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  if (FindLocked(job_id) == nullptr) return JobNotFound(job_id);
  std::vector<const LineageRow*> rows;
  for (const auto& [key, versions] : lineage_) {
    const bool mine =
        std::any_of(versions.begin(), versions.end(), [&](const LineageRow& r) {
          return r.record.job_id == job_id &&
                 r.record.action == LineageAction::kPublish;
        });
    if (!mine) continue;
    for (const LineageRow& r : versions) rows.push_back(&r);
  }
  std::sort(
      rows.begin(), rows.end(),
      [](const LineageRow* a, const LineageRow* b) { return a->id < b->id; });
  std::vector<LineageRecord> out;
  for (const LineageRow* r : rows) out.push_back(r->record);
  return out;
}

absl::StatusOr<std::map<std::string, absl::Time>>
InMemoryStateStore::PublicationTimes(const std::vector<std::string>& job_ids) {
  absl::MutexLock lock(&mu_);
  const std::set<std::string> wanted(job_ids.begin(), job_ids.end());
  std::map<std::string, absl::Time> out;
  for (const auto& [key, versions] : lineage_) {
    for (const LineageRow& r : versions) {
      if (r.record.action != LineageAction::kPublish ||
          !wanted.count(r.record.job_id)) {
        continue;
      }
      auto [it, inserted] = out.emplace(r.record.job_id, r.record.published_at);
      if (!inserted && r.record.published_at < it->second) {
        it->second = r.record.published_at;
      }
    }
  }
  return out;
}

absl::Status InMemoryStateStore::ApproveJob(const std::string& job_id,
                                            JobState expected_from, JobState to,
                                            const Approval& approval,
                                            const std::string& message,
                                            absl::Time now) {
  if (absl::Status s = BeginWrite("ApproveJob"); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  JobRow* row = FindLocked(job_id);
  ASSIGN_OR_RETURN(JobState from,
                   GuardTransition(job_id, StateOf(row, job_id), expected_from,
                                   to, GuardedMove::kApproval));
  if (row->job.approval) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", job_id, " was approved already"));
  }
  Approval stored = approval;
  stored.from_state = from;
  stored.approved_at = Stored(approval.approved_at == absl::InfinitePast()
                                  ? now
                                  : approval.approved_at);
  row->job.approval = std::move(stored);
  WriteTransitionLocked(row, from, to, message, now);
  return absl::OkStatus();
}

absl::Status InMemoryStateStore::ReplaceJobDiff(const JobDiff& diff) {
  if (absl::Status s = BeginWrite("ReplaceJobDiff"); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  if (FindLocked(diff.job_id) == nullptr) return JobNotFound(diff.job_id);
  // As the SQLite store's primary keys: a dataset once, a partition once
  // per dataset; a diff that lists one twice is refused as a whole.
  std::set<std::string> datasets;
  std::set<std::pair<std::string, std::string>> partitions;
  for (const DatasetDiff& d : diff.datasets) {
    bool twice = !datasets.insert(d.dataset).second;
    for (const PartitionDiff& p : d.partitions) {
      twice = twice || !partitions.insert({d.dataset, p.partition}).second;
    }
    if (twice) {
      return absl::FailedPreconditionError(
          absl::StrCat("the diff of job ", diff.job_id, " lists ", d.dataset,
                       " or one of its partitions twice"));
    }
  }
  JobDiff stored = diff;
  stored.computed_at = Stored(diff.computed_at);
  for (DatasetDiff& d : stored.datasets) {
    // As the SQLite store: partitions by value, measures to 17 digits.
    std::sort(d.partitions.begin(), d.partitions.end(),
              [](const PartitionDiff& a, const PartitionDiff& b) {
                return a.partition < b.partition;
              });
    for (PartitionDiff& p : d.partitions) {
      p.dataset = d.dataset;
      for (MeasureTotals& m : p.measures) {
        m.before = Stored17(m.before);
        m.after = Stored17(m.after);
      }
    }
  }
  diffs_[diff.job_id] = std::move(stored);
  return absl::OkStatus();
}

absl::StatusOr<std::optional<JobDiff>> InMemoryStateStore::GetJobDiff(
    const std::string& job_id, const std::string& dataset, bool with_samples) {
  absl::MutexLock lock(&mu_);
  if (FindLocked(job_id) == nullptr) return JobNotFound(job_id);
  auto it = diffs_.find(job_id);
  if (it == diffs_.end()) return std::nullopt;
  JobDiff out = it->second;
  if (!dataset.empty()) {
    std::vector<DatasetDiff> kept;
    for (DatasetDiff& d : out.datasets) {
      if (d.dataset == dataset) kept.push_back(std::move(d));
    }
    out.datasets = std::move(kept);
  }
  if (!with_samples) {
    for (DatasetDiff& d : out.datasets) {
      for (PartitionDiff& p : d.partitions) p.samples.clear();
    }
  }
  return std::optional<JobDiff>(std::move(out));
}

absl::StatusOr<std::vector<AuditEvent>> InMemoryStateStore::ListAuditLog(
    const AuditQuery& query) {
  absl::MutexLock lock(&mu_);
  // As SQLite compares it: to the microsecond, rounded down.
  const absl::Time since =
      query.since == absl::InfinitePast()
          ? query.since
          : absl::FromUnixMicros(absl::ToUnixMicros(query.since));
  std::vector<AuditEvent> all;
  for (const auto& [job_id, events] : audit_) {
    if (!query.job_id.empty() && job_id != query.job_id) continue;
    for (const AuditEvent& e : events) {
      if (e.seq <= query.after_seq) continue;
      if (since != absl::InfinitePast() &&
          (e.at == absl::InfinitePast() || e.at < since)) {
        continue;
      }
      all.push_back(e);
    }
  }
  std::sort(
      all.begin(), all.end(),
      [](const AuditEvent& a, const AuditEvent& b) { return a.seq < b.seq; });
  const size_t limit = static_cast<size_t>(std::max(query.limit, 1));
  if (all.size() > limit) all.resize(limit);
  return all;
}

absl::StatusOr<std::map<std::string, PartitionDiff>>
InMemoryStateStore::PartitionDiffs(const std::string& dataset,
                                   const std::string& partition) {
  absl::MutexLock lock(&mu_);
  std::map<std::string, PartitionDiff> out;
  for (const auto& [job_id, diff] : diffs_) {
    for (const DatasetDiff& d : diff.datasets) {
      if (d.dataset != dataset) continue;
      for (const PartitionDiff& p : d.partitions) {
        if (p.partition != partition) continue;
        PartitionDiff copy = p;
        copy.dataset = dataset;
        copy.samples.clear();
        out[job_id] = std::move(copy);
      }
    }
  }
  return out;
}

}  // namespace backfill::testing
