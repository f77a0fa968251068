// NodeLeasesCollector: the `backfill_node_leases` gauge of a replica of a
// group (backfilld --state-dsn) — the job leases this replica holds now,
// by the step it does under each (label `kind`: run, validate, publish,
// confirm, rollback; every kind present, 0 when none; a step outside them,
// which no replica of this version claims, counts as `other`). Only live
// leases count: one that expired is no longer this replica's, whether or
// not another replica took it over yet.
//
// Reads LeaseStore::ListLeases() at scrape time, narrowed to the leases
// whose holder is this replica's node name. When the leases cannot be read
// the family is left out of the scrape (and a warning logged).
//
// Does not own the store, which must outlive the metrics' serving.
// Thread-safe (as the store is).

#ifndef BACKFILL_SERVER_NODE_LEASES_COLLECTOR_H_
#define BACKFILL_SERVER_NODE_LEASES_COLLECTOR_H_

#include <string>
#include <utility>
#include <vector>

#include "core/ports/lease_store.h"
#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"

namespace backfill {

// The step kinds of a lease (JobLease::step), in the order of the gauge.
// "hold": a job that waits for a decision (approval, retry), holding its
// partitions.
inline constexpr const char* kLeaseStepKinds[] = {
    "run", "validate", "publish", "confirm", "rollback", "hold"};

class NodeLeasesCollector final : public prometheus::Collectable {
 public:
  // `leases`: the group's store, not null. `node`: this replica's name in
  // the group (--node-name).
  NodeLeasesCollector(LeaseStore* leases, std::string node)
      : leases_(leases), node_(std::move(node)) {}

  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  LeaseStore* const leases_;
  const std::string node_;
};

}  // namespace backfill

#endif  // BACKFILL_SERVER_NODE_LEASES_COLLECTOR_H_
