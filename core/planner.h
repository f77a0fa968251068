// Planner: step 1 of the playbook. Resolves a BackfillRequest into the
// partitions of every dataset it touches — the requested one plus, unless
// excluded, its dependents through their partition mappings — and estimates
// the cost against a full reload. Writes nothing.
//
// Cost unit (kCostUnit): estimated input rows read. Recomputing one
// partition reads the rows of each `identity` upstream partition and the
// whole of each `all` upstream. The full reload is the same measure over
// every partition the dataset's `identity` upstreams hold (its own
// partitions when it has none).
//
// Thread-safe: holds only const references.

#ifndef BACKFILL_CORE_PLANNER_H_
#define BACKFILL_CORE_PLANNER_H_

#include "absl/status/statusor.h"
#include "core/catalog.h"
#include "core/engine.h"
#include "core/job.h"

namespace backfill {

struct PlannerLimits {
  size_t max_partitions = 100000;  // per request, over all datasets
};

class Planner {
 public:
  Planner(const Catalog* catalog, Engine* engine, PlannerLimits limits = {})
      : catalog_(catalog), engine_(engine), limits_(limits) {}

  // Validates the request (INVALID_ARGUMENT with an actionable message for
  // an unknown or source dataset, a missing, empty, inverted or malformed
  // scope, unknown keys) and returns the plan. Conflicts are not filled in.
  absl::StatusOr<Plan> MakePlan(const BackfillRequest& request) const;

  // The inputs a task of `dataset` for `partition` reads.
  std::vector<InputRef> InputsOf(const DatasetSpec& dataset,
                                 const std::string& partition) const;

 private:
  const Catalog* catalog_;
  Engine* engine_;
  PlannerLimits limits_;
};

}  // namespace backfill

#endif  // BACKFILL_CORE_PLANNER_H_
