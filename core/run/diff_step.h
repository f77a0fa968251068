// Diff step (part of step 4 of the playbook, validation): compares a job's
// staged rows with the published ones, per (dataset, partition), through the
// engine's DiffPartitions (DiffStaging), and stores the diff with the job
// (RecordDiff), to be read before anything is published. A job's diff is
// never whole in memory: it is computed a chunk of partitions at a time,
// each chunk set aside in a file (DiffSpill, diff_spill.h) as it finishes,
// and the store reads the chunks back a page at a time. Stateless;
// thread-safe.

#ifndef BACKFILL_CORE_RUN_DIFF_STEP_H_
#define BACKFILL_CORE_RUN_DIFF_STEP_H_

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/model/diff.h"
#include "core/ports/engine.h"
#include "core/run/step_context.h"

namespace backfill {

// Partitions per DiffPartitions call: a chunk of the diff.
inline constexpr size_t kDiffChunk = 1024;

// The header of the diff of `layout` computed at `now`: its job, and each
// dataset with the columns its diff compares, in layout order.
JobDiffHeader DiffHeaderOf(const JobLayout& layout, absl::Time now);

// Takes one finished chunk of a diff: its index (the chunks in index order
// are the whole diff: datasets in layout order, each one's partitions in
// layout order), its dataset's index in the layout (and in DiffHeaderOf's
// datasets), and the diffs of its partitions, in layout order.
using DiffChunkSink = std::function<absl::Status(
    size_t chunk, size_t dataset, std::vector<PartitionDiff>&& partitions)>;

// The diff of every partition of the layout, with up to kDiffStoredSamples
// sample rows each, handed to `sink` a chunk at a time. A partition whose
// diff fails for a reason that will not pass by itself keeps the error in
// PartitionDiff::error (the job goes on: the diff informs, the checks
// decide); a failure of the warehouse's storage that may pass (disk full,
// I/O error: RESOURCE_EXHAUSTED, UNAVAILABLE), or an error of `sink`, ends
// the call and is returned, to be retried; chunks not started by then are
// not.
//
// The partitions are compared in chunks of kDiffChunk; up to `parallelism`
// chunks at a time, each on a thread of its own (the calling thread is one
// of them), so that a large job's diff takes the engine's parallelism
// rather than one connection's. Each thread hands its chunk to `sink`
// (one call at a time, in the order the chunks finish) before it starts
// another: at most `parallelism` chunks' diffs are in memory at once,
// besides what `sink` keeps. What is handed over does not depend on
// `parallelism`, only the order.
absl::Status DiffStaging(Engine* engine, const JobLayout& layout,
                         int parallelism, const DiffChunkSink& sink);

// The same collected into one JobDiff computed at `now`: whole in memory,
// for tests and small layouts.
absl::StatusOr<JobDiff> DiffStaging(Engine* engine, const JobLayout& layout,
                                    absl::Time now, int parallelism = 1);

// DiffStaging of job `id`'s `layout` (as many chunks at a time as the
// runner has workers) set aside in a DiffSpill in the runner's scratch
// directory, then stored with the job from it (StateStore::ReplaceJobDiff),
// replacing an earlier one. Each is retried while storage fails: the diff
// is computed again only when computing it failed (the warehouse, or the
// scratch directory's disk), not when storing it did.
absl::Status RecordDiff(const StepContext& ctx, const std::string& id,
                        const JobLayout& layout);

}  // namespace backfill

#endif  // BACKFILL_CORE_RUN_DIFF_STEP_H_
