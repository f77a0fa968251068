#include "core/checks/min_rows_check.h"

#include "absl/strings/str_cat.h"

namespace backfill {

absl::StatusOr<std::vector<CheckResult>> MinRowsCheck::Run(
    const CheckContext& c) {
  ResultBuilder out(
      spec_.name, CheckKindName(spec_.kind), spec_.severity, c.dataset->name,
      absl::StrCat("at least ", RowsText(spec_.min), " per partition"));
  for (const std::string& partition : c.partitions) {
    auto s = c.staged->find(partition);
    const int64_t staged = s == c.staged->end() ? 0 : s->second.rows;
    if (staged >= spec_.min) {
      out.Pass();
      continue;
    }
    out.Fail(partition, RowsText(staged),
             absl::StrCat("staged ", RowsText(staged), "; at least ", spec_.min,
                          " required"));
  }
  return out.Finish();
}

}  // namespace backfill
