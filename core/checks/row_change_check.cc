#include "core/checks/row_change_check.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace backfill {

absl::StatusOr<std::vector<CheckResult>> RowChangeCheck::Run(
    const CheckContext& c) {
  ResultBuilder out(spec_.name, CheckKindName(spec_.kind), spec_.severity,
                    c.dataset->name,
                    absl::StrCat("a change of at most ", spec_.max_change_text,
                                 " in rows per partition"));
  for (const std::string& partition : c.partitions) {
    auto s = c.staged->find(partition);
    auto p = c.published->find(partition);
    const int64_t staged = s == c.staged->end() ? 0 : s->second.rows;
    const int64_t published = p == c.published->end() ? 0 : p->second.rows;
    if (published == 0) {  // a new partition: nothing to compare with
      out.Pass();
      continue;
    }
    const double change = static_cast<double>(staged - published) /
                          static_cast<double>(published);
    if (std::fabs(change) <= spec_.max_change + 1e-12) {
      out.Pass();
      continue;
    }
    const std::string observed =
        absl::StrCat(RowsText(staged), ", ", PercentText(change), " vs ",
                     published, " published");
    out.Fail(
        partition, observed,
        absl::StrCat("staged ", RowsText(staged), " where ", published,
                     " are published (", PercentText(change), "); at most ",
                     spec_.max_change_text, " change is allowed"));
  }
  return out.Finish();
}

}  // namespace backfill
