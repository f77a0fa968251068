// InMemoryStateStore: a StateStore held in memory, for tests of the core
// that should not need SQLite. It has the observable semantics of
// SqliteStateStore (storage/sqlite/state/sqlite_state_store.h), which the
// StateStore contract suite (tests/testing/state_store_contract.h) checks
// by running the same cases against both:
//   - job ids "bf-<n>" from a counter that never goes back
//     (ReserveJobNumbers raises it); idempotency keys;
//   - one task per planned (dataset, partition), in plan order; a job's
//     counts, actual cost and rows written computed from its tasks;
//   - transitions checked against expected_from and the job state machine's
//     table (FAILED_PRECONDITION, nothing written, on refusal), start_time
//     on the first move to RUNNING, end_time on a terminal state, one audit
//     event per move;
//   - RecordPublication idempotent for a job past PUBLISHING and refused
//     for any other state but PUBLISHING; lineage newest first;
//   - RecordRollback idempotent for a job already ROLLED_BACK, refused
//     (nothing written) unless every job named is SUCCEEDED or
//     DOWNSTREAM_UNHEALTHY; its records name jobs the store holds, and
//     carry no approval;
//   - a diff lists each dataset, and each partition of one, once;
//   - times kept to the microsecond (rounded down, as unix microseconds
//     are), an infinite time read back as InfinitePast ("not yet"), a
//     confirmation's latency in whole microseconds; the creation time of
//     the store to the second.
// Every write happens entirely or not at all.
//
// Fault injection (write_faults.h): the write methods are CreateJob,
// ReserveJobNumbers, TransitionJob, RetryJob, SetJobMessage, UpdateTask,
// UpdateTasks, UpdateTasksInState, RecordPublication, RecordRollback,
// ApproveJob, ReplaceJobDiff and ReplaceCheckResults
// (ReplaceConsumerConfirmations is not one: it always writes). Each call of
// one is counted, then calls the write hook (if set) with the method's
// name, outside the store's lock, so that the hook may block, count or fail
// the call; then fails with an injected status (FailNextWrites first, then
// FailWrites) if there is one. A write refused this way changes nothing.
// Reads never fail by injection.
//
// Its parts: each job with its tasks (memory_job_row.h), the lineage
// records (memory_lineage.h), the jobs' diffs (memory_job_diffs.h), the
// audit log (memory_audit_log.h), values kept as the SQLite store keeps
// them (as_stored.h).
//
// Thread-safety: thread-safe. One mutex guards the state; the fault
// settings have their own, and the write hook runs without either,
// possibly on many threads at once.

#ifndef BACKFILL_TESTS_TESTING_MEMORY_STATE_STORE_H_
#define BACKFILL_TESTS_TESTING_MEMORY_STATE_STORE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "core/ports/state_store.h"
#include "tests/testing/memory_audit_log.h"
#include "tests/testing/memory_job_diffs.h"
#include "tests/testing/memory_job_row.h"
#include "tests/testing/memory_lineage.h"
#include "tests/testing/write_faults.h"

namespace backfill::testing {

class InMemoryStateStore : public StateStore {
 public:
  // Called at the start of every write with the method's name ("CreateJob",
  // "UpdateTask", ...). A non-OK status fails the write, which then changes
  // nothing.
  using WriteHook = WriteFaults::Hook;

  // A store with a random id (32 hex digits), created now.
  InMemoryStateStore();
  // A store with the given identity (`created_at` is kept to the second).
  InMemoryStateStore(std::string store_id, absl::Time created_at);

  InMemoryStateStore(const InMemoryStateStore&) = delete;
  InMemoryStateStore& operator=(const InMemoryStateStore&) = delete;

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
  absl::StatusOr<std::vector<PartitionTask>> ListTasks(
      const std::string& job_id) override;
  absl::StatusOr<std::vector<PartitionTask>> ListTaskPage(
      const TaskQuery& query) override;
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

  // ---- Fault injection -----------------------------------------------------

  // Replaces the write hook (nullptr: none).
  void SetWriteHook(WriteHook hook);
  // Every write returns `status` until FailWrites(absl::OkStatus()).
  void FailWrites(absl::Status status);
  // The next `n` writes return `status` (before a FailWrites status).
  void FailNextWrites(int n, absl::Status status);

  // Write calls so far, refused ones included: all, or of one method.
  int64_t write_calls() const;
  int64_t write_calls(const std::string& method) const;
  // Writes refused by the hook or an injected status.
  int64_t failed_writes() const;

 private:
  MemoryJobRow* FindLocked(const std::string& id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The state of the job in `row` (found as `id`); NOT_FOUND for none.
  static absl::StatusOr<JobState> StateOf(const MemoryJobRow* row,
                                          const std::string& id);
  // UpdateTask(s): all of `tasks` written, or none when one is missing.
  absl::Status WriteTasksLocked(absl::Span<const PartitionTask> tasks)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A move the guard allowed, with its audit event.
  void WriteTransitionLocked(MemoryJobRow* row, JobState from, JobState to,
                             const std::string& message, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  const std::string store_id_;
  const absl::Time created_at_;
  int64_t last_job_number_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, MemoryJobRow> jobs_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, std::string> ids_by_seq_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::string> ids_by_key_ ABSL_GUARDED_BY(mu_);
  MemoryLineage lineage_ ABSL_GUARDED_BY(mu_);
  MemoryJobDiffs diffs_ ABSL_GUARDED_BY(mu_);
  MemoryAuditLog audit_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, ReplayPolicyPause> pauses_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::vector<ConsumerFinding>> confirmations_
      ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::vector<CheckResult>> check_results_
      ABSL_GUARDED_BY(mu_);

  // Thread-safe on its own; the writes consult it before taking mu_.
  WriteFaults faults_;
};

}  // namespace backfill::testing

#endif  // BACKFILL_TESTS_TESTING_MEMORY_STATE_STORE_H_
