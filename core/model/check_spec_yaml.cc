#include "core/model/check_spec_yaml.h"

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/status_macros.h"
#include "core/model/check_result.h"
#include "core/model/identifier.h"
#include "core/model/quantity_text.h"
#include "core/model/transform_sql.h"

namespace backfill {
namespace {

// The keys each kind of check takes (besides kind, name and severity) and
// which of them are required.
struct CheckKeyRow {
  CheckKind kind;
  std::vector<std::string> keys;
  std::vector<std::string> required;
};
const std::vector<CheckKeyRow>& CheckKeyTable() {
  static const auto* table = new std::vector<CheckKeyRow>{
      {CheckKind::kRowChange, {"max_change"}, {"max_change"}},
      {CheckKind::kMinRows, {"min"}, {"min"}},
      {CheckKind::kMeasureChange,
       {"column", "max_change"},
       {"column", "max_change"}},
      {CheckKind::kReferences,
       {"column", "dataset", "key", "max_orphans"},
       {"column", "dataset", "key"}},
      {CheckKind::kNotNull, {"columns"}, {"columns"}},
      {CheckKind::kAssert, {"sql"}, {"name", "sql"}},
  };
  return *table;
}

bool IsCheckName(std::string_view s) {
  if (s.empty() || s.size() > 128) return false;
  if (!((s[0] >= 'A' && s[0] <= 'Z') || (s[0] >= 'a' && s[0] <= 'z') ||
        s[0] == '_')) {
    return false;
  }
  for (char ch : s) {
    if (!IsIdentifierChar(ch)) return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<CheckSpec> ParseCheckYaml(const YamlFileReader& file,
                                         const YAML::Node& c,
                                         const std::string& where) {
  const std::string cwhere = absl::StrCat("in a check of ", where.substr(3));
  if (!c.IsMap()) {
    return file.Error(c, 1,
                      absl::StrCat("each entry of `checks` ", where,
                                   " must be a map with a `kind`, e.g. {kind: "
                                   "min_rows, min: 1}"));
  }
  CheckSpec spec;
  spec.line = LineOf(c, 1);
  absl::StatusOr<std::optional<std::string>> kind =
      file.Scalar(c, "kind", cwhere, true);
  if (!kind.ok()) return kind.status();
  absl::StatusOr<CheckKind> k = ParseCheckKind(**kind);
  if (!k.ok()) {
    return file.Error(c["kind"], spec.line,
                      absl::StrCat(k.status().message(), " ", cwhere));
  }
  spec.kind = *k;
  const std::string kname = CheckKindName(spec.kind);
  const std::string kwhere =
      absl::StrCat("in the ", kname, " check of ", where.substr(3));
  const CheckKeyRow* keys = nullptr;
  for (const CheckKeyRow& row : CheckKeyTable()) {
    if (row.kind == spec.kind) keys = &row;
  }
  std::set<std::string> allowed = {"kind", "name", "severity"};
  allowed.insert(keys->keys.begin(), keys->keys.end());
  RETURN_IF_ERROR(file.CheckKeys(
      c, allowed, kwhere,
      absl::StrCat("kind, name, severity, ", absl::StrJoin(keys->keys, ", "),
                   " (a ", kname, " check takes ",
                   absl::StrJoin(keys->keys, ", "), ")")));
  for (const std::string& required : keys->required) {
    const YAML::Node v = c[required];
    if (!v || v.IsNull()) {
      return file.Error(c, spec.line,
                        absl::StrCat("missing `", required, ":` ", kwhere));
    }
  }
  auto text = [&](const char* key) -> absl::StatusOr<std::string> {
    absl::StatusOr<std::optional<std::string>> v =
        file.Scalar(c, key, kwhere, false);
    if (!v.ok()) return v.status();
    return v->value_or("");
  };
  auto whole = [&](const char* key, int64_t* out) -> absl::Status {
    ASSIGN_OR_RETURN(std::string v, text(key));
    if (v.empty()) return absl::OkStatus();
    int64_t n = 0;
    if (!absl::SimpleAtoi(v, &n) || n < 0 || n > 1000000000000) {
      return file.Error(c[key], spec.line,
                        absl::StrCat("`", key, "` ", kwhere, " is \"", v,
                                     "\"; expected a whole number from 0 to "
                                     "1000000000000"));
    }
    *out = n;
    return absl::OkStatus();
  };
  ASSIGN_OR_RETURN(spec.name, text("name"));
  if (c["name"] && !IsCheckName(spec.name)) {
    return file.Error(c["name"], spec.line,
                      absl::StrCat("check name \"", spec.name, "\" ", kwhere,
                                   " must be an identifier "
                                   "([A-Za-z_][A-Za-z0-9_]*, at most 128 "
                                   "characters)"));
  }
  ASSIGN_OR_RETURN(std::string severity, text("severity"));
  if (!severity.empty()) {
    absl::StatusOr<CheckSeverity> sev = ParseCheckSeverity(severity);
    if (!sev.ok()) {
      return file.Error(c["severity"], spec.line,
                        absl::StrCat(sev.status().message(), " ", kwhere));
    }
    spec.severity = *sev;
  }
  ASSIGN_OR_RETURN(spec.max_change_text, text("max_change"));
  if (!spec.max_change_text.empty()) {
    std::optional<double> pct = ParsePercentText(spec.max_change_text);
    if (!pct) {
      return file.Error(
          c["max_change"], spec.line,
          absl::StrCat("`max_change` ", kwhere, " is \"", spec.max_change_text,
                       "\"; expected a percentage from 0% to "
                       "1000000%, such as 20% or 12.5% (a bare "
                       "number is ambiguous and not accepted)"));
    }
    spec.max_change = *pct;
  }
  RETURN_IF_ERROR(whole("min", &spec.min));
  RETURN_IF_ERROR(whole("max_orphans", &spec.max_orphans));
  ASSIGN_OR_RETURN(spec.column, text("column"));
  ASSIGN_OR_RETURN(spec.dataset, text("dataset"));
  ASSIGN_OR_RETURN(spec.key, text("key"));
  if (const YAML::Node cols = c["columns"]; cols && !cols.IsNull()) {
    if (!cols.IsSequence() || cols.size() == 0) {
      return file.Error(cols, spec.line,
                        absl::StrCat("`columns` ", kwhere,
                                     " must be a non-empty list of contract "
                                     "columns, e.g. [region]"));
    }
    for (const YAML::Node& col : cols) {
      if (!col.IsScalar()) {
        return file.Error(col, spec.line,
                          absl::StrCat("each of `columns` ", kwhere,
                                       " must be a column name"));
      }
      spec.columns.push_back(col.Scalar());
    }
  }
  ASSIGN_OR_RETURN(std::string sql, text("sql"));
  if (spec.kind == CheckKind::kAssert) {
    absl::StatusOr<std::string> canonical = CanonicalTransform(sql);
    if (!canonical.ok()) {
      return file.Error(
          c["sql"], spec.line,
          absl::StrCat("`sql` ", kwhere, ": ", canonical.status().message()));
    }
    spec.sql = *std::move(canonical);
  }
  return spec;
}

}  // namespace backfill
