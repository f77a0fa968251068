#include "core/run/lease_keeper.h"

#include <algorithm>
#include <utility>

#include "absl/time/clock.h"
#include "core/base/thread_name.h"

namespace backfill {
namespace {

// How often on_tick runs at most apart (the scan for work nobody holds).
constexpr absl::Duration kTickInterval = absl::Seconds(1);

}  // namespace

LeaseKeeper::LeaseKeeper(LeaseStore* store, NodeRecord self,
                         absl::Duration lease_time, const Clock* clock)
    : store_(store),
      self_(std::move(self)),
      lease_time_(lease_time),
      clock_(clock) {}

LeaseKeeper::~LeaseKeeper() { Stop(/*leave=*/false); }

absl::Status LeaseKeeper::Start(Callbacks callbacks) {
  callbacks_ = std::move(callbacks);
  if (absl::Status s = store_->Heartbeat(self_); !s.ok()) return s;
  {
    absl::MutexLock lock(&mu_);
    last_renewed_ = clock_->Now();
  }
  thread_ = std::thread([this] { Loop(); });
  return absl::OkStatus();
}

void LeaseKeeper::Stop(bool leave) {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
  if (!leave) return;
  // Released or not (the store may be away: then they expire), nothing is
  // written under these leases any more.
  store_->Leave(self_.name).IgnoreError();
  absl::MutexLock lock(&mu_);
  for (auto& [id, held] : held_) held.lost = true;
}

absl::StatusOr<ClaimResult> LeaseKeeper::Claim(const std::string& job_id,
                                               const std::string& step) {
  absl::StatusOr<ClaimResult> claimed =
      store_->Claim(job_id, self_.name, step, lease_time_);
  if (!claimed.ok() || !claimed->claimed) return claimed;
  {
    absl::MutexLock lock(&mu_);
    Held& held = held_[job_id];
    held.lease = claimed->lease;
    held.lost = false;
    held.step = step;
    to_release_.erase(job_id);
  }
  if (!claimed->taken_from.empty() && callbacks_.on_takeover) {
    callbacks_.on_takeover(job_id, claimed->taken_from);
  }
  return claimed;
}

void LeaseKeeper::SetStep(const std::string& job_id, const std::string& step) {
  absl::MutexLock lock(&mu_);
  auto it = held_.find(job_id);
  if (it != held_.end()) it->second.step = step;
}

void LeaseKeeper::ReleaseSoon(const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  if (held_.count(job_id)) to_release_.insert(job_id);
  wake_ = true;
}

void LeaseKeeper::SetDraining() {
  absl::MutexLock lock(&mu_);
  draining_ = true;
  wake_ = true;
}

void LeaseKeeper::Wake() {
  absl::MutexLock lock(&mu_);
  wake_ = true;
}

std::optional<int64_t> LeaseKeeper::TokenFor(const std::string& job_id) const {
  absl::MutexLock lock(&mu_);
  auto it = held_.find(job_id);
  if (it == held_.end()) return std::nullopt;
  return it->second.lost ? 0 : it->second.lease.token;
}

std::vector<std::string> LeaseKeeper::RenewOnce() {
  std::vector<JobLease> renew;
  std::vector<JobLease> release;
  std::vector<std::pair<std::string, std::string>> steps;
  NodeRecord self;
  {
    absl::MutexLock lock(&mu_);
    self = self_;
    self.draining = draining_;
    for (auto& [id, held] : held_) {
      if (held.lost) continue;
      if (to_release_.count(id)) {
        release.push_back(held.lease);
      } else {
        renew.push_back(held.lease);
        if (held.step != held.lease.step) steps.emplace_back(id, held.step);
      }
    }
  }
  for (const JobLease& lease : release) {
    if (store_->Release(lease).ok()) {
      absl::MutexLock lock(&mu_);
      auto it = held_.find(lease.job_id);
      if (it != held_.end() && it->second.lease.token == lease.token &&
          to_release_.count(lease.job_id)) {
        held_.erase(it);
        to_release_.erase(lease.job_id);
      }
    }
  }
  // A changed step is a claim of a lease held already: it extends it too.
  for (const auto& [id, step] : steps) {
    absl::StatusOr<ClaimResult> claimed =
        store_->Claim(id, self.name, step, lease_time_);
    if (claimed.ok() && claimed->claimed) {
      // Claimed again (its token is new when the lease had expired and
      // nobody took it in between): still this replica's.
      absl::MutexLock lock(&mu_);
      auto it = held_.find(id);
      if (it != held_.end() && !it->second.lost)
        it->second.lease = claimed->lease;
    }
  }
  std::vector<std::string> lost;
  // A renewal records the heartbeat too; the whole record is written when
  // there is nothing to renew or the draining flag changed.
  bool whole_record;
  {
    absl::MutexLock lock(&mu_);
    whole_record = renew.empty() || draining_sent_ != self.draining;
  }
  absl::Status heartbeat =
      whole_record ? store_->Heartbeat(self) : absl::OkStatus();
  if (whole_record && heartbeat.ok()) {
    absl::MutexLock lock(&mu_);
    draining_sent_ = self.draining;
  }
  absl::StatusOr<std::vector<std::string>> gone =
      renew.empty()
          ? absl::StatusOr<std::vector<std::string>>(std::vector<std::string>())
          : store_->Renew(self.name, renew, lease_time_);
  absl::MutexLock lock(&mu_);
  const absl::Time now = clock_->Now();
  if (gone.ok() && heartbeat.ok()) {
    last_renewed_ = now;
    for (const std::string& id : *gone) {
      auto it = held_.find(id);
      if (it != held_.end() && !it->second.lost) {
        it->second.lost = true;
        lost.push_back(id);
      }
    }
  } else if (now - last_renewed_ > lease_time_) {
    // Not renewed for a whole lease: others may hold these jobs by now.
    for (auto& [id, held] : held_) {
      if (held.lost) continue;
      held.lost = true;
      lost.push_back(id);
    }
  }
  return lost;
}

void LeaseKeeper::Loop() {
  NameThisThread("bf-leases");
  const absl::Duration renew_every = lease_time_ / 3;
  absl::Time next_renew = absl::Now() + renew_every;
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      const absl::Time until =
          std::min(next_renew, absl::Now() + kTickInterval);
      auto woken = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stop_ || wake_;
      };
      mu_.AwaitWithDeadline(absl::Condition(&woken), until);
      if (stop_) return;
      wake_ = false;
    }
    bool released;
    {
      absl::MutexLock lock(&mu_);
      released = !to_release_.empty();
    }
    if (absl::Now() >= next_renew || released) {
      next_renew = absl::Now() + renew_every;
      std::vector<std::string> lost = RenewOnce();
      if (!lost.empty() && callbacks_.on_lost) callbacks_.on_lost(lost);
    }
    if (callbacks_.on_tick) callbacks_.on_tick();
  }
}

}  // namespace backfill
