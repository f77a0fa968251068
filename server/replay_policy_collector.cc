#include "server/replay_policy_collector.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"

namespace backfill {

std::vector<prometheus::MetricFamily> ReplayPolicyCollector::Collect() const {
  prometheus::MetricFamily due;
  due.name = "backfill_replay_due_partitions";
  due.help =
      "Partitions a dataset's replay policy found due at its last "
      "evaluation (stale for a declared trigger, in the window, settled, not "
      "in an active job).";
  due.type = prometheus::MetricType::Gauge;
  prometheus::MetricFamily evaluations;
  evaluations.name = "backfill_replay_evaluations_total";
  evaluations.help =
      "Evaluations of a dataset's replay policy, by result: nothing_due, "
      "submitted, already_submitted, would_submit, paused, not_planned, "
      "failed.";
  evaluations.type = prometheus::MetricType::Counter;
  prometheus::MetricFamily last;
  last.name = "backfill_replay_last_evaluation_timestamp_seconds";
  last.help = "When a dataset's replay policy was last evaluated (Unix time).";
  last.type = prometheus::MetricType::Gauge;
  for (const ReplayPolicyCounters& c : keeper_->Counters()) {
    prometheus::ClientMetric d;
    d.label.push_back({"dataset", c.dataset});
    d.gauge.value = static_cast<double>(c.due_partitions);
    due.metric.push_back(std::move(d));
    for (const auto& [result, n] : c.evaluations) {
      prometheus::ClientMetric e;
      e.label.push_back({"dataset", c.dataset});
      e.label.push_back({"result", result});
      e.counter.value = static_cast<double>(n);
      evaluations.metric.push_back(std::move(e));
    }
    prometheus::ClientMetric t;
    t.label.push_back({"dataset", c.dataset});
    t.gauge.value =
        absl::ToDoubleSeconds(c.last_evaluation - absl::UnixEpoch());
    last.metric.push_back(std::move(t));
  }
  return {std::move(due), std::move(evaluations), std::move(last)};
}

}  // namespace backfill
