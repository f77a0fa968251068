#include "storage/sql/job_registry.h"

#include <algorithm>
#include <functional>
#include <utility>

#include "absl/strings/str_cat.h"

namespace backfill::sql {

bool JobRegistry::Job::Has(const std::string& dataset,
                           const std::string& partition) const {
  auto mine = partitions_.find(dataset);
  if (mine == partitions_.end()) return false;
  const std::vector<std::string>& sorted = Sorted(mine->second);
  if (!std::binary_search(sorted.begin(), sorted.end(), partition)) {
    return false;
  }
  absl::MutexLock lock(&released_mu_);
  auto gone = released_.find(dataset);
  return gone == released_.end() || !gone->second.count(partition);
}

std::vector<std::string> JobRegistry::Job::Partitions(
    const std::string& dataset) const {
  std::vector<std::string> out;
  auto mine = partitions_.find(dataset);
  if (mine == partitions_.end()) return out;
  const std::vector<std::string>& sorted = Sorted(mine->second);
  absl::MutexLock lock(&released_mu_);
  auto gone = released_.find(dataset);
  for (const std::string& p : sorted) {
    if (gone == released_.end() || !gone->second.count(p)) out.push_back(p);
  }
  return out;
}

void JobRegistry::Job::Release(
    const std::string& dataset,
    const std::vector<std::string>& partitions) const {
  absl::MutexLock lock(&released_mu_);
  released_[dataset].insert(partitions.begin(), partitions.end());
}

std::optional<InputFingerprint> JobRegistry::Job::PinnedFingerprint(
    const std::string& dataset) const {
  absl::MutexLock lock(&pins_mu_);
  auto it = pinned_.find(dataset);
  if (it == pinned_.end()) return std::nullopt;
  return it->second;
}

void JobRegistry::Job::KeepPinnedFingerprint(
    const InputFingerprint& fingerprint) const {
  absl::MutexLock lock(&pins_mu_);
  pinned_.emplace(fingerprint.dataset, fingerprint);
}

void JobRegistry::Register(const JobLayout& layout, bool keep_pins) {
  auto job = std::make_shared<Job>();
  job->layout_ = layout;
  for (size_t i = 0; i < layout.items.size(); ++i) {
    const std::vector<std::string>& partitions = layout.items[i].partitions;
    auto [it, first] =
        job->partitions_.try_emplace(layout.items[i].dataset->name);
    Job::Recomputed& r = it->second;
    const bool strictly_sorted =
        std::adjacent_find(partitions.begin(), partitions.end(),
                           std::greater_equal<>()) == partitions.end();
    if (first && strictly_sorted) {
      r.item = i;
      continue;
    }
    // A second item of the dataset, or partitions out of order: a sorted
    // copy of them all.
    if (!r.copied) {
      if (!first) r.copy = layout.items[r.item].partitions;
      r.copied = true;
    }
    r.copy.insert(r.copy.end(), partitions.begin(), partitions.end());
    std::sort(r.copy.begin(), r.copy.end());
    r.copy.erase(std::unique(r.copy.begin(), r.copy.end()), r.copy.end());
  }
  absl::MutexLock lock(&mu_);
  auto& slot = jobs_[layout.job_id];
  if (slot != nullptr && keep_pins) {
    absl::MutexLock pins_lock(&slot->pins_mu_);
    absl::MutexLock new_pins_lock(&job->pins_mu_);
    job->pinned_ = slot->pinned_;
  }
  slot = std::move(job);
}

absl::StatusOr<std::shared_ptr<const JobRegistry::Job>> JobRegistry::Find(
    const std::string& job_id) const {
  absl::MutexLock lock(&mu_);
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job ", job_id, " is not prepared on this engine (PrepareJob first)"));
  }
  return it->second;
}

absl::StatusOr<std::shared_ptr<const JobRegistry::Job>>
JobRegistry::FindRecomputing(const std::string& job_id,
                             const std::string& dataset) const {
  absl::StatusOr<std::shared_ptr<const Job>> job = Find(job_id);
  if (!job.ok()) return job;
  if (!(*job)->Recomputes(dataset)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "dataset ", dataset, " is not recomputed by job ", job_id));
  }
  return job;
}

void JobRegistry::Forget(const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  jobs_.erase(job_id);
}

}  // namespace backfill::sql
