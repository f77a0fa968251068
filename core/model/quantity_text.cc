#include "core/model/quantity_text.h"

#include <cstdint>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace backfill {
namespace {

bool AllDigits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

}  // namespace

std::optional<absl::Duration> ParseDurationText(std::string_view text) {
  if (text.size() < 2) return std::nullopt;
  absl::Duration unit;
  switch (text.back()) {
    case 's':
      unit = absl::Seconds(1);
      break;
    case 'm':
      unit = absl::Minutes(1);
      break;
    case 'h':
      unit = absl::Hours(1);
      break;
    case 'd':
      unit = absl::Hours(24);
      break;
    default:
      return std::nullopt;
  }
  const std::string_view digits = text.substr(0, text.size() - 1);
  int64_t n = 0;
  if (!AllDigits(digits) || digits.size() > 12 ||
      !absl::SimpleAtoi(std::string(digits), &n) || n < 1) {
    return std::nullopt;
  }
  return unit * n;
}

std::string FormatDurationText(absl::Duration d) {
  const int64_t seconds = absl::ToInt64Seconds(d);
  if (seconds % 86400 == 0) return absl::StrCat(seconds / 86400, "d");
  if (seconds % 3600 == 0) return absl::StrCat(seconds / 3600, "h");
  if (seconds % 60 == 0) return absl::StrCat(seconds / 60, "m");
  return absl::StrCat(seconds, "s");
}

std::optional<double> ParsePercentText(std::string_view text) {
  if (text.size() < 2 || text.back() != '%') return std::nullopt;
  std::string number(text.substr(0, text.size() - 1));
  absl::StripAsciiWhitespace(&number);
  if (number.empty() || number.size() > 16) return std::nullopt;
  int dots = 0;
  for (char c : number) {
    if (c == '.') {
      ++dots;
    } else if (c < '0' || c > '9') {
      return std::nullopt;
    }
  }
  if (dots > 1 || number.front() == '.' || number.back() == '.') {
    return std::nullopt;
  }
  double value = 0;
  if (!absl::SimpleAtod(number, &value)) return std::nullopt;
  if (value < 0 || value > 1000000) return std::nullopt;
  return value / 100.0;
}

}  // namespace backfill
