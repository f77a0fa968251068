// Check spec YAML: one entry of a dataset's `checks:` list in a pipeline
// file (docs/pipeline-spec.md#checks) read into a CheckSpec — the keys each
// kind of check takes and requires, a check's name, its severity, a
// percentage ("20%", "12.5%"; a bare number is refused), whole numbers,
// column lists, and an assertion's SQL in canonical form
// (transform_sql.h). Errors are INVALID_ARGUMENT "FILE:LINE: reason", as
// the pipeline loader's.
//
// It names yaml-cpp types, a private dependency of the core: only .cc files
// of core/model include it. A stateless function; thread-safe.

#ifndef BACKFILL_CORE_MODEL_CHECK_SPEC_YAML_H_
#define BACKFILL_CORE_MODEL_CHECK_SPEC_YAML_H_

#include <yaml-cpp/yaml.h>

#include <string>

#include "absl/status/statusor.h"
#include "core/model/catalog.h"
#include "core/model/pipeline_yaml.h"

namespace backfill {

// The check `c` of the dataset `where` names (`in dataset "daily_revenue"`),
// read from `file`.
absl::StatusOr<CheckSpec> ParseCheckYaml(const YamlFileReader& file,
                                         const YAML::Node& c,
                                         const std::string& where);

}  // namespace backfill

#endif  // BACKFILL_CORE_MODEL_CHECK_SPEC_YAML_H_
