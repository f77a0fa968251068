// FrozenFilter: the planner's application of the datasets' frozen rules
// (core/model/replay_policy.h) to one plan. The planner hands it each
// dataset's planned partitions in topological order, before the dataset's
// dependents are reached from them: a frozen partition is taken out of the
// scope and kept aside with the rule that froze it, so that no job changes
// it and nothing downstream is planned because of it (a dependent is then
// planned from the partitions left, and its own rule applies to it).
//
// An override (a request with override_frozen, which the server allows
// approvers only) keeps frozen partitions in the scope; each keeps its
// reason, followed by "; frozen by <rule>, overridden", and is still
// listed aside as overridden.
//
// Not thread-safe: one filter per plan, used by the planning thread.

#ifndef BACKFILL_CORE_PLAN_FROZEN_FILTER_H_
#define BACKFILL_CORE_PLAN_FROZEN_FILTER_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "core/model/catalog.h"
#include "core/plan/planned_partitions.h"

namespace backfill {

class FrozenFilter {
 public:
  // The partitions of one dataset its rule froze.
  struct Frozen {
    std::string rule;                     // FrozenRule::Describe()
    std::vector<std::string> partitions;  // sorted
  };

  FrozenFilter(absl::Time now, bool override_frozen)
      : now_(now), override_(override_frozen) {}

  // Applies `d`'s rule (none: nothing to do) to `partitions` (the
  // dataset's planned partitions with why each is planned).
  // INVALID_ARGUMENT for a partition the dataset's layout refuses.
  absl::Status Apply(const DatasetSpec& d, PlannedPartitions* partitions);

  // Dataset -> what its rule froze (taken out, or kept when overridden).
  const std::map<std::string, Frozen>& frozen() const { return frozen_; }
  bool overridden() const { return override_; }

  // "daily_revenue 2024-12-30, 2024-12-31 (frozen.before 2025-01-01, at
  // p.yaml:21); monthly_revenue 2024-12 (...)": at most `max_shown`
  // partitions a dataset, then "and N more".
  std::string Describe(const Catalog& catalog, size_t max_shown = 5) const;

 private:
  absl::Time now_;
  bool override_;
  std::map<std::string, Frozen> frozen_;
};

}  // namespace backfill

#endif  // BACKFILL_CORE_PLAN_FROZEN_FILTER_H_
