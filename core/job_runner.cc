#include "core/job_runner.h"

#include <algorithm>
#include <memory>
#include <set>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/status_macros.h"
#include "core/confirm_step.h"
#include "core/diff_step.h"
#include "core/governance/approval.h"
#include "core/governance/audit_log.h"
#include "core/governance/retention.h"
#include "core/model/job_state_machine.h"
#include "core/plan/early_cutoff.h"
#include "core/publish_step.h"
#include "core/recompute_step.h"
#include "core/run/crash_point.h"
#include "core/validate_step.h"

namespace backfill {
namespace {

// " by <actor>" for the audit message of an operator's decision; "" when
// no one is named.
std::string By(const std::string& actor) {
  return actor.empty() ? "" : absl::StrCat(" by ", actor);
}

using Storage = JobObserver::Storage;

// Why a job whose partitions all came out unchanged or skipped cannot be
// rolled back.
std::string PublishedNothing(const std::string& id) {
  return absl::StrCat(
      "job ", id,
      " published nothing: every partition it recomputed was identical to "
      "the published version or skipped (early cutoff), so there is nothing "
      "to roll back");
}

// A storage failure that may pass: disk full, I/O error, busy.
bool Transient(const absl::Status& s) {
  return s.code() == absl::StatusCode::kResourceExhausted ||
         s.code() == absl::StatusCode::kUnavailable;
}

// A task failure worth another attempt (the transform may succeed next
// time); bad input, a bad transform or missing data will not.
bool Retryable(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kDataLoss:
      return false;
    default:
      return true;
  }
}

TaskGraph::Node NodeOf(TaskState state) {
  switch (state) {
    case TaskState::kStaged:
    case TaskState::kPublished:
    case TaskState::kUnchanged:
    case TaskState::kSkipped:
      return TaskGraph::Node::kDone;
    case TaskState::kFailed:
      return TaskGraph::Node::kFailed;
    default:
      return TaskGraph::Node::kPending;
  }
}

TaskGraph::Outcome OutcomeOf(TaskState state) {
  switch (state) {
    case TaskState::kUnchanged:
      return TaskGraph::Outcome::kUnchanged;
    case TaskState::kSkipped:
      return TaskGraph::Outcome::kSkipped;
    default:
      return TaskGraph::Outcome::kChanged;
  }
}

std::string Plural(int64_t n, const char* one, const char* many) {
  return absl::StrCat(n, " ", n == 1 ? one : many);
}

// How a job held for a decision names the rollback that superseded it.
std::string RollbackSupersedes(const std::string& rolled_back) {
  return absl::StrCat("the rollback of ", rolled_back,
                      ", which restored some of the same partitions");
}

// The entry of `dataset` in `datasets`, added (empty) at the end if
// missing.
JobObserver::PublishedDataset& DatasetEntry(
    std::vector<JobObserver::PublishedDataset>* datasets,
    const std::string& dataset) {
  for (JobObserver::PublishedDataset& d : *datasets) {
    if (d.dataset == dataset) return d;
  }
  datasets->emplace_back();
  datasets->back().dataset = dataset;
  return datasets->back();
}

// What a publish replaced, from its lineage: partitions and rows by dataset,
// in the order the lineage names them.
std::vector<JobObserver::PublishedDataset> PublishedPerDataset(
    const std::vector<LineageRecord>& lineage) {
  std::vector<JobObserver::PublishedDataset> out;
  for (const LineageRecord& record : lineage) {
    JobObserver::PublishedDataset& d = DatasetEntry(&out, record.dataset);
    ++d.partitions;
    d.rows += record.row_count;
  }
  return out;
}

}  // namespace

struct JobRunner::Active {
  Job job;  // request, plan (with partitions), key, message
  // The catalog the job runs with, to its end; layout and spec_of point
  // into it. Set before the job is shared and never changed: read without
  // mu_.
  std::shared_ptr<const Catalog> catalog;
  JobState state = JobState::kQueued;
  Phase phase = Phase::kWaiting;
  Phase settling_from = Phase::kFailing;

  bool loaded = false;  // tasks, specs, layout and graph below are built
  JobLayout layout;
  bool layout_complete = true;
  std::vector<PartitionTask> tasks;
  std::vector<const DatasetSpec*> spec_of;  // per task; null if unknown
  std::unique_ptr<TaskGraph> graph;

  bool prepared = false;  // the engine prepared staging in this process
  // A Prepare closure is in flight. At most one runs per job: a job resumed
  // while an earlier preparation is still in flight waits for it to end.
  bool preparing = false;
  bool validated = false;  // staging passed validation in this process
  int busy = 0;            // closures in flight for the job
  int running_tasks = 0;   // partitions dispatched and not yet returned
  // Of those, the partitions batches hold and have not started yet, each
  // with the batch (RunTasks' `batch`) that holds it now: a free worker
  // may take them over (DispatchLocked), and a batch starts only those
  // still its own.
  std::map<size_t, uint64_t> held;
  // The average time to stage one of its partitions (seconds; negative:
  // none staged yet in this process), for BatchSizeLocked.
  double stage_seconds = -1;
  int restage_rounds = 0;
  // Confirming again (Confirm): it ended before, and was counted then.
  bool reconfirming = false;
  uint64_t last_dispatch = 0;
  std::string failure;
  std::string waiting_message;  // the last "waiting for ..." recorded

  // Serializes the job's transitions (store write, then memory).
  absl::Mutex transition_mu;
};

JobRunner::JobRunner(const LiveCatalog* catalog, StateStore* store,
                     Engine* engine, const Clock* clock, JobObserver* observer,
                     RunnerOptions options)
    : catalog_(catalog),
      store_(store),
      engine_(engine),
      clock_(clock),
      observer_(observer),
      options_(options) {}

JobRunner::~JobRunner() { Shutdown(); }

absl::Status JobRunner::Accepting() {
  absl::MutexLock lock(&mu_);
  if (!started_) return absl::UnavailableError("backfilld is starting");
  if (stopping_) return absl::UnavailableError("backfilld is shutting down");
  return absl::OkStatus();
}

int64_t JobRunner::QueuedJobs() {
  absl::MutexLock lock(&mu_);
  int64_t queued = 0;
  for (const auto& [id, job] : jobs_) {
    if (job->state == JobState::kQueued) ++queued;
  }
  return queued;
}

bool JobRunner::Stopping() {
  absl::MutexLock lock(&mu_);
  return stopping_;
}

void JobRunner::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    if (!started_ || stopping_) return;
    stopping_ = true;
    changed_.SignalAll();
  }
  // Running closures finish (partitions checkpoint); queued ones are
  // dropped and their work resumes at the next Start().
  if (pool_) pool_->Shutdown();
}

// ---------------------------------------------------------------------------
// Recovery

absl::Status JobRunner::Start() {
  {
    absl::MutexLock lock(&mu_);
    if (started_) return absl::FailedPreconditionError("already started");
  }
  // One thread more than task slots, so that preparing or publishing a job
  // never waits behind a full set of partition tasks.
  task_writer_ = std::make_unique<TaskWriter>(
      store_, [this](const std::string& what,
                     const std::function<absl::Status()>& write) {
        return Persist(Storage::kStateStore, what, write);
      });
  pool_ = std::make_unique<WorkerPool>(std::max(1, options_.workers) + 1);
  // Rollbacks the warehouse committed before a crash are recorded before
  // any job can publish over their partitions.
  std::vector<std::string> recovered;
  RETURN_IF_ERROR(RecoverRollbacks(&recovered));
  // Recovered jobs run with the catalog in force now.
  const std::shared_ptr<const Catalog> catalog = catalog_->Get();

  ASSIGN_OR_RETURN(
      std::vector<std::string> ids,
      store_->ListJobIds({JobState::kQueued, JobState::kRunning,
                          JobState::kPaused, JobState::kValidating,
                          JobState::kAwaitingApproval, JobState::kPublishing,
                          JobState::kConfirming}));
  // Jobs held for a decision are those that kept their staging.
  ASSIGN_OR_RETURN(std::vector<std::string> staged,
                   engine_->ListJobsWithStaging());
  ASSIGN_OR_RETURN(
      std::vector<std::string> held_ids,
      store_->ListJobIds({JobState::kFailed, JobState::kValidationFailed}));
  const std::set<std::string> with_staging(staged.begin(), staged.end());
  for (const std::string& id : held_ids) {
    if (with_staging.count(id)) ids.push_back(id);
  }

  std::vector<Job> jobs;
  for (const std::string& id : ids) {
    ASSIGN_OR_RETURN(Job job, store_->GetJob(id));
    jobs.push_back(std::move(job));
  }
  // Admission order: jobs that had started keep their partitions ahead of
  // those that had not; then by job number.
  std::stable_sort(jobs.begin(), jobs.end(), [](const Job& a, const Job& b) {
    const bool sa = a.start_time != absl::InfinitePast();
    const bool sb = b.start_time != absl::InfinitePast();
    if (sa != sb) return sa;
    return JobNumberOf(a.id) < JobNumberOf(b.id);
  });

  std::vector<std::string> finishing;
  bool first = true;
  for (Job& job : jobs) {
    const JobState state = job.state;
    Phase phase = Phase::kWaiting;
    switch (state) {
      case JobState::kQueued:
      case JobState::kRunning:
        phase = Phase::kWaiting;
        break;
      case JobState::kPaused:
        phase = Phase::kPaused;
        break;
      case JobState::kValidating:
      case JobState::kPublishing:
      case JobState::kConfirming:
        phase = Phase::kFinishing;
        break;
      default:
        phase = Phase::kHeld;
        break;
    }
    if (state == JobState::kQueued || state == JobState::kRunning ||
        state == JobState::kPaused) {
      // Attempts in flight when the process died start over; their staging
      // writes are replaced by the next attempt.
      RETURN_IF_ERROR(store_
                          ->UpdateTasksInState(
                              job.id, {TaskState::kRunning, TaskState::kFailed},
                              TaskState::kPending, clock_->Now())
                          .status());
    }
    if (phase == Phase::kWaiting || phase == Phase::kPaused ||
        phase == Phase::kFinishing) {
      bool complete = true;
      absl::StatusOr<JobLayout> layout = LayoutOf(*catalog, job, &complete);
      if (!layout.ok()) {
        if (state == JobState::kPublishing || state == JobState::kConfirming) {
          // It may have published: never fail it on a whim; refuse to start.
          return absl::FailedPreconditionError(absl::StrCat(
              "cannot resume job ", job.id, " (", JobStateName(state),
              "): ", layout.status().message()));
        }
        // Nothing of it was published, and running it again would fail the
        // same way: it ends here, without staging to retry.
        const JobState end = state == JobState::kPaused ? JobState::kCancelled
                                                        : JobState::kFailed;
        const std::string message = absl::StrCat(
            "cannot resume after restart: ", layout.status().message(),
            "; nothing was published");
        RETURN_IF_ERROR(
            store_->TransitionJob(job.id, state, end, message, clock_->Now()));
        RETURN_IF_ERROR(
            store_
                ->UpdateTasksInState(job.id,
                                     {TaskState::kPending, TaskState::kRunning,
                                      TaskState::kStaged, TaskState::kFailed},
                                     TaskState::kCancelled, clock_->Now())
                .status());
        engine_->DropStaging(job.id).IgnoreError();
        // Its end is an end like any other for metrics and lineage.
        if (observer_ != nullptr) {
          observer_->OnJobTransition(job.id, state, end, message);
        }
        ReportFinished(job.id, end, job.plan.cost.backfill);
        continue;
      }
    }
    auto active = std::make_unique<Active>();
    const std::string id = job.id;
    active->catalog = catalog;
    active->state = state;
    active->phase = phase;
    if (state == JobState::kConfirming) {
      // A confirmation asked for again (backfillctl confirm) of a job that
      // had ended: its end was reported then, and is not reported twice.
      ASSIGN_OR_RETURN(std::vector<AuditEvent> events,
                       store_->ListAuditEvents(id));
      active->reconfirming = EndedAConfirmation(events);
    }
    active->job = std::move(job);
    Scope scope = ScopeOf(active->job.plan);
    {
      absl::MutexLock lock(&mu_);
      admission_.Add(id, std::move(scope), phase == Phase::kHeld);
      jobs_[id] = std::move(active);
      if (phase == Phase::kFinishing) {
        ++jobs_[id]->busy;
        finishing.push_back(id);
      }
    }
    if (first) {
      CrashPoint("recovery");
      first = false;
    }
  }
  // A rollback recorded just now had restored its rows before the process
  // died, possibly before it superseded the held jobs over its partitions.
  for (const std::string& rolled_back : recovered) {
    ASSIGN_OR_RETURN(Job rolled, store_->GetJob(rolled_back));
    std::vector<Active*> held;
    {
      absl::MutexLock lock(&mu_);
      admission_.Add(rolled_back, ScopeOf(rolled.plan));
      held = ReserveHeldOverlapsLocked(rolled_back);
      admission_.Remove(rolled_back);
    }
    for (Active* h : held) Supersede(h, RollbackSupersedes(rolled_back));
  }
  SweepOrphans();
  absl::MutexLock lock(&mu_);
  started_ = true;
  // Best effort, and again after each publish; on a worker, as reading
  // when each job with rollback copies published reads their lineage, which
  // a start over a long history should not wait for.
  SubmitLocked([this] { EnforceRetention().IgnoreError(); });
  for (const std::string& id : finishing) {
    SubmitLocked([this, id] { Finish(id); });
  }
  PumpLocked();
  return absl::OkStatus();
}

void JobRunner::SweepOrphans() {
  // A crash between a job's end and its cleanup leaves staging (and tasks
  // that never ran) behind; the end is recorded, so finish the cleanup.
  // Best effort: what fails is retried at the next start.
  absl::StatusOr<std::vector<std::string>> ids = engine_->ListJobsWithStaging();
  if (!ids.ok()) return;
  for (const std::string& id : *ids) {
    {
      absl::MutexLock lock(&mu_);
      if (jobs_.count(id)) continue;
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

absl::StatusOr<JobLayout> JobRunner::LayoutOf(const Catalog& catalog,
                                              const Job& job,
                                              bool* complete) const {
  // Partitions still to compute must use the logic the others used and a
  // dataset the pipelines still declare; a job whose partitions are all
  // staged (or published) is finished with what it has.
  const bool computing =
      job.state == JobState::kQueued || job.state == JobState::kRunning ||
      job.state == JobState::kPaused || job.state == JobState::kValidating ||
      job.state == JobState::kFailed;
  *complete = true;
  JobLayout layout;
  layout.job_id = job.id;
  std::set<std::string> in_job;
  for (const DatasetPlan& dp : job.plan.datasets) {
    const DatasetSpec* spec = catalog.Find(dp.dataset);
    if (spec == nullptr || !spec->is_derived()) {
      if (!computing) {
        *complete = false;
        continue;
      }
      return absl::FailedPreconditionError(absl::StrCat(
          "dataset \"", dp.dataset,
          "\" is no longer a derived dataset in the loaded pipelines"));
    }
    if (computing && !dp.transform_version.empty() &&
        dp.transform_version != spec->transform_version) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the transform of \"", dp.dataset,
          "\" changed since the job was planned (version ",
          dp.transform_version, " -> ", spec->transform_version,
          "); partitions computed with the old logic are never published "
          "with the new: submit a new backfill"));
    }
    layout.items.push_back({spec, dp.partitions, dp.keys});
    in_job.insert(dp.dataset);
  }
  std::set<std::string> pinned;
  for (const JobLayout::Item& item : layout.items) {
    for (const UpstreamEdge& e : item.dataset->upstream) {
      if (e.mapping == Mapping::kAll && !in_job.count(e.dataset) &&
          pinned.insert(e.dataset).second) {
        layout.pinned.push_back(catalog.Find(e.dataset));
      }
    }
  }
  return layout;
}

absl::Status JobRunner::Load(Active* job) {
  {
    absl::MutexLock lock(&mu_);
    if (job->loaded) return absl::OkStatus();
  }
  Job copy;
  std::shared_ptr<const Catalog> catalog;
  {
    absl::MutexLock lock(&mu_);
    copy = job->job;
    copy.state = job->state;
    catalog = job->catalog;
  }
  bool complete = true;
  ASSIGN_OR_RETURN(JobLayout layout, LayoutOf(*catalog, copy, &complete));
  ASSIGN_OR_RETURN(std::vector<PartitionTask> tasks,
                   store_->ListTasks(copy.id));
  std::vector<const DatasetSpec*> specs;
  std::vector<TaskGraph::Task> nodes;
  bool unstaged = false;
  for (const PartitionTask& t : tasks) {
    specs.push_back(catalog->Find(t.dataset));
    nodes.push_back(
        {t.dataset, t.partition, NodeOf(t.state), OutcomeOf(t.state)});
    unstaged = unstaged || NodeOf(t.state) != TaskGraph::Node::kDone;
  }
  if (unstaged && !complete) {
    return absl::FailedPreconditionError("a dataset of the job is missing");
  }
  auto graph = std::make_unique<TaskGraph>(
      std::move(nodes),
      [catalog](const std::string& dataset) {
        const DatasetSpec* spec = catalog->Find(dataset);
        return spec == nullptr ? std::vector<UpstreamEdge>{} : spec->upstream;
      },
      [catalog](const std::string& dataset) {
        const DatasetSpec* spec = catalog->Find(dataset);
        return spec == nullptr ? PartitionLayout() : spec->layout();
      });
  absl::MutexLock lock(&mu_);
  job->layout = std::move(layout);
  job->layout_complete = complete;
  job->tasks = std::move(tasks);
  job->spec_of = std::move(specs);
  job->graph = std::move(graph);
  job->loaded = true;
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// Bookkeeping

JobRunner::Active* JobRunner::FindLocked(const std::string& id) {
  auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : it->second.get();
}

void JobRunner::NotifyLocked(const std::string& id) {
  versions_[id] = next_version_++;
  changed_.SignalAll();
}

void JobRunner::SubmitLocked(std::function<void()> fn) {
  if (pool_ != nullptr) pool_->Submit(std::move(fn));
}

bool JobRunner::ReleaseAndTakeSettleLocked(Active* job) {
  if (job->busy == 1 && job->phase == Phase::kDone) {
    ReleaseLocked(job);  // forgets it: it must not be touched afterwards
    return false;
  }
  ReleaseLocked(job);
  return TakeSettleLocked(job);
}

void JobRunner::ReleaseLocked(Active* job) {
  --job->busy;
  if (job->busy == 0 && job->phase == Phase::kDone) {
    const std::string id = job->job.id;
    jobs_.erase(id);
    NotifyLocked(id);
  }
}

absl::Status JobRunner::AwaitOwnRunEndedLocked(const std::string& id,
                                               absl::string_view action) {
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  for (Active* self = FindLocked(id); self != nullptr; self = FindLocked(id)) {
    if (self->reconfirming) {
      return absl::FailedPreconditionError(
          absl::StrCat("job ", id,
                       " is confirming its downstream consumers again right "
                       "now; wait for it to end, then ",
                       action, " it"));
    }
    if (stopping_) {
      return absl::UnavailableError("backfilld is shutting down");
    }
    if (changed_.WaitWithDeadline(&mu_, deadline) && FindLocked(id)) {
      return absl::UnavailableError(
          absl::StrCat("job ", id,
                       " is still letting go of its partitions after its "
                       "run; try again in a moment to ",
                       action, " it"));
    }
  }
  return absl::OkStatus();
}

void JobRunner::EndLocked(Active* job, Phase phase) {
  job->phase = phase;
  if (phase == Phase::kHeld) {
    admission_.SetHeld(job->job.id, true);
  } else {
    admission_.Remove(job->job.id);
  }
  if (job->graph) job->graph->ClearReady();
  NotifyLocked(job->job.id);
}

void JobRunner::ReportFinished(const std::string& id, JobState state,
                               double estimate) {
  if (observer_ == nullptr) return;
  double actual = 0;
  if (absl::StatusOr<Job> done = store_->GetJobProgress(id); done.ok()) {
    actual = done->actual_cost;
  }
  observer_->OnJobFinished(id, state, estimate, actual);
}

absl::Status JobRunner::Persist(Storage storage, const std::string& what,
                                const std::function<absl::Status()>& write) {
  absl::Duration backoff = options_.retry_backoff;
  while (true) {
    absl::Status s = write();
    if (s.ok()) {
      storage_alarm_.Succeeded(storage);
      return s;
    }
    if (!Transient(s)) return s;
    storage_alarm_.Failed(storage, what, s);
    if (Stopping()) {
      return absl::CancelledError(
          absl::StrCat("stopping while ", what, " failed: ", s.message()));
    }
    clock_->SleepFor(backoff);
    backoff = std::min(backoff * 2, options_.max_backoff);
  }
}

absl::Status JobRunner::Move(Active* job, JobState to,
                             const std::string& message,
                             std::optional<Phase> required,
                             std::optional<Phase> then) {
  absl::MutexLock transition(&job->transition_mu);
  JobState from;
  const std::string id = job->job.id;
  {
    absl::MutexLock lock(&mu_);
    if (required.has_value() && job->phase != *required) {
      return absl::AbortedError("superseded by another decision on the job");
    }
    from = job->state;
  }
  if (from == to) return absl::OkStatus();
  RETURN_IF_ERROR(CheckTransition(from, to));
  RETURN_IF_ERROR(Persist(
      Storage::kStateStore,
      absl::StrCat("recording job ", id, " ", JobStateName(from), " -> ",
                   JobStateName(to)),
      [&] {
        return store_->TransitionJob(id, from, to, message, clock_->Now());
      }));
  {
    absl::MutexLock lock(&mu_);
    job->state = to;
    job->job.message = message;
    if (then.has_value()) EndLocked(job, *then);
    NotifyLocked(id);
  }
  if (observer_ != nullptr) observer_->OnJobTransition(id, from, to, message);
  return absl::OkStatus();
}

std::string JobRunner::DescribeLocked(
    const std::vector<Admission::Overlap>& overlaps) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < overlaps.size() && i < kMaxJobsDescribed; ++i) {
    const Admission::Overlap& o = overlaps[i];
    const Active* other = FindLocked(o.job_id);
    const char* state = other ? JobStateName(other->state)
                        : rolling_back_.count(o.job_id) ? "rolling back"
                                                        : "active";
    parts.push_back(absl::StrCat(
        other != nullptr && other->state == JobState::kPaused ? "paused job "
                                                              : "",
        o.job_id, " (", state, ", ",
        Plural(o.partitions, "shared partition", "shared partitions"), ")"));
  }
  std::string described = absl::StrJoin(parts, ", ");
  if (overlaps.size() > kMaxJobsDescribed) {
    absl::StrAppend(
        &described, ", ... and ",
        Plural(static_cast<int64_t>(overlaps.size() - kMaxJobsDescribed),
               "more job", "more jobs"));
  }
  return described;
}

std::string JobRunner::Describe(
    const std::vector<Admission::Overlap>& overlaps) {
  absl::MutexLock lock(&mu_);
  return DescribeLocked(overlaps);
}

// ---------------------------------------------------------------------------
// Admission and dispatch

void JobRunner::Admit(const Job& job, std::shared_ptr<const Catalog> catalog) {
  auto active = std::make_unique<Active>();
  active->catalog = catalog != nullptr ? std::move(catalog) : catalog_->Get();
  active->job = job;
  active->state = job.state;
  active->phase = Phase::kWaiting;
  Scope scope = ScopeOf(job.plan);
  absl::MutexLock lock(&mu_);
  admission_.Add(job.id, std::move(scope));
  jobs_[job.id] = std::move(active);
  NotifyLocked(job.id);
  PumpLocked();
}

std::vector<Admission::Overlap> JobRunner::Blocking(
    const Plan& plan, const std::string& own_key,
    std::vector<Conflict>* conflicts, size_t max) {
  absl::MutexLock lock(&mu_);
  // Without admitted jobs nothing overlaps: the plan's scope (a set of all
  // its partitions) is not built for nothing.
  if (admission_.Empty()) return {};
  std::vector<Conflict> all;
  std::vector<Admission::Overlap> overlaps =
      admission_.Overlapping(ScopeOf(plan), &all, max);
  std::vector<Admission::Overlap> out;
  for (Admission::Overlap& o : overlaps) {
    const Active* other = FindLocked(o.job_id);
    if (other != nullptr && !own_key.empty() &&
        other->job.idempotency_key == own_key) {
      continue;
    }
    out.push_back(std::move(o));
  }
  if (conflicts != nullptr) {
    for (Conflict& c : all) {
      const Active* other = FindLocked(c.job_id);
      if (other != nullptr && !own_key.empty() &&
          other->job.idempotency_key == own_key) {
        continue;
      }
      conflicts->push_back(std::move(c));
    }
  }
  return out;
}

void JobRunner::PumpLocked() {
  if (stopping_ || !started_) return;
  for (const std::string& id : admission_.Order()) {
    Active* job = FindLocked(id);
    if (job == nullptr || job->phase != Phase::kWaiting || job->preparing) {
      continue;
    }
    std::vector<Admission::Overlap> blockers = admission_.Blockers(id);
    if (!blockers.empty()) {
      const std::string message =
          absl::StrCat("waiting for ", DescribeLocked(blockers),
                       " to finish: per partition, jobs run in the order they "
                       "were submitted");
      if (message != job->waiting_message) {
        job->waiting_message = message;
        ++job->busy;
        SubmitLocked([this, id, message] {
          store_->SetJobMessage(id, JobState::kQueued, message, clock_->Now())
              .IgnoreError();
          Active* j;
          bool settle;
          {
            absl::MutexLock lock(&mu_);
            j = FindLocked(id);
            if (j == nullptr) return;
            if (j->state == JobState::kQueued) j->job.message = message;
            NotifyLocked(id);
            settle = ReleaseAndTakeSettleLocked(j);
          }
          if (settle) Settle(j);
        });
      }
      continue;
    }
    job->phase = Phase::kPreparing;
    job->preparing = true;
    ++job->busy;
    SubmitLocked([this, id] { Prepare(id); });
  }
  DispatchLocked();
}

void JobRunner::DispatchLocked() {
  if (stopping_) return;
  std::set<Active*> exhausted;
  while (in_flight_ < options_.workers) {
    Active* best = nullptr;
    for (auto& [id, ptr] : jobs_) {
      Active* job = ptr.get();
      if (job->phase != Phase::kRunning || !job->prepared || !job->graph ||
          job->graph->ready() == 0 || exhausted.count(job)) {
        continue;
      }
      const int limit = job->job.request.max_parallel;
      if (limit > 0 && job->running_tasks >= limit) continue;
      if (best == nullptr) {
        best = job;
        continue;
      }
      const int pa = job->job.request.priority, pb = best->job.request.priority;
      if (pa != pb) {
        if (pa > pb) best = job;
      } else if (job->running_tasks != best->running_tasks) {
        if (job->running_tasks < best->running_tasks) best = job;
      } else if (job->last_dispatch < best->last_dispatch) {
        best = job;
      }
    }
    // Partitions a batch holds and has not started are not ready for
    // anyone else, and would wait for that batch's current partition, a
    // long one perhaps. A free worker takes them over (the later half of
    // them) when no job has ready partitions or the batch's job has a
    // higher priority than the one that has: so a batch never keeps its
    // job's partitions from a free worker that would otherwise idle or go
    // to a job of lower priority. The partitions were counted as running
    // when the batch took them, so no limit changes.
    Active* holder = nullptr;
    for (auto& [id, ptr] : jobs_) {
      Active* job = ptr.get();
      if (job->phase != Phase::kRunning || job->held.empty()) continue;
      if (holder == nullptr ||
          job->job.request.priority > holder->job.request.priority ||
          (job->job.request.priority == holder->job.request.priority &&
           job->held.size() > holder->held.size())) {
        holder = job;
      }
    }
    if (holder != nullptr &&
        (best == nullptr ||
         holder->job.request.priority > best->job.request.priority)) {
      const size_t take = std::min(kMaxBatch, (holder->held.size() + 1) / 2);
      std::vector<size_t> indices;
      for (auto it = std::prev(holder->held.end()); indices.size() < take;
           --it) {
        indices.push_back(it->first);
        if (it == holder->held.begin()) break;
      }
      std::reverse(indices.begin(), indices.end());
      for (size_t i : indices) holder->held.erase(i);
      StartBatchLocked(holder, std::move(indices));
      continue;
    }
    if (best == nullptr) return;
    // A worker takes a batch of the job's ready partitions when they are
    // short (BatchSizeLocked): their starts and their checkpoints are then
    // one store write each.
    const size_t batch = BatchSizeLocked(*best);
    const int limit = best->job.request.max_parallel;
    std::vector<size_t> indices;
    while (indices.size() < batch &&
           (limit <= 0 || best->running_tasks < limit)) {
      std::optional<size_t> index = best->graph->Pop([&](size_t i) {
        const DatasetSpec* spec = best->spec_of[i];
        return spec == nullptr || spec->max_parallel == 0 ||
               dataset_running_[spec->name] < spec->max_parallel;
      });
      if (!index) break;
      const size_t i = *index;
      best->tasks[i].state = TaskState::kRunning;
      ++best->running_tasks;
      ++dataset_running_[best->tasks[i].dataset];
      indices.push_back(i);
    }
    if (indices.empty()) {
      exhausted.insert(best);
      continue;
    }
    StartBatchLocked(best, std::move(indices));
  }
}

void JobRunner::StartBatchLocked(Active* job, std::vector<size_t> indices) {
  const std::string id = job->job.id;
  const uint64_t batch = ++dispatch_seq_;
  // The first starts at once; the others are held until the batch gets to
  // them, or a free worker takes them over.
  for (size_t k = 1; k < indices.size(); ++k) job->held[indices[k]] = batch;
  ++job->busy;
  ++in_flight_;
  job->last_dispatch = batch;
  SubmitLocked([this, id, batch, indices = std::move(indices)] {
    RunTasks(id, batch, indices);
  });
}

bool JobRunner::OtherJobWaitsLocked(const Active& job) const {
  for (const auto& [id, ptr] : jobs_) {
    const Active* other = ptr.get();
    if (other == &job || other->phase != Phase::kRunning || !other->prepared ||
        !other->graph || other->graph->ready() == 0) {
      continue;
    }
    const int limit = other->job.request.max_parallel;
    if (limit > 0 && other->running_tasks >= limit) continue;
    if (other->job.request.priority >= job.job.request.priority) return true;
  }
  return false;
}

size_t JobRunner::BatchSizeLocked(const Active& job) const {
  // One partition at a time until the job's partitions are known to be
  // short; then as many as take about kBatchTime, at most kMaxBatch, and
  // never more than an equal share of the ready ones per worker (a batch
  // must not leave another worker idle).
  if (job.stage_seconds < 0) return 1;
  const double time = absl::ToDoubleSeconds(kBatchTime);
  const double fit = job.stage_seconds > 0 ? time / job.stage_seconds
                                           : static_cast<double>(kMaxBatch);
  const size_t share =
      job.graph->ready() / static_cast<size_t>(std::max(1, options_.workers));
  return std::max<size_t>(
      1, std::min({static_cast<size_t>(fit), kMaxBatch, share}));
}

void JobRunner::NoteStageTimeLocked(Active* job, absl::Duration took) {
  const double seconds = absl::ToDoubleSeconds(took);
  // An average that follows the job's recent partitions (one in eight).
  job->stage_seconds =
      job->stage_seconds < 0
          ? seconds
          : job->stage_seconds + (seconds - job->stage_seconds) / 8;
}

bool JobRunner::TakeSettleLocked(Active* job) {
  if (job->busy > 0) return false;
  if (job->phase != Phase::kCancelling && job->phase != Phase::kFailing) {
    return false;
  }
  // A cancel settles only once CANCELLED is recorded (Cancel settles then
  // itself if nothing runs): a cancel that could not be recorded is undone.
  if (job->phase == Phase::kCancelling && job->state != JobState::kCancelled) {
    return false;
  }
  job->settling_from = job->phase;
  job->phase = Phase::kSettling;
  ++job->busy;  // the settle itself
  return true;
}

// ---------------------------------------------------------------------------
// Steps

void JobRunner::Supersede(Active* held, const std::string& by) {
  const std::string id = held->job.id;
  absl::Status s = Move(
      held, JobState::kCancelled,
      absl::StrCat("superseded by ", by, "; nothing of this job was published"),
      Phase::kSettling);
  if (!s.ok()) {
    // Not recorded (stopping): it stays held; the next start sees it again.
    absl::MutexLock lock(&mu_);
    held->phase = Phase::kHeld;
    ReleaseLocked(held);
    return;
  }
  EndCancelled(held);
}

std::vector<JobRunner::Active*> JobRunner::ReserveHeldOverlapsLocked(
    const std::string& id) {
  std::vector<Active*> reserved;
  for (const Admission::Overlap& o : admission_.HeldOverlaps(id)) {
    Active* held = FindLocked(o.job_id);
    if (held == nullptr || held->phase != Phase::kHeld) continue;
    held->phase = Phase::kSettling;  // reserved for the supersede
    ++held->busy;
    reserved.push_back(held);
  }
  return reserved;
}

void JobRunner::UnreserveHeldLocked(const std::vector<Active*>& reserved) {
  for (Active* held : reserved) {
    held->phase = Phase::kHeld;
    ReleaseLocked(held);
  }
}

void JobRunner::EndCancelled(Active* job) {
  // Tasks first, staging last: a crash in between leaves staging that the
  // next start sweeps.
  const std::string id = job->job.id;
  Persist(Storage::kStateStore, absl::StrCat("cancelling the tasks of ", id),
          [&] {
            return store_
                ->UpdateTasksInState(id,
                                     {TaskState::kPending, TaskState::kRunning,
                                      TaskState::kStaged, TaskState::kFailed},
                                     TaskState::kCancelled, clock_->Now())
                .status();
          })
      .IgnoreError();
  engine_->DropStaging(id).IgnoreError();
  double estimate;
  {
    absl::MutexLock lock(&mu_);
    estimate = job->job.plan.cost.backfill;
  }
  ReportFinished(id, JobState::kCancelled, estimate);
  // A transition still in flight on the job (the one that recorded the
  // cancel, when a step in flight settled it) ends before it is forgotten.
  { absl::MutexLock transition(&job->transition_mu); }
  absl::MutexLock lock(&mu_);
  EndLocked(job, Phase::kDone);
  ReleaseLocked(job);
  PumpLocked();
}

void JobRunner::Prepare(const std::string& id) {
  Active* job;
  std::vector<Active*> superseded;
  {
    absl::MutexLock lock(&mu_);
    job = FindLocked(id);
    if (job == nullptr) return;
    // A job that starts supersedes the held jobs it overlaps.
    superseded = ReserveHeldOverlapsLocked(id);
  }
  for (Active* held : superseded) {
    Supersede(held, absl::StrCat(
                        id, ", which recomputes some of the same partitions"));
  }

  absl::Status s = Load(job);
  if (s.ok()) {
    JobLayout layout;
    std::vector<PartitionTask> tasks;
    {
      absl::MutexLock lock(&mu_);
      layout = job->layout;
      tasks = job->tasks;
    }
    s = PrepareStaging(layout, tasks);
  }
  bool queued;
  int64_t total = 0, staged = 0;
  {
    absl::MutexLock lock(&mu_);
    queued = job->state == JobState::kQueued;
    if (job->graph) {
      total = static_cast<int64_t>(job->graph->size());
      staged = total - static_cast<int64_t>(job->graph->remaining());
    }
  }
  if (s.ok() && queued) {
    s = Move(job, JobState::kRunning,
             absl::StrCat("recomputing ", total - staged, " of ", total,
                          " partitions in staging"),
             Phase::kPreparing);
    if (s.code() == absl::StatusCode::kAborted) s = absl::OkStatus();
  }
  if (!s.ok() && !Stopping()) {
    FailJob(job, absl::StrCat("preparing staging failed, nothing was "
                              "published: ",
                              s.message()));
  }
  bool settle;
  {
    absl::MutexLock lock(&mu_);
    job->prepared = s.ok();
    job->preparing = false;
    if (job->phase == Phase::kPreparing && s.ok() &&
        job->state == JobState::kRunning) {
      job->phase = Phase::kRunning;
      job->graph->Requeue();
      StartFinishingIfDoneLocked(job);
    } else if (job->phase == Phase::kPreparing) {
      // Stopping (recovery prepares again), or the move to RUNNING was
      // aborted by a decision that was undone since: prepare again.
      job->phase = Phase::kWaiting;
    }
    settle = ReleaseAndTakeSettleLocked(job);
    NotifyLocked(id);
    PumpLocked();
  }
  if (settle) Settle(job);
}

void JobRunner::FailJob(Active* job, const std::string& failure) {
  {
    absl::MutexLock lock(&mu_);
    if (job->phase != Phase::kRunning && job->phase != Phase::kPreparing &&
        job->phase != Phase::kPaused) {
      return;
    }
    job->phase = Phase::kFailing;
    job->failure = failure;
    if (job->graph) job->graph->ClearReady();
  }
  // Recorded at once, so that the job never looks runnable while its
  // in-flight partitions drain; Settle records it if this could not.
  Move(job, JobState::kFailed, failure, Phase::kFailing).IgnoreError();
}

void JobRunner::RunTasks(const std::string& id, uint64_t batch,
                         const std::vector<size_t>& indices) {
  // One partition of the batch, from its dispatch to its end.
  struct Item {
    size_t index = 0;
    PartitionTask task;
    const DatasetSpec* spec = nullptr;  // null: the job stopped running
    // Early cutoff: whether the task reads only unchanged or skipped
    // tasks of the job, and what else MaySkip needs.
    bool may_skip = false;
    std::string version;
    std::vector<InputFingerprint> now_inputs;
    bool ran = false;  // RecomputePartition ran: `result` holds the task
    bool done = false, failed = false, interrupted = false;
    // The batch started it (the first always), or another took it over
    // before it did (Active::held): a taken one is no longer this batch's.
    bool claimed = false, taken = false;
    TaskGraph::Outcome outcome = TaskGraph::Outcome::kChanged;
    absl::Status status;
    RecomputeResult result;
  };
  Active* job;
  std::string requested;
  std::vector<Item> items(indices.size());
  if (!items.empty()) items.front().claimed = true;
  // Whether the batch still holds `it` (and now starts it): false when
  // another batch took it over. Under mu_.
  auto claim = [&](Item& it) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (it.claimed || it.taken) return it.claimed;
    auto h = job->held.find(it.index);
    if (h == job->held.end() || h->second != batch) {
      it.taken = true;
      return false;
    }
    job->held.erase(h);
    it.claimed = true;
    return true;
  };
  {
    absl::MutexLock lock(&mu_);
    job = FindLocked(id);
    requested = job->job.request.dataset;
    for (size_t k = 0; k < indices.size(); ++k) {
      Item& it = items[k];
      it.index = indices[k];
      if (job->phase != Phase::kRunning) continue;
      it.task = job->tasks[it.index];
      it.spec = job->spec_of[it.index];
      it.may_skip = it.spec != nullptr && it.task.dataset != requested &&
                    job->graph->ReadsOnlyUnchanged(it.index);
      if (it.may_skip) {
        for (const DatasetPlan& dp : job->job.plan.datasets) {
          if (dp.dataset == it.task.dataset) it.version = dp.transform_version;
        }
        for (size_t u : job->graph->IdentityInputs(it.index)) {
          const PartitionTask& in = job->tasks[u];
          it.now_inputs.push_back({in.dataset, in.partition,
                                   in.output_fingerprint, in.rows_written});
        }
      }
    }
  }
  // The newest lineage of each partition of the batch, read at once. It
  // holds to the batch's end: a partition's lineage changes only by a
  // publish or a rollback of a job that holds it, and this job does (see
  // Admission). When that read fails, each partition reads its own.
  std::optional<std::vector<std::optional<LineageRecord>>> newest;
  if (items.size() > 1 && items.front().spec != nullptr) {
    std::vector<std::pair<std::string, std::string>> keys;
    keys.reserve(items.size());
    for (const Item& it : items) {
      keys.emplace_back(it.task.dataset, it.task.partition);
    }
    absl::StatusOr<std::vector<std::optional<LineageRecord>>> read =
        store_->NewestLineages(keys);
    if (read.ok() && read->size() == items.size()) newest = *std::move(read);
  }
  auto latest_of =
      [&](size_t k) -> absl::StatusOr<std::optional<LineageRecord>> {
    if (newest) return (*newest)[k];
    return LatestLineage(items[k].task.dataset, items[k].task.partition);
  };
  for (size_t k = 0; k < items.size(); ++k) {
    Item& it = items[k];
    if (!it.may_skip) continue;
    {
      absl::MutexLock lock(&mu_);
      if (!claim(it)) continue;
    }
    // Skipped, never run, when its own partition is as the job would make
    // it (early_cutoff.h). Anything that fails here runs it instead.
    const PartitionTask& task = it.task;
    absl::StatusOr<std::optional<LineageRecord>> latest = latest_of(k);
    if (latest.ok() && latest->has_value() &&
        MaySkip(task.dataset, requested, it.version, &**latest,
                it.now_inputs)) {
      PartitionTask skipped = task;
      skipped.state = TaskState::kSkipped;
      skipped.rows_written = 0;
      // What the warehouse keeps holding, as its lineage recorded it.
      skipped.output_fingerprint = (*latest)->output_fingerprint;
      skipped.inputs.clear();
      skipped.last_error.clear();
      skipped.duration_seconds = 0;
      skipped.update_time = clock_->Now();
      absl::Status s =
          Persist(Storage::kStateStore,
                  absl::StrCat("recording that ", task.dataset, "/",
                               task.partition, " of ", id, " is skipped"),
                  [&] { return store_->UpdateTask(skipped); });
      if (s.ok()) s = ReleaseCutOff(id, *it.spec, task.partition);
      if (s.ok()) {
        it.task = std::move(skipped);
        it.done = true;
        it.outcome = TaskGraph::Outcome::kSkipped;
        if (observer_ != nullptr) {
          observer_->OnPartitionCheckpointed(it.task.dataset, it.task.state, 0);
        }
      } else if (Stopping()) {
        // Interrupted: a restart decides again (or releases what the
        // store recorded skipped).
        it.interrupted = true;
      }
    }
  }

  // Each partition in turn; its start and its checkpoint go to the task
  // writer (task_writer.h), which commits them with whatever else is queued
  // while this worker stages the next partitions. The batch then waits once
  // for its checkpoints: a partition is done only once its checkpoint is
  // committed.
  auto end_of = [&](Item& it) {
    // After its checkpoint was written (it.status) or failed to be.
    RecomputeResult& result = it.result;
    absl::Status s = it.status;
    if (it.ran) {
      // Staged (or its staging failed): the result holds the task.
      if (s.ok() && it.outcome == TaskGraph::Outcome::kUnchanged) {
        s = ReleaseCutOff(id, *it.spec, it.task.partition);
      }
      if (!s.ok() && result.task.state == TaskState::kUnchanged) {
        // Not let go of after all: what follows records it again.
        result.task.state = TaskState::kStaged;
        it.outcome = TaskGraph::Outcome::kChanged;
      }
      it.task = result.task;
    }
    PartitionTask& task = it.task;
    if (s.ok()) {
      it.done = true;
      if (observer_ != nullptr) {
        observer_->OnPartitionCheckpointed(
            task.dataset, task.state,
            task.state == TaskState::kStaged ? task.rows_written : 0);
      }
    } else if (Stopping()) {
      // Interrupted by a shutdown: not an attempt; it runs after a restart.
      task.state = TaskState::kPending;
      --task.attempts;
      task.last_error = "interrupted by shutdown";
      store_->UpdateTask(task).IgnoreError();
    } else if (Transient(s)) {
      // The warehouse's storage failed (a full disk, an I/O error): not the
      // partition's fault; wait and try again without spending an attempt.
      storage_alarm_.Failed(Storage::kWarehouse,
                            absl::StrCat("staging ", task.dataset, "/",
                                         task.partition, " of ", id),
                            s);
      task.state = TaskState::kPending;
      --task.attempts;
      task.last_error = std::string(s.message());
      store_->UpdateTask(task).IgnoreError();
      clock_->SleepFor(options_.max_backoff / 6);
    } else {
      task.last_error = std::string(s.message());
      const bool again = Retryable(s) && task.attempts < options_.max_attempts;
      task.state = again ? TaskState::kPending : TaskState::kFailed;
      // Best effort: a failure to record reruns the partition at recovery.
      store_->UpdateTask(task).IgnoreError();
      if (again) {
        if (!Stopping())
          clock_->SleepFor(options_.retry_backoff * task.attempts);
      } else {
        it.failed = true;
        FailJob(job,
                absl::StrCat("partition ", task.partition, " of ", task.dataset,
                             " failed after ",
                             Plural(task.attempts, "attempt", "attempts"),
                             ", nothing was published: ", task.last_error));
      }
    }
  };
  // The writes queued and not yet written. Shared with the writer's
  // callbacks, so that it outlives the last one's unlock.
  struct Unwritten {
    absl::Mutex mu;
    int n ABSL_GUARDED_BY(mu) = 0;
  };
  auto unwritten = std::make_shared<Unwritten>();
  auto queue = [&](const PartitionTask& row, Item* checkpointed) {
    {
      absl::MutexLock lock(&unwritten->mu);
      ++unwritten->n;
    }
    task_writer_->Write({row},
                        [unwritten, checkpointed](const absl::Status& s) {
                          absl::MutexLock lock(&unwritten->mu);
                          if (checkpointed != nullptr) checkpointed->status = s;
                          --unwritten->n;
                        });
  };
  bool first = true;
  for (size_t k = 0; k < items.size(); ++k) {
    Item& it = items[k];
    // Partitions not yet started are handed back when the runner stops, the
    // job no longer runs (paused, failing, cancelled) or another job waits
    // for a worker: batches never delay another job's turn by more than one
    // partition. Those another worker took over are left to it.
    bool go_on = true;
    if (k > 0) {
      absl::MutexLock lock(&mu_);
      if (!claim(it)) continue;
      go_on = job->phase == Phase::kRunning && !OtherJobWaitsLocked(*job);
    }
    if (it.spec == nullptr || it.done || it.interrupted) continue;
    if (!first && (Stopping() || !go_on)) {
      it.spec = nullptr;
      continue;
    }
    first = false;
    it.task.state = TaskState::kRunning;
    ++it.task.attempts;
    it.task.update_time = clock_->Now();
    // The start is not waited for before staging: a checkpoint queued after
    // it supersedes it, and a crash before it is written only leaves the
    // attempt uncounted. (The batch waits for it at its end, so that what
    // it writes about a failed partition comes after.)
    queue(it.task, nullptr);
    // What the task reads, by the upstream edges of the job's catalog.
    const Planner planner(job->catalog.get(), engine_);
    it.result =
        RecomputePartition(engine_, planner, *clock_, id, *it.spec, it.task);
    it.ran = true;
    RecomputeResult& result = it.result;
    if (observer_ != nullptr) {
      observer_->OnPartitionAttempt(result.status.ok(), result.took);
      if (result.status.ok()) {
        observer_->OnPartitionStageTimings(it.spec->name, result.timings);
      }
    }
    absl::Status s = result.status;
    // A staged partition is a warehouse write that worked.
    if (s.ok()) storage_alarm_.Succeeded(Storage::kWarehouse);
    if (s.ok()) {
      CrashPoint("stage.before_checkpoint");
      // Early cutoff: rows identical to the published version are not
      // republished (the checkpoint records UNCHANGED, then the engine
      // lets go of the partition).
      absl::StatusOr<std::optional<LineageRecord>> latest = latest_of(k);
      if (!latest.ok()) {
        s = latest.status();
      } else if (SameAsPublished(result.task.output_fingerprint,
                                 latest->has_value() ? &**latest : nullptr)) {
        result.task.state = TaskState::kUnchanged;
        it.outcome = TaskGraph::Outcome::kUnchanged;
      }
    }
    if (s.ok()) {
      queue(result.task, &it);
    } else {
      it.status = s;
    }
  }
  {
    absl::MutexLock lock(&unwritten->mu);
    // Waited for: the writer commits them without gathering more.
    if (unwritten->n > 0) task_writer_->Hurry();
    unwritten->mu.Await(absl::Condition(
        +[](Unwritten* u)
             ABSL_EXCLUSIVE_LOCKS_REQUIRED(u->mu) { return u->n == 0; },
        unwritten.get()));
  }
  for (Item& it : items) {
    if (it.ran) end_of(it);
  }

  bool settle;
  {
    absl::MutexLock lock(&mu_);
    TaskGraph& graph = *job->graph;
    for (Item& it : items) {
      if (it.taken) continue;  // the batch that took it over ends it
      if (it.spec != nullptr) {
        job->tasks[it.index] = it.task;
      } else {
        job->tasks[it.index].state = TaskState::kPending;  // never ran
      }
      if (it.done) {
        graph.Done(it.index, it.outcome);
        if (it.ran) NoteStageTimeLocked(job, it.result.took);
      } else if (it.failed) {
        graph.Fail(it.index);
      } else {
        graph.Return(it.index);
      }
      --job->running_tasks;
      --dataset_running_[job->tasks[it.index].dataset];
    }
    if (job->phase != Phase::kRunning) graph.ClearReady();
    --in_flight_;
    StartFinishingIfDoneLocked(job);
    settle = ReleaseAndTakeSettleLocked(job);
    NotifyLocked(id);
    PumpLocked();
  }
  if (settle) Settle(job);
}

void JobRunner::Settle(Active* job) {
  const std::string id = job->job.id;
  Phase from;
  double estimate;
  {
    absl::MutexLock lock(&mu_);
    from = job->settling_from;
    estimate = job->job.plan.cost.backfill;
  }
  const bool cancelled = from == Phase::kCancelling;
  if (!cancelled) {
    // FailJob could not record the failure: try until it is recorded (a
    // job never leaves memory, nor releases its partitions, before).
    absl::Status s = Move(job, JobState::kFailed, job->failure, std::nullopt);
    if (!s.ok()) {
      absl::MutexLock lock(&mu_);
      job->phase = Phase::kFailing;  // recovery records it after a restart
      ReleaseLocked(job);
      return;
    }
    // Tasks interrupted by the failure run again on a retry; staging and
    // pins are kept for it.
    Persist(Storage::kStateStore, absl::StrCat("settling the tasks of ", id),
            [&] {
              return store_
                  ->UpdateTasksInState(id, {TaskState::kRunning},
                                       TaskState::kPending, clock_->Now())
                  .status();
            })
        .IgnoreError();
    ReportFinished(id, JobState::kFailed, estimate);
    absl::MutexLock lock(&mu_);
    EndLocked(job, Phase::kHeld);
    ReleaseLocked(job);
    PumpLocked();
    return;
  }
  EndCancelled(job);
}

absl::Status JobRunner::EnsurePrepared(Active* job) {
  JobLayout layout;
  std::vector<PartitionTask> tasks;
  {
    absl::MutexLock lock(&mu_);
    if (job->prepared) return absl::OkStatus();
    layout = job->layout;
    tasks = job->tasks;
  }
  RETURN_IF_ERROR(PrepareStaging(layout, tasks));
  absl::MutexLock lock(&mu_);
  job->prepared = true;
  return absl::OkStatus();
}

absl::Status JobRunner::PrepareStaging(
    const JobLayout& layout, const std::vector<PartitionTask>& tasks) {
  const JobLayout kept = WithoutCutOff(layout, tasks);
  RETURN_IF_ERROR(
      Persist(Storage::kWarehouse,
              absl::StrCat("preparing the staging of ", layout.job_id),
              [&] { return engine_->PrepareJob(kept); }));
  // Not a structured binding: C++17 lets no lambda capture one.
  for (const auto& cut : CutOffPartitions(layout, tasks)) {
    const auto& dataset = cut.first;
    const auto& partitions = cut.second;
    RETURN_IF_ERROR(Persist(
        Storage::kWarehouse,
        absl::StrCat("releasing the unchanged and skipped partitions of ",
                     dataset->name, " from ", layout.job_id),
        [&] {
          return engine_->ReleasePartitions(layout.job_id, *dataset,
                                            partitions);
        }));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<LineageRecord>> JobRunner::LatestLineage(
    const std::string& dataset, const std::string& partition) {
  std::optional<LineageRecord> latest;
  RETURN_IF_ERROR(
      Persist(Storage::kStateStore,
              absl::StrCat("reading the lineage of ", dataset, "/", partition),
              [&]() -> absl::Status {
                ASSIGN_OR_RETURN(std::vector<LineageRecord> lineage,
                                 store_->GetLineage(dataset, partition));
                latest.reset();
                if (!lineage.empty()) latest = std::move(lineage.front());
                return absl::OkStatus();
              }));
  return latest;
}

absl::Status JobRunner::ReleaseCutOff(const std::string& id,
                                      const DatasetSpec& dataset,
                                      const std::string& partition) {
  CrashPoint("cutoff.before_release");
  return Persist(
      Storage::kWarehouse,
      absl::StrCat("releasing ", dataset.name, "/", partition, " from ", id),
      [&] { return engine_->ReleasePartitions(id, dataset, {partition}); });
}

void JobRunner::ReportCheckFailures(const std::vector<CheckResult>& results) {
  if (observer_ == nullptr) return;
  // Once per failing check and dataset: a summary and its failing
  // partitions are one failure.
  std::set<std::tuple<std::string, std::string, std::string>> seen;
  for (const CheckResult& r : results) {
    if (r.passed) continue;
    if (seen.emplace(r.check, r.kind, r.dataset).second) {
      observer_->OnCheckFailed(r.dataset, r.kind, r.severity);
    }
  }
}

absl::StatusOr<ValidationOutcome> JobRunner::ValidateTimed(
    const std::string& id, const JobLayout& layout,
    const std::vector<PartitionTask>& tasks, const ValidateOptions& options) {
  const absl::Time start = clock_->Now();
  absl::StatusOr<ValidationOutcome> outcome =
      ValidateStaging(engine_, layout, tasks, options);
  if (observer_ != nullptr) {
    // A clock set back meanwhile makes it 0, never negative.
    observer_->OnJobValidationTime(
        id, std::max(clock_->Now() - start, absl::ZeroDuration()));
  }
  return outcome;
}

absl::Status JobRunner::ValidateJob(Active* job, bool* done) {
  *done = false;
  JobLayout layout;
  std::vector<PartitionTask> tasks;
  {
    absl::MutexLock lock(&mu_);
    tasks = job->tasks;
    // Validation, diff and approval cover what the job would publish: the
    // partitions the early cutoff let go of are not the job's any more.
    layout = WithoutCutOff(job->layout, tasks);
  }
  RETURN_IF_ERROR(EnsurePrepared(job));
  ValidateOptions validate_options;
  validate_options.catalog = job->catalog.get();
  ASSIGN_OR_RETURN(ValidationOutcome outcome,
                   ValidateTimed(job->job.id, layout, tasks, validate_options));
  CrashPoint("validate");
  int rounds;
  {
    absl::MutexLock lock(&mu_);
    rounds = job->restage_rounds;
  }
  if (!outcome.lost.empty() && outcome.failures.empty() &&
      rounds < options_.max_restage_rounds) {
    // Staged rows vanished after their checkpoints (the warehouse lost
    // writes): recompute those partitions and what read them.
    std::vector<size_t> reopen;
    {
      absl::MutexLock lock(&mu_);
      ++job->restage_rounds;
      TaskGraph copy = *job->graph;
      copy.Reopen(outcome.lost);
      for (size_t i = 0; i < copy.size(); ++i) {
        if (copy.task(i).state == TaskGraph::Node::kPending &&
            job->graph->task(i).state == TaskGraph::Node::kDone) {
          reopen.push_back(i);
        }
      }
    }
    bool released = false;
    for (size_t i : reopen) {
      PartitionTask t = tasks[i];
      released = released || IsCutOff(t.state);
      t.state = TaskState::kPending;
      t.attempts = 0;
      t.last_error = "its staged rows were lost after the checkpoint";
      RETURN_IF_ERROR(Persist(Storage::kStateStore, "reopening a partition",
                              [&] { return store_->UpdateTask(t); }));
      tasks[i] = t;
    }
    if (released) {
      // Partitions the early cutoff had let go of run again: they become
      // the job's again in the engine.
      JobLayout full;
      {
        absl::MutexLock lock(&mu_);
        full = job->layout;
      }
      RETURN_IF_ERROR(PrepareStaging(full, tasks));
    }
    RETURN_IF_ERROR(
        Move(job, JobState::kRunning,
             absl::StrCat(Plural(static_cast<int64_t>(outcome.lost.size()),
                                 "partition", "partitions"),
                          " lost staged rows after their checkpoints (",
                          outcome.lost_summary, "); recomputing ",
                          Plural(static_cast<int64_t>(reopen.size()),
                                 "partition", "partitions")),
             Phase::kFinishing));
    absl::MutexLock lock(&mu_);
    for (size_t i : reopen) job->tasks[i] = tasks[i];
    job->graph->Reopen(outcome.lost);
    job->phase = Phase::kRunning;
    *done = true;
    return absl::OkStatus();
  }
  // Only the counts of the early cutoff are read from the tasks from here
  // on: the copy goes before the diff, which is as large.
  const CutoffCounts cut = CountCutOff(tasks);
  std::vector<PartitionTask>().swap(tasks);
  // The results replace those of an earlier validation (idempotent), and
  // are recorded before the state that follows from them.
  RETURN_IF_ERROR(Persist(Storage::kStateStore, "recording check results", [&] {
    return store_->ReplaceCheckResults(job->job.id, outcome.results);
  }));
  // Failed checks are counted once the state that follows from them is
  // recorded: a validation interrupted before that runs again after a
  // restart, and is counted then.
  // The diff before publish, whether the checks passed or not: an operator
  // reads it before approving (or overriding a failure).
  {
    // Part of the validation's time (OnJobValidationTime) as much as the
    // checks are.
    const absl::Time start = clock_->Now();
    absl::Status recorded = RecordDiff(job, layout);
    if (observer_ != nullptr) {
      observer_->OnJobValidationTime(
          job->job.id, std::max(clock_->Now() - start, absl::ZeroDuration()));
    }
    RETURN_IF_ERROR(recorded);
  }
  if (!outcome.failures.empty() || !outcome.lost.empty()) {
    std::vector<std::string> failures = outcome.failures;
    if (!outcome.lost.empty()) {
      failures.push_back(absl::StrCat(
          "staging does not hold what the partition checkpoints recorded (",
          outcome.lost_summary, ")",
          rounds > 0 ? absl::StrCat(" even after recomputing them ",
                                    Plural(rounds, "time", "times"))
                     : std::string(),
          "; staged rows were lost or changed after their checkpoints"));
    }
    std::string message =
        absl::StrCat("validation failed, nothing was published: ",
                     absl::StrJoin(failures, "; "));
    // What the operator can do next, when the checks judged intact
    // staging. Staging that keeps losing rows is the warehouse's fault: a
    // new backfill or an override would meet the same loss, so the report
    // then says only what happened.
    if (outcome.lost.empty()) {
      const std::string& id = job->job.id;
      absl::StrAppend(&message, ". Read its diff (`DiffBackfill` ", id,
                      "); fix the data or the transform and submit a new "
                      "backfill, or publish it despite the failed checks "
                      "with `ApproveBackfill` ",
                      id, ", `override_validation` and a `reason`");
    }
    // Read before the move: once held, an operator may cancel the job and
    // `job` may go away.
    const std::string id = job->job.id;
    double estimate;
    {
      absl::MutexLock lock(&mu_);
      estimate = job->job.plan.cost.backfill;
    }
    RETURN_IF_ERROR(Move(job, JobState::kValidationFailed, message,
                         Phase::kFinishing, Phase::kHeld));
    ReportCheckFailures(outcome.results);
    ReportFinished(id, JobState::kValidationFailed, estimate);
    *done = true;
    return absl::OkStatus();
  }
  if (!outcome.holds.empty()) {
    return HoldJob(job, outcome, done);
  }
  {
    absl::MutexLock lock(&mu_);
    job->validated = true;
  }
  // Approval policy: a dataset with `require_approval: true` holds the job
  // in AWAITING_APPROVAL, with its diff ready to read.
  if (std::vector<std::string> needing = DatasetsRequiringApproval(layout);
      !needing.empty()) {
    RETURN_IF_ERROR(Move(job, JobState::kAwaitingApproval,
                         AwaitingApprovalMessage(job->job.id, needing),
                         Phase::kFinishing, Phase::kHeld));
    ReportCheckFailures(outcome.results);
    *done = true;
    return absl::OkStatus();
  }
  int64_t total = 0;
  for (const JobLayout::Item& item : layout.items) {
    total += static_cast<int64_t>(item.partitions.size());
  }
  const size_t datasets = layout.items.size();
  absl::Status moved = Move(
      job, JobState::kPublishing,
      absl::StrCat(
          datasets == 0
              ? NothingChangedMessage(cut)
              : absl::StrCat("publishing ",
                             Plural(total, "partition", "partitions"), " of ",
                             datasets, " dataset(s) in one transaction",
                             CutoffNote(cut)),
          outcome.warnings.empty()
              ? std::string()
              : absl::StrCat("; warnings: ",
                             absl::StrJoin(outcome.warnings, "; "))),
      Phase::kFinishing);
  if (moved.ok()) ReportCheckFailures(outcome.results);  // warnings
  return moved;
}

absl::Status JobRunner::HoldJob(Active* job, const ValidationOutcome& outcome,
                                bool* done) {
  // Nothing blocks, but `hold` checks failed: the job waits for an operator
  // with its staging kept. It holds no partitions meanwhile: a newer
  // overlapping job supersedes it (job_state_machine.h).
  std::string message = absl::StrCat(
      "validation held the job for approval, nothing was published: ",
      absl::StrJoin(outcome.holds, "; "));
  if (!outcome.warnings.empty()) {
    absl::StrAppend(&message,
                    "; warnings: ", absl::StrJoin(outcome.warnings, "; "));
  }
  const std::string& id = job->job.id;
  absl::StrAppend(&message, ". Read its diff (`DiffBackfill` ", id,
                  "), then publish it with `ApproveBackfill` ", id,
                  " and a `reason`, or drop it with `CancelBackfill` ", id,
                  "; a newer backfill of the same partitions supersedes it");
  RETURN_IF_ERROR(Move(job, JobState::kAwaitingApproval, message,
                       Phase::kFinishing, Phase::kHeld));
  ReportCheckFailures(outcome.results);
  *done = true;
  return absl::OkStatus();
}

absl::Status JobRunner::PublishJob(Active* job) {
  const std::string id = job->job.id;
  // Reads are retried: a transient error must not fail a job that may have
  // committed already.
  bool published = false;
  RETURN_IF_ERROR(Persist(Storage::kWarehouse, "reading publication markers",
                          [&]() -> absl::Status {
                            ASSIGN_OR_RETURN(published,
                                             engine_->IsPublished(id));
                            return absl::OkStatus();
                          }));
  bool complete, validated, overridden;
  JobLayout layout;
  {
    absl::MutexLock lock(&mu_);
    complete = job->layout_complete;
    validated = job->validated;
    // Only what changed is published (early_cutoff.h).
    layout = WithoutCutOff(job->layout, job->tasks);
    overridden =
        job->job.approval.has_value() && job->job.approval->override_validation;
  }
  if (!published) {
    if (!complete) {
      return absl::FailedPreconditionError(
          "a dataset of the job is no longer in the loaded pipelines");
    }
    if (!validated) {
      // Resumed into PUBLISHING: check the staging again first.
      RETURN_IF_ERROR(EnsurePrepared(job));
      std::vector<PartitionTask> tasks;
      {
        absl::MutexLock lock(&mu_);
        tasks = job->tasks;
      }
      // Only that staging is intact: the other checks were decided on
      // before (an approval may have accepted them).
      ValidateOptions integrity;
      integrity.catalog = job->catalog.get();
      integrity.integrity_only = true;
      ASSIGN_OR_RETURN(ValidationOutcome outcome,
                       ValidateTimed(job->job.id, layout, tasks, integrity));
      if (overridden) {
        // An operator approved publishing despite these failures; only
        // staging that changed since stops the job.
        outcome.failures.clear();
      }
      if (!outcome.failures.empty() || !outcome.lost.empty()) {
        std::vector<std::string> failures = outcome.failures;
        if (!outcome.lost.empty()) {
          failures.push_back(absl::StrCat("staged rows were lost (",
                                          outcome.lost_summary, ")"));
        }
        return absl::DataLossError(
            absl::StrCat("staging changed before publishing: ",
                         absl::StrJoin(failures, "; ")));
      }
    }
    // A job whose partitions all came out unchanged (or were skipped)
    // leaves the warehouse as it is: no rows, marker or rollback copy.
    if (!layout.items.empty()) {
      RETURN_IF_ERROR(Persist(Storage::kWarehouse,
                              absl::StrCat("publishing job ", id),
                              [&] { return engine_->Publish(layout); }));
    }
  }
  CrashPoint("publish.before_record");

  // The warehouse has committed: record it, retrying until it is recorded
  // (or the runner stops; recovery then finds the publication marker).
  // What the lineage records name: the job's request and approval and each
  // dataset's transform version (not its plan's partitions, which the
  // tasks repeat: a copy of them is megabytes for a large job).
  std::map<std::string, std::string> versions;
  Job copy;
  {
    absl::MutexLock lock(&mu_);
    copy.id = job->job.id;
    copy.request = job->job.request;
    copy.approval = job->job.approval;
    for (const DatasetPlan& dp : job->job.plan.datasets) {
      versions[dp.dataset] = dp.transform_version;
    }
  }
  absl::MutexLock transition(&job->transition_mu);
  JobState from;
  {
    absl::MutexLock lock(&mu_);
    from = job->state;
  }
  std::string message;
  std::vector<JobObserver::PublishedDataset> replaced;
  absl::Status s = Persist(
      Storage::kStateStore, absl::StrCat("recording the publication of ", id),
      [&]() -> absl::Status {
        // Lineage from the checkpoints (the store's copy is authoritative
        // after a restart). The tasks go into the lineage (LineageOf
        // empties them), which goes once recorded: a large job's tasks and
        // lineage are never held twice.
        ASSIGN_OR_RETURN(std::vector<PartitionTask> tasks,
                         store_->ListTasks(id));
        const CutoffCounts cut = CountCutOff(tasks);
        int64_t rows = 0;
        const absl::Time now = clock_->Now();
        std::vector<LineageRecord> lineage =
            LineageOf(copy, std::move(tasks), versions, now, &rows);
        message = lineage.empty() && (cut.unchanged > 0 || cut.skipped > 0)
                      ? NothingChangedMessage(cut)
                      : absl::StrCat(
                            "published ",
                            Plural(static_cast<int64_t>(lineage.size()),
                                   "partition", "partitions"),
                            " (", rows, " rows) atomically", CutoffNote(cut));
        RETURN_IF_ERROR(store_->RecordPublication(
            id, lineage, JobState::kConfirming, message, now));
        replaced = PublishedPerDataset(lineage);
        return absl::OkStatus();
      });
  if (!s.ok()) {
    // FAILED_PRECONDITION: the store holds the job in another state, which
    // retrying cannot change; leave it to recovery.
    return absl::CancelledError(s.message());
  }
  {
    absl::MutexLock lock(&mu_);
    job->state = JobState::kConfirming;
    job->job.message = message;
    NotifyLocked(id);
  }
  if (observer_ != nullptr) {
    observer_->OnJobTransition(id, from, JobState::kConfirming, message);
    if (from == JobState::kPublishing) ReportPublished(id, replaced);
  }
  return absl::OkStatus();
}

void JobRunner::ReportPublished(
    const std::string& id,
    const std::vector<JobObserver::PublishedDataset>& published) {
  // Costs per dataset as the store reads them (actual input rows of the
  // recomputed tasks); a failed read reports the publish without them.
  absl::StatusOr<Job> job = store_->GetJobProgress(id);
  std::vector<JobObserver::PublishedDataset> datasets;
  if (job.ok()) {
    for (const DatasetPlan& dp : job->plan.datasets) {
      JobObserver::PublishedDataset& d = DatasetEntry(&datasets, dp.dataset);
      d.estimated_cost = dp.cost.backfill;
      d.full_reload_cost = dp.cost.full_reload;
      d.actual_cost = dp.actual_cost;
    }
  }
  for (const JobObserver::PublishedDataset& p : published) {
    JobObserver::PublishedDataset& d = DatasetEntry(&datasets, p.dataset);
    d.partitions += p.partitions;
    d.rows += p.rows;
  }
  observer_->OnJobPublished(id, datasets);
}

void JobRunner::Finish(const std::string& id) {
  Active* job;
  {
    absl::MutexLock lock(&mu_);
    job = FindLocked(id);
    if (job == nullptr) return;
  }
  absl::Status s = Load(job);
  JobState state;
  auto current = [&] {
    absl::MutexLock lock(&mu_);
    return job->state;
  };
  state = current();
  if (s.ok() && (state == JobState::kQueued || state == JobState::kRunning)) {
    int64_t total;
    CutoffCounts cut;
    {
      absl::MutexLock lock(&mu_);
      cut = CountCutOff(job->tasks);
      total =
          static_cast<int64_t>(job->tasks.size()) - cut.unchanged - cut.skipped;
    }
    s = Move(
        job, JobState::kValidating,
        absl::StrCat("validating ",
                     Plural(total, "staged partition", "staged partitions"),
                     CutoffNote(cut)),
        Phase::kFinishing);
  }
  if (s.ok() && current() == JobState::kValidating) {
    bool done = false;
    s = ValidateJob(job, &done);
    if (s.ok() && done) {
      // Held (or VALIDATION_FAILED): an operator may have cancelled it
      // between the move and here, while this worker still pinned it; then
      // the cancel left the settling to whoever unpins it last.
      CrashPoint("hold.before_release");
      bool settle;
      {
        absl::MutexLock lock(&mu_);
        settle = ReleaseAndTakeSettleLocked(job);
        PumpLocked();
      }
      if (settle) Settle(job);
      return;
    }
  }
  if (s.ok() && current() == JobState::kPublishing) {
    s = PublishJob(job);
    // Committed but not recorded (stopping): recovery records it.
    if (s.code() == absl::StatusCode::kCancelled) {
      absl::MutexLock lock(&mu_);
      ReleaseLocked(job);
      return;
    }
  }
  if (s.ok() && current() == JobState::kConfirming) {
    CrashPoint("confirm");
    JobLayout layout;
    CutoffCounts cut;
    std::vector<std::string> unprobed;
    {
      absl::MutexLock lock(&mu_);
      layout = WithoutCutOff(job->layout, job->tasks);
      cut = CountCutOff(job->tasks);
      unprobed = UnprobedConsumers(job->layout, layout);
    }
    ConfirmContext context;
    context.engine = engine_;
    context.http = options_.http;
    context.commands = options_.commands;
    context.clock = clock_;
    context.observer = observer_;
    context.stopping = [this] { return Stopping(); };
    absl::StatusOr<ConfirmOutcome> outcome = ConfirmDownstream(layout, context);
    if (outcome.ok() && (cut.unchanged > 0 || cut.skipped > 0)) {
      // Early cutoff: say what was not republished, or that nothing was,
      // and which declared consumers were therefore not probed.
      if (layout.items.empty()) {
        outcome->message = NothingChangedMessage(cut);
      } else if (outcome->results.empty() && !unprobed.empty()) {
        outcome->message = "published; no consumer was probed";
        absl::StrAppend(&outcome->message, CutoffNote(cut));
      } else {
        absl::StrAppend(&outcome->message, CutoffNote(cut));
      }
      if (!layout.items.empty() && !unprobed.empty()) {
        absl::StrAppend(&outcome->message,
                        "; not probed, as nothing they read "
                        "was republished: ",
                        absl::StrJoin(unprobed, ", "));
      }
    }
    if (outcome.ok()) {
      // What each consumer was found doing, recorded before the state that
      // follows from it (the health gauge reads both).
      std::vector<ConsumerFinding> found;
      found.reserve(outcome->results.size());
      const absl::Time now = clock_->Now();
      for (const ConsumerResult& r : outcome->results) {
        // A warehouse that could not be read says nothing of the consumer.
        if (r.warehouse_error) continue;
        ConsumerFinding c;
        c.dataset = r.dataset;
        c.consumer = r.consumer;
        c.healthy = r.healthy;
        c.message = r.message;
        c.latency = r.latency;
        c.at = now;
        found.push_back(std::move(c));
      }
      absl::Status recorded = Persist(
          Storage::kStateStore, "recording consumer confirmations",
          [&] { return store_->ReplaceConsumerConfirmations(id, found); });
      if (!recorded.ok()) outcome = recorded;
    }
    if (!outcome.ok()) {
      s = outcome.status();
    } else {
      // Published: from here the job only goes forward. Leftover staging is
      // harmless and swept at the next start.
      engine_->DropStaging(id).IgnoreError();
      s = Move(job,
               outcome->healthy ? JobState::kSucceeded
                                : JobState::kDownstreamUnhealthy,
               outcome->message, Phase::kFinishing);
      if (s.ok()) {
        double estimate;
        JobState end;
        bool again;
        {
          absl::MutexLock lock(&mu_);
          estimate = job->job.plan.cost.backfill;
          end = job->state;
          again = job->reconfirming;
        }
        if (!again) {
          ReportFinished(id, end, estimate);
          // The publish added rollback copies: drop those that expired.
          EnforceRetention().IgnoreError();
        }
        absl::MutexLock lock(&mu_);
        EndLocked(job, Phase::kDone);
        ReleaseLocked(job);
        PumpLocked();
        return;
      }
    }
  }
  if (!s.ok() && Stopping()) {  // interrupted: recovery resumes it
    absl::MutexLock lock(&mu_);
    ReleaseLocked(job);
    return;
  }
  if (!s.ok()) {
    // Only reached before the warehouse committed: nothing was published.
    // The staging is kept: a retry validates and publishes it again.
    const JobState from = current();
    absl::Status moved =
        Move(job, JobState::kFailed,
             absl::StrCat("failed while ", JobStateName(from),
                          ", nothing was published: ", s.message()),
             Phase::kFinishing);
    double estimate;
    {
      absl::MutexLock lock(&mu_);
      estimate = job->job.plan.cost.backfill;
    }
    if (moved.ok()) ReportFinished(id, JobState::kFailed, estimate);
    absl::MutexLock lock(&mu_);
    if (moved.ok()) EndLocked(job, Phase::kHeld);
    ReleaseLocked(job);
    PumpLocked();
    return;
  }
  absl::MutexLock lock(&mu_);
  ReleaseLocked(job);
  PumpLocked();
}

// ---------------------------------------------------------------------------
// Decisions

void JobRunner::RestorePhaseLocked(Active* job, Phase before) {
  job->phase = before;
  if (before == Phase::kPreparing && !job->preparing) {
    // The preparation ended meanwhile and left the phase alone; it moved
    // the job to RUNNING unless the decision aborted that move.
    job->phase = job->prepared && job->state == JobState::kRunning
                     ? Phase::kRunning
                     : Phase::kWaiting;
  }
  if (job->phase == Phase::kRunning && job->graph) {
    job->graph->Requeue();
    // The last partition may have been staged meanwhile.
    StartFinishingIfDoneLocked(job);
  }
}

void JobRunner::StartFinishingIfDoneLocked(Active* job) {
  if (job->phase != Phase::kRunning || !job->graph || !job->graph->AllDone() ||
      job->running_tasks != 0) {
    return;
  }
  job->phase = Phase::kFinishing;
  ++job->busy;
  const std::string id = job->job.id;
  SubmitLocked([this, id] { Finish(id); });
}

void JobRunner::AwaitMoveInFlight(const std::string& id) {
  Active* job;
  {
    absl::MutexLock lock(&mu_);
    job = FindLocked(id);
    if (job == nullptr || job->phase != Phase::kFinishing) return;
    ++job->busy;  // pinned while waiting
  }
  { absl::MutexLock transition(&job->transition_mu); }
  bool settle;
  {
    absl::MutexLock lock(&mu_);
    settle = ReleaseAndTakeSettleLocked(job);
  }
  if (settle) Settle(job);
}

absl::StatusOr<Job> JobRunner::Cancel(const std::string& id,
                                      const std::string& reason,
                                      const std::string& actor) {
  AwaitMoveInFlight(id);
  Active* job = nullptr;
  Phase before = Phase::kWaiting;
  {
    absl::MutexLock lock(&mu_);
    job = FindLocked(id);
    if (job != nullptr) {
      before = job->phase;
      switch (job->phase) {
        case Phase::kWaiting:
        case Phase::kPreparing:
        case Phase::kRunning:
        case Phase::kPaused:
        case Phase::kHeld:
          job->phase = Phase::kCancelling;
          if (job->graph) job->graph->ClearReady();
          break;
        case Phase::kCancelling:
        case Phase::kSettling:
        case Phase::kDone:
          job = nullptr;  // already ending: answer with the job
          break;
        case Phase::kFinishing:
          return absl::FailedPreconditionError(absl::StrCat(
              "job ", id, " is ", JobStateName(job->state),
              ": every partition is staged and it is being validated or "
              "published; it can no longer be cancelled"));
        case Phase::kFailing:
          return absl::FailedPreconditionError(
              absl::StrCat("job ", id, " is failing (", job->failure,
                           "); cancel it once it is FAILED"));
      }
    }
  }
  if (job == nullptr) {
    ASSIGN_OR_RETURN(Job stored, store_->GetJob(id));
    if (stored.state == JobState::kCancelled || !IsTerminal(stored.state)) {
      return stored;
    }
    return absl::FailedPreconditionError(
        absl::StrCat("job ", id, " is already ", JobStateName(stored.state),
                     stored.state == JobState::kFailed ||
                             stored.state == JobState::kValidationFailed
                         ? " and kept no staging"
                         : "",
                     "; there is nothing to cancel"));
  }
  absl::Status moved = Move(
      job, JobState::kCancelled,
      absl::StrCat("cancelled", By(actor), reason.empty() ? "" : ": ", reason),
      Phase::kCancelling);
  bool settle = false;
  {
    absl::MutexLock lock(&mu_);
    // Found again: once CANCELLED is recorded, a step of the job that was in
    // flight may have ended meanwhile, settled the job and forgotten it.
    job = FindLocked(id);
    if (!moved.ok()) {
      // Not recorded: the job goes on as before.
      if (job != nullptr) RestorePhaseLocked(job, before);
      PumpLocked();
    } else {
      settle = job != nullptr && TakeSettleLocked(job);
    }
  }
  if (!moved.ok()) return moved;
  if (settle) Settle(job);
  return store_->GetJob(id);
}

absl::StatusOr<Job> JobRunner::Pause(const std::string& id,
                                     const std::string& reason,
                                     const std::string& actor) {
  Active* job = nullptr;
  Phase before;
  int running = 0;
  {
    absl::MutexLock lock(&mu_);
    job = FindLocked(id);
    if (job == nullptr) {
      ASSIGN_OR_RETURN(Job stored, store_->GetJob(id));
      return absl::FailedPreconditionError(
          absl::StrCat("job ", id, " is ", JobStateName(stored.state),
                       "; only queued or running jobs can be paused"));
    }
    before = job->phase;
    switch (job->phase) {
      case Phase::kWaiting:
      case Phase::kPreparing:
      case Phase::kRunning:
        job->phase = Phase::kPaused;
        if (job->graph) job->graph->ClearReady();
        running = job->running_tasks;
        break;
      case Phase::kPaused:
        job = nullptr;  // already paused: answer with the job
        break;
      default:
        return absl::FailedPreconditionError(absl::StrCat(
            "job ", id, " is ", JobStateName(job->state),
            job->phase == Phase::kFinishing
                ? ": every partition is staged and it is being validated or "
                  "published; it can no longer be paused"
                : "; only queued or running jobs can be paused"));
    }
  }
  if (job == nullptr) return store_->GetJob(id);
  absl::Status moved = Move(
      job, JobState::kPaused,
      absl::StrCat(
          "paused", By(actor), reason.empty() ? "" : ": ", reason,
          running > 0
              ? absl::StrCat(" (", Plural(running, "partition", "partitions"),
                             " finishing)")
              : ""),
      Phase::kPaused);
  {
    absl::MutexLock lock(&mu_);
    // Found again: a cancel that overtook the pause may have settled and
    // forgotten the job meanwhile.
    job = FindLocked(id);
    if (!moved.ok() && job != nullptr && job->phase == Phase::kPaused) {
      RestorePhaseLocked(job, before);
    }
    PumpLocked();
  }
  if (!moved.ok()) return moved;
  return store_->GetJob(id);
}

absl::StatusOr<Job> JobRunner::Resume(const std::string& id,
                                      const std::string& reason,
                                      const std::string& actor) {
  Active* job = nullptr;
  {
    absl::MutexLock lock(&mu_);
    job = FindLocked(id);
    if (job == nullptr || job->phase != Phase::kPaused) {
      JobState state = job != nullptr ? job->state : JobState::kQueued;
      if (job == nullptr) {
        ASSIGN_OR_RETURN(Job stored, store_->GetJob(id));
        state = stored.state;
      }
      if (state == JobState::kQueued || state == JobState::kRunning) {
        return store_->GetJob(id);  // not paused: nothing to resume
      }
      return absl::FailedPreconditionError(
          absl::StrCat("job ", id, " is ", JobStateName(state),
                       "; only a paused job can be resumed"));
    }
  }
  RETURN_IF_ERROR(
      Move(job, JobState::kQueued,
           absl::StrCat("resumed", By(actor), reason.empty() ? "" : ": ",
                        reason, "; continuing from its checkpoints"),
           Phase::kPaused));
  {
    absl::MutexLock lock(&mu_);
    // Found again: a cancel right after the resume may have settled and
    // forgotten the job meanwhile.
    job = FindLocked(id);
    if (job != nullptr && job->phase == Phase::kPaused) {
      job->phase = Phase::kWaiting;
      job->waiting_message.clear();
    }
    PumpLocked();
  }
  return store_->GetJob(id);
}

absl::StatusOr<Job> JobRunner::Retry(const std::string& id,
                                     const std::string& reason,
                                     const std::string& actor) {
  Active* job = nullptr;
  {
    absl::MutexLock lock(&mu_);
    job = FindLocked(id);
    // A job that just failed may still be draining the partitions that ran
    // when it failed: wait for that (bounded) rather than refuse.
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (job != nullptr &&
           (job->phase == Phase::kFailing ||
            (job->phase == Phase::kSettling &&
             job->settling_from == Phase::kFailing)) &&
           !stopping_) {
      if (changed_.WaitWithDeadline(&mu_, deadline)) break;
      job = FindLocked(id);
    }
    if (job != nullptr && job->phase == Phase::kHeld &&
        job->state == JobState::kFailed) {
      job->phase = Phase::kSettling;  // reserved for the retry
      ++job->busy;
    } else if (job != nullptr) {
      const JobState state = job->state;
      return absl::FailedPreconditionError(absl::StrCat(
          "job ", id, " is ", JobStateName(state),
          state == JobState::kValidationFailed
              ? ": its partitions were all recomputed and failed validation; "
                "running them again gives the same result. Fix the data or "
                "the transform and submit a new backfill"
              : "; only a FAILED job can be retried"));
    }
  }
  if (job == nullptr) {
    ASSIGN_OR_RETURN(Job stored, store_->GetJob(id));
    if (stored.state == JobState::kFailed) {
      return absl::FailedPreconditionError(absl::StrCat(
          "job ", id,
          " failed and kept no staging to retry with (it was superseded, or "
          "could not be resumed after a restart): submit a new backfill"));
    }
    return absl::FailedPreconditionError(
        absl::StrCat("job ", id, " is ", JobStateName(stored.state),
                     "; only a FAILED job can be retried"));
  }
  {
    // A retry that would fail the same way is refused up front.
    Job copy;
    std::shared_ptr<const Catalog> catalog;
    {
      absl::MutexLock lock(&mu_);
      copy = job->job;
      copy.state = job->state;
      catalog = job->catalog;
    }
    bool complete = true;
    absl::StatusOr<JobLayout> layout = LayoutOf(*catalog, copy, &complete);
    if (!layout.ok()) {
      absl::MutexLock lock(&mu_);
      job->phase = Phase::kHeld;
      ReleaseLocked(job);
      return absl::FailedPreconditionError(absl::StrCat(
          "job ", id, " cannot be retried: ", layout.status().message()));
    }
  }
  absl::StatusOr<Job> progress = store_->GetJobProgress(id);
  const int64_t again =
      progress.ok() ? progress->counts.total - progress->counts.staged -
                          progress->counts.published -
                          progress->counts.unchanged - progress->counts.skipped
                    : 0;
  const int64_t kept = progress.ok() ? progress->counts.staged : 0;
  const std::string message = absl::StrCat(
      "retrying", By(actor),
      reason.empty() ? "" : absl::StrCat(" (", reason, ")"), ": ",
      Plural(again, "partition runs", "partitions run"), " again, ",
      Plural(kept, "staged partition is", "staged partitions are"), " kept");
  absl::Status s;
  {
    absl::MutexLock transition(&job->transition_mu);
    s = Persist(Storage::kStateStore, absl::StrCat("retrying job ", id), [&] {
      return store_
          ->RetryJob(id, JobState::kFailed, JobState::kQueued, message,
                     clock_->Now())
          .status();
    });
  }
  if (!s.ok()) {
    absl::MutexLock lock(&mu_);
    job->phase = Phase::kHeld;
    ReleaseLocked(job);
    return s;
  }
  if (observer_ != nullptr) {
    observer_->OnJobTransition(id, JobState::kFailed, JobState::kQueued,
                               message);
  }
  {
    absl::MutexLock lock(&mu_);
    job->state = JobState::kQueued;
    job->job.message = message;
    job->loaded = false;
    job->prepared = false;
    job->validated = false;
    job->restage_rounds = 0;
    job->failure.clear();
    job->waiting_message.clear();
    job->phase = Phase::kWaiting;
    // Behind every job admitted meanwhile.
    admission_.Add(id, ScopeOf(job->job.plan));
    ReleaseLocked(job);
    NotifyLocked(id);
    PumpLocked();
  }
  return store_->GetJob(id);
}

// ---------------------------------------------------------------------------
// Rollback and retention

absl::StatusOr<Job> JobRunner::Rollback(const std::string& id,
                                        const RollbackRequest& request) {
  ASSIGN_OR_RETURN(Job job, store_->GetJob(id));
  if (job.state == JobState::kRolledBack) return job;  // done before
  if (job.state != JobState::kSucceeded &&
      job.state != JobState::kDownstreamUnhealthy) {
    std::string why;
    switch (job.state) {
      case JobState::kFailed:
      case JobState::kCancelled:
      case JobState::kValidationFailed:
        why =
            ": nothing of it was published, so there is nothing to roll "
            "back";
        break;
      default:
        why =
            ": it has not published (yet); cancel it instead if it must "
            "not publish";
        break;
    }
    return absl::FailedPreconditionError(
        absl::StrCat("job ", id, " is ", JobStateName(job.state), why,
                     ". Only a SUCCEEDED or DOWNSTREAM_UNHEALTHY job can be "
                     "rolled back"));
  }
  {
    // What the job did is final, unlike another job's partitions: a job
    // that published nothing is told so, not asked to wait and try again.
    ASSIGN_OR_RETURN(std::vector<PartitionTask> tasks, store_->ListTasks(id));
    if (!tasks.empty() &&
        std::all_of(tasks.begin(), tasks.end(),
                    [](const PartitionTask& t) { return IsCutOff(t.state); })) {
      return absl::FailedPreconditionError(PublishedNothing(id));
    }
  }
  Scope scope = ScopeOf(job.plan);
  std::vector<Active*> held;
  {
    absl::MutexLock lock(&mu_);
    if (!started_) return absl::UnavailableError("backfilld is starting");
    if (stopping_) return absl::UnavailableError("backfilld is shutting down");
    RETURN_IF_ERROR(AwaitOwnRunEndedLocked(id, "roll back"));
    std::vector<Conflict> conflicts;
    std::vector<Admission::Overlap> overlaps =
        admission_.Overlapping(scope, &conflicts, 1);
    if (!overlaps.empty()) {
      const std::string& other = overlaps.front().job_id;
      const std::string partition =
          conflicts.empty()
              ? std::string()
              : (conflicts.front().partition.empty()
                     ? absl::StrCat(" (dataset ", conflicts.front().dataset,
                                    ")")
                     : absl::StrCat(" (e.g. ", conflicts.front().partition,
                                    " of ", conflicts.front().dataset, ")"));
      if (rolling_back_.count(other)) {
        return absl::FailedPreconditionError(absl::StrCat(
            "the rollback of ", other, " is in progress on partitions of ", id,
            partition, "; wait for it to end, then try again"));
      }
      return absl::FailedPreconditionError(absl::StrCat(
          "job ", DescribeLocked(overlaps), " works on partitions of ", id,
          partition,
          "; a rollback never runs while another job holds its partitions. "
          "Wait until it ends (or cancel it), then roll back ",
          id));
    }
    // Hold the partitions: jobs submitted meanwhile wait for the rollback.
    admission_.Add(id, std::move(scope));
    rolling_back_.insert(id);
    // Jobs held for a decision over these partitions computed their staging
    // against the rows the rollback withdraws: a successful rollback
    // supersedes them, as a newer overlapping job would. Reserved now, so
    // that none of them is approved or retried meanwhile.
    held = ReserveHeldOverlapsLocked(id);
  }
  bool restored = false;
  absl::StatusOr<Job> result = RollBack(job, request, nullptr, [&] {
    restored = true;
    for (Active* h : held) Supersede(h, RollbackSupersedes(id));
  });
  absl::MutexLock lock(&mu_);
  if (!restored) UnreserveHeldLocked(held);
  admission_.Remove(id);
  rolling_back_.erase(id);
  NotifyLocked(id);
  PumpLocked();
  return result;
}

absl::StatusOr<Job> JobRunner::Confirm(const std::string& id,
                                       const std::string& reason,
                                       const std::string& actor) {
  ASSIGN_OR_RETURN(Job stored, store_->GetJob(id));
  // The confirmation runs with the catalog in force now.
  const std::shared_ptr<const Catalog> catalog = catalog_->Get();
  if (stored.state != JobState::kSucceeded &&
      stored.state != JobState::kDownstreamUnhealthy) {
    std::string why;
    switch (stored.state) {
      case JobState::kRolledBack:
        why =
            ": its publication was rolled back, so its consumers have "
            "nothing of it to serve";
        break;
      case JobState::kConfirming:
        why = ": it is confirming its consumers now; watch it";
        break;
      case JobState::kFailed:
      case JobState::kCancelled:
      case JobState::kValidationFailed:
        why = ": nothing of it was published, so there is nothing to confirm";
        break;
      default:
        why =
            ": it has not published yet; it confirms its consumers itself "
            "once it has";
        break;
    }
    return absl::FailedPreconditionError(
        absl::StrCat("job ", id, " is ", JobStateName(stored.state), why,
                     ". Only a SUCCEEDED or DOWNSTREAM_UNHEALTHY job can be "
                     "confirmed again"));
  }
  {
    // A confirmation that could not load the job would leave it
    // CONFIRMING: refused up front instead.
    bool complete = true;
    absl::StatusOr<JobLayout> layout = LayoutOf(*catalog, stored, &complete);
    if (!layout.ok()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "job ", id, " cannot be confirmed: ", layout.status().message()));
    }
  }
  Scope scope = ScopeOf(stored.plan);
  Active* job = nullptr;
  {
    absl::MutexLock lock(&mu_);
    if (!started_) return absl::UnavailableError("backfilld is starting");
    if (stopping_) return absl::UnavailableError("backfilld is shutting down");
    RETURN_IF_ERROR(AwaitOwnRunEndedLocked(id, "confirm"));
    if (jobs_.count(id) || rolling_back_.count(id)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "job ", id,
          " is being confirmed or rolled back right now; wait for it to "
          "end"));
    }
    std::vector<Conflict> conflicts;
    std::vector<Admission::Overlap> overlaps =
        admission_.Overlapping(scope, &conflicts, 1);
    if (!overlaps.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "job ", DescribeLocked(overlaps), " works on partitions of ", id,
          "; the warehouse may change under a confirmation. Wait until it "
          "ends, then confirm ",
          id, " again"));
    }
    auto active = std::make_unique<Active>();
    active->catalog = catalog;
    active->job = stored;
    active->state = stored.state;
    active->phase = Phase::kFinishing;
    active->reconfirming = true;
    active->busy = 1;  // the Finish closure below
    job = active.get();
    admission_.Add(id, std::move(scope));
    jobs_[id] = std::move(active);
  }
  const std::string message =
      absl::StrCat("confirming downstream consumers again", By(actor),
                   reason.empty() ? "" : absl::StrCat(" (", reason, ")"));
  absl::Status s = Move(job, JobState::kConfirming, message, Phase::kFinishing);
  {
    absl::MutexLock lock(&mu_);
    if (!s.ok()) {
      EndLocked(job, Phase::kDone);
      ReleaseLocked(job);  // forgets it
      PumpLocked();
      return s;
    }
    SubmitLocked([this, id] { Finish(id); });
  }
  return store_->GetJob(id);
}

absl::StatusOr<Job> JobRunner::RollBack(
    const Job& job, const RollbackRequest& request,
    const std::vector<std::string>* with_ids,
    const std::function<void()>& restored_rows) {
  const std::string& id = job.id;
  // The layout points into this snapshot: held until the rollback ends.
  const std::shared_ptr<const Catalog> catalog = catalog_->Get();
  bool complete = true;
  ASSIGN_OR_RETURN(JobLayout layout, LayoutOf(*catalog, job, &complete));
  if (!complete) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job ", id,
        " cannot be rolled back: a dataset of it is no longer declared in "
        "the loaded pipelines, and a rollback restores every dataset of the "
        "job together"));
  }
  layout.pinned.clear();
  {
    // Only what the job published is restored: the partitions the early
    // cutoff let go of were never replaced by it.
    ASSIGN_OR_RETURN(std::vector<PartitionTask> tasks, store_->ListTasks(id));
    layout = WithoutCutOff(layout, tasks);
    if (layout.items.empty()) {
      return absl::FailedPreconditionError(PublishedNothing(id));
    }
  }
  ASSIGN_OR_RETURN(std::vector<LineageRecord> history,
                   store_->GetLineageOverlapping(id));
  const JobLookup lookup = [this](const std::string& other) {
    return store_->GetJob(other);
  };
  if (with_ids == nullptr) {
    // The copies the restore needs must still exist (unless the warehouse
    // rolled the job back before and recovery has not recorded it). Checked
    // first: an expired copy is final, later jobs are not.
    WarehouseInfo info;
    RETURN_IF_ERROR(Persist(Storage::kWarehouse, "reading rollback markers",
                            [&]() -> absl::Status {
                              ASSIGN_OR_RETURN(info, engine_->Inspect());
                              return absl::OkStatus();
                            }));
    if (!info.rollbacks.count(id)) {
      std::vector<RollbackCopy> copies;
      RETURN_IF_ERROR(Persist(Storage::kWarehouse, "listing rollback copies",
                              [&]() -> absl::Status {
                                ASSIGN_OR_RETURN(copies,
                                                 engine_->ListRollbackCopies());
                                return absl::OkStatus();
                              }));
      std::set<std::pair<std::string, std::string>> present;
      for (const RollbackCopy& c : copies)
        present.insert({c.job_id, c.dataset});
      for (const JobLayout::Item& item : layout.items) {
        if (present.count({id, item.dataset->name})) continue;
        return absl::FailedPreconditionError(absl::StrCat(
            "job ", id, " can no longer be rolled back: its rollback copy of ",
            item.dataset->name,
            " (the rows it replaced there) expired under "
            "the retention policy of ",
            item.dataset->name, ", which ",
            DescribeRetention(item.dataset->retention),
            ", and was dropped. Restore the data with a new backfill"));
      }
    }
  }
  std::vector<Job> with_jobs;
  if (with_ids == nullptr) {
    ASSIGN_OR_RETURN(with_jobs, LaterJobs(job, history, request.force, lookup));
  } else {
    for (const std::string& other : *with_ids) {
      ASSIGN_OR_RETURN(Job j, store_->GetJob(other));
      with_jobs.push_back(std::move(j));
    }
  }
  RollbackSpec spec;
  spec.layout = layout;
  spec.marker.requested_by = request.requested_by;
  spec.marker.reason = request.reason;
  spec.marker.forced = !with_jobs.empty();
  for (const Job& j : with_jobs) spec.marker.with_jobs.push_back(j.id);
  RollbackResult restored;
  RETURN_IF_ERROR(Persist(Storage::kWarehouse,
                          absl::StrCat("rolling back job ", id),
                          [&]() -> absl::Status {
                            ASSIGN_OR_RETURN(restored, engine_->Rollback(spec));
                            return absl::OkStatus();
                          }));
  if (restored_rows) restored_rows();
  CrashPoint("rollback.before_record");

  RollbackInfo info;
  info.requested_by = request.requested_by;
  info.reason = request.reason;
  info.at = clock_->Now();
  info.forced = spec.marker.forced;
  info.also_rolled_back = spec.marker.with_jobs;
  info.partitions = static_cast<int64_t>(restored.partitions.size());
  info.rows = restored.rows;
  std::vector<LineageRecord> lineage = RollbackLineage(
      job, with_jobs, history, restored.partitions, info, info.at);
  const std::string who = request.requested_by.empty()
                              ? ""
                              : absl::StrCat(" by ", request.requested_by);
  const std::string message = absl::StrCat(
      "rolled back", who, ": ", request.reason, "; restored ",
      Plural(info.partitions, "partition", "partitions"), " (",
      Plural(info.rows, "row", "rows"), ") of ",
      Plural(static_cast<int64_t>(layout.items.size()), "dataset", "datasets"),
      " to their state before ", id,
      info.also_rolled_back.empty()
          ? std::string()
          : absl::StrCat(", together with the later ",
                         info.also_rolled_back.size() == 1 ? "job " : "jobs ",
                         absl::StrJoin(info.also_rolled_back, ", "),
                         " (`force`)"));
  const std::string also_message =
      absl::StrCat("rolled back together with ", id, " (`force`)", who, ": ",
                   request.reason);
  RETURN_IF_ERROR(Persist(Storage::kStateStore,
                          absl::StrCat("recording the rollback of ", id), [&] {
                            return store_->RecordRollback(id, info, lineage,
                                                          message, also_message,
                                                          info.at);
                          }));
  if (observer_ != nullptr) {
    for (const Job& other : with_jobs) {
      observer_->OnJobTransition(other.id, other.state, JobState::kRolledBack,
                                 also_message);
    }
    observer_->OnJobTransition(id, job.state, JobState::kRolledBack, message);
    // Counted as finished ROLLED_BACK; their costs were counted when they
    // succeeded.
    for (const Job& other : with_jobs) {
      observer_->OnJobFinished(other.id, JobState::kRolledBack, 0, 0);
    }
    observer_->OnJobFinished(id, JobState::kRolledBack, 0, 0);
  }
  {
    absl::MutexLock lock(&mu_);
    for (const Job& other : with_jobs) NotifyLocked(other.id);
    NotifyLocked(id);
  }
  return store_->GetJob(id);
}

absl::Status JobRunner::RecordDiff(Active* job, const JobLayout& layout) {
  const std::string id = job->job.id;
  JobDiff diff;
  RETURN_IF_ERROR(Persist(
      Storage::kWarehouse, absl::StrCat("computing the diff of ", id),
      [&]() -> absl::Status {
        ASSIGN_OR_RETURN(diff, DiffStaging(engine_, layout, clock_->Now(),
                                           options_.workers));
        return absl::OkStatus();
      }));
  return Persist(Storage::kStateStore,
                 absl::StrCat("recording the diff of ", id),
                 [&] { return store_->ReplaceJobDiff(diff); });
}

std::vector<Admission::Overlap> JobRunner::StartedOverlapsLocked(
    const std::string& id) {
  std::vector<Admission::Overlap> out;
  const Scope* scope = admission_.ScopeOf(id);
  if (scope == nullptr) return out;
  for (Admission::Overlap& o : admission_.Overlapping(*scope, nullptr, 0)) {
    if (o.job_id == id) continue;
    const Active* other = FindLocked(o.job_id);
    if (other == nullptr) continue;
    if (other->state == JobState::kQueued && other->phase == Phase::kWaiting) {
      continue;  // not started: it will wait for the approved job
    }
    out.push_back(std::move(o));
  }
  return out;
}

absl::StatusOr<Job> JobRunner::Approve(const std::string& id,
                                       const Approval& request) {
  RETURN_IF_ERROR(CheckApprovalRequest(request));
  AwaitMoveInFlight(id);
  Active* job = nullptr;
  JobState from = JobState::kAwaitingApproval;
  bool held = false;
  {
    absl::MutexLock lock(&mu_);
    job = FindLocked(id);
    const bool approvable = job != nullptr && job->phase == Phase::kHeld &&
                            (job->state == JobState::kAwaitingApproval ||
                             (job->state == JobState::kValidationFailed &&
                              request.override_validation));
    held = job != nullptr && job->phase == Phase::kHeld;
    if (approvable) {
      std::vector<Admission::Overlap> started = StartedOverlapsLocked(id);
      if (!started.empty()) {
        return absl::FailedPreconditionError(absl::StrCat(
            "job ", id, " is ", JobStateName(job->state), " but ",
            DescribeLocked(started),
            " already recomputes some of its partitions; publishing ", id,
            " now could overwrite newer results, so it is not approved (the "
            "newer job supersedes it). Nothing was published"));
      }
      from = job->state;
      job->phase = Phase::kSettling;  // reserved for the approval
      ++job->busy;
      // From here it blocks newer overlapping jobs again, so that none of
      // them starts while it publishes.
      admission_.SetHeld(id, false);
    } else {
      job = nullptr;
    }
  }
  if (job == nullptr) {
    ASSIGN_OR_RETURN(Job stored, store_->GetJob(id));
    if (ApprovedAlready(stored)) return stored;
    return RefuseApproval(stored, request, held);
  }
  auto undo = [&](absl::Status s) {
    absl::MutexLock lock(&mu_);
    job->phase = Phase::kHeld;
    admission_.SetHeld(id, true);
    ReleaseLocked(job);
    PumpLocked();
    return s;
  };
  absl::Status s = Load(job);
  if (s.ok() && from == JobState::kValidationFailed) {
    // The operator overrides the checks, not lost staging: staging must
    // still hold what the partitions' checkpoints recorded.
    bool complete;
    JobLayout layout;
    std::vector<PartitionTask> tasks;
    {
      absl::MutexLock lock(&mu_);
      complete = job->layout_complete;
      layout = WithoutCutOff(job->layout, job->tasks);
      tasks = job->tasks;
    }
    if (!complete) {
      s = absl::FailedPreconditionError(absl::StrCat(
          "job ", id,
          " cannot be published: a dataset of it is no longer in the loaded "
          "pipelines"));
    } else if (s = EnsurePrepared(job); s.ok()) {
      ValidateOptions integrity;
      integrity.catalog = job->catalog.get();
      integrity.integrity_only = true;
      absl::StatusOr<ValidationOutcome> outcome =
          ValidateTimed(id, layout, tasks, integrity);
      if (!outcome.ok()) {
        s = outcome.status();
      } else if (!outcome->lost.empty()) {
        s = absl::FailedPreconditionError(absl::StrCat(
            "job ", id,
            " cannot be published: its staging no longer holds what the "
            "partition checkpoints recorded (",
            outcome->lost_summary,
            "); nothing was published. Submit a new backfill"));
      }
    }
  }
  if (!s.ok()) return undo(s);

  Approval approval = request;
  approval.from_state = from;
  approval.override_validation =
      request.override_validation && from == JobState::kValidationFailed;
  approval.approved_at = clock_->Now();
  const std::string message = ApprovalMessage(approval);
  {
    absl::MutexLock transition(&job->transition_mu);
    s = Persist(Storage::kStateStore, absl::StrCat("approving job ", id), [&] {
      return store_->ApproveJob(id, from, JobState::kPublishing, approval,
                                message, approval.approved_at);
    });
  }
  if (!s.ok()) return undo(s);
  if (observer_ != nullptr) {
    observer_->OnJobTransition(id, from, JobState::kPublishing, message);
  }
  {
    absl::MutexLock lock(&mu_);
    job->state = JobState::kPublishing;
    job->job.message = message;
    job->job.approval = approval;
    // An override's staging was just checked; the failed checks are not
    // run again.
    if (approval.override_validation) job->validated = true;
    job->phase = Phase::kFinishing;
    NotifyLocked(id);
    // Finish releases the reservation.
    SubmitLocked([this, id] { Finish(id); });
  }
  return store_->GetJob(id);
}

absl::Status JobRunner::RecoverRollbacks(std::vector<std::string>* recovered) {
  ASSIGN_OR_RETURN(StoreInfo store, store_->Info());
  ASSIGN_OR_RETURN(WarehouseInfo warehouse, engine_->Inspect());
  for (const auto& [id, marker] : warehouse.rollbacks) {
    if (marker.store_id != store.store_id) continue;
    absl::StatusOr<Job> job = store_->GetJob(id);
    if (!job.ok() && job.status().code() == absl::StatusCode::kNotFound) {
      continue;
    }
    if (!job.ok()) return job.status();
    if (job->state != JobState::kSucceeded &&
        job->state != JobState::kDownstreamUnhealthy) {
      continue;  // recorded (ROLLED_BACK)
    }
    RollbackRequest request;
    request.reason = marker.reason;
    request.requested_by = marker.requested_by;
    request.force = marker.forced;
    absl::StatusOr<Job> done =
        RollBack(*job, request, &marker.with_jobs, nullptr);
    if (!done.ok()) {
      return absl::Status(done.status().code(),
                          absl::StrCat("cannot record the rollback of job ", id,
                                       ", which the warehouse committed: ",
                                       done.status().message()));
    }
    recovered->push_back(id);
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> JobRunner::EnforceRetention() {
  ASSIGN_OR_RETURN(std::vector<RollbackCopy> copies,
                   engine_->ListRollbackCopies());
  if (copies.empty()) return 0;
  std::vector<std::string> ids;
  for (const RollbackCopy& c : copies) {
    if (ids.empty() || ids.back() != c.job_id) ids.push_back(c.job_id);
  }
  ASSIGN_OR_RETURN(auto published, store_->PublicationTimes(ids));
  // A job being rolled back keeps its copies whatever their age.
  {
    absl::MutexLock lock(&mu_);
    for (const std::string& id : rolling_back_) published.erase(id);
  }
  std::vector<RollbackCopy> expired =
      ExpiredCopies(copies, published, *catalog_->Get(), clock_->Now());
  RETURN_IF_ERROR(engine_->DropRollbackCopies(expired));
  return static_cast<int64_t>(expired.size());
}

absl::StatusOr<Job> JobRunner::WaitForChange(const std::string& id,
                                             uint64_t* version,
                                             absl::Time deadline,
                                             JobView first_view) {
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
  // The first read is in the view asked for; later ones are progress
  // updates.
  ASSIGN_OR_RETURN(Job job, *version == 0 && first_view == JobView::kFull
                                ? store_->GetJob(id)
                                : store_->GetJobProgress(id));
  *version = current;
  return job;
}

}  // namespace backfill
