#include "storage/sql/partition_parameters.h"

#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "core/base/status_macros.h"
#include "core/model/partition.h"
#include "core/model/partition_layout.h"
#include "core/model/upstream_mapping.h"

namespace backfill::sql {

ExtraParameters CheckParameters(const DatasetSpec& dataset) {
  ExtraParameters out;
  out.partition_key = dataset.two_dimensional();
  return out;
}

std::string KeysJson(const std::vector<std::string>& keys) {
  const std::set<std::string> sorted(keys.begin(), keys.end());
  std::vector<std::string> quoted;
  for (const std::string& k : sorted) {
    quoted.push_back(absl::StrCat(
        "\"", absl::StrReplaceAll(k, {{"\\", "\\\\"}, {"\"", "\\\""}}), "\""));
  }
  return absl::StrCat("[", absl::StrJoin(quoted, ","), "]");
}

absl::StatusOr<Params> PartitionParameters(
    const DatasetSpec& dataset, const std::string& partition,
    const std::vector<std::string>& names, const ExtraParameters& allowed,
    const JobLayout::Item* item, const std::string& what) {
  const PartitionLayout layout = dataset.layout();
  RETURN_IF_ERROR(ValidatePartition(layout, partition));
  PartitionBounds bounds;
  std::string key;
  if (layout.grain != Grain::kNone) {
    ASSIGN_OR_RETURN(bounds, BoundsOf(layout, partition));
    if (layout.two_dimensional()) {
      ASSIGN_OR_RETURN(TimeKey tk, SplitTimeKey(layout, partition));
      key = std::move(tk.key);
    }
  }
  Params out;
  for (const std::string& name : names) {
    if (name == ":partition_start") {
      out.push_back(bounds.start);
    } else if (name == ":partition_end") {
      out.push_back(bounds.end);
    } else if (name == ":partition") {
      out.push_back(partition);
    } else if (name == ":partition_key" && allowed.partition_key) {
      out.push_back(key);
    } else if (name == ":window_start" && allowed.window_start) {
      ASSIGN_OR_RETURN(std::optional<std::string> start,
                       WindowStart(dataset, partition));
      if (!start) {
        return absl::FailedPreconditionError(absl::StrCat(
            what,
            " uses :window_start, which is bound only for a dataset with a "
            "lookback upstream"));
      }
      out.push_back(*start);
    } else if (name == ":keys" && allowed.keys) {
      if (item == nullptr || item->keys.empty()) {
        out.push_back(Param());
      } else {
        out.push_back(KeysJson(item->keys));
      }
    } else {
      return absl::FailedPreconditionError(
          absl::StrCat(what, " uses ", name,
                       ", which is not bound; it may use :partition_start, "
                       ":partition_end, :partition",
                       allowed.partition_key ? " and :partition_key" : ""));
    }
  }
  return out;
}

}  // namespace backfill::sql
