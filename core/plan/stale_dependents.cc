#include "core/plan/stale_dependents.h"

#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/plan/stale_reason.h"

namespace backfill {

std::string DescribeStaleInput(const StaleInput& input) {
  if (input.action == LineageAction::kRollback) {
    return absl::StrCat("restored by the rollback of ", input.job_id);
  }
  return absl::StrCat(
      "republished by ", input.job_id,
      input.excluded_downstream ? " with `exclude_downstream`" : "");
}

std::string StaleInputReason(const StaleInput& first, size_t more) {
  InputFingerprint input;
  input.dataset = first.dataset;
  input.partition = first.partition;
  return absl::StrCat(InputChangedReason(input, more), ": ",
                      DescribeStaleInput(first));
}

absl::StatusOr<std::vector<StaleDependent>> FindStaleDependents(
    const Catalog& catalog, StateStore& store, const DatasetSpec& dataset,
    const std::vector<std::string>& partitions) {
  std::vector<StaleDependent> out;
  if (!dataset.is_derived()) return out;
  ASSIGN_OR_RETURN(auto versions,
                   store.VerifiedVersions(dataset.name, partitions));
  if (versions.empty()) return out;

  // Every lineage record of a (dataset, partition), newest first (by id),
  // read once.
  std::map<std::pair<std::string, std::string>, std::vector<LineageRecord>>
      lineage;
  auto lineage_of = [&](const std::string& ds, const std::string& p)
      -> absl::StatusOr<const std::vector<LineageRecord>*> {
    auto key = std::make_pair(ds, p);
    auto it = lineage.find(key);
    if (it == lineage.end()) {
      ASSIGN_OR_RETURN(std::vector<LineageRecord> records,
                       store.GetLineage(ds, p));
      it = lineage.emplace(key, std::move(records)).first;
    }
    return &it->second;
  };
  std::map<std::string, bool> excluded;
  std::map<std::string, absl::Time> ended;  // of jobs of UNCHANGED versions

  // Whether `record` (of an input) was appended after the version `v` of
  // `partition` was: after `v`'s own publish record, or for an UNCHANGED
  // version (which has none) published after its job ended.
  auto recorded_after =
      [&](const std::string& partition, const VerifiedVersion& v,
          const LineageRecord& record) -> absl::StatusOr<bool> {
    if (v.unchanged) {
      auto it = ended.find(v.job_id);
      if (it == ended.end()) {
        ASSIGN_OR_RETURN(Job job, store.GetJobProgress(v.job_id));
        it = ended.emplace(v.job_id, job.end_time).first;
      }
      return record.published_at > it->second;
    }
    ASSIGN_OR_RETURN(const std::vector<LineageRecord>* own,
                     lineage_of(dataset.name, partition));
    for (const LineageRecord& r : *own) {
      if (r.job_id == v.job_id && r.action == LineageAction::kPublish) {
        return record.id > r.id;
      }
    }
    return false;
  };

  // Whether `records.front()`, the newest lineage record of an input whose
  // rows the version read with another fingerprint, replaced what it read.
  // When an older record of the input has the fingerprint the version
  // read, it read the rows that record left, which the newest replaced
  // since. Otherwise lineage does not know the rows it read (the input was
  // written outside backfilld), and only the order of the records tells.
  auto replaced_since_read =
      [&](const std::string& partition, const VerifiedVersion& v,
          const InputFingerprint& in,
          const std::vector<LineageRecord>& records) -> absl::StatusOr<bool> {
    for (size_t i = 1; i < records.size(); ++i) {
      if (records[i].output_fingerprint == in.fingerprint) return true;
    }
    return recorded_after(partition, v, records.front());
  };

  // The newest lineage record of any partition of a dataset, read once.
  std::map<std::string, std::optional<LineageRecord>> newest_of_dataset;

  for (const auto& [partition, v] : versions) {
    StaleDependent sd;
    for (const InputFingerprint& in : v.inputs) {
      const DatasetSpec* up = catalog.Find(in.dataset);
      if (up == nullptr || !up->is_derived()) continue;
      const LineageRecord* newest = nullptr;
      if (in.partition.empty() && up->partition) {
        // Read whole from a partitioned dataset: no one record holds its
        // fingerprint; any partition of it recorded after the version
        // changed what it read.
        auto it = newest_of_dataset.find(in.dataset);
        if (it == newest_of_dataset.end()) {
          ASSIGN_OR_RETURN(std::optional<LineageRecord> rec,
                           store.NewestLineageOf(in.dataset));
          it = newest_of_dataset.emplace(in.dataset, std::move(rec)).first;
        }
        if (!it->second.has_value()) continue;
        ASSIGN_OR_RETURN(bool after, recorded_after(partition, v, *it->second));
        if (!after) continue;
        newest = &*it->second;
      } else {
        ASSIGN_OR_RETURN(const std::vector<LineageRecord>* records,
                         lineage_of(in.dataset, in.partition));
        if (records->empty()) continue;
        if (records->front().output_fingerprint == in.fingerprint) continue;
        ASSIGN_OR_RETURN(bool replaced,
                         replaced_since_read(partition, v, in, *records));
        if (!replaced) continue;
        newest = &records->front();
      }
      const LineageRecord& r = *newest;
      StaleInput si;
      si.dataset = in.dataset;
      si.partition = in.partition;
      si.read_fingerprint = in.fingerprint;
      // A record of one partition does not hold the fingerprint of a
      // dataset read whole.
      if (!in.partition.empty() || !up->partition) {
        si.now_fingerprint = r.output_fingerprint;
      }
      si.job_id = r.job_id;
      si.action = r.action;
      si.at = r.published_at;
      if (r.action == LineageAction::kPublish) {
        auto ex = excluded.find(r.job_id);
        if (ex == excluded.end()) {
          ASSIGN_OR_RETURN(Job job, store.GetJobProgress(r.job_id));
          ex = excluded.emplace(r.job_id, job.request.exclude_downstream).first;
        }
        si.excluded_downstream = ex->second;
      }
      sd.inputs.push_back(std::move(si));
    }
    if (sd.inputs.empty()) continue;
    sd.dataset = dataset.name;
    sd.partition = partition;
    sd.version_job = v.job_id;
    sd.reason = StaleInputReason(sd.inputs.front(), sd.inputs.size() - 1);
    out.push_back(std::move(sd));
  }
  return out;
}

}  // namespace backfill
