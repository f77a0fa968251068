// Partition membership in PostgreSQL SQL (storage/postgres/pg_membership.h)
// on a real PostgreSQL server, keys and plans
// (tests/testing/pg_membership_fixture.h for the oracle and generators):
// text and integer keys match exactly their own values, time x key agrees
// with the core on every kind, a btree index serves the condition of every
// kind, and the SQL builders number parameters and refuse what the
// definition does not allow.

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
#include "tests/testing/pg_membership_fixture.h"
#include "tests/testing/postgres_suite.h"

namespace backfill::postgres {
namespace storage_postgres_membership_keys_test {
namespace {

using namespace ::backfill::postgres::membership_testing;  // NOLINT: fixture
using ::testing::HasSubstr;

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
}  // namespace storage_postgres_membership_keys_test
}  // namespace backfill::postgres
