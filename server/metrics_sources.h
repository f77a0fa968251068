// ConfigureMetricsSources: what the daemon's metrics (server/metrics.h)
// read from the pipelines and the state store. The catalog's derived
// datasets get their per-dataset series from the start; the ETA gauges
// read the running jobs' progress from the store at scrape time, and the
// consumer health gauge the store's standings of the consumers the catalog
// declares. The daemon calls it at start and after each reload of the
// pipelines.
//
// A stateless function; owns nothing. The readers it sets hold `store` and
// run on the exposer's threads at scrape time, so the store must stay
// valid until the metrics stop serving. Not to be called concurrently with
// itself (the daemon calls it at start and under its reload lock).

#ifndef BACKFILL_SERVER_METRICS_SOURCES_H_
#define BACKFILL_SERVER_METRICS_SOURCES_H_

#include "core/model/catalog.h"
#include "core/ports/state_store.h"
#include "server/metrics.h"

namespace backfill {

void ConfigureMetricsSources(const Catalog& catalog, StateStore* store,
                             Metrics* metrics);

}  // namespace backfill

#endif  // BACKFILL_SERVER_METRICS_SOURCES_H_
