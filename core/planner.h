// Planner: step 1 of the playbook. Resolves a BackfillRequest into the
// partitions of every dataset it touches — the requested one plus, unless
// excluded, its dependents through their partition mappings — and estimates
// the cost against a full reload. Writes nothing.
//
// Cost unit (kCostUnit): estimated input rows read. Recomputing one
// partition reads the rows of each upstream partition InputsOf names and
// the whole of each `all` upstream. The full reload is the same measure over
// every partition the dataset's `identity` upstreams hold (its own
// partitions when it has none). How each figure is obtained (recorded
// history, exact counts of the partitions in scope, the engine's partition
// statistics) is core/cost_estimator.h's; budgets are core/cost_budget.h's.
// Planning reads no table in full: its cost follows the scope.
//
// Thread-safe: holds only const references.

#ifndef BACKFILL_CORE_PLANNER_H_
#define BACKFILL_CORE_PLANNER_H_

#include "absl/status/statusor.h"
#include "core/catalog.h"
#include "core/engine.h"
#include "core/job.h"
#include "core/state_store.h"

namespace backfill {

struct PlannerLimits {
  size_t max_partitions = 100000;  // per request, over all datasets
};

class Planner {
 public:
  // `history` (may be null: estimates from row counts only) supplies the
  // input rows of earlier runs.
  Planner(const Catalog* catalog, Engine* engine, PlannerLimits limits = {},
          StateStore* history = nullptr)
      : catalog_(catalog),
        engine_(engine),
        limits_(limits),
        history_(history) {}

  // Validates the request (INVALID_ARGUMENT with an actionable message for
  // an unknown or source dataset, a missing, empty, inverted or malformed
  // scope, unknown keys, a negative max_cost) and returns the plan with its
  // budgets applied (Cost::refused). Conflicts are not filled in.
  absl::StatusOr<Plan> MakePlan(const BackfillRequest& request) const;

  // The inputs a task of `dataset` for `partition` reads.
  std::vector<InputRef> InputsOf(const DatasetSpec& dataset,
                                 const std::string& partition) const;

 private:
  const Catalog* catalog_;
  Engine* engine_;
  PlannerLimits limits_;
  StateStore* history_;
};

}  // namespace backfill

#endif  // BACKFILL_CORE_PLANNER_H_
