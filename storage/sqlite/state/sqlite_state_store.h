// SqliteStateStore: the durable StateStore, one SQLite file
// (`<data-dir>/state.db`) holding jobs, their plans and partition tasks
// (the checkpoints), lineage of published partition versions and the audit
// log.
//
// Durability: the file is in WAL mode with synchronous=NORMAL. A committed
// transaction survives a crash or kill -9 of the process; after a power loss
// or OS crash the last few commits may be lost, never corrupted
// (synchronous=FULL would also keep those, at an fsync per commit).
// foreign_keys is on.
//
// Identity: a random store id (32 hex digits) is created with the store
// (table meta); the warehouse's publication markers name it, so that a
// state store that was replaced or recreated is never mistaken for the one
// that published.
//
// Integrity: Open() runs PRAGMA quick_check before anything else, then
// reads every record of jobs, job_datasets, tasks and lineage against the
// checksum each carries (state_record_checksums.h), which catches what
// SQLite's checks do not read (a record's values, its overflow pages); it
// refuses (DATA_LOSS, with what to do) a damaged file without writing it.
// Every read of those records checks their checksums again: a record
// damaged since is DATA_LOSS naming it ("job bf-17's record in ... fails
// its checksum"), never wrong values. Writes keep the checksums (writing
// those tables by hand, with another program, makes their records fail).
// A file that this process could not write (the file, its directory, or
// its -wal or -shm file) is refused by Open() too (FAILED_PRECONDITION,
// saying which and why), rather than opened read-only.
//
// Schema: versioned by PRAGMA user_version. Open() applies every migration
// step newer than the file's version, each in its own transaction, and
// refuses (FAILED_PRECONDITION) a file whose version is newer than this code
// knows, so an older binary never writes a newer schema.
//
// Tables: jobs (request, state, plan cost, idempotency_key UNIQUE when set),
// job_datasets (the plan's datasets in order, with reason and cost), tasks
// (one per planned (dataset, partition): the checkpoint; a plan's partitions
// are read back from them in ordinal order), lineage (each record a publish
// or a rollback, with the approval a version was published with),
// rollbacks (who rolled a job back, why, when, what was restored),
// audit_events, counters (the job id sequence), job_approvals (an
// operator's approval of a held job), job_diff_datasets and
// job_diff_partitions (the diff a job computed before publishing: per
// dataset its columns, per partition counts, measure totals and sample
// rows).
//
// Encoding: timestamps are unix microseconds (NULL for "not yet"); job ids
// are "bf-<n>" with n from a counter row that never goes back. Lists (the
// request's partitions, a task's or lineage record's input fingerprints) are
// stored as length-prefixed text ("<len>:<bytes>" per field), which needs no
// escaping whatever the values contain.
//
// Thread-safety: thread-safe. Every write and almost every read goes
// through ONE connection, guarded by a mutex; writes run under BEGIN
// IMMEDIATE, multi-statement reads under a deferred transaction (a
// consistent snapshot). The store's transactions are short and small (the
// heavy data lives in the warehouse), so one connection is simpler than a
// writer plus reader pool and still not a bottleneck; it also makes
// ":memory:" work for tests. The exception is VerifiedVersions, which reads
// every version of a dataset (seconds over millions of partitions): it runs
// on a second, read-only connection of its own (a plain file only), so
// that checkpoints go on meanwhile.

#ifndef BACKFILL_STORAGE_SQLITE_STATE_SQLITE_STATE_STORE_H_
#define BACKFILL_STORAGE_SQLITE_STATE_SQLITE_STATE_STORE_H_

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "core/state_store.h"

namespace backfill {

namespace sqlite {
class Database;
class WalCheckpointer;
}  // namespace sqlite

class SqliteStateStore : public StateStore {
 public:
  // The schema version this code writes (the number of migration steps).
  static int SchemaVersion();

  // Opens or creates the database file at `path` (e.g. "<data-dir>/state.db";
  // ":memory:" for tests) and migrates it to SchemaVersion().
  static absl::StatusOr<std::unique_ptr<SqliteStateStore>> Open(
      const std::string& path);

  ~SqliteStateStore() override;

  absl::StatusOr<StoreInfo> Info() override;
  absl::StatusOr<std::vector<std::string>> ListJobIds(
      const std::vector<JobState>& states) override;
  absl::Status ReserveJobNumbers(int64_t n) override;
  absl::StatusOr<CreateJobResult> CreateJob(const Job& job,
                                            absl::Time now) override;
  absl::StatusOr<std::optional<Job>> FindJobByKey(
      const std::string& idempotency_key) override;
  absl::StatusOr<Job> GetJob(const std::string& id) override;
  absl::StatusOr<Job> GetJobProgress(const std::string& id) override;
  absl::StatusOr<std::vector<Job>> ListJobs(const JobFilter& filter) override;
  absl::StatusOr<std::vector<PartitionTask>> ListTaskPage(
      const TaskQuery& query) override;
  absl::StatusOr<std::vector<PartitionTask>> ListTasks(
      const std::string& job_id) override;
  absl::Status TransitionJob(const std::string& job_id,
                             std::optional<JobState> expected_from, JobState to,
                             const std::string& message,
                             absl::Time now) override;
  absl::StatusOr<int64_t> RetryJob(const std::string& job_id,
                                   JobState expected_from, JobState to,
                                   const std::string& message,
                                   absl::Time now) override;
  absl::Status SetJobMessage(const std::string& job_id, JobState expected_state,
                             const std::string& message,
                             absl::Time now) override;
  absl::Status UpdateTask(const PartitionTask& task) override;
  absl::Status UpdateTasks(const std::vector<PartitionTask>& tasks) override;
  absl::StatusOr<int64_t> UpdateTasksInState(const std::string& job_id,
                                             const std::vector<TaskState>& from,
                                             TaskState to,
                                             absl::Time now) override;
  absl::Status RecordPublication(const std::string& job_id,
                                 const std::vector<LineageRecord>& lineage,
                                 JobState to, const std::string& message,
                                 absl::Time now) override;
  absl::Status ApproveJob(const std::string& job_id, JobState expected_from,
                          JobState to, const Approval& approval,
                          const std::string& message, absl::Time now) override;
  absl::Status ReplaceJobDiff(const JobDiff& diff) override;
  absl::StatusOr<std::optional<JobDiff>> GetJobDiff(const std::string& job_id,
                                                    const std::string& dataset,
                                                    bool with_samples) override;
  absl::StatusOr<std::vector<LineageRecord>> GetLineage(
      const std::string& dataset, const std::string& partition) override;
  absl::StatusOr<std::vector<std::optional<LineageRecord>>> NewestLineages(
      const std::vector<std::pair<std::string, std::string>>& keys) override;
  absl::StatusOr<std::optional<LineageRecord>> NewestLineageOf(
      const std::string& dataset) override;
  absl::Status RecordRollback(const std::string& job_id,
                              const RollbackInfo& info,
                              const std::vector<LineageRecord>& lineage,
                              const std::string& message,
                              const std::string& also_message,
                              absl::Time now) override;
  absl::StatusOr<std::vector<LineageRecord>> GetLineageOverlapping(
      const std::string& job_id) override;
  absl::StatusOr<std::map<std::string, absl::Time>> PublicationTimes(
      const std::vector<std::string>& job_ids) override;
  // One range scan per call over the (dataset, partition) index of tasks,
  // from the smallest to the largest partition asked for.
  absl::StatusOr<std::map<std::string, VerifiedVersion>> VerifiedVersions(
      const std::string& dataset,
      const std::vector<std::string>& partitions) override;
  absl::StatusOr<std::map<std::string, int64_t>> LastRunInputRows(
      const std::string& dataset,
      const std::vector<std::string>& partitions) override;
  absl::StatusOr<std::vector<AuditEvent>> ListAuditEvents(
      const std::string& job_id) override;
  absl::StatusOr<StoreStats> Stats() override;
  absl::Status ReplaceCheckResults(
      const std::string& job_id,
      const std::vector<CheckResult>& results) override;
  absl::StatusOr<std::vector<CheckResult>> ListCheckResults(
      const std::string& job_id) override;
  absl::Status ReplaceConsumerConfirmations(
      const std::string& job_id,
      const std::vector<ConsumerFinding>& results) override;
  absl::StatusOr<std::vector<ConsumerFinding>> ListConsumerConfirmations(
      const std::string& job_id) override;
  absl::StatusOr<std::vector<ConsumerStanding>> ListConsumerStandings()
      override;
  absl::StatusOr<std::vector<AuditEvent>> ListAuditLog(
      const AuditQuery& query) override;
  absl::StatusOr<std::map<std::string, PartitionDiff>> PartitionDiffs(
      const std::string& dataset, const std::string& partition) override;
  // Kept per job until ReplaceJobDiff replaces its diff (as aggregates_).
  absl::StatusOr<std::optional<std::vector<DiffSummary>>> GetJobDiffSummary(
      const std::string& job_id) override;
  // One lock and one read transaction for the four parts; a BASIC answer
  // is kept until any row of the file changes (reader_answers_).
  absl::StatusOr<Job> GetJobForReader(const std::string& id,
                                      JobView view) override;

 private:
  SqliteStateStore(std::unique_ptr<sqlite::Database> db, std::string path);

  // The read connection in `slot` (opened at the first call), or null for
  // a store that is not a plain file (":memory:", a URI): reads then use
  // db_. The caller holds the slot's mutex.
  absl::StatusOr<sqlite::Database*> OpenReader(
      std::unique_ptr<sqlite::Database>* slot);
  // The read connection in `slot` if there is one; otherwise db_, with
  // `lock` now holding mu_ for the caller. The caller holds the slot's
  // mutex.
  absl::StatusOr<sqlite::Database*> ReaderOrMain(
      std::unique_ptr<sqlite::Database>* slot,
      std::optional<absl::MutexLock>* lock);

  absl::Status Migrate() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Reads one job with plan and counts; the caller holds mu_ and, for a
  // consistent view, a transaction.
  // LoadJob in its own read transaction.
  absl::StatusOr<Job> ReadJob(const std::string& id, bool with_partitions)
      ABSL_LOCKS_EXCLUDED(mu_);
  // `cached`: the aggregates over the job's tasks may come from (and go
  // to) aggregates_; only for reads of committed data, never inside a write
  // transaction that may still roll back.
  absl::StatusOr<Job> LoadJob(const std::string& id,
                              bool with_partitions = true, bool cached = false)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<JobState> StateOf(const std::string& job_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The UPDATE and audit event of a transition, in the caller's
  // transaction.
  absl::Status WriteTransition(const std::string& job_id, JobState from,
                               JobState to, const std::string& message,
                               absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The cost columns of a job (its budget, each dataset's estimate source
  // and budget), in the caller's transaction: written after CreateJob's
  // inserts, read after LoadJob's, with each dataset's actual cost.
  absl::Status WriteJobCosts(const std::string& id, const Job& job)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status ReadJobCosts(const std::string& id, Job* job)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A job's entity keys (request.keys, and the key filter of its target's
  // DatasetPlan), likewise.
  absl::Status WriteJobKeys(const std::string& id, const Job& job)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status ReadJobKeys(const std::string& id, Job* job)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status AppendAudit(const std::string& job_id,
                           const std::string& from_state,
                           const std::string& to_state,
                           const std::string& message, absl::Time at)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // What LoadJob adds up over a job's tasks: its counts by state, actual
  // cost and rows written, each dataset's partitions and actual cost, and
  // its recompute times.
  struct TaskAggregates {
    PartitionCounts counts;
    double actual_cost = 0;
    int64_t rows_written = 0;
    std::map<std::string, std::pair<int64_t, double>> by_dataset;
    int64_t timed_partitions = 0;
    double timed_seconds = 0;
  };
  absl::StatusOr<TaskAggregates> ComputeTaskAggregates(const std::string& id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Adds (sign +1) or takes out (-1) one task's share of `out`.
  static void AddTaskShare(const std::string& dataset, TaskState state,
                           int64_t input_rows, int64_t rows_written,
                           double duration, int sign, TaskAggregates* out);
  // UpdateTask(s): one transaction writing `tasks`.
  absl::Status CommitTasks(absl::Span<const PartitionTask> tasks)
      ABSL_LOCKS_EXCLUDED(mu_);
  // UpdateTasks' work inside the caller's transaction: the tasks' rows and
  // the sums of their jobs in `next` (by job; nullopt: not kept).
  absl::Status WriteTasks(
      absl::Span<const PartitionTask> tasks,
      std::map<std::string, std::optional<TaskAggregates>>* next)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The job's tasks changed: its aggregates must be counted again.
  void ForgetTaskAggregates(const std::string& id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string path_;
  // Checkpoints of the file's log, off the committing threads (null for
  // ":memory:" and URIs). Declared before the connections, which it must
  // outlive.
  std::unique_ptr<sqlite::WalCheckpointer> checkpointer_;
  absl::Mutex mu_;
  std::unique_ptr<sqlite::Database> db_ ABSL_GUARDED_BY(mu_);
  // A second, read-only connection for reads that scan much of the file
  // (VerifiedVersions, for the stale-partition counts): in WAL mode it
  // reads the last committed state without holding mu_, so that writers
  // (checkpoints) do not wait for it. Taken before mu_ when both are.
  absl::Mutex reader_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  std::unique_ptr<sqlite::Database> reader_ ABSL_GUARDED_BY(reader_mu_);
  // A third connection, read-only, for the short reads made per partition
  // of a running job (GetLineage), which then wait neither for writers nor
  // for the long reads. Taken before mu_ when both are.
  absl::Mutex point_reader_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  std::unique_ptr<sqlite::Database> point_reader_
      ABSL_GUARDED_BY(point_reader_mu_);
  // TaskAggregates by job, so that reading a job (GetBackfill, a watch, a
  // listing) costs the same whatever its number of partitions: UpdateTask
  // moves its task's share within the entry (a checkpoint keeps it), every
  // other method that writes a job's tasks forgets the job's entry before
  // it commits,
  // and a write by another connection to the file (PRAGMA data_version)
  // forgets them all. At most kMaxCachedAggregates entries (then emptied).
  static constexpr size_t kMaxCachedAggregates = 10000;
  absl::flat_hash_map<std::string, TaskAggregates> aggregates_
      ABSL_GUARDED_BY(mu_);
  int64_t data_version_ ABSL_GUARDED_BY(mu_) = -1;
  // GetJobForReader's BASIC answers by job (GetBackfill's default view,
  // which dashboards poll), valid while no row of the file has changed:
  // kept with the connection's count of changed rows (TotalChanges) when
  // they were read, all forgotten once it moves (any write through this
  // store, even one rolled back) or another connection writes to the file
  // (CheckDataVersion). At most kMaxCachedAggregates entries.
  absl::flat_hash_map<std::string, Job> reader_answers_ ABSL_GUARDED_BY(mu_);
  int64_t reader_answers_changes_ ABSL_GUARDED_BY(mu_) = -1;
  // GetJobDiffSummary's answers by job, forgotten by ReplaceJobDiff (and
  // with aggregates_ on a write by another connection).
  absl::flat_hash_map<std::string, std::optional<std::vector<DiffSummary>>>
      diff_summaries_ ABSL_GUARDED_BY(mu_);
  // GetJobDiff with mu_ held (in its own read transaction).
  absl::StatusOr<std::optional<JobDiff>> ReadJobDiff(const std::string& job_id,
                                                     const std::string& dataset,
                                                     bool with_samples)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The Load* read in the caller's transaction (which holds mu_):
  // GetJobDiff, GetJobDiffSummary (through diff_summaries_),
  // ListCheckResults and ListConsumerConfirmations of a job known to
  // exist (the first two check that it does).
  absl::StatusOr<std::optional<JobDiff>> LoadJobDiff(const std::string& job_id,
                                                     const std::string& dataset,
                                                     bool with_samples)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<std::optional<std::vector<DiffSummary>>> LoadJobDiffSummary(
      const std::string& job_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<std::vector<CheckResult>> LoadCheckResults(
      const std::string& job_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<std::vector<ConsumerFinding>> LoadConsumerConfirmations(
      const std::string& job_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Empties both caches when another connection wrote to the file since
  // the last call.
  absl::Status CheckDataVersion() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
};

}  // namespace backfill

#endif  // BACKFILL_STORAGE_SQLITE_STATE_SQLITE_STATE_STORE_H_
