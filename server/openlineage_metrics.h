// OpenLineageMetrics: how OpenLineage delivery goes, as Prometheus counters
// in the daemon's registry, and as log lines (a given-up event is a
// warning; dropped job state changes are summed in a warning at most once
// a minute; a failed attempt that will be retried is debug). Called from
// the emitter's delivery thread, never from a job's thread. Series (no labels):
//   backfill_openlineage_events_sent_total
//   backfill_openlineage_failed_attempts_total
//   backfill_openlineage_events_dropped_total
//   backfill_openlineage_changes_dropped_total
// The registry must outlive it. Thread-safe.

#ifndef BACKFILL_SERVER_OPENLINEAGE_METRICS_H_
#define BACKFILL_SERVER_OPENLINEAGE_METRICS_H_

#include <cstdint>
#include <string>

#include "openlineage/emitter.h"

namespace prometheus {
class Counter;
class Registry;
}  // namespace prometheus

namespace backfill {

class OpenLineageMetrics final : public openlineage::DeliveryListener {
 public:
  explicit OpenLineageMetrics(prometheus::Registry& registry);

  void OnEventSent() override;
  void OnAttemptFailed(const std::string& why) override;
  void OnEventDropped(const std::string& why) override;
  void OnChangesDropped(int64_t count, const std::string& summary) override;

 private:
  prometheus::Counter* sent_ = nullptr;
  prometheus::Counter* failed_attempts_ = nullptr;
  prometheus::Counter* events_dropped_ = nullptr;
  prometheus::Counter* changes_dropped_ = nullptr;
};

}  // namespace backfill

#endif  // BACKFILL_SERVER_OPENLINEAGE_METRICS_H_
