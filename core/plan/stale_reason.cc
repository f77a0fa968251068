#include "core/plan/stale_reason.h"

#include "absl/strings/str_cat.h"

namespace backfill {

std::string InputChangedReason(const InputFingerprint& first, size_t more) {
  std::string out = absl::StrCat("input ", first.dataset);
  if (!first.partition.empty()) absl::StrAppend(&out, "/", first.partition);
  absl::StrAppend(&out, " changed");
  if (more > 0) absl::StrAppend(&out, " (+", more, " more)");
  return out;
}

}  // namespace backfill
