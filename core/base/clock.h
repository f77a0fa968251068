// Clock: the single source of "now" and of waiting for the domain core,
// injected so that scheduling, retries, backoff and timestamps are
// deterministic in tests. Every sleep of the core goes through SleepFor.
//
// SystemClock reads the real time and really sleeps. ManualClock is moved
// by hand: its SleepFor advances the clock by the duration and returns at
// once, counting the sleeps, so that a test of a retry loop runs without
// real time. Both are thread-safe.

#ifndef BACKFILL_CORE_BASE_CLOCK_H_
#define BACKFILL_CORE_BASE_CLOCK_H_

#include <cstdint>
#include <functional>
#include <thread>
#include <utility>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace backfill {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() const = 0;
  // Blocks the calling thread for `d` of this clock's time.
  virtual void SleepFor(absl::Duration d) const = 0;
};

class SystemClock final : public Clock {
 public:
  absl::Time Now() const override { return absl::Now(); }
  void SleepFor(absl::Duration d) const override { absl::SleepFor(d); }
};

class ManualClock final : public Clock {
 public:
  explicit ManualClock(absl::Time start) : now_(start) {}
  absl::Time Now() const override {
    absl::MutexLock lock(&mu_);
    return now_;
  }
  // Advances the clock by `d` (never sleeps), then calls the sleep hook.
  void SleepFor(absl::Duration d) const override {
    std::function<void(absl::Duration)> hook;
    {
      absl::MutexLock lock(&mu_);
      now_ += d;
      ++sleeps_;
      slept_ += d;
      hook = hook_;
    }
    if (hook) hook(d);
    std::this_thread::yield();
  }
  void Advance(absl::Duration d) {
    absl::MutexLock lock(&mu_);
    now_ += d;
  }
  void Set(absl::Time t) {
    absl::MutexLock lock(&mu_);
    now_ = t;
  }
  // Called (outside the clock's lock) after every SleepFor.
  void SetSleepHook(std::function<void(absl::Duration)> hook) {
    absl::MutexLock lock(&mu_);
    hook_ = std::move(hook);
  }
  int64_t sleeps() const {
    absl::MutexLock lock(&mu_);
    return sleeps_;
  }
  absl::Duration slept() const {
    absl::MutexLock lock(&mu_);
    return slept_;
  }

 private:
  mutable absl::Mutex mu_;
  mutable absl::Time now_ ABSL_GUARDED_BY(mu_);
  mutable int64_t sleeps_ ABSL_GUARDED_BY(mu_) = 0;
  mutable absl::Duration slept_ ABSL_GUARDED_BY(mu_);
  std::function<void(absl::Duration)> hook_ ABSL_GUARDED_BY(mu_);
};

}  // namespace backfill

#endif  // BACKFILL_CORE_BASE_CLOCK_H_
