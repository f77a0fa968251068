#include "core/model/live_catalog.h"

#include <memory>
#include <utility>

namespace backfill {

LiveCatalog::LiveCatalog(std::shared_ptr<const Catalog> initial)
    : current_(std::move(initial)) {}

std::unique_ptr<LiveCatalog> LiveCatalog::Borrowing(const Catalog* catalog) {
  return std::make_unique<LiveCatalog>(
      std::shared_ptr<const Catalog>(catalog, [](const Catalog*) {}));
}

std::shared_ptr<const Catalog> LiveCatalog::Get() const {
  absl::MutexLock lock(&mu_);
  return current_;
}

void LiveCatalog::Replace(std::shared_ptr<const Catalog> next) {
  std::shared_ptr<const Catalog> previous;
  {
    absl::MutexLock lock(&mu_);
    previous = std::move(current_);
    current_ = std::move(next);
    ++generation_;
  }
  // `previous` is released outside the lock: the last holder destroys it.
}

uint64_t LiveCatalog::generation() const {
  absl::MutexLock lock(&mu_);
  return generation_;
}

}  // namespace backfill
