#include "core/planner.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/cost_budget.h"
#include "core/cost_estimator.h"
#include "core/partition.h"
#include "core/status_macros.h"

namespace backfill {
namespace {

using RowCounts = std::map<std::string, int64_t>;

std::string KnownDerived(const Catalog& catalog) {
  std::vector<std::string> names;
  for (const DatasetSpec& d : catalog.datasets()) {
    if (d.is_derived()) names.push_back(d.name);
  }
  return names.empty() ? "none" : absl::StrJoin(names, ", ");
}

// Resolves the requested scope of `ds` into sorted, unique partitions.
absl::StatusOr<std::vector<std::string>> ResolveScope(const DatasetSpec& ds,
                                                      const BackfillRequest& r,
                                                      size_t max_partitions) {
  const Grain grain = ds.grain();
  const bool has_range = !r.from.empty() || !r.to.empty();
  const bool has_list = !r.partitions.empty();
  if (grain == Grain::kNone) {
    if (has_range || has_list) {
      return absl::InvalidArgumentError(absl::StrCat(
          "dataset \"", ds.name,
          "\" is unpartitioned: give no --from/--to/--partitions; the whole "
          "table is recomputed"));
    }
    return std::vector<std::string>{""};
  }
  if (has_range && has_list) {
    return absl::InvalidArgumentError(
        "give either a range (--from/--to) or a partition list "
        "(--partitions), not both");
  }
  if (!has_range && !has_list) {
    return absl::InvalidArgumentError(absl::StrCat(
        "no scope: give --from A --to B (half-open) or --partitions p1,p2 "
        "for dataset \"",
        ds.name, "\" (grain ", GrainName(grain), ")"));
  }
  std::vector<std::string> out;
  if (has_range) {
    if (grain == Grain::kKey) {
      return absl::InvalidArgumentError(
          absl::StrCat("dataset \"", ds.name,
                       "\" is partitioned by key: a range has no meaning; give "
                       "--partitions"));
    }
    if (r.from.empty() || r.to.empty()) {
      return absl::InvalidArgumentError(
          "a range needs both --from and --to (half-open: [from, to))");
    }
    ASSIGN_OR_RETURN(out, EnumerateRange(grain, r.from, r.to, max_partitions));
    return out;
  }
  std::set<std::string> unique;
  for (const std::string& p : r.partitions) {
    RETURN_IF_ERROR(ValidatePartition(grain, p));
    if (grain == Grain::kKey &&
        std::find(ds.partition->keys.begin(), ds.partition->keys.end(), p) ==
            ds.partition->keys.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "\"", p, "\" is not a key of dataset \"", ds.name,
          "\"; declared keys: ", absl::StrJoin(ds.partition->keys, ", ")));
    }
    unique.insert(p);
  }
  if (unique.size() > max_partitions) {
    return absl::InvalidArgumentError(
        absl::StrCat(unique.size(), " partitions requested; at most ",
                     max_partitions, " per backfill"));
  }
  out.assign(unique.begin(), unique.end());
  return out;
}

}  // namespace

std::vector<InputRef> Planner::InputsOf(const DatasetSpec& dataset,
                                        const std::string& partition) const {
  std::vector<InputRef> inputs;
  for (const UpstreamEdge& edge : dataset.upstream) {
    const DatasetSpec* up = catalog_->Find(edge.dataset);
    if (up == nullptr) continue;  // Catalog::Build guarantees it exists.
    InputRef ref;
    ref.dataset = up;
    if (edge.mapping == Mapping::kIdentity) ref.partition = partition;
    inputs.push_back(std::move(ref));
  }
  return inputs;
}

absl::StatusOr<Plan> Planner::MakePlan(const BackfillRequest& request) const {
  const DatasetSpec* target = catalog_->Find(request.dataset);
  if (request.dataset.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "no dataset given; derived datasets: ", KnownDerived(*catalog_)));
  }
  if (target == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown dataset \"", request.dataset,
                     "\"; derived datasets: ", KnownDerived(*catalog_)));
  }
  if (!target->is_derived()) {
    std::vector<std::string> readers;
    for (const DatasetSpec* d : catalog_->DirectDependents(target->name)) {
      readers.push_back(d->name);
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "dataset \"", target->name,
        "\" is a source: backfilld never writes sources; backfill a derived "
        "dataset that reads it",
        readers.empty()
            ? ""
            : absl::StrCat(" (", absl::StrJoin(readers, ", "), ")")));
  }
  RETURN_IF_ERROR(ValidateMaxCost(request.max_cost));
  ASSIGN_OR_RETURN(std::vector<std::string> requested,
                   ResolveScope(*target, request, limits_.max_partitions));

  // Row counts per dataset from the engine's partition statistics, fetched
  // once each: what decides the partitions a full reload covers.
  CostEstimator estimator(
      catalog_, engine_, history_,
      [this](const DatasetSpec& d, const std::string& partition) {
        return InputsOf(d, partition);
      });
  auto counts_of =
      [&](const DatasetSpec& d) -> absl::StatusOr<const RowCounts*> {
    ASSIGN_OR_RETURN(const PartitionStats* stats, estimator.Stats(d));
    return &stats->rows;
  };
  // Every partition a full reload of `d` recomputes.
  auto full_partitions =
      [&](const DatasetSpec& d) -> absl::StatusOr<std::set<std::string>> {
    std::set<std::string> all;
    if (d.grain() == Grain::kNone) return std::set<std::string>{""};
    if (d.grain() == Grain::kKey) {
      return std::set<std::string>(d.partition->keys.begin(),
                                   d.partition->keys.end());
    }
    bool has_identity = false;
    for (const UpstreamEdge& e : d.upstream) {
      if (e.mapping != Mapping::kIdentity) continue;
      has_identity = true;
      ASSIGN_OR_RETURN(const RowCounts* c,
                       counts_of(*catalog_->Find(e.dataset)));
      for (const auto& [p, n] : *c) all.insert(p);
    }
    if (!has_identity) {
      ASSIGN_OR_RETURN(const RowCounts* c, counts_of(d));
      for (const auto& [p, n] : *c) all.insert(p);
    }
    return all;
  };
  // Partitions per dataset, propagated to dependents in topological order.
  std::map<std::string, std::set<std::string>> scope;
  std::map<std::string, std::string> reason;
  scope[target->name].insert(requested.begin(), requested.end());
  reason[target->name] = "requested";
  if (!request.exclude_downstream) {
    for (const DatasetSpec& d : catalog_->datasets()) {
      auto it = scope.find(d.name);
      if (it == scope.end()) continue;
      for (const DatasetSpec* dep : catalog_->DirectDependents(d.name)) {
        for (const UpstreamEdge& e : dep->upstream) {
          if (e.dataset != d.name) continue;
          std::set<std::string>& dst = scope[dep->name];
          if (e.mapping == Mapping::kIdentity) {
            dst.insert(it->second.begin(), it->second.end());
          } else {
            ASSIGN_OR_RETURN(std::set<std::string> all, full_partitions(*dep));
            dst.insert(all.begin(), all.end());
          }
          reason.emplace(dep->name, absl::StrCat("downstream of ", d.name));
        }
      }
    }
  }

  Plan plan;
  size_t total = 0;
  for (const DatasetSpec& d : catalog_->datasets()) {
    auto it = scope.find(d.name);
    if (it == scope.end()) continue;
    DatasetPlan dp;
    dp.dataset = d.name;
    dp.partitions.assign(it->second.begin(), it->second.end());
    dp.reason = reason[d.name];
    dp.transform_version = d.transform_version;
    total += dp.partitions.size();
    plan.datasets.push_back(std::move(dp));
  }
  if (total > limits_.max_partitions) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the plan has ", total, " partitions (with dependents); at most ",
        limits_.max_partitions, " per backfill: narrow the scope"));
  }
  for (DatasetPlan& dp : plan.datasets) {
    const DatasetSpec& d = *catalog_->Find(dp.dataset);
    ASSIGN_OR_RETURN(std::set<std::string> all, full_partitions(d));
    RETURN_IF_ERROR(estimator.Estimate(d, all, &dp));
    plan.cost.backfill += dp.cost.backfill;
    plan.cost.full_reload += dp.cost.full_reload;
  }
  ApplyBudgets(*catalog_, request, &plan);
  return plan;
}

}  // namespace backfill
