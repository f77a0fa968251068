// CostEstimator: the cost figures of step 1, in kCostUnit (input rows read).
//
// For each dataset of a plan:
//   - the estimate of each planned partition is the input rows its last
//     successful run read (StateStore::LastRunInputRows: recorded history);
//     a partition that never ran is estimated from the rows its inputs hold
//     now: the sum, over Planner::InputsOf(dataset, partition), of the rows
//     of each upstream partition read (Engine::CountRowsInPartitions, exact
//     and costing what those partitions hold) or, for a whole-table input,
//     the table's rows (Engine::PartitionStatistics). Upstream partitions
//     whose statistics hold more than kMaxCountedRows rows together are not
//     counted: their rows come from the statistics, as the full-reload
//     figure's do, so that a plan over a large table costs what its
//     partitions' number costs, not what their rows cost (the statistics
//     may miss a change in the middle of a table for up to their maximum
//     age; an exact count of millions of rows would cost seconds);
//   - an upstream partition that holds no rows now but that the same plan
//     computes (a first load, or new days of a pipeline) counts the rows it
//     is expected to hold once computed: the upstream's mean rows per
//     partition when it has published partitions, else the input rows the
//     upstream's own estimate gives that partition (an upper bound for the
//     filters and aggregations a derived dataset usually is). Without this
//     a dependent's first load would be estimated at nothing and every
//     budget and cost alert would see it as free;
//   - the full-reload figure is the row-count estimate of every partition a
//     full reload recomputes, from the engine's partition statistics only
//     (no table is counted for it).
// Counts and statistics are fetched at most once per upstream per
// estimator; one estimator serves one plan, whose datasets are estimated
// upstream first (the catalog's topological order). What it keeps grows
// with the plan, not with the tables: per upstream the partitions it
// counted (a sorted vector) and their rows, per planned dataset its
// partitions' estimates (aligned with the plan's own partition vector).
//
// Not thread-safe (it caches per plan); create one per MakePlan call. Does
// not own the engine, the store or the plans it estimates, which must
// outlive it.

#ifndef BACKFILL_CORE_PLAN_COST_ESTIMATOR_H_
#define BACKFILL_CORE_PLAN_COST_ESTIMATOR_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/model/catalog.h"
#include "core/model/job.h"
#include "core/ports/engine.h"
#include "core/ports/state_store.h"

namespace backfill {

// The estimate_source of a dataset (DatasetPlan::estimate_source).
inline constexpr char kEstimateFromHistory[] = "history";
inline constexpr char kEstimateFromRowCounts[] = "row_counts";
inline constexpr char kEstimateMixed[] = "mixed";

class CostEstimator {
 public:
  // Above this many rows (by the statistics) in the upstream partitions a
  // plan reads, they are estimated from the statistics, not counted.
  static constexpr int64_t kMaxCountedRows = 1'000'000;

  // The inputs a task of `dataset` for `partition` reads (Planner::InputsOf).
  using InputsFn = std::function<std::vector<InputRef>(
      const DatasetSpec& dataset, const std::string& partition)>;

  // `history` may be null: every partition is estimated from row counts.
  CostEstimator(Engine* engine, StateStore* history, InputsFn inputs_of);

  // The engine's statistics of `dataset`, fetched once.
  absl::StatusOr<const PartitionStats*> Stats(const DatasetSpec& dataset);

  // Fills plan->cost (backfill, full_reload), partitions_from_history and
  // estimate_source of `plan` (whose dataset and partitions are set), with
  // `full` (sorted, unique) the partitions a full reload of the dataset
  // recomputes by what the tables hold: the full reload recomputes the
  // plan's partitions as well, listed in `full` or not (a first load). The
  // estimator keeps a pointer to plan->partitions (a dependent estimated
  // later reads the estimates of its upstream's planned partitions): they
  // must stay unchanged, and in place, while the estimator is used.
  absl::Status Estimate(const DatasetSpec& dataset,
                        const std::vector<std::string>& full,
                        DatasetPlan* plan);

 private:
  // Values of some partitions of one dataset, aligned with a sorted, unique
  // vector of those partitions (its own, or a plan's). Find tries the
  // partition last found and the one after it before searching: a plan's
  // lookups come in partition order.
  template <typename T>
  struct ByPartition {
    const std::vector<std::string>* partitions = nullptr;
    std::vector<T> values;
    size_t last = 0;
    const T* Find(const std::string& partition);
  };
  // Exact rows of an upstream's counted partitions.
  struct Counted {
    std::vector<std::string> partitions;  // sorted, unique
    ByPartition<int64_t> rows;            // over `partitions`
  };

  // The row-count cost of one partition of `dataset`, from the exact
  // counts of upstream partitions or the statistics when `from_stats`.
  absl::StatusOr<double> RowCountCost(const DatasetSpec& dataset,
                                      const std::string& partition,
                                      bool from_stats);
  // Makes sure counts_ holds every upstream partition these partitions of
  // `dataset` read: one CountRowsInPartitions call per upstream, or its
  // statistics when they hold more than kMaxCountedRows rows for those
  // partitions.
  absl::Status CountInputs(const DatasetSpec& dataset,
                           const std::vector<std::string>& partitions);
  // The rows `upstream`'s `partition` adds to a dependent's estimate when it
  // holds `rows_now`: rows_now, or for an empty partition this plan
  // computes, the rows it is expected to hold (see the file comment).
  absl::StatusOr<double> RowsRead(const DatasetSpec& upstream,
                                  const std::string& partition,
                                  int64_t rows_now);

  Engine* engine_;
  StateStore* history_;
  InputsFn inputs_of_;
  std::map<std::string, PartitionStats> stats_;  // by dataset
  // Exact row counts of upstream partitions, by dataset (std::map: stable
  // addresses, which `rows.partitions` points into).
  std::map<std::string, Counted> counts_;
  // The estimated input rows of each partition planned so far, by dataset
  // (over the plan's partitions): what an empty planned partition is
  // expected to hold when its dataset has nothing published to average.
  std::map<std::string, ByPartition<double>> planned_;
  // The mean rows of an upstream's published partitions (its statistics),
  // by dataset, computed at the first empty planned partition it has.
  std::map<std::string, double> mean_rows_;
};

}  // namespace backfill

#endif  // BACKFILL_CORE_PLAN_COST_ESTIMATOR_H_
