// Pipeline YAML: how the parsers of a pipeline file read its YAML — the line
// of a node, where each document of a stream starts, and YamlFileReader,
// which words what is wrong as INVALID_ARGUMENT "FILE:LINE: reason", checks
// a map's keys and reads its scalar values. The pipeline loader
// (pipeline_loader.h) and the reader of a dataset's `checks:`
// (check_spec_yaml.h) share it.
//
// It names yaml-cpp types, a private dependency of the core: only .cc files
// of core/model include it. Nothing here throws, but YamlDocumentStarts
// passes on what yaml-cpp's parser throws. A YamlFileReader holds its file's
// name and nothing else; its methods are const and thread-safe.

#ifndef BACKFILL_CORE_MODEL_PIPELINE_YAML_H_
#define BACKFILL_CORE_MODEL_PIPELINE_YAML_H_

#include <yaml-cpp/yaml.h>

#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace backfill {

// The 1-based line of `node`, or `fallback` when it has none.
int LineOf(const YAML::Node& node, int fallback);

// The starts of the documents of `text`. Not YAML::LoadAll: on some
// malformed streams (a lone ",") the yaml-cpp of Debian 12 (0.7.0) returns
// an empty document, then another at the same place, forever, allocating
// as it goes, and LoadAll never returns. A document that starts where the
// one before it did is that case: INVALID_ARGUMENT (with `file`). Throws
// what yaml-cpp's parser throws.
absl::StatusOr<std::vector<YAML::Mark>> YamlDocumentStarts(
    const std::string& file, const std::string& text);

class YamlFileReader {
 public:
  explicit YamlFileReader(std::string file) : file_(std::move(file)) {}

  // The file's name, as errors give it.
  const std::string& file() const { return file_; }

  // INVALID_ARGUMENT "FILE:LINE: reason".
  absl::Status ErrorAt(int line, std::string_view reason) const;
  // The same at `node`'s line (`fallback_line` when it has none).
  absl::Status Error(const YAML::Node& node, int fallback_line,
                     std::string_view reason) const;

  // Every key of `map` must be a scalar in `allowed`, at most once. `where`
  // ends the error (`in dataset "orders"`), `expected` lists the keys.
  absl::Status CheckKeys(const YAML::Node& map,
                         const std::set<std::string>& allowed,
                         std::string_view where,
                         std::string_view expected) const;

  // A required or optional scalar value (nullopt: optional and absent or
  // null).
  absl::StatusOr<std::optional<std::string>> Scalar(const YAML::Node& map,
                                                    const char* key,
                                                    std::string_view where,
                                                    bool required) const;

 private:
  std::string file_;
};

}  // namespace backfill

#endif  // BACKFILL_CORE_MODEL_PIPELINE_YAML_H_
