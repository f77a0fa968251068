// JobRunner as a replica of a group: which jobs it claims, how it takes
// them in, and how it lets go of those it lost (job_runner.h, and the lease
// keeper, lease_keeper.h).

#include <algorithm>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/base/error_details.h"
#include "core/base/json_value.h"
#include "core/base/status_macros.h"
#include "core/run/admission.h"
#include "core/run/job_runner.h"
#include "core/run/recovery.h"
#include "core/run/rollback_step.h"

namespace backfill {
namespace {

// The states of jobs a replica holds: they have work to do, or hold their
// partitions while they wait for a decision. FAILED and VALIDATION_FAILED
// jobs are held only while they keep their staging.
const std::vector<JobState>& HeldStates() {
  static const std::vector<JobState> states = {
      JobState::kQueued,     JobState::kRunning,          JobState::kPaused,
      JobState::kValidating, JobState::kAwaitingApproval, JobState::kPublishing,
      JobState::kConfirming};
  return states;
}

bool ByNumber(const std::string& a, const std::string& b) {
  return JobNumberOf(a) < JobNumberOf(b);
}

// How long a decision sent to the replica that runs the job may take to be
// answered, and how often the sender looks; how often a replica looks for
// decisions sent to it.
constexpr absl::Duration kForwardTimeout = absl::Seconds(10);
constexpr absl::Duration kForwardPoll = absl::Milliseconds(20);
constexpr absl::Duration kRequestsPoll = absl::Milliseconds(100);
// How many periodic claim scans (one a second) go by between two looks at
// the FAILED jobs that kept their staging.
constexpr int kFailedScanEvery = 10;
// How long a periodic scan leaves a job that never had a lease to the
// replica it was submitted to (which claims it at once, unless a scan of
// its own holds it up). Expired leases are taken over without it.
constexpr absl::Duration kSubmitterGrace = absl::Seconds(2);

std::string DecisionToJson(const Decision& d) {
  return absl::StrCat("{\"reason\": ", JsonQuote(d.reason),
                      ", \"actor\": ", JsonQuote(d.actor),
                      ", \"approved_by\": ", JsonQuote(d.approval.approved_by),
                      ", \"approval_reason\": ", JsonQuote(d.approval.reason),
                      ", \"override_validation\": ",
                      d.approval.override_validation ? "true" : "false", "}");
}

absl::StatusOr<Decision> DecisionFromJson(const std::string& text) {
  ASSIGN_OR_RETURN(JsonValue json, ParseJson(text));
  if (json.type != JsonValue::Type::kObject) {
    return absl::InvalidArgumentError("a decision is a JSON object");
  }
  auto text_of = [&](const char* name) -> std::string {
    auto it = json.fields.find(name);
    return it != json.fields.end() &&
                   it->second.type == JsonValue::Type::kString
               ? it->second.text
               : std::string();
  };
  Decision d;
  d.reason = text_of("reason");
  d.actor = text_of("actor");
  d.approval.approved_by = text_of("approved_by");
  d.approval.reason = text_of("approval_reason");
  auto override_it = json.fields.find("override_validation");
  d.approval.override_validation =
      override_it != json.fields.end() &&
      override_it->second.type == JsonValue::Type::kBool &&
      override_it->second.boolean;
  return d;
}

}  // namespace

absl::Status JobRunner::StartInGroup() {
  // Rollbacks the warehouse committed but nobody recorded: recording one
  // twice is a no-op, so every replica may look.
  std::vector<std::string> rolled_back;
  RETURN_IF_ERROR(RecoverRollbacks(ctx_, *catalog_, &rolled_back));
  SweepOrphans(ctx_, /*keep_failed=*/true);
  jobs_.SetWatchStore(true);
  LeaseKeeper* const keeper = ctx_.options().leases;
  jobs_.SetOnForget(
      [keeper](const std::string& id) { keeper->ReleaseSoon(id); });
  {
    absl::MutexLock lock(jobs_.mu());
    jobs_.SetStartedLocked();
    SubmitLocked([this] { EnforceRetention(ctx_, *catalog_).IgnoreError(); });
  }
  LeaseKeeper::Callbacks callbacks;
  callbacks.on_lost = [this](const std::vector<std::string>& ids) {
    OnLeasesLost(ids);
  };
  callbacks.on_takeover = [this](const std::string& id,
                                 const std::string& from) {
    if (ctx_.observer() != nullptr) ctx_.observer()->OnLeaseTakeover(id, from);
  };
  callbacks.on_tick = [this] { ClaimScan(); };
  RETURN_IF_ERROR(keeper->Start(std::move(callbacks)));
  keeper->Wake();
  requests_ = std::thread([this] { ServeRequests(); });
  return absl::OkStatus();
}

void JobRunner::Created(const std::string& id) {
  if (!InGroup()) return;
  ClaimScan(id);
}

absl::StatusOr<std::optional<JobLease>> JobRunner::HolderElsewhere(
    const std::string& id) {
  auto here = [&] {
    absl::MutexLock lock(jobs_.mu());
    return jobs_.FindLocked(id) != nullptr;
  };
  if (here()) return std::optional<JobLease>();
  ClaimScan(id);
  if (here()) return std::optional<JobLease>();
  LeaseKeeper* const keeper = ctx_.options().leases;
  ASSIGN_OR_RETURN(std::vector<JobLease> leases, keeper->store()->ListLeases());
  for (JobLease& lease : leases) {
    if (lease.job_id == id && lease.live && lease.node != keeper->node()) {
      return std::optional<JobLease>(std::move(lease));
    }
  }
  return std::optional<JobLease>();
}

absl::StatusOr<std::optional<Job>> JobRunner::Forward(
    const std::string& id, const Decision& decision) {
  if (!InGroup()) return std::optional<Job>();
  ASSIGN_OR_RETURN(std::optional<JobLease> holder, HolderElsewhere(id));
  if (!holder.has_value()) return std::optional<Job>();
  LeaseStore* const store = ctx_.options().leases->store();
  NodeRequest request;
  request.node = holder->node;
  request.job_id = id;
  request.kind = decision.kind;
  request.body = DecisionToJson(decision);
  ASSIGN_OR_RETURN(const int64_t sent, store->SendRequest(request));
  auto answered =
      [&](const NodeAnswer& answer) -> absl::StatusOr<std::optional<Job>> {
    if (answer.code != absl::StatusCode::kOk) {
      return absl::Status(answer.code, answer.message);
    }
    ASSIGN_OR_RETURN(Job job, ctx_.store()->GetJob(id));
    return std::optional<Job>(std::move(job));
  };
  const absl::Time deadline = absl::Now() + kForwardTimeout;
  while (absl::Now() < deadline) {
    ASSIGN_OR_RETURN(std::optional<NodeAnswer> answer,
                     store->ReadAnswer(sent, /*withdraw=*/false));
    if (answer.has_value()) return answered(*answer);
    absl::SleepFor(kForwardPoll);
  }
  absl::StatusOr<std::optional<NodeAnswer>> last =
      store->ReadAnswer(sent, /*withdraw=*/true);
  if (last.ok() && last->has_value()) return answered(**last);
  if (!last.ok() && last.status().code() == absl::StatusCode::kNotFound) {
    return WithReason(
        absl::UnavailableError(absl::StrCat(
            "replica ", holder->node, ", which runs job ", id,
            ", did not take the ", decision.kind, " within ",
            absl::FormatDuration(kForwardTimeout),
            " (it may be stopping); nothing was changed: send it again")),
        "REPLICA_DID_NOT_ANSWER",
        {{"backfill_id", id}, {"node", holder->node}});
  }
  return WithReason(
      absl::DeadlineExceededError(absl::StrCat(
          "replica ", holder->node, ", which runs job ", id, ", took the ",
          decision.kind, " but did not answer within ",
          absl::FormatDuration(kForwardTimeout),
          ": it may have been done; see `backfillctl status ", id, "`")),
      "REPLICA_DID_NOT_ANSWER", {{"backfill_id", id}, {"node", holder->node}});
}

void JobRunner::ServeRequests() {
  LeaseKeeper* const keeper = ctx_.options().leases;
  while (true) {
    {
      absl::MutexLock lock(&requests_mu_);
      auto stop = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(requests_mu_) {
        return requests_stop_;
      };
      requests_mu_.AwaitWithTimeout(absl::Condition(&stop), kRequestsPoll);
      if (requests_stop_) return;
    }
    absl::StatusOr<std::vector<NodeRequest>> requests =
        keeper->store()->TakeRequests(keeper->node());
    if (!requests.ok()) continue;
    for (const NodeRequest& request : *requests) {
      const absl::Status taken = TakeDecision(request);
      NodeAnswer answer;
      answer.code = taken.code();
      answer.message = std::string(taken.message());
      keeper->store()->AnswerRequest(request.id, answer).IgnoreError();
    }
  }
}

absl::Status JobRunner::TakeDecision(const NodeRequest& request) {
  const std::string& id = request.job_id;
  absl::StatusOr<Decision> decision = DecisionFromJson(request.body);
  if (!decision.ok()) return decision.status();
  decision->kind = request.kind;
  {
    absl::MutexLock lock(jobs_.mu());
    if (jobs_.FindLocked(id) == nullptr) {
      // Moved on meanwhile (ended, or another replica holds it now).
      absl::StatusOr<Job> job = ctx_.store()->GetJobProgress(id);
      if (job.ok() && IsTerminal(job->state) &&
          job->state != JobState::kFailed &&
          job->state != JobState::kValidationFailed) {
        // The command answers for an ended job as it always does.
      } else {
        return absl::UnavailableError(absl::StrCat(
            "replica ", ctx_.options().leases->node(), " no longer runs job ",
            id, "; nothing was changed: send the ", request.kind, " again"));
      }
    }
  }
  absl::StatusOr<Job> done;
  if (request.kind == "cancel") {
    done = commands_.Cancel(id, decision->reason, decision->actor);
  } else if (request.kind == "pause") {
    done = commands_.Pause(id, decision->reason, decision->actor);
  } else if (request.kind == "resume") {
    done = commands_.Resume(id, decision->reason, decision->actor);
  } else if (request.kind == "retry") {
    done = commands_.Retry(id, decision->reason, decision->actor);
  } else if (request.kind == "approve") {
    done = commands_.Approve(id, decision->approval);
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown decision \"", request.kind, "\""));
  }
  return done.status();
}

absl::Status JobRunner::ClaimEnded(const std::string& id,
                                   const std::string& step,
                                   const Scope& scope) {
  if (!InGroup()) return absl::OkStatus();
  LeaseKeeper* const keeper = ctx_.options().leases;
  ASSIGN_OR_RETURN(ClaimResult claimed, keeper->Claim(id, step));
  if (!claimed.claimed) {
    return WithReason(
        absl::FailedPreconditionError(absl::StrCat(
            "job ", id, " is being handled by replica ", claimed.lease.node,
            " right now (", claimed.lease.step, "); wait for it to end")),
        "JOB_RUN_BY_ANOTHER_REPLICA",
        {{"backfill_id", id}, {"node", claimed.lease.node}});
  }
  if (absl::Status s = ctx_.engine()->AdvanceFence(id, claimed.lease.token);
      !s.ok()) {
    keeper->ReleaseSoon(id);
    return s;
  }
  // The jobs over its partitions must run here, where the step checks
  // them: those nobody runs are claimed.
  ClaimScan();
  absl::StatusOr<std::vector<std::string>> ids =
      ctx_.store()->ListJobIds(HeldStates());
  absl::StatusOr<std::vector<JobLease>> leases = keeper->store()->ListLeases();
  if (!ids.ok() || !leases.ok()) {
    keeper->ReleaseSoon(id);
    return !ids.ok() ? ids.status() : leases.status();
  }
  absl::MutexLock scan(&scan_mu_);
  for (const JobLease& lease : *leases) {
    if (!lease.live || lease.node == keeper->node() || lease.job_id == id) {
      continue;
    }
    auto it = scopes_.find(lease.job_id);
    if (it == scopes_.end()) {
      absl::StatusOr<Job> job = ctx_.store()->GetJob(lease.job_id);
      if (!job.ok()) continue;
      it = scopes_.emplace(lease.job_id, ScopeOf(job->plan)).first;
    }
    if (!it->second.Overlaps(scope)) continue;
    keeper->ReleaseSoon(id);
    return WithReason(
        absl::FailedPreconditionError(absl::StrCat(
            "job ", lease.job_id, " (run by replica ", lease.node,
            ") works on partitions of ", id, "; wait until it ends, then ",
            step, " ", id, " again")),
        "PARTITIONS_HELD", {{"backfill_ids", lease.job_id}});
  }
  return absl::OkStatus();
}

void JobRunner::Done(const std::string& id) {
  if (InGroup()) ctx_.options().leases->ReleaseSoon(id);
}

void JobRunner::ClaimScan(const std::string& only) {
  LeaseKeeper* const keeper = ctx_.options().leases;
  absl::MutexLock scan(&scan_mu_);
  std::set<std::string> local;
  {
    absl::MutexLock lock(jobs_.mu());
    if (!jobs_.StartedLocked() || jobs_.StoppingLocked()) return;
    for (const auto& [id, job] : jobs_.jobs()) local.insert(id);
  }
  absl::StatusOr<std::vector<std::string>> listed =
      ctx_.store()->ListJobIds(HeldStates());
  if (!listed.ok()) return;
  std::vector<std::string> ids = *std::move(listed);
  absl::StatusOr<std::vector<JobLease>> leases = keeper->store()->ListLeases();
  if (!leases.ok()) return;
  std::map<std::string, JobLease> lease_of;
  for (JobLease& lease : *leases) lease_of[lease.job_id] = std::move(lease);
  auto elsewhere = [&](const std::string& id) {
    auto it = lease_of.find(id);
    return it != lease_of.end() && it->second.live &&
           it->second.node != keeper->node();
  };
  // FAILED jobs that kept their staging wait for a retry, holding their
  // partitions: those are held too. Every FAILED job ever is listed for
  // this, so a periodic scan looks for them only every kFailedScanEvery
  // scans; a scan for one job (a submit, a decision) always does.
  const bool look_at_failed =
      !only.empty() || ++scans_since_failed_ >= kFailedScanEvery;
  if (look_at_failed) scans_since_failed_ = 0;
  if (look_at_failed) {
    absl::StatusOr<std::vector<std::string>> failed = ctx_.store()->ListJobIds(
        {JobState::kFailed, JobState::kValidationFailed});
    if (!failed.ok()) return;
    std::vector<std::string> unknown;
    for (const std::string& id : *failed) {
      if (local.count(id) || elsewhere(id)) {
        ids.push_back(id);
      } else if (!without_staging_.count(id)) {
        unknown.push_back(id);
      }
    }
    if (!unknown.empty()) {
      absl::StatusOr<std::vector<std::string>> staged =
          ctx_.engine()->ListJobsWithStaging();
      if (!staged.ok()) return;
      const std::set<std::string> with(staged->begin(), staged->end());
      for (const std::string& id : unknown) {
        if (with.count(id)) {
          ids.push_back(id);
        } else {
          without_staging_.insert(id);
        }
      }
    }
  }
  // Jobs this replica or another holds are in the components whatever
  // their state (a FAILED job holding its staging between two looks, a
  // rollback or a confirmation holding an ended job's partitions).
  {
    std::set<std::string> listed(ids.begin(), ids.end());
    for (const std::string& id : local) {
      if (listed.insert(id).second) ids.push_back(id);
    }
    for (const auto& [id, lease] : lease_of) {
      if (lease.live && listed.insert(id).second) ids.push_back(id);
    }
  }
  std::sort(ids.begin(), ids.end(), ByNumber);
  // Forget the scopes of jobs that are no longer unfinished.
  {
    const std::set<std::string> unfinished(ids.begin(), ids.end());
    for (auto it = scopes_.begin(); it != scopes_.end();) {
      it = unfinished.count(it->first) ? std::next(it) : scopes_.erase(it);
    }
  }
  std::vector<std::string> unclaimed;
  for (const std::string& id : ids) {
    // A live lease of this replica's on a job not in its table is a step
    // on an ended job (a rollback): not to be claimed again.
    auto it = lease_of.find(id);
    const bool leased = it != lease_of.end() && it->second.live;
    if (!local.count(id) && !leased && !unresumable_.count(id)) {
      unclaimed.push_back(id);
    }
  }
  // Jobs without any lease row, live or expired: never claimed, or
  // released. When a periodic scan first saw each.
  const absl::Time now = absl::Now();
  {
    std::map<std::string, absl::Time> since;
    for (const std::string& id : unclaimed) {
      if (lease_of.count(id)) continue;
      auto it = unleased_since_.find(id);
      since[id] = it == unleased_since_.end() ? now : it->second;
    }
    unleased_since_ = std::move(since);
  }
  auto in_grace = [&](const std::vector<std::string>& component) {
    if (!only.empty()) return false;
    for (const std::string& id : component) {
      if (local.count(id) || lease_of.count(id)) return false;
    }
    for (const std::string& id : component) {
      auto it = unleased_since_.find(id);
      if (it != unleased_since_.end() && now - it->second < kSubmitterGrace) {
        return true;
      }
    }
    return false;
  };
  if (unclaimed.empty()) return;
  auto scope_of = [&](const std::string& id) -> const Scope* {
    auto it = scopes_.find(id);
    if (it != scopes_.end()) return &it->second;
    absl::StatusOr<Job> job = ctx_.store()->GetJob(id);
    if (!job.ok()) return nullptr;
    return &scopes_.emplace(id, ScopeOf(job->plan)).first->second;
  };
  std::set<std::string> decided;
  for (const std::string& candidate : unclaimed) {
    if (decided.count(candidate)) continue;
    // Every unfinished job that shares partitions with it, directly or
    // through others: they run on one replica, in admission order.
    std::vector<std::string> component = {candidate};
    std::set<std::string> in_component = {candidate};
    bool unknown_scope = false;
    for (size_t next = 0; next < component.size(); ++next) {
      const Scope* scope = scope_of(component[next]);
      if (scope == nullptr) {
        unknown_scope = true;
        break;
      }
      for (const std::string& other : ids) {
        if (in_component.count(other)) continue;
        const Scope* other_scope = scope_of(other);
        if (other_scope == nullptr) {
          unknown_scope = true;
          break;
        }
        if (scope->Overlaps(*other_scope)) {
          component.push_back(other);
          in_component.insert(other);
        }
      }
      if (unknown_scope) break;
    }
    decided.insert(component.begin(), component.end());
    if (unknown_scope) continue;
    if (!only.empty() && !in_component.count(only)) continue;
    if (std::any_of(component.begin(), component.end(), elsewhere)) continue;
    if (in_grace(component)) continue;
    std::vector<std::string> to_claim;
    for (const std::string& id : component) {
      const auto lease = lease_of.find(id);
      const bool leased = lease != lease_of.end() && lease->second.live;
      if (!local.count(id) && !leased && !unresumable_.count(id)) {
        to_claim.push_back(id);
      }
    }
    std::sort(to_claim.begin(), to_claim.end(), ByNumber);
    std::vector<std::string> claimed;
    bool all = true;
    for (const std::string& id : to_claim) {
      absl::StatusOr<ClaimResult> result = keeper->Claim(id, "run");
      if (!result.ok() || !result->claimed) {
        all = false;
        break;
      }
      claimed.push_back(id);
    }
    if (!all) {
      for (const std::string& id : claimed) keeper->ReleaseSoon(id);
      continue;
    }
    Adopt(claimed);
  }
}

void JobRunner::Adopt(const std::vector<std::string>& ids) {
  LeaseKeeper* const keeper = ctx_.options().leases;
  const std::shared_ptr<const Catalog> catalog = catalog_->Get();
  std::vector<std::unique_ptr<ActiveJob>> adopted;
  for (const std::string& id : ids) {
    absl::StatusOr<Job> job = ctx_.store()->GetJob(id);
    if (!job.ok()) {
      keeper->ReleaseSoon(id);
      continue;
    }
    if (IsTerminal(job->state) && job->state != JobState::kFailed &&
        job->state != JobState::kValidationFailed) {
      keeper->ReleaseSoon(id);  // it ended meanwhile
      continue;
    }
    keeper->SetStep(id, LeaseStepOf(job->state));
    // The warehouse's fence first: from now on a replica that held the job
    // before commits nothing more there.
    if (std::optional<int64_t> token = keeper->TokenFor(id);
        !token.has_value() || *token == 0 ||
        !ctx_.engine()->AdvanceFence(id, *token).ok()) {
      keeper->ReleaseSoon(id);
      continue;
    }
    absl::StatusOr<std::unique_ptr<ActiveJob>> active =
        RecoverJob(ctx_, catalog, *std::move(job));
    if (!active.ok() || *active == nullptr) {
      // Ended here (nothing to run under the pipelines in force), or it
      // cannot be resumed by this replica: another may.
      if (!active.ok()) unresumable_.insert(id);
      keeper->ReleaseSoon(id);
      continue;
    }
    adopted.push_back(*std::move(active));
  }
  absl::MutexLock lock(jobs_.mu());
  for (std::unique_ptr<ActiveJob>& job : adopted) {
    const std::string id = job->job.id;
    const JobPhase phase = job->phase;
    jobs_.admission().Add(id, ScopeOf(job->job.plan), phase == JobPhase::kHeld);
    ActiveJob* active = jobs_.AddLocked(std::move(job));
    jobs_.NotifyLocked(id);
    if (phase == JobPhase::kFinishing) {
      ++active->busy;
      FinishLocked(id);
    }
  }
  PumpLocked();
}

void JobRunner::OnLeasesLost(const std::vector<std::string>& ids) {
  std::vector<std::string> dropped;
  {
    absl::MutexLock lock(jobs_.mu());
    for (const std::string& id : ids) {
      ActiveJob* job = jobs_.FindLocked(id);
      if (job == nullptr) continue;
      jobs_.DropLocked(job);
      dropped.push_back(id);
    }
    PumpLocked();
  }
  if (ctx_.observer() == nullptr) return;
  for (const std::string& id : dropped) ctx_.observer()->OnLeaseLost(id);
}

}  // namespace backfill
