#include "core/stale_dependents.h"

#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"

namespace backfill {

std::string DescribeStaleInput(const StaleInput& input) {
  if (input.action == LineageAction::kRollback) {
    return absl::StrCat("restored by the rollback of ", input.job_id);
  }
  return absl::StrCat("republished by ", input.job_id,
                      input.excluded_downstream ? " with --no-downstream" : "");
}

std::string StaleInputReason(const StaleInput& first, size_t more) {
  std::string out = absl::StrCat("input ", first.dataset);
  if (!first.partition.empty()) absl::StrAppend(&out, "/", first.partition);
  absl::StrAppend(&out, " changed");
  if (more > 0) absl::StrAppend(&out, " (+", more, " more)");
  absl::StrAppend(&out, ": ", DescribeStaleInput(first));
  return out;
}

absl::StatusOr<std::vector<StaleDependent>> FindStaleDependents(
    const Catalog& catalog, StateStore& store, const DatasetSpec& dataset,
    const std::vector<std::string>& partitions) {
  std::vector<StaleDependent> out;
  if (!dataset.is_derived()) return out;
  ASSIGN_OR_RETURN(auto versions,
                   store.VerifiedVersions(dataset.name, partitions));
  if (versions.empty()) return out;

  // When each current version was made: its job's publication, or (an
  // UNCHANGED recomputation, or a job without publish lineage) its end.
  std::set<std::string> version_jobs;
  for (const auto& [p, v] : versions) version_jobs.insert(v.job_id);
  ASSIGN_OR_RETURN(auto published,
                   store.PublicationTimes(std::vector<std::string>(
                       version_jobs.begin(), version_jobs.end())));
  std::map<std::string, absl::Time> made_at;
  for (const std::string& id : version_jobs) {
    auto it = published.find(id);
    if (it != published.end()) {
      made_at[id] = it->second;
      continue;
    }
    ASSIGN_OR_RETURN(Job job, store.GetJobProgress(id));
    made_at[id] = job.end_time;
  }

  // The newest lineage record of each input partition compared (nullopt:
  // none), and whether each upstream job excluded its dependents.
  std::map<std::pair<std::string, std::string>, std::optional<LineageRecord>>
      newest;
  std::map<std::string, bool> excluded;
  auto newest_of = [&](const std::string& ds, const std::string& p)
      -> absl::StatusOr<const std::optional<LineageRecord>*> {
    auto key = std::make_pair(ds, p);
    auto it = newest.find(key);
    if (it == newest.end()) {
      ASSIGN_OR_RETURN(std::vector<LineageRecord> records,
                       store.GetLineage(ds, p));
      std::optional<LineageRecord> first;
      if (!records.empty()) first = std::move(records.front());
      it = newest.emplace(key, std::move(first)).first;
    }
    return &it->second;
  };

  for (const auto& [partition, v] : versions) {
    StaleDependent sd;
    for (const InputFingerprint& in : v.inputs) {
      const DatasetSpec* up = catalog.Find(in.dataset);
      if (up == nullptr || !up->is_derived()) continue;
      // Read whole from a partitioned dataset: no one record to compare.
      if (in.partition.empty() && up->partition) continue;
      ASSIGN_OR_RETURN(const std::optional<LineageRecord>* rec,
                       newest_of(in.dataset, in.partition));
      if (!rec->has_value()) continue;
      const LineageRecord& r = **rec;
      if (r.output_fingerprint == in.fingerprint) continue;
      if (r.published_at < made_at[v.job_id]) continue;
      StaleInput si;
      si.dataset = in.dataset;
      si.partition = in.partition;
      si.read_fingerprint = in.fingerprint;
      si.now_fingerprint = r.output_fingerprint;
      si.job_id = r.job_id;
      si.action = r.action;
      si.at = r.published_at;
      if (r.action == LineageAction::kPublish) {
        auto ex = excluded.find(r.job_id);
        if (ex == excluded.end()) {
          ASSIGN_OR_RETURN(Job job, store.GetJobProgress(r.job_id));
          ex = excluded.emplace(r.job_id, job.request.exclude_downstream).first;
        }
        si.excluded_downstream = ex->second;
      }
      sd.inputs.push_back(std::move(si));
    }
    if (sd.inputs.empty()) continue;
    sd.dataset = dataset.name;
    sd.partition = partition;
    sd.version_job = v.job_id;
    sd.reason = StaleInputReason(sd.inputs.front(), sd.inputs.size() - 1);
    out.push_back(std::move(sd));
  }
  return out;
}

}  // namespace backfill
