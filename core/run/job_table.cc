#include "core/run/job_table.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/plural.h"
#include "core/base/status_macros.h"

namespace backfill {
namespace {

// How often a watch of a job another replica runs reads the store.
constexpr absl::Duration kRemotePoll = absl::Milliseconds(250);

}  // namespace

bool JobTable::Stop() {
  absl::MutexLock lock(&mu_);
  if (!started_ || stopping_) return false;
  stopping_ = true;
  changed_.SignalAll();
  return true;
}

bool JobTable::Stopping() {
  absl::MutexLock lock(&mu_);
  return stopping_;
}

absl::Status JobTable::Accepting() {
  absl::MutexLock lock(&mu_);
  return AcceptingLocked();
}

absl::Status JobTable::AcceptingLocked() const {
  if (!started_) return absl::UnavailableError("backfilld is starting");
  if (stopping_) return absl::UnavailableError("backfilld is shutting down");
  return absl::OkStatus();
}

ActiveJob* JobTable::FindLocked(const std::string& id) {
  auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : it->second.get();
}

ActiveJob* JobTable::AddLocked(std::unique_ptr<ActiveJob> job) {
  std::unique_ptr<ActiveJob>& slot = jobs_[job->job.id];
  slot = std::move(job);
  return slot.get();
}

int64_t JobTable::QueuedJobs() {
  absl::MutexLock lock(&mu_);
  int64_t queued = 0;
  for (const auto& [id, job] : jobs_) {
    if (job->state == JobState::kQueued) ++queued;
  }
  return queued;
}

void JobTable::EndLocked(ActiveJob* job, JobPhase phase) {
  job->phase = phase;
  if (phase == JobPhase::kHeld) {
    admission_.SetHeld(job->job.id, true);
  } else {
    admission_.Remove(job->job.id);
  }
  if (job->graph) job->graph->ClearReady();
  NotifyLocked(job->job.id);
}

void JobTable::ReleaseLocked(ActiveJob* job) {
  --job->busy;
  if (job->busy == 0 && job->phase == JobPhase::kDone) {
    const std::string id = job->job.id;
    jobs_.erase(id);
    if (on_forget_) on_forget_(id);
    NotifyLocked(id);
  }
}

void JobTable::DropLocked(ActiveJob* job) {
  if (job->phase != JobPhase::kDone) EndLocked(job, JobPhase::kDone);
  rolling_back_.erase(job->job.id);
  if (job->busy == 0) {
    const std::string id = job->job.id;
    jobs_.erase(id);
    NotifyLocked(id);
  }
}

void JobTable::SetOnForget(std::function<void(const std::string&)> on_forget) {
  absl::MutexLock lock(&mu_);
  on_forget_ = std::move(on_forget);
}

void JobTable::SetWatchStore(bool watch) {
  absl::MutexLock lock(&mu_);
  watch_store_ = watch;
}

bool JobTable::ReleaseAndTakeSettleLocked(ActiveJob* job) {
  if (job->busy == 1 && job->phase == JobPhase::kDone) {
    ReleaseLocked(job);  // forgets it: it must not be touched afterwards
    return false;
  }
  ReleaseLocked(job);
  return job->TakeSettle();
}

void JobTable::NotifyLocked(const std::string& id) {
  versions_[id] = next_version_++;
  changed_.SignalAll();
}

bool JobTable::WaitLocked(absl::Time deadline) {
  return changed_.WaitWithDeadline(&mu_, deadline);
}

absl::StatusOr<Job> JobTable::WaitForChange(const std::string& id,
                                            uint64_t* version,
                                            absl::Time deadline,
                                            JobView first_view) {
  uint64_t current;
  {
    absl::MutexLock lock(&mu_);
    auto current_version = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      auto it = versions_.find(id);
      return it == versions_.end() ? uint64_t{1} : it->second;
    };
    while (*version != 0 && current_version() <= *version && !stopping_) {
      if (!watch_store_ || jobs_.count(id)) {
        if (changed_.WaitWithDeadline(&mu_, deadline)) break;
        continue;
      }
      // Run by another replica: what the store shows, every kRemotePoll.
      const absl::Time poll = std::min(deadline, absl::Now() + kRemotePoll);
      if (changed_.WaitWithDeadline(&mu_, poll) && poll == deadline) break;
      if (jobs_.count(id)) continue;
      mu_.Unlock();
      absl::StatusOr<Job> now = store_->GetJobProgress(id);
      mu_.Lock();
      if (!now.ok()) break;  // the read below says what is wrong
      std::string digest =
          absl::StrCat(JobStateName(now->state), "|", now->message, "|",
                       now->counts.total, "|", now->counts.pending, "|",
                       now->counts.running, "|", now->counts.staged, "|",
                       now->counts.published, "|", now->counts.failed, "|",
                       now->counts.cancelled, "|", now->counts.unchanged, "|",
                       now->counts.skipped, "|", now->rows_written);
      std::string& seen = store_digests_[id];
      if (seen != digest) {
        seen = std::move(digest);
        versions_[id] = next_version_++;
      }
    }
    current = current_version();
  }
  // The first read is in the view asked for; later ones are progress
  // updates.
  ASSIGN_OR_RETURN(Job job, *version == 0 && first_view == JobView::kFull
                                ? store_->GetJob(id)
                                : store_->GetJobProgress(id));
  *version = current;
  return job;
}

void JobTable::AwaitEnded(const std::string& id, absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    const ActiveJob* job = FindLocked(id);
    if (job == nullptr || IsTerminal(job->state)) return;
    if (changed_.WaitWithDeadline(&mu_, deadline)) return;
  }
}

absl::Status JobTable::AwaitOwnRunEndedLocked(const std::string& id,
                                              absl::string_view action) {
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  for (ActiveJob* self = FindLocked(id); self != nullptr;
       self = FindLocked(id)) {
    if (self->reconfirming) {
      return absl::FailedPreconditionError(
          absl::StrCat("job ", id,
                       " is confirming its downstream consumers again right "
                       "now; wait for it to end, then ",
                       action, " it"));
    }
    if (stopping_) {
      return absl::UnavailableError("backfilld is shutting down");
    }
    if (changed_.WaitWithDeadline(&mu_, deadline) && FindLocked(id)) {
      return absl::UnavailableError(
          absl::StrCat("job ", id,
                       " is still letting go of its partitions after its "
                       "run; try again in a moment to ",
                       action, " it"));
    }
  }
  return absl::OkStatus();
}

std::vector<Admission::Overlap> JobTable::Blocking(
    const Plan& plan, const std::string& own_key,
    std::vector<Conflict>* conflicts, size_t max) {
  absl::MutexLock lock(&mu_);
  // Without admitted jobs nothing overlaps: the plan's scope (a set of all
  // its partitions) is not built for nothing.
  if (admission_.Empty()) return {};
  // A job submitted with `own_key`: a repeated submit does not wait for it.
  auto own = [&](const std::string& id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const ActiveJob* other = FindLocked(id);
    return other != nullptr && !own_key.empty() &&
           other->job.idempotency_key == own_key;
  };
  std::vector<Conflict> all;
  std::vector<Admission::Overlap> overlaps =
      admission_.Overlapping(ScopeOf(plan), &all, max);
  std::vector<Admission::Overlap> out;
  for (Admission::Overlap& o : overlaps) {
    if (!own(o.job_id)) out.push_back(std::move(o));
  }
  if (conflicts != nullptr) {
    for (Conflict& c : all) {
      if (!own(c.job_id)) conflicts->push_back(std::move(c));
    }
  }
  return out;
}

std::string JobTable::Describe(
    const std::vector<Admission::Overlap>& overlaps) {
  absl::MutexLock lock(&mu_);
  return DescribeLocked(overlaps);
}

std::string JobTable::DescribeLocked(
    const std::vector<Admission::Overlap>& overlaps) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < overlaps.size() && i < kMaxJobsDescribed; ++i) {
    const Admission::Overlap& o = overlaps[i];
    const ActiveJob* other = FindLocked(o.job_id);
    const char* state = other ? JobStateName(other->state)
                        : rolling_back_.count(o.job_id) ? "rolling back"
                                                        : "active";
    parts.push_back(absl::StrCat(
        other != nullptr && other->state == JobState::kPaused ? "paused job "
                                                              : "",
        o.job_id, " (", state, ", ",
        Plural(o.partitions, "shared partition", "shared partitions"), ")"));
  }
  std::string described = absl::StrJoin(parts, ", ");
  if (overlaps.size() > kMaxJobsDescribed) {
    absl::StrAppend(
        &described, ", ... and ",
        Plural(static_cast<int64_t>(overlaps.size() - kMaxJobsDescribed),
               "more job", "more jobs"));
  }
  return described;
}

std::vector<Admission::Overlap> JobTable::StartedOverlapsLocked(
    const std::string& id) {
  std::vector<Admission::Overlap> out;
  const Scope* scope = admission_.ScopeOf(id);
  if (scope == nullptr) return out;
  for (Admission::Overlap& o : admission_.Overlapping(*scope, nullptr, 0)) {
    if (o.job_id == id) continue;
    const ActiveJob* other = FindLocked(o.job_id);
    if (other == nullptr) continue;
    if (other->state == JobState::kQueued &&
        other->phase == JobPhase::kWaiting) {
      continue;  // not started: it will wait for the approved job
    }
    out.push_back(std::move(o));
  }
  return out;
}

std::vector<ActiveJob*> JobTable::ReserveHeldOverlapsLocked(
    const std::string& id) {
  std::vector<ActiveJob*> reserved;
  for (const Admission::Overlap& o : admission_.HeldOverlaps(id)) {
    ActiveJob* held = FindLocked(o.job_id);
    if (held == nullptr || held->phase != JobPhase::kHeld) continue;
    held->phase = JobPhase::kSettling;  // reserved for the supersede
    ++held->busy;
    reserved.push_back(held);
  }
  return reserved;
}

void JobTable::UnreserveHeldLocked(const std::vector<ActiveJob*>& reserved) {
  for (ActiveJob* held : reserved) {
    held->phase = JobPhase::kHeld;
    ReleaseLocked(held);
  }
}

}  // namespace backfill
