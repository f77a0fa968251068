// Engine conformance of DiffPartition (and DiffPartitions, many at once): the
// diff of a job's staged rows against the published ones, on every warehouse of
// ConformanceWarehouses(). The published table `facts` is written with plain
// SQL; the rows to stage are written to `facts_next`, which the dataset's
// transform copies one partition at a time, so that what is staged is known
// independently of the engine. The data: generated rows with NULLs, keys only
// on one side, keys whose values change in a measure or only in another column,
// an empty published partition, a first load, a dataset without a primary key.
// Every expectation is computed with independent plain SQL over the two tables
// (EXCEPT / INTERSECT, correlated counts), never with the engine's own
// queries. The diff is taken by a restarted engine: it needs no PrepareJob.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/time/civil_time.h"
#include "core/model/diff.h"
#include "core/ports/engine.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/engine_conformance.h"

namespace backfill {
namespace storage_engine_conformance_diff_test {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr char kJob[] = "bf-7";
// Measures are compared as numbers parsed from text: sums of quarters are
// exact, this only absorbs how a warehouse prints them.
constexpr double kTolerance = 1e-6;

class EngineDiffConformanceTest : public testing::ConformanceTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(testing::ConformanceTest::SetUp());
    facts_.name = "facts";
    facts_.kind = DatasetKind::kDerived;
    facts_.table = "facts";
    facts_.partition = PartitionSpec{"ds", Grain::kDay, {}};
    facts_.transform =
        "SELECT ds, id, amount, qty, label FROM facts_next WHERE ds >= "
        ":partition_start AND ds < :partition_end";
    facts_.columns = {{"ds", "TEXT"},
                      {"id", "INTEGER"},
                      {"amount", "DOUBLE PRECISION"},
                      {"qty", "INTEGER"},
                      {"label", "TEXT"}};
    facts_.primary_key = {"ds", "id"};
    next_.name = "facts_next";
    next_.kind = DatasetKind::kSource;
    next_.table = "facts_next";
    next_.partition = PartitionSpec{"ds", Grain::kDay, {}};
    facts_.upstream = {{"facts_next", Mapping::kIdentity}};
  }

  // `facts` (the published table, when `published`) and `facts_next` (the
  // rows to stage).
  void CreateTables(bool published) {
    const std::string defs =
        "(ds TEXT, id INTEGER, amount DOUBLE PRECISION, qty INTEGER, label "
        "TEXT";
    if (published) {
      Exec(absl::StrCat(
          "CREATE TABLE facts ", defs,
          facts_.primary_key.empty() ? ")" : ", PRIMARY KEY (ds, id))"));
    }
    Exec(absl::StrCat("CREATE TABLE facts_next ", defs, ")"));
  }

  // Stages the rows of facts_next of `days` as job kJob, then restarts the
  // engine.
  void Stage(const std::vector<std::string>& days) {
    JobLayout layout;
    layout.job_id = kJob;
    layout.items = {{&facts_, days}};
    ASSERT_TRUE(engine()->PrepareJob(layout).ok());
    for (const std::string& day : days) {
      auto staged =
          engine()->StagePartition(kJob, facts_, day, {{&next_, day}});
      ASSERT_TRUE(staged.ok()) << day << ": " << staged.status();
      ASSERT_EQ(staged->rows_written,
                Int(absl::StrCat("SELECT COUNT(*) FROM facts_next WHERE ds = '",
                                 day, "'")));
    }
    ASSERT_NO_FATAL_FAILURE(Restart());
  }

  // The expectations of one partition from plain SQL over both tables.
  struct Expected {
    int64_t before, after, added, removed, changed, unchanged;
    double amount_before, amount_after, qty_before, qty_after;
  };
  Expected PlainSql(const std::string& day) {
    const std::string a =
        absl::StrCat("SELECT * FROM facts_next WHERE ds = '", day, "'");
    const std::string b =
        absl::StrCat("SELECT * FROM facts WHERE ds = '", day, "'");
    const std::string ak =
        absl::StrCat("SELECT ds, id FROM facts_next WHERE ds = '", day, "'");
    const std::string bk =
        absl::StrCat("SELECT ds, id FROM facts WHERE ds = '", day, "'");
    auto count = [this](const std::string& q) {
      return Int(absl::StrCat("SELECT COUNT(*) FROM (", q, ") AS t"));
    };
    auto total = [this](const std::string& column, const std::string& q) {
      return Double(absl::StrCat("SELECT COALESCE(SUM(", column, "), 0) FROM (",
                                 q, ") AS t"));
    };
    Expected e;
    e.before = count(b);
    e.after = count(a);
    e.added = count(absl::StrCat(ak, " EXCEPT ", bk));
    e.removed = count(absl::StrCat(bk, " EXCEPT ", ak));
    const int64_t both = count(absl::StrCat(ak, " INTERSECT ", bk));
    e.unchanged = count(absl::StrCat(a, " INTERSECT ", b));
    e.changed = both - e.unchanged;
    e.amount_before = total("amount", b);
    e.amount_after = total("amount", a);
    e.qty_before = total("qty", b);
    e.qty_after = total("qty", a);
    return e;
  }

  void ExpectMatches(const PartitionDiff& d, const Expected& e) {
    EXPECT_EQ(d.rows_before, e.before);
    EXPECT_EQ(d.rows_after, e.after);
    EXPECT_EQ(d.added, e.added);
    EXPECT_EQ(d.removed, e.removed);
    EXPECT_EQ(d.changed, e.changed);
    EXPECT_EQ(d.unchanged, e.unchanged);
    ASSERT_EQ(d.measures.size(), 2u);  // amount, qty; not id nor label
    EXPECT_EQ(d.measures[0].column, "amount");
    EXPECT_NEAR(d.measures[0].before, e.amount_before, kTolerance);
    EXPECT_NEAR(d.measures[0].after, e.amount_after, kTolerance);
    EXPECT_EQ(d.measures[1].column, "qty");
    EXPECT_NEAR(d.measures[1].before, e.qty_before, kTolerance);
    EXPECT_NEAR(d.measures[1].after, e.qty_after, kTolerance);
  }

  // `literal` (as a sample shows it) is the value of `column` of the row
  // (ds, id) of `table`, read with plain SQL. `label` is the text column;
  // the others are numbers.
  void ExpectValue(const std::string& table, const std::string& day, int64_t id,
                   const std::string& column, const std::string& literal) {
    auto rows = warehouse().Query(
        absl::StrCat("SELECT ", Quote(column), " FROM ", Quote(table),
                     " WHERE ds = '", day, "' AND id = ", id));
    ASSERT_TRUE(rows.ok()) << rows.status();
    ASSERT_EQ(rows->size(), 1u) << table << " has no row " << id;
    const std::optional<std::string>& value = (*rows)[0][0];
    if (!value.has_value()) {
      EXPECT_EQ(literal, "NULL");
    } else if (column == "label") {
      EXPECT_EQ(
          literal,
          absl::StrCat("'", absl::StrReplaceAll(*value, {{"'", "''"}}), "'"));
    } else {
      double want = 0, got = 0;
      ASSERT_TRUE(absl::SimpleAtod(*value, &want)) << *value;
      ASSERT_TRUE(absl::SimpleAtod(literal, &got)) << literal;
      EXPECT_EQ(got, want) << column << " of " << id;
    }
  }

  DatasetSpec facts_;
  DatasetSpec next_;  // facts_next, its upstream
};

INSTANTIATE_TEST_SUITE_P(Warehouses, EngineDiffConformanceTest,
                         ::testing::ValuesIn(testing::ConformanceWarehouses()),
                         testing::WarehouseParamName);

TEST_P(EngineDiffConformanceTest, GeneratedRowsMatchPlainSql) {
  CreateTables(/*published=*/true);
  std::mt19937 rng(20250601);
  auto maybe_null = [&](const std::string& value) {
    return rng() % 5 == 0 ? std::string("NULL") : value;
  };
  auto amount = [&] { return maybe_null(absl::StrCat((rng() % 4000) / 4.0)); };
  auto qty = [&] { return maybe_null(absl::StrCat(rng() % 50)); };
  auto label = [&] {
    return maybe_null(
        absl::StrCat("'l", rng() % 3, (rng() % 7 == 0 ? "''q" : ""), "'"));
  };
  const std::vector<std::string> days = {"2025-06-01", "2025-06-02",
                                         "2025-06-03"};
  // A day outside the diffed partitions, on both sides: never counted.
  for (const std::string& day : {std::string("2025-05-31"), days[0]}) {
    for (int id = 0; id < 80; ++id) {
      const int kind = static_cast<int>(rng() % 4);
      const std::string a = amount(), q = qty(), l = label();
      if (kind != 1) {  // published
        Exec(absl::StrCat("INSERT INTO facts VALUES ('", day, "', ", id, ", ",
                          a, ", ", q, ", ", l, ")"));
      }
      if (kind != 0) {  // staged: same, or changed in one column
        std::string a2 = a, q2 = q, l2 = l;
        if (kind == 3) {
          switch (rng() % 3) {
            case 0:
              a2 = amount();
              break;
            case 1:
              q2 = qty();
              break;
            default:
              l2 = label();
          }
        }
        Exec(absl::StrCat("INSERT INTO facts_next VALUES ('", day, "', ", id,
                          ", ", a2, ", ", q2, ", ", l2, ")"));
      }
    }
  }
  for (const std::string& day : {days[1], days[2]}) {
    for (int id = 0; id < 50; ++id) {
      const int kind = static_cast<int>(rng() % 4);
      if (kind != 1) {
        Exec(absl::StrCat("INSERT INTO facts VALUES ('", day, "', ", id, ", ",
                          amount(), ", ", qty(), ", ", label(), ")"));
      }
      if (kind != 0) {
        Exec(absl::StrCat("INSERT INTO facts_next VALUES ('", day, "', ", id,
                          ", ", amount(), ", ", qty(), ", ", label(), ")"));
      }
    }
  }
  ASSERT_NO_FATAL_FAILURE(
      Stage({"2025-05-31", "2025-06-01", "2025-06-02", "2025-06-03"}));
  int64_t changed_total = 0;
  for (const std::string& day : days) {
    SCOPED_TRACE(day);
    auto diff = engine()->DiffPartition(kJob, facts_, day, 4);
    ASSERT_TRUE(diff.ok()) << diff.status();
    EXPECT_EQ(diff->dataset, "facts");
    EXPECT_EQ(diff->partition, day);
    const Expected e = PlainSql(day);
    ASSERT_NO_FATAL_FAILURE(ExpectMatches(*diff, e));
    changed_total += e.changed;
    EXPECT_GT(e.added + e.removed + e.changed, 0);
    // Up to 4 samples: changed rows first, then added, then removed.
    EXPECT_EQ(diff->samples.size(), static_cast<size_t>(std::min<int64_t>(
                                        4, e.added + e.removed + e.changed)));
    int last = -1;
    for (const DiffSample& s : diff->samples) {
      const int rank = s.change == DiffChange::kChanged ? 0
                       : s.change == DiffChange::kAdded ? 1
                                                        : 2;
      EXPECT_GE(rank, last);
      last = rank;
      ASSERT_EQ(s.key.size(), 2u);
      EXPECT_EQ(s.key[0], absl::StrCat("'", day, "'"));
      int64_t id = 0;
      ASSERT_TRUE(absl::SimpleAtoi(s.key[1], &id)) << s.key[1];
      const std::vector<std::string> values = {"amount", "qty", "label"};
      if (s.change != DiffChange::kAdded) {
        ASSERT_EQ(s.before.size(), 3u);
        for (size_t i = 0; i < 3; ++i) {
          ExpectValue("facts", day, id, values[i], s.before[i]);
        }
      } else {
        EXPECT_THAT(s.before, IsEmpty());
      }
      if (s.change != DiffChange::kRemoved) {
        ASSERT_EQ(s.after.size(), 3u);
        for (size_t i = 0; i < 3; ++i) {
          ExpectValue("facts_next", day, id, values[i], s.after[i]);
        }
      } else {
        EXPECT_THAT(s.after, IsEmpty());
      }
      if (s.change == DiffChange::kChanged) {
        EXPECT_NE(s.before, s.after);
      }
    }
  }
  EXPECT_GT(changed_total, 0);  // the data exercised "changed"
}

TEST_P(EngineDiffConformanceTest,
       AChangeOnlyInANonMeasureColumnIsChangedWithoutDelta) {
  CreateTables(/*published=*/true);
  Exec(
      "INSERT INTO facts VALUES ('2025-06-01', 1, 10.5, 2, 'old'), "
      "('2025-06-01', 2, NULL, 3, NULL), ('2025-06-01', 3, 1, 1, 'same');"
      "INSERT INTO facts_next VALUES ('2025-06-01', 1, 10.5, 2, 'new'), "
      "('2025-06-01', 2, NULL, 3, 'now set'), "
      "('2025-06-01', 3, 1, 1, 'same');");
  ASSERT_NO_FATAL_FAILURE(Stage({"2025-06-01"}));
  auto diff = engine()->DiffPartition(kJob, facts_, "2025-06-01", 10);
  ASSERT_TRUE(diff.ok()) << diff.status();
  ASSERT_NO_FATAL_FAILURE(ExpectMatches(*diff, PlainSql("2025-06-01")));
  EXPECT_EQ(diff->changed, 2);
  EXPECT_EQ(diff->unchanged, 1);
  EXPECT_EQ(diff->measures[0].before, diff->measures[0].after);
  EXPECT_EQ(diff->measures[1].before, diff->measures[1].after);
  ASSERT_EQ(diff->samples.size(), 2u);
  EXPECT_EQ(diff->samples[0].before[2], "'old'");
  EXPECT_EQ(diff->samples[0].after[2], "'new'");
  EXPECT_EQ(diff->samples[1].before[2], "NULL");  // NULL -> value is a change
  EXPECT_EQ(diff->samples[1].after[2], "'now set'");
}

TEST_P(EngineDiffConformanceTest,
       AnEmptyPublishedPartitionAndAFirstLoadAreAllAdded) {
  // The table exists but has no rows of the partition.
  CreateTables(/*published=*/true);
  Exec(
      "INSERT INTO facts VALUES ('2025-06-02', 1, 5, 5, 'other day');"
      "INSERT INTO facts_next VALUES ('2025-06-01', 1, 1.25, 2, 'a'), "
      "('2025-06-01', 2, NULL, NULL, NULL), ('2025-06-01', 3, 3, 4, 'c');");
  ASSERT_NO_FATAL_FAILURE(Stage({"2025-06-01"}));
  auto diff = engine()->DiffPartition(kJob, facts_, "2025-06-01", 10);
  ASSERT_TRUE(diff.ok()) << diff.status();
  ASSERT_NO_FATAL_FAILURE(ExpectMatches(*diff, PlainSql("2025-06-01")));
  EXPECT_EQ(diff->added, 3);
  EXPECT_EQ(diff->rows_before, 0);
  EXPECT_EQ(diff->samples.size(), 3u);

  // No published table at all (a first load).
  Exec("DROP TABLE facts");
  auto first = engine()->DiffPartition(kJob, facts_, "2025-06-01", 1);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->rows_before, 0);
  EXPECT_EQ(first->rows_after,
            Int("SELECT COUNT(*) FROM facts_next WHERE ds = '2025-06-01'"));
  EXPECT_EQ(first->added, first->rows_after);
  EXPECT_EQ(first->removed + first->changed + first->unchanged, 0);
  EXPECT_EQ(first->measures[0].before, 0);
  EXPECT_NEAR(first->measures[0].after,
              Double("SELECT COALESCE(SUM(amount), 0) FROM facts_next WHERE "
                     "ds = '2025-06-01'"),
              kTolerance);
  ASSERT_EQ(first->samples.size(), 1u);
  EXPECT_EQ(first->samples[0].change, DiffChange::kAdded);
  EXPECT_EQ(first->samples[0].key[1], "1");  // by key
}

TEST_P(EngineDiffConformanceTest,
       NullKeysMatchNullKeysOnlyWhenBothSidesHaveThem) {
  // A declared key the tables do not enforce: NULL ids on either side. Keys
  // match NULL-safely, as EXCEPT and INTERSECT compare them in PlainSql.
  // Day 1: NULL ids on both sides, one the same row, one changed. Day 2:
  // NULL ids staged only. Day 3: published only. Day 4: none, many rows.
  const std::string defs =
      "(ds TEXT, id INTEGER, amount DOUBLE PRECISION, qty INTEGER, label "
      "TEXT)";
  Exec(absl::StrCat("CREATE TABLE facts ", defs));
  Exec(absl::StrCat("CREATE TABLE facts_next ", defs));
  Exec(
      "INSERT INTO facts VALUES ('2025-06-01', NULL, 1, 1, 'same'), "
      "('2025-06-01', 1, 2, 2, 'x'), ('2025-06-02', 1, 3, 3, 'y'), "
      "('2025-06-03', NULL, 4, 4, 'gone'), ('2025-06-03', 2, 5, 5, 'z');"
      "INSERT INTO facts_next VALUES ('2025-06-01', NULL, 1, 1, 'same'), "
      "('2025-06-01', 1, 2, 9, 'x'), ('2025-06-02', NULL, 6, 6, 'new'), "
      "('2025-06-02', 1, 3, 3, 'y'), ('2025-06-03', 2, 5, 5, 'z');");
  for (int id = 0; id < 300; ++id) {
    if (id % 7 != 0) {
      Exec(absl::StrCat("INSERT INTO facts VALUES ('2025-06-04', ", id, ", ",
                        id, ", 1, 'p')"));
    }
    if (id % 5 != 0) {
      Exec(absl::StrCat("INSERT INTO facts_next VALUES ('2025-06-04', ", id,
                        ", ", id, ", ", id % 3 == 0 ? 2 : 1, ", 'p')"));
    }
  }
  const std::vector<std::string> days = {"2025-06-01", "2025-06-02",
                                         "2025-06-03", "2025-06-04"};
  ASSERT_NO_FATAL_FAILURE(Stage(days));
  for (const std::string& day : days) {
    SCOPED_TRACE(day);
    auto diff = engine()->DiffPartition(kJob, facts_, day, 10);
    ASSERT_TRUE(diff.ok()) << diff.status();
    ASSERT_NO_FATAL_FAILURE(ExpectMatches(*diff, PlainSql(day)));
  }
  auto both = engine()->DiffPartition(kJob, facts_, "2025-06-01", 10);
  ASSERT_TRUE(both.ok());
  EXPECT_EQ(both->unchanged, 1);  // the NULL ids matched
  EXPECT_EQ(both->changed, 1);
  EXPECT_EQ(both->added + both->removed, 0);
  auto staged_only = engine()->DiffPartition(kJob, facts_, "2025-06-02", 10);
  ASSERT_TRUE(staged_only.ok());
  EXPECT_EQ(staged_only->added, 1);
  EXPECT_EQ(staged_only->unchanged, 1);
}

TEST_P(EngineDiffConformanceTest, WithoutAPrimaryKeyRowsCompareAsMultisets) {
  facts_.primary_key.clear();
  CreateTables(/*published=*/true);
  Exec(
      "INSERT INTO facts VALUES ('2025-06-01', 1, 1, 1, 'x'), "
      "('2025-06-01', 1, 1, 1, 'x'), ('2025-06-01', 2, 2, 2, 'y'), "
      "('2025-06-01', 3, NULL, 3, NULL);"
      "INSERT INTO facts_next VALUES ('2025-06-01', 1, 1, 1, 'x'), "
      "('2025-06-01', 2, 2, 2, 'y'), ('2025-06-01', 2, 2, 2, 'y'), "
      "('2025-06-01', 4, 4, 4, 'z'), ('2025-06-01', 3, NULL, 3, NULL);");
  ASSERT_NO_FATAL_FAILURE(Stage({"2025-06-01"}));
  // Multiplicities per distinct row, with correlated counts (NULL equals
  // NULL).
  const std::string match =
      "t.ds IS NOT DISTINCT FROM u.ds AND t.id IS NOT DISTINCT FROM u.id AND "
      "t.amount IS NOT DISTINCT FROM u.amount AND t.qty IS NOT DISTINCT FROM "
      "u.qty AND t.label IS NOT DISTINCT FROM u.label";
  const std::string counts = absl::StrCat(
      "SELECT (SELECT COUNT(*) FROM facts_next t WHERE ", match,
      ") AS na, (SELECT COUNT(*) FROM facts t WHERE ", match,
      ") AS nb FROM (SELECT * FROM facts_next UNION SELECT * FROM facts) u");
  const int64_t added =
      Int(absl::StrCat("SELECT SUM(CASE WHEN na > nb THEN na - nb ELSE 0 END) "
                       "FROM (",
                       counts, ") AS c"));
  const int64_t removed =
      Int(absl::StrCat("SELECT SUM(CASE WHEN nb > na THEN nb - na ELSE 0 END) "
                       "FROM (",
                       counts, ") AS c"));
  const int64_t common = Int(
      absl::StrCat("SELECT SUM(CASE WHEN na < nb THEN na ELSE nb END) FROM (",
                   counts, ") AS c"));
  auto diff = engine()->DiffPartition(kJob, facts_, "2025-06-01", 10);
  ASSERT_TRUE(diff.ok()) << diff.status();
  EXPECT_EQ(diff->added, added);
  EXPECT_EQ(diff->removed, removed);
  EXPECT_EQ(diff->unchanged, common);
  EXPECT_EQ(diff->changed, 0);
  EXPECT_EQ(diff->rows_before, 4);
  EXPECT_EQ(diff->rows_after, 5);
  // Measures: every numeric column but the partition column (no key).
  std::vector<std::string> measures;
  for (const MeasureTotals& m : diff->measures) measures.push_back(m.column);
  EXPECT_THAT(measures, ::testing::ElementsAre("id", "amount", "qty"));
  // Samples show whole rows: added ones (after), then removed (before).
  ASSERT_EQ(diff->samples.size(), static_cast<size_t>(added + removed));
  for (const DiffSample& s : diff->samples) {
    EXPECT_THAT(s.key, IsEmpty());
    EXPECT_EQ((s.change == DiffChange::kAdded ? s.after : s.before).size(), 5u);
  }
}

TEST_P(EngineDiffConformanceTest,
       ManyPartitionsInOneCallEachMatchPlainSqlInTheirPlace) {
  // More days than one read transaction of a batch takes (256 on SQLite),
  // days with rows on one side only (either side) or none, and a
  // malformed partition among them: each answer is that partition's own.
  CreateTables(/*published=*/true);
  std::mt19937 rng(20251203);
  const absl::CivilDay first(2024, 12, 1);
  std::vector<std::string> days;
  std::vector<std::string> published_rows, next_rows;
  for (int d = 0; d < 300; ++d) {
    const std::string day = absl::FormatCivilTime(first + d);
    days.push_back(day);
    // 0: no rows; 1: staged rows only (a first load); 2: published rows
    // only (the partition is emptied); else both sides.
    const int kind = static_cast<int>(rng() % 6);
    for (int id = 0; id < 3; ++id) {
      auto row = [&] {
        return absl::StrCat("('", day, "', ", id, ", ", (rng() % 8) / 4.0, ", ",
                            rng() % 3, ", 'l", rng() % 2, "')");
      };
      if (kind == 2 || (kind >= 3 && rng() % 4 != 0)) {
        published_rows.push_back(row());
      }
      if (kind == 1 || (kind >= 3 && rng() % 4 != 0)) {
        next_rows.push_back(row());
      }
    }
  }
  for (const auto& [table, rows] :
       {std::pair{"facts", &published_rows}, {"facts_next", &next_rows}}) {
    for (size_t at = 0; at < rows->size(); at += 200) {
      const size_t end = std::min(rows->size(), at + 200);
      Exec(absl::StrCat(
          "INSERT INTO ", table, " VALUES ",
          absl::StrJoin(rows->begin() + static_cast<std::ptrdiff_t>(at),
                        rows->begin() + static_cast<std::ptrdiff_t>(end),
                        ", ")));
    }
  }
  ASSERT_NO_FATAL_FAILURE(Stage(days));
  std::vector<std::string> asked = days;
  asked.insert(asked.begin() + 100, "not-a-day");
  auto diffs = engine()->DiffPartitions(kJob, facts_, asked, 2);
  ASSERT_TRUE(diffs.ok()) << diffs.status();
  ASSERT_EQ(diffs->size(), asked.size());
  int64_t changed = 0, added = 0, removed = 0, empty = 0, first_loads = 0,
          emptied = 0;
  for (size_t i = 0; i < asked.size(); ++i) {
    SCOPED_TRACE(asked[i]);
    const absl::StatusOr<PartitionDiff>& diff = (*diffs)[i];
    if (i == 100) {
      EXPECT_EQ(diff.status().code(), absl::StatusCode::kInvalidArgument)
          << diff.status();
      continue;
    }
    ASSERT_TRUE(diff.ok()) << diff.status();
    const Expected e = PlainSql(asked[i]);
    ASSERT_NO_FATAL_FAILURE(ExpectMatches(*diff, e));
    EXPECT_EQ(diff->samples.size(), static_cast<size_t>(std::min<int64_t>(
                                        2, e.added + e.removed + e.changed)));
    changed += e.changed;
    added += e.added;
    removed += e.removed;
    if (e.before + e.after == 0) ++empty;
    if (e.before == 0 && e.after > 0) ++first_loads;
    if (e.before > 0 && e.after == 0) ++emptied;
  }
  // The data exercised every kind of difference and empty days.
  EXPECT_GT(changed, 0);
  EXPECT_GT(added, 0);
  EXPECT_GT(removed, 0);
  EXPECT_GT(empty, 0);
  EXPECT_GT(first_loads, 0);
  EXPECT_GT(emptied, 0);
}

TEST_P(EngineDiffConformanceTest, WithoutAPrimaryKeyOneSidedPartitionsCount) {
  // A first load and an emptied partition of a dataset without a key: every
  // row of the one side, duplicates included, is added or removed; its
  // distinct rows are the samples.
  facts_.primary_key.clear();
  CreateTables(/*published=*/true);
  Exec(
      "INSERT INTO facts_next VALUES ('2025-06-01', 1, 1, 1, 'x'), "
      "('2025-06-01', 1, 1, 1, 'x'), ('2025-06-01', 2, NULL, 2, NULL);"
      "INSERT INTO facts VALUES ('2025-06-02', 3, 3, 3, 'y'), "
      "('2025-06-02', 4, 4, 4, 'z');");
  ASSERT_NO_FATAL_FAILURE(Stage({"2025-06-01", "2025-06-02"}));
  const std::vector<std::string> days = {"2025-06-01", "2025-06-02"};
  auto diffs = engine()->DiffPartitions(kJob, facts_, days, 10);
  ASSERT_TRUE(diffs.ok()) << diffs.status();
  ASSERT_EQ(diffs->size(), 2u);
  for (size_t i = 0; i < days.size(); ++i) {
    SCOPED_TRACE(days[i]);
    ASSERT_TRUE((*diffs)[i].ok()) << (*diffs)[i].status();
    const PartitionDiff& d = *(*diffs)[i];
    const int64_t after = Int(absl::StrCat(
        "SELECT COUNT(*) FROM facts_next WHERE ds = '", days[i], "'"));
    const int64_t before = Int(
        absl::StrCat("SELECT COUNT(*) FROM facts WHERE ds = '", days[i], "'"));
    EXPECT_EQ(d.rows_after, after);
    EXPECT_EQ(d.rows_before, before);
    EXPECT_EQ(d.added, after);
    EXPECT_EQ(d.removed, before);
    EXPECT_EQ(d.changed + d.unchanged, 0);
    // A sample shows a distinct row (however often it occurs).
    const int64_t distinct =
        Int(absl::StrCat("SELECT COUNT(*) FROM (SELECT DISTINCT * FROM ",
                         after > 0 ? "facts_next" : "facts", " WHERE ds = '",
                         days[i], "') AS t"));
    EXPECT_EQ(d.samples.size(), static_cast<size_t>(distinct));
    for (const DiffSample& sample : d.samples) {
      EXPECT_EQ(sample.change,
                after > 0 ? DiffChange::kAdded : DiffChange::kRemoved);
    }
    for (const MeasureTotals& m : d.measures) {
      const double total_after = Double(
          absl::StrCat("SELECT COALESCE(SUM(", m.column,
                       "), 0) FROM facts_next WHERE ds = '", days[i], "'"));
      const double total_before =
          Double(absl::StrCat("SELECT COALESCE(SUM(", m.column,
                              "), 0) FROM facts WHERE ds = '", days[i], "'"));
      EXPECT_NEAR(m.after, total_after, kTolerance) << m.column;
      EXPECT_NEAR(m.before, total_before, kTolerance) << m.column;
    }
  }
}

TEST_P(EngineDiffConformanceTest, NothingStagedIsAFailedPrecondition) {
  auto diff = engine()->DiffPartition(kJob, facts_, "2025-06-01", 3);
  EXPECT_EQ(diff.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(diff.status().message()),
              HasSubstr("nothing staged"));
  CreateTables(false);
  ASSERT_NO_FATAL_FAILURE(Stage({"2025-06-01"}));
  EXPECT_EQ(
      engine()->DiffPartition(kJob, facts_, "not-a-day", 3).status().code(),
      absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace storage_engine_conformance_diff_test
}  // namespace backfill
