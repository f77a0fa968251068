#include "core/checks/assert_check.h"

#include <map>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace backfill {

absl::StatusOr<std::vector<CheckResult>> AssertCheck::Run(
    const CheckContext& c) {
  ResultBuilder out(spec_.name, CheckKindName(spec_.kind), spec_.severity,
                    c.dataset->name, "no row returned");
  absl::StatusOr<std::map<std::string, CountWithSamples>> rows =
      c.engine->RunAssertion(c.layout->job_id, *c.dataset, spec_.sql,
                             kMaxSampleRows);
  if (!rows.ok()) {
    // A query that cannot run fails the check (it was compiled at plan
    // time; the warehouse may have changed since). Anything else (the
    // warehouse unavailable) is an error of the validation, not a result.
    if (rows.status().code() != absl::StatusCode::kFailedPrecondition &&
        rows.status().code() != absl::StatusCode::kInvalidArgument) {
      return rows.status();
    }
    out.Whole(
        false, "the query did not run",
        absl::StrCat("the assertion could not run: ", rows.status().message()));
    return out.Finish();
  }
  for (const std::string& partition : c.partitions) {
    auto it = rows->find(partition);
    if (it == rows->end() || it->second.count == 0) {
      out.Pass();
      continue;
    }
    out.Fail(partition, absl::StrCat(RowsText(it->second.count), " returned"),
             absl::StrCat("the assertion returned ", RowsText(it->second.count),
                          " on the staged rows; it must return none"),
             it->second.samples);
  }
  return out.Finish();
}

}  // namespace backfill
