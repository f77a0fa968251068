// Tests of SqliteEngine::DiffPartition: the diff of a job's staged rows
// against the published ones, on tables written with plain SQL (generated
// rows with NULLs, keys only on one side, keys whose values change in a
// measure or only in another column, an empty published partition, a first
// load, a dataset without a primary key). Every expectation is computed with
// independent plain SQL (EXCEPT / INTERSECT, correlated counts), never with
// the engine's own queries.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "core/diff.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/sqlite_db.h"
#include "storage/sqlite_engine.h"
#include "tests/testing/warehouse_test.h"

namespace backfill {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr char kJob[] = "bf-7";

class EngineDiffTest : public testing::WarehouseTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(testing::WarehouseTest::SetUp());
    auto engine = SqliteEngine::Open(path_, 2);
    ASSERT_TRUE(engine.ok()) << engine.status();
    engine_ = *std::move(engine);

    facts_.name = "facts";
    facts_.kind = DatasetKind::kDerived;
    facts_.table = "facts";
    facts_.partition = PartitionSpec{"ds", Grain::kDay, {}};
    facts_.transform = "SELECT 1";
    facts_.columns = {{"ds", "TEXT"},
                      {"id", "INTEGER"},
                      {"amount", "REAL"},
                      {"qty", "INTEGER"},
                      {"label", "TEXT"}};
    facts_.primary_key = {"ds", "id"};
    stage_ = SqliteEngine::StageTable(kJob, "facts");
  }
  void TearDown() override {
    engine_.reset();
    testing::WarehouseTest::TearDown();
  }

  double Real(const std::string& sql) {
    auto q = db_->Prepare(sql);
    EXPECT_TRUE(q.ok()) << q.status();
    if (!q.ok() || !q->Step().ok()) return -1;
    return q->ColumnDouble(0);
  }
  void CreateTables(bool published) {
    const std::string defs =
        "(ds TEXT, id INTEGER, amount REAL, qty INTEGER, label TEXT";
    if (published) {
      Exec(absl::StrCat(
          "CREATE TABLE facts ", defs,
          facts_.primary_key.empty() ? ")" : ", PRIMARY KEY (ds, id))"));
    }
    Exec(absl::StrCat("CREATE TABLE \"", stage_, "\" ", defs, ")"));
  }

  // The expectations of one partition from plain SQL over both tables.
  struct Expected {
    int64_t before, after, added, removed, changed, unchanged;
    double amount_before, amount_after, qty_before, qty_after;
  };
  Expected PlainSql(const std::string& day) {
    const std::string a =
        absl::StrCat("SELECT * FROM \"", stage_, "\" WHERE ds = '", day, "'");
    const std::string b =
        absl::StrCat("SELECT * FROM facts WHERE ds = '", day, "'");
    const std::string ak = absl::StrCat("SELECT ds, id FROM \"", stage_,
                                        "\" WHERE ds = '", day, "'");
    const std::string bk =
        absl::StrCat("SELECT ds, id FROM facts WHERE ds = '", day, "'");
    Expected e;
    e.before = Int(absl::StrCat("SELECT COUNT(*) FROM (", b, ")"));
    e.after = Int(absl::StrCat("SELECT COUNT(*) FROM (", a, ")"));
    e.added =
        Int(absl::StrCat("SELECT COUNT(*) FROM (", ak, " EXCEPT ", bk, ")"));
    e.removed =
        Int(absl::StrCat("SELECT COUNT(*) FROM (", bk, " EXCEPT ", ak, ")"));
    const int64_t both =
        Int(absl::StrCat("SELECT COUNT(*) FROM (", ak, " INTERSECT ", bk, ")"));
    e.unchanged =
        Int(absl::StrCat("SELECT COUNT(*) FROM (", a, " INTERSECT ", b, ")"));
    e.changed = both - e.unchanged;
    e.amount_before = Real(absl::StrCat("SELECT TOTAL(amount) FROM (", b, ")"));
    e.amount_after = Real(absl::StrCat("SELECT TOTAL(amount) FROM (", a, ")"));
    e.qty_before = Real(absl::StrCat("SELECT TOTAL(qty) FROM (", b, ")"));
    e.qty_after = Real(absl::StrCat("SELECT TOTAL(qty) FROM (", a, ")"));
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
    EXPECT_DOUBLE_EQ(d.measures[0].before, e.amount_before);
    EXPECT_DOUBLE_EQ(d.measures[0].after, e.amount_after);
    EXPECT_EQ(d.measures[1].column, "qty");
    EXPECT_DOUBLE_EQ(d.measures[1].before, e.qty_before);
    EXPECT_DOUBLE_EQ(d.measures[1].after, e.qty_after);
  }

  // `literal` (as a sample shows it) is the value of `column` of the row
  // (ds, id) of `table`, read with plain SQL.
  void ExpectValue(const std::string& table, const std::string& day, int64_t id,
                   const std::string& column, const std::string& literal) {
    auto q = db_->Prepare(absl::StrCat("SELECT \"", column, "\" FROM \"", table,
                                       "\" WHERE ds = ?1 AND id = ?2"));
    ASSERT_TRUE(q.ok()) << q.status();
    ASSERT_TRUE(q->BindText(1, day).ok());
    ASSERT_TRUE(q->BindInt(2, id).ok());
    auto row = q->Step();
    ASSERT_TRUE(row.ok() && *row) << table << " has no row " << id;
    if (q->ColumnIsNull(0)) {
      EXPECT_EQ(literal, "NULL");
    } else if (q->GetColumnType(0) == sqlite::ColumnType::kText) {
      EXPECT_EQ(
          literal,
          absl::StrCat(
              "'", absl::StrReplaceAll(q->ColumnText(0), {{"'", "''"}}), "'"));
    } else {
      double v = 0;
      ASSERT_TRUE(absl::SimpleAtod(literal, &v)) << literal;
      EXPECT_EQ(v, q->ColumnDouble(0)) << column << " of " << id;
    }
  }

  std::string stage_;
  std::unique_ptr<SqliteEngine> engine_;
  DatasetSpec facts_;
};

TEST_F(EngineDiffTest, GeneratedRowsMatchPlainSql) {
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
        Exec(absl::StrCat("INSERT INTO \"", stage_, "\" VALUES ('", day, "', ",
                          id, ", ", a2, ", ", q2, ", ", l2, ")"));
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
        Exec(absl::StrCat("INSERT INTO \"", stage_, "\" VALUES ('", day, "', ",
                          id, ", ", amount(), ", ", qty(), ", ", label(), ")"));
      }
    }
  }
  int64_t changed_total = 0;
  for (const std::string& day : days) {
    SCOPED_TRACE(day);
    auto diff = engine_->DiffPartition(kJob, facts_, day, 4);
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
          ExpectValue(stage_, day, id, values[i], s.after[i]);
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

TEST_F(EngineDiffTest, AChangeOnlyInANonMeasureColumnIsChangedWithoutDelta) {
  CreateTables(/*published=*/true);
  Exec(absl::StrCat(
      "INSERT INTO facts VALUES ('2025-06-01', 1, 10.5, 2, 'old'), "
      "('2025-06-01', 2, NULL, 3, NULL), ('2025-06-01', 3, 1, 1, 'same');"
      "INSERT INTO \"",
      stage_,
      "\" VALUES ('2025-06-01', 1, 10.5, 2, 'new'), "
      "('2025-06-01', 2, NULL, 3, 'now set'), "
      "('2025-06-01', 3, 1, 1, 'same');"));
  auto diff = engine_->DiffPartition(kJob, facts_, "2025-06-01", 10);
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

TEST_F(EngineDiffTest, AnEmptyPublishedPartitionAndAFirstLoadAreAllAdded) {
  // The table exists but has no rows of the partition.
  CreateTables(/*published=*/true);
  Exec(absl::StrCat(
      "INSERT INTO facts VALUES ('2025-06-02', 1, 5, 5, 'other day');"
      "INSERT INTO \"",
      stage_,
      "\" VALUES ('2025-06-01', 1, 1.25, 2, 'a'), "
      "('2025-06-01', 2, NULL, NULL, NULL), ('2025-06-01', 3, 3, 4, 'c');"));
  auto diff = engine_->DiffPartition(kJob, facts_, "2025-06-01", 10);
  ASSERT_TRUE(diff.ok()) << diff.status();
  ASSERT_NO_FATAL_FAILURE(ExpectMatches(*diff, PlainSql("2025-06-01")));
  EXPECT_EQ(diff->added, 3);
  EXPECT_EQ(diff->rows_before, 0);
  EXPECT_EQ(diff->samples.size(), 3u);

  // No published table at all (a first load).
  Exec("DROP TABLE facts");
  auto first = engine_->DiffPartition(kJob, facts_, "2025-06-01", 1);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->rows_before, 0);
  EXPECT_EQ(first->rows_after,
            Int(absl::StrCat("SELECT COUNT(*) FROM \"", stage_,
                             "\" WHERE ds = '2025-06-01'")));
  EXPECT_EQ(first->added, first->rows_after);
  EXPECT_EQ(first->removed + first->changed + first->unchanged, 0);
  EXPECT_EQ(first->measures[0].before, 0);
  EXPECT_DOUBLE_EQ(first->measures[0].after,
                   Real(absl::StrCat("SELECT TOTAL(amount) FROM \"", stage_,
                                     "\" WHERE ds = '2025-06-01'")));
  ASSERT_EQ(first->samples.size(), 1u);
  EXPECT_EQ(first->samples[0].change, DiffChange::kAdded);
  EXPECT_EQ(first->samples[0].key[1], "1");  // by key
}

TEST_F(EngineDiffTest, WithoutAPrimaryKeyRowsCompareAsMultisets) {
  facts_.primary_key.clear();
  CreateTables(/*published=*/true);
  Exec(absl::StrCat(
      "INSERT INTO facts VALUES ('2025-06-01', 1, 1, 1, 'x'), "
      "('2025-06-01', 1, 1, 1, 'x'), ('2025-06-01', 2, 2, 2, 'y'), "
      "('2025-06-01', 3, NULL, 3, NULL);"
      "INSERT INTO \"",
      stage_,
      "\" VALUES ('2025-06-01', 1, 1, 1, 'x'), ('2025-06-01', 2, 2, 2, 'y'), "
      "('2025-06-01', 2, 2, 2, 'y'), ('2025-06-01', 4, 4, 4, 'z'), "
      "('2025-06-01', 3, NULL, 3, NULL);"));
  // Multiplicities per distinct row, with correlated counts (IS: NULL
  // equals NULL).
  const std::string match =
      "t.ds IS u.ds AND t.id IS u.id AND t.amount IS u.amount AND t.qty IS "
      "u.qty AND t.label IS u.label";
  const std::string counts =
      absl::StrCat("SELECT (SELECT COUNT(*) FROM \"", stage_, "\" t WHERE ",
                   match, ") AS na, (SELECT COUNT(*) FROM facts t WHERE ",
                   match, ") AS nb FROM (SELECT * FROM \"", stage_,
                   "\" UNION SELECT * FROM facts) u");
  const int64_t added =
      Int(absl::StrCat("SELECT SUM(MAX(na - nb, 0)) FROM (", counts, ")"));
  const int64_t removed =
      Int(absl::StrCat("SELECT SUM(MAX(nb - na, 0)) FROM (", counts, ")"));
  const int64_t common =
      Int(absl::StrCat("SELECT SUM(MIN(na, nb)) FROM (", counts, ")"));
  auto diff = engine_->DiffPartition(kJob, facts_, "2025-06-01", 10);
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

TEST_F(EngineDiffTest, NothingStagedIsAFailedPrecondition) {
  auto diff = engine_->DiffPartition(kJob, facts_, "2025-06-01", 3);
  EXPECT_EQ(diff.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(diff.status().message()),
              HasSubstr("nothing staged"));
  CreateTables(false);
  EXPECT_EQ(
      engine_->DiffPartition(kJob, facts_, "not-a-day", 3).status().code(),
      absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace backfill
