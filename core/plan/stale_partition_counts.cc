#include "core/plan/stale_partition_counts.h"

#include <vector>

#include "core/base/status_macros.h"
#include "core/plan/stale_dependents.h"

namespace backfill {

absl::StatusOr<std::map<std::string, int64_t>> StalePartitionCounts::Get() {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(StoreStats stats, store_->Stats());
  const std::pair<int64_t, int64_t> mark = {stats.last_audit_seq,
                                            stats.last_lineage_id};
  std::shared_ptr<const Catalog> catalog = catalog_->Get();
  if (mark_ == mark && computed_for_ == catalog) return counts_;
  std::map<std::string, int64_t> counts;
  for (const DatasetSpec& spec : catalog->datasets()) {
    if (!spec.is_derived()) continue;
    ASSIGN_OR_RETURN(std::vector<StaleDependent> stale,
                     FindStaleDependents(*catalog, *store_, spec, {}));
    counts[spec.name] = static_cast<int64_t>(stale.size());
  }
  counts_ = std::move(counts);
  mark_ = mark;
  computed_for_ = std::move(catalog);
  ++computations_;
  return counts_;
}

int64_t StalePartitionCounts::computations() const {
  absl::MutexLock lock(&mu_);
  return computations_;
}

}  // namespace backfill
