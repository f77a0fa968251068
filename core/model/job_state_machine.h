// JobStateMachine: the life of a backfill job as an explicit transition
// table, and the predicates the scheduler and admission rely on. Pure
// functions of the state; thread-safe.
//
//   from                 to
//   QUEUED               RUNNING, PAUSED, CANCELLED, FAILED
//   RUNNING              VALIDATING, PAUSED, CANCELLED, FAILED
//   PAUSED               QUEUED (resume), CANCELLED, FAILED (a partition
//                        that was running when it paused failed for good)
//   VALIDATING           PUBLISHING, AWAITING_APPROVAL, VALIDATION_FAILED,
//                        RUNNING (staged rows were lost: recompute them),
//                        FAILED (an error before anything was published)
//   AWAITING_APPROVAL    PUBLISHING, CANCELLED
//   PUBLISHING           CONFIRMING (the publication is recorded), FAILED
//                        (nothing was committed)
//   CONFIRMING           SUCCEEDED, DOWNSTREAM_UNHEALTHY
//   DOWNSTREAM_UNHEALTHY CONFIRMING (confirm again), ROLLED_BACK
//   SUCCEEDED            ROLLED_BACK, CONFIRMING (confirm again)
//   FAILED               QUEUED (retry), CANCELLED (cancelled or superseded)
//   VALIDATION_FAILED    PUBLISHING (approved with override), CANCELLED
//   CANCELLED, ROLLED_BACK: none (final)
//
// A job "holds" its partitions while it is QUEUED, RUNNING, PAUSED,
// VALIDATING, PUBLISHING or CONFIRMING: a newer job overlapping it waits.
// A job "held for a decision" (FAILED with its staging kept for a retry,
// VALIDATION_FAILED, AWAITING_APPROVAL) blocks nobody: a newer overlapping
// job supersedes it when it starts, and so does a rollback of an
// overlapping job once it restored its rows; the held job ends CANCELLED.

#ifndef BACKFILL_CORE_MODEL_JOB_STATE_MACHINE_H_
#define BACKFILL_CORE_MODEL_JOB_STATE_MACHINE_H_

#include <vector>

#include "absl/status/status.h"
#include "core/model/job.h"

namespace backfill {

// True when the table allows `from` -> `to`.
bool CanTransition(JobState from, JobState to);

// OK, or FAILED_PRECONDITION naming both states.
absl::Status CheckTransition(JobState from, JobState to);

// The states `from` may move to, in the table's order.
std::vector<JobState> NextStates(JobState from);

// No transition leaves the state (CANCELLED, ROLLED_BACK).
bool IsFinal(JobState state);

// The job blocks newer overlapping jobs (see above).
bool HoldsPartitions(JobState state);

// The job waits for an operator (retry, approve, cancel) and is superseded
// by a newer overlapping job.
bool IsHeldForDecision(JobState state);

// The states of a job whose publish committed (CONFIRMING, SUCCEEDED,
// DOWNSTREAM_UNHEALTHY, ROLLED_BACK): the store has recorded its
// publication, whatever its consumers serve or a rollback did since.
std::vector<JobState> PublishedStates();
bool HasPublished(JobState state);

}  // namespace backfill

#endif  // BACKFILL_CORE_MODEL_JOB_STATE_MACHINE_H_
