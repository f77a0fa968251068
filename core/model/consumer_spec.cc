#include "core/model/consumer_spec.h"

#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/time/time.h"
#include "core/base/status_macros.h"
#include "core/base/sv.h"
#include "core/model/identifier.h"
#include "core/model/pipeline_yaml.h"
#include "core/model/transform_parameters.h"
#include "core/model/transform_sql.h"

namespace backfill {
namespace {

constexpr char kPlaceholder[] = "{partition}";
constexpr size_t kMaxUrl = 2048;
constexpr size_t kMaxArgs = 64;
constexpr size_t kMaxHeaders = 32;

bool IsHeaderName(std::string_view s) {
  if (s.empty() || s.size() > 128) return false;
  for (char c : s) {
    if (!(absl::ascii_isalnum(c) || c == '-' || c == '_')) return false;
  }
  return true;
}

bool HasControl(std::string_view s) {
  for (char c : s) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return true;
  }
  return false;
}

// CR, LF or NUL: what would end a header line early.
bool HasLineBreak(std::string_view s) {
  return s.find_first_of(std::string_view("\r\n\0", 3)) !=
         std::string_view::npos;
}

// The names of the ${NAME} references of `value`; false when a `${` does
// not start a well-formed reference.
bool References(const std::string& value, std::vector<std::string>* names) {
  size_t pos = 0;
  while ((pos = value.find("${", pos)) != std::string::npos) {
    const size_t end = value.find('}', pos + 2);
    if (end == std::string::npos) return false;
    const std::string name = value.substr(pos + 2, end - pos - 2);
    if (!IsIdentifier(name)) return false;
    names->push_back(name);
    pos = end + 1;
  }
  return true;
}

bool IsShell(const std::string& program) {
  const size_t slash = program.rfind('/');
  const std::string base =
      slash == std::string::npos ? program : program.substr(slash + 1);
  static const std::set<std::string> kShells = {
      "sh", "bash", "dash", "zsh", "ksh", "csh", "tcsh", "fish", "ash"};
  return kShells.count(base) > 0;
}

class ConsumerListParser {
 public:
  ConsumerListParser(const std::string& file, const std::string& where,
                     bool partition_key, bool partitioned)
      : file_(file),
        where_(where),
        partition_key_(partition_key),
        partitioned_(partitioned) {}

  absl::StatusOr<std::vector<ConsumerSpec>> List(const YAML::Node& list) {
    if (!list.IsSequence()) {
      return Error(list, absl::StrCat("`consumers` ", where_,
                                      " must be a list of consumers, each a "
                                      "map with `name` and `kind`"));
    }
    if (list.size() > static_cast<size_t>(kMaxConsumersPerDataset)) {
      return Error(
          list, absl::StrCat("`consumers` ", where_, " lists ", list.size(),
                             " consumers; at most ", kMaxConsumersPerDataset));
    }
    std::vector<ConsumerSpec> out;
    std::set<std::string> names;
    for (const YAML::Node& c : list) {
      absl::StatusOr<ConsumerSpec> spec = One(c);
      if (!spec.ok()) return spec.status();
      if (!names.insert(absl::AsciiStrToLower(spec->name)).second) {
        return Error(c,
                     absl::StrCat("consumer name \"", spec->name, "\" ", where_,
                                  " is used twice; each consumer of a "
                                  "dataset needs its own name"));
      }
      out.push_back(*std::move(spec));
    }
    return out;
  }

 private:
  absl::Status Error(const YAML::Node& node, std::string_view reason,
                     int fallback = 1) const {
    return absl::InvalidArgumentError(
        absl::StrCat(file_, ":", LineOf(node, fallback), ": ", Sv(reason)));
  }

  absl::Status CheckKeys(const YAML::Node& map,
                         const std::set<std::string>& allowed,
                         const std::string& in) const {
    std::set<std::string> seen;
    for (const auto& kv : map) {
      if (!kv.first.IsScalar()) {
        return Error(kv.first, absl::StrCat("keys must be names ", in));
      }
      const std::string& name = kv.first.Scalar();
      if (!allowed.count(name)) {
        return Error(kv.first, absl::StrCat("unknown key \"", name, "\" ", in,
                                            "; expected one of: ",
                                            absl::StrJoin(allowed, ", ")));
      }
      if (!seen.insert(name).second) {
        return Error(kv.first,
                     absl::StrCat("duplicate key \"", name, "\" ", in));
      }
    }
    return absl::OkStatus();
  }

  // A scalar value; "" when absent (and not required).
  absl::StatusOr<std::string> Text(const YAML::Node& map, const char* key,
                                   const std::string& in, bool required) const {
    const YAML::Node v = map[key];
    if (!v || v.IsNull()) {
      if (required) {
        return Error(map, absl::StrCat("missing `", key, ":` ", in));
      }
      return std::string();
    }
    if (!v.IsScalar()) {
      return Error(v, absl::StrCat("`", key, "` ", in,
                                   " must be a single value, not a list or "
                                   "map"));
    }
    return v.Scalar();
  }

  absl::StatusOr<std::vector<std::string>> Command(
      const YAML::Node& v, const std::string& in) const {
    if (!v.IsSequence() || v.size() == 0) {
      return Error(v, absl::StrCat("`command` ", in,
                                   " must be a non-empty list: the program "
                                   "and its arguments, e.g. [/usr/local/bin/"
                                   "flush-cache, --all] (no shell runs it)"));
    }
    if (v.size() > kMaxArgs) {
      return Error(v, absl::StrCat("`command` ", in, " has ", v.size(),
                                   " elements; at most ", kMaxArgs));
    }
    std::vector<std::string> argv;
    for (const YAML::Node& a : v) {
      if (!a.IsScalar()) {
        return Error(a, absl::StrCat("each element of `command` ", in,
                                     " must be one argument (text)"));
      }
      if (a.Scalar().find('\0') != std::string::npos) {
        return Error(a, absl::StrCat("an argument of `command` ", in,
                                     " holds a NUL byte"));
      }
      argv.push_back(a.Scalar());
    }
    if (argv[0].empty()) {
      return Error(v, absl::StrCat("`command` ", in,
                                   " names no program (its first element is "
                                   "empty)"));
    }
    if (IsShell(argv[0])) {
      return Error(
          v, absl::StrCat("`command` ", in, " runs the shell \"", argv[0],
                          "\"; consumers never run through a shell: name the "
                          "program (or script, which runs with its #! line) "
                          "and its arguments"));
    }
    return argv;
  }

  absl::StatusOr<std::string> Url(const YAML::Node& map, const std::string& in,
                                  bool probe) const {
    ASSIGN_OR_RETURN(std::string url, Text(map, "url", in, true));
    const std::string lower = absl::AsciiStrToLower(url);
    if (!absl::StartsWith(lower, "http://") &&
        !absl::StartsWith(lower, "https://")) {
      return Error(map["url"], absl::StrCat("`url` ", in, " is \"", url,
                                            "\"; expected an http:// or "
                                            "https:// URL"));
    }
    if (url.size() > kMaxUrl || HasControl(url) ||
        url.find(' ') != std::string::npos) {
      return Error(map["url"],
                   absl::StrCat("`url` ", in, " must be at most ", kMaxUrl,
                                " characters without spaces or control "
                                "characters"));
    }
    // No user:password@ in the authority: that would be a secret in the
    // file, shown wherever the URL is (listings, messages).
    const size_t authority = url.find("://") + 3;
    const size_t authority_end = url.find_first_of("/?#", authority);
    if (url.substr(authority, authority_end == std::string::npos
                                  ? std::string::npos
                                  : authority_end - authority)
            .find('@') != std::string::npos) {
      return Error(map["url"],
                   absl::StrCat("`url` ", in,
                                " holds a user name or password (user@host); "
                                "credentials never go in the file: send "
                                "them in `headers` from an environment "
                                "variable, e.g. Authorization: \"Basic "
                                "${CACHE_AUTH}\""));
    }
    // `{partition}` is the only placeholder.
    std::string rest = absl::StrReplaceAll(url, {{kPlaceholder, ""}});
    if (rest.find('{') != std::string::npos ||
        rest.find('}') != std::string::npos) {
      return Error(map["url"], absl::StrCat("`url` ", in, " is \"", url,
                                            "\"; the only placeholder is "
                                            "{partition}"));
    }
    const bool has = url.find(kPlaceholder) != std::string::npos;
    if (!probe && has) {
      return Error(map["url"],
                   absl::StrCat("`url` ", in,
                                " holds {partition}; an invalidation names "
                                "its partitions in the JSON body"));
    }
    if (probe && partitioned_ && !has) {
      return Error(map["url"],
                   absl::StrCat("`url` ", in,
                                " must say where the partition goes with "
                                "{partition}, e.g. ...?day={partition}"));
    }
    return url;
  }

  absl::StatusOr<ConsumerSpec> One(const YAML::Node& c) const {
    if (!c.IsMap()) {
      return Error(c, absl::StrCat("each entry of `consumers` ", where_,
                                   " must be a map with `name`, `kind`, "
                                   "`invalidate`, `probe` and `expect`"));
    }
    ConsumerSpec spec;
    spec.line = LineOf(c, 1);
    std::string in = absl::StrCat("in a consumer of ", where_.substr(3));
    if (const YAML::Node n = c["name"]; n && n.IsScalar()) {
      in = absl::StrCat("in consumer \"", n.Scalar(), "\" of ",
                        where_.substr(3));
    }
    RETURN_IF_ERROR(CheckKeys(
        c,
        {"name", "kind", "invalidate", "probe", "expect", "timeout", "headers"},
        in));
    ASSIGN_OR_RETURN(spec.name, Text(c, "name", in, true));
    if (!IsIdentifier(spec.name)) {
      return Error(c["name"],
                   absl::StrCat("consumer name \"", spec.name, "\" ", where_,
                                " must be an identifier ([A-Za-z_]"
                                "[A-Za-z0-9_]*, at most 128 characters)"));
    }
    ASSIGN_OR_RETURN(std::string kind, Text(c, "kind", in, true));
    if (kind == "http") {
      spec.kind = ConsumerKind::kHttp;
    } else if (kind == "command") {
      spec.kind = ConsumerKind::kCommand;
    } else {
      return Error(c["kind"], absl::StrCat("`kind` ", in, " is \"", kind,
                                           "\"; expected http or command"));
    }
    const bool http = spec.kind == ConsumerKind::kHttp;

    // invalidate
    const YAML::Node inv = c["invalidate"];
    const std::string iin = absl::StrCat("in the invalidate of ", in.substr(3));
    if (!inv || !inv.IsMap()) {
      return Error(inv ? inv : c,
                   absl::StrCat("`invalidate` ", in, " must be a map: ",
                                http ? "{url: ...}" : "{command: [...]}"),
                   spec.line);
    }
    RETURN_IF_ERROR(CheckKeys(inv, {http ? "url" : "command"}, iin));
    if (http) {
      ASSIGN_OR_RETURN(spec.invalidate_url, Url(inv, iin, false));
    } else {
      if (!inv["command"]) {
        return Error(inv, absl::StrCat("missing `command:` ", iin));
      }
      ASSIGN_OR_RETURN(spec.invalidate_command, Command(inv["command"], iin));
    }

    // probe
    const YAML::Node probe = c["probe"];
    const std::string pin = absl::StrCat("in the probe of ", in.substr(3));
    if (!probe || !probe.IsMap()) {
      return Error(probe ? probe : c,
                   absl::StrCat("`probe` ", in, " must be a map: ",
                                http ? "{url: ..., field: ...}"
                                     : "{command: [...], field: ...}"),
                   spec.line);
    }
    RETURN_IF_ERROR(
        CheckKeys(probe, {http ? "url" : "command", "field", "sample"}, pin));
    if (http) {
      ASSIGN_OR_RETURN(spec.probe_url, Url(probe, pin, true));
    } else {
      if (!probe["command"]) {
        return Error(probe, absl::StrCat("missing `command:` ", pin));
      }
      ASSIGN_OR_RETURN(spec.probe_command, Command(probe["command"], pin));
    }
    ASSIGN_OR_RETURN(spec.field, Text(probe, "field", pin, true));
    if (spec.field.empty() || spec.field.size() > 256 ||
        HasControl(spec.field)) {
      return Error(probe["field"],
                   absl::StrCat("`field` ", pin,
                                " must name a top-level field of the JSON "
                                "answer (1 to 256 characters)"));
    }
    ASSIGN_OR_RETURN(std::string sample, Text(probe, "sample", pin, false));
    if (!sample.empty()) {
      int n = 0;
      if (!absl::SimpleAtoi(sample, &n) || n < 1 || n > kMaxConsumerSample) {
        return Error(probe["sample"],
                     absl::StrCat("`sample` ", pin, " is \"", sample,
                                  "\"; expected a whole number of "
                                  "partitions from 1 to ",
                                  kMaxConsumerSample));
      }
      spec.sample = n;
    }

    // headers
    if (const YAML::Node h = c["headers"]; h && !h.IsNull()) {
      if (!http) {
        return Error(h, absl::StrCat("`headers` ", in,
                                     " is only allowed with kind http"));
      }
      if (!h.IsMap()) {
        return Error(h, absl::StrCat("`headers` ", in,
                                     " must be a map of header names to "
                                     "values, e.g. {Authorization: \"Bearer "
                                     "${CACHE_TOKEN}\"}"));
      }
      if (h.size() > kMaxHeaders) {
        return Error(h, absl::StrCat("`headers` ", in, " has more than ",
                                     kMaxHeaders, " entries"));
      }
      std::set<std::string> seen;
      for (const auto& kv : h) {
        if (!kv.first.IsScalar() || !kv.second.IsScalar()) {
          return Error(kv.first, absl::StrCat("each entry of `headers` ", in,
                                              " must be NAME: VALUE"));
        }
        const std::string name = kv.first.Scalar();
        const std::string value = kv.second.Scalar();
        const std::string lower = absl::AsciiStrToLower(name);
        if (!IsHeaderName(name)) {
          return Error(kv.first, absl::StrCat("header name \"", name, "\" ", in,
                                              " must be letters, digits, - "
                                              "and _"));
        }
        if (lower == "content-type" || lower == "content-length" ||
            lower == "host" || lower == "transfer-encoding") {
          return Error(kv.first,
                       absl::StrCat("header ", name, " ", in,
                                    " is set by backfilld and cannot be "
                                    "declared"));
        }
        if (!seen.insert(lower).second) {
          return Error(kv.first, absl::StrCat("header ", name, " ", in,
                                              " is declared twice"));
        }
        std::vector<std::string> vars;
        if (HasControl(value) || !References(value, &vars)) {
          return Error(kv.second,
                       absl::StrCat("the value of header ", name, " ", in,
                                    " must be text without control "
                                    "characters; environment variables are "
                                    "referenced as ${NAME}"));
        }
        for (const std::string& var : vars) {
          if (std::getenv(var.c_str()) == nullptr) {
            return Error(
                kv.second,
                absl::StrCat("header ", name, " ", in,
                             " references the environment variable ", var,
                             ", which is not set in backfilld's "
                             "environment; set it (secrets belong "
                             "in the environment, never in the "
                             "file)"));
          }
        }
        spec.headers.emplace_back(name, value);
      }
    }

    // expect
    const YAML::Node e = c["expect"];
    ASSIGN_OR_RETURN(std::string expect, Text(c, "expect", in, true));
    spec.expect_line = LineOf(e, spec.line);
    ExtraParameters extra;
    extra.partition_key = partition_key_;
    absl::StatusOr<std::string> canonical = CanonicalTransform(expect, extra);
    if (!canonical.ok()) {
      return Error(
          e, absl::StrCat("`expect` ", in, ": ", canonical.status().message()));
    }
    spec.expect = *std::move(canonical);

    // timeout
    ASSIGN_OR_RETURN(std::string timeout, Text(c, "timeout", in, false));
    if (!timeout.empty()) {
      absl::Duration d;
      if (!absl::ParseDuration(timeout, &d) || d < absl::Seconds(1) ||
          d > kMaxConsumerTimeout) {
        return Error(c["timeout"],
                     absl::StrCat("`timeout` ", in, " is \"", timeout,
                                  "\"; expected a duration from 1s to 10m, "
                                  "such as 30s, 2m or 1m30s"));
      }
      spec.timeout = d;
    }
    return spec;
  }

  const std::string file_;
  const std::string where_;
  const bool partition_key_;
  const bool partitioned_;
};

}  // namespace

const char* ConsumerKindName(ConsumerKind kind) {
  return kind == ConsumerKind::kHttp ? "http" : "command";
}

absl::StatusOr<std::vector<ConsumerSpec>> ParseConsumers(
    const YAML::Node& node, const std::string& file, const std::string& where,
    bool partition_key, bool partitioned) {
  return ConsumerListParser(file, where, partition_key, partitioned).List(node);
}

absl::StatusOr<std::string> ExpandEnvironment(const std::string& value) {
  std::string out;
  size_t pos = 0;
  while (true) {
    const size_t at = value.find("${", pos);
    if (at == std::string::npos) break;
    const size_t end = value.find('}', at + 2);
    if (end == std::string::npos) break;
    const std::string name = value.substr(at + 2, end - at - 2);
    const char* v = std::getenv(name.c_str());
    if (v == nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat("the environment variable ", name,
                       " is not set in backfilld's environment"));
    }
    out.append(value, pos, at - pos);
    out += v;
    pos = end + 1;
  }
  out.append(value, pos, std::string::npos);
  return out;
}

absl::StatusOr<std::vector<std::pair<std::string, std::string>>>
ExpandedHeaders(const ConsumerSpec& consumer) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [name, value] : consumer.headers) {
    absl::StatusOr<std::string> v = ExpandEnvironment(value);
    if (!v.ok()) {
      return absl::Status(
          v.status().code(),
          absl::StrCat("header ", name, ": ", v.status().message()));
    }
    if (HasLineBreak(name) || HasLineBreak(*v)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "header ", name,
          ": its value, once the environment variables it references are "
          "expanded, holds a line break or NUL byte, which would split the "
          "request; remove it from the variable (a trailing newline "
          "included)"));
    }
    out.emplace_back(name, *std::move(v));
  }
  return out;
}

std::string ProbeUrl(const ConsumerSpec& consumer,
                     const std::string& partition) {
  std::string encoded;
  for (unsigned char c : partition) {
    if (absl::ascii_isalnum(c) || c == '-' || c == '.' || c == '_' ||
        c == '~') {
      encoded.push_back(static_cast<char>(c));
    } else {
      static const char kHex[] = "0123456789ABCDEF";
      encoded.push_back('%');
      encoded.push_back(kHex[c >> 4]);
      encoded.push_back(kHex[c & 15]);
    }
  }
  return absl::StrReplaceAll(consumer.probe_url, {{kPlaceholder, encoded}});
}

std::vector<std::string> ProbeCommand(const ConsumerSpec& consumer,
                                      const std::string& partition) {
  std::vector<std::string> argv;
  bool placed = false;
  for (const std::string& a : consumer.probe_command) {
    placed = placed || a.find(kPlaceholder) != std::string::npos;
    argv.push_back(absl::StrReplaceAll(a, {{kPlaceholder, partition}}));
  }
  if (!placed) argv.push_back(partition);
  return argv;
}

std::vector<std::string> InvalidateCommand(
    const ConsumerSpec& consumer, const std::string& dataset,
    const std::string& job_id, const std::vector<std::string>& partitions) {
  std::vector<std::string> argv = consumer.invalidate_command;
  argv.push_back(dataset);
  argv.push_back(job_id);
  argv.insert(argv.end(), partitions.begin(), partitions.end());
  return argv;
}

std::string DescribeInvalidate(const ConsumerSpec& consumer) {
  if (consumer.kind == ConsumerKind::kHttp) {
    return absl::StrCat("POST ", consumer.invalidate_url);
  }
  return absl::StrJoin(consumer.invalidate_command, " ");
}

}  // namespace backfill
