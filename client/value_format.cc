#include "client/value_format.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "client/vocabulary_text.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/util/json_util.h"
#include "text/display_text.h"

namespace backfill {
namespace cli {
namespace {

constexpr absl::string_view kStatePrefix = "BACKFILL_STATE_";
constexpr absl::string_view kPartitionStatePrefix = "PARTITION_STATE_";

// `text` as the std::string_view the text/ library takes.
std::string_view StdView(absl::string_view text) {
  return std::string_view(text.data(), text.size());
}

// Characters in `text`, which is UTF-8: bytes that start one.
size_t CharCount(absl::string_view text) {
  return std::count_if(text.begin(), text.end(), [](char c) {
    return (static_cast<unsigned char>(c) & 0xc0) != 0x80;
  });
}

}  // namespace

std::string OrDash(absl::string_view text) {
  return text.empty() ? "-" : std::string(text);
}

// TerminalText(text), "-" when `text` is empty.
std::string SafeOrDash(absl::string_view text) {
  return OrDash(TerminalText(text));
}

// TerminalText(text) cut to at most `width` characters, the cut marked with
// "..."; never inside a character or an escape.
std::string SafeTruncate(absl::string_view text, size_t width) {
  const std::string whole = TerminalText(text);
  if (CharCount(whole) <= width) return whole;
  std::string out;
  size_t chars = 0;
  for (const std::string& piece : text::DisplayPieces(StdView(text))) {
    const size_t piece_chars = CharCount(piece);
    if (chars + piece_chars + 3 > width) break;
    out += piece;
    chars += piece_chars;
  }
  return out + "...";
}

// A percentage with enough digits to not print 0.0% for a small nonzero
// share.
std::string Percent(double ratio) {
  double pct = ratio * 100.0;
  if (pct > 0 && pct < 0.1) return absl::StrFormat("%.2f%%", pct);
  return absl::StrFormat("%.1f%%", pct);
}

// "3 keys: c1, c2, c3" / "12 keys: c1, c2, c3, c4, c5, ... (7 more)".
std::string KeysText(
    const google::protobuf::RepeatedPtrField<std::string>& keys) {
  constexpr int kShown = 5;
  std::vector<std::string> shown;
  for (int i = 0; i < keys.size() && i < kShown; ++i) {
    shown.push_back(TerminalText(keys[i]));
  }
  std::string out = absl::StrCat(
      keys.size(),
      keys.size() == 1 ? " key: " : " keys: ", absl::StrJoin(shown, ", "));
  if (keys.size() > kShown) {
    absl::StrAppend(&out, ", ... (", keys.size() - kShown, " more)");
  }
  return out;
}

// "1,234,567".
std::string Grouped(int64_t value) {
  // Through uint64_t so that INT64_MIN has a magnitude too.
  const uint64_t magnitude = value < 0
                                 ? uint64_t{0} - static_cast<uint64_t>(value)
                                 : static_cast<uint64_t>(value);
  std::string digits = absl::StrCat(magnitude);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return value < 0 ? "-" + out : out;
}

std::string Plural(int64_t count, absl::string_view noun) {
  return absl::StrCat(count, " ", noun, count == 1 ? "" : "s");
}

// "(30 unchanged, 12 skipped)" for the early cutoff's counts, "" when both
// are 0.
std::string CutoffText(const v1::PartitionCounts& counts) {
  std::vector<std::string> parts;
  if (counts.unchanged() != 0) {
    parts.push_back(absl::StrCat(counts.unchanged(), " unchanged"));
  }
  if (counts.skipped() != 0) {
    parts.push_back(absl::StrCat(counts.skipped(), " skipped"));
  }
  if (parts.empty()) return "";
  return absl::StrCat("(", absl::StrJoin(parts, ", "), ")");
}

std::string UnitOr(v1::CostUnit unit) {
  const std::string word = CostUnitText(unit);
  return word.empty() ? "input rows" : word;
}

// "history (30/30 partitions)", "row counts", "mixed (12/30 partitions
// from history)".
std::string SourceText(v1::EstimateSource source, int64_t from_history,
                       int64_t partitions) {
  if (source == v1::ESTIMATE_SOURCE_HISTORY) {
    return partitions > 0 ? absl::StrCat("history (", from_history, "/",
                                         partitions, " partitions)")
                          : "history";
  }
  if (source == v1::ESTIMATE_SOURCE_ROW_COUNTS) return "row counts";
  if (source == v1::ESTIMATE_SOURCE_MIXED) {
    return partitions > 0
               ? absl::StrCat("mixed (", from_history, "/", partitions,
                              " partitions from history, the others from row "
                              "counts)")
               : absl::StrCat("mixed (", from_history,
                              " partitions from history)");
  }
  return SafeOrDash(EstimateSourceText(source));
}

absl::StatusOr<std::string> ToJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  options.add_whitespace = true;
  std::string out;
  auto status =
      google::protobuf::util::MessageToJsonString(message, &out, options);
  if (!status.ok()) {
    return absl::InternalError(
        absl::StrCat("cannot print JSON: ", status.ToString()));
  }
  return out;
}

std::string TerminalText(absl::string_view text) {
  return text::DisplayText(StdView(text));
}

std::string FormatTimestamp(const google::protobuf::Timestamp& timestamp) {
  if (timestamp.seconds() == 0 && timestamp.nanos() == 0) return "-";
  absl::Time time = absl::FromUnixSeconds(timestamp.seconds());
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", time, absl::UTCTimeZone());
}

std::string StateName(v1::BackfillState state) {
  const std::string& name = v1::BackfillState_Name(state);
  if (name.empty()) return absl::StrCat("STATE_", static_cast<int>(state));
  return std::string(absl::StripPrefix(name, kStatePrefix));
}

std::string PartitionStateName(v1::PartitionState state) {
  const std::string& name = v1::PartitionState_Name(state);
  if (name.empty()) return absl::StrCat("STATE_", static_cast<int>(state));
  return std::string(absl::StripPrefix(name, kPartitionStatePrefix));
}

absl::StatusOr<v1::PartitionState> ParsePartitionState(absl::string_view text) {
  std::string name = absl::AsciiStrToUpper(absl::StripAsciiWhitespace(text));
  if (!absl::StartsWith(name, kPartitionStatePrefix)) {
    name = absl::StrCat(kPartitionStatePrefix, name);
  }
  v1::PartitionState state;
  if (v1::PartitionState_Parse(name, &state) &&
      state != v1::PARTITION_STATE_UNSPECIFIED) {
    return state;
  }
  std::vector<std::string> known;
  const auto* descriptor = v1::PartitionState_descriptor();
  for (int i = 0; i < descriptor->value_count(); ++i) {
    auto value =
        static_cast<v1::PartitionState>(descriptor->value(i)->number());
    if (value != v1::PARTITION_STATE_UNSPECIFIED) {
      known.push_back(PartitionStateName(value));
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown partition state \"", text,
                   "\"; known states: ", absl::StrJoin(known, ", ")));
}

absl::StatusOr<v1::BackfillState> ParseState(absl::string_view text) {
  std::string name = absl::AsciiStrToUpper(absl::StripAsciiWhitespace(text));
  if (!absl::StartsWith(name, kStatePrefix)) {
    name = absl::StrCat(kStatePrefix, name);
  }
  v1::BackfillState state;
  if (v1::BackfillState_Parse(name, &state) &&
      state != v1::BACKFILL_STATE_UNSPECIFIED) {
    return state;
  }
  std::vector<std::string> known;
  const auto* descriptor = v1::BackfillState_descriptor();
  for (int i = 0; i < descriptor->value_count(); ++i) {
    auto value = static_cast<v1::BackfillState>(descriptor->value(i)->number());
    if (value != v1::BACKFILL_STATE_UNSPECIFIED) {
      known.push_back(StateName(value));
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown state \"", text,
                   "\"; known states: ", absl::StrJoin(known, ", ")));
}

bool IsTerminal(v1::BackfillState state) {
  switch (state) {
    case v1::BACKFILL_STATE_SUCCEEDED:
    case v1::BACKFILL_STATE_FAILED:
    case v1::BACKFILL_STATE_CANCELLED:
    case v1::BACKFILL_STATE_ROLLED_BACK:
    case v1::BACKFILL_STATE_VALIDATION_FAILED:
    case v1::BACKFILL_STATE_DOWNSTREAM_UNHEALTHY:
      return true;
    default:
      return false;
  }
}

int64_t DonePartitions(const v1::PartitionCounts& counts) {
  return counts.staged() + counts.published() + counts.unchanged() +
         counts.skipped();
}

std::string HumanCount(double value) {
  // Each unit is chosen after rounding, so 999999 prints as 1.00M, not
  // 1000.0k.
  const double magnitude = std::fabs(value);
  if (std::round(magnitude) < 1e4) return absl::StrFormat("%.0f", value);
  if (std::round(magnitude / 1e2) < 1e4) {
    return absl::StrFormat("%.1fk", value / 1e3);
  }
  if (std::round(magnitude / 1e4) < 1e5) {
    return absl::StrFormat("%.2fM", value / 1e6);
  }
  return absl::StrFormat("%.2fG", value / 1e9);
}

std::string SummarizePartitions(
    const google::protobuf::RepeatedPtrField<std::string>& partitions,
    int max_listed) {
  if (partitions.empty()) return "-";
  if (partitions.size() == 1 && partitions[0].empty()) {
    return "(unpartitioned)";
  }
  if (partitions.size() <= max_listed) {
    return absl::StrJoin(partitions, ",",
                         [](std::string* out, const std::string& partition) {
                           absl::StrAppend(out, TerminalText(partition));
                         });
  }
  std::vector<std::string> sorted(partitions.begin(), partitions.end());
  std::sort(sorted.begin(), sorted.end());
  return absl::StrCat(TerminalText(sorted.front()), "..",
                      TerminalText(sorted.back()), " (", partitions.size(),
                      ")");
}

std::string FormatCost(const v1::CostEstimate& cost) {
  std::string out =
      absl::StrCat(HumanCount(cost.backfill()), " ", UnitOr(cost.unit()));
  if (cost.full_reload() > 0) {
    absl::StrAppend(&out, " (", Percent(cost.ratio()), " of a full reload, ",
                    HumanCount(cost.full_reload()), ")");
  }
  return out;
}

std::string FormatNumber(double value, bool sign) {
  if (value == 0) return "0";  // also -0
  std::string out = absl::StrFormat("%.10g", value);
  if (sign && value > 0) out = "+" + out;
  return out;
}

bool WaitsForOperator(v1::BackfillState state) {
  return state == v1::BACKFILL_STATE_AWAITING_APPROVAL;
}

}  // namespace cli
}  // namespace backfill
