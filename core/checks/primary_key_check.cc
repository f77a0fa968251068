#include "core/checks/primary_key_check.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace backfill {

absl::StatusOr<std::vector<CheckResult>> PrimaryKeyCheck::Run(
    const CheckContext& c) {
  const DatasetSpec& ds = *c.dataset;
  ResultBuilder out(
      "primary_key", "primary_key", CheckSeverity::kError, ds.name,
      absl::StrCat("primary key (", absl::StrJoin(ds.primary_key, ", "),
                   ") unique and not NULL"));
  if (ds.primary_key.empty() && c.report->failures.empty()) {
    return out.Finish(/*summary=*/false);  // no key declared: nothing to say
  }
  const bool passed = c.report->failures.empty();
  out.Whole(passed,
            passed ? "every staged key is unique and not NULL"
                   : absl::StrJoin(c.report->failures, "; "),
            passed ? "the primary key is unique and not NULL"
                   : absl::StrJoin(c.report->failures, "; "));
  return out.Finish(/*summary=*/false);
}

}  // namespace backfill
