// Fuzz target: partition values and ranges (core/model/partition.h,
// core/model/partition_layout.h). The first input byte chooses the layout (its
// low three bits the grain: none, hour, day, month, key; bit 3 a time x key
// layout with the keys "eu", "us" and "north america"); the rest is split at
// the first newline into two strings A and B, the way a request names one
// partition or the two ends of a range, or the time and key columns of a
// row.
//
// Invariants beyond "no crash":
//   - a valid partition has bounds, start before end for a time grain (the
//     end of one partition is the start of the next, see ranges below); a
//     time partition belongs to itself (PartitionOfValue gives it back) and
//     lies in its own candidate range; a time x key value splits into a
//     valid time and a declared key that join to the same text;
//   - a value PartitionOfValue maps to partition P: P is valid, and the
//     value lies inside P's candidate range byte-wise and ASCII
//     case-insensitively; PartitionOfValues gives a valid time x key value;
//   - a range [A, B) enumerates valid partitions in strictly increasing
//     order, at most the limit asked for; for a one-dimensional layout it
//     starts at A, every partition is before B, and each partition's end
//     bound is the next one's start bound;
//   - ParseGrain accepts exactly the names GrainName gives.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "core/model/partition.h"
#include "core/model/partition_layout.h"
#include "fuzz/fuzz_check.h"

namespace {

using backfill::Grain;
using backfill::PartitionLayout;

constexpr size_t kMaxRange = 64;

bool InRange(const backfill::CandidateRange& range, std::string_view v) {
  if (!(range.lo <= v && v < range.hi)) return false;
  const std::string lo = absl::AsciiStrToLower(range.lo);
  const std::string hi = absl::AsciiStrToLower(range.hi);
  const std::string lv = absl::AsciiStrToLower(std::string(v));
  return lo <= lv && lv < hi;
}

void CheckPartition(const PartitionLayout& layout, std::string_view a) {
  if (!backfill::ValidatePartition(layout, a).ok()) return;
  absl::StatusOr<backfill::PartitionBounds> bounds =
      backfill::BoundsOf(layout, a);
  FUZZ_CHECK(bounds.ok());
  if (backfill::IsTimeGrain(layout.grain)) {
    FUZZ_CHECK(bounds->start < bounds->end);
    absl::StatusOr<backfill::CandidateRange> range =
        backfill::CandidateRangeOf(layout, a);
    FUZZ_CHECK(range.ok());
  }
  if (layout.two_dimensional()) {
    absl::StatusOr<backfill::TimeKey> tk = backfill::SplitTimeKey(layout, a);
    FUZZ_CHECK(tk.ok());
    FUZZ_CHECK(backfill::JoinTimeKey(tk->time, tk->key) == a);
    FUZZ_CHECK(backfill::ValidatePartition(layout.grain, tk->time).ok());
    FUZZ_CHECK(backfill::ValidateDimensionKey(tk->key).ok());
    absl::StatusOr<std::string> of =
        backfill::PartitionOfValues(layout.grain, tk->time, tk->key);
    FUZZ_CHECK(of.ok() && *of == a);
  } else if (backfill::IsTimeGrain(layout.grain)) {
    absl::StatusOr<std::string> of =
        backfill::PartitionOfValue(layout.grain, a);
    FUZZ_CHECK(of.ok() && *of == a);
    absl::StatusOr<backfill::CandidateRange> range =
        backfill::CandidateRangeOf(layout.grain, a);
    FUZZ_CHECK(range.ok() && InRange(*range, a));
  }
}

void CheckValue(const PartitionLayout& layout, std::string_view a,
                std::string_view b) {
  if (layout.two_dimensional()) {
    absl::StatusOr<std::string> p =
        backfill::PartitionOfValues(layout.grain, a, b);
    if (!p.ok()) return;
    const PartitionLayout own(layout.grain, {std::string(b)});
    FUZZ_CHECK(backfill::ValidatePartition(own, *p).ok());
    absl::StatusOr<backfill::CandidateRange> range =
        backfill::CandidateRangeOf(own, *p);
    FUZZ_CHECK(range.ok() && InRange(*range, a));
    return;
  }
  absl::StatusOr<std::string> p = backfill::PartitionOfValue(layout.grain, a);
  if (!p.ok()) return;
  FUZZ_CHECK(backfill::ValidatePartition(layout.grain, *p).ok());
  if (backfill::IsTimeGrain(layout.grain)) {
    absl::StatusOr<backfill::CandidateRange> range =
        backfill::CandidateRangeOf(layout.grain, *p);
    FUZZ_CHECK(range.ok() && InRange(*range, a));
  } else if (layout.grain == Grain::kKey) {
    FUZZ_CHECK(*p == a);
  } else {
    FUZZ_CHECK(p->empty());
  }
}

void CheckRange(const PartitionLayout& layout, std::string_view a,
                std::string_view b) {
  absl::StatusOr<std::vector<std::string>> range =
      backfill::EnumerateRange(layout, a, b, kMaxRange);
  if (!range.ok()) return;
  FUZZ_CHECK(!range->empty() && range->size() <= kMaxRange);
  for (size_t i = 0; i < range->size(); ++i) {
    FUZZ_CHECK(backfill::ValidatePartition(layout, (*range)[i]).ok());
    if (i > 0) FUZZ_CHECK((*range)[i - 1] < (*range)[i]);
  }
  if (layout.two_dimensional()) return;
  FUZZ_CHECK(range->front() == a);
  FUZZ_CHECK(range->back() < b);
  for (size_t i = 0; i + 1 < range->size(); ++i) {
    absl::StatusOr<backfill::PartitionBounds> here =
        backfill::BoundsOf(layout, (*range)[i]);
    absl::StatusOr<backfill::PartitionBounds> next =
        backfill::BoundsOf(layout, (*range)[i + 1]);
    FUZZ_CHECK(here.ok() && next.ok() && here->end == next->start);
  }
}

void CheckGrainName(std::string_view a) {
  absl::StatusOr<Grain> grain = backfill::ParseGrain(a);
  if (grain.ok()) FUZZ_CHECK(backfill::GrainName(*grain) == a);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static const Grain kGrains[] = {Grain::kNone, Grain::kHour, Grain::kDay,
                                  Grain::kMonth, Grain::kKey};
  const Grain grain = kGrains[(data[0] & 7) % 5];
  PartitionLayout layout(grain);
  if ((data[0] & 8) != 0 && backfill::IsTimeGrain(grain)) {
    layout = PartitionLayout(grain, {"eu", "us", "north america"});
  }
  const std::string_view rest(reinterpret_cast<const char*>(data + 1),
                              size - 1);
  const size_t newline = rest.find('\n');
  const std::string_view a = rest.substr(0, newline);
  const std::string_view b = newline == std::string_view::npos
                                 ? std::string_view()
                                 : rest.substr(newline + 1);
  CheckGrainName(a);
  CheckPartition(layout, a);
  CheckValue(layout, a, b);
  CheckRange(layout, a, b);
  return 0;
}
