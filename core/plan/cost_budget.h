// Cost budgets: the limits a plan's estimate (core/plan/cost_estimator.h) is
// checked against before anything runs.
//
//   - the request's max_cost (`--max-cost N`, > 0) applies to the plan's
//     total estimate (every dataset of the job);
//   - a derived dataset's `max_cost:` (pipeline spec) applies to that
//     dataset's estimate in any job that recomputes it.
//
// ApplyBudgets records each limit in the Cost it applies to and, when an
// estimate is over it, the refusal message (Cost::refused) a submit fails
// with as FAILED_PRECONDITION; a plan is still shown. The plan's total
// carries the first refusal (the request's limit first, then datasets in
// plan order), so Plan::cost.refused set means "a submit is refused".
//
// Pure functions over values; thread-safe.

#ifndef BACKFILL_CORE_PLAN_COST_BUDGET_H_
#define BACKFILL_CORE_PLAN_COST_BUDGET_H_

#include <string>

#include "absl/status/status.h"
#include "core/model/catalog.h"
#include "core/model/job.h"

namespace backfill {

// INVALID_ARGUMENT naming the field when max_cost is negative, not a
// number or infinite.
absl::Status ValidateMaxCost(double max_cost);

// Fills max_cost and refused of plan->cost and of each dataset's cost.
void ApplyBudgets(const Catalog& catalog, const BackfillRequest& request,
                  Plan* plan);

// A cost figure for messages: a whole number with thousands separators
// ("1,234,000"), or with up to two decimals when it has a fraction.
std::string FormatCostFigure(double value);

}  // namespace backfill

#endif  // BACKFILL_CORE_PLAN_COST_BUDGET_H_
