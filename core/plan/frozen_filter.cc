#include "core/plan/frozen_filter.h"

#include <iterator>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace backfill {

absl::Status FrozenFilter::Apply(const DatasetSpec& d,
                                 PlannedPartitions* partitions) {
  if (!d.frozen) return absl::OkStatus();
  const PartitionLayout layout = d.layout();
  std::vector<size_t> closed;
  for (size_t i = 0; i < partitions->size(); ++i) {
    absl::StatusOr<bool> freezes =
        d.frozen->Freezes(layout, partitions->partitions()[i], now_);
    if (!freezes.ok()) return freezes.status();
    if (*freezes) closed.push_back(i);
  }
  if (closed.empty()) return absl::OkStatus();
  Frozen& f = frozen_[d.name];
  f.rule = d.frozen->Describe();
  if (override_) {
    for (size_t i : closed) f.partitions.push_back(partitions->partitions()[i]);
    partitions->AppendToReasons(
        closed, absl::StrCat("; frozen by ", f.rule, ", overridden"));
  } else {
    std::vector<std::string> removed = partitions->Remove(closed);
    f.partitions.insert(f.partitions.end(),
                        std::make_move_iterator(removed.begin()),
                        std::make_move_iterator(removed.end()));
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
