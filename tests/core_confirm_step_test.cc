// Tests of the confirm step's end of a job (core/run/confirm_step.h
// ConfirmJob, CheckConfirmable) on the fake engine and the in-memory store,
// without a runner (the consumers themselves are confirmed in
// core_consumers_test.cc): a CONFIRMING job ends SUCCEEDED with its staging
// dropped and its end reported once — not again when its consumers are
// confirmed again — and only a published job may be confirmed again.

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/run/confirm_step.h"
#include "core/run/publish_step.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/step_fixture.h"

namespace backfill {
namespace core_confirm_step_test {
namespace {

using ::testing::HasSubstr;

class ConfirmStepTest : public testing::StepFixture {
 protected:
  // A published (CONFIRMING) job of daily over [from, to).
  ActiveJob* Confirming(const std::string& from, const std::string& to) {
    ActiveJob* job = PublishingJob(Request("daily", from, to));
    EXPECT_TRUE(PublishJob(ctx(), job).ok());
    return job;
  }
};

TEST_F(ConfirmStepTest, AJobWithoutConsumersSucceedsAndItsEndIsReported) {
  ActiveJob* job = Confirming("2025-01-01", "2025-01-03");
  const std::string id = job->job.id;
  absl::StatusOr<bool> first_end = ConfirmJob(ctx(), job);
  ASSERT_TRUE(first_end.ok()) << first_end.status();
  EXPECT_TRUE(*first_end);
  const Job stored = Stored(id);
  EXPECT_EQ(stored.state, JobState::kSucceeded);
  EXPECT_EQ(stored.message,
            "published; no downstream consumers are declared, so there is "
            "nothing to confirm");
  EXPECT_EQ(engine_.StagedRows(id, "daily", "2025-01-01"), std::nullopt);
  ASSERT_EQ(observer_.finished().size(), 1u);
  EXPECT_EQ(observer_.finished()[0].second, JobState::kSucceeded);
}

TEST_F(ConfirmStepTest, AConfirmationAskedForAgainIsNotCountedAsAnEnd) {
  ActiveJob* job = Confirming("2025-01-01", "2025-01-02");
  {
    absl::MutexLock lock(jobs_.mu());
    job->reconfirming = true;
  }
  absl::StatusOr<bool> first_end = ConfirmJob(ctx(), job);
  ASSERT_TRUE(first_end.ok());
  EXPECT_FALSE(*first_end);
  EXPECT_EQ(Stored(job->job.id).state, JobState::kSucceeded);
  EXPECT_TRUE(observer_.finished().empty());
}

TEST_F(ConfirmStepTest, OnlyAPublishedJobMayBeConfirmedAgain) {
  ActiveJob* job = Confirming("2025-01-01", "2025-01-02");
  Job stored = Stored(job->job.id);
  absl::Status s = CheckConfirmable(stored, *catalog_);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(),
              HasSubstr("is CONFIRMING: it is confirming its consumers now"));

  ASSERT_TRUE(ConfirmJob(ctx(), job).ok());
  stored = Stored(job->job.id);
  EXPECT_TRUE(CheckConfirmable(stored, *catalog_).ok());

  const Job queued = CreateJob(Request("daily", "2025-01-05", "2025-01-06"));
  s = CheckConfirmable(queued, *catalog_);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("it has not published yet"));
}

}  // namespace
}  // namespace core_confirm_step_test
}  // namespace backfill
