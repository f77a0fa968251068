// ReplayKeeper: keeps the replay policies the pipelines declare
// (core/model/replay_policy.h). On each Tick it evaluates every policy
// whose `check_every` has passed since its last evaluation and that is not
// paused: it finds what is due (core/plan/replay_due.h), plans it as any
// request, and submits one job for it through the BackfillManager — an
// ordinary job, with checks, approval, publish, confirmation, lineage and
// audit, requested by "policy:<dataset>". The job waits for an approval
// (Job::approval_hold) when the policy says `approval: required`, or when
// its estimated cost is above the policy's `max_cost`.
//
// No duplicate work: partitions in an active job are not due; the job's
// idempotency key is derived from the changes the evaluation saw, so an
// evaluation repeated (after a crash, or while the job it made failed)
// finds the same job instead of making another, and only a new change
// makes a new job.
//
// Pausing is kept in the state store (StateStore::SetReplayPolicyPause,
// with an audit event), so a restarted daemon keeps each policy paused or
// running; with Options::start_paused (backfilld --no-replay) every policy
// starts paused until resumed. Until the stored pauses have been read, no
// policy is evaluated on a Tick (a store that fails is asked again on the
// next one).
//
// A job of a policy that did not succeed (failed, cancelled, rolled back)
// is not submitted again for the same changes: the keeper follows the jobs
// it submitted, and a partition of one that did not succeed is not due
// again until its change is another (ReplayDue::failed), nor in a job with
// other partitions. The keeper learns this from the jobs themselves, so a
// restarted daemon first finds such a job again by its idempotency key
// (the same changes give the same key) and says that it waits for a new
// change or for a person to retry it.
//
// Ownership: borrows the manager, engine, store and clock, which must
// outlive it. Thread-safe: every method takes the keeper's lock, and
// evaluations run one at a time.

#ifndef BACKFILL_CORE_RUN_REPLAY_KEEPER_H_
#define BACKFILL_CORE_RUN_REPLAY_KEEPER_H_

#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/base/clock.h"
#include "core/plan/replay_due.h"
#include "core/run/backfill_manager.h"

namespace backfill {

// One evaluation of one policy.
struct ReplayEvaluation {
  std::string dataset;
  absl::Time at = absl::InfinitePast();
  ReplayDue due;
  // The plan of what is due (empty when nothing is, or it could not be
  // planned: `outcome` says why).
  Plan plan;
  std::string hold;  // why the job would wait for an approval; "": none
  // "nothing due", "submitted bf-7", "found bf-7 (already submitted)",
  // "would submit" (not asked to), "paused", or an error's message.
  std::string outcome;
  // The outcome's kind, a metric label: nothing_due, would_submit,
  // submitted, already_submitted, paused, not_planned (the plan or the
  // submit refused it) or failed (what is due could not be read).
  std::string result;
  std::string job_id;  // the job submitted or found; "" otherwise
  bool created = false;
};

// The last job a policy submitted or found, as the keeper last saw it.
struct ReplayLastJob {
  std::string id;
  JobState state = JobState::kQueued;
};

// What the metrics show of one policy, from the keeper's own records.
struct ReplayPolicyCounters {
  std::string dataset;
  int64_t due_partitions = 0;                         // at the last evaluation
  absl::Time last_evaluation = absl::InfinitePast();  // never: InfinitePast
  std::map<std::string, int64_t> evaluations;  // by ReplayEvaluation::result
};

// What `policies` shows of one policy.
struct ReplayPolicyStatus {
  std::string dataset;
  ReplayPolicy policy;
  std::string frozen;  // the dataset's frozen rule, "" when none
  bool paused = false;
  std::string paused_reason;
  std::optional<ReplayEvaluation> last;   // nullopt: not evaluated yet
  std::optional<ReplayLastJob> last_job;  // nullopt: none since the start
  absl::Time next_check = absl::InfinitePast();
};

class ReplayKeeper {
 public:
  struct Options {
    bool start_paused = false;  // backfilld --no-replay
  };

  ReplayKeeper(BackfillManager* manager, Engine* engine, StateStore* store,
               const Clock* clock, Options options);

  // Evaluates (and submits for) every policy that is due a look.
  std::vector<ReplayEvaluation> Tick() ABSL_LOCKS_EXCLUDED(mu_);

  // Evaluates `dataset`'s policy now; submits only when `submit` (and the
  // policy is not paused). NOT_FOUND for a dataset without a policy.
  absl::StatusOr<ReplayEvaluation> Evaluate(const std::string& dataset,
                                            bool submit)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Pauses or resumes `dataset`'s policy for good (the state store keeps
  // it, with an audit event naming `by` and the reason). NOT_FOUND for a
  // dataset without a policy; INVALID_ARGUMENT for a pause without a
  // reason; the store's error when it could not be recorded (nothing
  // changes then).
  absl::Status Pause(const std::string& dataset, const std::string& reason,
                     const std::string& by) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status Resume(const std::string& dataset, const std::string& by,
                      const std::string& reason = "") ABSL_LOCKS_EXCLUDED(mu_);

  // Every declared policy, by dataset name.
  std::vector<ReplayPolicyStatus> Policies() ABSL_LOCKS_EXCLUDED(mu_);

  // Every policy evaluated at least once, from the keeper's records alone
  // (it asks nothing of the manager: a metrics scrape may come as the
  // daemon stops).
  std::vector<ReplayPolicyCounters> Counters() ABSL_LOCKS_EXCLUDED(mu_);

  // A thread that calls Tick() every `period` (of real time: a policy's
  // check_every is counted on the injected clock) until StopLoop(), which
  // waits for the Tick under way. Call StopLoop() before the manager shuts
  // down; the destructor calls it too.
  void StartLoop(absl::Duration period) ABSL_LOCKS_EXCLUDED(loop_mu_);
  void StopLoop() ABSL_LOCKS_EXCLUDED(loop_mu_);
  ~ReplayKeeper();

 private:
  struct State {
    bool paused = false;
    std::string paused_reason;
    std::optional<ReplayEvaluation> last;
    std::string last_job_id;  // "": none since the start
    // The jobs submitted or found that have not ended yet: job id ->
    // partition -> its change (ReplayChangeOf) the job replays.
    std::map<std::string, ReplayDueFinder::FailedReplays> following;
    // Partitions whose replay of a change did not succeed.
    ReplayDueFinder::FailedReplays failed;
    absl::Time next_check = absl::InfinitePast();
    std::map<std::string, int64_t> evaluations;  // by result
  };
  // Moves the partitions of the followed jobs that ended without success
  // to `state->failed`; forgets the ended jobs.
  void FollowJobsLocked(State* state) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Reads the stored pauses once; false while they could not be read.
  bool LoadPausesLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Records `ev` as `dataset`'s latest evaluation.
  void Record(const ReplayEvaluation& ev) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::StatusOr<const DatasetSpec*> PolicyOf(const Catalog& catalog,
                                              const std::string& dataset) const;
  ReplayEvaluation EvaluateLocked(const Catalog& catalog,
                                  const DatasetSpec& dataset, bool submit)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  State& StateOf(const std::string& dataset) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  BackfillManager* const manager_;
  StateStore* const store_;
  const Clock* const clock_;
  const Options options_;
  absl::Mutex mu_;
  ReplayDueFinder finder_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, State> states_ ABSL_GUARDED_BY(mu_);
  bool pauses_loaded_ ABSL_GUARDED_BY(mu_) = false;

  absl::Mutex loop_mu_;
  bool stop_ ABSL_GUARDED_BY(loop_mu_) = false;
  std::thread loop_;
};

// Why a job of `plan` for `dataset`'s policy waits for an approval ("":
// it does not): `approval: required`, or an estimated cost over
// `max_cost`.
std::string ReplayApprovalHold(const DatasetSpec& dataset, const Plan& plan);

}  // namespace backfill

#endif  // BACKFILL_CORE_RUN_REPLAY_KEEPER_H_
