#include "core/model/pipeline_yaml.h"

#include <yaml-cpp/eventhandler.h>

#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/base/sv.h"

namespace backfill {
namespace {

// Where each YAML document of a stream starts (events of yaml-cpp's
// parser; everything but the start of a document is ignored).
class DocumentStarts : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark& mark) override {
    starts_.push_back(mark);
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}

  const std::vector<YAML::Mark>& starts() const { return starts_; }

 private:
  std::vector<YAML::Mark> starts_;
};

}  // namespace

int LineOf(const YAML::Node& node, int fallback) {
  const YAML::Mark mark = node.Mark();
  if (mark.is_null() || mark.line < 0) return fallback;
  return mark.line + 1;
}

absl::StatusOr<std::vector<YAML::Mark>> YamlDocumentStarts(
    const std::string& file, const std::string& text) {
  std::istringstream in(text);
  YAML::Parser parser(in);
  DocumentStarts documents;
  while (parser.HandleNextDocument(documents)) {
    const std::vector<YAML::Mark>& starts = documents.starts();
    const size_t n = starts.size();
    if (n >= 2 && starts[n - 1].pos == starts[n - 2].pos) {
      return absl::InvalidArgumentError(absl::StrCat(
          file, ":", starts[n - 1].line + 1,
          ": invalid YAML: no node can be read at line ",
          starts[n - 1].line + 1, ", column ", starts[n - 1].column + 1));
    }
  }
  return documents.starts();
}

absl::Status YamlFileReader::ErrorAt(int line, std::string_view reason) const {
  return absl::InvalidArgumentError(
      absl::StrCat(file_, ":", line, ": ", Sv(reason)));
}

absl::Status YamlFileReader::Error(const YAML::Node& node, int fallback_line,
                                   std::string_view reason) const {
  return ErrorAt(LineOf(node, fallback_line), reason);
}

absl::Status YamlFileReader::CheckKeys(const YAML::Node& map,
                                       const std::set<std::string>& allowed,
                                       std::string_view where,
                                       std::string_view expected) const {
  std::set<std::string> seen;
  for (const auto& kv : map) {
    const YAML::Node& key = kv.first;
    if (!key.IsScalar()) {
      return Error(key, LineOf(map, 1),
                   absl::StrCat("keys must be names ", Sv(where)));
    }
    const std::string& name = key.Scalar();
    if (allowed.count(name) == 0) {
      return Error(key, LineOf(map, 1),
                   absl::StrCat("unknown key \"", name, "\" ", Sv(where),
                                "; expected one of: ", Sv(expected)));
    }
    if (!seen.insert(name).second) {
      return Error(key, LineOf(map, 1),
                   absl::StrCat("duplicate key \"", name, "\" ", Sv(where)));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<std::string>> YamlFileReader::Scalar(
    const YAML::Node& map, const char* key, std::string_view where,
    bool required) const {
  const YAML::Node v = map[key];
  if (!v || v.IsNull()) {
    if (required) {
      return Error(v ? v : map, LineOf(map, 1),
                   absl::StrCat("missing `", key, ":` ", Sv(where)));
    }
    return std::optional<std::string>();
  }
  if (!v.IsScalar()) {
    return Error(v, LineOf(map, 1),
                 absl::StrCat("`", key, "` ", Sv(where),
                              " must be a single value, not a list or map"));
  }
  return std::optional<std::string>(v.Scalar());
}

}  // namespace backfill
