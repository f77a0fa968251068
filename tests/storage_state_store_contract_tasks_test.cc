// The StateStore contract suite (tests/testing/state_store_contract.h):
// partition tasks — checkpoints, costs and counts, the history of earlier
// runs, early cutoff's states, the store's figures, and concurrent
// writers.

#include <algorithm>
#include <atomic>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "core/ports/state_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/state_store_contract.h"

namespace backfill {
namespace storage_state_store_contract_tasks_test {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using testing::MakeJob;
using testing::MakeLineage;
using ::testing::Pair;
using testing::StateStoreContractTest;
using testing::T;

TEST_P(StateStoreContractTest, ConcurrentSubmitsWithOneKeyCreateOneJob) {
  std::atomic<int> created{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&] {
      auto r = store_->CreateJob(MakeJob("same"), T(0));
      ASSERT_TRUE(r.ok()) << r.status();
      if (r->created) ++created;
      EXPECT_EQ(r->job.id, "bf-1");
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(created.load(), 1);
  EXPECT_EQ(store_->Info()->last_job_number, 1);
}

TEST_P(StateStoreContractTest, ConcurrentWritesAreAllKept) {
  constexpr int kThreads = 4;
  constexpr int kJobsPerThread = 5;
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&] {
      for (int j = 0; j < kJobsPerThread; ++j) {
        auto r = store_->CreateJob(MakeJob(), T(0));
        ASSERT_TRUE(r.ok()) << r.status();
        auto tasks = store_->ListTasks(r->job.id);
        ASSERT_TRUE(tasks.ok()) << tasks.status();
        for (PartitionTask t : *tasks) {
          t.state = TaskState::kStaged;
          t.rows_written = 2;
          t.inputs = {{"orders", t.partition, "f", 5}};
          ASSERT_TRUE(store_->UpdateTask(t).ok());
        }
        ASSERT_TRUE(store_
                        ->TransitionJob(r->job.id, JobState::kQueued,
                                        JobState::kRunning, "go", T(1))
                        .ok());
      }
    });
  }
  for (auto& t : threads) t.join();
  auto jobs = store_->ListJobs({{}, "", 0});
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  ASSERT_EQ(jobs->size(), size_t{kThreads * kJobsPerThread});
  std::set<std::string> ids;
  for (const Job& job : *jobs) {
    ids.insert(job.id);
    EXPECT_EQ(job.state, JobState::kRunning);
    EXPECT_EQ(job.counts.staged, 3);
    EXPECT_EQ(job.rows_written, 6);
    EXPECT_EQ(job.actual_cost, 15);
  }
  EXPECT_EQ(ids.size(), size_t{kThreads * kJobsPerThread});
  auto stats = store_->Stats();
  EXPECT_EQ(stats->running_tasks_total, 3 * kThreads * kJobsPerThread);
  EXPECT_EQ(stats->running_tasks_done, 3 * kThreads * kJobsPerThread);
}

TEST_P(StateStoreContractTest, TasksCheckpointAndCosts) {
  ASSERT_TRUE(store_->CreateJob(MakeJob(), T(0)).ok());
  PartitionTask t;
  t.job_id = "bf-1";
  t.dataset = "daily_revenue";
  t.partition = "2025-01-01";
  t.state = TaskState::kStaged;
  t.attempts = 2;
  t.last_error = "first attempt: busy";
  t.rows_written = 7;
  t.output_fingerprint = "abc:7";
  t.inputs = {{"orders", "2025-01-01", "f1:10", 10},
              {"cust:omers", "", "f2\"'", 5}};
  t.duration_seconds = 1.5;
  t.update_time = T(9);
  ASSERT_TRUE(store_->UpdateTask(t).ok());

  PartitionTask running = t;
  running.partition = "2025-01-02";
  running.state = TaskState::kRunning;
  running.rows_written = 100;
  running.inputs = {{"orders", "2025-01-02", "f3", 1000}};
  ASSERT_TRUE(store_->UpdateTask(running).ok());

  PartitionTask missing = t;
  missing.partition = "2030-01-01";
  EXPECT_EQ(store_->UpdateTask(missing).code(), absl::StatusCode::kNotFound);
  missing = t;
  missing.job_id = "bf-2";
  EXPECT_EQ(store_->UpdateTask(missing).code(), absl::StatusCode::kNotFound);
  missing = t;
  missing.dataset = "monthly_revenue";
  EXPECT_EQ(store_->UpdateTask(missing).code(), absl::StatusCode::kNotFound);

  auto job = store_->GetJob("bf-1");
  EXPECT_EQ(job->counts.staged, 1);
  EXPECT_EQ(job->counts.running, 1);
  EXPECT_EQ(job->counts.pending, 1);
  EXPECT_EQ(job->actual_cost, 15);  // only staged / published tasks
  EXPECT_EQ(job->rows_written, 7);

  auto tasks = store_->ListTasks("bf-1");
  const PartitionTask& got = (*tasks)[0];
  EXPECT_EQ(got.state, TaskState::kStaged);
  EXPECT_EQ(got.attempts, 2);
  EXPECT_EQ(got.last_error, "first attempt: busy");
  EXPECT_EQ(got.rows_written, 7);
  EXPECT_EQ(got.output_fingerprint, "abc:7");
  ASSERT_EQ(got.inputs.size(), 2u);
  EXPECT_EQ(got.inputs[0].fingerprint, "f1:10");
  EXPECT_EQ(got.inputs[1].dataset, "cust:omers");
  EXPECT_EQ(got.inputs[1].partition, "");
  EXPECT_EQ(got.inputs[1].fingerprint, "f2\"'");
  EXPECT_EQ(got.inputs[1].rows, 5);
  EXPECT_EQ(got.duration_seconds, 1.5);
  EXPECT_EQ(got.update_time, T(9));

  auto changed = store_->UpdateTasksInState(
      "bf-1", {TaskState::kPending, TaskState::kRunning}, TaskState::kCancelled,
      T(10));
  ASSERT_TRUE(changed.ok());
  EXPECT_EQ(*changed, 2);
  job = store_->GetJob("bf-1");
  EXPECT_EQ(job->counts.cancelled, 2);
  EXPECT_EQ(job->counts.staged, 1);
  tasks = store_->ListTasks("bf-1");
  EXPECT_EQ((*tasks)[1].update_time, T(10));
  EXPECT_EQ((*tasks)[1].rows_written, 100);  // only the state changes
  EXPECT_EQ((*tasks)[0].update_time, T(9));

  EXPECT_EQ(*store_->UpdateTasksInState("bf-1", {}, TaskState::kPending, T(11)),
            0);
  EXPECT_EQ(*store_->UpdateTasksInState("bf-9", {TaskState::kCancelled},
                                        TaskState::kPending, T(11)),
            0);
  EXPECT_EQ(store_->GetJob("bf-1")->counts.cancelled, 2);
}

// A job's figures as counted from its tasks (ListTasks), independently of
// the store's own sums.
void ExpectFiguresOfItsTasks(StateStore* store, const std::string& id) {
  auto tasks = store->ListTasks(id);
  ASSERT_TRUE(tasks.ok()) << tasks.status();
  double cost = 0;
  int64_t rows = 0, timed = 0;
  std::map<std::string, std::pair<int64_t, double>> by_dataset;
  for (const PartitionTask& t : *tasks) {
    ++by_dataset[t.dataset].first;
    const bool recomputed = t.state == TaskState::kStaged ||
                            t.state == TaskState::kPublished ||
                            t.state == TaskState::kUnchanged;
    if (!recomputed) continue;
    int64_t input_rows = 0;
    for (const InputFingerprint& in : t.inputs) input_rows += in.rows;
    cost += input_rows;
    by_dataset[t.dataset].second += input_rows;
    if (t.state != TaskState::kUnchanged) rows += t.rows_written;
    if (t.duration_seconds > 0) ++timed;
  }
  auto in = [&](TaskState state) {
    return std::count_if(
        tasks->begin(), tasks->end(),
        [&](const PartitionTask& t) { return t.state == state; });
  };
  for (bool full : {true, false}) {
    auto job = full ? store->GetJob(id) : store->GetJobProgress(id);
    ASSERT_TRUE(job.ok()) << job.status();
    EXPECT_EQ(job->counts.total, static_cast<int64_t>(tasks->size()));
    EXPECT_EQ(job->counts.pending, in(TaskState::kPending));
    EXPECT_EQ(job->counts.running, in(TaskState::kRunning));
    EXPECT_EQ(job->counts.staged, in(TaskState::kStaged));
    EXPECT_EQ(job->counts.published, in(TaskState::kPublished));
    EXPECT_EQ(job->counts.failed, in(TaskState::kFailed));
    EXPECT_EQ(job->counts.cancelled, in(TaskState::kCancelled));
    EXPECT_EQ(job->counts.unchanged, in(TaskState::kUnchanged));
    EXPECT_EQ(job->counts.skipped, in(TaskState::kSkipped));
    EXPECT_EQ(job->actual_cost, cost);
    EXPECT_EQ(job->rows_written, rows);
    EXPECT_EQ(job->timed_partitions, timed);
    for (const DatasetPlan& dp : job->plan.datasets) {
      EXPECT_EQ(dp.partition_count, by_dataset[dp.dataset].first) << dp.dataset;
      EXPECT_EQ(dp.actual_cost, by_dataset[dp.dataset].second) << dp.dataset;
    }
  }
}

TEST_P(StateStoreContractTest, AJobsFiguresFollowEveryWriteToItsTasks) {
  ASSERT_TRUE(store_->CreateJob(MakeJob(), T(0)).ok());
  ASSERT_NO_FATAL_FAILURE(ExpectFiguresOfItsTasks(store_.get(), "bf-1"));
  auto tasks = store_->ListTasks("bf-1");
  ASSERT_TRUE(tasks.ok()) << tasks.status();
  ASSERT_EQ(tasks->size(), 3u);
  // Checkpoints one at a time, then several at once.
  const TaskState states[] = {TaskState::kRunning, TaskState::kStaged,
                              TaskState::kFailed, TaskState::kUnchanged,
                              TaskState::kStaged};
  int64_t n = 0;
  for (TaskState state : states) {
    PartitionTask t = (*tasks)[n % 3];
    t.state = state;
    t.attempts = static_cast<int>(n);
    t.rows_written = 10 + n;
    t.inputs = {{"orders", t.partition, "f", 100 * (n + 1)}};
    t.duration_seconds = n % 2 == 0 ? 0.5 : 0;
    ASSERT_TRUE(store_->UpdateTask(t).ok());
    ASSERT_NO_FATAL_FAILURE(ExpectFiguresOfItsTasks(store_.get(), "bf-1"));
    ++n;
  }
  std::vector<PartitionTask> batch = *tasks;
  for (PartitionTask& t : batch) {
    t.state = TaskState::kStaged;
    t.rows_written = 7;
    t.inputs = {{"orders", t.partition, "g", 3}};
  }
  ASSERT_TRUE(store_->UpdateTasks(batch).ok());
  ASSERT_NO_FATAL_FAILURE(ExpectFiguresOfItsTasks(store_.get(), "bf-1"));
  // A batch with a task that does not exist changes nothing.
  batch[0].state = TaskState::kFailed;
  batch[1].partition = "nowhere";
  EXPECT_EQ(store_->UpdateTasks(batch).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->GetJobProgress("bf-1")->counts.staged, 3);
  ASSERT_NO_FATAL_FAILURE(ExpectFiguresOfItsTasks(store_.get(), "bf-1"));
  // The moves of many tasks at once: by state, a retry, a publication.
  ASSERT_TRUE(store_
                  ->UpdateTasksInState("bf-1", {TaskState::kStaged},
                                       TaskState::kFailed, T(1))
                  .ok());
  ASSERT_NO_FATAL_FAILURE(ExpectFiguresOfItsTasks(store_.get(), "bf-1"));
  ASSERT_NO_FATAL_FAILURE(Reach("bf-1", JobState::kFailed, T(2)));
  ASSERT_TRUE(store_
                  ->RetryJob("bf-1", JobState::kFailed, JobState::kQueued,
                             "retry", T(3))
                  .ok());
  ASSERT_NO_FATAL_FAILURE(ExpectFiguresOfItsTasks(store_.get(), "bf-1"));
  ASSERT_TRUE(store_->UpdateTasks(*tasks).ok());
  ASSERT_TRUE(store_
                  ->UpdateTasksInState("bf-1", {TaskState::kPending},
                                       TaskState::kStaged, T(4))
                  .ok());
  ASSERT_NO_FATAL_FAILURE(Reach("bf-1", JobState::kPublishing, T(5)));
  ASSERT_TRUE(store_
                  ->RecordPublication("bf-1", {}, JobState::kConfirming,
                                      "published", T(6))
                  .ok());
  EXPECT_EQ(store_->GetJobProgress("bf-1")->counts.published, 3);
  ASSERT_NO_FATAL_FAILURE(ExpectFiguresOfItsTasks(store_.get(), "bf-1"));
}

TEST_P(StateStoreContractTest, LastRunInputRowsIsTheNewestSuccessfulRun) {
  // Jobs bf-1..bf-3 each plan daily_revenue 2025-01-01 and 2025-01-02.
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(store_->CreateJob(MakeJob(), T(0)).ok());
  }
  auto run = [&](const std::string& job, const std::string& partition,
                 TaskState state, int64_t rows) {
    PartitionTask t;
    t.job_id = job;
    t.dataset = "daily_revenue";
    t.partition = partition;
    t.state = state;
    t.inputs = {{"orders", partition, "f", rows}};
    t.update_time = T(1);
    ASSERT_TRUE(store_->UpdateTask(t).ok());
  };
  // 01: bf-1 published 10, bf-2 found it unchanged reading 20, bf-3
  // failed reading 30 (not a successful run). 02: only staged by bf-1.
  ASSERT_NO_FATAL_FAILURE(run("bf-1", "2025-01-01", TaskState::kPublished, 10));
  ASSERT_NO_FATAL_FAILURE(run("bf-2", "2025-01-01", TaskState::kUnchanged, 20));
  ASSERT_NO_FATAL_FAILURE(run("bf-3", "2025-01-01", TaskState::kFailed, 30));
  ASSERT_NO_FATAL_FAILURE(run("bf-1", "2025-01-02", TaskState::kStaged, 40));

  auto both =
      store_->LastRunInputRows("daily_revenue", {"2025-01-02", "2025-01-01"});
  ASSERT_TRUE(both.ok()) << both.status();
  EXPECT_THAT(*both, ElementsAre(Pair("2025-01-01", 20)));
  // Only what was asked for, even where the range between the smallest
  // and the largest asked covers more.
  auto around =
      store_->LastRunInputRows("daily_revenue", {"2024-12-31", "2025-01-02"});
  ASSERT_TRUE(around.ok()) << around.status();
  EXPECT_THAT(*around, IsEmpty());
  auto none = store_->LastRunInputRows("daily_revenue", {});
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_THAT(*none, IsEmpty());
  auto other = store_->LastRunInputRows("monthly_revenue", {"2025-01-01"});
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_THAT(*other, IsEmpty());
}

TEST_P(StateStoreContractTest, CutoffStatesAreCountedKeptAndNotPublished) {
  // Three tasks: 2025-01-01 and 2025-01-02 of daily_revenue, 2025-01 of
  // monthly_revenue.
  ASSERT_TRUE(store_->CreateJob(MakeJob(), T(0)).ok());
  auto tasks = *store_->ListTasks("bf-1");
  ASSERT_EQ(tasks.size(), 3u);
  tasks[0].state = TaskState::kUnchanged;
  tasks[0].rows_written = 4;
  tasks[0].output_fingerprint = "same:4";
  tasks[0].inputs = {{"orders", "2025-01-01", "f", 10}};
  tasks[1].state = TaskState::kStaged;
  tasks[1].rows_written = 3;
  tasks[1].inputs = {{"orders", "2025-01-02", "g", 20}};
  tasks[2].state = TaskState::kSkipped;
  tasks[2].output_fingerprint = "kept:9";
  for (const PartitionTask& t : tasks) ASSERT_TRUE(store_->UpdateTask(t).ok());

  auto job = store_->GetJob("bf-1");
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->counts.total, 3);
  EXPECT_EQ(job->counts.unchanged, 1);
  EXPECT_EQ(job->counts.skipped, 1);
  EXPECT_EQ(job->counts.staged, 1);
  // The unchanged partition was recomputed (its inputs read) but writes
  // nothing to the warehouse; the skipped one neither.
  EXPECT_EQ(job->actual_cost, 30);
  EXPECT_EQ(job->rows_written, 3);
  EXPECT_EQ(store_->GetJobProgress("bf-1")->counts.unchanged, 1);
  auto read = *store_->ListTasks("bf-1");
  EXPECT_EQ(read[0].state, TaskState::kUnchanged);
  EXPECT_EQ(read[0].output_fingerprint, "same:4");
  EXPECT_EQ(read[2].state, TaskState::kSkipped);
  EXPECT_EQ(read[2].output_fingerprint, "kept:9");

  // A retry keeps them, as it keeps staged tasks.
  ASSERT_NO_FATAL_FAILURE(Reach("bf-1", JobState::kFailed, T(1)));
  auto reset = store_->RetryJob("bf-1", JobState::kFailed, JobState::kQueued,
                                "retry", T(2));
  ASSERT_TRUE(reset.ok()) << reset.status();
  EXPECT_EQ(*reset, 0);
  // The publication marks only the staged task published.
  ASSERT_NO_FATAL_FAILURE(Reach("bf-1", JobState::kPublishing, T(3)));
  ASSERT_TRUE(store_
                  ->RecordPublication(
                      "bf-1",
                      {MakeLineage("daily_revenue", "2025-01-02", T(4))},
                      JobState::kConfirming, "published", T(4))
                  .ok());
  job = store_->GetJob("bf-1");
  EXPECT_EQ(job->counts.published, 1);
  EXPECT_EQ(job->counts.unchanged, 1);
  EXPECT_EQ(job->counts.skipped, 1);
  // Stats count them by state.
  auto stats = store_->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->tasks_by_state[static_cast<size_t>(TaskState::kUnchanged)],
            1);
  EXPECT_EQ(stats->tasks_by_state[static_cast<size_t>(TaskState::kSkipped)], 1);
}

TEST_P(StateStoreContractTest, Stats) {
  ASSERT_TRUE(store_->CreateJob(MakeJob(), T(0)).ok());
  ASSERT_TRUE(store_->CreateJob(MakeJob(), T(1)).ok());
  ASSERT_TRUE(
      store_->TransitionJob("bf-1", std::nullopt, JobState::kRunning, "", T(2))
          .ok());
  PartitionTask t;
  t.job_id = "bf-1";
  t.dataset = "daily_revenue";
  t.partition = "2025-01-01";
  t.state = TaskState::kStaged;
  ASSERT_TRUE(store_->UpdateTask(t).ok());
  t.partition = "2025-01-02";
  t.state = TaskState::kFailed;
  ASSERT_TRUE(store_->UpdateTask(t).ok());
  auto stats = store_->Stats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->jobs_by_state[static_cast<int>(JobState::kRunning)], 1);
  EXPECT_EQ(stats->jobs_by_state[static_cast<int>(JobState::kQueued)], 1);
  EXPECT_EQ(stats->jobs_by_state[static_cast<int>(JobState::kFailed)], 0);
  EXPECT_EQ(stats->tasks_by_state[static_cast<int>(TaskState::kPending)], 4);
  EXPECT_EQ(stats->tasks_by_state[static_cast<int>(TaskState::kStaged)], 1);
  EXPECT_EQ(stats->tasks_by_state[static_cast<int>(TaskState::kFailed)], 1);
  EXPECT_EQ(stats->running_tasks_total, 3);
  EXPECT_EQ(stats->running_tasks_done, 1);
}

}  // namespace
}  // namespace storage_state_store_contract_tasks_test
}  // namespace backfill
