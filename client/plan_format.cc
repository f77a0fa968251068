#include "client/plan_format.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/cli_terms.h"
#include "client/text_table.h"
#include "client/value_format.h"
#include "client/vocabulary_text.h"

namespace backfill {
namespace cli {
namespace {

// How many partitions `plan` holds: the list's size, or partition_count
// when the server left the list out (a plan too large to list).
int64_t PlannedCount(const v1::DatasetPlan& plan) {
  return std::max<int64_t>(plan.partition_count(), plan.partitions_size());
}

// Whether the server left `plan`'s partitions out.
bool Unlisted(const v1::DatasetPlan& plan) {
  return plan.partition_count() > plan.partitions_size();
}

// Runs of partitions with one reason longer than this are shown as a range.
constexpr int kMaxListedInRun = 3;
constexpr int kMaxConflictsShown = 10;

// "Estimated from: a history (3/3 partitions), b row counts\n"; "" when
// the server said nothing about it.
std::string EstimateSourcesText(
    const google::protobuf::RepeatedPtrField<v1::DatasetPlan>& datasets) {
  std::vector<std::string> parts;
  for (const v1::DatasetPlan& plan : datasets) {
    if (plan.estimate_source() == v1::ESTIMATE_SOURCE_UNSPECIFIED) continue;
    parts.push_back(absl::StrCat(
        TerminalText(plan.dataset()), " ",
        SourceText(plan.estimate_source(), plan.partitions_from_history(),
                   PlannedCount(plan))));
  }
  if (parts.empty()) return "";
  return absl::StrCat("Estimated from: ", absl::StrJoin(parts, ", "), "\n");
}

// The partitions frozen rules closed, a line per dataset ("Frozen: daily
// 2024-12-30, 2024-12-31 (frozen.before 2025-01-01): left out; an approver
// may add --override-frozen"), then a blank line; "" when none.
std::string FrozenText(const v1::PlanBackfillResponse& response) {
  constexpr int kMaxShown = 10;
  std::string out;
  for (const v1::FrozenPartitions& f : response.frozen()) {
    std::vector<std::string> shown;
    for (int i = 0; i < f.partitions_size() && i < kMaxShown; ++i) {
      shown.push_back(TerminalText(f.partitions(i)));
    }
    absl::StrAppend(
        &out, "Frozen: ", TerminalText(f.dataset()), " ",
        absl::StrJoin(shown, ", "),
        f.partitions_size() > kMaxShown
            ? absl::StrCat(" and ", f.partitions_size() - kMaxShown, " more")
            : "",
        " (", TerminalText(f.rule()), "): ",
        f.overridden() ? "planned anyway (--override-frozen)"
                       : "left out; an approver may add --override-frozen",
        "\n");
  }
  if (!out.empty()) out += "\n";
  return out;
}

// The budgets of a plan and whether a submit would be refused; "" when no
// budget applies.
std::string BudgetText(const v1::PlanBackfillResponse& response) {
  std::vector<std::string> limits;
  const v1::CostEstimate& cost = response.cost();
  if (cost.max_cost() > 0) {
    limits.push_back(absl::StrCat("--max-cost ", HumanCount(cost.max_cost()),
                                  " ", UnitOr(cost.unit())));
  }
  bool refused = !cost.refused().empty();
  for (const v1::DatasetPlan& plan : response.datasets()) {
    if (plan.cost().max_cost() > 0) {
      limits.push_back(absl::StrCat(TerminalText(plan.dataset()), " max_cost ",
                                    HumanCount(plan.cost().max_cost()), " ",
                                    UnitOr(plan.cost().unit())));
    }
    refused = refused || !plan.cost().refused().empty();
  }
  if (limits.empty() && !refused) return "";
  std::string out = absl::StrCat(
      "Budget: ", limits.empty() ? "-" : absl::StrJoin(limits, ", "));
  if (!refused) return absl::StrCat(out, " (within)\n");
  absl::StrAppend(
      &out, "\nA submit of this plan WOULD BE REFUSED: ",
      TerminalText(cost.refused().empty() ? "over a budget"
                                          : InCliTerms(cost.refused())),
      "\n");
  for (const v1::DatasetPlan& plan : response.datasets()) {
    if (plan.cost().refused().empty() ||
        plan.cost().refused() == cost.refused()) {
      continue;
    }
    absl::StrAppend(&out,
                    "  also: ", TerminalText(InCliTerms(plan.cost().refused())),
                    "\n");
  }
  return out;
}

// "day", "" (unpartitioned), or "day x key" for a dataset partitioned by
// time x key.
std::string PlanGrainText(const v1::DatasetPlan& plan) {
  std::string grain = GrainText(plan.grain());
  if (!plan.partition_key_column().empty()) {
    absl::StrAppend(&grain, " x key");
  }
  return grain;
}

}  // namespace

std::string FormatPartitionReasons(const v1::DatasetPlan& plan,
                                   absl::string_view indent, int max_ranges) {
  const int n = plan.partitions_size();
  if (n == 0 || plan.partition_reasons_size() != n) return "";
  std::string out;
  int ranges = 0;
  int i = 0;
  while (i < n) {
    int j = i + 1;
    while (j < n && plan.partition_reasons(j) == plan.partition_reasons(i)) {
      ++j;
    }
    if (ranges == max_ranges) {
      int more = 0;
      for (int k = i; k < n; ++more) {
        int l = k + 1;
        while (l < n &&
               plan.partition_reasons(l) == plan.partition_reasons(k)) {
          ++l;
        }
        k = l;
      }
      absl::StrAppend(&out, indent, "... and ", more, " more range",
                      more == 1 ? "" : "s", " (--json lists every reason)\n");
      break;
    }
    const std::string first = plan.partitions(i).empty()
                                  ? "(unpartitioned)"
                                  : TerminalText(plan.partitions(i));
    std::string line = absl::StrCat(indent, first);
    // Up to three partitions are listed one by one, so that a short run
    // with gaps (2025-03, 2025-08, 2025-11) never reads as a range.
    if (j - i > 1 && j - i <= kMaxListedInRun) {
      for (int k = i + 1; k < j; ++k) {
        absl::StrAppend(&line, ", ", TerminalText(plan.partitions(k)));
      }
    } else if (j - i > 1) {
      absl::StrAppend(&line, " .. ", TerminalText(plan.partitions(j - 1)));
    }
    absl::StrAppend(&line, "  ",
                    SafeOrDash(InCliTerms(plan.partition_reasons(i))));
    if (j - i > kMaxListedInRun) absl::StrAppend(&line, " (", j - i, ")");
    absl::StrAppend(&out, line, "\n");
    ++ranges;
    i = j;
  }
  return out;
}

std::string FormatPlan(const v1::PlanBackfillResponse& response) {
  std::string out =
      absl::StrCat("Plan: ", Plural(response.total_partitions(), "partition"),
                   " in ", Plural(response.datasets_size(), "dataset"), "\n\n");
  TextTable table(
      {"DATASET", "GRAIN", "PARTITIONS", "RANGE", "COST", "VS FULL", "WHY"});
  for (const v1::DatasetPlan& plan : response.datasets()) {
    table.AddRow(
        {TerminalText(plan.dataset()), SafeOrDash(PlanGrainText(plan)),
         absl::StrCat(PlannedCount(plan)),
         Unlisted(plan) ? "(not listed)"
                        : SummarizePartitions(plan.partitions()),
         HumanCount(plan.cost().backfill()),
         plan.cost().full_reload() > 0 ? Percent(plan.cost().ratio()) : "-",
         SafeOrDash(plan.reason())});
  }
  absl::StrAppend(&out, table.Render(), "\n");
  if (std::any_of(response.datasets().begin(), response.datasets().end(),
                  Unlisted)) {
    absl::StrAppend(&out,
                    "The plan is too large to list its partitions; a "
                    "submitted job lists them page by page (backfillctl "
                    "partitions)\n\n");
  }
  for (const v1::DatasetPlan& plan : response.datasets()) {
    if (plan.keys_size() == 0) continue;
    absl::StrAppend(&out, "Only the rows of ", TerminalText(plan.dataset()),
                    " with ", KeysText(plan.keys()),
                    " are replaced (dependents by partition)\n\n");
  }
  std::string why;
  for (const v1::DatasetPlan& plan : response.datasets()) {
    const std::string reasons = FormatPartitionReasons(plan, "    ");
    if (!reasons.empty()) {
      absl::StrAppend(&why, "  ", TerminalText(plan.dataset()), "\n", reasons);
    }
  }
  if (!why.empty()) absl::StrAppend(&out, "Why each partition:\n", why, "\n");
  absl::StrAppend(&out, FrozenText(response));
  const v1::CostEstimate& cost = response.cost();
  absl::StrAppend(&out, "Cost: ", HumanCount(cost.backfill()), " ",
                  UnitOr(cost.unit()), " estimated vs ",
                  HumanCount(cost.full_reload()), " for a full reload");
  if (cost.full_reload() > 0) {
    absl::StrAppend(&out, " (", Percent(cost.ratio()), ")");
  }
  absl::StrAppend(&out, "\n");
  absl::StrAppend(&out, EstimateSourcesText(response.datasets()));
  absl::StrAppend(&out, BudgetText(response));
  if (response.datasets_size() > 0) {
    absl::StrAppend(
        &out,
        "Early cutoff: a partition recomputed identical to its published "
        "version is not republished, and a dependent reading only such "
        "partitions is skipped (counted as unchanged / skipped)\n");
  }
  if (response.conflicts().empty()) {
    absl::StrAppend(&out, "Conflicts: none\n");
    return out;
  }
  // The jobs holding the partitions, in the order the server lists them.
  std::vector<std::string> holders;
  for (const v1::Conflict& conflict : response.conflicts()) {
    if (std::find(holders.begin(), holders.end(), conflict.backfill_id()) ==
        holders.end()) {
      holders.push_back(conflict.backfill_id());
    }
  }
  absl::StrAppend(&out, "Conflicts: ", response.conflicts_size(),
                  " (a submit would wait for ",
                  holders.size() == 1 ? "job " : "jobs ",
                  absl::StrJoin(holders, ", ",
                                [](std::string* line, const std::string& id) {
                                  absl::StrAppend(line, TerminalText(id));
                                }),
                  " to finish; with --no-wait it would be refused)\n");
  int shown = 0;
  for (const v1::Conflict& conflict : response.conflicts()) {
    if (shown++ == kMaxConflictsShown) {
      absl::StrAppend(&out, "  ... and ",
                      response.conflicts_size() - kMaxConflictsShown,
                      " more\n");
      break;
    }
    absl::StrAppend(&out, "  job ", TerminalText(conflict.backfill_id()), "  ",
                    TerminalText(conflict.dataset()), "  ",
                    conflict.partition().empty()
                        ? "(unpartitioned)"
                        : TerminalText(conflict.partition()),
                    "\n");
  }
  return out;
}

}  // namespace cli
}  // namespace backfill
