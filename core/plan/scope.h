// Scope: what a job writes — the (dataset, partition) pairs it recomputes,
// plus, per dataset, an optional entity-key filter (the set of entity keys
// whose rows it replaces; no filter: every row of those partitions).
//
// Two scopes overlap when they share a (dataset, partition), whatever their
// key filters: a job with keys stages the whole partition as it would
// publish it (its keys' new rows plus the other keys' rows as it read
// them), checks and derives its dependents from that, and may publish only
// while those other rows are unchanged. Two jobs on one partition with
// disjoint keys therefore still run one after the other; the second then
// reads what the first published.
//
// Held compactly, as a job may have a million partitions: per dataset, its
// partitions as one sorted vector of strings without duplicates (the
// dataset's name once, not per pair; an hour partition's 13 characters fit
// in the string itself), about 32 bytes a partition. Comparing two scopes
// merges those vectors, or looks the smaller one's partitions up in the
// larger one when that is cheaper.
//
// A plain value type that owns its strings; not synchronized (copy it
// across threads; concurrent reads of one scope are safe, as no const
// member changes it).

#ifndef BACKFILL_CORE_PLAN_SCOPE_H_
#define BACKFILL_CORE_PLAN_SCOPE_H_

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"

namespace backfill {

class Scope {
 public:
  // (dataset, partition).
  using Pair = std::pair<std::string, std::string>;
  using Keys = std::set<std::string>;
  // Per dataset, its partitions: sorted, unique, never empty.
  using Partitions = std::map<std::string, std::vector<std::string>>;

  // One (dataset, partition) of a scope, as iterating it yields them:
  // references into the scope, valid while it is unchanged. Converts to a
  // Pair (a copy); `const auto& [dataset, partition]` binds to its members.
  struct PairRef {
    const std::string& dataset;
    const std::string& partition;
    operator Pair() const { return {dataset, partition}; }  // NOLINT
    friend bool operator==(const PairRef& a, const Pair& b) {
      return a.dataset == b.first && a.partition == b.second;
    }
    friend bool operator==(const Pair& a, const PairRef& b) { return b == a; }
  };

  // Walks the pairs in (dataset, partition) order.
  class const_iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = Pair;
    using reference = PairRef;
    using pointer = void;
    using difference_type = std::ptrdiff_t;

    const_iterator() = default;
    PairRef operator*() const { return {dataset_->first, (*partitions_)[i_]}; }
    const_iterator& operator++() {
      if (++i_ == partitions_->size()) {
        ++dataset_;
        i_ = 0;
        partitions_ = dataset_ == end_ ? nullptr : &dataset_->second;
      }
      return *this;
    }
    const_iterator operator++(int) {
      const_iterator was = *this;
      ++*this;
      return was;
    }
    friend bool operator==(const const_iterator& a, const const_iterator& b) {
      return a.dataset_ == b.dataset_ && a.i_ == b.i_;
    }
    friend bool operator!=(const const_iterator& a, const const_iterator& b) {
      return !(a == b);
    }

   private:
    friend class Scope;
    const_iterator(Partitions::const_iterator dataset,
                   Partitions::const_iterator end)
        : dataset_(dataset),
          end_(end),
          partitions_(dataset == end ? nullptr : &dataset->second) {}

    Partitions::const_iterator dataset_;
    Partitions::const_iterator end_;
    const std::vector<std::string>* partitions_ = nullptr;
    size_t i_ = 0;
  };
  using iterator = const_iterator;
  using value_type = Pair;

  Scope() = default;

  // Adds the pair (a set: adding one twice keeps one). Cheap when it sorts
  // after the dataset's partitions so far; else it shifts the larger ones.
  void insert(const Pair& pair);
  // Adds partitions of `dataset`, in any order, repeats allowed: sorted
  // once, so adding a plan's partitions at once costs about a sort (little
  // when they come sorted).
  void insert(const std::string& dataset, std::vector<std::string> partitions);

  size_t count(const Pair& pair) const;
  size_t size() const;
  bool empty() const { return partitions_.empty(); }
  // The pairs, ordered by dataset then partition.
  const_iterator begin() const {
    return {partitions_.begin(), partitions_.end()};
  }
  const_iterator end() const { return {partitions_.end(), partitions_.end()}; }
  // The same, per dataset.
  const Partitions& partitions() const { return partitions_; }

  // Restricts the rows of `dataset` in this scope to the given entity keys
  // (replacing any filter set before). An empty set is a filter that
  // matches nothing (no row of the dataset is written).
  void SetKeys(const std::string& dataset, Keys keys);
  // The key filter of `dataset`; nullptr: none (every row).
  const Keys* KeysOf(const std::string& dataset) const;
  bool HasKeyFilter() const { return !keys_.empty(); }

  // Whether both scopes hold a (dataset, partition) (key filters aside,
  // see above).
  bool Overlaps(const Scope& other) const;
  // How many (dataset, partition) pairs both hold.
  int64_t SharedCount(const Scope& other) const;
  // Calls `visit` with each pair both hold, in (dataset, partition) order,
  // until it returns false.
  void ForEachShared(const Scope& other,
                     absl::FunctionRef<bool(const std::string& dataset,
                                            const std::string& partition)>
                         visit) const;

  friend bool operator==(const Scope& a, const Scope& b) {
    return a.partitions_ == b.partitions_ && a.keys_ == b.keys_;
  }

 private:
  Partitions partitions_;
  std::map<std::string, Keys> keys_;  // dataset -> its key filter
};

}  // namespace backfill

#endif  // BACKFILL_CORE_PLAN_SCOPE_H_
