#include "core/plan/scope.h"

#include <algorithm>

namespace backfill {

namespace {

using Sorted = std::vector<std::string>;

// Calls `visit` with each string both sorted, unique vectors hold, in
// order, until it returns false; false if it did. Merges them, or looks
// each of the smaller one's up in the rest of the larger one when that
// takes fewer comparisons (a few partitions against a million).
bool ForEachCommon(const Sorted& a, const Sorted& b,
                   absl::FunctionRef<bool(const std::string&)> visit) {
  const Sorted& small = a.size() <= b.size() ? a : b;
  const Sorted& large = &small == &a ? b : a;
  if (small.empty()) return true;
  size_t log2_large = 1;
  while ((size_t{1} << log2_large) < large.size()) ++log2_large;
  if (small.size() * log2_large < small.size() + large.size()) {
    auto from = large.begin();
    for (const std::string& s : small) {
      from = std::lower_bound(from, large.end(), s);
      if (from == large.end()) break;
      if (*from == s && !visit(s)) return false;
    }
    return true;
  }
  auto x = small.begin();
  auto y = large.begin();
  while (x != small.end() && y != large.end()) {
    const int c = x->compare(*y);
    if (c < 0) {
      ++x;
    } else if (c > 0) {
      ++y;
    } else {
      if (!visit(*x)) return false;
      ++x;
      ++y;
    }
  }
  return true;
}

}  // namespace

void Scope::insert(const Pair& pair) {
  auto it = partitions_.find(pair.first);
  if (it == partitions_.end()) {
    partitions_[pair.first].push_back(pair.second);
    return;
  }
  Sorted& partitions = it->second;
  if (partitions.back() < pair.second) {
    partitions.push_back(pair.second);
    return;
  }
  auto at = std::lower_bound(partitions.begin(), partitions.end(), pair.second);
  if (*at != pair.second) partitions.insert(at, pair.second);
}

void Scope::insert(const std::string& dataset, Sorted partitions) {
  if (partitions.empty()) return;
  if (!std::is_sorted(partitions.begin(), partitions.end())) {
    std::sort(partitions.begin(), partitions.end());
  }
  partitions.erase(std::unique(partitions.begin(), partitions.end()),
                   partitions.end());
  auto it = partitions_.find(dataset);
  if (it == partitions_.end()) {
    partitions_.emplace(dataset, std::move(partitions));
    return;
  }
  Sorted merged;
  merged.reserve(it->second.size() + partitions.size());
  std::set_union(std::make_move_iterator(it->second.begin()),
                 std::make_move_iterator(it->second.end()),
                 std::make_move_iterator(partitions.begin()),
                 std::make_move_iterator(partitions.end()),
                 std::back_inserter(merged));
  merged.shrink_to_fit();
  it->second = std::move(merged);
}

size_t Scope::count(const Pair& pair) const {
  auto it = partitions_.find(pair.first);
  if (it == partitions_.end()) return 0;
  return std::binary_search(it->second.begin(), it->second.end(), pair.second)
             ? 1
             : 0;
}

size_t Scope::size() const {
  size_t n = 0;
  for (const auto& [dataset, partitions] : partitions_) n += partitions.size();
  return n;
}

void Scope::SetKeys(const std::string& dataset, Keys keys) {
  keys_[dataset] = std::move(keys);
}

const Scope::Keys* Scope::KeysOf(const std::string& dataset) const {
  auto it = keys_.find(dataset);
  return it == keys_.end() ? nullptr : &it->second;
}

void Scope::ForEachShared(
    const Scope& other,
    absl::FunctionRef<bool(const std::string&, const std::string&)> visit)
    const {
  auto x = partitions_.begin();
  auto y = other.partitions_.begin();
  while (x != partitions_.end() && y != other.partitions_.end()) {
    const int c = x->first.compare(y->first);
    if (c < 0) {
      ++x;
    } else if (c > 0) {
      ++y;
    } else {
      const std::string& dataset = x->first;
      if (!ForEachCommon(x->second, y->second, [&](const std::string& p) {
            return visit(dataset, p);
          })) {
        return;
      }
      ++x;
      ++y;
    }
  }
}

bool Scope::Overlaps(const Scope& other) const {
  bool shared = false;
  ForEachShared(other, [&](const std::string&, const std::string&) {
    shared = true;
    return false;
  });
  return shared;
}

int64_t Scope::SharedCount(const Scope& other) const {
  int64_t n = 0;
  ForEachShared(other, [&](const std::string&, const std::string&) {
    ++n;
    return true;
  });
  return n;
}

}  // namespace backfill
