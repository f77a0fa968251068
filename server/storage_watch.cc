#include "server/storage_watch.h"

#include <utility>

#include "core/base/thread_name.h"

namespace backfill {

StorageWatch::StorageWatch(std::vector<Probe> probes, Report report,
                           absl::Duration interval)
    : probes_(std::move(probes)),
      report_(std::move(report)),
      interval_(interval),
      seen_(probes_.size()) {}

StorageWatch::~StorageWatch() { Stop(); }

void StorageWatch::Start() {
  thread_ = std::thread([this] { Loop(); });
}

void StorageWatch::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void StorageWatch::RunOnce() {
  for (size_t i = 0; i < probes_.size(); ++i) {
    absl::Status now = probes_[i].check();
    Seen& seen = seen_[i];
    // Reported when two probes in a row agree and it differs from what was
    // reported (a failure whose message changed is reported again).
    const bool agree = now.ok() == seen.last.ok() &&
                       (now.ok() || now.message() == seen.last.message());
    const bool differs =
        now.ok() != seen.reported.ok() ||
        (!now.ok() && now.message() != seen.reported.message());
    seen.last = now;
    if (agree && differs) {
      seen.reported = now;
      report_(probes_[i].name, now);
    }
  }
}

void StorageWatch::Loop() {
  NameThisThread("bf-storage");
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    mu_.AwaitWithTimeout(absl::Condition(&stopping_), interval_);
    if (stopping_) break;
    mu_.Unlock();
    RunOnce();
    mu_.Lock();
  }
}

}  // namespace backfill
