// The checks of one dataset of a job: the always-on ones (partition,
// primary_key, schema) and those its pipeline file declares, in that order.
// Stateless; thread-safe.

#ifndef BACKFILL_CORE_CHECKS_CHECK_SET_H_
#define BACKFILL_CORE_CHECKS_CHECK_SET_H_

#include <memory>
#include <vector>

#include "core/checks/check.h"
#include "core/model/catalog.h"

namespace backfill {

// With `integrity_only`, only the partition and primary_key checks (what
// a resumed publish checks again). `catalog` resolves referenced datasets
// (may be null: then a references check fails saying so).
std::vector<std::unique_ptr<Check>> ChecksFor(const DatasetSpec& dataset,
                                              const Catalog* catalog,
                                              bool integrity_only);

}  // namespace backfill

#endif  // BACKFILL_CORE_CHECKS_CHECK_SET_H_
