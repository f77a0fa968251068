// Quantity text: how a pipeline file writes durations and percentages, read
// and written back. A duration is a whole number from 1 with one unit, s,
// m, h or d ("30d", "12h", "90m", "3600s") and at most 12 digits (callers
// bound it further, most to kMaxDurationText); a
// percentage is a decimal number from 0 to 1,000,000 followed by "%"
// ("20%", "12.5%"), read as a fraction (0.2, 0.125). Anything else,
// including a bare number, is refused (nullopt), for the caller to word.
//
// Pure functions; thread-safe.

#ifndef BACKFILL_CORE_MODEL_QUANTITY_TEXT_H_
#define BACKFILL_CORE_MODEL_QUANTITY_TEXT_H_

#include <optional>
#include <string>
#include <string_view>

#include "absl/time/time.h"

namespace backfill {

// The longest most durations of a pipeline file may be: 36,500 days.
inline constexpr absl::Duration kMaxDurationText = absl::Hours(24 * 36500);

std::optional<absl::Duration> ParseDurationText(std::string_view text);

// The duration in the largest unit that writes it whole ("35d", "90m");
// `d` must be a whole number of seconds from 1s.
std::string FormatDurationText(absl::Duration d);

std::optional<double> ParsePercentText(std::string_view text);

}  // namespace backfill

#endif  // BACKFILL_CORE_MODEL_QUANTITY_TEXT_H_
