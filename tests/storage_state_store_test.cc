// Tests of what only the SQLite state store has: the file survives a
// reopen, schema migrations and the refusal of a newer schema, the integrity
// check that refuses a damaged file, the records' checksums that see damage
// the integrity check does not, the refusal of a file the process may not
// write, WAL mode and the encoding of lists in columns. The behaviour every
// StateStore shares is tested against this store and the in-memory one in
// storage_state_store_contract_test.cc.

#include <grp.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/sqlite/sqlite_db.h"
#include "storage/sqlite/sqlite_engine.h"
#include "storage/sqlite/sqlite_fingerprint_function.h"
#include "storage/sqlite_state_store.h"
#include "storage/state_record_checksums.h"

namespace backfill {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

absl::Time T(int seconds) {
  return absl::FromUnixSeconds(1700000000 + seconds);
}

Job MakeJob(const std::string& key = "") {
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

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// "STATE=n,..." over the states with tasks, in name order.
std::string CountsText(const std::array<int64_t, kTaskStateCount>& counts) {
  std::vector<std::string> parts;
  for (int i = 0; i < kTaskStateCount; ++i) {
    if (counts[i] == 0) continue;
    parts.push_back(
        absl::StrCat(TaskStateName(static_cast<TaskState>(i)), "=", counts[i]));
  }
  std::sort(parts.begin(), parts.end());
  return absl::StrJoin(parts, ",");
}

class StateStoreTest : public ::testing::Test {
 protected:
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

TEST_F(StateStoreTest, ReopenKeepsDataIdentityAndContinuesIds) {
  ASSERT_TRUE(store_->CreateJob(MakeJob("k"), T(0)).ok());
  ASSERT_TRUE(store_->ReserveJobNumbers(4).ok());
  auto info = store_->Info();
  ASSERT_TRUE(info.ok()) << info.status();
  Reopen();
  auto job = store_->GetJob("bf-1");
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->idempotency_key, "k");
  EXPECT_EQ(job->create_time, T(0));
  auto reopened = store_->Info();
  EXPECT_EQ(reopened->store_id, info->store_id);
  EXPECT_EQ(reopened->created_at, info->created_at);
  EXPECT_EQ(reopened->last_job_number, 4);
  EXPECT_FALSE(store_->CreateJob(MakeJob("k"), T(1))->created);
  EXPECT_EQ(store_->CreateJob(MakeJob(), T(2))->job.id, "bf-5");
}

TEST_F(StateStoreTest, KeepsAJobsEntityKeysInOrderOnItsTargetOnly) {
  Job job = MakeJob("keyed");
  job.request.keys = {"c'1", "c2;--", "\xc3\xa9t\xc3\xa9"};
  job.plan.datasets[0].keys = job.request.keys;
  DatasetPlan dependent;
  dependent.dataset = "monthly_revenue";
  dependent.partitions = {"2025-01"};
  dependent.reason = "downstream of daily_revenue";
  job.plan.datasets.push_back(dependent);
  auto created = store_->CreateJob(job, T(0));
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_THAT(created->job.request.keys,
              ElementsAre("c'1", "c2;--", "\xc3\xa9t\xc3\xa9"));
  auto other = store_->CreateJob(MakeJob("plain"), T(1));
  ASSERT_TRUE(other.ok()) << other.status();
  Reopen();
  auto read = store_->GetJob(created->job.id);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_THAT(read->request.keys,
              ElementsAre("c'1", "c2;--", "\xc3\xa9t\xc3\xa9"));
  ASSERT_EQ(read->plan.datasets.size(), 2u);
  EXPECT_EQ(read->plan.datasets[0].keys, read->request.keys);
  EXPECT_TRUE(read->plan.datasets[1].keys.empty());
  // Independently: the rows as stored, in order.
  EXPECT_EQ(QueryText(absl::StrCat(
                "SELECT group_concat(key, '|') FROM (SELECT key FROM job_keys "
                "WHERE job_id = '",
                created->job.id, "' ORDER BY ordinal)")),
            "c'1|c2;--|\xc3\xa9t\xc3\xa9");
  auto plain = store_->GetJob(other->job.id);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_TRUE(plain->request.keys.empty());
  EXPECT_TRUE(plain->plan.datasets[0].keys.empty());
  auto listed = store_->ListJobs({});
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), 2u);
}

TEST_F(StateStoreTest, RefusesANewerSchema) {
  store_.reset();
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db,
                         absl::StrCat("PRAGMA user_version = ",
                                      SqliteStateStore::SchemaVersion() + 1)
                             .c_str(),
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  auto store = SqliteStateStore::Open(path_);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(store.status().message(), HasSubstr("newer"));
}

TEST_F(StateStoreTest, MigratesAFileOfTheSecondVersion) {
  // A state.db as version 2 wrote it: no store identity, no scheduling
  // options, no check results, approvals, diffs or rollbacks.
  store_.reset();
  std::filesystem::remove(path_);
  Exec(R"sql(
    CREATE TABLE counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
    INSERT INTO counters (name, value) VALUES ('job', 3);
    CREATE TABLE jobs (
      id TEXT PRIMARY KEY, seq INTEGER NOT NULL UNIQUE, state TEXT NOT NULL,
      dataset TEXT NOT NULL, range_from TEXT NOT NULL DEFAULT '',
      range_to TEXT NOT NULL DEFAULT '', partitions TEXT NOT NULL DEFAULT '',
      reason TEXT NOT NULL DEFAULT '', ticket TEXT NOT NULL DEFAULT '',
      requested_by TEXT NOT NULL DEFAULT '',
      exclude_downstream INTEGER NOT NULL DEFAULT 0,
      idempotency_key TEXT UNIQUE,
      request_fingerprint TEXT NOT NULL DEFAULT '',
      message TEXT NOT NULL DEFAULT '', create_time INTEGER,
      update_time INTEGER, start_time INTEGER, end_time INTEGER,
      cost_backfill REAL NOT NULL DEFAULT 0,
      cost_full_reload REAL NOT NULL DEFAULT 0);
    CREATE INDEX jobs_by_state ON jobs (state);
    CREATE TABLE job_datasets (
      job_id TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
      ordinal INTEGER NOT NULL, dataset TEXT NOT NULL,
      reason TEXT NOT NULL DEFAULT '', cost_backfill REAL NOT NULL DEFAULT 0,
      cost_full_reload REAL NOT NULL DEFAULT 0,
      transform_version TEXT NOT NULL DEFAULT '',
      PRIMARY KEY (job_id, ordinal));
    CREATE TABLE tasks (
      job_id TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
      dataset TEXT NOT NULL, "partition" TEXT NOT NULL,
      ordinal INTEGER NOT NULL, state TEXT NOT NULL,
      attempts INTEGER NOT NULL DEFAULT 0, last_error TEXT NOT NULL DEFAULT '',
      rows_written INTEGER NOT NULL DEFAULT 0,
      output_fingerprint TEXT NOT NULL DEFAULT '',
      inputs TEXT NOT NULL DEFAULT '', input_rows INTEGER NOT NULL DEFAULT 0,
      duration_seconds REAL NOT NULL DEFAULT 0, update_time INTEGER,
      PRIMARY KEY (job_id, dataset, "partition")) WITHOUT ROWID;
    CREATE INDEX tasks_by_job_ordinal ON tasks (job_id, ordinal);
    CREATE INDEX tasks_by_state ON tasks (state);
    CREATE TABLE lineage (
      id INTEGER PRIMARY KEY, dataset TEXT NOT NULL,
      "partition" TEXT NOT NULL, job_id TEXT NOT NULL REFERENCES jobs (id),
      transform_version TEXT NOT NULL DEFAULT '',
      inputs TEXT NOT NULL DEFAULT '',
      output_fingerprint TEXT NOT NULL DEFAULT '',
      row_count INTEGER NOT NULL DEFAULT 0, reason TEXT NOT NULL DEFAULT '',
      ticket TEXT NOT NULL DEFAULT '', requested_by TEXT NOT NULL DEFAULT '',
      published_at INTEGER);
    CREATE INDEX lineage_by_partition
      ON lineage (dataset, "partition", published_at);
    CREATE UNIQUE INDEX lineage_once_per_job
      ON lineage (job_id, dataset, "partition");
    CREATE TABLE audit_events (
      seq INTEGER PRIMARY KEY,
      job_id TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
      from_state TEXT NOT NULL, to_state TEXT NOT NULL,
      message TEXT NOT NULL DEFAULT '', at INTEGER);
    CREATE INDEX audit_events_by_job ON audit_events (job_id, seq);
    INSERT INTO jobs (id, seq, state, dataset, partitions, message,
                      create_time, update_time)
      VALUES ('bf-3', 3, 'SUCCEEDED', 'daily_revenue', '3:a:b', 'done',
              1700000000000000, 1700000001000000);
    INSERT INTO job_datasets (job_id, ordinal, dataset, transform_version)
      VALUES ('bf-3', 0, 'daily_revenue', 'v7');
    INSERT INTO tasks (job_id, dataset, "partition", ordinal, state,
                       rows_written, inputs, input_rows)
      VALUES ('bf-3', 'daily_revenue', '2025-01-01', 0, 'PUBLISHED', 5,
              '6:orders10:2025-01-012:fp2:40', 40);
    INSERT INTO lineage (dataset, "partition", job_id, transform_version,
                         output_fingerprint, row_count, reason, published_at)
      VALUES ('daily_revenue', '2025-01-01', 'bf-3', 'v7', 'fp-out', 5,
              'refunds', 1700000001000000);
    PRAGMA user_version = 2;
  )sql");

  Reopen();
  EXPECT_EQ(QueryText("PRAGMA user_version"),
            absl::StrCat(SqliteStateStore::SchemaVersion()));
  auto info = store_->Info();
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->store_id.size(), 32u);
  EXPECT_EQ(info->last_job_number, 3);
  auto job = store_->GetJob("bf-3");
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->state, JobState::kSucceeded);
  EXPECT_THAT(job->request.partitions, ElementsAre("a:b"));
  EXPECT_EQ(job->request.priority, 0);
  EXPECT_EQ(job->request.max_parallel, 0);
  EXPECT_EQ(job->plan.datasets[0].transform_version, "v7");
  EXPECT_EQ(job->counts.published, 1);
  // The counts by state are those of the tasks the file held.
  auto stats = store_->Stats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(CountsText(stats->tasks_by_state), "PUBLISHED=1");
  EXPECT_EQ(job->actual_cost, 40);
  EXPECT_EQ(job->rows_written, 5);
  EXPECT_EQ(job->create_time, T(0));
  EXPECT_EQ(job->start_time, absl::InfinitePast());
  // Lineage written before rollbacks and approvals existed reads as a
  // publish without an approval; the job has no check results yet.
  auto lineage = store_->GetLineage("daily_revenue", "2025-01-01");
  ASSERT_TRUE(lineage.ok()) << lineage.status();
  ASSERT_EQ(lineage->size(), 1u);
  EXPECT_EQ((*lineage)[0].job_id, "bf-3");
  EXPECT_EQ((*lineage)[0].action, LineageAction::kPublish);
  EXPECT_FALSE((*lineage)[0].approval.has_value());
  EXPECT_EQ((*lineage)[0].row_count, 5);
  auto checks = store_->ListCheckResults("bf-3");
  ASSERT_TRUE(checks.ok()) << checks.status();
  EXPECT_TRUE(checks->empty());
  // The migrated file takes new jobs with the new columns.
  Job next = MakeJob();
  next.request.priority = 3;
  auto created = store_->CreateJob(next, T(5));
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ(created->job.id, "bf-4");
  EXPECT_EQ(created->job.request.priority, 3);
  // Migrated once: the identity stays on the next open.
  Reopen();
  EXPECT_EQ(store_->Info()->store_id, info->store_id);
}

// What a BASIC reader of a job is shown, as text: every field that view
// fills.
std::string ReaderText(const Job& j) {
  std::string out = absl::StrCat(
      j.id, " ", JobStateName(j.state), " msg=", j.message,
      " counts=", j.counts.total, "/", j.counts.pending, "/", j.counts.running,
      "/", j.counts.staged, "/", j.counts.published, "/", j.counts.failed, "/",
      j.counts.cancelled, "/", j.counts.unchanged, "/", j.counts.skipped,
      " cost=", j.actual_cost, " rows=", j.rows_written,
      " timed=", j.timed_partitions, "/", j.timed_seconds,
      " times=", absl::FormatTime(j.create_time), ",",
      absl::FormatTime(j.update_time), ",", absl::FormatTime(j.start_time), ",",
      absl::FormatTime(j.end_time),
      " approval=", j.approval ? j.approval->approved_by : "-",
      " rollback=", j.rollback.has_value(), " checks=", j.checks.size(),
      " consumers=", j.consumers.size(), " diff=", j.diff.size());
  for (const DatasetPlan& dp : j.plan.datasets) {
    absl::StrAppend(&out, " [", dp.dataset, " ", dp.partition_count, " ",
                    dp.actual_cost, " partitions=", dp.partitions.size(), "]");
  }
  return out;
}

// The counts by state a scrape reads (Stats) are kept by triggers, not
// counted: after every kind of write to tasks, in random orders, and after
// writes that are refused, they equal a plain count of the file's tasks.
// Alongside, what GetJobForReader shows a BASIC reader of every job (an
// answer the store keeps until a row changes) equals what a store opened
// afresh on the file reads, also after writes by another connection.
TEST_F(StateStoreTest, TaskCountsByStateEqualAPlainCountAfterEveryWrite) {
  const std::string kPlainCount =
      "SELECT COALESCE(group_concat(state || '=' || n, ','), '') FROM "
      "(SELECT state, COUNT(*) AS n FROM tasks GROUP BY state ORDER BY state)";
  for (uint32_t seed = 1; seed <= 4; ++seed) {
    SCOPED_TRACE(absl::StrCat("seed ", seed));
    store_.reset();
    std::filesystem::remove(path_);
    std::filesystem::remove(path_ + "-wal");
    std::filesystem::remove(path_ + "-shm");
    Reopen();
    std::mt19937 rng(seed);
    auto pick = [&rng](int n) {
      return std::uniform_int_distribution<int>(0, n - 1)(rng);
    };
    auto any_state = [&pick] { return static_cast<TaskState>(pick(8)); };
    std::vector<std::string> jobs;
    int64_t now = 0;
    for (int step = 0; step < 300; ++step) {
      const int op = jobs.empty() ? 0 : pick(8);
      const std::string job = jobs.empty() ? "" : jobs[pick(jobs.size())];
      ++now;
      switch (op) {
        case 0: {  // a new job of 1 to 6 partitions
          Job j = MakeJob();
          j.plan.datasets[0].partitions.clear();
          for (int p = 0, n = 1 + pick(6); p < n; ++p) {
            j.plan.datasets[0].partitions.push_back(
                absl::StrCat("2025-01-0", p + 1));
          }
          auto created = store_->CreateJob(j, T(now));
          ASSERT_TRUE(created.ok()) << created.status();
          jobs.push_back(created->job.id);
          break;
        }
        case 1:
        case 2: {  // a checkpoint
          auto tasks = store_->ListTasks(job);
          ASSERT_TRUE(tasks.ok()) << tasks.status();
          PartitionTask t = (*tasks)[pick(tasks->size())];
          t.state = any_state();
          t.attempts += 1;
          ASSERT_TRUE(store_->UpdateTask(t).ok());
          break;
        }
        case 3: {  // a checkpoint of a task that does not exist: refused
          PartitionTask t;
          t.job_id = job;
          t.dataset = "daily_revenue";
          t.partition = "1999-12-31";
          t.state = TaskState::kStaged;
          EXPECT_FALSE(store_->UpdateTask(t).ok());
          break;
        }
        case 4: {  // recovery or cancel: some states to another
          std::vector<TaskState> from = {any_state(), any_state()};
          ASSERT_TRUE(
              store_->UpdateTasksInState(job, from, any_state(), T(now)).ok());
          break;
        }
        case 5: {  // a retry, refused unless the job is FAILED
          if (pick(2) == 0) {
            store_
                ->TransitionJob(job, std::nullopt, JobState::kFailed, "",
                                T(now))
                .IgnoreError();
          }
          store_
              ->RetryJob(job, JobState::kFailed, JobState::kQueued, "retry",
                         T(now))
              .status()
              .IgnoreError();
          break;
        }
        case 6: {  // a publication, refused unless the job is PUBLISHING
          for (JobState s : {JobState::kRunning, JobState::kValidating,
                             JobState::kPublishing}) {
            if (pick(4) == 0) break;
            store_->TransitionJob(job, std::nullopt, s, "", T(now))
                .IgnoreError();
          }
          store_
              ->RecordPublication(job, {}, JobState::kConfirming, "published",
                                  T(now))
              .IgnoreError();
          break;
        }
        case 7: {  // another connection writes to the file
          const std::string message = absl::StrCat("'by hand ", step, "'");
          Exec(absl::StrCat("UPDATE jobs SET message = ", message, ", ",
                            state_records::ResealSql(state_records::Jobs(),
                                                     {{"message", message}}),
                            " WHERE id = '", job, "'"));
          break;
        }
      }
      auto stats = store_->Stats();
      ASSERT_TRUE(stats.ok()) << stats.status();
      ASSERT_EQ(CountsText(stats->tasks_by_state), QueryText(kPlainCount))
          << "after step " << step << " (operation " << op << ")";
      auto fresh = SqliteStateStore::Open(path_);
      ASSERT_TRUE(fresh.ok()) << fresh.status();
      for (const std::string& id : jobs) {
        auto shown = store_->GetJobForReader(id, JobView::kBasic);
        auto truth = (*fresh)->GetJobForReader(id, JobView::kBasic);
        ASSERT_TRUE(shown.ok()) << shown.status();
        ASSERT_TRUE(truth.ok()) << truth.status();
        ASSERT_EQ(ReaderText(*shown), ReaderText(*truth))
            << "after step " << step << " (operation " << op << ")";
      }
    }
    // And as the file keeps them across a reopen.
    Reopen();
    auto stats = store_->Stats();
    ASSERT_TRUE(stats.ok()) << stats.status();
    EXPECT_EQ(CountsText(stats->tasks_by_state), QueryText(kPlainCount));
    EXPECT_NE(QueryText(kPlainCount), "");
  }
}

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

TEST_F(StateStoreTest, UsesWalMode) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &stmt, nullptr),
            SQLITE_OK);
  ASSERT_EQ(sqlite3_step(stmt), SQLITE_ROW);
  EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0)),
               "wal");
  sqlite3_finalize(stmt);
  sqlite3_close(db);
}

TEST_F(StateStoreTest, ListsAreStoredLengthPrefixed) {
  ASSERT_TRUE(store_->CreateJob(MakeJob(), T(0)).ok());
  PartitionTask t = (*store_->ListTasks("bf-1"))[0];
  t.state = TaskState::kStaged;
  t.inputs = {{"orders", "2025-01-01", "f:1", 10}, {"c", "", "", 5}};
  ASSERT_TRUE(store_->UpdateTask(t).ok());
  EXPECT_EQ(QueryText("SELECT partitions FROM jobs WHERE id = 'bf-1'"),
            "3:a:b0:8:x'y\"z;--3:12:");
  EXPECT_EQ(QueryText("SELECT inputs FROM tasks WHERE job_id = 'bf-1' AND "
                      "\"partition\" = '2025-01-01'"),
            "6:orders10:2025-01-013:f:12:101:c0:0:1:5");
  EXPECT_EQ(QueryText("SELECT input_rows FROM tasks WHERE job_id = 'bf-1' "
                      "AND \"partition\" = '2025-01-01'"),
            "15");
}

TEST_F(StateStoreTest, AMalformedListReadsAsDataLoss) {
  ASSERT_TRUE(store_->CreateJob(MakeJob(), T(0)).ok());
  // Written with valid checksums: the lists themselves are refused.
  auto set_inputs = [&](const std::string& value) {
    Exec(absl::StrCat(
        "UPDATE tasks SET inputs = ", value, ", ",
        state_records::ResealSql(state_records::Tasks(), {{"inputs", value}}),
        " WHERE job_id = 'bf-1'"));
  };
  set_inputs("'9:short'");
  EXPECT_EQ(store_->ListTasks("bf-1").status().code(),
            absl::StatusCode::kDataLoss);
  set_inputs("'1:a1:b1:c1:x'");
  EXPECT_EQ(store_->ListTasks("bf-1").status().code(),
            absl::StatusCode::kDataLoss);
  set_inputs("'1:a1:b'");
  EXPECT_THAT(store_->ListTasks("bf-1").status().message(),
              HasSubstr("malformed"));
  Exec(absl::StrCat("UPDATE jobs SET partitions = 'x:y', ",
                    state_records::ResealSql(state_records::Jobs(),
                                             {{"partitions", "'x:y'"}}),
                    " WHERE id = 'bf-1'"));
  EXPECT_EQ(store_->GetJob("bf-1").status().code(),
            absl::StatusCode::kDataLoss);
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
  Exec(absl::StrCat("PRAGMA user_version = ",
                    SqliteStateStore::SchemaVersion() - 1));
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
  if (geteuid() == 0) ASSERT_EQ(chown(path.c_str(), 65534, 65534), 0) << path;
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

TEST(StateStoreMemoryTest, InMemoryWorks) {
  auto store = SqliteStateStore::Open(":memory:");
  ASSERT_TRUE(store.ok()) << store.status();
  Job job;
  job.request.dataset = "d";
  auto r = (*store)->CreateJob(job, absl::FromUnixSeconds(1));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->job.id, "bf-1");
  EXPECT_EQ((*store)->Info()->store_id.size(), 32u);
}

}  // namespace
}  // namespace backfill
