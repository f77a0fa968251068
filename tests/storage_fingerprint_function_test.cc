// The SQL aggregate _bf_fingerprint
// (storage/sqlite/sqlite_fingerprint_function.h) against the row-by-row
// HashRows that lineage recorded before it existed: on generated tables holding
// every storage class (and the values whose encoding is easy to get wrong:
// -0.0, the extremes of INTEGER, empty text against an empty blob), under a
// column list, "*", another order and a filter, the two give the same
// fingerprint; one row's hash is checked against XXH3 of the encoding written
// out by hand. The fallbacks (a view's computed column, more columns than the
// aggregate takes) still give the same figures.

#include <xxhash.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/model/fingerprint.h"
#include "gtest/gtest.h"
#include "storage/sqlite/sqlite_db.h"
#include "storage/sqlite/sqlite_fingerprint_function.h"
#include "tests/testing/warehouse_test.h"

namespace backfill {
namespace storage_fingerprint_function_test {
namespace {

class FingerprintFunctionTest : public testing::WarehouseTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(testing::WarehouseTest::SetUp());
    ASSERT_TRUE(sqlite::RegisterFingerprintFunction(db_.get()).ok());
  }

  // Through the aggregate (or its fallback), as the engine computes it.
  std::string ViaQuery(const std::string& columns, const std::string& rest,
                       bool* aggregate = nullptr) {
    absl::StatusOr<sqlite::FingerprintQuery> fq =
        sqlite::MakeFingerprintQuery(db_.get(), columns, rest);
    EXPECT_TRUE(fq.ok()) << fq.status();
    if (!fq.ok()) return "";
    if (aggregate != nullptr) *aggregate = fq->aggregate;
    absl::StatusOr<sqlite::Statement> q = db_->Prepare(fq->sql);
    EXPECT_TRUE(q.ok()) << q.status() << "\n" << fq->sql;
    if (!q.ok()) return "";
    absl::StatusOr<Fingerprint> fp = fq->Run(*q);
    EXPECT_TRUE(fp.ok()) << fp.status();
    return fp.ok() ? fp->ToString() : "";
  }

  // Row by row over the plain SELECT.
  std::string ViaRows(const std::string& columns, const std::string& rest) {
    absl::StatusOr<sqlite::Statement> q =
        db_->Prepare(absl::StrCat("SELECT ", columns, " ", rest));
    EXPECT_TRUE(q.ok()) << q.status();
    if (!q.ok()) return "";
    absl::StatusOr<Fingerprint> fp = sqlite::HashRows(*q);
    EXPECT_TRUE(fp.ok()) << fp.status();
    return fp.ok() ? fp->ToString() : "";
  }
};

void PutU64(std::string* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
}

TEST_F(FingerprintFunctionTest, OneRowIsXxh3OfItsTypedEncoding) {
  Exec(
      "CREATE TABLE t (a, b, c, d, e);"
      "INSERT INTO t VALUES (-7, 'ab', NULL, 2.5, x'00ff');");
  std::string enc;
  enc.push_back('I');
  PutU64(&enc, static_cast<uint64_t>(int64_t{-7}));
  enc.push_back('T');
  PutU64(&enc, 2);
  enc += "ab";
  enc.push_back('N');
  enc.push_back('R');
  double half = 2.5;
  uint64_t bits;
  std::memcpy(&bits, &half, sizeof(bits));
  PutU64(&enc, bits);
  enc.push_back('B');
  PutU64(&enc, 2);
  enc.append("\x00\xff", 2);
  const uint64_t want = XXH3_64bits(enc.data(), enc.size());
  EXPECT_EQ(ViaQuery("a, b, c, d, e", "FROM t"),
            absl::StrFormat("%016x:1", want));
  // Two rows: the sum of their hashes, modulo 2^64.
  Exec("INSERT INTO t VALUES (-7, 'ab', NULL, 2.5, x'00ff')");
  EXPECT_EQ(ViaQuery("a, b, c, d, e", "FROM t"),
            absl::StrFormat("%016x:2", want * 2));
}

TEST_F(FingerprintFunctionTest, NoRowsIsTheEmptyFingerprint) {
  Exec("CREATE TABLE t (a INTEGER, b TEXT)");
  EXPECT_EQ(ViaQuery("a, b", "FROM t"), "0000000000000000:0");
  EXPECT_EQ(ViaQuery("*", "FROM t"), ViaRows("*", "FROM t"));
}

// A value of a random storage class, as an SQL literal.
std::string RandomValue(std::mt19937_64& rng) {
  static const char* const kEdges[] = {
      "NULL",
      "0",
      "-1",
      "9223372036854775807",
      "-9223372036854775808",
      "0.0",
      "-0.0",
      "1e308",
      "-1e308",
      "9e999",  // +Inf
      "0.1",
      "''",
      "x''",
      "'0'",
      "x'30'",
      "'é€😀'",
      "'it''s'",
      "'a' || char(0) || 'b'",
  };
  switch (rng() % 4) {
    case 0:
      return kEdges[rng() % (sizeof(kEdges) / sizeof(kEdges[0]))];
    case 1:
      return absl::StrCat(static_cast<int64_t>(rng()));
    case 2:
      return absl::StrFormat(
          "%.17g", std::ldexp(static_cast<double>(rng() % 2000000) - 1e6,
                              static_cast<int>(rng() % 40) - 20));
    default: {
      std::string s;
      const int n = static_cast<int>(rng() % 12);
      for (int i = 0; i < n; ++i)
        s.push_back(static_cast<char>('a' + rng() % 26));
      return rng() % 2 ? absl::StrCat("'", s, "'")
                       : absl::StrCat("CAST('", s, "' AS BLOB)");
    }
  }
}

TEST_F(FingerprintFunctionTest, GeneratedRowsHashAsRowByRow) {
  for (uint64_t seed = 1; seed <= 25; ++seed) {
    SCOPED_TRACE(absl::StrCat("seed ", seed));
    std::mt19937_64 rng(seed);
    // Columns without a declared type keep each value's storage class.
    Exec(
        "DROP TABLE IF EXISTS g;"
        "CREATE TABLE g (k INTEGER, \"we\"\"ird col\", \"select\", v)");
    const int rows = static_cast<int>(rng() % 150);
    std::string sql = "BEGIN;";
    for (int r = 0; r < rows; ++r) {
      absl::StrAppend(&sql, "INSERT INTO g VALUES (", rng() % 5, ", ",
                      RandomValue(rng), ", ", RandomValue(rng), ", ",
                      RandomValue(rng), ");");
    }
    absl::StrAppend(&sql, "COMMIT;");
    Exec(sql);
    const std::string all = "k, \"we\"\"ird col\", \"select\", v";
    bool aggregate = false;
    EXPECT_EQ(ViaQuery(all, "FROM g", &aggregate), ViaRows(all, "FROM g"));
    EXPECT_TRUE(aggregate);
    EXPECT_EQ(ViaQuery("*", "FROM g", &aggregate), ViaRows("*", "FROM g"));
    EXPECT_TRUE(aggregate);
    EXPECT_EQ(ViaQuery("*", "FROM g"), ViaRows(all, "FROM g"));
    EXPECT_EQ(ViaQuery("v, k", "FROM g"), ViaRows("v, k", "FROM g"));
    for (int k = 0; k < 5; ++k) {
      const std::string where = absl::StrCat("FROM g WHERE k = ", k);
      EXPECT_EQ(ViaQuery("*", where), ViaRows("*", where));
    }
  }
}

TEST_F(FingerprintFunctionTest, ColumnsThatCannotBeNamedAreHashedRowByRow) {
  Exec(
      "CREATE TABLE t (a INTEGER, b TEXT);"
      "INSERT INTO t VALUES (1, 'x'), (2, NULL), (3, 'z');"
      // A computed column has no table column to name.
      "CREATE VIEW computed AS SELECT a, b || '!' FROM t;"
      // A column passed through under another name can be named.
      "CREATE VIEW renamed AS SELECT a AS \"the a\", b FROM t;");
  bool aggregate = true;
  EXPECT_EQ(ViaQuery("*", "FROM computed", &aggregate),
            ViaRows("*", "FROM computed"));
  EXPECT_FALSE(aggregate);
  EXPECT_EQ(ViaQuery("*", "FROM renamed", &aggregate),
            ViaRows("*", "FROM renamed"));
  EXPECT_TRUE(aggregate);
  EXPECT_EQ(ViaQuery("*", "FROM renamed"), ViaRows("a, b", "FROM t"));
  // Two columns of one name (SQLite names the second "b:1" in the view):
  // whichever way it is hashed, the rows are the view's.
  Exec(
      "CREATE VIEW twice AS SELECT x.b, y.b FROM t AS x, t AS y "
      "WHERE y.a = x.a % 3 + 1");
  EXPECT_EQ(ViaQuery("*", "FROM twice"), ViaRows("*", "FROM twice"));
  EXPECT_NE(ViaQuery("*", "FROM twice"), ViaRows("b, b", "FROM t"));
}

TEST_F(FingerprintFunctionTest, WiderRowsThanTheAggregateTakesStillHash) {
  std::vector<std::string> defs, values;
  for (int i = 0; i <= sqlite::kMaxFingerprintColumns; ++i) {
    defs.push_back(absl::StrCat("c", i));
    values.push_back(absl::StrCat(i % 3 == 0 ? "NULL" : absl::StrCat(i)));
  }
  Exec(absl::StrCat("CREATE TABLE w (", absl::StrJoin(defs, ", "),
                    "); INSERT INTO w VALUES (", absl::StrJoin(values, ", "),
                    ");"));
  bool aggregate = true;
  EXPECT_EQ(ViaQuery("*", "FROM w", &aggregate), ViaRows("*", "FROM w"));
  EXPECT_FALSE(aggregate);
  EXPECT_EQ(ViaRows("*", "FROM w").substr(16), ":1");
}

// The cache answers what MakeFingerprintQuery would answer now: a column
// added by another connection, a temp view that comes to shadow the table
// and goes again, each changes the rows hashed at once.
TEST_F(FingerprintFunctionTest, CachedQueriesFollowEverySchemaChange) {
  Exec(
      "CREATE TABLE t (a INTEGER, b TEXT);"
      "INSERT INTO t VALUES (1, 'x'), (2, 'y');");
  sqlite::FingerprintQueryCache cache;
  auto via_cache = [&](const std::string& columns, const std::string& rest) {
    // As the engine runs it: the lookup and the query in one transaction.
    EXPECT_TRUE(db_->Exec("BEGIN").ok());
    absl::StatusOr<sqlite::FingerprintQuery> fq =
        cache.Get(db_.get(), columns, rest);
    EXPECT_TRUE(fq.ok()) << fq.status();
    std::string out;
    if (fq.ok()) {
      absl::StatusOr<sqlite::Statement> q = db_->Prepare(fq->sql);
      EXPECT_TRUE(q.ok()) << q.status() << "\n" << fq->sql;
      if (q.ok()) {
        absl::StatusOr<Fingerprint> fp = fq->Run(*q);
        EXPECT_TRUE(fp.ok()) << fp.status();
        if (fp.ok()) out = fp->ToString();
      }
    }
    EXPECT_TRUE(db_->Exec("COMMIT").ok());
    return out;
  };
  EXPECT_EQ(via_cache("*", "FROM t"), ViaRows("*", "FROM t"));
  EXPECT_EQ(via_cache("*", "FROM t"), ViaRows("a, b", "FROM t"));
  EXPECT_EQ(via_cache("\"a\"", "FROM t"), ViaRows("a", "FROM t"));
  EXPECT_EQ(cache.size(), 2u);

  // Another connection adds a column and fills it.
  {
    absl::StatusOr<std::unique_ptr<sqlite::Database>> other =
        sqlite::Database::Open(path_);
    ASSERT_TRUE(other.ok()) << other.status();
    ASSERT_TRUE(
        (*other)->Exec("ALTER TABLE t ADD COLUMN c INTEGER DEFAULT 7").ok());
  }
  EXPECT_EQ(via_cache("*", "FROM t"), ViaRows("a, b, c", "FROM t"));
  EXPECT_NE(via_cache("*", "FROM t"), ViaRows("a, b", "FROM t"));

  // A temp view shadows the table, then goes.
  Exec("CREATE TEMP VIEW t AS SELECT a, b FROM main.t WHERE a = 1");
  EXPECT_EQ(via_cache("*", "FROM t"),
            ViaRows("a, b", "FROM main.t WHERE a = 1"));
  Exec("DROP VIEW temp.t");
  EXPECT_EQ(via_cache("*", "FROM t"), ViaRows("a, b, c", "FROM main.t"));

  // Past its bound it starts again, with the same answers.
  for (size_t i = 0; i <= sqlite::FingerprintQueryCache::kMaxEntries; ++i) {
    EXPECT_EQ(via_cache("*", absl::StrCat("FROM t WHERE a > ", i)),
              ViaRows("*", absl::StrCat("FROM t WHERE a > ", i)));
    EXPECT_LE(cache.size(), sqlite::FingerprintQueryCache::kMaxEntries);
  }
}

}  // namespace
}  // namespace storage_fingerprint_function_test
}  // namespace backfill
