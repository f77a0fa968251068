#include "server/replay_policy_convert.h"

#include <string>

#include "core/model/quantity_text.h"
#include "core/plan/stale_lineage.h"
#include "server/proto_convert.h"

namespace backfill {

v1::ReplayEvaluation ReplayEvaluationToProto(const ReplayEvaluation& ev,
                                             const Catalog& catalog) {
  v1::ReplayEvaluation out;
  out.set_dataset(ev.dataset);
  TimeToProto(ev.at, out.mutable_evaluated_at());
  for (const StalePartition& sp : ev.due.due) {
    out.add_due_partitions(sp.partition);
  }
  for (const std::string& p : ev.due.unsettled) out.add_unsettled_partitions(p);
  for (const std::string& p : ev.due.held) out.add_held_partitions(p);
  for (const std::string& p : ev.due.outside_window) out.add_outside_window(p);
  for (const std::string& p : ev.due.not_a_trigger) out.add_not_a_trigger(p);
  for (const std::string& p : ev.due.frozen) out.add_frozen_partitions(p);
  for (const std::string& p : ev.due.failed) out.add_failed_partitions(p);
  out.set_reason(ev.due.request.reason);
  out.set_approval_hold(ev.hold);
  if (!ev.plan.datasets.empty()) {
    *out.mutable_plan() = PlanToProto(ev.plan, catalog);
  }
  out.set_outcome(ev.outcome);
  out.set_backfill_id(ev.job_id);
  out.set_created(ev.created);
  return out;
}

v1::ReplayPolicy ReplayPolicyToProto(const ReplayPolicyStatus& status,
                                     const Catalog& catalog) {
  v1::ReplayPolicy out;
  const ReplayPolicy& p = status.policy;
  out.set_dataset(status.dataset);
  if (p.on_input_change) out.add_triggers("input_change");
  if (p.on_transform_change) out.add_triggers("transform_change");
  out.set_window(FormatDurationText(p.window));
  if (p.settle > absl::ZeroDuration()) {
    out.set_settle(FormatDurationText(p.settle));
  }
  if (p.max_cost) out.set_max_cost(p.max_cost->text);
  out.set_approval_required(p.approval_required);
  out.set_check_every(FormatDurationText(p.check_every));
  out.set_frozen(status.frozen);
  out.set_paused(status.paused);
  out.set_paused_reason(status.paused_reason);
  if (status.last) {
    *out.mutable_last_evaluation() =
        ReplayEvaluationToProto(*status.last, catalog);
  }
  if (status.last_job) {
    out.set_last_backfill_id(status.last_job->id);
    out.set_last_backfill_state(StateToProto(status.last_job->state));
  }
  return out;
}

}  // namespace backfill
