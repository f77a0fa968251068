// Partition membership in PostgreSQL SQL (storage/postgres/pg_membership.h)
// on a real PostgreSQL server, with the core's own definition as the
// oracle: for generated values of every column kind (DATE, TIMESTAMP,
// TIMESTAMPTZ, TEXT, integer keys) around every calendar boundary (hour 23
// and 00, month ends, Feb 28/29, year ends, years 0001 and 9999, BC dates,
// year 10000 and later, infinity), the partition the SQL computes for a
// row is PartitionOfValue (PartitionOfValues for time x key) of the value's
// UTC ISO text, computed here in C++ from the civil time the value was
// generated from; and the membership condition, with the values bound for
// a partition P, selects exactly the rows the oracle puts in P. Then the
// plans: the condition is served by a btree index on the column.
//
// The session runs with settings the SQL must not depend on: a TimeZone of
// +12:45/+13:45, DateStyle SQL/DMY, an empty search_path; the schema's
// name needs quoting and holds a dollar quote. Generators use a seeded
// PRNG: the seed (BACKFILL_TEST_SEED overrides it) is printed with any
// failure.

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/civil_time.h"
#include "core/model/catalog.h"
#include "core/model/partition.h"
#include "core/model/partition_layout.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/postgres/pg_connection.h"
#include "storage/postgres/pg_membership.h"
#include "tests/testing/postgres_suite.h"
#include "tests/testing/postgres_test_server.h"

namespace backfill::postgres {
namespace storage_postgres_membership_test {
namespace {

using ::testing::HasSubstr;

using Rng = std::mt19937_64;

uint64_t Seed() {
  uint64_t seed = 20250301;
  const char* env = std::getenv("BACKFILL_TEST_SEED");
  if (env != nullptr && !absl::SimpleAtoi(env, &seed)) {
    ADD_FAILURE() << "BACKFILL_TEST_SEED is not a number: " << env;
  }
  return seed;
}

// Seed() mixed with a test's own number, so that tests draw different
// values from one seed.
Rng MakeRng(uint64_t seed, uint64_t salt) {
  std::seed_seq seq{static_cast<uint32_t>(seed),
                    static_cast<uint32_t>(seed >> 32),
                    static_cast<uint32_t>(salt)};
  return Rng(seq);
}

int64_t Uniform(Rng& rng, int64_t lo, int64_t hi) {
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
}

const Grain kTimeGrains[] = {Grain::kHour, Grain::kDay, Grain::kMonth};

// ------------------------------------------------------------- the oracle --

std::optional<std::string> OracleOf(Grain grain, std::string_view value) {
  absl::StatusOr<std::string> p = PartitionOfValue(grain, value);
  if (!p.ok()) return std::nullopt;
  return *p;
}

std::optional<std::string> OracleOf(Grain grain, std::string_view time,
                                    std::string_view key) {
  absl::StatusOr<std::string> p = PartitionOfValues(grain, time, key);
  if (!p.ok()) return std::nullopt;
  return *p;
}

// ---------------------------------------------------------- typed values --

// Years whose days and months are boundaries worth testing: the first and
// last supported, leap rules (4, 100, 400), the calendar's reform, the
// epoch, the present.
constexpr int kYears[] = {1,    2,    4,    99,   100,  400,  1582, 1900, 1970,
                          1999, 2000, 2024, 2025, 2100, 2400, 9998, 9999};

// The first and last days of every month of kYears, and Feb 28, Feb 29
// (when there is one) and Mar 1.
std::vector<absl::CivilDay> BoundaryDays() {
  std::vector<absl::CivilDay> out;
  for (int year : kYears) {
    for (int month = 1; month <= 12; ++month) {
      const absl::CivilMonth m(year, month);
      out.push_back(absl::CivilDay(m));
      out.push_back(absl::CivilDay(m + 1) - 1);
    }
    out.push_back(absl::CivilDay(year, 2, 28));
    out.push_back(absl::CivilDay(year, 3, 1) - 1);  // Feb 29 or Feb 28
    out.push_back(absl::CivilDay(year, 3, 1));
  }
  return out;
}

// An instant in UTC with microseconds (what TIMESTAMP holds).
struct Instant {
  absl::CivilSecond t;
  int micros = 0;
};

std::string YearText(int64_t year) {
  return year < 0 ? absl::StrFormat("-%04d", -year)
                  : absl::StrFormat("%04d", year);
}

// The ISO 8601 text of a day (astronomical years: 1 BC is 0000).
std::string IsoDay(absl::CivilDay d) {
  return absl::StrFormat("%s-%02d-%02d", YearText(d.year()), d.month(),
                         d.day());
}

// The ISO 8601 text of an instant in UTC, in one of the spellings the core
// accepts for it: 'T' or ' ', the fraction cut to 1..6 digits where that
// keeps its value, with or without "Z".
std::string IsoInstant(const Instant& i, Rng& rng) {
  std::string fraction;
  if (i.micros != 0 || Uniform(rng, 0, 1) == 0) {
    fraction = absl::StrFormat(".%06d", i.micros);
    while (fraction.size() > 2 && fraction.back() == '0' &&
           Uniform(rng, 0, 1) == 0) {
      fraction.pop_back();
    }
  }
  return absl::StrFormat("%s%s%02d:%02d:%02d%s%s", IsoDay(absl::CivilDay(i.t)),
                         Uniform(rng, 0, 1) ? "T" : " ", i.t.hour(),
                         i.t.minute(), i.t.second(), fraction,
                         Uniform(rng, 0, 1) ? "Z" : "");
}

// PostgreSQL's input text of a day: years before 1 as "YYYY-MM-DD BC".
std::string PgDay(absl::CivilDay d) {
  if (d.year() >= 1) {
    return absl::StrFormat("%04d-%02d-%02d", d.year(), d.month(), d.day());
  }
  return absl::StrFormat("%04d-%02d-%02d BC", 1 - d.year(), d.month(), d.day());
}

// PostgreSQL's input text of a local time with an offset ("" for a
// TIMESTAMP), BC after the offset.
std::string PgTime(absl::CivilSecond t, int micros, std::string_view offset) {
  const bool bc = t.year() < 1;
  return absl::StrFormat("%04d-%02d-%02d %02d:%02d:%02d.%06d%s%s",
                         bc ? 1 - t.year() : t.year(), t.month(), t.day(),
                         t.hour(), t.minute(), t.second(), micros,
                         std::string(offset), bc ? " BC" : "");
}

// One value of a typed column: what is inserted (nullopt: NULL) and the
// value's UTC ISO text, the oracle's input.
struct Sample {
  PgValue literal;
  std::string iso;
};

std::optional<std::string> OracleOf(Grain grain, const Sample& s) {
  if (!s.literal) return std::nullopt;
  return OracleOf(grain, s.iso);
}

std::vector<Sample> DateSamples(Rng& rng) {
  std::vector<Sample> out;
  auto add = [&](absl::CivilDay d) { out.push_back({PgDay(d), IsoDay(d)}); };
  for (absl::CivilDay d : BoundaryDays()) add(d);
  const absl::CivilDay first(1, 1, 1), last(9999, 12, 31);
  for (int i = 0; i < 2500; ++i) add(first + Uniform(rng, 0, last - first));
  // Outside years 0001..9999: before Christ, year 10000 and later.
  for (absl::CivilDay d :
       {absl::CivilDay(0, 12, 31), absl::CivilDay(0, 1, 1),
        absl::CivilDay(-99, 2, 29), absl::CivilDay(-4712, 1, 1),
        absl::CivilDay(10000, 1, 1), absl::CivilDay(10000, 12, 31),
        absl::CivilDay(12345, 6, 7), absl::CivilDay(294276, 12, 31),
        absl::CivilDay(294277, 1, 1), absl::CivilDay(5874897, 12, 31)}) {
    add(d);
  }
  out.push_back({"infinity", "infinity"});
  out.push_back({"-infinity", "-infinity"});
  out.push_back({std::nullopt, ""});
  return out;
}

// Instants at the boundaries of the boundary days (hour 00, 22:59:59.999999,
// hour 23, the day's last microsecond) and at random.
std::vector<Instant> Instants(Rng& rng) {
  std::vector<Instant> out;
  for (absl::CivilDay d : BoundaryDays()) {
    const absl::CivilSecond midnight(d);
    out.push_back({midnight, 0});
    out.push_back({midnight, 1});
    out.push_back({midnight + 3599, 999999});
    out.push_back({midnight + 23 * 3600 - 1, 999999});
    out.push_back({midnight + 23 * 3600, 0});
    out.push_back({midnight + 86399, 999999});
  }
  const absl::CivilSecond first(1, 1, 1), end(10000, 1, 1);
  for (int i = 0; i < 2000; ++i) {
    out.push_back({first + Uniform(rng, 0, end - first - 1),
                   static_cast<int>(Uniform(rng, 0, 999999))});
  }
  // Outside years 0001..9999.
  for (const Instant& i : {
           Instant{absl::CivilSecond(0, 12, 31, 23, 59, 59), 999999},
           Instant{absl::CivilSecond(-500, 6, 1, 12), 0},
           Instant{absl::CivilSecond(-4713, 11, 24), 0},
           Instant{absl::CivilSecond(10000, 1, 1), 0},
           Instant{absl::CivilSecond(10000, 1, 1, 0, 59, 59), 999999},
           Instant{absl::CivilSecond(294276, 12, 31, 23, 59, 59), 999999},
       }) {
    out.push_back(i);
  }
  return out;
}

std::vector<Sample> TimestampSamples(Rng& rng) {
  std::vector<Sample> out;
  for (const Instant& i : Instants(rng)) {
    out.push_back({PgTime(i.t, i.micros, ""), IsoInstant(i, rng)});
  }
  out.push_back({"infinity", "infinity"});
  out.push_back({"-infinity", "-infinity"});
  out.push_back({std::nullopt, ""});
  return out;
}

// TIMESTAMPTZ: the same instants, written in local times of random
// offsets (a local time may fall in year 10000 or 1 BC while the instant
// does not, and the other way round).
std::vector<Sample> TimestampTzSamples(Rng& rng) {
  constexpr int kOffsets[] = {0,
                              0,
                              5 * 3600 + 1800,
                              -3 * 3600 - 1800,
                              12 * 3600 + 2700,
                              14 * 3600,
                              -12 * 3600,
                              -(9 * 3600 + 30 * 60 + 17)};
  std::vector<Sample> out;
  for (const Instant& i : Instants(rng)) {
    const int offset = kOffsets[Uniform(rng, 0, std::size(kOffsets) - 1)];
    const int a = offset < 0 ? -offset : offset;
    std::string text = absl::StrFormat("%c%02d:%02d", offset < 0 ? '-' : '+',
                                       a / 3600, a / 60 % 60);
    if (a % 60 != 0) absl::StrAppend(&text, absl::StrFormat(":%02d", a % 60));
    if (offset == 0 && Uniform(rng, 0, 1) == 0) text = "+00";
    out.push_back({PgTime(i.t + offset, i.micros, text), IsoInstant(i, rng)});
  }
  out.push_back({"infinity", "infinity"});
  out.push_back({"-infinity", "-infinity"});
  out.push_back({std::nullopt, ""});
  return out;
}

// ------------------------------------------------------------ text values --

// One character as its UTF-8 bytes; a value is a sequence of them, so that
// mutations keep it valid UTF-8 (the server accepts nothing else).
using Chars = std::vector<std::string>;

Chars Split(std::string_view ascii) {
  Chars out;
  for (char c : ascii) out.push_back(std::string(1, c));
  return out;
}

// What a mutation may write: the characters of the formats and their near
// misses (lower case t and z, offsets, other separators, control and
// non-ASCII characters, digits of other scripts).
const char* const kAlphabet[] = {
    "0", "1", "2",  "3",      "5",      "9",      "-", ":",
    "T", "t", "Z",  "z",      " ",      ".",      "+", ",",
    "/", "|", "\n", "\t",     "\x01",   "\x7f",   "~", "W",
    "é", "٣", "２", "\u0085", "\u00a0", "\u2028", "0", "0"};

std::string Join(const Chars& chars) { return absl::StrJoin(chars, ""); }

// One random edit: replace, insert, delete, duplicate or swap.
void Mutate(Rng& rng, Chars* chars) {
  const std::string c = kAlphabet[Uniform(rng, 0, std::size(kAlphabet) - 1)];
  const int64_t n = static_cast<int64_t>(chars->size());
  const int64_t at = n == 0 ? 0 : Uniform(rng, 0, n - 1);
  switch (n == 0 ? 1 : Uniform(rng, 0, 4)) {
    case 0:
      (*chars)[at] = c;
      break;
    case 1:
      chars->insert(chars->begin() + (n == 0 ? 0 : Uniform(rng, 0, n)), c);
      break;
    case 2:
      chars->erase(chars->begin() + at);
      break;
    case 3:
      chars->insert(chars->begin() + at, (*chars)[at]);
      break;
    default:
      if (at + 1 < n) std::swap((*chars)[at], (*chars)[at + 1]);
      break;
  }
}

// Every spelling the core accepts of the time `t` (its fraction `digits`
// long), and the month.
std::vector<std::string> Spellings(absl::CivilSecond t, Rng& rng) {
  const std::string day =
      absl::StrFormat("%04d-%02d-%02d", t.year(), t.month(), t.day());
  const std::string hh = absl::StrFormat("%02d", t.hour());
  const std::string mm = absl::StrFormat("%02d", t.minute());
  const std::string ss = absl::StrFormat("%02d", t.second());
  std::string fraction = ".";
  for (int64_t i = Uniform(rng, 1, 9); i > 0; --i) {
    fraction.push_back(static_cast<char>('0' + Uniform(rng, 0, 9)));
  }
  std::vector<std::string> out = {
      day, absl::StrFormat("%04d-%02d", t.year(), t.month())};
  for (const char* z : {"", "Z"}) {
    for (const char* sep : {" ", "T"}) {
      const std::string base = absl::StrCat(day, sep, hh);
      if (std::string_view(sep) == "T") out.push_back(base + z);
      out.push_back(absl::StrCat(base, ":", mm, z));
      out.push_back(absl::StrCat(base, ":", mm, ":", ss, z));
      out.push_back(absl::StrCat(base, ":", mm, ":", ss, fraction, z));
    }
  }
  return out;
}

std::vector<std::string> TextSamples(Rng& rng) {
  std::vector<std::string> valid;
  for (absl::CivilDay d : BoundaryDays()) {
    const absl::CivilSecond midnight(d);
    for (absl::CivilSecond t :
         {midnight, midnight + 23 * 3600 - 1, midnight + 23 * 3600,
          midnight + 86399, midnight + Uniform(rng, 0, 86399)}) {
      // A few spellings of each, all of them for some.
      std::vector<std::string> s = Spellings(t, rng);
      std::shuffle(s.begin(), s.end(), rng);
      s.resize(Uniform(rng, 0, 3) == 0 ? s.size() : 3);
      valid.insert(valid.end(), s.begin(), s.end());
    }
  }
  std::vector<std::string> out = valid;
  // Near misses the core refuses (and a few it accepts).
  for (const char* v : {
           "2025-03-01 07",
           "2025-03-01T07:30:00+00:00",
           "2025-03-01T07+00",
           "2025-03-01T07:30:00-00:00",
           "2025-03-01t07",
           "2025-03-01T07z",
           "2025-03-01T07:30:00.",
           "2025-03-01T07:30:00.1234567890",
           "2025-03-01T07:30:00.123456789",
           "2025-03-01T07:30:00,5",
           "2025-03-01T07:30.5",
           "2025-03-01T0730",
           "2025-03-01T7",
           "2025-03-01 24:00",
           "2025-03-01T24",
           "2025-03-01T23:60",
           "2025-03-01T23:59:60",
           "2025-03-01T23:59:59Z",
           "2025-02-29",
           "2024-02-29",
           "2100-02-29",
           "2000-02-29",
           "2025-02-30",
           "2025-04-31",
           "2025-13-01",
           "2025-00-01",
           "2025-01-00",
           "0000-01-01",
           "10000-01-01",
           "9999-12-31",
           "9999-12-31T22:59:59.999999999Z",
           "9999-12-31T23",
           "9999-12",
           "9999-11",
           "0001-01",
           "0001-01-01T00",
           "2025-03-01Z",
           "2025-03-01T07ZZ",
           "2025-03-01T07Z ",
           " 2025-03-01",
           "2025-03-01 ",
           "2025-03-01\n",
           "2025-03-01T07\n",
           "2025-03-01T07:30\n",
           "2025-03\n",
           "2025-3-01",
           "2025/03/01",
           "20250301",
           "2025-03-01T",
           "2025-03-01 07:",
           "２０２５-03-01",
           "٢٠٢٥-٠٣-٠١",
           "2025-03-01T07:30:00.١",
           "",
           " ",
           "T",
           "2025",
           "2025-03-",
           "-2025-03-01",
           "+2025-03-01",
       }) {
    out.push_back(v);
  }
  // Random edits of valid values.
  for (int i = 0; i < 4000; ++i) {
    Chars chars = Split(valid[Uniform(rng, 0, valid.size() - 1)]);
    for (int64_t k = Uniform(rng, 1, 2); k > 0; --k) Mutate(rng, &chars);
    out.push_back(Join(chars));
  }
  return out;
}

// Keys the key grain accepts and refuses: control characters, '|', 256
// and 257 bytes (in characters of one and two bytes), case, spaces.
std::vector<std::string> KeySamples(Rng& rng) {
  std::vector<std::string> out = {
      "eu",     "us",     "EU",       "Eu",         "a|b",  "|",     "a b",
      " ",      "x",      "7",        "007",        "-0",   "é",     "日本",
      "\u0085", "\u00a0", "a\u2028b", "",           "\x01", "a\x1f", "\x7f",
      "a\tb",   "a\nb",   "~",        "2025-03-01", "null"};
  out.push_back(std::string(256, 'k'));
  out.push_back(std::string(257, 'k'));
  std::string two_byte;
  for (int i = 0; i < 128; ++i) two_byte += "é";
  out.push_back(two_byte);                     // 256 bytes, 128 characters
  out.push_back(two_byte + "k");               // 257 bytes
  out.push_back(std::string(255, 'k') + "é");  // 257 bytes, 256 characters
  for (int i = 0; i < 200; ++i) {
    Chars chars;
    for (int64_t n = Uniform(rng, 0, 6); n > 0; --n) {
      chars.push_back(kAlphabet[Uniform(rng, 0, std::size(kAlphabet) - 1)]);
    }
    out.push_back(Join(chars));
  }
  return out;
}

// Partitions next to `p` (of a time grain): before and after, when valid.
std::vector<std::string> Around(Grain grain, const std::string& p) {
  std::vector<std::string> out = {p};
  if (grain == Grain::kHour) {
    absl::CivilHour h;
    if (absl::ParseCivilTime(p, &h)) {
      for (absl::CivilHour n : {h - 1, h + 1}) {
        out.push_back(absl::StrFormat("%04d-%02d-%02dT%02d", n.year(),
                                      n.month(), n.day(), n.hour()));
      }
    }
  } else if (grain == Grain::kDay) {
    absl::CivilDay d;
    if (absl::ParseCivilTime(p, &d)) {
      for (absl::CivilDay n : {d - 1, d + 1}) {
        out.push_back(
            absl::StrFormat("%04d-%02d-%02d", n.year(), n.month(), n.day()));
      }
    }
  } else {
    absl::CivilMonth m;
    if (absl::ParseCivilTime(p, &m)) {
      for (absl::CivilMonth n : {m - 1, m + 1}) {
        out.push_back(absl::StrFormat("%04d-%02d", n.year(), n.month()));
      }
    }
  }
  out.erase(std::remove_if(out.begin(), out.end(),
                           [&](const std::string& v) {
                             return !ValidatePartition(grain, v).ok();
                           }),
            out.end());
  return out;
}

// Partitions to test a column with: fixed boundaries, and random ones among
// those the rows fall in, with their neighbours.
std::vector<std::string> PartitionsToTest(
    Grain grain, const std::vector<std::optional<std::string>>& expected,
    Rng& rng, size_t random_count = 120) {
  std::set<std::string> out;
  const std::vector<std::string> fixed =
      grain == Grain::kHour
          ? std::vector<std::string>{"0001-01-01T00", "0001-01-01T23",
                                     "2024-02-29T00", "2024-02-29T23",
                                     "2024-12-31T23", "2025-01-01T00",
                                     "9999-12-31T00", "9999-12-31T22"}
      : grain == Grain::kDay
          ? std::vector<std::string>{"0001-01-01", "2024-02-29", "2025-02-28",
                                     "2025-03-01", "2100-02-28", "9999-12-30"}
          : std::vector<std::string>{"0001-01", "2024-02", "2025-12",
                                     "9999-11"};
  for (const std::string& p : fixed) {
    for (const std::string& n : Around(grain, p)) out.insert(n);
  }
  std::vector<std::string> seen;
  for (const auto& e : expected) {
    if (e) seen.push_back(*e);
  }
  std::sort(seen.begin(), seen.end());
  seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
  std::shuffle(seen.begin(), seen.end(), rng);
  if (seen.size() > random_count) seen.resize(random_count);
  for (const std::string& p : seen) {
    for (const std::string& n : Around(grain, p)) out.insert(n);
  }
  return {out.begin(), out.end()};
}

// The columns of a layout (an aggregate's missing fields would warn).
PgPartitionColumns Columns(PartitionLayout layout, std::string column,
                           PgColumnKind kind, std::string key_column = "",
                           PgColumnKind key_kind = PgColumnKind::kOther) {
  PgPartitionColumns out;
  out.layout = std::move(layout);
  out.column = std::move(column);
  out.kind = kind;
  out.key_column = std::move(key_column);
  out.key_kind = key_kind;
  return out;
}

// A value for a failure message.
std::string Show(const PgValue& v) {
  return v ? QuoteValue(*v) : std::string("NULL");
}

// ------------------------------------------------------------- the fixture --

class PgMembershipTest : public backfill::testing::PostgresSuite {
 protected:
  void SetUp() override {
    ASSERT_NE(server_, nullptr);
    auto conn = PgConnection::Connect(server_->Dsn());
    ASSERT_TRUE(conn.ok()) << conn.status();
    conn_ = *std::move(conn);
    // A name that needs quoting and holds the functions' dollar quote.
    auto schema = conn_->QuoteIdentifier("bf \"m\" $bf$");
    ASSERT_TRUE(schema.ok()) << schema.status();
    schema_ = *schema;
    Exec(absl::StrCat("DROP SCHEMA IF EXISTS ", schema_, " CASCADE"));
    Exec(absl::StrCat("CREATE SCHEMA ", schema_));
    for (const std::string& statement : PartitionFunctionSql(schema_)) {
      Exec(statement);
    }
    // Settings the SQL must not depend on.
    Exec("SET TimeZone = 'Pacific/Chatham'");
    Exec("SET DateStyle = 'SQL, DMY'");
    Exec("SET search_path = ''");
    seed_ = Seed();
  }

  absl::StatusOr<PgResult> Run(const std::string& sql,
                               const std::vector<PgValue>& params = {}) {
    return conn_->Exec(sql, params);
  }

  void Exec(const std::string& sql, const std::vector<PgValue>& params = {}) {
    absl::StatusOr<PgResult> r = conn_->Exec(sql, params);
    ASSERT_TRUE(r.ok()) << r.status() << "\n" << sql;
  }

  std::string Table(std::string_view name) const {
    return absl::StrCat(schema_, ".", std::string(name));
  }

  // Creates `table` (id integer PRIMARY KEY, then `columns`) and inserts
  // `rows` (ids 0..n-1), each value cast to its column's type in `casts`.
  void Load(const std::string& table, const std::string& columns,
            const std::vector<std::string>& casts,
            const std::vector<std::vector<PgValue>>& rows) {
    Exec(absl::StrCat("CREATE TABLE ", table, " (id integer PRIMARY KEY, ",
                      columns, ")"));
    constexpr size_t kBatch = 400;
    for (size_t begin = 0; begin < rows.size(); begin += kBatch) {
      std::vector<std::string> tuples;
      std::vector<PgValue> params;
      for (size_t i = begin; i < std::min(rows.size(), begin + kBatch); ++i) {
        std::vector<std::string> tuple = {
            absl::StrCat("$", params.size() + 1, "::integer")};
        params.push_back(absl::StrCat(i));
        for (size_t c = 0; c < casts.size(); ++c) {
          tuple.push_back(absl::StrCat("$", params.size() + 1, "::", casts[c]));
          params.push_back(rows[i][c]);
        }
        tuples.push_back(absl::StrCat("(", absl::StrJoin(tuple, ", "), ")"));
      }
      ASSERT_NO_FATAL_FAILURE(
          Exec(absl::StrCat("INSERT INTO ", table, " VALUES ",
                            absl::StrJoin(tuples, ", ")),
               params));
    }
    Exec(absl::StrCat("ANALYZE ", table));
  }

  // PartitionExpression of `columns` for every row of `table` (as "t"),
  // by id.
  std::vector<PgValue> PartitionsOf(const std::string& table,
                                    const PgPartitionColumns& columns) {
    absl::StatusOr<std::string> expr = PartitionExpression(columns, schema_);
    EXPECT_TRUE(expr.ok()) << expr.status();
    if (!expr.ok()) return {};
    absl::StatusOr<PgResult> r =
        Run(absl::StrCat("SELECT \"t\".id, ", *expr, " FROM ", table,
                         " AS \"t\" ORDER BY \"t\".id"));
    EXPECT_TRUE(r.ok()) << r.status() << "\n" << *expr;
    if (!r.ok()) return {};
    std::vector<PgValue> out;
    for (const auto& row : r->rows) out.push_back(row[1]);
    return out;
  }

  // The ids MembershipCondition selects from `table` (as "t") for each of
  // `partitions`: many conditions per statement, so that their parameters
  // are numbered from far beyond $1.
  std::vector<std::set<int>> Members(
      const std::string& table, const PgPartitionColumns& columns,
      const std::vector<std::string>& partitions) {
    std::vector<std::set<int>> out(partitions.size());
    constexpr size_t kBatch = 40;
    for (size_t begin = 0; begin < partitions.size(); begin += kBatch) {
      std::vector<std::string> selects;
      std::vector<PgValue> params;
      for (size_t i = begin; i < std::min(partitions.size(), begin + kBatch);
           ++i) {
        absl::StatusOr<PgCondition> cond = MembershipCondition(
            columns, schema_, static_cast<int>(params.size()) + 1);
        EXPECT_TRUE(cond.ok()) << cond.status();
        absl::StatusOr<std::vector<PgValue>> values =
            MembershipValues(columns, partitions[i]);
        EXPECT_TRUE(values.ok()) << values.status() << " " << partitions[i];
        if (!cond.ok() || !values.ok()) return out;
        EXPECT_EQ(static_cast<int>(values->size()), cond->parameters);
        params.insert(params.end(), values->begin(), values->end());
        selects.push_back(absl::StrCat("SELECT ", i, " AS p, \"t\".id FROM ",
                                       table, " AS \"t\" WHERE ", cond->sql));
      }
      absl::StatusOr<PgResult> r =
          Run(absl::StrJoin(selects, " UNION ALL "), params);
      EXPECT_TRUE(r.ok()) << r.status() << "\n" << selects[0];
      if (!r.ok()) return out;
      for (const auto& row : r->rows) {
        out[std::stoi(*row[0])].insert(std::stoi(*row[1]));
      }
    }
    return out;
  }

  // Checks the partition of every row of `table` and the members of every
  // partition of `partitions` against `expected` (the oracle, by id);
  // `shown` names each row's value in messages.
  void CheckAgainstOracle(
      const std::string& table, const PgPartitionColumns& columns,
      const std::vector<std::optional<std::string>>& expected,
      const std::vector<std::string>& partitions,
      const std::vector<std::string>& shown) {
    const std::vector<PgValue> actual = PartitionsOf(table, columns);
    ASSERT_EQ(actual.size(), expected.size());
    int wrong = 0;
    for (size_t i = 0; i < actual.size(); ++i) {
      if (actual[i] != expected[i] && ++wrong <= 10) {
        ADD_FAILURE() << "partition of " << shown[i] << ": SQL says "
                      << Show(actual[i]) << ", PartitionOfValue says "
                      << Show(expected[i]);
      }
    }
    EXPECT_EQ(wrong, 0) << "rows whose partition differs";

    const std::vector<std::set<int>> members =
        Members(table, columns, partitions);
    ASSERT_EQ(members.size(), partitions.size());
    wrong = 0;
    size_t nonempty = 0;
    for (size_t p = 0; p < partitions.size(); ++p) {
      std::set<int> want;
      for (size_t i = 0; i < expected.size(); ++i) {
        if (expected[i] == partitions[p]) want.insert(static_cast<int>(i));
      }
      if (!want.empty()) ++nonempty;
      if (members[p] == want) continue;
      for (int id : want) {
        if (!members[p].count(id) && ++wrong <= 10) {
          ADD_FAILURE() << "partition " << partitions[p] << " misses "
                        << shown[id];
        }
      }
      for (int id : members[p]) {
        if (!want.count(id) && ++wrong <= 10) {
          ADD_FAILURE() << "partition " << partitions[p] << " holds "
                        << shown[id] << " of partition " << Show(expected[id]);
        }
      }
    }
    EXPECT_EQ(wrong, 0) << "membership errors over " << partitions.size()
                        << " partitions";
    // Not a test of empty partitions only.
    EXPECT_GT(nonempty, partitions.size() / 20)
        << nonempty << " of " << partitions.size();
  }

  // Loads `samples` into a column of `type` and checks every time grain.
  void CheckTypedColumn(const std::string& type, PgColumnKind kind,
                        const std::vector<Sample>& samples, Rng& rng) {
    ASSERT_EQ(PgColumnKindOf(type), kind);
    const std::string table = Table("typed");
    std::vector<std::vector<PgValue>> rows;
    std::vector<std::string> shown;
    for (const Sample& s : samples) {
      rows.push_back({s.literal});
      shown.push_back(
          absl::StrCat(Show(s.literal), " (UTC ", QuoteValue(s.iso), ")"));
    }
    ASSERT_NO_FATAL_FAILURE(
        Load(table, absl::StrCat("v ", type), {type}, rows));
    for (Grain grain : kTimeGrains) {
      SCOPED_TRACE(absl::StrCat(type, ", ", GrainName(grain), " grain, ",
                                samples.size(), " values"));
      std::vector<std::optional<std::string>> expected;
      for (const Sample& s : samples) expected.push_back(OracleOf(grain, s));
      PgPartitionColumns columns = Columns(grain, "\"t\".\"v\"", kind);
      CheckAgainstOracle(table, columns, expected,
                         PartitionsToTest(grain, expected, rng), shown);
    }
  }

  std::unique_ptr<PgConnection> conn_;
  std::string schema_;
  uint64_t seed_ = 0;
};

// ------------------------------------------------------------------ kinds --

TEST(PgMembershipKindTest, ReadsServerAndContractTypeNames) {
  struct Case {
    const char* type;
    PgColumnKind kind;
  };
  for (const Case& c : {
           Case{"date", PgColumnKind::kDate},
           Case{"DATE", PgColumnKind::kDate},
           Case{"timestamp without time zone", PgColumnKind::kTimestamp},
           Case{"timestamp(3) without time zone", PgColumnKind::kTimestamp},
           Case{"TIMESTAMP", PgColumnKind::kTimestamp},
           Case{"Timestamp(6)", PgColumnKind::kTimestamp},
           Case{"timestamp with time zone", PgColumnKind::kTimestampTz},
           Case{"timestamp(0) with time zone", PgColumnKind::kTimestampTz},
           Case{"TIMESTAMP WITH TIME ZONE", PgColumnKind::kTimestampTz},
           Case{"TIMESTAMP  WITH\tTIME ZONE", PgColumnKind::kTimestampTz},
           Case{"TIMESTAMPTZ", PgColumnKind::kTimestampTz},
           Case{"timestamptz(3)", PgColumnKind::kTimestampTz},
           Case{"text", PgColumnKind::kText},
           Case{"TEXT", PgColumnKind::kText},
           Case{"character varying(32)", PgColumnKind::kText},
           Case{"character varying", PgColumnKind::kText},
           Case{"VARCHAR(32)", PgColumnKind::kText},
           Case{"varchar (32)", PgColumnKind::kText},
           Case{" varchar ", PgColumnKind::kText},
           Case{"integer", PgColumnKind::kInteger},
           Case{"INT", PgColumnKind::kInteger},
           Case{"INTEGER", PgColumnKind::kInteger},
           Case{"bigint", PgColumnKind::kInteger},
           Case{"BIGINT", PgColumnKind::kInteger},
           Case{"INT8", PgColumnKind::kInteger},
           Case{"int4", PgColumnKind::kInteger},
           Case{"smallint", PgColumnKind::kInteger},
           Case{"INT2", PgColumnKind::kInteger},
           Case{"SERIAL", PgColumnKind::kInteger},
           Case{"bigserial", PgColumnKind::kInteger},
           Case{"pg_catalog.date", PgColumnKind::kDate},
           Case{"character(10)", PgColumnKind::kOther},
           Case{"CHAR(10)", PgColumnKind::kOther},
           Case{"bpchar", PgColumnKind::kOther},
           Case{"numeric(10,2)", PgColumnKind::kOther},
           Case{"NUMERIC", PgColumnKind::kOther},
           Case{"double precision", PgColumnKind::kOther},
           Case{"REAL", PgColumnKind::kOther},
           Case{"text[]", PgColumnKind::kOther},
           Case{"date[]", PgColumnKind::kOther},
           Case{"integer[]", PgColumnKind::kOther},
           Case{"time without time zone", PgColumnKind::kOther},
           Case{"time with time zone", PgColumnKind::kOther},
           Case{"interval", PgColumnKind::kOther},
           Case{"name", PgColumnKind::kOther},
           Case{"citext", PgColumnKind::kOther},
           Case{"\"char\"", PgColumnKind::kOther},
           Case{"uuid", PgColumnKind::kOther},
           Case{"json", PgColumnKind::kOther},
           Case{"boolean", PgColumnKind::kOther},
           Case{"timestamp with", PgColumnKind::kOther},
           Case{"varchar(32", PgColumnKind::kOther},
           Case{"varchar)32(", PgColumnKind::kOther},
           Case{"", PgColumnKind::kOther},
       }) {
    EXPECT_EQ(PgColumnKindOf(c.type), c.kind) << QuoteValue(c.type);
  }
}

TEST_F(PgMembershipTest, KindsOfTheServersOwnTypeNames) {
  // format_type() of real columns, declared in contract spellings.
  struct Case {
    const char* declared;
    PgColumnKind kind;
  };
  const std::vector<Case> cases = {
      {"DATE", PgColumnKind::kDate},
      {"TIMESTAMP", PgColumnKind::kTimestamp},
      {"TIMESTAMP(3)", PgColumnKind::kTimestamp},
      {"TIMESTAMPTZ", PgColumnKind::kTimestampTz},
      {"TIMESTAMP(0) WITH TIME ZONE", PgColumnKind::kTimestampTz},
      {"TEXT", PgColumnKind::kText},
      {"VARCHAR(32)", PgColumnKind::kText},
      {"VARCHAR", PgColumnKind::kText},
      {"INT", PgColumnKind::kInteger},
      {"SMALLINT", PgColumnKind::kInteger},
      {"INT8", PgColumnKind::kInteger},
      {"SERIAL", PgColumnKind::kInteger},
      {"CHAR(10)", PgColumnKind::kOther},
      {"NUMERIC(10, 2)", PgColumnKind::kOther},
      {"TEXT[]", PgColumnKind::kOther},
      {"TIME", PgColumnKind::kOther},
      {"DOUBLE PRECISION", PgColumnKind::kOther},
  };
  std::vector<std::string> columns;
  for (size_t i = 0; i < cases.size(); ++i) {
    EXPECT_EQ(PgColumnKindOf(cases[i].declared), cases[i].kind)
        << cases[i].declared;
    columns.push_back(absl::StrCat("c", i, " ", cases[i].declared));
  }
  Exec(absl::StrCat("CREATE TABLE ", Table("kinds"), " (",
                    absl::StrJoin(columns, ", "), ")"));
  absl::StatusOr<PgResult> r =
      Run("SELECT attname, pg_catalog.format_type(atttypid, atttypmod) FROM "
          "pg_catalog.pg_attribute WHERE attrelid = $1::pg_catalog.regclass "
          "AND attnum > 0 ORDER BY attnum",
          {Table("kinds")});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->rows.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    EXPECT_EQ(PgColumnKindOf(*r->rows[i][1]), cases[i].kind)
        << cases[i].declared << " is " << *r->rows[i][1] << " on the server";
  }
}

// ---------------------------------------------------------- the functions --

TEST_F(PgMembershipTest, FunctionAgreesWithCoreOnGeneratedText) {
  Rng rng = MakeRng(seed_, 1);
  const std::vector<std::string> values = TextSamples(rng);
  std::vector<std::string> all = values;
  const std::vector<std::string> keys = KeySamples(rng);
  all.insert(all.end(), keys.begin(), keys.end());
  SCOPED_TRACE(absl::StrCat("seed ", seed_, ", ", all.size(), " values"));
  std::vector<std::vector<PgValue>> rows;
  for (const std::string& v : all) rows.push_back({v});
  rows.push_back({std::nullopt});
  ASSERT_NO_FATAL_FAILURE(Load(Table("texts"), "v text", {"text"}, rows));

  for (const char* grain : {"hour", "day", "month", "key", ""}) {
    SCOPED_TRACE(absl::StrCat("grain \"", grain, "\""));
    absl::StatusOr<PgResult> r = Run(
        absl::StrCat("SELECT v, ", schema_, "._bf_partition_of($1, v) FROM ",
                     Table("texts"), " ORDER BY id"),
        {std::string(grain)});
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->rows.size(), rows.size());
    const Grain g = *grain == '\0' ? Grain::kNone : *ParseGrain(grain);
    int wrong = 0;
    size_t accepted = 0;
    for (size_t i = 0; i < all.size(); ++i) {
      ASSERT_EQ(r->rows[i][0], all[i]);  // the text made the round trip
      const std::optional<std::string> want = OracleOf(g, all[i]);
      if (want) ++accepted;
      if (r->rows[i][1] != want && ++wrong <= 10) {
        ADD_FAILURE() << "_bf_partition_of('" << grain << "', "
                      << QuoteValue(all[i]) << ") is " << Show(r->rows[i][1])
                      << ", PartitionOfValue says " << Show(want);
      }
    }
    EXPECT_EQ(wrong, 0);
    // NULL belongs to no partition (the unpartitioned grain aside).
    EXPECT_EQ(r->rows.back()[1],
              g == Grain::kNone ? PgValue("") : PgValue(std::nullopt));
    // Both sides of a time grain's definition are well represented.
    if (IsTimeGrain(g)) {
      EXPECT_GT(accepted, all.size() / 5);
      EXPECT_GT(all.size() - accepted, all.size() / 5);
    }
  }
  RecordProperty("values", static_cast<int>(all.size()));

  // An unknown grain is an error, not "no partition".
  absl::StatusOr<PgResult> bad =
      Run(absl::StrCat("SELECT ", schema_, "._bf_partition_of('week', 'x')"));
  EXPECT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("unknown grain"));
  bad = Run(absl::StrCat("SELECT ", schema_,
                         "._bf_partition_of('key', '2025-03-01', 'eu')"));
  EXPECT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("not a time grain"));
}

TEST_F(PgMembershipTest, TimeKeyFunctionAgreesWithCore) {
  Rng rng = MakeRng(seed_, 2);
  const std::vector<std::string> times = TextSamples(rng);
  const std::vector<std::string> keys = KeySamples(rng);
  std::vector<std::pair<PgValue, PgValue>> pairs;
  for (int i = 0; i < 5000; ++i) {
    pairs.push_back({times[Uniform(rng, 0, times.size() - 1)],
                     keys[Uniform(rng, 0, keys.size() - 1)]});
  }
  pairs.push_back({std::nullopt, std::string("eu")});
  pairs.push_back({std::string("2025-03-01"), std::nullopt});
  SCOPED_TRACE(absl::StrCat("seed ", seed_, ", ", pairs.size(), " pairs"));
  std::vector<std::vector<PgValue>> rows;
  for (const auto& [t, k] : pairs) rows.push_back({t, k});
  ASSERT_NO_FATAL_FAILURE(
      Load(Table("pairs"), "v text, k text", {"text", "text"}, rows));
  for (Grain grain : kTimeGrains) {
    SCOPED_TRACE(GrainName(grain));
    absl::StatusOr<PgResult> r = Run(
        absl::StrCat("SELECT ", schema_, "._bf_partition_of($1, v, k) FROM ",
                     Table("pairs"), " ORDER BY id"),
        {std::string(GrainName(grain))});
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->rows.size(), pairs.size());
    int wrong = 0, accepted = 0;
    for (size_t i = 0; i < pairs.size(); ++i) {
      const auto& [t, k] = pairs[i];
      const std::optional<std::string> want =
          t && k ? OracleOf(grain, *t, *k) : std::nullopt;
      if (want) ++accepted;
      if (r->rows[i][0] != want && ++wrong <= 10) {
        ADD_FAILURE() << "_bf_partition_of('" << GrainName(grain) << "', "
                      << Show(t) << ", " << Show(k) << ") is "
                      << Show(r->rows[i][0]) << ", PartitionOfValues says "
                      << Show(want);
      }
    }
    EXPECT_EQ(wrong, 0);
    EXPECT_GT(accepted, 500);
  }
}

TEST_F(PgMembershipTest, FunctionsAreImmutableAndParallelSafe) {
  absl::StatusOr<PgResult> r = Run(
      "SELECT p.pronargs, p.provolatile, p.proparallel, l.lanname, "
      "pg_catalog.format_type(p.prorettype, NULL) FROM pg_catalog.pg_proc p "
      "JOIN pg_catalog.pg_language l ON l.oid = p.prolang "
      "WHERE p.pronamespace = $1::pg_catalog.regnamespace AND p.proname = $2 "
      "ORDER BY p.pronargs",
      {schema_, std::string(kPartitionFunction)});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->rows.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(r->rows[i][0], PgValue(i == 0 ? "2" : "3"));
    EXPECT_EQ(r->rows[i][1], PgValue("i"));  // immutable
    EXPECT_EQ(r->rows[i][2], PgValue("s"));  // parallel safe
    EXPECT_EQ(r->rows[i][3], PgValue("plpgsql"));
    EXPECT_EQ(r->rows[i][4], PgValue("text"));
  }
  // CREATE OR REPLACE: installing again is harmless.
  for (const std::string& statement : PartitionFunctionSql(schema_)) {
    Exec(statement);
  }
  // A parallel plan may run them in workers (no subtransactions there).
  Exec(absl::StrCat("CREATE TABLE ", Table("par"),
                    " AS SELECT pg_catalog.to_char(TIMESTAMP '2020-01-01' + "
                    "i * INTERVAL '1 minute', 'YYYY-MM-DD\"T\"HH24:MI') AS v "
                    "FROM pg_catalog.generate_series(1, 20000) i"));
  Exec("SET max_parallel_workers_per_gather = 2");
  Exec("SET parallel_setup_cost = 0");
  Exec("SET parallel_tuple_cost = 0");
  Exec("SET min_parallel_table_scan_size = 0");
  // Run them in a worker even where the planner would not (the setting's
  // name of PostgreSQL 15, and of 16 on).
  const bool forced = Run("SET force_parallel_mode = on").ok() ||
                      Run("SET debug_parallel_query = on").ok();
  EXPECT_TRUE(forced);
  absl::StatusOr<PgResult> count = Run(
      absl::StrCat("SELECT pg_catalog.count(*) FROM ", Table("par"), " WHERE ",
                   schema_, "._bf_partition_of('day', v) = '2020-01-05'"));
  ASSERT_TRUE(count.ok()) << count.status();
  EXPECT_EQ(count->rows[0][0], PgValue("1440"));
}

// ------------------------------------------------------------ time columns --

TEST_F(PgMembershipTest, DateColumnAgreesWithCoreOnEveryGrain) {
  Rng rng = MakeRng(seed_, 3);
  const std::vector<Sample> samples = DateSamples(rng);
  SCOPED_TRACE(absl::StrCat("seed ", seed_));
  CheckTypedColumn("date", PgColumnKind::kDate, samples, rng);
  RecordProperty("values", static_cast<int>(samples.size()));
}

TEST_F(PgMembershipTest, TimestampColumnAgreesWithCoreOnEveryGrain) {
  Rng rng = MakeRng(seed_, 4);
  const std::vector<Sample> samples = TimestampSamples(rng);
  SCOPED_TRACE(absl::StrCat("seed ", seed_));
  CheckTypedColumn("timestamp", PgColumnKind::kTimestamp, samples, rng);
  RecordProperty("values", static_cast<int>(samples.size()));
}

TEST_F(PgMembershipTest, TimestampTzColumnAgreesWithCoreOnEveryGrain) {
  Rng rng = MakeRng(seed_, 5);
  const std::vector<Sample> samples = TimestampTzSamples(rng);
  SCOPED_TRACE(absl::StrCat("seed ", seed_));
  CheckTypedColumn("timestamp with time zone", PgColumnKind::kTimestampTz,
                   samples, rng);
  RecordProperty("values", static_cast<int>(samples.size()));
}

TEST_F(PgMembershipTest, TextColumnAgreesWithCoreInAnyCollation) {
  Rng rng = MakeRng(seed_, 6);
  const std::vector<std::string> values = TextSamples(rng);
  SCOPED_TRACE(absl::StrCat("seed ", seed_, ", ", values.size(), " values"));
  // The same values in the database's collation (C), in an ICU collation
  // whose order is not byte order ('~' sorts before digits), in a
  // nondeterministic one, and as VARCHAR.
  Exec(absl::StrCat("CREATE COLLATION ", schema_,
                    ".ci (provider = icu, locale = 'und-u-ks-level2', "
                    "deterministic = false)"));
  std::vector<std::vector<PgValue>> rows;
  std::vector<std::string> shown;
  for (const std::string& v : values) {
    rows.push_back({v, v, v, v});
    shown.push_back(QuoteValue(v));
  }
  rows.push_back({std::nullopt, std::nullopt, std::nullopt, std::nullopt});
  shown.push_back("NULL");
  ASSERT_NO_FATAL_FAILURE(
      Load(Table("texts"),
           absl::StrCat("v text, vi text COLLATE pg_catalog.\"und-x-icu\", vn "
                        "text COLLATE ",
                        schema_, ".ci, vv varchar(64)"),
           {"text", "text", "text", "varchar"}, rows));
  // Indexes serve the candidate ranges (as the plan test shows).
  for (const char* column : {"v", "vi", "vn", "vv"}) {
    Exec(absl::StrCat("CREATE INDEX ON ", Table("texts"), " ((", column,
                      " COLLATE \"C\"))"));
  }
  Exec(absl::StrCat("ANALYZE ", Table("texts")));
  for (Grain grain : kTimeGrains) {
    std::vector<std::optional<std::string>> expected;
    for (const std::string& v : values) expected.push_back(OracleOf(grain, v));
    expected.push_back(std::nullopt);
    const std::vector<std::string> partitions =
        PartitionsToTest(grain, expected, rng, 80);
    for (const char* column : {"v", "vi", "vn", "vv"}) {
      SCOPED_TRACE(absl::StrCat(GrainName(grain), " grain, column ", column));
      const std::string type =
          std::string_view(column) == "vv" ? "character varying(64)" : "text";
      PgPartitionColumns columns = Columns(
          grain, absl::StrCat("\"t\".\"", column, "\""), PgColumnKindOf(type));
      CheckAgainstOracle(Table("texts"), columns, expected, partitions, shown);
      if (std::string_view(column) == "v") {
        // The database's collation is C: the range in the column's own
        // collation must select the same rows.
        SCOPED_TRACE("compared in the column's own (byte) order");
        columns.byte_ordered = true;
        CheckAgainstOracle(Table("texts"), columns, expected, partitions,
                           shown);
      }
    }
  }
  RecordProperty("values", static_cast<int>(values.size()));

  // The collation matters: the ICU column's own order loses rows of the
  // candidate range that byte order keeps.
  absl::StatusOr<PgResult> r =
      Run(absl::StrCat("SELECT pg_catalog.count(*) FILTER (WHERE vi >= $1 AND "
                       "vi < $2), pg_catalog.count(*) FILTER (WHERE vi COLLATE "
                       "\"C\" >= $1 AND vi COLLATE \"C\" < $2) FROM ",
                       Table("texts")),
          {std::string("2024-02-29"), std::string("2024-02-29~")});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NE(r->rows[0][0], r->rows[0][1]);
}

// -------------------------------------------------------------------- keys --

TEST_F(PgMembershipTest, TextKeysMatchExactlyTheirOwnBytes) {
  Rng rng = MakeRng(seed_, 7);
  const std::vector<std::string> keys = KeySamples(rng);
  SCOPED_TRACE(absl::StrCat("seed ", seed_));
  Exec(absl::StrCat("CREATE COLLATION ", schema_,
                    ".ci (provider = icu, locale = 'und-u-ks-level2', "
                    "deterministic = false)"));
  std::vector<std::vector<PgValue>> rows;
  std::vector<std::string> shown;
  for (int copy = 0; copy < 3; ++copy) {
    for (const std::string& k : keys) {
      rows.push_back({k, k, k});
      shown.push_back(QuoteValue(k));
    }
  }
  rows.push_back({std::nullopt, std::nullopt, std::nullopt});
  shown.push_back("NULL");
  ASSERT_NO_FATAL_FAILURE(Load(
      Table("keys"),
      absl::StrCat("k text, kv varchar(300), kn text COLLATE ", schema_, ".ci"),
      {"text", "varchar", "text"}, rows));
  std::vector<std::optional<std::string>> expected;
  std::set<std::string> valid;
  for (const auto& row : rows) {
    expected.push_back(row[0] ? OracleOf(Grain::kKey, *row[0]) : std::nullopt);
    if (expected.back()) valid.insert(*expected.back());
  }
  // Keys of rows, and valid keys no row holds.
  std::vector<std::string> partitions(valid.begin(), valid.end());
  for (const char* k : {"EU ", "nobody", "\u00e9\u00e9"})
    partitions.push_back(k);
  for (const char* column : {"k", "kv", "kn"}) {
    SCOPED_TRACE(absl::StrCat("column ", column));
    PgPartitionColumns columns = Columns(
        Grain::kKey, absl::StrCat("\"t\".\"", column, "\""),
        std::string_view(column) == "kv" ? PgColumnKindOf("varchar(300)")
                                         : PgColumnKind::kText);
    CheckAgainstOracle(Table("keys"), columns, expected, partitions, shown);
  }
  RecordProperty("values", static_cast<int>(rows.size()));

  // Keys the key grain refuses name no partition.
  PgPartitionColumns columns =
      Columns(Grain::kKey, "\"t\".\"k\"", PgColumnKind::kText);
  for (const std::string& bad :
       {std::string(""), std::string("a\x01"), std::string(257, 'k')}) {
    EXPECT_EQ(MembershipValues(columns, bad).status().code(),
              absl::StatusCode::kInvalidArgument)
        << QuoteValue(bad);
  }
}

TEST_F(PgMembershipTest, IntegerKeysAreTheirDecimalText) {
  Rng rng = MakeRng(seed_, 8);
  SCOPED_TRACE(absl::StrCat("seed ", seed_));
  std::vector<int64_t> values = {0,         7,          -7,
                                 1,         -1,         32767,
                                 -32768,    2147483647, -2147483648LL,
                                 INT64_MAX, INT64_MIN,  100000};
  for (int i = 0; i < 3000; ++i) {
    switch (Uniform(rng, 0, 3)) {
      case 0:
        values.push_back(Uniform(rng, -20, 20));
        break;
      case 1:
        values.push_back(Uniform(rng, -32768, 32767));
        break;
      case 2:
        values.push_back(Uniform(rng, INT32_MIN, INT32_MAX));
        break;
      default:
        values.push_back(Uniform(rng, INT64_MIN, INT64_MAX));
        break;
    }
  }
  // One table per width; a value out of a width's range is NULL there.
  struct Width {
    const char* type;
    int64_t min, max;
  };
  const Width widths[] = {{"smallint", -32768, 32767},
                          {"integer", INT32_MIN, INT32_MAX},
                          {"bigint", INT64_MIN, INT64_MAX}};
  // Keys: the values' own texts, and spellings of numbers that are not
  // canonical decimal, or not within BIGINT.
  std::set<std::string> canonical;
  for (int64_t v : values) canonical.insert(absl::StrCat(v));
  std::vector<std::string> partitions(canonical.begin(), canonical.end());
  std::shuffle(partitions.begin(), partitions.end(), rng);
  partitions.resize(std::min<size_t>(partitions.size(), 300));
  for (const char* k : {"7",
                        "007",
                        "07",
                        "+7",
                        " 7",
                        "7 ",
                        "-0",
                        "0",
                        "00",
                        "-7",
                        "--7",
                        "7.0",
                        "1e3",
                        "0x7",
                        "9223372036854775807",
                        "9223372036854775808",
                        "-9223372036854775808",
                        "-9223372036854775809",
                        "99999999999999999999999",
                        "32768",
                        "2147483648",
                        "٧",
                        "seven"}) {
    partitions.push_back(k);
  }
  for (const Width& w : widths) {
    SCOPED_TRACE(w.type);
    ASSERT_EQ(PgColumnKindOf(w.type), PgColumnKind::kInteger);
    std::vector<std::vector<PgValue>> rows;
    std::vector<std::optional<std::string>> expected;
    std::vector<std::string> shown;
    for (int64_t v : values) {
      const bool fits = v >= w.min && v <= w.max;
      rows.push_back({fits ? PgValue(absl::StrCat(v)) : std::nullopt});
      expected.push_back(fits ? OracleOf(Grain::kKey, absl::StrCat(v))
                              : std::nullopt);
      shown.push_back(fits ? absl::StrCat(v) : "NULL");
    }
    const std::string table = Table(absl::StrCat("ints_", w.type));
    ASSERT_NO_FATAL_FAILURE(
        Load(table, absl::StrCat("k ", w.type), {w.type}, rows));
    PgPartitionColumns columns =
        Columns(Grain::kKey, "\"t\".\"k\"", PgColumnKind::kInteger);
    CheckAgainstOracle(table, columns, expected, partitions, shown);

    // A key no BIGINT spells: the condition is FALSE on every row (NULL
    // rows too), not NULL.
    absl::StatusOr<PgCondition> cond = MembershipCondition(columns, schema_, 1);
    ASSERT_TRUE(cond.ok()) << cond.status();
    for (const char* k : {"007", "9223372036854775808", "x"}) {
      absl::StatusOr<std::vector<PgValue>> v = MembershipValues(columns, k);
      ASSERT_TRUE(v.ok()) << v.status();
      EXPECT_EQ(*v, std::vector<PgValue>{std::nullopt}) << k;
      absl::StatusOr<PgResult> r =
          Run(absl::StrCat("SELECT pg_catalog.bool_and((", cond->sql,
                           ") IS FALSE), pg_catalog.count(*) FROM ", table,
                           " AS \"t\""),
              *v);
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_EQ(r->rows[0][0], PgValue("t")) << k;
    }
  }
  RecordProperty("values", static_cast<int>(values.size()));
}

// ------------------------------------------------------------- time x key --

TEST_F(PgMembershipTest, TimeByKeyAgreesWithCoreOnEveryKind) {
  Rng rng = MakeRng(seed_, 9);
  SCOPED_TRACE(absl::StrCat("seed ", seed_));
  const std::vector<std::string> key_texts = KeySamples(rng);
  std::vector<std::string> declared = {
      "eu", "us", "EU", "7", "007", "-3", std::string(256, 'k')};
  struct Combo {
    const char* time_type;
    PgColumnKind time_kind;
    const char* key_type;
  };
  const Combo combos[] = {
      {"date", PgColumnKind::kDate, "text"},
      {"date", PgColumnKind::kDate, "integer"},
      {"timestamp", PgColumnKind::kTimestamp, "varchar(300)"},
      {"timestamp", PgColumnKind::kTimestamp, "bigint"},
      {"timestamptz", PgColumnKind::kTimestampTz, "text"},
      {"timestamptz", PgColumnKind::kTimestampTz, "smallint"},
      {"text", PgColumnKind::kText, "text"},
      {"text", PgColumnKind::kText, "integer"},
  };
  size_t total = 0;
  for (const Combo& combo : combos) {
    SCOPED_TRACE(absl::StrCat(combo.time_type, " x ", combo.key_type));
    const PgColumnKind key_kind = PgColumnKindOf(combo.key_type);
    std::vector<Sample> times;
    if (combo.time_kind == PgColumnKind::kDate) {
      times = DateSamples(rng);
    } else if (combo.time_kind == PgColumnKind::kTimestamp) {
      times = TimestampSamples(rng);
    } else if (combo.time_kind == PgColumnKind::kTimestampTz) {
      times = TimestampTzSamples(rng);
    } else {
      for (const std::string& v : TextSamples(rng)) times.push_back({v, v});
    }
    std::shuffle(times.begin(), times.end(), rng);
    times.resize(std::min<size_t>(times.size(), 2500));
    std::vector<std::vector<PgValue>> rows;
    std::vector<Sample> keys;  // the key's literal and its text
    for (size_t i = 0; i < times.size(); ++i) {
      PgValue key;
      if (key_kind == PgColumnKind::kInteger) {
        const int64_t n =
            Uniform(rng, 0, 3) == 0 ? 7 : Uniform(rng, -5, 10);  // -3, 7 ...
        key = absl::StrCat(n);
      } else if (Uniform(rng, 0, 1) == 0) {
        key = declared[Uniform(rng, 0, declared.size() - 1)];
      } else {
        key = key_texts[Uniform(rng, 0, key_texts.size() - 1)];
      }
      if (i % 100 == 0) key = std::nullopt;
      rows.push_back({times[i].literal, key});
      keys.push_back({key, key.value_or("")});
    }
    const std::string table = Table("timekey");
    Exec(absl::StrCat("DROP TABLE IF EXISTS ", table));
    ASSERT_NO_FATAL_FAILURE(
        Load(table, absl::StrCat("v ", combo.time_type, ", k ", combo.key_type),
             {combo.time_type, combo.key_type}, rows));
    total += rows.size();
    for (Grain grain : kTimeGrains) {
      SCOPED_TRACE(GrainName(grain));
      std::vector<std::optional<std::string>> expected;
      std::vector<std::string> shown;
      std::vector<std::optional<std::string>> time_parts;
      for (size_t i = 0; i < rows.size(); ++i) {
        expected.push_back(times[i].literal && keys[i].literal
                               ? OracleOf(grain, times[i].iso, keys[i].iso)
                               : std::nullopt);
        time_parts.push_back(OracleOf(grain, times[i]));
        shown.push_back(absl::StrCat(Show(times[i].literal), " (UTC ",
                                     QuoteValue(times[i].iso), ") x ",
                                     Show(keys[i].literal)));
      }
      PgPartitionColumns columns =
          Columns(PartitionLayout(grain, declared), "\"t\".\"v\"",
                  combo.time_kind, "\"t\".\"k\"", key_kind);
      // Partitions: the calendar's boundaries x every declared key, and
      // those of random rows with a declared key, with the times around.
      std::set<std::string> partitions;
      for (const std::string& t : PartitionsToTest(grain, time_parts, rng, 0)) {
        for (const std::string& k : declared) {
          partitions.insert(JoinTimeKey(t, k));
        }
      }
      std::vector<size_t> order(rows.size());
      for (size_t i = 0; i < order.size(); ++i) order[i] = i;
      std::shuffle(order.begin(), order.end(), rng);
      int picked = 0;
      for (size_t i : order) {
        if (picked == 80) break;
        if (!expected[i] || std::find(declared.begin(), declared.end(),
                                      *keys[i].literal) == declared.end()) {
          continue;
        }
        ++picked;
        for (const std::string& t : Around(grain, *time_parts[i])) {
          partitions.insert(JoinTimeKey(t, *keys[i].literal));
        }
      }
      CheckAgainstOracle(table, columns, expected,
                         {partitions.begin(), partitions.end()}, shown);
    }
  }
  RecordProperty("values", static_cast<int>(total));
}

// ------------------------------------------------------------------- plans --

// EXPLAIN of the membership condition on an indexed, ANALYZEd table with
// sequential scans off: the index serves the condition, with the values
// bound (a custom plan) and as parameters (a generic plan).
TEST_F(PgMembershipTest, IndexServesTheConditionOfEveryKind) {
  struct Case {
    const char* type;
    PgColumnKind kind;
    Grain grain;
    const char* index;  // the indexed expression
    std::string partition;
    // The column is created COLLATE "C" and compared in its own collation.
    bool byte_ordered = false;
  };
  const Case cases[] = {
      {"date", PgColumnKind::kDate, Grain::kDay, "v", "2024-02-29"},
      {"date", PgColumnKind::kDate, Grain::kMonth, "v", "2024-02"},
      {"date", PgColumnKind::kDate, Grain::kHour, "v", "2024-02-29T00"},
      {"timestamp", PgColumnKind::kTimestamp, Grain::kHour, "v",
       "2024-02-29T23"},
      {"timestamp", PgColumnKind::kTimestamp, Grain::kDay, "v", "2024-03-01"},
      {"timestamptz", PgColumnKind::kTimestampTz, Grain::kHour, "v",
       "2024-02-29T23"},
      {"timestamptz", PgColumnKind::kTimestampTz, Grain::kMonth, "v",
       "2024-02"},
      {"text", PgColumnKind::kText, Grain::kDay, "(v COLLATE \"C\")",
       "2024-02-29"},
      {"varchar(40)", PgColumnKind::kText, Grain::kHour, "(v COLLATE \"C\")",
       "2024-02-29T23"},
      {"text", PgColumnKind::kText, Grain::kDay, "v", "2024-02-29", true},
      {"varchar(40)", PgColumnKind::kText, Grain::kMonth, "v", "2024-02", true},
      {"text", PgColumnKind::kText, Grain::kKey, "v", "k7"},
      {"bigint", PgColumnKind::kInteger, Grain::kKey, "v", "7"},
      {"smallint", PgColumnKind::kInteger, Grain::kKey, "v", "7"},
  };
  int n = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(absl::StrCat(c.type, ", ", GrainName(c.grain)));
    ASSERT_EQ(PgColumnKindOf(c.type), c.kind);
    const std::string name = absl::StrCat("plan", n++);
    const std::string table = Table(name);
    // 4000 rows, 37 minutes apart (about 100 days), or 100 keys.
    const std::string value =
        c.grain == Grain::kKey
            ? (c.kind == PgColumnKind::kText ? "'k' || (i % 100)" : "i % 100")
        : c.kind == PgColumnKind::kText
            ? "pg_catalog.to_char(TIMESTAMP '2024-01-01' + i * INTERVAL '37 "
              "minutes', 'YYYY-MM-DD\"T\"HH24:MI:SS')"
            : "TIMESTAMPTZ '2024-01-01 00:00:00+00' + i * INTERVAL '37 "
              "minutes'";
    Exec(absl::StrCat("CREATE TABLE ", table, " (id integer, v ", c.type,
                      c.byte_ordered ? " COLLATE \"C\"" : "", ")"));
    Exec(absl::StrCat("INSERT INTO ", table, " SELECT i, (", value, ")::",
                      c.type, " FROM pg_catalog.generate_series(1, 4000) i"));
    const std::string index = absl::StrCat(name, "_v");
    Exec(absl::StrCat("CREATE INDEX ", index, " ON ", table, " (", c.index,
                      ")"));
    Exec(absl::StrCat("ANALYZE ", table));
    Exec("SET enable_seqscan = off");

    PgPartitionColumns columns = Columns(c.grain, "\"t\".\"v\"", c.kind);
    columns.byte_ordered = c.byte_ordered;
    absl::StatusOr<PgCondition> cond = MembershipCondition(columns, schema_, 1);
    ASSERT_TRUE(cond.ok()) << cond.status();
    absl::StatusOr<std::vector<PgValue>> values =
        MembershipValues(columns, c.partition);
    ASSERT_TRUE(values.ok()) << values.status();
    const std::string select = absl::StrCat("SELECT \"t\".id FROM ", table,
                                            " AS \"t\" WHERE ", cond->sql);

    // The condition selects some rows, so that the plans are for real.
    absl::StatusOr<PgResult> rows = Run(select, *values);
    ASSERT_TRUE(rows.ok()) << rows.status();
    EXPECT_FALSE(rows->rows.empty());

    auto expect_index = [&](const PgResult& plan, const char* which) {
      std::string text;
      for (const auto& row : plan.rows) absl::StrAppend(&text, *row[0], "\n");
      EXPECT_THAT(text, HasSubstr(index)) << which << " plan:\n" << text;
      EXPECT_TRUE(absl::StrContains(text, "Index Scan") ||
                  absl::StrContains(text, "Index Only Scan"))
          << which << " plan:\n"
          << text;
      EXPECT_THAT(text, ::testing::Not(HasSubstr("Seq Scan")))
          << which << " plan:\n"
          << text;
    };
    absl::StatusOr<PgResult> plan =
        Run(absl::StrCat("EXPLAIN ", select), *values);
    ASSERT_TRUE(plan.ok()) << plan.status();
    expect_index(*plan, "custom");

    const std::string prepared = absl::StrCat("q_", name);
    Exec(absl::StrCat("PREPARE ", prepared, " AS ", select));
    Exec("SET plan_cache_mode = force_generic_plan");
    std::vector<std::string> literals;
    for (const PgValue& v : *values) {
      literals.push_back(v ? absl::StrCat("'", *v, "'") : "NULL");
    }
    plan = Run(absl::StrCat("EXPLAIN EXECUTE ", prepared, "(",
                            absl::StrJoin(literals, ", "), ")"));
    ASSERT_TRUE(plan.ok()) << plan.status();
    expect_index(*plan, "generic");
    Exec("RESET plan_cache_mode");
    Exec("RESET enable_seqscan");
  }
}

// ------------------------------------------------------- the SQL builders --

TEST_F(PgMembershipTest, ParametersAreNumberedFromTheFirstGiven) {
  PgPartitionColumns columns =
      Columns(PartitionLayout(Grain::kDay, {"eu", "us"}), "\"t\".\"v\"",
              PgColumnKind::kText, "\"t\".\"k\"", PgColumnKind::kInteger);
  absl::StatusOr<PgCondition> cond = MembershipCondition(columns, schema_, 5);
  ASSERT_TRUE(cond.ok()) << cond.status();
  EXPECT_EQ(cond->parameters, 4);
  for (const char* p : {"$5", "$6", "$7", "$8"}) {
    EXPECT_THAT(cond->sql, HasSubstr(p));
  }
  EXPECT_THAT(cond->sql, ::testing::Not(HasSubstr("$4")));
  EXPECT_THAT(cond->sql, ::testing::Not(HasSubstr("$9")));
  EXPECT_EQ(MembershipCondition(columns, schema_, 0).status().code(),
            absl::StatusCode::kInvalidArgument);

  // The values are the candidate range, the time and the key.
  absl::StatusOr<std::vector<PgValue>> values =
      MembershipValues(columns, "2025-03-01|eu");
  ASSERT_TRUE(values.ok()) << values.status();
  EXPECT_EQ(*values,
            (std::vector<PgValue>{"2025-03-01", "2025-03-01~", "2025-03-01",
                                  std::nullopt}));  // "eu" is no integer

  // Typed bounds: dates for DATE, +00 for TIMESTAMPTZ; a DATE column's
  // hours other than 00 hold nothing.
  struct Bounds {
    PgColumnKind kind;
    Grain grain;
    const char* partition;
    std::vector<PgValue> values;
  };
  for (const Bounds& b : {
           Bounds{PgColumnKind::kDate,
                  Grain::kDay,
                  "2024-02-29",
                  {"2024-02-29", "2024-03-01"}},
           Bounds{PgColumnKind::kDate,
                  Grain::kMonth,
                  "2024-12",
                  {"2024-12-01", "2025-01-01"}},
           Bounds{PgColumnKind::kDate,
                  Grain::kHour,
                  "2024-12-31T00",
                  {"2024-12-31", "2025-01-01"}},
           Bounds{PgColumnKind::kDate,
                  Grain::kHour,
                  "2024-12-31T23",
                  {"2025-01-01", "2025-01-01"}},
           Bounds{PgColumnKind::kTimestamp,
                  Grain::kHour,
                  "2024-12-31T23",
                  {"2024-12-31 23:00:00", "2025-01-01 00:00:00"}},
           Bounds{PgColumnKind::kTimestampTz,
                  Grain::kDay,
                  "9999-12-30",
                  {"9999-12-30 00:00:00+00", "9999-12-31 00:00:00+00"}},
           Bounds{PgColumnKind::kTimestampTz,
                  Grain::kMonth,
                  "0001-01",
                  {"0001-01-01 00:00:00+00", "0001-02-01 00:00:00+00"}},
       }) {
    PgPartitionColumns c = Columns(b.grain, "\"v\"", b.kind);
    absl::StatusOr<std::vector<PgValue>> v = MembershipValues(c, b.partition);
    ASSERT_TRUE(v.ok()) << v.status();
    EXPECT_EQ(*v, b.values) << b.partition;
  }

  // Unpartitioned: TRUE, no parameters, partition "" only.
  PgPartitionColumns none = Columns(Grain::kNone, "", PgColumnKind::kOther);
  cond = MembershipCondition(none, schema_, 1);
  ASSERT_TRUE(cond.ok());
  EXPECT_EQ(cond->sql, "TRUE");
  EXPECT_EQ(cond->parameters, 0);
  EXPECT_TRUE(MembershipValues(none, "")->empty());
  EXPECT_FALSE(MembershipValues(none, "x").ok());
  absl::StatusOr<std::string> expr = PartitionExpression(none, schema_);
  ASSERT_TRUE(expr.ok());
  absl::StatusOr<PgResult> r = Run(absl::StrCat("SELECT ", *expr));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->rows[0][0], PgValue(""));
}

TEST_F(PgMembershipTest, RefusesKindsAndPartitionsOutsideTheDefinition) {
  // Kinds that cannot hold the grain.
  for (const PgPartitionColumns& c : {
           Columns(Grain::kDay, "\"v\"", PgColumnKind::kInteger),
           Columns(Grain::kHour, "\"v\"", PgColumnKind::kOther),
           Columns(Grain::kKey, "\"v\"", PgColumnKind::kDate),
           Columns(Grain::kKey, "\"v\"", PgColumnKind::kTimestampTz),
           Columns(Grain::kMonth, "", PgColumnKind::kDate),
           Columns(PartitionLayout(Grain::kDay, {"eu"}), "\"v\"",
                   PgColumnKind::kDate, "\"k\"", PgColumnKind::kDate),
           Columns(PartitionLayout(Grain::kDay, {"eu"}), "\"v\"",
                   PgColumnKind::kDate, "", PgColumnKind::kText),
       }) {
    EXPECT_EQ(CheckPartitionColumns(c).code(),
              absl::StatusCode::kInvalidArgument);
    EXPECT_FALSE(MembershipCondition(c, schema_, 1).ok());
    EXPECT_FALSE(PartitionExpression(c, schema_).ok());
  }
  // Partitions the core refuses, the last of year 9999 among them.
  struct Bad {
    PartitionLayout layout;
    const char* partition;
  };
  for (PgColumnKind kind : {PgColumnKind::kDate, PgColumnKind::kTimestamp,
                            PgColumnKind::kTimestampTz, PgColumnKind::kText}) {
    for (const Bad& b : {
             Bad{Grain::kHour, "9999-12-31T23"},
             Bad{Grain::kDay, "9999-12-31"},
             Bad{Grain::kMonth, "9999-12"},
             Bad{Grain::kDay, "2025-02-29"},
             Bad{Grain::kHour, "2025-03-01T24"},
             Bad{Grain::kHour, "2025-03-01 07"},
             Bad{Grain::kDay, "2025-03-01T00"},
             Bad{Grain::kMonth, "2025-03-01"},
             Bad{PartitionLayout(Grain::kDay, {"eu"}), "2025-03-01|us"},
             Bad{PartitionLayout(Grain::kDay, {"eu"}), "2025-03-01"},
             Bad{PartitionLayout(Grain::kDay, {"eu"}), "9999-12-31|eu"},
         }) {
      PgPartitionColumns c =
          Columns(b.layout, "\"v\"", kind, "\"k\"", PgColumnKind::kText);
      EXPECT_EQ(MembershipValues(c, b.partition).status().code(),
                absl::StatusCode::kInvalidArgument)
          << b.partition << " on " << PgColumnKindName(kind);
    }
  }
}

TEST_F(PgMembershipTest, ColumnsOfADatasetSpec) {
  DatasetSpec ds;
  ds.partition = PartitionSpec{"day", Grain::kDay, {"eu", "us"}, "region"};
  PgPartitionColumns c =
      PartitionColumnsOf(ds, "\"t\".\"day\"", PgColumnKind::kDate,
                         "\"t\".\"region\"", PgColumnKind::kText);
  EXPECT_EQ(c.layout.grain, Grain::kDay);
  EXPECT_EQ(c.layout.keys, (std::vector<std::string>{"eu", "us"}));
  EXPECT_EQ(c.key_column, "\"t\".\"region\"");
  EXPECT_TRUE(CheckPartitionColumns(c).ok());

  ds.partition = PartitionSpec{"region", Grain::kKey, {"eu", "us"}};
  c = PartitionColumnsOf(ds, "\"region\"", PgColumnKind::kText, "\"x\"",
                         PgColumnKind::kText);
  EXPECT_FALSE(c.layout.two_dimensional());
  EXPECT_EQ(c.key_column, "");
  EXPECT_TRUE(CheckPartitionColumns(c).ok());

  ds.partition.reset();
  c = PartitionColumnsOf(ds, "", PgColumnKind::kOther);
  EXPECT_EQ(c.layout.grain, Grain::kNone);
  EXPECT_TRUE(CheckPartitionColumns(c).ok());
}

}  // namespace
}  // namespace storage_postgres_membership_test
}  // namespace backfill::postgres
