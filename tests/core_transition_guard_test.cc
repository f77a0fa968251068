// The transition guards every StateStore checks a job's move with: what
// each lets through and the words of each refusal.

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "core/model/job_state_machine.h"
#include "core/model/transition_guard.h"
#include "gtest/gtest.h"

namespace backfill {
namespace core_transition_guard_test {
namespace {

using S = JobState;

TEST(TransitionGuardTest, AMoveInTheTableFromTheExpectedStatePasses) {
  auto from = GuardTransition("bf-1", S::kQueued, S::kQueued, S::kRunning);
  ASSERT_TRUE(from.ok()) << from.status();
  EXPECT_EQ(*from, S::kQueued);
  // No expected state: any state the table lets move.
  from = GuardTransition("bf-1", S::kPaused, std::nullopt, S::kQueued);
  ASSERT_TRUE(from.ok()) << from.status();
  EXPECT_EQ(*from, S::kPaused);
}

TEST(TransitionGuardTest, EveryMoveTheTableRefusesIsRefusedNamingTheJob) {
  for (int f = 0; f < kJobStateCount; ++f) {
    for (int t = 0; t < kJobStateCount; ++t) {
      const S from = static_cast<S>(f), to = static_cast<S>(t);
      auto guarded = GuardTransition("bf-7", from, std::nullopt, to);
      EXPECT_EQ(guarded.ok(), CanTransition(from, to))
          << JobStateName(from) << " -> " << JobStateName(to);
      if (guarded.ok()) continue;
      EXPECT_EQ(guarded.status().code(), absl::StatusCode::kFailedPrecondition);
      EXPECT_EQ(guarded.status().message(),
                std::string("job bf-7: ") +
                    std::string(CheckTransition(from, to).message()));
    }
  }
}

TEST(TransitionGuardTest, AJobInAnotherStateIsRefusedWithWhatWasTried) {
  auto moved = GuardTransition("bf-2", S::kRunning, S::kQueued, S::kPaused);
  EXPECT_EQ(moved.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(moved.status().message(),
            "job bf-2 is RUNNING, not QUEUED; cannot move it to PAUSED");
  auto retried = GuardTransition("bf-2", S::kRunning, S::kFailed, S::kQueued,
                                 GuardedMove::kRetry);
  EXPECT_EQ(retried.status().message(), "job bf-2 is RUNNING, not FAILED");
  auto approved = GuardTransition("bf-2", S::kRunning, S::kAwaitingApproval,
                                  S::kPublishing, GuardedMove::kApproval);
  EXPECT_EQ(approved.status().message(),
            "job bf-2 is RUNNING, not AWAITING_APPROVAL; cannot approve it");
  // The expected state is checked before the table.
  auto both = GuardTransition("bf-2", S::kCancelled, S::kQueued, S::kRunning);
  EXPECT_EQ(both.status().message(),
            "job bf-2 is CANCELLED, not QUEUED; cannot move it to RUNNING");
}

TEST(TransitionGuardTest, AStoresErrorReadingTheStateIsReturnedAsItIs) {
  const absl::Status missing = absl::NotFoundError("no job bf-9");
  EXPECT_EQ(
      GuardTransition("bf-9", missing, std::nullopt, S::kRunning).status(),
      missing);
  EXPECT_EQ(GuardState("bf-9", missing, S::kQueued), missing);
}

TEST(TransitionGuardTest, GuardStateNeedsTheExpectedState) {
  EXPECT_TRUE(GuardState("bf-3", S::kQueued, S::kQueued).ok());
  absl::Status s = GuardState("bf-3", S::kRunning, S::kQueued);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), "job bf-3 is RUNNING, not QUEUED");
}

TEST(TransitionGuardTest, APublicationIsRecordedOnceFromPublishing) {
  // To record: PUBLISHING with nothing recorded yet.
  EXPECT_EQ(*GuardPublication("bf-4", S::kPublishing, false, S::kConfirming),
            true);
  // Recorded already: a repeat does nothing.
  EXPECT_EQ(*GuardPublication("bf-4", S::kPublishing, true, S::kConfirming),
            false);
  for (S past : PublishedStates()) {
    EXPECT_EQ(*GuardPublication("bf-4", past, false, S::kConfirming), false)
        << JobStateName(past);
  }
  // Any other state is refused: a publication must not resurrect a job.
  auto failed = GuardPublication("bf-4", S::kFailed, false, S::kConfirming);
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(failed.status().message(),
            "cannot record the publication of job bf-4: it is FAILED, not "
            "PUBLISHING");
  // And the move must be in the table.
  auto to_succeeded =
      GuardPublication("bf-4", S::kPublishing, false, S::kSucceeded);
  EXPECT_EQ(to_succeeded.status().message(),
            "job bf-4: a PUBLISHING job cannot become SUCCEEDED");
}

TEST(TransitionGuardTest, ARollbackNeedsEveryJobPublishedAndNotRolledBack) {
  EXPECT_TRUE(GuardRollback(
                  {{"bf-1", S::kSucceeded}, {"bf-2", S::kDownstreamUnhealthy}})
                  .ok());
  absl::Status s =
      GuardRollback({{"bf-1", S::kSucceeded}, {"bf-3", S::kConfirming}});
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(),
            "cannot record the rollback of job bf-3: it is CONFIRMING, not "
            "SUCCEEDED or DOWNSTREAM_UNHEALTHY");
}

}  // namespace
}  // namespace core_transition_guard_test
}  // namespace backfill
