#include "core/plan/cost_estimator.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

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

template <typename T>
const T* CostEstimator::ByPartition<T>::Find(const std::string& partition) {
  const std::vector<std::string>& p = *partitions;
  for (size_t i = last; i < p.size() && i < last + 2; ++i) {
    if (p[i] == partition) {
      last = i;
      return &values[i];
    }
  }
  auto it = std::lower_bound(p.begin(), p.end(), partition);
  if (it == p.end() || *it != partition) return nullptr;
  last = static_cast<size_t>(it - p.begin());
  return &values[last];
}

absl::Status CostEstimator::CountInputs(
    const DatasetSpec& dataset, const std::vector<std::string>& partitions) {
  // Upstream partitions not counted yet, by upstream. Usually already in
  // order (the planned partitions are sorted), so sorting is a check.
  std::map<const DatasetSpec*, std::vector<std::string>> wanted;
  for (const std::string& p : partitions) {
    for (InputRef& in : inputs_of_(dataset, p)) {
      if (in.dataset == nullptr || !in.partition.has_value()) continue;
      const auto counted = counts_.find(in.dataset->name);
      if (counted != counts_.end() &&
          counted->second.rows.Find(*in.partition) != nullptr) {
        continue;
      }
      auto [list, added] = wanted.try_emplace(in.dataset);
      // Mostly one partition read per partition and upstream (identity).
      if (added) list->second.reserve(partitions.size());
      list->second.push_back(*std::move(in.partition));
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
    if (!stats->rows.empty()) {
      for (size_t i = 0; i < list.size(); ++i) {
        auto it = stats->rows.find(list[i]);
        if (it == stats->rows.end()) continue;
        rows[i] = it->second;
        by_stats += it->second;
      }
    }
    if (by_stats <= kMaxCountedRows) {
      ASSIGN_OR_RETURN(rows, engine_->CountRowsInPartitions(*upstream, list));
      if (rows.size() != list.size()) {
        return absl::InternalError(
            absl::StrCat("the engine counted ", rows.size(), " partitions of ",
                         upstream->name, " for ", list.size(), " asked"));
      }
    }
    Counted& into = counts_[upstream->name];
    into.rows.partitions = &into.partitions;
    if (into.partitions.empty()) {
      into.partitions = std::move(list);
      into.rows.values = std::move(rows);
      continue;
    }
    // Counted before for another dataset: merge (the lists are disjoint).
    std::vector<std::string> partitions_now;
    std::vector<int64_t> rows_now;
    partitions_now.reserve(into.partitions.size() + list.size());
    rows_now.reserve(into.partitions.size() + list.size());
    size_t i = 0;
    size_t j = 0;
    while (i < into.partitions.size() || j < list.size()) {
      if (j == list.size() ||
          (i < into.partitions.size() && into.partitions[i] < list[j])) {
        partitions_now.push_back(std::move(into.partitions[i]));
        rows_now.push_back(into.rows.values[i]);
        ++i;
      } else {
        partitions_now.push_back(std::move(list[j]));
        rows_now.push_back(rows[j]);
        ++j;
      }
    }
    into.partitions = std::move(partitions_now);
    into.rows.values = std::move(rows_now);
    into.rows.last = 0;
  }
  return absl::OkStatus();
}

absl::StatusOr<double> CostEstimator::RowsRead(const DatasetSpec& upstream,
                                               const std::string& partition,
                                               int64_t rows_now) {
  if (rows_now > 0) return static_cast<double>(rows_now);
  const auto planned = planned_.find(upstream.name);
  if (planned == planned_.end()) return 0.0;
  const double* input = planned->second.Find(partition);
  if (input == nullptr) return 0.0;
  // Computed by this plan from nothing: the upstream's mean partition when
  // it has published ones, else its own inputs (rows out <= rows in for a
  // filter or an aggregation).
  ASSIGN_OR_RETURN(const PartitionStats* stats, Stats(upstream));
  if (stats->rows.empty()) return *input;
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
    const int64_t* counted = nullptr;
    if (auto it = counts_.find(in.dataset->name); it != counts_.end()) {
      counted = it->second.rows.Find(*in.partition);
    }
    ASSIGN_OR_RETURN(double rows, RowsRead(*in.dataset, *in.partition,
                                           counted == nullptr ? 0 : *counted));
    cost += rows;
  }
  return cost;
}

absl::Status CostEstimator::Estimate(const DatasetSpec& dataset,
                                     const std::vector<std::string>& full,
                                     DatasetPlan* plan) {
  const std::vector<std::string>& partitions = plan->partitions;
  std::map<std::string, int64_t> history;
  if (history_ != nullptr && !partitions.empty()) {
    ASSIGN_OR_RETURN(history,
                     history_->LastRunInputRows(dataset.name, partitions));
  }
  if (history.empty()) {
    RETURN_IF_ERROR(CountInputs(dataset, partitions));
  } else {
    std::vector<std::string> without_history;
    without_history.reserve(partitions.size() -
                            std::min(partitions.size(), history.size()));
    for (const std::string& p : partitions) {
      if (history.count(p) == 0) without_history.push_back(p);
    }
    RETURN_IF_ERROR(CountInputs(dataset, without_history));
  }
  plan->cost.backfill = 0;
  plan->partitions_from_history = 0;
  ByPartition<double>& estimated = planned_[dataset.name];
  estimated.partitions = &partitions;
  estimated.values.clear();
  estimated.values.reserve(partitions.size());
  estimated.last = 0;
  for (const std::string& p : partitions) {
    auto it = history.find(p);
    double c = 0;
    if (it != history.end()) {
      c = static_cast<double>(it->second);
      ++plan->partitions_from_history;
    } else {
      ASSIGN_OR_RETURN(c, RowCountCost(dataset, p, /*from_stats=*/false));
    }
    plan->cost.backfill += c;
    estimated.values.push_back(c);
  }
  const int64_t planned = static_cast<int64_t>(partitions.size());
  plan->estimate_source =
      plan->partitions_from_history == 0         ? kEstimateFromRowCounts
      : plan->partitions_from_history == planned ? kEstimateFromHistory
                                                 : kEstimateMixed;
  // Over `full` and the planned partitions together, in partition order.
  plan->cost.full_reload = 0;
  size_t i = 0;
  size_t j = 0;
  while (i < full.size() || j < partitions.size()) {
    const std::string* p = nullptr;
    if (j == partitions.size() ||
        (i < full.size() && full[i] < partitions[j])) {
      p = &full[i++];
    } else {
      if (i < full.size() && full[i] == partitions[j]) ++i;
      p = &partitions[j++];
    }
    ASSIGN_OR_RETURN(double c, RowCountCost(dataset, *p, /*from_stats=*/true));
    plan->cost.full_reload += c;
  }
  return absl::OkStatus();
}

}  // namespace backfill
