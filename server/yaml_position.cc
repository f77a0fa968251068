#include "server/yaml_position.h"

#include "absl/strings/str_cat.h"

namespace backfill {

std::string YamlPosition(const std::string& source, const YAML::Node& node) {
  const YAML::Mark mark = node.Mark();
  if (mark.is_null() || mark.line < 0) return absl::StrCat(source, ": ");
  return absl::StrCat(source, ":", mark.line + 1, ": ");
}

}  // namespace backfill
