#include "core/plan/replay_due.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/plural.h"
#include "core/base/status_macros.h"
#include "core/model/fingerprint.h"
#include "core/model/partition_layout.h"
#include "core/model/replay_policy.h"

namespace backfill {

std::string ReplayChangeOf(const DatasetSpec& dataset,
                           const StalePartition& sp) {
  return sp.cause == StalePartition::Cause::kTransformVersion
             ? absl::StrCat("version:", dataset.transform_version)
             : sp.inputs_now;
}

absl::StatusOr<ReplayDue> ReplayDueFinder::Find(const Catalog& catalog,
                                                const DatasetSpec& dataset,
                                                const FailedReplays& failed) {
  if (!dataset.replay) {
    return absl::InvalidArgumentError(
        absl::StrCat("dataset ", dataset.name, " declares no replay policy"));
  }
  const ReplayPolicy& policy = *dataset.replay;
  const absl::Time now = clock_->Now();
  ReplayDue out;
  out.dataset = dataset.name;
  absl::StatusOr<std::vector<StalePartition>> stale =
      FindStalePartitions(catalog, *engine_, *store_, dataset);
  if (!stale.ok()) {
    // Nothing published with lineage yet: nothing to replay.
    if (stale.status().code() == absl::StatusCode::kFailedPrecondition) {
      seen_.erase(dataset.name);
      return out;
    }
    return stale.status();
  }
  const std::set<std::string> held =
      held_ ? held_(dataset.name) : std::set<std::string>{};
  std::map<std::string, Seen>& seen = seen_[dataset.name];
  std::map<std::string, Seen> still_seen;
  const PartitionLayout layout = dataset.layout();
  size_t inputs = 0;
  size_t versions = 0;
  for (StalePartition& sp : *stale) {
    const bool transform = sp.cause == StalePartition::Cause::kTransformVersion;
    if (transform ? !policy.on_transform_change : !policy.on_input_change) {
      out.not_a_trigger.push_back(sp.partition);
      continue;
    }
    if (dataset.frozen) {
      ASSIGN_OR_RETURN(bool frozen,
                       dataset.frozen->Freezes(layout, sp.partition, now));
      if (frozen) {
        out.frozen.push_back(sp.partition);
        continue;
      }
    }
    // Inside the window: some of it lies after now - window.
    ASSIGN_OR_RETURN(PartitionSpan span, SpanOf(layout, sp.partition));
    if (span.end <= now - policy.window) {
      out.outside_window.push_back(sp.partition);
      continue;
    }
    if (!transform) {
      auto it = seen.find(sp.partition);
      Seen s = it != seen.end() && it->second.inputs_now == sp.inputs_now
                   ? it->second
                   : Seen{sp.inputs_now, now};
      still_seen[sp.partition] = s;
      if (now - s.since < policy.settle) {
        out.unsettled.push_back(sp.partition);
        continue;
      }
    }
    if (held.count(sp.partition) > 0) {
      out.held.push_back(sp.partition);
      continue;
    }
    if (auto it = failed.find(sp.partition);
        it != failed.end() && it->second == ReplayChangeOf(dataset, sp)) {
      out.failed.push_back(sp.partition);
      continue;
    }
    (transform ? versions : inputs)++;
    out.due.push_back(std::move(sp));
  }
  seen = std::move(still_seen);
  if (out.due.empty()) return out;

  BackfillRequest& r = out.request;
  r.dataset = dataset.name;
  r.requested_by = absl::StrCat("policy:", dataset.name);
  std::string key_text = dataset.name;
  for (const StalePartition& sp : out.due) {
    r.partitions.push_back(sp.partition);
    absl::StrAppend(&key_text, "|", sp.partition, "=",
                    ReplayChangeOf(dataset, sp));
  }
  std::vector<std::string> parts;
  for (const StalePartition& sp : out.due) {
    const bool transform = sp.cause == StalePartition::Cause::kTransformVersion;
    if (!transform && inputs > 0) {
      parts.push_back(absl::StrCat(
          "input_change: ",
          Plural(static_cast<int64_t>(inputs), "partition", "partitions"),
          " whose inputs changed since their last publish (first ",
          sp.partition, ": ", sp.reason, ")"));
      inputs = 0;
    }
    if (transform && versions > 0) {
      parts.push_back(absl::StrCat(
          "transform_change: ",
          Plural(static_cast<int64_t>(versions), "partition", "partitions"),
          " made by another transform version than ",
          dataset.transform_version));
      versions = 0;
    }
  }
  r.reason = absl::StrCat("replay policy of ", dataset.name, ": ",
                          absl::StrJoin(parts, "; "));
  out.idempotency_key =
      absl::StrCat("policy-", dataset.name, "-", HashHex(key_text));
  return out;
}

}  // namespace backfill
