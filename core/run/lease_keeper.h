// LeaseKeeper: this replica's side of a group (core/ports/lease_store.h).
// It records the replica alive, claims jobs for it, renews what it holds
// and notices what it lost; and it is the LeaseFence the state store asks
// before each write about a job, so that the tokens of the leases it holds
// travel with every write.
//
// Every third of the lease time a thread of its own renews the leases held
// (one call to the store, which also records the heartbeat), sends the
// steps that changed (SetStep) and gives back the leases asked to be
// released (ReleaseSoon). Leases the store says are no longer this
// replica's — taken over after they expired — are lost: their token turns
// to 0, which no write passes, and the runner is told (on_lost) to drop
// the jobs. When the store cannot be reached for longer than a lease, every
// lease is taken as lost: another replica may hold them by now. After each
// renewal the keeper calls `on_tick`, where the runner looks for work
// nobody holds; Wake() calls it at once.
//
// Ownership: borrows the store, the clock and the callbacks' targets,
// which must outlive it; owns its thread. Thread-safety: thread-safe; the
// callbacks run on its thread, never under its lock.

#ifndef BACKFILL_CORE_RUN_LEASE_KEEPER_H_
#define BACKFILL_CORE_RUN_LEASE_KEEPER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/base/clock.h"
#include "core/ports/lease_store.h"

namespace backfill {

class LeaseKeeper : public LeaseFence {
 public:
  struct Callbacks {
    // Jobs whose leases this replica lost.
    std::function<void(const std::vector<std::string>&)> on_lost;
    // A job taken over from `from` (its lease had expired).
    std::function<void(const std::string& job_id, const std::string& from)>
        on_takeover;
    // After each renewal, and at Wake().
    std::function<void()> on_tick;
  };

  LeaseKeeper(LeaseStore* store, NodeRecord self, absl::Duration lease_time,
              const Clock* clock);
  ~LeaseKeeper() override;  // Stop(/*leave=*/false)

  LeaseKeeper(const LeaseKeeper&) = delete;
  LeaseKeeper& operator=(const LeaseKeeper&) = delete;

  // Replaces the replica's record (its name and address are known once its
  // port is bound); before Start() only.
  void SetSelf(NodeRecord self) { self_ = std::move(self); }
  // Records the replica (a first heartbeat; its error is returned) and
  // starts the thread.
  absl::Status Start(Callbacks callbacks);
  // Stops the thread. With `leave`, gives every lease back and removes the
  // replica's record, so that others take its jobs over at once (a drain);
  // without it, the leases expire in their time.
  void Stop(bool leave);

  const std::string& node() const { return self_.name; }
  LeaseStore* store() const { return store_; }

  // Claims `job_id` for this replica (LeaseStore::Claim). A job this
  // replica holds already is claimed again, its lease extended.
  absl::StatusOr<ClaimResult> Claim(const std::string& job_id,
                                    const std::string& step);
  // The step shown for a held lease; sent with the next renewal.
  void SetStep(const std::string& job_id, const std::string& step);
  // Gives the lease back with the next renewal (a job that ended).
  void ReleaseSoon(const std::string& job_id);
  // Marks the replica draining (sent with the next heartbeat).
  void SetDraining();
  // Runs on_tick on the keeper's thread as soon as it can.
  void Wake();

  // LeaseFence.
  std::optional<int64_t> TokenFor(const std::string& job_id) const override;

 private:
  struct Held {
    JobLease lease;
    bool lost = false;
    std::string step;  // wanted; lease.step: as the store has it
  };

  void Loop();
  // One renewal: steps, releases, renew and heartbeat; returns the jobs
  // lost.
  std::vector<std::string> RenewOnce();

  LeaseStore* const store_;
  NodeRecord self_;
  const absl::Duration lease_time_;
  const Clock* const clock_;
  Callbacks callbacks_;

  mutable absl::Mutex mu_;
  std::map<std::string, Held> held_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> to_release_ ABSL_GUARDED_BY(mu_);
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool wake_ ABSL_GUARDED_BY(mu_) = false;
  // Whether the store has the draining flag as draining_ says.
  bool draining_sent_ ABSL_GUARDED_BY(mu_) = false;
  // The last renewal the store answered (the clock's time).
  absl::Time last_renewed_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace backfill

#endif  // BACKFILL_CORE_RUN_LEASE_KEEPER_H_
