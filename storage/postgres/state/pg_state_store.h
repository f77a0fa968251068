// PgStateStore: the StateStore (core/ports/state_store.h) on PostgreSQL,
// in the schema `backfill_state` of one database (pg_state_schema.h), with
// the semantics of the SQLite state store (storage/sqlite/state/
// sqlite_state_store.h) and proven by the same contract suite. This class
// owns a pool of connections and runs each call as one transaction; the
// SQL is in its parts, in this folder:
//
//   pg_state_schema.h      the schema and its versions (the tables)
//   pg_state_jobs.h        jobs, their plans, their moves; listings
//   pg_state_tasks.h       partition tasks: the checkpoints
//   pg_state_lineage.h     lineage, rollbacks, diffs, history reads
//   pg_state_governance.h  audit log, checks, confirmations, approvals,
//                          replay policy pauses, stats
//   pg_state_sql.h         what the parts share
//
// Several processes may share one database: every write runs in READ
// COMMITTED and locks the rows it decides on first (the job's row before
// its state is guarded, the job counter before a number is handed out);
// an idempotency key is unique in the table, and a creator that loses the
// race for one returns the winner's job. Appends to the history (audit
// events, lineage) take one transaction-level advisory lock, so that seqs
// and lineage ids commit in the order they are handed out, as with
// SQLite's single writer (a reader paging by seq misses nothing).
// Multi-statement reads run in a REPEATABLE READ, READ ONLY transaction (one
// snapshot). A transaction that the server aborts (deadlock, serialization
// failure) is run again, up to three times.
//
// Checksums: the SQLite store keeps a checksum per record of jobs,
// job_datasets, tasks and lineage, which catches a file damaged where
// SQLite's own checks do not read. This store writes 0 there (the
// columns' default) and checks none. Damage to a PostgreSQL server's files
// is the server's to detect: its data checksums, which a cluster has only
// when made with `initdb --data-checksums` (operators should), and its
// WAL. The column is kept so that both stores have the same tables; a
// record checksum computed here is still to do.
//
// Identity: the store id and creation time are rows of `meta`, created
// with the schema; Open() reads them.
//
// Ownership: owns its pool (and so its connections). Thread-safety:
// thread-safe; each call leases a connection of its own.

#ifndef BACKFILL_STORAGE_POSTGRES_STATE_PG_STATE_STORE_H_
#define BACKFILL_STORAGE_POSTGRES_STATE_PG_STATE_STORE_H_

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/ports/lease_store.h"
#include "core/ports/state_store.h"
#include "storage/postgres/pg_pool.h"

namespace backfill {

class PgStateStore : public StateStore {
 public:
  // Connects to `dsn` (a libpq connection string), creates or upgrades
  // the schema (MigrateStateSchema) and reads the store's identity.
  static absl::StatusOr<std::unique_ptr<PgStateStore>> Open(
      const std::string& dsn,
      absl::Duration idle_in_transaction_timeout = absl::ZeroDuration());

  // Fences every later write about a job with the lease token `fence`
  // says this process holds for it (core/ports/lease_store.h): the write
  // reads the job's lease row FOR SHARE in its own transaction, and
  // refuses itself (FAILED_PRECONDITION, reason LEASE_LOST), changing
  // nothing, when the token differs or the lease was released. A takeover
  // (an UPDATE of that row) thus waits for the writes in flight and every
  // write after it sees the new token. Not owned; null: no fencing (a
  // single process). Set before the store is shared.
  void SetFence(const LeaseFence* fence) { fence_ = fence; }

  ~PgStateStore() override;
  PgStateStore(const PgStateStore&) = delete;
  PgStateStore& operator=(const PgStateStore&) = delete;

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
  absl::StatusOr<Job> GetJobForReader(const std::string& id,
                                      JobView view) override;
  absl::StatusOr<std::vector<Job>> ListJobs(const JobFilter& filter) override;
  absl::StatusOr<std::vector<PartitionTask>> ListTasks(
      const std::string& job_id) override;
  absl::StatusOr<std::vector<PartitionTask>> ListTaskPage(
      const TaskQuery& query) override;
  absl::Status TransitionJob(const std::string& job_id,
                             std::optional<JobState> expected_from, JobState to,
                             const std::string& message,
                             absl::Time now) override;
  absl::Status SetJobMessage(const std::string& job_id, JobState expected_state,
                             const std::string& message,
                             absl::Time now) override;
  absl::Status UpdateTask(const PartitionTask& task) override;
  absl::Status UpdateTasks(const std::vector<PartitionTask>& tasks) override;
  absl::StatusOr<int64_t> RetryJob(const std::string& job_id,
                                   JobState expected_from, JobState to,
                                   const std::string& message,
                                   absl::Time now) override;
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
  absl::StatusOr<std::optional<LineageRecord>> NewestLineageOf(
      const std::string& dataset) override;
  absl::StatusOr<std::vector<LineageRecord>> GetLineage(
      const std::string& dataset, const std::string& partition) override;
  absl::StatusOr<std::vector<std::optional<LineageRecord>>> NewestLineages(
      const std::vector<std::pair<std::string, std::string>>& keys) override;
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
  absl::StatusOr<std::map<std::string, int64_t>> LastRunInputRows(
      const std::string& dataset,
      const std::vector<std::string>& partitions) override;
  absl::StatusOr<std::map<std::string, VerifiedVersion>> VerifiedVersions(
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

 private:
  explicit PgStateStore(std::unique_ptr<postgres::PgPool> pool);

  // Runs `body(conn)` in one transaction of `mode` on a leased
  // connection, committed when it succeeds; again (up to three times in
  // all) when the server aborted it.
  template <typename Body>
  auto InTransaction(const char* mode, Body&& body);
  template <typename Body>
  auto Write(Body&& body);
  template <typename Body>
  auto Read(Body&& body);

  // OK when this process may write about `job_id` (see SetFence).
  absl::Status CheckFence(postgres::PgConnection* conn,
                          const std::string& job_id) const;

  std::unique_ptr<postgres::PgPool> pool_;
  const LeaseFence* fence_ = nullptr;
};

}  // namespace backfill

#endif  // BACKFILL_STORAGE_POSTGRES_STATE_PG_STATE_STORE_H_
