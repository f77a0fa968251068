// Engine: the warehouse where datasets live and transforms run. The core
// drives it; it never sees the engine's own types (sqlite3*, PGconn*).
//
// A job's life on an engine: PrepareJob (staging tables, pinned snapshots of
// whole-table inputs), StagePartition per partition (from many threads),
// ValidateStaged, Publish (every dataset of the job in one transaction),
// DropJob; later maybe Rollback, which restores what Publish replaced.
// Every step is idempotent so that a restarted daemon can repeat
// it. Implementations are thread-safe.
//
// Identifiers come only from the Catalog's specs and are always quoted;
// partition values and bounds are always bound parameters.

#ifndef BACKFILL_CORE_ENGINE_H_
#define BACKFILL_CORE_ENGINE_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/catalog.h"
#include "core/diff.h"
#include "core/job.h"

namespace backfill {

// The datasets a job recomputes and the partitions of each, plus the
// whole-table (`mapping: all`) inputs that the job pins.
struct JobLayout {
  struct Item {
    const DatasetSpec* dataset = nullptr;
    std::vector<std::string> partitions;
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

struct StageResult {
  int64_t rows_written = 0;
  std::string output_fingerprint;
  std::vector<InputFingerprint> inputs;  // one per InputRef, same order
};

struct ValidationReport {
  int64_t rows = 0;  // rows staged for the dataset
  // The staged rows by the partition they belong to ("" for an
  // unpartitioned dataset); rows of no partition are not counted here.
  std::map<std::string, int64_t> rows_by_partition;
  std::vector<std::string> failures;  // empty: passed
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

  // Rows per partition of a dataset's published table ("" for an
  // unpartitioned one). A table that does not exist yet has no rows. For
  // time grains column values are mapped to partitions (see partition.h).
  virtual absl::StatusOr<std::map<std::string, int64_t>> CountRowsByPartition(
      const DatasetSpec& dataset) = 0;

  // Creates the job's staging tables and snapshots its pinned inputs if
  // they do not exist yet. Must be called (again after a restart) before
  // the job's other calls.
  virtual absl::Status PrepareJob(const JobLayout& layout) = 0;

  // Recomputes one partition into staging, replacing what a previous
  // attempt staged for it. Inputs that the job also recomputes are read
  // from its staging (published rows outside the job's partitions
  // otherwise); pinned inputs are read from their snapshot. The transform
  // gets :partition_start, :partition_end and :partition bound. A row
  // outside the partition or a missing contract column fails the call with
  // FAILED_PRECONDITION and stages nothing.
  virtual absl::StatusOr<StageResult> StagePartition(
      const std::string& job_id, const DatasetSpec& dataset,
      const std::string& partition, const std::vector<InputRef>& inputs) = 0;

  // Checks the staged rows of one dataset: primary key unique and not null.
  virtual absl::StatusOr<ValidationReport> ValidateStaged(
      const std::string& job_id, const DatasetSpec& dataset) = 0;

  // What publishing the job's staged rows of one partition would change in
  // the dataset's published table (core/diff.h says how rows compare):
  // rows before and after, added / removed / changed / unchanged, totals of
  // the measure columns and up to `sample_limit` differing rows. A table
  // not published yet has no rows. Reads only; needs no PrepareJob.
  // FAILED_PRECONDITION when nothing is staged for the dataset.
  virtual absl::StatusOr<PartitionDiff> DiffPartition(
      const std::string& job_id, const DatasetSpec& dataset,
      const std::string& partition, int sample_limit) = 0;

  // True once Publish of this job has committed (by the claiming store).
  virtual absl::StatusOr<bool> IsPublished(const std::string& job_id) = 0;

  // In ONE transaction, for every item: creates the table from its contract
  // if missing, keeps the rows being replaced for rollback, deletes the
  // rows of the job's partitions and inserts the staged ones; records the
  // job as published. All or nothing. A second call after success is a
  // no-op.
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

  // Makes the calls in progress fail soon (for a shutdown that cannot wait
  // for a long transform). May be called from any thread.
  virtual void Interrupt() {}
};

}  // namespace backfill

#endif  // BACKFILL_CORE_ENGINE_H_
