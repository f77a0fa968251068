// YamlPosition: the prefix of an error about a node of a YAML file the
// daemon reads (the token and basic auth files): "tokens.yaml:4: " for a
// node with a position, "tokens.yaml: " otherwise.
//
// A pure function; thread-safe.

#ifndef BACKFILL_SERVER_YAML_POSITION_H_
#define BACKFILL_SERVER_YAML_POSITION_H_

#include <string>

#include "yaml-cpp/yaml.h"

namespace backfill {

std::string YamlPosition(const std::string& source, const YAML::Node& node);

}  // namespace backfill

#endif  // BACKFILL_SERVER_YAML_POSITION_H_
