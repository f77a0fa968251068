// The values a statement of the warehouse gets for one partition of its
// dataset, bound by name: :partition_start and :partition_end (the
// partition's bounds, core/model/partition.h), :partition (its value),
// :partition_key (the key of a time x key partition), :window_start (the
// start of the window a `lookback` upstream reads,
// core/model/upstream_mapping.h) and :keys (the entity keys a job replaces, as
// a JSON array of strings in byte order; NULL for a job that replaces whole
// partitions). Transforms are allowed what their dataset declares
// (core/model/transform_parameters.h); assertions and expect queries the
// bounds, the value and the key.
//
// Stateless free functions; thread-safe.

#ifndef BACKFILL_STORAGE_SQL_PARTITION_PARAMETERS_H_
#define BACKFILL_STORAGE_SQL_PARTITION_PARAMETERS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/model/catalog.h"
#include "core/model/transform_parameters.h"
#include "core/ports/engine.h"
#include "storage/sql/connection.h"

namespace backfill::sql {

// The values of `names` (with their colons, in the order a statement binds
// them) for `partition` of `dataset`, whose validity is checked first.
// `allowed`: the parameters beyond the bounds and the value that may be
// bound; `item`: the job's item of the dataset (its keys), or nullptr.
// FAILED_PRECONDITION starting with `what` ("transform of orders") for a
// name that is not bound.
absl::StatusOr<Params> PartitionParameters(
    const DatasetSpec& dataset, const std::string& partition,
    const std::vector<std::string>& names, const ExtraParameters& allowed,
    const JobLayout::Item* item, const std::string& what);

// What assertions and expect queries may use: the bounds, the value, and
// the key of a time x key partition.
ExtraParameters CheckParameters(const DatasetSpec& dataset);

// `keys` as a JSON array of strings, sorted and without duplicates (a key
// holds no control character: only '"' and '\' are escaped).
std::string KeysJson(const std::vector<std::string>& keys);

}  // namespace backfill::sql

#endif  // BACKFILL_STORAGE_SQL_PARTITION_PARAMETERS_H_
