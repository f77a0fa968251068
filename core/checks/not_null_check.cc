#include "core/checks/not_null_check.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace backfill {

void NotNullCheck::Require(ProfileRequest* request) {
  for (const std::string& col : spec_.columns) {
    if (std::find(request->null_columns.begin(), request->null_columns.end(),
                  col) == request->null_columns.end()) {
      request->null_columns.push_back(col);
    }
  }
}

absl::StatusOr<std::vector<CheckResult>> NotNullCheck::Run(
    const CheckContext& c) {
  ResultBuilder out(
      spec_.name, CheckKindName(spec_.kind), spec_.severity, c.dataset->name,
      absl::StrCat("no NULL in ", absl::StrJoin(spec_.columns, ", ")));
  for (const std::string& partition : c.partitions) {
    auto s = c.staged->find(partition);
    if (s == c.staged->end()) {
      out.Pass();
      continue;
    }
    std::vector<std::string> found;
    std::vector<std::string> samples;
    for (const std::string& col : spec_.columns) {
      auto n = s->second.nulls().find(col);
      if (n == s->second.nulls().end() || n->second.count == 0) continue;
      found.push_back(
          absl::StrCat(RowsText(n->second.count), " with ", col, " NULL"));
      for (const std::string& row : n->second.samples) {
        if (samples.size() < static_cast<size_t>(kMaxSampleRows)) {
          samples.push_back(row);
        }
      }
    }
    if (found.empty()) {
      out.Pass();
      continue;
    }
    const std::string observed = absl::StrJoin(found, ", ");
    out.Fail(partition, observed, absl::StrCat(observed, " in the staged rows"),
             samples);
  }
  return out.Finish();
}

}  // namespace backfill
