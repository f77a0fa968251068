// ReplayDue: one look at a dataset's replay policy (core/model/replay_policy.h)
// — which of its partitions are due for a replay now, why the others are
// not, and the request that replays the due ones.
//
// A partition is due when
//   - it is stale (core/plan/stale_lineage.h, as `--auto` finds it) for a
//     trigger the policy names: transform_change for "transform version
//     changed", input_change for a changed input;
//   - some of it lies inside the window: it ends after now - window;
//   - no active job holds it (the caller says which partitions are held);
//   - for an input change, the changed inputs are settled: their current
//     fingerprints are the ones this finder first saw at least `settle` ago.
//     The finder remembers, per partition, the input state it last saw and
//     since when; a finder made afresh (a restart) waits `settle` again.
// A stale partition that the dataset's frozen rule closes is never due: it
// is listed as frozen (the planner leaves frozen dependents out of the job
// in the same way, core/plan/frozen_filter.h).
//
// The request names the due partitions (dependents are planned as usual),
// `requested_by` "policy:<dataset>", and a reason that names the triggers
// and what changed. Its idempotency key is derived from the dataset, the
// due partitions and the states they were seen in, so that an evaluation
// repeated after a crash asks for the same job, and a new change asks for
// a new one.
//
// Not thread-safe: one finder per daemon, used by the thread that
// evaluates policies.

#ifndef BACKFILL_CORE_PLAN_REPLAY_DUE_H_
#define BACKFILL_CORE_PLAN_REPLAY_DUE_H_

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/base/clock.h"
#include "core/model/catalog.h"
#include "core/model/job.h"
#include "core/plan/stale_lineage.h"
#include "core/ports/engine.h"
#include "core/ports/state_store.h"

namespace backfill {

struct ReplayDue {
  std::string dataset;
  std::vector<StalePartition> due;  // sorted by partition
  // Stale, but not due: why, by partition.
  std::vector<std::string> unsettled;  // inputs changed < settle ago
  std::vector<std::string> held;       // in an active job
  std::vector<std::string> outside_window;
  std::vector<std::string> not_a_trigger;  // a cause the policy does not name
  std::vector<std::string> frozen;         // closed by the frozen rule
  // Whose replay for the same change did not succeed: they wait for a new
  // change of their inputs, or for a person (retry).
  std::vector<std::string> failed;
  // Empty partitions: nothing is due.
  BackfillRequest request;
  std::string idempotency_key;
};

// The change that makes `sp` (of `dataset`) stale, as one text: the
// transform version it would be made with for a transform change, the
// inputs it would read for an input change. Two looks that find the same
// change give the same text.
std::string ReplayChangeOf(const DatasetSpec& dataset,
                           const StalePartition& sp);

class ReplayDueFinder {
 public:
  // The partitions of a dataset that active jobs hold.
  using HeldPartitions =
      std::function<std::set<std::string>(const std::string& dataset)>;

  ReplayDueFinder(Engine* engine, StateStore* store, const Clock* clock,
                  HeldPartitions held)
      : engine_(engine), store_(store), clock_(clock), held_(std::move(held)) {}

  // Partition -> the change (ReplayChangeOf) for which a replay of it did
  // not succeed.
  using FailedReplays = std::map<std::string, std::string>;

  // `dataset` (of `catalog`) must declare `replay:`. A dataset with nothing
  // published yet has nothing due. A stale partition whose change is the
  // one `failed` records for it is not due (ReplayDue::failed).
  absl::StatusOr<ReplayDue> Find(const Catalog& catalog,
                                 const DatasetSpec& dataset,
                                 const FailedReplays& failed = {});

 private:
  struct Seen {
    std::string inputs_now;
    absl::Time since;
  };

  Engine* engine_;
  StateStore* store_;
  const Clock* clock_;
  HeldPartitions held_;
  // Dataset -> partition -> the input state last seen, and since when.
  std::map<std::string, std::map<std::string, Seen>> seen_;
};

}  // namespace backfill

#endif  // BACKFILL_CORE_PLAN_REPLAY_DUE_H_
