// StepContext: what the steps of a job's run (recompute_step.h,
// validate_step.h, diff_step.h, publish_step.h, confirm_step.h,
// rollback_step.h), its recovery (recovery.h), the operators' commands
// (job_commands.h) and the runner itself share: the state store, the
// engine, the clock, the observer, the runner's options, the job table
// (job_table.h) — and the two ways anything becomes durable:
//
//   Persist  runs a write until it succeeds, fails for good, or the runner
//            stops (CANCELLED); a failure that may pass (disk full, I/O
//            error, busy: RESOURCE_EXHAUSTED, UNAVAILABLE) is reported to
//            the observer and retried with exponential backoff on the
//            clock, and the first success after it is reported too.
//   Move     the durable move of a job to another state: the store first
//            (the transition table checked, retried as Persist does), then
//            the job in memory, then the observer; serialized per job.
//
// Ownership: borrows everything it names, which must outlive it.
// Thread-safety: thread-safe; its methods may be called from any thread,
// Move without the table's lock.

#ifndef BACKFILL_CORE_RUN_STEP_CONTEXT_H_
#define BACKFILL_CORE_RUN_STEP_CONTEXT_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "core/base/clock.h"
#include "core/model/job.h"
#include "core/ports/command_runner.h"
#include "core/ports/engine.h"
#include "core/ports/http_client.h"
#include "core/ports/state_store.h"
#include "core/run/active_job.h"
#include "core/run/job_observer.h"
#include "core/run/job_table.h"
#include "core/run/lease_keeper.h"
#include "core/run/storage_alarm.h"

namespace backfill {

struct RunnerOptions {
  int workers = 2;       // partitions recomputed at once, over all jobs
  int max_attempts = 3;  // per partition task (failures of the warehouse's
                         // storage, such as a full disk, do not count)
  absl::Duration retry_backoff = absl::Milliseconds(100);  // first wait
  absl::Duration max_backoff = absl::Seconds(10);
  // How many times a job recomputes partitions whose staged rows were lost
  // after their checkpoints before it gives up (VALIDATION_FAILED).
  int max_restage_rounds = 2;
  // A new job is refused (RESOURCE_EXHAUSTED, nothing created) while this
  // many jobs are QUEUED (job_commands.h AdmitNew); at least 1. Where the
  // limit is set, for the refusal's message.
  int64_t max_queued_jobs = 1000;
  std::string max_queued_jobs_source = "ManagerOptions::max_queued_jobs";
  // How the confirm step reaches downstream consumers (confirm_step.h);
  // not owned, may be null (a consumer that needs one is then unhealthy).
  HttpClient* http = nullptr;
  CommandRunner* commands = nullptr;
  // This replica's leases when it is one of a group (lease_keeper.h): the
  // runner then runs only the jobs it claims. Not owned; null: the runner
  // runs every job of the store (a single process).
  LeaseKeeper* leases = nullptr;
  // Where steps keep temporary files (the diff step's DiffSpill, about as
  // large as a job's diff), unnamed so that none outlives the process;
  // "": $TMPDIR, else /tmp.
  std::string scratch_dir;
};

// The step a job's lease is shown doing in `state` (LeaseKeeper::SetStep):
// "run", "validate", "publish", "confirm", or "hold" while it waits for a
// decision.
const char* LeaseStepOf(JobState state);

// A failure of storage that may pass by itself: a full disk
// (RESOURCE_EXHAUSTED), an I/O error or a busy database (UNAVAILABLE). It is
// retried, never taken as final.
bool MayPass(const absl::Status& status);

class StepContext {
 public:
  using Storage = JobObserver::Storage;

  // `observer` may be null.
  StepContext(StateStore* store, Engine* engine, const Clock* clock,
              JobObserver* observer, const RunnerOptions& options,
              JobTable* jobs)
      : store_(store),
        engine_(engine),
        clock_(clock),
        observer_(observer),
        options_(options),
        jobs_(jobs) {}

  StepContext(const StepContext&) = delete;
  StepContext& operator=(const StepContext&) = delete;

  StateStore* store() const { return store_; }
  Engine* engine() const { return engine_; }
  const Clock* clock() const { return clock_; }
  JobObserver* observer() const { return observer_; }  // may be null
  const RunnerOptions& options() const { return options_; }
  JobTable* jobs() const { return jobs_; }
  // Every durable write's outcome goes through it: failures, and the
  // recovery after them.
  StorageAlarm* alarm() const { return &alarm_; }

  // Whether the runner stops (the table's Stopping).
  bool Stopping() const { return jobs_->Stopping(); }

  // Runs `write` until it succeeds, fails for good (not a storage failure
  // that may pass), or the runner stops (CANCELLED). `what` names it for
  // the observer and messages.
  absl::Status Persist(Storage storage, const std::string& what,
                       const std::function<absl::Status()>& write) const;

  // Records `to` (store first, retried while storage fails, then memory,
  // then the observer), if the job is still in `required` phase; ABORTED
  // otherwise. Serialized per job.
  // `then`: the phase the job ends in (JobTable::EndLocked), set under the
  // same lock as its new state, so that no caller sees the new state in the
  // old phase (e.g. a cancel of a job just held for approval).
  absl::Status Move(ActiveJob* job, JobState to, const std::string& message,
                    std::optional<JobPhase> required,
                    std::optional<JobPhase> then = std::nullopt) const;

  // Tells the observer that job `id` ended in `state`, with the cost
  // estimated for it and the actual cost the store reads now.
  void ReportFinished(const std::string& id, JobState state,
                      double estimate) const;

 private:
  StateStore* const store_;
  Engine* const engine_;
  const Clock* const clock_;
  JobObserver* const observer_;
  const RunnerOptions options_;
  JobTable* const jobs_;
  mutable StorageAlarm alarm_{observer_};
};

}  // namespace backfill

#endif  // BACKFILL_CORE_RUN_STEP_CONTEXT_H_
