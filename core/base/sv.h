// Sv: a std::string_view seen as an absl::string_view. The Abseil this
// builds with (Debian's) has an absl::string_view of its own, not an alias
// of std::string_view, so std::string_view arguments of absl::StrCat,
// StrAppend, StrJoin, StrSplit and their kin need this conversion. Nothing
// is copied: the result views the same bytes, valid as long as they are.
//
// A pure function; thread-safe.

#ifndef BACKFILL_CORE_BASE_SV_H_
#define BACKFILL_CORE_BASE_SV_H_

#include <string_view>

#include "absl/strings/string_view.h"

namespace backfill {

inline absl::string_view Sv(std::string_view s) { return {s.data(), s.size()}; }

}  // namespace backfill

#endif  // BACKFILL_CORE_BASE_SV_H_
