#include "storage/sqlite_state_store.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "core/error_details.h"
#include "core/job_state_machine.h"
#include "core/status_macros.h"
#include "storage/sqlite/sqlite_db.h"
#include "storage/sqlite/sqlite_fingerprint_function.h"
#include "storage/sqlite/sqlite_wal_checkpointer.h"
#include "storage/state_record_checksums.h"

namespace backfill {
namespace {

namespace sr = state_records;

// SQL built once from the record checksums' tables (a statement's text is
// its key in the statement cache, so it must not change between calls).
const std::string& Once(std::string sql) {
  // Leaked on purpose: statements are prepared until the process ends.
  return *new std::string(std::move(sql));
}

// NOT_FOUND for a job id the store does not hold.
absl::Status NoJob(const std::string& id) {
  return WithReason(absl::NotFoundError(absl::StrCat("no job ", id)),
                    "BACKFILL_NOT_FOUND", {{"backfill_id", id}});
}

// absl::string_view is not std::string_view in this abseil build.
absl::string_view Sv(std::string_view s) { return {s.data(), s.size()}; }

using sqlite::Database;
using sqlite::OpenOptions;
using sqlite::Statement;
using sqlite::Transaction;

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
    // 4: validation check results per job (see core/check_result.h): one
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
    // consumer (core/job.h ConsumerFinding); the index serves the
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
    // lineage (storage/state_record_checksums.h), which every read checks
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
};
constexpr int kSchemaVersion = sizeof(kMigrations) / sizeof(kMigrations[0]);
// The first schema version whose records carry checksums (migration 16).
constexpr int64_t kFirstChecksummedVersion = 16;

constexpr const char* kJobColumns =
    "id, state, dataset, range_from, range_to, partitions, reason, ticket, "
    "requested_by, exclude_downstream, COALESCE(idempotency_key, ''), "
    "request_fingerprint, message, create_time, update_time, start_time, "
    "end_time, cost_backfill, cost_full_reload, priority, max_parallel, "
    "affected_by, auto_detect";

// ---- encoding --------------------------------------------------------------

std::string EncodeFields(const std::vector<std::string>& fields) {
  std::string out;
  for (const std::string& f : fields) absl::StrAppend(&out, f.size(), ":", f);
  return out;
}

absl::StatusOr<std::vector<std::string>> DecodeFields(std::string_view in) {
  std::vector<std::string> out;
  while (!in.empty()) {
    size_t colon = in.find(':');
    size_t len = 0;
    if (colon == std::string_view::npos ||
        !absl::SimpleAtoi(Sv(in.substr(0, colon)), &len) ||
        len > in.size() - colon - 1) {
      return absl::DataLossError("state store: malformed encoded list");
    }
    out.emplace_back(in.substr(colon + 1, len));
    in.remove_prefix(colon + 1 + len);
  }
  return out;
}

std::string EncodeInputs(const std::vector<InputFingerprint>& inputs) {
  std::vector<std::string> fields;
  for (const InputFingerprint& in : inputs) {
    fields.push_back(in.dataset);
    fields.push_back(in.partition);
    fields.push_back(in.fingerprint);
    fields.push_back(absl::StrCat(in.rows));
  }
  return EncodeFields(fields);
}

absl::StatusOr<std::vector<InputFingerprint>> DecodeInputs(
    std::string_view text) {
  ASSIGN_OR_RETURN(std::vector<std::string> fields, DecodeFields(text));
  if (fields.size() % 4 != 0) {
    return absl::DataLossError("state store: malformed input list");
  }
  std::vector<InputFingerprint> out;
  for (size_t i = 0; i < fields.size(); i += 4) {
    InputFingerprint in;
    in.dataset = fields[i];
    in.partition = fields[i + 1];
    in.fingerprint = fields[i + 2];
    if (!absl::SimpleAtoi(fields[i + 3], &in.rows)) {
      return absl::DataLossError("state store: malformed input row count");
    }
    out.push_back(std::move(in));
  }
  return out;
}

// Measure totals as "before", "after" per measure, in full precision.
std::string EncodeMeasures(const std::vector<MeasureTotals>& measures) {
  std::vector<std::string> fields;
  for (const MeasureTotals& m : measures) {
    fields.push_back(absl::StrFormat("%.17g", m.before));
    fields.push_back(absl::StrFormat("%.17g", m.after));
  }
  return EncodeFields(fields);
}

absl::StatusOr<std::vector<MeasureTotals>> DecodeMeasures(
    std::string_view text, const std::vector<std::string>& columns) {
  ASSIGN_OR_RETURN(std::vector<std::string> fields, DecodeFields(text));
  if (fields.size() != 2 * columns.size()) {
    return absl::DataLossError("state store: malformed measure totals");
  }
  std::vector<MeasureTotals> out;
  for (size_t i = 0; i < columns.size(); ++i) {
    MeasureTotals m;
    m.column = columns[i];
    if (!absl::SimpleAtod(fields[2 * i], &m.before) ||
        !absl::SimpleAtod(fields[2 * i + 1], &m.after)) {
      return absl::DataLossError("state store: malformed measure total");
    }
    out.push_back(std::move(m));
  }
  return out;
}

// Each sample as one field: change, the three value counts, the values.
std::string EncodeSamples(const std::vector<DiffSample>& samples) {
  std::vector<std::string> encoded;
  for (const DiffSample& sample : samples) {
    std::vector<std::string> fields = {
        DiffChangeName(sample.change), absl::StrCat(sample.key.size()),
        absl::StrCat(sample.before.size()), absl::StrCat(sample.after.size())};
    for (const auto* part : {&sample.key, &sample.before, &sample.after}) {
      fields.insert(fields.end(), part->begin(), part->end());
    }
    encoded.push_back(EncodeFields(fields));
  }
  return EncodeFields(encoded);
}

absl::StatusOr<std::vector<DiffSample>> DecodeSamples(std::string_view text) {
  ASSIGN_OR_RETURN(std::vector<std::string> encoded, DecodeFields(text));
  std::vector<DiffSample> out;
  for (const std::string& one : encoded) {
    ASSIGN_OR_RETURN(std::vector<std::string> fields, DecodeFields(one));
    size_t n[3];
    if (fields.size() < 4 || !absl::SimpleAtoi(fields[1], &n[0]) ||
        !absl::SimpleAtoi(fields[2], &n[1]) ||
        !absl::SimpleAtoi(fields[3], &n[2]) ||
        fields.size() != 4 + n[0] + n[1] + n[2]) {
      return absl::DataLossError("state store: malformed diff sample");
    }
    DiffSample sample;
    if (fields[0] == "added") {
      sample.change = DiffChange::kAdded;
    } else if (fields[0] == "removed") {
      sample.change = DiffChange::kRemoved;
    } else {
      sample.change = DiffChange::kChanged;
    }
    auto at = fields.begin() + 4;
    sample.key.assign(at, at + n[0]);
    at += n[0];
    sample.before.assign(at, at + n[1]);
    at += n[1];
    sample.after.assign(at, at + n[2]);
    out.push_back(std::move(sample));
  }
  return out;
}

int64_t InputRows(const std::vector<InputFingerprint>& inputs) {
  int64_t sum = 0;
  for (const InputFingerprint& in : inputs) sum += in.rows;
  return sum;
}

absl::Status BindTime(Statement& stmt, int index, absl::Time t) {
  if (t == absl::InfinitePast() || t == absl::InfiniteFuture()) {
    return stmt.BindNull(index);
  }
  return stmt.BindInt(index, absl::ToUnixMicros(t));
}

absl::Time ColumnTime(const Statement& stmt, int index) {
  if (stmt.ColumnIsNull(index)) return absl::InfinitePast();
  return absl::FromUnixMicros(stmt.ColumnInt(index));
}

std::string JobStateText(JobState s) { return std::string(JobStateName(s)); }
std::string TaskStateText(TaskState s) { return std::string(TaskStateName(s)); }

// "?, ?, ?" for n placeholders numbered from `first`.
std::string Placeholders(int first, size_t n) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < n; ++i) parts.push_back(absl::StrCat("?", first + i));
  return absl::StrJoin(parts, ", ");
}

// States in which a job's publication has already been recorded.
bool PastPublishing(JobState s) {
  return s == JobState::kConfirming || s == JobState::kSucceeded ||
         s == JobState::kDownstreamUnhealthy || s == JobState::kRolledBack;
}

absl::StatusOr<Job> ReadJobRow(const Statement& q) {
  Job job;
  job.id = q.ColumnText(0);
  ASSIGN_OR_RETURN(job.state, ParseJobState(q.ColumnText(1)));
  job.request.dataset = q.ColumnText(2);
  job.request.from = q.ColumnText(3);
  job.request.to = q.ColumnText(4);
  ASSIGN_OR_RETURN(job.request.partitions, DecodeFields(q.ColumnText(5)));
  job.request.reason = q.ColumnText(6);
  job.request.ticket = q.ColumnText(7);
  job.request.requested_by = q.ColumnText(8);
  job.request.exclude_downstream = q.ColumnInt(9) != 0;
  job.idempotency_key = q.ColumnText(10);
  job.request_fingerprint = q.ColumnText(11);
  job.message = q.ColumnText(12);
  job.create_time = ColumnTime(q, 13);
  job.update_time = ColumnTime(q, 14);
  job.start_time = ColumnTime(q, 15);
  job.end_time = ColumnTime(q, 16);
  job.plan.cost.backfill = q.ColumnDouble(17);
  job.plan.cost.full_reload = q.ColumnDouble(18);
  job.request.priority = static_cast<int>(q.ColumnInt(19));
  job.request.max_parallel = static_cast<int>(q.ColumnInt(20));
  job.request.affected_by = q.ColumnText(21);
  job.request.auto_detect = q.ColumnInt(22) != 0;
  return job;
}

// A job's tasks are read in the order of the primary key (job_id, dataset,
// partition): a range scan of the table. Their plan order is their ordinal
// (0, 1, ... as CreateJob numbers them), but ORDER BY ordinal goes through
// tasks_by_job_ordinal and searches the table once per task for the other
// columns, three times as long for a large job. InPlanOrder sorts what was
// read (usually in plan order already: a plan sorts each dataset's
// partitions). The ORDER BY below names the key, so the planner keeps to it.
constexpr char kTasksOfJobInKeyOrder[] = " ORDER BY dataset, \"partition\"";

template <typename T>
void InPlanOrder(std::vector<T>* items) {
  auto by_ordinal = [](const T& a, const T& b) {
    return a.ordinal < b.ordinal;
  };
  if (!std::is_sorted(items->begin(), items->end(), by_ordinal)) {
    std::sort(items->begin(), items->end(), by_ordinal);
  }
}

// The columns ReadTaskRow reads, in its order.
constexpr char kTaskColumns[] =
    "job_id, dataset, \"partition\", state, attempts, last_error, "
    "rows_written, output_fingerprint, inputs, duration_seconds, "
    "update_time, ordinal, reason";

// kTaskColumns and whether the record is intact (column 13).
const std::string& TaskColumnsChecked() {
  static const std::string& sql =
      Once(absl::StrCat(kTaskColumns, ", ", sr::IntactSql(sr::Tasks())));
  return sql;
}

// A row of TaskColumnsChecked(); DATA_LOSS naming the task when its record
// fails its checksum.
absl::StatusOr<PartitionTask> ReadTaskRow(const Statement& q,
                                          const std::string& path) {
  if (q.ColumnInt(13) != 1) {
    return sr::Damaged(
        sr::TaskRecord(q.ColumnText(0), q.ColumnText(1), q.ColumnText(2)),
        path);
  }
  PartitionTask t;
  t.job_id = q.ColumnText(0);
  t.dataset = q.ColumnText(1);
  t.partition = q.ColumnText(2);
  ASSIGN_OR_RETURN(t.state, ParseTaskState(q.ColumnText(3)));
  t.attempts = static_cast<int>(q.ColumnInt(4));
  t.last_error = q.ColumnText(5);
  t.rows_written = q.ColumnInt(6);
  t.output_fingerprint = q.ColumnText(7);
  ASSIGN_OR_RETURN(t.inputs, DecodeInputs(q.ColumnText(8)));
  t.duration_seconds = q.ColumnDouble(9);
  t.update_time = ColumnTime(q, 10);
  t.ordinal = q.ColumnInt(11);
  t.reason = q.ColumnText(12);
  return t;
}

constexpr char kLineageColumns[] =
    "dataset, \"partition\", job_id, transform_version, inputs, "
    "output_fingerprint, row_count, reason, ticket, requested_by, "
    "published_at, action, approved_from, approved_by, approval_reason, "
    "approval_override, approved_at, id";

// kLineageColumns of the table aliased `alias` ("" for none), and whether
// the record is intact (column 18).
std::string LineageColumns(std::string_view alias) {
  std::vector<std::string> columns = absl::StrSplit(kLineageColumns, ", ");
  if (!alias.empty()) {
    for (std::string& c : columns) c = absl::StrCat(Sv(alias), ".", c);
  }
  columns.push_back(sr::IntactSql(sr::Lineage(), alias));
  return absl::StrJoin(columns, ", ");
}

// Every row of `q`, which selects LineageColumns; DATA_LOSS naming the
// first record that fails its checksum.
absl::StatusOr<std::vector<LineageRecord>> ReadLineage(
    Statement& q, const std::string& path) {
  std::vector<LineageRecord> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) break;
    if (q.ColumnInt(18) != 1) {
      return sr::Damaged(sr::LineageRecordName(q.ColumnText(2), q.ColumnText(0),
                                               q.ColumnText(1)),
                         path);
    }
    LineageRecord rec;
    rec.dataset = q.ColumnText(0);
    rec.partition = q.ColumnText(1);
    rec.job_id = q.ColumnText(2);
    rec.transform_version = q.ColumnText(3);
    ASSIGN_OR_RETURN(rec.inputs, DecodeInputs(q.ColumnText(4)));
    rec.output_fingerprint = q.ColumnText(5);
    rec.row_count = q.ColumnInt(6);
    rec.reason = q.ColumnText(7);
    rec.ticket = q.ColumnText(8);
    rec.requested_by = q.ColumnText(9);
    rec.published_at = ColumnTime(q, 10);
    ASSIGN_OR_RETURN(rec.action, ParseLineageAction(q.ColumnText(11)));
    if (!q.ColumnIsNull(12)) {
      Approval approval;
      ASSIGN_OR_RETURN(approval.from_state, ParseJobState(q.ColumnText(12)));
      approval.approved_by = q.ColumnText(13);
      approval.reason = q.ColumnText(14);
      approval.override_validation = q.ColumnInt(15) != 0;
      approval.approved_at = ColumnTime(q, 16);
      rec.approval = std::move(approval);
    }
    rec.id = q.ColumnInt(17);
    out.push_back(std::move(rec));
  }
  return out;
}

}  // namespace

int SqliteStateStore::SchemaVersion() { return kSchemaVersion; }

SqliteStateStore::SqliteStateStore(std::unique_ptr<sqlite::Database> db,
                                   std::string path)
    : path_(std::move(path)), db_(std::move(db)) {}

SqliteStateStore::~SqliteStateStore() = default;

absl::StatusOr<std::unique_ptr<SqliteStateStore>> SqliteStateStore::Open(
    const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<Database> db, Database::Open(path));
  RETURN_IF_ERROR(sqlite::RegisterRowHashFunction(db.get()));
  // A damaged file is refused before anything writes to it.
  auto damaged = [&path](std::string what) {
    absl::StrReplaceAll({{"\n", "; "}}, &what);
    return absl::DataLossError(absl::StrCat(
        "state store ", path, " is damaged (", what,
        "); backfilld does not write to it. Restore it from a backup "
        "(stop backfilld, replace the file and remove its -wal and -shm "
        "files), or move it away and start once with --adopt-warehouse to "
        "continue with an empty state store (the job history and lineage "
        "it held are then lost)"));
  };
  {
    absl::StatusOr<std::string> check = db->QueryText("PRAGMA quick_check");
    if (!check.ok() || *check != "ok") {
      return damaged(check.ok() ? absl::StrCat("quick_check: ", *check)
                                : std::string(check.status().message()));
    }
  }
  // What quick_check does not read: the records' own checksums (a file of
  // a schema older than them has none yet; the migration adds them).
  ASSIGN_OR_RETURN(int64_t file_version, db->QueryInt("PRAGMA user_version"));
  if (file_version >= kFirstChecksummedVersion &&
      file_version <= kSchemaVersion) {
    ASSIGN_OR_RETURN(
        Transaction txn,
        Transaction::Begin(db.get(), Transaction::Mode::kDeferred));
    absl::StatusOr<std::string> failed = state_records::VerifyAll(db.get());
    if (!failed.ok() && failed.status().code() != absl::StatusCode::kDataLoss) {
      return failed.status();
    }
    if (!failed.ok() || !failed->empty()) {
      return damaged(failed.ok() ? *failed
                                 : std::string(failed.status().message()));
    }
    RETURN_IF_ERROR(txn.Commit());
  }
  if (path != ":memory:" && !path.empty()) {
    ASSIGN_OR_RETURN(std::string mode,
                     db->QueryText("PRAGMA journal_mode=WAL"));
    if (mode != "wal") {
      return absl::FailedPreconditionError(
          absl::StrCat("state store ", path,
                       ": cannot switch to WAL mode (got ", mode, ")"));
    }
  }
  RETURN_IF_ERROR(db->Exec("PRAGMA synchronous=NORMAL"));
  RETURN_IF_ERROR(db->Exec("PRAGMA foreign_keys=ON"));
  // SQLite's temporary files (the statement journals that the tasks
  // table's triggers and foreign key make each INSERT keep, sorts) in
  // memory: with them on disk, creating a job of 100,000 partitions took
  // twice as long (2.2 s against 1.0 s here), most of it in their writes.
  RETURN_IF_ERROR(db->Exec("PRAGMA temp_store=MEMORY"));
  std::unique_ptr<sqlite::WalCheckpointer> checkpointer;
  if (path != ":memory:" && !path.empty() && !absl::StartsWith(path, "file:")) {
    sqlite::WalCheckpointer::Options options;
    options.thread_name = "bf-state-ckpt";
    ASSIGN_OR_RETURN(checkpointer,
                     sqlite::WalCheckpointer::Start(path, options));
    checkpointer->Attach(db.get());
  }
  std::unique_ptr<SqliteStateStore> store(
      new SqliteStateStore(std::move(db), path));
  store->checkpointer_ = std::move(checkpointer);
  {
    absl::MutexLock lock(&store->mu_);
    absl::Status status = store->Migrate();
    if (!status.ok()) {
      return absl::Status(status.code(), absl::StrCat("state store ", path,
                                                      ": ", status.message()));
    }
  }
  return store;
}

absl::StatusOr<Database*> SqliteStateStore::OpenReader(
    std::unique_ptr<Database>* slot) {
  if (path_.empty() || path_ == ":memory:" ||
      absl::StartsWith(path_, "file:")) {
    return nullptr;
  }
  if (*slot == nullptr) {
    OpenOptions options;
    options.read_only = true;
    options.create = false;
    ASSIGN_OR_RETURN(*slot, Database::Open(path_, options));
    RETURN_IF_ERROR(sqlite::RegisterRowHashFunction(slot->get()));
  }
  return slot->get();
}

absl::StatusOr<Database*> SqliteStateStore::ReaderOrMain(
    std::unique_ptr<Database>* slot, std::optional<absl::MutexLock>* lock) {
  ASSIGN_OR_RETURN(Database * reader, OpenReader(slot));
  if (reader != nullptr) return reader;
  lock->emplace(&mu_);
  return db_.get();
}

absl::Status SqliteStateStore::Migrate() {
  ASSIGN_OR_RETURN(int64_t version, db_->QueryInt("PRAGMA user_version"));
  if (version > kSchemaVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        "schema version ", version, " is newer than this backfilld knows (",
        kSchemaVersion, "); run a newer backfilld"));
  }
  for (int64_t v = version; v < kSchemaVersion; ++v) {
    ASSIGN_OR_RETURN(Transaction txn, Transaction::Begin(db_.get()));
    // Re-read under the write lock: another process may have migrated.
    ASSIGN_OR_RETURN(int64_t now_version, db_->QueryInt("PRAGMA user_version"));
    if (now_version != v) return absl::OkStatus();
    absl::Status step = db_->Exec(kMigrations[v]);
    if (!step.ok()) {
      return absl::Status(
          step.code(),
          absl::StrCat("migration to version ", v + 1, ": ", step.message()));
    }
    // PRAGMA takes no parameters; v + 1 is our own integer.
    RETURN_IF_ERROR(db_->Exec(absl::StrCat("PRAGMA user_version = ", v + 1)));
    RETURN_IF_ERROR(txn.Commit());
  }
  return absl::OkStatus();
}

absl::Status SqliteStateStore::AppendAudit(const std::string& job_id,
                                           const std::string& from_state,
                                           const std::string& to_state,
                                           const std::string& message,
                                           absl::Time at) {
  ASSIGN_OR_RETURN(
      Statement q,
      db_->PrepareCached("INSERT INTO audit_events (job_id, from_state, "
                         "to_state, message, at) VALUES (?1, ?2, ?3, "
                         "?4, ?5)"));
  RETURN_IF_ERROR(q.BindText(1, job_id));
  RETURN_IF_ERROR(q.BindText(2, from_state));
  RETURN_IF_ERROR(q.BindText(3, to_state));
  RETURN_IF_ERROR(q.BindText(4, message));
  RETURN_IF_ERROR(BindTime(q, 5, at));
  return q.Run();
}

absl::StatusOr<Job> SqliteStateStore::LoadJob(const std::string& id,
                                              bool with_partitions,
                                              bool cached) {
  Job job;
  {
    static const std::string& kSql = Once(
        absl::StrCat("SELECT ", kJobColumns, ", ", sr::IntactSql(sr::Jobs()),
                     " FROM jobs WHERE id = ?1"));
    ASSIGN_OR_RETURN(Statement q, db_->PrepareCached(kSql));
    RETURN_IF_ERROR(q.BindText(1, id));
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) return NoJob(id);
    if (q.ColumnInt(23) != 1) return sr::Damaged(sr::JobRecord(id), path_);
    ASSIGN_OR_RETURN(job, ReadJobRow(q));
  }
  std::map<std::string, size_t> index;
  {
    static const std::string& kSql = Once(
        absl::StrCat("SELECT dataset, reason, cost_backfill, cost_full_reload, "
                     "transform_version, ",
                     sr::IntactSql(sr::JobDatasets()),
                     " FROM job_datasets WHERE job_id = ?1 ORDER BY ordinal"));
    ASSIGN_OR_RETURN(Statement q, db_->PrepareCached(kSql));
    RETURN_IF_ERROR(q.BindText(1, id));
    while (true) {
      ASSIGN_OR_RETURN(bool row, q.Step());
      if (!row) break;
      if (q.ColumnInt(5) != 1) {
        return sr::Damaged(sr::PlanRecord(id, q.ColumnText(0)), path_);
      }
      DatasetPlan dp;
      dp.dataset = q.ColumnText(0);
      dp.reason = q.ColumnText(1);
      dp.cost.backfill = q.ColumnDouble(2);
      dp.cost.full_reload = q.ColumnDouble(3);
      dp.transform_version = q.ColumnText(4);
      index[dp.dataset] = job.plan.datasets.size();
      job.plan.datasets.push_back(std::move(dp));
    }
  }
  {
    ASSIGN_OR_RETURN(
        Statement q,
        db_->PrepareCached("SELECT requested_by, reason, at, forced, with_job, "
                           "also_rolled_back, partitions, rows_restored FROM "
                           "rollbacks WHERE job_id = ?1"));
    RETURN_IF_ERROR(q.BindText(1, id));
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (row) {
      RollbackInfo info;
      info.requested_by = q.ColumnText(0);
      info.reason = q.ColumnText(1);
      info.at = ColumnTime(q, 2);
      info.forced = q.ColumnInt(3) != 0;
      info.with_job = q.ColumnText(4);
      ASSIGN_OR_RETURN(info.also_rolled_back, DecodeFields(q.ColumnText(5)));
      info.partitions = q.ColumnInt(6);
      info.rows = q.ColumnInt(7);
      job.rollback = std::move(info);
    }
  }
  if (with_partitions) {
    // In the primary key's order, then put in plan order (see
    // kTasksOfJobInKeyOrder).
    struct Planned {
      int64_t ordinal;
      size_t dataset;
      std::string partition;
      std::string reason;
    };
    std::vector<Planned> planned;
    static const std::string& kSql = Once(
        absl::StrCat("SELECT dataset, \"partition\", reason, ordinal, ",
                     sr::IntactSql(sr::Tasks()),
                     " FROM tasks WHERE job_id = ?1", kTasksOfJobInKeyOrder));
    ASSIGN_OR_RETURN(Statement q, db_->PrepareCached(kSql));
    RETURN_IF_ERROR(q.BindText(1, id));
    while (true) {
      ASSIGN_OR_RETURN(bool row, q.Step());
      if (!row) break;
      if (q.ColumnInt(4) != 1) {
        return sr::Damaged(sr::TaskRecord(id, q.ColumnText(0), q.ColumnText(1)),
                           path_);
      }
      auto it = index.find(q.ColumnText(0));
      if (it == index.end()) continue;  // cannot happen: written together
      planned.push_back(
          {q.ColumnInt(3), it->second, q.ColumnText(1), q.ColumnText(2)});
    }
    InPlanOrder(&planned);
    std::vector<size_t> sizes(job.plan.datasets.size());
    for (const Planned& p : planned) ++sizes[p.dataset];
    for (size_t i = 0; i < sizes.size(); ++i) {
      job.plan.datasets[i].partitions.reserve(sizes[i]);
      job.plan.datasets[i].partition_reasons.reserve(sizes[i]);
    }
    for (Planned& p : planned) {
      DatasetPlan& dp = job.plan.datasets[p.dataset];
      dp.partitions.push_back(std::move(p.partition));
      dp.partition_reasons.push_back(std::move(p.reason));
    }
  }
  TaskAggregates aggregates;
  {
    if (cached) RETURN_IF_ERROR(CheckDataVersion());
    auto it = cached ? aggregates_.find(id) : aggregates_.end();
    if (it != aggregates_.end()) {
      aggregates = it->second;
    } else {
      ASSIGN_OR_RETURN(aggregates, ComputeTaskAggregates(id));
      if (cached) {
        if (aggregates_.size() >= kMaxCachedAggregates) aggregates_.clear();
        aggregates_[id] = aggregates;
      }
    }
    job.counts = aggregates.counts;
    job.actual_cost = aggregates.actual_cost;
    job.rows_written = aggregates.rows_written;
    job.timed_partitions = aggregates.timed_partitions;
    job.timed_seconds = aggregates.timed_seconds;
    for (DatasetPlan& dp : job.plan.datasets) {
      auto d = aggregates.by_dataset.find(dp.dataset);
      if (d == aggregates.by_dataset.end()) continue;
      dp.partition_count = d->second.first;
      dp.actual_cost = d->second.second;
    }
  }
  {
    ASSIGN_OR_RETURN(
        Statement q,
        db_->PrepareCached("SELECT approved_by, reason, override, from_state, "
                           "approved_at FROM job_approvals WHERE job_id = ?1"));
    RETURN_IF_ERROR(q.BindText(1, id));
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (row) {
      Approval approval;
      approval.approved_by = q.ColumnText(0);
      approval.reason = q.ColumnText(1);
      approval.override_validation = q.ColumnInt(2) != 0;
      ASSIGN_OR_RETURN(approval.from_state, ParseJobState(q.ColumnText(3)));
      approval.approved_at = ColumnTime(q, 4);
      job.approval = std::move(approval);
    }
  }
  RETURN_IF_ERROR(ReadJobCosts(id, &job));
  RETURN_IF_ERROR(ReadJobKeys(id, &job));
  return job;
}

namespace {

// The count of `counts` that tasks in `state` add to.
int64_t* CountOf(TaskState state, PartitionCounts* counts) {
  switch (state) {
    case TaskState::kPending:
      return &counts->pending;
    case TaskState::kRunning:
      return &counts->running;
    case TaskState::kStaged:
      return &counts->staged;
    case TaskState::kPublished:
      return &counts->published;
    case TaskState::kFailed:
      return &counts->failed;
    case TaskState::kCancelled:
      return &counts->cancelled;
    case TaskState::kUnchanged:
      return &counts->unchanged;
    case TaskState::kSkipped:
      return &counts->skipped;
  }
  return &counts->pending;  // not reached: every state is listed
}

// Which tasks a job's actual cost and recompute time count (their input
// rows were read), and which its rows written count.
bool CountsInputRows(TaskState state) {
  return state == TaskState::kStaged || state == TaskState::kPublished ||
         state == TaskState::kUnchanged;
}
bool CountsRowsWritten(TaskState state) {
  return state == TaskState::kStaged || state == TaskState::kPublished;
}

}  // namespace

absl::StatusOr<SqliteStateStore::TaskAggregates>
SqliteStateStore::ComputeTaskAggregates(const std::string& id) {
  // One pass over the job's tasks, grouped by dataset and state; which
  // states count their input rows, rows written and time is decided by
  // CountsInputRows and CountsRowsWritten, as AddTaskShare does per task.
  TaskAggregates out;
  // With the count of the tasks whose records fail their checksums: the
  // sums would be wrong.
  static const std::string& kSql = Once(absl::StrCat(
      "SELECT dataset, state, COUNT(*), TOTAL(input_rows), "
      "TOTAL(rows_written), TOTAL(duration_seconds > 0), "
      "TOTAL(CASE WHEN duration_seconds > 0 THEN duration_seconds END), "
      "TOTAL(",
      sr::DamagedSql(sr::Tasks()),
      ") FROM tasks WHERE job_id = ?1 GROUP BY dataset, state"));
  ASSIGN_OR_RETURN(Statement q, db_->PrepareCached(kSql));
  RETURN_IF_ERROR(q.BindText(1, id));
  bool damaged = false;
  while (true) {
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) break;
    if (q.ColumnDouble(7) > 0) {
      damaged = true;
      break;
    }
    ASSIGN_OR_RETURN(TaskState state, ParseTaskState(q.ColumnText(1)));
    const int64_t n = q.ColumnInt(2);
    out.counts.total += n;
    *CountOf(state, &out.counts) += n;
    std::pair<int64_t, double>& dataset = out.by_dataset[q.ColumnText(0)];
    dataset.first += n;
    if (CountsInputRows(state)) {
      const double input_rows = q.ColumnDouble(3);
      out.actual_cost += input_rows;
      dataset.second += input_rows;
      out.timed_partitions += static_cast<int64_t>(q.ColumnDouble(5));
      out.timed_seconds += q.ColumnDouble(6);
    }
    if (CountsRowsWritten(state)) {
      out.rows_written += static_cast<int64_t>(q.ColumnDouble(4));
    }
  }
  if (damaged) {
    static const std::string& kWhich = Once(
        absl::StrCat("SELECT dataset, \"partition\" FROM tasks WHERE job_id = "
                     "?1 AND ",
                     sr::DamagedSql(sr::Tasks()), " LIMIT 1"));
    ASSIGN_OR_RETURN(Statement which, db_->PrepareCached(kWhich));
    RETURN_IF_ERROR(which.BindText(1, id));
    ASSIGN_OR_RETURN(bool row, which.Step());
    if (row) {
      return sr::Damaged(
          sr::TaskRecord(id, which.ColumnText(0), which.ColumnText(1)), path_);
    }
    return sr::Damaged(absl::StrCat("a task record of job ", id), path_);
  }
  return out;
}

void SqliteStateStore::ForgetTaskAggregates(const std::string& id) {
  aggregates_.erase(id);
}

void SqliteStateStore::AddTaskShare(const std::string& dataset, TaskState state,
                                    int64_t input_rows, int64_t rows_written,
                                    double duration, int sign,
                                    TaskAggregates* out) {
  *CountOf(state, &out->counts) += sign;
  // As ComputeTaskAggregates counts them.
  if (CountsInputRows(state)) {
    out->actual_cost += sign * static_cast<double>(input_rows);
    out->by_dataset[dataset].second += sign * static_cast<double>(input_rows);
    if (duration > 0) {
      out->timed_partitions += sign;
      out->timed_seconds += sign * duration;
    }
  }
  if (CountsRowsWritten(state)) {
    out->rows_written += sign * rows_written;
  }
}

absl::Status SqliteStateStore::CheckDataVersion() {
  // Another connection's write to the file may have changed any job.
  ASSIGN_OR_RETURN(int64_t version, db_->QueryInt("PRAGMA data_version"));
  if (version != data_version_) {
    aggregates_.clear();
    diff_summaries_.clear();
    reader_answers_.clear();
    data_version_ = version;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<std::vector<DiffSummary>>>
SqliteStateStore::GetJobDiffSummary(const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Transaction txn,
                   Transaction::Begin(db_.get(), Transaction::Mode::kDeferred));
  ASSIGN_OR_RETURN(std::optional<std::vector<DiffSummary>> summary,
                   LoadJobDiffSummary(job_id));
  RETURN_IF_ERROR(txn.Commit());
  return summary;
}

absl::StatusOr<std::optional<std::vector<DiffSummary>>>
SqliteStateStore::LoadJobDiffSummary(const std::string& job_id) {
  RETURN_IF_ERROR(CheckDataVersion());
  auto it = diff_summaries_.find(job_id);
  if (it != diff_summaries_.end()) return it->second;
  ASSIGN_OR_RETURN(std::optional<JobDiff> diff,
                   LoadJobDiff(job_id, "", /*with_samples=*/false));
  std::optional<std::vector<DiffSummary>> out;
  if (diff.has_value()) {
    out.emplace();
    for (const DatasetDiff& d : diff->datasets) out->push_back(Summarize(d));
  }
  if (diff_summaries_.size() >= kMaxCachedAggregates) diff_summaries_.clear();
  diff_summaries_[job_id] = out;
  return out;
}

absl::StatusOr<CreateJobResult> SqliteStateStore::CreateJob(const Job& job,
                                                            absl::Time now) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Transaction txn, Transaction::Begin(db_.get()));
  if (!job.idempotency_key.empty()) {
    // Looked up under the write lock, so two concurrent submits with the
    // same key cannot both create a job.
    ASSIGN_OR_RETURN(
        Statement q,
        db_->PrepareCached("SELECT id FROM jobs WHERE idempotency_key = ?1"));
    RETURN_IF_ERROR(q.BindText(1, job.idempotency_key));
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (row) {
      ASSIGN_OR_RETURN(Job existing, LoadJob(q.ColumnText(0)));
      RETURN_IF_ERROR(txn.Commit());
      return CreateJobResult{std::move(existing), false};
    }
  }
  int64_t seq = 0;
  {
    ASSIGN_OR_RETURN(Statement q,
                     db_->PrepareCached("UPDATE counters SET value = value + 1 "
                                        "WHERE name = 'job' RETURNING value"));
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) return absl::DataLossError("state store: job counter missing");
    seq = q.ColumnInt(0);
    RETURN_IF_ERROR(q.Run());
  }
  const std::string id = absl::StrCat("bf-", seq);
  {
    static const std::string& kInsert = Once(absl::StrCat(
        "INSERT INTO jobs (id, seq, state, dataset, range_from, range_to, "
        "partitions, reason, ticket, requested_by, exclude_downstream, "
        "idempotency_key, request_fingerprint, message, create_time, "
        "update_time, start_time, end_time, cost_backfill, "
        "cost_full_reload, priority, max_parallel, affected_by, "
        "auto_detect, checksum) VALUES "
        "(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, "
        "?15, ?15, NULL, NULL, ?16, ?17, ?18, ?19, ?20, ?21, ",
        sr::InsertSql(sr::Jobs(), {{"id", "?1"},
                                   {"seq", "?2"},
                                   {"state", "?3"},
                                   {"dataset", "?4"},
                                   {"range_from", "?5"},
                                   {"range_to", "?6"},
                                   {"partitions", "?7"},
                                   {"reason", "?8"},
                                   {"ticket", "?9"},
                                   {"requested_by", "?10"},
                                   {"exclude_downstream", "?11"},
                                   {"idempotency_key", "?12"},
                                   {"request_fingerprint", "?13"},
                                   {"message", "?14"},
                                   {"create_time", "?15"},
                                   {"update_time", "?15"},
                                   {"start_time", "NULL"},
                                   {"end_time", "NULL"},
                                   {"cost_backfill", "?16"},
                                   {"cost_full_reload", "?17"},
                                   {"priority", "?18"},
                                   {"max_parallel", "?19"},
                                   {"affected_by", "?20"},
                                   {"max_cost", "0.0"},
                                   {"auto_detect", "?21"}}),
        ")"));
    ASSIGN_OR_RETURN(Statement q, db_->PrepareCached(kInsert));
    RETURN_IF_ERROR(q.BindText(1, id));
    RETURN_IF_ERROR(q.BindInt(2, seq));
    RETURN_IF_ERROR(q.BindText(3, JobStateText(JobState::kQueued)));
    RETURN_IF_ERROR(q.BindText(4, job.request.dataset));
    RETURN_IF_ERROR(q.BindText(5, job.request.from));
    RETURN_IF_ERROR(q.BindText(6, job.request.to));
    RETURN_IF_ERROR(q.BindText(7, EncodeFields(job.request.partitions)));
    RETURN_IF_ERROR(q.BindText(8, job.request.reason));
    RETURN_IF_ERROR(q.BindText(9, job.request.ticket));
    RETURN_IF_ERROR(q.BindText(10, job.request.requested_by));
    RETURN_IF_ERROR(q.BindInt(11, job.request.exclude_downstream ? 1 : 0));
    if (job.idempotency_key.empty()) {
      RETURN_IF_ERROR(q.BindNull(12));
    } else {
      RETURN_IF_ERROR(q.BindText(12, job.idempotency_key));
    }
    RETURN_IF_ERROR(q.BindText(13, job.request_fingerprint));
    RETURN_IF_ERROR(q.BindText(14, job.message));
    RETURN_IF_ERROR(BindTime(q, 15, now));
    RETURN_IF_ERROR(q.BindDouble(16, job.plan.cost.backfill));
    RETURN_IF_ERROR(q.BindDouble(17, job.plan.cost.full_reload));
    RETURN_IF_ERROR(q.BindInt(18, job.request.priority));
    RETURN_IF_ERROR(q.BindInt(19, job.request.max_parallel));
    RETURN_IF_ERROR(q.BindText(20, job.request.affected_by));
    RETURN_IF_ERROR(q.BindInt(21, job.request.auto_detect ? 1 : 0));
    RETURN_IF_ERROR(q.Run());
  }
  {
    static const std::string& kInsertDataset = Once(absl::StrCat(
        "INSERT INTO job_datasets (job_id, ordinal, dataset, reason, "
        "cost_backfill, cost_full_reload, transform_version, checksum) "
        "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ",
        sr::InsertSql(sr::JobDatasets(), {{"job_id", "?1"},
                                          {"ordinal", "?2"},
                                          {"dataset", "?3"},
                                          {"reason", "?4"},
                                          {"cost_backfill", "?5"},
                                          {"cost_full_reload", "?6"},
                                          {"transform_version", "?7"},
                                          {"estimate_source", "''"},
                                          {"partitions_from_history", "0"},
                                          {"max_cost", "0.0"}}),
        ")"));
    ASSIGN_OR_RETURN(Statement ds, db_->PrepareCached(kInsertDataset));
    ForgetTaskAggregates(id);
    static const std::string& kInsertTask = Once(absl::StrCat(
        "INSERT INTO tasks (job_id, dataset, \"partition\", ordinal, state, "
        "update_time, reason, checksum) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ",
        sr::InsertSql(sr::Tasks(), {{"job_id", "?1"},
                                    {"dataset", "?2"},
                                    {"partition", "?3"},
                                    {"ordinal", "?4"},
                                    {"state", "?5"},
                                    {"attempts", "0"},
                                    {"last_error", "''"},
                                    {"rows_written", "0"},
                                    {"output_fingerprint", "''"},
                                    {"inputs", "''"},
                                    {"input_rows", "0"},
                                    {"duration_seconds", "0.0"},
                                    {"update_time", "?6"},
                                    {"reason", "?7"}}),
        ")"));
    ASSIGN_OR_RETURN(Statement task, db_->PrepareCached(kInsertTask));
    int64_t ordinal = 0;
    for (size_t i = 0; i < job.plan.datasets.size(); ++i) {
      const DatasetPlan& dp = job.plan.datasets[i];
      RETURN_IF_ERROR(ds.Reset());
      RETURN_IF_ERROR(ds.BindText(1, id));
      RETURN_IF_ERROR(ds.BindInt(2, static_cast<int64_t>(i)));
      RETURN_IF_ERROR(ds.BindText(3, dp.dataset));
      RETURN_IF_ERROR(ds.BindText(4, dp.reason));
      RETURN_IF_ERROR(ds.BindDouble(5, dp.cost.backfill));
      RETURN_IF_ERROR(ds.BindDouble(6, dp.cost.full_reload));
      RETURN_IF_ERROR(ds.BindText(7, dp.transform_version));
      RETURN_IF_ERROR(ds.Run());
      for (size_t k = 0; k < dp.partitions.size(); ++k) {
        const std::string& partition = dp.partitions[k];
        RETURN_IF_ERROR(task.Reset());
        RETURN_IF_ERROR(task.BindText(1, id));
        RETURN_IF_ERROR(task.BindText(2, dp.dataset));
        RETURN_IF_ERROR(task.BindText(3, partition));
        RETURN_IF_ERROR(task.BindInt(4, ordinal++));
        RETURN_IF_ERROR(task.BindText(5, TaskStateText(TaskState::kPending)));
        RETURN_IF_ERROR(BindTime(task, 6, now));
        RETURN_IF_ERROR(task.BindText(
            7, k < dp.partition_reasons.size() ? dp.partition_reasons[k] : ""));
        absl::Status inserted = task.Run();
        if (!inserted.ok()) {
          return absl::InvalidArgumentError(
              absl::StrCat("plan lists partition '", partition, "' of ",
                           dp.dataset, " twice: ", inserted.message()));
        }
      }
    }
  }
  RETURN_IF_ERROR(AppendAudit(id, "", JobStateText(JobState::kQueued),
                              job.message.empty() ? "created" : job.message,
                              now));
  RETURN_IF_ERROR(WriteJobCosts(id, job));
  RETURN_IF_ERROR(WriteJobKeys(id, job));
  ASSIGN_OR_RETURN(Job stored, LoadJob(id));
  RETURN_IF_ERROR(txn.Commit());
  return CreateJobResult{std::move(stored), true};
}

absl::StatusOr<std::optional<Job>> SqliteStateStore::FindJobByKey(
    const std::string& idempotency_key) {
  if (idempotency_key.empty()) return std::optional<Job>();
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Transaction txn,
                   Transaction::Begin(db_.get(), Transaction::Mode::kDeferred));
  ASSIGN_OR_RETURN(
      Statement q,
      db_->PrepareCached("SELECT id FROM jobs WHERE idempotency_key = "
                         "?1"));
  RETURN_IF_ERROR(q.BindText(1, idempotency_key));
  ASSIGN_OR_RETURN(bool row, q.Step());
  std::optional<Job> job;
  if (row) {
    ASSIGN_OR_RETURN(Job found, LoadJob(q.ColumnText(0)));
    job = std::move(found);
  }
  RETURN_IF_ERROR(txn.Commit());
  return job;
}

absl::StatusOr<Job> SqliteStateStore::GetJob(const std::string& id) {
  return ReadJob(id, /*with_partitions=*/true);
}

absl::StatusOr<Job> SqliteStateStore::GetJobProgress(const std::string& id) {
  return ReadJob(id, /*with_partitions=*/false);
}

absl::StatusOr<Job> SqliteStateStore::GetJobForReader(const std::string& id,
                                                      JobView view) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Transaction txn,
                   Transaction::Begin(db_.get(), Transaction::Mode::kDeferred));
  const bool basic = view == JobView::kBasic;
  if (basic) {
    RETURN_IF_ERROR(CheckDataVersion());
    const int64_t changes = db_->TotalChanges();
    if (changes != reader_answers_changes_) {
      reader_answers_.clear();
      reader_answers_changes_ = changes;
    }
    auto it = reader_answers_.find(id);
    if (it != reader_answers_.end()) {
      RETURN_IF_ERROR(txn.Commit());
      return it->second;
    }
  }
  ASSIGN_OR_RETURN(Job job, LoadJob(id, !basic, /*cached=*/true));
  ASSIGN_OR_RETURN(job.checks, LoadCheckResults(id));
  ASSIGN_OR_RETURN(job.consumers, LoadConsumerConfirmations(id));
  ASSIGN_OR_RETURN(std::optional<std::vector<DiffSummary>> diff,
                   LoadJobDiffSummary(id));
  if (diff.has_value()) job.diff = *std::move(diff);
  RETURN_IF_ERROR(txn.Commit());
  if (basic) {
    if (reader_answers_.size() >= kMaxCachedAggregates) {
      reader_answers_.clear();
    }
    reader_answers_[id] = job;
  }
  return job;
}

absl::StatusOr<Job> SqliteStateStore::ReadJob(const std::string& id,
                                              bool with_partitions) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Transaction txn,
                   Transaction::Begin(db_.get(), Transaction::Mode::kDeferred));
  ASSIGN_OR_RETURN(Job job, LoadJob(id, with_partitions, /*cached=*/true));
  RETURN_IF_ERROR(txn.Commit());
  return job;
}

absl::StatusOr<std::vector<Job>> SqliteStateStore::ListJobs(
    const JobFilter& filter) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Transaction txn,
                   Transaction::Begin(db_.get(), Transaction::Mode::kDeferred));
  std::string sql = "SELECT id FROM jobs WHERE 1";
  int next = 1;
  if (!filter.states.empty()) {
    absl::StrAppend(&sql, " AND state IN (",
                    Placeholders(next, filter.states.size()), ")");
    next += static_cast<int>(filter.states.size());
  }
  const int dataset_param = next;
  if (!filter.dataset.empty()) {
    absl::StrAppend(&sql,
                    " AND EXISTS (SELECT 1 FROM job_datasets d WHERE "
                    "d.job_id = jobs.id AND d.dataset = ?",
                    next++, ")");
  }
  const int before_param = next;
  if (filter.before_number > 0) {
    absl::StrAppend(&sql, " AND seq < ?", next++);
  }
  absl::StrAppend(&sql, " ORDER BY seq DESC LIMIT ?", next);
  ASSIGN_OR_RETURN(Statement q, db_->PrepareCached(sql));
  for (size_t i = 0; i < filter.states.size(); ++i) {
    RETURN_IF_ERROR(
        q.BindText(static_cast<int>(i) + 1, JobStateText(filter.states[i])));
  }
  if (!filter.dataset.empty()) {
    RETURN_IF_ERROR(q.BindText(dataset_param, filter.dataset));
  }
  if (filter.before_number > 0) {
    RETURN_IF_ERROR(q.BindInt(before_param, filter.before_number));
  }
  RETURN_IF_ERROR(q.BindInt(next, filter.limit > 0 ? filter.limit : -1));
  std::vector<std::string> ids;
  while (true) {
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) break;
    ids.push_back(q.ColumnText(0));
  }
  std::vector<Job> jobs;
  for (const std::string& id : ids) {
    ASSIGN_OR_RETURN(Job job, LoadJob(id, filter.view == JobView::kFull,
                                      /*cached=*/true));
    jobs.push_back(std::move(job));
  }
  RETURN_IF_ERROR(txn.Commit());
  return jobs;
}

absl::StatusOr<std::vector<PartitionTask>> SqliteStateStore::ListTasks(
    const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Transaction txn,
                   Transaction::Begin(db_.get(), Transaction::Mode::kDeferred));
  // The job's number of tasks (no row: no such job), so that the list is
  // allocated once at its size: a large job's list is tens of megabytes,
  // and grown by doubling it would hold up to twice that.
  ASSIGN_OR_RETURN(
      std::optional<int64_t> count,
      [&]() -> absl::StatusOr<std::optional<int64_t>> {
        ASSIGN_OR_RETURN(
            Statement q,
            db_->PrepareCached("SELECT (SELECT COUNT(*) FROM tasks WHERE "
                               "job_id = ?1) FROM jobs WHERE id = ?1"));
        RETURN_IF_ERROR(q.BindText(1, job_id));
        ASSIGN_OR_RETURN(bool row, q.Step());
        if (!row) return std::nullopt;
        return q.ColumnInt(0);
      }());
  if (!count.has_value()) return NoJob(job_id);
  // In the primary key's order, then put in plan order (see
  // kTasksOfJobInKeyOrder).
  ASSIGN_OR_RETURN(Statement q, db_->PrepareCached(absl::StrCat(
                                    "SELECT ", TaskColumnsChecked(),
                                    " FROM tasks WHERE job_id = ?1",
                                    kTasksOfJobInKeyOrder)));
  RETURN_IF_ERROR(q.BindText(1, job_id));
  std::vector<PartitionTask> tasks;
  tasks.reserve(static_cast<size_t>(*count));
  while (true) {
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) break;
    ASSIGN_OR_RETURN(PartitionTask t, ReadTaskRow(q, path_));
    tasks.push_back(std::move(t));
  }
  RETURN_IF_ERROR(txn.Commit());
  InPlanOrder(&tasks);
  return tasks;
}

absl::StatusOr<std::vector<PartitionTask>> SqliteStateStore::ListTaskPage(
    const TaskQuery& query) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Transaction txn,
                   Transaction::Begin(db_.get(), Transaction::Mode::kDeferred));
  {
    ASSIGN_OR_RETURN(Statement q,
                     db_->PrepareCached("SELECT 1 FROM jobs WHERE id = ?1"));
    RETURN_IF_ERROR(q.BindText(1, query.job_id));
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) {
      return NoJob(query.job_id);
    }
  }
  // The (job_id, ordinal) index serves the order and the start.
  std::string sql = absl::StrCat("SELECT ", TaskColumnsChecked(),
                                 " FROM tasks WHERE job_id = ?1 AND "
                                 "ordinal > ?2 AND (?3 = '' OR dataset = ?3)");
  if (!query.states.empty()) {
    absl::StrAppend(&sql, " AND state IN (",
                    Placeholders(5, query.states.size()), ")");
  }
  absl::StrAppend(&sql, " ORDER BY ordinal LIMIT ?4");
  ASSIGN_OR_RETURN(Statement q, db_->PrepareCached(sql));
  RETURN_IF_ERROR(q.BindText(1, query.job_id));
  RETURN_IF_ERROR(q.BindInt(2, query.after_ordinal));
  RETURN_IF_ERROR(q.BindText(3, query.dataset));
  RETURN_IF_ERROR(q.BindInt(4, query.limit > 0 ? query.limit : -1));
  for (size_t i = 0; i < query.states.size(); ++i) {
    RETURN_IF_ERROR(
        q.BindText(static_cast<int>(i) + 5, TaskStateText(query.states[i])));
  }
  std::vector<PartitionTask> tasks;
  while (true) {
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) break;
    ASSIGN_OR_RETURN(PartitionTask t, ReadTaskRow(q, path_));
    tasks.push_back(std::move(t));
  }
  RETURN_IF_ERROR(txn.Commit());
  return tasks;
}

absl::Status SqliteStateStore::TransitionJob(
    const std::string& job_id, std::optional<JobState> expected_from,
    JobState to, const std::string& message, absl::Time now) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Transaction txn, Transaction::Begin(db_.get()));
  ASSIGN_OR_RETURN(JobState from, StateOf(job_id));
  if (expected_from.has_value() && *expected_from != from) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", job_id, " is ", Sv(JobStateName(from)), ", not ",
                     Sv(JobStateName(*expected_from)), "; cannot move it to ",
                     Sv(JobStateName(to))));
  }
  if (absl::Status s = CheckTransition(from, to); !s.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", job_id, ": ", s.message()));
  }
  RETURN_IF_ERROR(WriteTransition(job_id, from, to, message, now));
  return txn.Commit();
}

absl::Status SqliteStateStore::WriteTransition(const std::string& job_id,
                                               JobState from, JobState to,
                                               const std::string& message,
                                               absl::Time now) {
  {
    constexpr char kStart[] =
        "CASE WHEN ?5 AND start_time IS NULL THEN ?4 ELSE start_time END";
    constexpr char kEnd[] =
        "CASE WHEN ?6 THEN ?4 WHEN ?7 THEN NULL "
        "ELSE end_time END";
    static const std::string& kUpdate = Once(absl::StrCat(
        "UPDATE jobs SET state = ?2, message = ?3, update_time = ?4, "
        "start_time = ",
        kStart, ", end_time = ", kEnd, ", ",
        sr::ResealSql(sr::Jobs(), {{"state", "?2"},
                                   {"message", "?3"},
                                   {"update_time", "?4"},
                                   {"start_time", kStart},
                                   {"end_time", kEnd}}),
        " WHERE id = ?1"));
    ASSIGN_OR_RETURN(Statement q, db_->PrepareCached(kUpdate));
    RETURN_IF_ERROR(q.BindText(1, job_id));
    RETURN_IF_ERROR(q.BindText(2, JobStateText(to)));
    RETURN_IF_ERROR(q.BindText(3, message));
    RETURN_IF_ERROR(BindTime(q, 4, now));
    RETURN_IF_ERROR(q.BindInt(5, to == JobState::kRunning ? 1 : 0));
    RETURN_IF_ERROR(q.BindInt(6, IsTerminal(to) ? 1 : 0));
    // Leaving a terminal state (a retry): the job has not ended any more.
    RETURN_IF_ERROR(q.BindInt(7, IsTerminal(from) && !IsTerminal(to) ? 1 : 0));
    RETURN_IF_ERROR(q.Run());
  }
  return AppendAudit(job_id, JobStateText(from), JobStateText(to), message,
                     now);
}

absl::StatusOr<int64_t> SqliteStateStore::RetryJob(const std::string& job_id,
                                                   JobState expected_from,
                                                   JobState to,
                                                   const std::string& message,
                                                   absl::Time now) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Transaction txn, Transaction::Begin(db_.get()));
  ASSIGN_OR_RETURN(JobState from, StateOf(job_id));
  if (from != expected_from) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", job_id, " is ", Sv(JobStateName(from)), ", not ",
                     Sv(JobStateName(expected_from))));
  }
  if (absl::Status s = CheckTransition(from, to); !s.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", job_id, ": ", s.message()));
  }
  ForgetTaskAggregates(job_id);
  static const std::string& kReset = Once(absl::StrCat(
      "UPDATE tasks SET state = 'PENDING', attempts = 0, update_time = ?2, ",
      sr::ResealSql(
          sr::Tasks(),
          {{"state", "'PENDING'"}, {"attempts", "0"}, {"update_time", "?2"}}),
      " WHERE job_id = ?1 AND state IN ('FAILED', 'CANCELLED', 'RUNNING')"));
  ASSIGN_OR_RETURN(Statement q, db_->PrepareCached(kReset));
  RETURN_IF_ERROR(q.BindText(1, job_id));
  RETURN_IF_ERROR(BindTime(q, 2, now));
  RETURN_IF_ERROR(q.Run());
  const int64_t reset = db_->Changes();
  RETURN_IF_ERROR(WriteTransition(job_id, from, to, message, now));
  RETURN_IF_ERROR(txn.Commit());
  return reset;
}

absl::StatusOr<JobState> SqliteStateStore::StateOf(const std::string& job_id) {
  static const std::string& kSql = Once(absl::StrCat(
      "SELECT state, ", sr::IntactSql(sr::Jobs()), " FROM jobs WHERE id = ?1"));
  ASSIGN_OR_RETURN(Statement q, db_->PrepareCached(kSql));
  RETURN_IF_ERROR(q.BindText(1, job_id));
  ASSIGN_OR_RETURN(bool row, q.Step());
  if (!row) return NoJob(job_id);
  if (q.ColumnInt(1) != 1) return sr::Damaged(sr::JobRecord(job_id), path_);
  return ParseJobState(q.ColumnText(0));
}

absl::StatusOr<StoreInfo> SqliteStateStore::Info() {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Transaction txn,
                   Transaction::Begin(db_.get(), Transaction::Mode::kDeferred));
  StoreInfo info;
  ASSIGN_OR_RETURN(info.store_id,
                   db_->QueryText("SELECT value FROM meta WHERE key = "
                                  "'store_id'"));
  ASSIGN_OR_RETURN(int64_t created,
                   db_->QueryInt("SELECT CAST(value AS INTEGER) FROM meta "
                                 "WHERE key = 'created_at'"));
  info.created_at = absl::FromUnixMicros(created);
  ASSIGN_OR_RETURN(info.last_job_number,
                   db_->QueryInt("SELECT value FROM counters WHERE name = "
                                 "'job'"));
  RETURN_IF_ERROR(txn.Commit());
  return info;
}

absl::StatusOr<std::vector<std::string>> SqliteStateStore::ListJobIds(
    const std::vector<JobState>& states) {
  std::vector<std::string> ids;
  if (states.empty()) return ids;
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Statement q,
                   db_->PrepareCached(absl::StrCat(
                       "SELECT id FROM jobs WHERE state IN (",
                       Placeholders(1, states.size()), ") ORDER BY seq")));
  for (size_t i = 0; i < states.size(); ++i) {
    RETURN_IF_ERROR(
        q.BindText(static_cast<int>(i) + 1, JobStateText(states[i])));
  }
  while (true) {
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) break;
    ids.push_back(q.ColumnText(0));
  }
  return ids;
}

absl::Status SqliteStateStore::ReserveJobNumbers(int64_t n) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Transaction txn, Transaction::Begin(db_.get()));
  ASSIGN_OR_RETURN(
      Statement q,
      db_->PrepareCached("UPDATE counters SET value = MAX(value, ?1) "
                         "WHERE name = 'job'"));
  RETURN_IF_ERROR(q.BindInt(1, n));
  RETURN_IF_ERROR(q.Run());
  return txn.Commit();
}

absl::Status SqliteStateStore::SetJobMessage(const std::string& job_id,
                                             JobState expected_state,
                                             const std::string& message,
                                             absl::Time now) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Transaction txn, Transaction::Begin(db_.get()));
  ASSIGN_OR_RETURN(JobState state, StateOf(job_id));
  if (state != expected_state) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", job_id, " is ", Sv(JobStateName(state)), ", not ",
                     Sv(JobStateName(expected_state))));
  }
  static const std::string& kUpdate = Once(absl::StrCat(
      "UPDATE jobs SET message = ?2, update_time = ?3, ",
      sr::ResealSql(sr::Jobs(), {{"message", "?2"}, {"update_time", "?3"}}),
      " WHERE id = ?1"));
  ASSIGN_OR_RETURN(Statement q, db_->PrepareCached(kUpdate));
  RETURN_IF_ERROR(q.BindText(1, job_id));
  RETURN_IF_ERROR(q.BindText(2, message));
  RETURN_IF_ERROR(BindTime(q, 3, now));
  RETURN_IF_ERROR(q.Run());
  return txn.Commit();
}

absl::Status SqliteStateStore::UpdateTask(const PartitionTask& task) {
  return CommitTasks(absl::MakeConstSpan(&task, 1));
}

absl::Status SqliteStateStore::UpdateTasks(
    const std::vector<PartitionTask>& tasks) {
  if (tasks.empty()) return absl::OkStatus();
  return CommitTasks(tasks);
}

absl::Status SqliteStateStore::CommitTasks(
    absl::Span<const PartitionTask> tasks) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Transaction txn, Transaction::Begin(db_.get()));
  std::map<std::string, std::optional<TaskAggregates>> next;
  RETURN_IF_ERROR(WriteTasks(tasks, &next));
  RETURN_IF_ERROR(txn.Commit());
  for (auto& [job, sums] : next) {
    if (sums.has_value()) aggregates_[job] = *std::move(sums);
  }
  return absl::OkStatus();
}

absl::Status SqliteStateStore::WriteTasks(
    absl::Span<const PartitionTask> tasks,
    std::map<std::string, std::optional<TaskAggregates>>* next) {
  for (const PartitionTask& task : tasks) {
    // The job's sums, if kept, follow its tasks: each row's share out, the
    // new one in, so that a job's progress stays O(1) to read while it
    // runs. They are kept again only once the transaction commits.
    auto [sums, first] = next->try_emplace(task.job_id);
    if (first) {
      if (auto kept = aggregates_.find(task.job_id);
          kept != aggregates_.end()) {
        sums->second = kept->second;
      }
      ForgetTaskAggregates(task.job_id);
    }
    if (sums->second.has_value()) {
      static const std::string& kSql = Once(absl::StrCat(
          "SELECT state, input_rows, rows_written, duration_seconds, ",
          sr::IntactSql(sr::Tasks()),
          " FROM tasks WHERE job_id = ?1 AND dataset = ?2 AND \"partition\" "
          "= ?3"));
      ASSIGN_OR_RETURN(Statement q, db_->PrepareCached(kSql));
      RETURN_IF_ERROR(q.BindText(1, task.job_id));
      RETURN_IF_ERROR(q.BindText(2, task.dataset));
      RETURN_IF_ERROR(q.BindText(3, task.partition));
      ASSIGN_OR_RETURN(bool row, q.Step());
      if (row && q.ColumnInt(4) != 1) {
        return sr::Damaged(
            sr::TaskRecord(task.job_id, task.dataset, task.partition), path_);
      }
      absl::StatusOr<TaskState> was = row ? ParseTaskState(q.ColumnText(0))
                                          : absl::NotFoundError("no such task");
      if (was.ok()) {
        AddTaskShare(task.dataset, *was, q.ColumnInt(1), q.ColumnInt(2),
                     q.ColumnDouble(3), -1, &*sums->second);
        AddTaskShare(task.dataset, task.state, InputRows(task.inputs),
                     task.rows_written, task.duration_seconds, +1,
                     &*sums->second);
      } else {
        sums->second.reset();
      }
    }
    static const std::string& kUpdate = Once(absl::StrCat(
        "UPDATE tasks SET state = ?4, attempts = ?5, last_error = ?6, "
        "rows_written = ?7, output_fingerprint = ?8, inputs = ?9, "
        "input_rows = ?10, duration_seconds = ?11, update_time = ?12, ",
        sr::ResealSql(sr::Tasks(), {{"state", "?4"},
                                    {"attempts", "?5"},
                                    {"last_error", "?6"},
                                    {"rows_written", "?7"},
                                    {"output_fingerprint", "?8"},
                                    {"inputs", "?9"},
                                    {"input_rows", "?10"},
                                    {"duration_seconds", "?11"},
                                    {"update_time", "?12"}}),
        " WHERE job_id = ?1 AND dataset = ?2 AND \"partition\" = ?3"));
    ASSIGN_OR_RETURN(Statement q, db_->PrepareCached(kUpdate));
    RETURN_IF_ERROR(q.BindText(1, task.job_id));
    RETURN_IF_ERROR(q.BindText(2, task.dataset));
    RETURN_IF_ERROR(q.BindText(3, task.partition));
    RETURN_IF_ERROR(q.BindText(4, TaskStateText(task.state)));
    RETURN_IF_ERROR(q.BindInt(5, task.attempts));
    RETURN_IF_ERROR(q.BindText(6, task.last_error));
    RETURN_IF_ERROR(q.BindInt(7, task.rows_written));
    RETURN_IF_ERROR(q.BindText(8, task.output_fingerprint));
    RETURN_IF_ERROR(q.BindText(9, EncodeInputs(task.inputs)));
    RETURN_IF_ERROR(q.BindInt(10, InputRows(task.inputs)));
    RETURN_IF_ERROR(q.BindDouble(11, task.duration_seconds));
    RETURN_IF_ERROR(BindTime(q, 12, task.update_time));
    RETURN_IF_ERROR(q.Run());
    if (db_->Changes() == 0) {
      return absl::NotFoundError(absl::StrCat("no task ", task.dataset, "/",
                                              task.partition, " in job ",
                                              task.job_id));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> SqliteStateStore::UpdateTasksInState(
    const std::string& job_id, const std::vector<TaskState>& from, TaskState to,
    absl::Time now) {
  if (from.empty()) return 0;
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Transaction txn, Transaction::Begin(db_.get()));
  ForgetTaskAggregates(job_id);
  static const std::string& kSet = Once(absl::StrCat(
      "UPDATE tasks SET state = ?1, update_time = ?2, ",
      sr::ResealSql(sr::Tasks(), {{"state", "?1"}, {"update_time", "?2"}})));
  ASSIGN_OR_RETURN(Statement q, db_->PrepareCached(absl::StrCat(
                                    kSet, " WHERE job_id = ?3 AND state IN (",
                                    Placeholders(4, from.size()), ")")));
  RETURN_IF_ERROR(q.BindText(1, TaskStateText(to)));
  RETURN_IF_ERROR(BindTime(q, 2, now));
  RETURN_IF_ERROR(q.BindText(3, job_id));
  for (size_t i = 0; i < from.size(); ++i) {
    RETURN_IF_ERROR(
        q.BindText(static_cast<int>(i) + 4, TaskStateText(from[i])));
  }
  RETURN_IF_ERROR(q.Run());
  int64_t changed = db_->Changes();
  RETURN_IF_ERROR(txn.Commit());
  return changed;
}

absl::Status SqliteStateStore::RecordPublication(
    const std::string& job_id, const std::vector<LineageRecord>& lineage,
    JobState to, const std::string& message, absl::Time now) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Transaction txn, Transaction::Begin(db_.get()));
  ASSIGN_OR_RETURN(JobState from, StateOf(job_id));
  int64_t recorded = 0;
  {
    ASSIGN_OR_RETURN(
        Statement q,
        db_->PrepareCached("SELECT COUNT(*) FROM lineage WHERE job_id "
                           "= ?1 AND action = 'publish'"));
    RETURN_IF_ERROR(q.BindText(1, job_id));
    RETURN_IF_ERROR(q.Step().status());
    recorded = q.ColumnInt(0);
  }
  if (PastPublishing(from) || (from == JobState::kPublishing && recorded > 0)) {
    // Already recorded (a repeat after a restart): nothing to do.
    return absl::OkStatus();
  }
  if (from != JobState::kPublishing) {
    // E.g. FAILED or CANCELLED: a publication must not resurrect the job.
    return absl::FailedPreconditionError(
        absl::StrCat("cannot record the publication of job ", job_id,
                     ": it is ", JobStateText(from), ", not PUBLISHING"));
  }
  if (absl::Status s = CheckTransition(from, to); !s.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", job_id, ": ", s.message()));
  }
  {
    static const std::string& kInsert = Once(absl::StrCat(
        "INSERT INTO lineage (dataset, \"partition\", job_id, "
        "transform_version, inputs, output_fingerprint, row_count, reason, "
        "ticket, requested_by, published_at, approved_from, approved_by, "
        "approval_reason, approval_override, approved_at, checksum) VALUES "
        "(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, "
        "?16, ",
        sr::InsertSql(sr::Lineage(), {{"dataset", "?1"},
                                      {"partition", "?2"},
                                      {"job_id", "?3"},
                                      {"transform_version", "?4"},
                                      {"inputs", "?5"},
                                      {"output_fingerprint", "?6"},
                                      {"row_count", "?7"},
                                      {"reason", "?8"},
                                      {"ticket", "?9"},
                                      {"requested_by", "?10"},
                                      {"published_at", "?11"},
                                      {"approved_from", "?12"},
                                      {"approved_by", "?13"},
                                      {"approval_reason", "?14"},
                                      {"approval_override", "?15"},
                                      {"approved_at", "?16"},
                                      {"action", "'publish'"}}),
        ")"));
    ASSIGN_OR_RETURN(Statement q, db_->PrepareCached(kInsert));
    for (const LineageRecord& rec : lineage) {
      RETURN_IF_ERROR(q.Reset());
      RETURN_IF_ERROR(q.BindText(1, rec.dataset));
      RETURN_IF_ERROR(q.BindText(2, rec.partition));
      RETURN_IF_ERROR(q.BindText(3, job_id));
      RETURN_IF_ERROR(q.BindText(4, rec.transform_version));
      RETURN_IF_ERROR(q.BindText(5, EncodeInputs(rec.inputs)));
      RETURN_IF_ERROR(q.BindText(6, rec.output_fingerprint));
      RETURN_IF_ERROR(q.BindInt(7, rec.row_count));
      RETURN_IF_ERROR(q.BindText(8, rec.reason));
      RETURN_IF_ERROR(q.BindText(9, rec.ticket));
      RETURN_IF_ERROR(q.BindText(10, rec.requested_by));
      RETURN_IF_ERROR(BindTime(
          q, 11,
          rec.published_at == absl::InfinitePast() ? now : rec.published_at));
      if (rec.approval) {
        RETURN_IF_ERROR(q.BindText(12, JobStateText(rec.approval->from_state)));
        RETURN_IF_ERROR(q.BindText(13, rec.approval->approved_by));
        RETURN_IF_ERROR(q.BindText(14, rec.approval->reason));
        RETURN_IF_ERROR(
            q.BindInt(15, rec.approval->override_validation ? 1 : 0));
        RETURN_IF_ERROR(BindTime(q, 16, rec.approval->approved_at));
      } else {
        RETURN_IF_ERROR(q.BindNull(12));
        RETURN_IF_ERROR(q.BindText(13, ""));
        RETURN_IF_ERROR(q.BindText(14, ""));
        RETURN_IF_ERROR(q.BindInt(15, 0));
        RETURN_IF_ERROR(q.BindNull(16));
      }
      RETURN_IF_ERROR(q.Run());
    }
  }
  {
    ForgetTaskAggregates(job_id);
    static const std::string& kPublish = Once(absl::StrCat(
        "UPDATE tasks SET state = ?1, update_time = ?2, ",
        sr::ResealSql(sr::Tasks(), {{"state", "?1"}, {"update_time", "?2"}}),
        " WHERE job_id = ?3 AND state = ?4"));
    ASSIGN_OR_RETURN(Statement q, db_->PrepareCached(kPublish));
    RETURN_IF_ERROR(q.BindText(1, TaskStateText(TaskState::kPublished)));
    RETURN_IF_ERROR(BindTime(q, 2, now));
    RETURN_IF_ERROR(q.BindText(3, job_id));
    RETURN_IF_ERROR(q.BindText(4, TaskStateText(TaskState::kStaged)));
    RETURN_IF_ERROR(q.Run());
  }
  {
    constexpr char kEnd[] = "CASE WHEN ?5 THEN ?4 ELSE end_time END";
    static const std::string& kUpdate = Once(absl::StrCat(
        "UPDATE jobs SET state = ?2, message = ?3, update_time = ?4, "
        "end_time = ",
        kEnd, ", ",
        sr::ResealSql(sr::Jobs(), {{"state", "?2"},
                                   {"message", "?3"},
                                   {"update_time", "?4"},
                                   {"end_time", kEnd}}),
        " WHERE id = ?1"));
    ASSIGN_OR_RETURN(Statement q, db_->PrepareCached(kUpdate));
    RETURN_IF_ERROR(q.BindText(1, job_id));
    RETURN_IF_ERROR(q.BindText(2, JobStateText(to)));
    RETURN_IF_ERROR(q.BindText(3, message));
    RETURN_IF_ERROR(BindTime(q, 4, now));
    RETURN_IF_ERROR(q.BindInt(5, IsTerminal(to) ? 1 : 0));
    RETURN_IF_ERROR(q.Run());
  }
  RETURN_IF_ERROR(
      AppendAudit(job_id, JobStateText(from), JobStateText(to), message, now));
  return txn.Commit();
}

absl::Status SqliteStateStore::ApproveJob(const std::string& job_id,
                                          JobState expected_from, JobState to,
                                          const Approval& approval,
                                          const std::string& message,
                                          absl::Time now) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Transaction txn, Transaction::Begin(db_.get()));
  ASSIGN_OR_RETURN(JobState from, StateOf(job_id));
  if (from != expected_from) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", job_id, " is ", Sv(JobStateName(from)), ", not ",
                     Sv(JobStateName(expected_from)), "; cannot approve it"));
  }
  if (absl::Status s = CheckTransition(from, to); !s.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", job_id, ": ", s.message()));
  }
  {
    ASSIGN_OR_RETURN(
        Statement q,
        db_->PrepareCached("SELECT 1 FROM job_approvals WHERE job_id = ?1"));
    RETURN_IF_ERROR(q.BindText(1, job_id));
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (row) {
      return absl::FailedPreconditionError(
          absl::StrCat("job ", job_id, " was approved already"));
    }
  }
  {
    ASSIGN_OR_RETURN(
        Statement q,
        db_->PrepareCached(
            "INSERT INTO job_approvals (job_id, approved_by, reason, "
            "override, from_state, approved_at) VALUES (?1, ?2, ?3, "
            "?4, ?5, ?6)"));
    RETURN_IF_ERROR(q.BindText(1, job_id));
    RETURN_IF_ERROR(q.BindText(2, approval.approved_by));
    RETURN_IF_ERROR(q.BindText(3, approval.reason));
    RETURN_IF_ERROR(q.BindInt(4, approval.override_validation ? 1 : 0));
    RETURN_IF_ERROR(q.BindText(5, JobStateText(from)));
    RETURN_IF_ERROR(BindTime(q, 6,
                             approval.approved_at == absl::InfinitePast()
                                 ? now
                                 : approval.approved_at));
    RETURN_IF_ERROR(q.Run());
  }
  RETURN_IF_ERROR(WriteTransition(job_id, from, to, message, now));
  return txn.Commit();
}

absl::Status SqliteStateStore::ReplaceJobDiff(const JobDiff& diff) {
  absl::MutexLock lock(&mu_);
  diff_summaries_.erase(diff.job_id);
  ASSIGN_OR_RETURN(Transaction txn, Transaction::Begin(db_.get()));
  RETURN_IF_ERROR(StateOf(diff.job_id).status());
  for (const char* table : {"job_diff_partitions", "job_diff_datasets"}) {
    ASSIGN_OR_RETURN(Statement q,
                     db_->PrepareCached(absl::StrCat("DELETE FROM ", table,
                                                     " WHERE job_id = ?1")));
    RETURN_IF_ERROR(q.BindText(1, diff.job_id));
    RETURN_IF_ERROR(q.Run());
  }
  ASSIGN_OR_RETURN(
      Statement ds,
      db_->PrepareCached(
          "INSERT INTO job_diff_datasets (job_id, ordinal, dataset, "
          "by_key, key_columns, value_columns, measure_columns, "
          "computed_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"));
  ASSIGN_OR_RETURN(
      Statement part,
      db_->PrepareCached(
          "INSERT INTO job_diff_partitions (job_id, dataset, "
          "\"partition\", rows_before, rows_after, added, removed, "
          "changed, unchanged, measures, samples, error) VALUES (?1, "
          "?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)"));
  int64_t ordinal = 0;
  for (const DatasetDiff& d : diff.datasets) {
    RETURN_IF_ERROR(ds.Reset());
    RETURN_IF_ERROR(ds.BindText(1, diff.job_id));
    RETURN_IF_ERROR(ds.BindInt(2, ordinal++));
    RETURN_IF_ERROR(ds.BindText(3, d.dataset));
    RETURN_IF_ERROR(ds.BindInt(4, d.columns.by_key ? 1 : 0));
    RETURN_IF_ERROR(ds.BindText(5, EncodeFields(d.columns.key)));
    RETURN_IF_ERROR(ds.BindText(6, EncodeFields(d.columns.values)));
    RETURN_IF_ERROR(ds.BindText(7, EncodeFields(d.columns.measures)));
    RETURN_IF_ERROR(BindTime(ds, 8, diff.computed_at));
    RETURN_IF_ERROR(ds.Run());
    for (const PartitionDiff& p : d.partitions) {
      RETURN_IF_ERROR(part.Reset());
      RETURN_IF_ERROR(part.BindText(1, diff.job_id));
      RETURN_IF_ERROR(part.BindText(2, d.dataset));
      RETURN_IF_ERROR(part.BindText(3, p.partition));
      RETURN_IF_ERROR(part.BindInt(4, p.rows_before));
      RETURN_IF_ERROR(part.BindInt(5, p.rows_after));
      RETURN_IF_ERROR(part.BindInt(6, p.added));
      RETURN_IF_ERROR(part.BindInt(7, p.removed));
      RETURN_IF_ERROR(part.BindInt(8, p.changed));
      RETURN_IF_ERROR(part.BindInt(9, p.unchanged));
      RETURN_IF_ERROR(part.BindText(10, EncodeMeasures(p.measures)));
      RETURN_IF_ERROR(part.BindText(11, EncodeSamples(p.samples)));
      RETURN_IF_ERROR(part.BindText(12, p.error));
      RETURN_IF_ERROR(part.Run());
    }
  }
  return txn.Commit();
}

absl::StatusOr<std::optional<JobDiff>> SqliteStateStore::GetJobDiff(
    const std::string& job_id, const std::string& dataset, bool with_samples) {
  absl::MutexLock lock(&mu_);
  return ReadJobDiff(job_id, dataset, with_samples);
}

absl::StatusOr<std::optional<JobDiff>> SqliteStateStore::ReadJobDiff(
    const std::string& job_id, const std::string& dataset, bool with_samples) {
  ASSIGN_OR_RETURN(Transaction txn,
                   Transaction::Begin(db_.get(), Transaction::Mode::kDeferred));
  ASSIGN_OR_RETURN(std::optional<JobDiff> diff,
                   LoadJobDiff(job_id, dataset, with_samples));
  RETURN_IF_ERROR(txn.Commit());
  return diff;
}

absl::StatusOr<std::optional<JobDiff>> SqliteStateStore::LoadJobDiff(
    const std::string& job_id, const std::string& dataset, bool with_samples) {
  RETURN_IF_ERROR(StateOf(job_id).status());
  JobDiff diff;
  diff.job_id = job_id;
  {
    ASSIGN_OR_RETURN(Statement q,
                     db_->PrepareCached(
                         "SELECT dataset, by_key, key_columns, value_columns, "
                         "measure_columns, computed_at FROM job_diff_datasets "
                         "WHERE job_id = ?1 ORDER BY ordinal"));
    RETURN_IF_ERROR(q.BindText(1, job_id));
    bool any = false;
    while (true) {
      ASSIGN_OR_RETURN(bool row, q.Step());
      if (!row) break;
      any = true;
      diff.computed_at = ColumnTime(q, 5);
      if (!dataset.empty() && q.ColumnText(0) != dataset) continue;
      DatasetDiff d;
      d.dataset = q.ColumnText(0);
      d.columns.by_key = q.ColumnInt(1) != 0;
      ASSIGN_OR_RETURN(d.columns.key, DecodeFields(q.ColumnText(2)));
      ASSIGN_OR_RETURN(d.columns.values, DecodeFields(q.ColumnText(3)));
      ASSIGN_OR_RETURN(d.columns.measures, DecodeFields(q.ColumnText(4)));
      diff.datasets.push_back(std::move(d));
    }
    if (!any) return std::nullopt;
  }
  ASSIGN_OR_RETURN(
      Statement q,
      db_->PrepareCached(absl::StrCat(
          "SELECT \"partition\", rows_before, rows_after, added, removed, "
          "changed, unchanged, measures, ",
          with_samples ? "samples" : "''",
          ", error FROM job_diff_partitions WHERE job_id = ?1 AND dataset = "
          "?2 ORDER BY \"partition\"")));
  for (DatasetDiff& d : diff.datasets) {
    RETURN_IF_ERROR(q.Reset());
    RETURN_IF_ERROR(q.BindText(1, job_id));
    RETURN_IF_ERROR(q.BindText(2, d.dataset));
    while (true) {
      ASSIGN_OR_RETURN(bool row, q.Step());
      if (!row) break;
      PartitionDiff p;
      p.dataset = d.dataset;
      p.partition = q.ColumnText(0);
      p.rows_before = q.ColumnInt(1);
      p.rows_after = q.ColumnInt(2);
      p.added = q.ColumnInt(3);
      p.removed = q.ColumnInt(4);
      p.changed = q.ColumnInt(5);
      p.unchanged = q.ColumnInt(6);
      ASSIGN_OR_RETURN(p.measures,
                       DecodeMeasures(q.ColumnText(7), d.columns.measures));
      ASSIGN_OR_RETURN(p.samples, DecodeSamples(q.ColumnText(8)));
      p.error = q.ColumnText(9);
      d.partitions.push_back(std::move(p));
    }
  }
  return diff;
}

absl::StatusOr<std::vector<LineageRecord>> SqliteStateStore::GetLineage(
    const std::string& dataset, const std::string& partition) {
  // Read per partition while a job runs: on the point-read connection when
  // there is one, so that it neither waits for writers nor makes them wait.
  absl::MutexLock reader_lock(&point_reader_mu_);
  std::optional<absl::MutexLock> lock;
  ASSIGN_OR_RETURN(Database * db, ReaderOrMain(&point_reader_, &lock));
  static const std::string& kSql = Once(absl::StrCat(
      "SELECT ", LineageColumns(""),
      " FROM lineage WHERE dataset = ?1 AND \"partition\" = ?2 ORDER BY id "
      "DESC"));
  ASSIGN_OR_RETURN(Statement q, db->PrepareCached(kSql));
  RETURN_IF_ERROR(q.BindText(1, dataset));
  RETURN_IF_ERROR(q.BindText(2, partition));
  return ReadLineage(q, path_);
}

absl::StatusOr<std::vector<std::optional<LineageRecord>>>
SqliteStateStore::NewestLineages(
    const std::vector<std::pair<std::string, std::string>>& keys) {
  // As GetLineage, for a batch of partitions in one read transaction.
  absl::MutexLock reader_lock(&point_reader_mu_);
  std::optional<absl::MutexLock> lock;
  ASSIGN_OR_RETURN(Database * db, ReaderOrMain(&point_reader_, &lock));
  ASSIGN_OR_RETURN(Transaction txn,
                   Transaction::Begin(db, Transaction::Mode::kDeferred));
  static const std::string& kSql = Once(absl::StrCat(
      "SELECT ", LineageColumns(""),
      " FROM lineage WHERE dataset = ?1 AND \"partition\" = ?2 ORDER BY id "
      "DESC LIMIT 1"));
  ASSIGN_OR_RETURN(Statement q, db->PrepareCached(kSql));
  std::vector<std::optional<LineageRecord>> out;
  out.reserve(keys.size());
  for (const auto& [dataset, partition] : keys) {
    RETURN_IF_ERROR(q.Reset());
    RETURN_IF_ERROR(q.BindText(1, dataset));
    RETURN_IF_ERROR(q.BindText(2, partition));
    ASSIGN_OR_RETURN(std::vector<LineageRecord> records, ReadLineage(q, path_));
    out.emplace_back();
    if (!records.empty()) out.back() = std::move(records.front());
  }
  RETURN_IF_ERROR(txn.Commit());
  return out;
}

absl::StatusOr<std::optional<LineageRecord>> SqliteStateStore::NewestLineageOf(
    const std::string& dataset) {
  absl::MutexLock lock(&mu_);
  static const std::string& kSql = Once(absl::StrCat(
      "SELECT ", LineageColumns(""),
      " FROM lineage WHERE dataset = ?1 ORDER BY id DESC LIMIT 1"));
  ASSIGN_OR_RETURN(Statement q, db_->PrepareCached(kSql));
  RETURN_IF_ERROR(q.BindText(1, dataset));
  ASSIGN_OR_RETURN(std::vector<LineageRecord> records, ReadLineage(q, path_));
  if (records.empty()) return std::optional<LineageRecord>();
  return std::optional<LineageRecord>(std::move(records.front()));
}

absl::Status SqliteStateStore::RecordRollback(
    const std::string& job_id, const RollbackInfo& info,
    const std::vector<LineageRecord>& lineage, const std::string& message,
    const std::string& also_message, absl::Time now) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Transaction txn, Transaction::Begin(db_.get()));
  ASSIGN_OR_RETURN(JobState from, StateOf(job_id));
  if (from == JobState::kRolledBack) return absl::OkStatus();  // recorded
  std::vector<std::pair<std::string, JobState>> jobs = {{job_id, from}};
  for (const std::string& other : info.also_rolled_back) {
    if (other == job_id) continue;
    ASSIGN_OR_RETURN(JobState state, StateOf(other));
    jobs.push_back({other, state});
  }
  for (const auto& [id, state] : jobs) {
    if (state != JobState::kSucceeded &&
        state != JobState::kDownstreamUnhealthy) {
      return absl::FailedPreconditionError(absl::StrCat(
          "cannot record the rollback of job ", id, ": it is ",
          JobStateText(state), ", not SUCCEEDED or DOWNSTREAM_UNHEALTHY"));
    }
  }
  {
    static const std::string& kInsert = Once(absl::StrCat(
        "INSERT INTO lineage (dataset, \"partition\", job_id, "
        "transform_version, inputs, output_fingerprint, row_count, reason, "
        "ticket, requested_by, published_at, action, checksum) VALUES (?1, "
        "?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, 'rollback', ",
        sr::InsertSql(sr::Lineage(), {{"dataset", "?1"},
                                      {"partition", "?2"},
                                      {"job_id", "?3"},
                                      {"transform_version", "?4"},
                                      {"inputs", "?5"},
                                      {"output_fingerprint", "?6"},
                                      {"row_count", "?7"},
                                      {"reason", "?8"},
                                      {"ticket", "?9"},
                                      {"requested_by", "?10"},
                                      {"published_at", "?11"},
                                      {"approved_from", "NULL"},
                                      {"approved_by", "''"},
                                      {"approval_reason", "''"},
                                      {"approval_override", "0"},
                                      {"approved_at", "NULL"},
                                      {"action", "'rollback'"}}),
        ")"));
    ASSIGN_OR_RETURN(Statement q, db_->PrepareCached(kInsert));
    for (const LineageRecord& rec : lineage) {
      RETURN_IF_ERROR(q.Reset());
      RETURN_IF_ERROR(q.BindText(1, rec.dataset));
      RETURN_IF_ERROR(q.BindText(2, rec.partition));
      RETURN_IF_ERROR(q.BindText(3, rec.job_id.empty() ? job_id : rec.job_id));
      RETURN_IF_ERROR(q.BindText(4, rec.transform_version));
      RETURN_IF_ERROR(q.BindText(5, EncodeInputs(rec.inputs)));
      RETURN_IF_ERROR(q.BindText(6, rec.output_fingerprint));
      RETURN_IF_ERROR(q.BindInt(7, rec.row_count));
      RETURN_IF_ERROR(q.BindText(8, rec.reason));
      RETURN_IF_ERROR(q.BindText(9, rec.ticket));
      RETURN_IF_ERROR(q.BindText(10, rec.requested_by));
      RETURN_IF_ERROR(BindTime(
          q, 11,
          rec.published_at == absl::InfinitePast() ? now : rec.published_at));
      RETURN_IF_ERROR(q.Run());
    }
  }
  ASSIGN_OR_RETURN(
      Statement insert,
      db_->PrepareCached(
          "INSERT OR REPLACE INTO rollbacks (job_id, requested_by, "
          "reason, at, forced, with_job, also_rolled_back, "
          "partitions, rows_restored) VALUES (?1, ?2, ?3, ?4, ?5, "
          "?6, ?7, ?8, ?9)"));
  for (const auto& [id, state] : jobs) {
    const bool main = id == job_id;
    RETURN_IF_ERROR(insert.Reset());
    RETURN_IF_ERROR(insert.BindText(1, id));
    RETURN_IF_ERROR(insert.BindText(2, info.requested_by));
    RETURN_IF_ERROR(insert.BindText(3, info.reason));
    RETURN_IF_ERROR(
        BindTime(insert, 4, info.at == absl::InfinitePast() ? now : info.at));
    RETURN_IF_ERROR(insert.BindInt(5, info.forced ? 1 : 0));
    RETURN_IF_ERROR(insert.BindText(6, main ? info.with_job : job_id));
    RETURN_IF_ERROR(insert.BindText(
        7, main ? EncodeFields(info.also_rolled_back) : std::string()));
    RETURN_IF_ERROR(insert.BindInt(8, main ? info.partitions : 0));
    RETURN_IF_ERROR(insert.BindInt(9, main ? info.rows : 0));
    RETURN_IF_ERROR(insert.Run());
    RETURN_IF_ERROR(WriteTransition(id, state, JobState::kRolledBack,
                                    main ? message : also_message, now));
  }
  return txn.Commit();
}

absl::StatusOr<std::vector<LineageRecord>>
SqliteStateStore::GetLineageOverlapping(const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Transaction txn,
                   Transaction::Begin(db_.get(), Transaction::Mode::kDeferred));
  RETURN_IF_ERROR(StateOf(job_id).status());
  static const std::string& kColumns = Once(LineageColumns("l"));
  ASSIGN_OR_RETURN(
      Statement q,
      db_->PrepareCached(absl::StrCat(
          "SELECT ", kColumns,
          " FROM lineage m JOIN lineage l ON l.dataset = m.dataset AND "
          "l.\"partition\" = m.\"partition\" WHERE m.job_id = ?1 AND "
          "m.action = 'publish' ORDER BY l.id")));
  RETURN_IF_ERROR(q.BindText(1, job_id));
  ASSIGN_OR_RETURN(std::vector<LineageRecord> out, ReadLineage(q, path_));
  RETURN_IF_ERROR(txn.Commit());
  return out;
}

absl::StatusOr<std::map<std::string, absl::Time>>
SqliteStateStore::PublicationTimes(const std::vector<std::string>& job_ids) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Transaction txn,
                   Transaction::Begin(db_.get(), Transaction::Mode::kDeferred));
  ASSIGN_OR_RETURN(
      Statement q,
      db_->PrepareCached("SELECT MIN(published_at) FROM lineage WHERE "
                         "job_id = ?1 AND action = 'publish'"));
  std::map<std::string, absl::Time> out;
  for (const std::string& id : job_ids) {
    RETURN_IF_ERROR(q.Reset());
    RETURN_IF_ERROR(q.BindText(1, id));
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (row && !q.ColumnIsNull(0)) out[id] = ColumnTime(q, 0);
  }
  RETURN_IF_ERROR(txn.Commit());
  return out;
}

absl::Status SqliteStateStore::WriteJobCosts(const std::string& id,
                                             const Job& job) {
  {
    static const std::string& kUpdate = Once(absl::StrCat(
        "UPDATE jobs SET max_cost = ?2, ",
        sr::ResealSql(sr::Jobs(), {{"max_cost", "?2"}}), " WHERE id = ?1"));
    ASSIGN_OR_RETURN(Statement q, db_->PrepareCached(kUpdate));
    RETURN_IF_ERROR(q.BindText(1, id));
    RETURN_IF_ERROR(q.BindDouble(2, job.request.max_cost));
    RETURN_IF_ERROR(q.Run());
  }
  static const std::string& kUpdate = Once(absl::StrCat(
      "UPDATE job_datasets SET estimate_source = ?3, "
      "partitions_from_history = ?4, max_cost = ?5, ",
      sr::ResealSql(sr::JobDatasets(), {{"estimate_source", "?3"},
                                        {"partitions_from_history", "?4"},
                                        {"max_cost", "?5"}}),
      " WHERE job_id = ?1 AND ordinal = ?2"));
  ASSIGN_OR_RETURN(Statement q, db_->PrepareCached(kUpdate));
  for (size_t i = 0; i < job.plan.datasets.size(); ++i) {
    const DatasetPlan& dp = job.plan.datasets[i];
    RETURN_IF_ERROR(q.Reset());
    RETURN_IF_ERROR(q.BindText(1, id));
    RETURN_IF_ERROR(q.BindInt(2, static_cast<int64_t>(i)));
    RETURN_IF_ERROR(q.BindText(3, dp.estimate_source));
    RETURN_IF_ERROR(q.BindInt(4, dp.partitions_from_history));
    RETURN_IF_ERROR(q.BindDouble(5, dp.cost.max_cost));
    RETURN_IF_ERROR(q.Run());
  }
  return absl::OkStatus();
}

absl::Status SqliteStateStore::WriteJobKeys(const std::string& id,
                                            const Job& job) {
  if (job.request.keys.empty()) return absl::OkStatus();
  ASSIGN_OR_RETURN(
      Statement q,
      db_->PrepareCached("INSERT INTO job_keys (job_id, ordinal, key) "
                         "VALUES (?1, ?2, ?3)"));
  for (size_t i = 0; i < job.request.keys.size(); ++i) {
    RETURN_IF_ERROR(q.Reset());
    RETURN_IF_ERROR(q.BindText(1, id));
    RETURN_IF_ERROR(q.BindInt(2, static_cast<int64_t>(i)));
    RETURN_IF_ERROR(q.BindText(3, job.request.keys[i]));
    RETURN_IF_ERROR(q.Run());
  }
  return absl::OkStatus();
}

absl::Status SqliteStateStore::ReadJobKeys(const std::string& id, Job* job) {
  ASSIGN_OR_RETURN(
      Statement q,
      db_->PrepareCached("SELECT key FROM job_keys WHERE job_id = ?1 "
                         "ORDER BY ordinal"));
  RETURN_IF_ERROR(q.BindText(1, id));
  job->request.keys.clear();
  while (true) {
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) break;
    job->request.keys.push_back(q.ColumnText(0));
  }
  // The key filter applies to the target only (dependents go by partition).
  for (DatasetPlan& dp : job->plan.datasets) {
    dp.keys = dp.dataset == job->request.dataset ? job->request.keys
                                                 : std::vector<std::string>();
  }
  return absl::OkStatus();
}

absl::Status SqliteStateStore::ReadJobCosts(const std::string& id, Job* job) {
  {
    ASSIGN_OR_RETURN(
        Statement q,
        db_->PrepareCached("SELECT max_cost FROM jobs WHERE id = ?1"));
    RETURN_IF_ERROR(q.BindText(1, id));
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (row) {
      job->request.max_cost = q.ColumnDouble(0);
      job->plan.cost.max_cost = job->request.max_cost;
    }
  }
  std::map<std::string, DatasetPlan*> by_name;
  for (DatasetPlan& dp : job->plan.datasets) by_name[dp.dataset] = &dp;
  {
    ASSIGN_OR_RETURN(Statement q,
                     db_->PrepareCached(
                         "SELECT dataset, estimate_source, "
                         "partitions_from_history, max_cost FROM job_datasets "
                         "WHERE job_id = ?1"));
    RETURN_IF_ERROR(q.BindText(1, id));
    while (true) {
      ASSIGN_OR_RETURN(bool row, q.Step());
      if (!row) break;
      auto it = by_name.find(q.ColumnText(0));
      if (it == by_name.end()) continue;
      it->second->estimate_source = q.ColumnText(1);
      it->second->partitions_from_history = q.ColumnInt(2);
      it->second->cost.max_cost = q.ColumnDouble(3);
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::map<std::string, int64_t>>
SqliteStateStore::LastRunInputRows(const std::string& dataset,
                                   const std::vector<std::string>& partitions) {
  std::map<std::string, int64_t> out;
  if (partitions.empty()) return out;
  const auto [first, last] =
      std::minmax_element(partitions.begin(), partitions.end());
  // The partitions asked for, as views of `partitions`; built only once a
  // row comes back (a plan of partitions that never ran reads none).
  absl::flat_hash_set<absl::string_view> wanted;
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Transaction txn,
                   Transaction::Begin(db_.get(), Transaction::Mode::kDeferred));
  // Newest job first per partition: the first row of each partition wins.
  static const std::string& kSql = Once(absl::StrCat(
      "SELECT t.\"partition\", t.input_rows, t.job_id, ",
      sr::IntactSql(sr::Tasks(), "t"),
      " FROM tasks t JOIN jobs j ON j.id = t.job_id WHERE t.dataset = ?1 AND "
      "t.\"partition\" >= ?2 AND t.\"partition\" <= ?3 AND "
      "t.state IN ('PUBLISHED', 'UNCHANGED') ORDER BY t.\"partition\", j.seq "
      "DESC"));
  ASSIGN_OR_RETURN(Statement q, db_->PrepareCached(kSql));
  RETURN_IF_ERROR(q.BindText(1, dataset));
  RETURN_IF_ERROR(q.BindText(2, *first));
  RETURN_IF_ERROR(q.BindText(3, *last));
  while (true) {
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) break;
    if (wanted.empty()) wanted.insert(partitions.begin(), partitions.end());
    std::string partition = q.ColumnText(0);
    if (!wanted.contains(partition)) continue;
    if (q.ColumnInt(3) != 1) {
      return sr::Damaged(sr::TaskRecord(q.ColumnText(2), dataset, partition),
                         path_);
    }
    out.emplace(std::move(partition), q.ColumnInt(1));  // keeps the first
  }
  RETURN_IF_ERROR(txn.Commit());
  return out;
}

absl::StatusOr<std::map<std::string, VerifiedVersion>>
SqliteStateStore::VerifiedVersions(const std::string& dataset,
                                   const std::vector<std::string>& partitions) {
  const std::set<std::string> wanted(partitions.begin(), partitions.end());
  auto keep = [&wanted](const std::string& p) {
    return wanted.empty() || wanted.count(p) > 0;
  };
  struct Candidate {
    int64_t seq = 0;
    VerifiedVersion version;
  };
  // A job with entity keys (job_keys) recomputed only its keys' rows of
  // its target (?1 here): no version of the whole partition.
  constexpr char kKeyedOnTarget[] =
      "(j.dataset = ?1 AND EXISTS (SELECT 1 FROM job_keys k WHERE k.job_id = "
      "j.id))";
  std::map<std::string, Candidate> best;
  auto offer = [&best](int64_t seq, VerifiedVersion v) {
    auto it = best.find(v.partition);
    if (it == best.end() || seq > it->second.seq) {
      std::string partition = v.partition;
      best[partition] = Candidate{seq, std::move(v)};
    }
  };
  // A long read (every version of a dataset): on the read connection when
  // there is one, so that checkpoints do not wait for it.
  absl::MutexLock reader_lock(&reader_mu_);
  std::optional<absl::MutexLock> lock;
  ASSIGN_OR_RETURN(Database * db, ReaderOrMain(&reader_, &lock));
  ASSIGN_OR_RETURN(Transaction txn,
                   Transaction::Begin(db, Transaction::Mode::kDeferred));
  {
    // Publish records of jobs that were not rolled back.
    static const std::string& kSql = Once(absl::StrCat(
        "SELECT l.\"partition\", l.job_id, j.seq, l.transform_version, "
        "l.inputs, ",
        sr::IntactSql(sr::Lineage(), "l"),
        " FROM lineage l JOIN jobs j ON j.id = l.job_id WHERE l.dataset = ?1 "
        "AND l.action = 'publish' AND j.state <> 'ROLLED_BACK' AND NOT ",
        kKeyedOnTarget));
    ASSIGN_OR_RETURN(Statement q, db->PrepareCached(kSql));
    RETURN_IF_ERROR(q.BindText(1, dataset));
    while (true) {
      ASSIGN_OR_RETURN(bool row, q.Step());
      if (!row) break;
      VerifiedVersion v;
      v.partition = q.ColumnText(0);
      if (!keep(v.partition)) continue;
      v.job_id = q.ColumnText(1);
      if (q.ColumnInt(5) != 1) {
        return sr::Damaged(
            sr::LineageRecordName(v.job_id, dataset, v.partition), path_);
      }
      v.transform_version = q.ColumnText(3);
      ASSIGN_OR_RETURN(v.inputs, DecodeInputs(q.ColumnText(4)));
      offer(q.ColumnInt(2), std::move(v));
    }
  }
  // The newest rollback recorded per partition (unix micros).
  std::map<std::string, int64_t> rolled_back_at;
  {
    ASSIGN_OR_RETURN(
        Statement q,
        db->PrepareCached("SELECT \"partition\", MAX(published_at) "
                          "FROM lineage WHERE dataset = ?1 AND action "
                          "= 'rollback' GROUP BY \"partition\""));
    RETURN_IF_ERROR(q.BindText(1, dataset));
    while (true) {
      ASSIGN_OR_RETURN(bool row, q.Step());
      if (!row) break;
      rolled_back_at[q.ColumnText(0)] = q.ColumnInt(1);
    }
  }
  {
    // UNCHANGED tasks of jobs whose publish committed (not rolled back, as
    // for lineage above), with the version the job computed the dataset
    // with.
    std::vector<JobState> vouching;
    for (JobState state : PublishedStates()) {
      if (state != JobState::kRolledBack) vouching.push_back(state);
    }
    ASSIGN_OR_RETURN(
        Statement q,
        db->PrepareCached(absl::StrCat(
            "SELECT t.\"partition\", t.job_id, j.seq, "
            "COALESCE((SELECT d.transform_version FROM job_datasets d WHERE "
            "d.job_id = t.job_id AND d.dataset = t.dataset ORDER BY "
            "d.ordinal DESC LIMIT 1), ''), t.inputs, COALESCE(j.end_time, 0), ",
            sr::IntactSql(sr::Tasks(), "t"),
            " FROM tasks t JOIN jobs j ON j.id = t.job_id WHERE t.dataset = ?1 "
            "AND t.state = 'UNCHANGED' AND j.state IN (",
            Placeholders(2, vouching.size()), ") AND NOT ", kKeyedOnTarget)));
    RETURN_IF_ERROR(q.BindText(1, dataset));
    for (size_t i = 0; i < vouching.size(); ++i) {
      RETURN_IF_ERROR(
          q.BindText(static_cast<int>(i) + 2, JobStateText(vouching[i])));
    }
    while (true) {
      ASSIGN_OR_RETURN(bool row, q.Step());
      if (!row) break;
      VerifiedVersion v;
      v.partition = q.ColumnText(0);
      if (!keep(v.partition)) continue;
      auto rb = rolled_back_at.find(v.partition);
      if (rb != rolled_back_at.end() && rb->second >= q.ColumnInt(5)) continue;
      v.job_id = q.ColumnText(1);
      if (q.ColumnInt(6) != 1) {
        return sr::Damaged(sr::TaskRecord(v.job_id, dataset, v.partition),
                           path_);
      }
      v.unchanged = true;
      v.transform_version = q.ColumnText(3);
      ASSIGN_OR_RETURN(v.inputs, DecodeInputs(q.ColumnText(4)));
      offer(q.ColumnInt(2), std::move(v));
    }
  }
  RETURN_IF_ERROR(txn.Commit());
  std::map<std::string, VerifiedVersion> out;
  for (auto& [p, c] : best) out.emplace(p, std::move(c.version));
  return out;
}

namespace {

// The rows of a query that selects seq, job_id, from_state, to_state,
// message and at from audit_events, in its order.
absl::StatusOr<std::vector<AuditEvent>> ReadAuditEvents(Statement& q) {
  std::vector<AuditEvent> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) break;
    AuditEvent e;
    e.seq = q.ColumnInt(0);
    e.job_id = q.ColumnText(1);
    e.from_state = q.ColumnText(2);
    e.to_state = q.ColumnText(3);
    e.message = q.ColumnText(4);
    e.at = ColumnTime(q, 5);
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace

absl::StatusOr<std::vector<AuditEvent>> SqliteStateStore::ListAuditEvents(
    const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Statement q,
                   db_->PrepareCached(
                       "SELECT seq, job_id, from_state, to_state, message, at "
                       "FROM audit_events WHERE job_id = ?1 ORDER BY seq"));
  RETURN_IF_ERROR(q.BindText(1, job_id));
  return ReadAuditEvents(q);
}

absl::StatusOr<StoreStats> SqliteStateStore::Stats() {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Transaction txn,
                   Transaction::Begin(db_.get(), Transaction::Mode::kDeferred));
  StoreStats stats;
  {
    ASSIGN_OR_RETURN(
        Statement q,
        db_->PrepareCached("SELECT state, COUNT(*) FROM jobs GROUP BY state"));
    while (true) {
      ASSIGN_OR_RETURN(bool row, q.Step());
      if (!row) break;
      ASSIGN_OR_RETURN(JobState s, ParseJobState(q.ColumnText(0)));
      stats.jobs_by_state[static_cast<size_t>(s)] = q.ColumnInt(1);
    }
  }
  {
    ASSIGN_OR_RETURN(
        Statement q,
        db_->PrepareCached("SELECT state, n FROM task_state_counts"));
    while (true) {
      ASSIGN_OR_RETURN(bool row, q.Step());
      if (!row) break;
      ASSIGN_OR_RETURN(TaskState s, ParseTaskState(q.ColumnText(0)));
      stats.tasks_by_state[static_cast<size_t>(s)] = q.ColumnInt(1);
    }
  }
  {
    ASSIGN_OR_RETURN(
        Statement q,
        db_->PrepareCached(
            "SELECT COUNT(*), TOTAL(t.state IN ('STAGED', "
            "'PUBLISHED', 'UNCHANGED', 'SKIPPED')) FROM tasks t JOIN "
            "jobs j ON j.id = "
            "t.job_id WHERE j.state = 'RUNNING'"));
    RETURN_IF_ERROR(q.Step().status());
    stats.running_tasks_total = q.ColumnInt(0);
    stats.running_tasks_done = static_cast<int64_t>(q.ColumnDouble(1));
  }
  ASSIGN_OR_RETURN(stats.last_lineage_id,
                   db_->QueryInt("SELECT COALESCE(MAX(id), 0) FROM lineage"));
  ASSIGN_OR_RETURN(
      stats.last_audit_seq,
      db_->QueryInt("SELECT COALESCE(MAX(seq), 0) FROM audit_events"));
  RETURN_IF_ERROR(txn.Commit());
  return stats;
}

absl::Status SqliteStateStore::ReplaceCheckResults(
    const std::string& job_id, const std::vector<CheckResult>& results) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Transaction txn, Transaction::Begin(db_.get()));
  RETURN_IF_ERROR(StateOf(job_id).status());
  {
    ASSIGN_OR_RETURN(
        Statement del,
        db_->PrepareCached("DELETE FROM check_results WHERE job_id = ?1"));
    RETURN_IF_ERROR(del.BindText(1, job_id));
    RETURN_IF_ERROR(del.Run());
  }
  ASSIGN_OR_RETURN(
      Statement q,
      db_->PrepareCached(
          "INSERT INTO check_results (job_id, ordinal, check_name, "
          "kind, severity, dataset, \"partition\", passed, summary, "
          "partitions_checked, partitions_failed, observed, allowed, "
          "message, samples) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, "
          "?9, ?10, ?11, ?12, ?13, ?14, ?15)"));
  int64_t ordinal = 0;
  for (const CheckResult& r : results) {
    RETURN_IF_ERROR(q.Reset());
    RETURN_IF_ERROR(q.BindText(1, job_id));
    RETURN_IF_ERROR(q.BindInt(2, ordinal++));
    RETURN_IF_ERROR(q.BindText(3, r.check));
    RETURN_IF_ERROR(q.BindText(4, r.kind));
    RETURN_IF_ERROR(q.BindText(5, CheckSeverityName(r.severity)));
    RETURN_IF_ERROR(q.BindText(6, r.dataset));
    RETURN_IF_ERROR(q.BindText(7, r.partition));
    RETURN_IF_ERROR(q.BindInt(8, r.passed ? 1 : 0));
    RETURN_IF_ERROR(q.BindInt(9, r.summary ? 1 : 0));
    RETURN_IF_ERROR(q.BindInt(10, r.partitions_checked));
    RETURN_IF_ERROR(q.BindInt(11, r.partitions_failed));
    RETURN_IF_ERROR(q.BindText(12, r.observed));
    RETURN_IF_ERROR(q.BindText(13, r.allowed));
    RETURN_IF_ERROR(q.BindText(14, r.message));
    RETURN_IF_ERROR(q.BindText(15, EncodeFields(r.samples)));
    RETURN_IF_ERROR(q.Run());
  }
  return txn.Commit();
}

absl::StatusOr<std::vector<CheckResult>> SqliteStateStore::ListCheckResults(
    const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Transaction txn,
                   Transaction::Begin(db_.get(), Transaction::Mode::kDeferred));
  RETURN_IF_ERROR(StateOf(job_id).status());
  ASSIGN_OR_RETURN(std::vector<CheckResult> out, LoadCheckResults(job_id));
  RETURN_IF_ERROR(txn.Commit());
  return out;
}

absl::StatusOr<std::vector<CheckResult>> SqliteStateStore::LoadCheckResults(
    const std::string& job_id) {
  ASSIGN_OR_RETURN(
      Statement q,
      db_->PrepareCached(
          "SELECT check_name, kind, severity, dataset, \"partition\", "
          "passed, summary, partitions_checked, partitions_failed, "
          "observed, allowed, message, samples FROM check_results "
          "WHERE job_id = ?1 ORDER BY ordinal"));
  RETURN_IF_ERROR(q.BindText(1, job_id));
  std::vector<CheckResult> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) break;
    CheckResult r;
    r.check = q.ColumnText(0);
    r.kind = q.ColumnText(1);
    ASSIGN_OR_RETURN(r.severity, ParseCheckSeverity(q.ColumnText(2)));
    r.dataset = q.ColumnText(3);
    r.partition = q.ColumnText(4);
    r.passed = q.ColumnInt(5) != 0;
    r.summary = q.ColumnInt(6) != 0;
    r.partitions_checked = q.ColumnInt(7);
    r.partitions_failed = q.ColumnInt(8);
    r.observed = q.ColumnText(9);
    r.allowed = q.ColumnText(10);
    r.message = q.ColumnText(11);
    ASSIGN_OR_RETURN(r.samples, DecodeFields(q.ColumnText(12)));
    out.push_back(std::move(r));
  }
  return out;
}

absl::Status SqliteStateStore::ReplaceConsumerConfirmations(
    const std::string& job_id, const std::vector<ConsumerFinding>& results) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Transaction txn, Transaction::Begin(db_.get()));
  RETURN_IF_ERROR(StateOf(job_id).status());
  {
    ASSIGN_OR_RETURN(
        Statement del,
        db_->PrepareCached(
            "DELETE FROM consumer_confirmations WHERE job_id = ?1"));
    RETURN_IF_ERROR(del.BindText(1, job_id));
    RETURN_IF_ERROR(del.Run());
  }
  ASSIGN_OR_RETURN(
      Statement q,
      db_->PrepareCached("INSERT INTO consumer_confirmations (job_id, ordinal, "
                         "dataset, consumer, healthy, message, latency_us, at) "
                         "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"));
  int64_t ordinal = 0;
  for (const ConsumerFinding& c : results) {
    RETURN_IF_ERROR(q.Reset());
    RETURN_IF_ERROR(q.BindText(1, job_id));
    RETURN_IF_ERROR(q.BindInt(2, ordinal++));
    RETURN_IF_ERROR(q.BindText(3, c.dataset));
    RETURN_IF_ERROR(q.BindText(4, c.consumer));
    RETURN_IF_ERROR(q.BindInt(5, c.healthy ? 1 : 0));
    RETURN_IF_ERROR(q.BindText(6, c.message));
    RETURN_IF_ERROR(q.BindInt(7, absl::ToInt64Microseconds(c.latency)));
    RETURN_IF_ERROR(BindTime(q, 8, c.at));
    RETURN_IF_ERROR(q.Run());
  }
  return txn.Commit();
}

absl::StatusOr<std::vector<ConsumerFinding>>
SqliteStateStore::ListConsumerConfirmations(const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Transaction txn,
                   Transaction::Begin(db_.get(), Transaction::Mode::kDeferred));
  RETURN_IF_ERROR(StateOf(job_id).status());
  ASSIGN_OR_RETURN(std::vector<ConsumerFinding> out,
                   LoadConsumerConfirmations(job_id));
  RETURN_IF_ERROR(txn.Commit());
  return out;
}

absl::StatusOr<std::vector<ConsumerFinding>>
SqliteStateStore::LoadConsumerConfirmations(const std::string& job_id) {
  ASSIGN_OR_RETURN(
      Statement q,
      db_->PrepareCached(
          "SELECT dataset, consumer, healthy, message, latency_us, at "
          "FROM consumer_confirmations WHERE job_id = ?1 "
          "ORDER BY ordinal"));
  RETURN_IF_ERROR(q.BindText(1, job_id));
  std::vector<ConsumerFinding> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) break;
    ConsumerFinding c;
    c.dataset = q.ColumnText(0);
    c.consumer = q.ColumnText(1);
    c.healthy = q.ColumnInt(2) != 0;
    c.message = q.ColumnText(3);
    c.latency = absl::Microseconds(q.ColumnInt(4));
    c.at = ColumnTime(q, 5);
    out.push_back(std::move(c));
  }
  return out;
}

absl::StatusOr<std::vector<ConsumerStanding>>
SqliteStateStore::ListConsumerStandings() {
  absl::MutexLock lock(&mu_);
  // One row per (dataset, consumer) ever confirmed, then one per job that
  // holds it unhealthy. Job ids sort by creation as their numbers do.
  ASSIGN_OR_RETURN(
      Statement q,
      db_->PrepareCached(
          "SELECT c.dataset, c.consumer, NULL, NULL FROM "
          "consumer_confirmations c GROUP BY c.dataset, c.consumer "
          "UNION ALL "
          "SELECT c.dataset, c.consumer, c.job_id, "
          "CAST(substr(c.job_id, 4) AS INTEGER) FROM consumer_confirmations c "
          "JOIN jobs j ON j.id = c.job_id WHERE c.healthy = 0 AND j.state = ?1 "
          "GROUP BY c.dataset, c.consumer, c.job_id "
          "ORDER BY 1, 2, 4"));
  RETURN_IF_ERROR(q.BindText(1, JobStateText(JobState::kDownstreamUnhealthy)));
  std::vector<ConsumerStanding> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) break;
    if (q.ColumnIsNull(2)) {
      ConsumerStanding s;
      s.dataset = q.ColumnText(0);
      s.consumer = q.ColumnText(1);
      out.push_back(std::move(s));
    } else if (!out.empty()) {
      out.back().unhealthy_jobs.push_back(q.ColumnText(2));
    }
  }
  return out;
}

absl::StatusOr<std::vector<AuditEvent>> SqliteStateStore::ListAuditLog(
    const AuditQuery& query) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(
      Statement q,
      db_->PrepareCached(
          "SELECT seq, job_id, from_state, to_state, message, at "
          "FROM audit_events WHERE seq > ?1 AND (?2 = '' OR job_id "
          "= ?2) AND (?3 IS NULL OR at >= ?3) ORDER BY seq LIMIT ?4"));
  RETURN_IF_ERROR(q.BindInt(1, query.after_seq));
  RETURN_IF_ERROR(q.BindText(2, query.job_id));
  RETURN_IF_ERROR(BindTime(q, 3, query.since));
  RETURN_IF_ERROR(q.BindInt(4, query.limit > 0 ? query.limit : 1));
  return ReadAuditEvents(q);
}

absl::StatusOr<std::map<std::string, PartitionDiff>>
SqliteStateStore::PartitionDiffs(const std::string& dataset,
                                 const std::string& partition) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(
      Statement q,
      db_->PrepareCached(
          "SELECT p.job_id, p.rows_before, p.rows_after, p.added, "
          "p.removed, p.changed, p.unchanged, p.measures, p.error, "
          "d.measure_columns FROM job_diff_partitions p JOIN "
          "job_diff_datasets d ON d.job_id = p.job_id AND d.dataset "
          "= p.dataset WHERE p.dataset = ?1 AND p.\"partition\" = "
          "?2"));
  RETURN_IF_ERROR(q.BindText(1, dataset));
  RETURN_IF_ERROR(q.BindText(2, partition));
  std::map<std::string, PartitionDiff> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) break;
    PartitionDiff p;
    p.dataset = dataset;
    p.partition = partition;
    p.rows_before = q.ColumnInt(1);
    p.rows_after = q.ColumnInt(2);
    p.added = q.ColumnInt(3);
    p.removed = q.ColumnInt(4);
    p.changed = q.ColumnInt(5);
    p.unchanged = q.ColumnInt(6);
    ASSIGN_OR_RETURN(std::vector<std::string> columns,
                     DecodeFields(q.ColumnText(9)));
    ASSIGN_OR_RETURN(p.measures, DecodeMeasures(q.ColumnText(7), columns));
    p.error = q.ColumnText(8);
    out.emplace(q.ColumnText(0), std::move(p));
  }
  return out;
}

}  // namespace backfill
