// SqliteStateStore: the durable StateStore, one SQLite file
// (`<data-dir>/state.db`) holding jobs, their plans and partition tasks
// (the checkpoints), lineage of published partition versions and the audit
// log. This class owns the file's connections and what it keeps between
// reads, and runs each call as one transaction; the SQL is in its parts, in
// this folder:
//
//   state_migrations.h        the schema and its versions (the tables)
//   state_jobs.h              jobs, their plans and their moves
//   state_tasks.h             partition tasks: the checkpoints
//   state_lineage.h           lineage, rollbacks and the jobs' diffs
//   state_governance.h        audit log, check results, confirmations,
//                             approvals
//   state_queries.h           reads across jobs: listings, stats, history
//   state_read_cache.h        what is kept between reads of a job
//   state_encoding.h          how values are written into columns
//   state_record_checksums.h  the records' checksums
//   state_sql.h               what the parts share
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
// Moves: every write that moves a job checks it with the transition guards
// (core/model/transition_guard.h) in its transaction, and writes nothing when
// they refuse it.
//
// Thread-safety: thread-safe. Every write and almost every read goes
// through ONE connection, guarded by a mutex; writes run under BEGIN
// IMMEDIATE, multi-statement reads under a deferred transaction (a
// consistent snapshot). The store's transactions are short and small (the
// heavy data lives in the warehouse), so one connection is simpler than a
// writer plus reader pool and still not a bottleneck; it also makes
// ":memory:" work for tests. The exceptions run on read-only connections
// of their own (a plain file only): VerifiedVersions, which reads every
// version of a dataset (seconds over millions of partitions), so that
// checkpoints go on meanwhile, and the lineage read per partition of a
// running job (GetLineage, NewestLineages), which then waits neither for
// writers nor for the long reads.

#ifndef BACKFILL_STORAGE_SQLITE_STATE_SQLITE_STATE_STORE_H_
#define BACKFILL_STORAGE_SQLITE_STATE_SQLITE_STATE_STORE_H_

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "core/ports/state_store.h"
#include "storage/sqlite/sqlite_db.h"
#include "storage/sqlite/state/state_read_cache.h"
#include "storage/sqlite/state/state_sql.h"

namespace backfill {

namespace sqlite {
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
  using StateStore::RecordPublication;
  absl::Status RecordPublication(const std::string& job_id,
                                 PublicationLineage& lineage, JobState to,
                                 absl::Time now) override;
  absl::Status ApproveJob(const std::string& job_id, JobState expected_from,
                          JobState to, const Approval& approval,
                          const std::string& message, absl::Time now) override;
  using StateStore::ReplaceJobDiff;
  absl::Status ReplaceJobDiff(const JobDiffHeader& header,
                              DiffPages& pages) override;
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
  absl::Status SetReplayPolicyPause(const ReplayPolicyPause& pause,
                                    const std::string& message) override;
  absl::StatusOr<std::vector<ReplayPolicyPause>> ListReplayPolicyPauses()
      override;
  // Kept per job until ReplaceJobDiff replaces its diff (StateReadCache).
  absl::StatusOr<std::optional<std::vector<DiffSummary>>> GetJobDiffSummary(
      const std::string& job_id) override;
  // One lock and one read transaction for the four parts; a BASIC answer
  // is kept until any row of the file changes (StateReadCache).
  absl::StatusOr<Job> GetJobForReader(const std::string& id,
                                      JobView view) override;

 private:
  SqliteStateStore(std::unique_ptr<sqlite::Database> db, std::string path);

  // The main connection, for the parts (state_sql.h).
  sqlite_state::StateDb Db() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Runs `body` (a function of a StateDb returning a Status or StatusOr)
  // with mu_ held, in one transaction on the main connection: a write
  // (BEGIN IMMEDIATE) or a read (deferred). The transaction commits when
  // `body` succeeds and rolls back otherwise.
  template <typename Body>
  auto InTransaction(sqlite::Transaction::Mode mode, Body&& body)
      ABSL_LOCKS_EXCLUDED(mu_);
  template <typename Body>
  auto Write(Body&& body) ABSL_LOCKS_EXCLUDED(mu_);
  template <typename Body>
  auto Read(Body&& body) ABSL_LOCKS_EXCLUDED(mu_);

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

  // GetJob and GetJobProgress: the job in its own read transaction, its
  // sums from cache_.
  absl::StatusOr<Job> ReadJob(const std::string& id, bool with_partitions)
      ABSL_LOCKS_EXCLUDED(mu_);
  // UpdateTask(s): one transaction writing `tasks`, their jobs' kept sums
  // following them.
  absl::Status CommitTasks(absl::Span<const PartitionTask> tasks)
      ABSL_LOCKS_EXCLUDED(mu_);

  const std::string path_;
  // Checkpoints of the file's log, off the committing threads (null for
  // ":memory:" and URIs). Declared before the connections, which it must
  // outlive.
  std::unique_ptr<sqlite::WalCheckpointer> checkpointer_;
  absl::Mutex mu_;
  std::unique_ptr<sqlite::Database> db_ ABSL_GUARDED_BY(mu_);
  // What is kept between reads of a job (sums over its tasks, its diff
  // summary, its BASIC reader's answer).
  sqlite_state::StateReadCache cache_ ABSL_GUARDED_BY(mu_);
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
};

}  // namespace backfill

#endif  // BACKFILL_STORAGE_SQLITE_STATE_SQLITE_STATE_STORE_H_
