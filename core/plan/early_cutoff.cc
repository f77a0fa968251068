#include "core/plan/early_cutoff.h"

#include <functional>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"

namespace backfill {
namespace {

std::string Count(int64_t n, const char* one, const char* many) {
  return absl::StrCat(n, " ", n == 1 ? one : many);
}

}  // namespace

bool IsCutOff(TaskState state) {
  return state == TaskState::kUnchanged || state == TaskState::kSkipped;
}

bool SameAsPublished(const std::string& output_fingerprint,
                     const LineageRecord* latest) {
  return latest != nullptr && !output_fingerprint.empty() &&
         latest->output_fingerprint == output_fingerprint;
}

bool MaySkip(const std::string& dataset, const std::string& requested,
             const std::string& version, const LineageRecord* latest,
             const std::vector<InputFingerprint>& inputs) {
  if (dataset == requested || latest == nullptr) return false;
  if (latest->transform_version.empty() ||
      latest->transform_version != version) {
    return false;  // its own logic changed (or it was empty before)
  }
  for (const InputFingerprint& now : inputs) {
    bool recorded = false;
    for (const InputFingerprint& then : latest->inputs) {
      if (then.dataset != now.dataset || then.partition != now.partition) {
        continue;
      }
      if (then.fingerprint != now.fingerprint) return false;
      recorded = true;
    }
    if (!recorded) return false;
  }
  return true;
}

JobLayout WithoutCutOff(const JobLayout& layout, const TaskTable& tasks) {
  std::map<std::string, std::set<std::string, std::less<>>> cut;
  for (size_t i = 0; i < tasks.size(); ++i) {
    if (IsCutOff(tasks.state(i))) {
      cut[tasks.dataset(i)].emplace(tasks.partition(i));
    }
  }
  JobLayout out;
  out.job_id = layout.job_id;
  out.pinned = layout.pinned;
  for (const JobLayout::Item& item : layout.items) {
    auto gone = cut.find(item.dataset->name);
    if (gone == cut.end()) {
      out.items.push_back(item);
      continue;
    }
    JobLayout::Item kept{item.dataset, {}, item.keys};
    for (const std::string& p : item.partitions) {
      if (!gone->second.count(p)) kept.partitions.push_back(p);
    }
    if (!kept.partitions.empty()) out.items.push_back(std::move(kept));
  }
  return out;
}

std::vector<std::pair<const DatasetSpec*, std::vector<std::string>>>
CutOffPartitions(const JobLayout& layout, const TaskTable& tasks) {
  std::vector<std::pair<const DatasetSpec*, std::vector<std::string>>> out;
  std::map<std::string, size_t> index;
  for (const JobLayout::Item& item : layout.items) {
    index[item.dataset->name] = out.size();
    out.push_back({item.dataset, {}});
  }
  for (size_t i = 0; i < tasks.size(); ++i) {
    if (!IsCutOff(tasks.state(i))) continue;
    auto it = index.find(tasks.dataset(i));
    if (it != index.end()) {
      out[it->second].second.emplace_back(tasks.partition(i));
    }
  }
  std::vector<std::pair<const DatasetSpec*, std::vector<std::string>>> used;
  for (auto& entry : out) {
    if (!entry.second.empty()) used.push_back(std::move(entry));
  }
  return used;
}

CutoffCounts CountCutOff(const TaskTable& tasks) {
  CutoffCounts counts;
  for (size_t i = 0; i < tasks.size(); ++i) {
    if (tasks.state(i) == TaskState::kUnchanged) ++counts.unchanged;
    if (tasks.state(i) == TaskState::kSkipped) ++counts.skipped;
  }
  return counts;
}

std::string NothingChangedMessage(const CutoffCounts& counts) {
  return absl::StrCat(
      "nothing changed: ", Count(counts.unchanged, "partition", "partitions"),
      " recomputed identical to the published ones, ",
      Count(counts.skipped, "dependent", "dependents"),
      " skipped; nothing published");
}

std::string CutoffNote(const CutoffCounts& counts) {
  if (counts.unchanged == 0 && counts.skipped == 0) return "";
  return absl::StrCat(
      "; ", Count(counts.unchanged, "partition", "partitions"),
      " recomputed identical to the published ones ",
      counts.unchanged == 1 ? "was" : "were", " not republished, ",
      Count(counts.skipped, "dependent", "dependents"), " skipped");
}

std::vector<std::string> UnprobedConsumers(const JobLayout& layout,
                                           const JobLayout& republished) {
  std::set<std::string> kept;
  for (const JobLayout::Item& item : republished.items) {
    if (!item.partitions.empty()) kept.insert(item.dataset->name);
  }
  std::vector<std::string> out;
  for (const JobLayout::Item& item : layout.items) {
    if (item.dataset == nullptr || kept.count(item.dataset->name)) continue;
    for (const ConsumerSpec& c : item.dataset->consumers) {
      out.push_back(
          absl::StrCat("consumer ", c.name, " of ", item.dataset->name));
    }
  }
  return out;
}

}  // namespace backfill
