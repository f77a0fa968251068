// Tests of recovery (core/run/recovery.h) on the fake engine and the
// in-memory store, without a runner: what becomes at start-up of each job
// the store holds unfinished — its phase, the order it is admitted in, its
// attempts in flight started over — of a job that can no longer run under
// the pipelines in force, and of the staging jobs that ended left behind.

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/model/live_catalog.h"
#include "core/model/pipeline_loader.h"
#include "core/run/recovery.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/step_fixture.h"

namespace backfill {
namespace core_recovery_test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

class RecoveryTest : public testing::StepFixture {
 protected:
  // A job of daily over [from, to), moved in the store along `states`.
  std::string JobIn(const std::vector<JobState>& states,
                    const std::string& from = "2025-01-01",
                    const std::string& to = "2025-01-03") {
    const Job job = CreateJob(Request("daily", from, to));
    MoveTo(job.id, states);
    return job.id;
  }

  // Each recovered job as "id:phase".
  static std::vector<std::string> Described(const RecoveredJobs& recovered) {
    std::vector<std::string> out;
    for (const std::unique_ptr<ActiveJob>& job : recovered.jobs) {
      out.push_back(job->job.id + ":" + PhaseName(job->phase));
    }
    return out;
  }
  static std::string PhaseName(JobPhase phase) {
    switch (phase) {
      case JobPhase::kWaiting:
        return "waiting";
      case JobPhase::kPaused:
        return "paused";
      case JobPhase::kFinishing:
        return "finishing";
      case JobPhase::kHeld:
        return "held";
      default:
        return "other";
    }
  }

  // The pipelines in force after a reload that dropped `daily`.
  std::unique_ptr<LiveCatalog> WithoutDaily() {
    absl::StatusOr<Catalog> catalog = LoadPipelineTexts({{"p.yaml", R"yaml(
datasets:
  - name: orders
    kind: source
    table: raw_orders
    partition: {column: day, grain: day}
)yaml"}});
    EXPECT_TRUE(catalog.ok()) << catalog.status();
    without_ = std::make_unique<Catalog>(*std::move(catalog));
    return LiveCatalog::Borrowing(without_.get());
  }
  std::unique_ptr<Catalog> without_;
};

TEST_F(RecoveryTest, EachUnfinishedJobResumesInItsPhaseStartedOnesFirst) {
  const std::string queued = JobIn({});
  const std::string running = JobIn({JobState::kRunning});
  const std::string paused = JobIn({JobState::kRunning, JobState::kPaused});
  const std::string validating =
      JobIn({JobState::kRunning, JobState::kValidating});
  const std::string awaiting = JobIn(
      {JobState::kRunning, JobState::kValidating, JobState::kAwaitingApproval});
  const std::string failed_kept =
      JobIn({JobState::kRunning, JobState::kFailed});
  engine_.SetStagedRows(failed_kept, "daily", "2025-01-01", 1);
  JobIn({JobState::kRunning, JobState::kFailed});  // kept no staging
  JobIn({JobState::kCancelled});

  absl::StatusOr<RecoveredJobs> recovered = RecoverJobs(ctx(), *live_);
  ASSERT_TRUE(recovered.ok()) << recovered.status();
  EXPECT_THAT(Described(*recovered),
              ElementsAre(running + ":waiting", paused + ":paused",
                          validating + ":finishing", awaiting + ":held",
                          failed_kept + ":held", queued + ":waiting"));
  EXPECT_THAT(recovered->rolled_back, IsEmpty());
  for (const std::unique_ptr<ActiveJob>& job : recovered->jobs) {
    EXPECT_EQ(job->catalog.get(), catalog_.get());
  }
}

TEST_F(RecoveryTest, AttemptsInFlightStartOverAndCheckpointsStay) {
  const std::string id =
      JobIn({JobState::kRunning}, "2025-01-01", "2025-01-04");
  std::vector<PartitionTask> tasks = Tasks(id);
  tasks[0].state = TaskState::kStaged;
  tasks[1].state = TaskState::kRunning;
  tasks[2].state = TaskState::kUnchanged;
  for (const PartitionTask& t : tasks) ASSERT_TRUE(store_.UpdateTask(t).ok());
  ASSERT_TRUE(RecoverJobs(ctx(), *live_).ok());
  tasks = Tasks(id);
  EXPECT_EQ(tasks[0].state, TaskState::kStaged);
  EXPECT_EQ(tasks[1].state, TaskState::kPending);
  EXPECT_EQ(tasks[2].state, TaskState::kUnchanged);
}

TEST_F(RecoveryTest, AJobThatCanNoLongerRunEndsWithNothingPublished) {
  const std::string running = JobIn({JobState::kRunning});
  const std::string paused = JobIn({JobState::kRunning, JobState::kPaused});
  engine_.SetStagedRows(running, "daily", "2025-01-01", 1);
  std::unique_ptr<LiveCatalog> live = WithoutDaily();
  absl::StatusOr<RecoveredJobs> recovered = RecoverJobs(ctx(), *live);
  ASSERT_TRUE(recovered.ok()) << recovered.status();
  EXPECT_THAT(recovered->jobs, IsEmpty());
  const Job failed = Stored(running);
  EXPECT_EQ(failed.state, JobState::kFailed);
  EXPECT_THAT(failed.message,
              HasSubstr("cannot resume after restart: dataset \"daily\" is no "
                        "longer a derived dataset"));
  EXPECT_EQ(Stored(paused).state, JobState::kCancelled);
  for (const PartitionTask& t : Tasks(running)) {
    EXPECT_EQ(t.state, TaskState::kCancelled);
  }
  EXPECT_EQ(engine_.StagedRows(running, "daily", "2025-01-01"), std::nullopt);
  EXPECT_EQ(observer_.finished().size(), 2u);
}

TEST_F(RecoveryTest, AJobThatMayHavePublishedIsNeverEndedOnAReload) {
  const std::string publishing =
      JobIn({JobState::kRunning, JobState::kValidating, JobState::kPublishing});
  std::unique_ptr<LiveCatalog> live = WithoutDaily();
  absl::StatusOr<RecoveredJobs> recovered = RecoverJobs(ctx(), *live);
  ASSERT_TRUE(recovered.ok()) << recovered.status();
  // It finishes with what it has: its publish (or the record of one the
  // warehouse committed) decides, not the pipelines' reload.
  EXPECT_THAT(Described(*recovered), ElementsAre(publishing + ":finishing"));
  EXPECT_EQ(Stored(publishing).state, JobState::kPublishing);
}

TEST_F(RecoveryTest, StagingLeftByEndedJobsIsSwept) {
  const std::string ended = JobIn({JobState::kCancelled});
  engine_.SetStagedRows(ended, "daily", "2025-01-01", 1);
  const std::string unfinished = JobIn({JobState::kRunning});
  engine_.SetStagedRows(unfinished, "daily", "2025-01-01", 1);
  // Ended in the store, but held by the table (its end is being written).
  const Job held = CreateJob(Request("daily", "2025-01-05", "2025-01-06"));
  MoveTo(held.id, {JobState::kCancelled});
  Hold(Stored(held.id), JobPhase::kSettling, /*prepare=*/false);
  engine_.SetStagedRows(held.id, "daily", "2025-01-05", 1);

  SweepOrphans(ctx());
  EXPECT_EQ(engine_.StagedRows(ended, "daily", "2025-01-01"), std::nullopt);
  EXPECT_EQ(engine_.StagedRows(unfinished, "daily", "2025-01-01"), 1);
  EXPECT_EQ(engine_.StagedRows(held.id, "daily", "2025-01-05"), 1);
}

}  // namespace
}  // namespace core_recovery_test
}  // namespace backfill
