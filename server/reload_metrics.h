// ReloadMetrics: how reloads of the configuration on SIGHUP went, as
// Prometheus series in the daemon's registry:
//   backfill_config_reloads_total{kind, result}   counter
//     kind "pipelines" (the --pipelines directory), "tokens" (the
//     --auth-tokens file) or "metrics_auth" (the --metrics-basic-auth
//     file); result "ok" or "error" (the old one stays)
//   backfill_config_last_reload_success_timestamp_seconds{kind}   gauge
//     Unix time of the last successful load of that kind, the one at
//     start-up included
// Every series exists (at 0) from the start. The registry must outlive it.
// Thread-safe.

#ifndef BACKFILL_SERVER_RELOAD_METRICS_H_
#define BACKFILL_SERVER_RELOAD_METRICS_H_

#include "absl/time/time.h"

namespace prometheus {
class Counter;
class Gauge;
class Registry;
}  // namespace prometheus

namespace backfill {

class ReloadMetrics {
 public:
  enum class Kind { kPipelines, kTokens, kMetricsAuth };

  explicit ReloadMetrics(prometheus::Registry& registry);

  ReloadMetrics(const ReloadMetrics&) = delete;
  ReloadMetrics& operator=(const ReloadMetrics&) = delete;

  // A load at start-up (not a reload): sets the timestamp only.
  void Loaded(Kind kind, absl::Time at);
  // A reload: counted; `ok` also sets the timestamp to `at`.
  void Reloaded(Kind kind, bool ok, absl::Time at);

 private:
  struct Series {
    prometheus::Counter* ok = nullptr;
    prometheus::Counter* error = nullptr;
    prometheus::Gauge* last_success = nullptr;
  };
  Series& SeriesOf(Kind kind);

  Series pipelines_;
  Series tokens_;
  Series metrics_auth_;
};

}  // namespace backfill

#endif  // BACKFILL_SERVER_RELOAD_METRICS_H_
