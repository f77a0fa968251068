// Tests of what only the SQLite state store has: the file survives a
// reopen, schema migrations and the refusal of a newer schema, the task
// counts its triggers keep, WAL mode and the encoding of lists in columns.
// Its integrity checks and records' checksums are tested in
// storage_state_store_integrity_test.cc. The behaviour every StateStore
// shares is tested against this store and the in-memory one by the
// StateStore contract suite (tests/testing/state_store_contract.h).

#include <sqlite3.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <filesystem>
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
#include "storage/sqlite/state/sqlite_state_store.h"
#include "storage/sqlite/state/state_record_checksums.h"
#include "tests/testing/sqlite_state_file.h"

namespace backfill {
namespace storage_state_store_test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

using StateStoreTest = testing::SqliteStateFileTest;

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
}  // namespace storage_state_store_test
}  // namespace backfill
