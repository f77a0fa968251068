#include "server/stream_slots.h"

#include <algorithm>
#include <utility>

namespace backfill {

StreamSlots::Slot::Slot(Slot&& other) noexcept
    : owner_(std::exchange(other.owner_, nullptr)),
      key_(std::move(other.key_)) {}

StreamSlots::Slot& StreamSlots::Slot::operator=(Slot&& other) noexcept {
  if (this != &other) {
    Release();
    owner_ = std::exchange(other.owner_, nullptr);
    key_ = std::move(other.key_);
  }
  return *this;
}

StreamSlots::Slot::~Slot() { Release(); }

void StreamSlots::Slot::Release() {
  if (owner_ != nullptr) std::exchange(owner_, nullptr)->Release(key_);
}

StreamSlots::StreamSlots(int64_t limit) : limit_(std::max<int64_t>(1, limit)) {}

std::optional<StreamSlots::Slot> StreamSlots::TryAcquire(
    const std::string& key) {
  absl::MutexLock lock(&mu_);
  int64_t& count = in_use_[key];
  if (count >= limit_) return std::nullopt;
  ++count;
  return Slot(this, key);
}

int64_t StreamSlots::InUse(const std::string& key) const {
  absl::MutexLock lock(&mu_);
  auto it = in_use_.find(key);
  return it == in_use_.end() ? 0 : it->second;
}

void StreamSlots::Release(const std::string& key) {
  absl::MutexLock lock(&mu_);
  auto it = in_use_.find(key);
  if (it == in_use_.end()) return;
  if (--it->second <= 0) in_use_.erase(it);
}

}  // namespace backfill
