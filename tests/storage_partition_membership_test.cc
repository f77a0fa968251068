// Property tests of partition membership on the real SQLite engine: for
// generated values in every accepted format around every calendar boundary
// (hour 23, month ends, Feb 28/29, Dec 31, the first and last supported
// years), the rows the engine's SQL selects for a partition are exactly the
// rows the mapping assigns to it. The expected partition of every value is
// computed here from the civil time the value was generated from, not by
// the code under test; values in no accepted format must belong to no
// partition.
//
// Then the same generated data goes through the engine: a full load, a
// backfill of a few partitions at the boundaries, and checks with plain SQL
// that exactly those partitions changed.

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/civil_time.h"
#include "core/model/catalog.h"
#include "core/model/partition.h"
#include "core/ports/engine.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/sqlite/sqlite_db.h"
#include "storage/sqlite/sqlite_engine.h"
#include "storage/sqlite/sqlite_membership.h"

namespace backfill {
namespace storage_partition_membership_test {
namespace {

using ::testing::HasSubstr;

// One generated value of a partition column, with the partition it belongs
// to per grain (computed from the civil time it was rendered from).
struct Value {
  enum class Kind { kText, kInteger, kReal, kNull, kBlob };
  Kind kind = Kind::kText;
  std::string text;                 // kText / kBlob bytes; kInteger / kReal
  std::optional<std::string> hour;  // expected partitions; nullopt: none
  std::optional<std::string> day;
  std::optional<std::string> month;

  const std::optional<std::string>& Expected(Grain grain) const {
    switch (grain) {
      case Grain::kHour:
        return hour;
      case Grain::kDay:
        return day;
      default:
        return month;
    }
  }
};

std::string Two(int v) { return absl::StrFormat("%02d", v); }

std::string DayText(const absl::CivilSecond& t) {
  return absl::StrFormat("%04d-%02d-%02d", t.year(), t.month(), t.day());
}

// The expected partitions of a time `t` (already truncated to what the
// format carries), with the last partition of year 9999 excluded.
void SetExpected(const absl::CivilSecond& t, Value* v) {
  v->hour = absl::StrFormat("%sT%02d", DayText(t), t.hour());
  v->day = DayText(t);
  v->month = absl::StrFormat("%04d-%02d", t.year(), t.month());
  if (*v->hour == "9999-12-31T23") v->hour.reset();
  if (*v->day == "9999-12-31") v->day.reset();
  if (*v->month == "9999-12") v->month.reset();
}

Value Text(std::string text) {
  Value v;
  v.text = std::move(text);
  return v;
}

// Every accepted rendering of `t`, plus near misses that are in no format.
void Render(const absl::CivilSecond& t, std::mt19937* rng,
            std::vector<Value>* out) {
  const std::string day = DayText(t);
  const std::string hh = Two(t.hour()), mm = Two(t.minute()),
                    ss = Two(t.second());
  std::uniform_int_distribution<int> digits(1, 9);
  std::string fraction = ".";
  for (int i = digits(*rng); i > 0; --i) {
    fraction.push_back(static_cast<char>('0' + (*rng)() % 10));
  }
  auto add = [&](std::string text, const absl::CivilSecond& as_of) {
    Value v = Text(std::move(text));
    SetExpected(as_of, &v);
    out->push_back(std::move(v));
  };
  // Date only: midnight.
  add(day, absl::CivilDay(t));
  for (const std::string& z : {std::string(), std::string("Z")}) {
    for (char sep : {' ', 'T'}) {
      const std::string base = absl::StrCat(day, std::string(1, sep), hh);
      if (sep == 'T') add(base + z, t);
      add(absl::StrCat(base, ":", mm, z), t);
      add(absl::StrCat(base, ":", mm, ":", ss, z), t);
      add(absl::StrCat(base, ":", mm, ":", ss, fraction, z), t);
    }
  }
  // Month only: a month's value, for month grain.
  {
    Value v = Text(absl::StrFormat("%04d-%02d", t.year(), t.month()));
    SetExpected(absl::CivilMonth(t), &v);
    v.hour.reset();
    v.day.reset();
    out->push_back(std::move(v));
  }
  // Near misses: in no accepted format, so in no partition.
  const std::string full = absl::StrCat(day, "T", hh, ":", mm, ":", ss);
  for (std::string bad : {
           absl::StrCat(day, " ", hh),                  // space needs minutes
           absl::StrCat(full, "+02:00"),                // an offset
           absl::StrCat(full, "+00:00"),                // even UTC's
           absl::StrCat(full, " "),                     // trailing space
           absl::StrCat(" ", day),                      // leading space
           absl::StrCat(day, "t", hh),                  // lower-case t
           absl::StrCat(full, "."),                     // empty fraction
           absl::StrCat(full, ".1234567890"),           // 10 digits
           absl::StrCat(full, "Zjunk"),                 // trailing text
           absl::StrCat(full, "ZZ"),                    //
           absl::StrCat(day, " 24:00"),                 // hour 24
           absl::StrCat(day, "T", hh, ":60"),           // minute 60
           absl::StrCat(day, "T", hh, ":", mm, ":60"),  // second 60
           absl::StrCat(day, "T", hh, ":", mm, ":"),    //
           absl::StrCat(day, "T", hh, mm),              // basic format
           absl::StrCat(day, "T", hh.substr(0, 1)),     // one-digit hour
           absl::StrFormat("%04d/%02d/%02d", t.year(), t.month(), t.day()),
           absl::StrFormat("%04d-%02d-%03d", t.year(), t.month(), t.day()),
           absl::StrFormat("%05d-%02d-%02d", t.year(), t.month(), t.day()),
           absl::StrFormat("%04d-%02d-", t.year(), t.month()),
           absl::StrCat(day, "Z"),  // Z needs a time
       }) {
    out->push_back(Text(std::move(bad)));
  }
}

// Values around every boundary of the supported years, plus random times.
std::vector<Value> Generate(uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<absl::CivilSecond> times;
  for (int year :
       {1, 2, 1970, 1999, 2000, 2023, 2024, 2025, 2100, 9998, 9999}) {
    for (int month = 1; month <= 12; ++month) {
      const absl::CivilMonth m(year, month);
      const absl::CivilDay first(m);
      const absl::CivilDay last = absl::CivilDay(m + 1) - 1;
      if (year == 1 && month == 1) {
        times.push_back(absl::CivilSecond(first));
      } else {
        // The last second of the previous day and the first of this month.
        times.push_back(absl::CivilSecond(first) - 1);
        times.push_back(absl::CivilSecond(first));
      }
      times.push_back(absl::CivilSecond(last) + 23 * 3600 + 59 * 60 + 59);
      times.push_back(absl::CivilSecond(last) + 23 * 3600);  // hour 23
      times.push_back(absl::CivilSecond(last) + 22 * 3600 + 59 * 60 + 59);
      // A random time of the month.
      std::uniform_int_distribution<int64_t> offset(0, (last - first) * 86400);
      times.push_back(absl::CivilSecond(first) + offset(rng));
    }
    // Feb 28 and 29 (when there is one) across midnight.
    const absl::CivilDay feb28(year, 2, 28);
    times.push_back(absl::CivilSecond(feb28) + 23 * 3600 + 59 * 60 + 59);
    times.push_back(absl::CivilSecond(feb28 + 1));
    times.push_back(absl::CivilSecond(feb28 + 1) + 23 * 3600 + 30 * 60);
  }
  std::vector<Value> values;
  for (const absl::CivilSecond& t : times) {
    if (t.year() < 1 || t.year() > 9999) continue;
    Render(t, &rng, &values);
  }
  // Dates that do not exist, years outside 0001..9999, other kinds.
  for (std::string bad : {"2025-02-29",
                          "2024-02-30",
                          "2025-04-31",
                          "2025-13-01",
                          "2025-00-10",
                          "2025-01-00",
                          "0000-01-01",
                          "0000-12-31T23",
                          "10000-01-01",
                          "2025-02-29T10",
                          "2025-02-29 10:00",
                          "2025-13",
                          "2025-00",
                          "",
                          " ",
                          "T",
                          "2025",
                          "2025-1",
                          "20250301",
                          "2025-03-01T",
                          "2025-03-01 "}) {
    values.push_back(Text(bad));
  }
  for (const char* n : {"20250301", "2025", "0"}) {
    Value v;
    v.kind = Value::Kind::kInteger;
    v.text = n;
    values.push_back(v);
  }
  Value real;
  real.kind = Value::Kind::kReal;
  real.text = "2025.03";
  values.push_back(real);
  Value null;
  null.kind = Value::Kind::kNull;
  values.push_back(null);
  Value blob;
  blob.kind = Value::Kind::kBlob;
  blob.text = "2025-03-01";  // the bytes of a valid day, as a BLOB
  values.push_back(blob);
  return values;
}

// Neighbours of a partition: the partition before and after (when valid).
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

class MembershipTest : public ::testing::TestWithParam<Grain> {
 protected:
  void SetUp() override {
    std::string tmpl = ::testing::TempDir() + "/membership_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    // The engine's own connections register the function; this test's
    // connection does too, so that it can run the engine's conditions.
    auto db = sqlite::Database::Open(dir_ + "/warehouse.db");
    ASSERT_TRUE(db.ok()) << db.status();
    db_ = *std::move(db);
    ASSERT_TRUE(sqlite::RegisterPartitionFunction(db_.get()).ok());
  }
  void TearDown() override {
    db_.reset();
    std::filesystem::remove_all(dir_);
  }

  void Exec(const std::string& sql) {
    absl::Status s = db_->Exec(sql);
    ASSERT_TRUE(s.ok()) << s;
  }

  // Inserts `values` into `table` (id, v), binding each with its kind;
  // ids are the indexes into `values`.
  void Insert(const std::string& table, const std::vector<Value>& values) {
    Exec("BEGIN");
    auto q = db_->Prepare(
        absl::StrCat("INSERT INTO ", table, " (id, v) VALUES (?1, ?2)"));
    ASSERT_TRUE(q.ok()) << q.status();
    for (size_t i = 0; i < values.size(); ++i) {
      const Value& v = values[i];
      ASSERT_TRUE(q->Reset().ok());
      ASSERT_TRUE(q->BindInt(1, static_cast<int64_t>(i)).ok());
      switch (v.kind) {
        case Value::Kind::kText:
          ASSERT_TRUE(q->BindText(2, v.text).ok());
          break;
        case Value::Kind::kInteger:
          ASSERT_TRUE(q->BindInt(2, std::stoll(v.text)).ok());
          break;
        case Value::Kind::kReal:
          ASSERT_TRUE(q->BindDouble(2, std::stod(v.text)).ok());
          break;
        case Value::Kind::kNull:
          ASSERT_TRUE(q->BindNull(2).ok());
          break;
        case Value::Kind::kBlob: {
          // No blob binder in the wrapper: CAST of the text.
          break;
        }
      }
      ASSERT_TRUE(q->Run().ok());
    }
    Exec("COMMIT");
    for (size_t i = 0; i < values.size(); ++i) {
      if (values[i].kind == Value::Kind::kBlob) {
        Exec(absl::StrCat("UPDATE ", table, " SET v = CAST('", values[i].text,
                          "' AS BLOB) WHERE id = ", i));
      }
    }
  }

  // Ids the engine's membership condition selects for `partition`.
  std::set<int64_t> Selected(const std::string& table, Grain grain,
                             const std::string& partition) {
    std::set<int64_t> out;
    auto q = db_->Prepare(
        absl::StrCat("SELECT id FROM ", table, " WHERE ",
                     sqlite::MembershipConditionParams(grain, "\"v\"")));
    EXPECT_TRUE(q.ok()) << q.status();
    if (!q.ok()) return out;
    EXPECT_TRUE(sqlite::BindMembership(*q, grain, partition).ok());
    while (true) {
      absl::StatusOr<bool> row = q->Step();
      EXPECT_TRUE(row.ok()) << row.status();
      if (!row.ok() || !*row) break;
      out.insert(q->ColumnInt(0));
    }
    return out;
  }

  std::string dir_;
  std::unique_ptr<sqlite::Database> db_;
};

TEST_P(MembershipTest, SqlSelectsExactlyTheMappedRows) {
  const Grain grain = GetParam();
  const uint32_t seed = 20261130;
  const std::vector<Value> values = Generate(seed);
  SCOPED_TRACE(absl::StrCat("seed ", seed, ", ", values.size(), " values"));

  // What the test expects, per partition.
  std::map<std::string, std::set<int64_t>> expected;
  size_t members = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    const std::optional<std::string>& p = values[i].Expected(grain);
    if (values[i].kind == Value::Kind::kText && p) {
      expected[*p].insert(static_cast<int64_t>(i));
      ++members;
    }
  }
  ASSERT_GT(members, values.size() / 3);

  // The mapping itself agrees with the generator, value by value.
  for (size_t i = 0; i < values.size(); ++i) {
    const Value& v = values[i];
    if (v.kind != Value::Kind::kText) continue;
    absl::StatusOr<std::string> got = PartitionOfValue(grain, v.text);
    const std::optional<std::string>& want = v.Expected(grain);
    if (want) {
      ASSERT_TRUE(got.ok()) << "\"" << v.text << "\": " << got.status();
      EXPECT_EQ(*got, *want) << "\"" << v.text << "\"";
    } else {
      EXPECT_FALSE(got.ok()) << "\"" << v.text << "\" mapped to " << *got;
    }
  }

  // Three column affinities (TEXT, NUMERIC as declared by DATE, none), each
  // with an index on the column (the engine's publish path) and one without
  // (a scan).
  for (const char* type : {"TEXT", "DATE", ""}) {
    for (bool indexed : {true, false}) {
      SCOPED_TRACE(absl::StrCat("column type \"", type, "\"",
                                indexed ? ", indexed" : ", not indexed"));
      const std::string table =
          absl::StrCat("t_", *type ? type : "none", indexed ? "_i" : "");
      Exec(absl::StrCat("CREATE TABLE ", table, " (id INTEGER PRIMARY KEY, v ",
                        type, ")"));
      if (indexed) {
        Exec(absl::StrCat("CREATE INDEX ", table, "_v ON ", table, " (v)"));
      }
      Insert(table, values);

      // Every partition that has members, and its neighbours; without the
      // index every query scans, so check a sample there.
      std::set<std::string> partitions;
      size_t n = 0;
      for (const auto& [p, ids] : expected) {
        if (!indexed && n++ % 16 != 0) continue;
        for (const std::string& q : Around(grain, p)) partitions.insert(q);
      }
      for (const std::string& p : partitions) {
        auto it = expected.find(p);
        const std::set<int64_t> want =
            it == expected.end() ? std::set<int64_t>{} : it->second;
        ASSERT_EQ(Selected(table, grain, p), want) << "partition " << p;
      }
      // And the SQL function over the whole table, row by row.
      auto q = db_->Prepare(
          absl::StrCat("SELECT id, ", sqlite::kPartitionFunction, "('",
                       GrainName(grain), "', v) FROM ", table, " ORDER BY id"));
      ASSERT_TRUE(q.ok()) << q.status();
      while (true) {
        absl::StatusOr<bool> row = q->Step();
        ASSERT_TRUE(row.ok()) << row.status();
        if (!*row) break;
        const Value& v = values[q->ColumnInt(0)];
        const bool member =
            v.kind == Value::Kind::kText && v.Expected(grain).has_value();
        if (member) {
          EXPECT_EQ(q->ColumnText(1), *v.Expected(grain)) << v.text;
        } else {
          EXPECT_TRUE(q->ColumnIsNull(1))
              << "\"" << v.text << "\" -> " << q->ColumnText(1);
        }
      }
    }
  }
  RecordProperty("values", static_cast<int>(values.size()));
  std::printf(
      "[membership] %s: %zu generated values (%zu in a partition), "
      "%zu partitions\n",
      GrainName(grain), values.size(), members, expected.size());
}

INSTANTIATE_TEST_SUITE_P(Grains, MembershipTest,
                         ::testing::Values(Grain::kHour, Grain::kDay,
                                           Grain::kMonth),
                         [](const ::testing::TestParamInfo<Grain>& info) {
                           return std::string(GrainName(info.param));
                         });

// Key grain: a key is its text; an INTEGER value is its decimal text; in
// any column affinity.
TEST(KeyMembershipTest, TextAndIntegerKeysInEveryAffinity) {
  std::string tmpl = ::testing::TempDir() + "/keys_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
  const std::string dir = tmpl;
  auto db = sqlite::Database::Open(dir + "/w.db");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(sqlite::RegisterPartitionFunction(db->get()).ok());
  for (const char* type : {"TEXT", "INTEGER", ""}) {
    SCOPED_TRACE(type);
    const std::string t = absl::StrCat("k_", *type ? type : "none");
    ASSERT_TRUE((*db)
                    ->Exec(absl::StrCat(
                        "CREATE TABLE ", t, " (id INTEGER PRIMARY KEY, v ",
                        type, "); CREATE INDEX ", t, "_v ON ", t, " (v)"))
                    .ok());
    // id: value
    ASSERT_TRUE(
        (*db)
            ->Exec(absl::StrCat("INSERT INTO ", t, " VALUES (1, 'eu'), ",
                                "(2, 'EU'), (3, 42), (4, '42'), (5, '042'), ",
                                "(6, 4.5), (7, NULL), (8, 'eu '), (9, 0)"))
            .ok());
    std::map<std::string, std::set<int64_t>> got;
    for (const char* key : {"eu", "EU", "42", "042", "0", "4.5", "us"}) {
      auto q = (*db)->Prepare(
          absl::StrCat("SELECT id FROM ", t, " WHERE ",
                       sqlite::MembershipConditionParams(Grain::kKey, "v")));
      ASSERT_TRUE(q.ok()) << q.status();
      ASSERT_TRUE(sqlite::BindMembership(*q, Grain::kKey, key).ok());
      while (*q->Step()) got[key].insert(q->ColumnInt(0));
    }
    // The stored values decide: a TEXT column stores 42 as '42' and keeps
    // '042'; an INTEGER column stores '42' and '042' as 42; a column
    // without affinity keeps each as given.
    const std::string type_name = type;
    EXPECT_EQ(got["eu"], (std::set<int64_t>{1}));
    EXPECT_EQ(got["EU"], (std::set<int64_t>{2}));
    EXPECT_EQ(got["us"], (std::set<int64_t>{}));
    if (type_name == "TEXT") {
      // TEXT affinity stores the REAL 4.5 as the text '4.5'.
      EXPECT_EQ(got["4.5"], (std::set<int64_t>{6}));
      EXPECT_EQ(got["42"], (std::set<int64_t>{3, 4}));
      EXPECT_EQ(got["042"], (std::set<int64_t>{5}));
      EXPECT_EQ(got["0"], (std::set<int64_t>{9}));
    } else if (type_name == "INTEGER") {
      EXPECT_EQ(got["4.5"], (std::set<int64_t>{}));  // a REAL is no key
      EXPECT_EQ(got["42"], (std::set<int64_t>{3, 4, 5}));
      EXPECT_EQ(got["042"], (std::set<int64_t>{}));
      EXPECT_EQ(got["0"], (std::set<int64_t>{9}));
    } else {
      EXPECT_EQ(got["4.5"], (std::set<int64_t>{}));
      EXPECT_EQ(got["42"], (std::set<int64_t>{3, 4}));
      EXPECT_EQ(got["042"], (std::set<int64_t>{5}));
      EXPECT_EQ(got["0"], (std::set<int64_t>{9}));
    }
  }
  db->reset();
  std::filesystem::remove_all(dir);
}

// ---------------------------------------------------------------------------
// Through the engine: load, backfill a few boundary partitions, and prove
// with plain SQL that exactly they changed.

class MembershipEngineTest : public ::testing::TestWithParam<Grain> {
 protected:
  void SetUp() override {
    std::string tmpl = ::testing::TempDir() + "/membership_engine_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/warehouse.db";
    auto db = sqlite::Database::Open(path_);
    ASSERT_TRUE(db.ok()) << db.status();
    db_ = *std::move(db);
  }
  void TearDown() override {
    engine_.reset();
    db_.reset();
    std::filesystem::remove_all(dir_);
  }
  void Exec(const std::string& sql) {
    absl::Status s = db_->Exec(sql);
    ASSERT_TRUE(s.ok()) << s;
  }
  int64_t Int(const std::string& sql) {
    auto v = db_->QueryInt(sql);
    EXPECT_TRUE(v.ok()) << v.status() << " in " << sql;
    return v.ok() ? *v : -1;
  }
  // Stages every partition of `layout`, each reading the whole of
  // `source`, and publishes the job.
  void RunJob(const JobLayout& layout, const DatasetSpec& source) {
    ASSERT_TRUE(engine_->PrepareJob(layout).ok());
    for (const JobLayout::Item& item : layout.items) {
      for (const std::string& p : item.partitions) {
        auto staged = engine_->StagePartition(layout.job_id, *item.dataset, p,
                                              {{&source, std::nullopt}});
        ASSERT_TRUE(staged.ok()) << p << ": " << staged.status();
      }
    }
    absl::Status published = engine_->Publish(layout);
    ASSERT_TRUE(published.ok()) << published;
    ASSERT_TRUE(engine_->DropStaging(layout.job_id).ok());
  }

  std::string dir_, path_;
  std::unique_ptr<sqlite::Database> db_;
  std::unique_ptr<SqliteEngine> engine_;
};

TEST_P(MembershipEngineTest, BackfillChangesExactlyItsPartitions) {
  const Grain grain = GetParam();
  // Values near a few boundaries only (each partition is a staging
  // transaction): Feb 28/29 2024, the turn of 2024/2025, the first day of
  // year 1 and the last days of year 9999.
  std::vector<Value> all = Generate(7);
  std::vector<Value> values;
  for (const Value& v : all) {
    const std::optional<std::string>& d = v.day;
    const bool near =
        d &&
        (d->rfind("2024-02-2", 0) == 0 || d->rfind("2024-03-01", 0) == 0 ||
         d->rfind("2024-12-31", 0) == 0 || d->rfind("2025-01-01", 0) == 0 ||
         d->rfind("0001-01-01", 0) == 0 || d->rfind("9999-12-3", 0) == 0);
    const bool month_only =
        !v.day && v.month &&
        (v.month->rfind("2024-", 0) == 0 || v.month->rfind("9999-", 0) == 0);
    if (near || month_only || (!v.hour && !v.day && !v.month)) {
      values.push_back(v);
    }
  }
  ASSERT_GT(values.size(), 100u);
  // The source: every value with the partition the test expects for it.
  Exec("CREATE TABLE src (v, id INTEGER PRIMARY KEY, tag INTEGER, part TEXT)");
  {
    auto q = db_->Prepare(
        "INSERT INTO src (v, id, tag, part) VALUES (?1, ?2, ?3, ?4)");
    ASSERT_TRUE(q.ok());
    Exec("BEGIN");
    for (size_t i = 0; i < values.size(); ++i) {
      const Value& v = values[i];
      if (v.kind != Value::Kind::kText) continue;
      ASSERT_TRUE(q->Reset().ok());
      ASSERT_TRUE(q->BindText(1, v.text).ok());
      ASSERT_TRUE(q->BindInt(2, static_cast<int64_t>(i)).ok());
      ASSERT_TRUE(q->BindInt(3, 1).ok());
      if (v.Expected(grain)) {
        ASSERT_TRUE(q->BindText(4, *v.Expected(grain)).ok());
      } else {
        ASSERT_TRUE(q->BindNull(4).ok());
      }
      ASSERT_TRUE(q->Run().ok());
    }
    Exec("COMMIT");
  }
  // The derived table exists already and holds rows that belong to no
  // partition (as a table created before the service managed it might):
  // no publish may ever touch them.
  Exec(
      "CREATE TABLE d (v TEXT, id INTEGER, tag INTEGER, PRIMARY KEY (id));"
      "INSERT INTO d SELECT v, -id - 1, 7 FROM src WHERE part IS NULL;");
  const int64_t foreign = Int("SELECT COUNT(*) FROM d");
  ASSERT_GT(foreign, 20);

  DatasetSpec d;
  d.name = "d";
  d.kind = DatasetKind::kDerived;
  d.table = "d";
  d.partition = PartitionSpec{"v", grain, {}};
  d.transform = "SELECT v, id, tag FROM src WHERE part = :partition";
  DatasetSpec src;
  src.name = "src";
  src.kind = DatasetKind::kSource;
  src.table = "src";
  d.columns = {{"v", "TEXT"}, {"id", "INTEGER"}, {"tag", "INTEGER"}};
  d.primary_key = {"id"};

  auto engine = SqliteEngine::Open(path_, 2);
  ASSERT_TRUE(engine.ok()) << engine.status();
  engine_ = *std::move(engine);

  std::vector<std::string> partitions;
  {
    auto q = db_->Prepare(
        "SELECT DISTINCT part FROM src WHERE part IS NOT NULL ORDER BY 1");
    ASSERT_TRUE(q.ok());
    while (*q->Step()) partitions.push_back(q->ColumnText(0));
  }
  ASSERT_GT(partitions.size(), 3u);

  // 1. The initial load of every partition (hour 23 and earlier hours of
  //    the same day in one job included).
  JobLayout load;
  load.job_id = "bf-1";
  load.items.push_back({&d, partitions});
  RunJob(load, src);
  EXPECT_EQ(Int("SELECT COUNT(*) FROM (SELECT v, id, tag FROM src WHERE part "
                "IS NOT NULL EXCEPT SELECT v, id, tag FROM d)"),
            0);
  EXPECT_EQ(Int("SELECT COUNT(*) FROM d"),
            foreign + Int("SELECT COUNT(*) FROM src WHERE part IS NOT NULL"));

  // Row counts per partition, as the planner sees them.
  auto counts = engine_->CountRowsByPartition(d);
  ASSERT_TRUE(counts.ok()) << counts.status();
  std::map<std::string, int64_t> want;
  {
    auto q = db_->Prepare(
        "SELECT part, COUNT(*) FROM src WHERE part IS NOT NULL GROUP BY 1");
    ASSERT_TRUE(q.ok());
    while (*q->Step()) want[q->ColumnText(0)] = q->ColumnInt(1);
  }
  EXPECT_EQ(*counts, want);

  // 2. Backfill a few partitions: the first, the last, and two adjacent
  //    ones in the middle (for hours: an hour 23 and the next midnight when
  //    they exist).
  std::set<std::string> chosen = {partitions.front(), partitions.back()};
  for (size_t i = 0; i + 1 < partitions.size(); ++i) {
    if (grain == Grain::kHour ? partitions[i].substr(11) == "23"
                              : partitions[i].rfind("2024-02-29", 0) == 0 ||
                                    partitions[i] == "2024-02") {
      chosen.insert(partitions[i]);
      chosen.insert(partitions[i + 1]);
      break;
    }
  }
  ASSERT_GE(chosen.size(), 3u);
  Exec("CREATE TABLE before AS SELECT * FROM d");
  for (const std::string& p : chosen) {
    auto q = db_->Prepare("UPDATE src SET tag = tag + 1000 WHERE part = ?1");
    ASSERT_TRUE(q.ok());
    ASSERT_TRUE(q->BindText(1, p).ok());
    ASSERT_TRUE(q->Run().ok());
  }
  JobLayout scoped;
  scoped.job_id = "bf-2";
  scoped.items.push_back(
      {&d, std::vector<std::string>(chosen.begin(), chosen.end())});
  RunJob(scoped, src);

  const std::string in_chosen =
      absl::StrCat("part IN ('", absl::StrJoin(chosen, "', '"), "')");
  // The chosen partitions hold the new rows, exactly.
  EXPECT_EQ(Int(absl::StrCat("SELECT COUNT(*) FROM (SELECT v, id, tag FROM "
                             "src WHERE ",
                             in_chosen, " EXCEPT SELECT v, id, tag FROM d)")),
            0);
  // Every other row is unchanged: the table minus the chosen partitions'
  // ids equals the snapshot minus the same ids, both ways.
  const std::string chosen_ids =
      absl::StrCat("(SELECT id FROM src WHERE ", in_chosen, ")");
  for (const char* order :
       {"d EXCEPT SELECT * FROM before", "before EXCEPT SELECT * FROM d"}) {
    EXPECT_EQ(Int(absl::StrCat("SELECT COUNT(*) FROM (SELECT * FROM ", order,
                               ") WHERE id NOT IN ", chosen_ids)),
              0)
        << order;
  }
  EXPECT_EQ(Int("SELECT COUNT(*) FROM d"),
            foreign + Int("SELECT COUNT(*) FROM src WHERE part IS NOT NULL"));
  EXPECT_EQ(Int("SELECT COUNT(*) FROM d WHERE id < 0 AND tag = 7"), foreign);
  // The rollback copy holds exactly the replaced rows.
  EXPECT_EQ(Int(absl::StrCat("SELECT COUNT(*) FROM \"_bf_prev_bf_2_d\"")),
            Int(absl::StrCat("SELECT COUNT(*) FROM src WHERE ", in_chosen)));
}

TEST_P(MembershipEngineTest, TransformWritingThePartitionValue) {
  // The documented pattern: the transform writes :partition itself into
  // the partition column. A job of several adjacent partitions (the hour
  // 23 of a day with the day's other hours) succeeds, and a later backfill
  // of one of them leaves the others alone.
  const Grain grain = GetParam();
  const char* from = grain == Grain::kHour  ? "2024-04-01T20"
                     : grain == Grain::kDay ? "2024-02-27"
                                            : "2024-11";
  const char* to = grain == Grain::kHour  ? "2024-04-02T02"
                   : grain == Grain::kDay ? "2024-03-02"
                                          : "2025-05";
  auto partitions = EnumerateRange(grain, from, to);
  ASSERT_TRUE(partitions.ok());
  Exec("CREATE TABLE version (n INTEGER)");
  Exec("INSERT INTO version VALUES (1)");
  DatasetSpec d;
  d.name = "agg";
  d.kind = DatasetKind::kDerived;
  d.table = "agg";
  d.partition = PartitionSpec{"p", grain, {}};
  d.transform =
      "SELECT :partition AS p, n AS n FROM version UNION ALL "
      "SELECT :partition, n + 100 FROM version";
  DatasetSpec version;
  version.name = "version";
  version.kind = DatasetKind::kSource;
  version.table = "version";
  d.columns = {{"p", "TEXT"}, {"n", "INTEGER"}};
  auto engine = SqliteEngine::Open(path_, 2);
  ASSERT_TRUE(engine.ok());
  engine_ = *std::move(engine);

  JobLayout load;
  load.job_id = "bf-1";
  load.items.push_back({&d, *partitions});
  RunJob(load, version);
  EXPECT_EQ(Int("SELECT COUNT(*) FROM agg"),
            2 * static_cast<int64_t>(partitions->size()));

  Exec("UPDATE version SET n = 2");
  const std::string one = (*partitions)[partitions->size() / 2];
  JobLayout scoped;
  scoped.job_id = "bf-2";
  scoped.items.push_back({&d, {one}});
  RunJob(scoped, version);
  EXPECT_EQ(Int("SELECT COUNT(*) FROM agg"),
            2 * static_cast<int64_t>(partitions->size()));
  auto q = db_->Prepare(
      "SELECT COUNT(*) FROM agg WHERE p = ?1 AND n IN (2, "
      "102)");
  ASSERT_TRUE(q.ok());
  ASSERT_TRUE(q->BindText(1, one).ok());
  ASSERT_TRUE(*q->Step());
  EXPECT_EQ(q->ColumnInt(0), 2);
  EXPECT_EQ(Int("SELECT COUNT(*) FROM agg WHERE n IN (1, 101)"),
            2 * static_cast<int64_t>(partitions->size()) - 2);
}

TEST_P(MembershipEngineTest, RowOutsideThePartitionIsRefused) {
  const Grain grain = GetParam();
  // The transform writes a value of the neighbouring partition, in the
  // other separator (or a month's first day for months): refused.
  DatasetSpec d;
  d.name = "bad";
  d.kind = DatasetKind::kDerived;
  d.table = "bad";
  d.partition = PartitionSpec{"p", grain, {}};
  const char* value = grain == Grain::kHour  ? "2024-04-01 22:59:59"
                      : grain == Grain::kDay ? "2024-03-31T23:59"
                                             : "2025-02-28";
  const char* partition = grain == Grain::kHour  ? "2024-04-01T23"
                          : grain == Grain::kDay ? "2024-04-01"
                                                 : "2025-03";
  d.transform = absl::StrCat("SELECT '", value, "' AS p");
  d.columns = {{"p", "TEXT"}};
  auto engine = SqliteEngine::Open(path_, 1);
  ASSERT_TRUE(engine.ok());
  engine_ = *std::move(engine);
  JobLayout job;
  job.job_id = "bf-1";
  job.items.push_back({&d, {partition}});
  ASSERT_TRUE(engine_->PrepareJob(job).ok());
  auto staged = engine_->StagePartition("bf-1", d, partition, {});
  ASSERT_FALSE(staged.ok());
  EXPECT_EQ(staged.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(staged.status().message()),
              HasSubstr("fall outside partition"));
  // A value in no accepted format is refused the same way.
  d.transform = absl::StrCat("SELECT '", partition, ":00+02:00' AS p");
  staged = engine_->StagePartition("bf-1", d, partition, {});
  ASSERT_FALSE(staged.ok());
  EXPECT_THAT(std::string(staged.status().message()),
              HasSubstr("fall outside partition"));
}

INSTANTIATE_TEST_SUITE_P(Grains, MembershipEngineTest,
                         ::testing::Values(Grain::kHour, Grain::kDay,
                                           Grain::kMonth),
                         [](const ::testing::TestParamInfo<Grain>& info) {
                           return std::string(GrainName(info.param));
                         });

}  // namespace
}  // namespace storage_partition_membership_test
}  // namespace backfill
