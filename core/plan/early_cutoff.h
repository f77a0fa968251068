// Early cutoff: as build systems do, a job does not republish a partition
// whose recomputed rows are identical to the published version, and drops
// the dependents that would only recompute from such partitions.
//
//   - A recomputed partition is UNCHANGED when its output fingerprint
//     equals the published fingerprint: the output fingerprint of the
//     latest lineage record of the (dataset, partition) in this state store
//     (a publish, or a rollback's restored rows). Without lineage it has
//     changed. Fingerprints are order-independent (core/model/fingerprint.h),
//     so equal rows in any order, and two empty partitions, compare equal.
//   - A task is SKIPPED, never run, when every task of the job it reads is
//     UNCHANGED or SKIPPED (TaskGraph::ReadsOnlyUnchanged), its dataset is
//     not the one requested (requested partitions always run), the latest
//     lineage of its partition was made by the transform version the job
//     computes the dataset with, and that lineage recorded, for each input
//     read partition by partition, the fingerprint that input holds now (a
//     dependent published before its input was republished without it is
//     stale, and runs).
//   - The job lets go of UNCHANGED and SKIPPED partitions: the engine
//     releases them (Engine::ReleasePartitions), and validation, the diff,
//     the publish (no lineage, no rollback copy) and a rollback of the job
//     cover only the partitions it stages to publish.
//
// Pure functions over values; thread-safe.

#ifndef BACKFILL_CORE_PLAN_EARLY_CUTOFF_H_
#define BACKFILL_CORE_PLAN_EARLY_CUTOFF_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/model/catalog.h"
#include "core/model/job.h"
#include "core/model/task_table.h"
#include "core/ports/engine.h"

namespace backfill {

// UNCHANGED or SKIPPED: a task the early cutoff settled.
bool IsCutOff(TaskState state);

// `output_fingerprint` (of a recomputed partition) equals the published
// fingerprint; `latest` is the partition's newest lineage record, null
// when it has none.
bool SameAsPublished(const std::string& output_fingerprint,
                     const LineageRecord* latest);

// Whether a task whose in-job inputs are all UNCHANGED or SKIPPED may be
// skipped (see above). `version`: the transform version the job computes
// `dataset` with; `requested`: the job's requested dataset; `latest`: the
// partition's newest lineage record (null: none); `inputs`: the in-job
// partitions it reads partition by partition, each with the fingerprint it
// holds now.
bool MaySkip(const std::string& dataset, const std::string& requested,
             const std::string& version, const LineageRecord* latest,
             const std::vector<InputFingerprint>& inputs);

// `layout` without the partitions of tasks the cutoff settled; datasets
// left without partitions are dropped (pinned inputs stay).
JobLayout WithoutCutOff(const JobLayout& layout, const TaskTable& tasks);

// Per dataset of `layout`, the partitions of tasks the cutoff settled, in
// task order (what the engine must have released).
std::vector<std::pair<const DatasetSpec*, std::vector<std::string>>>
CutOffPartitions(const JobLayout& layout, const TaskTable& tasks);

// How many tasks are UNCHANGED and SKIPPED.
struct CutoffCounts {
  int64_t unchanged = 0;
  int64_t skipped = 0;
};
CutoffCounts CountCutOff(const TaskTable& tasks);

// "nothing changed: 30 partitions recomputed identical to the published
// ones, 12 dependents skipped; nothing published".
std::string NothingChangedMessage(const CutoffCounts& counts);
// "; 25 partitions recomputed identical to the published ones were not
// republished, 12 dependents skipped" ("" without any).
std::string CutoffNote(const CutoffCounts& counts);

// The consumers (consumer_spec.h) of the datasets of `layout` that
// `republished` (WithoutCutOff of it) no longer has: nothing of theirs was
// republished, so the confirm step did not probe them. "consumer c of d"
// each, in layout and file order.
std::vector<std::string> UnprobedConsumers(const JobLayout& layout,
                                           const JobLayout& republished);

}  // namespace backfill

#endif  // BACKFILL_CORE_PLAN_EARLY_CUTOFF_H_
