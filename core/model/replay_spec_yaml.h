// Replay spec YAML: a derived dataset's `replay:` and `frozen:` maps in a
// pipeline file (docs/pipeline-spec.md, "Replay policies and frozen
// periods") read into a ReplayPolicy and a FrozenRule (replay_policy.h):
// the keys each takes and requires, durations ("90d", "30m"), a cost limit
// as a percentage of a full reload ("10%") or a number of input rows, the
// triggers, and a frozen day. Errors are INVALID_ARGUMENT "FILE:LINE:
// reason", as the pipeline loader's. Whether the dataset may declare them
// (derived, partitioned in time) is the loader's to check.
//
// It names yaml-cpp types, a private dependency of the core: only .cc files
// of core/model include it. Stateless functions; thread-safe.

#ifndef BACKFILL_CORE_MODEL_REPLAY_SPEC_YAML_H_
#define BACKFILL_CORE_MODEL_REPLAY_SPEC_YAML_H_

#include <yaml-cpp/yaml.h>

#include <string>

#include "absl/status/statusor.h"
#include "core/model/pipeline_yaml.h"
#include "core/model/replay_policy.h"

namespace backfill {

// The `replay:` map `r` of the dataset `where` names (`in dataset
// "daily_revenue"`), read from `file`.
absl::StatusOr<ReplayPolicy> ParseReplayYaml(const YamlFileReader& file,
                                             const YAML::Node& r,
                                             const std::string& where);

// The `frozen:` map `f` of the dataset `where` names.
absl::StatusOr<FrozenRule> ParseFrozenYaml(const YamlFileReader& file,
                                           const YAML::Node& f,
                                           const std::string& where);

}  // namespace backfill

#endif  // BACKFILL_CORE_MODEL_REPLAY_SPEC_YAML_H_
