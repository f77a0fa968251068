#include "core/model/partition_layout.h"

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/status_macros.h"
#include "core/base/sv.h"

namespace backfill {
namespace {

std::string_view TimeFormat(Grain grain) {
  switch (grain) {
    case Grain::kHour:
      return "YYYY-MM-DDTHH";
    case Grain::kDay:
      return "YYYY-MM-DD";
    default:
      return "YYYY-MM";
  }
}

// "TIME|KEY" spelled for the layout: "YYYY-MM-DD|KEY (KEY one of eu, us)".
std::string ExpectedFormat(const PartitionLayout& layout) {
  return absl::StrCat(Sv(TimeFormat(layout.grain)), "|KEY (KEY one of ",
                      absl::StrJoin(layout.keys, ", "), ")");
}

absl::Status NotTwoDimensional(const PartitionLayout& layout) {
  return absl::InternalError(
      absl::StrCat("layout ", LayoutName(layout), " is not time x key"));
}

bool IsDeclared(const PartitionLayout& layout, std::string_view key) {
  return std::find(layout.keys.begin(), layout.keys.end(), key) !=
         layout.keys.end();
}

}  // namespace

std::string LayoutName(const PartitionLayout& layout) {
  if (!layout.two_dimensional()) return GrainName(layout.grain);
  return absl::StrCat(GrainName(layout.grain), " x key");
}

std::string JoinTimeKey(std::string_view time, std::string_view key) {
  return absl::StrCat(Sv(time), std::string(1, kPartitionKeySeparator),
                      Sv(key));
}

absl::Status ValidateDimensionKey(std::string_view key) {
  RETURN_IF_ERROR(ValidatePartition(Grain::kKey, key));
  if (key.find(kPartitionKeySeparator) != std::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("key ", QuoteValue(key),
                     " contains '|', which separates the "
                     "time and the key of a partition value"));
  }
  return absl::OkStatus();
}

absl::StatusOr<TimeKey> SplitTimeKey(const PartitionLayout& layout,
                                     std::string_view value) {
  if (!layout.two_dimensional() || !IsTimeGrain(layout.grain)) {
    return NotTwoDimensional(layout);
  }
  const size_t bar = value.find(kPartitionKeySeparator);
  if (bar == std::string_view::npos ||
      value.find(kPartitionKeySeparator, bar + 1) != std::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "partition ", QuoteValue(value), " is not a ", LayoutName(layout),
        " partition; expected ", ExpectedFormat(layout)));
  }
  TimeKey out{std::string(value.substr(0, bar)),
              std::string(value.substr(bar + 1))};
  if (absl::Status s = ValidatePartition(layout.grain, out.time); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "partition ", QuoteValue(value), ": time part: ", s.message(),
        "; expected ", ExpectedFormat(layout)));
  }
  if (!IsDeclared(layout, out.key)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "partition ", QuoteValue(value), ": ", QuoteValue(out.key),
        " is not a declared key; expected ", ExpectedFormat(layout)));
  }
  return out;
}

absl::Status ValidatePartition(const PartitionLayout& layout,
                               std::string_view value) {
  if (!layout.two_dimensional()) return ValidatePartition(layout.grain, value);
  return SplitTimeKey(layout, value).status();
}

absl::StatusOr<PartitionBounds> BoundsOf(const PartitionLayout& layout,
                                         std::string_view value) {
  if (!layout.two_dimensional()) return BoundsOf(layout.grain, value);
  ASSIGN_OR_RETURN(TimeKey tk, SplitTimeKey(layout, value));
  return BoundsOf(layout.grain, tk.time);
}

absl::StatusOr<std::vector<std::string>> EnumerateRange(
    const PartitionLayout& layout, std::string_view from, std::string_view to,
    size_t max_partitions) {
  if (!layout.two_dimensional()) {
    return EnumerateRange(layout.grain, from, to, max_partitions);
  }
  const bool from_keyed =
      from.find(kPartitionKeySeparator) != std::string_view::npos;
  const bool to_keyed =
      to.find(kPartitionKeySeparator) != std::string_view::npos;
  if (from_keyed != to_keyed) {
    return absl::InvalidArgumentError(absl::StrCat(
        "range [", QuoteValue(from), ", ", QuoteValue(to),
        "): give both ends as times (", Sv(TimeFormat(layout.grain)),
        ": every declared key) or both as ", ExpectedFormat(layout),
        " with the same key, not a key at one end only"));
  }
  if (!from_keyed) {
    const size_t keys = layout.keys.size();
    ASSIGN_OR_RETURN(std::vector<std::string> times,
                     EnumerateRange(layout.grain, from, to, max_partitions));
    std::vector<std::string> out;
    out.reserve(times.size() * keys);
    for (const std::string& t : times) {
      for (const std::string& k : layout.keys) out.push_back(JoinTimeKey(t, k));
    }
    if (out.size() > max_partitions) {
      return absl::InvalidArgumentError(absl::StrCat(
          "range [", QuoteValue(from), ", ", QuoteValue(to), ") has ",
          out.size(), " partitions (", times.size(), " x ", keys,
          " keys); at most ", max_partitions, " are allowed"));
    }
    std::sort(out.begin(), out.end());
    return out;
  }
  absl::StatusOr<TimeKey> lo = SplitTimeKey(layout, from);
  if (!lo.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("range start: ", lo.status().message()));
  }
  absl::StatusOr<TimeKey> hi = [&]() -> absl::StatusOr<TimeKey> {
    // The exclusive end may be the partition after the last valid one
    // (e.g. "9999-12-31|eu"), as for the time grain alone.
    const size_t bar = to.find(kPartitionKeySeparator);
    TimeKey tk{std::string(to.substr(0, bar)), std::string(to.substr(bar + 1))};
    if (tk.key.find(kPartitionKeySeparator) != std::string::npos) {
      return SplitTimeKey(layout, to).status();
    }
    if (!IsDeclared(layout, tk.key)) return SplitTimeKey(layout, to).status();
    return tk;
  }();
  if (!hi.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("range end: ", hi.status().message()));
  }
  if (lo->key != hi->key) {
    return absl::InvalidArgumentError(absl::StrCat(
        "range [", QuoteValue(from), ", ", QuoteValue(to), ") has two keys (",
        QuoteValue(lo->key), " and ", QuoteValue(hi->key),
        "); a range covers one key (both ends TIME|KEY with the same key) "
        "or every key (both ends times); list other partitions in "
        "`partitions`"));
  }
  ASSIGN_OR_RETURN(
      std::vector<std::string> times,
      EnumerateRange(layout.grain, lo->time, hi->time, max_partitions));
  for (std::string& t : times) t = JoinTimeKey(t, lo->key);
  return times;
}

absl::StatusOr<std::string> PartitionOfValues(Grain time_grain,
                                              std::string_view time_value,
                                              std::string_view key_value) {
  if (!IsTimeGrain(time_grain)) {
    return absl::InvalidArgumentError(
        absl::StrCat("a time x key partition needs a time grain, not \"",
                     GrainName(time_grain), "\""));
  }
  ASSIGN_OR_RETURN(std::string time, PartitionOfValue(time_grain, time_value));
  RETURN_IF_ERROR(ValidateDimensionKey(key_value));
  return JoinTimeKey(time, key_value);
}

absl::StatusOr<CandidateRange> CandidateRangeOf(const PartitionLayout& layout,
                                                std::string_view partition) {
  if (!layout.two_dimensional()) {
    return CandidateRangeOf(layout.grain, partition);
  }
  ASSIGN_OR_RETURN(TimeKey tk, SplitTimeKey(layout, partition));
  return CandidateRangeOf(layout.grain, tk.time);
}

}  // namespace backfill
