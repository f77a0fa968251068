#include "client/listing_format.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/cli_terms.h"
#include "client/text_table.h"
#include "client/value_format.h"
#include "client/vocabulary_text.h"

namespace backfill {
namespace cli {
namespace {

constexpr int kMaxReasonWidth = 40;

}  // namespace

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

}  // namespace cli
}  // namespace backfill
