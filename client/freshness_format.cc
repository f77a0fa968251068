#include "client/freshness_format.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/text_table.h"
#include "client/value_format.h"
#include "client/vocabulary_text.h"

namespace backfill {
namespace cli {
namespace {

constexpr char kFreshnessPrefix[] = "PARTITION_FRESHNESS_";

// "stale"; "current (frozen)" for a partition the frozen rule closes that
// is not FROZEN (current, so nothing would replay it anyway).
std::string FreshnessCell(const v1::DatasetPartition& p) {
  std::string word = FreshnessText(p.freshness());
  if (word.empty()) word = "-";
  if (p.frozen() && p.freshness() != v1::PARTITION_FRESHNESS_FROZEN) {
    absl::StrAppend(&word, " (frozen)");
  }
  return word;
}

// "bf-3", "bf-3 (rollback)", "bf-3 confirmed by bf-7"; "-" without a job.
std::string VersionCell(const v1::DatasetPartition& p) {
  if (p.backfill_id().empty()) return "-";
  std::string version = TerminalText(p.backfill_id());
  if (p.kind() != v1::VERSION_KIND_UNSPECIFIED &&
      p.kind() != v1::VERSION_KIND_BACKFILL) {
    absl::StrAppend(&version, " (", VersionKindText(p.kind()), ")");
  }
  if (!p.confirmed_by_backfill_id().empty()) {
    absl::StrAppend(&version, " confirmed by ",
                    TerminalText(p.confirmed_by_backfill_id()));
  }
  return version;
}

}  // namespace

std::string FormatDatasetPartitions(
    const v1::ListDatasetPartitionsResponse& response) {
  const std::string dataset = TerminalText(response.dataset());
  if (response.total() == 0 && response.partitions().empty()) {
    return absl::StrCat(dataset,
                        ": no published partitions (no job has published any "
                        "of it yet)\n");
  }
  std::string out = absl::StrCat(
      dataset, ": ", Plural(response.total(), "published partition"), ": ",
      response.current(), " current, ", response.stale(), " stale, ",
      response.due(), " due for a replay, ", response.frozen(), " frozen");
  if (!response.frozen_rule().empty()) {
    absl::StrAppend(
        &out, " (frozen rule: ", TerminalText(response.frozen_rule()), ")");
  }
  absl::StrAppend(&out, "\n");
  if (response.has_evaluate_time()) {
    absl::StrAppend(&out,
                    "due for a replay as of the replay policy's evaluation "
                    "at ",
                    FormatTimestamp(response.evaluate_time()), "\n");
  } else {
    absl::StrAppend(&out,
                    "no replay policy evaluation: none is due (the dataset "
                    "has no replay policy, or it was not evaluated yet)\n");
  }
  absl::StrAppend(&out, "\n");
  if (response.partitions().empty()) {
    absl::StrAppend(&out, "no partitions of the freshness asked for\n");
    return out;
  }
  TextTable table(
      {"PARTITION", "FRESHNESS", "VERSION", "WHEN", "ROWS", "HELD-BY", "WHY"});
  for (const v1::DatasetPartition& p : response.partitions()) {
    table.AddRow({p.partition().empty() ? "(unpartitioned)"
                                        : TerminalText(p.partition()),
                  FreshnessCell(p), VersionCell(p), FormatTimestamp(p.time()),
                  absl::StrCat(p.rows()), SafeOrDash(p.held_by_backfill_id()),
                  SafeOrDash(p.stale_reason())});
  }
  absl::StrAppend(&out, table.Render());
  return out;
}

absl::StatusOr<v1::PartitionFreshness> ParseFreshness(absl::string_view text) {
  std::string name = absl::AsciiStrToUpper(absl::StripAsciiWhitespace(text));
  if (!absl::StartsWith(name, kFreshnessPrefix)) {
    name = absl::StrCat(kFreshnessPrefix, name);
  }
  v1::PartitionFreshness freshness;
  if (v1::PartitionFreshness_Parse(name, &freshness) &&
      freshness != v1::PARTITION_FRESHNESS_UNSPECIFIED) {
    return freshness;
  }
  std::vector<std::string> known;
  const auto* descriptor = v1::PartitionFreshness_descriptor();
  for (int i = 0; i < descriptor->value_count(); ++i) {
    auto value =
        static_cast<v1::PartitionFreshness>(descriptor->value(i)->number());
    if (value != v1::PARTITION_FRESHNESS_UNSPECIFIED) {
      known.push_back(FreshnessText(value));
    }
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown freshness \"", text, "\"; use ", absl::StrJoin(known, ", "),
      " (any case, or the full name, e.g. PARTITION_FRESHNESS_STALE)"));
}

}  // namespace cli
}  // namespace backfill
