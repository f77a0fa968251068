// State jobs: a job's own records in the SQLite state store's file — its
// row in jobs (request, state, message, times, plan cost, budget), its
// plan's datasets (job_datasets: reason, transform version, cost and how
// it was estimated), its entity keys (job_keys) — and its moves: a
// transition writes the new state and appends its audit event in the same
// transaction, after the transition guard (core/model/transition_guard.h)
// allowed it. Job ids are "bf-<n>" with n from a counter row that never
// goes back. Reading a job assembles it: these records, the plan's
// partitions from its tasks, the sums over its tasks, its rollback and its
// approval.
//
// Free functions in the caller's transaction (see state_sql.h); every
// record of jobs and job_datasets read is checked against its checksum
// (DATA_LOSS naming the job when it fails), every one written is sealed.

#ifndef BACKFILL_STORAGE_SQLITE_STATE_STATE_JOBS_H_
#define BACKFILL_STORAGE_SQLITE_STATE_STATE_JOBS_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/model/job.h"
#include "core/ports/state_store.h"
#include "storage/sqlite/state/state_read_cache.h"
#include "storage/sqlite/state/state_sql.h"

namespace backfill::sqlite_state {

// The job's state; NOT_FOUND for an unknown job.
absl::StatusOr<JobState> StateOf(const StateDb& db, const std::string& job_id);

// The job with its plan (partition lists only `with_partitions`), counts,
// costs, rollback and approval. The sums over its tasks come from `cache`
// (kept there once computed) when it is given: only for reads of committed
// data, never inside a write transaction that may still roll back.
absl::StatusOr<Job> LoadJob(const StateDb& db, const std::string& id,
                            bool with_partitions = true,
                            StateReadCache* cache = nullptr);

// StateStore::CreateJob (the idempotency key is looked up in the same
// write transaction, so two concurrent submits with one key cannot both
// create a job) and FindJobByKey.
absl::StatusOr<CreateJobResult> CreateJob(const StateDb& db, const Job& job,
                                          absl::Time now);
absl::StatusOr<std::optional<Job>> FindJobByKey(
    const StateDb& db, const std::string& idempotency_key);

// The UPDATE and audit event of a move the guard allowed: sets start_time
// on the first move to RUNNING, end_time on a move to a terminal state,
// and clears end_time on a move out of one (a retry).
absl::Status WriteTransition(const StateDb& db, const std::string& job_id,
                             JobState from, JobState to,
                             const std::string& message, absl::Time now);

// StateStore::TransitionJob, RetryJob (the job's moves and, for a retry,
// its tasks' reset) and SetJobMessage.
absl::Status TransitionJob(const StateDb& db, const std::string& job_id,
                           std::optional<JobState> expected_from, JobState to,
                           const std::string& message, absl::Time now);
absl::StatusOr<int64_t> RetryJob(const StateDb& db, const std::string& job_id,
                                 JobState expected_from, JobState to,
                                 const std::string& message, absl::Time now);
absl::Status SetJobMessage(const StateDb& db, const std::string& job_id,
                           JobState expected_state, const std::string& message,
                           absl::Time now);

// StateStore::ReserveJobNumbers.
absl::Status ReserveJobNumbers(const StateDb& db, int64_t n);

}  // namespace backfill::sqlite_state

#endif  // BACKFILL_STORAGE_SQLITE_STATE_STATE_JOBS_H_
