#include "server/openlineage_metrics.h"

#include "prometheus/counter.h"
#include "prometheus/registry.h"
#include "server/log_text.h"
#include "spdlog/spdlog.h"

namespace backfill {
namespace {

prometheus::Counter* NewCounter(prometheus::Registry& registry,
                                const char* name, const char* help) {
  return &prometheus::BuildCounter()
              .Name(name)
              .Help(help)
              .Register(registry)
              .Add({});
}

}  // namespace

OpenLineageMetrics::OpenLineageMetrics(prometheus::Registry& registry)
    : sent_(NewCounter(registry, "backfill_openlineage_events_sent_total",
                       "OpenLineage RunEvents the receiver accepted (2xx).")),
      failed_attempts_(NewCounter(
          registry, "backfill_openlineage_failed_attempts_total",
          "Attempts to send an OpenLineage RunEvent that failed: no answer, "
          "or a non-2xx status (retried unless final).")),
      events_dropped_(NewCounter(
          registry, "backfill_openlineage_events_dropped_total",
          "OpenLineage RunEvents given up: refused with a 4xx, or out of "
          "drain time at shutdown.")),
      changes_dropped_(NewCounter(
          registry, "backfill_openlineage_changes_dropped_total",
          "Job state changes whose OpenLineage events were never built: the "
          "queue was full (changes that end no run go first), the daemon "
          "stopped, or the job could not be read.")) {}

void OpenLineageMetrics::OnEventSent() { sent_->Increment(); }

void OpenLineageMetrics::OnAttemptFailed(const std::string& why) {
  failed_attempts_->Increment();
  spdlog::debug("OpenLineage: attempt failed: {}", LogText(why));
}

void OpenLineageMetrics::OnEventDropped(const std::string& why) {
  events_dropped_->Increment();
  spdlog::warn("OpenLineage: {}", LogText(why));
}

void OpenLineageMetrics::OnChangesDropped(int64_t count,
                                          const std::string& summary) {
  if (count > 0) changes_dropped_->Increment(static_cast<double>(count));
  if (!summary.empty()) spdlog::warn("OpenLineage: {}", LogText(summary));
}

}  // namespace backfill
