// StateStore: the durable record of the service's own state — jobs, their
// partition tasks and checkpoints, lineage of published partition versions,
// the audit log of state changes, and idempotency keys.
//
// The durable implementation is storage/sqlite/state/sqlite_state_store.h;
// every implementation is proven by the StateStore contract suite
// (tests/testing/state_store_contract.h) and checks a job's moves with the
// transition guards (core/model/transition_guard.h). Implementations must be
// thread-safe: the manager and its workers call concurrently. Every method
// that writes is one transaction: it happens entirely or not at all.

#ifndef BACKFILL_CORE_PORTS_STATE_STORE_H_
#define BACKFILL_CORE_PORTS_STATE_STORE_H_

#include <array>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/model/check_result.h"
#include "core/model/diff.h"
#include "core/model/job.h"

namespace backfill {

struct CreateJobResult {
  Job job;       // as stored (id assigned), or the existing job
  bool created;  // false: the idempotency key matched an existing job
};

struct JobFilter {
  std::vector<JobState> states;  // empty: any
  std::string dataset;           // "": any; else jobs whose plan has it
  int limit = 50;                // newest first; 0 or less: no limit
  // Only jobs "bf-<n>" with n < before_number (the jobs after a page's
  // last one, newest first); 0: no bound.
  int64_t before_number = 0;
  // kBasic: the jobs as GetJobProgress reads them (no partition lists).
  JobView view = JobView::kFull;
};

// The lineage of a publication, built by the caller from the job's STAGED
// tasks as the store reads them inside the publishing transaction, a page at
// a time, so that a large job's lineage is never whole in memory
// (StateStore::RecordPublication). Called by one thread, the store's, for
// the length of one call; a retried call needs a fresh one.
class PublicationLineage {
 public:
  virtual ~PublicationLineage() = default;

  // False: the store reads no task, and Add gets one empty page.
  virtual bool ReadsTasks() const { return true; }

  // Appends to *lineage (given empty) the records of `page`: STAGED tasks of
  // the job, in ordinal order, each task exactly once over the call.
  virtual void Add(std::vector<PartitionTask>&& page,
                   std::vector<LineageRecord>* lineage) = 0;

  // The audit message of the job's move, asked once every page was added.
  virtual std::string Message() const = 0;
};

// The partitions of a job's diff, handed to StateStore::ReplaceJobDiff a
// page at a time as the store writes them inside its transaction, so that
// a large job's diff is never whole in memory. Called by one thread, the
// store's, for the length of one call.
class DiffPages {
 public:
  virtual ~DiffPages() = default;

  // Goes back to the first page: the store calls it as its transaction
  // begins, and again when it runs the transaction again (the PostgreSQL
  // store does, after the server aborted it).
  virtual absl::Status Rewind() = 0;

  // The next page: some partitions (*partitions, given empty) of the
  // dataset JobDiffHeader::datasets[*dataset]. False once every page was
  // given. An error ends the store's call with it, writing nothing.
  virtual absl::StatusOr<bool> Next(size_t* dataset,
                                    std::vector<PartitionDiff>* partitions) = 0;
};

// A selection of one job's tasks (StateStore::ListTaskPage), in plan order.
struct TaskQuery {
  std::string job_id;
  std::string dataset;            // "": every dataset
  std::vector<TaskState> states;  // empty: any
  int64_t after_ordinal = -1;     // tasks with a larger ordinal
  int limit = 100;                // at most this many; 0 or less: no limit
};

struct StoreStats {
  std::array<int64_t, kJobStateCount> jobs_by_state{};  // index: JobState
  // Tasks of every job, by state (index: TaskState).
  std::array<int64_t, kTaskStateCount> tasks_by_state{};
  // Over jobs that are RUNNING: tasks in total and tasks done (staged,
  // published, unchanged or skipped).
  int64_t running_tasks_total = 0;
  int64_t running_tasks_done = 0;
  // The id of the newest lineage record (0: none). Lineage is append-only,
  // so it grows with every publish and rollback: a cheap way to notice that
  // the recorded history changed (see core/plan/stale_partition_counts.h).
  int64_t last_lineage_id = 0;
  // The seq of the newest audit event (0: none). Every job state change
  // appends exactly one and the log is append-only, so it grows with every
  // change that can alter what a job vouches for.
  int64_t last_audit_seq = 0;
};

// A selection of the audit log (StateStore::ListAuditLog).
struct AuditQuery {
  std::string job_id;                       // "": every job
  absl::Time since = absl::InfinitePast();  // events at or after it
  int64_t after_seq = 0;                    // events with a larger seq
  int limit = 100;                          // at most this many, >= 1
};

// Whether an operator paused a replay policy, kept across restarts. An
// absent dataset (never paused or resumed) is running.
struct ReplayPolicyPause {
  std::string dataset;
  bool paused = false;
  std::string reason;  // why it was paused ("" once resumed)
  std::string by;      // who paused or resumed it
  absl::Time at = absl::InfinitePast();
};

// The audit subject of `dataset`'s replay policy: "replay_policy:<dataset>".
inline std::string ReplayPolicySubject(const std::string& dataset) {
  return "replay_policy:" + dataset;
}

// The identity of a state store, created with it.
struct StoreInfo {
  std::string store_id;  // 32 hex digits, random, never changes
  absl::Time created_at = absl::InfinitePast();
  int64_t last_job_number = 0;  // the last n handed out as "bf-<n>"
};

// The version of one (dataset, partition) the recorded history vouches for
// now: what it was computed from and with. See
// StateStore::VerifiedVersions.
struct VerifiedVersion {
  std::string partition;
  // The job that published the version, or that recomputed it identical
  // to the published rows (early cutoff: an UNCHANGED task, no lineage).
  std::string job_id;
  bool unchanged = false;  // vouched for by an UNCHANGED task
  std::string transform_version;
  std::vector<InputFingerprint> inputs;  // as the task read them
};

class StateStore {
 public:
  virtual ~StateStore() = default;

  virtual absl::StatusOr<StoreInfo> Info() = 0;

  // Ids of every job in one of `states`, in job number order.
  virtual absl::StatusOr<std::vector<std::string>> ListJobIds(
      const std::vector<JobState>& states) = 0;

  // Raises the job counter to at least `n`: no later job is "bf-<m>" with
  // m <= n.
  virtual absl::Status ReserveJobNumbers(int64_t n) = 0;

  // Stores a new job in QUEUED with one PENDING task per planned
  // (dataset, partition), and an audit event. If job.idempotency_key is set
  // and a job with that key exists, stores nothing and returns that job with
  // created == false. Ignores job.id: the store assigns "bf-<n>".
  virtual absl::StatusOr<CreateJobResult> CreateJob(const Job& job,
                                                    absl::Time now) = 0;

  // The job created with `idempotency_key` (whole, as GetJob), if any;
  // nullopt for an empty key or an unknown one.
  virtual absl::StatusOr<std::optional<Job>> FindJobByKey(
      const std::string& idempotency_key) = 0;

  // The job with its plan, counts, actual cost and rows written filled in
  // from its tasks. NOT_FOUND for an unknown id.
  virtual absl::StatusOr<Job> GetJob(const std::string& id) = 0;

  // GetJob without the plan's partition lists (datasets, reasons, costs
  // and counts are complete): what progress updates need, without reading
  // or sending one string per partition each time.
  virtual absl::StatusOr<Job> GetJobProgress(const std::string& id) = 0;

  // What a reader of the job is shown: GetJob (kFull) or GetJobProgress
  // (kBasic), with its check results, consumer confirmations and, once it
  // has one, its diff summary (Job::checks, consumers, diff). A store may
  // read them in one snapshot and one call (GetBackfill's path); this
  // default makes the four calls.
  virtual absl::StatusOr<Job> GetJobForReader(const std::string& id,
                                              JobView view) {
    absl::StatusOr<Job> job =
        view == JobView::kFull ? GetJob(id) : GetJobProgress(id);
    if (!job.ok()) return job.status();
    absl::StatusOr<std::vector<CheckResult>> checks = ListCheckResults(id);
    if (!checks.ok()) return checks.status();
    job->checks = *std::move(checks);
    absl::StatusOr<std::vector<ConsumerFinding>> consumers =
        ListConsumerConfirmations(id);
    if (!consumers.ok()) return consumers.status();
    job->consumers = *std::move(consumers);
    absl::StatusOr<std::optional<std::vector<DiffSummary>>> diff =
        GetJobDiffSummary(id);
    if (!diff.ok()) return diff.status();
    if (diff->has_value()) job->diff = **std::move(diff);
    return job;
  }

  virtual absl::StatusOr<std::vector<Job>> ListJobs(
      const JobFilter& filter) = 0;

  // Tasks of a job, in plan order (dataset order of the plan, then
  // partition).
  virtual absl::StatusOr<std::vector<PartitionTask>> ListTasks(
      const std::string& job_id) = 0;

  // The tasks of query.job_id that `query` selects, in plan order (by
  // ordinal), each with its ordinal and reason. NOT_FOUND for an unknown
  // job.
  virtual absl::StatusOr<std::vector<PartitionTask>> ListTaskPage(
      const TaskQuery& query) = 0;

  // Moves the job to `to` and appends an audit event, atomically. If
  // `expected_from` is given and the job is in another state, or the move
  // is not in the job state machine's table (job_state_machine.h), changes
  // nothing and returns FAILED_PRECONDITION. Sets start_time on the first
  // move to RUNNING and end_time on a move to a terminal state.
  virtual absl::Status TransitionJob(const std::string& job_id,
                                     std::optional<JobState> expected_from,
                                     JobState to, const std::string& message,
                                     absl::Time now) = 0;

  // Replaces the job's message (e.g. which job a queued job waits for)
  // without changing its state or the audit log; FAILED_PRECONDITION if the
  // job is not in `expected_state`.
  virtual absl::Status SetJobMessage(const std::string& job_id,
                                     JobState expected_state,
                                     const std::string& message,
                                     absl::Time now) = 0;

  // Writes one task's state, attempts, error, rows, fingerprints, inputs
  // and duration (the checkpoint). NOT_FOUND if the task does not exist.
  virtual absl::Status UpdateTask(const PartitionTask& task) = 0;
  // UpdateTask of each of `tasks`, in one transaction: all are written or
  // none (NOT_FOUND if one does not exist). Many checkpoints then cost the
  // store one commit.
  virtual absl::Status UpdateTasks(const std::vector<PartitionTask>& tasks) = 0;

  // Moves the job from `expected_from` to `to` (as TransitionJob) and, in
  // the same transaction, makes every FAILED, CANCELLED or RUNNING task
  // PENDING again with its attempts reset (a retry keeps STAGED tasks).
  // Returns how many tasks were reset.
  virtual absl::StatusOr<int64_t> RetryJob(const std::string& job_id,
                                           JobState expected_from, JobState to,
                                           const std::string& message,
                                           absl::Time now) = 0;

  // Sets every task of the job in one of `from` states to `to`, atomically;
  // returns how many changed. Used on recovery (RUNNING -> PENDING) and on
  // cancel (PENDING/RUNNING -> CANCELLED).
  virtual absl::StatusOr<int64_t> UpdateTasksInState(
      const std::string& job_id, const std::vector<TaskState>& from,
      TaskState to, absl::Time now) = 0;

  // The publish step's bookkeeping, atomically: writes the lineage records
  // `lineage` builds from the job's STAGED tasks (read in pages of
  // kPublicationPage in ordinal order), marks every STAGED task of the job
  // PUBLISHED, and moves the job to `to` with an audit event saying
  // lineage.Message(). Only a job in PUBLISHING moves; the call is an
  // idempotent no-op for a job already past PUBLISHING (CONFIRMING,
  // SUCCEEDED, ...) and FAILED_PRECONDITION, writing nothing, for any other
  // state (e.g. FAILED, CANCELLED, RUNNING).
  virtual absl::Status RecordPublication(const std::string& job_id,
                                         PublicationLineage& lineage,
                                         JobState to, absl::Time now) = 0;

  // The same with lineage records given whole (no task is read).
  absl::Status RecordPublication(const std::string& job_id,
                                 const std::vector<LineageRecord>& lineage,
                                 JobState to, const std::string& message,
                                 absl::Time now);

  // The tasks a store hands PublicationLineage::Add at a time.
  static constexpr int kPublicationPage = 4096;

  // Moves the job from `expected_from` to `to` (as TransitionJob: checked
  // against the state machine, an audit event with `message`) and records
  // `approval` with it, atomically. FAILED_PRECONDITION, writing nothing,
  // when the job is in another state or already has an approval.
  virtual absl::Status ApproveJob(const std::string& job_id,
                                  JobState expected_from, JobState to,
                                  const Approval& approval,
                                  const std::string& message,
                                  absl::Time now) = 0;

  // Replaces the diff stored with job `header.job_id` (every dataset and
  // partition of it) by `header`'s datasets and the partitions `pages`
  // hands over, atomically: a reader sees the old diff or the whole new
  // one, and a failure, of `pages` too, leaves the old one. The pages may
  // come in any order. NOT_FOUND for an unknown job; FAILED_PRECONDITION
  // for a diff that lists a dataset, or a partition of one, twice;
  // INVALID_ARGUMENT for a page of a dataset the header does not list.
  //
  // The write transaction lasts as long as `pages` takes to hand the pages
  // over, so they should be at hand (the diff step reads them back from a
  // file, core/run/diff_spill.h), not computed meanwhile: the SQLite store
  // runs every call on one connection, so all its other calls wait for
  // this one, and the PostgreSQL store holds a connection (in a group, the
  // job's lease row too), whose session the daemon has the server end once
  // it idles in a transaction for half a lease.
  virtual absl::Status ReplaceJobDiff(const JobDiffHeader& header,
                                      DiffPages& pages) = 0;

  // The same with the diff given whole.
  absl::Status ReplaceJobDiff(const JobDiff& diff);

  // The diff stored with the job, restricted to `dataset` unless it is "";
  // nullopt when none was stored. Samples only with `with_samples`.
  // NOT_FOUND for an unknown job.
  virtual absl::StatusOr<std::optional<JobDiff>> GetJobDiff(
      const std::string& job_id, const std::string& dataset,
      bool with_samples) = 0;

  // The stored diff summed per dataset (Summarize of each dataset of
  // GetJobDiff), in the diff's dataset order; nullopt when none was stored.
  // NOT_FOUND for an unknown job. A store may keep the sums, so that
  // reading a job does not read one row per partition.
  virtual absl::StatusOr<std::optional<std::vector<DiffSummary>>>
  GetJobDiffSummary(const std::string& job_id) {
    absl::StatusOr<std::optional<JobDiff>> diff =
        GetJobDiff(job_id, "", /*with_samples=*/false);
    if (!diff.ok()) return diff.status();
    if (!diff->has_value()) return std::optional<std::vector<DiffSummary>>();
    std::vector<DiffSummary> out;
    for (const DatasetDiff& d : (*diff)->datasets) out.push_back(Summarize(d));
    return std::optional<std::vector<DiffSummary>>(std::move(out));
  }

  // The newest lineage record (publish or rollback, by id) of any partition
  // of `dataset`; nullopt when it has none.
  virtual absl::StatusOr<std::optional<LineageRecord>> NewestLineageOf(
      const std::string& dataset) = 0;

  // Published versions of a (dataset, partition), newest first: in the
  // reverse order they were recorded (LineageRecord::id), not by clock.
  virtual absl::StatusOr<std::vector<LineageRecord>> GetLineage(
      const std::string& dataset, const std::string& partition) = 0;

  // The newest lineage record of each (dataset, partition) of `keys`, in
  // their order (nullopt: it has none): GetLineage's first record, for the
  // partitions of a batch at once. The default asks GetLineage for each.
  virtual absl::StatusOr<std::vector<std::optional<LineageRecord>>>
  NewestLineages(const std::vector<std::pair<std::string, std::string>>& keys) {
    std::vector<std::optional<LineageRecord>> out;
    out.reserve(keys.size());
    for (const auto& key : keys) {
      absl::StatusOr<std::vector<LineageRecord>> lineage =
          GetLineage(key.first, key.second);
      if (!lineage.ok()) return lineage.status();
      out.emplace_back();
      if (!lineage->empty()) out.back() = std::move(lineage->front());
    }
    return out;
  }

  // The rollback's bookkeeping, atomically: moves `job_id` and every job
  // of `info.also_rolled_back` (later jobs rolled back with it) to
  // ROLLED_BACK with an audit event each (`message` for `job_id`,
  // `also_message` for the others), stores the rollback info (for the
  // others: forced, with_job = `job_id`, no counts) and writes the lineage
  // records (their job ids as given, action rollback). Every job must be
  // SUCCEEDED or DOWNSTREAM_UNHEALTHY: otherwise FAILED_PRECONDITION,
  // writing nothing — except that a call for a `job_id` already
  // ROLLED_BACK is an idempotent no-op (a repeat after a restart).
  // NOT_FOUND for an unknown job.
  virtual absl::Status RecordRollback(const std::string& job_id,
                                      const RollbackInfo& info,
                                      const std::vector<LineageRecord>& lineage,
                                      const std::string& message,
                                      const std::string& also_message,
                                      absl::Time now) = 0;

  // Every lineage record, of any job and action, of the (dataset,
  // partition) pairs that `job_id` published, in the order they were
  // recorded (oldest first). NOT_FOUND for an unknown job.
  virtual absl::StatusOr<std::vector<LineageRecord>> GetLineageOverlapping(
      const std::string& job_id) = 0;

  // When each of `job_ids` recorded its publication (the time of its
  // publish lineage); jobs that recorded none are left out.
  virtual absl::StatusOr<std::map<std::string, absl::Time>> PublicationTimes(
      const std::vector<std::string>& job_ids) = 0;

  // Cost history for planning: for each of `partitions` of `dataset` that
  // ran successfully before, the input rows its last successful run read —
  // the task of the newest job (by job number) in which it reached
  // PUBLISHED or UNCHANGED (recomputed, identical to the published rows).
  // Partitions that never did are absent.
  virtual absl::StatusOr<std::map<std::string, int64_t>> LastRunInputRows(
      const std::string& dataset,
      const std::vector<std::string>& partitions) = 0;

  // The current verified version of each published partition of `dataset`
  // (of those in `partitions`; every one when it is empty), by partition:
  // the newest, by job number, of
  //   - its publish lineage records of jobs that are not ROLLED_BACK (a
  //     rollback restores the rows the rolled-back job replaced, so the
  //     restored version's own publish record is current again; rollback
  //     records themselves are not versions), and
  //   - its UNCHANGED tasks (recomputed identical to the published rows, so
  //     not republished) in jobs whose publish committed (CONFIRMING,
  //     SUCCEEDED, DOWNSTREAM_UNHEALTHY), with the job's transform version
  //     for the dataset — unless a rollback of the partition was recorded
  //     at or after that job ended (it vouched for rows no longer there).
  // Neither counts for a job with entity keys on its target dataset: it
  // recomputed only its keys' rows, and vouches for nothing about the
  // other rows of the partition. A partition with neither (never
  // published, only by rolled-back jobs, or only by keyed jobs) is absent.
  virtual absl::StatusOr<std::map<std::string, VerifiedVersion>>
  VerifiedVersions(const std::string& dataset,
                   const std::vector<std::string>& partitions) = 0;

  virtual absl::StatusOr<std::vector<AuditEvent>> ListAuditEvents(
      const std::string& job_id) = 0;

  virtual absl::StatusOr<StoreStats> Stats() = 0;

  // Replaces, atomically, the validation check results recorded for the
  // job with `results` (a re-validation replaces the earlier ones, so the
  // call is idempotent). NOT_FOUND for an unknown job.
  virtual absl::Status ReplaceCheckResults(
      const std::string& job_id, const std::vector<CheckResult>& results) = 0;

  // The job's check results in the order they were written (empty before
  // validation). NOT_FOUND for an unknown job.
  virtual absl::StatusOr<std::vector<CheckResult>> ListCheckResults(
      const std::string& job_id) = 0;

  // Replaces, atomically, what the job's confirmations found per consumer
  // with `results` (each confirmation replaces the one before; idempotent).
  // NOT_FOUND for an unknown job.
  virtual absl::Status ReplaceConsumerConfirmations(
      const std::string& job_id,
      const std::vector<ConsumerFinding>& results) = 0;

  // The job's latest confirmation, per consumer, in the order recorded
  // (empty before any). NOT_FOUND for an unknown job.
  virtual absl::StatusOr<std::vector<ConsumerFinding>>
  ListConsumerConfirmations(const std::string& job_id) = 0;

  // Every (dataset, consumer) some job confirmed, by dataset then consumer,
  // with the jobs now in DOWNSTREAM_UNHEALTHY whose latest confirmation
  // found it unhealthy: what the downstream health gauge shows, from the
  // store, so that a restart does not forget an unhealthy consumer and a
  // rollback or a later confirmation clears it.
  virtual absl::StatusOr<std::vector<ConsumerStanding>>
  ListConsumerStandings() = 0;

  // The audit log, oldest first (by seq): the events that `query` selects.
  // The log is append-only: no call of this interface changes or removes
  // an event (the SQLite store also refuses it with triggers).
  virtual absl::StatusOr<std::vector<AuditEvent>> ListAuditLog(
      const AuditQuery& query) = 0;

  // The diff of (dataset, partition) of every job that stored one (see
  // ReplaceJobDiff), by job id, without samples.
  virtual absl::StatusOr<std::map<std::string, PartitionDiff>> PartitionDiffs(
      const std::string& dataset, const std::string& partition) = 0;

  // Records that `pause.dataset`'s replay policy is paused or running
  // again, and appends the audit event of the change (subject
  // ReplayPolicySubject, from_state/to_state "RUNNING" or "PAUSED",
  // `message`), in one transaction.
  virtual absl::Status SetReplayPolicyPause(const ReplayPolicyPause& pause,
                                            const std::string& message) = 0;

  // Every dataset whose policy was ever paused or resumed, by dataset.
  virtual absl::StatusOr<std::vector<ReplayPolicyPause>>
  ListReplayPolicyPauses() = 0;
};

// For implementations of StateStore::RecordPublication, in their write
// transaction: hands `lineage` the job's STAGED tasks as `read` returns them,
// StateStore::kPublicationPage at a time in ordinal order (one empty page
// when it reads no task), and gives each page's records to `write` before it
// reads the next page.
absl::Status BuildPublicationLineage(
    const std::string& job_id, PublicationLineage& lineage,
    const std::function<
        absl::StatusOr<std::vector<PartitionTask>>(const TaskQuery&)>& read,
    const std::function<absl::Status(const std::vector<LineageRecord>&)>&
        write);

// For implementations of StateStore::ReplaceJobDiff, in their write
// transaction once the job's old diff is gone and `header` is written:
// rewinds `pages` and gives each page to `write`, with the index of its
// dataset in `header` (checked), before it asks for the next.
absl::Status WriteDiffPages(
    const JobDiffHeader& header, DiffPages& pages,
    const std::function<absl::Status(
        size_t dataset, const std::vector<PartitionDiff>& partitions)>& write);

}  // namespace backfill

#endif  // BACKFILL_CORE_PORTS_STATE_STORE_H_
