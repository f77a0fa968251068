// Planner: step 1 of the playbook. Resolves a BackfillRequest into the
// partitions of every dataset it touches — the requested one (a range, a
// list, or `affected_by`: the partitions affected by the rows of the target
// or an upstream that match a predicate, see core/plan/affected_by.h) plus,
// unless excluded, its dependents through their partition mappings — and
// estimates the cost against a full reload. Writes nothing.
//
// --auto (request.auto_detect): the requested partitions are the stale ones
// of core/plan/stale_lineage.h, each with its own reason ("transform version
// changed", "input orders/2025-03-01 changed"); the target's dataset
// reason is kAutoDatasetReason. Nothing stale is FAILED_PRECONDITION.
//
// Propagation: a dependent follows each upstream edge's mapping (see
// upstream_mapping.h): identity the same partitions, rollup the coarser
// partitions containing them, lookback N the partitions P .. P+N, all every
// partition of the dependent. Every planned partition has a reason
// (DatasetPlan::partition_reasons): "requested", or "downstream of X" with
// " via rollup", " via lookback N" or " via all" for those mappings. A
// partition reached by several paths keeps the reason of the first upstream
// in the catalog's topological order that reaches it (datasets are visited
// in that order, dependents by name).
//
// Frozen rules (core/plan/frozen_filter.h): a partition its dataset's rule
// closes is left out of the plan (Plan::frozen lists it, with the rule),
// and nothing downstream is planned because of it; a request whose every
// partition is frozen is FAILED_PRECONDITION (PARTITIONS_FROZEN) naming the
// rules. With override_frozen the partitions are planned and marked.
//
// Cost unit (kCostUnit): estimated input rows read. Recomputing one
// partition reads the rows of each upstream partition InputsOf lists (the
// identity partition, the rollup children, the lookback window) and the
// whole of each `all` upstream. The full reload is the same measure over
// every partition a reload of the dataset computes: the partitions its
// identity, rollup and lookback upstreams hold, mapped through those edges
// (its own partitions when it has none). How each figure is obtained
// (recorded history, exact counts of the partitions in scope, the engine's
// partition statistics) is core/plan/cost_estimator.h's; budgets are
// core/plan/cost_budget.h's. Planning reads no table in full: its cost follows
// the scope.
//
// Thread-safe: holds only const references.

#ifndef BACKFILL_CORE_PLAN_PLANNER_H_
#define BACKFILL_CORE_PLAN_PLANNER_H_

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/base/clock.h"
#include "core/model/catalog.h"
#include "core/model/job.h"
#include "core/plan/frozen_filter.h"
#include "core/plan/planned_partitions.h"
#include "core/plan/stale_lineage.h"
#include "core/ports/engine.h"
#include "core/ports/state_store.h"

namespace backfill {

inline constexpr char kAutoDatasetReason[] =
    "requested: recorded lineage no longer matches (--auto)";

struct PlannerLimits {
  size_t max_partitions = 1000000;  // per request, over all datasets
};

class Planner {
 public:
  // `history` (may be null: estimates from row counts only, and no --auto)
  // supplies the input rows of earlier runs and the recorded lineage.
  // `clock` (may be null: the system's) tells the time that frozen rules
  // with `older_than` count back from.
  Planner(const Catalog* catalog, Engine* engine, PlannerLimits limits = {},
          StateStore* history = nullptr, const Clock* clock = nullptr)
      : catalog_(catalog),
        engine_(engine),
        limits_(limits),
        history_(history),
        clock_(clock) {}

  // Validates the request (INVALID_ARGUMENT with an actionable message for
  // an unknown or source dataset, a missing, empty, inverted or malformed
  // scope, unknown keys, a negative max_cost) and returns the plan with its
  // budgets applied (Cost::refused). Conflicts are not filled in.
  absl::StatusOr<Plan> MakePlan(const BackfillRequest& request) const;

  // The inputs a task of `dataset` for `partition` reads: one InputRef per
  // upstream partition read (identity: P; rollup: every finer partition
  // inside P; lookback N: P-N .. P, in order) and one whole-table InputRef
  // per `all` upstream, upstreams in declaration order. Input fingerprints
  // and lineage are kept per InputRef. A partition the mapping cannot map
  // (not valid for the grain; a job's partitions always are) reads the
  // whole upstream.
  std::vector<InputRef> InputsOf(const DatasetSpec& dataset,
                                 const std::string& partition) const;

  // The partitions of `to` affected by backfilling `partitions` of `from`,
  // through every path of upstream edges from `from` down to `to` (each
  // edge mapped as in a plan), sorted and unique; empty when no path
  // reaches a partition (e.g. a rollup beyond year 9999). from == to: the
  // partitions themselves. INVALID_ARGUMENT when `to` is not downstream of
  // `from`, a partition is not valid for `from`'s grain, or more than
  // max_partitions partitions are given or would be reached on the way.
  absl::StatusOr<std::vector<std::string>> MapDownstream(
      const DatasetSpec& from, const std::vector<std::string>& partitions,
      const DatasetSpec& to) const;

 private:
  class RowCountCache;
  // Dataset -> its planned partitions, with why each is planned.
  using Scope = std::map<std::string, PlannedPartitions>;

  // Extends `scope` from `from`'s partitions to its dependents (all of them,
  // or only those in `only` when given), visiting datasets in topological
  // order. `dataset_reason` (optional) gets each reached dataset's first
  // "downstream of X".
  // `frozen` (optional) is applied to each dataset's partitions before its
  // dependents are reached from them.
  absl::Status Propagate(const DatasetSpec& from,
                         const std::set<std::string>* only,
                         RowCountCache& counts, Scope* scope,
                         std::map<std::string, std::string>* dataset_reason,
                         FrozenFilter* frozen = nullptr) const;
  // Every partition a full reload of `d` recomputes, sorted and unique.
  absl::StatusOr<std::vector<std::string>> FullPartitions(
      const DatasetSpec& d, RowCountCache& counts) const;
  // The requested partitions of `target` for a request with affected_by:
  // parses and checks it, asks the engine for the matching partitions of
  // its dataset and maps them down to `target`.
  absl::StatusOr<std::vector<std::string>> ResolveAffectedBy(
      const DatasetSpec& target, const BackfillRequest& request) const;

  // The requested partitions of `target` for a request with auto_detect,
  // with their reasons (core/plan/stale_lineage.h): checks that no other scope
  // is given and that something is stale.
  absl::StatusOr<std::vector<StalePartition>> ResolveAuto(
      const DatasetSpec& target, const BackfillRequest& request) const;

  const Catalog* catalog_;
  Engine* engine_;
  PlannerLimits limits_;
  StateStore* history_;
  const Clock* clock_;
};

}  // namespace backfill

#endif  // BACKFILL_CORE_PLAN_PLANNER_H_
