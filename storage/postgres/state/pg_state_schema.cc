#include "storage/postgres/state/pg_state_schema.h"

#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"

namespace backfill::postgres {
namespace {

// The key of the advisory lock that serializes migrations (transaction
// level: released by the COMMIT or ROLLBACK of each version's step).
constexpr char kMigrationLock[] = "SELECT pg_advisory_xact_lock(7378644596)";

// Each version's step, run in one transaction. The tables and columns are
// those of the SQLite state store at its latest version; the audit tables
// take their seq from one sequence, so that the events of jobs and of
// replay policies share one numbering.
constexpr const char* kMigrations[] = {
    // 1: the whole schema.
    R"sql(
CREATE SCHEMA IF NOT EXISTS backfill_state;
SET LOCAL search_path TO backfill_state;
CREATE TABLE schema_version (version INTEGER NOT NULL);
INSERT INTO schema_version (version) VALUES (0);

CREATE TABLE meta (
  key   TEXT PRIMARY KEY,
  value TEXT NOT NULL
);
INSERT INTO meta (key, value)
  VALUES ('store_id', replace(gen_random_uuid()::text, '-', '')),
         ('created_at', (extract(epoch FROM now()) * 1000000)::bigint::text);

CREATE TABLE counters (
  name  TEXT PRIMARY KEY,
  value BIGINT NOT NULL
);
INSERT INTO counters (name, value) VALUES ('job', 0);

CREATE TABLE jobs (
  id                  TEXT PRIMARY KEY,
  seq                 BIGINT NOT NULL UNIQUE,
  state               TEXT NOT NULL,
  dataset             TEXT NOT NULL,
  range_from          TEXT NOT NULL DEFAULT '',
  range_to            TEXT NOT NULL DEFAULT '',
  partitions          TEXT NOT NULL DEFAULT '',
  reason              TEXT NOT NULL DEFAULT '',
  ticket              TEXT NOT NULL DEFAULT '',
  requested_by        TEXT NOT NULL DEFAULT '',
  exclude_downstream  BIGINT NOT NULL DEFAULT 0,
  idempotency_key     TEXT UNIQUE,
  request_fingerprint TEXT NOT NULL DEFAULT '',
  message             TEXT NOT NULL DEFAULT '',
  create_time         BIGINT,
  update_time         BIGINT,
  start_time          BIGINT,
  end_time            BIGINT,
  cost_backfill       DOUBLE PRECISION NOT NULL DEFAULT 0,
  cost_full_reload    DOUBLE PRECISION NOT NULL DEFAULT 0,
  priority            BIGINT NOT NULL DEFAULT 0,
  max_parallel        BIGINT NOT NULL DEFAULT 0,
  affected_by         TEXT NOT NULL DEFAULT '',
  max_cost            DOUBLE PRECISION NOT NULL DEFAULT 0,
  auto_detect         BIGINT NOT NULL DEFAULT 0,
  checksum            BIGINT NOT NULL DEFAULT 0,
  override_frozen     BIGINT NOT NULL DEFAULT 0,
  approval_hold       TEXT NOT NULL DEFAULT ''
);
CREATE INDEX jobs_by_state ON jobs (state);

CREATE TABLE job_datasets (
  job_id                  TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
  ordinal                 BIGINT NOT NULL,
  dataset                 TEXT NOT NULL,
  reason                  TEXT NOT NULL DEFAULT '',
  cost_backfill           DOUBLE PRECISION NOT NULL DEFAULT 0,
  cost_full_reload        DOUBLE PRECISION NOT NULL DEFAULT 0,
  transform_version       TEXT NOT NULL DEFAULT '',
  estimate_source         TEXT NOT NULL DEFAULT '',
  partitions_from_history BIGINT NOT NULL DEFAULT 0,
  max_cost                DOUBLE PRECISION NOT NULL DEFAULT 0,
  checksum                BIGINT NOT NULL DEFAULT 0,
  PRIMARY KEY (job_id, ordinal)
);
CREATE INDEX job_datasets_by_dataset ON job_datasets (dataset, job_id);

CREATE TABLE tasks (
  job_id             TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
  dataset            TEXT NOT NULL,
  "partition"        TEXT NOT NULL,
  ordinal            BIGINT NOT NULL,
  state              TEXT NOT NULL,
  attempts           BIGINT NOT NULL DEFAULT 0,
  last_error         TEXT NOT NULL DEFAULT '',
  rows_written       BIGINT NOT NULL DEFAULT 0,
  output_fingerprint TEXT NOT NULL DEFAULT '',
  inputs             TEXT NOT NULL DEFAULT '',
  input_rows         BIGINT NOT NULL DEFAULT 0,
  duration_seconds   DOUBLE PRECISION NOT NULL DEFAULT 0,
  update_time        BIGINT,
  reason             TEXT NOT NULL DEFAULT '',
  checksum           BIGINT NOT NULL DEFAULT 0,
  PRIMARY KEY (job_id, dataset, "partition")
);
CREATE INDEX tasks_by_job_ordinal ON tasks (job_id, ordinal);
CREATE INDEX tasks_by_partition ON tasks (dataset, "partition", state);
CREATE INDEX tasks_unchanged ON tasks (dataset) WHERE state = 'UNCHANGED';

-- The count of tasks per state, kept in the transaction of every write to
-- tasks.
CREATE TABLE task_state_counts (
  state TEXT PRIMARY KEY,
  n     BIGINT NOT NULL
);
CREATE FUNCTION task_state_counts_follow() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP IN ('UPDATE', 'DELETE') THEN
    UPDATE backfill_state.task_state_counts SET n = n - 1
      WHERE state = OLD.state;
  END IF;
  IF TG_OP IN ('INSERT', 'UPDATE') THEN
    INSERT INTO backfill_state.task_state_counts (state, n)
      VALUES (NEW.state, 1)
      ON CONFLICT (state) DO UPDATE SET n = task_state_counts.n + 1;
  END IF;
  RETURN NULL;
END $$;
CREATE TRIGGER task_state_counts_insert AFTER INSERT ON tasks
  FOR EACH ROW EXECUTE FUNCTION task_state_counts_follow();
CREATE TRIGGER task_state_counts_update AFTER UPDATE OF state ON tasks
  FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state)
  EXECUTE FUNCTION task_state_counts_follow();
CREATE TRIGGER task_state_counts_delete AFTER DELETE ON tasks
  FOR EACH ROW EXECUTE FUNCTION task_state_counts_follow();

CREATE TABLE lineage (
  id                 BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
  dataset            TEXT NOT NULL,
  "partition"        TEXT NOT NULL,
  job_id             TEXT NOT NULL REFERENCES jobs (id),
  transform_version  TEXT NOT NULL DEFAULT '',
  inputs             TEXT NOT NULL DEFAULT '',
  output_fingerprint TEXT NOT NULL DEFAULT '',
  row_count          BIGINT NOT NULL DEFAULT 0,
  reason             TEXT NOT NULL DEFAULT '',
  ticket             TEXT NOT NULL DEFAULT '',
  requested_by       TEXT NOT NULL DEFAULT '',
  published_at       BIGINT,
  approved_from      TEXT,
  approved_by        TEXT NOT NULL DEFAULT '',
  approval_reason    TEXT NOT NULL DEFAULT '',
  approval_override  BIGINT NOT NULL DEFAULT 0,
  approved_at        BIGINT,
  action             TEXT NOT NULL DEFAULT 'publish',
  checksum           BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX lineage_by_partition
  ON lineage (dataset, "partition", published_at);
CREATE UNIQUE INDEX lineage_once_per_job_action
  ON lineage (job_id, dataset, "partition", action);

-- The audit log: append-only, refused by the database itself.
CREATE SEQUENCE audit_seq;
CREATE TABLE audit_events (
  seq        BIGINT PRIMARY KEY DEFAULT nextval('audit_seq'),
  job_id     TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
  from_state TEXT NOT NULL,
  to_state   TEXT NOT NULL,
  message    TEXT NOT NULL DEFAULT '',
  at         BIGINT
);
CREATE INDEX audit_events_by_job ON audit_events (job_id, seq);
CREATE TABLE policy_audit_events (
  seq        BIGINT PRIMARY KEY DEFAULT nextval('audit_seq'),
  subject    TEXT NOT NULL,
  from_state TEXT NOT NULL,
  to_state   TEXT NOT NULL,
  message    TEXT NOT NULL DEFAULT '',
  at         BIGINT
);
CREATE FUNCTION audit_append_only() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION '% is append-only: events are never changed or removed',
    TG_TABLE_NAME USING ERRCODE = 'insufficient_privilege';
END $$;
CREATE TRIGGER audit_events_append_only
  BEFORE UPDATE OR DELETE ON audit_events
  FOR EACH ROW EXECUTE FUNCTION audit_append_only();
CREATE TRIGGER audit_events_append_only_truncate
  BEFORE TRUNCATE ON audit_events
  FOR EACH STATEMENT EXECUTE FUNCTION audit_append_only();
CREATE TRIGGER policy_audit_events_append_only
  BEFORE UPDATE OR DELETE ON policy_audit_events
  FOR EACH ROW EXECUTE FUNCTION audit_append_only();
CREATE TRIGGER policy_audit_events_append_only_truncate
  BEFORE TRUNCATE ON policy_audit_events
  FOR EACH STATEMENT EXECUTE FUNCTION audit_append_only();

CREATE TABLE check_results (
  job_id             TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
  ordinal            BIGINT NOT NULL,
  check_name         TEXT NOT NULL,
  kind               TEXT NOT NULL,
  severity           TEXT NOT NULL,
  dataset            TEXT NOT NULL,
  "partition"        TEXT NOT NULL DEFAULT '',
  passed             BIGINT NOT NULL,
  summary            BIGINT NOT NULL DEFAULT 0,
  partitions_checked BIGINT NOT NULL DEFAULT 0,
  partitions_failed  BIGINT NOT NULL DEFAULT 0,
  observed           TEXT NOT NULL DEFAULT '',
  allowed            TEXT NOT NULL DEFAULT '',
  message            TEXT NOT NULL DEFAULT '',
  samples            TEXT NOT NULL DEFAULT '',
  PRIMARY KEY (job_id, ordinal)
);

CREATE TABLE job_approvals (
  job_id      TEXT PRIMARY KEY REFERENCES jobs (id) ON DELETE CASCADE,
  approved_by TEXT NOT NULL DEFAULT '',
  reason      TEXT NOT NULL DEFAULT '',
  override    BIGINT NOT NULL DEFAULT 0,
  from_state  TEXT NOT NULL,
  approved_at BIGINT
);

CREATE TABLE job_diff_datasets (
  job_id          TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
  ordinal         BIGINT NOT NULL,
  dataset         TEXT NOT NULL,
  by_key          BIGINT NOT NULL DEFAULT 0,
  key_columns     TEXT NOT NULL DEFAULT '',
  value_columns   TEXT NOT NULL DEFAULT '',
  measure_columns TEXT NOT NULL DEFAULT '',
  computed_at     BIGINT,
  PRIMARY KEY (job_id, dataset)
);
CREATE TABLE job_diff_partitions (
  job_id      TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
  dataset     TEXT NOT NULL,
  "partition" TEXT NOT NULL,
  rows_before BIGINT NOT NULL DEFAULT 0,
  rows_after  BIGINT NOT NULL DEFAULT 0,
  added       BIGINT NOT NULL DEFAULT 0,
  removed     BIGINT NOT NULL DEFAULT 0,
  changed     BIGINT NOT NULL DEFAULT 0,
  unchanged   BIGINT NOT NULL DEFAULT 0,
  measures    TEXT NOT NULL DEFAULT '',
  samples     TEXT NOT NULL DEFAULT '',
  error       TEXT NOT NULL DEFAULT '',
  PRIMARY KEY (job_id, dataset, "partition")
);

CREATE TABLE rollbacks (
  job_id           TEXT PRIMARY KEY REFERENCES jobs (id) ON DELETE CASCADE,
  requested_by     TEXT NOT NULL DEFAULT '',
  reason           TEXT NOT NULL DEFAULT '',
  at               BIGINT,
  forced           BIGINT NOT NULL DEFAULT 0,
  with_job         TEXT NOT NULL DEFAULT '',
  also_rolled_back TEXT NOT NULL DEFAULT '',
  partitions       BIGINT NOT NULL DEFAULT 0,
  rows_restored    BIGINT NOT NULL DEFAULT 0
);

CREATE TABLE job_keys (
  job_id  TEXT NOT NULL REFERENCES jobs (id),
  ordinal BIGINT NOT NULL,
  key     TEXT NOT NULL,
  PRIMARY KEY (job_id, ordinal)
);

CREATE TABLE consumer_confirmations (
  job_id     TEXT NOT NULL REFERENCES jobs (id),
  ordinal    BIGINT NOT NULL,
  dataset    TEXT NOT NULL,
  consumer   TEXT NOT NULL,
  healthy    BIGINT NOT NULL,
  message    TEXT NOT NULL DEFAULT '',
  latency_us BIGINT NOT NULL DEFAULT 0,
  at         BIGINT,
  PRIMARY KEY (job_id, ordinal)
);
CREATE INDEX consumer_confirmations_by_consumer
  ON consumer_confirmations (dataset, consumer, healthy);

CREATE TABLE replay_policy_pauses (
  dataset TEXT PRIMARY KEY,
  paused  BIGINT NOT NULL,
  reason  TEXT NOT NULL DEFAULT '',
  by      TEXT NOT NULL DEFAULT '',
  at      BIGINT
);
)sql",
    // 2: the group of replicas sharing the store (core/ports/lease_store.h,
    // pg_lease_store.h): each replica's record, each job's lease and the
    // decisions sent between replicas. A released lease keeps its row
    // (node '') so that its token only grows. And the count of tasks per
    // state kept per statement instead of per row.
    // These tables have no counterpart in the SQLite state store, whose
    // single process is never part of a group.
    R"sql(
CREATE TABLE backfill_state.nodes (
  name         TEXT PRIMARY KEY,
  address      TEXT NOT NULL,
  version      TEXT NOT NULL,
  started_at   BIGINT NOT NULL,
  heartbeat_at BIGINT NOT NULL,
  draining     BOOLEAN NOT NULL DEFAULT FALSE
);

CREATE TABLE backfill_state.job_leases (
  job_id     TEXT PRIMARY KEY,
  node       TEXT NOT NULL DEFAULT '',
  token      BIGINT NOT NULL,
  step       TEXT NOT NULL DEFAULT '',
  claimed_at BIGINT NOT NULL,
  expires_at BIGINT NOT NULL
);
CREATE INDEX job_leases_by_node ON backfill_state.job_leases (node)
  WHERE node <> '';

-- Decisions on jobs sent to the replica that runs them (NodeRequest):
-- taken_at is set once the replica took one, answered_at once it answered.
CREATE TABLE backfill_state.node_requests (
  id          BIGSERIAL PRIMARY KEY,
  node        TEXT NOT NULL,
  job_id      TEXT NOT NULL,
  kind        TEXT NOT NULL,
  body        TEXT NOT NULL DEFAULT '',
  created_at  BIGINT NOT NULL,
  taken_at    BIGINT,
  answered_at BIGINT,
  code        INTEGER NOT NULL DEFAULT 0,
  message     TEXT NOT NULL DEFAULT ''
);
CREATE INDEX node_requests_waiting ON backfill_state.node_requests (node, id)
  WHERE taken_at IS NULL;

-- The count of tasks per state, kept once per statement over the rows it
-- changed (transition tables) rather than once per row: a statement that
-- writes n tasks updates each state's count once, not n times.
DROP TRIGGER task_state_counts_insert ON backfill_state.tasks;
DROP TRIGGER task_state_counts_update ON backfill_state.tasks;
DROP TRIGGER task_state_counts_delete ON backfill_state.tasks;
DROP FUNCTION backfill_state.task_state_counts_follow();
CREATE FUNCTION backfill_state.task_state_counts_inserted() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO backfill_state.task_state_counts (state, n)
    SELECT state, COUNT(*) FROM new_tasks GROUP BY state
    ON CONFLICT (state) DO UPDATE SET n = task_state_counts.n + EXCLUDED.n;
  RETURN NULL;
END $$;
CREATE FUNCTION backfill_state.task_state_counts_updated() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO backfill_state.task_state_counts (state, n)
    SELECT state, SUM(k) FROM (
        SELECT state, COUNT(*) AS k FROM new_tasks GROUP BY state
        UNION ALL
        SELECT state, -COUNT(*) AS k FROM old_tasks GROUP BY state) d
      GROUP BY state HAVING SUM(k) <> 0
    ON CONFLICT (state) DO UPDATE SET n = task_state_counts.n + EXCLUDED.n;
  RETURN NULL;
END $$;
CREATE FUNCTION backfill_state.task_state_counts_deleted() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  UPDATE backfill_state.task_state_counts c SET n = c.n - d.k
    FROM (SELECT state, COUNT(*) AS k FROM old_tasks GROUP BY state) d
    WHERE c.state = d.state;
  RETURN NULL;
END $$;
CREATE TRIGGER task_state_counts_insert AFTER INSERT ON backfill_state.tasks
  REFERENCING NEW TABLE AS new_tasks
  FOR EACH STATEMENT EXECUTE FUNCTION backfill_state.task_state_counts_inserted();
CREATE TRIGGER task_state_counts_update AFTER UPDATE ON backfill_state.tasks
  REFERENCING OLD TABLE AS old_tasks NEW TABLE AS new_tasks
  FOR EACH STATEMENT EXECUTE FUNCTION backfill_state.task_state_counts_updated();
CREATE TRIGGER task_state_counts_delete AFTER DELETE ON backfill_state.tasks
  REFERENCING OLD TABLE AS old_tasks
  FOR EACH STATEMENT EXECUTE FUNCTION backfill_state.task_state_counts_deleted();
)sql",
    // 3: the count of tasks kept per job and state, not per state alone:
    // the checkpoints of different jobs (replicas running a job each) no
    // longer wait for each other on one shared row per state until commit.
    R"sql(
DROP TRIGGER task_state_counts_insert ON backfill_state.tasks;
DROP TRIGGER task_state_counts_update ON backfill_state.tasks;
DROP TRIGGER task_state_counts_delete ON backfill_state.tasks;
DROP FUNCTION backfill_state.task_state_counts_inserted();
DROP FUNCTION backfill_state.task_state_counts_updated();
DROP FUNCTION backfill_state.task_state_counts_deleted();
DROP TABLE backfill_state.task_state_counts;
CREATE TABLE backfill_state.task_state_counts (
  job_id TEXT NOT NULL,
  state  TEXT NOT NULL,
  n      BIGINT NOT NULL,
  PRIMARY KEY (job_id, state)
);
INSERT INTO backfill_state.task_state_counts (job_id, state, n)
  SELECT job_id, state, COUNT(*) FROM backfill_state.tasks
    GROUP BY job_id, state;
CREATE FUNCTION backfill_state.task_state_counts_inserted() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO backfill_state.task_state_counts (job_id, state, n)
    SELECT job_id, state, COUNT(*) FROM new_tasks GROUP BY job_id, state
    ON CONFLICT (job_id, state) DO UPDATE SET n = task_state_counts.n + EXCLUDED.n;
  RETURN NULL;
END $$;
CREATE FUNCTION backfill_state.task_state_counts_updated() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO backfill_state.task_state_counts (job_id, state, n)
    SELECT job_id, state, SUM(k) FROM (
        SELECT job_id, state, COUNT(*) AS k FROM new_tasks
          GROUP BY job_id, state
        UNION ALL
        SELECT job_id, state, -COUNT(*) AS k FROM old_tasks
          GROUP BY job_id, state) d
      GROUP BY job_id, state HAVING SUM(k) <> 0
    ON CONFLICT (job_id, state) DO UPDATE SET n = task_state_counts.n + EXCLUDED.n;
  RETURN NULL;
END $$;
CREATE FUNCTION backfill_state.task_state_counts_deleted() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  UPDATE backfill_state.task_state_counts c SET n = c.n - d.k
    FROM (SELECT job_id, state, COUNT(*) AS k FROM old_tasks
            GROUP BY job_id, state) d
    WHERE c.job_id = d.job_id AND c.state = d.state;
  DELETE FROM backfill_state.task_state_counts c
    WHERE c.n = 0 AND c.job_id IN (SELECT DISTINCT job_id FROM old_tasks);
  RETURN NULL;
END $$;
CREATE TRIGGER task_state_counts_insert AFTER INSERT ON backfill_state.tasks
  REFERENCING NEW TABLE AS new_tasks
  FOR EACH STATEMENT EXECUTE FUNCTION backfill_state.task_state_counts_inserted();
CREATE TRIGGER task_state_counts_update AFTER UPDATE ON backfill_state.tasks
  REFERENCING OLD TABLE AS old_tasks NEW TABLE AS new_tasks
  FOR EACH STATEMENT EXECUTE FUNCTION backfill_state.task_state_counts_updated();
CREATE TRIGGER task_state_counts_delete AFTER DELETE ON backfill_state.tasks
  REFERENCING OLD TABLE AS old_tasks
  FOR EACH STATEMENT EXECUTE FUNCTION backfill_state.task_state_counts_deleted();
)sql",
};
constexpr int kLatest = sizeof(kMigrations) / sizeof(kMigrations[0]);

}  // namespace

int StateSchemaVersion() { return kLatest; }

absl::StatusOr<int> ReadStateSchemaVersion(PgConnection* conn) {
  ASSIGN_OR_RETURN(
      PgResult exists,
      conn->Exec("SELECT to_regclass('backfill_state.schema_version') IS NOT "
                 "NULL"));
  if (exists.rows.empty() || exists.rows[0][0].value_or("f") != "t") return 0;
  ASSIGN_OR_RETURN(
      PgResult version,
      conn->Exec("SELECT version FROM backfill_state.schema_version"));
  int v = 0;
  if (version.rows.size() != 1 || !version.rows[0][0].has_value() ||
      !absl::SimpleAtoi(*version.rows[0][0], &v)) {
    return absl::DataLossError(
        "backfill_state.schema_version does not hold exactly one version: "
        "the state store's schema is damaged");
  }
  return v;
}

absl::Status MigrateStateSchema(PgConnection* conn) {
  return MigrateStateSchemaTo(conn, kLatest);
}

absl::Status MigrateStateSchemaTo(PgConnection* conn, int target) {
  if (target < 1 || target > kLatest) {
    return absl::InvalidArgumentError(
        absl::StrCat("no state store schema version ", target));
  }
  while (true) {
    PgTransaction txn(conn);
    RETURN_IF_ERROR(txn.Begin());
    RETURN_IF_ERROR(conn->Exec(kMigrationLock).status());
    // Read under the lock: another replica may have migrated meanwhile.
    ASSIGN_OR_RETURN(int version, ReadStateSchemaVersion(conn));
    if (version > kLatest) {
      return absl::FailedPreconditionError(
          absl::StrCat("the state store's schema version ", version,
                       " is newer than this backfilld knows (", kLatest,
                       "); run a newer backfilld"));
    }
    if (version >= target) return txn.Commit();
    absl::Status step = conn->ExecScript(kMigrations[version]);
    if (!step.ok()) {
      return absl::Status(step.code(),
                          absl::StrCat("state store migration to version ",
                                       version + 1, ": ", step.message()));
    }
    RETURN_IF_ERROR(
        conn->Exec("UPDATE backfill_state.schema_version SET version = $1",
                   {std::to_string(version + 1)})
            .status());
    RETURN_IF_ERROR(txn.Commit());
  }
}

}  // namespace backfill::postgres
