#include "core/run/admission.h"

#include <algorithm>

namespace backfill {

Scope ScopeOf(const Plan& plan) {
  Scope scope;
  for (const DatasetPlan& dp : plan.datasets) {
    scope.insert(dp.dataset, dp.partitions);
    if (!dp.keys.empty()) {
      scope.SetKeys(dp.dataset, {dp.keys.begin(), dp.keys.end()});
    }
  }
  return scope;
}

void Admission::Add(const std::string& job_id, Scope scope, bool held) {
  Remove(job_id);
  std::map<std::string, int64_t> shared;
  for (auto& [id, other] : jobs_) {
    const int64_t n = scope.SharedCount(other.scope);
    if (n == 0) continue;
    shared[id] = n;
    other.shared[job_id] = n;
  }
  Entry& e = jobs_[job_id];
  e.order = next_order_++;
  e.scope = std::move(scope);
  e.held = held;
  e.shared = std::move(shared);
}

void Admission::SetHeld(const std::string& job_id, bool held) {
  auto it = jobs_.find(job_id);
  if (it != jobs_.end()) it->second.held = held;
}

void Admission::Remove(const std::string& job_id) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return;
  for (const auto& [id, n] : it->second.shared) {
    jobs_.at(id).shared.erase(job_id);
  }
  jobs_.erase(it);
}

bool Admission::Contains(const std::string& job_id) const {
  return jobs_.count(job_id) > 0;
}

bool Admission::IsHeld(const std::string& job_id) const {
  auto it = jobs_.find(job_id);
  return it != jobs_.end() && it->second.held;
}

const Scope* Admission::ScopeOf(const std::string& job_id) const {
  auto it = jobs_.find(job_id);
  return it == jobs_.end() ? nullptr : &it->second.scope;
}

std::vector<std::pair<const std::string*, const Admission::Entry*>>
Admission::InOrder() const {
  std::vector<std::pair<const std::string*, const Entry*>> out;
  out.reserve(jobs_.size());
  for (const auto& [id, e] : jobs_) out.push_back({&id, &e});
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return a.second->order < b.second->order;
  });
  return out;
}

std::vector<Admission::Overlap> Admission::Blockers(
    const std::string& job_id) const {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return {};
  const Entry& e = it->second;
  std::vector<std::pair<uint64_t, Overlap>> found;
  for (const auto& [id, n] : e.shared) {
    const Entry& other = jobs_.at(id);
    if (other.order < e.order && !other.held) {
      found.push_back({other.order, {id, n}});
    }
  }
  std::sort(found.begin(), found.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<Overlap> out;
  out.reserve(found.size());
  for (auto& [order, o] : found) out.push_back(std::move(o));
  return out;
}

std::vector<Admission::Overlap> Admission::HeldOverlaps(
    const std::string& job_id) const {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return {};
  std::vector<Overlap> out;
  for (const auto& [id, n] : it->second.shared) {
    if (jobs_.at(id).held) out.push_back({id, n});
  }
  return out;
}

std::vector<Admission::Overlap> Admission::Overlapping(
    const Scope& scope, std::vector<Conflict>* conflicts,
    size_t max_conflicts) const {
  const size_t wanted =
      conflicts == nullptr || conflicts->size() >= max_conflicts
          ? 0
          : max_conflicts - conflicts->size();
  // Each job's first `wanted` shared pairs: the first `wanted` of all,
  // by (dataset, partition, admission order), are among them.
  struct Shared {
    const std::string* dataset;
    const std::string* partition;
    size_t job;  // in `out`
  };
  std::vector<Shared> shared;
  std::vector<Overlap> out;
  for (const auto& [id, e] : InOrder()) {
    if (e->held) continue;
    int64_t n = 0;
    scope.ForEachShared(e->scope, [&](const std::string& dataset,
                                      const std::string& partition) {
      if (static_cast<size_t>(n) < wanted) {
        shared.push_back({&dataset, &partition, out.size()});
      }
      ++n;
      return true;
    });
    if (n > 0) out.push_back({*id, n});
  }
  if (wanted > 0) {
    // Stable: a pair's jobs stay in admission order.
    std::stable_sort(shared.begin(), shared.end(),
                     [](const Shared& a, const Shared& b) {
                       if (*a.dataset != *b.dataset) {
                         return *a.dataset < *b.dataset;
                       }
                       return *a.partition < *b.partition;
                     });
    for (size_t i = 0; i < shared.size() && i < wanted; ++i) {
      conflicts->push_back({out[shared[i].job].job_id, *shared[i].dataset,
                            *shared[i].partition});
    }
  }
  return out;
}

std::vector<std::string> Admission::Order() const {
  std::vector<std::string> out;
  for (const auto& [id, e] : InOrder()) out.push_back(*id);
  return out;
}

}  // namespace backfill
