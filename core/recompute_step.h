// Recompute step (step 3 of the playbook): one attempt at recomputing one
// partition into staging. The engine runs the transform; this step times
// the attempt with the injected clock, passes on the engine's own timings
// of its phases, and turns the result into the task's checkpoint (the
// caller writes it to the state store). Stateless; thread-safe.

#ifndef BACKFILL_CORE_RECOMPUTE_STEP_H_
#define BACKFILL_CORE_RECOMPUTE_STEP_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/base/clock.h"
#include "core/model/catalog.h"
#include "core/model/job.h"
#include "core/plan/planner.h"
#include "core/ports/engine.h"

namespace backfill {

struct RecomputeResult {
  // The task as it is after the attempt: STAGED with rows, fingerprints and
  // inputs when `status` is OK; otherwise unchanged but for attempts,
  // duration and update time.
  PartitionTask task;
  absl::Status status;
  absl::Duration took;
  // Where the engine spent its time (StageResult::timings) when `status`
  // is OK; zero otherwise.
  StageTimings timings;
};

// Stages `task` (its attempt counted already) of `dataset` for `job_id`.
RecomputeResult RecomputePartition(Engine* engine, const Planner& planner,
                                   const Clock& clock,
                                   const std::string& job_id,
                                   const DatasetSpec& dataset,
                                   PartitionTask task);

}  // namespace backfill

#endif  // BACKFILL_CORE_RECOMPUTE_STEP_H_
