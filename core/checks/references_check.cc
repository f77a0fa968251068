#include "core/checks/references_check.h"

#include "absl/strings/str_cat.h"

namespace backfill {

void ReferencesCheck::Require(ProfileRequest* request) {
  if (referenced_ == nullptr) return;
  index_ = request->references.size();
  request->references.push_back({spec_.column, referenced_, spec_.key});
}

absl::StatusOr<std::vector<CheckResult>> ReferencesCheck::Run(
    const CheckContext& c) {
  ResultBuilder out(
      spec_.name, CheckKindName(spec_.kind), spec_.severity, c.dataset->name,
      absl::StrCat("at most ", spec_.max_orphans, " rows per partition whose ",
                   spec_.column, " is not a ", spec_.dataset, ".", spec_.key));
  if (referenced_ == nullptr) {
    out.Whole(false, "the referenced dataset is unknown",
              absl::StrCat("dataset \"", spec_.dataset,
                           "\" is not in the loaded pipelines"));
    return out.Finish();
  }
  for (const std::string& partition : c.partitions) {
    auto s = c.staged->find(partition);
    if (s == c.staged->end() || s->second.orphans().size() <= index_) {
      out.Pass();
      continue;
    }
    const CountWithSamples& orphans = s->second.orphans()[index_];
    if (orphans.count <= spec_.max_orphans) {
      out.Pass();
      continue;
    }
    out.Fail(partition,
             absl::StrCat(RowsText(orphans.count), " with no matching ",
                          spec_.dataset, ".", spec_.key),
             absl::StrCat(RowsText(orphans.count), " of ", s->second.rows,
                          " have a ", spec_.column, " that is not in ",
                          spec_.dataset, ".", spec_.key, " (at most ",
                          spec_.max_orphans, " allowed)"),
             orphans.samples);
  }
  return out.Finish();
}

}  // namespace backfill
