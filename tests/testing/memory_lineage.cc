#include "tests/testing/memory_lineage.h"

#include <algorithm>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "tests/testing/as_stored.h"

namespace backfill::testing {

absl::Status MemoryLineage::Append(LineageAction action,
                                   const std::string& job_id,
                                   const std::vector<LineageRecord>& records,
                                   absl::Time now) {
  const bool publish = action == LineageAction::kPublish;
  std::vector<LineageRecord> stored;
  std::set<std::tuple<std::string, std::string, std::string>> seen;
  for (const LineageRecord& rec : records) {
    LineageRecord r = rec;
    if (publish || r.job_id.empty()) r.job_id = job_id;
    // As the SQLite store's unique index: a list with a duplicate is
    // refused as a whole.
    if (!seen.insert({r.job_id, r.dataset, r.partition}).second) {
      return absl::FailedPreconditionError(absl::StrCat(
          publish ? "lineage of job " : "rollback lineage of job ", r.job_id,
          " lists ", r.dataset, "/", r.partition, " twice"));
    }
    r.action = action;
    r.published_at = StoredTime(
        rec.published_at == absl::InfinitePast() ? now : rec.published_at);
    if (!publish) {
      r.approval.reset();  // restored rows come with no approval
    } else if (r.approval) {
      r.approval->approved_at = StoredTime(r.approval->approved_at);
    }
    stored.push_back(std::move(r));
  }
  for (LineageRecord& r : stored) {
    r.id = next_id_++;
    if (publish) ++published_by_job_[job_id];
    records_[{r.dataset, r.partition}].push_back(std::move(r));
  }
  return absl::OkStatus();
}

bool MemoryLineage::HasPublished(const std::string& job_id) const {
  return published_by_job_.count(job_id) > 0;
}

std::vector<LineageRecord> MemoryLineage::Versions(
    const std::string& dataset, const std::string& partition) const {
  auto it = records_.find({dataset, partition});
  if (it == records_.end()) return {};
  // Appended in id order: newest first is the reverse.
  return std::vector<LineageRecord>(it->second.rbegin(), it->second.rend());
}

std::optional<LineageRecord> MemoryLineage::NewestOf(
    const std::string& dataset) const {
  const LineageRecord* newest = nullptr;
  for (const auto& [key, records] : records_) {
    if (key.first != dataset) continue;
    for (const LineageRecord& r : records) {
      if (newest == nullptr || r.id > newest->id) newest = &r;
    }
  }
  if (newest == nullptr) return std::nullopt;
  return *newest;
}

std::vector<LineageRecord> MemoryLineage::Overlapping(
    const std::string& job_id) const {
  std::vector<const LineageRecord*> found;
  for (const auto& [key, records] : records_) {
    const bool mine = std::any_of(
        records.begin(), records.end(), [&](const LineageRecord& r) {
          return r.job_id == job_id && r.action == LineageAction::kPublish;
        });
    if (!mine) continue;
    for (const LineageRecord& r : records) found.push_back(&r);
  }
  std::sort(found.begin(), found.end(),
            [](const LineageRecord* a, const LineageRecord* b) {
              return a->id < b->id;
            });
  std::vector<LineageRecord> out;
  for (const LineageRecord* r : found) out.push_back(*r);
  return out;
}

std::map<std::string, absl::Time> MemoryLineage::PublicationTimes(
    const std::vector<std::string>& job_ids) const {
  const std::set<std::string> wanted(job_ids.begin(), job_ids.end());
  std::map<std::string, absl::Time> out;
  for (const auto& [key, records] : records_) {
    for (const LineageRecord& r : records) {
      if (r.action != LineageAction::kPublish || !wanted.count(r.job_id)) {
        continue;
      }
      auto [it, inserted] = out.emplace(r.job_id, r.published_at);
      if (!inserted && r.published_at < it->second) {
        it->second = r.published_at;
      }
    }
  }
  return out;
}

std::vector<const LineageRecord*> MemoryLineage::Of(
    const std::string& dataset, const std::set<std::string>& partitions) const {
  std::vector<const LineageRecord*> out;
  for (const auto& [key, records] : records_) {
    if (key.first != dataset) continue;
    if (!partitions.empty() && partitions.count(key.second) == 0) continue;
    for (const LineageRecord& r : records) out.push_back(&r);
  }
  return out;
}

}  // namespace backfill::testing
