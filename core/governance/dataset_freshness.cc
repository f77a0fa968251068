#include "core/governance/dataset_freshness.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/base/error_details.h"
#include "core/base/status_macros.h"
#include "core/plan/stale_lineage.h"

namespace backfill {

const char* FreshnessName(Freshness freshness) {
  switch (freshness) {
    case Freshness::kCurrent:
      return "current";
    case Freshness::kStale:
      return "stale";
    case Freshness::kDue:
      return "due";
    case Freshness::kFrozen:
      return "frozen";
  }
  return "current";
}

absl::StatusOr<FreshnessPage> ReadDatasetFreshness(
    const Catalog& catalog, Engine& engine, StateStore& store,
    const FreshnessContext& context, const FreshnessQuery& query) {
  const DatasetSpec* spec = catalog.Find(query.dataset);
  if (spec == nullptr) {
    return WithReason(
        absl::NotFoundError(absl::StrCat(
            "no dataset ", QuoteValue(query.dataset),
            " is declared in the pipelines (`ListDatasets` lists them)")),
        "DATASET_NOT_FOUND", {{"dataset", query.dataset}});
  }
  if (!spec->is_derived()) {
    return absl::FailedPreconditionError(absl::StrCat(
        spec->name,
        " is a source dataset: backfilld reads it and never publishes it, so "
        "its partitions have no recorded versions; ask about a derived "
        "dataset that reads it"));
  }
  FreshnessPage page;
  if (spec->frozen.has_value()) page.frozen_rule = spec->frozen->Describe();
  ASSIGN_OR_RETURN(auto versions, store.VerifiedVersions(spec->name, {}));
  if (versions.empty()) return page;
  ASSIGN_OR_RETURN(std::vector<StalePartition> stale,
                   StalePartitionsOf(catalog, engine, store, *spec, versions));
  std::map<std::string, const StalePartition*> stale_by_partition;
  for (const StalePartition& sp : stale) {
    stale_by_partition[sp.partition] = &sp;
  }

  // Every partition's standing (for the counts), and the page's.
  std::vector<PartitionFreshness> selected;
  const int limit = std::max(query.limit, 1);
  bool more = false;
  for (const auto& [partition, version] : versions) {
    PartitionFreshness f;
    f.partition = partition;
    f.transform_version = version.transform_version;
    if (version.unchanged) f.confirmed_by = version.job_id;
    if (spec->frozen.has_value()) {
      absl::StatusOr<bool> frozen =
          spec->frozen->Freezes(spec->layout(), partition, context.now);
      // A recorded partition the layout refuses now (the grain changed)
      // is not closed by the rule: it is stale already.
      f.frozen = frozen.ok() && *frozen;
    }
    if (auto it = stale_by_partition.find(partition);
        it != stale_by_partition.end()) {
      f.stale_reason = it->second->reason;
      if (f.frozen) {
        f.freshness = Freshness::kFrozen;
      } else if (context.due.count(partition) > 0) {
        f.freshness = Freshness::kDue;
      } else {
        f.freshness = Freshness::kStale;
      }
    }
    if (auto it = context.held.find(partition); it != context.held.end()) {
      f.held_by = it->second;
    }
    ++page.counts[static_cast<int>(f.freshness)];
    if (!query.after.empty() && partition <= query.after) continue;
    if (!query.only.empty() && std::find(query.only.begin(), query.only.end(),
                                         f.freshness) == query.only.end()) {
      continue;
    }
    if (static_cast<int>(selected.size()) == limit) {
      more = true;
      continue;
    }
    selected.push_back(std::move(f));
  }

  // The page's newest lineage records: who last changed each partition.
  std::vector<std::pair<std::string, std::string>> keys;
  keys.reserve(selected.size());
  for (const PartitionFreshness& f : selected) {
    keys.emplace_back(spec->name, f.partition);
  }
  ASSIGN_OR_RETURN(auto newest, store.NewestLineages(keys));
  for (size_t i = 0; i < selected.size(); ++i) {
    PartitionFreshness& f = selected[i];
    if (i < newest.size() && newest[i].has_value()) {
      const LineageRecord& record = *newest[i];
      f.job_id = record.job_id;
      f.action = record.action;
      f.recorded_at = record.published_at;
      f.rows = record.row_count;
      // Early cutoff vouches for the rows of the record it matched: name
      // it only when it is another job than the one that wrote them.
      if (f.confirmed_by == f.job_id) f.confirmed_by.clear();
    }
  }
  if (more && !selected.empty()) page.last = selected.back().partition;
  page.partitions = std::move(selected);
  return page;
}

}  // namespace backfill
