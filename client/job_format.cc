#include "client/job_format.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "client/cli_terms.h"
#include "client/diff_format.h"
#include "client/plan_format.h"
#include "client/value_format.h"

namespace backfill {
namespace cli {
namespace {

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

}  // namespace

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
            Plural(std::max<int64_t>(plan.partition_count(),
                                     plan.partitions_size()),
                   "partition"),
            "  ",
            plan.partition_count() > plan.partitions_size()
                ? "(not listed)"
                : SummarizePartitions(plan.partitions()),
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

}  // namespace cli
}  // namespace backfill
