// Reads pipeline files (YAML, see docs/pipeline-spec.md) into a Catalog.
//
// Every error names the file, the line and the reason: unknown keys, missing
// required keys, bad grains or mappings, duplicate names, missing upstreams,
// cycles. yaml-cpp exceptions never escape. Stateless; thread-safe.

#ifndef BACKFILL_CORE_MODEL_PIPELINE_LOADER_H_
#define BACKFILL_CORE_MODEL_PIPELINE_LOADER_H_

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/model/catalog.h"

namespace backfill {

// Loads every `*.yaml` file of `dir` (sorted by name; `*.yml` too). A
// directory with no pipeline file is an error. At most one file may set
// `warehouse:`.
absl::StatusOr<Catalog> LoadPipelineDirectory(const std::string& dir);

// Loads from in-memory (file name, YAML text) pairs; for tests and tools.
absl::StatusOr<Catalog> LoadPipelineTexts(
    const std::vector<std::pair<std::string, std::string>>& files);

}  // namespace backfill

#endif  // BACKFILL_CORE_MODEL_PIPELINE_LOADER_H_
