// Clock: the single source of "now" for the domain core, injected so that
// scheduling, retries and timestamps are deterministic in tests.
//
// SystemClock reads the real time. ManualClock is advanced by hand. Both are
// thread-safe.

#ifndef BACKFILL_CORE_CLOCK_H_
#define BACKFILL_CORE_CLOCK_H_

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace backfill {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() const = 0;
};

class SystemClock final : public Clock {
 public:
  absl::Time Now() const override { return absl::Now(); }
};

class ManualClock final : public Clock {
 public:
  explicit ManualClock(absl::Time start) : now_(start) {}
  absl::Time Now() const override {
    absl::MutexLock lock(&mu_);
    return now_;
  }
  void Advance(absl::Duration d) {
    absl::MutexLock lock(&mu_);
    now_ += d;
  }
  void Set(absl::Time t) {
    absl::MutexLock lock(&mu_);
    now_ = t;
  }

 private:
  mutable absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
};

}  // namespace backfill

#endif  // BACKFILL_CORE_CLOCK_H_
