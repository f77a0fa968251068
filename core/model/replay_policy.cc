#include "core/model/replay_policy.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
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

namespace {

// A bound as BoundsOf writes it ("YYYY-MM-DD" or "YYYY-MM-DD HH:00:00").
std::optional<absl::Time> BoundTime(std::string text) {
  if (text.size() == 10) text += "T00:00:00";
  if (text.size() == 19) text[10] = 'T';
  absl::CivilSecond t;
  if (!absl::ParseCivilTime(text, &t)) return std::nullopt;
  return absl::FromCivil(t, absl::UTCTimeZone());
}

}  // namespace

absl::StatusOr<PartitionSpan> SpanOf(const PartitionLayout& layout,
                                     std::string_view partition) {
  absl::StatusOr<PartitionBounds> bounds = BoundsOf(layout, partition);
  if (!bounds.ok()) return bounds.status();
  const std::optional<absl::Time> start = BoundTime(bounds->start);
  const std::optional<absl::Time> end = BoundTime(bounds->end);
  if (!start || !end) {
    return absl::InvalidArgumentError(absl::StrCat(
        "partition \"", Sv(partition), "\" is not a time partition"));
  }
  return PartitionSpan{*start, *end};
}

absl::StatusOr<bool> FrozenRule::Freezes(const PartitionLayout& layout,
                                         std::string_view partition,
                                         absl::Time now) const {
  absl::StatusOr<PartitionSpan> span = SpanOf(layout, partition);
  if (!span.ok()) return span.status();
  return span->start < Cutoff(now);
}

}  // namespace backfill
