#include "client/diff_format.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/text_table.h"
#include "client/value_format.h"

namespace backfill {
namespace cli {

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

}  // namespace cli
}  // namespace backfill
