// SqlEngine: the warehouse Engine (core/ports/engine.h) written once over a
// Dialect and the Connections of a pool (storage/sql/dialect.h,
// connection.h). Each call leases a connection and runs the shared unit of
// its concept (markers.h, staging.h, validation.h, profiles.h, diff.h,
// publish.h, rollback.h, partition_counts.h, client_sql.h, artifacts.h);
// an engine derives from it and supplies its pool (Acquire), its hooks
// (ReplaceHooks, StagingHooks) and whatever is its own, overriding the
// calls it does otherwise (SQLite: the statement sandbox, file identity,
// its statistics caches and diff tables; PostgreSQL: plan-based refusal,
// table locks, kept statistics). PartitionsMatching is each engine's: how
// a client's predicate is made safe is (predicates.h).
//
// What a prepared job is, is remembered in a JobRegistry (job_registry.h):
// in memory, so after a restart PrepareJob must be called again (it is
// idempotent and keeps existing pins).
//
// Ownership: the engine that derives owns the Dialect and the hooks, which
// must outlive every call; JobLayouts handed to PrepareJob are copied but
// their DatasetSpec pointers are kept (the Catalog must outlive the job).
// Thread-safety: thread-safe, as far as the engine's pool and hooks are;
// each call uses the connection it leased.

#ifndef BACKFILL_STORAGE_SQL_SQL_ENGINE_H_
#define BACKFILL_STORAGE_SQL_SQL_ENGINE_H_

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/ports/engine.h"
#include "core/ports/lease_store.h"
#include "storage/sql/connection.h"
#include "storage/sql/dialect.h"
#include "storage/sql/job_registry.h"
#include "storage/sql/replace_hooks.h"
#include "storage/sql/staging.h"

namespace backfill::sql {

class SqlEngine : public Engine {
 public:
  // How old kept partition statistics (and what is kept with them) may get
  // before a full recount (zero: every refresh recounts; default an hour),
  // and the clock their age is measured with (nullptr: the system clock).
  // Thread-safe.
  void SetStatsPolicy(absl::Duration max_age,
                      std::function<absl::Time()> now = nullptr);
  // How long PartitionsMatching lets a predicate run (default 20 s).
  // Thread-safe.
  void SetPredicateTimeout(absl::Duration timeout);

  absl::StatusOr<WarehouseInfo> Inspect() override;
  absl::Status Claim(const std::string& store_id, bool take_over) override;
  // Rows of no partition are logged, not counted.
  absl::StatusOr<std::map<std::string, int64_t>> CountRowsByPartition(
      const DatasetSpec& dataset) override;
  // Exact, through each partition's membership condition (an index on the
  // partition column serves it). INVALID_ARGUMENT for a partition of the
  // wrong form or an undeclared key.
  absl::StatusOr<std::vector<int64_t>> CountRowsInPartitions(
      const DatasetSpec& dataset,
      const std::vector<std::string>& partitions) override;
  // Counted in full on every call (refresh "recount").
  absl::StatusOr<PartitionStats> PartitionStatistics(
      const DatasetSpec& dataset) override;
  // Exact: a partition's cached fingerprint stands while its change signal
  // (change_signal.h) is known and unchanged; the others are hashed through
  // their membership condition (one scan of the table for many).
  absl::StatusOr<std::map<std::string, InputFingerprint>> CurrentFingerprints(
      const DatasetSpec& dataset,
      const std::vector<std::string>& partitions) override;
  absl::Status PrepareJob(const JobLayout& layout) override;
  absl::StatusOr<StageResult> StagePartition(
      const std::string& job_id, const DatasetSpec& dataset,
      const std::string& partition,
      const std::vector<InputRef>& inputs) override;
  // Null unless the engine keeps a session's objects between stagings
  // (StagesInGroups).
  absl::StatusOr<std::unique_ptr<StagingGroup>> OpenStagingGroup(
      const std::string& job_id, const DatasetSpec& dataset) override;
  absl::Status ReleasePartitions(
      const std::string& job_id, const DatasetSpec& dataset,
      const std::vector<std::string>& partitions) override;
  absl::StatusOr<ValidationReport> ValidateStaged(
      const std::string& job_id, const DatasetSpec& dataset) override;
  absl::StatusOr<Profile> ProfileStaged(const std::string& job_id,
                                        const DatasetSpec& dataset,
                                        const ProfileRequest& request) override;
  absl::StatusOr<Profile> ProfilePublished(
      const std::string& job_id, const DatasetSpec& dataset,
      const ProfileRequest& request) override;
  // The sides as common table expressions (diff.h).
  absl::StatusOr<PartitionDiff> DiffPartition(const std::string& job_id,
                                              const DatasetSpec& dataset,
                                              const std::string& partition,
                                              int sample_limit) override;
  absl::StatusOr<bool> IsPublished(const std::string& job_id) override;
  absl::Status Publish(const JobLayout& layout) override;
  absl::StatusOr<RollbackResult> Rollback(const RollbackSpec& spec) override;
  void SetFence(const LeaseFence* fence) override;
  absl::Status AdvanceFence(const std::string& job_id, int64_t token) override;
  absl::Status DropStaging(const std::string& job_id) override;
  absl::StatusOr<std::map<std::string, CountWithSamples>> RunAssertion(
      const std::string& job_id, const DatasetSpec& dataset,
      const std::string& sql, int samples) override;
  // Stopped after 10 s.
  absl::StatusOr<SqlValue> QueryValue(const DatasetSpec& dataset,
                                      const std::string& partition,
                                      const std::string& sql) override;
  absl::StatusOr<QueryShape> DescribeQuery(
      const std::string& sql, const std::vector<const DatasetSpec*>& stand_ins,
      const DatasetSpec* own) override;
  absl::StatusOr<std::optional<std::vector<ColumnSpec>>> DescribeTable(
      const DatasetSpec& dataset) override;
  // Jobs "bf-<digits>" only (artifacts.h), sorted, without duplicates.
  absl::StatusOr<std::vector<std::string>> ListJobsWithStaging() override;
  // Copies of jobs "bf-<digits>" only, by job number then dataset.
  absl::StatusOr<std::vector<RollbackCopy>> ListRollbackCopies() override;
  absl::Status DropRollbackCopies(
      const std::vector<RollbackCopy>& copies) override;

 protected:
  // `dialect` must outlive the engine.
  explicit SqlEngine(const Dialect* dialect) : dialect_(*dialect) {}

  // ---- What the engine that derives supplies --------------------------------
  // A connection of the pool, without objects an earlier call left in its
  // session.
  virtual absl::StatusOr<Lease> Acquire() = 0;
  // A connection for StagePartition, which may keep the session's objects
  // an earlier staging made (Acquire by default).
  virtual absl::StatusOr<Lease> AcquireForStaging() { return Acquire(); }
  // Whether OpenStagingGroup answers groups: the connections
  // AcquireForStaging leases keep the group table between calls (false by
  // default).
  virtual bool StagesInGroups() const { return false; }
  // FAILED_PRECONDITION when the warehouse is not the one opened any more
  // (nothing by default).
  virtual absl::Status CheckWarehouse() { return absl::OkStatus(); }
  // How long one statement of an assertion may run (none by default).
  virtual std::optional<absl::Duration> AssertionTimeLimit() const {
    return std::nullopt;
  }
  virtual ReplaceHooks& replace_hooks() = 0;
  virtual StagingHooks& staging_hooks() = 0;

  const Dialect& dialect() const { return dialect_; }
  JobRegistry& jobs() { return jobs_; }
  // The time statistics are stamped and aged with, and their maximum age
  // (SetStatsPolicy).
  absl::Time StatsNow() const;
  absl::Duration stats_max_age() const;
  absl::Duration predicate_timeout() const;
  // The store id of the last Claim ("" before any).
  std::string store_id() const;
  void set_store_id(const std::string& store_id);

 private:
  // A StagingGroup over this engine (sql_staging_group.h).
  class Group;

  // The registered job a staging of `partition` of `dataset` belongs to,
  // once the call's arguments and the warehouse are checked.
  absl::StatusOr<std::shared_ptr<const JobRegistry::Job>> JobToStage(
      const std::string& job_id, const DatasetSpec& dataset,
      const std::string& partition, const std::vector<InputRef>& inputs);
  // Before a staging reads `inputs` of `job`: installs the change triggers
  // of the inputs read from their published tables not tried yet in this
  // process, on a connection of its own.
  absl::Status EnsureInputSignals(const JobRegistry::Job& job,
                                  const std::vector<InputRef>& inputs);
  // After a staging found `unsignalled` inputs without a known signal:
  // installs their triggers again, on a connection of its own.
  absl::Status ReinstallSignals(
      const std::set<const DatasetSpec*>& unsignalled);

  const Dialect& dialect_;
  JobRegistry jobs_;
  // Guards the settings.
  // The lease token a publish or rollback of `job_id` runs under (nullopt:
  // no fence set, or the job is not run under a lease).
  std::optional<int64_t> FenceOf(const std::string& job_id) const;

  mutable absl::Mutex fence_mu_;
  const LeaseFence* fence_ ABSL_GUARDED_BY(fence_mu_) = nullptr;
  mutable absl::Mutex settings_mu_;
  absl::Duration stats_max_age_ ABSL_GUARDED_BY(settings_mu_) = absl::Hours(1);
  std::function<absl::Time()> stats_now_ ABSL_GUARDED_BY(settings_mu_);
  absl::Duration predicate_timeout_ ABSL_GUARDED_BY(settings_mu_) =
      absl::Seconds(20);
  // What this process learnt of the change triggers of `table`: TrySignal
  // whether checking them before a staging is worth it (neither installed
  // nor refused yet), Refused whether an installation failed (a view, no
  // privilege: not tried again); NoSignal and Signalled record it.
  bool TrySignal(const std::string& table) const;
  bool Refused(const std::string& table) const;
  void NoSignal(const std::string& table);
  void Signalled(const std::string& table);

  mutable absl::Mutex store_mu_;
  std::string store_id_ ABSL_GUARDED_BY(store_mu_);
  mutable absl::Mutex signal_mu_;
  std::set<std::string> no_signal_ ABSL_GUARDED_BY(signal_mu_);
  std::set<std::string> signalled_ ABSL_GUARDED_BY(signal_mu_);
};

}  // namespace backfill::sql

#endif  // BACKFILL_STORAGE_SQL_SQL_ENGINE_H_
