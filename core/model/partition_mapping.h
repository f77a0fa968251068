// Partition mappings: which partitions of an upstream dataset a partition of
// a dependent dataset reads, and, the other way round, which partitions of
// the dependent a backfill of upstream partitions affects. Two mappings,
// built on the partition arithmetic of core/model/partition.h:
//
//   rollup     A coarser dataset reads the finer partitions inside it:
//              hour -> day, day -> month, hour -> month. Day "2025-03-31"
//              reads hours "2025-03-31T00" .. "2025-03-31T23"; upstream
//              hour "2025-03-31T23" affects day "2025-03-31".
//   lookback N Both datasets have the same time grain; partition P of the
//              dependent reads P-N .. P (the N previous partitions and P
//              itself), so backfilling upstream P affects P .. P+N.
//              1 <= N <= kMaxLookback.
//
// Range limits: partitions lie in years 0001..9999, and the last partition
// of year 9999 of each grain (hour "9999-12-31T23", day "9999-12-31", month
// "9999-12") is not a valid partition (see partition.h). Partitions that a
// mapping would reach beyond that valid range are simply not produced:
// the lookback inputs of "0001-01-02" with N = 3 are "0001-01-01" and
// "0001-01-02"; the partitions affected by "9999-12-29" with N = 3 are
// "9999-12-29" and "9999-12-30"; the rollup month of day "9999-12-30" does
// not exist (RollupParent says OUT_OF_RANGE, the batch helpers skip it).
//
// Partition values must be valid for their grain as ValidatePartition says;
// an invalid one is INVALID_ARGUMENT with ValidatePartition's message. Every
// list returned is sorted (chronologically, which is also text order) and
// free of duplicates.
//
// Stateless free functions; thread-safe.

#ifndef BACKFILL_CORE_MODEL_PARTITION_MAPPING_H_
#define BACKFILL_CORE_MODEL_PARTITION_MAPPING_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/model/partition.h"

namespace backfill {

// ---------------------------------------------------------------- rollup --

// OK if `fine` is a strictly finer time grain than `coarse` (hour -> day,
// day -> month, hour -> month); otherwise (same grain, coarse -> fine, a key
// or unpartitioned grain) INVALID_ARGUMENT saying which pairs are allowed.
absl::Status ValidateRollup(Grain fine, Grain coarse);

// The coarse partition containing `fine_partition`: day "2025-03-31" ->
// month "2025-03"; hour "2025-03-31T23" -> day "2025-03-31" or month
// "2025-03". OUT_OF_RANGE if that coarse partition is the last of year 9999
// (e.g. day "9999-12-30" -> month "9999-12"), which is not a valid
// partition.
absl::StatusOr<std::string> RollupParent(Grain fine, Grain coarse,
                                         std::string_view fine_partition);

// Every fine partition inside `coarse_partition`, in order: month "2024-02"
// -> its 29 days; day -> its 24 hours; month -> every hour of the month.
absl::StatusOr<std::vector<std::string>> RollupChildren(
    Grain fine, Grain coarse, std::string_view coarse_partition);

// Batch of RollupParent: the coarse partitions of the dependent affected by
// backfilling the fine upstream partitions `fine_partitions`. A parent
// beyond the valid range is skipped, not an error.
absl::StatusOr<std::vector<std::string>> RollupAffectedPartitions(
    Grain fine, Grain coarse, absl::Span<const std::string> fine_partitions);

// Batch of RollupChildren: the fine upstream partitions that the coarse
// dependent partitions `coarse_partitions` read.
absl::StatusOr<std::vector<std::string>> RollupInputPartitions(
    Grain fine, Grain coarse, absl::Span<const std::string> coarse_partitions);

// -------------------------------------------------------------- lookback --

// The largest lookback N accepted.
inline constexpr int kMaxLookback = 10000;

// OK if `grain` is a time grain and 1 <= n <= kMaxLookback; otherwise
// INVALID_ARGUMENT.
absl::Status ValidateLookback(Grain grain, int n);

// The upstream partitions that dependent partition `partition` reads:
// partition-n .. partition, in order (fewer near year 0001).
absl::StatusOr<std::vector<std::string>> LookbackInputs(
    Grain grain, int n, std::string_view partition);

// The dependent partitions affected by backfilling upstream `partition`:
// partition .. partition+n, in order (fewer near the end of year 9999).
absl::StatusOr<std::vector<std::string>> LookbackAffected(
    Grain grain, int n, std::string_view partition);

// Batch of LookbackInputs: the union over `partitions` (dependent ones).
absl::StatusOr<std::vector<std::string>> LookbackInputPartitions(
    Grain grain, int n, absl::Span<const std::string> partitions);

// Batch of LookbackAffected: the union over `partitions` (upstream ones).
absl::StatusOr<std::vector<std::string>> LookbackAffectedPartitions(
    Grain grain, int n, absl::Span<const std::string> partitions);

}  // namespace backfill

#endif  // BACKFILL_CORE_MODEL_PARTITION_MAPPING_H_
