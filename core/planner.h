// Planner: step 1 of the playbook. Resolves a BackfillRequest into the
// partitions of every dataset it touches — the requested one (a range, a
// list, or `affected_by`: the partitions affected by the rows of the target
// or an upstream that match a predicate, see core/affected_by.h) plus,
// unless excluded, its dependents through their partition mappings — and
// estimates the cost against a full reload. Writes nothing.
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

#include <set>
#include <string>
#include <vector>

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

  // The partitions of `to` affected by backfilling `partitions` of `from`,
  // through every path of upstream edges from `from` to `to`: an
  // `identity` edge passes the same partitions on, an `all` edge affects
  // every partition of its dependent (those a full reload of it
  // recomputes); `from` == `to` is the partitions themselves. Sorted and
  // unique; empty when `to` is not downstream of `from`.
  absl::StatusOr<std::vector<std::string>> MapDownstream(
      const DatasetSpec& from, const std::vector<std::string>& partitions,
      const DatasetSpec& to) const;

 private:
  // The requested partitions of `target` for a request with affected_by:
  // parses and checks it, asks the engine for the matching partitions of
  // its dataset and maps them down to `target`.
  absl::StatusOr<std::vector<std::string>> ResolveAffectedBy(
      const DatasetSpec& target, const BackfillRequest& request) const;
  // Every partition a full reload of `d` recomputes (as MakePlan counts
  // them for `mapping: all`).
  absl::StatusOr<std::set<std::string>> FullPartitionsOf(
      const DatasetSpec& d) const;

  const Catalog* catalog_;
  Engine* engine_;
  PlannerLimits limits_;
};

}  // namespace backfill

#endif  // BACKFILL_CORE_PLANNER_H_
