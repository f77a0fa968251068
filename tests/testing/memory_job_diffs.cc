#include "tests/testing/memory_job_diffs.h"

#include <algorithm>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/testing/as_stored.h"

namespace backfill::testing {

absl::Status MemoryJobDiffs::Replace(const JobDiff& diff) {
  std::set<std::string> datasets;
  std::set<std::pair<std::string, std::string>> partitions;
  for (const DatasetDiff& d : diff.datasets) {
    bool twice = !datasets.insert(d.dataset).second;
    for (const PartitionDiff& p : d.partitions) {
      twice = twice || !partitions.insert({d.dataset, p.partition}).second;
    }
    if (twice) {
      return absl::FailedPreconditionError(
          absl::StrCat("the diff of job ", diff.job_id, " lists ", d.dataset,
                       " or one of its partitions twice"));
    }
  }
  JobDiff stored = diff;
  stored.computed_at = StoredTime(diff.computed_at);
  for (DatasetDiff& d : stored.datasets) {
    std::sort(d.partitions.begin(), d.partitions.end(),
              [](const PartitionDiff& a, const PartitionDiff& b) {
                return a.partition < b.partition;
              });
    for (PartitionDiff& p : d.partitions) {
      p.dataset = d.dataset;
      for (MeasureTotals& m : p.measures) {
        m.before = StoredDouble(m.before);
        m.after = StoredDouble(m.after);
      }
    }
  }
  by_job_[diff.job_id] = std::move(stored);
  return absl::OkStatus();
}

std::optional<JobDiff> MemoryJobDiffs::Get(const std::string& job_id,
                                           const std::string& dataset,
                                           bool with_samples) const {
  auto it = by_job_.find(job_id);
  if (it == by_job_.end()) return std::nullopt;
  JobDiff out = it->second;
  if (!dataset.empty()) {
    std::vector<DatasetDiff> kept;
    for (DatasetDiff& d : out.datasets) {
      if (d.dataset == dataset) kept.push_back(std::move(d));
    }
    out.datasets = std::move(kept);
  }
  if (!with_samples) {
    for (DatasetDiff& d : out.datasets) {
      for (PartitionDiff& p : d.partitions) p.samples.clear();
    }
  }
  return out;
}

std::map<std::string, PartitionDiff> MemoryJobDiffs::Of(
    const std::string& dataset, const std::string& partition) const {
  std::map<std::string, PartitionDiff> out;
  for (const auto& [job_id, diff] : by_job_) {
    for (const DatasetDiff& d : diff.datasets) {
      if (d.dataset != dataset) continue;
      for (const PartitionDiff& p : d.partitions) {
        if (p.partition != partition) continue;
        PartitionDiff copy = p;
        copy.samples.clear();
        out[job_id] = std::move(copy);
      }
    }
  }
  return out;
}

}  // namespace backfill::testing
