#include "core/plan/stale_lineage.h"

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/model/partition.h"
#include "core/plan/stale_dependents.h"
#include "core/plan/stale_reason.h"

namespace backfill {

namespace {

// Adds to the reason of each partition whose changed input lineage shows
// replaced by a later job (core/plan/stale_dependents.h) which job did it:
// "input daily_revenue/2025-03-01 changed: republished by bf-3 with
// `exclude_downstream`". The reason names the first changed input lineage
// explains.
absl::Status NameReplacingJobs(
    const Catalog& catalog, StateStore& store, const DatasetSpec& dataset,
    const std::map<std::string, std::vector<const InputFingerprint*>>& changed,
    std::vector<StalePartition>* stale) {
  std::vector<std::string> partitions;
  for (const auto& [p, inputs] : changed) partitions.push_back(p);
  ASSIGN_OR_RETURN(std::vector<StaleDependent> explained,
                   FindStaleDependents(catalog, store, dataset, partitions));
  std::map<std::string, const StaleDependent*> by_partition;
  for (const StaleDependent& sd : explained) by_partition[sd.partition] = &sd;
  for (StalePartition& sp : *stale) {
    auto sd = by_partition.find(sp.partition);
    auto in = changed.find(sp.partition);
    if (sd == by_partition.end() || in == changed.end()) continue;
    for (const InputFingerprint* f : in->second) {
      const StaleInput* known = nullptr;
      for (const StaleInput& si : sd->second->inputs) {
        if (si.dataset == f->dataset && si.partition == f->partition) {
          known = &si;
          break;
        }
      }
      if (known == nullptr) continue;
      sp.reason = absl::StrCat(InputChangedReason(*f, in->second.size() - 1),
                               ": ", DescribeStaleInput(*known));
      break;
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<StalePartition>> FindStalePartitions(
    const Catalog& catalog, Engine& engine, StateStore& store,
    const DatasetSpec& dataset) {
  ASSIGN_OR_RETURN(auto versions, store.VerifiedVersions(dataset.name, {}));
  if (versions.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "nothing to backfill automatically: no partition of ", dataset.name,
        " was published with recorded lineage yet; give its scope with "
        "`from_partition`/`to_partition` or `partitions`"));
  }
  return StalePartitionsOf(catalog, engine, store, dataset, versions);
}

absl::StatusOr<std::vector<StalePartition>> StalePartitionsOf(
    const Catalog& catalog, Engine& engine, StateStore& store,
    const DatasetSpec& dataset,
    const std::map<std::string, VerifiedVersion>& versions) {
  // Every input partition a version of the current transform read, by
  // input dataset; those that cannot be asked for count as changed.
  std::map<std::string, std::set<std::string>> needed;
  for (const auto& [partition, v] : versions) {
    if (v.transform_version != dataset.transform_version) continue;
    for (const InputFingerprint& in : v.inputs) {
      const DatasetSpec* up = catalog.Find(in.dataset);
      if (up == nullptr) continue;
      if (!in.partition.empty() &&
          !ValidatePartition(up->layout(), in.partition).ok()) {
        continue;
      }
      needed[in.dataset].insert(in.partition);
    }
  }
  std::map<std::string, std::map<std::string, InputFingerprint>> now;
  for (const auto& [name, partitions] : needed) {
    ASSIGN_OR_RETURN(now[name], engine.CurrentFingerprints(
                                    *catalog.Find(name),
                                    std::vector<std::string>(
                                        partitions.begin(), partitions.end())));
  }
  std::vector<StalePartition> stale;
  // The changed inputs of each stale partition, to name (from lineage) the
  // job that replaced them.
  std::map<std::string, std::vector<const InputFingerprint*>> changed_inputs;
  for (const auto& [partition, v] : versions) {
    if (v.transform_version != dataset.transform_version) {
      stale.push_back({partition, kVersionChangedReason,
                       StalePartition::Cause::kTransformVersion});
      continue;
    }
    std::vector<const InputFingerprint*> changed;
    std::string inputs_now;
    for (const InputFingerprint& in : v.inputs) {
      const std::string* fingerprint_now = nullptr;
      if (auto ds = now.find(in.dataset); ds != now.end()) {
        auto current = ds->second.find(in.partition);
        if (current != ds->second.end()) {
          fingerprint_now = &current->second.fingerprint;
        }
      }
      if (fingerprint_now == nullptr || *fingerprint_now != in.fingerprint) {
        changed.push_back(&in);
        absl::StrAppend(
            &inputs_now, inputs_now.empty() ? "" : ";", in.dataset, "/",
            in.partition, "=",
            fingerprint_now == nullptr ? "<gone>" : *fingerprint_now);
      }
    }
    if (!changed.empty()) {
      stale.push_back(
          {partition, InputChangedReason(*changed.front(), changed.size() - 1),
           StalePartition::Cause::kInputChanged, std::move(inputs_now)});
      changed_inputs[partition] = std::move(changed);
    }
  }
  if (!changed_inputs.empty()) {
    RETURN_IF_ERROR(
        NameReplacingJobs(catalog, store, dataset, changed_inputs, &stale));
  }
  return stale;
}

}  // namespace backfill
