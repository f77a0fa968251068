#include "core/model/transform_parameters.h"

#include "absl/strings/str_cat.h"
#include "core/base/sv.h"
#include "core/model/upstream_mapping.h"

namespace backfill {
namespace {

constexpr char kAlwaysBound[] =
    "only :partition_start, :partition_end and :partition are bound";

}  // namespace

ExtraParameters ExtraParametersOf(const DatasetSpec& dataset) {
  ExtraParameters extra;
  extra.window_start = MaxLookback(dataset) > 0;
  extra.keys = !dataset.entity_key.empty();
  extra.partition_key = dataset.two_dimensional();
  return extra;
}

std::string ParameterProblem(std::string_view name,
                             const ExtraParameters& extra,
                             std::string_view what) {
  if (name == ":partition_start" || name == ":partition_end" ||
      name == ":partition") {
    return "";
  }
  struct Extra {
    const char* name;
    bool allowed;
    const char* needs;  // what a dataset declares to get it
  };
  const Extra extras[] = {
      {":window_start", extra.window_start, "a `lookback` upstream"},
      {":keys", extra.keys, "an `entity_key`"},
      {":partition_key", extra.partition_key,
       "partitioning by time x key (`key_column:`)"},
  };
  std::string also;
  for (const Extra& e : extras) {
    if (e.allowed) absl::StrAppend(&also, "; ", e.name, " is bound too");
  }
  for (const Extra& e : extras) {
    if (name != e.name) continue;
    if (e.allowed) return "";
    return absl::StrCat("the ", Sv(what), " uses the parameter ", Sv(name),
                        ", which is bound only for a dataset with ", e.needs,
                        "; ", kAlwaysBound, " here", also);
  }
  return absl::StrCat("the ", Sv(what), " uses the parameter ", Sv(name), "; ",
                      kAlwaysBound, also);
}

}  // namespace backfill
