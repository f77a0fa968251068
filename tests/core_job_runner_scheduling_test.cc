// Tests of the job runner's scheduling and its storage failures, through
// the manager facade over the in-memory state store and the fake engine
// (tests/testing/job_runner_fixture.h): fairness and priorities,
// max_parallel, stage timings, group commits, store and warehouse failures
// that are retried while the job keeps its partitions, dependents, and
// pause and resume at any moment.

#include <algorithm>
#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/job_runner_fixture.h"

namespace backfill {
namespace core_job_runner_scheduling_test {
namespace {

using testing::Call;
using testing::Gate;
using ::testing::HasSubstr;
using testing::JobRunnerTest;
using testing::kPipeline;
using ::testing::Not;
using testing::RecordingObserver;

class FairnessTest : public JobRunnerTest {
 protected:
  void SetUp() override {
    JobRunnerTest::SetUp();
    engine_.SetHook([this](const Call& call) {
      if (call.method != "StagePartition") return absl::OkStatus();
      bool held;
      {
        absl::MutexLock lock(&mu_);
        dispatched_.push_back(call.job_id);
        held = call.partition == held_partition_;
      }
      if (!held) {
        absl::SleepFor(absl::Milliseconds(1));
        return absl::OkStatus();
      }
      // The held partition stays in the engine until `release_at_`
      // partitions of its job have started (bounded: a failure shows as a
      // count, not a hang).
      const absl::Time deadline = absl::Now() + absl::Seconds(10);
      while (Staged(call.job_id) < release_at_ && absl::Now() < deadline) {
        absl::SleepFor(absl::Milliseconds(1));
      }
      started_when_released_ = Staged(call.job_id);
      return absl::OkStatus();
    });
  }
  // Holds `partition` in the engine until `n` partitions of its job have
  // started (the hook above). Call before submitting.
  void Hold(const std::string& partition, int n) {
    absl::MutexLock lock(&mu_);
    held_partition_ = partition;
    release_at_ = n;
  }
  std::string held_partition_ ABSL_GUARDED_BY(mu_);
  std::atomic<int> release_at_{0};
  std::atomic<int> started_when_released_{-1};
  // Partitions of `other` the engine staged between the first and the last
  // of `job`'s.
  int OthersDuring(const std::string& job, const std::string& other) {
    absl::MutexLock lock(&mu_);
    const auto first = std::find(dispatched_.begin(), dispatched_.end(), job);
    const auto last =
        std::find(dispatched_.rbegin(), dispatched_.rend(), job).base();
    return static_cast<int>(std::count(first, last, other));
  }
  int Staged(const std::string& job) {
    absl::MutexLock lock(&mu_);
    return static_cast<int>(
        std::count(dispatched_.begin(), dispatched_.end(), job));
  }
};

TEST_F(FairnessTest, ASmallJobIsNotStarvedByAHugeOne) {
  const std::string big = Submit(Request("daily", "2000-01-01", "2027-05-19"));
  ASSERT_EQ(Get(big).counts.total, 10000);
  WaitStaged(big, 5);
  const std::string small =
      Submit(Request("other", "2025-01-01", "2025-01-31"));
  WaitState(small, JobState::kSucceeded);
  EXPECT_EQ(Staged(small), 30);
  // The two workers were shared: while the small job ran, the big one
  // staged about as many (behind it, the small job would wait for 10,000).
  const int during = OthersDuring(small, big);
  EXPECT_GE(during, 10);
  EXPECT_LE(during, 60);
  EXPECT_EQ(Get(big).state, JobState::kRunning);
  ASSERT_TRUE(manager_->Cancel(big, "enough").ok());
}

TEST_F(FairnessTest, AHigherPriorityJobGetsTheWorkersFirst) {
  const std::string big = Submit(Request("daily", "2000-01-01", "2027-05-19"));
  WaitStaged(big, 5);
  BackfillRequest urgent = Request("other", "2025-01-01", "2025-01-31");
  urgent.priority = 10;
  const std::string small = Submit(urgent);
  WaitState(small, JobState::kSucceeded);
  EXPECT_EQ(Staged(small), 30);
  // Both workers went to the urgent job: at most a partition of the big one
  // that was already running when it started.
  EXPECT_LE(OthersDuring(small, big), 1);
  ASSERT_TRUE(manager_->Cancel(big, "enough").ok());
}

TEST_F(FairnessTest, AFreeWorkerTakesTheUrgentPartitionsABatchHoldsBack) {
  // One partition of the urgent job stays in the engine until all 30 have
  // started: the batch it is in holds the partitions after it while the
  // other worker runs out of the urgent job's ready ones. That worker must
  // not go to the big job meanwhile: it takes over what the batch has not
  // started, and the urgent job keeps both workers to its end.
  Hold("2025-01-12", 30);
  const std::string big = Submit(Request("daily", "2000-01-01", "2027-05-19"));
  WaitStaged(big, 5);
  BackfillRequest urgent = Request("other", "2025-01-01", "2025-01-31");
  urgent.priority = 10;
  const std::string small = Submit(urgent);
  WaitState(small, JobState::kSucceeded);
  EXPECT_EQ(Staged(small), 30);
  EXPECT_EQ(started_when_released_.load(), 30);
  EXPECT_LE(OthersDuring(small, big), 1);
  ASSERT_TRUE(manager_->Cancel(big, "enough").ok());
}

TEST_F(FairnessTest, APartitionThatTakesLongHoldsBackNoneOfItsBatch) {
  // Partitions of a millisecond, batched; one of them stays in the engine
  // until all 100 have started. The partitions its batch took after it are
  // taken over by the other worker, so none waits behind it (without that
  // they would, and it would be let go after 10 s with fewer started).
  Hold("2025-03-01", 100);
  const std::string id = Submit(Request("daily", "2025-01-01", "2025-04-11"));
  const Job done = WaitState(id, JobState::kSucceeded);
  ASSERT_EQ(done.counts.published, 100);
  EXPECT_EQ(started_when_released_.load(), 100);
}

TEST_F(JobRunnerTest, MaxParallelPerJobAndPerDataset) {
  manager_->Shutdown();
  manager_.reset();
  Start(/*workers=*/4);
  std::atomic<int> running{0}, peak_job{0}, heavy{0}, peak_heavy{0};
  engine_.SetHook([&](const Call& call) {
    if (call.method != "StagePartition") return absl::OkStatus();
    std::atomic<int>& n = call.dataset == "heavy" ? heavy : running;
    std::atomic<int>& peak = call.dataset == "heavy" ? peak_heavy : peak_job;
    const int now = ++n;
    int seen = peak.load();
    while (now > seen && !peak.compare_exchange_weak(seen, now)) {
    }
    absl::SleepFor(absl::Milliseconds(2));
    --n;
    return absl::OkStatus();
  });
  BackfillRequest limited = Request("daily", "2025-01-01", "2025-02-01");
  limited.max_parallel = 2;
  const std::string a = Submit(limited);
  const std::string h1 = Submit(Request("heavy", "2025-01-01", "2025-01-16"));
  const std::string h2 = Submit(Request("heavy", "2025-02-01", "2025-02-16"));
  WaitState(a, JobState::kSucceeded);
  WaitState(h1, JobState::kSucceeded);
  WaitState(h2, JobState::kSucceeded);
  EXPECT_LE(peak_job.load(), 2);
  EXPECT_EQ(peak_heavy.load(), 1) << "heavy declares max_parallel: 1";
}

// The engine's timings of each staged attempt reach the observer as it gave
// them (none for a failed attempt), and each validation of the job, and the
// diff it records, are timed with the runner's clock.
TEST_F(JobRunnerTest, StageTimingsAndValidationTimeReachTheObserver) {
  StageTimings timings;
  timings.transform = absl::Milliseconds(30);
  timings.fingerprint = absl::Milliseconds(2);
  timings.stage_write = absl::Milliseconds(5);
  engine_.SetStageTimings(timings);
  FailStage("2025-01-02", absl::InternalError("transient"), 1);
  // Validation takes 2 s of the clock per dataset, plus 1 s per profile;
  // its diff 500 ms per partition.
  engine_.SetHook([this](const Call& call) {
    if (call.method == "ValidateStaged") clock_.Advance(absl::Seconds(2));
    if (call.method == "ProfileStaged") clock_.Advance(absl::Seconds(1));
    if (call.method == "DiffPartition") {
      clock_.Advance(absl::Milliseconds(500));
    }
    return OnCall(call);
  });
  const std::string id = Submit(Request("daily", "2025-01-01", "2025-01-04"));
  const Job done = WaitState(id, JobState::kSucceeded);
  ASSERT_EQ(done.counts.published, 3);

  // 4 attempts, 3 of which staged.
  EXPECT_EQ(StageCount(id, "2025-01-02"), 2);
  const std::vector<RecordingObserver::StageTimed> staged =
      observer_.stage_timings();
  ASSERT_EQ(staged.size(), 3u);
  for (const RecordingObserver::StageTimed& t : staged) {
    EXPECT_EQ(t.dataset, "daily");
    EXPECT_EQ(t.timings.transform, absl::Milliseconds(30));
    EXPECT_EQ(t.timings.fingerprint, absl::Milliseconds(2));
    EXPECT_EQ(t.timings.stage_write, absl::Milliseconds(5));
  }
  const auto validations = observer_.validations();
  ASSERT_EQ(validations.size(), 2u);
  EXPECT_EQ(validations[0].first, id);
  EXPECT_EQ(validations[0].second, absl::Seconds(3));
  EXPECT_EQ(validations[1].first, id);
  EXPECT_EQ(validations[1].second, absl::Milliseconds(1500));
}

// Short partitions are run in batches whose starts and checkpoints are
// group-committed: while one commit is held, the workers go on staging,
// and the next commit takes everything they queued meanwhile. No partition
// is counted done before its checkpoint is written, each is attempted once,
// and the job publishes all of them.
TEST_F(JobRunnerTest, ShortPartitionsShareCommitsAndEachIsDoneOnceWritten) {
  // Once the job's partitions are known to be short (100 staged), one
  // commit is held.
  std::atomic<int> staged{0};
  absl::Notification held, release;
  std::atomic<bool> hold{true};
  store_.SetWriteHook([&](const std::string& method) {
    if (method == "UpdateTasks" && staged.load() >= 100 &&
        hold.exchange(false)) {
      held.Notify();
      release.WaitForNotification();
    }
    return absl::OkStatus();
  });
  engine_.SetHook([&](const Call& call) {
    if (call.method == "StagePartition") ++staged;
    return absl::OkStatus();
  });
  // The manual clock does not move while staging: every partition is
  // "short", so the workers take batches.
  const std::string a = Submit(Request("daily", "2020-01-01", "2025-06-23"));
  ASSERT_EQ(Get(a).counts.total, 2000);
  held.WaitForNotification();
  // While the commit is held, nothing staged since is counted.
  const int64_t counted = Get(a).counts.staged;
  EXPECT_LE(counted, staged.load());
  absl::SleepFor(absl::Milliseconds(20));
  EXPECT_EQ(Get(a).counts.staged, counted);
  release.Notify();
  Job done = WaitState(a, JobState::kSucceeded);
  EXPECT_EQ(done.counts.published, 2000);
  // A start and a checkpoint per partition, in fewer commits.
  EXPECT_LT(store_.write_calls("UpdateTasks"), 2 * 2000);
  EXPECT_EQ(store_.write_calls("UpdateTask"), 0);
  absl::StatusOr<std::vector<PartitionTask>> tasks = store_.ListTasks(a);
  ASSERT_TRUE(tasks.ok()) << tasks.status();
  ASSERT_EQ(tasks->size(), 2000u);
  for (const PartitionTask& t : *tasks) {
    EXPECT_EQ(t.attempts, 1) << t.partition;
  }
}

TEST_F(JobRunnerTest, GroupedPartitionsAreCheckpointedOnlyAfterTheirWrite) {
  // An engine that stages short partitions in groups (one write for a
  // group): no partition of a group may be checkpointed before the group's
  // write commits, a write the warehouse could not make (unavailable)
  // spends no attempt, and one that failed otherwise spends one.
  engine_.SetStagingGroups(true);
  absl::Mutex mu;
  int commits = 0;
  size_t largest = 0;
  int checkpointed_early = 0;
  std::set<std::string> aborted;
  engine_.SetHook([&](const Call& call) {
    if (call.method != "GroupCommit") return absl::OkStatus();
    const std::vector<std::string> parts = absl::StrSplit(call.partition, ',');
    const std::set<std::string> in_group(parts.begin(), parts.end());
    absl::StatusOr<std::vector<PartitionTask>> tasks =
        store_.ListTasks(call.job_id);
    absl::MutexLock lock(&mu);
    EXPECT_TRUE(tasks.ok()) << tasks.status();
    if (tasks.ok()) {
      for (const PartitionTask& t : *tasks) {
        if (in_group.count(t.partition) > 0 && t.state != TaskState::kRunning &&
            t.state != TaskState::kPending) {
          ++checkpointed_early;
        }
      }
    }
    largest = std::max(largest, parts.size());
    ++commits;
    if (commits == 3) {
      return absl::UnavailableError("the warehouse cannot be reached");
    }
    if (commits == 5) {
      aborted = in_group;
      return absl::AbortedError("the group's rows were lost");
    }
    return absl::OkStatus();
  });
  // The manual clock does not move while staging: every partition is
  // "short", so the workers take batches.
  const std::string a = Submit(Request("daily", "2020-01-01", "2025-06-23"));
  ASSERT_EQ(Get(a).counts.total, 2000);
  const Job done = WaitState(a, JobState::kSucceeded);
  EXPECT_EQ(done.counts.published, 2000);
  absl::MutexLock lock(&mu);
  EXPECT_EQ(checkpointed_early, 0);
  EXPECT_GT(largest, 1u);
  EXPECT_LT(engine_.calls("GroupCommit"), 2000);
  ASSERT_FALSE(aborted.empty());
  absl::StatusOr<std::vector<PartitionTask>> tasks = store_.ListTasks(a);
  ASSERT_TRUE(tasks.ok()) << tasks.status();
  ASSERT_EQ(tasks->size(), 2000u);
  for (const PartitionTask& t : *tasks) {
    EXPECT_EQ(t.attempts, aborted.count(t.partition) > 0 ? 2 : 1)
        << t.partition;
    EXPECT_EQ(engine_.PublishedRows("daily", t.partition), 1) << t.partition;
  }
}

TEST_F(JobRunnerTest, StoreWriteFailuresAreRetriedAndTheJobKeepsItsPartitions) {
  gate_.Close("bf-1");
  const std::string a = Submit(Request("daily", "2025-01-01", "2025-01-11"));
  WaitState(a, JobState::kRunning);
  // The disk fills up; it frees after a few backoff sleeps.
  store_.FailWrites(absl::ResourceExhaustedError("database or disk is full"));
  std::atomic<int> sleeps{0};
  clock_.SetSleepHook([&](absl::Duration) {
    if (++sleeps == 20) store_.FailWrites(absl::OkStatus());
  });
  // While it cannot be written, the job still holds its partitions.
  auto plan =
      manager_->PlanBackfill(Request("daily", "2025-01-05", "2025-01-06"));
  ASSERT_TRUE(plan.ok());
  EXPECT_FALSE(plan->conflicts.empty());
  gate_.OpenAll();
  Job done = WaitState(a, JobState::kSucceeded);
  EXPECT_EQ(done.counts.published, 10);
  EXPECT_GE(observer_.failing(JobObserver::Storage::kStateStore), 1);
  // The recovery is reported just after the write that made the state seen.
  EXPECT_TRUE(WaitUntil([&] {
    return observer_.recovered(JobObserver::Storage::kStateStore) >= 1;
  }));
  // The backoff grew and is capped.
  EXPECT_GE(clock_.slept(), absl::Seconds(10));
}

TEST_F(JobRunnerTest, AFailureThatCannotBeRecordedKeepsTheJobUntilItIs) {
  // The moment a partition fails for good, the store stops taking state
  // changes for a while: the failure cannot be recorded at once.
  std::atomic<bool> full{false};
  engine_.SetHook([&](const Call& call) -> absl::Status {
    if (call.method == "StagePartition" && call.partition == "2025-01-02") {
      full = true;
      return absl::InvalidArgumentError("bad row");
    }
    return absl::OkStatus();
  });
  store_.SetWriteHook([&](const std::string& method) -> absl::Status {
    if (method == "TransitionJob" && full.load()) {
      return absl::ResourceExhaustedError("database or disk is full");
    }
    return absl::OkStatus();
  });
  std::atomic<int> sleeps{0};
  std::atomic<bool> held_while_failing{false};
  clock_.SetSleepHook([&](absl::Duration) {
    const int n = ++sleeps;
    if (n == 10) {
      // Meanwhile the job still holds its partitions.
      auto plan =
          manager_->PlanBackfill(Request("daily", "2025-01-01", "2025-01-02"));
      held_while_failing = plan.ok() && !plan->conflicts.empty();
    }
    if (n == 50) full = false;
  });
  const std::string a = Submit(Request("daily", "2025-01-01", "2025-01-04"));
  Job failed = WaitState(a, JobState::kFailed);
  EXPECT_THAT(failed.message, HasSubstr("bad row"));
  EXPECT_GE(sleeps.load(), 50);
  EXPECT_TRUE(held_while_failing.load());
  EXPECT_GE(observer_.failing(JobObserver::Storage::kStateStore), 1);
  // The recovery is reported just after the write that made the state seen.
  EXPECT_TRUE(WaitUntil([&] {
    return observer_.recovered(JobObserver::Storage::kStateStore) >= 1;
  }));
}

TEST_F(JobRunnerTest, AFullWarehouseDoesNotSpendAttempts) {
  FailStage("2025-01-02",
            absl::ResourceExhaustedError("database or disk is full"), 7);
  const std::string a = Submit(Request("daily", "2025-01-01", "2025-01-04"));
  Job done = WaitState(a, JobState::kSucceeded);
  EXPECT_EQ(StageCount(a, "2025-01-02"), 8);
  EXPECT_GE(observer_.failing(JobObserver::Storage::kWarehouse), 7);
  // The staging that worked again reported the recovery (once per spell:
  // another partition staged between two failures ends one), and the last
  // word is a recovery.
  EXPECT_GE(observer_.recovered(JobObserver::Storage::kWarehouse), 1);
  EXPECT_LE(observer_.recovered(JobObserver::Storage::kWarehouse),
            observer_.failing(JobObserver::Storage::kWarehouse));
  EXPECT_TRUE(observer_.healthy(JobObserver::Storage::kWarehouse));
  EXPECT_EQ(observer_.recovered(JobObserver::Storage::kStateStore), 0);
}

TEST_F(JobRunnerTest, AWarehouseThatFailsAgainAfterItsRecoveryIsReportedAgain) {
  // Two spells of a full disk, on two partitions, one after the other.
  FailStage("2025-01-02",
            absl::ResourceExhaustedError("database or disk is full"), 2);
  const std::string a = Submit(Request("daily", "2025-01-01", "2025-01-04"));
  WaitState(a, JobState::kSucceeded);
  EXPECT_TRUE(observer_.healthy(JobObserver::Storage::kWarehouse));
  const int first = observer_.recovered(JobObserver::Storage::kWarehouse);
  EXPECT_GE(first, 1);
  FailStage("2025-01-05",
            absl::ResourceExhaustedError("database or disk is full"), 3);
  const std::string b = Submit(Request("daily", "2025-01-05", "2025-01-07"));
  WaitState(b, JobState::kSucceeded);
  EXPECT_GE(observer_.failing(JobObserver::Storage::kWarehouse), 5);
  EXPECT_GT(observer_.recovered(JobObserver::Storage::kWarehouse), first);
  EXPECT_TRUE(observer_.healthy(JobObserver::Storage::kWarehouse));
}

TEST_F(JobRunnerTest, DependentsWaitForTheirUpstreamPartitions) {
  BackfillRequest r = Request("daily", "2025-01-01", "2025-01-06");
  r.exclude_downstream = false;
  const std::string a = Submit(r);
  Job done = WaitState(a, JobState::kSucceeded);
  ASSERT_EQ(done.plan.datasets.size(), 2u);  // daily, then rollup
  std::map<std::string, int> daily_at;
  const std::vector<std::string> order = Order();
  for (size_t i = 0; i < order.size(); ++i) {
    if (absl::StrContains(order[i], "/daily/")) {
      daily_at[order[i].substr(order[i].rfind('/') + 1)] = static_cast<int>(i);
    }
  }
  for (size_t i = 0; i < order.size(); ++i) {
    if (!absl::StrContains(order[i], "/rollup/")) continue;
    const std::string day = order[i].substr(order[i].rfind('/') + 1);
    ASSERT_TRUE(daily_at.count(day)) << day;
    EXPECT_LT(daily_at[day], static_cast<int>(i)) << day;
  }
}

// Paused while the engine prepares its staging, then resumed as that
// preparation ends, at slightly different moments: the preparation must
// never hand the job to its partitions while it is QUEUED (validation would
// then refuse the move and fail the job), nor leave it waiting.
TEST_F(JobRunnerTest, AResumeAsThePreparationEndsNeverFailsTheJob) {
  // The first preparation of each job is held until its resume.
  absl::Mutex prepared_mu;
  std::set<std::string> prepared;
  engine_.SetHook([&](const Call& call) {
    if (call.method == "PrepareJob") {
      bool first;
      {
        absl::MutexLock lock(&prepared_mu);
        first = prepared.insert(call.job_id).second;
      }
      if (first) hold_.Wait("prepare");
    }
    return OnCall(call);
  });
  // The preparation goes on while the resume is being recorded (between
  // the resume's store write and its hand-over to admission).
  std::atomic<int> spin{0};
  observer_.SetTransitionHook(
      [&](const std::string&, JobState from, JobState to) {
        if (from != JobState::kPaused || to != JobState::kQueued) return;
        hold_.Open("prepare");
        for (int i = spin.load(); i > 0; --i) std::this_thread::yield();
      });
  constexpr int kRounds = 200;
  for (int round = 0; round < kRounds; ++round) {
    hold_.Close("prepare");
    spin = (round * 37) % 400;
    const std::string a = Submit(Request("daily", "2025-01-01", "2025-01-03"));
    ASSERT_TRUE(WaitUntil([&] {
      absl::MutexLock lock(&prepared_mu);
      return prepared.count(a) > 0;
    }));
    auto paused = manager_->Pause(a, "hold");
    ASSERT_TRUE(paused.ok()) << paused.status();
    auto resumed = manager_->Resume(a, "go");
    ASSERT_TRUE(resumed.ok()) << resumed.status();
    const Job done = WaitEnded(a, absl::Seconds(10));
    ASSERT_EQ(done.state, JobState::kSucceeded)
        << "round " << round << ": " << done.message;
    ASSERT_EQ(StageCount(a, "2025-01-01"), 1) << "round " << round;
    ASSERT_EQ(StageCount(a, "2025-01-02"), 1) << "round " << round;
  }
}

// Paused and resumed while the engine prepares its staging: one
// preparation runs at a time, and the job publishes.
TEST_F(JobRunnerTest, OnePreparationAtATimeAcrossPauseAndResume) {
  std::atomic<int> preparing{0}, most{0};
  hold_.Close("prepare");
  engine_.SetHook([&](const Call& call) {
    if (call.method == "PrepareJob") {
      const int now = ++preparing;
      int seen = most.load();
      while (now > seen && !most.compare_exchange_weak(seen, now)) {
      }
      hold_.Wait("prepare");
      --preparing;
    }
    return OnCall(call);
  });
  const std::string a = Submit(Request("daily", "2025-01-01", "2025-01-04"));
  ASSERT_TRUE(engine_.WaitForCalls("PrepareJob", 1, absl::Seconds(30)));
  ASSERT_TRUE(manager_->Pause(a, "hold").ok());
  ASSERT_TRUE(manager_->Resume(a, "go").ok());
  // Gives a second preparation the time to start, were it allowed to.
  engine_.WaitForCalls("PrepareJob", 2, absl::Milliseconds(200));
  manager_->Pause(a, "again").IgnoreError();
  manager_->Resume(a, "again").IgnoreError();
  hold_.Open("prepare");
  const Job done = WaitEnded(a);
  EXPECT_EQ(done.state, JobState::kSucceeded) << done.message;
  EXPECT_EQ(most.load(), 1);
}

// A pause or cancel whose record fails while the last partition is staged:
// the decision is undone, and the job, whose partitions are all staged,
// goes on to validate and publish.
class UnrecordedDecisionTest : public JobRunnerTest,
                               public ::testing::WithParamInterface<bool> {};

TEST_P(UnrecordedDecisionTest, TheJobFinishesWhenItsLastPartitionWasStaged) {
  const bool cancel = GetParam();
  std::atomic<bool> refuse{false};
  hold_.Close("store");
  store_.SetWriteHook([&](const std::string& method) -> absl::Status {
    if (method == "TransitionJob" && refuse.exchange(false)) {
      hold_.Wait("store");
      return absl::InternalError("the store refused the write");
    }
    return absl::OkStatus();
  });
  gate_.Close("bf-1");
  const std::string a = Submit(Request("daily", "2025-01-01", "2025-01-02"));
  ASSERT_TRUE(engine_.WaitForCalls("StagePartition", 1, absl::Seconds(30)));
  uint64_t version = 0;
  ASSERT_TRUE(
      manager_->WaitForChange(a, &version, absl::InfiniteFuture()).ok());

  const int64_t transitions = store_.write_calls("TransitionJob");
  refuse = true;
  absl::Status decided;
  std::thread decision([&] {
    decided = cancel ? manager_->Cancel(a, "no").status()
                     : manager_->Pause(a, "no").status();
  });
  ASSERT_TRUE(WaitUntil(
      [&] { return store_.write_calls("TransitionJob") > transitions; }));
  // The last partition is staged while the decision is being recorded.
  gate_.OpenAll();
  ASSERT_TRUE(
      manager_->WaitForChange(a, &version, absl::Now() + absl::Seconds(30))
          .ok());
  hold_.Open("store");
  decision.join();
  EXPECT_EQ(decided.code(), absl::StatusCode::kInternal) << decided;
  const Job done = WaitEnded(a, absl::Seconds(10));
  EXPECT_EQ(done.state, JobState::kSucceeded) << done.message;
  EXPECT_EQ(engine_.PublishedRows("daily", "2025-01-01"), 1);
}

INSTANTIATE_TEST_SUITE_P(PauseAndCancel, UnrecordedDecisionTest,
                         ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "Cancel" : "Pause";
                         });

// Paused while its last partition runs, the job ends PAUSED with every
// partition staged; resumed, it validates and publishes.
TEST_F(JobRunnerTest, AJobPausedWithEveryPartitionStagedPublishesOnResume) {
  gate_.Close("bf-1");
  const std::string a = Submit(Request("daily", "2025-01-01", "2025-01-03"));
  ASSERT_TRUE(engine_.WaitForCalls("StagePartition", 2, absl::Seconds(30)));
  auto paused = manager_->Pause(a, "hold");
  ASSERT_TRUE(paused.ok()) << paused.status();
  EXPECT_THAT(paused->message, HasSubstr("2 partitions finishing"));
  gate_.OpenAll();
  const Job settled = WaitFor(a, [](const Job& j) {
    return j.counts.staged == 2 && j.counts.running == 0;
  });
  EXPECT_EQ(settled.state, JobState::kPaused);
  EXPECT_EQ(engine_.calls("ValidateStaged"), 0);
  ASSERT_TRUE(manager_->Resume(a, "go").ok());
  const Job done = WaitEnded(a);
  EXPECT_EQ(done.state, JobState::kSucceeded) << done.message;
  EXPECT_EQ(StageCount(a, "2025-01-01"), 1);
  EXPECT_EQ(StageCount(a, "2025-01-02"), 1);

  // The same after a restart: the paused job resumes into validation.
  gate_.Close("bf-2");
  const std::string b = Submit(Request("daily", "2025-02-01", "2025-02-02"));
  ASSERT_TRUE(engine_.WaitForCalls("StagePartition", 3, absl::Seconds(30)));
  ASSERT_TRUE(manager_->Pause(b, "hold").ok());
  gate_.OpenAll();
  WaitFor(b, [](const Job& j) { return j.counts.staged == 1; });
  Restart();
  EXPECT_EQ(Get(b).state, JobState::kPaused);
  ASSERT_TRUE(manager_->Resume(b, "go").ok());
  const Job resumed = WaitEnded(b);
  EXPECT_EQ(resumed.state, JobState::kSucceeded) << resumed.message;
}

// Once every partition is staged the job validates: a pause is refused
// and the job publishes.
TEST_F(JobRunnerTest, APauseWhileValidatingIsRefused) {
  hold_.Close("validate");
  engine_.SetHook([&](const Call& call) {
    if (call.method == "ValidateStaged") hold_.Wait("validate");
    return OnCall(call);
  });
  const std::string a = Submit(Request("daily", "2025-01-01", "2025-01-03"));
  ASSERT_TRUE(engine_.WaitForCalls("ValidateStaged", 1, absl::Seconds(30)));
  auto paused = manager_->Pause(a, "too late");
  EXPECT_EQ(paused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(paused.status().message()),
              HasSubstr("can no longer be paused"));
  hold_.OpenAll();
  const Job done = WaitEnded(a);
  EXPECT_EQ(done.state, JobState::kSucceeded) << done.message;
}

// Pause and resume at every moment of a job's life (right after the
// submit, while partitions run, as the last one finishes): the job never
// fails and stages each partition once.
TEST_F(JobRunnerTest, PauseAndResumeAtAnyMomentNeverFailTheJob) {
  // Engine calls take a varying while, so that decisions land between
  // the runner's steps.
  // Shared with the hooks by value: the runner's workers may still call
  // them (a job's last transition, retention) once this body has returned.
  auto calls = std::make_shared<std::atomic<uint32_t>>(0);
  auto spin = [calls] {
    const uint32_t n = (++*calls * 2654435761u) >> 26;  // 0..63
    for (uint32_t i = 0; i < n; ++i) std::this_thread::yield();
  };
  engine_.SetHook([this, spin](const Call& call) {
    spin();
    return OnCall(call);
  });
  observer_.SetTransitionHook(
      [spin](const std::string&, JobState, JobState) { spin(); });
  constexpr int kRounds = 150;
  for (int round = 0; round < kRounds; ++round) {
    const int days = 1 + round % 3;
    const std::string to = absl::StrCat("2025-03-0", 1 + days);
    const std::string a = Submit(Request("daily", "2025-03-01", to));
    const uint32_t wait = (round * 40503u) % 200;
    for (uint32_t i = 0; i < wait; ++i) std::this_thread::yield();
    auto paused = manager_->Pause(a, "round");
    if (paused.ok()) {
      EXPECT_EQ(paused->state, JobState::kPaused);
      if (round % 2 == 0) {
        // Partitions that were running finish first.
        WaitFor(a, [](const Job& j) { return j.counts.running == 0; });
      }
      auto resumed = manager_->Resume(a, "round");
      ASSERT_TRUE(resumed.ok()) << resumed.status();
    } else {
      // Only a job that validates or has ended refuses a pause.
      EXPECT_EQ(paused.status().code(), absl::StatusCode::kFailedPrecondition)
          << paused.status();
    }
    const Job done = WaitEnded(a, absl::Seconds(10));
    ASSERT_EQ(done.state, JobState::kSucceeded)
        << "round " << round << ": " << done.message;
    for (int d = 1; d <= days; ++d) {
      ASSERT_EQ(StageCount(a, absl::StrCat("2025-03-0", d)), 1)
          << "round " << round;
    }
  }
}

// Several jobs submitted, paused and resumed at once, from as many threads,
// so that the runner's steps interleave with the decisions in many ways:
// every job publishes, each partition staged once.
TEST_F(JobRunnerTest, ConcurrentPauseAndResumeOfManyJobsNeverFailOne) {
  // Shared with the hook by value: the runner's workers may still call the
  // hook (retention after a job ends) once this body has returned.
  auto calls = std::make_shared<std::atomic<uint32_t>>(0);
  auto spin = [calls](uint32_t most) {
    const uint32_t n = ((++*calls * 2654435761u) >> 16) % most;
    for (uint32_t i = 0; i < n; ++i) std::this_thread::yield();
  };
  engine_.SetHook([this, spin](const Call& call) {
    spin(64);
    return OnCall(call);
  });
  constexpr int kRounds = 60;
  constexpr int kJobs = 4;
  absl::Mutex mu;
  std::vector<std::string> failures;
  for (int round = 0; round < kRounds && failures.empty(); ++round) {
    std::vector<std::thread> threads;
    for (int c = 0; c < kJobs; ++c) {
      threads.emplace_back([&, c] {
        const std::string month = absl::StrCat("2025-0", c + 4);
        auto submitted = manager_->Submit(
            Request("daily", month + "-01", month + "-03"), {});
        if (!submitted.ok()) {
          absl::MutexLock lock(&mu);
          failures.push_back(std::string(submitted.status().message()));
          return;
        }
        const std::string id = submitted->job.id;
        spin(400);
        if (manager_->Pause(id, "storm").ok()) {
          spin(400);
          auto resumed = manager_->Resume(id, "storm");
          if (!resumed.ok()) {
            absl::MutexLock lock(&mu);
            failures.push_back(
                absl::StrCat(id, " resume: ", resumed.status().message()));
            return;
          }
        }
        const Job done = WaitEnded(id, absl::Seconds(10));
        if (done.state != JobState::kSucceeded ||
            StageCount(id, month + "-01") != 1 ||
            StageCount(id, month + "-02") != 1) {
          absl::MutexLock lock(&mu);
          failures.push_back(absl::StrCat(id, " ", JobStateName(done.state),
                                          ": ", done.message));
        }
      });
    }
    for (std::thread& t : threads) t.join();
  }
  EXPECT_THAT(failures, ::testing::IsEmpty());
}

}  // namespace
}  // namespace core_job_runner_scheduling_test
}  // namespace backfill
