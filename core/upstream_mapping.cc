#include "core/upstream_mapping.h"

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/partition.h"
#include "core/partition_mapping.h"
#include "core/status_macros.h"

namespace backfill {
namespace {

absl::string_view Sv(std::string_view s) { return {s.data(), s.size()}; }

}  // namespace

absl::StatusOr<std::optional<std::vector<std::string>>> PartitionsRead(
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

absl::StatusOr<std::optional<std::vector<std::string>>> PartitionsAffected(
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
  ASSIGN_OR_RETURN(std::vector<std::string> window,
                   LookbackInputs(dataset.grain(), n, partition));
  if (window.empty()) {
    return absl::InternalError(
        absl::StrCat("empty lookback window for \"", Sv(partition), "\""));
  }
  ASSIGN_OR_RETURN(PartitionBounds bounds,
                   BoundsOf(dataset.grain(), window.front()));
  return std::optional<std::string>(std::move(bounds.start));
}

}  // namespace backfill
