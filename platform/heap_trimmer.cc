#include "platform/heap_trimmer.h"

#include <malloc.h>

#include <algorithm>
#include <utility>

#include "core/base/thread_name.h"

namespace backfill {

HeapTrimmer::HeapTrimmer() : HeapTrimmer(Options(), [] { malloc_trim(0); }) {}

HeapTrimmer::HeapTrimmer(Options options, std::function<void()> trim)
    : options_(options), trim_(std::move(trim)) {
  thread_ = std::thread([this] { Loop(); });
}

HeapTrimmer::~HeapTrimmer() { Stop(); }

void HeapTrimmer::Request() {
  const absl::Time now = absl::Now();
  absl::MutexLock lock(&mu_);
  if (stopping_) return;
  if (!wanted_) first_request_ = now;
  last_request_ = now;
  wanted_ = true;
}

void HeapTrimmer::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    wanted_ = false;
  }
  if (thread_.joinable()) thread_.join();
}

int64_t HeapTrimmer::trims() const {
  absl::MutexLock lock(&mu_);
  return trims_;
}

void HeapTrimmer::OnJobTransition(const std::string& job_id, JobState from,
                                  JobState to, const std::string& message) {
  Request();
}

void HeapTrimmer::OnJobFinished(const std::string& job_id, JobState state,
                                double estimated_cost, double actual_cost) {
  Request();
}

void HeapTrimmer::Loop() {
  NameThisThread("bf-heap-trim");
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](HeapTrimmer* t) ABSL_NO_THREAD_SAFETY_ANALYSIS {
            return t->wanted_ || t->stopping_;
          },
          this));
      // Until the requests pause (or have waited long enough).
      for (;;) {
        if (stopping_) return;
        const absl::Time due = std::min(last_request_ + options_.quiet,
                                        first_request_ + options_.longest_wait);
        if (absl::Now() >= due) break;
        mu_.AwaitWithDeadline(absl::Condition(&stopping_), due);
      }
      // Requests from here on want memory freed after this point: the trim
      // below may have passed it, so they get one more.
      wanted_ = false;
    }
    trim_();
    absl::MutexLock lock(&mu_);
    ++trims_;
  }
}

}  // namespace backfill
