// Transition guards: what a StateStore checks, in the transaction that
// writes a job's move, before it writes anything. The store reads the
// job's current state; the guard compares it with the state the caller
// expected and checks the move against the job state machine's table
// (job_state_machine.h), and words the refusal (FAILED_PRECONDITION,
// naming the job and the states). Also the refusal of a job the store
// does not hold (JobNotFound). Every StateStore uses these, so that each
// refuses the same moves with the same words and details.
//
// Pure functions of their arguments; thread-safe.

#ifndef BACKFILL_CORE_MODEL_TRANSITION_GUARD_H_
#define BACKFILL_CORE_MODEL_TRANSITION_GUARD_H_

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/model/job.h"

namespace backfill {

// NOT_FOUND ("no job bf-9") for a job the store does not hold, with the
// reason BACKFILL_NOT_FOUND and the job's id as backfill_id
// (core/base/error_details.h), which the API passes on to clients.
absl::Status JobNotFound(const std::string& job_id);

// The write a guard checks, which words its refusal of a job that is not
// in the expected state: "job bf-1 is RUNNING, not QUEUED" and then
//   kMove:     "; cannot move it to PAUSED" (TransitionJob),
//   kRetry:    nothing more (RetryJob),
//   kApproval: "; cannot approve it" (ApproveJob).
enum class GuardedMove { kMove, kRetry, kApproval };

// The guard of moving job `job_id` to `to`. `current` is the job's state as
// the store read it (an error, e.g. NOT_FOUND for an unknown job, is
// returned as it is). Refused when `expected_from` is given and the job is
// in another state, or when the table does not allow the move ("job bf-1:
// a PAUSED job cannot become PUBLISHING"). Returns the current state.
absl::StatusOr<JobState> GuardTransition(const std::string& job_id,
                                         absl::StatusOr<JobState> current,
                                         std::optional<JobState> expected_from,
                                         JobState to,
                                         GuardedMove move = GuardedMove::kMove);

// The guard of a write that keeps the job's state (SetJobMessage): refused
// ("job bf-1 is RUNNING, not QUEUED") unless the job is in `expected`.
absl::Status GuardState(const std::string& job_id,
                        absl::StatusOr<JobState> current, JobState expected);

// The guard of RecordPublication for a job in `from` that has
// `publication_recorded` (some publish lineage already recorded): false
// when the publication is recorded already (a job past PUBLISHING, or one
// in PUBLISHING with its lineage: a repeat after a restart, to do nothing);
// true when it is to be recorded now (a job in PUBLISHING, moving to `to`
// as the table allows); refused otherwise (e.g. FAILED or CANCELLED: a
// publication must not resurrect the job).
absl::StatusOr<bool> GuardPublication(const std::string& job_id, JobState from,
                                      bool publication_recorded, JobState to);

// The guard of RecordRollback: refused unless every job of `jobs` (id and
// current state; the job rolled back first, then the jobs rolled back with
// it) is SUCCEEDED or DOWNSTREAM_UNHEALTHY. The caller returns early, with
// nothing to do, for a job already ROLLED_BACK.
absl::Status GuardRollback(
    const std::vector<std::pair<std::string, JobState>>& jobs);

}  // namespace backfill

#endif  // BACKFILL_CORE_MODEL_TRANSITION_GUARD_H_
