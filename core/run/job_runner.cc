#include "core/run/job_runner.h"

#include <algorithm>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/base/plural.h"
#include "core/base/status_macros.h"
#include "core/plan/early_cutoff.h"
#include "core/run/confirm_step.h"
#include "core/run/crash_point.h"
#include "core/run/publish_step.h"
#include "core/run/recompute_step.h"
#include "core/run/recovery.h"
#include "core/run/rollback_step.h"
#include "core/run/validate_step.h"

namespace backfill {

using Storage = JobObserver::Storage;

JobRunner::JobRunner(const LiveCatalog* catalog, StateStore* store,
                     Engine* engine, const Clock* clock, JobObserver* observer,
                     RunnerOptions options)
    : catalog_(catalog),
      jobs_(store),
      ctx_(store, engine, clock, observer, options, &jobs_),
      commands_(&ctx_, catalog, this) {}

JobRunner::~JobRunner() { Shutdown(); }

void JobRunner::Shutdown() {
  LeaseKeeper* const keeper = ctx_.options().leases;
  if (keeper != nullptr) keeper->SetDraining();
  if (!jobs_.Stop()) return;
  // Decisions sent by other replicas: none is taken any more (their
  // senders withdraw them and are told to send them again).
  if (requests_.joinable()) {
    {
      absl::MutexLock lock(&requests_mu_);
      requests_stop_ = true;
    }
    requests_.join();
  }
  // Running closures finish (partitions checkpoint); queued ones are
  // dropped and their work resumes at the next Start().
  if (pool_) pool_->Shutdown();
  // A replica hands its leases back once its partitions checkpointed:
  // the others take its jobs over at once rather than after the leases
  // expire.
  if (keeper != nullptr) keeper->Stop(/*leave=*/true);
}

absl::Status JobRunner::Start() {
  {
    absl::MutexLock lock(jobs_.mu());
    if (jobs_.StartedLocked()) {
      return absl::FailedPreconditionError("already started");
    }
  }
  // One thread more than task slots, so that preparing or publishing a job
  // never waits behind a full set of partition tasks.
  task_writer_ = std::make_unique<TaskWriter>(
      ctx_.store(), [this](const std::string& what,
                           const std::function<absl::Status()>& write) {
        return ctx_.Persist(Storage::kStateStore, what, write);
      });
  pool_ = std::make_unique<WorkerPool>(std::max(1, ctx_.options().workers) + 1);
  if (InGroup()) return StartInGroup();
  ASSIGN_OR_RETURN(RecoveredJobs recovered, RecoverJobs(ctx_, *catalog_));
  std::vector<std::string> finishing;
  {
    absl::MutexLock lock(jobs_.mu());
    for (std::unique_ptr<ActiveJob>& job : recovered.jobs) {
      const std::string id = job->job.id;
      const JobPhase phase = job->phase;
      jobs_.admission().Add(id, ScopeOf(job->job.plan),
                            phase == JobPhase::kHeld);
      ActiveJob* active = jobs_.AddLocked(std::move(job));
      if (phase == JobPhase::kFinishing) {
        ++active->busy;
        finishing.push_back(id);
      }
    }
  }
  // A rollback recorded just now had restored its rows before the process
  // died, possibly before it superseded the held jobs over its partitions.
  for (const std::string& rolled_back : recovered.rolled_back) {
    ASSIGN_OR_RETURN(Job rolled, ctx_.store()->GetJob(rolled_back));
    std::vector<ActiveJob*> held;
    {
      absl::MutexLock lock(jobs_.mu());
      jobs_.admission().Add(rolled_back, ScopeOf(rolled.plan));
      held = jobs_.ReserveHeldOverlapsLocked(rolled_back);
      jobs_.admission().Remove(rolled_back);
    }
    for (ActiveJob* h : held) Supersede(h, SupersededByRollback(rolled_back));
  }
  SweepOrphans(ctx_);
  absl::MutexLock lock(jobs_.mu());
  jobs_.SetStartedLocked();
  // Best effort, and again after each publish; on a worker, as reading
  // when each job with rollback copies published reads their lineage, which
  // a start over a long history should not wait for.
  SubmitLocked([this] { EnforceRetention(ctx_, *catalog_).IgnoreError(); });
  for (const std::string& id : finishing) FinishLocked(id);
  PumpLocked();
  return absl::OkStatus();
}

void JobRunner::SubmitLocked(std::function<void()> fn) {
  if (pool_ != nullptr) pool_->Submit(std::move(fn));
}

// ---------------------------------------------------------------------------
// Admission and dispatch

void JobRunner::PumpLocked() {
  if (jobs_.StoppingLocked() || !jobs_.StartedLocked()) return;
  for (const std::string& id : jobs_.admission().Order()) {
    ActiveJob* job = jobs_.FindLocked(id);
    if (job == nullptr || job->phase != JobPhase::kWaiting || job->preparing) {
      continue;
    }
    std::vector<Admission::Overlap> blockers = jobs_.admission().Blockers(id);
    if (!blockers.empty()) {
      const std::string message =
          absl::StrCat("waiting for ", jobs_.DescribeLocked(blockers),
                       " to finish: per partition, jobs run in the order they "
                       "were submitted");
      if (message != job->waiting_message) {
        job->waiting_message = message;
        ++job->busy;
        SubmitLocked([this, id, message] {
          ctx_.store()
              ->SetJobMessage(id, JobState::kQueued, message,
                              ctx_.clock()->Now())
              .IgnoreError();
          ActiveJob* j;
          bool settle;
          {
            absl::MutexLock lock(jobs_.mu());
            j = jobs_.FindLocked(id);
            if (j == nullptr) return;
            if (j->state == JobState::kQueued) j->job.message = message;
            jobs_.NotifyLocked(id);
            settle = jobs_.ReleaseAndTakeSettleLocked(j);
          }
          if (settle) Settle(j);
        });
      }
      continue;
    }
    job->phase = JobPhase::kPreparing;
    job->preparing = true;
    ++job->busy;
    SubmitLocked([this, id] { Prepare(id); });
  }
  DispatchLocked();
}

void JobRunner::DispatchLocked() {
  if (jobs_.StoppingLocked()) return;
  std::set<ActiveJob*> exhausted;
  while (in_flight_ < ctx_.options().workers) {
    ActiveJob* best = nullptr;
    for (auto& [id, ptr] : jobs_.jobs()) {
      ActiveJob* job = ptr.get();
      if (job->phase != JobPhase::kRunning || !job->prepared || !job->graph ||
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
    ActiveJob* holder = nullptr;
    for (auto& [id, ptr] : jobs_.jobs()) {
      ActiveJob* job = ptr.get();
      if (job->phase != JobPhase::kRunning || job->held.empty()) continue;
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
      best->tasks.set_state(i, TaskState::kRunning);
      ++best->running_tasks;
      ++dataset_running_[best->tasks.dataset(i)];
      indices.push_back(i);
    }
    if (indices.empty()) {
      exhausted.insert(best);
      continue;
    }
    StartBatchLocked(best, std::move(indices));
  }
}

void JobRunner::StartBatchLocked(ActiveJob* job, std::vector<size_t> indices) {
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

bool JobRunner::OtherJobWaitsLocked(const ActiveJob& job) const {
  for (const auto& [id, ptr] : jobs_.jobs()) {
    const ActiveJob* other = ptr.get();
    if (other == &job || other->phase != JobPhase::kRunning ||
        !other->prepared || !other->graph || other->graph->ready() == 0) {
      continue;
    }
    const int limit = other->job.request.max_parallel;
    if (limit > 0 && other->running_tasks >= limit) continue;
    if (other->job.request.priority >= job.job.request.priority) return true;
  }
  return false;
}

size_t JobRunner::BatchSizeLocked(const ActiveJob& job) const {
  // One partition at a time until the job's partitions are known to be
  // short; then as many as take about kBatchTime, at most kMaxBatch, and
  // never more than an equal share of the ready ones per worker (a batch
  // must not leave another worker idle).
  if (job.stage_seconds < 0) return 1;
  const double time = absl::ToDoubleSeconds(kBatchTime);
  const double fit = job.stage_seconds > 0 ? time / job.stage_seconds
                                           : static_cast<double>(kMaxBatch);
  const size_t share = job.graph->ready() /
                       static_cast<size_t>(std::max(1, ctx_.options().workers));
  return std::max<size_t>(
      1, std::min({static_cast<size_t>(fit), kMaxBatch, share}));
}

void JobRunner::NoteStageTime(ActiveJob* job, absl::Duration took) {
  const double seconds = absl::ToDoubleSeconds(took);
  // An average that follows the job's recent partitions (one in eight).
  job->stage_seconds =
      job->stage_seconds < 0
          ? seconds
          : job->stage_seconds + (seconds - job->stage_seconds) / 8;
}

void JobRunner::StartFinishingIfDoneLocked(ActiveJob* job) {
  if (job->phase != JobPhase::kRunning || !job->graph ||
      !job->graph->AllDone() || job->running_tasks != 0) {
    return;
  }
  job->phase = JobPhase::kFinishing;
  ++job->busy;
  FinishLocked(job->job.id);
}

void JobRunner::FinishLocked(const std::string& id) {
  SubmitLocked([this, id] { Finish(id); });
}

// ---------------------------------------------------------------------------
// Steps

void JobRunner::Prepare(const std::string& id) {
  ActiveJob* job;
  std::vector<ActiveJob*> superseded;
  {
    absl::MutexLock lock(jobs_.mu());
    job = jobs_.FindLocked(id);
    if (job == nullptr) return;
    // A job that starts supersedes the held jobs it overlaps.
    superseded = jobs_.ReserveHeldOverlapsLocked(id);
  }
  for (ActiveJob* held : superseded) {
    Supersede(held, absl::StrCat(
                        id, ", which recomputes some of the same partitions"));
  }

  absl::Status s = LoadJob(ctx_.store(), jobs_.mu(), job);
  if (s.ok()) {
    JobLayout layout;
    TaskTable tasks;
    {
      absl::MutexLock lock(jobs_.mu());
      layout = job->layout;
      tasks = job->tasks;
    }
    s = PrepareStaging(ctx_, layout, tasks);
  }
  bool queued;
  int64_t total = 0, staged = 0;
  {
    absl::MutexLock lock(jobs_.mu());
    queued = job->state == JobState::kQueued;
    if (job->graph) {
      total = static_cast<int64_t>(job->graph->size());
      staged = total - static_cast<int64_t>(job->graph->remaining());
    }
  }
  if (s.ok() && queued) {
    s = ctx_.Move(job, JobState::kRunning,
                  absl::StrCat("recomputing ", total - staged, " of ", total,
                               " partitions in staging"),
                  JobPhase::kPreparing);
    if (s.code() == absl::StatusCode::kAborted) s = absl::OkStatus();
  }
  if (!s.ok() && !ctx_.Stopping()) {
    FailJob(ctx_, job,
            absl::StrCat("preparing staging failed, nothing was "
                         "published: ",
                         s.message()));
  }
  bool settle;
  {
    absl::MutexLock lock(jobs_.mu());
    job->prepared = s.ok();
    job->preparing = false;
    if (job->phase == JobPhase::kPreparing && s.ok() &&
        job->state == JobState::kRunning) {
      job->phase = JobPhase::kRunning;
      job->graph->Requeue();
      StartFinishingIfDoneLocked(job);
    } else if (job->phase == JobPhase::kPreparing) {
      // Stopping (recovery prepares again), or the move to RUNNING was
      // aborted by a decision that was undone since: prepare again.
      job->phase = JobPhase::kWaiting;
    }
    settle = jobs_.ReleaseAndTakeSettleLocked(job);
    jobs_.NotifyLocked(id);
    PumpLocked();
  }
  if (settle) Settle(job);
}

void JobRunner::RunTasks(const std::string& id, uint64_t batch,
                         const std::vector<size_t>& indices) {
  ActiveJob* job;
  std::vector<PartitionRun> runs(indices.size());
  {
    absl::MutexLock lock(jobs_.mu());
    job = jobs_.FindLocked(id);
    for (size_t k = 0; k < indices.size(); ++k) {
      runs[k].index = indices[k];
      if (job->phase == JobPhase::kRunning) {
        runs[k] = PartitionRunOf(*job, indices[k]);
      }
    }
  }
  // Whether the batch still holds `run`: false when another batch took it
  // over (ActiveJob::held says which batch holds it now).
  const ClaimPartition claim = [&](PartitionRun* run, bool* go_on) {
    absl::MutexLock lock(jobs_.mu());
    if (!run->claimed && !run->taken) {
      auto h = job->held.find(run->index);
      if (h == job->held.end() || h->second != batch) {
        run->taken = true;
      } else {
        job->held.erase(h);
        run->claimed = true;
      }
    }
    if (!run->claimed) return false;
    if (go_on != nullptr) {
      *go_on = job->phase == JobPhase::kRunning && !OtherJobWaitsLocked(*job);
    }
    return true;
  };
  RunBatch(ctx_, job, task_writer_.get(), claim, &runs);

  bool settle;
  {
    absl::MutexLock lock(jobs_.mu());
    TaskGraph& graph = *job->graph;
    for (PartitionRun& run : runs) {
      if (run.taken) continue;  // the batch that took it over ends it
      if (run.spec != nullptr) {
        job->tasks.Set(run.index, run.task);
      } else {
        job->tasks.set_state(run.index, TaskState::kPending);  // never ran
      }
      if (run.done) {
        graph.Done(run.index, run.outcome);
        if (run.ran) NoteStageTime(job, run.result.took);
      } else if (run.failed) {
        graph.Fail(run.index);
      } else {
        graph.Return(run.index);
      }
      --job->running_tasks;
      --dataset_running_[job->tasks.dataset(run.index)];
    }
    if (job->phase != JobPhase::kRunning) graph.ClearReady();
    --in_flight_;
    StartFinishingIfDoneLocked(job);
    settle = jobs_.ReleaseAndTakeSettleLocked(job);
    jobs_.NotifyLocked(id);
    PumpLocked();
  }
  if (settle) Settle(job);
}

void JobRunner::Finish(const std::string& id) {
  ActiveJob* job;
  {
    absl::MutexLock lock(jobs_.mu());
    job = jobs_.FindLocked(id);
    if (job == nullptr) return;
  }
  absl::Status s = LoadJob(ctx_.store(), jobs_.mu(), job);
  auto current = [&] {
    absl::MutexLock lock(jobs_.mu());
    return job->state;
  };
  const JobState state = current();
  if (s.ok() && (state == JobState::kQueued || state == JobState::kRunning)) {
    int64_t total;
    CutoffCounts cut;
    {
      absl::MutexLock lock(jobs_.mu());
      cut = CountCutOff(job->tasks);
      total =
          static_cast<int64_t>(job->tasks.size()) - cut.unchanged - cut.skipped;
    }
    s = ctx_.Move(
        job, JobState::kValidating,
        absl::StrCat("validating ",
                     Plural(total, "staged partition", "staged partitions"),
                     CutoffNote(cut)),
        JobPhase::kFinishing);
  }
  if (s.ok() && current() == JobState::kValidating) {
    bool done = false;
    s = ValidateJob(ctx_, job, &done);
    if (s.ok() && done) {
      // Held (or VALIDATION_FAILED): an operator may have cancelled it
      // between the move and here, while this worker still pinned it; then
      // the cancel left the settling to whoever unpins it last.
      CrashPoint("hold.before_release");
      bool settle;
      {
        absl::MutexLock lock(jobs_.mu());
        settle = jobs_.ReleaseAndTakeSettleLocked(job);
        PumpLocked();
      }
      if (settle) Settle(job);
      return;
    }
  }
  if (s.ok() && current() == JobState::kPublishing) {
    s = PublishJob(ctx_, job);
    // Committed but not recorded (stopping): recovery records it.
    if (s.code() == absl::StatusCode::kCancelled) {
      absl::MutexLock lock(jobs_.mu());
      jobs_.ReleaseLocked(job);
      return;
    }
  }
  if (s.ok() && current() == JobState::kConfirming) {
    absl::StatusOr<bool> first_end = ConfirmJob(ctx_, job);
    if (first_end.ok()) {
      // The publish added rollback copies: drop those that expired.
      if (*first_end) EnforceRetention(ctx_, *catalog_).IgnoreError();
      absl::MutexLock lock(jobs_.mu());
      jobs_.EndLocked(job, JobPhase::kDone);
      jobs_.ReleaseLocked(job);
      PumpLocked();
      return;
    }
    s = first_end.status();
  }
  if (!s.ok() && ctx_.Stopping()) {  // interrupted: recovery resumes it
    absl::MutexLock lock(jobs_.mu());
    jobs_.ReleaseLocked(job);
    return;
  }
  if (!s.ok()) {
    // Only reached before the warehouse committed: nothing was published.
    // The staging is kept: a retry validates and publishes it again.
    const JobState from = current();
    absl::Status moved =
        ctx_.Move(job, JobState::kFailed,
                  absl::StrCat("failed while ", JobStateName(from),
                               ", nothing was published: ", s.message()),
                  JobPhase::kFinishing);
    double estimate;
    {
      absl::MutexLock lock(jobs_.mu());
      estimate = job->job.plan.cost.backfill;
    }
    if (moved.ok()) ctx_.ReportFinished(id, JobState::kFailed, estimate);
    absl::MutexLock lock(jobs_.mu());
    if (moved.ok()) jobs_.EndLocked(job, JobPhase::kHeld);
    jobs_.ReleaseLocked(job);
    PumpLocked();
    return;
  }
  absl::MutexLock lock(jobs_.mu());
  jobs_.ReleaseLocked(job);
  PumpLocked();
}

// ---------------------------------------------------------------------------
// Ends

void JobRunner::Settle(ActiveJob* job) {
  const std::string id = job->job.id;
  JobPhase from;
  double estimate;
  {
    absl::MutexLock lock(jobs_.mu());
    from = job->settling_from;
    estimate = job->job.plan.cost.backfill;
  }
  if (from == JobPhase::kCancelling) {
    EndCancelled(job);
    return;
  }
  // FailJob could not record the failure: try until it is recorded (a job
  // never leaves memory, nor releases its partitions, before).
  absl::Status s =
      ctx_.Move(job, JobState::kFailed, job->failure, std::nullopt);
  if (!s.ok()) {
    absl::MutexLock lock(jobs_.mu());
    job->phase = JobPhase::kFailing;  // recovery records it after a restart
    jobs_.ReleaseLocked(job);
    return;
  }
  // Tasks interrupted by the failure run again on a retry; staging and
  // pins are kept for it.
  ctx_.Persist(Storage::kStateStore, absl::StrCat("settling the tasks of ", id),
               [&] {
                 return ctx_.store()
                     ->UpdateTasksInState(id, {TaskState::kRunning},
                                          TaskState::kPending,
                                          ctx_.clock()->Now())
                     .status();
               })
      .IgnoreError();
  ctx_.ReportFinished(id, JobState::kFailed, estimate);
  absl::MutexLock lock(jobs_.mu());
  jobs_.EndLocked(job, JobPhase::kHeld);
  jobs_.ReleaseLocked(job);
  PumpLocked();
}

void JobRunner::Supersede(ActiveJob* held, const std::string& by) {
  absl::Status s = ctx_.Move(
      held, JobState::kCancelled,
      absl::StrCat("superseded by ", by, "; nothing of this job was published"),
      JobPhase::kSettling);
  if (!s.ok()) {
    // Not recorded (stopping): it stays held; the next start sees it again.
    absl::MutexLock lock(jobs_.mu());
    held->phase = JobPhase::kHeld;
    jobs_.ReleaseLocked(held);
    return;
  }
  EndCancelled(held);
}

void JobRunner::EndCancelled(ActiveJob* job) {
  // Tasks first, staging last: a crash in between leaves staging that the
  // next start sweeps.
  const std::string id = job->job.id;
  ctx_.Persist(
          Storage::kStateStore, absl::StrCat("cancelling the tasks of ", id),
          [&] {
            return ctx_.store()
                ->UpdateTasksInState(id,
                                     {TaskState::kPending, TaskState::kRunning,
                                      TaskState::kStaged, TaskState::kFailed},
                                     TaskState::kCancelled, ctx_.clock()->Now())
                .status();
          })
      .IgnoreError();
  ctx_.engine()->DropStaging(id).IgnoreError();
  double estimate;
  {
    absl::MutexLock lock(jobs_.mu());
    estimate = job->job.plan.cost.backfill;
  }
  ctx_.ReportFinished(id, JobState::kCancelled, estimate);
  // A transition still in flight on the job (the one that recorded the
  // cancel, when a step in flight settled it) ends before it is forgotten.
  { absl::MutexLock transition(&job->transition_mu); }
  absl::MutexLock lock(jobs_.mu());
  jobs_.EndLocked(job, JobPhase::kDone);
  jobs_.ReleaseLocked(job);
  PumpLocked();
}

}  // namespace backfill
