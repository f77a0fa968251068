#include "core/model/check_result.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace backfill {

const char* CheckSeverityName(CheckSeverity severity) {
  switch (severity) {
    case CheckSeverity::kError:
      return "error";
    case CheckSeverity::kHold:
      return "hold";
    case CheckSeverity::kWarn:
      return "warn";
  }
  return "error";
}

absl::StatusOr<CheckSeverity> ParseCheckSeverity(std::string_view name) {
  for (CheckSeverity s :
       {CheckSeverity::kError, CheckSeverity::kHold, CheckSeverity::kWarn}) {
    if (name == CheckSeverityName(s)) return s;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("severity \"", absl::string_view(name.data(), name.size()),
                   "\" is not valid; expected error, hold or warn"));
}

}  // namespace backfill
