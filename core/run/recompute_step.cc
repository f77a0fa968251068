#include "core/run/recompute_step.h"

#include <memory>
#include <optional>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "core/base/plural.h"
#include "core/base/status_macros.h"
#include "core/plan/early_cutoff.h"
#include "core/run/crash_point.h"

namespace backfill {
namespace {

using Storage = JobObserver::Storage;

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

// Early cutoff: the newest lineage record of a partition (nullopt: none),
// read with retries.
absl::StatusOr<std::optional<LineageRecord>> LatestLineage(
    const StepContext& ctx, const std::string& dataset,
    const std::string& partition) {
  std::optional<LineageRecord> latest;
  RETURN_IF_ERROR(ctx.Persist(
      Storage::kStateStore,
      absl::StrCat("reading the lineage of ", dataset, "/", partition),
      [&]() -> absl::Status {
        ASSIGN_OR_RETURN(std::vector<LineageRecord> lineage,
                         ctx.store()->GetLineage(dataset, partition));
        latest.reset();
        if (!lineage.empty()) latest = std::move(lineage.front());
        return absl::OkStatus();
      }));
  return latest;
}

// Early cutoff: the engine lets go of one partition of job `id`.
absl::Status ReleaseCutOff(const StepContext& ctx, const std::string& id,
                           const DatasetSpec& dataset,
                           const std::string& partition) {
  CrashPoint("cutoff.before_release");
  return ctx.Persist(
      Storage::kWarehouse,
      absl::StrCat("releasing ", dataset.name, "/", partition, " from ", id),
      [&] {
        return ctx.engine()->ReleasePartitions(id, dataset, {partition});
      });
}

// Skips `run` when its own partition is as the job would make it
// (early_cutoff.h): recorded SKIPPED, then released. Anything that fails
// here runs it instead; a runner that stops meanwhile interrupts it.
void SkipIfCurrent(const StepContext& ctx, const std::string& id,
                   const std::string& requested,
                   const absl::StatusOr<std::optional<LineageRecord>>& latest,
                   PartitionRun* run) {
  const PartitionTask& task = run->task;
  if (!latest.ok() || !latest->has_value() ||
      !MaySkip(task.dataset, requested, run->version, &**latest,
               run->now_inputs)) {
    return;
  }
  PartitionTask skipped = task;
  skipped.state = TaskState::kSkipped;
  skipped.rows_written = 0;
  // What the warehouse keeps holding, as its lineage recorded it.
  skipped.output_fingerprint = (*latest)->output_fingerprint;
  skipped.inputs.clear();
  skipped.last_error.clear();
  skipped.duration_seconds = 0;
  skipped.update_time = ctx.clock()->Now();
  absl::Status s =
      ctx.Persist(Storage::kStateStore,
                  absl::StrCat("recording that ", task.dataset, "/",
                               task.partition, " of ", id, " is skipped"),
                  [&] { return ctx.store()->UpdateTask(skipped); });
  if (s.ok()) s = ReleaseCutOff(ctx, id, *run->spec, task.partition);
  if (s.ok()) {
    run->task = std::move(skipped);
    run->done = true;
    run->outcome = TaskGraph::Outcome::kSkipped;
    if (ctx.observer() != nullptr) {
      ctx.observer()->OnPartitionCheckpointed(run->task.dataset,
                                              run->task.state, 0);
    }
  } else if (ctx.Stopping()) {
    // Interrupted: a restart decides again (or releases what the store
    // recorded skipped).
    run->interrupted = true;
  }
}

// The end of a partition that ran, once its checkpoint was written
// (run->status) or failed to be.
void EndRun(const StepContext& ctx, ActiveJob* job, PartitionRun* run) {
  const std::string& id = job->job.id;
  RecomputeResult& result = run->result;
  absl::Status s = run->status;
  // Staged (or its staging failed): the result holds the task.
  if (s.ok() && run->outcome == TaskGraph::Outcome::kUnchanged) {
    s = ReleaseCutOff(ctx, id, *run->spec, run->task.partition);
  }
  if (!s.ok() && result.task.state == TaskState::kUnchanged) {
    // Not let go of after all: what follows records it again.
    result.task.state = TaskState::kStaged;
    run->outcome = TaskGraph::Outcome::kChanged;
  }
  run->task = result.task;
  PartitionTask& task = run->task;
  const RunnerOptions& options = ctx.options();
  if (s.ok()) {
    run->done = true;
    if (ctx.observer() != nullptr) {
      ctx.observer()->OnPartitionCheckpointed(
          task.dataset, task.state,
          task.state == TaskState::kStaged ? task.rows_written : 0);
    }
  } else if (ctx.Stopping()) {
    // Interrupted by a shutdown: not an attempt; it runs after a restart.
    task.state = TaskState::kPending;
    --task.attempts;
    task.last_error = "interrupted by shutdown";
    ctx.store()->UpdateTask(task).IgnoreError();
  } else if (MayPass(s)) {
    // The warehouse's storage failed (a full disk, an I/O error): not the
    // partition's fault; wait and try again without spending an attempt.
    ctx.alarm()->Failed(
        Storage::kWarehouse,
        absl::StrCat("staging ", task.dataset, "/", task.partition, " of ", id),
        s);
    task.state = TaskState::kPending;
    --task.attempts;
    task.last_error = std::string(s.message());
    ctx.store()->UpdateTask(task).IgnoreError();
    ctx.clock()->SleepFor(options.max_backoff / 6);
  } else {
    task.last_error = std::string(s.message());
    const bool again = Retryable(s) && task.attempts < options.max_attempts;
    task.state = again ? TaskState::kPending : TaskState::kFailed;
    // Best effort: a failure to record reruns the partition at recovery.
    ctx.store()->UpdateTask(task).IgnoreError();
    if (again) {
      if (!ctx.Stopping()) {
        ctx.clock()->SleepFor(options.retry_backoff * task.attempts);
      }
    } else {
      run->failed = true;
      FailJob(ctx, job,
              absl::StrCat("partition ", task.partition, " of ", task.dataset,
                           " failed after ",
                           Plural(task.attempts, "attempt", "attempts"),
                           ", nothing was published: ", task.last_error));
    }
  }
}

// The task after an attempt that took `took` and staged `staged` (or
// failed to).
RecomputeResult AttemptResult(const Clock& clock, PartitionTask task,
                              absl::StatusOr<StageResult> staged,
                              absl::Duration took) {
  RecomputeResult out;
  out.took = took;
  task.update_time = clock.Now();
  task.duration_seconds = absl::ToDoubleSeconds(out.took);
  if (staged.ok()) {
    task.state = TaskState::kStaged;
    task.rows_written = staged->rows_written;
    task.output_fingerprint = std::move(staged->output_fingerprint);
    task.inputs = std::move(staged->inputs);
    task.last_error.clear();
    out.timings = staged->timings;
  } else {
    out.status = staged.status();
    task.last_error = std::string(staged.status().message());
  }
  out.task = std::move(task);
  return out;
}

}  // namespace

RecomputeResult RecomputePartition(Engine* engine, const Planner& planner,
                                   const Clock& clock,
                                   const std::string& job_id,
                                   const DatasetSpec& dataset,
                                   PartitionTask task) {
  const absl::Time start = clock.Now();
  absl::StatusOr<StageResult> staged =
      engine->StagePartition(job_id, dataset, task.partition,
                             planner.InputsOf(dataset, task.partition));
  return AttemptResult(clock, std::move(task), std::move(staged),
                       clock.Now() - start);
}

absl::Status PrepareStaging(const StepContext& ctx, const JobLayout& layout,
                            const TaskTable& tasks) {
  const JobLayout kept = WithoutCutOff(layout, tasks);
  RETURN_IF_ERROR(
      ctx.Persist(Storage::kWarehouse,
                  absl::StrCat("preparing the staging of ", layout.job_id),
                  [&] { return ctx.engine()->PrepareJob(kept); }));
  // Not a structured binding: C++17 lets no lambda capture one.
  for (const auto& cut : CutOffPartitions(layout, tasks)) {
    const auto& dataset = cut.first;
    const auto& partitions = cut.second;
    RETURN_IF_ERROR(ctx.Persist(
        Storage::kWarehouse,
        absl::StrCat("releasing the unchanged and skipped partitions of ",
                     dataset->name, " from ", layout.job_id),
        [&] {
          return ctx.engine()->ReleasePartitions(layout.job_id, *dataset,
                                                 partitions);
        }));
  }
  return absl::OkStatus();
}

absl::Status EnsurePrepared(const StepContext& ctx, ActiveJob* job) {
  JobLayout layout;
  TaskTable tasks;
  {
    absl::MutexLock lock(ctx.jobs()->mu());
    if (job->prepared) return absl::OkStatus();
    layout = job->layout;
    tasks = job->tasks;
  }
  RETURN_IF_ERROR(PrepareStaging(ctx, layout, tasks));
  absl::MutexLock lock(ctx.jobs()->mu());
  job->prepared = true;
  return absl::OkStatus();
}

void FailJob(const StepContext& ctx, ActiveJob* job,
             const std::string& failure) {
  {
    absl::MutexLock lock(ctx.jobs()->mu());
    if (job->phase != JobPhase::kRunning &&
        job->phase != JobPhase::kPreparing && job->phase != JobPhase::kPaused) {
      return;
    }
    job->phase = JobPhase::kFailing;
    job->failure = failure;
    if (job->graph) job->graph->ClearReady();
  }
  // Recorded at once, so that the job never looks runnable while its
  // in-flight partitions drain; the settle records it if this could not.
  ctx.Move(job, JobState::kFailed, failure, JobPhase::kFailing).IgnoreError();
}

PartitionRun PartitionRunOf(const ActiveJob& job, size_t index) {
  PartitionRun run;
  run.index = index;
  run.task = job.tasks.Task(index);
  run.spec = job.spec_of[index];
  run.may_skip = run.spec != nullptr &&
                 run.task.dataset != job.job.request.dataset &&
                 job.graph->ReadsOnlyUnchanged(index);
  if (run.may_skip) {
    for (const DatasetPlan& dp : job.job.plan.datasets) {
      if (dp.dataset == run.task.dataset) run.version = dp.transform_version;
    }
    for (size_t u : job.graph->IdentityInputs(index)) {
      run.now_inputs.push_back({job.tasks.dataset(u),
                                std::string(job.tasks.partition(u)),
                                std::string(job.tasks.output_fingerprint(u)),
                                job.tasks.rows_written(u)});
    }
  }
  return run;
}

void RunBatch(const StepContext& ctx, ActiveJob* job, TaskWriter* writer,
              const ClaimPartition& claim, std::vector<PartitionRun>* runs) {
  std::vector<PartitionRun>& items = *runs;
  if (items.empty()) return;
  items.front().claimed = true;
  const std::string& id = job->job.id;
  std::string requested;
  {
    absl::MutexLock lock(ctx.jobs()->mu());
    requested = job->job.request.dataset;
  }
  // The newest lineage of each partition of the batch, read at once. It
  // holds to the batch's end: a partition's lineage changes only by a
  // publish or a rollback of a job that holds it, and this job does (see
  // Admission). When that read fails, each partition reads its own.
  std::optional<std::vector<std::optional<LineageRecord>>> newest;
  if (items.size() > 1 && items.front().spec != nullptr) {
    std::vector<std::pair<std::string, std::string>> keys;
    keys.reserve(items.size());
    for (const PartitionRun& it : items) {
      keys.emplace_back(it.task.dataset, it.task.partition);
    }
    absl::StatusOr<std::vector<std::optional<LineageRecord>>> read =
        ctx.store()->NewestLineages(keys);
    if (read.ok() && read->size() == items.size()) newest = *std::move(read);
  }
  auto latest_of =
      [&](size_t k) -> absl::StatusOr<std::optional<LineageRecord>> {
    if (newest) return (*newest)[k];
    return LatestLineage(ctx, items[k].task.dataset, items[k].task.partition);
  };
  for (size_t k = 0; k < items.size(); ++k) {
    PartitionRun& it = items[k];
    if (!it.may_skip || !claim(&it, nullptr)) continue;
    SkipIfCurrent(ctx, id, requested, latest_of(k), &it);
  }

  // Each partition in turn; its start and its checkpoint go to the task
  // writer (task_writer.h), which commits them with whatever else is queued
  // while this worker stages the next partitions. The batch then waits once
  // for its checkpoints: a partition is done only once its checkpoint is
  // committed.
  // The writes queued and not yet written. Shared with the writer's
  // callbacks, so that it outlives the last one's unlock.
  struct Unwritten {
    absl::Mutex mu;
    int n ABSL_GUARDED_BY(mu) = 0;
  };
  auto unwritten = std::make_shared<Unwritten>();
  auto queue = [&](const PartitionTask& row, PartitionRun* checkpointed) {
    {
      absl::MutexLock lock(&unwritten->mu);
      ++unwritten->n;
    }
    writer->Write({row}, [unwritten, checkpointed](const absl::Status& s) {
      absl::MutexLock lock(&unwritten->mu);
      if (checkpointed != nullptr) checkpointed->status = s;
      --unwritten->n;
    });
  };
  // A partition's end once its staging is known: a staged one's checkpoint
  // is queued (UNCHANGED when its rows are the published ones).
  auto staged = [&](size_t k) {
    PartitionRun& it = items[k];
    RecomputeResult& result = it.result;
    if (ctx.observer() != nullptr) {
      ctx.observer()->OnPartitionAttempt(result.status.ok(), result.took);
      if (result.status.ok()) {
        ctx.observer()->OnPartitionStageTimings(it.spec->name, result.timings);
      }
    }
    absl::Status s = result.status;
    // A staged partition is a warehouse write that worked.
    if (s.ok()) ctx.alarm()->Succeeded(Storage::kWarehouse);
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
  };
  // Short partitions of one dataset in a row are staged as a group when
  // the engine offers one (Engine::OpenStagingGroup): each transform as the
  // batch gets to it, then one write for all of them, after which their
  // checkpoints are queued. `grouped`: the items in `group` not yet written.
  std::unique_ptr<StagingGroup> group;
  const DatasetSpec* group_spec = nullptr;
  bool groups = items.size() > 1;
  std::vector<size_t> grouped;
  auto write_group = [&] {
    if (group == nullptr) return;
    const absl::Time start = ctx.clock()->Now();
    absl::StatusOr<absl::Duration> wrote = group->Commit();
    const absl::Duration took = ctx.clock()->Now() - start;
    group.reset();
    group_spec = nullptr;
    const int64_t n = static_cast<int64_t>(grouped.size());
    for (size_t k : grouped) {
      PartitionRun& it = items[k];
      RecomputeResult& result = it.result;
      // Each its share of the write.
      result.took += took / n;
      if (wrote.ok()) {
        result.task.duration_seconds = absl::ToDoubleSeconds(result.took);
        result.timings.stage_write = *wrote / n;
      } else {
        result =
            AttemptResult(*ctx.clock(), it.task, wrote.status(), result.took);
      }
      staged(k);
    }
    grouped.clear();
  };
  bool first = true;
  for (size_t k = 0; k < items.size(); ++k) {
    PartitionRun& it = items[k];
    // Partitions not yet started are handed back when the runner stops, the
    // job no longer runs (paused, failing, cancelled) or another job waits
    // for a worker: batches never delay another job's turn by more than one
    // partition. Those another worker took over are left to it.
    bool go_on = true;
    if (k > 0 && !claim(&it, &go_on)) continue;
    if (it.spec == nullptr || it.done || it.interrupted) continue;
    if (!first && (ctx.Stopping() || !go_on)) {
      it.spec = nullptr;
      continue;
    }
    first = false;
    it.task.state = TaskState::kRunning;
    ++it.task.attempts;
    it.task.update_time = ctx.clock()->Now();
    // The start is not waited for before staging: a checkpoint queued after
    // it supersedes it, and a crash before it is written only leaves the
    // attempt uncounted. (The batch waits for it at its end, so that what
    // it writes about a failed partition comes after.)
    queue(it.task, nullptr);
    // What the task reads, by the upstream edges of the job's catalog.
    const Planner planner(job->catalog.get(), ctx.engine());
    it.ran = true;
    if (group_spec != it.spec) write_group();
    if (group == nullptr && groups) {
      absl::StatusOr<std::unique_ptr<StagingGroup>> opened =
          ctx.engine()->OpenStagingGroup(id, *it.spec);
      if (opened.ok() && *opened != nullptr) {
        group = *std::move(opened);
        group_spec = it.spec;
      } else {
        groups = false;  // the engine stages each partition by itself
      }
    }
    if (group != nullptr) {
      const absl::Time start = ctx.clock()->Now();
      absl::StatusOr<StageResult> kept = group->Stage(
          it.task.partition, planner.InputsOf(*it.spec, it.task.partition));
      const bool ok = kept.ok();
      it.result = AttemptResult(*ctx.clock(), it.task, std::move(kept),
                                ctx.clock()->Now() - start);
      if (ok) {
        grouped.push_back(k);
      } else {
        staged(k);
      }
      continue;
    }
    it.result = RecomputePartition(ctx.engine(), planner, *ctx.clock(), id,
                                   *it.spec, it.task);
    staged(k);
  }
  write_group();
  {
    absl::MutexLock lock(&unwritten->mu);
    // Waited for: the writer commits them without gathering more.
    if (unwritten->n > 0) writer->Hurry();
    unwritten->mu.Await(absl::Condition(
        +[](Unwritten* u)
             ABSL_EXCLUSIVE_LOCKS_REQUIRED(u->mu) { return u->n == 0; },
        unwritten.get()));
  }
  for (PartitionRun& it : items) {
    if (it.ran) EndRun(ctx, job, &it);
  }
}

}  // namespace backfill
