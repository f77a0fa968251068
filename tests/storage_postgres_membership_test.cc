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
#include "tests/testing/pg_membership_fixture.h"
#include "tests/testing/postgres_suite.h"

namespace backfill::postgres {
namespace storage_postgres_membership_test {
namespace {

using namespace ::backfill::postgres::membership_testing;  // NOLINT: fixture
using ::testing::HasSubstr;

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

}  // namespace
}  // namespace storage_postgres_membership_test
}  // namespace backfill::postgres
