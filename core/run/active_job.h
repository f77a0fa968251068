// ActiveJob: one job the runner holds in memory while it is admitted — the
// job as stored, the catalog snapshot it runs with, where the runner has it
// (JobPhase), its tasks with their dependency graph and layout once loaded,
// and the counters of its dispatch. Also the two ways one is built from the
// store: the layout of a job under a catalog (LayoutOf) and the loading of
// its tasks and graph (LoadJob).
//
// Ownership: the job table (job_table.h) owns every ActiveJob; `layout` and
// `spec_of` point into `catalog`, which the job holds.
// Thread-safety: not thread-safe by itself. Its fields are guarded by the
// table's lock (JobTable::mu()), except `catalog` (set before the job is
// shared, never changed: read without the lock) and `transition_mu`, which
// serializes the job's moves (StepContext::Move). A closure that works on a
// job counts itself in `busy`, which keeps the job in the table.

#ifndef BACKFILL_CORE_RUN_ACTIVE_JOB_H_
#define BACKFILL_CORE_RUN_ACTIVE_JOB_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "core/model/catalog.h"
#include "core/model/job.h"
#include "core/model/task_table.h"
#include "core/ports/engine.h"
#include "core/ports/state_store.h"
#include "core/run/task_graph.h"

namespace backfill {

// Where the runner has a job.
enum class JobPhase {
  kWaiting,     // QUEUED: admitted, waiting for earlier overlapping jobs
  kPreparing,   // staging and pins are being prepared
  kRunning,     // RUNNING: partitions are dispatched
  kPaused,      // PAUSED: nothing starts; running partitions finish
  kFinishing,   // validating, publishing, confirming
  kFailing,     // a partition failed for good: draining
  kCancelling,  // cancelled: draining
  kSettling,    // drained; its end is being written (or reserved for a
                // decision: an approval, a retry, a supersede)
  kHeld,        // FAILED (staging kept), VALIDATION_FAILED or
                // AWAITING_APPROVAL: waits for a decision
  kDone,        // ended; forgotten once no closure uses it
};

struct ActiveJob {
  Job job;  // request, plan (with partitions), key, message
  // The catalog the job runs with, to its end; layout and spec_of point
  // into it. Set before the job is shared and never changed: read without
  // the lock.
  std::shared_ptr<const Catalog> catalog;
  JobState state = JobState::kQueued;
  JobPhase phase = JobPhase::kWaiting;
  JobPhase settling_from = JobPhase::kFailing;

  bool loaded = false;  // tasks, specs, layout and graph below are built
  JobLayout layout;
  bool layout_complete = true;
  TaskTable tasks;
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
  // with the batch that holds it now: a free worker may take them over,
  // and a batch starts only those still its own.
  std::map<size_t, uint64_t> held;
  // The average time to stage one of its partitions (seconds; negative:
  // none staged yet in this process), for the size of its batches.
  double stage_seconds = -1;
  int restage_rounds = 0;
  // Confirming again (ConfirmBackfill): it ended before, and was counted
  // then.
  bool reconfirming = false;
  uint64_t last_dispatch = 0;
  std::string failure;
  std::string waiting_message;  // the last "waiting for ..." recorded

  // Serializes the job's transitions (store write, then memory).
  absl::Mutex transition_mu;

  // True (once) when a failing or cancelled job has drained (nothing of it
  // in flight): it is then settling, and the caller writes its end
  // (counted in `busy`).
  bool TakeSettle();
};

// The layout of `job` under `catalog`. Partitions still to compute must use
// the logic the others used and a dataset the pipelines still declare
// (FAILED_PRECONDITION otherwise); a job whose partitions are all staged
// (or published) is finished with what it has: `*complete` is then false
// when a dataset of it is gone.
absl::StatusOr<JobLayout> LayoutOf(const Catalog& catalog, const Job& job,
                                   bool* complete);

// Loads the tasks, layout and graph of `job` from `store` (once), taking
// `mu` (the table's lock) to read and set its fields; never holds it across
// the read.
absl::Status LoadJob(StateStore* store, absl::Mutex* mu, ActiveJob* job);

}  // namespace backfill

#endif  // BACKFILL_CORE_RUN_ACTIVE_JOB_H_
