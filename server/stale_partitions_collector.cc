#include "server/stale_partitions_collector.h"

#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "server/log_text.h"
#include "spdlog/spdlog.h"

namespace backfill {

std::vector<prometheus::MetricFamily> StalePartitionsCollector::Collect()
    const {
  absl::StatusOr<std::map<std::string, int64_t>> counts = counts_->Get();
  if (!counts.ok()) {
    spdlog::warn("metrics: cannot count stale partitions: {}",
                 LogText(counts.status().ToString()));
    return {};
  }
  prometheus::MetricFamily family;
  family.name = "backfill_stale_partitions";
  family.help =
      "Published partitions of a derived dataset that read an input since "
      "replaced by a later job (e.g. one submitted with --no-downstream) or "
      "a rollback, and were not recomputed since; backfill them with "
      "--auto.";
  family.type = prometheus::MetricType::Gauge;
  for (const auto& [dataset, n] : *counts) {
    prometheus::ClientMetric metric;
    metric.label.push_back({"dataset", dataset});
    metric.gauge.value = static_cast<double>(n);
    family.metric.push_back(std::move(metric));
  }
  return {std::move(family)};
}

}  // namespace backfill
