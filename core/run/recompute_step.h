// Recompute step (step 3 of the playbook): a job's partitions recomputed
// into staging, each with a durable checkpoint, and the early cutoff
// (core/plan/early_cutoff.h) applied as they go.
//
//   PrepareStaging / EnsurePrepared  the job's staging in the engine, less
//       the partitions the early cutoff let go of, which the engine releases
//       again (a restart may have come between a task's record and its
//       release).
//   RecomputePartition  one attempt at one partition: the engine stages it,
//       the clock times it, and the result becomes its checkpoint.
//   RunBatch  a worker's batch of a job's partitions, in order: a dependent
//       whose in-job inputs all came out unchanged or skipped is skipped
//       when its lineage is still current; the others are staged, and one
//       whose rows equal its published version is recorded UNCHANGED and
//       released. When the engine offers staging groups
//       (Engine::OpenStagingGroup) and the batch holds more than one
//       partition, the partitions of one dataset in a row are transformed
//       one by one and written to staging together, in one warehouse
//       transaction; their checkpoints are queued only after that write.
//       Starts and checkpoints go to the task writer
//       (core/run/task_writer.h) and the batch waits once, at its end, for all
//       of them: a partition is done only once its checkpoint is durable.
//       A failure of the warehouse's storage puts the partition back
//       without spending an attempt; another failure is retried up to
//       RunnerOptions::max_attempts, then fails the job (FailJob).
//
// Which partitions a batch holds, and whether it goes on to the next one,
// is the scheduler's (the job runner's) decision: it builds the runs
// (PartitionRunOf), answers each claim, and hands the outcomes back to the
// job's task graph.
//
// Stateless; thread-safe as the StepContext is. The functions that take an
// ActiveJob take the table's lock themselves, except PartitionRunOf.

#ifndef BACKFILL_CORE_RUN_RECOMPUTE_STEP_H_
#define BACKFILL_CORE_RUN_RECOMPUTE_STEP_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "core/base/clock.h"
#include "core/model/catalog.h"
#include "core/model/job.h"
#include "core/plan/planner.h"
#include "core/ports/engine.h"
#include "core/run/active_job.h"
#include "core/run/step_context.h"
#include "core/run/task_graph.h"
#include "core/run/task_writer.h"

namespace backfill {

struct RecomputeResult {
  // The task as it is after the attempt: STAGED with rows, fingerprints and
  // inputs when `status` is OK; otherwise unchanged but for attempts,
  // duration and update time.
  PartitionTask task;
  absl::Status status;
  absl::Duration took;
  // Where the engine spent its time (StageResult::timings) when `status`
  // is OK; zero otherwise.
  StageTimings timings;
};

// Stages `task` (its attempt counted already) of `dataset` for `job_id`.
RecomputeResult RecomputePartition(Engine* engine, const Planner& planner,
                                   const Clock& clock,
                                   const std::string& job_id,
                                   const DatasetSpec& dataset,
                                   PartitionTask task);

// Prepares the staging of `layout` less the partitions the early cutoff let
// go of (`tasks` says which), then has the engine release those again.
// Retried while the warehouse's storage fails.
absl::Status PrepareStaging(const StepContext& ctx, const JobLayout& layout,
                            const TaskTable& tasks);

// Prepares the job's staging once per process (after a restart a loaded
// job is not): idempotent, keeps staging and pins. Every step that reads a
// loaded job's staging calls it first.
absl::Status EnsurePrepared(const StepContext& ctx, ActiveJob* job);

// A partition failed for good (or the job's preparation did): the job
// fails, once, and stops starting partitions; the ones in flight drain.
void FailJob(const StepContext& ctx, ActiveJob* job,
             const std::string& failure);

// One partition of a batch, from its dispatch to its end.
struct PartitionRun {
  size_t index = 0;  // into the job's tasks
  PartitionTask task;
  const DatasetSpec* spec = nullptr;  // null: not run (the job stopped
                                      // running, or the batch handed it back)
  // Early cutoff: whether the task reads only unchanged or skipped tasks of
  // the job, and what else MaySkip needs.
  bool may_skip = false;
  std::string version;
  std::vector<InputFingerprint> now_inputs;
  bool ran = false;  // RecomputePartition ran: `result` holds the task
  bool done = false, failed = false, interrupted = false;
  // The batch started it (the first always), or another took it over
  // before it did: a taken one is no longer this batch's.
  bool claimed = false, taken = false;
  TaskGraph::Outcome outcome = TaskGraph::Outcome::kChanged;
  absl::Status status;  // of its checkpoint's write
  RecomputeResult result;
};

// The run of task `index` of a running job: its task, dataset and what the
// early cutoff needs from the job's graph. Under the table's lock.
PartitionRun PartitionRunOf(const ActiveJob& job, size_t index);

// Asked for each partition of a batch after the first, before it is
// skipped or started: whether the batch still holds `run` (false: another
// batch took it over, and `run->taken` is set). When `go_on` is set, it
// gets whether the batch may start it: the job still runs and no other job
// waits for a worker. Called without the table's lock.
using ClaimPartition = std::function<bool(PartitionRun* run, bool* go_on)>;

// Runs the batch `runs` of `job`, in order (see above); the first is the
// batch's own, the others are claimed. Each run ends done, failed,
// interrupted (the runner stops), or not run (`spec` null, or handed back:
// neither done nor failed), with its task as it is now.
void RunBatch(const StepContext& ctx, ActiveJob* job, TaskWriter* writer,
              const ClaimPartition& claim, std::vector<PartitionRun>* runs);

}  // namespace backfill

#endif  // BACKFILL_CORE_RUN_RECOMPUTE_STEP_H_
