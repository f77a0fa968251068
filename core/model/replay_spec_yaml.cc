#include "core/model/replay_spec_yaml.h"

#include <optional>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/civil_time.h"
#include "core/base/status_macros.h"
#include "core/model/quantity_text.h"

namespace backfill {
namespace {

constexpr char kReplayKeys[] =
    "on, window, settle, max_cost, approval, check_every";
constexpr char kDurationForm[] =
    "a whole number of seconds, minutes, hours or days such as 90d, 12h, 30m "
    "or 45s";

// The duration under `key` of `map`, from `least` to `most`; nullopt when
// absent (an error when `required`).
absl::StatusOr<std::optional<absl::Duration>> DurationAt(
    const YamlFileReader& file, const YAML::Node& map, const char* key,
    const std::string& in, bool required, absl::Duration least,
    absl::Duration most) {
  ASSIGN_OR_RETURN(std::optional<std::string> text,
                   file.Scalar(map, key, in, required));
  if (!text) return std::optional<absl::Duration>();
  const std::optional<absl::Duration> d = ParseDurationText(*text);
  if (!d) {
    return file.Error(map[key], LineOf(map, 1),
                      absl::StrCat("`", key, "` ", in, " is \"", *text,
                                   "\"; expected ", kDurationForm));
  }
  if (*d < least || *d > most) {
    return file.Error(
        map[key], LineOf(map, 1),
        absl::StrCat("`", key, "` ", in, " is \"", *text, "\"; expected from ",
                     FormatDurationText(least), " to ",
                     FormatDurationText(most)));
  }
  return d;
}

}  // namespace

absl::StatusOr<ReplayPolicy> ParseReplayYaml(const YamlFileReader& file,
                                             const YAML::Node& r,
                                             const std::string& where) {
  const std::string in =
      absl::StrCat("in the replay policy of ", where.substr(3));
  if (!r.IsMap()) {
    return file.Error(r, 1,
                      absl::StrCat("`replay` ", where,
                                   " must be a map such as {on: "
                                   "[input_change], window: 90d}"));
  }
  RETURN_IF_ERROR(file.CheckKeys(
      r, {"on", "window", "settle", "max_cost", "approval", "check_every"}, in,
      kReplayKeys));
  ReplayPolicy policy;
  policy.line = LineOf(r, 1);

  const YAML::Node on = r["on"];
  if (!on || on.IsNull()) {
    return file.Error(r, policy.line,
                      absl::StrCat("missing `on:` ", in,
                                   "; expected a list of input_change, "
                                   "transform_change"));
  }
  if (!on.IsSequence() || on.size() == 0) {
    return file.Error(on, policy.line,
                      absl::StrCat("`on` ", in,
                                   " must be a list of input_change, "
                                   "transform_change, e.g. [input_change]"));
  }
  for (const YAML::Node& t : on) {
    const std::string name = t.IsScalar() ? t.Scalar() : "";
    bool* flag = nullptr;
    if (name == "input_change") flag = &policy.on_input_change;
    if (name == "transform_change") flag = &policy.on_transform_change;
    if (flag == nullptr) {
      return file.Error(
          t, policy.line,
          absl::StrCat("`on` ", in, " names \"", name,
                       "\"; expected input_change or transform_change"));
    }
    if (*flag) {
      return file.Error(t, policy.line,
                        absl::StrCat("`on` ", in, " names ", name, " twice"));
    }
    *flag = true;
  }

  ASSIGN_OR_RETURN(std::optional<absl::Duration> window,
                   DurationAt(file, r, "window", in, /*required=*/true,
                              absl::Seconds(1), kMaxDurationText));
  policy.window = *window;
  ASSIGN_OR_RETURN(std::optional<absl::Duration> settle,
                   DurationAt(file, r, "settle", in, /*required=*/false,
                              absl::Seconds(1), absl::Hours(24 * 30)));
  policy.settle = settle.value_or(absl::ZeroDuration());
  ASSIGN_OR_RETURN(std::optional<absl::Duration> check_every,
                   DurationAt(file, r, "check_every", in, /*required=*/false,
                              absl::Seconds(1), absl::Hours(24)));
  policy.check_every = check_every.value_or(kDefaultCheckEvery);

  ASSIGN_OR_RETURN(std::optional<std::string> max_cost,
                   file.Scalar(r, "max_cost", in, false));
  if (max_cost) {
    ReplayCostLimit limit;
    limit.text = *max_cost;
    int64_t rows = 0;
    if (const std::optional<double> pct = ParsePercentText(*max_cost)) {
      if (*pct <= 0 || *pct > 1) {
        return file.Error(r["max_cost"], policy.line,
                          absl::StrCat("`max_cost` ", in, " is \"", *max_cost,
                                       "\"; a share of a full reload is "
                                       "above 0% and at most 100%"));
      }
      limit.fraction = *pct;
    } else if (absl::SimpleAtoi(*max_cost, &rows) && rows >= 1 &&
               max_cost->find_first_not_of("0123456789") == std::string::npos) {
      limit.input_rows = static_cast<double>(rows);
    } else {
      return file.Error(
          r["max_cost"], policy.line,
          absl::StrCat("`max_cost` ", in, " is \"", *max_cost,
                       "\"; expected a share of a full reload such as 10% or "
                       "a whole number of input rows such as 2000000"));
    }
    policy.max_cost = limit;
  }

  ASSIGN_OR_RETURN(std::optional<std::string> approval,
                   file.Scalar(r, "approval", in, false));
  if (approval) {
    if (*approval == "required") {
      policy.approval_required = true;
    } else if (*approval != "auto") {
      return file.Error(r["approval"], policy.line,
                        absl::StrCat("`approval` ", in, " is \"", *approval,
                                     "\"; expected auto or required"));
    }
  }
  return policy;
}

absl::StatusOr<FrozenRule> ParseFrozenYaml(const YamlFileReader& file,
                                           const YAML::Node& f,
                                           const std::string& where) {
  const std::string in =
      absl::StrCat("in the frozen rule of ", where.substr(3));
  if (!f.IsMap()) {
    return file.Error(f, 1,
                      absl::StrCat("`frozen` ", where,
                                   " must be a map such as {before: "
                                   "2025-01-01} or {older_than: 35d}"));
  }
  RETURN_IF_ERROR(
      file.CheckKeys(f, {"before", "older_than"}, in, "before, older_than"));
  FrozenRule rule;
  rule.line = LineOf(f, 1);
  ASSIGN_OR_RETURN(std::optional<std::string> before,
                   file.Scalar(f, "before", in, false));
  if (before) {
    absl::CivilDay day;
    // ParseCivilTime also takes "2025-1-1"; the day must be written as
    // partitions are, and read back the same.
    if (before->size() != 10 || !absl::ParseCivilTime(*before, &day) ||
        absl::FormatCivilTime(day) != *before) {
      return file.Error(f["before"], rule.line,
                        absl::StrCat("`before` ", in, " is \"", *before,
                                     "\"; expected a day YYYY-MM-DD such as "
                                     "2025-01-01"));
    }
    rule.before = day;
  }
  ASSIGN_OR_RETURN(std::optional<absl::Duration> older_than,
                   DurationAt(file, f, "older_than", in, /*required=*/false,
                              absl::Seconds(1), kMaxDurationText));
  rule.older_than = older_than.value_or(absl::ZeroDuration());
  if (!rule.before && !older_than) {
    return file.Error(f, rule.line,
                      absl::StrCat("`frozen` ", where,
                                   " needs `before:`, `older_than:` or both"));
  }
  return rule;
}

}  // namespace backfill
