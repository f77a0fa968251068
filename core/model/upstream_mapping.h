// Upstream mapping: what one upstream edge of the catalog (identity, all,
// rollup, lookback N) means for partitions, in both directions, built on the
// arithmetic of partition_mapping.h:
//
//   mapping    a dependent partition P reads      upstream partition U affects
//   identity   U = P                              P = U
//   rollup     the finer U inside P               the coarser P containing U
//   lookback N U = P-N .. P                       P = U .. U+N
//   all        the whole upstream                 every dependent partition
//
// Also the words a plan uses for an edge ("downstream of X via rollup") and
// the :window_start a lookback dataset's transform gets.
//
// Stateless free functions over catalog types; thread-safe.

#ifndef BACKFILL_CORE_MODEL_UPSTREAM_MAPPING_H_
#define BACKFILL_CORE_MODEL_UPSTREAM_MAPPING_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/model/catalog.h"
#include "core/model/partition_layout.h"

namespace backfill {

// The partitions of the upstream (layout `upstream`) that partition
// `partition` of a dependent (layout `dependent`) reads through `edge`,
// sorted; nullopt for `all` (the whole upstream). INVALID_ARGUMENT for a
// partition not valid for its layout or an edge the layouts do not allow
// (Catalog::Build refuses those).
//
// Time x key layouts (partition_layout.h): the time part maps as the table
// above says, and the key part
//   both time x key        keeps the key: T|K reads t|K
//   time upstream          T|K reads t (each key of the dependent reads it)
//   time dependent         T reads t|k for every key k of the upstream
absl::StatusOr<std::optional<std::vector<std::string>>> PartitionsRead(
    const UpstreamEdge& edge, const PartitionLayout& upstream,
    const PartitionLayout& dependent, std::string_view partition);

// The partitions of the dependent that backfilling `partitions` of the
// upstream affects through `edge`, sorted and unique; nullopt for `all`
// (every partition of the dependent). Time x key: both time x key, t|K
// affects T|K (nothing when K is not a key of the dependent); a time
// upstream's t affects T|k for every key k of the dependent; a time
// dependent's T is affected by t|k of any key. Errors as PartitionsRead.
absl::StatusOr<std::optional<std::vector<std::string>>> PartitionsAffected(
    const UpstreamEdge& edge, const PartitionLayout& upstream,
    const PartitionLayout& dependent, absl::Span<const std::string> partitions);

// Why a dependent partition reached through `edge` from `upstream` is in a
// plan: "downstream of X" (identity), "downstream of X via rollup",
// "downstream of X via lookback 7", "downstream of X via all".
std::string DownstreamReason(const UpstreamEdge& edge,
                             std::string_view upstream);

// The largest lookback N over the upstream edges of `dataset`; 0 when it
// has no lookback edge.
int MaxLookback(const DatasetSpec& dataset);

// The :window_start bound for partition `partition` of `dataset`: the start
// bound (as :partition_start) of partition P-N (of the time part of a time
// x key partition), N being MaxLookback (the
// first valid partition when P-N is before year 0001). nullopt when the
// dataset has no lookback edge.
absl::StatusOr<std::optional<std::string>> WindowStart(
    const DatasetSpec& dataset, std::string_view partition);

}  // namespace backfill

#endif  // BACKFILL_CORE_MODEL_UPSTREAM_MAPPING_H_
