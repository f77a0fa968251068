#include "core/governance/partition_history.h"

#include <map>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/base/error_details.h"
#include "core/base/status_macros.h"
#include "core/governance/version_checks.h"
#include "core/model/partition.h"
#include "core/model/partition_layout.h"

namespace backfill {

absl::StatusOr<PartitionHistory> ExplainPartition(
    const Catalog& catalog, StateStore& store, const std::string& dataset,
    const std::string& partition) {
  const DatasetSpec* spec = catalog.Find(dataset);
  if (spec == nullptr) {
    return WithReason(
        absl::NotFoundError(absl::StrCat(
            "no dataset ", QuoteValue(dataset),
            " is declared in the pipelines (`ListDatasets` lists them)")),
        "DATASET_NOT_FOUND", {{"dataset", dataset}});
  }
  if (!spec->is_derived()) {
    return absl::FailedPreconditionError(absl::StrCat(
        spec->name,
        " is a source dataset: backfilld reads it and never publishes it, so "
        "it has no versions to explain; ask about a derived dataset that "
        "reads it"));
  }
  if (absl::Status valid = ValidateDatasetPartition(*spec, partition);
      !valid.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("partition ", QuoteValue(partition), " of ", spec->name,
                     " (", LayoutName(spec->layout()), "): ", valid.message()));
  }
  PartitionHistory history;
  history.dataset = spec->name;
  history.partition = partition;
  ASSIGN_OR_RETURN(std::vector<LineageRecord> lineage,
                   store.GetLineage(spec->name, partition));
  if (lineage.empty()) return history;
  ASSIGN_OR_RETURN(auto diffs, store.PartitionDiffs(spec->name, partition));
  std::map<std::string, Job> jobs;
  // Each job's check results, read once however many versions it made.
  std::map<std::string, std::vector<CheckResult>> checks;
  for (LineageRecord& rec : lineage) {
    auto it = jobs.find(rec.job_id);
    if (it == jobs.end()) {
      ASSIGN_OR_RETURN(Job job, store.GetJobProgress(rec.job_id));
      it = jobs.emplace(rec.job_id, std::move(job)).first;
    }
    const Job& job = it->second;
    PartitionVersion v;
    v.job_state = job.state;
    if (job.request.dataset == spec->name) v.keys = job.request.keys;
    if (rec.action == LineageAction::kPublish) {
      auto d = diffs.find(rec.job_id);
      if (d != diffs.end()) v.diff = d->second;
      auto c = checks.find(rec.job_id);
      if (c == checks.end()) {
        ASSIGN_OR_RETURN(std::vector<CheckResult> results,
                         store.ListCheckResults(rec.job_id));
        c = checks.emplace(rec.job_id, std::move(results)).first;
      }
      v.checks = VersionChecks(c->second, spec->name, partition);
    }
    v.record = std::move(rec);
    history.versions.push_back(std::move(v));
  }
  ASSIGN_OR_RETURN(std::vector<StaleDependent> stale,
                   FindStaleDependents(catalog, store, *spec, {partition}));
  if (!stale.empty()) history.stale = std::move(stale.front());
  return history;
}

}  // namespace backfill
