// Stopwatch: time elapsed since it was started, read from the monotonic
// clock (std::chrono::steady_clock), which never goes back when the system
// time is set. For code that times its own work and has no injected Clock
// (core/base/clock.h): the engines time the phases of StagePartition with it
// (StageTimings in core/ports/engine.h). The core's scheduling, retries and
// timestamps use the injected Clock instead, so that tests control them.
//
// A small value; not synchronized (one per measurement, on one thread).

#ifndef BACKFILL_CORE_BASE_STOPWATCH_H_
#define BACKFILL_CORE_BASE_STOPWATCH_H_

#include <chrono>

#include "absl/time/time.h"

namespace backfill {

class Stopwatch {
 public:
  // Started now.
  Stopwatch() : start_(std::chrono::steady_clock::now()) {}

  // The time since the start.
  absl::Duration Elapsed() const {
    return absl::FromChrono(std::chrono::steady_clock::now() - start_);
  }

  // The time since the start, and starts again from now.
  absl::Duration Lap() {
    const std::chrono::steady_clock::time_point now =
        std::chrono::steady_clock::now();
    const absl::Duration lap = absl::FromChrono(now - start_);
    start_ = now;
    return lap;
  }

 private:
  std::chrono::steady_clock::time_point start_;
};

}  // namespace backfill

#endif  // BACKFILL_CORE_BASE_STOPWATCH_H_
