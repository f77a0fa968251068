#include "core/run/replay_keeper.h"

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/base/status_macros.h"
#include "core/run/crash_point.h"

namespace backfill {
namespace {

// The longest reason a pause or a resume of a replay policy keeps.
constexpr size_t kMaxPolicyReason = 4096;

absl::Status CheckPolicyReason(const std::string& reason) {
  if (reason.size() <= kMaxPolicyReason) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("the reason is ", reason.size(), " bytes long; at most ",
                   kMaxPolicyReason, " are kept"));
}

}  // namespace

std::string ReplayApprovalHold(const DatasetSpec& dataset, const Plan& plan) {
  const ReplayPolicy& policy = *dataset.replay;
  if (policy.approval_required) {
    return absl::StrCat("the replay policy of ", dataset.name,
                        " requires an approval (approval: required)");
  }
  if (!policy.max_cost) return "";
  const ReplayCostLimit& limit = *policy.max_cost;
  const double cost = plan.cost.backfill;
  if (limit.fraction && plan.cost.full_reload > 0 &&
      cost / plan.cost.full_reload > *limit.fraction) {
    return absl::StrFormat(
        "its estimated cost, %.0f input rows, is %.1f%% of a full reload, "
        "above the replay policy's max_cost of %s",
        cost, 100 * cost / plan.cost.full_reload, limit.text);
  }
  if (limit.input_rows && cost > *limit.input_rows) {
    return absl::StrFormat(
        "its estimated cost, %.0f input rows, is above the replay policy's "
        "max_cost of %s input rows",
        cost, limit.text);
  }
  return "";
}

ReplayKeeper::ReplayKeeper(BackfillManager* manager, Engine* engine,
                           StateStore* store, const Clock* clock,
                           Options options)
    : manager_(manager),
      store_(store),
      clock_(clock),
      options_(options),
      finder_(engine, store, clock, [manager](const std::string& dataset) {
        // What active jobs of the dataset hold (nothing when the jobs
        // cannot be read: the submit that follows finds them busy).
        std::set<std::string> held;
        absl::StatusOr<std::map<std::string, std::string>> partitions =
            manager->HeldPartitions(dataset);
        if (!partitions.ok()) return held;
        for (const auto& entry : *partitions) held.insert(entry.first);
        return held;
      }) {}

ReplayKeeper::State& ReplayKeeper::StateOf(const std::string& dataset) {
  auto [it, added] = states_.try_emplace(dataset);
  if (added) it->second.paused = options_.start_paused;
  if (added && options_.start_paused) {
    it->second.paused_reason = "backfilld started with --no-replay";
  }
  return it->second;
}

bool ReplayKeeper::LoadPausesLocked() {
  if (pauses_loaded_) return true;
  absl::StatusOr<std::vector<ReplayPolicyPause>> pauses =
      store_->ListReplayPolicyPauses();
  if (!pauses.ok()) return false;
  for (const ReplayPolicyPause& p : *pauses) {
    if (!p.paused) continue;
    State& state = StateOf(p.dataset);
    state.paused = true;
    // --no-replay says so already; a stored pause adds its own reason.
    state.paused_reason =
        options_.start_paused
            ? absl::StrCat(state.paused_reason, "; paused by ", p.by, ": ",
                           p.reason)
            : absl::StrCat("paused by ", p.by, ": ", p.reason);
  }
  pauses_loaded_ = true;
  return true;
}

void ReplayKeeper::FollowJobsLocked(State* state) {
  for (auto it = state->following.begin(); it != state->following.end();) {
    absl::StatusOr<Job> job = manager_->GetJob(it->first, JobView::kBasic);
    if (job.ok() && !IsTerminal(job->state)) {
      ++it;
      continue;
    }
    // A job that published (SUCCEEDED, or DOWNSTREAM_UNHEALTHY: published,
    // a consumer lags) replayed its change.
    if (job.ok() && job->state != JobState::kSucceeded &&
        job->state != JobState::kDownstreamUnhealthy) {
      for (const auto& [partition, change] : it->second) {
        state->failed[partition] = change;
      }
    }
    it = state->following.erase(it);
  }
}

absl::StatusOr<const DatasetSpec*> ReplayKeeper::PolicyOf(
    const Catalog& catalog, const std::string& dataset) const {
  const DatasetSpec* spec = catalog.Find(dataset);
  if (spec == nullptr || !spec->replay) {
    return absl::NotFoundError(absl::StrCat(
        "dataset \"", dataset, "\" declares no replay policy (`replay:`)"));
  }
  return spec;
}

ReplayEvaluation ReplayKeeper::EvaluateLocked(const Catalog& catalog,
                                              const DatasetSpec& dataset,
                                              bool submit) {
  ReplayEvaluation ev;
  ev.dataset = dataset.name;
  ev.at = clock_->Now();
  State& state = StateOf(dataset.name);
  FollowJobsLocked(&state);
  absl::StatusOr<ReplayDue> due = finder_.Find(catalog, dataset, state.failed);
  if (!due.ok()) {
    ev.outcome = std::string(due.status().message());
    ev.result = "failed";
    return ev;
  }
  ev.due = *std::move(due);
  if (ev.due.request.partitions.empty()) {
    ev.outcome = "nothing due";
    ev.result = "nothing_due";
    return ev;
  }
  absl::StatusOr<Plan> plan = manager_->PlanBackfill(ev.due.request);
  if (!plan.ok()) {
    // Every due partition frozen, or the catalog changed under it.
    ev.outcome = std::string(plan.status().message());
    ev.result = "not_planned";
    return ev;
  }
  ev.plan = *std::move(plan);
  ev.hold = ReplayApprovalHold(dataset, ev.plan);
  if (!submit) {
    ev.outcome = "would submit";
    ev.result = "would_submit";
    return ev;
  }
  if (state.paused) {
    ev.outcome = "paused";
    ev.result = "paused";
    return ev;
  }
  SubmitOptions options;
  options.idempotency_key = ev.due.idempotency_key;
  options.approval_hold = ev.hold;
  absl::StatusOr<SubmitResult> result =
      manager_->Submit(ev.due.request, options);
  if (!result.ok()) {
    ev.outcome = std::string(result.status().message());
    ev.result = "not_planned";
    return ev;
  }
  if (result->created) CrashPoint("replay.after_submit");
  ev.job_id = result->job.id;
  ev.created = result->created;
  ReplayDueFinder::FailedReplays& replays = state.following[ev.job_id];
  for (const StalePartition& sp : ev.due.due) {
    replays[sp.partition] = ReplayChangeOf(dataset, sp);
  }
  // A job found ended is known at once.
  FollowJobsLocked(&state);
  ev.result = result->created ? "submitted" : "already_submitted";
  if (result->created) {
    ev.outcome = absl::StrCat("submitted ", ev.job_id);
  } else if (IsTerminal(result->job.state) &&
             result->job.state != JobState::kSucceeded) {
    // The same changes made a job that did not succeed: it is not
    // submitted again in a loop.
    ev.outcome = absl::StrCat(
        "found ", ev.job_id, " (", JobStateName(result->job.state),
        ") for these changes; a replay that did not succeed is not "
        "submitted again: it waits for a new change of its inputs, or for "
        "an operator (backfillctl retry ",
        ev.job_id, ")");
  } else {
    ev.outcome = absl::StrCat("found ", ev.job_id, " (already submitted, ",
                              JobStateName(result->job.state), ")");
  }
  return ev;
}

std::vector<ReplayEvaluation> ReplayKeeper::Tick() {
  const std::shared_ptr<const Catalog> catalog = manager_->catalog();
  std::vector<ReplayEvaluation> out;
  absl::MutexLock lock(&mu_);
  // Until the stored pauses are known, a paused policy could run.
  if (!LoadPausesLocked()) return out;
  const absl::Time now = clock_->Now();
  for (const DatasetSpec& d : catalog->datasets()) {
    if (!d.replay) continue;
    State& state = StateOf(d.name);
    if (state.paused || now < state.next_check) continue;
    ReplayEvaluation ev = EvaluateLocked(*catalog, d, /*submit=*/true);
    state.next_check = now + d.replay->check_every;
    Record(ev);
    out.push_back(std::move(ev));
  }
  return out;
}

absl::StatusOr<ReplayEvaluation> ReplayKeeper::Evaluate(
    const std::string& dataset, bool submit) {
  const std::shared_ptr<const Catalog> catalog = manager_->catalog();
  ASSIGN_OR_RETURN(const DatasetSpec* spec, PolicyOf(*catalog, dataset));
  absl::MutexLock lock(&mu_);
  if (!LoadPausesLocked() && submit) {
    return absl::UnavailableError(
        "the replay policies' paused state cannot be read from the state "
        "store; nothing is submitted until it can");
  }
  ReplayEvaluation ev = EvaluateLocked(*catalog, *spec, submit);
  Record(ev);
  return ev;
}

absl::Status ReplayKeeper::Pause(const std::string& dataset,
                                 const std::string& reason,
                                 const std::string& by) {
  const std::shared_ptr<const Catalog> catalog = manager_->catalog();
  RETURN_IF_ERROR(PolicyOf(*catalog, dataset).status());
  if (reason.empty()) {
    return absl::InvalidArgumentError(
        "pausing a replay policy requires a reason (it is kept with the "
        "pause and in the audit log)");
  }
  RETURN_IF_ERROR(CheckPolicyReason(reason));
  absl::MutexLock lock(&mu_);
  LoadPausesLocked();
  ReplayPolicyPause pause;
  pause.dataset = dataset;
  pause.paused = true;
  pause.reason = reason;
  pause.by = by;
  pause.at = clock_->Now();
  RETURN_IF_ERROR(store_->SetReplayPolicyPause(
      pause, absl::StrCat("replay policy of ", dataset, " paused by ", by, ": ",
                          reason)));
  State& state = StateOf(dataset);
  state.paused = true;
  state.paused_reason = absl::StrCat("paused by ", by, ": ", reason);
  return absl::OkStatus();
}

absl::Status ReplayKeeper::Resume(const std::string& dataset,
                                  const std::string& by,
                                  const std::string& reason) {
  const std::shared_ptr<const Catalog> catalog = manager_->catalog();
  RETURN_IF_ERROR(PolicyOf(*catalog, dataset).status());
  RETURN_IF_ERROR(CheckPolicyReason(reason));
  absl::MutexLock lock(&mu_);
  LoadPausesLocked();
  ReplayPolicyPause pause;
  pause.dataset = dataset;
  pause.paused = false;
  pause.by = by;
  pause.at = clock_->Now();
  RETURN_IF_ERROR(store_->SetReplayPolicyPause(
      pause, absl::StrCat("replay policy of ", dataset, " resumed by ", by,
                          reason.empty() ? "" : absl::StrCat(": ", reason))));
  State& state = StateOf(dataset);
  state.paused = false;
  state.paused_reason.clear();
  state.next_check = absl::InfinitePast();  // look at once
  return absl::OkStatus();
}

ReplayKeeper::~ReplayKeeper() { StopLoop(); }

void ReplayKeeper::Record(const ReplayEvaluation& ev) {
  State& state = StateOf(ev.dataset);
  state.last = ev;
  if (!ev.job_id.empty()) state.last_job_id = ev.job_id;
  ++state.evaluations[ev.result];
}

std::vector<ReplayPolicyCounters> ReplayKeeper::Counters() {
  absl::MutexLock lock(&mu_);
  std::vector<ReplayPolicyCounters> out;
  for (const auto& [dataset, state] : states_) {
    if (!state.last) continue;
    ReplayPolicyCounters c;
    c.dataset = dataset;
    c.due_partitions = static_cast<int64_t>(state.last->due.due.size());
    c.last_evaluation = state.last->at;
    c.evaluations = state.evaluations;
    out.push_back(std::move(c));
  }
  return out;
}

void ReplayKeeper::StartLoop(absl::Duration period) {
  absl::MutexLock lock(&loop_mu_);
  if (loop_.joinable()) return;
  stop_ = false;
  loop_ = std::thread([this, period] {
    while (true) {
      Tick();
      absl::MutexLock wait(&loop_mu_);
      loop_mu_.AwaitWithTimeout(absl::Condition(&stop_), period);
      if (stop_) return;
    }
  });
}

void ReplayKeeper::StopLoop() {
  std::thread loop;
  {
    absl::MutexLock lock(&loop_mu_);
    stop_ = true;
    loop = std::move(loop_);
  }
  if (loop.joinable()) loop.join();
}

std::vector<ReplayPolicyStatus> ReplayKeeper::Policies() {
  const std::shared_ptr<const Catalog> catalog = manager_->catalog();
  std::vector<ReplayPolicyStatus> out;
  std::vector<std::string> last_job_ids;  // one per policy, "" none
  {
    absl::MutexLock lock(&mu_);
    LoadPausesLocked();
    for (const DatasetSpec& d : catalog->datasets()) {
      if (!d.replay) continue;
      const State& state = StateOf(d.name);
      ReplayPolicyStatus s;
      s.dataset = d.name;
      s.policy = *d.replay;
      if (d.frozen) s.frozen = d.frozen->Describe();
      s.paused = state.paused;
      s.paused_reason = state.paused_reason;
      s.last = state.last;
      s.next_check = state.next_check;
      out.push_back(std::move(s));
      last_job_ids.push_back(state.last_job_id);
    }
  }
  // The last jobs' states, read without the keeper's lock.
  for (size_t i = 0; i < out.size(); ++i) {
    if (last_job_ids[i].empty()) continue;
    absl::StatusOr<Job> job =
        manager_->GetJob(last_job_ids[i], JobView::kBasic);
    if (job.ok()) out[i].last_job = ReplayLastJob{job->id, job->state};
  }
  return out;
}

}  // namespace backfill
