#include "core/plan/cost_estimator.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"

namespace backfill {

CostEstimator::CostEstimator(Engine* engine, StateStore* history,
                             InputsFn inputs_of)
    : engine_(engine), history_(history), inputs_of_(std::move(inputs_of)) {}

absl::StatusOr<const PartitionStats*> CostEstimator::Stats(
    const DatasetSpec& dataset) {
  auto it = stats_.find(dataset.name);
  if (it == stats_.end()) {
    ASSIGN_OR_RETURN(PartitionStats stats,
                     engine_->PartitionStatistics(dataset));
    it = stats_.emplace(dataset.name, std::move(stats)).first;
  }
  return &it->second;
}

absl::Status CostEstimator::CountInputs(
    const DatasetSpec& dataset, const std::vector<std::string>& partitions) {
  // Upstream partitions not counted yet, by upstream. Usually already in
  // order (the planned partitions are sorted), so sorting is a check.
  std::map<const DatasetSpec*, std::vector<std::string>> wanted;
  for (const std::string& p : partitions) {
    for (const InputRef& in : inputs_of_(dataset, p)) {
      if (in.dataset == nullptr || !in.partition.has_value()) continue;
      const auto counted = counts_.find(in.dataset->name);
      if (counted != counts_.end() && counted->second.contains(*in.partition)) {
        continue;
      }
      wanted[in.dataset].push_back(*in.partition);
    }
  }
  for (auto& [upstream, list] : wanted) {
    if (!std::is_sorted(list.begin(), list.end())) {
      std::sort(list.begin(), list.end());
    }
    list.erase(std::unique(list.begin(), list.end()), list.end());
    // The statistics' rows of these partitions; counted exactly instead
    // when they are few enough for a count to be cheap.
    ASSIGN_OR_RETURN(const PartitionStats* stats, Stats(*upstream));
    std::vector<int64_t> rows(list.size(), 0);
    int64_t by_stats = 0;
    for (size_t i = 0; i < list.size(); ++i) {
      auto it = stats->rows.find(list[i]);
      if (it == stats->rows.end()) continue;
      rows[i] = it->second;
      by_stats += it->second;
    }
    if (by_stats <= kMaxCountedRows) {
      ASSIGN_OR_RETURN(rows, engine_->CountRowsInPartitions(*upstream, list));
      if (rows.size() != list.size()) {
        return absl::InternalError(
            absl::StrCat("the engine counted ", rows.size(), " partitions of ",
                         upstream->name, " for ", list.size(), " asked"));
      }
    }
    absl::flat_hash_map<std::string, int64_t>& into = counts_[upstream->name];
    into.reserve(into.size() + list.size());
    for (size_t i = 0; i < list.size(); ++i) {
      into[std::move(list[i])] = rows[i];
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<double> CostEstimator::RowsRead(const DatasetSpec& upstream,
                                               const std::string& partition,
                                               int64_t rows_now) {
  if (rows_now > 0) return static_cast<double>(rows_now);
  const auto planned = planned_.find(upstream.name);
  if (planned == planned_.end()) return 0.0;
  const auto input = planned->second.find(partition);
  if (input == planned->second.end()) return 0.0;
  // Computed by this plan from nothing: the upstream's mean partition when
  // it has published ones, else its own inputs (rows out <= rows in for a
  // filter or an aggregation).
  ASSIGN_OR_RETURN(const PartitionStats* stats, Stats(upstream));
  if (stats->rows.empty()) return input->second;
  // Once per upstream: a plan of a dataset's first load asks for every one
  // of its partitions.
  auto mean = mean_rows_.find(upstream.name);
  if (mean == mean_rows_.end()) {
    int64_t published = 0;
    for (const auto& [p, n] : stats->rows) published += n;
    mean =
        mean_rows_
            .emplace(upstream.name, static_cast<double>(published) /
                                        static_cast<double>(stats->rows.size()))
            .first;
  }
  return mean->second;
}

absl::StatusOr<double> CostEstimator::RowCountCost(const DatasetSpec& dataset,
                                                   const std::string& partition,
                                                   bool from_stats) {
  double cost = 0;
  for (const InputRef& in : inputs_of_(dataset, partition)) {
    if (in.dataset == nullptr) continue;
    if (!in.partition.has_value()) {
      ASSIGN_OR_RETURN(const PartitionStats* stats, Stats(*in.dataset));
      cost += static_cast<double>(stats->total_rows);
      continue;
    }
    if (from_stats) {
      ASSIGN_OR_RETURN(const PartitionStats* stats, Stats(*in.dataset));
      auto it = stats->rows.find(*in.partition);
      ASSIGN_OR_RETURN(double rows,
                       RowsRead(*in.dataset, *in.partition,
                                it == stats->rows.end() ? 0 : it->second));
      cost += rows;
      continue;
    }
    const absl::flat_hash_map<std::string, int64_t>& counted =
        counts_[in.dataset->name];
    auto it = counted.find(*in.partition);
    ASSIGN_OR_RETURN(double rows,
                     RowsRead(*in.dataset, *in.partition,
                              it == counted.end() ? 0 : it->second));
    cost += rows;
  }
  return cost;
}

absl::Status CostEstimator::Estimate(const DatasetSpec& dataset,
                                     const std::set<std::string>& full,
                                     DatasetPlan* plan) {
  std::map<std::string, int64_t> history;
  if (history_ != nullptr && !plan->partitions.empty()) {
    ASSIGN_OR_RETURN(
        history, history_->LastRunInputRows(dataset.name, plan->partitions));
  }
  std::vector<std::string> without_history;
  for (const std::string& p : plan->partitions) {
    if (history.count(p) == 0) without_history.push_back(p);
  }
  RETURN_IF_ERROR(CountInputs(dataset, without_history));
  plan->cost.backfill = 0;
  plan->partitions_from_history = 0;
  absl::flat_hash_map<std::string, double>& estimated = planned_[dataset.name];
  estimated.reserve(plan->partitions.size());
  for (const std::string& p : plan->partitions) {
    auto it = history.find(p);
    double c = 0;
    if (it != history.end()) {
      c = static_cast<double>(it->second);
      ++plan->partitions_from_history;
    } else {
      ASSIGN_OR_RETURN(c, RowCountCost(dataset, p, /*from_stats=*/false));
    }
    plan->cost.backfill += c;
    estimated[p] = c;
  }
  const int64_t planned = static_cast<int64_t>(plan->partitions.size());
  plan->estimate_source =
      plan->partitions_from_history == 0         ? kEstimateFromRowCounts
      : plan->partitions_from_history == planned ? kEstimateFromHistory
                                                 : kEstimateMixed;
  plan->cost.full_reload = 0;
  for (const std::string& p : full) {
    ASSIGN_OR_RETURN(double c, RowCountCost(dataset, p, /*from_stats=*/true));
    plan->cost.full_reload += c;
  }
  return absl::OkStatus();
}

}  // namespace backfill
