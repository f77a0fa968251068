#include "client/policy_format.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/plan_format.h"
#include "client/text_table.h"
#include "client/value_format.h"

namespace backfill {
namespace cli {
namespace {

using Partitions = google::protobuf::RepeatedPtrField<std::string>;

// "window 90d, settle 30m, max_cost 10%, approval required, every 5m".
std::string RulesText(const v1::ReplayPolicy& p) {
  std::vector<std::string> parts = {absl::StrCat("window ", p.window())};
  if (!p.settle().empty()) parts.push_back(absl::StrCat("settle ", p.settle()));
  if (!p.max_cost().empty()) {
    parts.push_back(absl::StrCat("max_cost ", p.max_cost()));
  }
  parts.push_back(p.approval_required() ? "approval required"
                                        : "approval auto");
  parts.push_back(absl::StrCat("every ", p.check_every()));
  return TerminalText(absl::StrJoin(parts, ", "));
}

// "0", "1: 2025-03-01", "12: 2025-03-01..2025-03-12 (12)".
std::string CountOf(const Partitions& partitions) {
  if (partitions.empty()) return "0";
  return absl::StrCat(partitions.size(), ": ",
                      SummarizePartitions(partitions, 2));
}

// The lines of one evaluation's stale partitions that are not due, each
// with why: "  frozen (by frozen.before 2025-01-01): 2024-12-30".
std::string NotDueLines(const v1::ReplayEvaluation& ev,
                        const std::string& frozen_rule,
                        const std::string& indent) {
  std::string out;
  const std::pair<std::string, const Partitions*> kinds[] = {
      {frozen_rule.empty() ? "frozen"
                           : absl::StrCat("frozen (", frozen_rule, ")"),
       &ev.frozen_partitions()},
      {"inputs still changing (settle)", &ev.unsettled_partitions()},
      {"in an active job", &ev.held_partitions()},
      {"replay did not succeed (waits for a new change, or backfillctl "
       "retry of its job)",
       &ev.failed_partitions()},
      {"outside the window", &ev.outside_window()},
      {"stale for a trigger the policy does not name", &ev.not_a_trigger()},
  };
  for (const auto& [what, partitions] : kinds) {
    if (partitions->empty()) continue;
    absl::StrAppend(&out, indent, TerminalText(what), ": ",
                    SummarizePartitions(*partitions), "\n");
  }
  return out;
}

std::string LastJobText(const v1::ReplayPolicy& p) {
  if (p.last_backfill_id().empty()) return "-";
  return TerminalText(absl::StrCat(p.last_backfill_id(), " ",
                                   StateName(p.last_backfill_state())));
}

}  // namespace

std::string FormatReplayPolicies(
    const v1::ListReplayPoliciesResponse& response) {
  if (response.policies().empty()) {
    return "no replay policies declared (a derived dataset declares one with "
           "`replay:` in its pipeline file)\n";
  }
  TextTable table({"DATASET", "TRIGGERS", "RULES", "FROZEN", "STATE", "DUE",
                   "LAST EVALUATION", "LAST JOB"});
  for (const v1::ReplayPolicy& p : response.policies()) {
    const bool evaluated = p.has_last_evaluation();
    table.AddRow(
        {TerminalText(p.dataset()),
         TerminalText(absl::StrJoin(p.triggers(), ",")), RulesText(p),
         SafeOrDash(p.frozen()), p.paused() ? "paused" : "running",
         evaluated ? CountOf(p.last_evaluation().due_partitions()) : "-",
         evaluated ? FormatTimestamp(p.last_evaluation().evaluated_at())
                   : "not yet",
         LastJobText(p)});
  }
  std::string out = table.Render();
  for (const v1::ReplayPolicy& p : response.policies()) {
    std::string lines;
    if (p.paused()) {
      absl::StrAppend(&lines, "  paused: ", TerminalText(p.paused_reason()),
                      "\n");
    }
    if (p.has_last_evaluation()) {
      const v1::ReplayEvaluation& ev = p.last_evaluation();
      absl::StrAppend(&lines, NotDueLines(ev, p.frozen(), "  "));
      if (!ev.outcome().empty()) {
        absl::StrAppend(
            &lines, "  last evaluation: ", TerminalText(ev.outcome()), "\n");
      }
    }
    if (lines.empty()) continue;
    absl::StrAppend(&out, "\n", TerminalText(p.dataset()), ":\n", lines);
  }
  return out;
}

std::string FormatReplayPolicy(const v1::ReplayPolicy& policy) {
  v1::ListReplayPoliciesResponse one;
  *one.add_policies() = policy;
  return FormatReplayPolicies(one);
}

std::string FormatReplayEvaluation(const v1::ReplayEvaluation& ev) {
  std::string out =
      absl::StrCat("Replay policy of ", TerminalText(ev.dataset()),
                   ", evaluated ", FormatTimestamp(ev.evaluated_at()), "\n",
                   "Due: ", CountOf(ev.due_partitions()), "\n");
  absl::StrAppend(&out, NotDueLines(ev, "", "Not due, "));
  if (!ev.reason().empty()) {
    absl::StrAppend(&out, "Reason: ", TerminalText(ev.reason()), "\n");
  }
  if (!ev.approval_hold().empty()) {
    absl::StrAppend(&out,
                    "Waits for an approval: ", TerminalText(ev.approval_hold()),
                    "\n");
  }
  absl::StrAppend(&out, "Outcome: ", TerminalText(ev.outcome()), "\n");
  if (ev.has_plan() && !ev.plan().datasets().empty()) {
    absl::StrAppend(&out, "\n", FormatPlan(ev.plan()));
  }
  return out;
}

}  // namespace cli
}  // namespace backfill
