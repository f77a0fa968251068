// A trial of the failover harness (failover_harness.cc): the jobs it
// plans, the lease and job state it reads from the state store with plain
// SQL, how it disturbs the group, and what it found. Its disturbances are
// in failover_harness.cc, its waits for the jobs and its checks in
// failover_harness_checks.cc.
//
// Ownership: a Trial borrows its group, which must outlive it. Not
// thread-safe: the harness's one thread runs it.

#ifndef BACKFILL_TESTS_FAILOVER_HARNESS_TRIAL_H_
#define BACKFILL_TESTS_FAILOVER_HARNESS_TRIAL_H_

#include <cstdint>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/civil_time.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "tests/failover_harness_model.h"
#include "tests/failover_harness_processes.h"

namespace backfill::failover {

inline constexpr char kPublishPoint[] = "publish.before_record";
inline constexpr char kReason[] = "failover harness correction";

inline int64_t NowMicros() { return absl::ToUnixMicros(absl::Now()); }

inline std::string Day(int d) {
  return absl::FormatCivilTime(absl::CivilDay(2025, 1, 1) + d);
}

inline bool IsTerminal(const std::string& state) {
  for (const char* s : {"SUCCEEDED", "FAILED", "CANCELLED", "ROLLED_BACK",
                        "VALIDATION_FAILED", "DOWNSTREAM_UNHEALTHY"}) {
    if (state == s) return true;
  }
  return false;
}

// A job of the trial.
struct JobPlan {
  int first = 0;  // days [first, end) from 2025-01-01
  int end = 0;
  std::string key;
  std::string id;     // once acknowledged
  std::string state;  // as backfillctl last said
  int via = -1;       // the replica it was submitted through
  std::set<Key> partitions;
};

struct Lease {
  std::string node;
  int64_t token = 0;
  std::string step;
  int64_t claimed_at = 0;  // microseconds since the epoch
};

struct TrialResult {
  Findings findings;
  bool landed = false;    // the disturbance hit what it aimed at
  bool takeover = false;  // another replica claimed the job after it
  double claim_seconds = 0;
  int refusals = 0;        // LEASE_LOST refusals in the replicas' logs
  double job_seconds = 0;  // from the first submit to the last job's end
  std::string summary;
  std::vector<std::string> notes;
};

class Trial {
 public:
  Trial(Group& group, int number, Kind kind, std::mt19937_64 rng,
        double expected_job_seconds)
      : group_(group),
        number_(number),
        kind_(kind),
        rng_(std::move(rng)),
        expected_job_seconds_(expected_job_seconds) {}

  TrialResult Run();

 private:
  int Uniform(int lo, int hi) {
    return std::uniform_int_distribution<int>(lo, hi)(rng_);
  }
  Replica& R(int i) { return group_.replica(i); }
  void Note(const std::string& line) { result_.notes.push_back(line); }
  void Fail(Category c, const std::string& message) {
    result_.findings.Add(c, message);
  }

  void Plan();
  bool CorrectAndSnapshot();
  bool Submit(JobPlan& job, int via);
  void Disturb();
  void KillRandom();
  void KillInPublish();
  void KillInTakeover();
  void StopHolder();
  void DrainHolder();
  void RestartDown();
  void WaitTerminal();
  void Resubmit();
  void Check();
  void CheckJob(const JobPlan& job, const Contents& published);
  void CountRefusals();
  // Notes the sessions of both databases that wait for a lock or sit in
  // an open transaction, and whom they wait for.
  void NoteWaits();
  void DumpState();

  // The state store's view, with plain SQL.
  std::optional<Lease> LeaseOf(const std::string& id);
  std::string StateOf(const std::string& id);
  int IndexOf(const std::string& node) const {
    for (int i = 0; i < kReplicas; ++i) {
      if (node == absl::StrCat("r", i + 1)) return i;
    }
    return -1;
  }
  // Waits (bounded) until `id` has `staged` partitions staged, or is past
  // its run, or ended; its lease then, if it is held and not ended.
  std::optional<Lease> WaitRunning(const std::string& id, int64_t staged);
  // Waits (bounded) until `id` is held in one of `steps` (as its lease
  // says; the holder sends its step with its next renewal) or is in job
  // state `state` (as the state store says at once); its lease then, its
  // step followed by "/" and `state` when the state said it.
  std::optional<Lease> WaitStep(const std::string& id,
                                const std::set<std::string>& steps,
                                const std::string& state);
  // Waits (bounded) until a replica not in `excluded` claims `id` with a
  // token above `token`; its lease then. nullopt once the job ended.
  std::optional<Lease> WaitClaim(const std::string& id, int64_t token,
                                 const std::set<std::string>& excluded,
                                 seconds timeout);
  // Records the claim, timed from `since` (microseconds since the epoch).
  void Claimed(const std::optional<Lease>& claim, int64_t since);
  void KillReplica(int i) {
    R(i).Kill();
    down_.insert(i);
  }
  // A replica that answers, other than `not_this` if there is one.
  int Serving(int not_this = -1) {
    const int start = Uniform(0, kReplicas - 1);
    for (int k = 0; k < kReplicas; ++k) {
      const int i = (start + k) % kReplicas;
      if (i != not_this && R(i).serving()) return i;
    }
    return not_this >= 0 && R(not_this).serving() ? not_this : -1;
  }

  Group& group_;
  const int number_;
  const Kind kind_;
  std::mt19937_64 rng_;
  const double expected_job_seconds_;

  TrialResult result_;
  std::vector<JobPlan> jobs_;
  Contents old_;  // the snapshot
  Contents new_;  // recomputed from the corrected raw tables
  size_t log_offsets_[kReplicas] = {};
  std::set<int> down_;  // replicas the trial killed or stopped for good
  int armed_ = -1;      // the replica started with the crash point armed
  Clock::time_point submitted_;
};

}  // namespace backfill::failover

#endif  // BACKFILL_TESTS_FAILOVER_HARNESS_TRIAL_H_
