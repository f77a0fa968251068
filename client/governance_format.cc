#include "client/governance_format.h"

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "client/cli_terms.h"
#include "client/value_format.h"
#include "client/vocabulary_text.h"
#include "google/protobuf/util/json_util.h"

namespace backfill {
namespace cli {
namespace {

// 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z, the range of
// google.protobuf.Timestamp (and of RFC 3339 years).
constexpr int64_t kMinTimestampSeconds = -62135596800;
constexpr int64_t kMaxTimestampSeconds = 253402300799;

constexpr char kSinceForms[] =
    "use RFC 3339: YYYY-MM-DD, YYYY-MM-DDTHH:MM:SS[.F]Z or "
    "YYYY-MM-DDTHH:MM:SS[.F]+HH:MM (e.g. 2025-03-01T08:00:00Z)";

std::string Where(const std::string& dataset, const std::string& partition) {
  return partition.empty() ? dataset : absl::StrCat(dataset, "/", partition);
}

// "2025-03-01T08:00:00.25Z": seconds, and the fraction when there is one.
std::string FormatTime(const google::protobuf::Timestamp& ts) {
  if (ts.seconds() == 0 && ts.nanos() == 0) return "-";
  absl::Time t =
      absl::FromUnixSeconds(ts.seconds()) + absl::Nanoseconds(ts.nanos());
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E*SZ", t, absl::UTCTimeZone());
}

void Line(std::string* out, absl::string_view label, absl::string_view value) {
  absl::StrAppend(out, "    ", label,
                  std::string(label.size() < 14 ? 14 - label.size() : 1, ' '),
                  value, "\n");
}

std::string FormatDiffSummary(const v1::PartitionDiff& d) {
  if (!d.error().empty()) {
    return absl::StrCat("could not be computed: ", TerminalText(d.error()));
  }
  std::string out = absl::StrCat("+", d.added(), " added, -", d.removed(),
                                 " removed, ~", d.changed(), " changed rows (",
                                 d.rows_before(), " -> ", d.rows_after(), ")");
  for (const v1::MeasureDelta& m : d.measures()) {
    absl::StrAppend(&out, "; ", TerminalText(m.column()), " ",
                    FormatNumber(m.delta(), true), " (",
                    FormatNumber(m.before()), " -> ", FormatNumber(m.after()),
                    ")");
  }
  return out;
}

const char* SeverityWord(v1::CheckSeverity severity) {
  switch (severity) {
    case v1::CHECK_SEVERITY_HOLD:
      return "hold";
    case v1::CHECK_SEVERITY_WARN:
      return "warn";
    default:
      return "error";
  }
}

// A version's check results (PartitionVersion.checks): one line each,
// "NAME: passed", "NAME (SEVERITY): FAILED: observed ...; allowed ...", a
// summary's "NAME (SEVERITY): N of M partitions failed (this partition's
// outcome not kept)"; "(whole dataset, ...)" for a result about the whole
// dataset; a failure's sample rows on lines of their own.
void CheckLines(std::string* out, const v1::PartitionVersion& v) {
  bool first = true;
  for (const v1::CheckResult& c : v.checks()) {
    const std::string name = TerminalText(c.name());
    std::string text;
    if (c.summary()) {
      text = c.partitions_failed() > 0
                 ? absl::StrCat(name, " (", SeverityWord(c.severity()),
                                "): ", c.partitions_failed(), " of ",
                                c.partitions_checked(),
                                " partitions failed (this partition's "
                                "outcome not kept)")
                 : absl::StrCat(name, ": no partition checked");
    } else {
      std::vector<std::string> notes;
      if (c.partition().empty()) notes.push_back("whole dataset");
      if (!c.passed()) notes.push_back(SeverityWord(c.severity()));
      text = notes.empty()
                 ? name
                 : absl::StrCat(name, " (", absl::StrJoin(notes, ", "), ")");
      if (c.passed()) {
        absl::StrAppend(&text, ": passed",
                        c.observed().empty()
                            ? ""
                            : absl::StrCat(": ", TerminalText(c.observed())));
      } else {
        absl::StrAppend(
            &text, ": FAILED: ",
            c.observed().empty()
                ? TerminalText(c.message())
                : absl::StrCat("observed ", TerminalText(c.observed())),
            c.allowed().empty()
                ? ""
                : absl::StrCat("; allowed ", TerminalText(c.allowed())));
      }
    }
    Line(out, first ? "checks" : "", text);
    first = false;
    if (c.passed()) continue;
    for (const std::string& row : c.sample_rows()) {
      Line(out, "", absl::StrCat("  e.g. ", TerminalText(row)));
    }
  }
}

}  // namespace

std::string FormatPartitionHistory(
    const v1::ExplainPartitionResponse& history) {
  const std::string name = TerminalText(
      history.partition().empty()
          ? absl::StrCat(history.dataset(), " (unpartitioned)")
          : absl::StrCat(history.dataset(), " ", history.partition()));
  std::string out;
  if (history.versions().empty()) {
    absl::StrAppend(&out, name,
                    ": never published by backfilld (no lineage recorded)\n");
    return out;
  }
  absl::StrAppend(&out, name, ": ", history.versions_size(),
                  history.versions_size() == 1 ? " version" : " versions",
                  ", newest first\n");
  if (history.stale()) {
    absl::StrAppend(
        &out, "STALE: ", TerminalText(InCliTerms(history.stale_reason())),
        "; recompute it with backfillctl submit ",
        TerminalText(history.dataset()), " --auto --reason \"...\"\n");
  }
  int n = 0;
  for (const v1::PartitionVersion& v : history.versions()) {
    ++n;
    absl::StrAppend(&out, "\n#", n, "  ", FormatTime(v.publish_time()), "  ",
                    TerminalText(v.backfill_id()), "  ", StateName(v.state()),
                    "  ", VersionKindText(v.kind()),
                    n == 1 ? "  (current)" : "", "\n");
    Line(&out, "reason", TerminalText(v.reason()));
    if (!v.ticket().empty()) Line(&out, "ticket", TerminalText(v.ticket()));
    Line(&out,
         v.kind() == v1::VERSION_KIND_ROLLBACK ? "rolled back by"
                                               : "requested by",
         TerminalText(v.requested_by()));
    if (v.has_approval()) {
      Line(&out, "approved by",
           absl::StrCat(TerminalText(v.approval().approved_by()), ": ",
                        TerminalText(v.approval().reason()),
                        v.approval().override_validation()
                            ? " (override of failed validation)"
                            : ""));
    }
    if (!v.keys().empty()) {
      std::vector<std::string> keys;
      for (const std::string& k : v.keys()) keys.push_back(TerminalText(k));
      Line(&out, "keys",
           absl::StrCat("only the rows of entity keys ",
                        absl::StrJoin(keys, ", ")));
    }
    Line(&out, "transform",
         v.transform_version().empty() ? "-"
                                       : TerminalText(v.transform_version()));
    bool first = true;
    for (const v1::InputVersion& in : v.inputs()) {
      Line(
          &out, first ? "inputs" : "",
          absl::StrCat(TerminalText(in.partition().empty()
                                        ? absl::StrCat(in.dataset(), " (whole)")
                                        : Where(in.dataset(), in.partition())),
                       "  ", TerminalText(in.fingerprint()), "  (", in.rows(),
                       " rows)"));
      first = false;
    }
    if (first) Line(&out, "inputs", "-");
    Line(&out, "rows", absl::StrCat(v.rows()));
    Line(&out, "fingerprint", TerminalText(v.output_fingerprint()));
    if (v.has_diff()) Line(&out, "diff", FormatDiffSummary(v.diff()));
    CheckLines(&out, v);
  }
  return out;
}

absl::StatusOr<std::string> AuditEventJsonLine(const v1::AuditEvent& event) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  options.add_whitespace = false;
  std::string out;
  auto status =
      google::protobuf::util::MessageToJsonString(event, &out, options);
  if (!status.ok()) {
    return absl::InternalError(
        absl::StrCat("cannot print JSON: ", status.ToString()));
  }
  out.push_back('\n');
  return out;
}

absl::StatusOr<google::protobuf::Timestamp> ParseSince(absl::string_view text) {
  const std::string s(text);
  const auto digits = [&s](size_t from, size_t n) {
    if (from + n > s.size()) return false;
    for (size_t i = from; i < from + n; ++i) {
      if (!absl::ascii_isdigit(static_cast<unsigned char>(s[i]))) return false;
    }
    return true;
  };
  // The shape first, character by character (ParseTime alone allows a
  // sign, fewer digits or more fraction digits in places): the date, then
  // for a time "THH:MM:SS", an optional fraction of 1 to 9 digits, and "Z"
  // or an offset "+HH:MM" / "-HH:MM".
  bool ok = s.size() >= 10 && digits(0, 4) && s[4] == '-' && digits(5, 2) &&
            s[7] == '-' && digits(8, 2) && s.compare(0, 4, "0000") != 0;
  std::string normalized = s;
  const char* format = "%Y-%m-%d";
  if (ok && s.size() > 10) {
    ok = (s[10] == 'T' || s[10] == 't') && digits(11, 2) && s.size() > 13 &&
         s[13] == ':' && digits(14, 2) && s.size() > 16 && s[16] == ':' &&
         digits(17, 2);
    size_t i = 19;
    if (ok && i < s.size() && s[i] == '.') {
      size_t n = 0;
      while (i + 1 + n < s.size() &&
             absl::ascii_isdigit(static_cast<unsigned char>(s[i + 1 + n]))) {
        ++n;
      }
      ok = n >= 1 && n <= 9;
      i += 1 + n;
    }
    normalized[10] = 'T';
    if (ok && i + 1 == s.size() && (s[i] == 'Z' || s[i] == 'z')) {
      normalized[i] = 'Z';
      format = "%Y-%m-%dT%H:%M:%E*SZ";
    } else if (ok && i + 6 == s.size() && (s[i] == '+' || s[i] == '-') &&
               digits(i + 1, 2) && s[i + 3] == ':' && digits(i + 4, 2)) {
      format = "%Y-%m-%dT%H:%M:%E*S%Ez";
    } else {
      ok = false;
    }
  }
  absl::Time t;
  std::string error;
  ok = ok &&
       absl::ParseTime(format, normalized, absl::UTCTimeZone(), &t, &error);
  // What a google.protobuf.Timestamp holds (an offset can move a time at
  // either end out of it).
  ok = ok && t >= absl::FromUnixSeconds(kMinTimestampSeconds) &&
       t <= absl::FromUnixSeconds(kMaxTimestampSeconds) +
                absl::Nanoseconds(999999999);
  if (!ok) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--since \"", TerminalText(s), "\" is not a time: ", kSinceForms));
  }
  const int64_t seconds = absl::ToUnixSeconds(t);
  google::protobuf::Timestamp ts;
  ts.set_seconds(seconds);
  ts.set_nanos(static_cast<int32_t>(
      absl::ToInt64Nanoseconds(t - absl::FromUnixSeconds(seconds))));
  return ts;
}

}  // namespace cli
}  // namespace backfill
