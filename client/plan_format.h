// plan_format: backfillctl's rendering of a plan (`plan`): the per-dataset
// table, the total cost against a full reload, where each dataset's
// estimate comes from, the budgets and whether a submit would be refused
// for cost, why each partition is planned (grouped into ranges), and the
// conflicts (the jobs a submit would wait for). The "why each partition"
// lines are also part of a job's block (client/job_format.h).
//
// Pure functions from messages to text; thread-safe.

#ifndef BACKFILL_CLIENT_PLAN_FORMAT_H_
#define BACKFILL_CLIENT_PLAN_FORMAT_H_

#include <string>

#include "absl/strings/string_view.h"
#include "backfill/v1/backfill.pb.h"

namespace backfill {
namespace cli {

// Why each partition of a plan is there, one line per run of consecutive
// partitions (in the plan's order) with the same reason, each line starting
// with `indent`: "2025-06-01 .. 2025-06-30  requested (30)", a single
// partition as "2025-06  downstream of daily via rollup". At most
// `max_ranges` lines, then "... and N more ranges". "" when the plan has no
// partition_reasons (a job planned before they were kept).
std::string FormatPartitionReasons(const v1::DatasetPlan& plan,
                                   absl::string_view indent,
                                   int max_ranges = 12);

// Per-dataset table DATASET GRAIN PARTITIONS RANGE COST VS FULL WHY, then
// the keys replaced, why each partition, the cost, the estimate sources,
// the budgets, the early cutoff and the conflicts.
std::string FormatPlan(const v1::PlanBackfillResponse& response);

}  // namespace cli
}  // namespace backfill

#endif  // BACKFILL_CLIENT_PLAN_FORMAT_H_
