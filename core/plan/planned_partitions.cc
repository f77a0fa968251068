#include "core/plan/planned_partitions.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"

namespace backfill {
namespace {

bool SortedAndUnique(const std::vector<std::string>& v) {
  return std::adjacent_find(v.begin(), v.end(),
                            [](const std::string& a, const std::string& b) {
                              return a >= b;
                            }) == v.end();
}

}  // namespace

PlannedPartitions::PlannedPartitions(std::vector<std::string> partitions,
                                     const std::string& reason) {
  Add(std::move(partitions), reason);
}

PlannedPartitions::PlannedPartitions(std::vector<std::string> partitions,
                                     std::vector<std::string> reasons) {
  const size_t n = partitions.size();
  if (SortedAndUnique(partitions)) {
    partitions_ = std::move(partitions);
    reason_of_.reserve(n);
    for (const std::string& r : reasons) reason_of_.push_back(Intern(r));
    return;
  }
  // By partition, then by position: the last of equal partitions wins.
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return partitions[a] < partitions[b];
  });
  partitions_.reserve(n);
  reason_of_.reserve(n);
  for (size_t k = 0; k < n; ++k) {
    const size_t i = order[k];
    if (k + 1 < n && partitions[order[k + 1]] == partitions[i]) continue;
    partitions_.push_back(std::move(partitions[i]));
    reason_of_.push_back(Intern(reasons[i]));
  }
}

uint32_t PlannedPartitions::Intern(const std::string& reason) {
  if (reasons_.empty() || reasons_.back() != reason) reasons_.push_back(reason);
  return static_cast<uint32_t>(reasons_.size() - 1);
}

size_t PlannedPartitions::Add(std::vector<std::string> partitions,
                              const std::string& reason) {
  if (!SortedAndUnique(partitions)) {
    std::sort(partitions.begin(), partitions.end());
    partitions.erase(std::unique(partitions.begin(), partitions.end()),
                     partitions.end());
  }
  if (partitions.empty()) return 0;
  const uint32_t r = Intern(reason);
  if (partitions_.empty()) {
    partitions_ = std::move(partitions);
    reason_of_.assign(partitions_.size(), r);
    return partitions_.size();
  }
  std::vector<std::string> merged;
  std::vector<uint32_t> merged_reasons;
  merged.reserve(partitions_.size() + partitions.size());
  merged_reasons.reserve(partitions_.size() + partitions.size());
  size_t added = 0;
  size_t i = 0;
  size_t j = 0;
  while (i < partitions_.size() || j < partitions.size()) {
    const int order = i == partitions_.size() ? 1
                      : j == partitions.size()
                          ? -1
                          : partitions_[i].compare(partitions[j]);
    if (order <= 0) {
      merged.push_back(std::move(partitions_[i]));
      merged_reasons.push_back(reason_of_[i]);
      ++i;
      if (order == 0) ++j;
    } else {
      merged.push_back(std::move(partitions[j]));
      merged_reasons.push_back(r);
      ++j;
      ++added;
    }
  }
  partitions_ = std::move(merged);
  reason_of_ = std::move(merged_reasons);
  return added;
}

std::vector<std::string> PlannedPartitions::Remove(
    const std::vector<size_t>& indices) {
  std::vector<std::string> removed;
  removed.reserve(indices.size());
  size_t kept = 0;
  size_t k = 0;
  for (size_t i = 0; i < partitions_.size(); ++i) {
    if (k < indices.size() && indices[k] == i) {
      removed.push_back(std::move(partitions_[i]));
      ++k;
      continue;
    }
    if (kept != i) {
      partitions_[kept] = std::move(partitions_[i]);
      reason_of_[kept] = reason_of_[i];
    }
    ++kept;
  }
  partitions_.resize(kept);
  reason_of_.resize(kept);
  return removed;
}

void PlannedPartitions::AppendToReasons(const std::vector<size_t>& indices,
                                        std::string_view suffix) {
  std::map<uint32_t, uint32_t> appended;  // reason -> reason + suffix
  for (size_t i : indices) {
    const uint32_t old = reason_of_[i];
    auto it = appended.find(old);
    if (it == appended.end()) {
      std::string text = absl::StrCat(
          reasons_[old], absl::string_view(suffix.data(), suffix.size()));
      reasons_.push_back(std::move(text));
      it = appended.emplace(old, static_cast<uint32_t>(reasons_.size() - 1))
               .first;
    }
    reason_of_[i] = it->second;
  }
}

std::vector<std::string> PlannedPartitions::TakePartitions() {
  return std::move(partitions_);
}

std::vector<std::string> PlannedPartitions::Reasons() const {
  std::vector<std::string> out;
  out.reserve(reason_of_.size());
  for (uint32_t r : reason_of_) out.push_back(reasons_[r]);
  return out;
}

}  // namespace backfill
