#include "core/model/diff.h"

#include <algorithm>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"

namespace backfill {
namespace {

bool InKey(const DatasetSpec& dataset, const std::string& column) {
  for (const std::string& k : dataset.primary_key) {
    if (absl::EqualsIgnoreCase(k, column)) return true;
  }
  return false;
}

bool NumericType(const std::string& type) {
  const std::string upper = absl::AsciiStrToUpper(type);
  for (const char* word : {"INT", "REAL", "FLOA", "DOUB", "NUM", "DEC"}) {
    if (absl::StrContains(upper, word)) return true;
  }
  return false;
}

}  // namespace

const char* DiffChangeName(DiffChange change) {
  switch (change) {
    case DiffChange::kAdded:
      return "added";
    case DiffChange::kRemoved:
      return "removed";
    case DiffChange::kChanged:
      return "changed";
  }
  return "changed";
}

std::vector<std::string> MeasureColumns(const DatasetSpec& dataset) {
  std::vector<std::string> out;
  for (const ColumnSpec& c : dataset.columns) {
    if (InKey(dataset, c.name)) continue;
    if (dataset.partition &&
        absl::EqualsIgnoreCase(dataset.partition->column, c.name)) {
      continue;
    }
    // A time x key dataset's key column (e.g. an INTEGER store id) is no
    // measure either.
    if (dataset.two_dimensional() &&
        absl::EqualsIgnoreCase(dataset.partition->key_column, c.name)) {
      continue;
    }
    if (NumericType(c.type)) out.push_back(c.name);
  }
  return out;
}

DiffColumns DiffColumnsOf(const DatasetSpec& dataset) {
  DiffColumns out;
  out.by_key = !dataset.primary_key.empty();
  out.key = dataset.primary_key;
  for (const ColumnSpec& c : dataset.columns) {
    if (!InKey(dataset, c.name)) out.values.push_back(c.name);
  }
  out.measures = MeasureColumns(dataset);
  return out;
}

JobDiffHeader HeaderOf(const JobDiff& diff) {
  JobDiffHeader out;
  out.job_id = diff.job_id;
  out.computed_at = diff.computed_at;
  out.datasets.reserve(diff.datasets.size());
  for (const DatasetDiff& d : diff.datasets) {
    out.datasets.push_back({d.dataset, d.columns});
  }
  return out;
}

JobDiff EmptyDiffOf(const JobDiffHeader& header) {
  JobDiff out;
  out.job_id = header.job_id;
  out.computed_at = header.computed_at;
  out.datasets.reserve(header.datasets.size());
  for (const JobDiffHeader::Dataset& d : header.datasets) {
    DatasetDiff dataset;
    dataset.dataset = d.dataset;
    dataset.columns = d.columns;
    out.datasets.push_back(std::move(dataset));
  }
  return out;
}

DiffSummary Summarize(const DatasetDiff& diff) {
  DiffSummary s;
  s.dataset = diff.dataset;
  s.columns = diff.columns;
  for (const std::string& m : diff.columns.measures) {
    s.measures.push_back({m, 0, 0});
  }
  for (const PartitionDiff& p : diff.partitions) AddToSummary(p, &s);
  return s;
}

void AddToSummary(const PartitionDiff& p, DiffSummary* summary) {
  DiffSummary& s = *summary;
  ++s.partitions;
  if (!p.error.empty()) {
    ++s.partitions_failed;
    return;
  }
  if (p.differs()) ++s.partitions_changed;
  s.rows_before += p.rows_before;
  s.rows_after += p.rows_after;
  s.added += p.added;
  s.removed += p.removed;
  s.changed += p.changed;
  s.unchanged += p.unchanged;
  for (const MeasureTotals& m : p.measures) {
    for (MeasureTotals& total : s.measures) {
      if (total.column == m.column) {
        total.before += m.before;
        total.after += m.after;
      }
    }
  }
}

}  // namespace backfill
