#include "core/governance/retention.h"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/model/job.h"
#include "core/model/quantity_text.h"

namespace backfill {

std::vector<RollbackCopy> ExpiredCopies(
    const std::vector<RollbackCopy>& copies,
    const std::map<std::string, absl::Time>& published, const Catalog& catalog,
    absl::Time now) {
  std::map<std::string, std::vector<std::pair<absl::Time, RollbackCopy>>>
      by_dataset;
  for (const RollbackCopy& c : copies) {
    auto t = published.find(c.job_id);
    if (t == published.end() || catalog.Find(c.dataset) == nullptr) continue;
    by_dataset[c.dataset].push_back({t->second, c});
  }
  std::vector<RollbackCopy> out;
  for (auto& [dataset, list] : by_dataset) {
    const RetentionPolicy& policy = catalog.Find(dataset)->retention;
    std::sort(list.begin(), list.end(), [](const auto& a, const auto& b) {
      if (a.first != b.first) return a.first > b.first;  // newest first
      return JobNumberOf(a.second.job_id) > JobNumberOf(b.second.job_id);
    });
    for (size_t i = 0; i < list.size(); ++i) {
      const bool too_many = i >= static_cast<size_t>(policy.versions);
      const bool too_old = policy.max_age > absl::ZeroDuration() &&
                           now - list[i].first > policy.max_age;
      if (too_many || too_old) out.push_back(list[i].second);
    }
  }
  return out;
}

std::string DescribeRetention(const RetentionPolicy& policy) {
  std::string out =
      absl::StrCat("keeps the ", policy.versions, " newest rollback ",
                   policy.versions == 1 ? "copy" : "copies");
  if (policy.max_age > absl::ZeroDuration()) {
    absl::StrAppend(&out, " and none older than ",
                    FormatDurationText(policy.max_age));
  }
  if (!policy.declared) absl::StrAppend(&out, " (the default)");
  return out;
}

}  // namespace backfill
