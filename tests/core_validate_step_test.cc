// Tests of the validate step's decisions (core/run/validate_step.h) on the
// fake engine and the in-memory store, without a runner: a job whose checks
// pass goes on to PUBLISHING with its check results and diff recorded;
// staged rows lost after their checkpoints are recomputed (the job back to
// RUNNING, the partitions reopened), up to max_restage_rounds, then the job
// is VALIDATION_FAILED and held; failed `error` checks hold it
// VALIDATION_FAILED with what the operator can do; a dataset that requires
// approval holds it AWAITING_APPROVAL; the integrity check prepares the
// staging of a job this process did not prepare.

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/run/validate_step.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/step_fixture.h"

namespace backfill {
namespace core_validate_step_test {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

class ValidateStepTest : public testing::StepFixture {
 protected:
  // A VALIDATING job of `dataset` over [from, to), in kFinishing, every
  // partition staged with one row and checkpointed.
  ActiveJob* Staged(const std::string& dataset, const std::string& from,
                    const std::string& to) {
    return StagedJob(Request(dataset, from, to), {JobState::kValidating});
  }

  absl::Status Validate(ActiveJob* job, bool* done) {
    return ValidateJob(ctx(), job, done);
  }

  bool Held(const std::string& id) {
    absl::MutexLock lock(jobs_.mu());
    return jobs_.admission().IsHeld(id);
  }
};

TEST_F(ValidateStepTest, AJobThatPassesGoesOnToPublishingWithItsDiff) {
  ActiveJob* job = Staged("daily", "2025-01-01", "2025-01-04");
  bool done = true;
  ASSERT_TRUE(Validate(job, &done).ok());
  EXPECT_FALSE(done);
  const Job stored = Stored(job->job.id);
  EXPECT_EQ(stored.state, JobState::kPublishing);
  EXPECT_EQ(stored.message,
            "publishing 3 partitions of 1 dataset(s) in one transaction");
  {
    absl::MutexLock lock(jobs_.mu());
    EXPECT_TRUE(job->validated);
  }
  absl::StatusOr<std::vector<CheckResult>> results =
      store_.ListCheckResults(job->job.id);
  ASSERT_TRUE(results.ok());
  EXPECT_THAT(*results, Not(IsEmpty()));
  absl::StatusOr<std::optional<JobDiff>> diff =
      store_.GetJobDiff(job->job.id, "", false);
  ASSERT_TRUE(diff.ok() && diff->has_value());
  ASSERT_EQ((*diff)->datasets.size(), 1u);
  EXPECT_EQ((*diff)->datasets[0].partitions.size(), 3u);
  // The checks and the diff are both the validation's time.
  EXPECT_EQ(observer_.validations(), 2);
}

TEST_F(ValidateStepTest, LostStagingIsRecomputed) {
  ActiveJob* job = Staged("daily", "2025-01-01", "2025-01-04");
  engine_.SetStagedRows(job->job.id, "daily", "2025-01-02", 0);
  bool done = false;
  ASSERT_TRUE(Validate(job, &done).ok());
  EXPECT_TRUE(done);
  const Job stored = Stored(job->job.id);
  EXPECT_EQ(stored.state, JobState::kRunning);
  EXPECT_EQ(stored.message,
            "1 partition lost staged rows after their checkpoints (daily: "
            "2025-01-02 (staged 0, checkpoint 1)); recomputing 1 partition");
  const PartitionTask reopened = Tasks(job->job.id)[1];
  EXPECT_EQ(reopened.state, TaskState::kPending);
  EXPECT_EQ(reopened.attempts, 0);
  EXPECT_EQ(reopened.last_error,
            "its staged rows were lost after the checkpoint");
  absl::MutexLock lock(jobs_.mu());
  EXPECT_EQ(job->phase, JobPhase::kRunning);
  EXPECT_EQ(job->restage_rounds, 1);
  EXPECT_EQ(job->tasks.state(1), TaskState::kPending);
  EXPECT_EQ(job->graph->state(1), TaskGraph::Node::kPending);
  EXPECT_EQ(job->graph->state(0), TaskGraph::Node::kDone);
}

TEST_F(ValidateStepTest, StagingThatKeepsLosingRowsFailsValidation) {
  options().max_restage_rounds = 2;
  ActiveJob* job = Staged("daily", "2025-01-01", "2025-01-03");
  {
    absl::MutexLock lock(jobs_.mu());
    job->restage_rounds = 2;
  }
  engine_.SetStagedRows(job->job.id, "daily", "2025-01-01", 0);
  bool done = false;
  ASSERT_TRUE(Validate(job, &done).ok());
  EXPECT_TRUE(done);
  const Job stored = Stored(job->job.id);
  EXPECT_EQ(stored.state, JobState::kValidationFailed);
  EXPECT_THAT(stored.message, HasSubstr("even after recomputing them 2 times"));
  // Lost staging is the warehouse's fault: no advice to override.
  EXPECT_THAT(stored.message, Not(HasSubstr("override_validation")));
  EXPECT_EQ(PhaseOf(job), JobPhase::kHeld);
  EXPECT_TRUE(Held(job->job.id));
  ASSERT_EQ(observer_.finished().size(), 1u);
  EXPECT_EQ(observer_.finished()[0].second, JobState::kValidationFailed);
}

TEST_F(ValidateStepTest, FailedChecksHoldTheJobWithWhatToDoNext) {
  engine_.SetValidationFailures("daily", {"duplicate key (day)"});
  ActiveJob* job = Staged("daily", "2025-01-01", "2025-01-03");
  bool done = false;
  ASSERT_TRUE(Validate(job, &done).ok());
  EXPECT_TRUE(done);
  const Job stored = Stored(job->job.id);
  EXPECT_EQ(stored.state, JobState::kValidationFailed);
  EXPECT_THAT(stored.message,
              HasSubstr("validation failed, nothing was published: "));
  EXPECT_THAT(stored.message, HasSubstr("duplicate key (day)"));
  EXPECT_THAT(stored.message,
              HasSubstr("`ApproveBackfill` " + job->job.id +
                        ", `override_validation` and a `reason`"));
  EXPECT_EQ(PhaseOf(job), JobPhase::kHeld);
  // The diff is there to read before an override.
  absl::StatusOr<std::optional<JobDiff>> diff =
      store_.GetJobDiff(job->job.id, "", false);
  ASSERT_TRUE(diff.ok());
  EXPECT_TRUE(diff->has_value());
}

TEST_F(ValidateStepTest, ADatasetThatRequiresApprovalHoldsTheJob) {
  ActiveJob* job = Staged("approved", "2025-01-01", "2025-01-02");
  bool done = false;
  ASSERT_TRUE(Validate(job, &done).ok());
  EXPECT_TRUE(done);
  EXPECT_EQ(Stored(job->job.id).state, JobState::kAwaitingApproval);
  EXPECT_EQ(PhaseOf(job), JobPhase::kHeld);
  EXPECT_TRUE(Held(job->job.id));
  absl::MutexLock lock(jobs_.mu());
  EXPECT_TRUE(job->validated);
}

TEST_F(ValidateStepTest, TheIntegrityCheckPreparesStagingFirst) {
  ActiveJob* job = Staged("daily", "2025-01-01", "2025-01-03");
  // As after a restart: the engine forgot the job's layout.
  engine_.Restart();
  {
    absl::MutexLock lock(jobs_.mu());
    job->prepared = false;
  }
  JobLayout layout;
  {
    absl::MutexLock lock(jobs_.mu());
    layout = job->layout;
  }
  absl::StatusOr<ValidationOutcome> outcome =
      ValidateIntegrity(ctx(), job, layout);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_TRUE(engine_.IsPrepared(job->job.id));
  EXPECT_THAT(outcome->lost, IsEmpty());
  EXPECT_THAT(outcome->failures, IsEmpty());

  engine_.SetStagedRows(job->job.id, "daily", "2025-01-02", 5);
  outcome = ValidateIntegrity(ctx(), job, layout);
  ASSERT_TRUE(outcome.ok());
  EXPECT_EQ(outcome->lost, std::vector<size_t>{1});
  EXPECT_EQ(outcome->lost_summary,
            "daily: 2025-01-02 (staged 5, checkpoint 1)");
}

}  // namespace
}  // namespace core_validate_step_test
}  // namespace backfill
