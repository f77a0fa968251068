// Publish step (step 5 of the playbook): the lineage a published job
// leaves, built from its checkpoints. The atomic replacement itself is the
// engine's Publish (one transaction for every dataset of the job); the job
// runner calls it, then records this lineage in the state store, retrying
// until it is recorded. Stateless; thread-safe.

#ifndef BACKFILL_CORE_PUBLISH_STEP_H_
#define BACKFILL_CORE_PUBLISH_STEP_H_

#include <map>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "core/model/job.h"

namespace backfill {

// One record per STAGED task; `versions` maps a dataset to the transform
// version the job computed it with. Of `job`, only its id, request and
// approval are read. `*rows` gets the rows published. The tasks are
// consumed: each record takes its task's fingerprints, and `tasks` is left
// empty, so that a large job's tasks and lineage are not held twice.
std::vector<LineageRecord> LineageOf(
    const Job& job, std::vector<PartitionTask>&& tasks,
    const std::map<std::string, std::string>& versions, absl::Time now,
    int64_t* rows);

}  // namespace backfill

#endif  // BACKFILL_CORE_PUBLISH_STEP_H_
