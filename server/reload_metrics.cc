#include "server/reload_metrics.h"

#include <utility>

#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/registry.h"

namespace backfill {

ReloadMetrics::ReloadMetrics(prometheus::Registry& registry) {
  auto& reloads =
      prometheus::BuildCounter()
          .Name("backfill_config_reloads_total")
          .Help(
              "Reloads of the configuration on SIGHUP, by kind (pipelines: "
              "the --pipelines directory; tokens: the --auth-tokens file; "
              "metrics_auth: the --metrics-basic-auth file) "
              "and result (ok: in force for new calls; error: refused, the "
              "previous one stays in force)")
          .Register(registry);
  auto& last =
      prometheus::BuildGauge()
          .Name("backfill_config_last_reload_success_timestamp_seconds")
          .Help(
              "Unix time of the last successful load of the configuration "
              "of this kind (at start-up or on SIGHUP)")
          .Register(registry);
  for (auto [series, kind] :
       {std::pair<Series*, const char*>{&pipelines_, "pipelines"},
        {&tokens_, "tokens"},
        {&metrics_auth_, "metrics_auth"}}) {
    series->ok = &reloads.Add({{"kind", kind}, {"result", "ok"}});
    series->error = &reloads.Add({{"kind", kind}, {"result", "error"}});
    series->last_success = &last.Add({{"kind", kind}});
  }
}

ReloadMetrics::Series& ReloadMetrics::SeriesOf(Kind kind) {
  switch (kind) {
    case Kind::kPipelines:
      return pipelines_;
    case Kind::kTokens:
      return tokens_;
    case Kind::kMetricsAuth:
      break;
  }
  return metrics_auth_;
}

void ReloadMetrics::Loaded(Kind kind, absl::Time at) {
  SeriesOf(kind).last_success->Set(
      absl::ToDoubleSeconds(at - absl::UnixEpoch()));
}

void ReloadMetrics::Reloaded(Kind kind, bool ok, absl::Time at) {
  Series& series = SeriesOf(kind);
  if (ok) {
    series.ok->Increment();
    series.last_success->Set(absl::ToDoubleSeconds(at - absl::UnixEpoch()));
  } else {
    series.error->Increment();
  }
}

}  // namespace backfill
