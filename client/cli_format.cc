#include "client/cli_format.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "client/cli_terms.h"
#include "client/text_table.h"
#include "client/value_format.h"
#include "client/vocabulary_text.h"

namespace backfill {
namespace cli {
namespace {

constexpr int kMaxReasonWidth = 40;
// Runs of partitions with one reason longer than this are shown as a range.
constexpr int kMaxListedInRun = 3;
constexpr int kMaxConflictsShown = 10;

std::string ScopeText(const v1::BackfillRequest& request) {
  if (request.auto_detect()) return "auto (lineage no longer matches)";
  if (!request.affected_by().empty()) {
    return absl::StrCat("affected by \"", TerminalText(request.affected_by()),
                        "\"");
  }
  if (!request.from_partition().empty() || !request.to_partition().empty()) {
    return absl::StrCat("[", TerminalText(request.from_partition()), ", ",
                        TerminalText(request.to_partition()), ")");
  }
  if (request.partitions_size() > 0) {
    return absl::StrCat("partitions ",
                        SummarizePartitions(request.partitions(), 6));
  }
  return "(whole dataset)";
}

// "12/30 done: 2 published, 10 staged, 3 running, 15 pending" (zero
// counts left out; unchanged and skipped partitions count as done).
std::string CountsText(const v1::PartitionCounts& counts) {
  std::vector<std::string> parts;
  auto add = [&parts](int64_t count, absl::string_view name) {
    if (count != 0) parts.push_back(absl::StrCat(count, " ", name));
  };
  add(counts.published(), "published");
  add(counts.staged(), "staged");
  add(counts.unchanged(), "unchanged");
  add(counts.skipped(), "skipped");
  add(counts.running(), "running");
  add(counts.pending(), "pending");
  add(counts.failed(), "failed");
  add(counts.cancelled(), "cancelled");
  std::string out =
      absl::StrCat(DonePartitions(counts), "/", counts.total(), " done");
  if (!parts.empty()) absl::StrAppend(&out, ": ", absl::StrJoin(parts, ", "));
  return out;
}

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
                   plan.partitions_size())));
  }
  if (parts.empty()) return "";
  return absl::StrCat("Estimated from: ", absl::StrJoin(parts, ", "), "\n");
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

std::string FormatDatasets(const v1::ListDatasetsResponse& response) {
  if (response.datasets().empty()) return "no datasets declared\n";
  TextTable table({"NAME", "KIND", "GRAIN", "TABLE", "UPSTREAM", "DOWNSTREAM",
                   "ENTITY KEY"});
  for (const v1::Dataset& dataset : response.datasets()) {
    std::vector<std::string> upstream;
    for (const v1::Upstream& edge : dataset.upstream()) {
      std::string mapping = MappingText(edge.mapping());
      if (edge.mapping() == v1::PARTITION_MAPPING_LOOKBACK &&
          edge.lookback() > 0) {
        absl::StrAppend(&mapping, " ", edge.lookback());
      }
      upstream.push_back(mapping.empty()
                             ? edge.dataset()
                             : absl::StrCat(edge.dataset(), "(", mapping, ")"));
    }
    std::string grain = GrainText(dataset.grain());
    if (!grain.empty() && !dataset.partition_column().empty()) {
      absl::StrAppend(&grain, ":", dataset.partition_column());
    }
    if (!grain.empty() && !dataset.partition_key_column().empty()) {
      // Time x key: "day:ds x key:region".
      absl::StrAppend(&grain, " x key:", dataset.partition_key_column());
    }
    table.AddRow({TerminalText(dataset.name()),
                  SafeOrDash(DatasetKindText(dataset.kind())),
                  SafeOrDash(grain), SafeOrDash(dataset.table()),
                  SafeOrDash(absl::StrJoin(upstream, ",")),
                  SafeOrDash(absl::StrJoin(dataset.downstream(), ",")),
                  SafeOrDash(dataset.entity_key())});
  }
  std::string out = table.Render();
  // Downstream consumers, confirmed after each publish.
  std::string consumers;
  for (const v1::Dataset& dataset : response.datasets()) {
    for (const v1::Consumer& c : dataset.consumers()) {
      absl::StrAppend(
          &consumers, "  ", TerminalText(dataset.name()), " -> ",
          TerminalText(c.name()), " (", ConsumerKindText(c.kind()),
          "): invalidate ", TerminalText(c.invalidate()), "; probe ",
          TerminalText(c.probe()), " field ", TerminalText(c.field()),
          c.sample() > 0 ? absl::StrCat(" (sample ", c.sample(), ")") : "",
          "; timeout ", TerminalText(c.timeout()), "\n");
    }
  }
  if (!consumers.empty()) {
    absl::StrAppend(&out, "\nDownstream consumers:\n", consumers);
  }
  return out;
}

namespace {

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

std::string FormatPlan(const v1::PlanBackfillResponse& response) {
  std::string out =
      absl::StrCat("Plan: ", Plural(response.total_partitions(), "partition"),
                   " in ", Plural(response.datasets_size(), "dataset"), "\n\n");
  TextTable table(
      {"DATASET", "GRAIN", "PARTITIONS", "RANGE", "COST", "VS FULL", "WHY"});
  for (const v1::DatasetPlan& plan : response.datasets()) {
    table.AddRow(
        {TerminalText(plan.dataset()), SafeOrDash(PlanGrainText(plan)),
         absl::StrCat(plan.partitions_size()),
         SummarizePartitions(plan.partitions()),
         HumanCount(plan.cost().backfill()),
         plan.cost().full_reload() > 0 ? Percent(plan.cost().ratio()) : "-",
         SafeOrDash(plan.reason())});
  }
  absl::StrAppend(&out, table.Render(), "\n");
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

namespace {

// "30 partitions, 30 changed; rows 120 -> 118: +0 added, -2 removed,
// ~116 changed, 2 unchanged; revenue -345.67 (12000 -> 11654.33)".
std::string DiffTotalsText(const v1::DatasetDiff& diff) {
  std::string out = absl::StrCat(Plural(diff.partitions(), "partition"), ", ",
                                 diff.partitions_changed(), " with changes");
  if (diff.partitions_failed() > 0) {
    absl::StrAppend(&out, ", ", diff.partitions_failed(), " without a diff");
  }
  absl::StrAppend(&out, "; rows ", Grouped(diff.rows_before()), " -> ",
                  Grouped(diff.rows_after()), ": +", Grouped(diff.added()),
                  " added, -", Grouped(diff.removed()), " removed");
  if (diff.by_primary_key()) {
    absl::StrAppend(&out, ", ~", Grouped(diff.changed()), " changed");
  }
  absl::StrAppend(&out, ", ", Grouped(diff.unchanged()), " unchanged");
  for (const v1::MeasureDelta& m : diff.measures()) {
    absl::StrAppend(&out, "; ", TerminalText(m.column()), " ",
                    FormatNumber(m.delta(), true), " (",
                    FormatNumber(m.before()), " -> ", FormatNumber(m.after()),
                    ")");
  }
  return out;
}

}  // namespace

std::string FormatDiff(const v1::DiffBackfillResponse& response) {
  std::string out = absl::StrCat(
      "Diff of ", TerminalText(response.id()), " (",
      StateName(response.state()), "), computed ",
      FormatTimestamp(response.compute_time()),
      ": the published rows (before) against the job's staged rows "
      "(after)\n");
  std::map<std::string, const v1::DatasetDiff*> by_name;
  for (const v1::DatasetDiff& d : response.datasets()) {
    by_name[d.dataset()] = &d;
    absl::StrAppend(
        &out, "\n", TerminalText(d.dataset()), "  ",
        d.by_primary_key()
            ? absl::StrCat("rows matched by primary key (",
                           TerminalText(absl::StrJoin(d.key_columns(), ", ")),
                           ")")
            : "no primary key: whole rows compared (added/removed only)",
        "\n  ", DiffTotalsText(d), "\n");
    std::vector<std::string> header = {"PARTITION", "BEFORE",  "AFTER",
                                       "ADDED",     "REMOVED", "CHANGED",
                                       "UNCHANGED"};
    for (const v1::MeasureDelta& m : d.measures()) {
      header.push_back(absl::StrCat(TerminalText(m.column()), " delta"));
    }
    TextTable table(std::move(header));
    bool any = false;
    for (const v1::PartitionDiff& p : response.partitions()) {
      if (p.dataset() != d.dataset()) continue;
      any = true;
      const std::string partition =
          p.partition().empty() ? "(all)" : TerminalText(p.partition());
      if (!p.error().empty()) {
        table.AddRow({partition, "diff failed: " + TerminalText(p.error())});
        continue;
      }
      std::vector<std::string> row = {
          partition,
          Grouped(p.rows_before()),
          Grouped(p.rows_after()),
          Grouped(p.added()),
          Grouped(p.removed()),
          d.by_primary_key() ? Grouped(p.changed()) : "-",
          Grouped(p.unchanged())};
      for (const v1::MeasureDelta& m : p.measures()) {
        row.push_back(FormatNumber(m.delta(), true));
      }
      table.AddRow(std::move(row));
    }
    if (any) absl::StrAppend(&out, "\n", table.Render());
  }
  bool header_done = false;
  for (const v1::PartitionDiff& p : response.partitions()) {
    if (p.samples().empty()) continue;
    if (!header_done) {
      absl::StrAppend(&out, "\nSample rows (values as SQL literals):\n");
      header_done = true;
    }
    const v1::DatasetDiff* d =
        by_name.count(p.dataset()) ? by_name[p.dataset()] : nullptr;
    absl::StrAppend(
        &out, "  ", TerminalText(p.dataset()), " ",
        p.partition().empty() ? "(all)" : TerminalText(p.partition()), "\n");
    for (const v1::DiffSampleRow& row : p.samples()) {
      std::string line = absl::StrCat("    ", TerminalText(row.change()));
      if (row.key_size() > 0) {
        absl::StrAppend(&line, "  (",
                        TerminalText(absl::StrJoin(row.key(), ", ")), ")");
      }
      std::vector<std::string> values;
      const int n = std::max(row.before_size(), row.after_size());
      for (int i = 0; i < n; ++i) {
        const std::string column = d != nullptr && i < d->value_columns_size()
                                       ? TerminalText(d->value_columns(i))
                                       : absl::StrCat("#", i + 1);
        const bool has_before = i < row.before_size();
        const bool has_after = i < row.after_size();
        if (has_before && has_after) {
          if (row.before(i) == row.after(i)) continue;
          values.push_back(absl::StrCat(column, " ",
                                        TerminalText(row.before(i)), " -> ",
                                        TerminalText(row.after(i))));
        } else {
          values.push_back(absl::StrCat(
              column, "=",
              TerminalText(has_after ? row.after(i) : row.before(i))));
        }
      }
      if (!values.empty()) {
        absl::StrAppend(&line, "  ", absl::StrJoin(values, ", "));
      }
      absl::StrAppend(&out, line, "\n");
    }
  }
  return out;
}

std::string FormatBackfill(const v1::Backfill& backfill) {
  const v1::BackfillRequest& request = backfill.request();
  const v1::PartitionCounts& counts = backfill.partitions();
  std::vector<std::pair<std::string, std::string>> lines;
  lines.emplace_back("Job", TerminalText(backfill.id()));
  lines.emplace_back("State", StateName(backfill.state()));
  lines.emplace_back(
      "Scope",
      absl::StrCat(TerminalText(request.dataset()), " ", ScopeText(request),
                   request.exclude_downstream() ? ", downstream excluded"
                                                : ", downstream included"));
  std::string reason = SafeOrDash(request.reason());
  if (!request.ticket().empty()) {
    absl::StrAppend(&reason, "  (ticket ", TerminalText(request.ticket()), ")");
  }
  lines.emplace_back("Reason", reason);
  lines.emplace_back("Requested by", SafeOrDash(request.requested_by()));
  if (!backfill.idempotency_key().empty()) {
    lines.emplace_back("Idempotency", TerminalText(backfill.idempotency_key()));
  }
  if (request.priority() != 0) {
    lines.emplace_back("Priority", absl::StrCat(request.priority()));
  }
  if (request.max_parallel() != 0) {
    lines.emplace_back(
        "Max parallel",
        absl::StrCat(Plural(request.max_parallel(), "partition"), " at once"));
  }
  if (request.keys_size() > 0) {
    lines.emplace_back("Keys", KeysText(request.keys()));
  }
  lines.emplace_back("Partitions", CountsText(counts));
  for (const v1::DatasetPlan& plan : backfill.plan()) {
    lines.emplace_back(
        "  " + TerminalText(plan.dataset()),
        absl::StrCat(
            Plural(plan.partitions_size(), "partition"), "  ",
            SummarizePartitions(plan.partitions()),
            plan.reason().empty() ? "" : "  " + TerminalText(plan.reason())));
  }
  const v1::CostEstimate& cost = backfill.cost_estimate();
  lines.emplace_back("Cost",
                     absl::StrCat("estimated ", FormatCost(cost), "; actual ",
                                  HumanCount(backfill.actual_cost()), " ",
                                  UnitOr(cost.unit())));
  if (request.max_cost() > 0) {
    lines.emplace_back("Max cost", absl::StrCat(HumanCount(request.max_cost()),
                                                " ", UnitOr(cost.unit())));
  }
  for (const v1::DatasetCost& dc : backfill.dataset_costs()) {
    lines.emplace_back(
        absl::StrCat("Cost ", TerminalText(dc.dataset())),
        absl::StrCat(
            "estimated ", HumanCount(dc.estimated()), " ", UnitOr(cost.unit()),
            " from ", SourceText(dc.source(), dc.partitions_from_history(), 0),
            "; actual ", HumanCount(dc.actual()), " ", UnitOr(cost.unit())));
  }
  lines.emplace_back("Rows written", Grouped(backfill.rows_written()));
  lines.emplace_back("Created", FormatTimestamp(backfill.create_time()));
  lines.emplace_back("Started", FormatTimestamp(backfill.start_time()));
  lines.emplace_back("Updated", FormatTimestamp(backfill.update_time()));
  lines.emplace_back("Ended", FormatTimestamp(backfill.end_time()));
  if (backfill.has_start_time() && backfill.has_end_time()) {
    auto as_time = [](const google::protobuf::Timestamp& t) {
      return absl::FromUnixSeconds(t.seconds()) + absl::Nanoseconds(t.nanos());
    };
    const absl::Duration took =
        as_time(backfill.end_time()) - as_time(backfill.start_time());
    lines.emplace_back("Duration", absl::FormatDuration(absl::Trunc(
                                       took, absl::Milliseconds(1))));
  }
  if (backfill.has_approval()) {
    const v1::Approval& approval = backfill.approval();
    lines.emplace_back(
        "Approved",
        absl::StrCat("by ", SafeOrDash(approval.approved_by()), " at ",
                     FormatTimestamp(approval.approve_time()), " (",
                     StateName(approval.approved_state()),
                     approval.override_validation()
                         ? ", OVERRIDING the failed validation"
                         : "",
                     "): ", SafeOrDash(approval.reason())));
  }
  for (const v1::DatasetDiff& diff : backfill.diff()) {
    lines.emplace_back(absl::StrCat("Diff ", TerminalText(diff.dataset())),
                       DiffTotalsText(diff));
  }
  lines.emplace_back("Message", SafeOrDash(InCliTerms(backfill.message())));
  if (backfill.has_rollback()) {
    const v1::RollbackInfo& rb = backfill.rollback();
    std::string text = absl::StrCat(FormatTimestamp(rb.time()), " by ",
                                    SafeOrDash(rb.requested_by()), ": ",
                                    SafeOrDash(rb.reason()));
    if (!rb.rolled_back_with().empty()) {
      absl::StrAppend(&text, "  (together with ",
                      TerminalText(rb.rolled_back_with()), ", --force)");
    } else {
      absl::StrAppend(&text, "  (",
                      Plural(rb.partitions_restored(), "partition"), ", ",
                      Plural(rb.rows_restored(), "row"), " restored");
      if (rb.also_rolled_back_size() > 0) {
        std::vector<std::string> ids;
        for (const std::string& id : rb.also_rolled_back()) {
          ids.push_back(TerminalText(id));
        }
        absl::StrAppend(&text, "; with later ",
                        ids.size() == 1 ? "job " : "jobs ",
                        absl::StrJoin(ids, ", "), ", --force");
      }
      absl::StrAppend(&text, ")");
    }
    lines.emplace_back("Rolled back", text);
  }

  size_t width = 0;
  for (const auto& [label, value] : lines)
    width = std::max(width, label.size());
  std::string out;
  for (const auto& [label, value] : lines) {
    absl::StrAppend(&out, label, std::string(width - label.size() + 2, ' '),
                    value, "\n");
  }
  std::string why;
  for (const v1::DatasetPlan& plan : backfill.plan()) {
    const std::string reasons = FormatPartitionReasons(plan, "    ");
    if (!reasons.empty()) {
      absl::StrAppend(&why, "  ", TerminalText(plan.dataset()), "\n", reasons);
    }
  }
  if (!why.empty()) absl::StrAppend(&out, "Why each partition:\n", why);
  absl::StrAppend(&out, FormatChecks(backfill));
  absl::StrAppend(&out, FormatConfirmations(backfill));
  return out;
}

std::string FormatConfirmations(const v1::Backfill& backfill) {
  if (backfill.confirmations().empty()) return "";
  int64_t healthy = 0;
  for (const v1::ConsumerConfirmation& c : backfill.confirmations()) {
    healthy += c.healthy() ? 1 : 0;
  }
  const int64_t total = backfill.confirmations_size();
  std::string out = absl::StrCat("Consumers ", Plural(total, "consumer"), ": ",
                                 healthy, " healthy");
  if (healthy < total)
    absl::StrAppend(&out, ", ", total - healthy, " unhealthy");
  absl::StrAppend(&out, "\n");
  for (const v1::ConsumerConfirmation& c : backfill.confirmations()) {
    // The message names the consumer and its dataset.
    absl::StrAppend(&out, "  ", c.healthy() ? "HEALTHY    " : "UNHEALTHY  ",
                    TerminalText(c.message()), "\n");
  }
  return out;
}

std::string FormatChecks(const v1::Backfill& backfill) {
  if (backfill.checks().empty()) return "";
  // A check of a dataset fails when any of its results does.
  std::map<std::pair<std::string, std::string>, bool> checks;
  for (const v1::CheckResult& r : backfill.checks()) {
    auto [it, inserted] =
        checks.emplace(std::make_pair(r.dataset(), r.name()), r.passed());
    if (!inserted) it->second = it->second && r.passed();
  }
  int64_t passed = 0;
  for (const auto& [key, ok] : checks) passed += ok ? 1 : 0;
  const v1::CheckSeverity order[] = {v1::CHECK_SEVERITY_ERROR,
                                     v1::CHECK_SEVERITY_HOLD,
                                     v1::CHECK_SEVERITY_WARN};
  auto label = [](v1::CheckSeverity s) -> std::string {
    switch (s) {
      case v1::CHECK_SEVERITY_ERROR:
        return "FAILED";
      case v1::CHECK_SEVERITY_HOLD:
        return "HELD";
      case v1::CHECK_SEVERITY_WARN:
        return "WARNED";
      default:
        return "FAILED";
    }
  };
  std::map<v1::CheckSeverity, int64_t> failing;
  for (const auto& [key, ok] : checks) {
    if (ok) continue;
    for (const v1::CheckResult& r : backfill.checks()) {
      if (r.dataset() == key.first && r.name() == key.second) {
        ++failing[r.severity()];
        break;
      }
    }
  }
  std::string out = absl::StrCat(
      "Checks    ", Plural(static_cast<int64_t>(checks.size()), "check"), ": ",
      passed, " passed");
  if (failing[v1::CHECK_SEVERITY_ERROR] > 0) {
    absl::StrAppend(&out, ", ", failing[v1::CHECK_SEVERITY_ERROR], " failed");
  }
  if (failing[v1::CHECK_SEVERITY_HOLD] > 0) {
    absl::StrAppend(&out, ", ", failing[v1::CHECK_SEVERITY_HOLD], " held");
  }
  if (failing[v1::CHECK_SEVERITY_WARN] > 0) {
    absl::StrAppend(&out, ", ", failing[v1::CHECK_SEVERITY_WARN], " warned");
  }
  absl::StrAppend(&out, "\n");
  constexpr int kShownPerSeverity = 10;
  for (v1::CheckSeverity severity : order) {
    int shown = 0;
    int64_t more = 0;
    for (const v1::CheckResult& r : backfill.checks()) {
      if (r.severity() != severity || r.passed()) continue;
      if (r.summary()) {
        // Failing partitions that are not stored one by one.
        int64_t stored = 0;
        for (const v1::CheckResult& d : backfill.checks()) {
          stored += !d.summary() && !d.passed() && d.name() == r.name() &&
                    d.dataset() == r.dataset() && !d.partition().empty();
        }
        more += std::max<int64_t>(0, r.partitions_failed() - stored);
        continue;
      }
      if (shown >= kShownPerSeverity) {
        ++more;
        continue;
      }
      ++shown;
      absl::StrAppend(
          &out, "  ", label(severity), "  ", TerminalText(r.name()), " on ",
          TerminalText(r.dataset()),
          r.partition().empty()
              ? ""
              : absl::StrCat(" ", TerminalText(r.partition())),
          ": ", TerminalText(r.message().empty() ? r.observed() : r.message()),
          "\n");
      if (!r.allowed().empty()) {
        absl::StrAppend(&out, "      allowed: ", TerminalText(r.allowed()),
                        "\n");
      }
      for (int i = 0; i < r.sample_rows_size() && i < 2; ++i) {
        absl::StrAppend(&out, "      e.g. ", TerminalText(r.sample_rows(i)),
                        "\n");
      }
    }
    if (more > 0) {
      absl::StrAppend(
          &out, "  ", label(severity), "  and ", more,
          " more (backfillctl --json status lists what is stored)\n");
    }
  }
  return out;
}

std::string FormatBackfills(const v1::ListBackfillsResponse& response) {
  if (response.backfills().empty()) return "no backfills\n";
  TextTable table({"ID", "STATE", "DATASET", "PARTITIONS", "COST EST/ACTUAL",
                   "CREATED", "REASON"});
  for (const v1::Backfill& backfill : response.backfills()) {
    table.AddRow({TerminalText(backfill.id()), StateName(backfill.state()),
                  TerminalText(backfill.request().dataset()),
                  absl::StrCat(DonePartitions(backfill.partitions()), "/",
                               backfill.partitions().total(),
                               CutoffText(backfill.partitions()).empty()
                                   ? ""
                                   : " " + CutoffText(backfill.partitions())),
                  absl::StrCat(HumanCount(backfill.cost_estimate().backfill()),
                               "/", HumanCount(backfill.actual_cost()), " ",
                               UnitOr(backfill.cost_estimate().unit())),
                  FormatTimestamp(backfill.create_time()),
                  SafeTruncate(backfill.request().reason(), kMaxReasonWidth)});
  }
  return table.Render();
}

std::string FormatPartitions(const v1::ListPartitionsResponse& response) {
  if (response.partitions().empty()) return "no partitions\n";
  TextTable table({"DATASET", "PARTITION", "STATE", "ATTEMPTS", "ROWS",
                   "SECONDS", "UPDATED", "REASON", "ERROR"});
  for (const v1::BackfillPartition& p : response.partitions()) {
    table.AddRow({TerminalText(p.dataset()),
                  p.partition().empty() ? "(unpartitioned)"
                                        : TerminalText(p.partition()),
                  PartitionStateName(p.state()), absl::StrCat(p.attempts()),
                  absl::StrCat(p.rows_written()),
                  p.duration_seconds() > 0
                      ? absl::StrFormat("%.2f", p.duration_seconds())
                      : "-",
                  FormatTimestamp(p.update_time()),
                  p.reason().empty()
                      ? "-"
                      : SafeTruncate(InCliTerms(p.reason()), kMaxReasonWidth),
                  p.last_error().empty()
                      ? "-"
                      : SafeTruncate(p.last_error(), kMaxReasonWidth)});
  }
  return absl::StrCat(table.Render(),
                      Plural(response.partitions_size(), "partition"), "\n");
}

namespace {

// Percent of partitions done, in integers so the bar and the line agree; a
// job that succeeded with nothing to do is complete.
int64_t PercentDone(const v1::Backfill& backfill) {
  const v1::PartitionCounts& counts = backfill.partitions();
  if (counts.total() <= 0) {
    return backfill.state() == v1::BACKFILL_STATE_SUCCEEDED ? 100 : 0;
  }
  return std::clamp<int64_t>(DonePartitions(counts) * 100 / counts.total(), 0,
                             100);
}

// "45s", "3m20s", "2h05m": an ETA, rounded up to whole seconds.
std::string EtaText(double seconds) {
  // A value from the network: NaN, negative or absurd is shown bounded.
  if (!std::isfinite(seconds) || seconds > 1e9) return "more than 30 years";
  const int64_t s = static_cast<int64_t>(std::ceil(std::max(seconds, 0.0)));
  if (s < 60) return absl::StrFormat("%ds", s);
  if (s < 3600) return absl::StrFormat("%dm%02ds", s / 60, s % 60);
  return absl::StrFormat("%dh%02dm", s / 3600, (s % 3600) / 60);
}

// "  ETA 3m20s" when the job's ETA is known, else "".
std::string EtaSuffix(const v1::Backfill& backfill) {
  if (!backfill.has_eta()) return "";
  return absl::StrCat("  ETA ", EtaText(backfill.eta().remaining_seconds()));
}

// "  cost 1.2k/3000 input_rows" (actual so far / estimated) once the job
// has an estimate or has read anything, else "".
std::string CostSoFar(const v1::Backfill& backfill) {
  if (backfill.cost_estimate().backfill() <= 0 && backfill.actual_cost() <= 0) {
    return "";
  }
  return absl::StrCat("  cost ", HumanCount(backfill.actual_cost()), "/",
                      HumanCount(backfill.cost_estimate().backfill()), " ",
                      UnitOr(backfill.cost_estimate().unit()));
}

}  // namespace

std::string FormatProgressBar(const v1::Backfill& backfill,
                              double elapsed_seconds, int bar_width) {
  const v1::PartitionCounts& counts = backfill.partitions();
  const int64_t done = DonePartitions(counts);
  const int64_t percent = PercentDone(backfill);
  int64_t filled =
      counts.total() > 0
          ? std::clamp<int64_t>(done * bar_width / counts.total(), 0, bar_width)
          : percent * bar_width / 100;
  std::string out = absl::StrFormat(
      "[%s%s] %3d%%  %d/%d partitions  %s  %.1f s",
      std::string(static_cast<size_t>(filled), '#'),
      std::string(static_cast<size_t>(bar_width - filled), '.'), percent, done,
      counts.total(), StateName(backfill.state()), elapsed_seconds);
  absl::StrAppend(&out, EtaSuffix(backfill), CostSoFar(backfill));
  if (const std::string cut = CutoffText(counts); !cut.empty()) {
    absl::StrAppend(&out, "  ", cut);
  }
  if (counts.failed() > 0) {
    absl::StrAppend(&out, "  ", counts.failed(), " failed");
  }
  return out;
}

std::string FormatProgressBarFitting(const v1::Backfill& backfill,
                                     double elapsed_seconds, int columns) {
  const size_t fits = static_cast<size_t>(std::max(columns - 1, 1));
  std::string line;
  for (int bar = 20; bar >= 5; bar -= 5) {
    line = FormatProgressBar(backfill, elapsed_seconds, bar);
    if (line.size() <= fits) return line;
  }
  line.resize(fits);  // ASCII: the state, numbers and units only
  return line;
}

std::string FormatProgressLine(const v1::Backfill& backfill,
                               double elapsed_seconds) {
  const v1::PartitionCounts& counts = backfill.partitions();
  std::string out = absl::StrFormat(
      "job %s: %s  %d/%d partitions  %d%%  %.1f s", TerminalText(backfill.id()),
      StateName(backfill.state()), DonePartitions(counts), counts.total(),
      PercentDone(backfill), elapsed_seconds);
  absl::StrAppend(&out, EtaSuffix(backfill), CostSoFar(backfill));
  if (const std::string cut = CutoffText(counts); !cut.empty()) {
    absl::StrAppend(&out, "  ", cut);
  }
  if (counts.failed() > 0) {
    absl::StrAppend(&out, "  ", counts.failed(), " failed");
  }
  if (!backfill.current_step().empty()) {
    absl::StrAppend(&out, "  now: ", TerminalText(backfill.current_step()));
  }
  if (!backfill.message().empty()) {
    absl::StrAppend(&out, "  (", TerminalText(InCliTerms(backfill.message())),
                    ")");
  }
  return out;
}

}  // namespace cli
}  // namespace backfill
