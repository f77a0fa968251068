// Jobs in the PostgreSQL state store (backfill_state.jobs, job_datasets,
// job_keys, counters, meta): creating one with its plan and tasks, reading
// one whole, its moves (checked by core/model/transition_guard.h, each
// with its audit event in the same transaction), listings and the store's
// identity. The SQL of storage/sqlite/state/state_jobs.h and
// state_queries.h on PostgreSQL.
//
// Concurrency between processes: every write locks the rows it decides
// on (SELECT ... FOR UPDATE) before it reads them, so that two writers of
// one job, or two creators of jobs, take turns: job numbers come from the
// counters row, locked; the job row is locked before its state is
// guarded; an idempotency key is unique in the table, and CreateJob, which
// loses a race for one, returns the job of the winner.
//
// Free functions over the connection of the caller's transaction
// (pg_state_sql.h). Ownership: none; the connection is the caller's, for
// the call. Thread-safety: no state of their own; thread-safe as far as
// each connection is used by one thread at a time.

#ifndef BACKFILL_STORAGE_POSTGRES_STATE_PG_STATE_JOBS_H_
#define BACKFILL_STORAGE_POSTGRES_STATE_PG_STATE_JOBS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/model/job.h"
#include "core/ports/state_store.h"
#include "storage/postgres/state/pg_state_sql.h"

namespace backfill::pg_state {

// The job's state, its row locked for the transaction when `lock`;
// NOT_FOUND (JobNotFound) for an unknown job.
absl::StatusOr<JobState> StateOf(PgConnection* conn, const std::string& job_id,
                                 bool lock = false);

absl::StatusOr<Job> LoadJob(PgConnection* conn, const std::string& id,
                            bool with_partitions = true);

absl::StatusOr<CreateJobResult> CreateJob(PgConnection* conn, const Job& job,
                                          absl::Time now);
absl::StatusOr<std::optional<Job>> FindJobByKey(
    PgConnection* conn, const std::string& idempotency_key);

// Writes the move `from` -> `to` (guarded by the caller) and its audit
// event.
absl::Status WriteTransition(PgConnection* conn, const std::string& job_id,
                             JobState from, JobState to,
                             const std::string& message, absl::Time now);
absl::Status TransitionJob(PgConnection* conn, const std::string& job_id,
                           std::optional<JobState> expected_from, JobState to,
                           const std::string& message, absl::Time now);
absl::StatusOr<int64_t> RetryJob(PgConnection* conn, const std::string& job_id,
                                 JobState expected_from, JobState to,
                                 const std::string& message, absl::Time now);
absl::Status SetJobMessage(PgConnection* conn, const std::string& job_id,
                           JobState expected_state, const std::string& message,
                           absl::Time now);
absl::Status ReserveJobNumbers(PgConnection* conn, int64_t n);

absl::StatusOr<StoreInfo> Info(PgConnection* conn);
absl::StatusOr<std::vector<std::string>> ListJobIds(
    PgConnection* conn, const std::vector<JobState>& states);
absl::StatusOr<std::vector<Job>> ListJobs(PgConnection* conn,
                                          const JobFilter& filter);

}  // namespace backfill::pg_state

#endif  // BACKFILL_STORAGE_POSTGRES_STATE_PG_STATE_JOBS_H_
