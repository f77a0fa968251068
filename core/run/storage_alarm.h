// StorageAlarm: turns the outcomes of durable writes into the observer's
// storage signals, so that every failure signal has its recovery signal.
// Each failed write that may pass (a full disk, an I/O error) is reported
// (JobObserver::OnStorageFailing); the first write that succeeds after
// failures is reported once (OnStorageRecovered), whichever write and
// thread it is. A success while nothing failed costs one atomic load.
//
// Ownership: borrows the observer (may be null: then it reports nothing),
// which must outlive the alarm.
// Thread-safety: thread-safe; Failed and Succeeded may be called from any
// thread at once.

#ifndef BACKFILL_CORE_RUN_STORAGE_ALARM_H_
#define BACKFILL_CORE_RUN_STORAGE_ALARM_H_

#include <atomic>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "core/run/job_observer.h"

namespace backfill {

class StorageAlarm {
 public:
  using Storage = JobObserver::Storage;

  explicit StorageAlarm(JobObserver* observer) : observer_(observer) {}
  StorageAlarm(const StorageAlarm&) = delete;
  StorageAlarm& operator=(const StorageAlarm&) = delete;

  // A write to `storage` (`what` says which) failed with `status`, an error
  // that may pass; it will be retried.
  void Failed(Storage storage, const std::string& what,
              const absl::Status& status);
  // A write to `storage` succeeded.
  void Succeeded(Storage storage);

  // True between a failure and the next success.
  bool failing(Storage storage) const {
    return failing_[Index(storage)].load(std::memory_order_acquire);
  }

 private:
  static int Index(Storage storage) { return static_cast<int>(storage); }

  JobObserver* const observer_;
  // Held while a signal is reported, so that the observer sees failures
  // and recoveries in the order the flags changed.
  absl::Mutex mu_;
  // Written under mu_; read without it on the fast path.
  std::atomic<bool> failing_[2] = {false, false};
};

}  // namespace backfill

#endif  // BACKFILL_CORE_RUN_STORAGE_ALARM_H_
