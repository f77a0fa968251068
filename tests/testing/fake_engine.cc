#include "tests/testing/fake_engine.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/status_macros.h"
#include "core/model/fingerprint.h"
#include "core/model/partition.h"
#include "core/plan/affected_by.h"
#include "tests/testing/fake_engine_internal.h"

namespace backfill::testing {

using fake_engine_internal::FingerprintOf;
using fake_engine_internal::IsStoreJobId;
using fake_engine_internal::Sum;

// ---- configuration and observation ----------------------------------------

void FakeEngine::SetRowsFor(RowsFor rows_for) {
  absl::MutexLock lock(&mu_);
  rows_for_ = std::move(rows_for);
}

void FakeEngine::SetStageTimings(const StageTimings& timings) {
  absl::MutexLock lock(&mu_);
  stage_timings_ = timings;
}

void FakeEngine::SetHook(Hook hook) {
  absl::MutexLock lock(&mu_);
  hook_ = std::move(hook);
}

void FakeEngine::SetValidationFailures(const std::string& dataset,
                                       std::vector<std::string> failures) {
  absl::MutexLock lock(&mu_);
  validation_failures_[dataset] = std::move(failures);
}

void FakeEngine::SetMeasureFor(MeasureFor measure_for) {
  absl::MutexLock lock(&mu_);
  measure_for_ = std::move(measure_for);
}

void FakeEngine::SetProfileEdit(ProfileEdit edit) {
  absl::MutexLock lock(&mu_);
  profile_edit_ = std::move(edit);
}

void FakeEngine::SetAssertionRows(AssertionRows rows) {
  absl::MutexLock lock(&mu_);
  assertion_rows_ = std::move(rows);
}

void FakeEngine::SetQueryValues(QueryValues values) {
  absl::MutexLock lock(&mu_);
  query_values_ = std::move(values);
}

absl::StatusOr<SqlValue> FakeEngine::QueryValue(const DatasetSpec& dataset,
                                                const std::string& partition,
                                                const std::string& sql) {
  if (absl::Status s = Enter({"QueryValue", "", dataset.name, partition});
      !s.ok()) {
    return s;
  }
  QueryValues values;
  {
    absl::MutexLock lock(&mu_);
    values = query_values_;
  }
  if (!values) return SqlValue{};
  return values(dataset.name, sql, partition);
}

void FakeEngine::SetQueryShape(const std::string& sql,
                               absl::StatusOr<QueryShape> shape) {
  absl::MutexLock lock(&mu_);
  query_shapes_.insert_or_assign(sql, std::move(shape));
}

void FakeEngine::SetPublishedColumns(const std::string& dataset,
                                     std::vector<ColumnSpec> columns) {
  absl::MutexLock lock(&mu_);
  published_columns_[dataset] = std::move(columns);
}

void FakeEngine::SetPublishedRows(const std::string& dataset,
                                  const std::string& partition, int64_t rows) {
  absl::MutexLock lock(&mu_);
  std::map<std::string, int64_t>& table = published_[dataset];
  if (rows > 0) {
    table[partition] = rows;
  } else {
    table.erase(partition);
  }
}

void FakeEngine::EditPublishedRows(const std::string& dataset,
                                   const std::string& partition) {
  absl::MutexLock lock(&mu_);
  ++edits_[dataset][partition];
}

void FakeEngine::ForgetEditsLocked(const std::string& dataset,
                                   const std::vector<std::string>& partitions,
                                   bool partitioned) {
  auto it = edits_.find(dataset);
  if (it == edits_.end()) return;
  if (!partitioned) {
    edits_.erase(it);
    return;
  }
  for (const std::string& p : partitions) it->second.erase(p);
}

std::string FakeEngine::EditSaltLocked(const std::string& dataset,
                                       const std::optional<std::string>& p,
                                       std::string salt) const {
  auto it = edits_.find(dataset);
  if (it == edits_.end()) return salt;
  int64_t n = 0;
  for (const auto& [partition, edits] : it->second) {
    if (!p.has_value() || partition == *p) n += edits;
  }
  return n == 0 ? salt : absl::StrCat(salt, "+edit", n);
}

void FakeEngine::AddMarker(const std::string& job_id,
                           const std::string& store_id) {
  absl::MutexLock lock(&mu_);
  markers_.insert({store_id, job_id});
}

void FakeEngine::SetOwner(const std::string& store_id) {
  absl::MutexLock lock(&mu_);
  owner_ = store_id;
}

void FakeEngine::SetStagedRows(const std::string& job_id,
                               const std::string& dataset,
                               const std::string& partition, int64_t rows) {
  absl::MutexLock lock(&mu_);
  std::map<std::string, int64_t>& staged = staging_[job_id].staged[dataset];
  if (rows > 0) {
    staged[partition] = rows;
  } else {
    staged.erase(partition);
  }
}

void FakeEngine::Restart() {
  absl::MutexLock lock(&mu_);
  prepared_.clear();
  claimed_.clear();
}

int64_t FakeEngine::calls(const std::string& method) const {
  absl::MutexLock lock(&mu_);
  auto it = calls_.find(method);
  return it == calls_.end() ? 0 : it->second;
}

int64_t FakeEngine::total_calls() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(call_log_.size());
}

std::vector<FakeEngine::Call> FakeEngine::call_log() const {
  absl::MutexLock lock(&mu_);
  return call_log_;
}

bool FakeEngine::WaitForCalls(const std::string& method, int64_t n,
                              absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  auto reached = [this, &method, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto it = calls_.find(method);
    return it != calls_.end() && it->second >= n;
  };
  return mu_.AwaitWithTimeout(absl::Condition(&reached), timeout);
}

std::optional<int64_t> FakeEngine::StagedRows(
    const std::string& job_id, const std::string& dataset,
    const std::string& partition) const {
  absl::MutexLock lock(&mu_);
  auto job = staging_.find(job_id);
  if (job == staging_.end()) return std::nullopt;
  auto ds = job->second.staged.find(dataset);
  if (ds == job->second.staged.end()) return std::nullopt;
  auto p = ds->second.find(partition);
  if (p == ds->second.end()) return std::nullopt;
  return p->second;
}

int64_t FakeEngine::PublishedRows(const std::string& dataset,
                                  const std::string& partition) const {
  absl::MutexLock lock(&mu_);
  auto ds = published_.find(dataset);
  if (ds == published_.end()) return 0;
  auto p = ds->second.find(partition);
  return p == ds->second.end() ? 0 : p->second;
}

bool FakeEngine::IsPrepared(const std::string& job_id) const {
  absl::MutexLock lock(&mu_);
  return prepared_.count(job_id) > 0;
}

std::string FakeEngine::claimed_store_id() const {
  absl::MutexLock lock(&mu_);
  return claimed_;
}

int64_t FakeEngine::interrupts() const {
  absl::MutexLock lock(&mu_);
  return interrupts_;
}

absl::Status FakeEngine::Enter(Call call) {
  Hook hook;
  {
    absl::MutexLock lock(&mu_);
    ++calls_[call.method];
    call_log_.push_back(call);
    hook = hook_;
  }
  return hook ? hook(call) : absl::OkStatus();
}

int64_t FakeEngine::TableRowsLocked(const std::string& dataset) const {
  auto it = published_.find(dataset);
  return it == published_.end() ? 0 : Sum(it->second);
}

// ---- Engine
// ------------------------------------------------------------------

absl::StatusOr<WarehouseInfo> FakeEngine::Inspect() {
  if (absl::Status s = Enter({"Inspect", "", "", ""}); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  WarehouseInfo info;
  info.owner_store_id = owner_;
  for (const auto& [store_id, job_id] : markers_) {
    info.publications[job_id] = store_id;
  }
  info.rollbacks = rollbacks_;
  return info;
}

absl::Status FakeEngine::Claim(const std::string& store_id, bool take_over) {
  if (absl::Status s = Enter({"Claim", "", "", ""}); !s.ok()) return s;
  if (store_id.empty()) {
    return absl::InvalidArgumentError("Claim: empty store id");
  }
  absl::MutexLock lock(&mu_);
  if (!owner_.empty() && owner_ != store_id && !take_over) {
    return absl::FailedPreconditionError(
        absl::StrCat("the warehouse belongs to state store ", owner_,
                     ", not to state store ", store_id));
  }
  if (owner_.empty()) {
    // Markers that name no store become this store's.
    std::set<std::pair<std::string, std::string>> stamped;
    for (const auto& [writer, job_id] : markers_) {
      stamped.insert({writer.empty() ? store_id : writer, job_id});
    }
    markers_ = std::move(stamped);
  }
  owner_ = store_id;
  claimed_ = store_id;
  return absl::OkStatus();
}

absl::StatusOr<std::map<std::string, int64_t>> FakeEngine::CountRowsByPartition(
    const DatasetSpec& dataset) {
  if (absl::Status s = Enter({"CountRowsByPartition", "", dataset.name, ""});
      !s.ok()) {
    return s;
  }
  absl::MutexLock lock(&mu_);
  std::map<std::string, int64_t> out;
  if (!dataset.partition) {
    out[""] = TableRowsLocked(dataset.name);
    return out;
  }
  auto it = published_.find(dataset.name);
  if (it == published_.end()) return out;
  for (const auto& [partition, rows] : it->second) {
    if (rows > 0) out[partition] = rows;
  }
  return out;
}

absl::StatusOr<std::vector<int64_t>> FakeEngine::CountRowsInPartitions(
    const DatasetSpec& dataset, const std::vector<std::string>& partitions) {
  if (absl::Status s = Enter({"CountRowsInPartitions", "", dataset.name, ""});
      !s.ok()) {
    return s;
  }
  for (const std::string& p : partitions) {
    if (absl::Status s = ValidatePartition(dataset.layout(), p); !s.ok()) {
      return s;
    }
  }
  absl::MutexLock lock(&mu_);
  std::vector<int64_t> out;
  out.reserve(partitions.size());
  for (const std::string& p : partitions) {
    if (!dataset.partition) {
      out.push_back(TableRowsLocked(dataset.name));
      continue;
    }
    int64_t n = 0;
    if (auto it = published_.find(dataset.name); it != published_.end()) {
      if (auto r = it->second.find(p); r != it->second.end()) n = r->second;
    }
    out.push_back(std::max<int64_t>(n, 0));
  }
  return out;
}

absl::StatusOr<std::map<std::string, InputFingerprint>>
FakeEngine::CurrentFingerprints(const DatasetSpec& dataset,
                                const std::vector<std::string>& partitions) {
  if (absl::Status s = Enter({"CurrentFingerprints", "", dataset.name, ""});
      !s.ok()) {
    return s;
  }
  for (const std::string& p : partitions) {
    if (p.empty()) continue;
    if (absl::Status s = ValidatePartition(dataset.layout(), p); !s.ok()) {
      return s;
    }
  }
  absl::MutexLock lock(&mu_);
  std::map<std::string, InputFingerprint> out;
  for (const std::string& p : partitions) {
    InputFingerprint in;
    in.dataset = dataset.name;
    in.partition = p;
    // As InputLocked fingerprints a read of the published rows: a
    // partition by its rows, the whole table ("") apart.
    const bool whole = p.empty();
    if (whole) {
      in.rows = TableRowsLocked(dataset.name);
    } else if (auto t = published_.find(dataset.name); t != published_.end()) {
      if (auto r = t->second.find(p); r != t->second.end()) {
        in.rows = std::max<int64_t>(r->second, 0);
      }
    }
    const std::optional<std::string> ref =
        whole ? std::nullopt : std::optional<std::string>(p);
    in.fingerprint = FingerprintOf(
        dataset.name,
        EditSaltLocked(dataset.name, ref,
                       whole ? "input" : dataset.transform_version),
        p, in.rows);
    out[p] = std::move(in);
  }
  return out;
}

absl::StatusOr<PartitionStats> FakeEngine::PartitionStatistics(
    const DatasetSpec& dataset) {
  if (absl::Status s = Enter({"PartitionStatistics", "", dataset.name, ""});
      !s.ok()) {
    return s;
  }
  absl::MutexLock lock(&mu_);
  PartitionStats stats;
  stats.refresh = "exact";
  if (!dataset.partition) {
    const int64_t n = TableRowsLocked(dataset.name);
    if (n > 0) stats.rows[""] = n;
    stats.total_rows = n;
    return stats;
  }
  if (auto it = published_.find(dataset.name); it != published_.end()) {
    for (const auto& [partition, rows] : it->second) {
      if (rows <= 0) continue;
      stats.rows[partition] = rows;
      stats.total_rows += rows;
    }
  }
  return stats;
}

std::vector<std::string> FakeEngine::PreparedKeys(
    const std::string& job_id, const std::string& dataset) const {
  absl::MutexLock lock(&mu_);
  auto job = prepared_keys_.find(job_id);
  if (job == prepared_keys_.end()) return {};
  auto keys = job->second.find(dataset);
  return keys == job->second.end() ? std::vector<std::string>() : keys->second;
}

absl::Status FakeEngine::PrepareJob(const JobLayout& layout) {
  if (absl::Status s = Enter({"PrepareJob", layout.job_id, "", ""}); !s.ok()) {
    return s;
  }
  if (layout.job_id.empty()) {
    return absl::InvalidArgumentError("PrepareJob: empty job id");
  }
  Prepared prepared;
  for (const JobLayout::Item& item : layout.items) {
    if (item.dataset == nullptr) {
      return absl::InvalidArgumentError("PrepareJob: item without dataset");
    }
    const DatasetSpec& ds = *item.dataset;
    for (const std::string& partition : item.partitions) {
      if (absl::Status s = ValidatePartition(ds.layout(), partition); !s.ok()) {
        return absl::Status(s.code(),
                            absl::StrCat("dataset ", ds.name, " partition '",
                                         partition, "': ", s.message()));
      }
    }
    prepared.partitions[ds.name].insert(item.partitions.begin(),
                                        item.partitions.end());
    if (!item.keys.empty() && ds.entity_key.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "dataset ", ds.name,
          " declares no entity_key; its rows cannot be replaced by key"));
    }
  }
  for (const DatasetSpec* pin : layout.pinned) {
    if (pin == nullptr) {
      return absl::InvalidArgumentError("PrepareJob: null pinned dataset");
    }
  }
  absl::MutexLock lock(&mu_);
  Staging& staging = staging_[layout.job_id];
  // Pins first: a missing table refuses the whole call.
  std::map<std::string, int64_t> new_pins;
  for (const DatasetSpec* pin : layout.pinned) {
    if (prepared.partitions.count(pin->name) || staging.pins.count(pin->name)) {
      continue;  // read from staging, or pinned before a restart
    }
    if (!published_.count(pin->name)) {
      if (staging.staged.empty() && staging.pins.empty()) {
        staging_.erase(layout.job_id);
      }
      return absl::FailedPreconditionError(
          absl::StrCat("cannot pin ", pin->name, ": table ", pin->table,
                       " does not exist in the warehouse"));
    }
    new_pins[pin->name] = TableRowsLocked(pin->name);
  }
  for (const auto& [dataset, partitions] : prepared.partitions) {
    staging.staged[dataset];  // the dataset's (possibly empty) staging
  }
  staging.pins.insert(new_pins.begin(), new_pins.end());
  if (staging.staged.empty() && staging.pins.empty()) {
    staging_.erase(layout.job_id);
  }
  prepared_[layout.job_id] = std::move(prepared);
  auto& keys = prepared_keys_[layout.job_id];
  keys.clear();
  for (const JobLayout::Item& item : layout.items) {
    if (!item.keys.empty()) keys[item.dataset->name] = item.keys;
  }
  return absl::OkStatus();
}

InputFingerprint FakeEngine::InputLocked(const std::string& job_id,
                                         const Prepared& prepared,
                                         const InputRef& ref) const {
  const std::string& name = ref.dataset->name;
  InputFingerprint in;
  in.dataset = name;
  in.partition = ref.partition.value_or("");
  bool edited = false;  // read from the published rows, edits and all
  auto job = staging_.find(job_id);
  auto recomputed = prepared.partitions.find(name);
  const std::map<std::string, int64_t>* staged = nullptr;
  if (job != staging_.end()) {
    auto it = job->second.staged.find(name);
    if (it != job->second.staged.end()) staged = &it->second;
  }
  if (ref.partition.has_value()) {
    const bool from_staging = recomputed != prepared.partitions.end() &&
                              recomputed->second.count(*ref.partition) > 0;
    const std::map<std::string, int64_t>* source = staged;
    if (!from_staging) {
      auto table = published_.find(name);
      source = table == published_.end() ? nullptr : &table->second;
      edited = true;
    }
    if (source != nullptr) {
      auto it = source->find(*ref.partition);
      if (it != source->end()) in.rows = it->second;
    }
  } else if (recomputed != prepared.partitions.end()) {
    // Its staging, and its published rows outside the job's partitions.
    in.rows = staged == nullptr ? 0 : Sum(*staged);
    if (auto table = published_.find(name); table != published_.end()) {
      for (const auto& [partition, rows] : table->second) {
        if (!recomputed->second.count(partition)) in.rows += rows;
      }
    }
  } else if (job != staging_.end() && job->second.pins.count(name)) {
    in.rows = job->second.pins.at(name);
    edited = true;  // pinned from the published table (edits as they are now)
  } else {
    in.rows = TableRowsLocked(name);
    edited = true;
  }
  // A partition read is fingerprinted as StagePartition fingerprints the
  // same rows of it; a whole table apart.
  std::string salt =
      ref.partition.has_value() ? ref.dataset->transform_version : "input";
  if (edited) salt = EditSaltLocked(name, ref.partition, std::move(salt));
  in.fingerprint = FingerprintOf(name, salt, in.partition, in.rows);
  return in;
}

absl::StatusOr<StageResult> FakeEngine::StagePartition(
    const std::string& job_id, const DatasetSpec& dataset,
    const std::string& partition, const std::vector<InputRef>& inputs) {
  if (absl::Status s =
          Enter({"StagePartition", job_id, dataset.name, partition});
      !s.ok()) {
    return s;
  }
  return Stage(job_id, dataset, partition, inputs, /*write=*/true);
}

absl::StatusOr<StageResult> FakeEngine::Stage(
    const std::string& job_id, const DatasetSpec& dataset,
    const std::string& partition, const std::vector<InputRef>& inputs,
    bool write) {
  for (const InputRef& in : inputs) {
    if (in.dataset == nullptr) {
      return absl::InvalidArgumentError(
          "StagePartition: input without dataset");
    }
  }
  RowsFor rows_for;
  {
    absl::MutexLock lock(&mu_);
    rows_for = rows_for_;
  }
  const int64_t rows =
      rows_for ? std::max<int64_t>(rows_for(dataset.name, partition), 0) : 1;

  absl::MutexLock lock(&mu_);
  auto prepared = prepared_.find(job_id);
  if (prepared == prepared_.end()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job ", job_id, " is not prepared on this engine (PrepareJob first)"));
  }
  auto partitions = prepared->second.partitions.find(dataset.name);
  if (partitions == prepared->second.partitions.end()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "dataset ", dataset.name, " is not recomputed by job ", job_id));
  }
  if (!partitions->second.count(partition)) {
    return absl::InvalidArgumentError(
        absl::StrCat("partition '", partition, "' of ", dataset.name,
                     " is not part of job ", job_id));
  }
  StageResult result;
  // Inputs are read before this partition's rows replace the earlier ones.
  for (const InputRef& in : inputs) {
    result.inputs.push_back(InputLocked(job_id, prepared->second, in));
  }
  if (write) {
    std::map<std::string, int64_t>& staged =
        staging_[job_id].staged[dataset.name];
    if (rows > 0) {
      staged[partition] = rows;
    } else {
      staged.erase(partition);
    }
  }
  result.rows_written = rows;
  result.output_fingerprint =
      FingerprintOf(dataset.name, dataset.transform_version, partition, rows);
  result.timings = stage_timings_;
  if (!write) result.timings.stage_write = absl::ZeroDuration();
  return result;
}

void FakeEngine::WriteStaged(const std::string& job_id,
                             const std::string& dataset,
                             const std::map<std::string, int64_t>& rows) {
  absl::MutexLock lock(&mu_);
  std::map<std::string, int64_t>& staged = staging_[job_id].staged[dataset];
  for (const auto& [partition, n] : rows) {
    if (n > 0) {
      staged[partition] = n;
    } else {
      staged.erase(partition);
    }
  }
}

class FakeEngine::Group : public StagingGroup {
 public:
  Group(FakeEngine* engine, std::string job_id, const DatasetSpec* dataset)
      : engine_(engine), job_id_(std::move(job_id)), dataset_(dataset) {}

  absl::StatusOr<StageResult> Stage(
      const std::string& partition,
      const std::vector<InputRef>& inputs) override {
    if (absl::Status s =
            engine_->Enter({"GroupStage", job_id_, dataset_->name, partition});
        !s.ok()) {
      return s;
    }
    ASSIGN_OR_RETURN(StageResult result,
                     engine_->Stage(job_id_, *dataset_, partition, inputs,
                                    /*write=*/false));
    kept_[partition] = result.rows_written;
    return result;
  }

  absl::StatusOr<absl::Duration> Commit() override {
    if (kept_.empty()) return absl::ZeroDuration();
    std::vector<std::string> partitions;
    for (const auto& [partition, rows] : kept_) partitions.push_back(partition);
    std::map<std::string, int64_t> kept;
    kept.swap(kept_);
    RETURN_IF_ERROR(engine_->Enter({"GroupCommit", job_id_, dataset_->name,
                                    absl::StrJoin(partitions, ",")}));
    engine_->WriteStaged(job_id_, dataset_->name, kept);
    absl::MutexLock lock(&engine_->mu_);
    return engine_->stage_timings_.stage_write;
  }

 private:
  FakeEngine* const engine_;
  const std::string job_id_;
  const DatasetSpec* const dataset_;
  std::map<std::string, int64_t> kept_;
};

absl::StatusOr<std::unique_ptr<StagingGroup>> FakeEngine::OpenStagingGroup(
    const std::string& job_id, const DatasetSpec& dataset) {
  absl::MutexLock lock(&mu_);
  if (!staging_groups_) return std::unique_ptr<StagingGroup>();
  return std::unique_ptr<StagingGroup>(
      std::make_unique<Group>(this, job_id, &dataset));
}

void FakeEngine::SetStagingGroups(bool on) {
  absl::MutexLock lock(&mu_);
  staging_groups_ = on;
}

absl::Status FakeEngine::ReleasePartitions(
    const std::string& job_id, const DatasetSpec& dataset,
    const std::vector<std::string>& partitions) {
  if (absl::Status s = Enter({"ReleasePartitions", job_id, dataset.name,
                              absl::StrJoin(partitions, ",")});
      !s.ok()) {
    return s;
  }
  for (const std::string& partition : partitions) {
    if (absl::Status s = ValidatePartition(dataset.layout(), partition);
        !s.ok()) {
      return absl::Status(s.code(),
                          absl::StrCat("dataset ", dataset.name, " partition '",
                                       partition, "': ", s.message()));
    }
  }
  absl::MutexLock lock(&mu_);
  auto prepared = prepared_.find(job_id);
  if (prepared == prepared_.end()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job ", job_id, " is not prepared on this engine (PrepareJob first)"));
  }
  if (auto mine = prepared->second.partitions.find(dataset.name);
      mine != prepared->second.partitions.end()) {
    for (const std::string& partition : partitions)
      mine->second.erase(partition);
  }
  if (auto job = staging_.find(job_id); job != staging_.end()) {
    if (auto staged = job->second.staged.find(dataset.name);
        staged != job->second.staged.end()) {
      for (const std::string& partition : partitions) {
        staged->second.erase(partition);
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<ValidationReport> FakeEngine::ValidateStaged(
    const std::string& job_id, const DatasetSpec& dataset) {
  if (absl::Status s = Enter({"ValidateStaged", job_id, dataset.name, ""});
      !s.ok()) {
    return s;
  }
  absl::MutexLock lock(&mu_);
  const std::map<std::string, int64_t>* staged = nullptr;
  if (auto job = staging_.find(job_id); job != staging_.end()) {
    auto it = job->second.staged.find(dataset.name);
    if (it != job->second.staged.end()) staged = &it->second;
  }
  if (staged == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("nothing staged for ", dataset.name, " in job ", job_id));
  }
  ValidationReport report;
  report.rows = Sum(*staged);
  if (!dataset.partition) {
    report.rows_by_partition[""] = report.rows;
  } else {
    for (const auto& [partition, rows] : *staged) {
      if (rows > 0) report.rows_by_partition[partition] = rows;
    }
  }
  if (auto it = validation_failures_.find(dataset.name);
      it != validation_failures_.end()) {
    report.failures = it->second;
  }
  return report;
}

absl::StatusOr<PartitionDiff> FakeEngine::DiffPartition(
    const std::string& job_id, const DatasetSpec& dataset,
    const std::string& partition, int sample_limit) {
  if (absl::Status s =
          Enter({"DiffPartition", job_id, dataset.name, partition});
      !s.ok()) {
    return s;
  }
  absl::MutexLock lock(&mu_);
  const std::map<std::string, int64_t>* staged = nullptr;
  if (auto job = staging_.find(job_id); job != staging_.end()) {
    auto it = job->second.staged.find(dataset.name);
    if (it != job->second.staged.end()) staged = &it->second;
  }
  if (staged == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("nothing staged for ", dataset.name, " in job ", job_id));
  }
  PartitionDiff diff;
  diff.dataset = dataset.name;
  diff.partition = partition;
  if (auto it = staged->find(partition); it != staged->end()) {
    diff.rows_after = it->second;
  }
  if (auto table = published_.find(dataset.name); table != published_.end()) {
    if (auto it = table->second.find(partition); it != table->second.end()) {
      diff.rows_before = it->second;
    }
  }
  // Counts only: the rows common to both sides count as unchanged.
  diff.added = std::max<int64_t>(0, diff.rows_after - diff.rows_before);
  diff.removed = std::max<int64_t>(0, diff.rows_before - diff.rows_after);
  diff.unchanged = std::min(diff.rows_before, diff.rows_after);
  for (const std::string& m : MeasureColumns(dataset)) {
    diff.measures.push_back({m, 0, 0});
  }
  return diff;
}

absl::StatusOr<bool> FakeEngine::IsPublished(const std::string& job_id) {
  if (absl::Status s = Enter({"IsPublished", job_id, "", ""}); !s.ok()) {
    return s;
  }
  absl::MutexLock lock(&mu_);
  return markers_.count({claimed_, job_id}) > 0;
}

absl::Status FakeEngine::Publish(const JobLayout& layout) {
  if (absl::Status s = Enter({"Publish", layout.job_id, "", ""}); !s.ok()) {
    return s;
  }
  for (const JobLayout::Item& item : layout.items) {
    if (item.dataset == nullptr) {
      return absl::InvalidArgumentError("Publish: item without dataset");
    }
  }
  const std::string& job_id = layout.job_id;
  absl::MutexLock lock(&mu_);
  if (markers_.count({claimed_, job_id})) return absl::OkStatus();
  if (!claimed_.empty() && owner_ != claimed_) {
    return absl::FailedPreconditionError(
        absl::StrCat("publish of job ", job_id,
                     ": the warehouse no longer belongs to this state store (",
                     claimed_, "); nothing was published"));
  }
  // Every check before any change: all or nothing.
  auto job = staging_.find(job_id);
  for (const JobLayout::Item& item : layout.items) {
    const DatasetSpec& ds = *item.dataset;
    const std::string where =
        absl::StrCat("publish of job ", job_id, ", dataset ", ds.name);
    if (job == staging_.end() || !job->second.staged.count(ds.name)) {
      return absl::FailedPreconditionError(
          absl::StrCat(where, ": nothing is staged"));
    }
    if (!ds.partition) continue;
    const std::set<std::string> mine(item.partitions.begin(),
                                     item.partitions.end());
    for (const auto& [partition, rows] : job->second.staged.at(ds.name)) {
      if (rows > 0 && !mine.count(partition)) {
        return absl::InternalError(absl::StrCat(
            where, ": ", rows,
            " staged rows belong to none of the job's "
            "partitions (e.g. ",
            partition,
            "); the transaction was rolled back and nothing was published"));
      }
    }
  }
  for (const JobLayout::Item& item : layout.items) {
    const DatasetSpec& ds = *item.dataset;
    const std::map<std::string, int64_t>& staged =
        job->second.staged.at(ds.name);
    std::map<std::string, int64_t>& table = published_[ds.name];
    std::map<std::string, int64_t>& copy = copies_[{job_id, ds.name}];
    copy.clear();
    ForgetEditsLocked(ds.name, item.partitions, ds.partition.has_value());
    if (!ds.partition) {
      for (const auto& [partition, rows] : table) {
        if (rows > 0) copy[""] += rows;
      }
      table.clear();
      if (const int64_t rows = Sum(staged); rows > 0) table[""] = rows;
      continue;
    }
    for (const std::string& partition : item.partitions) {
      if (auto old = table.find(partition);
          old != table.end() && old->second > 0) {
        copy[partition] = old->second;
      }
      table.erase(partition);
      auto it = staged.find(partition);
      if (it != staged.end() && it->second > 0) table[partition] = it->second;
    }
  }
  for (const JobLayout::Item& item : layout.items) {
    const DatasetSpec& ds = *item.dataset;
    const std::map<std::string, int64_t>& staged =
        job->second.staged.at(ds.name);
    for (const CheckSpec& c : ds.checks) {
      if (c.kind != CheckKind::kMeasureChange) continue;
      for (const std::string& partition :
           ds.partition ? item.partitions : std::vector<std::string>{""}) {
        auto it = staged.find(partition);
        const int64_t rows = it == staged.end() ? 0 : it->second;
        const double value =
            measure_for_ ? measure_for_(ds.name, partition, c.column) : 1.0;
        published_sums_[ds.name][partition][c.column] = rows * value;
      }
    }
  }
  markers_.insert({claimed_, job_id});
  return absl::OkStatus();
}

absl::Status FakeEngine::DropStaging(const std::string& job_id) {
  if (absl::Status s = Enter({"DropStaging", job_id, "", ""}); !s.ok()) {
    return s;
  }
  absl::MutexLock lock(&mu_);
  staging_.erase(job_id);
  prepared_.erase(job_id);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> FakeEngine::ListJobsWithStaging() {
  if (absl::Status s = Enter({"ListJobsWithStaging", "", "", ""}); !s.ok()) {
    return s;
  }
  absl::MutexLock lock(&mu_);
  std::vector<std::string> ids;
  for (const auto& [job_id, staging] : staging_) {
    if (staging.staged.empty() && staging.pins.empty()) continue;
    if (IsStoreJobId(job_id)) ids.push_back(job_id);
  }
  return ids;  // map order: sorted
}

absl::StatusOr<Profile> FakeEngine::ProfileStaged(
    const std::string& job_id, const DatasetSpec& dataset,
    const ProfileRequest& request) {
  if (absl::Status s = Enter({"ProfileStaged", job_id, dataset.name, ""});
      !s.ok()) {
    return s;
  }
  Profile out;
  ProfileEdit edit;
  {
    absl::MutexLock lock(&mu_);
    auto prepared = prepared_.find(job_id);
    if (prepared == prepared_.end()) {
      return absl::FailedPreconditionError(
          absl::StrCat("job ", job_id,
                       " is not prepared on this engine (PrepareJob first)"));
    }
    auto job = staging_.find(job_id);
    if (job == staging_.end() || !job->second.staged.count(dataset.name)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "nothing staged for ", dataset.name, " in job ", job_id));
    }
    const std::set<std::string>& mine =
        prepared->second.partitions[dataset.name];
    for (const auto& [partition, rows] : job->second.staged.at(dataset.name)) {
      if (rows <= 0 || (dataset.partition && !mine.count(partition))) continue;
      PartitionProfile& p = out[partition];
      p.rows = rows;
      for (const std::string& m : request.measures) {
        p.mutable_sums()[m] =
            rows *
            (measure_for_ ? measure_for_(dataset.name, partition, m) : 1.0);
      }
      for (const std::string& c : request.null_columns) p.mutable_nulls()[c];
      if (!request.references.empty()) {
        p.mutable_orphans().resize(request.references.size());
      }
    }
    edit = profile_edit_;
  }
  if (edit) {
    for (auto& [partition, p] : out) edit(dataset.name, partition, &p);
  }
  return out;
}

absl::StatusOr<Profile> FakeEngine::ProfilePublished(
    const std::string& job_id, const DatasetSpec& dataset,
    const ProfileRequest& request) {
  if (absl::Status s = Enter({"ProfilePublished", job_id, dataset.name, ""});
      !s.ok()) {
    return s;
  }
  absl::MutexLock lock(&mu_);
  auto prepared = prepared_.find(job_id);
  if (prepared == prepared_.end()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job ", job_id, " is not prepared on this engine (PrepareJob first)"));
  }
  Profile out;
  auto table = published_.find(dataset.name);
  if (table == published_.end()) return out;
  const std::set<std::string>& mine = prepared->second.partitions[dataset.name];
  for (const auto& [partition, rows] : table->second) {
    if (rows <= 0 || (dataset.partition && !mine.count(partition))) continue;
    PartitionProfile& p = out[partition];
    p.rows = rows;
    for (const std::string& m : request.measures) {
      auto sums = published_sums_.find(dataset.name);
      double sum = static_cast<double>(rows);  // 1.0 per row by default
      if (sums != published_sums_.end()) {
        auto part = sums->second.find(partition);
        if (part != sums->second.end() && part->second.count(m)) {
          sum = part->second.at(m);
        }
      }
      p.mutable_sums()[m] = sum;
    }
  }
  return out;
}

absl::StatusOr<std::map<std::string, CountWithSamples>>
FakeEngine::RunAssertion(const std::string& job_id, const DatasetSpec& dataset,
                         const std::string& sql, int samples) {
  if (absl::Status s = Enter({"RunAssertion", job_id, dataset.name, ""});
      !s.ok()) {
    return s;
  }
  std::set<std::string> partitions;
  AssertionRows rows_of;
  {
    absl::MutexLock lock(&mu_);
    auto prepared = prepared_.find(job_id);
    if (prepared == prepared_.end() ||
        !prepared->second.partitions.count(dataset.name)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "dataset ", dataset.name, " is not recomputed by job ", job_id));
    }
    partitions = prepared->second.partitions.at(dataset.name);
    rows_of = assertion_rows_;
  }
  std::map<std::string, CountWithSamples> out;
  for (const std::string& partition : partitions) {
    CountWithSamples& c = out[partition];
    c.count = rows_of
                  ? std::max<int64_t>(rows_of(dataset.name, sql, partition), 0)
                  : 0;
    for (int64_t i = 0; i < std::min<int64_t>(c.count, samples); ++i) {
      c.samples.push_back(absl::StrCat("(row=", i + 1, ")"));
    }
  }
  return out;
}

absl::StatusOr<QueryShape> FakeEngine::DescribeQuery(
    const std::string& sql, const std::vector<const DatasetSpec*>& stand_ins,
    const DatasetSpec* own) {
  if (absl::Status s = Enter({"DescribeQuery", "", own ? own->name : "", ""});
      !s.ok()) {
    return s;
  }
  {
    absl::MutexLock lock(&mu_);
    auto it = query_shapes_.find(sql);
    if (it != query_shapes_.end()) return it->second;
  }
  QueryShape shape;
  for (const DatasetSpec* ds : stand_ins) {
    if (ds != nullptr && ds->transform == sql) {
      for (const ColumnSpec& c : ds->columns) shape.columns.push_back(c.name);
      break;
    }
  }
  return shape;
}

absl::StatusOr<std::optional<std::vector<ColumnSpec>>>
FakeEngine::DescribeTable(const DatasetSpec& dataset) {
  if (absl::Status s = Enter({"DescribeTable", "", dataset.name, ""});
      !s.ok()) {
    return s;
  }
  absl::MutexLock lock(&mu_);
  if (auto it = published_columns_.find(dataset.name);
      it != published_columns_.end()) {
    return std::optional<std::vector<ColumnSpec>>(it->second);
  }
  if (!published_.count(dataset.name)) {
    return std::optional<std::vector<ColumnSpec>>();
  }
  return std::optional<std::vector<ColumnSpec>>(dataset.columns);
}

}  // namespace backfill::testing
