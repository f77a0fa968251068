#include "tests/testing/write_faults.h"

#include <algorithm>
#include <utility>

namespace backfill::testing {

absl::Status WriteFaults::Begin(const std::string& method) {
  Hook hook;
  {
    absl::MutexLock lock(&mu_);
    ++calls_[method];
    hook = hook_;
  }
  absl::Status status = hook ? hook(method) : absl::OkStatus();
  absl::MutexLock lock(&mu_);
  if (status.ok() && fail_next_ > 0 && !fail_next_status_.ok()) {
    --fail_next_;
    status = fail_next_status_;
  }
  if (status.ok()) status = fail_writes_;
  if (!status.ok()) ++failed_;
  return status;
}

void WriteFaults::SetHook(Hook hook) {
  absl::MutexLock lock(&mu_);
  hook_ = std::move(hook);
}

void WriteFaults::FailWrites(absl::Status status) {
  absl::MutexLock lock(&mu_);
  fail_writes_ = std::move(status);
}

void WriteFaults::FailNextWrites(int n, absl::Status status) {
  absl::MutexLock lock(&mu_);
  fail_next_ = std::max(n, 0);
  fail_next_status_ = std::move(status);
}

int64_t WriteFaults::calls() const {
  absl::MutexLock lock(&mu_);
  int64_t total = 0;
  for (const auto& [method, n] : calls_) total += n;
  return total;
}

int64_t WriteFaults::calls(const std::string& method) const {
  absl::MutexLock lock(&mu_);
  auto it = calls_.find(method);
  return it == calls_.end() ? 0 : it->second;
}

int64_t WriteFaults::failed() const {
  absl::MutexLock lock(&mu_);
  return failed_;
}

}  // namespace backfill::testing
