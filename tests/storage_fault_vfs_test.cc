// Tests of the fault-injecting VFS (tests/testing/fault_vfs.h): databases
// opened through storage/sqlite/sqlite_db.h on a temporary directory, with
// disk-full, I/O and fsync faults switched on and off in process and through
// the BACKFILL_TEST_FAULTS control file.

#include <sqlite3.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/sqlite/sqlite_db.h"
#include "tests/testing/fault_vfs.h"

namespace backfill::sqlite {
namespace storage_fault_vfs_test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kSmallInsert[] = "INSERT INTO t(v) VALUES ('row')";
constexpr char kBigInsert[] = "INSERT INTO t(v) VALUES (randomblob(262144))";

class FaultVfsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { ASSERT_TRUE(FaultVfs::Install().ok()); }

  void SetUp() override {
    std::string tmpl = ::testing::TempDir() + "/fault_vfs_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    FaultVfs::ClearAll();
    FaultVfs::ResetCounters();
  }

  void TearDown() override {
    unsetenv(kFaultControlEnv);
    EXPECT_TRUE(FaultVfs::WatchControlFile("").ok());
    FaultVfs::ClearAll();
    std::filesystem::remove_all(dir_);
  }

  std::string Path(const std::string& name) const { return dir_ + "/" + name; }

  // Opens `path` in `journal_mode` with table t(id, v) and returns the
  // connection, or nullptr after recording a failure.
  static std::unique_ptr<Database> Open(
      const std::string& path, const std::string& journal_mode = "wal") {
    auto db = Database::Open(path);
    if (!db.ok()) {
      ADD_FAILURE() << db.status();
      return nullptr;
    }
    auto mode =
        (*db)->QueryText(absl::StrCat("PRAGMA journal_mode=", journal_mode));
    if (!mode.ok() || *mode != journal_mode) {
      ADD_FAILURE() << "journal_mode " << journal_mode << ": "
                    << (mode.ok() ? *mode : mode.status().ToString());
      return nullptr;
    }
    absl::Status created = (*db)->Exec(
        "CREATE TABLE IF NOT EXISTS t(id INTEGER PRIMARY KEY, v BLOB)");
    if (!created.ok()) {
      ADD_FAILURE() << created;
      return nullptr;
    }
    return *std::move(db);
  }

  static int64_t Count(Database* db) {
    auto n = db->QueryInt("SELECT COUNT(*) FROM t");
    EXPECT_TRUE(n.ok()) << n.status();
    return n.ok() ? *n : -1;
  }

  // Row count and integrity as seen by a new connection.
  static int64_t CountFresh(const std::string& path) {
    auto db = Database::Open(path);
    EXPECT_TRUE(db.ok()) << db.status();
    return db.ok() ? Count(db->get()) : -1;
  }

  static std::string IntegrityFresh(const std::string& path) {
    auto db = Database::Open(path);
    if (!db.ok()) return db.status().ToString();
    auto check = (*db)->QueryText("PRAGMA integrity_check");
    return check.ok() ? *check : check.status().ToString();
  }

  static absl::Status InsertRows(Database* db, int n) {
    auto txn = Transaction::Begin(db);
    if (!txn.ok()) return txn.status();
    for (int i = 0; i < n; ++i) {
      absl::Status status = db->Exec(kSmallInsert);
      if (!status.ok()) return status;
    }
    return txn->Commit();
  }

  // Replaces the control file atomically.
  void WriteControl(const std::string& content) {
    const std::string tmp = control_ + ".tmp";
    {
      std::ofstream out(tmp, std::ios::trunc);
      out << content;
    }
    ASSERT_EQ(std::rename(tmp.c_str(), control_.c_str()), 0);
  }

  // Rewrites the control file in place (same inode).
  void RewriteControl(const std::string& content) {
    std::ofstream out(control_, std::ios::trunc);
    out << content;
  }

  std::string dir_;
  std::string control_;
};

TEST_F(FaultVfsTest, IsTheDefaultAndKeepsWalSharedMemoryAndMmapWorking) {
  ASSERT_TRUE(FaultVfs::Installed());
  ASSERT_NE(sqlite3_vfs_find(nullptr), nullptr);
  EXPECT_STREQ(sqlite3_vfs_find(nullptr)->zName, FaultVfs::kName);

  const std::string path = Path("shared.db");
  auto writer = Open(path);
  auto reader = Open(path);
  ASSERT_NE(writer, nullptr);
  ASSERT_NE(reader, nullptr);
  sqlite3_vfs* used = nullptr;
  ASSERT_EQ(sqlite3_file_control(writer->raw(), "main",
                                 SQLITE_FCNTL_VFS_POINTER, &used),
            SQLITE_OK);
  ASSERT_NE(used, nullptr);
  EXPECT_STREQ(used->zName, FaultVfs::kName);

  // A read transaction on one connection keeps its snapshot while the other
  // commits: this needs the wal-index in shared memory.
  ASSERT_TRUE(InsertRows(writer.get(), 3).ok());
  auto snapshot =
      Transaction::Begin(reader.get(), Transaction::Mode::kDeferred);
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  EXPECT_EQ(Count(reader.get()), 3);
  ASSERT_TRUE(InsertRows(writer.get(), 2).ok());
  EXPECT_EQ(Count(reader.get()), 3);
  snapshot->Rollback();
  EXPECT_EQ(Count(reader.get()), 5);

  // Memory-mapped reads (xFetch) after a checkpoint into the database file.
  ASSERT_TRUE(writer->Exec("PRAGMA wal_checkpoint(TRUNCATE)").ok());
  ASSERT_TRUE(reader->Exec("PRAGMA mmap_size=268435456").ok());
  EXPECT_EQ(Count(reader.get()), 5);
  EXPECT_EQ(IntegrityFresh(path), "ok");
  EXPECT_EQ(FaultVfs::Counters().total(), 0);
}

TEST_F(FaultVfsTest, DiskFullFailsCommitsAndKeepsTheDatabaseIntact) {
  const std::string path = Path("full.db");
  auto db = Open(path);
  ASSERT_NE(db, nullptr);
  // No automatic checkpoint: a commit writes only the WAL.
  ASSERT_TRUE(db->Exec("PRAGMA wal_autocheckpoint=0").ok());
  ASSERT_TRUE(InsertRows(db.get(), 10).ok());

  ASSERT_TRUE(FaultVfs::Set("full.db", Fault::DiskFull()).ok());
  EXPECT_EQ(FaultVfs::Get("full.db"), Fault::DiskFull());

  auto txn = Transaction::Begin(db.get());
  ASSERT_TRUE(txn.ok()) << txn.status();
  ASSERT_TRUE(db->Exec(kSmallInsert).ok());  // in the page cache so far
  absl::Status commit = txn->Commit();
  ASSERT_FALSE(commit.ok());
  // The status code is sqlite_db.h's mapping of SQLITE_FULL; the message is
  // SQLite's own.
  EXPECT_THAT(commit.message(), HasSubstr("full"));
  EXPECT_TRUE(db->InAutocommit());

  absl::Status insert = db->Exec(kSmallInsert);
  ASSERT_FALSE(insert.ok());
  EXPECT_THAT(insert.message(), HasSubstr("database or disk is full"));

  FaultCounters counters = FaultVfs::Counters("full.db");
  EXPECT_GE(counters.full, 2);
  EXPECT_EQ(counters.total(), counters.full);
  EXPECT_EQ(counters.on_wal, counters.full);  // the WAL, not the database
  EXPECT_EQ(counters.on_database, 0);

  // Reads still work on a full disk; nothing committed was lost.
  EXPECT_EQ(Count(db.get()), 10);
  EXPECT_EQ(CountFresh(path), 10);
  EXPECT_EQ(IntegrityFresh(path), "ok");

  // Space returns: the next write works.
  FaultVfs::Clear("full.db");
  EXPECT_TRUE(FaultVfs::Get("full.db").none());
  ASSERT_TRUE(db->Exec(kSmallInsert).ok());
  ASSERT_TRUE(InsertRows(db.get(), 2).ok());
  EXPECT_EQ(Count(db.get()), 13);
  ASSERT_TRUE(db->Exec("PRAGMA wal_checkpoint(TRUNCATE)").ok());
  EXPECT_EQ(CountFresh(path), 13);
  EXPECT_EQ(IntegrityFresh(path), "ok");
}

TEST_F(FaultVfsTest, DiskFullAfterABudgetFailsTheFirstWriteThatDoesNotFit) {
  const std::string path = Path("budget.db");
  auto db = Open(path);
  ASSERT_NE(db, nullptr);
  ASSERT_TRUE(InsertRows(db.get(), 1).ok());

  ASSERT_TRUE(FaultVfs::Set("budget.db", Fault::DiskFullAfter(65536)).ok());
  EXPECT_EQ(FaultVfs::Get("budget.db").full_after_bytes, 65536);
  // A small commit (a WAL frame or two) fits.
  ASSERT_TRUE(InsertRows(db.get(), 1).ok());
  EXPECT_EQ(FaultVfs::Counters("budget.db").full, 0);
  // 256 KiB do not.
  absl::Status big = db->Exec(kBigInsert);
  ASSERT_FALSE(big.ok());
  EXPECT_THAT(big.message(), HasSubstr("full"));
  // From then on the disk is full: small writes fail too.
  absl::Status small = InsertRows(db.get(), 1);
  ASSERT_FALSE(small.ok());
  EXPECT_THAT(small.message(), HasSubstr("full"));
  EXPECT_GE(FaultVfs::Counters("budget.db").full, 2);
  EXPECT_EQ(Count(db.get()), 2);
  EXPECT_EQ(IntegrityFresh(path), "ok");

  // Setting it again starts a new budget.
  ASSERT_TRUE(FaultVfs::Set("budget.db", Fault::DiskFullAfter(1 << 20)).ok());
  ASSERT_TRUE(db->Exec(kBigInsert).ok());
  FaultVfs::Clear("budget.db");
  ASSERT_TRUE(db->Exec(kBigInsert).ok());
  EXPECT_EQ(Count(db.get()), 4);
  EXPECT_EQ(IntegrityFresh(path), "ok");
}

TEST_F(FaultVfsTest, DiskFullStopsPreallocationToo) {
  const std::string path = Path("chunk.db");
  auto db = Open(path);
  ASSERT_NE(db, nullptr);
  ASSERT_TRUE(db->Exec("PRAGMA wal_autocheckpoint=0").ok());
  // With a chunk size, a checkpoint first asks the VFS to preallocate the
  // database file (SQLITE_FCNTL_SIZE_HINT), which grows it without xWrite.
  int chunk = 1 << 20;
  ASSERT_EQ(
      sqlite3_file_control(db->raw(), "main", SQLITE_FCNTL_CHUNK_SIZE, &chunk),
      SQLITE_OK);
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(db->Exec("INSERT INTO t(v) VALUES (randomblob(2000))").ok());
  }
  const auto size_before = std::filesystem::file_size(path);
  ASSERT_LT(size_before, static_cast<uintmax_t>(chunk));

  ASSERT_TRUE(FaultVfs::Set("chunk.db", Fault::DiskFull()).ok());
  absl::Status checkpoint = db->Exec("PRAGMA wal_checkpoint(TRUNCATE)");
  EXPECT_FALSE(checkpoint.ok());
  EXPECT_GE(FaultVfs::Counters("chunk.db").on_database, 1);
  EXPECT_EQ(std::filesystem::file_size(path), size_before);
  EXPECT_EQ(IntegrityFresh(path), "ok");

  FaultVfs::Clear("chunk.db");
  ASSERT_TRUE(db->Exec("PRAGMA wal_checkpoint(TRUNCATE)").ok());
  EXPECT_EQ(std::filesystem::file_size(path) % chunk, 0u);
  EXPECT_EQ(CountFresh(path), 20);
  EXPECT_EQ(IntegrityFresh(path), "ok");
}

TEST_F(FaultVfsTest, DiskFullCoversTheRollbackJournal) {
  const std::string path = Path("journal.db");
  auto db = Open(path, "delete");
  ASSERT_NE(db, nullptr);
  ASSERT_TRUE(InsertRows(db.get(), 5).ok());

  ASSERT_TRUE(FaultVfs::Set("journal.db", Fault::DiskFull()).ok());
  absl::Status insert = InsertRows(db.get(), 5);
  ASSERT_FALSE(insert.ok());
  EXPECT_THAT(insert.message(), HasSubstr("full"));
  // The journal is written before the database file.
  FaultCounters counters = FaultVfs::Counters("journal.db");
  EXPECT_GE(counters.on_journal, 1);
  EXPECT_EQ(counters.on_database, 0);
  EXPECT_EQ(CountFresh(path), 5);
  EXPECT_EQ(IntegrityFresh(path), "ok");

  FaultVfs::Clear("journal.db");
  ASSERT_TRUE(InsertRows(db.get(), 5).ok());
  EXPECT_EQ(CountFresh(path), 10);
  EXPECT_EQ(IntegrityFresh(path), "ok");
}

TEST_F(FaultVfsTest, DiskFullFailsAMultiDatabaseCommit) {
  const std::string main_path = Path("super_a.db");
  const std::string other_path = Path("super_b.db");
  auto db = Open(main_path, "delete");
  ASSERT_NE(Open(other_path, "delete"), nullptr);
  ASSERT_NE(db, nullptr);
  ASSERT_TRUE(
      db->Exec(absl::StrCat("ATTACH ", QuoteIdentifier(other_path), " AS b"))
          .ok());
  ASSERT_TRUE(db->Exec("PRAGMA b.journal_mode=DELETE").ok());

  // Both rollback journals are written by the INSERTs; the commit first
  // writes the super-journal "super_a.db-mj...", which is full.
  ASSERT_TRUE(db->Exec("BEGIN").ok());
  ASSERT_TRUE(db->Exec("INSERT INTO main.t(v) VALUES (1)").ok());
  ASSERT_TRUE(db->Exec("INSERT INTO b.t(v) VALUES (1)").ok());
  ASSERT_TRUE(FaultVfs::Set("super_a.db", Fault::DiskFull()).ok());
  absl::Status commit = db->Exec("COMMIT");
  ASSERT_FALSE(commit.ok());
  EXPECT_THAT(commit.message(), HasSubstr("full"));
  if (!db->InAutocommit()) {
    ASSERT_TRUE(db->Exec("ROLLBACK").ok());
  }
  FaultCounters counters = FaultVfs::Counters("super_a.db");
  EXPECT_GE(counters.on_journal, 1);
  EXPECT_EQ(counters.on_database, 0);
  EXPECT_EQ(FaultVfs::Counters("super_b.db").total(), 0);
  EXPECT_EQ(CountFresh(main_path), 0);
  EXPECT_EQ(CountFresh(other_path), 0);

  FaultVfs::Clear("super_a.db");
  ASSERT_TRUE(db->Exec("BEGIN; INSERT INTO main.t(v) VALUES (1); "
                       "INSERT INTO b.t(v) VALUES (1); COMMIT")
                  .ok());
  EXPECT_EQ(CountFresh(main_path), 1);
  EXPECT_EQ(CountFresh(other_path), 1);
  EXPECT_EQ(IntegrityFresh(main_path), "ok");
  EXPECT_EQ(IntegrityFresh(other_path), "ok");
}

TEST_F(FaultVfsTest, WriteErrorFailsWritesUntilCleared) {
  const std::string path = Path("ioerr.db");
  auto db = Open(path);
  ASSERT_NE(db, nullptr);
  ASSERT_TRUE(InsertRows(db.get(), 4).ok());

  ASSERT_TRUE(FaultVfs::Set("ioerr.db", Fault::WriteError()).ok());
  absl::Status commit = InsertRows(db.get(), 3);
  ASSERT_FALSE(commit.ok());
  EXPECT_THAT(commit.message(), HasSubstr("disk I/O error"));
  EXPECT_THAT(commit.message(), Not(HasSubstr("full")));
  FaultCounters counters = FaultVfs::Counters("ioerr.db");
  EXPECT_GE(counters.write_errors, 1);
  EXPECT_EQ(counters.full, 0);
  EXPECT_EQ(CountFresh(path), 4);
  EXPECT_EQ(IntegrityFresh(path), "ok");

  FaultVfs::Clear("ioerr.db");
  ASSERT_TRUE(InsertRows(db.get(), 3).ok());
  EXPECT_EQ(Count(db.get()), 7);
  EXPECT_EQ(CountFresh(path), 7);
  EXPECT_EQ(IntegrityFresh(path), "ok");
}

TEST_F(FaultVfsTest, ReadErrorFailsReadsUntilCleared) {
  const std::string path = Path("read.db");
  auto db = Open(path);
  ASSERT_NE(db, nullptr);
  ASSERT_TRUE(InsertRows(db.get(), 6).ok());
  // Half of the rows in the database file, half in the WAL.
  ASSERT_TRUE(db->Exec("PRAGMA wal_checkpoint(TRUNCATE)").ok());
  ASSERT_TRUE(InsertRows(db.get(), 6).ok());
  // Opened before the fault: opening reads the database header.
  auto reader = Database::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status();

  ASSERT_TRUE(FaultVfs::Set("read.db", Fault::ReadError()).ok());
  auto count = (*reader)->QueryInt("SELECT COUNT(*) FROM t");
  ASSERT_FALSE(count.ok());
  EXPECT_THAT(count.status().message(), HasSubstr("disk I/O error"));
  EXPECT_GE(FaultVfs::Counters("read.db").read_errors, 1);
  auto opened = Database::Open(path);
  ASSERT_FALSE(opened.ok());
  EXPECT_THAT(opened.status().message(), HasSubstr("disk I/O error"));

  FaultVfs::Clear("read.db");
  auto again = (*reader)->QueryInt("SELECT COUNT(*) FROM t");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, 12);
  ASSERT_TRUE(InsertRows(db.get(), 1).ok());
  EXPECT_EQ(IntegrityFresh(path), "ok");
}

TEST_F(FaultVfsTest, ReadErrorAlsoFailsMemoryMappedReads) {
  const std::string path = Path("mapped.db");
  auto db = Open(path);
  ASSERT_NE(db, nullptr);
  ASSERT_TRUE(InsertRows(db.get(), 20).ok());
  // Every page in the database file, none in the WAL: with mmap on, pages
  // are read through xFetch.
  ASSERT_TRUE(db->Exec("PRAGMA wal_checkpoint(TRUNCATE)").ok());
  auto mapped = Database::Open(path);
  ASSERT_TRUE(mapped.ok()) << mapped.status();
  ASSERT_TRUE((*mapped)->Exec("PRAGMA mmap_size=268435456").ok());
  EXPECT_EQ(Count(mapped->get()), 20);

  // The shim then hands out no mapping, so reads go through xRead and fail.
  ASSERT_TRUE(FaultVfs::Set("mapped.db", Fault::ReadError()).ok());
  auto count = (*mapped)->QueryInt("SELECT COUNT(*) FROM t");
  ASSERT_FALSE(count.ok());
  EXPECT_THAT(count.status().message(), HasSubstr("disk I/O error"));

  FaultVfs::Clear("mapped.db");
  EXPECT_EQ(Count(mapped->get()), 20);
}

TEST_F(FaultVfsTest, FsyncErrorFailsADurableCommit) {
  const std::string path = Path("fsync.db");
  auto db = Open(path);
  ASSERT_NE(db, nullptr);
  ASSERT_TRUE(db->Exec("PRAGMA synchronous=FULL").ok());
  ASSERT_TRUE(InsertRows(db.get(), 2).ok());

  ASSERT_TRUE(FaultVfs::Set("fsync.db", Fault::FsyncError()).ok());
  absl::Status commit = InsertRows(db.get(), 2);
  ASSERT_FALSE(commit.ok());
  EXPECT_THAT(commit.message(), HasSubstr("disk I/O error"));
  EXPECT_GE(FaultVfs::Counters("fsync.db").fsync_errors, 1);
  EXPECT_EQ(CountFresh(path), 2);
  EXPECT_EQ(IntegrityFresh(path), "ok");

  FaultVfs::Clear("fsync.db");
  ASSERT_TRUE(InsertRows(db.get(), 2).ok());
  EXPECT_EQ(CountFresh(path), 4);
  EXPECT_EQ(IntegrityFresh(path), "ok");
}

TEST_F(FaultVfsTest, FaultsOnOneDatabaseDoNotTouchAnother) {
  auto a = Open(Path("a.db"));
  auto b = Open(Path("b.db"));
  auto prefix = Open(Path("xa.db"));
  auto longer = Open(Path("a.db2"));
  ASSERT_TRUE(std::filesystem::create_directory(Path("other")));
  auto same_name = Open(Path("other/a.db"));
  ASSERT_TRUE(a && b && prefix && longer && same_name);

  Fault fault = Fault::DiskFull();
  fault.Merge(Fault::IoError());
  ASSERT_TRUE(FaultVfs::Set("a.db", fault).ok());
  EXPECT_FALSE(InsertRows(a.get(), 1).ok());
  EXPECT_FALSE(Database::Open(Path("a.db")).ok());  // reads fail
  EXPECT_TRUE(InsertRows(b.get(), 1).ok());
  EXPECT_TRUE(InsertRows(prefix.get(), 1).ok());
  EXPECT_TRUE(InsertRows(longer.get(), 1).ok());
  EXPECT_EQ(CountFresh(Path("b.db")), 1);
  // Faults follow the basename, in any directory.
  EXPECT_FALSE(InsertRows(same_name.get(), 1).ok());
  EXPECT_EQ(FaultVfs::Counters("b.db").total(), 0);
  EXPECT_EQ(FaultVfs::Counters("xa.db").total(), 0);
  EXPECT_EQ(FaultVfs::Counters("a.db2").total(), 0);
  EXPECT_GE(FaultVfs::Counters("a.db").total(), 2);
  EXPECT_EQ(FaultVfs::Counters().total(), FaultVfs::Counters("a.db").total());

  FaultVfs::ClearAll();
  EXPECT_TRUE(InsertRows(a.get(), 1).ok());
  EXPECT_EQ(CountFresh(Path("a.db")), 1);
  EXPECT_EQ(IntegrityFresh(Path("a.db")), "ok");
}

TEST_F(FaultVfsTest, SetRejectsNamesThatAreNotADatabaseBasename) {
  for (const char* name : {"", "dir/state.db", "state.db-wal",
                           "state.db-journal", "state.db-shm"}) {
    EXPECT_EQ(FaultVfs::Set(name, Fault::DiskFull()).code(),
              absl::StatusCode::kInvalidArgument)
        << name;
  }
}

TEST_F(FaultVfsTest, ManyThreadsWriteWhileFaultsChangeOnAnotherDatabase) {
  const std::string shared = Path("threads.db");
  ASSERT_NE(Open(shared), nullptr);
  ASSERT_NE(Open(Path("toggled.db")), nullptr);
  constexpr int kWriters = 4;
  constexpr int kRowsEach = 50;
  constexpr int kRounds = 25;

  std::atomic<int> writer_errors{0};
  std::atomic<int> unexpected{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < kWriters; ++w) {
    threads.emplace_back([&] {
      auto db = Database::Open(shared);
      if (!db.ok()) {
        ++writer_errors;
        return;
      }
      for (int i = 0; i < kRowsEach; ++i) {
        if (!InsertRows(db->get(), 1).ok()) ++writer_errors;
        if (!(*db)->QueryInt("SELECT COUNT(*) FROM t").ok()) ++writer_errors;
      }
    });
  }
  threads.emplace_back([&] {
    auto db = Database::Open(Path("toggled.db"));
    if (!db.ok()) {
      ++unexpected;
      return;
    }
    for (int round = 0; round < kRounds; ++round) {
      Fault fault = round % 2 == 0 ? Fault::DiskFull() : Fault::WriteError();
      if (!FaultVfs::Set("toggled.db", fault).ok()) ++unexpected;
      if (InsertRows(db->get(), 1).ok()) ++unexpected;
      FaultVfs::Clear("toggled.db");
      if (!InsertRows(db->get(), 1).ok()) ++unexpected;
    }
  });
  for (std::thread& thread : threads) thread.join();

  EXPECT_EQ(writer_errors.load(), 0);
  EXPECT_EQ(unexpected.load(), 0);
  EXPECT_EQ(CountFresh(shared), kWriters * kRowsEach);
  EXPECT_EQ(CountFresh(Path("toggled.db")), kRounds);
  EXPECT_EQ(IntegrityFresh(shared), "ok");
  EXPECT_EQ(IntegrityFresh(Path("toggled.db")), "ok");
  EXPECT_EQ(FaultVfs::Counters("threads.db").total(), 0);
  EXPECT_GE(FaultVfs::Counters("toggled.db").total(), kRounds);
}

TEST(FaultControlParseTest, ReadsFaultsCommentsAndBlankLines) {
  auto faults = ParseFaultControl(
      "# faults\n"
      "\n"
      "state.db full-after 65536   # budget\n"
      "warehouse.db ioerr-write\r\n"
      "warehouse.db ioerr-read ioerr-fsync\n"
      "other.db full full-after 10\n"
      "io.db\tioerr\n");
  ASSERT_TRUE(faults.ok()) << faults.status();
  ASSERT_EQ(faults->size(), 4u);
  EXPECT_EQ(faults->at("state.db"), Fault::DiskFullAfter(65536));
  Fault warehouse = Fault::WriteError();
  warehouse.read_error = true;
  warehouse.fsync_error = true;
  EXPECT_EQ(faults->at("warehouse.db"), warehouse);
  EXPECT_EQ(faults->at("other.db"), Fault::DiskFull());
  EXPECT_EQ(faults->at("io.db"), Fault::IoError());

  auto empty = ParseFaultControl("");
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
}

TEST(FaultControlParseTest, RejectsWhatItDoesNotUnderstand) {
  struct Case {
    const char* text;
    const char* error;
  };
  for (const Case& c : std::vector<Case>{
           {"state.db\n", "line 1: no fault for state.db"},
           {"\nstate.db explode\n", "line 2: unknown fault \"explode\""},
           {"state.db full-after\n", "line 1: full-after needs"},
           {"state.db full-after -5\n", "line 1: full-after needs"},
           {"state.db full-after lots\n", "line 1: full-after needs"},
           {"state.db-wal full\n", "line 1: \"state.db-wal\" names a -wal"},
           {"/data/state.db full\n", "line 1: \"/data/state.db\" is a path"},
       }) {
    auto faults = ParseFaultControl(c.text);
    ASSERT_FALSE(faults.ok()) << c.text;
    EXPECT_EQ(faults.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(faults.status().message(), HasSubstr(c.error)) << c.text;
  }
}

TEST_F(FaultVfsTest, ControlFileFromTheEnvironmentIsFollowed) {
  control_ = Path("faults");
  WriteControl("");
  ASSERT_EQ(setenv(kFaultControlEnv, control_.c_str(), 1), 0);
  ASSERT_TRUE(InstallFaultVfsFromEnvironment().ok());
  EXPECT_TRUE(FaultVfs::ControlFileStatus().ok());

  const std::string path = Path("ctl.db");
  auto db = Open(path);
  ASSERT_NE(db, nullptr);
  ASSERT_TRUE(InsertRows(db.get(), 1).ok());

  WriteControl("ctl.db full\n");
  absl::Status full = InsertRows(db.get(), 1);
  ASSERT_FALSE(full.ok());
  EXPECT_THAT(full.message(), HasSubstr("full"));
  EXPECT_EQ(FaultVfs::Get("ctl.db"), Fault::DiskFull());

  WriteControl("ctl.db ioerr-write\n");
  absl::Status ioerr = InsertRows(db.get(), 1);
  ASSERT_FALSE(ioerr.ok());
  EXPECT_THAT(ioerr.message(), HasSubstr("disk I/O error"));

  // No faults: the file says nothing.
  WriteControl("# all good\n\n");
  ASSERT_TRUE(InsertRows(db.get(), 1).ok());

  WriteControl("ctl.db full-after 65536\n");
  ASSERT_TRUE(InsertRows(db.get(), 1).ok());
  absl::Status big = db->Exec(kBigInsert);
  ASSERT_FALSE(big.ok());
  EXPECT_THAT(big.message(), HasSubstr("full"));

  // A file that does not parse changes nothing and is reported.
  WriteControl("ctl.db explode\n");
  EXPECT_FALSE(InsertRows(db.get(), 1).ok());
  absl::Status bad = FaultVfs::ControlFileStatus();
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.message(),
              HasSubstr(absl::StrCat(control_, ":1: unknown fault")));

  auto reader = Database::Open(path);
  ASSERT_TRUE(reader.ok());
  WriteControl("ctl.db ioerr-read\n");
  EXPECT_FALSE((*reader)->QueryInt("SELECT COUNT(*) FROM t").ok());
  EXPECT_TRUE(FaultVfs::ControlFileStatus().ok());

  // Removing the file clears all faults.
  ASSERT_EQ(std::remove(control_.c_str()), 0);
  ASSERT_TRUE(InsertRows(db.get(), 1).ok());
  EXPECT_EQ(Count(reader->get()), 4);

  // In-place rewrites (same inode, same size) are seen too.
  ASSERT_TRUE(db->Exec("PRAGMA synchronous=FULL").ok());
  RewriteControl("ctl.db ioerr-write\n");
  EXPECT_FALSE(InsertRows(db.get(), 1).ok());
  const int64_t fsync_before = FaultVfs::Counters("ctl.db").fsync_errors;
  RewriteControl("ctl.db ioerr-fsync\n");
  EXPECT_FALSE(InsertRows(db.get(), 1).ok());
  EXPECT_GT(FaultVfs::Counters("ctl.db").fsync_errors, fsync_before);

  RewriteControl("");
  ASSERT_TRUE(InsertRows(db.get(), 1).ok());
  EXPECT_EQ(CountFresh(path), 5);
  EXPECT_EQ(IntegrityFresh(path), "ok");
}

TEST_F(FaultVfsTest, ABadControlFileFailsTheInstall) {
  control_ = Path("faults");
  WriteControl("state.db\n");
  ASSERT_EQ(setenv(kFaultControlEnv, control_.c_str(), 1), 0);
  absl::Status status = InstallFaultVfsFromEnvironment();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(),
              HasSubstr(absl::StrCat(control_, ":1: no fault")));
}

// Both run in a fresh process (the "threadsafe" death test style re-executes
// the binary), where no other test has installed the shim.
TEST(FaultVfsDeathTest, WithoutTheVariableNothingIsInstalled) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        unsetenv(kFaultControlEnv);
        const bool ok =
            InstallFaultVfsFromEnvironment().ok() && !FaultVfs::Installed() &&
            sqlite3_vfs_find(FaultVfs::kName) == nullptr &&
            std::strcmp(sqlite3_vfs_find(nullptr)->zName, FaultVfs::kName) != 0;
        std::fprintf(stderr, ok ? "nothing installed\n" : "installed\n");
        std::_Exit(ok ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "nothing installed");
}

TEST(FaultVfsDeathTest, WithTheVariableTheShimIsTheDefault) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        // The file need not exist: no faults until it does.
        setenv(kFaultControlEnv, "/nonexistent/backfill-faults", 1);
        const bool ok =
            InstallFaultVfsFromEnvironment().ok() && FaultVfs::Installed() &&
            std::strcmp(sqlite3_vfs_find(nullptr)->zName, FaultVfs::kName) == 0;
        std::fprintf(stderr, ok ? "shim is the default\n" : "no shim\n");
        std::_Exit(ok ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "shim is the default");
}

}  // namespace
}  // namespace storage_fault_vfs_test
}  // namespace backfill::sqlite
