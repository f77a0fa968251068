// LiveCatalog: the pipeline catalog in force, which a reload of the
// pipeline files may replace while the daemon runs. Get() hands out a
// snapshot: a shared, immutable Catalog that stays valid (with every
// DatasetSpec pointer into it) for as long as the caller holds it, however
// often the catalog is replaced meanwhile. A job keeps the snapshot it was
// planned with until it ends; new calls see the new catalog. Replace()
// takes a catalog already validated as a whole (Catalog::Build): there is
// never a partly loaded catalog to see.
//
// Owns the current snapshot (shared with whoever holds it). Thread-safe:
// Get() and Replace() may be called concurrently from any thread.

#ifndef BACKFILL_CORE_MODEL_LIVE_CATALOG_H_
#define BACKFILL_CORE_MODEL_LIVE_CATALOG_H_

#include <cstdint>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "core/model/catalog.h"

namespace backfill {

class LiveCatalog {
 public:
  // Starts with `initial` (must not be null).
  explicit LiveCatalog(std::shared_ptr<const Catalog> initial);
  // Starts with a catalog the caller owns and keeps alive for as long as
  // this object and every snapshot of it (tests and fixed catalogs).
  static std::unique_ptr<LiveCatalog> Borrowing(const Catalog* catalog);

  LiveCatalog(const LiveCatalog&) = delete;
  LiveCatalog& operator=(const LiveCatalog&) = delete;

  // The catalog in force now.
  std::shared_ptr<const Catalog> Get() const;

  // Puts `next` (must not be null) in force for every later Get(). Holders
  // of earlier snapshots keep them.
  void Replace(std::shared_ptr<const Catalog> next);

  // How many times Replace() was called.
  uint64_t generation() const;

 private:
  mutable absl::Mutex mu_;
  std::shared_ptr<const Catalog> current_ ABSL_GUARDED_BY(mu_);
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace backfill

#endif  // BACKFILL_CORE_MODEL_LIVE_CATALOG_H_
