#include "core/diff_step.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/types/span.h"

namespace backfill {
namespace {

// Partitions per DiffPartitions call.
constexpr size_t kDiffChunk = 1024;

// A failure of the warehouse's storage that may pass by itself (disk full,
// I/O error): the step is retried, not the partition marked.
bool MayPass(const absl::Status& status) {
  return status.code() == absl::StatusCode::kResourceExhausted ||
         status.code() == absl::StatusCode::kUnavailable;
}

}  // namespace

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
    // In chunks: the engine shares its set-up and transactions within one,
    // and a chunk's answers are all that is held twice at a time.
    const absl::Span<const std::string> all(item.partitions);
    for (size_t at = 0; at < all.size(); at += kDiffChunk) {
      const absl::Span<const std::string> chunk = all.subspan(at, kDiffChunk);
      absl::StatusOr<std::vector<absl::StatusOr<PartitionDiff>>> diffs =
          engine->DiffPartitions(layout.job_id, *item.dataset, chunk,
                                 kDiffStoredSamples);
      for (size_t i = 0; i < chunk.size(); ++i) {
        absl::StatusOr<PartitionDiff> diff =
            diffs.ok() ? std::move((*diffs)[i])
                       : absl::StatusOr<PartitionDiff>(diffs.status());
        if (!diff.ok()) {
          if (MayPass(diff.status())) return diff.status();
          PartitionDiff failed;
          failed.dataset = dataset.dataset;
          failed.partition = chunk[i];
          failed.error = std::string(diff.status().message());
          if (failed.error.empty()) failed.error = diff.status().ToString();
          dataset.partitions.push_back(std::move(failed));
          continue;
        }
        diff->dataset = dataset.dataset;
        diff->partition = chunk[i];
        dataset.partitions.push_back(*std::move(diff));
      }
    }
    out.datasets.push_back(std::move(dataset));
  }
  return out;
}

}  // namespace backfill
