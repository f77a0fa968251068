// Admission: which jobs may run now, which must wait, and which are
// superseded — by their scopes (core/plan/scope.h): the (dataset, partition)
// pairs they recompute and, for a keyed job, the entity keys whose rows it
// replaces. Two jobs share a partition when both recompute it, whatever
// their keys (Scope::Overlaps says why disjoint key sets do not make two
// jobs independent). Pure bookkeeping; not thread-safe (the job runner calls
// it under its lock).
//
// Jobs enter in admission order (Add). A job that holds its partitions
// (see job_state_machine.h) blocks every job added after it that shares a
// partition with it: per partition, jobs run one at a time in admission
// order, so two jobs never write the same partition at once and the result
// equals that serial order. A job held for a decision blocks nobody; a
// newer job that shares a partition with it supersedes it. A rollback is
// added like a job while it runs (it holds its job's partitions) and
// supersedes the held jobs it overlaps once it restored its rows.
//
// It owns each admitted job's scope (moved in by Add) and, for each two
// admitted jobs that share partitions, how many: counted once, when the
// later of them is added, by comparing its scope with every admitted one
// (sorted partitions per dataset, see Scope). Nothing is kept per
// partition beyond the scopes, and Blockers and HeldOverlaps — the runner
// asks for the blockers of every waiting job after each batch of
// partitions — read those counts, never the partitions. Overlapping, for a
// plan not admitted, compares its scope with every unheld job's.

#ifndef BACKFILL_CORE_RUN_ADMISSION_H_
#define BACKFILL_CORE_RUN_ADMISSION_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/model/job.h"
#include "core/plan/scope.h"

namespace backfill {

// The scope of a plan: every planned (dataset, partition), with the key
// filter of each dataset planned with keys (DatasetPlan::keys).
Scope ScopeOf(const Plan& plan);

class Admission {
 public:
  Admission() = default;

  // Adds a job after every job added so far. `held`: it is held for a
  // decision (blocks nobody). Adding a job that is present re-adds it at
  // the end (a retried job queues behind everything). Compares `scope`
  // with every admitted job's: about one pass over the larger of the two
  // per dataset they share.
  void Add(const std::string& job_id, Scope scope, bool held = false);
  // The job stops (held = true) or starts again (false) to block others.
  void SetHeld(const std::string& job_id, bool held);
  void Remove(const std::string& job_id);
  bool Contains(const std::string& job_id) const;
  // Whether no job is admitted (nothing can overlap).
  bool Empty() const { return jobs_.empty(); }
  bool IsHeld(const std::string& job_id) const;
  const Scope* ScopeOf(const std::string& job_id) const;

  struct Overlap {
    std::string job_id;
    int64_t partitions = 0;  // shared (dataset, partition) pairs
  };
  // Jobs added before `job_id` that hold partitions it needs: it must wait
  // for all of them. In admission order.
  std::vector<Overlap> Blockers(const std::string& job_id) const;
  // Held jobs (added before or after) that share partitions with `job_id`:
  // superseded when it starts. By job id.
  std::vector<Overlap> HeldOverlaps(const std::string& job_id) const;
  // Jobs that are not held and share partitions with `scope` (a plan not
  // admitted yet), in admission order; `conflicts` gets the shared pairs
  // until it holds `max_conflicts`, by dataset, partition, then admission
  // order.
  std::vector<Overlap> Overlapping(const Scope& scope,
                                   std::vector<Conflict>* conflicts,
                                   size_t max_conflicts) const;
  // Every admitted job, in admission order.
  std::vector<std::string> Order() const;

 private:
  struct Entry {
    uint64_t order = 0;
    Scope scope;
    bool held = false;
    // The other admitted jobs that share partitions with this one: how
    // many (never 0), by job id.
    std::map<std::string, int64_t> shared;
  };
  // The admitted jobs, in admission order.
  std::vector<std::pair<const std::string*, const Entry*>> InOrder() const;

  uint64_t next_order_ = 1;
  std::map<std::string, Entry> jobs_;
};

}  // namespace backfill

#endif  // BACKFILL_CORE_RUN_ADMISSION_H_
