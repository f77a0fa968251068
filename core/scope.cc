#include "core/scope.h"

namespace backfill {

void Scope::SetKeys(const std::string& dataset, Keys keys) {
  keys_[dataset] = std::move(keys);
}

const Scope::Keys* Scope::KeysOf(const std::string& dataset) const {
  auto it = keys_.find(dataset);
  return it == keys_.end() ? nullptr : &it->second;
}

bool Scope::RowsMayMeet(const std::string& dataset, const Scope& other) const {
  const Keys* mine = KeysOf(dataset);
  const Keys* theirs = other.KeysOf(dataset);
  if (mine == nullptr || theirs == nullptr) return true;
  // Walk the smaller set, look up in the larger.
  const Keys& small = mine->size() <= theirs->size() ? *mine : *theirs;
  const Keys& large = &small == mine ? *theirs : *mine;
  for (const std::string& k : small) {
    if (large.count(k)) return true;
  }
  return false;
}

bool Scope::Overlaps(const Scope& other) const {
  const Scope& small = size() <= other.size() ? *this : other;
  const Scope& large = &small == this ? other : *this;
  for (const Pair& pair : small) {
    if (large.count(pair) && RowsMayMeet(pair.first, other)) return true;
  }
  return false;
}

}  // namespace backfill
