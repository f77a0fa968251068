// The statement cache of sqlite::Database (storage/sqlite/sqlite_db.h): a
// statement taken again from the cache runs as a fresh one would (no binding or
// row left over from its last use), sees schema changes made since it was
// cached, is never shared by two live Statements, stays bounded, and is
// neither taken nor kept while a ReadSandbox's authorizer is installed.

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/sqlite/sqlite_db.h"
#include "storage/sqlite/sqlite_sandbox.h"

namespace backfill::sqlite {
namespace storage_statement_cache_test {
namespace {

using ::testing::HasSubstr;

class StatementCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto db = Database::Open(":memory:");
    ASSERT_TRUE(db.ok()) << db.status();
    db_ = *std::move(db);
    ASSERT_TRUE(db_->Exec("CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT);"
                          "INSERT INTO t VALUES (1, 'one'), (2, 'two'), "
                          "(3, 'three')")
                    .ok());
  }

  // The v of row k through a cached statement; "" when there is none.
  std::string ValueOf(int64_t k) {
    auto q = db_->PrepareCached("SELECT v FROM t WHERE k = ?1");
    EXPECT_TRUE(q.ok()) << q.status();
    if (!q.ok()) return "<error>";
    if (k != 0) {
      EXPECT_TRUE(q->BindInt(1, k).ok());
    }
    auto row = q->Step();
    EXPECT_TRUE(row.ok()) << row.status();
    return row.ok() && *row ? q->ColumnText(0) : "";
  }

  std::unique_ptr<Database> db_;
};

TEST_F(StatementCacheTest, AStatementComesBackResetAndWithoutBindings) {
  EXPECT_EQ(db_->cached_statements(), 0u);
  EXPECT_EQ(ValueOf(2), "two");
  EXPECT_EQ(db_->cached_statements(), 1u);
  // The same text again: from the cache, one statement still.
  EXPECT_EQ(ValueOf(3), "three");
  EXPECT_EQ(db_->cached_statements(), 1u);
  // Unbound this time: the parameter is NULL, not the 3 bound before.
  EXPECT_EQ(ValueOf(0), "");
}

TEST_F(StatementCacheTest, AStatementLeftMidwayReleasesItsReadOnReturn) {
  {
    auto q = db_->PrepareCached("SELECT k FROM t ORDER BY k");
    ASSERT_TRUE(q.ok());
    auto row = q->Step();
    ASSERT_TRUE(row.ok() && *row);
    EXPECT_EQ(q->ColumnInt(0), 1);
  }
  // Reused from the start, not from the second row.
  auto q = db_->PrepareCached("SELECT k FROM t ORDER BY k");
  ASSERT_TRUE(q.ok());
  auto row = q->Step();
  ASSERT_TRUE(row.ok() && *row);
  EXPECT_EQ(q->ColumnInt(0), 1);
  q = db_->PrepareCached("SELECT 1");  // gives the first one back
  // A write (and a DROP) is possible: no statement holds the table.
  EXPECT_TRUE(db_->Exec("DELETE FROM t WHERE k = 3").ok());
  EXPECT_TRUE(db_->Exec("CREATE TABLE u (a); DROP TABLE u").ok());
}

TEST_F(StatementCacheTest, TwoLiveStatementsOfOneTextAreTwoStatements) {
  auto a = db_->PrepareCached("SELECT v FROM t WHERE k = ?1");
  auto b = db_->PrepareCached("SELECT v FROM t WHERE k = ?1");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(a->raw(), b->raw());
  ASSERT_TRUE(a->BindInt(1, 1).ok());
  ASSERT_TRUE(b->BindInt(1, 2).ok());
  ASSERT_TRUE(*a->Step());
  ASSERT_TRUE(*b->Step());
  EXPECT_EQ(a->ColumnText(0), "one");
  EXPECT_EQ(b->ColumnText(0), "two");
  a = Statement();
  b = Statement();
  // Only one of them is kept.
  EXPECT_EQ(db_->cached_statements(), 1u);
}

TEST_F(StatementCacheTest, ACachedStatementSeesTheSchemaAsItIsNow) {
  EXPECT_EQ(ValueOf(1), "one");
  ASSERT_TRUE(db_->Exec("ALTER TABLE t RENAME TO t_old;"
                        "CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT);"
                        "INSERT INTO t VALUES (1, 'uno')")
                  .ok());
  EXPECT_EQ(ValueOf(1), "uno");
  // The table gone: the cached statement fails when it runs, with SQLite's
  // own error, instead of reading anything stale.
  ASSERT_TRUE(db_->Exec("DROP TABLE t").ok());
  auto q = db_->PrepareCached("SELECT v FROM t WHERE k = ?1");
  ASSERT_TRUE(q.ok()) << "taken from the cache, not compiled again";
  auto row = q->Step();
  ASSERT_FALSE(row.ok());
  EXPECT_THAT(std::string(row.status().message()), HasSubstr("no such table"));
  // Prepare always compiles: it says at once that the table is gone.
  EXPECT_FALSE(db_->Prepare("SELECT v FROM t WHERE k = ?1").ok());
}

TEST_F(StatementCacheTest, PrepareNeitherTakesNorKeeps) {
  {
    auto q = db_->Prepare("SELECT v FROM t WHERE k = ?1");
    ASSERT_TRUE(q.ok());
  }
  EXPECT_EQ(db_->cached_statements(), 0u);
}

TEST_F(StatementCacheTest, TheCacheIsBounded) {
  for (size_t i = 0; i < Database::kCachedStatements + 50; ++i) {
    auto q = db_->PrepareCached(absl::StrCat("SELECT ", i));
    ASSERT_TRUE(q.ok());
    ASSERT_TRUE(q->Step().ok());
  }
  EXPECT_EQ(db_->cached_statements(), Database::kCachedStatements);
}

TEST_F(StatementCacheTest, TransactionsRunThroughCachedStatements) {
  for (int i = 0; i < 3; ++i) {
    auto txn = Transaction::Begin(db_.get());
    ASSERT_TRUE(txn.ok()) << txn.status();
    ASSERT_TRUE(
        db_->Exec(absl::StrCat("INSERT INTO t VALUES (", 10 + i, ", 'x')"))
            .ok());
    ASSERT_TRUE(txn->Commit().ok());
    EXPECT_TRUE(db_->InAutocommit());
  }
  {
    auto txn = Transaction::Begin(db_.get());
    ASSERT_TRUE(txn.ok());
    ASSERT_TRUE(db_->Exec("INSERT INTO t VALUES (20, 'rolled back')").ok());
  }
  EXPECT_EQ(*db_->QueryInt("SELECT COUNT(*) FROM t WHERE k >= 10"), 3);
}

TEST_F(StatementCacheTest, NoStatementEscapesASandbox) {
  // Cached before the sandbox: a read of t, which the sandbox (limited to
  // table "other") would refuse.
  EXPECT_EQ(ValueOf(1), "one");
  ASSERT_TRUE(db_->Exec("CREATE TABLE other (a)").ok());
  {
    ReadSandbox sandbox(db_.get(), "other", absl::Seconds(30));
    EXPECT_EQ(db_->cached_statements(), 0u);
    auto q = db_->PrepareCached("SELECT v FROM t WHERE k = ?1");
    EXPECT_FALSE(q.ok());
    EXPECT_FALSE(sandbox.refused().empty());
    auto allowed = db_->PrepareCached("SELECT a FROM other");
    ASSERT_TRUE(allowed.ok()) << allowed.status();
  }
  // Nothing compiled in the sandbox was kept.
  EXPECT_EQ(db_->cached_statements(), 0u);
  EXPECT_EQ(ValueOf(1), "one");
  EXPECT_EQ(db_->cached_statements(), 1u);
}

}  // namespace
}  // namespace storage_statement_cache_test
}  // namespace backfill::sqlite
