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
#include "core/model/transform_parameters.h"

namespace backfill {

// Loads every `*.yaml` file of `dir` (sorted by name; `*.yml` too). A
// directory with no pipeline file is an error. At most one file may set
// `warehouse:`.
absl::StatusOr<Catalog> LoadPipelineDirectory(const std::string& dir);

// Loads from in-memory (file name, YAML text) pairs; for tests and tools.
absl::StatusOr<Catalog> LoadPipelineTexts(
    const std::vector<std::pair<std::string, std::string>>& files);

// The version of a transform: hex of a 64-bit hash of its text with
// comments removed and runs of whitespace collapsed, so that reformatting
// does not change it.
std::string TransformVersion(std::string_view sql);

// Checks that `sql` is a single SELECT (or WITH ... SELECT) statement whose
// only parameters are :partition_start, :partition_end and :partition
// (in SQLite an unknown parameter would silently bind NULL; positional ?,
// ?NNN and @name, $name, #name parameters are rejected too), and returns it
// up to its last significant character: trimmed, without a trailing ';' or
// the comments after the statement (comments before and inside it stay).
// The result is its own canonical form. Comments, string literals and quoted
// identifiers ("...", `...`, [...]) are understood. Errors are
// INVALID_ARGUMENT with the reason. The parameters `extra` allows are
// accepted too (see transform_parameters.h).

absl::StatusOr<std::string> CanonicalTransform(std::string_view sql,
                                               ExtraParameters extra = {});

}  // namespace backfill

#endif  // BACKFILL_CORE_MODEL_PIPELINE_LOADER_H_
