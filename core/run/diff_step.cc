#include "core/run/diff_step.h"

#include <algorithm>
#include <atomic>
#include <iterator>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "core/base/status_macros.h"
#include "core/base/thread_name.h"
#include "core/run/diff_spill.h"

namespace backfill {
namespace {

// One DiffPartitions call's share: a chunk of one item's partitions.
struct Chunk {
  size_t item = 0;
  size_t at = 0;
};

// The chunks of `layout`, in layout order.
std::vector<Chunk> ChunksOf(const JobLayout& layout) {
  std::vector<Chunk> chunks;
  for (size_t i = 0; i < layout.items.size(); ++i) {
    const size_t size = layout.items[i].partitions.size();
    for (size_t at = 0; at < size; at += kDiffChunk) chunks.push_back({i, at});
  }
  return chunks;
}

// The diffs of one chunk's partitions; a failure that may pass is
// returned.
absl::StatusOr<std::vector<PartitionDiff>> DiffChunk(Engine* engine,
                                                     const JobLayout& layout,
                                                     const Chunk& c) {
  const JobLayout::Item& item = layout.items[c.item];
  const std::string& dataset = item.dataset->name;
  // The engine shares its set-up and transactions within a chunk.
  const absl::Span<const std::string> chunk =
      absl::MakeConstSpan(item.partitions).subspan(c.at, kDiffChunk);
  absl::StatusOr<std::vector<absl::StatusOr<PartitionDiff>>> diffs =
      engine->DiffPartitions(layout.job_id, *item.dataset, chunk,
                             kDiffStoredSamples);
  std::vector<PartitionDiff> out(chunk.size());
  for (size_t i = 0; i < chunk.size(); ++i) {
    absl::StatusOr<PartitionDiff> diff =
        diffs.ok() ? std::move((*diffs)[i])
                   : absl::StatusOr<PartitionDiff>(diffs.status());
    PartitionDiff& slot = out[i];
    if (!diff.ok()) {
      // A failure of the warehouse's storage that may pass by itself: the
      // step is retried, not the partition marked.
      if (MayPass(diff.status())) return diff.status();
      slot.error = std::string(diff.status().message());
      if (slot.error.empty()) slot.error = diff.status().ToString();
    } else {
      slot = *std::move(diff);
    }
    slot.dataset = dataset;
    slot.partition = chunk[i];
  }
  return out;
}

}  // namespace

JobDiffHeader DiffHeaderOf(const JobLayout& layout, absl::Time now) {
  JobDiffHeader header;
  header.job_id = layout.job_id;
  header.computed_at = now;
  for (const JobLayout::Item& item : layout.items) {
    header.datasets.push_back(
        {item.dataset->name, DiffColumnsOf(*item.dataset)});
  }
  return header;
}

absl::Status DiffStaging(Engine* engine, const JobLayout& layout,
                         int parallelism, const DiffChunkSink& sink) {
  const std::vector<Chunk> chunks = ChunksOf(layout);
  // The first failure ends the step; chunks not started by then are not.
  absl::Mutex mu;
  absl::Status failed;  // guarded by mu
  std::atomic<bool> stop{false};
  std::atomic<size_t> next{0};
  auto fail = [&](absl::Status status) {
    absl::MutexLock lock(&mu);
    if (failed.ok()) failed = std::move(status);
    stop = true;
  };
  // Held while `sink` runs: one call at a time.
  absl::Mutex sink_mu;
  auto run = [&] {
    while (!stop.load()) {
      const size_t c = next.fetch_add(1);
      if (c >= chunks.size()) return;
      absl::StatusOr<std::vector<PartitionDiff>> diffs =
          DiffChunk(engine, layout, chunks[c]);
      if (!diffs.ok()) return fail(diffs.status());
      absl::Status handed;
      {
        absl::MutexLock lock(&sink_mu);
        if (stop.load()) return;
        handed = sink(c, chunks[c].item, *std::move(diffs));
      }
      if (!handed.ok()) return fail(std::move(handed));
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
  return failed;
}

absl::StatusOr<JobDiff> DiffStaging(Engine* engine, const JobLayout& layout,
                                    absl::Time now, int parallelism) {
  const JobDiffHeader header = DiffHeaderOf(layout, now);
  std::vector<std::vector<PartitionDiff>> chunks(ChunksOf(layout).size());
  std::vector<size_t> datasets(chunks.size());
  RETURN_IF_ERROR(DiffStaging(engine, layout, parallelism,
                              [&](size_t chunk, size_t dataset,
                                  std::vector<PartitionDiff>&& partitions) {
                                chunks[chunk] = std::move(partitions);
                                datasets[chunk] = dataset;
                                return absl::OkStatus();
                              }));
  JobDiff out = EmptyDiffOf(header);
  for (size_t c = 0; c < chunks.size(); ++c) {
    std::vector<PartitionDiff>& to = out.datasets[datasets[c]].partitions;
    std::move(chunks[c].begin(), chunks[c].end(), std::back_inserter(to));
  }
  return out;
}

absl::Status RecordDiff(const StepContext& ctx, const std::string& id,
                        const JobLayout& layout) {
  JobDiffHeader header;
  std::unique_ptr<DiffSpill> spill;
  RETURN_IF_ERROR(ctx.Persist(
      JobObserver::Storage::kWarehouse,
      absl::StrCat("computing the diff of ", id), [&]() -> absl::Status {
        spill.reset();  // an earlier attempt's file goes first
        header = DiffHeaderOf(layout, ctx.clock()->Now());
        ASSIGN_OR_RETURN(spill, DiffSpill::Create(ctx.options().scratch_dir));
        return DiffStaging(ctx.engine(), layout, ctx.options().workers,
                           [&](size_t chunk, size_t dataset,
                               std::vector<PartitionDiff>&& partitions) {
                             return spill->Put(chunk, dataset, partitions);
                           });
      }));
  return ctx.Persist(JobObserver::Storage::kStateStore,
                     absl::StrCat("recording the diff of ", id), [&] {
                       return ctx.store()->ReplaceJobDiff(header, *spill);
                     });
}

}  // namespace backfill
