#include "core/model/replay_policy.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "core/base/sv.h"
#include "core/model/quantity_text.h"

namespace backfill {

const char* ReplayTriggerName(ReplayTrigger trigger) {
  switch (trigger) {
    case ReplayTrigger::kInputChange:
      return "input_change";
    case ReplayTrigger::kTransformChange:
      return "transform_change";
  }
  return "?";
}

std::string FrozenRule::Describe() const {
  std::vector<std::string> parts;
  if (before)
    parts.push_back(
        absl::StrCat("frozen.before ", absl::FormatCivilTime(*before)));
  if (older_than > absl::ZeroDuration()) {
    parts.push_back(
        absl::StrCat("frozen.older_than ", FormatDurationText(older_than)));
  }
  return absl::StrJoin(parts, " and ");
}

absl::Time FrozenRule::Cutoff(absl::Time now) const {
  absl::Time cutoff = absl::InfinitePast();
  if (before) cutoff = absl::FromCivil(*before, absl::UTCTimeZone());
  if (older_than > absl::ZeroDuration()) {
    cutoff = std::max(cutoff, now - older_than);
  }
  return cutoff;
}

absl::StatusOr<bool> FrozenRule::Freezes(const PartitionLayout& layout,
                                         std::string_view partition,
                                         absl::Time now) const {
  absl::StatusOr<PartitionBounds> bounds = BoundsOf(layout, partition);
  if (!bounds.ok()) return bounds.status();
  // "YYYY-MM-DD" (day, month) or "YYYY-MM-DD HH:00:00" (hour).
  absl::CivilSecond start;
  if (!absl::ParseCivilTime(absl::StrReplaceAll(bounds->start, {{" ", "T"}}),
                            &start)) {
    absl::CivilDay day;
    if (!absl::ParseCivilTime(bounds->start, &day)) {
      return absl::InvalidArgumentError(
          absl::StrCat("partition \"", Sv(partition),
                       "\" has no start in time; a frozen rule needs a time "
                       "partition"));
    }
    start = day;
  }
  return absl::FromCivil(start, absl::UTCTimeZone()) < Cutoff(now);
}

}  // namespace backfill
