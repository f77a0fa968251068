// StaleLineage: the `--auto` scope of a backfill request (auto_detect) —
// every published partition of a dataset whose recorded lineage no longer
// matches what it would be computed from and with now:
//   - its transform version differs from the dataset's current one
//     ("transform version changed"), or
//   - an input it read has another content fingerprint now than the one
//     recorded when it was computed ("input orders/2025-03-01 changed" for a
//     partition read, "input customers changed" for a table read whole;
//     several: the first in the order they were read, then "(+N more)").
//     When lineage shows that a later job replaced a changed input
//     (core/plan/stale_dependents.h: a publish, e.g. with --no-downstream, or a
//     rollback), the reason names the first such input and the job:
//     "input daily_revenue/2025-03-01 changed: republished by bf-3 with
//     --no-downstream".
// What a partition was computed from is the state store's current verified
// version of it (StateStore::VerifiedVersions: its newest publish record,
// or a newer UNCHANGED recomputation of early cutoff, rolled-back versions
// left out); the fingerprints now are the engine's
// (Engine::CurrentFingerprints), fetched once per input dataset for every
// input partition any version read. An input dataset that is no longer in
// the catalog, or a recorded partition no longer valid for its grain, counts
// as changed. A partition with rows but no recorded lineage (never
// published by backfilld) is not considered.
//
// Stateless free function over the interfaces it is given; thread-safe as
// far as they are.

#ifndef BACKFILL_CORE_PLAN_STALE_LINEAGE_H_
#define BACKFILL_CORE_PLAN_STALE_LINEAGE_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/model/catalog.h"
#include "core/plan/stale_reason.h"
#include "core/ports/engine.h"
#include "core/ports/state_store.h"

namespace backfill {

struct StalePartition {
  enum class Cause { kTransformVersion, kInputChanged };
  std::string partition;
  std::string reason;  // as the header says (core/plan/stale_reason.h)
  Cause cause = Cause::kInputChanged;
  // kInputChanged: the current fingerprints of the changed inputs, as
  // "dataset/partition=fingerprint" joined by ";" ("<gone>" for an input
  // that cannot be read now); moves whenever one of them changes again.
  std::string inputs_now = {};
};

// The stale partitions of `dataset`, sorted by partition; empty when every
// published partition matches its lineage. FAILED_PRECONDITION when the
// dataset has no published partition with recorded lineage at all.
absl::StatusOr<std::vector<StalePartition>> FindStalePartitions(
    const Catalog& catalog, Engine& engine, StateStore& store,
    const DatasetSpec& dataset);

// The same over `versions` (StateStore::VerifiedVersions of `dataset`, read
// by the caller): empty when none is stale, or when `versions` is empty.
absl::StatusOr<std::vector<StalePartition>> StalePartitionsOf(
    const Catalog& catalog, Engine& engine, StateStore& store,
    const DatasetSpec& dataset,
    const std::map<std::string, VerifiedVersion>& versions);

}  // namespace backfill

#endif  // BACKFILL_CORE_PLAN_STALE_LINEAGE_H_
