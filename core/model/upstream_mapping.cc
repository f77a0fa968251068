#include "core/model/upstream_mapping.h"

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/base/sort_unique.h"
#include "core/base/status_macros.h"
#include "core/base/sv.h"
#include "core/model/partition.h"
#include "core/model/partition_layout.h"
#include "core/model/partition_mapping.h"

namespace backfill {
namespace {

bool IsKeyOf(const PartitionLayout& layout, std::string_view key) {
  return std::find(layout.keys.begin(), layout.keys.end(), key) !=
         layout.keys.end();
}

// A time x key layout maps only to and from time grains (its own time grain
// and a one-dimensional hour, day or month).
absl::Status CheckTimeLayouts(const PartitionLayout& upstream,
                              const PartitionLayout& dependent) {
  if (!IsTimeGrain(upstream.grain) || !IsTimeGrain(dependent.grain)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a time x key partition maps only to and from time grains; ",
        LayoutName(upstream), " -> ", LayoutName(dependent), " is not one"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<std::vector<std::string>>> OneDimensionRead(
    const UpstreamEdge& edge, Grain upstream, Grain dependent,
    std::string_view partition) {
  switch (edge.mapping) {
    case Mapping::kAll:
      return std::optional<std::vector<std::string>>();
    case Mapping::kIdentity:
      RETURN_IF_ERROR(ValidatePartition(upstream, partition));
      return std::optional<std::vector<std::string>>(
          std::vector<std::string>{std::string(partition)});
    case Mapping::kRollup: {
      ASSIGN_OR_RETURN(std::vector<std::string> children,
                       RollupChildren(upstream, dependent, partition));
      return std::optional<std::vector<std::string>>(std::move(children));
    }
    case Mapping::kLookback: {
      if (upstream != dependent) {
        return absl::InvalidArgumentError(absl::StrCat(
            "a lookback maps the same grain; ", GrainName(upstream), " -> ",
            GrainName(dependent), " is not"));
      }
      ASSIGN_OR_RETURN(std::vector<std::string> window,
                       LookbackInputs(upstream, edge.lookback, partition));
      return std::optional<std::vector<std::string>>(std::move(window));
    }
  }
  return absl::InternalError("unknown mapping");
}

absl::StatusOr<std::optional<std::vector<std::string>>> OneDimensionAffected(
    const UpstreamEdge& edge, Grain upstream, Grain dependent,
    absl::Span<const std::string> partitions) {
  switch (edge.mapping) {
    case Mapping::kAll:
      return std::optional<std::vector<std::string>>();
    case Mapping::kIdentity: {
      std::vector<std::string> out(partitions.begin(), partitions.end());
      for (const std::string& p : out) {
        RETURN_IF_ERROR(ValidatePartition(upstream, p));
      }
      std::sort(out.begin(), out.end());
      out.erase(std::unique(out.begin(), out.end()), out.end());
      return std::optional<std::vector<std::string>>(std::move(out));
    }
    case Mapping::kRollup: {
      ASSIGN_OR_RETURN(
          std::vector<std::string> parents,
          RollupAffectedPartitions(upstream, dependent, partitions));
      return std::optional<std::vector<std::string>>(std::move(parents));
    }
    case Mapping::kLookback: {
      if (upstream != dependent) {
        return absl::InvalidArgumentError(absl::StrCat(
            "a lookback maps the same grain; ", GrainName(upstream), " -> ",
            GrainName(dependent), " is not"));
      }
      ASSIGN_OR_RETURN(
          std::vector<std::string> affected,
          LookbackAffectedPartitions(upstream, edge.lookback, partitions));
      return std::optional<std::vector<std::string>>(std::move(affected));
    }
  }
  return absl::InternalError("unknown mapping");
}

}  // namespace

absl::StatusOr<std::optional<std::vector<std::string>>> PartitionsRead(
    const UpstreamEdge& edge, const PartitionLayout& upstream,
    const PartitionLayout& dependent, std::string_view partition) {
  if (!upstream.two_dimensional() && !dependent.two_dimensional()) {
    return OneDimensionRead(edge, upstream.grain, dependent.grain, partition);
  }
  if (edge.mapping == Mapping::kAll) {
    return std::optional<std::vector<std::string>>();
  }
  RETURN_IF_ERROR(CheckTimeLayouts(upstream, dependent));
  // The dependent's time part (and key, when it has one).
  std::string time(partition);
  std::optional<std::string> key;
  if (dependent.two_dimensional()) {
    ASSIGN_OR_RETURN(TimeKey tk, SplitTimeKey(dependent, partition));
    time = std::move(tk.time);
    key = std::move(tk.key);
  }
  ASSIGN_OR_RETURN(
      std::optional<std::vector<std::string>> times,
      OneDimensionRead(edge, upstream.grain, dependent.grain, time));
  if (!times || !upstream.two_dimensional()) return times;
  std::vector<std::string> out;
  if (key) {
    if (!IsKeyOf(upstream, *key)) {
      return absl::InvalidArgumentError(
          absl::StrCat("key \"", *key, "\" of partition \"", Sv(partition),
                       "\" is not a key of the upstream"));
    }
    for (const std::string& t : *times) out.push_back(JoinTimeKey(t, *key));
  } else {
    for (const std::string& t : *times) {
      for (const std::string& k : upstream.keys) {
        out.push_back(JoinTimeKey(t, k));
      }
    }
  }
  SortUnique(&out);
  return std::optional<std::vector<std::string>>(std::move(out));
}

absl::StatusOr<std::optional<std::vector<std::string>>> PartitionsAffected(
    const UpstreamEdge& edge, const PartitionLayout& upstream,
    const PartitionLayout& dependent,
    absl::Span<const std::string> partitions) {
  if (!upstream.two_dimensional() && !dependent.two_dimensional()) {
    return OneDimensionAffected(edge, upstream.grain, dependent.grain,
                                partitions);
  }
  if (edge.mapping == Mapping::kAll) {
    return std::optional<std::vector<std::string>>();
  }
  RETURN_IF_ERROR(CheckTimeLayouts(upstream, dependent));
  // The upstream's time parts by key ("" for a time upstream), so that each
  // key's times are mapped once.
  std::map<std::string, std::vector<std::string>> by_key;
  for (const std::string& p : partitions) {
    if (upstream.two_dimensional()) {
      ASSIGN_OR_RETURN(TimeKey tk, SplitTimeKey(upstream, p));
      by_key[tk.key].push_back(std::move(tk.time));
    } else {
      by_key[""].push_back(p);
    }
  }
  std::vector<std::string> out;
  for (const auto& [key, times] : by_key) {
    ASSIGN_OR_RETURN(
        std::optional<std::vector<std::string>> mapped,
        OneDimensionAffected(edge, upstream.grain, dependent.grain, times));
    if (!mapped) return mapped;  // (only `all`, handled above)
    if (!dependent.two_dimensional()) {
      out.insert(out.end(), mapped->begin(), mapped->end());
    } else if (upstream.two_dimensional()) {
      if (!IsKeyOf(dependent, key)) continue;  // no such partition below
      for (const std::string& t : *mapped) out.push_back(JoinTimeKey(t, key));
    } else {
      for (const std::string& t : *mapped) {
        for (const std::string& k : dependent.keys) {
          out.push_back(JoinTimeKey(t, k));
        }
      }
    }
  }
  SortUnique(&out);
  return std::optional<std::vector<std::string>>(std::move(out));
}

std::string DownstreamReason(const UpstreamEdge& edge,
                             std::string_view upstream) {
  std::string out = absl::StrCat("downstream of ", Sv(upstream));
  switch (edge.mapping) {
    case Mapping::kIdentity:
      break;
    case Mapping::kLookback:
      absl::StrAppend(&out, " via lookback ", edge.lookback);
      break;
    default:
      absl::StrAppend(&out, " via ", MappingName(edge.mapping));
      break;
  }
  return out;
}

int MaxLookback(const DatasetSpec& dataset) {
  int n = 0;
  for (const UpstreamEdge& e : dataset.upstream) {
    if (e.mapping == Mapping::kLookback) n = std::max(n, e.lookback);
  }
  return n;
}

absl::StatusOr<std::optional<std::string>> WindowStart(
    const DatasetSpec& dataset, std::string_view partition) {
  const int n = MaxLookback(dataset);
  if (n == 0) return std::optional<std::string>();
  std::string time(partition);
  if (dataset.two_dimensional()) {
    ASSIGN_OR_RETURN(TimeKey tk, SplitTimeKey(dataset.layout(), partition));
    time = std::move(tk.time);
  }
  ASSIGN_OR_RETURN(std::vector<std::string> window,
                   LookbackInputs(dataset.grain(), n, time));
  if (window.empty()) {
    return absl::InternalError(
        absl::StrCat("empty lookback window for \"", Sv(partition), "\""));
  }
  ASSIGN_OR_RETURN(PartitionBounds bounds,
                   BoundsOf(dataset.grain(), window.front()));
  return std::optional<std::string>(std::move(bounds.start));
}

}  // namespace backfill
