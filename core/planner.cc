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
#include "core/affected_by.h"
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

// The target's reason: "requested", or "requested: affected by orders:
// refund > 0".
std::string RequestedReason(const BackfillRequest& request) {
  if (request.affected_by.empty()) return "requested";
  absl::StatusOr<AffectedBy> parsed = ParseAffectedBy(request.affected_by);
  return absl::StrCat("requested: affected by ", parsed.ok()
                                                     ? AffectedByText(*parsed)
                                                     : request.affected_by);
}

}  // namespace

absl::StatusOr<std::set<std::string>> Planner::FullPartitionsOf(
    const DatasetSpec& d) const {
  if (d.grain() == Grain::kNone) return std::set<std::string>{""};
  if (d.grain() == Grain::kKey) {
    return std::set<std::string>(d.partition->keys.begin(),
                                 d.partition->keys.end());
  }
  std::set<std::string> all;
  bool has_identity = false;
  for (const UpstreamEdge& e : d.upstream) {
    if (e.mapping != Mapping::kIdentity) continue;
    has_identity = true;
    ASSIGN_OR_RETURN(RowCounts c,
                     engine_->CountRowsByPartition(*catalog_->Find(e.dataset)));
    for (const auto& [p, n] : c) all.insert(p);
  }
  if (!has_identity) {
    ASSIGN_OR_RETURN(RowCounts c, engine_->CountRowsByPartition(d));
    for (const auto& [p, n] : c) all.insert(p);
  }
  return all;
}

absl::StatusOr<std::vector<std::string>> Planner::MapDownstream(
    const DatasetSpec& from, const std::vector<std::string>& partitions,
    const DatasetSpec& to) const {
  const std::set<std::string> seed(partitions.begin(), partitions.end());
  if (from.name == to.name) {
    return std::vector<std::string>(seed.begin(), seed.end());
  }
  // Affected partitions per dataset, propagated in topological order, so
  // that a dataset's set is complete (over all its paths) before it is
  // passed on.
  std::map<std::string, std::set<std::string>> affected;
  affected[from.name] = seed;
  for (const DatasetSpec& d : catalog_->datasets()) {
    auto it = affected.find(d.name);
    if (it == affected.end() || it->second.empty()) continue;
    if (d.name == to.name) break;
    for (const DatasetSpec* dep : catalog_->DirectDependents(d.name)) {
      for (const UpstreamEdge& e : dep->upstream) {
        if (e.dataset != d.name) continue;
        std::set<std::string>& dst = affected[dep->name];
        switch (e.mapping) {
          case Mapping::kIdentity:
            dst.insert(it->second.begin(), it->second.end());
            break;
          case Mapping::kAll: {
            ASSIGN_OR_RETURN(std::set<std::string> all, FullPartitionsOf(*dep));
            dst.insert(all.begin(), all.end());
            break;
          }
        }
      }
    }
  }
  auto it = affected.find(to.name);
  if (it == affected.end()) return std::vector<std::string>{};
  return std::vector<std::string>(it->second.begin(), it->second.end());
}

absl::StatusOr<std::vector<std::string>> Planner::ResolveAffectedBy(
    const DatasetSpec& target, const BackfillRequest& request) const {
  if (!request.from.empty() || !request.to.empty() ||
      !request.partitions.empty()) {
    return absl::InvalidArgumentError(
        "affected_by is a scope of its own: give either --affected-by or "
        "--from/--to/--partitions, not both");
  }
  ASSIGN_OR_RETURN(AffectedBy affected, ParseAffectedBy(request.affected_by));
  // The target and everything it reads, transitively.
  std::set<std::string> readable;
  std::vector<const DatasetSpec*> pending = {&target};
  while (!pending.empty()) {
    const DatasetSpec* d = pending.back();
    pending.pop_back();
    if (!readable.insert(d->name).second) continue;
    for (const UpstreamEdge& e : d->upstream) {
      if (const DatasetSpec* up = catalog_->Find(e.dataset)) {
        pending.push_back(up);
      }
    }
  }
  const DatasetSpec* from = catalog_->Find(affected.dataset);
  std::vector<std::string> upstreams;
  for (const std::string& name : readable) {
    if (name != target.name) upstreams.push_back(name);
  }
  const std::string choices = absl::StrCat(
      "; give \"", target.name, "\" or one of its upstreams (",
      upstreams.empty() ? "it has none" : absl::StrJoin(upstreams, ", "), ")");
  if (from == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "affected_by: unknown dataset \"", affected.dataset, "\"", choices));
  }
  if (readable.count(from->name) == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("affected_by: dataset \"", from->name,
                     "\" is not upstream of \"", target.name, "\"", choices));
  }
  ASSIGN_OR_RETURN(std::vector<std::string> matching,
                   engine_->PartitionsMatching(*from, affected.predicate,
                                               limits_.max_partitions));
  if (matching.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("no partition of ", from->name, " has a row where ",
                     affected.predicate, "; nothing to backfill"));
  }
  ASSIGN_OR_RETURN(std::vector<std::string> mapped,
                   MapDownstream(*from, matching, target));
  if (mapped.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the ", matching.size(), " partition(s) of ", from->name,
        " with a row where ", affected.predicate, " affect no partition of ",
        target.name, "; nothing to backfill"));
  }
  if (mapped.size() > limits_.max_partitions) {
    return absl::InvalidArgumentError(absl::StrCat(
        "affected_by: ", mapped.size(), " partitions of ", target.name,
        " are affected; at most ", limits_.max_partitions,
        " per backfill: narrow the predicate"));
  }
  return mapped;
}

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
  std::vector<std::string> requested;
  if (request.affected_by.empty()) {
    ASSIGN_OR_RETURN(requested,
                     ResolveScope(*target, request, limits_.max_partitions));
  } else {
    ASSIGN_OR_RETURN(requested, ResolveAffectedBy(*target, request));
  }

  // Row counts per upstream and per dataset, fetched once each.
  std::map<std::string, RowCounts> counts;
  auto counts_of = [&](const DatasetSpec& d) -> absl::StatusOr<RowCounts*> {
    auto it = counts.find(d.name);
    if (it == counts.end()) {
      ASSIGN_OR_RETURN(RowCounts c, engine_->CountRowsByPartition(d));
      it = counts.emplace(d.name, std::move(c)).first;
    }
    return &it->second;
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
      ASSIGN_OR_RETURN(RowCounts * c, counts_of(*catalog_->Find(e.dataset)));
      for (const auto& [p, n] : *c) all.insert(p);
    }
    if (!has_identity) {
      ASSIGN_OR_RETURN(RowCounts * c, counts_of(d));
      for (const auto& [p, n] : *c) all.insert(p);
    }
    return all;
  };
  // Whole-table row counts, summed once per upstream.
  std::map<std::string, double> totals;
  auto cost_of = [&](const DatasetSpec& d,
                     const std::string& partition) -> absl::StatusOr<double> {
    double cost = 0;
    for (const UpstreamEdge& e : d.upstream) {
      ASSIGN_OR_RETURN(RowCounts * c, counts_of(*catalog_->Find(e.dataset)));
      if (e.mapping == Mapping::kIdentity) {
        auto it = c->find(partition);
        if (it != c->end()) cost += static_cast<double>(it->second);
        continue;
      }
      auto total = totals.find(e.dataset);
      if (total == totals.end()) {
        double sum = 0;
        for (const auto& [p, n] : *c) sum += static_cast<double>(n);
        total = totals.emplace(e.dataset, sum).first;
      }
      cost += total->second;
    }
    return cost;
  };

  // Partitions per dataset, propagated to dependents in topological order.
  std::map<std::string, std::set<std::string>> scope;
  std::map<std::string, std::string> reason;
  scope[target->name].insert(requested.begin(), requested.end());
  reason[target->name] = RequestedReason(request);
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
    for (const std::string& p : dp.partitions) {
      ASSIGN_OR_RETURN(double c, cost_of(d, p));
      dp.cost.backfill += c;
    }
    ASSIGN_OR_RETURN(std::set<std::string> all, full_partitions(d));
    for (const std::string& p : all) {
      ASSIGN_OR_RETURN(double c, cost_of(d, p));
      dp.cost.full_reload += c;
    }
    plan.cost.backfill += dp.cost.backfill;
    plan.cost.full_reload += dp.cost.full_reload;
    total += dp.partitions.size();
    plan.datasets.push_back(std::move(dp));
  }
  if (total > limits_.max_partitions) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the plan has ", total, " partitions (with dependents); at most ",
        limits_.max_partitions, " per backfill: narrow the scope"));
  }
  return plan;
}

}  // namespace backfill
