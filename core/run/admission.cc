#include "core/run/admission.h"

#include <algorithm>
#include <limits>

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
  auto it = jobs_.try_emplace(job_id).first;
  Entry& e = it->second;
  e.order = next_order_++;
  e.scope = std::move(scope);
  e.held = held;
  index_.reserve(index_.size() + e.scope.size());
  for (const auto& key : e.scope) index_[key].push_back({e.order, &it->first});
}

void Admission::SetHeld(const std::string& job_id, bool held) {
  auto it = jobs_.find(job_id);
  if (it != jobs_.end()) it->second.held = held;
}

void Admission::Remove(const std::string& job_id) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return;
  for (const auto& key : it->second.scope) {
    auto slot = index_.find(key);
    if (slot == index_.end()) continue;
    Holders& holders = slot->second;
    const uint64_t order = it->second.order;
    holders.erase(
        std::remove_if(holders.begin(), holders.end(),
                       [order](const auto& h) { return h.first == order; }),
        holders.end());
    if (holders.empty()) index_.erase(slot);
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

std::map<std::string, Admission::Overlap> Admission::Shared(
    const Scope& scope, const std::string& self, bool want_held,
    uint64_t before) const {
  std::map<std::string, Overlap> out;
  for (const auto& key : scope) {
    auto slot = index_.find(key);
    if (slot == index_.end()) continue;
    for (const auto& [order, holder] : slot->second) {
      if (order >= before) break;
      const std::string& id = *holder;
      if (id == self) continue;
      const Entry& other = jobs_.at(id);
      if (other.held != want_held) continue;
      Overlap& o = out[id];
      o.job_id = id;
      ++o.partitions;
    }
  }
  return out;
}

std::vector<Admission::Overlap> Admission::Blockers(
    const std::string& job_id) const {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return {};
  std::map<std::string, Overlap> shared =
      Shared(it->second.scope, job_id, /*want_held=*/false, it->second.order);
  std::vector<Overlap> out;
  for (auto& [id, o] : shared) out.push_back(std::move(o));
  std::sort(out.begin(), out.end(), [this](const Overlap& a, const Overlap& b) {
    return jobs_.at(a.job_id).order < jobs_.at(b.job_id).order;
  });
  return out;
}

std::vector<Admission::Overlap> Admission::HeldOverlaps(
    const std::string& job_id) const {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return {};
  std::map<std::string, Overlap> shared =
      Shared(it->second.scope, job_id, /*want_held=*/true,
             std::numeric_limits<uint64_t>::max());
  std::vector<Overlap> out;
  for (auto& [id, o] : shared) out.push_back(std::move(o));
  return out;
}

std::vector<Admission::Overlap> Admission::Overlapping(
    const Scope& scope, std::vector<Conflict>* conflicts,
    size_t max_conflicts) const {
  std::map<std::string, Overlap> shared;
  for (const auto& key : scope) {
    auto slot = index_.find(key);
    if (slot == index_.end()) continue;
    for (const auto& [order, holder] : slot->second) {
      const std::string& id = *holder;
      const Entry& other = jobs_.at(id);
      if (other.held) continue;
      Overlap& o = shared[id];
      o.job_id = id;
      ++o.partitions;
      if (conflicts != nullptr && conflicts->size() < max_conflicts) {
        conflicts->push_back({id, key.dataset, key.partition});
      }
    }
  }
  std::vector<Overlap> out;
  for (auto& [id, o] : shared) out.push_back(std::move(o));
  std::sort(out.begin(), out.end(), [this](const Overlap& a, const Overlap& b) {
    return jobs_.at(a.job_id).order < jobs_.at(b.job_id).order;
  });
  return out;
}

std::vector<std::string> Admission::Order() const {
  std::vector<std::pair<uint64_t, std::string>> all;
  for (const auto& [id, e] : jobs_) all.push_back({e.order, id});
  std::sort(all.begin(), all.end());
  std::vector<std::string> out;
  for (auto& [order, id] : all) out.push_back(std::move(id));
  return out;
}

}  // namespace backfill
