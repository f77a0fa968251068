// Stale reasons: the words that say why a published partition is stale, as
// a plan shows them (PlannedPartition reasons of `--auto`, `why`). Shared by
// the two judges of staleness: the `--auto` scope, which compares lineage
// with the warehouse (core/plan/stale_lineage.h), and staleness from lineage
// alone (core/plan/stale_dependents.h), which names the job that replaced an
// input.
//
// Constants and pure functions; thread-safe.

#ifndef BACKFILL_CORE_PLAN_STALE_REASON_H_
#define BACKFILL_CORE_PLAN_STALE_REASON_H_

#include <cstddef>
#include <string>

#include "core/model/job.h"

namespace backfill {

// A partition computed with another version of its dataset's transform.
inline constexpr char kVersionChangedReason[] = "transform version changed";

// "input orders/2025-03-01 changed", "input customers changed" ("" as the
// partition: read whole), with " (+N more)" for `more` other inputs.
std::string InputChangedReason(const InputFingerprint& first, size_t more);

}  // namespace backfill

#endif  // BACKFILL_CORE_PLAN_STALE_REASON_H_
