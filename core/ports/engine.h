// Engine: the warehouse where datasets live and transforms run. The core
// drives it; it never sees the engine's own types (sqlite3*, PGconn*).
//
// A job's life on an engine: PrepareJob (staging tables, pinned snapshots of
// whole-table inputs), StagePartition per partition (from many threads;
// short ones maybe as a StagingGroup with one write), ValidateStaged, Publish
// (every dataset of the job in one transaction), DropJob; later maybe Rollback,
// which restores what Publish replaced. Every step is idempotent so that a
// restarted daemon can repeat it. Implementations are thread-safe.
//
// Identifiers come only from the Catalog's specs and are always quoted;
// partition values and bounds are always bound parameters.

#ifndef BACKFILL_CORE_PORTS_ENGINE_H_
#define BACKFILL_CORE_PORTS_ENGINE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "core/model/catalog.h"
#include "core/model/diff.h"
#include "core/model/job.h"
#include "core/ports/lease_store.h"

namespace backfill {

// The datasets a job recomputes and the partitions of each, plus the
// whole-table (`mapping: all`) inputs that the job pins.
struct JobLayout {
  struct Item {
    const DatasetSpec* dataset = nullptr;
    std::vector<std::string> partitions;
    // Entity keys (the dataset declares `entity_key`): in these partitions
    // the job replaces only the rows whose entity key is one of these
    // (sorted, unique); empty: every row. See StagePartition and Publish.
    std::vector<std::string> keys = {};
  };
  std::string job_id;
  std::vector<Item> items;                 // topological order
  std::vector<const DatasetSpec*> pinned;  // snapshot once per job
};

// One input a partition task reads.
struct InputRef {
  const DatasetSpec* dataset = nullptr;
  std::optional<std::string> partition;  // nullopt: the whole table
};

// Where one StagePartition call spent its time, by phase, as the engine
// measured it. Engines have no injected Clock: they time their own work
// with a Stopwatch (core/base/stopwatch.h), on the monotonic clock. The phases
// do not overlap, and add up to a little less than the call: waiting for
// a connection, ending the read transaction and clearing the session's
// temporary objects count in none of them.
struct StageTimings {
  // Computing the partition's rows into the engine's output table (a
  // temporary table of the call's session): creating the job's view of
  // the inputs, compiling the transform and running its SQL, the check
  // that every row falls inside the partition and, for an item with entity
  // keys, the merge of the other keys' published rows. The partition check
  // stays in this phase: it is one aggregate over the rows the transform
  // has just written (never over the inputs), and a row outside fails the
  // call, so it is part of producing the partition.
  absl::Duration transform = absl::ZeroDuration();
  // Hashing rows (core/model/fingerprint.h): the output fingerprint, over every
  // output row, and the fingerprint of every input, over every row the
  // InputRef names. An engine that keeps a pinned input's fingerprint for
  // the job (SqliteEngine does) charges its rows to the first partition
  // that reads it and a lookup to the others; one that keeps inputs'
  // fingerprints against a change signal (the SQL engines) charges a
  // lookup for an input not written since it was hashed.
  absl::Duration fingerprint = absl::ZeroDuration();
  // The write to staging: the write transaction that replaces the
  // partition's staged rows with the output table, waiting for the
  // warehouse's write lock included.
  absl::Duration stage_write = absl::ZeroDuration();
};

struct StageResult {
  int64_t rows_written = 0;
  std::string output_fingerprint;
  std::vector<InputFingerprint> inputs;  // one per InputRef, same order
  StageTimings timings;  // zero when the engine does not measure (a fake)
};

struct ValidationReport {
  int64_t rows = 0;  // rows staged for the dataset
  // The staged rows by the partition they belong to ("" for an
  // unpartitioned dataset); rows of no partition are not counted here.
  std::map<std::string, int64_t> rows_by_partition;
  std::vector<std::string> failures;  // empty: passed
};

// The engine's per-partition statistics of a dataset's published table:
// what the planner's full-reload figure, the partitions a full reload
// covers and whole-table inputs are costed from, without counting the
// table on every plan. How current they are is the engine's to say
// (SqliteEngine documents its change signal and staleness bound).
struct PartitionStats {
  // Rows per partition ("" for an unpartitioned dataset); partitions
  // without rows are absent. A table that does not exist has no rows.
  std::map<std::string, int64_t> rows;
  // Every row of the table, rows that belong to no partition included.
  int64_t total_rows = 0;
  // When the table was last counted in full (InfinitePast: unknown).
  absl::Time recounted_at = absl::InfinitePast();
  // How this call got them: "recount" (the table was counted in full),
  // "appended" (the stored counts plus the rows appended since), "current"
  // (no change signalled since the stored counts) or "exact" (an engine
  // that always counts).
  std::string refresh;
};

// A rollback the warehouse has committed: written in the rollback's
// transaction, so that a crash before the state store records it is
// recovered (see Engine::Rollback).
struct RollbackMarker {
  std::string store_id;  // the state store whose job was rolled back
  std::string requested_by;
  std::string reason;
  bool forced = false;
  // Later jobs rolled back with it (--force), newest first.
  std::vector<std::string> with_jobs;
};

// ---- What checks read (core/checks/) --------------------------------------
// The engine counts and sums; the core compares with the thresholds.

// A count and a few of the rows counted, each shown as text:
// "(col=value, ...)" with values as SQL literals ('eu', 12.5, NULL).
struct CountWithSamples {
  int64_t count = 0;
  std::vector<std::string> samples;
};

// The value a query returned (Engine::QueryValue): the first column of its
// first row.
struct SqlValue {
  enum class Type { kNoRow, kNull, kInteger, kReal, kText };
  Type type = Type::kNoRow;
  int64_t integer = 0;  // kInteger
  double real = 0;      // kReal
  std::string text;     // kText (a BLOB reads as its bytes)
};

// What a profile of rows should measure besides the row count.
struct ProfileRequest {
  std::vector<std::string> measures;      // contract columns to sum
  std::vector<std::string> null_columns;  // contract columns to count NULLs of
  struct Reference {
    std::string column;                    // a contract column of the dataset
    const DatasetSpec* dataset = nullptr;  // the referenced dataset
    std::string key;                       // its column
  };
  // Rows whose non-NULL `column` value has no equal `key` value in the
  // referenced dataset: its pinned snapshot when the job pins it, else its
  // published table (a table that does not exist holds no keys).
  std::vector<Reference> references;
  // Count values whose storage type does not fit the column's declared type
  // (staged rows only).
  bool types = false;
  int samples = 3;  // rows shown per count
};

// OK when every column `request` names is a contract column of `dataset`
// and every reference names a dataset; INVALID_ARGUMENT naming the first
// that does not (for Engine::ProfileStaged).
absl::Status CheckProfileRequest(const DatasetSpec& dataset,
                                 const ProfileRequest& request);

// A transform that reads or calls what it may not (`why`: "reads table
// x", "calls f, which is not on the allow-list of functions"): what it may
// read, by its upstream `inputs`, and whose functions (`engine`: "SQLite")
// it may call (FAILED_PRECONDITION, for Engine::StagePartition).
absl::Status TransformRefused(const DatasetSpec& dataset, std::string_view why,
                              const std::vector<InputRef>& inputs,
                              std::string_view engine);

// The profile of one partition's rows. (std::map, not absl::btree_map, in
// these structs that cross between modules: absl's B-tree has another
// layout in a build with the sanitizers, whose tests are built without.)
// A job's profile holds one per partition, most of them with nothing but
// their rows: the rest is allocated only when a mutable_ accessor is
// called, so that a partition with no sums, NULLs, orphans or type
// mismatches costs 16 bytes.
class PartitionProfile {
 public:
  int64_t rows = 0;

  PartitionProfile() = default;
  PartitionProfile(const PartitionProfile& other)
      : rows(other.rows),
        details_(other.details_ != nullptr
                     ? std::make_unique<Details>(*other.details_)
                     : nullptr) {}
  PartitionProfile& operator=(const PartitionProfile& other) {
    if (this != &other) {
      rows = other.rows;
      details_ = other.details_ != nullptr
                     ? std::make_unique<Details>(*other.details_)
                     : nullptr;
    }
    return *this;
  }
  PartitionProfile(PartitionProfile&&) noexcept = default;
  PartitionProfile& operator=(PartitionProfile&&) noexcept = default;

  // By measure: the sum (0 without rows). A measure the table does not have
  // is absent.
  const std::map<std::string, double>& sums() const { return details().sums; }
  // By column.
  const std::map<std::string, CountWithSamples>& nulls() const {
    return details().nulls;
  }
  // One per reference, same order.
  const std::vector<CountWithSamples>& orphans() const {
    return details().orphans;
  }
  // By column, only columns with values of another type.
  const std::map<std::string, CountWithSamples>& type_mismatches() const {
    return details().type_mismatches;
  }
  std::map<std::string, double>& mutable_sums() {
    return mutable_details().sums;
  }
  std::map<std::string, CountWithSamples>& mutable_nulls() {
    return mutable_details().nulls;
  }
  std::vector<CountWithSamples>& mutable_orphans() {
    return mutable_details().orphans;
  }
  std::map<std::string, CountWithSamples>& mutable_type_mismatches() {
    return mutable_details().type_mismatches;
  }

 private:
  struct Details {
    std::map<std::string, double> sums;
    std::map<std::string, CountWithSamples> nulls;
    std::vector<CountWithSamples> orphans;
    std::map<std::string, CountWithSamples> type_mismatches;
  };
  const Details& details() const {
    static const Details* const kNone = new Details();
    return details_ != nullptr ? *details_ : *kNone;
  }
  Details& mutable_details() {
    if (details_ == nullptr) details_ = std::make_unique<Details>();
    return *details_;
  }

  std::unique_ptr<Details> details_;
};

// Profiles by partition ("" for an unpartitioned dataset); a partition
// without rows is absent.
using Profile = std::map<std::string, PartitionProfile>;

// How a query would run, without running it.
struct QueryShape {
  std::vector<std::string> columns;     // output column names
  bool read_only = true;                // writes nothing
  std::vector<std::string> parameters;  // ":partition", ...
};

// What a warehouse records about the state stores that publish into it.
struct WarehouseInfo {
  // The state store that owns the warehouse ("" while none has claimed it).
  std::string owner_store_id;
  // Every publication marker: job id -> id of the state store that wrote it
  // ("" for a marker written before markers named their store).
  std::map<std::string, std::string> publications;
  // Every rollback marker, by the id of the job rolled back.
  std::map<std::string, RollbackMarker> rollbacks;
};

// What Rollback restores: the job's datasets and partitions (items; pinned
// is ignored) and who asked.
struct RollbackSpec {
  JobLayout layout;
  RollbackMarker marker;  // store_id is the claiming store's (ignored here)
};

// The rows a rollback put back into one (dataset, partition) ("" for an
// unpartitioned dataset).
struct RestoredPartition {
  std::string dataset;
  std::string partition;
  int64_t rows = 0;
  std::string fingerprint;  // as StageResult::output_fingerprint
};

struct RollbackResult {
  std::vector<RestoredPartition> partitions;  // layout order
  int64_t rows = 0;
  // True when the rollback had committed before (the marker existed): the
  // partitions describe the rows the tables hold now.
  bool already = false;
};

// A rollback copy: the rows one job's publish replaced in one dataset.
struct RollbackCopy {
  std::string job_id;
  std::string dataset;
};

// Partitions of one dataset of a job staged as a group
// (Engine::OpenStagingGroup): Stage transforms each partition, with the
// checks and fingerprints of Engine::StagePartition, and keeps its rows;
// Commit writes the rows of every partition staged since the last Commit
// in one write transaction. Until then those partitions are not staged: a
// crash, a failed Commit or the group's destruction first leaves their
// staged rows as they were. The partitions must not read each other's
// staged rows (a batch of ready partitions never does).
//
// Holds one of the engine's connections from a Stage to the next Commit,
// so its user must call no other method of the engine in between. Not
// thread-safe: one thread at a time.
class StagingGroup {
 public:
  virtual ~StagingGroup() = default;

  // As Engine::StagePartition, but the rows are written by Commit: the
  // result's timings.stage_write is zero.
  virtual absl::StatusOr<StageResult> Stage(
      const std::string& partition, const std::vector<InputRef>& inputs) = 0;

  // Writes what Stage kept since the last Commit (nothing: OK at once) and
  // answers the write's time, waiting for the write lock included. On an
  // error none of those partitions is staged.
  virtual absl::StatusOr<absl::Duration> Commit() = 0;
};

class Engine {
 public:
  virtual ~Engine() = default;

  // The ownership record and publication markers.
  virtual absl::StatusOr<WarehouseInfo> Inspect() = 0;

  // Makes `store_id` the owner for this process: Publish writes its markers
  // with it and IsPublished looks only at its markers. An unclaimed
  // warehouse is claimed (and its markers that name no store are stamped
  // with `store_id`); one owned by another store is FAILED_PRECONDITION
  // unless `take_over` (then markers keep the store that wrote them).
  virtual absl::Status Claim(const std::string& store_id, bool take_over) = 0;

  // Fencing of a group's replicas (core/ports/lease_store.h). SetFence:
  // later publishes and rollbacks of a job run under the lease token
  // `fence` gives for it, and the warehouse refuses them (FAILED_
  // PRECONDITION, reason LEASE_LOST) when its own fence of the job is
  // another; not owned, null for none. AdvanceFence: raises the
  // warehouse's fence of `job_id` to `token` (a replica that claimed the
  // job, before it writes anything for it); LEASE_LOST when it is higher
  // already. An engine without fences ignores both (a single process).
  virtual void SetFence(const LeaseFence* fence) { (void)fence; }
  virtual absl::Status AdvanceFence(const std::string& job_id, int64_t token) {
    (void)job_id, (void)token;
    return absl::OkStatus();
  }

  // Rows per partition of a dataset's published table ("" for an
  // unpartitioned one). A table that does not exist yet has no rows. For
  // time grains column values are mapped to partitions (see partition.h).
  virtual absl::StatusOr<std::map<std::string, int64_t>> CountRowsByPartition(
      const DatasetSpec& dataset) = 0;

  // Rows of each of `partitions` (valid values of the dataset's grain; "" for
  // an unpartitioned dataset) in the dataset's published table, counted
  // exactly now, aligned with `partitions`: answer i is the rows of
  // partitions[i] (0 when it has no rows or the table does not exist; a
  // partition asked for twice is answered twice). Costs what the rows of
  // those partitions cost to read, not what the table holds, where the
  // engine can select a partition's rows by index. The default counts the
  // whole table with CountRowsByPartition.
  virtual absl::StatusOr<std::vector<int64_t>> CountRowsInPartitions(
      const DatasetSpec& dataset, const std::vector<std::string>& partitions);

  // The dataset's per-partition statistics (see PartitionStats), refreshed
  // as the engine's change signal requires. The default counts the whole
  // table with CountRowsByPartition on every call (refresh "exact").
  virtual absl::StatusOr<PartitionStats> PartitionStatistics(
      const DatasetSpec& dataset);

  // The current content fingerprint of each of `partitions` of `dataset`'s
  // published table, computed exactly as StagePartition computes an input's
  // fingerprint (the same rows, the same hash, the same "hex:rows" text), so
  // that a partition nobody touched since a task read it compares equal to
  // what the task recorded. A partition "" is the whole table (what a task
  // records for an unpartitioned or `mapping: all` input), any other value
  // must be valid for the dataset's grain. Every partition asked for is in
  // the result (dataset, partition, fingerprint, rows; a partition without
  // rows, or a table that does not exist, has the fingerprint of no rows).
  // The figures are current: an engine that keeps them (the SQL engines do,
  // against a change signal every write moves, docs/engines.md) recomputes
  // any partition written since, and every partition when it cannot tell.
  virtual absl::StatusOr<std::map<std::string, InputFingerprint>>
  CurrentFingerprints(const DatasetSpec& dataset,
                      const std::vector<std::string>& partitions) = 0;

  // Creates the job's staging tables and snapshots its pinned inputs if
  // they do not exist yet. Must be called (again after a restart) before
  // the job's other calls.
  virtual absl::Status PrepareJob(const JobLayout& layout) = 0;

  // Recomputes one partition into staging, replacing what a previous
  // attempt staged for it. Inputs that the job also recomputes are read
  // from its staging (published rows outside the job's partitions
  // otherwise); pinned inputs are read from their snapshot. The transform
  // gets :partition_start, :partition_end and :partition bound, and a
  // dataset with a lookback upstream also :window_start (the start bound of
  // partition P-N, see upstream_mapping.h WindowStart). A row
  // outside the partition or a missing contract column fails the call with
  // FAILED_PRECONDITION and stages nothing.
  //
  // An item with entity keys stages the partition as publishing would
  // leave it: the transform's rows whose entity key is one of the keys
  // (a transform may read the keys as the JSON array :keys, NULL in a run
  // without keys; its other rows are dropped), plus the published rows of
  // the partition whose entity key is not (copied as they are). So every
  // reader of staging (dependents in the job, validation, profiles, diff,
  // the output fingerprint, which covers the whole partition) sees the
  // partition it would publish.
  //
  // The result says how long each phase took (StageTimings); a call that
  // fails reports none.
  virtual absl::StatusOr<StageResult> StagePartition(
      const std::string& job_id, const DatasetSpec& dataset,
      const std::string& partition, const std::vector<InputRef>& inputs) = 0;

  // A group of `dataset`'s partitions of job `job_id` staged with one write
  // (StagingGroup), or null when the engine stages each partition by
  // itself (the default): the caller then calls StagePartition. Touches
  // nothing until the group's first Stage.
  virtual absl::StatusOr<std::unique_ptr<StagingGroup>> OpenStagingGroup(
      const std::string& job_id, const DatasetSpec& dataset) {
    (void)job_id, (void)dataset;
    return std::unique_ptr<StagingGroup>();
  }

  // Early cutoff (core/plan/early_cutoff.h): the job lets go of these
  // partitions of `dataset`, which it will not publish (recomputed
  // identical to the published version, or skipped). In one transaction
  // their staged rows are deleted and they stop being the job's
  // partitions: from then on the job's reads of them see the published
  // rows, StagePartition refuses them, and validation, profiles, diff and
  // Publish never see them. Idempotent: partitions released before, or
  // left out of the layout of the last PrepareJob, are cleaned again (a
  // restart between a release and its record may leave staged rows); a
  // dataset the job has no staging for is a no-op. Needs PrepareJob; the
  // next PrepareJob of the job must be given a layout without them.
  virtual absl::Status ReleasePartitions(
      const std::string& job_id, const DatasetSpec& dataset,
      const std::vector<std::string>& partitions) = 0;

  // Checks the staged rows of one dataset: primary key unique and not null.
  virtual absl::StatusOr<ValidationReport> ValidateStaged(
      const std::string& job_id, const DatasetSpec& dataset) = 0;

  // What publishing the job's staged rows of one partition would change in
  // the dataset's published table (core/model/diff.h says how rows compare):
  // rows before and after, added / removed / changed / unchanged, totals of
  // the measure columns and up to `sample_limit` differing rows. A table
  // not published yet has no rows. Reads only; needs no PrepareJob.
  // FAILED_PRECONDITION when nothing is staged for the dataset.
  virtual absl::StatusOr<PartitionDiff> DiffPartition(
      const std::string& job_id, const DatasetSpec& dataset,
      const std::string& partition, int sample_limit) = 0;

  // DiffPartition of each of `partitions` of one dataset, in order: answer
  // i is what DiffPartition(job_id, dataset, partitions[i], sample_limit)
  // answers. An engine may compare many partitions per transaction and
  // share their set-up (the default calls DiffPartition for each); a
  // partition's own failure is its answer, and the call fails as a whole
  // only when no partition could be compared (nothing staged, the
  // warehouse unreadable).
  virtual absl::StatusOr<std::vector<absl::StatusOr<PartitionDiff>>>
  DiffPartitions(const std::string& job_id, const DatasetSpec& dataset,
                 absl::Span<const std::string> partitions, int sample_limit);

  // True once Publish of this job has committed (by the claiming store).
  virtual absl::StatusOr<bool> IsPublished(const std::string& job_id) = 0;

  // In ONE transaction, for every item: creates the table from its contract
  // if missing, keeps the rows being replaced for rollback, deletes the
  // rows of the job's partitions and inserts the staged ones; records the
  // job as published. All or nothing. A second call after success is a
  // no-op. For an item with entity keys, the published rows of each
  // partition whose key is not one of the item's must still be exactly the
  // ones staging copied; otherwise (something else wrote them since) the
  // call is FAILED_PRECONDITION and publishes nothing, because the staged
  // partition, and what the job derived and checked from it, is out of
  // date.
  virtual absl::Status Publish(const JobLayout& layout) = 0;

  // Drops the job's staging tables and snapshots (not the rollback copies).
  virtual absl::Status DropStaging(const std::string& job_id) = 0;

  // In ONE transaction: for every item, replaces the rows of the job's
  // partitions with the rows its Publish replaced (kept in the job's
  // rollback copy; a partition that was empty before becomes empty again),
  // proving per partition that it deletes exactly the rows that belong to
  // it and restores exactly the copy's rows of it; drops the rollback
  // copies of the job and of marker.with_jobs; writes a rollback marker
  // (Inspect) naming the claiming store. Rows outside the job's partitions
  // are never touched. All or nothing. FAILED_PRECONDITION, restoring
  // nothing, when the job was never published by the claiming store or a
  // copy is missing (naming the dataset). A second call after success
  // restores nothing and reports the rows the partitions hold (already).
  virtual absl::StatusOr<RollbackResult> Rollback(const RollbackSpec& spec) = 0;

  // Every rollback copy in the warehouse, in job then dataset order.
  virtual absl::StatusOr<std::vector<RollbackCopy>> ListRollbackCopies() = 0;

  // Drops these rollback copies in one transaction; copies already gone
  // are skipped.
  virtual absl::Status DropRollbackCopies(
      const std::vector<RollbackCopy>& copies) = 0;

  // Ids of the jobs that still have staging tables, partition lists or
  // pinned snapshots in the warehouse, so that a restart can sweep what a
  // crash left behind.
  virtual absl::StatusOr<std::vector<std::string>> ListJobsWithStaging() = 0;

  // ---- Checks --------------------------------------------------------------

  // Profiles the rows the job staged for `dataset`, by partition. Staged
  // rows of no partition of the job are not counted. Needs PrepareJob.
  virtual absl::StatusOr<Profile> ProfileStaged(
      const std::string& job_id, const DatasetSpec& dataset,
      const ProfileRequest& request) = 0;

  // Profiles the published rows of the job's partitions of `dataset` (rows
  // and sums only; the other fields of `request` are ignored). A table that
  // does not exist yet has no rows. Needs PrepareJob.
  virtual absl::StatusOr<Profile> ProfilePublished(
      const std::string& job_id, const DatasetSpec& dataset,
      const ProfileRequest& request) = 0;

  // Runs `sql` (one read-only SELECT) once per partition the job stages of
  // `dataset`, with the dataset's table name reading that partition's
  // staged rows and :partition_start, :partition_end and :partition bound
  // as for transforms; other tables are read as published. Returns, per
  // partition, the rows it returned (with up to `samples` of them).
  // FAILED_PRECONDITION when `sql` does not compile or is not read-only.
  virtual absl::StatusOr<std::map<std::string, CountWithSamples>> RunAssertion(
      const std::string& job_id, const DatasetSpec& dataset,
      const std::string& sql, int samples) = 0;

  // Runs `sql` (one read-only SELECT, a consumer's `expect`) on the
  // published tables for one partition of `dataset`, with
  // :partition_start, :partition_end, :partition and, for a time x key
  // dataset, :partition_key bound as for the dataset's transform. Returns
  // the first column of the first row (kNoRow when there is none); nothing
  // is written (read-only, in a transaction rolled back). A table that does
  // not exist is the warehouse's error. FAILED_PRECONDITION when `sql` does
  // not compile or is not read-only; INVALID_ARGUMENT for a partition value
  // of the wrong form.
  virtual absl::StatusOr<SqlValue> QueryValue(const DatasetSpec& dataset,
                                              const std::string& partition,
                                              const std::string& sql) = 0;

  // Prepares `sql` against the warehouse without running it. The table of
  // each dataset in `stand_ins` that does not exist yet (a derived table
  // its first publish creates) is stood in for by an empty table with the
  // dataset's contract columns; so is `own`'s (if not null) whether it
  // exists or not. INVALID_ARGUMENT with the warehouse's message when the
  // statement does not compile (syntax, missing table or column).
  virtual absl::StatusOr<QueryShape> DescribeQuery(
      const std::string& sql, const std::vector<const DatasetSpec*>& stand_ins,
      const DatasetSpec* own) = 0;

  // The columns (name and declared type) of the dataset's published table;
  // nullopt when it does not exist yet.
  virtual absl::StatusOr<std::optional<std::vector<ColumnSpec>>> DescribeTable(
      const DatasetSpec& dataset) = 0;

  // The partitions of `dataset`'s published table (a source or a derived
  // dataset) that hold at least one row for which `predicate` is true,
  // sorted. `predicate` is an SQL boolean expression over the table's
  // columns from a client (core/plan/affected_by.h): it cannot be bound as a
  // value, so the engine runs it where it can change nothing and read
  // nothing but that table — read-only, one expression, no parameters —
  // and stops it when it runs too long or on Interrupt(). Rows of no
  // partition are ignored (a key grain counts only its declared keys); an
  // unpartitioned dataset gives {""} when a row matches. A table that does
  // not exist yet has no rows (an empty result). INVALID_ARGUMENT naming
  // the predicate (with the warehouse's message) when it does not compile,
  // is not one expression, or would do anything but read; INVALID_ARGUMENT
  // when more than `max_partitions` partitions match.
  virtual absl::StatusOr<std::vector<std::string>> PartitionsMatching(
      const DatasetSpec& dataset, const std::string& predicate,
      size_t max_partitions) = 0;

  // Makes the calls in progress fail soon (for a shutdown that cannot wait
  // for a long transform). May be called from any thread.
  virtual void Interrupt() {}

  // Whether the warehouse's storage can still be used, found cheaply (no
  // query, no lock a call holds): OK, or FAILED_PRECONDITION saying what
  // happened to it (a file removed, replaced or truncated under the
  // running daemon) and what to do. An engine with nothing to look at
  // says OK. May be called from any thread.
  virtual absl::Status Probe() { return absl::OkStatus(); }
};

}  // namespace backfill

#endif  // BACKFILL_CORE_PORTS_ENGINE_H_
