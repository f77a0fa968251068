// What SqliteStateStore keeps between reads of a job: the sums over its
// tasks (counts by state, costs, rows, recompute times) and its diff summed
// per dataset. Each read must answer as a store without them would: after
// every kind of write to the job's tasks, after a diff is replaced, and
// after another connection wrote to the file behind the store's back. The
// expected figures are counted here with plain SQL over state.db.

#include <sqlite3.h>
#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "core/model/diff.h"
#include "core/model/job.h"
#include "gtest/gtest.h"
#include "storage/sqlite/sqlite_db.h"
#include "storage/sqlite/sqlite_fingerprint_function.h"
#include "storage/sqlite/state/sqlite_state_store.h"
#include "storage/sqlite/state/state_record_checksums.h"

namespace backfill {
namespace storage_state_store_cache_test {
namespace {

absl::Time T(int s) { return absl::FromUnixSeconds(1700000000 + s); }

class StateStoreCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = ::testing::TempDir() + "/store_cache_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    auto store = SqliteStateStore::Open(dir_ + "/state.db");
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    Job job;
    job.request.dataset = "daily";
    job.request.reason = "cache";
    for (const char* name : {"daily", "monthly"}) {
      DatasetPlan dp;
      dp.dataset = name;
      dp.reason = "requested";
      for (int i = 1; i <= 4; ++i) {
        dp.partitions.push_back(absl::StrCat("2025-0", i));
      }
      job.plan.datasets.push_back(dp);
    }
    auto created = store_->CreateJob(job, T(0));
    ASSERT_TRUE(created.ok()) << created.status();
    id_ = created->job.id;
  }
  void TearDown() override {
    store_.reset();
    std::filesystem::remove_all(dir_);
  }

  // One integer from plain SQL over state.db, on a connection of its own.
  int64_t Count(const std::string& sql) {
    sqlite3* db = nullptr;
    EXPECT_EQ(sqlite3_open_v2((dir_ + "/state.db").c_str(), &db,
                              SQLITE_OPEN_READWRITE, nullptr),
              SQLITE_OK);
    sqlite3_stmt* q = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &q, nullptr), SQLITE_OK)
        << sqlite3_errmsg(db);
    int64_t n = -1;
    if (sqlite3_step(q) == SQLITE_ROW) n = sqlite3_column_int64(q, 0);
    sqlite3_finalize(q);
    sqlite3_close(db);
    return n;
  }
  int64_t InState(const std::string& state) {
    return Count(absl::StrCat("SELECT COUNT(*) FROM tasks WHERE job_id = '",
                              id_, "' AND state = '", state, "'"));
  }

  // The job's counts, actual cost and rows as read, against plain SQL.
  void ExpectAsCounted() {
    auto job = store_->GetJobProgress(id_);
    ASSERT_TRUE(job.ok()) << job.status();
    EXPECT_EQ(job->counts.pending, InState("PENDING"));
    EXPECT_EQ(job->counts.running, InState("RUNNING"));
    EXPECT_EQ(job->counts.staged, InState("STAGED"));
    EXPECT_EQ(job->counts.published, InState("PUBLISHED"));
    EXPECT_EQ(job->counts.failed, InState("FAILED"));
    EXPECT_EQ(job->counts.total, 8);
    EXPECT_EQ(static_cast<int64_t>(job->actual_cost),
              Count(absl::StrCat("SELECT TOTAL(input_rows) FROM tasks WHERE "
                                 "job_id = '",
                                 id_,
                                 "' AND state IN ('STAGED', 'PUBLISHED', "
                                 "'UNCHANGED')")));
    EXPECT_EQ(
        job->rows_written,
        Count(absl::StrCat("SELECT TOTAL(rows_written) FROM tasks WHERE "
                           "job_id = '",
                           id_, "' AND state IN ('STAGED', 'PUBLISHED')")));
    EXPECT_EQ(
        job->timed_partitions,
        Count(absl::StrCat("SELECT COUNT(*) FROM tasks WHERE job_id = '", id_,
                           "' AND state IN ('STAGED', 'PUBLISHED', "
                           "'UNCHANGED') AND duration_seconds > 0")));
    for (const DatasetPlan& dp : job->plan.datasets) {
      EXPECT_EQ(dp.partition_count, 4) << dp.dataset;
      EXPECT_EQ(static_cast<int64_t>(dp.actual_cost),
                Count(absl::StrCat("SELECT TOTAL(input_rows) FROM tasks WHERE "
                                   "job_id = '",
                                   id_, "' AND dataset = '", dp.dataset,
                                   "' AND state IN ('STAGED', 'PUBLISHED', "
                                   "'UNCHANGED')")))
          << dp.dataset;
    }
  }

  PartitionTask Task(const std::string& dataset, const std::string& partition,
                     TaskState state, int64_t input_rows) {
    PartitionTask t;
    t.job_id = id_;
    t.dataset = dataset;
    t.partition = partition;
    t.state = state;
    t.attempts = 1;
    t.rows_written = 10;
    t.output_fingerprint = "f";
    t.inputs = {{"orders", partition, "g", input_rows}};
    t.duration_seconds = 0.5;
    t.update_time = T(1);
    return t;
  }

  std::string dir_;
  std::string id_;
  std::unique_ptr<SqliteStateStore> store_;
};

TEST_F(StateStoreCacheTest, EveryWriteToTheTasksShowsInTheNextRead) {
  ExpectAsCounted();  // all PENDING, and now kept
  ASSERT_TRUE(store_
                  ->TransitionJob(id_, JobState::kQueued, JobState::kRunning,
                                  "go", T(1))
                  .ok());
  ASSERT_TRUE(
      store_->UpdateTask(Task("daily", "2025-01", TaskState::kRunning, 0))
          .ok());
  ExpectAsCounted();
  ASSERT_TRUE(
      store_->UpdateTask(Task("daily", "2025-01", TaskState::kStaged, 700))
          .ok());
  ASSERT_TRUE(
      store_->UpdateTask(Task("monthly", "2025-02", TaskState::kStaged, 30))
          .ok());
  ASSERT_TRUE(
      store_->UpdateTask(Task("daily", "2025-03", TaskState::kFailed, 5)).ok());
  ExpectAsCounted();
  EXPECT_EQ(store_->GetJobProgress(id_)->counts.staged, 2);
  // Many at once.
  ASSERT_TRUE(store_
                  ->UpdateTasksInState(id_, {TaskState::kPending},
                                       TaskState::kRunning, T(2))
                  .ok());
  ExpectAsCounted();
  EXPECT_EQ(store_->GetJobProgress(id_)->counts.running, 5);
  ASSERT_TRUE(store_
                  ->UpdateTasksInState(id_, {TaskState::kRunning},
                                       TaskState::kFailed, T(3))
                  .ok());
  ASSERT_TRUE(store_
                  ->TransitionJob(id_, JobState::kRunning, JobState::kFailed,
                                  "broke", T(3))
                  .ok());
  ExpectAsCounted();
  // A retry makes the failed ones PENDING again.
  auto reset = store_->RetryJob(id_, JobState::kFailed, JobState::kQueued,
                                "again", T(4));
  ASSERT_TRUE(reset.ok()) << reset.status();
  EXPECT_EQ(*reset, 6);
  ExpectAsCounted();
  EXPECT_EQ(store_->GetJobProgress(id_)->counts.pending, 6);
  // Everything staged, then published with the job.
  ASSERT_TRUE(store_
                  ->TransitionJob(id_, JobState::kQueued, JobState::kRunning,
                                  "go", T(5))
                  .ok());
  ASSERT_TRUE(store_
                  ->UpdateTasksInState(id_, {TaskState::kPending},
                                       TaskState::kStaged, T(5))
                  .ok());
  ASSERT_TRUE(store_
                  ->TransitionJob(id_, JobState::kRunning,
                                  JobState::kValidating, "v", T(6))
                  .ok());
  ASSERT_TRUE(store_
                  ->TransitionJob(id_, JobState::kValidating,
                                  JobState::kPublishing, "p", T(6))
                  .ok());
  ASSERT_TRUE(
      store_->RecordPublication(id_, {}, JobState::kConfirming, "done", T(7))
          .ok());
  ExpectAsCounted();
  EXPECT_EQ(store_->GetJobProgress(id_)->counts.published, 8);
  // Reads of the listing give the same sums.
  JobFilter filter;
  filter.limit = 10;
  auto listed = store_->ListJobs(filter);
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ(listed->front().counts.published, 8);
}

TEST_F(StateStoreCacheTest, AWriteByAnotherConnectionIsSeen) {
  ExpectAsCounted();
  // Behind the store's back: no method of it is called.
  {
    // As backfilld writes it: with the record's checksum.
    auto db = sqlite::Database::Open(dir_ + "/state.db");
    ASSERT_TRUE(db.ok()) << db.status();
    ASSERT_TRUE(sqlite::RegisterRowHashFunction(db->get()).ok());
    ASSERT_TRUE(
        (*db)
            ->Exec(absl::StrCat(
                "UPDATE tasks SET state = 'STAGED', input_rows = 99, ",
                state_records::ResealSql(
                    state_records::Tasks(),
                    {{"state", "'STAGED'"}, {"input_rows", "99"}}),
                " WHERE job_id = '", id_, "' AND \"partition\" = '2025-04'"))
            .ok());
    EXPECT_GE((*db)->Changes(), 1);
  }
  ExpectAsCounted();
  EXPECT_EQ(store_->GetJobProgress(id_)->counts.staged, 2);
}

TEST_F(StateStoreCacheTest, TheDiffSummaryFollowsTheStoredDiff) {
  auto none = store_->GetJobDiffSummary(id_);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->has_value());
  auto make = [&](int64_t added) {
    JobDiff diff;
    diff.job_id = id_;
    diff.computed_at = T(3);
    DatasetDiff d;
    d.dataset = "daily";
    d.columns.by_key = true;
    d.columns.key = {"ds"};
    d.columns.values = {"revenue"};
    d.columns.measures = {"revenue"};
    for (int i = 1; i <= 4; ++i) {
      PartitionDiff p;
      p.dataset = "daily";
      p.partition = absl::StrCat("2025-0", i);
      p.rows_before = 10;
      p.rows_after = 10 + added;
      p.added = added;
      p.unchanged = 10;
      p.measures = {{"revenue", 100.0, 100.0 + i}};
      d.partitions.push_back(p);
    }
    diff.datasets.push_back(d);
    return diff;
  };
  for (int64_t added : {1, 3}) {
    const JobDiff diff = make(added);
    ASSERT_TRUE(store_->ReplaceJobDiff(diff).ok());
    for (int read = 0; read < 2; ++read) {  // computed, then kept
      auto summary = store_->GetJobDiffSummary(id_);
      ASSERT_TRUE(summary.ok()) << summary.status();
      ASSERT_TRUE(summary->has_value());
      ASSERT_EQ((*summary)->size(), 1u);
      const DiffSummary expected = Summarize(diff.datasets[0]);
      const DiffSummary& got = (*summary)->front();
      EXPECT_EQ(got.partitions, 4);
      EXPECT_EQ(got.added, 4 * added);
      EXPECT_EQ(got.added, expected.added);
      EXPECT_EQ(got.rows_after, expected.rows_after);
      EXPECT_EQ(got.partitions_changed, expected.partitions_changed);
      ASSERT_EQ(got.measures.size(), 1u);
      EXPECT_DOUBLE_EQ(got.measures[0].after, 410.0);
    }
  }
  EXPECT_EQ(store_->GetJobDiffSummary("bf-999").status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace storage_state_store_cache_test
}  // namespace backfill
