// FakeEngine: an Engine held in memory, for tests of the core that should
// not need SQLite. It keeps row counts, not rows:
//   - staging, per job: rows per (dataset, partition). StagePartition stages
//     rows_for(dataset, partition) rows (1 unless set), replacing what an
//     earlier attempt staged, and returns a fingerprint that depends only
//     on the dataset, its transform version, the partition and the row
//     count, plus one InputFingerprint per InputRef (a partition input's
//     fingerprint is the one StagePartition gives the same rows of it, as
//     in SqliteEngine, so a dependent's recorded input can be compared
//     with its input's output);
//   - ReleasePartitions drops the partitions' staged rows and takes them
//     out of the job's prepared partitions (reads of them then see the
//     published rows);
//   - the published tables: rows per (dataset, partition), "" for an
//     unpartitioned dataset;
//   - the ownership record and the publication markers (store id, job id).
//
// It follows the rules of SqliteEngine (storage/sqlite/sqlite_engine.h) where
// the core can tell: PrepareJob validates the layout and partition values,
// creates the job's (empty) staging per dataset and snapshots pinned
// inputs, whose table must exist (a dataset with published rows, or seeded
// with SetPublishedRows); StagePartition of a job not prepared (since the
// last Restart) is FAILED_PRECONDITION; ValidateStaged reports the staged
// rows and rows_by_partition (partitions without rows left out, as a
// grouped count does) plus the failures set for the dataset; Publish
// replaces, in one step, the rows of the job's partitions with the staged
// ones and records a marker with the claimed store id — a no-op once that
// marker exists, refused when the warehouse was claimed by another store
// since, INTERNAL (nothing published) when staged rows lie outside the job's
// partitions; DiffPartition compares row counts only (it has no rows):
// added = after - before when positive, removed = before - after when
// positive, unchanged = the smaller count, no changed rows, zero measure
// totals, no samples; Claim and Inspect as SqliteEngine; ListJobsWithStaging
// reports, like SqliteEngine, only ids of the form "bf-<digits>", sorted.
// tests/storage_engine_contract_test.cc runs the same cases against both.
// No transform runs, so StagePartition never finds rows outside the
// partition or missing columns (make the hook fail the call instead), and
// the timings of its phases are what SetStageTimings says (zero unless
// set).
// Publish keeps the replaced row counts as the job's rollback copy per
// dataset; Rollback restores them as SqliteEngine does (marker, copies
// dropped, a second call restores nothing), with fingerprints
// "fake:<dataset>/<partition>:<rows>" of the restored rows.
// Input rows: a partition the job recomputes is read from its staging,
// another from the published table; a whole-table input the job recomputes
// from its staging plus the published rows outside the job's partitions,
// else from the job's pinned snapshot, else from the published table.
//
// PartitionsMatching evaluates only predicates of the form
// `COLUMN OP LITERAL` (OP one of = == != <> < <= > >=, LITERAL a number or
// a 'quoted' text) over rows a test seeds with AddRows, which are kept apart
// from the row counts above (seeding them creates no table and changes no
// count). A numeric literal compares numerically and never matches a value
// that is not a number; a text literal compares byte-wise. Anything else is
// INVALID_ARGUMENT, as is a column no seeded row of the dataset has; the
// predicate is first checked by CheckPredicate, as SqliteEngine does.
//
// Staging groups (OpenStagingGroup) only after SetStagingGroups(true): a
// group's Stage is StagePartition without the write (counted as
// "GroupStage"), its Commit writes what it kept at once (counted as
// "GroupCommit", its partitions joined by ","; a failing hook writes none).
//
// Fault injection: every call but Interrupt is counted, then consults the
// hook (if set) with the method's name and what it names, outside the
// engine's lock: a non-OK status fails the call before it does anything;
// the hook may block to hold the call back. Interrupt is only counted.
//
// Thread-safety: thread-safe. One mutex guards the state; the hook and
// rows_for run without it, possibly on many threads at once.
//
// Ownership: keeps no DatasetSpec pointer beyond a call (names only).

#ifndef BACKFILL_TESTS_TESTING_FAKE_ENGINE_H_
#define BACKFILL_TESTS_TESTING_FAKE_ENGINE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/ports/engine.h"

namespace backfill::testing {

class FakeEngine : public Engine {
 public:
  struct Call {
    std::string method;   // "StagePartition", "Publish", ...
    std::string job_id;   // "" for a call that names no job
    std::string dataset;  // "" unless the call names one dataset
    // StagePartition; ReleasePartitions: its partitions joined by ","
    std::string partition;
  };
  // Consulted before each call: non-OK fails it.
  using Hook = std::function<absl::Status(const Call& call)>;
  // Rows StagePartition writes for a partition (a negative count is 0).
  using RowsFor = std::function<int64_t(const std::string& dataset,
                                        const std::string& partition)>;

  FakeEngine() = default;
  FakeEngine(const FakeEngine&) = delete;
  FakeEngine& operator=(const FakeEngine&) = delete;

  absl::StatusOr<WarehouseInfo> Inspect() override;
  absl::Status Claim(const std::string& store_id, bool take_over) override;
  absl::StatusOr<std::map<std::string, int64_t>> CountRowsByPartition(
      const DatasetSpec& dataset) override;
  // Exact, from the published row counts (0 for a partition without rows),
  // aligned with `partitions`.
  absl::StatusOr<std::vector<int64_t>> CountRowsInPartitions(
      const DatasetSpec& dataset,
      const std::vector<std::string>& partitions) override;
  // Always current: each partition fingerprinted as StagePartition
  // fingerprints a read of its published rows (count and edits), "" the
  // whole table.
  absl::StatusOr<std::map<std::string, InputFingerprint>> CurrentFingerprints(
      const DatasetSpec& dataset,
      const std::vector<std::string>& partitions) override;
  // Always exact (refresh "exact"): the published row counts.
  absl::StatusOr<PartitionStats> PartitionStatistics(
      const DatasetSpec& dataset) override;
  absl::Status PrepareJob(const JobLayout& layout) override;
  absl::StatusOr<StageResult> StagePartition(
      const std::string& job_id, const DatasetSpec& dataset,
      const std::string& partition,
      const std::vector<InputRef>& inputs) override;
  // Null unless SetStagingGroups(true).
  absl::StatusOr<std::unique_ptr<StagingGroup>> OpenStagingGroup(
      const std::string& job_id, const DatasetSpec& dataset) override;
  absl::Status ReleasePartitions(
      const std::string& job_id, const DatasetSpec& dataset,
      const std::vector<std::string>& partitions) override;
  absl::StatusOr<ValidationReport> ValidateStaged(
      const std::string& job_id, const DatasetSpec& dataset) override;
  absl::StatusOr<PartitionDiff> DiffPartition(const std::string& job_id,
                                              const DatasetSpec& dataset,
                                              const std::string& partition,
                                              int sample_limit) override;
  absl::StatusOr<bool> IsPublished(const std::string& job_id) override;
  absl::Status Publish(const JobLayout& layout) override;
  absl::Status DropStaging(const std::string& job_id) override;
  absl::StatusOr<std::vector<std::string>> ListJobsWithStaging() override;
  absl::StatusOr<RollbackResult> Rollback(const RollbackSpec& spec) override;
  absl::StatusOr<std::vector<RollbackCopy>> ListRollbackCopies() override;
  absl::Status DropRollbackCopies(
      const std::vector<RollbackCopy>& copies) override;
  absl::StatusOr<Profile> ProfileStaged(const std::string& job_id,
                                        const DatasetSpec& dataset,
                                        const ProfileRequest& request) override;
  absl::StatusOr<Profile> ProfilePublished(
      const std::string& job_id, const DatasetSpec& dataset,
      const ProfileRequest& request) override;
  absl::StatusOr<std::map<std::string, CountWithSamples>> RunAssertion(
      const std::string& job_id, const DatasetSpec& dataset,
      const std::string& sql, int samples) override;
  absl::StatusOr<SqlValue> QueryValue(const DatasetSpec& dataset,
                                      const std::string& partition,
                                      const std::string& sql) override;
  absl::StatusOr<QueryShape> DescribeQuery(
      const std::string& sql, const std::vector<const DatasetSpec*>& stand_ins,
      const DatasetSpec* own) override;
  absl::StatusOr<std::optional<std::vector<ColumnSpec>>> DescribeTable(
      const DatasetSpec& dataset) override;
  absl::StatusOr<std::vector<std::string>> PartitionsMatching(
      const DatasetSpec& dataset, const std::string& predicate,
      size_t max_partitions) override;
  void Interrupt() override;

  // ---- Configuration -------------------------------------------------------

  void SetRowsFor(RowsFor rows_for);  // nullptr: 1 row per partition
  void SetHook(Hook hook);            // nullptr: none
  // What every successful StagePartition reports as StageResult::timings.
  void SetStageTimings(const StageTimings& timings);
  // Whether OpenStagingGroup answers groups (default false).
  void SetStagingGroups(bool on);
  // ValidateStaged of `dataset` (in any job) reports `failures`.
  void SetValidationFailures(const std::string& dataset,
                             std::vector<std::string> failures);

  // ---- Checks: the fake holds no rows, so tests say what a profile finds --

  // The value of `measure` in every row of a partition (default 1.0): a
  // staged partition of n rows sums to n * value. Publish records the sums
  // of the measures of the dataset's measure_change checks.
  using MeasureFor = std::function<double(const std::string& dataset,
                                          const std::string& partition,
                                          const std::string& measure)>;
  void SetMeasureFor(MeasureFor measure_for);
  // Edits each staged partition's profile after rows and sums are filled
  // in (NULL counts, orphans, type mismatches; `orphans` is sized already).
  using ProfileEdit = std::function<void(const std::string& dataset,
                                         const std::string& partition,
                                         PartitionProfile* profile)>;
  void SetProfileEdit(ProfileEdit edit);
  // Rows an assertion returns for a partition (default 0).
  using AssertionRows =
      std::function<int64_t(const std::string& dataset, const std::string& sql,
                            const std::string& partition)>;
  void SetAssertionRows(AssertionRows rows);
  // What QueryValue answers for a partition (default: no row).
  using QueryValues = std::function<absl::StatusOr<SqlValue>(
      const std::string& dataset, const std::string& sql,
      const std::string& partition)>;
  void SetQueryValues(QueryValues values);
  // What DescribeQuery answers for `sql`; by default the contract columns
  // of the stand-in whose transform it is (else no columns), read-only, no
  // parameters.
  void SetQueryShape(const std::string& sql, absl::StatusOr<QueryShape> shape);
  // The published table's columns as DescribeTable reports them (default:
  // the contract's, once the table exists).
  void SetPublishedColumns(const std::string& dataset,
                           std::vector<ColumnSpec> columns);

  // ---- The warehouse's contents, as another process left them -------------

  // Sets the published rows of a partition ("" for an unpartitioned
  // dataset); creates the dataset's table.
  void SetPublishedRows(const std::string& dataset,
                        const std::string& partition, int64_t rows);
  // Changes the content of a partition's published rows ("" in an
  // unpartitioned dataset) without changing their count, as an in-place
  // correction would: every fingerprint of a read of them (and of the whole
  // table) changes from now on. A Publish or Rollback that replaces the
  // partition forgets its edits (the new rows are what they are).
  void EditPublishedRows(const std::string& dataset,
                         const std::string& partition);
  // A row as PartitionsMatching sees it: the partition it belongs to
  // (nullopt: none; "" in an unpartitioned dataset) and its values by
  // column.
  struct Row {
    std::optional<std::string> partition;
    std::map<std::string, std::string> values;
  };
  // Appends rows of the dataset's table for PartitionsMatching.
  void AddRows(const std::string& dataset, std::vector<Row> rows);
  // Adds a publication marker ("" store id: a marker that names no store).
  void AddMarker(const std::string& job_id, const std::string& store_id);
  // Sets the owner record ("" : unclaimed).
  void SetOwner(const std::string& store_id);
  // Sets what is staged for a partition of a job (creating the dataset's
  // staging), e.g. to lose or change staged rows after their checkpoint or
  // to put rows outside the job's partitions.
  void SetStagedRows(const std::string& job_id, const std::string& dataset,
                     const std::string& partition, int64_t rows);
  // As a restart of the daemon: forgets the prepared layouts and the
  // claimed store id; staging, tables, markers and the owner stay.
  void Restart();

  // ---- Observation ---------------------------------------------------------

  int64_t calls(const std::string& method) const;
  int64_t total_calls() const;
  // Every call so far, in order (Interrupt included).
  std::vector<Call> call_log() const;
  // Waits until `method` was called at least `n` times; false on timeout.
  bool WaitForCalls(const std::string& method, int64_t n,
                    absl::Duration timeout) const;
  // Staged rows of a partition of a job; nullopt when nothing is staged.
  std::optional<int64_t> StagedRows(const std::string& job_id,
                                    const std::string& dataset,
                                    const std::string& partition) const;
  // The entity keys of the job's item of `dataset` in the last PrepareJob
  // (empty: whole partitions, or not prepared). The fake counts rows of
  // whole partitions only, so keys change nothing else here: SqliteEngine
  // too stages and counts a keyed partition whole.
  std::vector<std::string> PreparedKeys(const std::string& job_id,
                                        const std::string& dataset) const;
  // Published rows of a partition (0 when none).
  int64_t PublishedRows(const std::string& dataset,
                        const std::string& partition) const;
  bool IsPrepared(const std::string& job_id) const;
  // The store id of the last successful Claim since the last Restart.
  std::string claimed_store_id() const;
  int64_t interrupts() const;

 private:
  class Group;

  // StagePartition after its hook: with `write`, the rows replace what is
  // staged for the partition.
  absl::StatusOr<StageResult> Stage(const std::string& job_id,
                                    const DatasetSpec& dataset,
                                    const std::string& partition,
                                    const std::vector<InputRef>& inputs,
                                    bool write) ABSL_LOCKS_EXCLUDED(mu_);
  // Writes `rows` as the staged rows of each partition of `dataset`.
  void WriteStaged(const std::string& job_id, const std::string& dataset,
                   const std::map<std::string, int64_t>& rows)
      ABSL_LOCKS_EXCLUDED(mu_);

  // What a job left in the warehouse; survives Restart.
  struct Staging {
    // Dataset -> partition -> staged rows; a dataset present has staging.
    std::map<std::string, std::map<std::string, int64_t>> staged;
    // Pinned dataset -> rows of its snapshot.
    std::map<std::string, int64_t> pins;
  };
  // What PrepareJob remembers in memory; lost on Restart.
  struct Prepared {
    // Dataset -> the job's partitions of it.
    std::map<std::string, std::set<std::string>> partitions;
  };
  // Job -> dataset -> the entity keys of its item (items with keys only).
  std::map<std::string, std::map<std::string, std::vector<std::string>>>
      prepared_keys_ ABSL_GUARDED_BY(mu_);

  // Counts the call and consults the hook.
  absl::Status Enter(Call call) ABSL_LOCKS_EXCLUDED(mu_);
  void ForgetEditsLocked(const std::string& dataset,
                         const std::vector<std::string>& partitions,
                         bool partitioned) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `salt` extended by the edits of `partition` (nullopt: of the whole
  // table); unchanged without edits.
  std::string EditSaltLocked(const std::string& dataset,
                             const std::optional<std::string>& partition,
                             std::string salt) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int64_t TableRowsLocked(const std::string& dataset) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  InputFingerprint InputLocked(const std::string& job_id,
                               const Prepared& prepared,
                               const InputRef& ref) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  Hook hook_ ABSL_GUARDED_BY(mu_);
  RowsFor rows_for_ ABSL_GUARDED_BY(mu_);
  StageTimings stage_timings_ ABSL_GUARDED_BY(mu_);
  bool staging_groups_ ABSL_GUARDED_BY(mu_) = false;
  std::map<std::string, std::vector<std::string>> validation_failures_
      ABSL_GUARDED_BY(mu_);
  MeasureFor measure_for_ ABSL_GUARDED_BY(mu_);
  ProfileEdit profile_edit_ ABSL_GUARDED_BY(mu_);
  AssertionRows assertion_rows_ ABSL_GUARDED_BY(mu_);
  QueryValues query_values_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, absl::StatusOr<QueryShape>> query_shapes_
      ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::vector<ColumnSpec>> published_columns_
      ABSL_GUARDED_BY(mu_);
  // Dataset -> partition -> measure -> published sum.
  std::map<std::string, std::map<std::string, std::map<std::string, double>>>
      published_sums_ ABSL_GUARDED_BY(mu_);

  std::map<std::string, Staging> staging_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, Prepared> prepared_ ABSL_GUARDED_BY(mu_);
  // Dataset -> partition -> published rows; a dataset present has a table.
  std::map<std::string, std::map<std::string, int64_t>> published_
      ABSL_GUARDED_BY(mu_);
  std::string owner_ ABSL_GUARDED_BY(mu_);
  std::string claimed_ ABSL_GUARDED_BY(mu_);
  std::set<std::pair<std::string, std::string>> markers_
      ABSL_GUARDED_BY(mu_);  // (store id, job id)
  // (job id, dataset) -> partition -> rows the job's publish replaced.
  std::map<std::pair<std::string, std::string>, std::map<std::string, int64_t>>
      copies_ ABSL_GUARDED_BY(mu_);
  // Dataset -> partition -> in-place edits since the rows were written.
  std::map<std::string, std::map<std::string, int64_t>> edits_
      ABSL_GUARDED_BY(mu_);
  std::map<std::string, RollbackMarker> rollbacks_
      ABSL_GUARDED_BY(mu_);  // job id -> marker

  // Dataset -> the rows PartitionsMatching evaluates predicates over.
  std::map<std::string, std::vector<Row>> rows_ ABSL_GUARDED_BY(mu_);

  std::map<std::string, int64_t> calls_ ABSL_GUARDED_BY(mu_);
  std::vector<Call> call_log_ ABSL_GUARDED_BY(mu_);
  int64_t interrupts_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace backfill::testing

#endif  // BACKFILL_TESTS_TESTING_FAKE_ENGINE_H_
