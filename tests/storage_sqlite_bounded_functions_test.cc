// InstallBoundedFunctions: on generated calls the bounded functions give
// exactly what SQLite's own give on a connection without them (value, type
// and error), and a call whose work has no bound is refused (or, for
// printf, is NULL as SQLite makes it) without doing that work.

#include <sqlite3.h>
#include <stdlib.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/sqlite/sqlite_bounded_functions.h"
#include "storage/sqlite/sqlite_db.h"

namespace backfill {
namespace storage_sqlite_bounded_functions_test {
namespace {

using sqlite::Database;
using ::testing::HasSubstr;

std::unique_ptr<Database> OpenMemory() {
  auto db = Database::Open(":memory:");
  EXPECT_TRUE(db.ok()) << db.status();
  return db.ok() ? *std::move(db) : nullptr;
}

// What `sql` gives on `db` with `args` bound: "quote(value)" of its one
// column, or "error <code>: <message>".
std::string Result(Database* db, const std::string& sql,
                   const std::vector<std::string>& args) {
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v2(db->raw(), sql.c_str(), -1, &stmt, nullptr) !=
      SQLITE_OK) {
    return absl::StrCat("prepare error: ", sqlite3_errmsg(db->raw()));
  }
  // Each argument is an SQL literal, bound through a statement of its own
  // so that its type is the literal's.
  for (size_t i = 0; i < args.size(); ++i) {
    sqlite3_stmt* lit = nullptr;
    const std::string select = absl::StrCat("SELECT ", args[i]);
    EXPECT_EQ(sqlite3_prepare_v2(db->raw(), select.c_str(), -1, &lit, nullptr),
              SQLITE_OK)
        << args[i];
    EXPECT_EQ(sqlite3_step(lit), SQLITE_ROW);
    sqlite3_bind_value(stmt, static_cast<int>(i) + 1,
                       sqlite3_column_value(lit, 0));
    sqlite3_finalize(lit);
  }
  std::string out;
  const int rc = sqlite3_step(stmt);
  if (rc == SQLITE_ROW) {
    const unsigned char* text = sqlite3_column_text(stmt, 0);
    out = text == nullptr ? "NULL" : reinterpret_cast<const char*>(text);
  } else {
    out = absl::StrCat("error ", sqlite3_extended_errcode(db->raw()), ": ",
                       sqlite3_errmsg(db->raw()));
  }
  sqlite3_finalize(stmt);
  return out;
}

class BoundedFunctionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    plain_ = OpenMemory();
    bounded_ = OpenMemory();
    ASSERT_NE(plain_, nullptr);
    ASSERT_NE(bounded_, nullptr);
    ASSERT_TRUE(sqlite::InstallBoundedFunctions(bounded_.get()).ok());
    // The length limit of a predicate's sandbox, on both.
    for (Database* db : {plain_.get(), bounded_.get()}) {
      sqlite3_limit(db->raw(), SQLITE_LIMIT_LENGTH, 4 << 20);
    }
  }

  // Expects the same result on both connections.
  void ExpectSame(const std::string& sql,
                  const std::vector<std::string>& args = {}) {
    EXPECT_EQ(Result(bounded_.get(), sql, args),
              Result(plain_.get(), sql, args))
        << sql << " with " << absl::StrJoin(args, ", ");
  }

  std::unique_ptr<Database> plain_;
  std::unique_ptr<Database> bounded_;
};

// A literal from a small alphabet rich in what patterns and formats mean.
std::string RandomLiteral(std::mt19937& rng) {
  static const std::vector<std::string> kPieces = {
      "a", "b", "A", "%", "_",  "*", "?", "[", "]",     "^", "-", "\\",
      "é", "😀", " ", "x", "''", "{", "}", ":", "\"k\"", "1", "0", "."};
  switch (rng() % 9) {
    case 0:
      return "NULL";
    case 1:
      return std::to_string(static_cast<int>(rng() % 200) - 100);
    case 2:
      return absl::StrCat(static_cast<int>(rng() % 2000) - 1000, ".25");
    case 3:
      return "x'61255f00'";
    default: {
      std::string text;
      const int n = static_cast<int>(rng() % 9);
      for (int i = 0; i < n; ++i) text += kPieces[rng() % kPieces.size()];
      return absl::StrCat("'", text, "'");
    }
  }
}

// A JSON object or value as a literal.
std::string RandomJson(std::mt19937& rng) {
  static const std::vector<std::string> kJson = {
      "'{}'",
      "'{\"a\":1}'",
      "'{\"a\":null}'",
      "'{\"a\":{\"b\":2,\"c\":[1,2]}}'",
      "'{\"b\":\"x\",\"a\":{\"c\":null}}'",
      "'[1,2]'",
      "'\"s\"'",
      "'not json'",
      "NULL",
      "3"};
  return kJson[rng() % kJson.size()];
}

// A printf format from conversions, flags, widths and precisions in the
// orders SQLite reads, and some it stops at.
std::string RandomFormat(std::mt19937& rng) {
  static const std::vector<std::string> kSpecs = {
      "%d",   "%5d",   "%-5d",  "%05d",   "%,d",  "%+d", "% d",    "%lld",
      "%x",   "%#o",   "%5.2f", "%!.3g",  "%e",   "%s",  "%.2s",   "%-4s",
      "%q",   "%Q",    "%w",    "%c",     "%.3c", "%5c", "%-5.2c", "%*d",
      "%.*f", "%*.*c", "%.*c",  "%%",     "%n",   "%T",  "%5",     "%.3-8d",
      "%l",   "%!c",   "%.0c",  "%10.*s", "%p",   "%r",  "%i",     "%u"};
  std::string format;
  const int n = 1 + static_cast<int>(rng() % 4);
  for (int i = 0; i < n; ++i) {
    if (rng() % 3 == 0) format += "ab ";
    format += kSpecs[rng() % kSpecs.size()];
  }
  return absl::StrCat("'", format, "'");
}

TEST_F(BoundedFunctionsTest, AgreesWithSqliteOnGeneratedCalls) {
  std::mt19937 rng(20261207);
  const std::vector<std::string> kTwo = {"instr", "like",  "glob",
                                         "ltrim", "rtrim", "trim"};
  for (int i = 0; i < 1500; ++i) {
    const std::string& f = kTwo[rng() % kTwo.size()];
    ExpectSame(absl::StrCat("SELECT quote(", f, "(?1, ?2))"),
               {RandomLiteral(rng), RandomLiteral(rng)});
    ExpectSame("SELECT quote(replace(?1, ?2, ?3))",
               {RandomLiteral(rng), RandomLiteral(rng), RandomLiteral(rng)});
    ExpectSame("SELECT quote(like(?1, ?2, ?3))",
               {RandomLiteral(rng), RandomLiteral(rng), RandomLiteral(rng)});
    ExpectSame("SELECT quote(?2 LIKE ?1), quote(?2 GLOB ?1)",
               {RandomLiteral(rng), RandomLiteral(rng)});
    // json_patch's result stays JSON inside another JSON function.
    ExpectSame("SELECT quote(json_object('p', json_patch(?1, ?2)))",
               {RandomJson(rng), RandomJson(rng)});
    std::vector<std::string> args = {RandomFormat(rng)};
    const int n = static_cast<int>(rng() % 5);
    for (int a = 0; a < n; ++a) {
      args.push_back(rng() % 2 == 0 ? std::to_string(rng() % 12)
                                    : RandomLiteral(rng));
    }
    std::vector<std::string> params;
    for (size_t a = 1; a <= args.size(); ++a)
      params.push_back(absl::StrCat("?", a));
    const std::string list = absl::StrJoin(params, ", ");
    ExpectSame(absl::StrCat("SELECT quote(printf(", list, "))"), args);
    ExpectSame(absl::StrCat("SELECT quote(format(", list, "))"), args);
  }
  ExpectSame("SELECT quote(printf())");
  ExpectSame("SELECT quote(instr(1))");
}

TEST_F(BoundedFunctionsTest, PrintfOverTheLengthLimitIsNullAsSqliteMakesIt) {
  // At the limit, below and above it, one conversion or several: SQLite's
  // answer on both.
  for (Database* db : {plain_.get(), bounded_.get()}) {
    sqlite3_limit(db->raw(), SQLITE_LIMIT_LENGTH, 100);
  }
  for (int reps :
       {98, 99, 100, 101, 102, 103, 104, 150, 1223, 1224, 1225, 1226, 5000}) {
    ExpectSame("SELECT quote(printf('%.*c', ?1, 'x'))", {std::to_string(reps)});
    ExpectSame("SELECT quote(printf('%.*c%.*c', ?1, 'x', ?1, 'y'))",
               {std::to_string(reps / 2)});
    ExpectSame("SELECT quote(format('%.*c', -?1, 'x'))",
               {std::to_string(reps)});
    ExpectSame(absl::StrCat("SELECT quote(printf('%.", reps, "c'))"));
  }
  // Without the bound, these run for seconds in SQLite 3.40.
  for (Database* db : {plain_.get(), bounded_.get()}) {
    sqlite3_limit(db->raw(), SQLITE_LIMIT_LENGTH, 4 << 20);
  }
  for (const char* sql :
       {"SELECT printf('%.*c', 2147483647, 'x') IS NULL",
        "SELECT printf('%.2147483647c', 'x') IS NULL",
        "SELECT format('%.*c', -2147483647, 'x') IS NULL",
        "SELECT printf(printf('%.*c', 500, 'z') || '%.*c', 300000000, '')"
        " IS NULL",
        "SELECT printf('%.3000000c%.3000000c', 'a', 'b') IS NULL"}) {
    EXPECT_EQ(Result(bounded_.get(), sql, {}), "1") << sql;
  }
}

// The `%c` repetitions a format asks for, read as SQLite reads it, against
// the sum known from how the format was built.
TEST_F(BoundedFunctionsTest, CountsTheCharactersACFormatRepeats) {
  struct Spec {
    std::string text;
    std::vector<int64_t> args;  // taken by `*` and by the conversion
    uint64_t reps;              // characters of %c written
    bool stops = false;         // SQLite ends the output here
  };
  const std::vector<Spec> kSpecs = {
      {"%c", {0}, 1},
      {"%.5c", {0}, 5},
      {"%.0c", {0}, 1},
      {"%-8.3c", {0}, 3},
      {"%*.*c", {9, 4, 0}, 4},
      {"%.*c", {-7, 0}, 7},
      {"%.*c", {2147483647, 0}, 2147483647},
      {"%.*c", {int64_t{1} << 32 | 6, 0}, 6},  // SQLite takes an int
      {"%.*-c", {12, 0}, 0, true},
      {"%!,.2c", {0}, 2},
      {"%.4294967300c", {0}, 4},  // digits wrap in 32 bits, then 31
      {"%.3lc", {0}, 3},
      {"%*d", {5, 1}, 0},
      {"%.*f", {3, 1}, 0},
      {"%lld", {1}, 0},
      {"%%", {}, 0},
      {"%n", {}, 0},
      {"%s", {0}, 0},
      {"%10.*s", {3, 0}, 0},
      {"%T", {}, 0, true},
      {"plain ", {}, 0},
  };
  std::mt19937 rng(20261208);
  for (int i = 0; i < 2000; ++i) {
    std::string format;
    std::vector<int64_t> args;
    uint64_t expected = 0;
    bool stopped = false;
    const int n = 1 + static_cast<int>(rng() % 6);
    for (int k = 0; k < n; ++k) {
      const Spec& spec = kSpecs[rng() % kSpecs.size()];
      format += spec.text;
      args.insert(args.end(), spec.args.begin(), spec.args.end());
      if (spec.stops) stopped = true;
      if (!stopped) expected += spec.reps;
    }
    if (rng() % 4 == 0) format += "%";  // a format may end in one
    sqlite3_stmt* stmt = nullptr;
    std::string sql = "SELECT ?1";
    for (size_t a = 0; a < args.size(); ++a) {
      absl::StrAppend(&sql, ", ?", a + 2);
    }
    ASSERT_EQ(
        sqlite3_prepare_v2(plain_->raw(), sql.c_str(), -1, &stmt, nullptr),
        SQLITE_OK);
    sqlite3_bind_text(stmt, 1, format.c_str(), -1, SQLITE_TRANSIENT);
    for (size_t a = 0; a < args.size(); ++a) {
      sqlite3_bind_int64(stmt, static_cast<int>(a) + 2, args[a]);
    }
    ASSERT_EQ(sqlite3_step(stmt), SQLITE_ROW);
    std::vector<sqlite3_value*> argv;
    for (int c = 0; c < sqlite3_column_count(stmt); ++c) {
      argv.push_back(sqlite3_column_value(stmt, c));
    }
    EXPECT_EQ(sqlite::PrintfCharRepetitions(static_cast<int>(argv.size()),
                                            argv.data()),
              expected)
        << format;
    sqlite3_finalize(stmt);
  }
}

TEST_F(BoundedFunctionsTest, ACallOverTheBoundIsRefusedNamingItsSizes) {
  auto small = OpenMemory();
  ASSERT_TRUE(sqlite::InstallBoundedFunctions(small.get(), 100).ok());
  // At the bound (10 x 10 pairs) it runs; one byte more is refused.
  const std::vector<std::pair<std::string, std::string>> calls = {
      {"instr(?1, ?2)", "instr()"}, {"replace(?1, ?2, 'z')", "replace()"},
      {"?2 LIKE ?1", "LIKE"},       {"?2 LIKE ?1 ESCAPE '!'", "LIKE"},
      {"?2 GLOB ?1", "GLOB"},       {"ltrim(?1, ?2)", "ltrim()"},
      {"rtrim(?1, ?2)", "rtrim()"}, {"trim(?1, ?2)", "trim()"},
  };
  for (const auto& [call, shown] : calls) {
    const std::string sql = absl::StrCat("SELECT typeof(", call, ")");
    EXPECT_THAT(Result(small.get(), sql, {"'aaaaaaaaaa'", "'%aaaaaaaa%'"}),
                ::testing::Not(HasSubstr("error")))
        << call;
    EXPECT_EQ(
        Result(small.get(), sql, {"'aaaaaaaaaa'", "'%aaaaaaaaa%'"}),
        absl::StrCat("error 1: ", shown,
                     " of values of 10 and 11 bytes is refused: one call may "
                     "compare at most 100 pairs of bytes (the product of the "
                     "two sizes)"))
        << call;
  }
  EXPECT_EQ(Result(small.get(), "SELECT json_patch(?1, ?2)",
                   {"'{\"a\":\"bbbbbb\"}'", "'{\"a\":\"cccccc\"}'"}),
            "error 1: json_patch() of values of 14 and 14 bytes is refused: "
            "one call may compare at most 100 pairs of bytes (the product of "
            "the two sizes)");
  // With the default bound: values of 4,000,000 and 1,000,001 bytes, a
  // minute of work for SQLite's instr.
  EXPECT_EQ(Result(bounded_.get(),
                   "SELECT instr(printf('%.*c', 4000000, 'a'), "
                   "printf('%.*c', 1000000, 'a') || 'b')",
                   {}),
            absl::StrCat("error 1: instr() of values of 4000000 and 1000001 "
                         "bytes is refused: one call may compare at most ",
                         sqlite::kMaxCallWork,
                         " pairs of bytes (the product of the two sizes)"));
}

TEST_F(BoundedFunctionsTest, AnIndexOnAnExpressionOfThemStillReads) {
  // The replacements are deterministic, as SQLite's: a schema with an
  // index on such an expression loads and is used.
  std::string path = ::testing::TempDir() + "/bounded_XXXXXX";
  ASSERT_NE(mkdtemp(path.data()), nullptr);
  const std::string file = path + "/w.db";
  {
    auto writer = Database::Open(file);
    ASSERT_TRUE(writer.ok()) << writer.status();
    ASSERT_TRUE((*writer)
                    ->Exec("CREATE TABLE t (a TEXT);"
                           "CREATE INDEX t_x ON t (instr(a, 'x'));"
                           "INSERT INTO t VALUES ('abx'), ('ab'), ('x')")
                    .ok());
  }
  auto reader = Database::Open(file);
  ASSERT_TRUE(reader.ok()) << reader.status();
  ASSERT_TRUE(sqlite::InstallBoundedFunctions(reader->get()).ok());
  auto count = (*reader)->QueryInt(
      "SELECT COUNT(*) FROM t WHERE instr(a, 'x') > 0 AND a LIKE '%b%'");
  ASSERT_TRUE(count.ok()) << count.status();
  EXPECT_EQ(*count, 1);
  reader->reset();
  std::filesystem::remove_all(path);
}

}  // namespace
}  // namespace storage_sqlite_bounded_functions_test
}  // namespace backfill
