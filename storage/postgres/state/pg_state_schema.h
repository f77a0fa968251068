// The schema of the state store on PostgreSQL (backfilld --state-dsn): the
// tables of jobs, tasks, lineage, checks, approvals, the audit log and the
// replay policies, under a schema of their own, `backfill_state`, with the
// same tables and columns as the SQLite state store's `state.db`
// (storage/sqlite/state/state_migrations.cc; a test compares the two),
// PostgreSQL types for SQLite's (INTEGER as BIGINT, REAL as DOUBLE
// PRECISION; times are microseconds since the epoch in BIGINT, as there).
// Two tables more, which only a group of replicas sharing the database has
// use for (pg_lease_store.h): `nodes` (each replica's record) and
// `job_leases` (each job's lease and fencing token).
//
// MigrateStateSchema brings a database to the latest version, one version
// per transaction, under a transaction-level advisory lock, so that any
// number of replicas starting at once migrate it exactly once; the version
// is a row of `backfill_state.schema_version`. A database whose version is
// newer than this build knows is refused (FAILED_PRECONDITION) before
// anything is written. What SQLite enforces with triggers, PostgreSQL does
// too: the audit tables refuse UPDATE and DELETE, and the count of tasks
// per state is kept by triggers in the transaction of each write.
//
// Stateless free functions over a connection; thread-safe as far as each
// call uses its own connection.

#ifndef BACKFILL_STORAGE_POSTGRES_STATE_PG_STATE_SCHEMA_H_
#define BACKFILL_STORAGE_POSTGRES_STATE_PG_STATE_SCHEMA_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "storage/postgres/pg_connection.h"

namespace backfill::postgres {

// The schema that holds the state store's tables.
inline constexpr char kStateSchema[] = "backfill_state";

// The version MigrateStateSchema brings a database to.
int StateSchemaVersion();

// The database's version (0: no state store yet).
absl::StatusOr<int> ReadStateSchemaVersion(PgConnection* conn);

// Creates or upgrades the state store's schema; see above.
absl::Status MigrateStateSchema(PgConnection* conn);

// The same up to version `target` only (1..StateSchemaVersion()): a
// database as an older backfilld left it, for the tests of the upgrades.
absl::Status MigrateStateSchemaTo(PgConnection* conn, int target);

}  // namespace backfill::postgres

#endif  // BACKFILL_STORAGE_POSTGRES_STATE_PG_STATE_SCHEMA_H_
