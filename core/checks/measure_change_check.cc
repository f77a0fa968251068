#include "core/checks/measure_change_check.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"

namespace backfill {
namespace {

// The relative change from `before` to `after`; infinite when `before` is 0
// and `after` is not.
double Change(double before, double after) {
  if (before == after) return 0;
  if (before == 0) {
    return after > 0 ? std::numeric_limits<double>::infinity()
                     : -std::numeric_limits<double>::infinity();
  }
  return (after - before) / std::fabs(before);
}

}  // namespace

void MeasureChangeCheck::Require(ProfileRequest* request) {
  if (std::find(request->measures.begin(), request->measures.end(),
                spec_.column) == request->measures.end()) {
    request->measures.push_back(spec_.column);
  }
}

absl::StatusOr<std::vector<CheckResult>> MeasureChangeCheck::Run(
    const CheckContext& c) {
  const std::string& col = spec_.column;
  ResultBuilder out(
      spec_.name, CheckKindName(spec_.kind), spec_.severity, c.dataset->name,
      absl::StrCat("a change of at most ", spec_.max_change_text, " in SUM(",
                   col, ") per partition and over the job"));
  const double tolerance = 1e-9;
  double before_total = 0;
  double after_total = 0;
  int64_t compared = 0;
  for (const std::string& partition : c.partitions) {
    auto p = c.published->find(partition);
    if (p == c.published->end() || p->second.rows == 0 ||
        !p->second.sums().count(col)) {
      out.Pass();  // new partition (or a table without the column: schema)
      continue;
    }
    const double before = p->second.sums().at(col);
    auto s = c.staged->find(partition);
    const double after = s == c.staged->end() || !s->second.sums().count(col)
                             ? 0
                             : s->second.sums().at(col);
    before_total += before;
    after_total += after;
    ++compared;
    const double change = Change(before, after);
    if (std::fabs(change) <= spec_.max_change + tolerance) {
      out.Pass();
      continue;
    }
    out.Fail(partition,
             absl::StrCat("SUM(", col, ") ", NumberText(before), " -> ",
                          NumberText(after), " (", PercentText(change), ")"),
             absl::StrCat("SUM(", col, ") moves from ", NumberText(before),
                          " to ", NumberText(after), " (", PercentText(change),
                          "); at most ", spec_.max_change_text, " is allowed"));
  }
  if (compared > 0) {
    const double change = Change(before_total, after_total);
    const bool passed = std::fabs(change) <= spec_.max_change + tolerance;
    out.Whole(
        passed,
        absl::StrCat("job total SUM(", col, ") ", NumberText(before_total),
                     " -> ", NumberText(after_total), " (", PercentText(change),
                     ") over ", compared, " published partitions"),
        absl::StrCat("over the job's ", compared,
                     " previously published partitions, SUM(", col,
                     ") moves from ", NumberText(before_total), " to ",
                     NumberText(after_total), " (", PercentText(change), ")",
                     passed ? ""
                            : absl::StrCat("; at most ", spec_.max_change_text,
                                           " is allowed")));
  }
  return out.Finish();
}

}  // namespace backfill
