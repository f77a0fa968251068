#include "storage/sql/sql_engine.h"

#include <memory>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/base/status_macros.h"
#include "core/model/partition.h"
#include "spdlog/spdlog.h"
#include "storage/sql/artifacts.h"
#include "storage/sql/change_signal.h"
#include "storage/sql/client_sql.h"
#include "storage/sql/diff.h"
#include "storage/sql/engine_checks.h"
#include "storage/sql/markers.h"
#include "storage/sql/partition_counts.h"
#include "storage/sql/profiles.h"
#include "storage/sql/publish.h"
#include "storage/sql/rollback.h"
#include "storage/sql/sql_staging_group.h"
#include "storage/sql/validation.h"

namespace backfill::sql {

void SqlEngine::SetStatsPolicy(absl::Duration max_age,
                               std::function<absl::Time()> now) {
  absl::MutexLock lock(&settings_mu_);
  stats_max_age_ = max_age;
  stats_now_ = std::move(now);
}

absl::Time SqlEngine::StatsNow() const {
  absl::MutexLock lock(&settings_mu_);
  return stats_now_ ? stats_now_() : absl::Now();
}

absl::Duration SqlEngine::stats_max_age() const {
  absl::MutexLock lock(&settings_mu_);
  return stats_max_age_;
}

void SqlEngine::SetPredicateTimeout(absl::Duration timeout) {
  absl::MutexLock lock(&settings_mu_);
  predicate_timeout_ = timeout;
}

absl::Duration SqlEngine::predicate_timeout() const {
  absl::MutexLock lock(&settings_mu_);
  return predicate_timeout_;
}

std::string SqlEngine::store_id() const {
  absl::MutexLock lock(&store_mu_);
  return store_id_;
}

void SqlEngine::set_store_id(const std::string& store_id) {
  absl::MutexLock lock(&store_mu_);
  store_id_ = store_id;
}

// ---------------------------------------------------------------------------
// The warehouse's owner

absl::StatusOr<WarehouseInfo> SqlEngine::Inspect() {
  RETURN_IF_ERROR(CheckWarehouse());
  ASSIGN_OR_RETURN(Lease conn, Acquire());
  return ReadWarehouseInfo(conn.get());
}

absl::Status SqlEngine::Claim(const std::string& store_id, bool take_over) {
  if (store_id.empty()) {
    return absl::InvalidArgumentError("Claim: empty store id");
  }
  RETURN_IF_ERROR(CheckWarehouse());
  {
    ASSIGN_OR_RETURN(Lease conn, Acquire());
    RETURN_IF_ERROR(ClaimWarehouse(conn.get(), store_id, take_over));
  }
  set_store_id(store_id);
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// Counts, statistics and fingerprints of published tables

absl::StatusOr<std::map<std::string, int64_t>> SqlEngine::CountRowsByPartition(
    const DatasetSpec& dataset) {
  ASSIGN_OR_RETURN(Lease conn, Acquire());
  ASSIGN_OR_RETURN(PartitionCounts counts,
                   sql::CountRowsByPartition(conn.get(), dataset));
  if (counts.unmapped > 0) {
    spdlog::warn(
        "{}: {} rows of table {} have a {} value that maps to no {} "
        "partition; not counted",
        dataset.name, counts.unmapped, dataset.table, dataset.partition->column,
        GrainName(dataset.grain()));
  }
  return std::move(counts.rows);
}

absl::StatusOr<std::vector<int64_t>> SqlEngine::CountRowsInPartitions(
    const DatasetSpec& dataset, const std::vector<std::string>& partitions) {
  ASSIGN_OR_RETURN(Lease conn, Acquire());
  return sql::CountRowsInPartitions(conn.get(), dataset, partitions);
}

absl::StatusOr<PartitionStats> SqlEngine::PartitionStatistics(
    const DatasetSpec& dataset) {
  const absl::Time now = StatsNow();
  ASSIGN_OR_RETURN(Lease conn, Acquire());
  return RecountStatistics(conn.get(), dataset, now);
}

absl::StatusOr<std::map<std::string, InputFingerprint>>
SqlEngine::CurrentFingerprints(const DatasetSpec& dataset,
                               const std::vector<std::string>& partitions) {
  RETURN_IF_ERROR(CheckWarehouse());
  ASSIGN_OR_RETURN(Lease conn, Acquire());
  const bool install = !Refused(dataset.table);
  ASSIGN_OR_RETURN(
      SignalledRead read,
      SignalledFingerprints(conn.get(), dataset, partitions, install));
  if (read.refused) NoSignal(dataset.table);
  if (read.signalled) Signalled(dataset.table);
  return std::move(read.fingerprints);
}

bool SqlEngine::TrySignal(const std::string& table) const {
  absl::MutexLock lock(&signal_mu_);
  return no_signal_.count(table) == 0 && signalled_.count(table) == 0;
}

bool SqlEngine::Refused(const std::string& table) const {
  absl::MutexLock lock(&signal_mu_);
  return no_signal_.count(table) > 0;
}

void SqlEngine::NoSignal(const std::string& table) {
  absl::MutexLock lock(&signal_mu_);
  signalled_.erase(table);
  no_signal_.insert(table);
}

void SqlEngine::Signalled(const std::string& table) {
  absl::MutexLock lock(&signal_mu_);
  signalled_.insert(table);
}

// ---------------------------------------------------------------------------
// Staging

absl::Status SqlEngine::PrepareJob(const JobLayout& layout) {
  if (layout.job_id.empty()) {
    return absl::InvalidArgumentError("PrepareJob: empty job id");
  }
  RETURN_IF_ERROR(CheckWarehouse());
  // Everything is checked before the warehouse is touched.
  RETURN_IF_ERROR(CheckLayout(dialect_, layout));
  {
    ASSIGN_OR_RETURN(Lease conn, Acquire());
    RETURN_IF_ERROR(sql::PrepareJob(conn.get(), staging_hooks(), layout));
  }
  // The pins were kept, so their fingerprints still hold.
  jobs_.Register(layout, /*keep_pins=*/true);
  return absl::OkStatus();
}

absl::StatusOr<StageResult> SqlEngine::StagePartition(
    const std::string& job_id, const DatasetSpec& dataset,
    const std::string& partition, const std::vector<InputRef>& inputs) {
  ASSIGN_OR_RETURN(std::shared_ptr<const JobRegistry::Job> job,
                   JobToStage(job_id, dataset, partition, inputs));
  RETURN_IF_ERROR(EnsureInputSignals(*job, inputs));
  std::set<const DatasetSpec*> unsignalled;
  absl::StatusOr<StageResult> result;
  {
    ASSIGN_OR_RETURN(Lease conn, AcquireForStaging());
    result = sql::StagePartition(conn.get(), staging_hooks(), *job, dataset,
                                 partition, inputs, &unsignalled);
  }
  if (result.ok()) RETURN_IF_ERROR(ReinstallSignals(unsignalled));
  return result;
}

absl::StatusOr<std::shared_ptr<const JobRegistry::Job>> SqlEngine::JobToStage(
    const std::string& job_id, const DatasetSpec& dataset,
    const std::string& partition, const std::vector<InputRef>& inputs) {
  ASSIGN_OR_RETURN(std::shared_ptr<const JobRegistry::Job> job,
                   jobs_.FindRecomputing(job_id, dataset.name));
  if (!job->Has(dataset.name, partition)) {
    return absl::InvalidArgumentError(
        absl::StrCat("partition '", partition, "' of ", dataset.name,
                     " is not part of job ", job_id));
  }
  for (const InputRef& in : inputs) {
    if (in.dataset == nullptr) {
      return absl::InvalidArgumentError(
          "StagePartition: input without dataset");
    }
  }
  RETURN_IF_ERROR(CheckWarehouse());
  return job;
}

absl::StatusOr<std::unique_ptr<StagingGroup>> SqlEngine::OpenStagingGroup(
    const std::string& job_id, const DatasetSpec& dataset) {
  if (!StagesInGroups()) return std::unique_ptr<StagingGroup>();
  return std::unique_ptr<StagingGroup>(
      std::make_unique<Group>(this, job_id, &dataset));
}

absl::Status SqlEngine::EnsureInputSignals(
    const JobRegistry::Job& job, const std::vector<InputRef>& inputs) {
  // The change triggers of the inputs read from their published tables,
  // installed before their first staging in this process, so that its
  // fingerprints are kept too.
  for (const InputRef& in : inputs) {
    const DatasetSpec& u = *in.dataset;
    if (IsPinned(job.layout(), u.name) ||
        FindItem(job.layout(), u.name) != nullptr || !TrySignal(u.table)) {
      continue;
    }
    ASSIGN_OR_RETURN(Lease conn, Acquire());
    ASSIGN_OR_RETURN(bool signalled, EnsureChangeSignal(conn.get(), u));
    if (signalled) {
      Signalled(u.table);
    } else {
      NoSignal(u.table);
    }
  }
  return absl::OkStatus();
}

absl::Status SqlEngine::ReinstallSignals(
    const std::set<const DatasetSpec*>& unsignalled) {
  if (unsignalled.empty()) return absl::OkStatus();
  // Triggers dropped or the table altered since: installed again. The next
  // staging finds their signal (installed on a connection without the
  // job's views, which shadow the tables' names).
  ASSIGN_OR_RETURN(Lease conn, Acquire());
  for (const DatasetSpec* input : unsignalled) {
    if (Refused(input->table)) continue;
    ASSIGN_OR_RETURN(bool signalled, EnsureChangeSignal(conn.get(), *input));
    if (!signalled) NoSignal(input->table);
  }
  return absl::OkStatus();
}

absl::Status SqlEngine::ReleasePartitions(
    const std::string& job_id, const DatasetSpec& dataset,
    const std::vector<std::string>& partitions) {
  ASSIGN_OR_RETURN(std::shared_ptr<const JobRegistry::Job> job,
                   jobs_.Find(job_id));
  for (const std::string& partition : partitions) {
    RETURN_IF_ERROR(CheckPartition(dataset, partition));
  }
  if (partitions.empty()) return absl::OkStatus();
  RETURN_IF_ERROR(CheckWarehouse());
  {
    ASSIGN_OR_RETURN(Lease conn, Acquire());
    RETURN_IF_ERROR(sql::ReleasePartitions(conn.get(), staging_hooks(), job_id,
                                           dataset, partitions));
  }
  // From now on the partitions are not the job's.
  job->Release(dataset.name, partitions);
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// Checks of staged rows

absl::StatusOr<ValidationReport> SqlEngine::ValidateStaged(
    const std::string& job_id, const DatasetSpec& dataset) {
  RETURN_IF_ERROR(CheckWarehouse());
  ASSIGN_OR_RETURN(Lease conn, Acquire());
  return sql::ValidateStaged(conn.get(), job_id, dataset);
}

absl::StatusOr<Profile> SqlEngine::ProfileStaged(
    const std::string& job_id, const DatasetSpec& dataset,
    const ProfileRequest& request) {
  RETURN_IF_ERROR(CheckWarehouse());
  ASSIGN_OR_RETURN(std::shared_ptr<const JobRegistry::Job> job,
                   jobs_.Find(job_id));
  ASSIGN_OR_RETURN(Lease conn, Acquire());
  return sql::ProfileStaged(conn.get(), job->layout(), dataset, request);
}

absl::StatusOr<Profile> SqlEngine::ProfilePublished(
    const std::string& job_id, const DatasetSpec& dataset,
    const ProfileRequest& request) {
  RETURN_IF_ERROR(CheckWarehouse());
  RETURN_IF_ERROR(jobs_.Find(job_id).status());
  ASSIGN_OR_RETURN(Lease conn, Acquire());
  return sql::ProfilePublished(conn.get(), job_id, dataset, request);
}

absl::StatusOr<std::map<std::string, CountWithSamples>> SqlEngine::RunAssertion(
    const std::string& job_id, const DatasetSpec& dataset,
    const std::string& sql, int samples) {
  RETURN_IF_ERROR(CheckWarehouse());
  ASSIGN_OR_RETURN(std::shared_ptr<const JobRegistry::Job> job,
                   jobs_.FindRecomputing(job_id, dataset.name));
  ASSIGN_OR_RETURN(Lease conn, Acquire());
  return sql::RunAssertion(conn.get(), job_id, dataset,
                           job->Partitions(dataset.name), sql, samples,
                           AssertionTimeLimit());
}

// ---------------------------------------------------------------------------
// SQL from pipelines, described or run on published rows

absl::StatusOr<SqlValue> SqlEngine::QueryValue(const DatasetSpec& dataset,
                                               const std::string& partition,
                                               const std::string& sql) {
  RETURN_IF_ERROR(CheckWarehouse());
  ASSIGN_OR_RETURN(Lease conn, Acquire());
  return sql::QueryValue(conn.get(), dataset, partition, sql,
                         absl::Seconds(10));
}

absl::StatusOr<QueryShape> SqlEngine::DescribeQuery(
    const std::string& sql, const std::vector<const DatasetSpec*>& stand_ins,
    const DatasetSpec* own) {
  ASSIGN_OR_RETURN(Lease conn, Acquire());
  return sql::DescribeQuery(conn.get(), sql, stand_ins, own);
}

absl::StatusOr<std::optional<std::vector<ColumnSpec>>> SqlEngine::DescribeTable(
    const DatasetSpec& dataset) {
  ASSIGN_OR_RETURN(Lease conn, Acquire());
  return sql::DescribeTable(conn.get(), dataset);
}

absl::StatusOr<PartitionDiff> SqlEngine::DiffPartition(
    const std::string& job_id, const DatasetSpec& dataset,
    const std::string& partition, int sample_limit) {
  RETURN_IF_ERROR(CheckWarehouse());
  ASSIGN_OR_RETURN(Lease conn, Acquire());
  return DiffStagedPartition(conn.get(), job_id, dataset, partition,
                             sample_limit);
}

// ---------------------------------------------------------------------------
// Publish and rollback

absl::StatusOr<bool> SqlEngine::IsPublished(const std::string& job_id) {
  ASSIGN_OR_RETURN(Lease conn, Acquire());
  return HasPublication(conn.get(), store_id(), job_id);
}

absl::Status SqlEngine::Publish(const JobLayout& layout) {
  ASSIGN_OR_RETURN(Lease conn, Acquire());
  return sql::Publish(conn.get(), replace_hooks(), store_id(), layout,
                      FenceOf(layout.job_id));
}

void SqlEngine::SetFence(const LeaseFence* fence) {
  absl::MutexLock lock(&fence_mu_);
  fence_ = fence;
}

std::optional<int64_t> SqlEngine::FenceOf(const std::string& job_id) const {
  const LeaseFence* fence;
  {
    absl::MutexLock lock(&fence_mu_);
    fence = fence_;
  }
  return fence == nullptr ? std::nullopt : fence->TokenFor(job_id);
}

absl::Status SqlEngine::AdvanceFence(const std::string& job_id, int64_t token) {
  ASSIGN_OR_RETURN(Lease conn, Acquire());
  return sql::AdvanceFence(conn.get(), job_id, token);
}

absl::StatusOr<RollbackResult> SqlEngine::Rollback(const RollbackSpec& spec) {
  ASSIGN_OR_RETURN(Lease conn, Acquire());
  return sql::Rollback(conn.get(), replace_hooks(), store_id(), spec,
                       FenceOf(spec.layout.job_id));
}

// ---------------------------------------------------------------------------
// What jobs leave behind

absl::Status SqlEngine::DropStaging(const std::string& job_id) {
  {
    ASSIGN_OR_RETURN(Lease conn, Acquire());
    RETURN_IF_ERROR(sql::DropStaging(conn.get(), job_id));
  }
  jobs_.Forget(job_id);  // not prepared any more
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> SqlEngine::ListJobsWithStaging() {
  ASSIGN_OR_RETURN(Lease conn, Acquire());
  return sql::ListJobsWithStaging(conn.get());
}

absl::StatusOr<std::vector<RollbackCopy>> SqlEngine::ListRollbackCopies() {
  RETURN_IF_ERROR(CheckWarehouse());
  ASSIGN_OR_RETURN(Lease conn, Acquire());
  return sql::ListRollbackCopies(conn.get());
}

absl::Status SqlEngine::DropRollbackCopies(
    const std::vector<RollbackCopy>& copies) {
  if (copies.empty()) return absl::OkStatus();
  RETURN_IF_ERROR(CheckWarehouse());
  ASSIGN_OR_RETURN(Lease conn, Acquire());
  return sql::DropRollbackCopies(conn.get(), copies);
}

}  // namespace backfill::sql
