// Text of a partition's diff for tests that compare diffs: every field,
// doubles exactly (%a), samples in order. Header-only; stateless.

#ifndef BACKFILL_TESTS_TESTING_DIFF_TEXT_H_
#define BACKFILL_TESTS_TESTING_DIFF_TEXT_H_

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/model/diff.h"

namespace backfill::testing {

// "[a|b|c]".
inline std::string ValuesText(const std::vector<std::string>& values) {
  return absl::StrCat("[", absl::StrJoin(values, "|"), "]");
}

// "column:before:after;" for each measure, doubles exactly.
inline std::string MeasuresText(const std::vector<MeasureTotals>& measures) {
  std::string out;
  for (const MeasureTotals& m : measures) {
    absl::StrAppendFormat(&out, "%s:%a:%a;", m.column, m.before, m.after);
  }
  return out;
}

// Everything of a partition's diff.
inline std::string PartitionDiffText(const PartitionDiff& p) {
  std::string out = absl::StrCat(
      p.dataset, "/", p.partition, " ", p.rows_before, " ", p.rows_after, " ",
      p.added, " ", p.removed, " ", p.changed, " ", p.unchanged, " ",
      MeasuresText(p.measures), " error=", p.error);
  for (const DiffSample& s : p.samples) {
    absl::StrAppend(&out, " {", DiffChangeName(s.change), ValuesText(s.key),
                    ValuesText(s.before), ValuesText(s.after), "}");
  }
  return out;
}

}  // namespace backfill::testing

#endif  // BACKFILL_TESTS_TESTING_DIFF_TEXT_H_
