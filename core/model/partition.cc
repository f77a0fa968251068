#include "core/model/partition.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/civil_time.h"
#include "core/base/status_macros.h"
#include "core/base/sv.h"

namespace backfill {
namespace {

constexpr size_t kMaxKeyLength = 256;

constexpr int kMinYear = 1;
constexpr int kMaxYear = 9999;

// Reads exactly `width` decimal digits at `pos`.
bool ReadDigits(std::string_view s, size_t pos, size_t width, int* out) {
  if (pos + width > s.size()) return false;
  int v = 0;
  for (size_t i = pos; i < pos + width; ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    v = v * 10 + (s[i] - '0');
  }
  *out = v;
  return true;
}

bool CharAt(std::string_view s, size_t pos, char c) {
  return pos < s.size() && s[pos] == c;
}

// The formatters below run once or twice per row a membership condition
// tests (the SQL function _bf_partition_of), so they write the digits
// themselves. A year outside 0..9999 (only a civil value normalized past
// the supported range has one) goes through StrFormat, whose %04d is the
// definition they follow.

// Writes `v` (0 <= v < 10^width) as `width` decimal digits at `out`.
void PutDigits(int64_t v, int width, char* out) {
  for (int i = width - 1; i >= 0; --i) {
    out[i] = static_cast<char>('0' + v % 10);
    v /= 10;
  }
}

bool FourDigitYear(absl::civil_year_t y) { return y >= 0 && y <= 9999; }

// "YYYY-MM-DD" of a four-digit year into out[0..9].
void PutDate(absl::civil_year_t y, int m, int d, char* out) {
  PutDigits(y, 4, out);
  out[4] = '-';
  PutDigits(m, 2, out + 5);
  out[7] = '-';
  PutDigits(d, 2, out + 8);
}

std::string FormatMonth(absl::CivilMonth m) {
  if (!FourDigitYear(m.year())) {
    return absl::StrFormat("%04d-%02d", m.year(), m.month());
  }
  std::string out(7, '-');
  PutDigits(m.year(), 4, out.data());
  PutDigits(m.month(), 2, out.data() + 5);
  return out;
}
std::string FormatDay(absl::CivilDay d) {
  if (!FourDigitYear(d.year())) {
    return absl::StrFormat("%04d-%02d-%02d", d.year(), d.month(), d.day());
  }
  std::string out(10, '-');
  PutDate(d.year(), d.month(), d.day(), out.data());
  return out;
}
std::string FormatHour(absl::CivilHour h) {
  if (!FourDigitYear(h.year())) {
    return absl::StrFormat("%04d-%02d-%02dT%02d", h.year(), h.month(), h.day(),
                           h.hour());
  }
  std::string out(13, 'T');
  PutDate(h.year(), h.month(), h.day(), out.data());
  PutDigits(h.hour(), 2, out.data() + 11);
  return out;
}
// The bound form of an hour: "YYYY-MM-DD HH:00:00".
std::string FormatHourBound(absl::CivilHour h) {
  if (!FourDigitYear(h.year())) {
    return absl::StrFormat("%04d-%02d-%02d %02d:00:00", h.year(), h.month(),
                           h.day(), h.hour());
  }
  std::string out = "YYYY-MM-DD HH:00:00";
  PutDate(h.year(), h.month(), h.day(), out.data());
  PutDigits(h.hour(), 2, out.data() + 11);
  return out;
}

// Each parser checks the exact shape, then builds the civil value (which
// normalizes out-of-range fields, e.g. Feb 30 -> Mar 2) and requires that
// its fields are the ones read, which is to say that formatting it back
// would yield the input (every field has a fixed width and the year is
// within 1..9999): only real calendar values pass. They run once per row a
// membership condition tests, so they compare numbers, not formatted text.
std::optional<absl::CivilMonth> ParseMonthExact(std::string_view s) {
  int y, m;
  if (s.size() != 7 || !ReadDigits(s, 0, 4, &y) || !CharAt(s, 4, '-') ||
      !ReadDigits(s, 5, 2, &m)) {
    return std::nullopt;
  }
  if (y < kMinYear || y > kMaxYear) return std::nullopt;
  absl::CivilMonth month(y, m);
  if (month.year() != y || month.month() != m) return std::nullopt;
  return month;
}

std::optional<absl::CivilDay> ParseDayExact(std::string_view s) {
  int y, m, d;
  if (s.size() != 10 || !ReadDigits(s, 0, 4, &y) || !CharAt(s, 4, '-') ||
      !ReadDigits(s, 5, 2, &m) || !CharAt(s, 7, '-') ||
      !ReadDigits(s, 8, 2, &d)) {
    return std::nullopt;
  }
  if (y < kMinYear || y > kMaxYear) return std::nullopt;
  absl::CivilDay day(y, m, d);
  if (day.year() != y || day.month() != m || day.day() != d) {
    return std::nullopt;
  }
  return day;
}

std::optional<absl::CivilHour> ParseHourExact(std::string_view s) {
  int h;
  if (s.size() != 13 || !CharAt(s, 10, 'T') || !ReadDigits(s, 11, 2, &h)) {
    return std::nullopt;
  }
  std::optional<absl::CivilDay> day = ParseDayExact(s.substr(0, 10));
  if (!day) return std::nullopt;
  if (h > 23) return std::nullopt;
  return absl::CivilHour(day->year(), day->month(), day->day(), h);
}

std::string_view ExpectedFormat(Grain grain) {
  switch (grain) {
    case Grain::kHour:
      return "YYYY-MM-DDTHH";
    case Grain::kDay:
      return "YYYY-MM-DD";
    case Grain::kMonth:
      return "YYYY-MM";
    case Grain::kKey:
      return "a non-empty key of at most 256 characters without control "
             "characters";
    case Grain::kNone:
      return "\"\" (the dataset is unpartitioned)";
  }
  return "";
}

std::string_view Article(Grain grain) {
  return grain == Grain::kHour ? "an" : "a";
}

absl::Status NotA(Grain grain, std::string_view value) {
  return absl::InvalidArgumentError(absl::StrCat(
      "partition ", QuoteValue(value), " is not ", Sv(Article(grain)), " ",
      GrainName(grain), "; expected ", Sv(ExpectedFormat(grain))));
}

// The last partition of year 9999 of each time grain. Its end bound would
// fall in year 10000 ("10000-01-01"), which sorts before "9999-..." as text,
// so no row could ever be inside it: it is not a valid partition (it may
// still be the exclusive end of a range).
std::string_view LastValue(Grain grain) {
  switch (grain) {
    case Grain::kHour:
      return "9999-12-31T23";
    case Grain::kDay:
      return "9999-12-31";
    case Grain::kMonth:
      return "9999-12";
    default:
      return "";
  }
}

// The partition before LastValue: the last one that is allowed.
std::string_view LastAllowedValue(Grain grain) {
  switch (grain) {
    case Grain::kHour:
      return "9999-12-31T22";
    case Grain::kDay:
      return "9999-12-30";
    case Grain::kMonth:
      return "9999-11";
    default:
      return "";
  }
}

// OK unless `value` (a well-formed time partition) is LastValue(grain).
absl::Status CheckEndBeforeYear10000(Grain grain, std::string_view value) {
  if (!IsTimeGrain(grain) || value != LastValue(grain)) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      GrainName(grain), " partition ", QuoteValue(value),
      " is out of range: its end bound would fall in year 10000; the last "
      "supported ",
      GrainName(grain), " is ", Sv(LastAllowedValue(grain))));
}

// Parses a time partition into a count of grain units since the civil
// epoch (so that ranges become integer arithmetic), or fails with NotA.
absl::StatusOr<int64_t> ToOrdinal(Grain grain, std::string_view value) {
  static const absl::CivilHour kHourEpoch(1970);
  static const absl::CivilDay kDayEpoch(1970);
  static const absl::CivilMonth kMonthEpoch(1970);
  switch (grain) {
    case Grain::kHour:
      if (auto h = ParseHourExact(value)) return *h - kHourEpoch;
      break;
    case Grain::kDay:
      if (auto d = ParseDayExact(value)) return *d - kDayEpoch;
      break;
    case Grain::kMonth:
      if (auto m = ParseMonthExact(value)) return *m - kMonthEpoch;
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("grain \"", GrainName(grain), "\" is not a time grain"));
  }
  return NotA(grain, value);
}

std::string FromOrdinal(Grain grain, int64_t ordinal) {
  switch (grain) {
    case Grain::kHour:
      return FormatHour(absl::CivilHour(1970) + ordinal);
    case Grain::kDay:
      return FormatDay(absl::CivilDay(1970) + ordinal);
    case Grain::kMonth:
      return FormatMonth(absl::CivilMonth(1970) + ordinal);
    default:
      return "";
  }
}

}  // namespace

std::string QuoteValue(std::string_view value) {
  constexpr size_t kMaxShown = 64;
  if (value.size() > kMaxShown) {
    return absl::StrCat("\"", absl::CHexEscape(Sv(value.substr(0, kMaxShown))),
                        "...\"");
  }
  return absl::StrCat("\"", absl::CHexEscape(Sv(value)), "\"");
}

const char* GrainName(Grain grain) {
  switch (grain) {
    case Grain::kNone:
      return "";
    case Grain::kHour:
      return "hour";
    case Grain::kDay:
      return "day";
    case Grain::kMonth:
      return "month";
    case Grain::kKey:
      return "key";
  }
  return "";
}

absl::StatusOr<Grain> ParseGrain(std::string_view name) {
  if (name == "hour") return Grain::kHour;
  if (name == "day") return Grain::kDay;
  if (name == "month") return Grain::kMonth;
  if (name == "key") return Grain::kKey;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown grain ", QuoteValue(name),
                   "; expected one of hour, day, month, key"));
}

bool IsTimeGrain(Grain grain) {
  return grain == Grain::kHour || grain == Grain::kDay ||
         grain == Grain::kMonth;
}

absl::Status ValidatePartition(Grain grain, std::string_view value) {
  switch (grain) {
    case Grain::kNone:
      if (!value.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("partition ", QuoteValue(value),
                         " given for an unpartitioned dataset; expected \"\""));
      }
      return absl::OkStatus();
    case Grain::kKey: {
      if (value.empty() || value.size() > kMaxKeyLength) {
        return NotA(grain, value);
      }
      for (char c : value) {
        unsigned char u = static_cast<unsigned char>(c);
        if (u < 0x20 || u == 0x7f) return NotA(grain, value);
      }
      return absl::OkStatus();
    }
    case Grain::kHour:
    case Grain::kDay:
    case Grain::kMonth: {
      absl::StatusOr<int64_t> ordinal = ToOrdinal(grain, value);
      if (!ordinal.ok()) return ordinal.status();
      return CheckEndBeforeYear10000(grain, value);
    }
  }
  return absl::InvalidArgumentError("unknown grain");
}

absl::StatusOr<PartitionBounds> BoundsOf(Grain grain, std::string_view value) {
  if (absl::Status s = CheckEndBeforeYear10000(grain, value); !s.ok()) {
    return s;
  }
  switch (grain) {
    case Grain::kNone:
    case Grain::kKey: {
      absl::Status status = ValidatePartition(grain, value);
      if (!status.ok()) return status;
      return PartitionBounds{std::string(value), std::string(value)};
    }
    case Grain::kHour: {
      std::optional<absl::CivilHour> h = ParseHourExact(value);
      if (!h) return NotA(grain, value);
      return PartitionBounds{FormatHourBound(*h), FormatHourBound(*h + 1)};
    }
    case Grain::kDay: {
      std::optional<absl::CivilDay> d = ParseDayExact(value);
      if (!d) return NotA(grain, value);
      return PartitionBounds{FormatDay(*d), FormatDay(*d + 1)};
    }
    case Grain::kMonth: {
      std::optional<absl::CivilMonth> m = ParseMonthExact(value);
      if (!m) return NotA(grain, value);
      return PartitionBounds{FormatDay(absl::CivilDay(*m)),
                             FormatDay(absl::CivilDay(*m + 1))};
    }
  }
  return absl::InvalidArgumentError("unknown grain");
}

absl::StatusOr<std::vector<std::string>> EnumerateRange(Grain grain,
                                                        std::string_view from,
                                                        std::string_view to,
                                                        size_t max_partitions) {
  if (!IsTimeGrain(grain)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a range [from, to) needs a time grain (hour, day or "
        "month); this dataset's grain is ",
        grain == Grain::kNone ? "none (unpartitioned)" : GrainName(grain),
        grain == Grain::kKey ? "; list the keys instead" : ""));
  }
  absl::StatusOr<int64_t> lo = ToOrdinal(grain, from);
  if (!lo.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("range start: ", lo.status().message()));
  }
  absl::StatusOr<int64_t> hi = ToOrdinal(grain, to);
  if (!hi.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("range end: ", hi.status().message()));
  }
  if (*hi <= *lo) {
    return absl::InvalidArgumentError(
        absl::StrCat("range [", QuoteValue(from), ", ", QuoteValue(to), ") is ",
                     *hi == *lo ? "empty" : "inverted",
                     "; the end is exclusive and must be after the start"));
  }
  const uint64_t count = static_cast<uint64_t>(*hi - *lo);
  if (count > max_partitions) {
    return absl::InvalidArgumentError(
        absl::StrCat("range [", QuoteValue(from), ", ", QuoteValue(to),
                     ") has ", count, " ", GrainName(grain),
                     " partitions; at most ", max_partitions, " are allowed"));
  }
  std::vector<std::string> out;
  out.reserve(count);
  for (int64_t i = *lo; i < *hi; ++i) out.push_back(FromOrdinal(grain, i));
  return out;
}

absl::StatusOr<std::string> PartitionOfValue(Grain grain,
                                             std::string_view value) {
  if (grain == Grain::kNone) return std::string();
  if (grain == Grain::kKey) {
    absl::Status status = ValidatePartition(grain, value);
    if (!status.ok()) return status;
    return std::string(value);
  }
  auto bad = [&]() {
    return absl::InvalidArgumentError(
        absl::StrCat("value ", QuoteValue(value), " of a ", GrainName(grain),
                     "-partitioned column is in no accepted format; expected ",
                     grain == Grain::kMonth ? "YYYY-MM, " : "",
                     "YYYY-MM-DD, YYYY-MM-DD HH:MM[:SS[.F]][Z] or "
                     "YYYY-MM-DDTHH[:MM[:SS[.F]]][Z] (UTC)"));
  };
  if (value.size() == 7) {
    std::optional<absl::CivilMonth> m = ParseMonthExact(value);
    if (grain != Grain::kMonth || !m) return bad();
    if (absl::Status s = CheckEndBeforeYear10000(grain, value); !s.ok()) {
      return s;
    }
    return FormatMonth(*m);
  }
  if (value.size() < 10) return bad();
  std::optional<absl::CivilDay> day = ParseDayExact(value.substr(0, 10));
  if (!day) return bad();
  int hour = 0;
  if (value.size() > 10) {
    // The time of day: " HH:MM" or "THH", then optionally ":MM" (required
    // after a space), ":SS", ".F" (1 to 9 digits), and a final "Z".
    const char sep = value[10];
    if (sep != ' ' && sep != 'T') return bad();
    if (!ReadDigits(value, 11, 2, &hour) || hour > 23) return bad();
    std::string_view rest = value.substr(13);
    auto take_field = [&rest](int max) {
      int v;
      if (rest.size() < 3 || rest[0] != ':' || !ReadDigits(rest, 1, 2, &v) ||
          v > max) {
        return false;
      }
      rest.remove_prefix(3);
      return true;
    };
    if (!rest.empty() && rest[0] == ':') {
      if (!take_field(59)) return bad();  // minutes
      if (!rest.empty() && rest[0] == ':') {
        if (!take_field(59)) return bad();  // seconds
        if (!rest.empty() && rest[0] == '.') {
          size_t digits = 1;
          while (digits < rest.size() && rest[digits] >= '0' &&
                 rest[digits] <= '9') {
            ++digits;
          }
          if (digits < 2 || digits > 10) return bad();
          rest.remove_prefix(digits);
        }
      }
    } else if (sep == ' ') {
      return bad();  // "YYYY-MM-DD HH" alone is no format
    }
    if (rest == "Z") rest.remove_prefix(1);
    if (!rest.empty()) return bad();
  }
  std::string partition;
  switch (grain) {
    case Grain::kHour:
      partition = FormatHour(
          absl::CivilHour(day->year(), day->month(), day->day(), hour));
      break;
    case Grain::kDay:
      partition = FormatDay(*day);
      break;
    case Grain::kMonth:
      partition = FormatMonth(absl::CivilMonth(*day));
      break;
    default:
      return bad();
  }
  if (absl::Status s = CheckEndBeforeYear10000(grain, partition); !s.ok()) {
    return s;
  }
  return partition;
}

absl::StatusOr<CandidateRange> CandidateRangeOf(Grain grain,
                                                std::string_view partition) {
  if (!IsTimeGrain(grain)) {
    return absl::InvalidArgumentError(
        absl::StrCat("a candidate range needs a time grain, not \"",
                     GrainName(grain), "\""));
  }
  RETURN_IF_ERROR(ValidatePartition(grain, partition));
  // Every accepted value of an hour or a day starts with its day, and every
  // accepted value of a month with its month, followed by nothing, ' ', 'T'
  // or '-': all sort before '~' (0x7e), in byte order and in ASCII
  // case-insensitive order alike.
  std::string prefix(partition.substr(0, grain == Grain::kMonth ? 7 : 10));
  return CandidateRange{prefix, prefix + "~"};
}

}  // namespace backfill
