// The SQLite state store's integrity: the check at open that refuses a
// damaged file without writing it, the records' checksums that see damage
// SQLite's own checks do not (and that an upgraded file gets), and the
// refusal of a file the process may not write.

#include <grp.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/sqlite/sqlite_engine.h"
#include "storage/sqlite/state/sqlite_state_store.h"
#include "storage/sqlite/state/state_record_checksums.h"
#include "tests/testing/sqlite_state_file.h"

namespace backfill {
namespace storage_state_store_integrity_test {
namespace {

using ::testing::HasSubstr;

using StateStoreTest = testing::SqliteStateFileTest;

TEST_F(StateStoreTest, RefusesADamagedFileWithoutWritingIt) {
  for (int i = 0; i < 200; ++i) {
    ASSERT_TRUE(store_->CreateJob(MakeJob(), T(i)).ok());
  }
  store_.reset();  // the last connection checkpoints and removes the WAL
  ASSERT_FALSE(std::filesystem::exists(path_ + "-wal"));
  const int page_size = std::stoi(QueryText("PRAGMA page_size"));
  const int pages = std::stoi(QueryText("PRAGMA page_count"));
  ASSERT_GT(pages, 8);
  {
    // Garbage over the middle of the file (b-tree pages of the tables).
    std::fstream f(path_, std::ios::in | std::ios::out | std::ios::binary);
    const std::string garbage(static_cast<size_t>(page_size) * 2, '\xA5');
    f.seekp(static_cast<std::streamoff>(page_size) * (pages / 2));
    f.write(garbage.data(), static_cast<std::streamsize>(garbage.size()));
  }
  const std::string damaged = ReadFile(path_);

  auto store = SqliteStateStore::Open(path_);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kDataLoss)
      << store.status();
  EXPECT_THAT(store.status().message(), HasSubstr("is damaged"));
  EXPECT_THAT(store.status().message(), HasSubstr("Restore it from a backup"));
  EXPECT_EQ(ReadFile(path_), damaged);
  EXPECT_FALSE(std::filesystem::exists(path_ + "-wal") &&
               std::filesystem::file_size(path_ + "-wal") > 0);
}

// The byte offsets at which `needle` occurs in `hay`.
std::vector<size_t> Occurrences(const std::string& hay,
                                const std::string& needle) {
  std::vector<size_t> at;
  for (size_t i = hay.find(needle); i != std::string::npos;
       i = hay.find(needle, i + 1)) {
    at.push_back(i);
  }
  return at;
}

TEST_F(StateStoreTest, EveryColumnOfTheCheckedTablesIsInTheChecksum) {
  for (const state_records::Table* t : state_records::AllTables()) {
    SCOPED_TRACE(t->name);
    std::string expected = absl::StrJoin(t->columns, ",");
    if (t->name == "lineage") expected = "id," + expected;  // rowid alias
    EXPECT_EQ(QueryText(absl::StrCat(
                  "SELECT group_concat(name, ',') FROM (SELECT name FROM "
                  "pragma_table_info('",
                  t->name, "') WHERE name <> 'checksum' ORDER BY cid)")),
              expected);
  }
}

// Damage that PRAGMA integrity_check cannot see: the last overflow page of
// a task's record zeroed (its input rows, the job's cost, read as 0), and
// one byte of a job's reason changed. Every read of the record is
// DATA_LOSS naming it, and the next Open refuses the file, unchanged.
TEST_F(StateStoreTest, DamageIntegrityCheckCannotSeeFailsTheChecksums) {
  ASSERT_TRUE(store_->CreateJob(MakeJob(), T(0)).ok());
  Job marked = MakeJob();
  marked.request.reason = "reason-MARKER-7f3a";
  ASSERT_TRUE(store_->CreateJob(marked, T(1)).ok());
  PartitionTask t = (*store_->ListTasks("bf-1"))[0];
  t.state = TaskState::kStaged;
  t.rows_written = 7;
  // A fingerprint long enough to spill over several overflow pages, with a
  // mark at its end: in the chain's last page, with the values after it.
  t.inputs = {{"orders", "2025-01-01",
               std::string(9000, 'f') + "TAIL-MARKER-c41d", 150}};
  ASSERT_TRUE(store_->UpdateTask(t).ok());
  ASSERT_EQ(store_->GetJob("bf-1")->actual_cost, 150);

  // Everything in the file itself, then the damage behind the store's back.
  ASSERT_EQ(QueryText("PRAGMA wal_checkpoint(TRUNCATE)"), "0");
  const int page_size = std::stoi(QueryText("PRAGMA page_size"));
  std::string bytes = ReadFile(path_);
  const std::vector<size_t> tails = Occurrences(bytes, "TAIL-MARKER-c41d");
  const std::vector<size_t> reasons = Occurrences(bytes, "reason-MARKER-7f3a");
  ASSERT_EQ(tails.size(), 1u);
  ASSERT_FALSE(reasons.empty());
  {
    std::fstream f(path_, std::ios::in | std::ios::out | std::ios::binary);
    const size_t page = tails[0] / page_size * page_size;
    // The last page of the chain: its pointer to a next page is 0 already.
    ASSERT_EQ(bytes.substr(page, 4), std::string(4, '\0'));
    const std::string zeros(static_cast<size_t>(page_size), '\0');
    f.seekp(static_cast<std::streamoff>(page));
    f.write(zeros.data(), static_cast<std::streamsize>(zeros.size()));
    for (size_t at : reasons) {
      f.seekp(static_cast<std::streamoff>(at + 7));  // 'M' -> 'N'
      f.put('N');
    }
  }
  // SQLite's own checks see nothing.
  EXPECT_EQ(QueryText("PRAGMA integrity_check"), "ok");
  EXPECT_EQ(QueryText("PRAGMA quick_check"), "ok");
  // Another connection's write makes the store read the file again.
  Exec("INSERT INTO meta (key, value) VALUES ('touched', '1')");

  auto job = store_->GetJob("bf-1");
  EXPECT_EQ(job.status().code(), absl::StatusCode::kDataLoss)
      << (job.ok() ? absl::StrCat("read as OK, actual cost ", job->actual_cost)
                   : job.status().ToString());
  EXPECT_THAT(job.status().message(), HasSubstr("the record of job bf-1's task "
                                                "daily_revenue/2025-01-01 in " +
                                                path_ + " fails its checksum"));
  EXPECT_EQ(store_->ListTasks("bf-1").status().code(),
            absl::StatusCode::kDataLoss);
  TaskQuery page;
  page.job_id = "bf-1";
  EXPECT_EQ(store_->ListTaskPage(page).status().code(),
            absl::StatusCode::kDataLoss);
  auto other = store_->GetJob("bf-2");
  EXPECT_EQ(other.status().code(), absl::StatusCode::kDataLoss)
      << (other.ok() ? other->request.reason : other.status().ToString());
  EXPECT_THAT(
      other.status().message(),
      HasSubstr("job bf-2's record in " + path_ + " fails its checksum"));
  EXPECT_EQ(store_->ListJobs({}).status().code(), absl::StatusCode::kDataLoss);
  // A write to the damaged job changes nothing.
  EXPECT_EQ(store_
                ->TransitionJob("bf-2", JobState::kQueued, JobState::kRunning,
                                "start", T(2))
                .code(),
            absl::StatusCode::kDataLoss);

  store_.reset();
  const std::string damaged = ReadFile(path_);
  auto reopened = SqliteStateStore::Open(path_);
  ASSERT_FALSE(reopened.ok());
  EXPECT_EQ(reopened.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(reopened.status().message(), HasSubstr("is damaged (job bf-2's "
                                                     "record fails its "
                                                     "checksum"));
  EXPECT_THAT(reopened.status().message(),
              HasSubstr("Restore it from a backup"));
  EXPECT_EQ(ReadFile(path_), damaged);
}

TEST_F(StateStoreTest, AnUpgradedFileGetsItsChecksums) {
  // The file as the schema before the checksums left it: their columns
  // gone, the version one back.
  ASSERT_TRUE(store_->CreateJob(MakeJob(), T(0)).ok());
  PartitionTask t = (*store_->ListTasks("bf-1"))[0];
  t.state = TaskState::kPublished;
  t.inputs = {{"orders", "2025-01-01", "fp", 40}};
  ASSERT_TRUE(store_->UpdateTask(t).ok());
  store_.reset();
  for (const state_records::Table* table : state_records::AllTables()) {
    Exec(absl::StrCat("ALTER TABLE ", table->name, " DROP COLUMN checksum"));
  }
  // Back to version 15: before the checksums (16) and the columns of 17.
  Exec("ALTER TABLE jobs DROP COLUMN override_frozen");
  Exec("ALTER TABLE jobs DROP COLUMN approval_hold");
  // And the tables of 18.
  Exec("DROP TABLE policy_audit_events");
  Exec("DROP TABLE replay_policy_pauses");
  Exec("PRAGMA user_version = 15");
  Reopen();
  EXPECT_EQ(QueryText("PRAGMA user_version"),
            absl::StrCat(SqliteStateStore::SchemaVersion()));
  auto job = store_->GetJob("bf-1");
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->actual_cost, 40);
  // Each record's checksum is its row hash, as reads and the start check
  // expect: none fails.
  for (const state_records::Table* table : state_records::AllTables()) {
    EXPECT_EQ(QueryText(absl::StrCat("SELECT COUNT(*) FROM ", table->name,
                                     " WHERE checksum = 0 OR ",
                                     state_records::DamagedSql(*table))),
              "0")
        << table->name;
  }
  Reopen();
}

// Runs `open` in a child process as a user that is not root (uid and gid
// 65534 when this process is root, which may write any file; itself
// otherwise) and returns "<code>: <message>" of its status.
std::string OpenAsNonRoot(const std::string& dir,
                          const std::function<absl::Status()>& open) {
  int fds[2];
  if (pipe(fds) != 0) return "pipe failed";
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    if (geteuid() == 0 && (setgroups(0, nullptr) != 0 || setgid(65534) != 0 ||
                           setuid(65534) != 0)) {
      _exit(2);
    }
    const absl::Status s = open();
    const std::string text =
        absl::StrCat(absl::StatusCodeToString(s.code()), ": ", s.message());
    (void)!write(fds[1], text.data(), text.size());
    close(fds[1]);
    _exit(0);
  }
  close(fds[1]);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = read(fds[0], buf, sizeof(buf))) > 0;) out.append(buf, n);
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::StrCat("child failed (status ", status, ")");
  }
  (void)dir;
  return out;
}

// Gives `path` to the user OpenAsNonRoot runs as, with `mode`.
void Give(const std::string& path, mode_t mode) {
  if (geteuid() == 0) {
    ASSERT_EQ(chown(path.c_str(), 65534, 65534), 0) << path;
  }
  ASSERT_EQ(chmod(path.c_str(), mode), 0) << path;
}

TEST_F(StateStoreTest, AFileTheUserCannotWriteIsRefusedAtOpen) {
  ASSERT_TRUE(store_->CreateJob(MakeJob(), T(0)).ok());
  store_.reset();
  auto warehouse = SqliteEngine::Open(dir_ + "/warehouse.db", 1);
  ASSERT_TRUE(warehouse.ok()) << warehouse.status();
  warehouse->reset();
  const std::string wal = path_ + "-wal";
  const std::string shm = path_ + "-shm";
  auto open_store = [&] { return SqliteStateStore::Open(path_).status(); };
  auto open_warehouse = [&] {
    return SqliteEngine::Open(dir_ + "/warehouse.db", 1, false).status();
  };
  ASSERT_NO_FATAL_FAILURE(Give(dir_, 0755));
  ASSERT_NO_FATAL_FAILURE(Give(path_, 0644));
  ASSERT_NO_FATAL_FAILURE(Give(dir_ + "/warehouse.db", 0644));
  // The user can open both as they are (so what follows is the mode's
  // doing).
  EXPECT_EQ(OpenAsNonRoot(dir_, open_store), "OK: ");
  EXPECT_EQ(OpenAsNonRoot(dir_, open_warehouse), "OK: ");
  for (const std::string& leftover : {wal, shm}) {
    if (std::filesystem::exists(leftover)) std::filesystem::remove(leftover);
  }

  // Each file read-only (0444).
  ASSERT_NO_FATAL_FAILURE(Give(path_, 0444));
  std::string refused = OpenAsNonRoot(dir_, open_store);
  EXPECT_THAT(refused, HasSubstr("FAILED_PRECONDITION: "));
  EXPECT_THAT(refused, HasSubstr(path_ + " is not writable by this process"));
  EXPECT_THAT(refused, HasSubstr("mode 0444"));
  EXPECT_THAT(refused, HasSubstr("give that user write permission on it"));
  ASSERT_NO_FATAL_FAILURE(Give(path_, 0644));
  ASSERT_NO_FATAL_FAILURE(Give(dir_ + "/warehouse.db", 0444));
  refused = OpenAsNonRoot(dir_, open_warehouse);
  EXPECT_THAT(refused, HasSubstr("FAILED_PRECONDITION: "));
  EXPECT_THAT(refused, HasSubstr(dir_ + "/warehouse.db is not writable"));
  ASSERT_NO_FATAL_FAILURE(Give(dir_ + "/warehouse.db", 0644));

  // A -wal or -shm file left read-only beside the database.
  for (const std::string& side : {wal, shm}) {
    { std::ofstream touch(side); }
    ASSERT_NO_FATAL_FAILURE(Give(side, 0444));
    refused = OpenAsNonRoot(dir_, open_store);
    EXPECT_THAT(refused, HasSubstr("FAILED_PRECONDITION: "));
    EXPECT_THAT(refused, HasSubstr(side + " is not writable")) << side;
    std::filesystem::remove(side);
  }

  // The directory, in which SQLite creates the -wal and -shm files.
  ASSERT_NO_FATAL_FAILURE(Give(dir_, 0555));
  refused = OpenAsNonRoot(dir_, open_store);
  EXPECT_THAT(refused, HasSubstr("FAILED_PRECONDITION: "));
  EXPECT_THAT(refused, HasSubstr("the directory " + dir_));
  EXPECT_THAT(refused, HasSubstr("-wal and -shm"));
  ASSERT_NO_FATAL_FAILURE(Give(dir_, 0755));
  EXPECT_FALSE(std::filesystem::exists(wal));
}

}  // namespace
}  // namespace storage_state_store_integrity_test
}  // namespace backfill
