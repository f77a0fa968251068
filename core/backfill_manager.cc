#include "core/backfill_manager.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/fingerprint.h"
#include "core/status_macros.h"

namespace backfill {
namespace {

constexpr size_t kMaxReason = 4096;
constexpr size_t kMaxShortField = 256;

// Numeric part of "bf-<n>", for ordering; 0 when malformed.
int64_t JobNumber(const std::string& id) {
  int64_t n = 0;
  if (id.rfind("bf-", 0) == 0 && absl::SimpleAtoi(id.substr(3), &n)) return n;
  return 0;
}

absl::Status CheckField(const char* name, const std::string& value,
                        size_t max) {
  if (value.size() > max) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, " is ", value.size(), " bytes; at most ", max));
  }
  for (unsigned char c : value) {
    if (c < 0x20 && c != '\n' && c != '\t') {
      return absl::InvalidArgumentError(
          absl::StrCat(name, " contains a control character"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateSubmit(const BackfillRequest& r, const std::string& key) {
  if (absl::StripAsciiWhitespace(r.reason).empty()) {
    return absl::InvalidArgumentError(
        "a reason is required: say why this backfill runs (--reason); it is "
        "recorded in the lineage of every partition it publishes");
  }
  RETURN_IF_ERROR(CheckField("reason", r.reason, kMaxReason));
  RETURN_IF_ERROR(CheckField("ticket", r.ticket, kMaxShortField));
  RETURN_IF_ERROR(CheckField("requested_by", r.requested_by, kMaxShortField));
  RETURN_IF_ERROR(CheckField("idempotency key", key, kMaxShortField));
  return absl::OkStatus();
}

// A hash of what the request asks for, to recognize a re-submit.
std::string RequestFingerprint(const BackfillRequest& r) {
  std::vector<std::string> parts = r.partitions;
  std::sort(parts.begin(), parts.end());
  parts.erase(std::unique(parts.begin(), parts.end()), parts.end());
  std::string text;
  auto add = [&text](absl::string_view v) {
    absl::StrAppend(&text, v.size(), ":", v, ";");
  };
  add(r.dataset);
  add(r.from);
  add(r.to);
  add(absl::StrCat(parts.size()));
  for (const std::string& p : parts) add(p);
  add(r.reason);
  add(r.ticket);
  add(r.exclude_downstream ? "x" : "");
  return HashHex(text);
}

std::string DescribeRequest(const BackfillRequest& r) {
  std::string scope =
      !r.partitions.empty()
          ? absl::StrCat("partitions ", absl::StrJoin(r.partitions, ","))
          : absl::StrCat("[", r.from, ", ", r.to, ")");
  return absl::StrCat(r.dataset, " ", scope, ", reason \"", r.reason, "\"");
}

bool Retryable(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kOutOfRange:
      return false;
    default:
      return true;
  }
}

}  // namespace

struct BackfillManager::ActiveJob {
  enum class Phase {
    kRunning,     // preparing or recomputing partitions
    kFinishing,   // every partition staged: validating, publishing
    kFailing,     // a partition failed for good; draining in-flight tasks
    kCancelling,  // cancelled; draining in-flight tasks
    kSettling,    // drained: cleanup runs outside the lock, then retired
  };

  Job job;                             // as loaded: request, plan, key
  JobState state = JobState::kQueued;  // written under transition_mu and mu_
  JobLayout layout;
  bool layout_complete = true;  // false: a dataset left the pipelines
  std::vector<PartitionTask> tasks;
  std::vector<const DatasetSpec*> spec_of;  // per task; null if unknown
  // Identity edges inside the job: task -> tasks that read it.
  std::vector<std::vector<size_t>> dependents;
  // Per task: unstaged identity inputs plus in-job `all` upstream datasets
  // that are not completely staged.
  std::vector<int> waiting;
  std::map<std::string, size_t> dataset_unstaged;
  // In-job dataset -> tasks that read the whole of it (`mapping: all`).
  std::map<std::string, std::vector<size_t>> all_readers;
  std::deque<size_t> ready;
  std::set<std::pair<std::string, std::string>> scope;
  bool prepared = false;
  // Staging passed validation in this process (a job resumed into
  // PUBLISHING is validated again before it publishes).
  bool validated = false;
  int running = 0;  // tasks in flight, plus a preparation in progress
  size_t unstaged = 0;
  Phase phase = Phase::kRunning;
  Phase settling_from = Phase::kRunning;
  std::string failure;
  // Serializes this job's state transitions (store write + memory update).
  absl::Mutex transition_mu ABSL_ACQUIRED_BEFORE(mu_);
};

BackfillManager::BackfillManager(const Catalog* catalog, StateStore* store,
                                 Engine* engine, const Clock* clock,
                                 JobObserver* observer, ManagerOptions options)
    : catalog_(catalog),
      store_(store),
      engine_(engine),
      clock_(clock),
      observer_(observer),
      options_(options),
      planner_(catalog, engine, options.planner) {}

BackfillManager::~BackfillManager() { Shutdown(); }

absl::Status BackfillManager::Start() {
  {
    absl::MutexLock lock(&mu_);
    if (started_) return absl::FailedPreconditionError("already started");
    started_ = true;
  }
  // One thread more than task slots, so that preparing or publishing a job
  // never waits behind a full set of partition tasks.
  pool_ = std::make_unique<WorkerPool>(std::max(1, options_.workers) + 1);

  JobFilter filter;
  filter.states = {JobState::kQueued, JobState::kRunning, JobState::kValidating,
                   JobState::kPublishing, JobState::kConfirming};
  filter.limit = 1000000;
  ASSIGN_OR_RETURN(std::vector<Job> unfinished, store_->ListJobs(filter));
  std::sort(unfinished.begin(), unfinished.end(),
            [](const Job& a, const Job& b) {
              return JobNumber(a.id) < JobNumber(b.id);
            });
  for (const Job& job : unfinished) {
    if (job.state == JobState::kQueued || job.state == JobState::kRunning) {
      // Attempts that were in flight when the process died start over; their
      // staging writes are replaced by the next attempt.
      RETURN_IF_ERROR(store_
                          ->UpdateTasksInState(
                              job.id, {TaskState::kRunning, TaskState::kFailed},
                              TaskState::kPending, clock_->Now())
                          .status());
    }
    absl::Status s = Activate(job);
    if (s.ok()) continue;
    if (job.state == JobState::kPublishing ||
        job.state == JobState::kConfirming) {
      // It may have published: never fail it on a whim; refuse to start.
      return absl::FailedPreconditionError(
          absl::StrCat("cannot resume job ", job.id, " (",
                       JobStateName(job.state), "): ", s.message()));
    }
    // Nothing of it was published: end it and clean up.
    RETURN_IF_ERROR(store_->TransitionJob(
        job.id, job.state, JobState::kFailed,
        absl::StrCat("cannot resume after restart: ", s.message()),
        clock_->Now()));
    RETURN_IF_ERROR(store_
                        ->UpdateTasksInState(
                            job.id, {TaskState::kPending, TaskState::kStaged},
                            TaskState::kCancelled, clock_->Now())
                        .status());
    engine_->DropStaging(job.id).IgnoreError();
  }
  SweepOrphans();
  return absl::OkStatus();
}

void BackfillManager::SweepOrphans() {
  // A crash between a job's terminal state and its cleanup leaves staging
  // (and tasks that never ran) behind; the state is final, so finish the
  // cleanup now. Best effort: what fails is retried at the next start.
  absl::StatusOr<std::vector<std::string>> ids = engine_->ListJobsWithStaging();
  if (!ids.ok()) return;
  for (const std::string& id : *ids) {
    {
      absl::MutexLock lock(&mu_);
      if (active_.count(id)) continue;
    }
    absl::StatusOr<Job> job = store_->GetJobProgress(id);
    if (job.ok() && !IsTerminal(job->state)) continue;
    if (job.ok()) {
      store_
          ->UpdateTasksInState(id, {TaskState::kPending, TaskState::kRunning},
                               TaskState::kCancelled, clock_->Now())
          .IgnoreError();
    } else if (job.status().code() != absl::StatusCode::kNotFound) {
      continue;
    }
    engine_->DropStaging(id).IgnoreError();
  }
}

void BackfillManager::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    if (!started_ || stopping_) return;
    stopping_ = true;
    changed_.SignalAll();
  }
  // Running closures finish (and checkpoint); queued ones are dropped and
  // their partitions resume on the next Start().
  if (pool_) pool_->Shutdown();
}

bool BackfillManager::Stopping() {
  absl::MutexLock lock(&mu_);
  return stopping_;
}

absl::StatusOr<JobLayout> BackfillManager::LayoutOf(const Job& job,
                                                    bool* complete) const {
  // Partitions still to compute must use the logic the others used and a
  // dataset the pipelines still declare; a job whose partitions are all
  // staged (or published) is finished with what it has.
  const bool computing = job.state == JobState::kQueued ||
                         job.state == JobState::kRunning ||
                         job.state == JobState::kValidating;
  *complete = true;
  JobLayout layout;
  layout.job_id = job.id;
  std::set<std::string> in_job;
  for (const DatasetPlan& dp : job.plan.datasets) {
    const DatasetSpec* spec = catalog_->Find(dp.dataset);
    if (spec == nullptr || !spec->is_derived()) {
      if (!computing) {
        *complete = false;
        continue;
      }
      return absl::FailedPreconditionError(absl::StrCat(
          "dataset \"", dp.dataset,
          "\" is no longer a derived dataset in the loaded pipelines"));
    }
    if (job.state != JobState::kPublishing &&
        job.state != JobState::kConfirming && !dp.transform_version.empty() &&
        dp.transform_version != spec->transform_version) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the transform of \"", dp.dataset,
          "\" changed since the job was planned (version ",
          dp.transform_version, " -> ", spec->transform_version,
          "); partitions computed with the old logic are never published "
          "with the new: submit a new backfill"));
    }
    layout.items.push_back({spec, dp.partitions});
    in_job.insert(dp.dataset);
  }
  std::set<std::string> pinned;
  for (const JobLayout::Item& item : layout.items) {
    for (const UpstreamEdge& e : item.dataset->upstream) {
      if (e.mapping == Mapping::kAll && !in_job.count(e.dataset) &&
          pinned.insert(e.dataset).second) {
        layout.pinned.push_back(catalog_->Find(e.dataset));
      }
    }
  }
  return layout;
}

absl::Status BackfillManager::Activate(const Job& job) {
  auto active = std::make_unique<ActiveJob>();
  active->job = job;
  active->state = job.state;
  ASSIGN_OR_RETURN(active->layout, LayoutOf(job, &active->layout_complete));
  ASSIGN_OR_RETURN(active->tasks, store_->ListTasks(job.id));

  auto done = [](const PartitionTask& t) {
    return t.state == TaskState::kStaged || t.state == TaskState::kPublished;
  };
  const size_t n = active->tasks.size();
  std::map<std::pair<std::string, std::string>, size_t> index;
  for (size_t i = 0; i < n; ++i) {
    const PartitionTask& t = active->tasks[i];
    index[{t.dataset, t.partition}] = i;
    active->scope.insert({t.dataset, t.partition});
    active->spec_of.push_back(catalog_->Find(t.dataset));
    size_t& unstaged = active->dataset_unstaged[t.dataset];
    if (!done(t)) {
      ++unstaged;
      ++active->unstaged;
    }
  }
  if (active->unstaged > 0 && !active->layout_complete) {
    return absl::FailedPreconditionError("a dataset of the job is missing");
  }
  active->dependents.assign(n, {});
  active->waiting.assign(n, 0);
  for (size_t i = 0; i < n; ++i) {
    if (active->spec_of[i] == nullptr) continue;
    const PartitionTask& t = active->tasks[i];
    for (const UpstreamEdge& e : active->spec_of[i]->upstream) {
      auto in_job = active->dataset_unstaged.find(e.dataset);
      if (in_job == active->dataset_unstaged.end()) continue;
      if (e.mapping == Mapping::kIdentity) {
        auto it = index.find({e.dataset, t.partition});
        if (it == index.end()) continue;
        active->dependents[it->second].push_back(i);
        if (!done(active->tasks[it->second])) ++active->waiting[i];
      } else {
        // One counter per upstream dataset, not an edge per partition pair.
        active->all_readers[e.dataset].push_back(i);
        if (in_job->second > 0) ++active->waiting[i];
      }
    }
  }

  const std::string id = job.id;
  const JobState state = job.state;
  absl::MutexLock lock(&mu_);
  ActiveJob* raw = active.get();
  active_[id] = std::move(active);
  order_.push_back(id);
  std::sort(order_.begin(), order_.end(),
            [](const std::string& a, const std::string& b) {
              return JobNumber(a) < JobNumber(b);
            });
  if (state == JobState::kQueued || state == JobState::kRunning) {
    ++raw->running;  // the preparation
    pool_->Submit([this, id] { PrepareAndRun(id); });
  } else {
    raw->phase = ActiveJob::Phase::kFinishing;
    pool_->Submit([this, id] { Finish(id); });
  }
  NotifyLocked(id);
  return absl::OkStatus();
}

BackfillManager::ActiveJob* BackfillManager::FindActive(
    const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  auto it = active_.find(job_id);
  return it == active_.end() ? nullptr : it->second.get();
}

absl::Status BackfillManager::Move(ActiveJob* job, JobState to,
                                   const std::string& message,
                                   int required_phase) {
  absl::MutexLock transition(&job->transition_mu);
  JobState from;
  {
    absl::MutexLock lock(&mu_);
    if (static_cast<int>(job->phase) != required_phase) {
      return absl::AbortedError("superseded by a cancel or a failure");
    }
    from = job->state;
  }
  RETURN_IF_ERROR(
      store_->TransitionJob(job->job.id, from, to, message, clock_->Now()));
  {
    absl::MutexLock lock(&mu_);
    job->state = to;
    NotifyLocked(job->job.id);
  }
  if (observer_ != nullptr) {
    observer_->OnJobTransition(job->job.id, from, to, message);
  }
  return absl::OkStatus();
}

void BackfillManager::PrepareAndRun(const std::string& job_id) {
  ActiveJob* job = FindActive(job_id);
  if (job == nullptr) return;
  absl::Status s = engine_->PrepareJob(job->layout);
  bool queued;
  {
    absl::MutexLock lock(&mu_);
    queued = job->state == JobState::kQueued;
  }
  if (s.ok() && queued) {
    s = Move(job, JobState::kRunning,
             absl::StrCat("recomputing ", job->tasks.size(),
                          " partitions in staging"),
             static_cast<int>(ActiveJob::Phase::kRunning));
    if (s.code() == absl::StatusCode::kAborted) s = absl::OkStatus();
  }
  if (!s.ok() && !Stopping()) {
    FailJob(job, absl::StrCat("preparing staging failed: ", s.message()));
  }
  bool settle;
  {
    absl::MutexLock lock(&mu_);
    --job->running;
    job->prepared = s.ok();
    if (job->phase == ActiveJob::Phase::kRunning) {
      for (size_t i = 0; i < job->tasks.size(); ++i) {
        if (job->tasks[i].state == TaskState::kPending &&
            job->waiting[i] == 0) {
          job->ready.push_back(i);
        }
      }
      if (job->unstaged == 0) {
        job->phase = ActiveJob::Phase::kFinishing;
        pool_->Submit([this, job_id] { Finish(job_id); });
      }
    }
    settle = TakeSettleLocked(job);
    NotifyLocked(job_id);
    DispatchLocked();
  }
  if (settle) Settle(job);
}

void BackfillManager::DispatchLocked() {
  if (stopping_) return;
  for (const std::string& id : order_) {
    if (in_flight_ >= options_.workers) return;
    ActiveJob* job = active_[id].get();
    if (job->phase != ActiveJob::Phase::kRunning || !job->prepared) continue;
    while (in_flight_ < options_.workers && !job->ready.empty()) {
      const size_t index = job->ready.front();
      job->ready.pop_front();
      job->tasks[index].state = TaskState::kRunning;
      ++job->running;
      ++in_flight_;
      if (!pool_->Submit([this, id, index] { RunTask(id, index); })) {
        --job->running;
        --in_flight_;
        return;
      }
    }
  }
}

void BackfillManager::FailJob(ActiveJob* job, const std::string& failure) {
  {
    absl::MutexLock lock(&mu_);
    if (job->phase != ActiveJob::Phase::kRunning) return;
    job->phase = ActiveJob::Phase::kFailing;
    job->failure = failure;
    job->ready.clear();
  }
  // Recorded at once, so that the job never looks runnable (or resumable)
  // while its in-flight partitions drain. If the store refuses, Settle
  // tries again.
  Move(job, JobState::kFailed, failure,
       static_cast<int>(ActiveJob::Phase::kFailing))
      .IgnoreError();
}

void BackfillManager::RunTask(const std::string& job_id, size_t index) {
  ActiveJob* job = FindActive(job_id);
  PartitionTask task;
  const DatasetSpec* spec = nullptr;
  {
    absl::MutexLock lock(&mu_);
    if (job->phase == ActiveJob::Phase::kRunning) {
      task = job->tasks[index];
      spec = job->spec_of[index];
    }
  }
  if (spec == nullptr) {
    // Cancelled or failing since it was dispatched: no work.
    bool settle;
    {
      absl::MutexLock lock(&mu_);
      job->tasks[index].state = TaskState::kPending;
      --job->running;
      --in_flight_;
      settle = TakeSettleLocked(job);
      DispatchLocked();
    }
    if (settle) Settle(job);
    return;
  }
  task.state = TaskState::kRunning;
  ++task.attempts;
  task.update_time = clock_->Now();
  absl::Status s = store_->UpdateTask(task);

  const absl::Time start = clock_->Now();
  absl::StatusOr<StageResult> result =
      s.ok() ? engine_->StagePartition(job_id, *spec, task.partition,
                                       planner_.InputsOf(*spec, task.partition))
             : absl::StatusOr<StageResult>(s);
  const absl::Duration took = clock_->Now() - start;
  if (observer_ != nullptr) observer_->OnPartitionAttempt(result.ok(), took);

  task.update_time = clock_->Now();
  task.duration_seconds = absl::ToDoubleSeconds(took);
  if (result.ok()) {
    task.state = TaskState::kStaged;
    task.rows_written = result->rows_written;
    task.output_fingerprint = result->output_fingerprint;
    task.inputs = std::move(result->inputs);
    task.last_error.clear();
    s = store_->UpdateTask(task);  // the checkpoint
  } else {
    s = result.status();
  }
  bool retry = false;
  if (!s.ok() && Stopping()) {
    // Interrupted by a shutdown: not an attempt; it runs again on restart.
    task.state = TaskState::kPending;
    --task.attempts;
    task.last_error = "interrupted by shutdown";
    store_->UpdateTask(task).IgnoreError();
  } else if (!s.ok()) {
    task.last_error = std::string(s.message());
    retry = Retryable(s) && task.attempts < options_.max_attempts;
    task.state = retry ? TaskState::kPending : TaskState::kFailed;
    // Best effort: on failure to record, recovery re-runs the partition.
    store_->UpdateTask(task).IgnoreError();
    if (retry) {
      if (!Stopping()) absl::SleepFor(options_.retry_backoff * task.attempts);
    } else {
      FailJob(job, absl::StrCat("partition ", task.partition, " of ",
                                task.dataset, " failed after ", task.attempts,
                                " attempt(s): ", task.last_error));
    }
  }

  bool settle;
  {
    absl::MutexLock lock(&mu_);
    job->tasks[index] = task;
    --job->running;
    --in_flight_;
    if (task.state == TaskState::kStaged) {
      --job->unstaged;
      for (size_t d : job->dependents[index]) {
        if (--job->waiting[d] == 0 &&
            job->tasks[d].state == TaskState::kPending) {
          job->ready.push_back(d);
        }
      }
      if (--job->dataset_unstaged[task.dataset] == 0) {
        for (size_t d : job->all_readers[task.dataset]) {
          if (--job->waiting[d] == 0 &&
              job->tasks[d].state == TaskState::kPending) {
            job->ready.push_back(d);
          }
        }
      }
    } else if (retry && job->phase == ActiveJob::Phase::kRunning) {
      job->ready.push_front(index);
    }
    if (job->phase == ActiveJob::Phase::kRunning && job->unstaged == 0 &&
        job->running == 0) {
      job->phase = ActiveJob::Phase::kFinishing;
      pool_->Submit([this, job_id] { Finish(job_id); });
    }
    settle = TakeSettleLocked(job);
    NotifyLocked(job_id);
    DispatchLocked();
  }
  if (settle) Settle(job);
}

bool BackfillManager::TakeSettleLocked(ActiveJob* job) {
  if (job->running > 0) return false;
  if (job->phase != ActiveJob::Phase::kCancelling &&
      job->phase != ActiveJob::Phase::kFailing) {
    return false;
  }
  job->settling_from = job->phase;
  job->phase = ActiveJob::Phase::kSettling;
  return true;
}

void BackfillManager::Settle(ActiveJob* job) {
  const std::string id = job->job.id;
  const absl::Time now = clock_->Now();
  const bool cancelled = job->settling_from == ActiveJob::Phase::kCancelling;
  if (!cancelled && job->state != JobState::kFailed) {
    // FailJob could not record the failure: try once more; if the store
    // still refuses, the job stays RUNNING there and resumes on restart.
    absl::MutexLock transition(&job->transition_mu);
    const JobState from = job->state;
    if (store_->TransitionJob(id, from, JobState::kFailed, job->failure, now)
            .ok()) {
      {
        absl::MutexLock lock(&mu_);
        job->state = JobState::kFailed;
      }
      if (observer_ != nullptr) {
        observer_->OnJobTransition(id, from, JobState::kFailed, job->failure);
      }
    }
  }
  // Tasks first, staging last: a crash in between leaves staging that the
  // next start sweeps (SweepOrphans).
  std::vector<TaskState> open = {TaskState::kPending, TaskState::kRunning};
  if (cancelled) open.push_back(TaskState::kStaged);
  store_->UpdateTasksInState(id, open, TaskState::kCancelled, now)
      .IgnoreError();
  engine_->DropStaging(id).IgnoreError();
  Retire(job);
}

void BackfillManager::Retire(ActiveJob* job) {
  const std::string id = job->job.id;
  if (observer_ != nullptr && IsTerminal(job->state)) {
    double actual = 0;
    if (absl::StatusOr<Job> done = store_->GetJobProgress(id); done.ok()) {
      actual = done->actual_cost;
    }
    observer_->OnJobFinished(id, job->state, job->job.plan.cost.backfill,
                             actual);
  }
  absl::MutexLock lock(&mu_);
  active_.erase(id);
  order_.erase(std::remove(order_.begin(), order_.end(), id), order_.end());
  NotifyLocked(id);
  DispatchLocked();
}

void BackfillManager::Finish(const std::string& job_id) {
  ActiveJob* job = FindActive(job_id);
  if (job == nullptr) return;
  const int finishing = static_cast<int>(ActiveJob::Phase::kFinishing);
  absl::Status s = absl::OkStatus();
  if (job->state == JobState::kQueued || job->state == JobState::kRunning) {
    s = Move(
        job, JobState::kValidating,
        absl::StrCat("validating ", job->tasks.size(), " staged partitions"),
        finishing);
  }
  if (s.ok() && job->state == JobState::kValidating) {
    std::string failure;
    s = ValidateStaged(job, &failure);
    if (s.ok() && !failure.empty()) {
      s = Move(job, JobState::kValidationFailed, failure, finishing);
      if (s.ok()) {
        engine_->DropStaging(job_id).IgnoreError();
        Retire(job);
        return;
      }
    } else if (s.ok()) {
      job->validated = true;
      s = Move(job, JobState::kPublishing,
               absl::StrCat("publishing ", job->tasks.size(), " partitions of ",
                            job->layout.items.size(),
                            " dataset(s) in one transaction"),
               finishing);
    }
  }
  if (s.ok() && job->state == JobState::kPublishing) {
    s = Publish(job);
    // Committed but not recorded (stopping): recovery records it.
    if (s.code() == absl::StatusCode::kCancelled) return;
  }
  if (s.ok() && job->state == JobState::kConfirming) {
    // Published: from here the job only goes forward. Leftover staging is
    // harmless and swept at the next start.
    engine_->DropStaging(job_id).IgnoreError();
    while (!(s = Move(job, JobState::kSucceeded,
                      "published; no downstream consumers are declared, so "
                      "there is nothing to confirm",
                      finishing))
                .ok()) {
      if (Stopping()) return;  // recovery finishes it
      absl::SleepFor(options_.retry_backoff);
    }
  }
  if (!s.ok() && Stopping()) return;  // interrupted: recovery resumes it
  if (!s.ok()) {
    // Only reached before the warehouse committed: nothing was published.
    const JobState from = job->state;
    Move(job, JobState::kFailed,
         absl::StrCat("failed while ", JobStateName(from),
                      ", nothing was published: ", s.message()),
         finishing)
        .IgnoreError();
    engine_->DropStaging(job_id).IgnoreError();
  }
  Retire(job);
}

absl::Status BackfillManager::ValidateStaged(ActiveJob* job,
                                             std::string* failure) {
  // The checkpoints: rows staged per (dataset, partition).
  std::map<std::string, std::map<std::string, int64_t>> checkpointed;
  for (const PartitionTask& t : job->tasks) {
    checkpointed[t.dataset][t.partition] += t.rows_written;
  }
  std::vector<std::string> failures;
  for (const JobLayout::Item& item : job->layout.items) {
    const std::string& name = item.dataset->name;
    ASSIGN_OR_RETURN(ValidationReport report,
                     engine_->ValidateStaged(job->job.id, *item.dataset));
    for (const std::string& f : report.failures) {
      failures.push_back(absl::StrCat(name, ": ", f));
    }
    // Staging must hold, per partition, what its checkpoint says was
    // written; otherwise staged rows were lost after the checkpoint and
    // publishing would replace good partitions with missing ones.
    std::vector<std::string> differing;
    const std::map<std::string, int64_t>& expected = checkpointed[name];
    for (const auto& [partition, rows] : expected) {
      auto it = report.rows_by_partition.find(partition);
      const int64_t staged =
          it == report.rows_by_partition.end() ? 0 : it->second;
      if (staged != rows) {
        differing.push_back(
            absl::StrCat(partition.empty() ? "(all)" : partition, " (staged ",
                         staged, ", checkpoint ", rows, ")"));
      }
    }
    int64_t staged_in_job = 0;
    for (const auto& [partition, rows] : report.rows_by_partition) {
      if (expected.count(partition)) staged_in_job += rows;
    }
    if (!differing.empty() || staged_in_job != report.rows) {
      constexpr size_t kShown = 5;
      std::string shown = absl::StrJoin(
          differing.begin(),
          differing.begin() + std::min(differing.size(), kShown), ", ");
      if (differing.size() > kShown) {
        absl::StrAppend(&shown, " and ", differing.size() - kShown, " more");
      }
      failures.push_back(absl::StrCat(
          name,
          ": staging does not hold what the partition checkpoints "
          "recorded",
          differing.empty() ? "" : absl::StrCat(": ", shown),
          staged_in_job != report.rows
              ? absl::StrCat("; ", report.rows - staged_in_job,
                             " staged rows belong to no partition of the job")
              : "",
          "; staged rows were lost or changed after their checkpoints (the "
          "warehouse file was replaced or restored, or lost writes in a "
          "crash of the machine)"));
    }
  }
  if (!failures.empty()) {
    *failure = absl::StrCat("validation failed, nothing was published: ",
                            absl::StrJoin(failures, "; "));
  }
  return absl::OkStatus();
}

absl::Status BackfillManager::Publish(ActiveJob* job) {
  const std::string& id = job->job.id;
  // Reads are retried: a transient error must not fail a job that may have
  // committed already.
  absl::StatusOr<bool> published;
  while (!(published = engine_->IsPublished(id)).ok()) {
    if (Stopping()) return absl::CancelledError("stopping");
    absl::SleepFor(options_.retry_backoff);
  }
  if (!*published) {
    if (!job->layout_complete) {
      return absl::FailedPreconditionError(
          "a dataset of the job is no longer in the loaded pipelines");
    }
    if (!job->validated) {
      // Resumed into PUBLISHING: check the staging again first.
      std::string failure;
      RETURN_IF_ERROR(ValidateStaged(job, &failure));
      if (!failure.empty()) return absl::DataLossError(failure);
    }
    RETURN_IF_ERROR(engine_->Publish(job->layout));
  }

  // The warehouse has committed: record it, retrying until it is recorded
  // (or the process stops; recovery then finds the publication marker).
  std::map<std::string, std::string> versions;
  for (const DatasetPlan& dp : job->job.plan.datasets) {
    versions[dp.dataset] = dp.transform_version;
  }
  for (int attempt = 1;; ++attempt) {
    absl::Status s = RecordPublication(job, versions);
    if (s.ok()) return absl::OkStatus();
    // FAILED_PRECONDITION: the store holds the job in another state, which
    // retrying cannot change; leave it to recovery rather than spin.
    if (Stopping() || s.code() == absl::StatusCode::kFailedPrecondition) {
      return absl::CancelledError(s.message());
    }
    absl::SleepFor(
        std::min(options_.retry_backoff * attempt, absl::Seconds(5)));
  }
}

absl::Status BackfillManager::RecordPublication(
    ActiveJob* job, const std::map<std::string, std::string>& versions) {
  const std::string& id = job->job.id;
  // Lineage from the checkpoints (the store's copy is authoritative after a
  // restart).
  ASSIGN_OR_RETURN(std::vector<PartitionTask> tasks, store_->ListTasks(id));
  const absl::Time now = clock_->Now();
  std::vector<LineageRecord> lineage;
  int64_t rows = 0;
  for (const PartitionTask& t : tasks) {
    if (t.state != TaskState::kStaged) continue;
    LineageRecord r;
    r.dataset = t.dataset;
    r.partition = t.partition;
    r.job_id = id;
    auto v = versions.find(t.dataset);
    if (v != versions.end()) r.transform_version = v->second;
    r.inputs = t.inputs;
    r.output_fingerprint = t.output_fingerprint;
    r.row_count = t.rows_written;
    r.reason = job->job.request.reason;
    r.ticket = job->job.request.ticket;
    r.requested_by = job->job.request.requested_by;
    r.published_at = now;
    rows += t.rows_written;
    lineage.push_back(std::move(r));
  }
  const std::string message = absl::StrCat(
      "published ", lineage.size(), " partitions (", rows, " rows) atomically");
  absl::MutexLock transition(&job->transition_mu);
  const JobState from = job->state;
  RETURN_IF_ERROR(store_->RecordPublication(id, lineage, JobState::kConfirming,
                                            message, now));
  {
    absl::MutexLock lock(&mu_);
    job->state = JobState::kConfirming;
    NotifyLocked(id);
  }
  if (observer_ != nullptr) {
    observer_->OnJobTransition(id, from, JobState::kConfirming, message);
  }
  return absl::OkStatus();
}

void BackfillManager::NotifyLocked(const std::string& job_id) {
  versions_[job_id] = next_version_++;
  changed_.SignalAll();
}

std::vector<Conflict> BackfillManager::FindConflictsLocked(
    const Plan& plan, const std::string& own_key) const {
  std::vector<Conflict> out;
  for (const std::string& id : order_) {
    const ActiveJob& job = *active_.at(id);
    if (!own_key.empty() && job.job.idempotency_key == own_key) continue;
    // A job recorded as cancelled or failed never publishes, even while
    // its last partitions drain.
    if (IsTerminal(job.state)) continue;
    for (const DatasetPlan& dp : plan.datasets) {
      for (const std::string& p : dp.partitions) {
        if (job.scope.count({dp.dataset, p})) {
          out.push_back({id, dp.dataset, p});
        }
      }
    }
  }
  return out;
}

absl::StatusOr<Plan> BackfillManager::PlanBackfill(
    const BackfillRequest& request) {
  ASSIGN_OR_RETURN(Plan plan, planner_.MakePlan(request));
  absl::MutexLock lock(&mu_);
  plan.conflicts = FindConflictsLocked(plan, "");
  return plan;
}

absl::StatusOr<SubmitResult> BackfillManager::Submit(
    const BackfillRequest& request, const std::string& idempotency_key) {
  RETURN_IF_ERROR(ValidateSubmit(request, idempotency_key));
  ASSIGN_OR_RETURN(Plan plan, planner_.MakePlan(request));

  absl::MutexLock admission(&admission_mu_);
  {
    absl::MutexLock lock(&mu_);
    if (!started_) return absl::UnavailableError("backfilld is starting");
    if (stopping_) return absl::UnavailableError("backfilld is shutting down");
    std::vector<Conflict> conflicts =
        FindConflictsLocked(plan, idempotency_key);
    if (!conflicts.empty()) {
      const Conflict& c = conflicts.front();
      return absl::FailedPreconditionError(absl::StrCat(
          "partition ", c.partition, " of ", c.dataset,
          " is already being recomputed by job ", c.job_id,
          conflicts.size() > 1
              ? absl::StrCat(" (", conflicts.size(),
                             " planned partitions overlap active jobs)")
              : "",
          "; wait for it to finish or cancel it"));
    }
  }

  Job job;
  job.state = JobState::kQueued;
  job.request = request;
  job.idempotency_key = idempotency_key;
  job.request_fingerprint = RequestFingerprint(request);
  job.plan = std::move(plan);
  job.message =
      absl::StrCat("queued: ", job.plan.total_partitions(), " partitions in ",
                   job.plan.datasets.size(), " dataset(s)");
  ASSIGN_OR_RETURN(CreateJobResult created,
                   store_->CreateJob(job, clock_->Now()));
  if (!created.created) {
    if (created.job.request_fingerprint != job.request_fingerprint) {
      return absl::InvalidArgumentError(absl::StrCat(
          "idempotency key \"", idempotency_key, "\" was already used by job ",
          created.job.id, " for a different request (",
          DescribeRequest(created.job.request), "); use a new key"));
    }
    return SubmitResult{std::move(created.job), false};
  }
  if (absl::Status s = Activate(created.job); !s.ok()) {
    // Never leave a stored job that nothing runs (and a retry with the same
    // key would return as if it were fine).
    store_
        ->TransitionJob(created.job.id, JobState::kQueued, JobState::kFailed,
                        absl::StrCat("could not start: ", s.message()),
                        clock_->Now())
        .IgnoreError();
    return s;
  }
  ASSIGN_OR_RETURN(Job stored, store_->GetJob(created.job.id));
  return SubmitResult{std::move(stored), true};
}

absl::StatusOr<Job> BackfillManager::GetJob(const std::string& id) {
  return store_->GetJob(id);
}

absl::StatusOr<std::vector<Job>> BackfillManager::ListJobs(
    const JobFilter& filter) {
  return store_->ListJobs(filter);
}

absl::StatusOr<Job> BackfillManager::Cancel(const std::string& id,
                                            const std::string& reason) {
  RETURN_IF_ERROR(CheckField("reason", reason, kMaxReason));
  ActiveJob* job = nullptr;
  {
    absl::MutexLock lock(&mu_);
    auto it = active_.find(id);
    if (it != active_.end()) {
      job = it->second.get();
      switch (job->phase) {
        case ActiveJob::Phase::kRunning:
          job->phase = ActiveJob::Phase::kCancelling;
          job->ready.clear();
          break;
        case ActiveJob::Phase::kCancelling:
          job = nullptr;  // already cancelled: answer with the job
          break;
        case ActiveJob::Phase::kFinishing:
          return absl::FailedPreconditionError(absl::StrCat(
              "job ", id, " is ", JobStateName(job->state),
              ": every partition is staged and it is being validated or "
              "published; it can no longer be cancelled"));
        case ActiveJob::Phase::kFailing:
        case ActiveJob::Phase::kSettling:
          return absl::FailedPreconditionError(
              absl::StrCat("job ", id, " is ending (", job->failure,
                           "); there is nothing left to cancel"));
      }
    }
  }
  if (job == nullptr) {
    ASSIGN_OR_RETURN(Job stored, store_->GetJob(id));
    if (stored.state == JobState::kCancelled) return stored;
    return absl::FailedPreconditionError(
        absl::StrCat("job ", id, " is already ", JobStateName(stored.state),
                     "; only queued or running jobs can be cancelled"));
  }
  absl::Status moved =
      Move(job, JobState::kCancelled,
           reason.empty() ? "cancelled" : absl::StrCat("cancelled: ", reason),
           static_cast<int>(ActiveJob::Phase::kCancelling));
  bool settle = false;
  {
    absl::MutexLock lock(&mu_);
    if (!moved.ok()) {
      // Not recorded: the job goes on as if never cancelled.
      job->phase = ActiveJob::Phase::kRunning;
      for (size_t i = 0; i < job->tasks.size(); ++i) {
        if (job->tasks[i].state == TaskState::kPending &&
            job->waiting[i] == 0) {
          job->ready.push_back(i);
        }
      }
      DispatchLocked();
    } else {
      settle = TakeSettleLocked(job);
    }
  }
  if (!moved.ok()) return moved;
  if (settle) Settle(job);
  return store_->GetJob(id);
}

absl::StatusOr<Job> BackfillManager::WaitForChange(const std::string& id,
                                                   uint64_t* version,
                                                   absl::Time deadline) {
  uint64_t current;
  {
    absl::MutexLock lock(&mu_);
    auto current_version = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      auto it = versions_.find(id);
      return it == versions_.end() ? uint64_t{1} : it->second;
    };
    while (*version != 0 && current_version() <= *version && !stopping_) {
      if (changed_.WaitWithDeadline(&mu_, deadline)) break;
    }
    current = current_version();
  }
  // The first read is the whole job; later ones are progress updates.
  ASSIGN_OR_RETURN(
      Job job, *version == 0 ? store_->GetJob(id) : store_->GetJobProgress(id));
  *version = current;
  return job;
}

}  // namespace backfill
