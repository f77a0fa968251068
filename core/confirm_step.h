// Confirm step (step 6 of the playbook): after a job is published, make
// sure what reads the data serves the new numbers. No dataset declares
// downstream consumers yet, so confirmation has nothing to invalidate or
// probe; this step says so, and is where consumers are confirmed.
// Stateless; thread-safe.

#ifndef BACKFILL_CORE_CONFIRM_STEP_H_
#define BACKFILL_CORE_CONFIRM_STEP_H_

#include <string>

#include "absl/status/statusor.h"
#include "core/engine.h"

namespace backfill {

struct ConfirmOutcome {
  bool healthy = true;
  std::string message;  // recorded with the job's final state
};

absl::StatusOr<ConfirmOutcome> ConfirmDownstream(const JobLayout& layout);

}  // namespace backfill

#endif  // BACKFILL_CORE_CONFIRM_STEP_H_
