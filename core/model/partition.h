// Partition arithmetic: the grains a dataset can be partitioned by, the text
// format of their partition values, half-open ranges, and the bound
// parameters (:partition_start, :partition_end) a transform receives.
//
// Formats (UTC): hour "YYYY-MM-DDTHH", day "YYYY-MM-DD", month "YYYY-MM".
// Bounds are text of the same kind, so that text comparison on ISO dates and
// timestamps works: day "2025-03-01" .. "2025-03-02"; hour
// "2025-03-01 07:00:00" .. "2025-03-01 08:00:00"; month "2025-03-01" ..
// "2025-04-01". A key partition's value is the key itself; its start and end
// are both the key (there is no range). An unpartitioned dataset has one
// partition, the empty string, with empty bounds.
//
// Years are 0001..9999. The last partition of year 9999 of each time grain
// (hour "9999-12-31T23", day "9999-12-31", month "9999-12") is not a valid
// partition: its end bound would fall in year 10000 ("10000-01-01"), which
// sorts before "9999-..." as text. It may still be the exclusive end of a
// range.
//
// Stateless free functions; thread-safe.

#ifndef BACKFILL_CORE_MODEL_PARTITION_H_
#define BACKFILL_CORE_MODEL_PARTITION_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace backfill {

enum class Grain { kNone, kHour, kDay, kMonth, kKey };

// "", "hour", "day", "month", "key".
const char* GrainName(Grain grain);

// A user-supplied value quoted for an error message: C-escaped (so control
// characters cannot reach logs raw) and cut after 64 bytes.
std::string QuoteValue(std::string_view value);

// Parses "hour", "day", "month" or "key"; anything else is INVALID_ARGUMENT.
absl::StatusOr<Grain> ParseGrain(std::string_view name);

// True for hour, day and month.
bool IsTimeGrain(Grain grain);

struct PartitionBounds {
  std::string start;  // Bound as :partition_start (inclusive).
  std::string end;    // Bound as :partition_end (exclusive).
};

// Validates that `value` is a well-formed partition of a time grain (exact
// format, real calendar date, e.g. "2025-02-30" is rejected) and returns it.
// For kKey any non-empty value of at most 256 characters without control
// characters is accepted; for kNone only "". Errors are INVALID_ARGUMENT and
// name the expected format.
absl::Status ValidatePartition(Grain grain, std::string_view value);

// The bounds of one partition. The value must be valid for the grain.
absl::StatusOr<PartitionBounds> BoundsOf(Grain grain, std::string_view value);

// Every partition in [from, to), in order. Time grains only. An empty or
// inverted range, a malformed endpoint, or more than `max_partitions`
// partitions is INVALID_ARGUMENT.
absl::StatusOr<std::vector<std::string>> EnumerateRange(
    Grain grain, std::string_view from, std::string_view to,
    size_t max_partitions = 1000000);

// THE definition of partition membership: the partition a value of a
// partition column belongs to. Every step that selects rows by partition
// (row counts for planning, input fingerprints, staging replacement, the
// out-of-partition check, rollback copies, publish's delete) must agree with
// it; engines evaluate this very function (the SQLite engine registers it
// as an SQL function) rather than re-deriving it in SQL.
//
// Time grains accept exactly these text values (UTC), and nothing else:
//   YYYY-MM                            month grain only: that month
//   YYYY-MM-DD                         that day (hour grain: its hour 00)
//   YYYY-MM-DD HH:MM[:SS[.F]][Z]       a space needs at least the minutes
//   YYYY-MM-DDTHH[:MM[:SS[.F]]][Z]     so the hour format itself belongs
// where F is 1 to 9 digits, HH 00..23, MM and SS 00..59, and Z the UTC
// designator. Any other value (another offset, trailing text, a bad
// calendar date, a value in the last partition of year 9999) belongs to no
// partition: INVALID_ARGUMENT. Key grain: the value is the key itself and
// must be a valid key; unpartitioned: always "".
absl::StatusOr<std::string> PartitionOfValue(Grain grain,
                                             std::string_view value);

// A half-open text range [lo, hi) that contains every value
// PartitionOfValue maps to `partition` (a time grain's partition), under
// byte-wise and ASCII case-insensitive ordering. It also contains other
// values, so it is only a pre-filter that lets an index on the column do
// the work: membership is `lo <= v < hi AND PartitionOfValue(v) == P`.
struct CandidateRange {
  std::string lo;
  std::string hi;
};
absl::StatusOr<CandidateRange> CandidateRangeOf(Grain grain,
                                                std::string_view partition);

}  // namespace backfill

#endif  // BACKFILL_CORE_MODEL_PARTITION_H_
