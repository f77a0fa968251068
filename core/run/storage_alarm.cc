#include "core/run/storage_alarm.h"

namespace backfill {

void StorageAlarm::Failed(Storage storage, const std::string& what,
                          const absl::Status& status) {
  absl::MutexLock lock(&mu_);
  failing_[Index(storage)].store(true, std::memory_order_release);
  if (observer_ != nullptr) observer_->OnStorageFailing(storage, what, status);
}

void StorageAlarm::Succeeded(Storage storage) {
  std::atomic<bool>& failing = failing_[Index(storage)];
  if (!failing.load(std::memory_order_acquire)) return;
  absl::MutexLock lock(&mu_);
  if (!failing.load(std::memory_order_acquire)) return;  // reported meanwhile
  failing.store(false, std::memory_order_release);
  if (observer_ != nullptr) observer_->OnStorageRecovered(storage);
}

}  // namespace backfill
