// PgMembershipTest: the fixture of the tests of partition membership in
// PostgreSQL SQL (storage_postgres_membership_*_test.cc): a schema of its
// own on the run's PostgreSQL server, a session with settings the SQL must
// not depend on, the core's definition as the oracle, and the seeded
// generators of values of every column kind around every calendar
// boundary (BACKFILL_TEST_SEED overrides the seed, printed with any
// failure).
//
// Owned by each test; used by the test's thread.

#ifndef BACKFILL_TESTS_TESTING_PG_MEMBERSHIP_FIXTURE_H_
#define BACKFILL_TESTS_TESTING_PG_MEMBERSHIP_FIXTURE_H_

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

namespace backfill::postgres::membership_testing {

using Rng = std::mt19937_64;

inline uint64_t Seed() {
  uint64_t seed = 20250301;
  const char* env = std::getenv("BACKFILL_TEST_SEED");
  if (env != nullptr && !absl::SimpleAtoi(env, &seed)) {
    ADD_FAILURE() << "BACKFILL_TEST_SEED is not a number: " << env;
  }
  return seed;
}

// Seed() mixed with a test's own number, so that tests draw different
// values from one seed.
inline Rng MakeRng(uint64_t seed, uint64_t salt) {
  std::seed_seq seq{static_cast<uint32_t>(seed),
                    static_cast<uint32_t>(seed >> 32),
                    static_cast<uint32_t>(salt)};
  return Rng(seq);
}

inline int64_t Uniform(Rng& rng, int64_t lo, int64_t hi) {
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
}

inline const Grain kTimeGrains[] = {Grain::kHour, Grain::kDay, Grain::kMonth};

// ------------------------------------------------------------- the oracle --

inline std::optional<std::string> OracleOf(Grain grain,
                                           std::string_view value) {
  absl::StatusOr<std::string> p = PartitionOfValue(grain, value);
  if (!p.ok()) return std::nullopt;
  return *p;
}

inline std::optional<std::string> OracleOf(Grain grain, std::string_view time,
                                           std::string_view key) {
  absl::StatusOr<std::string> p = PartitionOfValues(grain, time, key);
  if (!p.ok()) return std::nullopt;
  return *p;
}

// ---------------------------------------------------------- typed values --

// Years whose days and months are boundaries worth testing: the first and
// last supported, leap rules (4, 100, 400), the calendar's reform, the
// epoch, the present.
inline constexpr int kYears[] = {1,    2,    4,    99,   100,  400,
                                 1582, 1900, 1970, 1999, 2000, 2024,
                                 2025, 2100, 2400, 9998, 9999};

// The first and last days of every month of kYears, and Feb 28, Feb 29
// (when there is one) and Mar 1.
inline std::vector<absl::CivilDay> BoundaryDays() {
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

inline std::string YearText(int64_t year) {
  return year < 0 ? absl::StrFormat("-%04d", -year)
                  : absl::StrFormat("%04d", year);
}

// The ISO 8601 text of a day (astronomical years: 1 BC is 0000).
inline std::string IsoDay(absl::CivilDay d) {
  return absl::StrFormat("%s-%02d-%02d", YearText(d.year()), d.month(),
                         d.day());
}

// The ISO 8601 text of an instant in UTC, in one of the spellings the core
// accepts for it: 'T' or ' ', the fraction cut to 1..6 digits where that
// keeps its value, with or without "Z".
inline std::string IsoInstant(const Instant& i, Rng& rng) {
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
inline std::string PgDay(absl::CivilDay d) {
  if (d.year() >= 1) {
    return absl::StrFormat("%04d-%02d-%02d", d.year(), d.month(), d.day());
  }
  return absl::StrFormat("%04d-%02d-%02d BC", 1 - d.year(), d.month(), d.day());
}

// PostgreSQL's input text of a local time with an offset ("" for a
// TIMESTAMP), BC after the offset.
inline std::string PgTime(absl::CivilSecond t, int micros,
                          std::string_view offset) {
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

inline std::optional<std::string> OracleOf(Grain grain, const Sample& s) {
  if (!s.literal) return std::nullopt;
  return OracleOf(grain, s.iso);
}

inline std::vector<Sample> DateSamples(Rng& rng) {
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
inline std::vector<Instant> Instants(Rng& rng) {
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

inline std::vector<Sample> TimestampSamples(Rng& rng) {
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
inline std::vector<Sample> TimestampTzSamples(Rng& rng) {
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

inline Chars Split(std::string_view ascii) {
  Chars out;
  for (char c : ascii) out.push_back(std::string(1, c));
  return out;
}

// What a mutation may write: the characters of the formats and their near
// misses (lower case t and z, offsets, other separators, control and
// non-ASCII characters, digits of other scripts).
inline const char* const kAlphabet[] = {
    "0", "1", "2",  "3",      "5",      "9",      "-", ":",
    "T", "t", "Z",  "z",      " ",      ".",      "+", ",",
    "/", "|", "\n", "\t",     "\x01",   "\x7f",   "~", "W",
    "é", "٣", "２", "\u0085", "\u00a0", "\u2028", "0", "0"};

inline std::string Join(const Chars& chars) { return absl::StrJoin(chars, ""); }

// One random edit: replace, insert, delete, duplicate or swap.
inline void Mutate(Rng& rng, Chars* chars) {
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
inline std::vector<std::string> Spellings(absl::CivilSecond t, Rng& rng) {
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

inline std::vector<std::string> TextSamples(Rng& rng) {
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
inline std::vector<std::string> KeySamples(Rng& rng) {
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
inline std::vector<std::string> Around(Grain grain, const std::string& p) {
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
inline std::vector<std::string> PartitionsToTest(
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
inline PgPartitionColumns Columns(
    PartitionLayout layout, std::string column, PgColumnKind kind,
    std::string key_column = "", PgColumnKind key_kind = PgColumnKind::kOther) {
  PgPartitionColumns out;
  out.layout = std::move(layout);
  out.column = std::move(column);
  out.kind = kind;
  out.key_column = std::move(key_column);
  out.key_kind = key_kind;
  return out;
}

// A value for a failure message.
inline std::string Show(const PgValue& v) {
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

}  // namespace backfill::postgres::membership_testing

#endif  // BACKFILL_TESTS_TESTING_PG_MEMBERSHIP_FIXTURE_H_
