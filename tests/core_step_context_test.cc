// Tests of what the steps of a job's run share (core/run/step_context.h,
// core/run/job_table.h): a durable write retried while storage fails for a
// reason that may pass, the durable move of a job (store, then memory, then
// the observer; refused outside the state machine's table), and the job
// table's answers about what holds partitions.

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/time/time.h"
#include "core/run/job_table.h"
#include "core/run/step_context.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/step_fixture.h"

namespace backfill {
namespace core_step_context_test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using Storage = JobObserver::Storage;

class StepContextTest : public testing::StepFixture {};

TEST_F(StepContextTest, AFailureThatMayPassIsRetriedWithBackoffAndReported) {
  options().retry_backoff = absl::Milliseconds(100);
  options().max_backoff = absl::Milliseconds(250);
  int calls = 0;
  const absl::Time start = clock_.Now();
  absl::Status s =
      ctx().Persist(Storage::kStateStore, "writing something", [&] {
        return ++calls <= 3 ? absl::UnavailableError("busy") : absl::OkStatus();
      });
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(calls, 4);
  // 100 ms, then doubled, then capped at 250 ms.
  EXPECT_EQ(clock_.Now() - start, absl::Milliseconds(100 + 200 + 250));
  EXPECT_EQ(observer_.failing(Storage::kStateStore), 3);
  EXPECT_EQ(observer_.recovered(Storage::kStateStore), 1);
  EXPECT_EQ(observer_.failing(Storage::kWarehouse), 0);
}

TEST_F(StepContextTest, AFailureThatWillNotPassIsReturnedAtOnce) {
  int calls = 0;
  absl::Status s = ctx().Persist(Storage::kWarehouse, "writing", [&] {
    ++calls;
    return absl::InvalidArgumentError("bad row");
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(observer_.failing(Storage::kWarehouse), 0);
  EXPECT_TRUE(MayPass(absl::ResourceExhaustedError("disk full")));
  EXPECT_TRUE(MayPass(absl::UnavailableError("busy")));
  EXPECT_FALSE(MayPass(absl::DataLossError("corrupt")));
}

TEST_F(StepContextTest, ARunnerThatStopsGivesUpRetrying) {
  StartTable();
  ASSERT_TRUE(jobs_.Stop());
  int calls = 0;
  absl::Status s = ctx().Persist(Storage::kStateStore, "writing the task", [&] {
    ++calls;
    return absl::ResourceExhaustedError("disk full");
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kCancelled);
  EXPECT_THAT(s.message(), HasSubstr("writing the task"));
  EXPECT_EQ(calls, 1);
}

TEST_F(StepContextTest, AMoveIsRecordedInTheStoreThenInMemoryThenObserved) {
  const Job stored = CreateJob(Request("daily", "2025-01-01", "2025-01-03"));
  ActiveJob* job = Hold(stored, JobPhase::kPreparing);
  uint64_t version = 0;
  ASSERT_TRUE(
      jobs_.WaitForChange(stored.id, &version, absl::Now(), JobView::kBasic)
          .ok());
  ASSERT_TRUE(
      ctx()
          .Move(job, JobState::kRunning, "recomputing", JobPhase::kPreparing)
          .ok());
  EXPECT_EQ(Stored(stored.id).state, JobState::kRunning);
  EXPECT_EQ(Stored(stored.id).message, "recomputing");
  {
    absl::MutexLock lock(jobs_.mu());
    EXPECT_EQ(job->state, JobState::kRunning);
    EXPECT_EQ(job->job.message, "recomputing");
  }
  ASSERT_EQ(observer_.transitions().size(), 1u);
  EXPECT_EQ(observer_.transitions()[0].from, JobState::kQueued);
  EXPECT_EQ(observer_.transitions()[0].to, JobState::kRunning);
  // Watchers see a new version at once.
  const uint64_t before = version;
  ASSERT_TRUE(jobs_
                  .WaitForChange(stored.id, &version,
                                 absl::Now() + absl::Seconds(5),
                                 JobView::kBasic)
                  .ok());
  EXPECT_GT(version, before);
}

TEST_F(StepContextTest, AMoveOutsideTheStateMachineWritesNothing) {
  const Job stored = CreateJob(Request("daily", "2025-01-01", "2025-01-02"));
  ActiveJob* job = Hold(stored, JobPhase::kWaiting);
  absl::Status s = ctx().Move(job, JobState::kSucceeded, "done", std::nullopt);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Stored(stored.id).state, JobState::kQueued);
  EXPECT_THAT(observer_.transitions(), IsEmpty());
}

TEST_F(StepContextTest, AMoveOfAJobThatLeftTheRequiredPhaseIsAborted) {
  const Job stored = CreateJob(Request("daily", "2025-01-01", "2025-01-02"));
  ActiveJob* job = Hold(stored, JobPhase::kCancelling);
  absl::Status s =
      ctx().Move(job, JobState::kRunning, "recomputing", JobPhase::kPreparing);
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted);
  EXPECT_EQ(Stored(stored.id).state, JobState::kQueued);
}

TEST_F(StepContextTest, AHeldJobBlocksNobodyAndAnEndedOneLeavesAdmission) {
  const Job first = CreateJob(Request("daily", "2025-01-01", "2025-01-03"));
  MoveTo(first.id, {JobState::kRunning, JobState::kValidating});
  ActiveJob* job = Hold(Stored(first.id), JobPhase::kFinishing);
  const Plan later =
      CreateJob(Request("daily", "2025-01-02", "2025-01-04")).plan;
  std::vector<Conflict> conflicts;
  EXPECT_EQ(jobs_.Blocking(later, "", &conflicts, 10).size(), 1u);
  EXPECT_EQ(conflicts.size(), 1u);  // 2025-01-02 of daily
  ASSERT_TRUE(ctx()
                  .Move(job, JobState::kAwaitingApproval, "held",
                        JobPhase::kFinishing, JobPhase::kHeld)
                  .ok());
  EXPECT_EQ(PhaseOf(job), JobPhase::kHeld);
  EXPECT_THAT(jobs_.Blocking(later, "", nullptr, 0), IsEmpty());
  {
    absl::MutexLock lock(jobs_.mu());
    EXPECT_TRUE(jobs_.admission().IsHeld(first.id));
    jobs_.EndLocked(job, JobPhase::kDone);
    EXPECT_FALSE(jobs_.admission().Contains(first.id));
    // Forgotten once no closure uses it.
    ++job->busy;
    jobs_.ReleaseLocked(job);
    EXPECT_EQ(jobs_.FindLocked(first.id), nullptr);
  }
}

TEST_F(StepContextTest, ARepeatedSubmitDoesNotWaitForItsOwnJob) {
  BackfillRequest request = Request("daily", "2025-01-01", "2025-01-03");
  Job stored = CreateJob(request);
  stored.idempotency_key = "key-1";  // as submitted with a key
  Hold(stored, JobPhase::kRunning);
  EXPECT_EQ(jobs_.Blocking(stored.plan, "key-2", nullptr, 0).size(), 1u);
  EXPECT_THAT(jobs_.Blocking(stored.plan, "key-1", nullptr, 0), IsEmpty());
}

TEST_F(StepContextTest, ADescriptionNamesFiveJobsAndCountsTheRest) {
  std::vector<Admission::Overlap> overlaps;
  for (int i = 1; i <= 7; ++i) {
    const Job stored = CreateJob(Request("daily", "2025-01-01", "2025-01-03"));
    Hold(stored, i == 1 ? JobPhase::kPaused : JobPhase::kWaiting);
    overlaps.push_back({stored.id, 2});
  }
  {
    absl::MutexLock lock(jobs_.mu());
    jobs_.FindLocked("bf-1")->state = JobState::kPaused;
  }
  const std::string described = jobs_.Describe(overlaps);
  EXPECT_THAT(described,
              HasSubstr("paused job bf-1 (PAUSED, 2 shared partitions)"));
  EXPECT_THAT(described, HasSubstr("bf-5 (QUEUED, 2 shared partitions)"));
  EXPECT_FALSE(absl::StrContains(described, "bf-6"));
  EXPECT_TRUE(absl::EndsWith(described, ", ... and 2 more jobs"));
}

TEST_F(StepContextTest, ReservedHeldOverlapsAreGivenBackHeld) {
  const Job held = CreateJob(Request("daily", "2025-01-01", "2025-01-03"));
  MoveTo(held.id, {JobState::kRunning, JobState::kFailed});
  ActiveJob* h = Hold(Stored(held.id), JobPhase::kHeld);
  const Job newer = CreateJob(Request("daily", "2025-01-02", "2025-01-03"));
  Hold(newer, JobPhase::kWaiting);
  absl::MutexLock lock(jobs_.mu());
  std::vector<ActiveJob*> reserved = jobs_.ReserveHeldOverlapsLocked(newer.id);
  ASSERT_THAT(reserved, ElementsAre(h));
  EXPECT_EQ(h->phase, JobPhase::kSettling);
  EXPECT_EQ(h->busy, 1);
  // Reserved: a second reservation does not take it again.
  EXPECT_THAT(jobs_.ReserveHeldOverlapsLocked(newer.id), IsEmpty());
  jobs_.UnreserveHeldLocked(reserved);
  EXPECT_EQ(h->phase, JobPhase::kHeld);
  EXPECT_EQ(h->busy, 0);
}

}  // namespace
}  // namespace core_step_context_test
}  // namespace backfill
