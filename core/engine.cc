#include "core/engine.h"

#include <utility>

#include "core/status_macros.h"

namespace backfill {

absl::StatusOr<std::map<std::string, int64_t>> Engine::CountRowsInPartitions(
    const DatasetSpec& dataset, const std::vector<std::string>& partitions) {
  ASSIGN_OR_RETURN(auto all, CountRowsByPartition(dataset));
  std::map<std::string, int64_t> out;
  for (const std::string& p : partitions) {
    auto it = all.find(p);
    out[p] = it == all.end() ? 0 : it->second;
  }
  return out;
}

absl::StatusOr<PartitionStats> Engine::PartitionStatistics(
    const DatasetSpec& dataset) {
  ASSIGN_OR_RETURN(auto all, CountRowsByPartition(dataset));
  PartitionStats stats;
  for (auto& [partition, rows] : all) {
    stats.total_rows += rows;
    if (rows > 0) stats.rows.emplace(partition, rows);
  }
  stats.refresh = "exact";
  return stats;
}

}  // namespace backfill
