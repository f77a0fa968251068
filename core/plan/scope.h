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
// A plain value type; not synchronized (copy it across threads).

#ifndef BACKFILL_CORE_PLAN_SCOPE_H_
#define BACKFILL_CORE_PLAN_SCOPE_H_

#include <cstddef>
#include <map>
#include <set>
#include <string>
#include <utility>

namespace backfill {

class Scope {
 public:
  // (dataset, partition).
  using Pair = std::pair<std::string, std::string>;
  using Keys = std::set<std::string>;
  using value_type = Pair;
  using const_iterator = std::set<Pair>::const_iterator;
  using iterator = const_iterator;

  Scope() = default;

  // Adds the pair (a set: adding one twice keeps one).
  void insert(Pair pair) { partitions_.insert(std::move(pair)); }
  size_t count(const Pair& pair) const { return partitions_.count(pair); }
  size_t size() const { return partitions_.size(); }
  bool empty() const { return partitions_.empty(); }
  // The pairs, ordered by dataset then partition.
  const_iterator begin() const { return partitions_.begin(); }
  const_iterator end() const { return partitions_.end(); }
  const std::set<Pair>& partitions() const { return partitions_; }

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

  friend bool operator==(const Scope& a, const Scope& b) {
    return a.partitions_ == b.partitions_ && a.keys_ == b.keys_;
  }

 private:
  std::set<Pair> partitions_;
  std::map<std::string, Keys> keys_;  // dataset -> its key filter
};

}  // namespace backfill

#endif  // BACKFILL_CORE_PLAN_SCOPE_H_
