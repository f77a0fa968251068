// Staging, written once for every SQL engine: PrepareJob makes a job's
// artifacts (Dialect::Stage, Parts, Keys, Pin), StagePartition runs a
// transform for one partition and replaces the partition's staged rows
// with its output, ReleasePartitions lets partitions of a job go.
//
// StagePartition runs in two short transactions rather than one long
// write:
//   1. a read transaction (TxnMode::kSnapshot) runs the transform into a
//      temporary table of the session (Dialect::Scratch("_bf_out"), typed
//      like the contract), checks that every row falls inside the
//      partition, keeps only the job's entity keys' rows (the others as
//      published), and fingerprints the output and the inputs (an input
//      read from its published table whose change signal, read in this
//      snapshot, equals the one its cached fingerprint was read under is
//      not read again: change_signal.h);
//   2. a write transaction deletes the partition's staged rows, copies
//      the temporary table into staging and caches the inputs' new
//      fingerprints with their signal.
// A failed check stages nothing: the write transaction never starts.
// Short partitions of one dataset may share step 2 (a staging group,
// sql_staging_group.h): step 1 then also appends the output to the
// session's group table (kGroupTable), and one write transaction replaces
// the staged rows of all of them. The
// transform reads its inputs through temporary views that shadow the table
// names it uses (its text is never rewritten): a dataset the job
// recomputes reads its staged rows UNION ALL its published rows outside
// the job's partitions, a pinned input reads its snapshot. The call times
// its phases (StageTimings): `transform` from the leased connection to the
// temporary table complete, `fingerprint` the hashing, `stage_write` the
// second transaction.
//
// What differs between engines is a StagingHooks': how the session's
// objects are made and kept, and how a transform is compiled and vetted
// (SQLite: a statement sandbox; PostgreSQL: its plan), how two stagings of
// one partition are kept apart, and the warehouse's identity.
//
// Thread-safety: free functions over a connection their caller holds; the
// hooks synchronize what they share between calls.

#ifndef BACKFILL_STORAGE_SQL_STAGING_H_
#define BACKFILL_STORAGE_SQL_STAGING_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/model/catalog.h"
#include "core/ports/engine.h"
#include "storage/sql/change_signal.h"
#include "storage/sql/connection.h"
#include "storage/sql/dialect.h"
#include "storage/sql/job_registry.h"

namespace backfill::sql {

// What a transform runs over: the job, the dataset and its inputs, and
// the statements that make the session's objects (the job's views, then
// the output table).
struct TransformSetup {
  const JobRegistry::Job* job = nullptr;
  const DatasetSpec* dataset = nullptr;
  const std::vector<InputRef>* inputs = nullptr;
  std::vector<std::string> statements;
  // The names of the tables the views read (the job's staging, partition
  // lists, snapshots and the published tables they overlay).
  std::set<std::string> reads;
  // What errors of the setup start with ("Stage orders/2025-03-01 of bf-3").
  std::string where;
};

// A transform as the connection runs it: its text (without a trailing
// semicolon, to be wrapped as a subquery) and the names of its parameters
// in the order they are bound (":partition_start", ...).
struct CompiledTransform {
  std::string text;
  std::vector<std::string> parameters;
};

class StagingHooks {
 public:
  virtual ~StagingHooks() = default;

  // The warehouse is still the one opened (FAILED_PRECONDITION otherwise):
  // before staging starts and just before its write commits.
  virtual absl::Status CheckWarehouse() { return absl::OkStatus(); }

  // In PrepareJob's transaction, once the job's staging table of `dataset`
  // exists.
  virtual absl::Status StageTableReady(Connection* conn, const Relation& stage,
                                       const DatasetSpec& dataset) {
    return absl::OkStatus();
  }

  // Before the read transaction: makes the session's objects
  // (`setup.statements`, or keeps those an earlier call made from the same
  // statements) and compiles the transform over them, refusing what can
  // be refused before it runs ("transform of <dataset> ..." errors,
  // TransformRefused).
  virtual absl::StatusOr<CompiledTransform> OpenTransform(
      Connection* conn, const TransformSetup& setup) = 0;

  // In the read transaction, before the transform runs with `params`:
  // what can be vetted only there. Returns the transform's output columns.
  virtual absl::StatusOr<std::vector<std::string>> VetTransform(
      Connection* conn, const TransformSetup& setup,
      const CompiledTransform& transform, const Params& params) = 0;

  // In the write transaction, before the staged rows of `partition` are
  // replaced: keeps a concurrent staging of the same partition out until
  // commit, where the transaction itself does not.
  virtual absl::Status LockPartition(Connection* conn,
                                     const std::string& job_id,
                                     const DatasetSpec& dataset,
                                     const std::string& partition) {
    return absl::OkStatus();
  }

  // Before a staging group's first transform: the session's group table
  // (kGroupTable) made by `create` ("CREATE TEMP TABLE ..."), empty. By
  // default it is dropped and made again.
  virtual absl::Status PrepareGroupTable(Connection* conn,
                                         const std::string& create);

  // After a staging succeeded, which wrote `rows_staged` rows: leaves the
  // session as the next call should find it.
  virtual absl::Status CloseTransform(Connection* conn,
                                      int64_t rows_staged) = 0;
};

// INVALID_ARGUMENT unless `layout` can be prepared: a job id, datasets the
// engine may write (CheckWritable), valid keys and partitions, pins.
absl::Status CheckLayout(const Dialect& dialect, const JobLayout& layout);

// Makes the job's artifacts in one write transaction: for each item its
// staging table (kept), its partition list and its keys (rebuilt), and a
// snapshot of each pinned input that has none yet (kept across restarts).
absl::Status PrepareJob(Connection* conn, StagingHooks& hooks,
                        const JobLayout& layout);

// The session's temporary table a group of transformed partitions waits
// in for its write (TransformPartition into_group, WriteStaged from_group).
// It shadows no table: a dataset's table never starts with "_bf_".
inline constexpr char kGroupTable[] = "_bf_group";

// What the write of one transformed partition needs.
struct TransformedPartition {
  std::string partition;
  std::string condition;  // its membership condition, over `values`
  Params values;
  std::vector<SignalledFingerprint> to_cache;
  std::map<std::string, InputFingerprint> new_pins;
  int64_t rows = 0;
};

// Step 1 of StagePartition (the read transaction): the partition's rows in
// the session's output table, checked and fingerprinted, and with
// `into_group` also appended to the group table (kGroupTable, made by
// PrepareGroupTable) in the same transaction. The result's stage_write is
// zero; `transformed` gets what WriteStaged needs.
absl::StatusOr<StageResult> TransformPartition(
    Connection* conn, StagingHooks& hooks, const JobRegistry::Job& job,
    const DatasetSpec& dataset, const std::string& partition,
    const std::vector<InputRef>& inputs,
    std::set<const DatasetSpec*>* unsignalled, bool into_group,
    TransformedPartition* transformed);

// Step 2 (the write transaction): deletes the staged rows of every
// partition of `parts` and copies the output table (`from_group`: the
// group table, whose row count must be theirs, else ABORTED, and which is
// emptied in the same transaction) into staging; caches their inputs'
// fingerprints; keeps their pinned inputs' fingerprints after the commit.
absl::Status WriteStaged(Connection* conn, StagingHooks& hooks,
                         const JobRegistry::Job& job,
                         const DatasetSpec& dataset, bool from_group,
                         const std::vector<TransformedPartition>& parts);

// The session's group table, empty and typed like `dataset`
// (StagingHooks::PrepareGroupTable).
absl::Status PrepareGroupTable(Connection* conn, StagingHooks& hooks,
                               const DatasetSpec& dataset);

// Stages `partition` of `dataset` for `job` (see above). The inputs read
// from their published tables whose change signal was not known
// (change_signal.h) are added to `unsignalled`, for the caller to install
// their triggers.
absl::StatusOr<StageResult> StagePartition(
    Connection* conn, StagingHooks& hooks, const JobRegistry::Job& job,
    const DatasetSpec& dataset, const std::string& partition,
    const std::vector<InputRef>& inputs,
    std::set<const DatasetSpec*>* unsignalled);

// Deletes the staged rows of `partitions` (valid) and removes them from
// the job's partition list, in one write transaction.
absl::Status ReleasePartitions(Connection* conn, StagingHooks& hooks,
                               const std::string& job_id,
                               const DatasetSpec& dataset,
                               const std::vector<std::string>& partitions);

// OK when a transform's output columns `outputs` include every contract
// column of its dataset (in any case); FAILED_PRECONDITION naming the
// first missing one otherwise.
absl::Status CheckTransformOutputs(const DatasetSpec& dataset,
                                   const std::vector<std::string>& outputs);

}  // namespace backfill::sql

#endif  // BACKFILL_STORAGE_SQL_STAGING_H_
