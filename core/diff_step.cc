#include "core/diff_step.h"

#include <string>
#include <utility>

namespace backfill {

absl::StatusOr<JobDiff> DiffStaging(Engine* engine, const JobLayout& layout,
                                    absl::Time now) {
  JobDiff out;
  out.job_id = layout.job_id;
  out.computed_at = now;
  for (const JobLayout::Item& item : layout.items) {
    DatasetDiff dataset;
    dataset.dataset = item.dataset->name;
    dataset.columns = DiffColumnsOf(*item.dataset);
    // One diff per partition: sized once (a large job's diffs are tens of
    // megabytes; grown by doubling they would briefly take twice that).
    dataset.partitions.reserve(item.partitions.size());
    for (const std::string& partition : item.partitions) {
      absl::StatusOr<PartitionDiff> diff = engine->DiffPartition(
          layout.job_id, *item.dataset, partition, kDiffStoredSamples);
      if (!diff.ok()) {
        const absl::StatusCode code = diff.status().code();
        if (code == absl::StatusCode::kResourceExhausted ||
            code == absl::StatusCode::kUnavailable) {
          return diff.status();
        }
        PartitionDiff failed;
        failed.dataset = dataset.dataset;
        failed.partition = partition;
        failed.error = std::string(diff.status().message());
        if (failed.error.empty()) failed.error = diff.status().ToString();
        dataset.partitions.push_back(std::move(failed));
        continue;
      }
      diff->dataset = dataset.dataset;
      diff->partition = partition;
      dataset.partitions.push_back(*std::move(diff));
    }
    out.datasets.push_back(std::move(dataset));
  }
  return out;
}

}  // namespace backfill
