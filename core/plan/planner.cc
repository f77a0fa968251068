#include "core/plan/planner.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/error_details.h"
#include "core/base/status_macros.h"
#include "core/model/entity_keys.h"
#include "core/model/partition.h"
#include "core/model/partition_layout.h"
#include "core/model/upstream_mapping.h"
#include "core/plan/affected_by.h"
#include "core/plan/cost_budget.h"
#include "core/plan/cost_estimator.h"
#include "core/plan/stale_lineage.h"

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

// `status`, the refusal of the range of `r`, naming the end that is not a
// partition of `ds` (EnumerateRange says "range start: ..." or "range end:
// ..."), or both ends when the range itself is refused (reversed, too
// long, two keys).
absl::Status NameRangeFields(const DatasetSpec& ds, const BackfillRequest& r,
                             const absl::Status& status) {
  const bool bad_from = absl::StartsWith(status.message(), "range start:");
  const bool bad_to = absl::StartsWith(status.message(), "range end:");
  absl::Status named = WithReason(
      status, bad_from || bad_to ? "PARTITION_MALFORMED" : "RANGE_INVALID",
      {{"dataset", ds.name}});
  if (!bad_to) {
    named = WithFieldViolation(named, "from_partition", status.message());
  }
  if (!bad_from) {
    named = WithFieldViolation(named, "to_partition", status.message());
  }
  return named;
}

// Sorts `v` and drops repeats (only a check when it is sorted already).
void SortUnique(std::vector<std::string>* v) {
  if (!std::is_sorted(v->begin(), v->end())) std::sort(v->begin(), v->end());
  v->erase(std::unique(v->begin(), v->end()), v->end());
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
      return InvalidFieldError(
          has_list ? "partitions" : "from_partition", "SCOPE_INVALID",
          absl::StrCat("dataset \"", ds.name,
                       "\" is unpartitioned: give no `from_partition`, "
                       "`to_partition` or `partitions`; the whole table is "
                       "recomputed"));
    }
    return std::vector<std::string>{""};
  }
  if (has_range && has_list) {
    return InvalidFieldError(
        "partitions", "SCOPE_INVALID",
        "give either a range (`from_partition`, `to_partition`) or a "
        "partition list (`partitions`), not both");
  }
  if (!has_range && !has_list) {
    return WithReason(
        absl::InvalidArgumentError(absl::StrCat(
            "no scope: give a half-open range (`from_partition`, "
            "`to_partition`), a partition list (`partitions`), `affected_by` "
            "or `auto_detect` for dataset \"",
            ds.name, "\" (grain ", LayoutName(ds.layout()), ")")),
        "SCOPE_MISSING", {{"dataset", ds.name}});
  }
  std::vector<std::string> out;
  const PartitionLayout layout = ds.layout();
  if (has_range) {
    if (grain == Grain::kKey) {
      return InvalidFieldError(
          "from_partition", "SCOPE_INVALID",
          absl::StrCat("dataset \"", ds.name,
                       "\" is partitioned by key: a range has no meaning; "
                       "list the keys in `partitions`"));
    }
    if (r.from.empty() || r.to.empty()) {
      return InvalidFieldError(
          r.from.empty() ? "from_partition" : "to_partition", "SCOPE_INVALID",
          "a range needs both `from_partition` and `to_partition` (half-open: "
          "[from_partition, to_partition))");
    }
    absl::StatusOr<std::vector<std::string>> range =
        EnumerateRange(layout, r.from, r.to, max_partitions);
    if (!range.ok()) return NameRangeFields(ds, r, range.status());
    return *std::move(range);
  }
  // The list as sent is what is limited: a repeated partition counts each
  // time, so that a request's size, not what it reduces to, is bounded.
  if (r.partitions.size() > max_partitions) {
    return InvalidFieldError(
        "partitions", "PLAN_TOO_LARGE",
        absl::StrCat("`partitions` holds ", r.partitions.size(),
                     " items; at most ", max_partitions,
                     " per backfill, counting every item as sent (a repeated "
                     "partition counts each time)"));
  }
  for (size_t i = 0; i < r.partitions.size(); ++i) {
    absl::Status valid = ValidateDatasetPartition(ds, r.partitions[i]);
    if (!valid.ok()) {
      return WithFieldViolation(
          WithReason(valid, "PARTITION_MALFORMED", {{"dataset", ds.name}}),
          absl::StrCat("partitions[", i, "]"), valid.message());
    }
  }
  out = r.partitions;
  SortUnique(&out);
  return out;
}

// The target's reason: "requested", or "requested: affected by orders:
// refund > 0".
std::string RequestedReason(const BackfillRequest& request) {
  if (request.auto_detect) return kAutoDatasetReason;
  if (request.affected_by.empty()) return "requested";
  absl::StatusOr<AffectedBy> parsed = ParseAffectedBy(request.affected_by);
  return absl::StrCat("requested: affected by ", parsed.ok()
                                                     ? AffectedByText(*parsed)
                                                     : request.affected_by);
}

}  // namespace

// Row counts per dataset from the engine's partition statistics (through
// the plan's CostEstimator, which fetches them once per dataset): what
// decides the partitions a full reload covers and what `mapping: all`
// reaches. No table is counted in full for them.
class Planner::RowCountCache {
 public:
  explicit RowCountCache(CostEstimator* estimator) : estimator_(estimator) {}

  absl::StatusOr<const RowCounts*> Of(const DatasetSpec& d) {
    ASSIGN_OR_RETURN(const PartitionStats* stats, estimator_->Stats(d));
    return &stats->rows;
  }

 private:
  CostEstimator* estimator_;
};

absl::StatusOr<std::vector<std::string>> Planner::ResolveAffectedBy(
    const DatasetSpec& target, const BackfillRequest& request) const {
  if (!request.from.empty() || !request.to.empty() ||
      !request.partitions.empty()) {
    return InvalidFieldError(
        "affected_by", "SCOPE_INVALID",
        "`affected_by` is a scope of its own: give either `affected_by` or "
        "`from_partition`/`to_partition`/`partitions`, not both");
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
    return InvalidFieldError("affected_by", "DATASET_NOT_FOUND",
                             absl::StrCat("`affected_by`: unknown dataset \"",
                                          affected.dataset, "\"", choices));
  }
  if (readable.count(from->name) == 0) {
    return InvalidFieldError(
        "affected_by", "NOT_UPSTREAM",
        absl::StrCat("`affected_by`: dataset \"", from->name,
                     "\" is not upstream of \"", target.name, "\"", choices));
  }
  ASSIGN_OR_RETURN(std::vector<std::string> matching,
                   engine_->PartitionsMatching(*from, affected.predicate,
                                               limits_.max_partitions));
  if (matching.empty()) {
    return WithReason(absl::FailedPreconditionError(absl::StrCat(
                          "no partition of ", from->name, " has a row where ",
                          affected.predicate, "; nothing to backfill")),
                      "NOTHING_TO_BACKFILL");
  }
  ASSIGN_OR_RETURN(std::vector<std::string> mapped,
                   MapDownstream(*from, matching, target));
  if (mapped.empty()) {
    return WithReason(
        absl::FailedPreconditionError(absl::StrCat(
            "the ", matching.size(), " partition(s) of ", from->name,
            " with a row where ", affected.predicate,
            " affect no partition of ", target.name, "; nothing to backfill")),
        "NOTHING_TO_BACKFILL");
  }
  if (mapped.size() > limits_.max_partitions) {
    return InvalidFieldError(
        "affected_by", "PLAN_TOO_LARGE",
        absl::StrCat("`affected_by`: ", mapped.size(), " partitions of ",
                     target.name, " are affected; at most ",
                     limits_.max_partitions,
                     " per backfill: narrow the predicate"));
  }
  return mapped;
}

absl::StatusOr<std::vector<StalePartition>> Planner::ResolveAuto(
    const DatasetSpec& target, const BackfillRequest& request) const {
  if (!request.from.empty() || !request.to.empty() ||
      !request.partitions.empty() || !request.affected_by.empty()) {
    return InvalidFieldError(
        "auto_detect", "SCOPE_INVALID",
        "`auto_detect` is a scope of its own: give either `auto_detect` or "
        "`from_partition`/`to_partition`/`partitions`/`affected_by`, not "
        "both");
  }
  if (history_ == nullptr) {
    return absl::FailedPreconditionError(
        "`auto_detect` needs the recorded lineage, and this planner has no "
        "state store");
  }
  ASSIGN_OR_RETURN(std::vector<StalePartition> stale,
                   FindStalePartitions(*catalog_, *engine_, *history_, target));
  if (stale.empty()) {
    return WithReason(absl::FailedPreconditionError(absl::StrCat(
                          "nothing to backfill: every published partition of ",
                          target.name, " matches its lineage")),
                      "NOTHING_TO_BACKFILL");
  }
  if (stale.size() > limits_.max_partitions) {
    return InvalidFieldError(
        "auto_detect", "PLAN_TOO_LARGE",
        absl::StrCat("`auto_detect` found ", stale.size(),
                     " stale partitions of ", target.name, "; at most ",
                     limits_.max_partitions,
                     " per backfill: backfill them in ranges "
                     "(`from_partition`, `to_partition`)"));
  }
  return stale;
}

std::vector<InputRef> Planner::InputsOf(const DatasetSpec& dataset,
                                        const std::string& partition) const {
  std::vector<InputRef> inputs;
  for (const UpstreamEdge& edge : dataset.upstream) {
    const DatasetSpec* up = catalog_->Find(edge.dataset);
    if (up == nullptr) continue;  // Catalog::Build guarantees it exists.
    if (edge.mapping == Mapping::kIdentity &&
        up->two_dimensional() == dataset.two_dimensional()) {
      inputs.push_back(InputRef{up, partition});
      continue;
    }
    absl::StatusOr<std::optional<std::vector<std::string>>> read =
        PartitionsRead(edge, up->layout(), dataset.layout(), partition);
    if (!read.ok() || !read->has_value()) {
      inputs.push_back(InputRef{up, std::nullopt});  // the whole upstream
      continue;
    }
    for (std::string& p : **read) inputs.push_back(InputRef{up, std::move(p)});
  }
  return inputs;
}

absl::StatusOr<std::vector<std::string>> Planner::FullPartitions(
    const DatasetSpec& d, RowCountCache& counts) const {
  if (d.grain() == Grain::kNone) return std::vector<std::string>{""};
  if (d.grain() == Grain::kKey) {
    std::vector<std::string> keys = d.partition->keys;
    SortUnique(&keys);
    return keys;
  }
  std::vector<std::string> all;
  bool has_partitioned = false;
  for (const UpstreamEdge& e : d.upstream) {
    if (e.mapping == Mapping::kAll) continue;
    has_partitioned = true;
    const DatasetSpec* up = catalog_->Find(e.dataset);
    ASSIGN_OR_RETURN(const RowCounts* c, counts.Of(*up));
    if (e.mapping == Mapping::kIdentity && !up->two_dimensional() &&
        !d.two_dimensional()) {
      all.reserve(all.size() + c->size());
      for (const auto& [p, n] : *c) all.push_back(p);
      continue;
    }
    const PartitionLayout up_layout = up->layout();
    std::vector<std::string> held;
    for (const auto& [p, n] : *c) {
      if (ValidatePartition(up_layout, p).ok()) held.push_back(p);
    }
    ASSIGN_OR_RETURN(std::optional<std::vector<std::string>> mapped,
                     PartitionsAffected(e, up_layout, d.layout(), held));
    if (mapped) {
      all.insert(all.end(), std::make_move_iterator(mapped->begin()),
                 std::make_move_iterator(mapped->end()));
    }
  }
  if (!has_partitioned) {
    ASSIGN_OR_RETURN(const RowCounts* c, counts.Of(d));
    const PartitionLayout layout = d.layout();
    for (const auto& [p, n] : *c) {
      // A time x key dataset's rows of undeclared keys are in no partition
      // a backfill can name.
      if (!d.two_dimensional() || ValidatePartition(layout, p).ok()) {
        all.push_back(p);
      }
    }
  }
  SortUnique(&all);
  return all;
}

absl::Status Planner::Propagate(
    const DatasetSpec& from, const std::set<std::string>* only,
    RowCountCache& counts, Scope* scope,
    std::map<std::string, std::string>* dataset_reason,
    FrozenFilter* frozen) const {
  size_t total = 0;
  for (const auto& [name, partitions] : *scope) total += partitions.size();
  bool started = false;
  for (const DatasetSpec& d : catalog_->datasets()) {
    started = started || d.name == from.name;
    if (!started) continue;  // upstreams of `from` come before it
    auto it = scope->find(d.name);
    if (it == scope->end()) continue;
    if (frozen != nullptr) RETURN_IF_ERROR(frozen->Apply(d, &it->second));
    if (it->second.empty()) continue;
    // (std::map: adding a dependent's partitions below moves no others.)
    const std::vector<std::string>& partitions = it->second.partitions();
    for (const DatasetSpec* dep : catalog_->DirectDependents(d.name)) {
      if (only != nullptr && !only->count(dep->name)) continue;
      for (const UpstreamEdge& e : dep->upstream) {
        if (e.dataset != d.name) continue;
        std::vector<std::string> reached;
        ASSIGN_OR_RETURN(
            std::optional<std::vector<std::string>> mapped,
            PartitionsAffected(e, d.layout(), dep->layout(), partitions));
        if (mapped) {
          reached = *std::move(mapped);
        } else {
          ASSIGN_OR_RETURN(reached, FullPartitions(*dep, counts));
        }
        // A mapping that reaches nothing (a rollup beyond year 9999) adds
        // nothing; `all` keeps adding the dataset, as it always did.
        if (reached.empty() && mapped) continue;
        total += (*scope)[dep->name].Add(std::move(reached),
                                         DownstreamReason(e, d.name));
        if (dataset_reason != nullptr) {
          dataset_reason->emplace(dep->name,
                                  absl::StrCat("downstream of ", d.name));
        }
        if (total > limits_.max_partitions) {
          return WithReason(
              absl::InvalidArgumentError(absl::StrCat(
                  "the plan has more than ", limits_.max_partitions,
                  " partitions (with dependents, reached at ", dep->name,
                  "); at most ", limits_.max_partitions,
                  " per backfill: narrow the scope")),
              "PLAN_TOO_LARGE");
        }
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> Planner::MapDownstream(
    const DatasetSpec& from, const std::vector<std::string>& partitions,
    const DatasetSpec& to) const {
  if (catalog_->Find(from.name) == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown dataset \"", from.name, "\""));
  }
  if (catalog_->Find(to.name) == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown dataset \"", to.name, "\""));
  }
  if (partitions.size() > limits_.max_partitions) {
    return absl::InvalidArgumentError(
        absl::StrCat(partitions.size(), " partitions of ", from.name,
                     " given; at most ", limits_.max_partitions));
  }
  for (const std::string& p : partitions) {
    absl::Status valid = ValidatePartition(from.layout(), p);
    if (!valid.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "partition of dataset \"", from.name, "\": ", valid.message()));
    }
  }
  std::vector<std::string> seeds = partitions;
  SortUnique(&seeds);
  if (from.name == to.name) return seeds;
  // The datasets on a path from `from` to `to`: downstream of `from` and
  // upstream of `to`.
  std::set<std::string> below;
  std::vector<std::string> stack = {from.name};
  while (!stack.empty()) {
    const std::string name = stack.back();
    stack.pop_back();
    for (const DatasetSpec* dep : catalog_->DirectDependents(name)) {
      if (below.insert(dep->name).second) stack.push_back(dep->name);
    }
  }
  if (!below.count(to.name)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dataset \"", to.name, "\" is not downstream of \"", from.name, "\""));
  }
  std::set<std::string> only = {to.name};
  stack = {to.name};
  while (!stack.empty()) {
    const DatasetSpec* d = catalog_->Find(stack.back());
    stack.pop_back();
    for (const UpstreamEdge& e : d->upstream) {
      if (below.count(e.dataset) && only.insert(e.dataset).second) {
        stack.push_back(e.dataset);
      }
    }
  }
  CostEstimator estimator(
      engine_, nullptr,
      [this](const DatasetSpec& d, const std::string& partition) {
        return InputsOf(d, partition);
      });
  RowCountCache counts(&estimator);
  Scope scope;
  scope.emplace(from.name, PlannedPartitions(std::move(seeds), "requested"));
  RETURN_IF_ERROR(Propagate(from, &only, counts, &scope, nullptr));
  return scope[to.name].TakePartitions();
}

absl::StatusOr<Plan> Planner::MakePlan(const BackfillRequest& request) const {
  const DatasetSpec* target = catalog_->Find(request.dataset);
  if (request.dataset.empty()) {
    return InvalidFieldError(
        "dataset", "DATASET_MISSING",
        absl::StrCat("`dataset` is empty; derived datasets: ",
                     KnownDerived(*catalog_)));
  }
  if (target == nullptr) {
    return WithFieldViolation(
        WithReason(absl::InvalidArgumentError(absl::StrCat(
                       "unknown dataset \"", request.dataset,
                       "\"; derived datasets: ", KnownDerived(*catalog_))),
                   "DATASET_NOT_FOUND", {{"dataset", request.dataset}}),
        "dataset", "no dataset of this name is declared");
  }
  if (!target->is_derived()) {
    std::vector<std::string> readers;
    for (const DatasetSpec* d : catalog_->DirectDependents(target->name)) {
      readers.push_back(d->name);
    }
    return InvalidFieldError(
        "dataset", "DATASET_IS_SOURCE",
        absl::StrCat(
            "dataset \"", target->name,
            "\" is a source: backfilld never writes sources; backfill a "
            "derived dataset that reads it",
            readers.empty()
                ? ""
                : absl::StrCat(" (", absl::StrJoin(readers, ", "), ")")));
  }
  RETURN_IF_ERROR(ValidateMaxCost(request.max_cost));
  std::vector<std::string> keys;
  if (!request.keys.empty()) {
    ASSIGN_OR_RETURN(keys, NormalizeEntityKeys(*target, request.keys));
  }
  // Partitions per dataset, propagated to dependents in topological order,
  // each with the reason it is planned.
  Scope scope;
  std::map<std::string, std::string> reason;
  const std::string requested_reason = RequestedReason(request);
  if (request.auto_detect) {
    // Each requested partition with a reason of its own.
    ASSIGN_OR_RETURN(std::vector<StalePartition> stale,
                     ResolveAuto(*target, request));
    std::vector<std::string> requested;
    std::vector<std::string> reasons;
    requested.reserve(stale.size());
    reasons.reserve(stale.size());
    for (StalePartition& sp : stale) {
      requested.push_back(std::move(sp.partition));
      reasons.push_back(std::move(sp.reason));
    }
    scope.emplace(target->name,
                  PlannedPartitions(std::move(requested), std::move(reasons)));
  } else {
    std::vector<std::string> requested;
    if (request.affected_by.empty()) {
      ASSIGN_OR_RETURN(requested,
                       ResolveScope(*target, request, limits_.max_partitions));
    } else {
      ASSIGN_OR_RETURN(requested, ResolveAffectedBy(*target, request));
    }
    scope.emplace(target->name,
                  PlannedPartitions(std::move(requested), requested_reason));
  }
  reason[target->name] = requested_reason;

  Plan plan;
  static const SystemClock* const kSystemClock = new SystemClock;
  FrozenFilter frozen(clock_ != nullptr ? clock_->Now() : kSystemClock->Now(),
                      request.override_frozen);
  {
    // The cost figures (core/plan/cost_estimator.h) and the row counts that
    // decide which partitions `all` edges and full reloads cover, from the
    // engine's partition statistics. Gone before the partitions' reasons
    // are spelled out below.
    CostEstimator estimator(
        engine_, history_,
        [this](const DatasetSpec& d, const std::string& partition) {
          return InputsOf(d, partition);
        });
    RowCountCache counts(&estimator);

    if (!request.exclude_downstream) {
      RETURN_IF_ERROR(
          Propagate(*target, nullptr, counts, &scope, &reason, &frozen));
    } else {
      RETURN_IF_ERROR(frozen.Apply(*target, &scope[target->name]));
    }
    size_t planned = 0;
    for (const auto& [name, partitions] : scope) planned += partitions.size();
    if (planned == 0 && !frozen.frozen().empty()) {
      return WithReason(absl::FailedPreconditionError(absl::StrCat(
                            "every partition of the request is frozen: ",
                            frozen.Describe(*catalog_),
                            "; nothing is planned (an approver may submit with "
                            "--override-frozen and a --reason)")),
                        "PARTITIONS_FROZEN");
    }
    if (planned > limits_.max_partitions) {
      return WithReason(
          absl::InvalidArgumentError(absl::StrCat(
              "the plan has ", planned,
              " partitions (with dependents); at most ", limits_.max_partitions,
              " per backfill: narrow the scope")),
          "PLAN_TOO_LARGE");
    }

    for (const DatasetSpec& d : catalog_->datasets()) {
      auto it = scope.find(d.name);
      if (it == scope.end() || it->second.empty()) continue;
      DatasetPlan dp;
      dp.dataset = d.name;
      dp.partitions = it->second.TakePartitions();
      dp.reason = reason[d.name];
      dp.transform_version = d.transform_version;
      if (d.name == target->name) dp.keys = keys;
      plan.datasets.push_back(std::move(dp));
    }
    // (plan.datasets stays as it is from here: the estimator points into
    // each dataset's partitions.)
    for (DatasetPlan& dp : plan.datasets) {
      const DatasetSpec& d = *catalog_->Find(dp.dataset);
      // A full reload recomputes at least what this plan does, partitions
      // its upstreams do not hold yet (a first load) included: Estimate
      // adds them.
      ASSIGN_OR_RETURN(std::vector<std::string> full,
                       FullPartitions(d, counts));
      RETURN_IF_ERROR(estimator.Estimate(d, full, &dp));
      plan.cost.backfill += dp.cost.backfill;
      plan.cost.full_reload += dp.cost.full_reload;
    }
  }
  for (DatasetPlan& dp : plan.datasets) {
    dp.partition_reasons = scope[dp.dataset].Reasons();
  }
  for (const auto& [name, f] : frozen.frozen()) {
    plan.frozen.push_back({name, f.rule, f.partitions, frozen.overridden()});
  }
  ApplyBudgets(*catalog_, request, &plan);
  return plan;
}

}  // namespace backfill
