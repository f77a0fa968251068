// State migrations: the schema of the SQLite state store's file, as the
// list of steps that build it. The schema is versioned by PRAGMA
// user_version: step i (0-based) takes a file from version i to i + 1, in
// its own transaction. Steps are append-only: a step that has shipped is
// never edited, so that every file ever written opens and upgrades.
//
// Tables (as the last step leaves them): counters (the job id sequence),
// meta (the store's identity: store_id, created_at), jobs (request, state,
// plan cost, idempotency_key UNIQUE when set), job_datasets (the plan's
// datasets in order, with reason, transform version and cost), job_keys (a
// job's entity keys), tasks (one per planned (dataset, partition): the
// checkpoint; a plan's partitions are read back from them in ordinal
// order), task_state_counts (tasks by state, kept by triggers), lineage
// (each record a publish or a rollback, with the approval a version was
// published with), rollbacks (who rolled a job back, why, when, what was
// restored), audit_events (append-only: triggers refuse a change, a
// removal or a replacement), check_results, job_approvals,
// consumer_confirmations, job_diff_datasets and job_diff_partitions (the
// diff a job computed before publishing). jobs, job_datasets, tasks and
// lineage carry a checksum per record (state_record_checksums.h).
//
// Free functions over constant text; thread-safe. Migrate uses the
// connection it is given, which the caller does not use meanwhile.

#ifndef BACKFILL_STORAGE_SQLITE_STATE_STATE_MIGRATIONS_H_
#define BACKFILL_STORAGE_SQLITE_STATE_STATE_MIGRATIONS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "storage/sqlite/sqlite_db.h"

namespace backfill::sqlite_state {

// The schema version this code writes (the number of steps).
int SchemaVersion();

// The first schema version whose records carry checksums (the step that
// adds them computes those of the records already written).
inline constexpr int64_t kFirstChecksummedVersion = 16;

// Applies every step newer than the file's version, each in its own
// transaction (a file another process migrated meanwhile is left as it
// is). FAILED_PRECONDITION for a file whose version is newer than this
// code knows, so that an older binary never writes a newer schema.
// _bf_row_hash must be registered on `db` (sqlite_fingerprint_function.h).
absl::Status Migrate(sqlite::Database* db);

}  // namespace backfill::sqlite_state

#endif  // BACKFILL_STORAGE_SQLITE_STATE_STATE_MIGRATIONS_H_
