// The domain model of a backfill: the request, its plan, the job with its
// life-cycle state, its partition tasks, and the lineage and audit records
// it leaves. Plain value types; not synchronized (copy them across threads).

#ifndef BACKFILL_CORE_MODEL_JOB_H_
#define BACKFILL_CORE_MODEL_JOB_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/model/check_result.h"
#include "core/model/diff.h"

namespace backfill {

enum class JobState {
  kQueued,
  kRunning,
  kValidating,
  kAwaitingApproval,
  kPublishing,
  kConfirming,
  kSucceeded,
  kFailed,
  kCancelled,
  kPaused,
  kRolledBack,
  kValidationFailed,
  kDownstreamUnhealthy,
};
inline constexpr int kJobStateCount = 13;

// "QUEUED", "RUNNING", ... (upper case, as the API and the state store
// spell them).
const char* JobStateName(JobState state);
absl::StatusOr<JobState> ParseJobState(std::string_view name);
// SUCCEEDED, FAILED, CANCELLED, ROLLED_BACK, VALIDATION_FAILED,
// DOWNSTREAM_UNHEALTHY.
bool IsTerminal(JobState state);

enum class TaskState {
  kPending,
  kRunning,
  kStaged,  // recomputed into staging, checkpointed
  kPublished,
  kFailed,
  kCancelled,
  // Early cutoff (early_cutoff.h): recomputed, and its rows are identical
  // to the published version, so it is not republished.
  kUnchanged,
  // Early cutoff: a dependent every in-job input of which was unchanged (or
  // skipped); never run, never published.
  kSkipped,
};
inline constexpr int kTaskStateCount = 8;
const char* TaskStateName(TaskState state);  // "PENDING", ...
absl::StatusOr<TaskState> ParseTaskState(std::string_view name);

// How much of a job a read loads. kFull: everything, the plan's partition
// lists (DatasetPlan::partitions and partition_reasons) included. kBasic:
// the same without those lists, which grow with the job's size (a job may
// have 100,000 partitions); counts, costs and per-dataset partition counts
// are complete.
enum class JobView { kBasic, kFull };

// What a client asks for. Scope: [from, to), an explicit partition list,
// affected_by or auto_detect; none for an unpartitioned dataset.
struct BackfillRequest {
  std::string dataset;
  std::string from;
  std::string to;
  std::vector<std::string> partitions;
  std::string reason;
  std::string ticket;
  std::string requested_by;
  bool exclude_downstream = false;
  // Scheduling: higher priorities get workers first (default 0); at most
  // `max_parallel` partitions of the job run at once (0: no own limit).
  int priority = 0;
  int max_parallel = 0;
  // "DATASET: PREDICATE" (core/plan/affected_by.h): the partitions of the
  // target affected by the partitions of DATASET that hold a row where
  // PREDICATE is true. A scope of its own: excludes from, to and partitions.
  std::string affected_by;
  // --auto (core/plan/stale_lineage.h): every published partition of the target
  // whose recorded lineage no longer matches (its transform version
  // changed, or an input it read changed since). A scope of its own:
  // excludes from, to, partitions and affected_by.
  bool auto_detect = false;

  // Budget: a submit whose estimated cost (kCostUnit) is above it is
  // refused; 0: no limit of the request's own (see core/plan/cost_budget.h).
  double max_cost = 0;

  // Entity keys (`--keys`, core/model/entity_keys.h): in the partitions of the
  // target (a dataset declaring `entity_key`), only the rows whose entity
  // key is one of these are replaced. Empty: whole partitions. Dependents
  // are recomputed by partition. Sorted and unique once planned.
  std::vector<std::string> keys = {};

  // Plan partitions that their datasets' frozen rules close (which only an
  // approver may ask for; the server checks the role), instead of leaving
  // them out (core/plan/frozen_filter.h).
  bool override_frozen = false;
};

// n of a job id "bf-<n>" (n >= 1), the order in which the state store
// assigned them; 0 for an id of another form, which it never assigns.
int64_t JobNumberOf(std::string_view id);

// Cost in estimated input rows read.
inline constexpr char kCostUnit[] = "input_rows";
struct Cost {
  double backfill = 0;
  double full_reload = 0;
  // The budget the estimate was checked against (the request's max_cost
  // for a plan's total, the dataset's `max_cost` for a dataset); 0: none.
  double max_cost = 0;
  // Set when the estimate is over a budget: a submit of the plan is refused
  // (FAILED_PRECONDITION) with this message.
  std::string refused = {};
  double ratio() const { return full_reload > 0 ? backfill / full_reload : 0; }
};

struct DatasetPlan {
  std::string dataset;
  std::vector<std::string> partitions;  // sorted, unique
  std::string reason;                   // "requested" / "downstream of X"
  // The transform version the job computes with, fixed when it is planned:
  // a job never mixes partitions of two versions of the logic.
  std::string transform_version;
  Cost cost;
  // Why each partition is planned, aligned with `partitions`: "requested",
  // "downstream of X", "downstream of X via rollup", "... via lookback 7",
  // "... via all" (see planner.h); with --auto, why a requested partition
  // is stale (see stale_lineage.h). Empty strings for a job stored before
  // reasons were kept; empty when the partitions were not loaded.
  std::vector<std::string> partition_reasons = {};
  // How cost.backfill was estimated (core/plan/cost_estimator.h): the number of
  // partitions estimated from the input rows of their last successful run,
  // and "history" (all of them), "row_counts" (none) or "mixed".
  int64_t partitions_from_history = 0;
  std::string estimate_source = {};
  // Input rows the job's tasks of this dataset actually read so far
  // (staged or published); filled on job reads, 0 in a plan.
  double actual_cost = 0;
  // The entity keys whose rows the job replaces in this dataset's
  // partitions (the request's keys, on its target only); empty: whole
  // partitions.
  std::vector<std::string> keys = {};
  // How many partitions of the dataset the job has: filled on job reads,
  // whether or not `partitions` was loaded; 0 in a plan (whose count is
  // partitions.size()).
  int64_t partition_count = 0;
};

struct Conflict {
  std::string job_id;
  std::string dataset;
  std::string partition;
};

// Partitions of one dataset that its frozen rule closes, which a plan left
// out (or, overridden, kept).
struct FrozenPartitions {
  std::string dataset;
  std::string rule;                     // "frozen.before 2025-01-01"
  std::vector<std::string> partitions;  // sorted
  bool overridden = false;
};

struct Plan {
  std::vector<DatasetPlan> datasets;  // topological order
  // What the datasets' frozen rules closed, by dataset name.
  std::vector<FrozenPartitions> frozen = {};
  Cost cost;
  // Filled by PlanBackfill only; a submitted job never has any (a conflict
  // refuses the submit), so the state store does not keep them.
  std::vector<Conflict> conflicts;
  int64_t total_partitions() const;
};

struct PartitionCounts {
  int64_t total = 0;
  int64_t pending = 0;
  int64_t running = 0;
  int64_t staged = 0;
  int64_t published = 0;
  int64_t failed = 0;
  int64_t cancelled = 0;
  // Early cutoff: recomputed identical to the published version (not
  // republished), and dependents dropped because of that (never run).
  int64_t unchanged = 0;
  int64_t skipped = 0;
};

// How a job was rolled back (state ROLLED_BACK).
struct RollbackInfo {
  std::string requested_by;
  std::string reason;
  absl::Time at = absl::InfinitePast();
  bool forced = false;  // --force: later jobs were rolled back with it
  // Set on a later job rolled back by the forced rollback of `with_job`.
  std::string with_job;
  // On the job named in the request: the later jobs rolled back with it.
  std::vector<std::string> also_rolled_back;
  int64_t partitions = 0;  // (dataset, partition) pairs restored
  int64_t rows = 0;        // rows restored into them
};

// An operator's decision to publish a job held for it: one in
// AWAITING_APPROVAL, or (with override) one that failed validation.
struct Approval {
  std::string approved_by;
  std::string reason;
  // The job failed validation and the operator publishes it anyway; a
  // restart re-checks only that its staging is intact, not the checks the
  // operator overrode.
  bool override_validation = false;
  JobState from_state = JobState::kAwaitingApproval;  // the state approved
  absl::Time approved_at = absl::InfinitePast();
};

// What the latest confirmation of a job (the confirm step, step 6) found
// for one downstream consumer of a dataset it republished.
struct ConsumerFinding {
  std::string dataset;
  std::string consumer;
  bool healthy = false;
  // What was confirmed, or why not (the partition, expected and served
  // values).
  std::string message;
  absl::Duration latency;  // from the invalidation to the last probe
  absl::Time at = absl::InfinitePast();  // when the confirmation ended
};

// A downstream consumer's standing over every job that confirmed it: the
// jobs still DOWNSTREAM_UNHEALTHY whose latest confirmation found it
// unhealthy (none: its last word is healthy).
struct ConsumerStanding {
  std::string dataset;
  std::string consumer;
  std::vector<std::string> unhealthy_jobs;  // in job creation order
};

struct Job {
  std::string id;  // "bf-<n>", assigned by the state store
  JobState state = JobState::kQueued;
  BackfillRequest request;
  std::string idempotency_key;
  // Hash of the normalized request, compared on idempotent re-submits.
  std::string request_fingerprint;
  Plan plan;
  PartitionCounts counts;  // filled on reads
  double actual_cost = 0;  // input rows read so far
  int64_t rows_written = 0;
  // Over the job's tasks recomputed so far (STAGED, PUBLISHED or UNCHANGED)
  // with a recorded duration: how many, and their durations summed. Filled
  // on reads; the ETA of core/run/progress.h is estimated from them.
  int64_t timed_partitions = 0;
  double timed_seconds = 0;
  std::string message;  // last state change's reason / error
  // Why the job waits for an approval once validated whatever its datasets
  // declare (a replay policy's `approval: required` or `max_cost`); "":
  // only as its datasets' `require_approval` says.
  std::string approval_hold;
  absl::Time create_time = absl::InfinitePast();
  absl::Time update_time = absl::InfinitePast();
  absl::Time start_time = absl::InfinitePast();  // InfinitePast: not yet
  absl::Time end_time = absl::InfinitePast();
  std::optional<RollbackInfo> rollback;  // set once ROLLED_BACK
  // Set once an operator approved the job (ApproveJob).
  std::optional<Approval> approval;
  // The job's diff per dataset, once validation computed it. Filled by
  // BackfillManager::GetJob only (the state store keeps the diff apart).
  std::vector<DiffSummary> diff;
  // The validation's check results (see check_result.h); filled by
  // BackfillManager::GetJob only.
  std::vector<CheckResult> checks;
  // Per consumer, what the job's latest confirmation found; filled by
  // BackfillManager::GetJob only.
  std::vector<ConsumerFinding> consumers;
};

// The fingerprint of one input partition a task read.
struct InputFingerprint {
  std::string dataset;
  std::string partition;  // "" for a whole (pinned) table
  std::string fingerprint;
  int64_t rows = 0;
};

struct PartitionTask {
  std::string job_id;
  std::string dataset;
  std::string partition;
  TaskState state = TaskState::kPending;
  int attempts = 0;
  std::string last_error;
  int64_t rows_written = 0;
  std::string output_fingerprint;
  std::vector<InputFingerprint> inputs;
  double duration_seconds = 0;
  absl::Time update_time = absl::InfinitePast();
  // Filled on reads; not written by UpdateTask. The task's position in its
  // job's plan order (0, 1, ...: datasets in plan order, then partitions),
  // and why the partition is planned (DatasetPlan::partition_reasons).
  int64_t ordinal = 0;
  std::string reason = {};
};

// What made a version of a partition: a job's publish, or the rollback of
// a job (which restores the rows that job replaced).
enum class LineageAction { kPublish, kRollback };
const char* LineageActionName(LineageAction action);  // "publish", "rollback"
absl::StatusOr<LineageAction> ParseLineageAction(std::string_view name);

// One published version of one (dataset, partition).
struct LineageRecord {
  std::string dataset;
  std::string partition;
  // The job published (kPublish) or rolled back (kRollback). For a
  // rollback: output_fingerprint and row_count are those of the restored
  // rows, reason and requested_by the rollback's, transform_version the
  // restored version's ("" when the partition was empty before the job).
  std::string job_id;
  LineageAction action = LineageAction::kPublish;
  std::string transform_version;
  std::vector<InputFingerprint> inputs;
  std::string output_fingerprint;
  int64_t row_count = 0;
  std::string reason;
  std::string ticket;
  std::string requested_by;
  absl::Time published_at = absl::InfinitePast();
  // The approval the job was published with, if it needed one.
  std::optional<Approval> approval;
  // The store's append order of lineage records (larger: recorded later,
  // whatever the clocks said); 0 for a record not read from a store.
  int64_t id = 0;
};

struct AuditEvent {
  int64_t seq = 0;
  std::string job_id;  // "" for an event of a replay policy
  // What the event is about when it is not a job's state change:
  // "replay_policy:<dataset>" for a policy paused or resumed ("" for a
  // job's event).
  std::string subject;
  std::string from_state;  // "" for creation
  std::string to_state;
  std::string message;
  absl::Time at = absl::InfinitePast();
};

}  // namespace backfill

#endif  // BACKFILL_CORE_MODEL_JOB_H_
