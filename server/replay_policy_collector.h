// ReplayPolicyCollector: the replay policies' metrics, per dataset with a
// policy that was evaluated (label `dataset`, bounded by the catalog):
//   backfill_replay_due_partitions            gauge: due at the last look
//   backfill_replay_evaluations_total         counter, also by `result`
//                                             (ReplayEvaluation::result)
//   backfill_replay_last_evaluation_timestamp_seconds  gauge
// Read from the keeper's own records at scrape time
// (ReplayKeeper::Counters).
//
// Does not own the keeper, which must outlive the metrics' serving.
// Thread-safe.

#ifndef BACKFILL_SERVER_REPLAY_POLICY_COLLECTOR_H_
#define BACKFILL_SERVER_REPLAY_POLICY_COLLECTOR_H_

#include <vector>

#include "core/run/replay_keeper.h"
#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"

namespace backfill {

class ReplayPolicyCollector final : public prometheus::Collectable {
 public:
  explicit ReplayPolicyCollector(ReplayKeeper* keeper) : keeper_(keeper) {}

  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  ReplayKeeper* const keeper_;
};

}  // namespace backfill

#endif  // BACKFILL_SERVER_REPLAY_POLICY_COLLECTOR_H_
