#include "core/plan/scope.h"

namespace backfill {

void Scope::SetKeys(const std::string& dataset, Keys keys) {
  keys_[dataset] = std::move(keys);
}

const Scope::Keys* Scope::KeysOf(const std::string& dataset) const {
  auto it = keys_.find(dataset);
  return it == keys_.end() ? nullptr : &it->second;
}

bool Scope::Overlaps(const Scope& other) const {
  const Scope& small = size() <= other.size() ? *this : other;
  const Scope& large = &small == this ? other : *this;
  for (const Pair& pair : small) {
    if (large.count(pair)) return true;
  }
  return false;
}

}  // namespace backfill
