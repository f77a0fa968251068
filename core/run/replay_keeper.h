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
// Pausing is kept in memory: a restarted daemon starts with every policy
// running, or every one paused (Options::start_paused).
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
  std::optional<ReplayEvaluation> last;  // nullopt: not evaluated yet
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

  absl::Status Pause(const std::string& dataset, const std::string& reason)
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status Resume(const std::string& dataset) ABSL_LOCKS_EXCLUDED(mu_);

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
    absl::Time next_check = absl::InfinitePast();
    std::map<std::string, int64_t> evaluations;  // by result
  };
  // Records `ev` as `dataset`'s latest evaluation.
  void Record(const ReplayEvaluation& ev) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::StatusOr<const DatasetSpec*> PolicyOf(const Catalog& catalog,
                                              const std::string& dataset) const;
  ReplayEvaluation EvaluateLocked(const Catalog& catalog,
                                  const DatasetSpec& dataset, bool submit)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  State& StateOf(const std::string& dataset) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  BackfillManager* const manager_;
  const Clock* const clock_;
  const Options options_;
  absl::Mutex mu_;
  ReplayDueFinder finder_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, State> states_ ABSL_GUARDED_BY(mu_);

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
