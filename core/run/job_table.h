// JobTable: the jobs the runner holds in memory (ActiveJob, active_job.h),
// in admission order over their partitions (Admission, admission.h), with
// the one lock that guards them all (and the runner's dispatch counters):
// never held across I/O. Every change of a job is announced here
// (NotifyLocked), to whoever waits for it (WaitForChange) and to the waits of
// the runner's decisions. It also answers what holds partitions: the jobs a
// plan would wait for (Blocking), described for messages (Describe), and the
// held jobs a starting job or a rollback supersedes
// (ReserveHeldOverlapsLocked).
//
// A job stays in the table from its admission until it ended and no
// closure uses it (ReleaseLocked forgets it then); jobs being rolled back
// are in the admission index only, holding their partitions.
//
// Ownership: owns its jobs; borrows the store (read by WaitForChange),
// which must outlive it.
// Thread-safety: thread-safe. Methods named ...Locked need mu(); the
// others take it.

#ifndef BACKFILL_CORE_RUN_JOB_TABLE_H_
#define BACKFILL_CORE_RUN_JOB_TABLE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/model/job.h"
#include "core/ports/state_store.h"
#include "core/run/active_job.h"
#include "core/run/admission.h"

namespace backfill {

// The most jobs a message names when it lists the jobs that hold
// partitions (JobTable::Describe); the others are counted.
inline constexpr size_t kMaxJobsDescribed = 5;

class JobTable {
 public:
  explicit JobTable(StateStore* store) : store_(store) {}

  JobTable(const JobTable&) = delete;
  JobTable& operator=(const JobTable&) = delete;

  absl::Mutex* mu() const ABSL_LOCK_RETURNED(mu_) { return &mu_; }

  // --- Running: started by the runner's Start, stopped once ---
  void SetStartedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    started_ = true;
  }
  bool StartedLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return started_;
  }
  // Marks the table stopping and wakes every wait; false when it was not
  // started or stops already.
  bool Stop() ABSL_LOCKS_EXCLUDED(mu_);
  bool Stopping() ABSL_LOCKS_EXCLUDED(mu_);
  bool StoppingLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stopping_;
  }
  // OK while running; UNAVAILABLE before the start and once stopping.
  absl::Status Accepting() ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status AcceptingLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // --- The jobs ---
  ActiveJob* FindLocked(const std::string& id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Takes `job` in (replacing one with its id) and returns it.
  ActiveJob* AddLocked(std::unique_ptr<ActiveJob> job)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  const std::map<std::string, std::unique_ptr<ActiveJob>>& jobs() const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return jobs_;
  }
  Admission& admission() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return admission_;
  }
  // Jobs being rolled back: they hold their partitions in admission().
  std::set<std::string>& rolling_back() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return rolling_back_;
  }
  // How many jobs are QUEUED: admitted and waiting to start.
  int64_t QueuedJobs() ABSL_LOCKS_EXCLUDED(mu_);

  // The job ended (SUCCEEDED, CANCELLED, ...: kDone) or is held (kHeld):
  // leaves admission (or stops blocking), its graph hands out nothing more.
  void EndLocked(ActiveJob* job, JobPhase phase)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A closure of the job ended: forgets a done job once idle.
  void ReleaseLocked(ActiveJob* job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Lets go of a job this process may no longer run (its lease was taken
  // over): it ends here (kDone) without anything recorded, and is
  // forgotten once no closure uses it.
  void DropLocked(ActiveJob* job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Called (under mu()) with the id of each job the table forgets; it must
  // not call back into the table.
  void SetOnForget(std::function<void(const std::string&)> on_forget)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Whether WaitForChange watches jobs not in the table by reading the
  // store (every kRemotePoll): in a group, another replica runs them.
  void SetWatchStore(bool watch) ABSL_LOCKS_EXCLUDED(mu_);
  // ReleaseLocked, then ActiveJob::TakeSettle unless the job was forgotten.
  bool ReleaseAndTakeSettleLocked(ActiveJob* job)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // --- Changes ---
  // Job `id` changed: wakes its watchers and every wait below.
  void NotifyLocked(const std::string& id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Waits for the next change (or stop) until `deadline`; true when the
  // deadline passed.
  bool WaitLocked(absl::Time deadline) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Blocks until the job changes after `*version` (0: returns at once) or
  // `deadline` passes; returns the job (in `first_view` when `*version` was
  // 0, progress only otherwise: no partition lists) and sets `*version`.
  absl::StatusOr<Job> WaitForChange(const std::string& id, uint64_t* version,
                                    absl::Time deadline, JobView first_view)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Blocks until job `id` is in a final state as this process runs it, or
  // is not in the table (ended and forgotten, or run by another replica),
  // or `deadline` passes. Reads nothing from the store.
  void AwaitEnded(const std::string& id, absl::Time deadline)
      ABSL_LOCKS_EXCLUDED(mu_);
  // A job records SUCCEEDED or DOWNSTREAM_UNHEALTHY before it lets go of its
  // partitions (metrics, retention): waits until its own run let go, so that
  // an action on the ended job is not refused as a conflict with itself.
  // FAILED_PRECONDITION while the job is being confirmed again, UNAVAILABLE
  // when the run does not let go in time or the runner stops.
  absl::Status AwaitOwnRunEndedLocked(const std::string& id,
                                      absl::string_view action)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // --- What holds partitions ---
  // Jobs that hold partitions of `plan` (a job submitted with it would wait
  // for them), in admission order, skipping jobs submitted with
  // `own_key` (a repeated submit); `conflicts` gets up to `max` shared
  // partitions.
  std::vector<Admission::Overlap> Blocking(const Plan& plan,
                                           const std::string& own_key,
                                           std::vector<Conflict>* conflicts,
                                           size_t max) ABSL_LOCKS_EXCLUDED(mu_);
  // "bf-3 (RUNNING, 12 shared partitions)" for messages: the first
  // kMaxJobsDescribed jobs, then how many more there are ("bf-1 (...), ...,
  // bf-5 (...), ... and 77 more jobs"), so that a message stays short however
  // many jobs overlap.
  std::string Describe(const std::vector<Admission::Overlap>& overlaps)
      ABSL_LOCKS_EXCLUDED(mu_);
  std::string DescribeLocked(const std::vector<Admission::Overlap>& overlaps)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Non-held jobs sharing partitions with `id` that have started (are no
  // longer only waiting): a held job must not publish under them.
  std::vector<Admission::Overlap> StartedOverlapsLocked(const std::string& id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The jobs held for a decision that share partitions with `id` (an
  // admitted job, or a rollback holding its job's partitions), reserved
  // for a supersede (kSettling, counted busy): none of them is approved,
  // retried or cancelled meanwhile.
  std::vector<ActiveJob*> ReserveHeldOverlapsLocked(const std::string& id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Gives reserved jobs back, held as before (the supersede did not
  // happen).
  void UnreserveHeldLocked(const std::vector<ActiveJob*>& reserved)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

 private:
  StateStore* const store_;

  mutable absl::Mutex mu_;
  absl::CondVar changed_;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::map<std::string, std::unique_ptr<ActiveJob>> jobs_ ABSL_GUARDED_BY(mu_);
  Admission admission_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> rolling_back_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, uint64_t> versions_ ABSL_GUARDED_BY(mu_);
  std::function<void(const std::string&)> on_forget_ ABSL_GUARDED_BY(mu_);
  bool watch_store_ ABSL_GUARDED_BY(mu_) = false;
  // What the store showed last of each job watched there (a digest of its
  // progress).
  std::map<std::string, std::string> store_digests_ ABSL_GUARDED_BY(mu_);
  uint64_t next_version_ ABSL_GUARDED_BY(mu_) = 2;
};

}  // namespace backfill

#endif  // BACKFILL_CORE_RUN_JOB_TABLE_H_
