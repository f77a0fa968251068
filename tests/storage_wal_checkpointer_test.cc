// The background WAL checkpointer (storage/sqlite/sqlite_wal_checkpointer.h):
// its thread checkpoints what attached connections commit, the committing
// connection checkpoints itself when the thread does not, the log stays
// bounded either way, and nothing committed is lost or doubled while
// checkpoints run beside writers and a reader (the rows are counted with
// plain SQL on a connection opened afresh).

#include <sys/stat.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "storage/sqlite/sqlite_db.h"
#include "storage/sqlite/sqlite_wal_checkpointer.h"
#include "tests/testing/warehouse_test.h"

namespace backfill {
namespace storage_wal_checkpointer_test {
namespace {

class WalCheckpointerTest : public testing::WarehouseTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(testing::WarehouseTest::SetUp());
    absl::StatusOr<std::string> mode =
        db_->QueryText("PRAGMA journal_mode=WAL");
    ASSERT_TRUE(mode.ok()) << mode.status();
    ASSERT_EQ(*mode, "wal");
    Exec("PRAGMA synchronous=NORMAL; CREATE TABLE t (k INTEGER, v TEXT);");
  }

  // `n` commits of one row each (about a page of text), k from `first`.
  void Commit(sqlite::Database* db, int first, int n) {
    for (int k = first; k < first + n; ++k) {
      absl::StatusOr<sqlite::Statement> q =
          db->PrepareCached("INSERT INTO t VALUES (?1, ?2)");
      ASSERT_TRUE(q.ok()) << q.status();
      ASSERT_TRUE(q->BindInt(1, k).ok());
      ASSERT_TRUE(q->BindText(2, std::string(3000, 'a' + k % 26)).ok());
      absl::Status s = q->Run();
      ASSERT_TRUE(s.ok()) << s;
    }
  }

  int64_t WalBytes() const {
    struct stat st;
    if (stat((path_ + "-wal").c_str(), &st) != 0) return 0;
    return st.st_size;
  }

  // COUNT(*) and SUM(k) of t on a connection opened afresh.
  std::string Counted() const {
    auto fresh = sqlite::Database::Open(path_);
    EXPECT_TRUE(fresh.ok()) << fresh.status();
    if (!fresh.ok()) return "";
    auto n = (*fresh)->QueryText(
        "SELECT COUNT(*) || '/' || COALESCE(SUM(k), 0) FROM t");
    EXPECT_TRUE(n.ok()) << n.status();
    return n.ok() ? *n : "";
  }
};

TEST_F(WalCheckpointerTest, RefusesAFileNotInWalMode) {
  auto other = sqlite::Database::Open(dir_ + "/rollback.db");
  ASSERT_TRUE(other.ok());
  ASSERT_TRUE((*other)->Exec("CREATE TABLE x (a)").ok());
  other->reset();
  auto c = sqlite::WalCheckpointer::Start(dir_ + "/rollback.db");
  EXPECT_EQ(c.status().code(), absl::StatusCode::kFailedPrecondition)
      << c.status();
  EXPECT_EQ(
      sqlite::WalCheckpointer::Start(dir_ + "/missing.db").status().code(),
      absl::StatusCode::kUnavailable);
}

TEST_F(WalCheckpointerTest, ItsThreadCheckpointsWhatAttachedConnectionsCommit) {
  sqlite::WalCheckpointer::Options options;
  options.pages = 20;
  options.inline_pages = 1 << 30;  // never by the committing connection
  auto c = sqlite::WalCheckpointer::Start(path_, options);
  ASSERT_TRUE(c.ok()) << c.status();
  (*c)->Attach(db_.get());
  ASSERT_NO_FATAL_FAILURE(Commit(db_.get(), 0, 40));
  // The thread runs when it is scheduled: wait (not a timing check) until
  // a checkpoint of it has copied every frame of the log.
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  auto caught_up = [&] {
    const sqlite::WalCheckpointer::Counts n = (*c)->counts();
    return n.background > 0 && n.copied_frames == n.log_frames &&
           n.log_frames == (WalBytes() - 32) / (4096 + 24);
  };
  while (!caught_up() && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  ASSERT_TRUE(caught_up());
  EXPECT_EQ((*c)->counts().inline_, 0);
  EXPECT_EQ((*c)->counts().failed, 0);
  // Checkpointed: the log restarts from its beginning at the next commits
  // instead of growing with them.
  const int64_t before = WalBytes();
  ASSERT_NO_FATAL_FAILURE(Commit(db_.get(), 40, 10));
  EXPECT_LE(WalBytes(), before);
  EXPECT_EQ(Counted(), "50/1225");
}

TEST_F(WalCheckpointerTest,
       ACommitterCheckpointsItselfWhenTheThreadFallsBehind) {
  sqlite::WalCheckpointer::Options options;
  options.pages = 1 << 30;  // the thread is never woken
  options.inline_pages = 30;
  auto c = sqlite::WalCheckpointer::Start(path_, options);
  ASSERT_TRUE(c.ok()) << c.status();
  (*c)->Attach(db_.get());
  ASSERT_NO_FATAL_FAILURE(Commit(db_.get(), 0, 300));
  EXPECT_GT((*c)->counts().inline_, 0);
  EXPECT_EQ((*c)->counts().background, 0);
  // Bounded by the inline threshold (plus the commit that crossed it), not
  // by the 300 commits.
  EXPECT_LT(WalBytes(), 40 * 4200);
  EXPECT_EQ(Counted(), "300/44850");
}

TEST_F(WalCheckpointerTest, WritersAndAReaderBesideCheckpointsLoseNothing) {
  sqlite::WalCheckpointer::Options options;
  options.pages = 8;
  options.inline_pages = 64;
  auto c = sqlite::WalCheckpointer::Start(path_, options);
  ASSERT_TRUE(c.ok()) << c.status();
  std::vector<std::unique_ptr<sqlite::Database>> writers;
  for (int i = 0; i < 3; ++i) {
    auto w = sqlite::Database::Open(path_);
    ASSERT_TRUE(w.ok()) << w.status();
    (*c)->Attach(w->get());
    writers.push_back(*std::move(w));
  }
  std::atomic<bool> done{false};
  std::atomic<int> reader_errors{0};
  std::thread reader([&] {
    auto r = sqlite::Database::Open(path_);
    if (!r.ok()) {
      ++reader_errors;
      return;
    }
    int64_t last = 0;
    while (!done) {
      auto n = (*r)->QueryInt("SELECT COUNT(*) FROM t");
      // A reader never sees fewer committed rows than before.
      if (!n.ok() || *n < last) ++reader_errors;
      if (n.ok()) last = *n;
    }
  });
  std::vector<std::thread> threads;
  for (int i = 0; i < 3; ++i) {
    threads.emplace_back([&, i] { Commit(writers[i].get(), i * 1000, 200); });
  }
  for (std::thread& t : threads) t.join();
  done = true;
  reader.join();
  EXPECT_EQ(reader_errors, 0);
  const sqlite::WalCheckpointer::Counts counts = (*c)->counts();
  EXPECT_GT(counts.background + counts.inline_, 0);
  EXPECT_EQ(counts.failed, 0);
  // 600 rows; k = 0..199, 1000..1199, 2000..2199.
  EXPECT_EQ(Counted(), "600/" + std::to_string(3 * 19900 + 200 * 3000));
  writers.clear();
  c->reset();
  EXPECT_EQ(Counted(), "600/" + std::to_string(3 * 19900 + 200 * 3000));
}

}  // namespace
}  // namespace storage_wal_checkpointer_test
}  // namespace backfill
