// StalePartitionsCollector: the `backfill_stale_partitions` gauge — per
// derived dataset (label `dataset`, bounded by the catalog), how many of
// its published partitions are stale by their lineage: an input they read
// was replaced since by a later job (e.g. one submitted with
// --no-downstream) or a rollback (core/plan/stale_dependents.h).
//
// Reads core/plan/stale_partition_counts.h at scrape time, which recomputes
// only when the recorded history changed (a publish, a rollback, a job that
// succeeded) and otherwise answers from its cache. When the counts cannot
// be read the family is left out of the scrape (and a warning logged).
//
// Does not own the counts, which must outlive it. Thread-safe.

#ifndef BACKFILL_SERVER_STALE_PARTITIONS_COLLECTOR_H_
#define BACKFILL_SERVER_STALE_PARTITIONS_COLLECTOR_H_

#include <vector>

#include "core/plan/stale_partition_counts.h"
#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"

namespace backfill {

class StalePartitionsCollector final : public prometheus::Collectable {
 public:
  explicit StalePartitionsCollector(StalePartitionCounts* counts)
      : counts_(counts) {}

  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  StalePartitionCounts* const counts_;
};

}  // namespace backfill

#endif  // BACKFILL_SERVER_STALE_PARTITIONS_COLLECTOR_H_
