#include "core/model/partition_mapping.h"

#include <algorithm>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/civil_time.h"
#include "absl/types/span.h"
#include "core/base/sort_unique.h"
#include "core/base/status_macros.h"
#include "core/base/sv.h"
#include "core/model/partition.h"

namespace backfill {
namespace {

// A grain's name for messages ("none" for an unpartitioned dataset).
std::string_view Name(Grain grain) {
  return grain == Grain::kNone ? "none" : GrainName(grain);
}

// The partition formats of partition.h. Years are zero-padded to four
// digits; a year outside 0001..9999 yields text that ValidatePartition
// rejects, which is how out-of-range partitions are dropped.
std::string Format(absl::CivilHour h) {
  return absl::StrFormat("%04d-%02d-%02dT%02d", h.year(), h.month(), h.day(),
                         h.hour());
}
std::string Format(absl::CivilDay d) {
  return absl::StrFormat("%04d-%02d-%02d", d.year(), d.month(), d.day());
}
std::string Format(absl::CivilMonth m) {
  return absl::StrFormat("%04d-%02d", m.year(), m.month());
}

// Validates `value` as a partition of `grain` (whose civil type is C) and
// returns it as a civil time.
template <typename C>
absl::StatusOr<C> Parse(Grain grain, std::string_view value) {
  RETURN_IF_ERROR(ValidatePartition(grain, value));
  C civil;
  if (!absl::ParseCivilTime(Sv(value), &civil)) {
    return absl::InternalError(absl::StrCat("valid ", GrainName(grain),
                                            " partition \"", Sv(value),
                                            "\" did not parse as civil time"));
  }
  return civil;
}

// Appends `civil` as a partition of `grain` unless it is beyond the valid
// range.
template <typename C>
void AppendIfValid(Grain grain, C civil, std::vector<std::string>* out) {
  std::string value = Format(civil);
  if (ValidatePartition(grain, value).ok()) out->push_back(std::move(value));
}

// ---------------------------------------------------------------- rollup --

template <typename Fine, typename Coarse>
absl::StatusOr<std::string> ParentOf(Grain fine, Grain coarse,
                                     std::string_view fine_partition) {
  ASSIGN_OR_RETURN(Fine f, Parse<Fine>(fine, fine_partition));
  std::string parent = Format(Coarse(f));
  if (!ValidatePartition(coarse, parent).ok()) {
    return absl::OutOfRangeError(absl::StrCat(
        "the ", GrainName(coarse), " containing ", GrainName(fine), " \"",
        Sv(fine_partition), "\" is \"", parent,
        "\", which is beyond the last supported ", GrainName(coarse)));
  }
  return parent;
}

template <typename Fine, typename Coarse>
absl::Status AppendChildren(Grain fine, Grain coarse,
                            std::string_view coarse_partition,
                            std::vector<std::string>* out) {
  ASSIGN_OR_RETURN(Coarse c, Parse<Coarse>(coarse, coarse_partition));
  const Fine end(c + 1);
  for (Fine f(c); f < end; ++f) AppendIfValid(fine, f, out);
  return absl::OkStatus();
}

absl::StatusOr<std::string> Parent(Grain fine, Grain coarse,
                                   std::string_view fine_partition) {
  RETURN_IF_ERROR(ValidateRollup(fine, coarse));
  if (fine == Grain::kHour && coarse == Grain::kDay) {
    return ParentOf<absl::CivilHour, absl::CivilDay>(fine, coarse,
                                                     fine_partition);
  }
  if (fine == Grain::kHour) {
    return ParentOf<absl::CivilHour, absl::CivilMonth>(fine, coarse,
                                                       fine_partition);
  }
  return ParentOf<absl::CivilDay, absl::CivilMonth>(fine, coarse,
                                                    fine_partition);
}

absl::Status Children(Grain fine, Grain coarse,
                      std::string_view coarse_partition,
                      std::vector<std::string>* out) {
  RETURN_IF_ERROR(ValidateRollup(fine, coarse));
  if (fine == Grain::kHour && coarse == Grain::kDay) {
    return AppendChildren<absl::CivilHour, absl::CivilDay>(
        fine, coarse, coarse_partition, out);
  }
  if (fine == Grain::kHour) {
    return AppendChildren<absl::CivilHour, absl::CivilMonth>(
        fine, coarse, coarse_partition, out);
  }
  return AppendChildren<absl::CivilDay, absl::CivilMonth>(
      fine, coarse, coarse_partition, out);
}

// -------------------------------------------------------------- lookback --

enum class Direction { kInputs, kAffected };

// The union of the lookback windows of `partitions`: each point's window is
// merged with overlapping or adjacent ones, so that a window is enumerated
// once however many points share it.
template <typename C>
absl::StatusOr<std::vector<std::string>> LookbackUnion(
    Grain grain, int n, absl::Span<const std::string> partitions,
    Direction direction) {
  std::vector<C> points;
  points.reserve(partitions.size());
  for (const std::string& partition : partitions) {
    ASSIGN_OR_RETURN(C point, Parse<C>(grain, partition));
    points.push_back(point);
  }
  std::sort(points.begin(), points.end());
  points.erase(std::unique(points.begin(), points.end()), points.end());

  auto window_lo = [&](C p) {
    return direction == Direction::kInputs ? p - n : p;
  };
  auto window_hi = [&](C p) {
    return direction == Direction::kInputs ? p : p + n;
  };
  std::vector<std::string> out;
  size_t i = 0;
  while (i < points.size()) {
    const C lo = window_lo(points[i]);
    C hi = window_hi(points[i]);
    for (++i; i < points.size() && window_lo(points[i]) <= hi + 1; ++i) {
      hi = window_hi(points[i]);
    }
    for (C c = lo; c <= hi; ++c) AppendIfValid(grain, c, &out);
  }
  return out;
}

absl::StatusOr<std::vector<std::string>> Lookback(
    Grain grain, int n, absl::Span<const std::string> partitions,
    Direction direction) {
  RETURN_IF_ERROR(ValidateLookback(grain, n));
  switch (grain) {
    case Grain::kHour:
      return LookbackUnion<absl::CivilHour>(grain, n, partitions, direction);
    case Grain::kDay:
      return LookbackUnion<absl::CivilDay>(grain, n, partitions, direction);
    default:
      return LookbackUnion<absl::CivilMonth>(grain, n, partitions, direction);
  }
}

}  // namespace

absl::Status ValidateRollup(Grain fine, Grain coarse) {
  const bool ok = (fine == Grain::kHour &&
                   (coarse == Grain::kDay || coarse == Grain::kMonth)) ||
                  (fine == Grain::kDay && coarse == Grain::kMonth);
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "a rollup reads a finer time grain into a coarser one (hour -> day, "
      "day -> month or hour -> month); ",
      Sv(Name(fine)), " -> ", Sv(Name(coarse)), " is not one"));
}

absl::StatusOr<std::string> RollupParent(Grain fine, Grain coarse,
                                         std::string_view fine_partition) {
  return Parent(fine, coarse, fine_partition);
}

absl::StatusOr<std::vector<std::string>> RollupChildren(
    Grain fine, Grain coarse, std::string_view coarse_partition) {
  std::vector<std::string> out;
  RETURN_IF_ERROR(Children(fine, coarse, coarse_partition, &out));
  return out;
}

absl::StatusOr<std::vector<std::string>> RollupAffectedPartitions(
    Grain fine, Grain coarse, absl::Span<const std::string> fine_partitions) {
  RETURN_IF_ERROR(ValidateRollup(fine, coarse));
  std::vector<std::string> out;
  for (const std::string& partition : fine_partitions) {
    absl::StatusOr<std::string> parent = Parent(fine, coarse, partition);
    if (parent.ok()) {
      out.push_back(*std::move(parent));
    } else if (parent.status().code() != absl::StatusCode::kOutOfRange) {
      return parent.status();
    }
  }
  SortUnique(&out);
  return out;
}

absl::StatusOr<std::vector<std::string>> RollupInputPartitions(
    Grain fine, Grain coarse, absl::Span<const std::string> coarse_partitions) {
  RETURN_IF_ERROR(ValidateRollup(fine, coarse));
  std::vector<std::string> parents(coarse_partitions.begin(),
                                   coarse_partitions.end());
  SortUnique(&parents);
  // Distinct coarse partitions have disjoint, contiguous children, so
  // appending them in the parents' order keeps the result sorted.
  std::vector<std::string> out;
  for (const std::string& parent : parents) {
    RETURN_IF_ERROR(Children(fine, coarse, parent, &out));
  }
  return out;
}

absl::Status ValidateLookback(Grain grain, int n) {
  if (!IsTimeGrain(grain)) {
    return absl::InvalidArgumentError(
        absl::StrCat("a lookback needs a time grain (hour, day or month); "
                     "this grain is ",
                     Sv(Name(grain))));
  }
  if (n < 1 || n > kMaxLookback) {
    return absl::InvalidArgumentError(
        absl::StrCat("lookback ", n, " is out of range; it must be 1 to ",
                     kMaxLookback, " ", GrainName(grain), " partitions"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> LookbackInputs(
    Grain grain, int n, std::string_view partition) {
  const std::string one[] = {std::string(partition)};
  return Lookback(grain, n, one, Direction::kInputs);
}

absl::StatusOr<std::vector<std::string>> LookbackAffected(
    Grain grain, int n, std::string_view partition) {
  const std::string one[] = {std::string(partition)};
  return Lookback(grain, n, one, Direction::kAffected);
}

absl::StatusOr<std::vector<std::string>> LookbackInputPartitions(
    Grain grain, int n, absl::Span<const std::string> partitions) {
  return Lookback(grain, n, partitions, Direction::kInputs);
}

absl::StatusOr<std::vector<std::string>> LookbackAffectedPartitions(
    Grain grain, int n, absl::Span<const std::string> partitions) {
  return Lookback(grain, n, partitions, Direction::kAffected);
}

}  // namespace backfill
