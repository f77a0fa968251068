// SqliteStateFileTest: the fixture of the tests of what only the SQLite
// state store's file has (its schema and migrations, integrity checks,
// record checksums, WAL, encodings; storage_state_store_test.cc and
// storage_state_store_integrity_test.cc): a SqliteStateStore on a file in
// a temporary directory of its own, reopened at will, and plain SQL over
// the file on a connection of the test's own. What every StateStore does is
// the contract suite's (state_store_contract.h).
//
// The fixture owns the store and the directory (removed after each test).
// Not thread-safe.

#ifndef BACKFILL_TESTS_TESTING_SQLITE_STATE_FILE_H_
#define BACKFILL_TESTS_TESTING_SQLITE_STATE_FILE_H_

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "core/model/job.h"
#include "gtest/gtest.h"
#include "storage/sqlite/sqlite_db.h"
#include "storage/sqlite/sqlite_fingerprint_function.h"
#include "storage/sqlite/state/sqlite_state_store.h"

namespace backfill::testing {

class SqliteStateFileTest : public ::testing::Test {
 protected:
  // A fixed time `seconds` after a fixed point.
  static absl::Time T(int seconds) {
    return absl::FromUnixSeconds(1700000000 + seconds);
  }

  // A job of daily_revenue (two partitions) whose request lists hold the
  // separators of the store's list encoding and SQL quotes.
  static Job MakeJob(const std::string& key = "") {
    Job job;
    job.request.dataset = "daily_revenue";
    job.request.partitions = {"a:b", "", "x'y\"z;--", "12:"};
    job.request.reason = "fix refunds";
    job.idempotency_key = key;
    job.message = "submitted";
    DatasetPlan a;
    a.dataset = "daily_revenue";
    a.partitions = {"2025-01-01", "2025-01-02"};
    a.reason = "requested";
    job.plan.datasets = {a};
    return job;
  }

  // The bytes of the file at `path`.
  static std::string ReadFile(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  void SetUp() override {
    std::string tmpl = ::testing::TempDir() + "/state_store_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/state.db";
    Reopen();
  }
  void TearDown() override {
    store_.reset();
    std::filesystem::remove_all(dir_);
  }
  void Reopen() {
    store_.reset();
    auto store = SqliteStateStore::Open(path_);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
  }
  // Runs `sql` on the file with a connection of its own (on which
  // _bf_row_hash is defined, for the records' checksums).
  void Exec(const std::string& sql) {
    auto db = sqlite::Database::Open(path_);
    ASSERT_TRUE(db.ok()) << db.status();
    ASSERT_TRUE(sqlite::RegisterRowHashFunction(db->get()).ok());
    absl::Status s = (*db)->Exec(sql);
    ASSERT_TRUE(s.ok()) << s;
  }
  // The text of the first column of the first row of `sql`, or the error.
  std::string QueryText(const std::string& sql) {
    auto db = sqlite::Database::Open(path_);
    if (!db.ok()) return std::string(db.status().message());
    if (absl::Status s = sqlite::RegisterRowHashFunction(db->get()); !s.ok()) {
      return std::string(s.message());
    }
    auto text = (*db)->QueryText(sql);
    return text.ok() ? *text : std::string(text.status().message());
  }

  std::string dir_;
  std::string path_;
  std::unique_ptr<SqliteStateStore> store_;
};

}  // namespace backfill::testing

#endif  // BACKFILL_TESTS_TESTING_SQLITE_STATE_FILE_H_
