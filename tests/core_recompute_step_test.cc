// Tests of the recompute step (core/run/recompute_step.h) on the fake
// engine and the in-memory store, without a runner: a batch stages its
// partitions with a durable checkpoint each; the early cutoff records a
// partition equal to its published version UNCHANGED and releases it, and
// skips a dependent whose inputs all came out unchanged; failures are
// retried, put back without spending an attempt (a full warehouse) or fail
// the job; a batch starts only what it still holds; staging is prepared
// without the partitions the cutoff let go of.

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "core/run/publish_step.h"
#include "core/run/recompute_step.h"
#include "core/run/task_writer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/step_fixture.h"

namespace backfill {
namespace core_recompute_step_test {
namespace {

using ::testing::HasSubstr;
using Call = testing::FakeEngine::Call;
using Storage = JobObserver::Storage;

class RecomputeStepTest : public testing::StepFixture {
 protected:
  void TearDown() override { writer_.reset(); }

  TaskWriter* writer() {
    if (writer_ == nullptr) {
      writer_ = std::make_unique<TaskWriter>(
          &store_, [this](const std::string& what,
                          const std::function<absl::Status()>& write) {
            return ctx().Persist(Storage::kStateStore, what, write);
          });
    }
    return writer_.get();
  }

  // A RUNNING job of `request`, held by the table and prepared.
  ActiveJob* Running(const BackfillRequest& request) {
    const Job created = CreateJob(request);
    MoveTo(created.id, {JobState::kRunning});
    return Hold(Stored(created.id), JobPhase::kRunning);
  }

  // The runs of tasks `indices` of `job`, as the runner builds them.
  std::vector<PartitionRun> Runs(ActiveJob* job,
                                 const std::vector<size_t>& indices) {
    std::vector<PartitionRun> runs;
    absl::MutexLock lock(jobs_.mu());
    for (size_t i : indices) runs.push_back(PartitionRunOf(*job, i));
    return runs;
  }

  // Runs a batch in which every partition is still the batch's own.
  void Run(ActiveJob* job, std::vector<PartitionRun>* runs) {
    RunBatch(ctx(), job, writer(), TakeAll(), runs);
  }
  static ClaimPartition TakeAll() {
    return [](PartitionRun* run, bool* go_on) {
      run->claimed = true;
      if (go_on != nullptr) *go_on = true;
      return true;
    };
  }

  // Records the publication of `job`'s staged tasks, as the publish step
  // would, so that later jobs find their lineage.
  void Published(ActiveJob* job) {
    const std::string& id = job->job.id;
    MoveTo(id, {JobState::kValidating, JobState::kPublishing});
    std::map<std::string, std::string> versions;
    for (const DatasetPlan& dp : job->job.plan.datasets) {
      versions[dp.dataset] = dp.transform_version;
    }
    int64_t rows = 0;
    std::vector<LineageRecord> lineage =
        LineageOf(job->job, Tasks(id), versions, clock_.Now(), &rows);
    ASSERT_TRUE(store_
                    .RecordPublication(id, lineage, JobState::kConfirming,
                                       "published", clock_.Now())
                    .ok());
  }

  int64_t Calls(const std::string& method, const std::string& job_id) {
    int64_t n = 0;
    for (const Call& c : engine_.call_log()) {
      n += c.method == method && c.job_id == job_id;
    }
    return n;
  }

  std::unique_ptr<TaskWriter> writer_;
};

// A job is loaded a page of tasks at a time: across the pages' edges
// (4,096 tasks each) every task arrives once, in plan order, with its
// state, and the graph links each rollup day to its daily day.
TEST_F(RecomputeStepTest, AJobOfManyPagesOfTasksIsLoadedWhole) {
  const Job created = CreateJob(
      Request("daily", "2000-01-01", "2022-06-01", /*downstream=*/true));
  std::vector<PartitionTask> stored = Tasks(created.id);
  ASSERT_GT(stored.size(), 2u * 4096 + 1);
  // Some states to carry over, at the pages' edges among others.
  for (size_t i : {size_t{0}, size_t{4095}, size_t{4096}, size_t{8191},
                   stored.size() - 1}) {
    stored[i].state = TaskState::kStaged;
    stored[i].rows_written = static_cast<int64_t>(i);
    stored[i].output_fingerprint = absl::StrCat("fp", i);
    ASSERT_TRUE(store_.UpdateTask(stored[i]).ok());
  }
  ActiveJob* job = Hold(Stored(created.id), JobPhase::kWaiting,
                        /*prepare=*/false);
  absl::MutexLock lock(jobs_.mu());
  ASSERT_EQ(job->tasks.size(), stored.size());
  ASSERT_EQ(job->graph->size(), stored.size());
  for (size_t i = 0; i < stored.size(); ++i) {
    ASSERT_EQ(job->tasks.dataset(i), stored[i].dataset) << i;
    ASSERT_EQ(job->tasks.partition(i), stored[i].partition) << i;
    ASSERT_EQ(job->tasks.state(i), stored[i].state) << i;
    ASSERT_EQ(job->tasks.rows_written(i), stored[i].rows_written) << i;
    ASSERT_EQ(job->tasks.output_fingerprint(i), stored[i].output_fingerprint)
        << i;
    ASSERT_EQ(job->spec_of[i]->name, stored[i].dataset) << i;
  }
  // The rollup's tasks follow the daily ones; each reads its day.
  const size_t days = stored.size() / 2;
  EXPECT_EQ(job->tasks.dataset(days), "rollup");
  for (size_t i : {size_t{0}, size_t{4096}, days - 1}) {
    const auto inputs = job->graph->IdentityInputs(days + i);
    ASSERT_EQ(inputs.size(), 1u);
    EXPECT_EQ(inputs[0], i);
  }
}

TEST_F(RecomputeStepTest, EachPartitionIsStagedAndCheckpointedDurably) {
  ActiveJob* job = Running(Request("daily", "2025-01-01", "2025-01-04"));
  std::vector<PartitionRun> runs = Runs(job, {0, 1, 2});
  Run(job, &runs);
  for (const PartitionRun& run : runs) {
    EXPECT_TRUE(run.ran && run.done && !run.failed) << run.task.partition;
    EXPECT_EQ(run.outcome, TaskGraph::Outcome::kChanged);
    EXPECT_EQ(run.task.state, TaskState::kStaged);
  }
  // What the batch reports done is in the store already.
  for (const PartitionTask& t : Tasks(job->job.id)) {
    EXPECT_EQ(t.state, TaskState::kStaged) << t.partition;
    EXPECT_EQ(t.rows_written, 1);
    EXPECT_EQ(t.attempts, 1);
    EXPECT_FALSE(t.output_fingerprint.empty());
    EXPECT_EQ(engine_.StagedRows(job->job.id, "daily", t.partition), 1);
  }
  EXPECT_EQ(observer_.checkpointed(TaskState::kStaged), 3);
}

TEST_F(RecomputeStepTest, APartitionEqualToItsPublishedVersionIsReleased) {
  ActiveJob* first = Running(Request("daily", "2025-01-01", "2025-01-02"));
  std::vector<PartitionRun> runs = Runs(first, {0});
  Run(first, &runs);
  Published(first);

  ActiveJob* again = Running(Request("daily", "2025-01-01", "2025-01-02"));
  runs = Runs(again, {0});
  Run(again, &runs);
  ASSERT_TRUE(runs[0].done);
  EXPECT_EQ(runs[0].outcome, TaskGraph::Outcome::kUnchanged);
  EXPECT_EQ(Tasks(again->job.id)[0].state, TaskState::kUnchanged);
  // The engine let go of it: nothing of it is the job's to publish.
  EXPECT_EQ(Calls("ReleasePartitions", again->job.id), 1);
  EXPECT_EQ(engine_.StagedRows(again->job.id, "daily", "2025-01-01"),
            std::nullopt);
  EXPECT_EQ(observer_.checkpointed(TaskState::kUnchanged), 1);
}

TEST_F(RecomputeStepTest, ADependentOfUnchangedInputsIsSkippedWithoutStaging) {
  const BackfillRequest request =
      Request("daily", "2025-01-01", "2025-01-02", /*downstream=*/true);
  ActiveJob* first = Running(request);
  ASSERT_EQ(first->tasks.size(), 2u);  // daily, then rollup
  std::vector<PartitionRun> runs = Runs(first, {0, 1});
  Run(first, &runs);
  Published(first);

  ActiveJob* again = Running(request);
  {
    // The runner takes the ready daily partition from the graph.
    absl::MutexLock lock(jobs_.mu());
    again->graph->Requeue();
    ASSERT_EQ(again->graph->Pop(), std::optional<size_t>(0));
  }
  runs = Runs(again, {0});
  Run(again, &runs);
  ASSERT_EQ(runs[0].outcome, TaskGraph::Outcome::kUnchanged);
  {
    // ... and hands the outcome back to it.
    absl::MutexLock lock(jobs_.mu());
    again->tasks.Set(0, runs[0].task);
    again->graph->Done(0, runs[0].outcome);
  }
  runs = Runs(again, {1});
  ASSERT_TRUE(runs[0].may_skip);
  Run(again, &runs);
  EXPECT_TRUE(runs[0].done);
  EXPECT_FALSE(runs[0].ran);
  EXPECT_EQ(runs[0].outcome, TaskGraph::Outcome::kSkipped);
  const PartitionTask rollup = Tasks(again->job.id)[1];
  EXPECT_EQ(rollup.dataset, "rollup");
  EXPECT_EQ(rollup.state, TaskState::kSkipped);
  // What the warehouse keeps holding, as the lineage recorded it.
  EXPECT_EQ(rollup.output_fingerprint,
            Tasks(first->job.id)[1].output_fingerprint);
  int64_t staged_rollup = 0;
  for (const Call& c : engine_.call_log()) {
    staged_rollup += c.method == "StagePartition" &&
                     c.job_id == again->job.id && c.dataset == "rollup";
  }
  EXPECT_EQ(staged_rollup, 0);
}

TEST_F(RecomputeStepTest, AFailureThatWillNotPassFailsTheJob) {
  engine_.SetHook([](const Call& call) {
    return call.method == "StagePartition"
               ? absl::InvalidArgumentError("no such column: amount")
               : absl::OkStatus();
  });
  ActiveJob* job = Running(Request("daily", "2025-01-01", "2025-01-02"));
  std::vector<PartitionRun> runs = Runs(job, {0});
  Run(job, &runs);
  EXPECT_TRUE(runs[0].failed);
  EXPECT_EQ(Tasks(job->job.id)[0].state, TaskState::kFailed);
  const Job stored = Stored(job->job.id);
  EXPECT_EQ(stored.state, JobState::kFailed);
  EXPECT_THAT(stored.message, HasSubstr("partition 2025-01-01 of daily failed "
                                        "after 1 attempt, nothing was "
                                        "published: no such column: amount"));
  EXPECT_EQ(PhaseOf(job), JobPhase::kFailing);
}

TEST_F(RecomputeStepTest, AnotherFailureIsTriedAgainAfterABackoff) {
  options().retry_backoff = absl::Milliseconds(100);
  engine_.SetHook([](const Call& call) {
    return call.method == "StagePartition" ? absl::InternalError("crashed")
                                           : absl::OkStatus();
  });
  ActiveJob* job = Running(Request("daily", "2025-01-01", "2025-01-02"));
  std::vector<PartitionRun> runs = Runs(job, {0});
  const absl::Time start = clock_.Now();
  Run(job, &runs);
  EXPECT_FALSE(runs[0].done || runs[0].failed);
  const PartitionTask task = Tasks(job->job.id)[0];
  EXPECT_EQ(task.state, TaskState::kPending);
  EXPECT_EQ(task.attempts, 1);
  EXPECT_EQ(task.last_error, "crashed");
  EXPECT_EQ(clock_.Now() - start, absl::Milliseconds(100));
  EXPECT_EQ(Stored(job->job.id).state, JobState::kRunning);
}

TEST_F(RecomputeStepTest, AFullWarehouseSpendsNoAttempt) {
  engine_.SetHook([](const Call& call) {
    return call.method == "StagePartition"
               ? absl::ResourceExhaustedError("database or disk is full")
               : absl::OkStatus();
  });
  ActiveJob* job = Running(Request("daily", "2025-01-01", "2025-01-02"));
  std::vector<PartitionRun> runs = Runs(job, {0});
  Run(job, &runs);
  EXPECT_FALSE(runs[0].done || runs[0].failed);
  const PartitionTask task = Tasks(job->job.id)[0];
  EXPECT_EQ(task.state, TaskState::kPending);
  EXPECT_EQ(task.attempts, 0);
  EXPECT_EQ(observer_.failing(Storage::kWarehouse), 1);
  EXPECT_EQ(Stored(job->job.id).state, JobState::kRunning);
}

TEST_F(RecomputeStepTest, ABatchStartsOnlyWhatItStillHolds) {
  ActiveJob* job = Running(Request("daily", "2025-01-01", "2025-01-04"));
  std::vector<PartitionRun> runs = Runs(job, {0, 1, 2});
  // The second was taken over by another batch; the batch must hand back
  // the third (another job waits for a worker).
  const ClaimPartition claim = [](PartitionRun* run, bool* go_on) {
    if (run->index == 1) {
      run->taken = true;
      return false;
    }
    run->claimed = true;
    if (go_on != nullptr) *go_on = false;
    return true;
  };
  RunBatch(ctx(), job, writer(), claim, &runs);
  EXPECT_TRUE(runs[0].done);
  EXPECT_TRUE(runs[1].taken);
  EXPECT_FALSE(runs[1].ran);
  EXPECT_EQ(runs[2].spec, nullptr);  // handed back, never started
  EXPECT_FALSE(runs[2].ran);
  EXPECT_EQ(Calls("StagePartition", job->job.id), 1);
}

TEST_F(RecomputeStepTest, StagingIsPreparedWithoutTheCutOffPartitions) {
  const Job created = CreateJob(Request("daily", "2025-01-01", "2025-01-04"));
  ActiveJob* job = Hold(created, JobPhase::kPreparing, /*prepare=*/false);
  TaskTable tasks = job->tasks;
  tasks.set_state(1, TaskState::kUnchanged);
  ASSERT_TRUE(PrepareStaging(ctx(), job->layout, tasks).ok());
  EXPECT_TRUE(engine_.IsPrepared(created.id));
  std::vector<std::string> released;
  for (const Call& c : engine_.call_log()) {
    if (c.method == "ReleasePartitions") released.push_back(c.partition);
  }
  EXPECT_EQ(released, std::vector<std::string>{"2025-01-02"});

  // Once per process: a job prepared here is not prepared again.
  ASSERT_TRUE(EnsurePrepared(ctx(), job).ok());
  ASSERT_TRUE(EnsurePrepared(ctx(), job).ok());
  EXPECT_EQ(Calls("PrepareJob", created.id), 2);
}

}  // namespace
}  // namespace core_recompute_step_test
}  // namespace backfill
