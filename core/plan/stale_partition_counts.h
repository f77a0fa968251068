// StalePartitionCounts: how many published partitions of each derived
// dataset are stale by their lineage (core/plan/stale_dependents.h), for the
// `backfill_stale_partitions` gauge.
//
// Computing the counts reads the lineage of every derived dataset, so they
// are cached and recomputed only when the recorded history may have
// changed: every job state change appends one event to the append-only
// audit log (StoreStats::last_audit_seq grows) — a publish or a rollback,
// which append lineage too, a job that reaches SUCCEEDED and vouches for
// partitions it recomputed unchanged, or one that leaves it (a rollback).
// A count of SUCCEEDED jobs would miss one job leaving SUCCEEDED while
// another reaches it. Each Get() checks that mark (with the last lineage
// id) with one Stats() read; the first Get() computes the counts (the
// daemon makes it on a thread of its own once it serves: over millions of
// recorded partitions it takes seconds).
//
// The catalog may be a LiveCatalog (core/model/live_catalog.h): counts follow
// the catalog in force, and a replaced catalog computes them again.
//
// Does not own the catalog or the store, which must outlive it.
// Thread-safe: Get() may be called from any thread (scrapes); one
// computation runs at a time.

#ifndef BACKFILL_CORE_PLAN_STALE_PARTITION_COUNTS_H_
#define BACKFILL_CORE_PLAN_STALE_PARTITION_COUNTS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "core/model/catalog.h"
#include "core/model/live_catalog.h"
#include "core/ports/state_store.h"

namespace backfill {

class StalePartitionCounts {
 public:
  StalePartitionCounts(const LiveCatalog* catalog, StateStore* store)
      : catalog_(catalog), store_(store) {}
  // The same with a catalog that never changes.
  StalePartitionCounts(const Catalog* catalog, StateStore* store)
      : owned_catalog_(LiveCatalog::Borrowing(catalog)),
        catalog_(owned_catalog_.get()),
        store_(store) {}

  // Stale partitions per derived dataset of the catalog (0 when none), as
  // of the store's history now.
  absl::StatusOr<std::map<std::string, int64_t>> Get();

  // How many times the counts were computed (for tests of the caching).
  int64_t computations() const;

 private:
  const std::unique_ptr<LiveCatalog> owned_catalog_;
  const LiveCatalog* const catalog_;
  StateStore* const store_;
  mutable absl::Mutex mu_;
  // (last audit seq, last lineage id) when the counts were computed, and
  // the catalog they were computed for.
  std::optional<std::pair<int64_t, int64_t>> mark_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<const Catalog> computed_for_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int64_t> counts_ ABSL_GUARDED_BY(mu_);
  int64_t computations_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace backfill

#endif  // BACKFILL_CORE_PLAN_STALE_PARTITION_COUNTS_H_
