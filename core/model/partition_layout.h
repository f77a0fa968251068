// Partition layout: how one dataset's partition values are made, as the
// partition arithmetic needs it. A one-dimensional layout is a grain of
// core/model/partition.h (hour, day, month, key, or none). A two-dimensional
// layout (time x key) is a time grain plus the declared keys of a second,
// key dimension; its partition values are "TIME|KEY":
//
//   TIME  a partition of the time grain, in its strict format
//         ("2025-03-01", "2025-03-01T07", "2025-03")
//   KEY   one of the declared keys (keys never contain '|')
//
// e.g. "2025-03-01|eu". Order: plain text order of the values, which is by
// time, then by key text (a time grain's values have one width). The
// bounds of "TIME|KEY" (:partition_start, :partition_end) are those of
// TIME; ranges are half-open on the time part (see EnumerateRange).
//
// The overloads below take a layout and behave exactly like their Grain
// counterparts of partition.h for a one-dimensional layout; a Grain
// converts implicitly to its one-dimensional layout, so the two are
// interchangeable wherever a layout is expected.
//
// A value type; the functions are stateless and thread-safe.

#ifndef BACKFILL_CORE_MODEL_PARTITION_LAYOUT_H_
#define BACKFILL_CORE_MODEL_PARTITION_LAYOUT_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/model/partition.h"

namespace backfill {

// Separates the time and the key of a two-dimensional partition value.
inline constexpr char kPartitionKeySeparator = '|';

struct PartitionLayout {
  PartitionLayout() = default;
  // A one-dimensional layout of `g` (implicit: a grain is a layout).
  PartitionLayout(Grain g) : grain(g) {}  // NOLINT(runtime/explicit)
  PartitionLayout(Grain g, std::vector<std::string> k)
      : grain(g), keys(std::move(k)) {}

  // The grain; the time grain of a two-dimensional layout.
  Grain grain = Grain::kNone;
  // Two-dimensional layouts only: the declared keys of the key dimension,
  // in declaration order (non-empty). Empty for every one-dimensional one.
  std::vector<std::string> keys;

  bool two_dimensional() const { return !keys.empty(); }
};

// "day", "key", ... for a one-dimensional layout; "day x key" for a
// two-dimensional one.
std::string LayoutName(const PartitionLayout& layout);

// The time and the key of a two-dimensional partition value.
struct TimeKey {
  std::string time;
  std::string key;
};

// "TIME|KEY".
std::string JoinTimeKey(std::string_view time, std::string_view key);

// Checks that `key` may be a declared key of a two-dimensional layout: a
// valid key of the key grain without '|'. INVALID_ARGUMENT otherwise.
absl::Status ValidateDimensionKey(std::string_view key);

// Splits and validates a partition value of a two-dimensional layout:
// exactly one '|', TIME valid for the time grain, KEY one of the declared
// keys. INVALID_ARGUMENT naming the expected format ("TIME|KEY" with the
// grain's format and the declared keys). Not for one-dimensional layouts.
absl::StatusOr<TimeKey> SplitTimeKey(const PartitionLayout& layout,
                                     std::string_view value);

// ValidatePartition of partition.h; for a two-dimensional layout, as
// SplitTimeKey.
absl::Status ValidatePartition(const PartitionLayout& layout,
                               std::string_view value);

// BoundsOf of partition.h; for a two-dimensional layout the bounds of the
// time part.
absl::StatusOr<PartitionBounds> BoundsOf(const PartitionLayout& layout,
                                         std::string_view value);

// EnumerateRange of partition.h. For a two-dimensional layout, [from, to)
// is half-open on the time part and the ends are either both times
// ("2025-03-01" .. "2025-03-04": those days x every declared key, in text
// order) or both "TIME|KEY" with the same declared key ("2025-03-01|eu" ..
// "2025-03-04|eu": those days of eu only). Ends with different keys, or a
// key at one end only, are INVALID_ARGUMENT. `max_partitions` bounds the
// partitions produced (times x keys).
absl::StatusOr<std::vector<std::string>> EnumerateRange(
    const PartitionLayout& layout, std::string_view from, std::string_view to,
    size_t max_partitions = 1000000);

// The membership definition for two dimensions: the partition of a row
// whose time column holds `time_value` and whose key column holds
// `key_value` is "PartitionOfValue(grain, time_value)|key_value", when the
// time value maps to a partition and the key value is a valid key without
// '|' (whether it is a declared key is not checked: a value of an
// undeclared key belongs to a partition no plan can name). INVALID_ARGUMENT
// otherwise, and for a `time_grain` that is not a time grain.
absl::StatusOr<std::string> PartitionOfValues(Grain time_grain,
                                              std::string_view time_value,
                                              std::string_view key_value);

// The candidate pre-filter of a partition over its time column (see
// CandidateRangeOf in partition.h): the time part's range for a
// two-dimensional layout.
absl::StatusOr<CandidateRange> CandidateRangeOf(const PartitionLayout& layout,
                                                std::string_view partition);

}  // namespace backfill

#endif  // BACKFILL_CORE_MODEL_PARTITION_LAYOUT_H_
