#include "storage/sqlite/state/state_migrations.h"

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"

namespace backfill::sqlite_state {
namespace {

// Schema migrations. Step i (0-based) takes the file from user_version i to
// i + 1 and runs in its own transaction. Append only: never edit a step that
// has shipped.
constexpr const char* kMigrations[] = {
    // 1: the initial schema.
    R"sql(
CREATE TABLE counters (
  name  TEXT PRIMARY KEY,
  value INTEGER NOT NULL
);
INSERT INTO counters (name, value) VALUES ('job', 0);

CREATE TABLE jobs (
  id                  TEXT PRIMARY KEY,          -- "bf-<seq>"
  seq                 INTEGER NOT NULL UNIQUE,
  state               TEXT NOT NULL,
  dataset             TEXT NOT NULL,
  range_from          TEXT NOT NULL DEFAULT '',
  range_to            TEXT NOT NULL DEFAULT '',
  partitions          TEXT NOT NULL DEFAULT '',  -- length-prefixed list
  reason              TEXT NOT NULL DEFAULT '',
  ticket              TEXT NOT NULL DEFAULT '',
  requested_by        TEXT NOT NULL DEFAULT '',
  exclude_downstream  INTEGER NOT NULL DEFAULT 0,
  idempotency_key     TEXT UNIQUE,               -- NULL when none
  request_fingerprint TEXT NOT NULL DEFAULT '',
  message             TEXT NOT NULL DEFAULT '',
  create_time         INTEGER,                   -- unix micros
  update_time         INTEGER,
  start_time          INTEGER,                   -- NULL: not yet
  end_time            INTEGER,
  cost_backfill       REAL NOT NULL DEFAULT 0,
  cost_full_reload    REAL NOT NULL DEFAULT 0
);
CREATE INDEX jobs_by_state ON jobs (state);

CREATE TABLE job_datasets (
  job_id           TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
  ordinal          INTEGER NOT NULL,
  dataset          TEXT NOT NULL,
  reason           TEXT NOT NULL DEFAULT '',
  cost_backfill    REAL NOT NULL DEFAULT 0,
  cost_full_reload REAL NOT NULL DEFAULT 0,
  PRIMARY KEY (job_id, ordinal)
);
CREATE INDEX job_datasets_by_dataset ON job_datasets (dataset, job_id);

CREATE TABLE tasks (
  job_id             TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
  dataset            TEXT NOT NULL,
  "partition"        TEXT NOT NULL,
  ordinal            INTEGER NOT NULL,
  state              TEXT NOT NULL,
  attempts           INTEGER NOT NULL DEFAULT 0,
  last_error         TEXT NOT NULL DEFAULT '',
  rows_written       INTEGER NOT NULL DEFAULT 0,
  output_fingerprint TEXT NOT NULL DEFAULT '',
  inputs             TEXT NOT NULL DEFAULT '',   -- length-prefixed
  input_rows         INTEGER NOT NULL DEFAULT 0,
  duration_seconds   REAL NOT NULL DEFAULT 0,
  update_time        INTEGER,
  PRIMARY KEY (job_id, dataset, "partition")
) WITHOUT ROWID;
CREATE INDEX tasks_by_job_ordinal ON tasks (job_id, ordinal);
CREATE INDEX tasks_by_state ON tasks (state);

CREATE TABLE lineage (
  id                 INTEGER PRIMARY KEY,
  dataset            TEXT NOT NULL,
  "partition"        TEXT NOT NULL,
  job_id             TEXT NOT NULL REFERENCES jobs (id),
  transform_version  TEXT NOT NULL DEFAULT '',
  inputs             TEXT NOT NULL DEFAULT '',   -- length-prefixed
  output_fingerprint TEXT NOT NULL DEFAULT '',
  row_count          INTEGER NOT NULL DEFAULT 0,
  reason             TEXT NOT NULL DEFAULT '',
  ticket             TEXT NOT NULL DEFAULT '',
  requested_by       TEXT NOT NULL DEFAULT '',
  published_at       INTEGER
);
CREATE INDEX lineage_by_partition ON lineage (dataset, "partition", published_at);
CREATE UNIQUE INDEX lineage_once_per_job ON lineage (job_id, dataset, "partition");

CREATE TABLE audit_events (
  seq        INTEGER PRIMARY KEY,
  job_id     TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
  from_state TEXT NOT NULL,
  to_state   TEXT NOT NULL,
  message    TEXT NOT NULL DEFAULT '',
  at         INTEGER
);
CREATE INDEX audit_events_by_job ON audit_events (job_id, seq);
)sql",
    // 2: the transform version each dataset of a job computes with.
    R"sql(
ALTER TABLE job_datasets ADD COLUMN transform_version TEXT NOT NULL DEFAULT '';
)sql",
    // 3: the store's identity (publication markers in the warehouse name
    // it), and a job's scheduling options.
    R"sql(
CREATE TABLE meta (
  key   TEXT PRIMARY KEY,
  value TEXT NOT NULL
);
INSERT INTO meta (key, value) VALUES ('store_id', lower(hex(randomblob(16))));
INSERT INTO meta (key, value)
  VALUES ('created_at', CAST(strftime('%s', 'now') AS INTEGER) * 1000000);
ALTER TABLE jobs ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN max_parallel INTEGER NOT NULL DEFAULT 0;
)sql",
    // 4: validation check results per job (see core/model/check_result.h): one
    // summary per check and dataset plus the failing partitions.
    R"sql(
CREATE TABLE check_results (
  job_id             TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
  ordinal            INTEGER NOT NULL,
  check_name         TEXT NOT NULL,
  kind               TEXT NOT NULL,
  severity           TEXT NOT NULL,              -- error, hold, warn
  dataset            TEXT NOT NULL,
  "partition"        TEXT NOT NULL DEFAULT '',
  passed             INTEGER NOT NULL,
  summary            INTEGER NOT NULL DEFAULT 0,
  partitions_checked INTEGER NOT NULL DEFAULT 0,
  partitions_failed  INTEGER NOT NULL DEFAULT 0,
  observed           TEXT NOT NULL DEFAULT '',
  allowed            TEXT NOT NULL DEFAULT '',
  message            TEXT NOT NULL DEFAULT '',
  samples            TEXT NOT NULL DEFAULT '',   -- length-prefixed list
  PRIMARY KEY (job_id, ordinal)
) WITHOUT ROWID;
)sql",
    // 5: operators' approvals, with the lineage they publish, and the diff
    // a job computes before publishing.
    R"sql(
CREATE TABLE job_approvals (
  job_id      TEXT PRIMARY KEY REFERENCES jobs (id) ON DELETE CASCADE,
  approved_by TEXT NOT NULL DEFAULT '',
  reason      TEXT NOT NULL DEFAULT '',
  override    INTEGER NOT NULL DEFAULT 0,
  from_state  TEXT NOT NULL,
  approved_at INTEGER
);
ALTER TABLE lineage ADD COLUMN approved_from TEXT;  -- NULL: not approved
ALTER TABLE lineage ADD COLUMN approved_by TEXT NOT NULL DEFAULT '';
ALTER TABLE lineage ADD COLUMN approval_reason TEXT NOT NULL DEFAULT '';
ALTER TABLE lineage ADD COLUMN approval_override INTEGER NOT NULL DEFAULT 0;
ALTER TABLE lineage ADD COLUMN approved_at INTEGER;

CREATE TABLE job_diff_datasets (
  job_id          TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
  ordinal         INTEGER NOT NULL,
  dataset         TEXT NOT NULL,
  by_key          INTEGER NOT NULL DEFAULT 0,
  key_columns     TEXT NOT NULL DEFAULT '',  -- length-prefixed
  value_columns   TEXT NOT NULL DEFAULT '',  -- length-prefixed
  measure_columns TEXT NOT NULL DEFAULT '',  -- length-prefixed
  computed_at     INTEGER,
  PRIMARY KEY (job_id, dataset)
);
CREATE TABLE job_diff_partitions (
  job_id      TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
  dataset     TEXT NOT NULL,
  "partition" TEXT NOT NULL,
  rows_before INTEGER NOT NULL DEFAULT 0,
  rows_after  INTEGER NOT NULL DEFAULT 0,
  added       INTEGER NOT NULL DEFAULT 0,
  removed     INTEGER NOT NULL DEFAULT 0,
  changed     INTEGER NOT NULL DEFAULT 0,
  unchanged   INTEGER NOT NULL DEFAULT 0,
  measures    TEXT NOT NULL DEFAULT '',  -- length-prefixed: before, after
  samples     TEXT NOT NULL DEFAULT '',  -- length-prefixed samples
  error       TEXT NOT NULL DEFAULT '',
  PRIMARY KEY (job_id, dataset, "partition")
) WITHOUT ROWID;
)sql",
    // 6: rollbacks. A lineage record says whether a job published the
    // version or its rollback restored it (a job has at most one of each
    // per partition); how each rolled-back job was rolled back.
    R"sql(
ALTER TABLE lineage ADD COLUMN action TEXT NOT NULL DEFAULT 'publish';
DROP INDEX lineage_once_per_job;
CREATE UNIQUE INDEX lineage_once_per_job_action
  ON lineage (job_id, dataset, "partition", action);
CREATE TABLE rollbacks (
  job_id           TEXT PRIMARY KEY REFERENCES jobs (id) ON DELETE CASCADE,
  requested_by     TEXT NOT NULL DEFAULT '',
  reason           TEXT NOT NULL DEFAULT '',
  at               INTEGER,                   -- unix micros
  forced           INTEGER NOT NULL DEFAULT 0,
  with_job         TEXT NOT NULL DEFAULT '',  -- rolled back with this job
  also_rolled_back TEXT NOT NULL DEFAULT '',  -- length-prefixed job ids
  partitions       INTEGER NOT NULL DEFAULT 0,
  rows_restored    INTEGER NOT NULL DEFAULT 0
);
)sql",
    // 7: why each planned partition is in its job ("requested",
    // "downstream of X via rollup", ...); '' for jobs planned before.
    R"sql(
ALTER TABLE tasks ADD COLUMN reason TEXT NOT NULL DEFAULT '';
)sql",
    // 8: a job's affected_by scope ("DATASET: PREDICATE"; '' for none).
    R"sql(
ALTER TABLE jobs ADD COLUMN affected_by TEXT NOT NULL DEFAULT '';
)sql",
    // 9: cost estimates and budgets. A job's budget (--max-cost), how each
    // dataset's estimate was made (from the history of earlier runs or from
    // row counts) and the dataset's own budget when planned; an index to
    // find a partition's last successful run (its input rows are the
    // history).
    R"sql(
ALTER TABLE jobs ADD COLUMN max_cost REAL NOT NULL DEFAULT 0;
ALTER TABLE job_datasets ADD COLUMN estimate_source TEXT NOT NULL DEFAULT '';
ALTER TABLE job_datasets ADD COLUMN partitions_from_history INTEGER NOT NULL
  DEFAULT 0;
ALTER TABLE job_datasets ADD COLUMN max_cost REAL NOT NULL DEFAULT 0;
CREATE INDEX tasks_by_partition ON tasks (dataset, "partition", state);
)sql",
    // 10: a job's auto scope (--auto: the partitions whose recorded lineage
    // no longer matches); 0 for none.
    R"sql(
ALTER TABLE jobs ADD COLUMN auto_detect INTEGER NOT NULL DEFAULT 0;
)sql",
    // 11: a job's entity keys (--keys), one row per key, in order.
    R"sql(
CREATE TABLE job_keys (
  job_id  TEXT NOT NULL REFERENCES jobs(id),
  ordinal INTEGER NOT NULL,
  key     TEXT NOT NULL,
  PRIMARY KEY (job_id, ordinal)
) WITHOUT ROWID;
)sql",
    // 12: the audit log is append-only: changing or removing an event is
    // refused by the database itself (no code of backfilld does either; a
    // test checks its sources). A job is never deleted either, so the
    // ON DELETE CASCADE of audit_events never fires.
    R"sql(
CREATE TRIGGER audit_events_append_only_update BEFORE UPDATE ON audit_events
BEGIN
  SELECT RAISE(ABORT, 'audit_events is append-only: events are never changed');
END;
CREATE TRIGGER audit_events_append_only_delete BEFORE DELETE ON audit_events
BEGIN
  SELECT RAISE(ABORT, 'audit_events is append-only: events are never removed');
END;
)sql",
    // 13: INSERT OR REPLACE on an existing seq would delete the event and
    // write another without firing the DELETE trigger (SQLite fires it for
    // a REPLACE only with recursive_triggers on): refuse an insert whose seq
    // is taken. New events get a fresh seq and pass.
    R"sql(
CREATE TRIGGER audit_events_append_only_insert BEFORE INSERT ON audit_events
WHEN EXISTS (SELECT 1 FROM audit_events WHERE seq = NEW.seq)
BEGIN
  SELECT RAISE(ABORT, 'audit_events is append-only: an event is never replaced');
END;
)sql",
    // 14: what each job's latest confirmation found per downstream
    // consumer (core/model/job.h ConsumerFinding); the index serves the
    // health gauge, which reads them per consumer.
    R"sql(
CREATE TABLE consumer_confirmations (
  job_id     TEXT NOT NULL REFERENCES jobs(id),
  ordinal    INTEGER NOT NULL,
  dataset    TEXT NOT NULL,
  consumer   TEXT NOT NULL,
  healthy    INTEGER NOT NULL,
  message    TEXT NOT NULL DEFAULT '',
  latency_us INTEGER NOT NULL DEFAULT 0,
  at         INTEGER,
  PRIMARY KEY (job_id, ordinal)
) WITHOUT ROWID;
CREATE INDEX consumer_confirmations_by_consumer
  ON consumer_confirmations (dataset, consumer, healthy);
)sql",
    // 15: the count of tasks in each state, kept by triggers in the same
    // transaction as every write to tasks (a rolled-back write leaves it as
    // it was), so that a scrape reads eight rows instead of counting every
    // task. The index on state alone served only that count: a partial
    // index keeps what VerifiedVersions needs (a dataset's UNCHANGED
    // tasks), and the state store's file loses an index entry per task,
    // which the integrity check at start-up no longer reads.
    R"sql(
CREATE TABLE task_state_counts (
  state TEXT PRIMARY KEY,
  n     INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO task_state_counts (state, n)
  SELECT state, COUNT(*) FROM tasks GROUP BY state;
CREATE TRIGGER task_state_counts_insert AFTER INSERT ON tasks
BEGIN
  INSERT INTO task_state_counts (state, n) VALUES (NEW.state, 1)
    ON CONFLICT (state) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER task_state_counts_update AFTER UPDATE OF state ON tasks
WHEN OLD.state IS NOT NEW.state
BEGIN
  UPDATE task_state_counts SET n = n - 1 WHERE state = OLD.state;
  INSERT INTO task_state_counts (state, n) VALUES (NEW.state, 1)
    ON CONFLICT (state) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER task_state_counts_delete AFTER DELETE ON tasks
BEGIN
  UPDATE task_state_counts SET n = n - 1 WHERE state = OLD.state;
END;
DROP INDEX tasks_by_state;
CREATE INDEX tasks_unchanged ON tasks (dataset) WHERE state = 'UNCHANGED';
)sql",
    // 16: a checksum in each record of jobs, job_datasets, tasks and
    // lineage (storage/sqlite/state/state_record_checksums.h), which every read
    // checks
    // and the start check reads: damage to what a record holds (in columns
    // no index covers, or in its overflow pages) passes SQLite's
    // integrity_check. The records already written get theirs here.
    R"sql(
ALTER TABLE jobs ADD COLUMN checksum INTEGER NOT NULL DEFAULT 0;
ALTER TABLE job_datasets ADD COLUMN checksum INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN checksum INTEGER NOT NULL DEFAULT 0;
ALTER TABLE lineage ADD COLUMN checksum INTEGER NOT NULL DEFAULT 0;
UPDATE jobs SET checksum = _bf_row_hash("id", "seq", "state", "dataset",
  "range_from", "range_to", "partitions", "reason", "ticket",
  "requested_by", "exclude_downstream", "idempotency_key",
  "request_fingerprint", "message", "create_time", "update_time",
  "start_time", "end_time", "cost_backfill", "cost_full_reload", "priority",
  "max_parallel", "affected_by", "max_cost", "auto_detect");
UPDATE job_datasets SET checksum = _bf_row_hash("job_id", "ordinal",
  "dataset", "reason", "cost_backfill", "cost_full_reload",
  "transform_version", "estimate_source", "partitions_from_history",
  "max_cost");
UPDATE tasks SET checksum = _bf_row_hash("job_id", "dataset", "partition",
  "ordinal", "state", "attempts", "last_error", "rows_written",
  "output_fingerprint", "inputs", "input_rows", "duration_seconds",
  "update_time", "reason");
UPDATE lineage SET checksum = _bf_row_hash("dataset", "partition", "job_id",
  "transform_version", "inputs", "output_fingerprint", "row_count",
  "reason", "ticket", "requested_by", "published_at", "approved_from",
  "approved_by", "approval_reason", "approval_override", "approved_at",
  "action");
)sql",
    // 17: whether a job reopened frozen partitions (override_frozen), and
    // why it waits for an approval whatever its datasets declare
    // (approval_hold: a replay policy's); each job's checksum again.
    R"sql(
ALTER TABLE jobs ADD COLUMN override_frozen INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN approval_hold TEXT NOT NULL DEFAULT '';
UPDATE jobs SET checksum = _bf_row_hash("id", "seq", "state", "dataset",
  "range_from", "range_to", "partitions", "reason", "ticket",
  "requested_by", "exclude_downstream", "idempotency_key",
  "request_fingerprint", "message", "create_time", "update_time",
  "start_time", "end_time", "cost_backfill", "cost_full_reload", "priority",
  "max_parallel", "affected_by", "max_cost", "auto_detect",
  "override_frozen", "approval_hold");
)sql",
    // 18: what operators do to replay policies (pause, resume) is audited
    // too. Such an event has no job, so it lives in a table of its own,
    // append-only like audit_events (the same triggers), whose seq shares
    // audit_events' numbering: every event of either table takes the next
    // seq over both (AppendAudit), and the log reads both in seq order.
    // Whether each policy is paused is kept across restarts.
    R"sql(
CREATE TABLE policy_audit_events (
  seq        INTEGER PRIMARY KEY,
  subject    TEXT NOT NULL,
  from_state TEXT NOT NULL,
  to_state   TEXT NOT NULL,
  message    TEXT NOT NULL DEFAULT '',
  at         INTEGER
);
CREATE TRIGGER policy_audit_events_append_only_update
BEFORE UPDATE ON policy_audit_events
BEGIN
  SELECT RAISE(ABORT, 'policy_audit_events is append-only: events are never changed');
END;
CREATE TRIGGER policy_audit_events_append_only_delete
BEFORE DELETE ON policy_audit_events
BEGIN
  SELECT RAISE(ABORT, 'policy_audit_events is append-only: events are never removed');
END;
CREATE TRIGGER policy_audit_events_append_only_insert
BEFORE INSERT ON policy_audit_events
WHEN EXISTS (SELECT 1 FROM policy_audit_events WHERE seq = NEW.seq)
BEGIN
  SELECT RAISE(ABORT, 'policy_audit_events is append-only: an event is never replaced');
END;
CREATE TABLE replay_policy_pauses (
  dataset TEXT PRIMARY KEY,
  paused  INTEGER NOT NULL,
  reason  TEXT NOT NULL DEFAULT '',
  by      TEXT NOT NULL DEFAULT '',
  at      INTEGER
) WITHOUT ROWID;
)sql",
};
constexpr int kSchemaVersion = sizeof(kMigrations) / sizeof(kMigrations[0]);

}  // namespace

int SchemaVersion() { return kSchemaVersion; }

absl::Status Migrate(sqlite::Database* db) {
  ASSIGN_OR_RETURN(int64_t version, db->QueryInt("PRAGMA user_version"));
  if (version > kSchemaVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        "schema version ", version, " is newer than this backfilld knows (",
        kSchemaVersion, "); run a newer backfilld"));
  }
  for (int64_t v = version; v < kSchemaVersion; ++v) {
    ASSIGN_OR_RETURN(sqlite::Transaction txn, sqlite::Transaction::Begin(db));
    // Re-read under the write lock: another process may have migrated.
    ASSIGN_OR_RETURN(int64_t now_version, db->QueryInt("PRAGMA user_version"));
    if (now_version != v) return absl::OkStatus();
    absl::Status step = db->Exec(kMigrations[v]);
    if (!step.ok()) {
      return absl::Status(
          step.code(),
          absl::StrCat("migration to version ", v + 1, ": ", step.message()));
    }
    // PRAGMA takes no parameters; v + 1 is our own integer.
    RETURN_IF_ERROR(db->Exec(absl::StrCat("PRAGMA user_version = ", v + 1)));
    RETURN_IF_ERROR(txn.Commit());
  }
  return absl::OkStatus();
}

}  // namespace backfill::sqlite_state
