// Replicas of a group in one process: two managers over the in-memory state
// store, the fake engine and the in-memory lease store, each with a lease
// keeper of its own (core/run/lease_keeper.h), as two backfilld processes
// would run on one PostgreSQL state store. What the group adds to a single
// process: a job runs on the replica that claimed it, jobs that share
// partitions run on one replica, in order, and a decision asked of a replica
// that does not run the job is taken by the one that does. And the lease
// keeper itself: its tokens, what it loses, what it gives back.
//
// The lease store's clock is the fixture's manual clock: a lease expires
// only when a test advances it.

#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "core/run/lease_keeper.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/job_runner_fixture.h"
#include "tests/testing/memory_lease_store.h"

namespace backfill {
namespace core_job_runner_group_test {
namespace {

using ::testing::ElementsAre;
using testing::JobRunnerTest;
using testing::MemoryLeaseStore;

constexpr absl::Duration kLease = absl::Seconds(30);

class JobRunnerGroupTest : public JobRunnerTest {
 protected:
  void SetUp() override {
    JobRunnerTest::SetUp();
    // The fixture's own single-process manager is not part of the group.
    manager_->Shutdown();
    manager_.reset();
    for (const char* name : {"a", "b"}) {
      NodeRecord self;
      self.name = name;
      self.address = std::string(name) + ":1";
      self.version = "test";
      self.started_at = clock_.Now();
      keepers_.push_back(
          std::make_unique<LeaseKeeper>(&leases_, self, kLease, &clock_));
      ManagerOptions options;
      options.workers = 2;
      options.leases = keepers_.back().get();
      replicas_.push_back(std::make_unique<BackfillManager>(
          catalog_.get(), &store_, &engine_, &clock_, &observer_, options));
      ASSERT_TRUE(replicas_.back()->Start().ok());
    }
  }
  void TearDown() override {
    gate_.OpenAll();
    hold_.OpenAll();
    for (auto& r : replicas_) r->Shutdown();
    replicas_.clear();
    keepers_.clear();
    JobRunnerTest::TearDown();
  }

  std::string SubmitTo(int replica, const BackfillRequest& r) {
    auto s = replicas_[replica]->Submit(r, {});
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? s->job.id : "";
  }
  // The holder of the job's live lease ("" when none).
  std::string HolderOf(const std::string& id) {
    auto leases = leases_.ListLeases();
    EXPECT_TRUE(leases.ok());
    for (const JobLease& lease : *leases) {
      if (lease.job_id == id && lease.live) return lease.node;
    }
    return "";
  }

  MemoryLeaseStore leases_{&clock_};
  std::vector<std::unique_ptr<LeaseKeeper>> keepers_;
  std::vector<std::unique_ptr<BackfillManager>> replicas_;
};

TEST_F(JobRunnerGroupTest, JobsSharingPartitionsRunOnOneReplicaInOrder) {
  BackfillRequest first = Request("daily", "2025-01-01", "2025-01-06");
  gate_.Close("bf-1");
  const std::string a_job = SubmitTo(0, first);
  ASSERT_EQ(a_job, "bf-1");
  // Claimed by one replica: the one it was submitted to, or the other if
  // that one's scan came first.
  std::string runner;
  ASSERT_TRUE(WaitUntil([&] {
    runner = HolderOf(a_job);
    return !runner.empty();
  }));
  const int elsewhere = runner == "a" ? 1 : 0;
  // Submitted to the other replica, a job that shares days with bf-1 is
  // claimed by bf-1's replica (at its next scan), and waits for bf-1 there.
  const std::string b_job =
      SubmitTo(elsewhere, Request("daily", "2025-01-04", "2025-01-09"));
  ASSERT_TRUE(
      WaitUntil([&] { return HolderOf(b_job) == runner; }, absl::Seconds(10)));
  // Its replica records what it waits for (a moment after it took it in).
  const Job waiting = WaitFor(b_job, [](const Job& j) {
    return absl::StrContains(j.message, "waiting for bf-1");
  });
  EXPECT_EQ(waiting.state, JobState::kQueued);
  // A job of other days is free to run at once, on either replica.
  const std::string other =
      SubmitTo(elsewhere, Request("daily", "2025-03-01", "2025-03-03"));
  EXPECT_EQ(WaitEnded(other).state, JobState::kSucceeded);
  EXPECT_EQ(Get(b_job).state, JobState::kQueued);

  gate_.Open("bf-1");
  EXPECT_EQ(WaitEnded(a_job).state, JobState::kSucceeded);
  EXPECT_EQ(WaitEnded(b_job).state, JobState::kSucceeded);
  // Per shared day, bf-1 staged it before bf-2 did.
  std::vector<std::string> shared;
  for (const std::string& e : Order()) {
    if (absl::StrContains(e, "2025-01-04")) shared.push_back(e);
  }
  EXPECT_THAT(shared,
              ElementsAre("bf-1/daily/2025-01-04", "bf-2/daily/2025-01-04"));
  // Each ended job's lease was given back.
  EXPECT_TRUE(WaitUntil([&] {
    return HolderOf(a_job).empty() && HolderOf(b_job).empty() &&
           HolderOf(other).empty();
  }));
}

TEST_F(JobRunnerGroupTest,
       ADecisionAskedOfAnotherReplicaIsTakenWhereTheJobRuns) {
  gate_.Close("bf-1");
  const std::string id =
      SubmitTo(0, Request("daily", "2025-01-01", "2025-01-06"));
  ASSERT_TRUE(WaitUntil([&] { return HolderOf(id) == "a"; }));
  auto paused = replicas_[1]->Pause(id, "quarter close", "erin");
  ASSERT_TRUE(paused.ok()) << paused.status();
  EXPECT_EQ(paused->state, JobState::kPaused);
  EXPECT_EQ(HolderOf(id), "a");
  // A refusal is answered as the replica that runs the job answers it.
  auto again = replicas_[1]->Approve(id, Approval{"erin", "ok"});
  EXPECT_EQ(again.status().code(), absl::StatusCode::kFailedPrecondition);
  auto cancelled = replicas_[1]->Cancel(id, "not needed", "erin");
  ASSERT_TRUE(cancelled.ok()) << cancelled.status();
  EXPECT_EQ(WaitEnded(id).state, JobState::kCancelled);
  auto events = store_.ListAuditEvents(id);
  ASSERT_TRUE(events.ok());
  ASSERT_GE(events->size(), 2u);
  EXPECT_THAT(events->back().message, ::testing::HasSubstr("not needed"));
}

TEST_F(JobRunnerGroupTest, ARollbackHoldsItsLeaseWhileTheScansGoOn) {
  const std::string id =
      SubmitTo(0, Request("daily", "2025-01-01", "2025-01-03"));
  ASSERT_EQ(WaitEnded(id).state, JobState::kSucceeded);
  ASSERT_TRUE(WaitUntil([&] { return HolderOf(id).empty(); }));
  // The warehouse's restore waits until the test lets it go on.
  absl::Notification restoring, go_on;
  engine_.SetHook([&](const testing::Call& call) {
    if (call.method == "Rollback") {
      restoring.Notify();
      go_on.WaitForNotification();
    }
    return OnCall(call);
  });
  absl::StatusOr<Job> rolled;
  std::thread rollback([&] {
    rolled = replicas_[0]->Rollback(id, RollbackRequest{"wrong logic", "erin"});
  });
  ASSERT_TRUE(restoring.WaitForNotificationWithTimeout(absl::Seconds(30)));
  // Two claim scans of each replica go by: the rollback's lease stays.
  absl::SleepFor(absl::Milliseconds(2500));
  EXPECT_EQ(HolderOf(id), "a");
  go_on.Notify();
  rollback.join();
  ASSERT_TRUE(rolled.ok()) << rolled.status();
  EXPECT_EQ(rolled->state, JobState::kRolledBack);
  EXPECT_TRUE(WaitUntil([&] { return HolderOf(id).empty(); }));
}

TEST_F(JobRunnerGroupTest, EachJobRunsOnTheReplicaItWasSubmittedTo) {
  // Jobs on disjoint days, sent to the two replicas in turn, each held at
  // its first partition: the other replica's scans leave a job that never
  // had a lease to the replica it was sent to.
  std::vector<std::string> ids;
  for (int i = 0; i < 10; ++i) {
    gate_.Close(absl::StrCat("bf-", i + 1));
    const std::string month = absl::StrFormat("2025-%02d", i + 1);
    ids.push_back(
        SubmitTo(i % 2, Request("daily", month + "-01", month + "-03")));
    ASSERT_EQ(ids.back(), absl::StrCat("bf-", i + 1));
    EXPECT_EQ(HolderOf(ids.back()), i % 2 == 0 ? "a" : "b");
  }
  // Scans of both replicas go by; nothing changes hands.
  absl::SleepFor(absl::Milliseconds(2500));
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(HolderOf(ids[i]), i % 2 == 0 ? "a" : "b") << ids[i];
  }
  gate_.OpenAll();
  for (const std::string& id : ids) {
    EXPECT_EQ(WaitEnded(id).state, JobState::kSucceeded) << id;
  }
}

// The keeper alone, over the lease store.
class LeaseKeeperTest : public ::testing::Test {
 protected:
  NodeRecord Self(const std::string& name) {
    NodeRecord self;
    self.name = name;
    self.address = name + ":1";
    self.version = "test";
    self.started_at = clock_.Now();
    return self;
  }
  ManualClock clock_{absl::FromUnixSeconds(1767225600)};
  MemoryLeaseStore leases_{&clock_};
};

TEST_F(LeaseKeeperTest, ALeaseTakenOverIsLostAndFencesEveryWriteAfterIt) {
  LeaseKeeper keeper(&leases_, Self("a"), absl::Seconds(3), &clock_);
  absl::Notification lost;
  std::vector<std::string> lost_jobs;
  LeaseKeeper::Callbacks callbacks;
  callbacks.on_lost = [&](const std::vector<std::string>& ids) {
    lost_jobs = ids;
    lost.Notify();
  };
  ASSERT_TRUE(keeper.Start(callbacks).ok());
  EXPECT_EQ(keeper.TokenFor("bf-1"), std::nullopt);  // not held: unfenced
  auto claimed = keeper.Claim("bf-1", "run");
  ASSERT_TRUE(claimed.ok() && claimed->claimed);
  EXPECT_EQ(keeper.TokenFor("bf-1"), claimed->lease.token);

  // b takes it over once it expired (by the store's clock).
  clock_.Advance(absl::Seconds(10));
  auto taken = leases_.Claim("bf-1", "b", "run", absl::Seconds(3));
  ASSERT_TRUE(taken.ok() && taken->claimed);
  EXPECT_EQ(taken->taken_from, "a");
  // a's next renewal (every second here) finds it lost.
  ASSERT_TRUE(lost.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_THAT(lost_jobs, ElementsAre("bf-1"));
  EXPECT_EQ(keeper.TokenFor("bf-1"), 0);  // no write passes
  keeper.Stop(/*leave=*/true);
  // Leaving gives nothing of b's back.
  auto leases = leases_.ListLeases();
  ASSERT_TRUE(leases.ok());
  ASSERT_EQ(leases->size(), 1u);
  EXPECT_EQ((*leases)[0].node, "b");
}

TEST_F(LeaseKeeperTest, ADrainGivesEveryLeaseBackAndTheNextClaimIsAtOnce) {
  LeaseKeeper keeper(&leases_, Self("a"), absl::Seconds(30), &clock_);
  ASSERT_TRUE(keeper.Start({}).ok());
  ASSERT_TRUE(keeper.Claim("bf-1", "run")->claimed);
  ASSERT_TRUE(keeper.Claim("bf-2", "publish")->claimed);
  keeper.SetStep("bf-1", "validate");
  keeper.Wake();
  keeper.Stop(/*leave=*/true);
  EXPECT_EQ(keeper.TokenFor("bf-1"), 0);
  auto nodes = leases_.ListNodes();
  ASSERT_TRUE(nodes.ok());
  EXPECT_TRUE(nodes->empty());
  // No waiting for the leases to expire.
  auto next = leases_.Claim("bf-2", "b", "publish", absl::Seconds(30));
  ASSERT_TRUE(next.ok());
  EXPECT_TRUE(next->claimed);
  EXPECT_EQ(next->taken_from, "");
  EXPECT_EQ(next->lease.token, 2);
}

}  // namespace
}  // namespace core_job_runner_group_test
}  // namespace backfill
