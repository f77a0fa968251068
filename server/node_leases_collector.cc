#include "server/node_leases_collector.h"

#include <map>
#include <string>
#include <utility>

#include "server/log_text.h"
#include "spdlog/spdlog.h"

namespace backfill {

std::vector<prometheus::MetricFamily> NodeLeasesCollector::Collect() const {
  absl::StatusOr<std::vector<JobLease>> leases = leases_->ListLeases();
  if (!leases.ok()) {
    spdlog::warn("metrics: cannot read the job leases: {}",
                 LogText(leases.status().ToString()));
    return {};
  }
  std::map<std::string, int> held;
  for (const char* kind : kLeaseStepKinds) held[kind] = 0;
  int other = 0;
  for (const JobLease& lease : *leases) {
    if (lease.node != node_ || !lease.live) continue;
    auto it = held.find(lease.step);
    if (it == held.end()) {
      ++other;
    } else {
      ++it->second;
    }
  }
  prometheus::MetricFamily family;
  family.name = "backfill_node_leases";
  family.help =
      "Job leases this replica of the group holds now (live), by the step "
      "it does under them: run, validate, publish, confirm, rollback, hold.";
  family.type = prometheus::MetricType::Gauge;
  const auto add = [&family](const std::string& kind, int n) {
    prometheus::ClientMetric metric;
    metric.label.push_back({"kind", kind});
    metric.gauge.value = static_cast<double>(n);
    family.metric.push_back(std::move(metric));
  };
  for (const char* kind : kLeaseStepKinds) add(kind, held[kind]);
  if (other > 0) add("other", other);
  return {std::move(family)};
}

}  // namespace backfill
