// WarehouseTest: a test fixture base for tests of the SQLite warehouse. Its
// SetUp creates a fresh temporary directory with a warehouse file
// (`path_`) and opens the test's own connection to it (`db_`), through which
// a test builds its fixture and reads, with plain SQL and independently of
// the engine under test, what the engine wrote. Its TearDown closes that
// connection and removes the directory; a derived fixture that opened an
// engine on the file resets it first, then calls WarehouseTestBase's
// TearDown. `Base` is ::testing::Test or a ::testing::TestWithParam<T>.
// Not thread-safe (the test's thread only).

#ifndef BACKFILL_TESTS_TESTING_WAREHOUSE_TEST_H_
#define BACKFILL_TESTS_TESTING_WAREHOUSE_TEST_H_

#include <stdlib.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "storage/sqlite/sqlite_db.h"

namespace backfill::testing {

template <typename Base = ::testing::Test>
class WarehouseTestBase : public Base {
 protected:
  void SetUp() override {
    std::string tmpl = ::testing::TempDir() + "/warehouse_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/warehouse.db";
    auto db = sqlite::Database::Open(path_);
    ASSERT_TRUE(db.ok()) << db.status();
    db_ = *std::move(db);
  }

  void TearDown() override {
    db_.reset();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  // Runs `sql` (one or more statements) on the test's connection.
  void Exec(const std::string& sql) {
    absl::Status s = db_->Exec(sql);
    ASSERT_TRUE(s.ok()) << s << "\n" << sql;
  }

  // The rows of a query, each as "a|b|c" (NULL as "NULL").
  std::vector<std::string> Rows(const std::string& sql) {
    std::vector<std::string> out;
    auto q = db_->Prepare(sql);
    EXPECT_TRUE(q.ok()) << q.status() << "\n" << sql;
    if (!q.ok()) return out;
    while (true) {
      auto row = q->Step();
      EXPECT_TRUE(row.ok()) << row.status();
      if (!row.ok() || !*row) break;
      std::vector<std::string> cols;
      for (int i = 0; i < q->ColumnCount(); ++i) {
        cols.push_back(q->ColumnIsNull(i) ? "NULL" : q->ColumnText(i));
      }
      out.push_back(absl::StrJoin(cols, "|"));
    }
    return out;
  }

  // The integer a query returns (-1 after a failed expectation).
  int64_t Int(const std::string& sql) {
    auto n = db_->QueryInt(sql);
    EXPECT_TRUE(n.ok()) << n.status() << "\n" << sql;
    return n.ok() ? *n : -1;
  }

  int64_t Count(const std::string& table) {
    return Int(
        absl::StrCat("SELECT COUNT(*) FROM ", sqlite::QuoteIdentifier(table)));
  }

  bool Exists(const std::string& table) {
    auto e = db_->TableExists(table);
    EXPECT_TRUE(e.ok()) << e.status();
    return e.ok() && *e;
  }

  std::string dir_;
  std::string path_;                      // the warehouse file
  std::unique_ptr<sqlite::Database> db_;  // the test's own connection
};

using WarehouseTest = WarehouseTestBase<>;

}  // namespace backfill::testing

#endif  // BACKFILL_TESTS_TESTING_WAREHOUSE_TEST_H_
