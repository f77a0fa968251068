#include "core/run/diff_step.h"

#include <algorithm>
#include <atomic>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "core/base/status_macros.h"
#include "core/base/thread_name.h"

namespace backfill {
namespace {

// Partitions per DiffPartitions call.
constexpr size_t kDiffChunk = 1024;

// One DiffPartitions call's share: a chunk of one item's partitions.
struct Chunk {
  size_t item = 0;
  size_t at = 0;
};

}  // namespace

absl::StatusOr<JobDiff> DiffStaging(Engine* engine, const JobLayout& layout,
                                    absl::Time now, int parallelism) {
  JobDiff out;
  out.job_id = layout.job_id;
  out.computed_at = now;
  std::vector<Chunk> chunks;
  for (size_t i = 0; i < layout.items.size(); ++i) {
    const JobLayout::Item& item = layout.items[i];
    DatasetDiff dataset;
    dataset.dataset = item.dataset->name;
    dataset.columns = DiffColumnsOf(*item.dataset);
    // One diff per partition, in place: sized once (a large job's diffs are
    // tens of megabytes; grown by doubling they would briefly take twice
    // that), and each chunk fills its own slots.
    dataset.partitions.resize(item.partitions.size());
    out.datasets.push_back(std::move(dataset));
    for (size_t at = 0; at < item.partitions.size(); at += kDiffChunk) {
      chunks.push_back({i, at});
    }
  }

  // The first failure that may pass ends the step; chunks not started by
  // then are not.
  absl::Mutex mu;
  absl::Status failed;
  std::atomic<bool> stop{false};
  std::atomic<size_t> next{0};
  auto run = [&] {
    while (!stop.load()) {
      const size_t c = next.fetch_add(1);
      if (c >= chunks.size()) return;
      const JobLayout::Item& item = layout.items[chunks[c].item];
      DatasetDiff& dataset = out.datasets[chunks[c].item];
      // The engine shares its set-up and transactions within a chunk.
      const absl::Span<const std::string> chunk =
          absl::MakeConstSpan(item.partitions)
              .subspan(chunks[c].at, kDiffChunk);
      absl::StatusOr<std::vector<absl::StatusOr<PartitionDiff>>> diffs =
          engine->DiffPartitions(layout.job_id, *item.dataset, chunk,
                                 kDiffStoredSamples);
      for (size_t i = 0; i < chunk.size(); ++i) {
        absl::StatusOr<PartitionDiff> diff =
            diffs.ok() ? std::move((*diffs)[i])
                       : absl::StatusOr<PartitionDiff>(diffs.status());
        PartitionDiff& slot = dataset.partitions[chunks[c].at + i];
        if (!diff.ok()) {
          // A failure of the warehouse's storage that may pass by itself:
          // the step is retried, not the partition marked.
          if (MayPass(diff.status())) {
            absl::MutexLock lock(&mu);
            if (failed.ok()) failed = diff.status();
            stop = true;
            return;
          }
          slot.dataset = dataset.dataset;
          slot.partition = chunk[i];
          slot.error = std::string(diff.status().message());
          if (slot.error.empty()) slot.error = diff.status().ToString();
          continue;
        }
        slot = *std::move(diff);
        slot.dataset = dataset.dataset;
        slot.partition = chunk[i];
      }
    }
  };
  const size_t threads = std::min<size_t>(
      static_cast<size_t>(std::max(1, parallelism)), chunks.size());
  std::vector<std::thread> helpers;
  for (size_t t = 1; t < threads; ++t) {
    helpers.emplace_back([&run] {
      NameThisThread("bf-diff");
      run();
    });
  }
  run();
  for (std::thread& t : helpers) t.join();
  absl::MutexLock lock(&mu);
  if (!failed.ok()) return failed;
  return out;
}

absl::Status RecordDiff(const StepContext& ctx, const std::string& id,
                        const JobLayout& layout) {
  JobDiff diff;
  RETURN_IF_ERROR(ctx.Persist(
      JobObserver::Storage::kWarehouse,
      absl::StrCat("computing the diff of ", id), [&]() -> absl::Status {
        ASSIGN_OR_RETURN(diff,
                         DiffStaging(ctx.engine(), layout, ctx.clock()->Now(),
                                     ctx.options().workers));
        return absl::OkStatus();
      }));
  return ctx.Persist(JobObserver::Storage::kStateStore,
                     absl::StrCat("recording the diff of ", id),
                     [&] { return ctx.store()->ReplaceJobDiff(diff); });
}

}  // namespace backfill
