// Confirm step (step 6 of the playbook): after a job is published, make
// sure what reads the data serves the new numbers. Every consumer
// (consumer_spec.h) of every dataset the job republished is confirmed side
// by side, in one loop on one thread: first each one's invalidation is
// sent (catalog and file order; a retry waits its backoff while the others
// go on), then their probe rounds interleave, each consumer on its own
// schedule and within its own timeout, so a job is CONFIRMING for about
// the longest timeout, not their sum. The outcome is healthy when every
// consumer is. Partitions the early cutoff
// let go of (unchanged or skipped) are neither invalidated nor probed: the
// job left their published rows as they were, so whatever a consumer
// served for them is still right. Each consumer is reported to the
// observer (OnConsumerConfirmed) as it is decided, except one whose
// warehouse value could not be read (its health is unknown).
//
//   ConfirmDownstream  the consumers of a layout, confirmed side by side.
//   ConfirmJob  a CONFIRMING job: its consumers confirmed, what each was
//       found doing recorded, its staging dropped, and the job moved to
//       SUCCEEDED or DOWNSTREAM_UNHEALTHY.
//   CheckConfirmable  whether an operator may have a job's consumers
//       confirmed again (ConfirmBackfill).
//
// Stateless; thread-safe as its collaborators are. ConfirmJob takes the
// table's lock itself.

#ifndef BACKFILL_CORE_RUN_CONFIRM_STEP_H_
#define BACKFILL_CORE_RUN_CONFIRM_STEP_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/base/clock.h"
#include "core/ports/command_runner.h"
#include "core/ports/engine.h"
#include "core/ports/http_client.h"
#include "core/run/active_job.h"
#include "core/run/consumer_confirmer.h"
#include "core/run/job_observer.h"
#include "core/run/step_context.h"

namespace backfill {

struct ConfirmOutcome {
  bool healthy = true;
  std::string message;                  // recorded with the job's final state
  std::vector<ConsumerResult> results;  // one per consumer confirmed
};

// What the step works with; none of it is owned. `http`, `commands` and
// `observer` may be null; `stopping` may be empty.
struct ConfirmContext {
  Engine* engine = nullptr;
  HttpClient* http = nullptr;
  CommandRunner* commands = nullptr;
  const Clock* clock = nullptr;
  JobObserver* observer = nullptr;
  std::function<bool()> stopping;
};

// `layout`: what the job republished (without its cut-off partitions).
// CANCELLED when the service stopped before every consumer was decided
// (recovery confirms the job again); otherwise the outcome: the message
// says which consumers were confirmed, or for the first unhealthy one the
// consumer, partition, expected and served values (and how many others
// are unhealthy).
absl::StatusOr<ConfirmOutcome> ConfirmDownstream(const JobLayout& layout,
                                                 const ConfirmContext& context);

// Confirms a CONFIRMING job (see above) and moves it to its end, which is
// reported to the observer unless the job ended before (a confirmation
// asked for again). Returns whether it was reported: the job's first end.
// CANCELLED when the runner stopped meanwhile (recovery confirms it
// again); another error leaves it CONFIRMING for the caller to fail.
absl::StatusOr<bool> ConfirmJob(const StepContext& ctx, ActiveJob* job);

// OK when job `stored` may be confirmed again under `catalog`: it is
// SUCCEEDED or DOWNSTREAM_UNHEALTHY and its layout still loads;
// FAILED_PRECONDITION saying why not otherwise.
absl::Status CheckConfirmable(const Job& stored, const Catalog& catalog);

}  // namespace backfill

#endif  // BACKFILL_CORE_RUN_CONFIRM_STEP_H_
