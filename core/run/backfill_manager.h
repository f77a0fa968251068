// BackfillManager: the domain core's front door, a thin facade. It checks
// and plans requests (Planner) and hands the job to the JobRunner's
// admission (job_commands.h AdmitNew), which creates it in the state store
// (idempotent per key) and admits it; the runner runs it through the
// playbook, and its commands carry out pause, resume, retry, cancel,
// approve, confirm and rollback.
//
// It owns the runner (and through it the worker pool). It does not own the
// catalog, store, engine, clock or observer; they must outlive it. The
// catalog may be a LiveCatalog (core/model/live_catalog.h) that a reload
// replaces: every request is planned with the snapshot in force when it
// arrives, and a job runs to its end with the snapshot it was planned with.
// Thread-safe: every public method may be called from any thread (the gRPC
// handlers call it concurrently).

#ifndef BACKFILL_CORE_RUN_BACKFILL_MANAGER_H_
#define BACKFILL_CORE_RUN_BACKFILL_MANAGER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/base/clock.h"
#include "core/governance/audit_log.h"
#include "core/governance/dataset_freshness.h"
#include "core/governance/job_listing.h"
#include "core/governance/partition_history.h"
#include "core/model/catalog.h"
#include "core/model/job.h"
#include "core/model/live_catalog.h"
#include "core/plan/planner.h"
#include "core/ports/engine.h"
#include "core/ports/state_store.h"
#include "core/run/job_observer.h"
#include "core/run/job_runner.h"

namespace backfill {

struct ManagerOptions {
  int workers = 2;
  int max_attempts = 3;  // per partition task
  absl::Duration retry_backoff = absl::Milliseconds(100);
  absl::Duration max_backoff = absl::Seconds(10);
  PlannerLimits planner;
  // A submit that would create a job while this many jobs are QUEUED is
  // refused (RESOURCE_EXHAUSTED, nothing created); a repeat of an existing
  // job (same idempotency key) is still answered. At least 1.
  int64_t max_queued_jobs = 1000;
  // Where the limit above is set, for the refusal's message.
  std::string max_queued_jobs_source = "ManagerOptions::max_queued_jobs";
  // How consumers are invalidated and probed (RunnerOptions); not owned.
  HttpClient* http = nullptr;
  CommandRunner* commands = nullptr;
  // This replica's leases when it is one of a group (RunnerOptions::leases);
  // not owned; null for a single process.
  LeaseKeeper* leases = nullptr;
  // Where the runner keeps temporary files (RunnerOptions::scratch_dir).
  std::string scratch_dir;
};

struct SubmitOptions {
  std::string idempotency_key;
  // Refuse (FAILED_PRECONDITION) instead of queueing behind an overlapping
  // job.
  bool no_wait = false;
  // Whether whoever asked is gone (the call was cancelled or its deadline
  // passed): asked after planning and again just before the job is
  // created; when true, nothing is created (CANCELLED). Empty: never.
  std::function<bool()> abandoned = nullptr;
  // Job::approval_hold of the job created ("": none).
  std::string approval_hold = {};
};

// A page of a job's diff (DiffBackfill).
struct DiffRequest {
  std::string id;
  std::string dataset;  // "": every dataset of the job
  int sample_rows = 3;  // per partition, 0..kDiffStoredSamples
  int64_t offset = 0;   // partitions to skip (datasets in plan order)
  int limit = 100;      // partitions in the page, >= 1
};

struct DiffPage {
  Job job;
  // The page's partitions, grouped by dataset (datasets in plan order).
  JobDiff diff;
  // Totals over every partition of the selected datasets.
  std::vector<DiffSummary> summaries;
  int64_t next_offset = 0;  // 0: this is the last page
};

struct SubmitResult {
  Job job;
  bool created = true;
};

// A hash of what the request asks for, to recognize a re-submit with the
// same idempotency key: equal for requests that differ only in the order
// or duplicates of their partitions or keys.
std::string RequestFingerprint(const BackfillRequest& r);

class BackfillManager {
 public:
  BackfillManager(const LiveCatalog* catalog, StateStore* store, Engine* engine,
                  const Clock* clock, JobObserver* observer,
                  ManagerOptions options);
  // The same with a catalog that never changes.
  BackfillManager(const Catalog* catalog, StateStore* store, Engine* engine,
                  const Clock* clock, JobObserver* observer,
                  ManagerOptions options);
  ~BackfillManager();  // calls Shutdown()

  BackfillManager(const BackfillManager&) = delete;
  BackfillManager& operator=(const BackfillManager&) = delete;

  // Resumes the jobs the store holds as unfinished and starts scheduling.
  absl::Status Start();

  // Stops taking new work, waits for running partitions to checkpoint, and
  // stops the threads. Unfinished jobs stay in the store and resume on the
  // next Start(). Idempotent.
  void Shutdown();

  // Step 1 only: the plan, with the partitions active jobs already hold
  // (a submit of it would wait for them). Writes nothing. Plan and Submit
  // both check the SQL of the plan's datasets against the warehouse first
  // (static_check.h): FAILED_PRECONDITION naming file, line and problem.
  absl::StatusOr<Plan> PlanBackfill(const BackfillRequest& request);

  // Plans and creates a job. It starts at once, or waits (QUEUED, its
  // message naming the jobs it waits for) while earlier jobs hold some of
  // its partitions. INVALID_ARGUMENT for bad requests, a missing reason, or
  // an idempotency key reused with a different request;
  // FAILED_PRECONDITION when it would wait and `no_wait` is set, or when
  // the estimate is over a budget (the request's max_cost or a dataset's
  // `max_cost`; nothing is created, the message names the limit);
  // RESOURCE_EXHAUSTED, nothing created, when max_queued_jobs jobs are
  // QUEUED already (a repeat of an existing job is still answered).
  absl::StatusOr<SubmitResult> Submit(const BackfillRequest& request,
                                      const SubmitOptions& options);

  // The job with its diff summary (Job::diff) once validation computed it,
  // its check results and consumer confirmations; kBasic leaves out the
  // plan's partition lists.
  absl::StatusOr<Job> GetJob(const std::string& id,
                             JobView view = JobView::kFull);
  absl::StatusOr<std::vector<Job>> ListJobs(const JobFilter& filter);

  // A page of jobs, newest first (core/governance/job_listing.h).
  absl::StatusOr<JobPage> ListJobPage(const JobPageQuery& query);

  // A page of one job's partitions with their tasks' states, in plan order
  // (core/governance/job_listing.h): NOT_FOUND for an unknown job,
  // INVALID_ARGUMENT for a dataset not in its plan or a bad page token.
  absl::StatusOr<PartitionPage> ListPartitions(const PartitionPageQuery& query);

  // See JobCommands (job_commands.h). `reason` is free text recorded with
  // the change.
  // `actor`: who decided, named in the audit log ("" when unknown).
  absl::StatusOr<Job> Cancel(const std::string& id, const std::string& reason,
                             const std::string& actor = "");
  absl::StatusOr<Job> Pause(const std::string& id, const std::string& reason,
                            const std::string& actor = "");
  absl::StatusOr<Job> Resume(const std::string& id, const std::string& reason,
                             const std::string& actor = "");
  absl::StatusOr<Job> Retry(const std::string& id, const std::string& reason,
                            const std::string& actor = "");

  // Rolls a published job back (JobCommands::Rollback). INVALID_ARGUMENT
  // without a reason; NOT_FOUND for an unknown id.
  absl::StatusOr<Job> Rollback(const std::string& id,
                               const RollbackRequest& request);

  // See JobCommands::Approve. INVALID_ARGUMENT without a reason or with text
  // fields too long or holding control characters.
  absl::StatusOr<Job> Approve(const std::string& id, const Approval& approval);

  // Confirms the downstream consumers of a SUCCEEDED or
  // DOWNSTREAM_UNHEALTHY job again (JobCommands::Confirm); returns the job,
  // CONFIRMING. NOT_FOUND for an unknown id; FAILED_PRECONDITION, saying
  // why, in any other state.
  // `reason` (optional) is recorded with the confirmation.
  absl::StatusOr<Job> Confirm(const std::string& id,
                              const std::string& actor = "",
                              const std::string& reason = "");

  // A page of the diff the job computed before publishing (kept after it
  // published). INVALID_ARGUMENT for a dataset not in the job's plan or a
  // sample count out of range; FAILED_PRECONDITION, naming the state, for
  // a job that has not reached validation (no diff yet).
  absl::StatusOr<DiffPage> Diff(const DiffRequest& request);

  // Blocks until the job changes after `*version` (0: return at once) or
  // `deadline` passes; returns the job and sets `*version` to its current
  // change counter. With `*version` 0 the job is in `first_view`; later
  // returns are progress updates without the plan's partition lists.
  absl::StatusOr<Job> WaitForChange(const std::string& id, uint64_t* version,
                                    absl::Time deadline,
                                    JobView first_view = JobView::kFull);
  // Blocks until job `id` ends as this daemon runs it (at once for a job it
  // does not run) or `deadline` passes. Reads nothing from the store.
  void AwaitEnded(const std::string& id, absl::Time deadline) {
    runner_.AwaitEnded(id, deadline);
  }

  // Every published version of a partition, newest first, and whether it
  // is stale now (core/governance/partition_history.h): NOT_FOUND for an
  // unknown dataset, INVALID_ARGUMENT for a value that is not of its grain.
  absl::StatusOr<PartitionHistory> ExplainPartition(
      const std::string& dataset, const std::string& partition);

  // The partitions of `dataset` that active jobs (not in a final state)
  // plan, each with the newest such job. An error reading the jobs is
  // returned as such.
  absl::StatusOr<std::map<std::string, std::string>> HeldPartitions(
      const std::string& dataset);

  // A page of a derived dataset's published partitions with how current
  // each is (core/governance/dataset_freshness.h). `context` says what its
  // replay policy last found due; the manager adds what active jobs hold
  // and the time now.
  absl::StatusOr<FreshnessPage> DatasetFreshness(const FreshnessQuery& query,
                                                 FreshnessContext context);

  // A page of the audit log, oldest first (core/governance/audit_log.h).
  absl::StatusOr<AuditPage> ListAuditEvents(const AuditQuery& query);

  // The catalog in force now (a snapshot: valid while held).
  std::shared_ptr<const Catalog> catalog() const { return catalog_->Get(); }

 private:
  // The static check of the SQL of the plan's datasets (static_check.h):
  // FAILED_PRECONDITION listing the problems.
  absl::Status CheckSql(const Catalog& catalog, const Plan& plan);
  // A planner over `catalog`.
  Planner PlannerFor(const Catalog* catalog) const;

  // Set by the constructor that takes a fixed Catalog; else null.
  const std::unique_ptr<LiveCatalog> owned_catalog_;
  const LiveCatalog* const catalog_;
  StateStore* const store_;
  Engine* const engine_;
  const PlannerLimits planner_limits_;
  const Clock* const clock_;
  JobRunner runner_;
};

}  // namespace backfill

#endif  // BACKFILL_CORE_RUN_BACKFILL_MANAGER_H_
