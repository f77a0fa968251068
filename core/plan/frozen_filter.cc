#include "core/plan/frozen_filter.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace backfill {

absl::Status FrozenFilter::Apply(
    const DatasetSpec& d, std::map<std::string, std::string>* partitions) {
  if (!d.frozen) return absl::OkStatus();
  const PartitionLayout layout = d.layout();
  std::vector<std::string> frozen;
  for (auto it = partitions->begin(); it != partitions->end();) {
    absl::StatusOr<bool> closed = d.frozen->Freezes(layout, it->first, now_);
    if (!closed.ok()) return closed.status();
    if (!*closed) {
      ++it;
      continue;
    }
    frozen.push_back(it->first);
    if (override_) {
      absl::StrAppend(&it->second, "; frozen by ", d.frozen->Describe(),
                      ", overridden");
      ++it;
    } else {
      it = partitions->erase(it);
    }
  }
  if (!frozen.empty()) {
    Frozen& f = frozen_[d.name];
    f.rule = d.frozen->Describe();
    f.partitions.insert(f.partitions.end(), frozen.begin(), frozen.end());
  }
  return absl::OkStatus();
}

std::string FrozenFilter::Describe(const Catalog& catalog,
                                   size_t max_shown) const {
  std::vector<std::string> parts;
  for (const auto& [dataset, f] : frozen_) {
    std::vector<std::string> shown(
        f.partitions.begin(),
        f.partitions.begin() + std::min(max_shown, f.partitions.size()));
    std::string more;
    if (f.partitions.size() > shown.size()) {
      more = absl::StrCat(" and ", f.partitions.size() - shown.size(), " more");
    }
    std::string at;
    if (const DatasetSpec* d = catalog.Find(dataset); d && d->frozen) {
      at = absl::StrCat(", at ", d->file, ":", d->frozen->line);
    }
    parts.push_back(absl::StrCat(dataset, " ", absl::StrJoin(shown, ", "), more,
                                 " (", f.rule, at, ")"));
  }
  return absl::StrJoin(parts, "; ");
}

}  // namespace backfill
