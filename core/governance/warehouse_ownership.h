// Warehouse ownership: the check, at every start, that the state store and
// the warehouse belong together, before any job runs.
//
// Publication markers in the warehouse name the state store that wrote
// them (StoreInfo::store_id), and the warehouse records which store owns
// it. A start is refused, with what happened and what to do, when:
//   - the warehouse is owned by another state store (state.db was deleted,
//     recreated or replaced);
//   - the store records publications the warehouse does not hold (the
//     warehouse is missing, empty, replaced, or restored from an older
//     backup); a job whose partitions all came out unchanged published
//     nothing, left no marker and is not looked for;
//   - the warehouse holds publications of this store that the store does
//     not record (state.db was restored from an older backup).
// Otherwise the store claims the warehouse (Engine::Claim). With `adopt`
// (the daemon's --adopt-warehouse) the store takes the warehouse over as it
// is: it claims it, and its job numbers continue after every job id the
// warehouse has seen, so that no new job id repeats an old one.
//
// Stateless; thread-safe as the store and engine are.

#ifndef BACKFILL_CORE_GOVERNANCE_WAREHOUSE_OWNERSHIP_H_
#define BACKFILL_CORE_GOVERNANCE_WAREHOUSE_OWNERSHIP_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/model/job_state_machine.h"
#include "core/ports/engine.h"
#include "core/ports/state_store.h"

namespace backfill {

struct OwnershipResult {
  std::string store_id;
  // What --adopt-warehouse changed, for the log ("" when not adopting).
  std::string adopted;
};

// FAILED_PRECONDITION with an actionable message when the two disagree;
// `store_path` and `warehouse_path` name the files in messages.
absl::StatusOr<OwnershipResult> CheckAndClaimWarehouse(
    StateStore* store, Engine* engine, bool adopt,
    const std::string& store_path, const std::string& warehouse_path);

// The published jobs the store records (PublishedStates) plus those in
// PUBLISHING: when there is any, a missing warehouse file is an error, not
// an empty warehouse.
absl::StatusOr<std::vector<std::string>> JobsWithPublications(
    StateStore* store);

}  // namespace backfill

#endif  // BACKFILL_CORE_GOVERNANCE_WAREHOUSE_OWNERSHIP_H_
