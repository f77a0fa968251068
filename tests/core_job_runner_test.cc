// Tests of the job runner through the manager facade, over the in-memory
// state store and the fake engine (no SQLite) and a manual clock
// (tests/testing/job_runner_fixture.h): queueing of overlapping jobs in
// submission order, pause and resume (also across a restart), retry of
// failed partitions only, held jobs superseded by newer ones and by the
// rollback of an overlapping job, cancels.

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
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/job_runner_fixture.h"

namespace backfill {
namespace core_job_runner_test {
namespace {

using testing::Call;
using testing::Gate;
using ::testing::HasSubstr;
using testing::JobRunnerTest;
using testing::kPipeline;
using ::testing::Not;
using testing::RecordingObserver;

TEST_F(JobRunnerTest, ASubmitIsRefusedWhileTheQueueIsFullAndNothingIsCreated) {
  max_queued_jobs_ = 2;
  Restart();
  gate_.Close("bf-1");
  BackfillRequest first = Request("daily", "2025-01-01", "2025-01-11");
  first.max_parallel = 1;
  const std::string a = Submit(first);
  WaitState(a, JobState::kRunning);
  // Two jobs wait behind it: the queue is full.
  SubmitOptions keyed;
  keyed.idempotency_key = "second";
  const std::string b =
      Submit(Request("daily", "2025-01-05", "2025-01-06"), keyed);
  const std::string c = Submit(Request("daily", "2025-01-07", "2025-01-08"));
  EXPECT_EQ(Get(b).state, JobState::kQueued);
  EXPECT_EQ(Get(c).state, JobState::kQueued);
  std::vector<JobState> every_state;
  for (int i = 0; i < kJobStateCount; ++i) {
    every_state.push_back(static_cast<JobState>(i));
  }
  auto ids = store_.ListJobIds(every_state);
  ASSERT_TRUE(ids.ok()) << ids.status();
  ASSERT_EQ(ids->size(), 3u);

  // A third is refused, overlapping or not, and no job is created.
  for (const BackfillRequest& r :
       {Request("daily", "2025-01-09", "2025-01-10"),
        Request("other", "2025-03-01", "2025-03-02")}) {
    auto refused = manager_->Submit(r, {});
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
    EXPECT_THAT(std::string(refused.status().message()),
                HasSubstr("2 jobs are QUEUED"));
    EXPECT_THAT(std::string(refused.status().message()),
                HasSubstr("the limit set by the test is 2"));
  }
  ids = store_.ListJobIds(every_state);
  ASSERT_TRUE(ids.ok()) << ids.status();
  EXPECT_EQ(ids->size(), 3u);

  // A repeat of the queued job with its key is still answered.
  auto repeat =
      manager_->Submit(Request("daily", "2025-01-05", "2025-01-06"), keyed);
  ASSERT_TRUE(repeat.ok()) << repeat.status();
  EXPECT_FALSE(repeat->created);
  EXPECT_EQ(repeat->job.id, b);

  // Once the queue has drained, submits are admitted again.
  gate_.OpenAll();
  WaitState(a, JobState::kSucceeded);
  WaitState(b, JobState::kSucceeded);
  WaitState(c, JobState::kSucceeded);
  const std::string d = Submit(Request("daily", "2025-01-09", "2025-01-10"));
  EXPECT_NE(d, "");
  WaitState(d, JobState::kSucceeded);
}

TEST_F(JobRunnerTest, OverlappingJobsWaitAndRunInSubmissionOrder) {
  gate_.Close("bf-1");
  // One partition of it at a time, so that a worker stays free for others.
  BackfillRequest first = Request("daily", "2025-01-01", "2025-01-11");
  first.max_parallel = 1;
  const std::string a = Submit(first);
  WaitState(a, JobState::kRunning);
  const std::string b = Submit(Request("daily", "2025-01-06", "2025-01-16"));
  Job waiting = Get(b);
  EXPECT_EQ(waiting.state, JobState::kQueued);
  EXPECT_THAT(waiting.message, HasSubstr("waiting for bf-1 (RUNNING, 5 shared "
                                         "partitions)"));
  // A disjoint job is not held back.
  const std::string c = Submit(Request("daily", "2025-02-01", "2025-02-03"));
  WaitState(c, JobState::kSucceeded);
  // With no_wait, an overlapping submit is refused, naming the job.
  SubmitOptions no_wait;
  no_wait.no_wait = true;
  auto refused =
      manager_->Submit(Request("daily", "2025-01-10", "2025-01-12"), no_wait);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("bf-1"));
  // The plan says which job holds the partitions.
  auto plan =
      manager_->PlanBackfill(Request("daily", "2025-01-10", "2025-01-12"));
  ASSERT_TRUE(plan.ok());
  ASSERT_FALSE(plan->conflicts.empty());
  EXPECT_EQ(plan->conflicts[0].job_id, "bf-1");

  EXPECT_EQ(Get(b).state, JobState::kQueued);
  gate_.OpenAll();
  WaitState(a, JobState::kSucceeded);
  WaitState(b, JobState::kSucceeded);
  // Per partition, b staged only after a published: a serial order.
  const std::vector<std::string> calls = [&] {
    std::vector<std::string> out;
    for (const Call& call : engine_.call_log()) {
      if ((call.method == "StagePartition" && call.job_id == b) ||
          (call.method == "Publish" && call.job_id == a)) {
        out.push_back(call.method + ":" + call.job_id);
      }
    }
    return out;
  }();
  ASSERT_FALSE(calls.empty());
  EXPECT_EQ(calls.front(), "Publish:" + a);
}

TEST_F(JobRunnerTest, ARepeatedSubmitReturnsItsJobWhateverCameSince) {
  gate_.Close("bf-1");
  SubmitOptions keyed;
  keyed.idempotency_key = "k-1";
  keyed.no_wait = true;
  const BackfillRequest r = Request("daily", "2025-01-01", "2025-01-06");
  auto first = manager_->Submit(r, keyed);
  ASSERT_TRUE(first.ok()) << first.status();
  // A later job queues behind it.
  const std::string later =
      Submit(Request("daily", "2025-01-03", "2025-01-04"));
  EXPECT_EQ(Get(later).state, JobState::kQueued);
  // The answer of the first submit was lost: sending it again (no_wait
  // included) returns the same job, not a refusal because of the later one.
  auto again = manager_->Submit(r, keyed);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE(again->created);
  EXPECT_EQ(again->job.id, first->job.id);
  // The same key with another request is refused.
  auto other =
      manager_->Submit(Request("daily", "2025-02-01", "2025-02-02"), keyed);
  EXPECT_EQ(other.status().code(), absl::StatusCode::kInvalidArgument);
  gate_.OpenAll();
  WaitState(first->job.id, JobState::kSucceeded);
  WaitState(later, JobState::kSucceeded);
  // Even after the job ended.
  again = manager_->Submit(r, keyed);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->job.id, first->job.id);
  EXPECT_EQ(again->job.state, JobState::kSucceeded);
}

TEST_F(JobRunnerTest, ASubmitWhoseCallerLeftCreatesNoJob) {
  // The caller is gone once the plan is made (first question), or just
  // before the job would be created (second): no job either way, and a
  // submit with the same key later creates it.
  for (int gone_at : {1, 2}) {
    SubmitOptions options;
    options.idempotency_key = absl::StrCat("k-gone-", gone_at);
    int asked = 0;
    options.abandoned = [&] { return ++asked >= gone_at; };
    auto refused =
        manager_->Submit(Request("daily", "2025-01-01", "2025-01-03"), options);
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kCancelled)
        << refused.status();
    EXPECT_THAT(refused.status().message(), HasSubstr("nothing was submitted"));
    EXPECT_EQ(asked, gone_at);
    JobFilter all;
    all.limit = 100;
    EXPECT_TRUE(store_.ListJobs(all)->empty());
  }
  SubmitOptions staying;
  staying.idempotency_key = "k-gone-1";
  staying.abandoned = [] { return false; };
  auto created =
      manager_->Submit(Request("daily", "2025-01-01", "2025-01-03"), staying);
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_TRUE(created->created);
  WaitState(created->job.id, JobState::kSucceeded);
}

// What a publish reports per dataset (the published partitions and rows
// the metrics count) is what the job staged: the test's own sums of the
// rows the engine wrote, for the target and its dependent.
TEST_F(JobRunnerTest, APublishReportsEachDatasetsPartitionsAndRows) {
  auto day_of = [](const std::string& partition) {
    return std::stoi(partition.substr(8, 2));
  };
  engine_.SetRowsFor(
      [&](const std::string& dataset, const std::string& partition) -> int64_t {
        return (dataset == "rollup" ? 100 : 0) + day_of(partition);
      });
  BackfillRequest request = Request("daily", "2025-01-01", "2025-01-06");
  request.exclude_downstream = false;  // and rollup, which reads daily
  const std::string id = Submit(request);
  WaitState(id, JobState::kSucceeded);
  std::map<std::string, std::pair<int64_t, int64_t>> got;
  for (const JobObserver::PublishedDataset& d : observer_.published(id)) {
    got[d.dataset] = {d.partitions, d.rows};
  }
  const std::map<std::string, std::pair<int64_t, int64_t>> want = {
      {"daily", {5, 1 + 2 + 3 + 4 + 5}},
      {"rollup", {5, 101 + 102 + 103 + 104 + 105}}};
  EXPECT_EQ(got, want);
}

TEST_F(JobRunnerTest, PauseKeepsThePartitionsAndResumeContinues) {
  gate_.Close("bf-1");
  const std::string a = Submit(Request("daily", "2025-01-01", "2025-01-21"));
  WaitState(a, JobState::kRunning);
  // Both workers are inside a partition, held at the gate.
  ASSERT_TRUE(engine_.WaitForCalls("StagePartition", 2, absl::Seconds(30)));
  auto paused = manager_->Pause(a, "maintenance window");
  ASSERT_TRUE(paused.ok()) << paused.status();
  EXPECT_EQ(paused->state, JobState::kPaused);
  EXPECT_THAT(paused->message, HasSubstr("paused: maintenance window"));
  // Running partitions finish and checkpoint; nothing new starts. (A
  // partition's start is not waited for before it stages, so the store may
  // never have shown it running: its checkpoint is what says it ended.)
  gate_.OpenAll();
  const Job settled = WaitFor(a, [](const Job& j) {
    return j.counts.staged >= 2 && j.counts.running == 0;
  });
  const int64_t staged = settled.counts.staged;
  EXPECT_EQ(staged, 2);
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_EQ(Get(a).counts.staged, staged);
  EXPECT_EQ(Get(a).state, JobState::kPaused);

  // An overlapping job waits for the paused one and says so.
  const std::string b = Submit(Request("daily", "2025-01-15", "2025-01-17"));
  EXPECT_EQ(Get(b).state, JobState::kQueued);
  EXPECT_THAT(Get(b).message, HasSubstr("paused job bf-1"));
  // Pausing again is harmless; resuming continues from the checkpoints.
  EXPECT_TRUE(manager_->Pause(a, "again").ok());
  auto resumed = manager_->Resume(a, "window over");
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  WaitState(a, JobState::kSucceeded);
  WaitState(b, JobState::kSucceeded);
  for (int d = 1; d <= 20; ++d) {
    const std::string day = absl::StrCat("2025-01-", d < 10 ? "0" : "", d);
    EXPECT_EQ(StageCount(a, day), 1) << day;  // never staged twice
  }
  // Only paused jobs resume; only queued or running ones pause.
  EXPECT_EQ(manager_->Resume(a, "").status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(manager_->Pause(a, "").status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(JobRunnerTest, APausedJobIsStillPausedAfterARestart) {
  gate_.Close("bf-1");
  const std::string a = Submit(Request("daily", "2025-01-01", "2025-01-11"));
  WaitState(a, JobState::kRunning);
  ASSERT_TRUE(engine_.WaitForCalls("StagePartition", 2, absl::Seconds(30)));
  ASSERT_TRUE(manager_->Pause(a, "hold").ok());
  gate_.OpenAll();
  WaitFor(a, [](const Job& j) {
    return j.counts.staged == 2 && j.counts.running == 0;
  });
  Restart();
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_EQ(Get(a).state, JobState::kPaused);
  // Still holding its partitions after the restart.
  const std::string b = Submit(Request("daily", "2025-01-05", "2025-01-06"));
  EXPECT_EQ(Get(b).state, JobState::kQueued);
  ASSERT_TRUE(manager_->Resume(a, "go").ok());
  WaitState(a, JobState::kSucceeded);
  WaitState(b, JobState::kSucceeded);
  EXPECT_EQ(engine_.PublishedRows("daily", "2025-01-10"), 1);
}

TEST_F(JobRunnerTest, APartitionFailingForGoodWhilePausedFailsTheJob) {
  // Paused while both workers are inside a partition; those partitions then
  // fail for good. The job cannot stay PAUSED (a resume would run a failed
  // partition as if nothing happened) nor be stuck: it ends FAILED, keeps
  // its staging, and a retry finishes it.
  for (int d = 1; d <= 10; ++d) {
    FailStage(absl::StrCat("2025-01-", d < 10 ? "0" : "", d),
              absl::InvalidArgumentError("division by zero"), -1);
  }
  gate_.Close("bf-1");
  const std::string a = Submit(Request("daily", "2025-01-01", "2025-01-11"));
  WaitState(a, JobState::kRunning);
  ASSERT_TRUE(engine_.WaitForCalls("StagePartition", 2, absl::Seconds(30)));
  ASSERT_TRUE(manager_->Pause(a, "maintenance").ok());
  gate_.OpenAll();
  // FAILED is recorded at once; the other partition in flight then drains,
  // and no partition of the job is left running.
  Job failed = WaitFor(a, [](const Job& j) {
    return j.state == JobState::kFailed && j.counts.running == 0;
  });
  EXPECT_EQ(failed.state, JobState::kFailed);
  EXPECT_THAT(failed.message, HasSubstr("division by zero"));
  EXPECT_EQ(failed.counts.running, 0);
  EXPECT_EQ(manager_->Resume(a, "").status().code(),
            absl::StatusCode::kFailedPrecondition);
  ClearStageFaults();
  auto retried = manager_->Retry(a, "data fixed");
  ASSERT_TRUE(retried.ok()) << retried.status();
  Job done = WaitState(a, JobState::kSucceeded);
  EXPECT_EQ(done.counts.published, 10);
}

TEST_F(JobRunnerTest, RetryRunsOnlyTheFailedPartitionsAndKeepsTheStaged) {
  // One partition fails for good (a bad-input error is not retried).
  FailStage("2025-01-05", absl::InvalidArgumentError("division by zero"), -1);
  BackfillRequest r = Request("daily", "2025-01-01", "2025-01-11");
  const std::string a = Submit(r);
  Job failed = WaitState(a, JobState::kFailed);
  EXPECT_THAT(failed.message, HasSubstr("partition 2025-01-05 of daily"));
  EXPECT_THAT(failed.message, HasSubstr("division by zero"));
  EXPECT_EQ(failed.counts.failed, 1);
  // A FAILED job keeps its staging for a retry.
  std::set<std::string> kept;
  absl::StatusOr<std::vector<PartitionTask>> tasks = store_.ListTasks(a);
  ASSERT_TRUE(tasks.ok());
  for (const PartitionTask& t : *tasks) {
    if (t.state != TaskState::kStaged) continue;
    kept.insert(t.partition);
    EXPECT_TRUE(engine_.StagedRows(a, "daily", t.partition).has_value())
        << t.partition;
  }
  ASSERT_FALSE(kept.empty());

  ClearStageFaults();
  auto retried = manager_->Retry(a, "data fixed");
  ASSERT_TRUE(retried.ok()) << retried.status();
  Job done = WaitState(a, JobState::kSucceeded);
  bool recorded = false;
  absl::StatusOr<std::vector<AuditEvent>> audit = store_.ListAuditEvents(a);
  ASSERT_TRUE(audit.ok());
  for (const AuditEvent& e : *audit) {
    if (e.from_state == "FAILED" && e.to_state == "QUEUED") {
      recorded = true;
      // The failed partition and those never started run again.
      EXPECT_THAT(e.message,
                  ::testing::MatchesRegex(
                      "retrying \\(data fixed\\): [1-9][0-9]* partitions? "
                      "runs? again, [1-9] staged partitions? (is|are) kept"));
    }
  }
  EXPECT_TRUE(recorded);
  EXPECT_EQ(done.counts.published, 10);
  EXPECT_EQ(StageCount(a, "2025-01-05"), 2);
  for (int d = 1; d <= 10; ++d) {
    const std::string day = absl::StrCat("2025-01-", d < 10 ? "0" : "", d);
    if (day != "2025-01-05") {
      EXPECT_EQ(StageCount(a, day), 1) << day << " was staged again";
    }
  }
  // A SUCCEEDED job is not retried.
  auto again = manager_->Retry(a, "");
  EXPECT_EQ(again.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(JobRunnerTest, AHeldJobIsSupersededByANewerOverlappingJob) {
  FailStage("2025-01-03", absl::InvalidArgumentError("bad row"), -1);
  const std::string a = Submit(Request("daily", "2025-01-01", "2025-01-06"));
  WaitState(a, JobState::kFailed);
  ClearStageFaults();
  // The FAILED job holds no partitions: the new job runs at once and
  // supersedes it.
  const std::string b = Submit(Request("daily", "2025-01-02", "2025-01-04"));
  WaitState(b, JobState::kSucceeded);
  Job superseded = WaitState(a, JobState::kCancelled);
  EXPECT_THAT(superseded.message, HasSubstr("superseded by " + b));
  EXPECT_FALSE(engine_.StagedRows(a, "daily", "2025-01-01").has_value());
  // A retry now is refused.
  auto retry = manager_->Retry(a, "");
  ASSERT_FALSE(retry.ok());
  EXPECT_THAT(std::string(retry.status().message()), Not(HasSubstr("retry")));
}

// The same pipeline, with every job of `daily` stopping for approval; the
// warehouse is claimed by the store, as the daemon does before it starts
// the runner (rollback markers name the claiming store).
class HeldRollbackTest : public JobRunnerTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(Claim());
    JobRunnerTest::SetUp();
  }
  void Claim() {
    absl::StatusOr<StoreInfo> info = store_.Info();
    ASSERT_TRUE(info.ok()) << info.status();
    ASSERT_TRUE(engine_.Claim(info->store_id, /*take_over=*/false).ok());
  }
  std::string PipelineText() const override {
    std::string yaml = kPipeline;
    const std::string daily = "  - name: daily\n    kind: derived\n";
    yaml.replace(yaml.find(daily), daily.size(),
                 daily + "    require_approval: true\n");
    return yaml;
  }

  absl::StatusOr<Job> Approve(const std::string& id, bool override = false) {
    Approval approval;
    approval.approved_by = "erin";
    approval.reason = "checked";
    approval.override_validation = override;
    return manager_->Approve(id, approval);
  }
  absl::StatusOr<Job> RollBack(const std::string& id) {
    RollbackRequest request;
    request.reason = "bad data";
    request.requested_by = "erin";
    return manager_->Rollback(id, request);
  }
  // A job of `daily` over [from, to) that is published (approved).
  std::string Published(const std::string& from, const std::string& to) {
    const std::string id = Submit(Request("daily", from, to));
    WaitState(id, JobState::kAwaitingApproval);
    absl::StatusOr<Job> approved = Approve(id);
    EXPECT_TRUE(approved.ok()) << approved.status();
    WaitState(id, JobState::kSucceeded);
    return id;
  }
  // The data changed since what was published: jobs from now on stage 2
  // rows a partition (the early cutoff would not republish identical ones).
  void DataChanged() {
    engine_.SetRowsFor(
        [](const std::string&, const std::string&) { return int64_t{2}; });
  }
  void ExpectSupersededBy(const std::string& held,
                          const std::string& rolled_back,
                          const std::string& staged_partition) {
    SCOPED_TRACE(held);
    const Job job = Get(held);
    EXPECT_EQ(job.state, JobState::kCancelled);
    EXPECT_THAT(job.message,
                HasSubstr("superseded by the rollback of " + rolled_back +
                          ", which restored some of the same "
                          "partitions"));
    EXPECT_FALSE(
        engine_.StagedRows(held, "daily", staged_partition).has_value());
    EXPECT_EQ(job.counts.staged, 0);
  }
};

TEST_F(HeldRollbackTest, ARollbackSupersedesTheHeldJobsItOverlapsOnceDone) {
  const std::string load = Published("2025-01-01", "2025-01-06");
  ASSERT_EQ(engine_.PublishedRows("daily", "2025-01-01"), 1);
  DataChanged();

  // Three jobs held for a decision inside the load's days, one of each
  // kind (disjoint, so that none supersedes another), and one outside.
  const std::string waiting =
      Submit(Request("daily", "2025-01-01", "2025-01-02"));
  WaitState(waiting, JobState::kAwaitingApproval);
  engine_.SetValidationFailures("daily", {"1 key is not unique"});
  const std::string invalid =
      Submit(Request("daily", "2025-01-02", "2025-01-04"));
  WaitState(invalid, JobState::kValidationFailed);
  engine_.SetValidationFailures("daily", {});
  FailStage("2025-01-05", absl::InvalidArgumentError("bad row"), -1);
  // A job fails as soon as one partition does, and drops what was still
  // ready: 2025-01-05 fails only once 2025-01-04 is staged, so that the
  // failed job holds staging for the rollback to supersede.
  engine_.SetHook([this](const Call& call) {
    if (call.method == "StagePartition" && call.partition == "2025-01-05") {
      const absl::Time deadline = absl::Now() + absl::Seconds(30);
      while (!engine_.StagedRows(call.job_id, "daily", "2025-01-04") &&
             absl::Now() < deadline) {
        absl::SleepFor(absl::Milliseconds(5));
      }
    }
    return OnCall(call);
  });
  const std::string failed =
      Submit(Request("daily", "2025-01-04", "2025-01-06"));
  WaitState(failed, JobState::kFailed);
  engine_.SetHook([this](const Call& call) { return OnCall(call); });
  ClearStageFaults();
  ASSERT_TRUE(engine_.StagedRows(failed, "daily", "2025-01-04").has_value());
  const std::string outside =
      Submit(Request("daily", "2025-01-10", "2025-01-11"));
  WaitState(outside, JobState::kAwaitingApproval);

  // A rollback that fails in the warehouse restores nothing and leaves
  // them held.
  {
    absl::MutexLock lock(&mu_);
    rollback_fault_ = absl::InternalError("the warehouse is on fire");
  }
  absl::StatusOr<Job> refused = RollBack(load);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(Get(load).state, JobState::kSucceeded);
  EXPECT_EQ(Get(waiting).state, JobState::kAwaitingApproval);
  EXPECT_EQ(Get(invalid).state, JobState::kValidationFailed);
  EXPECT_EQ(Get(failed).state, JobState::kFailed);
  EXPECT_TRUE(engine_.StagedRows(waiting, "daily", "2025-01-01").has_value());
  {
    absl::MutexLock lock(&mu_);
    rollback_fault_ = absl::OkStatus();
  }

  absl::StatusOr<Job> rolled = RollBack(load);
  ASSERT_TRUE(rolled.ok()) << rolled.status();
  EXPECT_EQ(rolled->state, JobState::kRolledBack);
  // An initial load rolled back leaves its days empty.
  for (const char* day : {"2025-01-01", "2025-01-03", "2025-01-05"}) {
    EXPECT_EQ(engine_.PublishedRows("daily", day), 0) << day;
  }
  ExpectSupersededBy(waiting, load, "2025-01-01");
  ExpectSupersededBy(invalid, load, "2025-01-02");
  ExpectSupersededBy(failed, load, "2025-01-04");
  // None of them can publish or run any more.
  EXPECT_EQ(Approve(waiting).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Approve(invalid, /*override=*/true).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(manager_->Retry(failed, "").status().code(),
            absl::StatusCode::kFailedPrecondition);
  for (const char* day : {"2025-01-01", "2025-01-03", "2025-01-04"}) {
    EXPECT_EQ(engine_.PublishedRows("daily", day), 0) << day;
  }

  // The job outside the rolled-back days is untouched and publishes.
  EXPECT_EQ(Get(outside).state, JobState::kAwaitingApproval);
  ASSERT_TRUE(Approve(outside).ok());
  WaitState(outside, JobState::kSucceeded);
  EXPECT_EQ(engine_.PublishedRows("daily", "2025-01-10"), 2);
}

TEST_F(HeldRollbackTest, ARollbackRefusedForALaterPublishLeavesHeldJobsHeld) {
  const std::string first = Published("2025-01-01", "2025-01-04");
  DataChanged();
  const std::string later = Published("2025-01-03", "2025-01-05");
  const std::string waiting =
      Submit(Request("daily", "2025-01-01", "2025-01-02"));
  WaitState(waiting, JobState::kAwaitingApproval);
  absl::StatusOr<Job> refused = RollBack(first);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr(later));
  EXPECT_EQ(Get(waiting).state, JobState::kAwaitingApproval);
  // Still approvable: it publishes.
  ASSERT_TRUE(Approve(waiting).ok());
  WaitState(waiting, JobState::kSucceeded);
}

TEST_F(HeldRollbackTest, ARollbackRecoveredAtStartSupersedesTheHeldJobs) {
  const std::string load = Published("2025-01-01", "2025-01-04");
  DataChanged();
  const std::string waiting =
      Submit(Request("daily", "2025-01-02", "2025-01-03"));
  WaitState(waiting, JobState::kAwaitingApproval);
  // The process dies right after the warehouse committed the rollback:
  // the engine restored the rows, nothing else happened.
  manager_->Shutdown();
  RollbackSpec spec;
  spec.layout.job_id = load;
  spec.layout.items.push_back(
      {catalog_->Find("daily"), Get(load).plan.datasets.at(0).partitions});
  spec.marker.reason = "bad data";
  spec.marker.requested_by = "erin";
  ASSERT_TRUE(engine_.Rollback(spec).ok());
  manager_.reset();
  engine_.Restart();
  ASSERT_NO_FATAL_FAILURE(Claim());
  Start();
  EXPECT_EQ(Get(load).state, JobState::kRolledBack);
  ExpectSupersededBy(waiting, load, "2025-01-02");
  EXPECT_EQ(Approve(waiting).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

// A job records SUCCEEDED before it lets go of its partitions (retention
// runs after the publish): a rollback or a confirmation asked for in that
// moment waits for it instead of calling the job a conflict with itself.
TEST_F(HeldRollbackTest, ARollbackRightAfterSucceededWaitsForTheRunToLetGo) {
  // Start() enforces retention once on a worker: that call goes first, so
  // that the hook below holds the retention step after a publish.
  auto retention_ran = [this] {
    for (const Call& call : engine_.call_log()) {
      if (call.method == "ListRollbackCopies") return true;
    }
    return false;
  };
  for (int i = 0; i < 5000 && !retention_ran(); ++i) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  ASSERT_TRUE(retention_ran());
  for (const char* action : {"confirm", "rollback"}) {
    SCOPED_TRACE(action);
    hold_.Close("retention");
    std::atomic<bool> held{false};
    engine_.SetHook([&](const Call& call) {
      if (call.method == "ListRollbackCopies" && !held.exchange(true)) {
        hold_.Wait("retention");
      }
      return OnCall(call);
    });
    const bool confirm = std::string(action) == "confirm";
    const std::string load = confirm ? Published("2025-01-01", "2025-01-03")
                                     : Published("2025-01-05", "2025-01-07");
    ASSERT_TRUE(held.load());  // the run is still in its retention step
    std::atomic<bool> returned{false};
    absl::StatusOr<Job> result = absl::UnknownError("not run");
    std::thread asker([&] {
      result = confirm ? manager_->Confirm(load) : RollBack(load);
      returned = true;
    });
    absl::SleepFor(absl::Milliseconds(200));
    EXPECT_FALSE(returned.load()) << result.status();
    hold_.OpenAll();
    asker.join();
    ASSERT_TRUE(result.ok()) << result.status();
    if (confirm) {
      EXPECT_EQ(WaitEnded(load).state, JobState::kSucceeded);
    } else {
      EXPECT_EQ(result->state, JobState::kRolledBack);
    }
    engine_.SetHook([this](const Call& call) { return OnCall(call); });
  }
}

TEST_F(JobRunnerTest, AValidationFailedJobIsNotRetriedAndCanBeCancelled) {
  engine_.SetValidationFailures("daily", {"1 key is not unique"});
  const std::string a = Submit(Request("daily", "2025-01-01", "2025-01-03"));
  Job failed = WaitState(a, JobState::kValidationFailed);
  EXPECT_THAT(failed.message, HasSubstr("not unique"));
  auto retry = manager_->Retry(a, "");
  ASSERT_FALSE(retry.ok());
  EXPECT_THAT(std::string(retry.status().message()),
              HasSubstr("submit a new backfill"));
  auto cancelled = manager_->Cancel(a, "not needed");
  ASSERT_TRUE(cancelled.ok()) << cancelled.status();
  EXPECT_EQ(cancelled->state, JobState::kCancelled);
  EXPECT_FALSE(engine_.StagedRows(a, "daily", "2025-01-01").has_value());
  EXPECT_EQ(engine_.PublishedRows("daily", "2025-01-01"), 0);
}

TEST_F(JobRunnerTest, CancelAWaitingJob) {
  gate_.Close("bf-1");
  const std::string a = Submit(Request("daily", "2025-01-01", "2025-01-05"));
  const std::string b = Submit(Request("daily", "2025-01-02", "2025-01-03"));
  EXPECT_EQ(Get(b).state, JobState::kQueued);
  auto cancelled = manager_->Cancel(b, "wrong");
  ASSERT_TRUE(cancelled.ok()) << cancelled.status();
  EXPECT_EQ(cancelled->state, JobState::kCancelled);
  gate_.OpenAll();
  WaitState(a, JobState::kSucceeded);
  EXPECT_EQ(StageCount(b, "2025-01-02"), 0);
  // Its partition is settled by the cancel itself, or, when a step of the
  // job was in flight (the write of its "waiting for" message), by that
  // step as it ends.
  EXPECT_TRUE(WaitUntil([&] { return Get(b).counts.cancelled == 1; }))
      << Get(b).counts.cancelled;
}

TEST_F(JobRunnerTest, ACancelDuringAStepOfAWaitingJobIsSettledWhenItEnds) {
  // The write of the waiting job's "waiting for" message is held while the
  // cancel comes: the cancel is recorded at once, and the step settles the
  // job's partitions as it ends.
  absl::Notification in_step, release;
  HoldTheFirstWaitingMessage(&in_step, &release);
  gate_.Close("bf-1");
  const std::string a = Submit(Request("daily", "2025-01-01", "2025-01-05"));
  const std::string b = Submit(Request("daily", "2025-01-02", "2025-01-03"));
  in_step.WaitForNotification();
  auto cancelled = manager_->Cancel(b, "wrong");
  ASSERT_TRUE(cancelled.ok()) << cancelled.status();
  EXPECT_EQ(cancelled->state, JobState::kCancelled);
  EXPECT_EQ(Get(b).counts.cancelled, 0);  // not yet: the step holds it
  release.Notify();
  EXPECT_TRUE(WaitUntil([&] { return Get(b).counts.cancelled == 1; }));
  gate_.OpenAll();
  WaitState(a, JobState::kSucceeded);
  EXPECT_EQ(StageCount(b, "2025-01-02"), 0);
  EXPECT_EQ(Get(b).state, JobState::kCancelled);
}

TEST_F(JobRunnerTest, AStepThatSettlesACancelWhileItIsRecordedIsNotRaced) {
  // The waiting job's step (its "waiting for" message) is held until the
  // cancel has recorded CANCELLED; it then ends, settles the job and lets
  // the runner forget it before Cancel goes on. Cancel must not use the
  // job after that (an ASan build reports any use).
  absl::Notification in_step, release;
  HoldTheFirstWaitingMessage(&in_step, &release);
  gate_.Close("bf-1");
  const std::string a = Submit(Request("daily", "2025-01-01", "2025-01-05"));
  const std::string b = Submit(Request("daily", "2025-01-02", "2025-01-03"));
  in_step.WaitForNotification();
  observer_.SetTransitionHook(
      [&](const std::string& id, JobState, JobState to) {
        if (id != b || to != JobState::kCancelled) return;
        release.Notify();
        // Until the step has settled the job (bounded).
        WaitUntil([&] { return Get(b).counts.cancelled == 1; });
      });
  auto cancelled = manager_->Cancel(b, "wrong");
  ASSERT_TRUE(cancelled.ok()) << cancelled.status();
  EXPECT_EQ(cancelled->state, JobState::kCancelled);
  EXPECT_EQ(Get(b).counts.cancelled, 1);
  observer_.SetTransitionHook(nullptr);
  gate_.OpenAll();
  WaitState(a, JobState::kSucceeded);
  EXPECT_EQ(StageCount(b, "2025-01-02"), 0);
}

// Partitions take a millisecond each (real time), so that the order of the
// engine's calls follows the runner's choices rather than thread wake-ups.

}  // namespace
}  // namespace core_job_runner_test
}  // namespace backfill
