// Tests of the job runner through the manager facade, over the in-memory
// state store and the fake engine (no SQLite) and a manual clock (retry
// loops and backoff run without real time): queueing of overlapping jobs in
// submission order, pause and resume (also across a restart), retry of
// failed partitions only, held jobs superseded by newer ones and by the
// rollback of an overlapping job, fairness and priorities, max_parallel, and
// storage failures that are retried while the job keeps its partitions.

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
#include "core/base/clock.h"
#include "core/model/pipeline_loader.h"
#include "core/run/backfill_manager.h"
#include "core/run/job_observer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/fake_engine.h"
#include "tests/testing/memory_state_store.h"

namespace backfill {
namespace core_job_runner_test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using Call = ::backfill::testing::FakeEngine::Call;

// orders (source, by day) -> daily (derived) -> rollup (derived, identity);
// other (derived from orders, disjoint from daily), heavy (max_parallel 1).
constexpr char kPipeline[] = R"yaml(
datasets:
  - name: orders
    kind: source
    table: raw_orders
    partition: {column: day, grain: day}
  - name: daily
    kind: derived
    partition: {column: day, grain: day}
    upstream: [{dataset: orders, mapping: identity}]
    transform: "SELECT day, 1 AS n FROM raw_orders WHERE day = :partition"
    contract: {columns: {day: TEXT, n: INTEGER}}
  - name: rollup
    kind: derived
    partition: {column: day, grain: day}
    upstream: [{dataset: daily, mapping: identity}]
    transform: "SELECT day, n FROM daily WHERE day = :partition"
    contract: {columns: {day: TEXT, n: INTEGER}}
  - name: other
    kind: derived
    partition: {column: day, grain: day}
    upstream: [{dataset: orders, mapping: identity}]
    transform: "SELECT day, 2 AS n FROM raw_orders WHERE day = :partition"
    contract: {columns: {day: TEXT, n: INTEGER}}
  - name: heavy
    kind: derived
    max_parallel: 1
    partition: {column: day, grain: day}
    upstream: [{dataset: orders, mapping: identity}]
    transform: "SELECT day, 3 AS n FROM raw_orders WHERE day = :partition"
    contract: {columns: {day: TEXT, n: INTEGER}}
)yaml";

// Records the storage events and the timings the runner reports; calls a
// hook (if set) on each job transition, on the thread that made it.
class RecordingObserver : public JobObserver {
 public:
  struct StageTimed {
    std::string dataset;
    StageTimings timings;
  };
  using TransitionHook = std::function<void(const std::string& job_id,
                                            JobState from, JobState to)>;
  void SetTransitionHook(TransitionHook hook) {
    absl::MutexLock lock(&mu_);
    transition_hook_ = std::move(hook);
  }
  void OnJobTransition(const std::string& job_id, JobState from, JobState to,
                       const std::string& message) override {
    TransitionHook hook;
    {
      absl::MutexLock lock(&mu_);
      hook = transition_hook_;
    }
    if (hook) hook(job_id, from, to);
  }
  void OnStorageFailing(Storage storage, const std::string& what,
                        const absl::Status& status) override {
    absl::MutexLock lock(&mu_);
    ++failing_[static_cast<int>(storage)];
    healthy_[static_cast<int>(storage)] = false;
  }
  void OnStorageRecovered(Storage storage) override {
    absl::MutexLock lock(&mu_);
    ++recovered_[static_cast<int>(storage)];
    healthy_[static_cast<int>(storage)] = true;
  }
  // True unless the last event of `s` was a failure.
  bool healthy(Storage s) const {
    absl::MutexLock lock(&mu_);
    return healthy_[static_cast<int>(s)];
  }
  int failing(Storage s) const {
    absl::MutexLock lock(&mu_);
    return failing_[static_cast<int>(s)];
  }
  int recovered(Storage s) const {
    absl::MutexLock lock(&mu_);
    return recovered_[static_cast<int>(s)];
  }
  void OnPartitionStageTimings(const std::string& dataset,
                               const StageTimings& timings) override {
    absl::MutexLock lock(&mu_);
    stage_timings_.push_back({dataset, timings});
  }
  void OnJobValidationTime(const std::string& job_id,
                           absl::Duration duration) override {
    absl::MutexLock lock(&mu_);
    validations_.push_back({job_id, duration});
  }
  std::vector<StageTimed> stage_timings() const {
    absl::MutexLock lock(&mu_);
    return stage_timings_;
  }
  std::vector<std::pair<std::string, absl::Duration>> validations() const {
    absl::MutexLock lock(&mu_);
    return validations_;
  }
  void OnJobPublished(const std::string& job_id,
                      const std::vector<PublishedDataset>& datasets) override {
    absl::MutexLock lock(&mu_);
    published_[job_id] = datasets;
  }
  std::vector<PublishedDataset> published(const std::string& job_id) const {
    absl::MutexLock lock(&mu_);
    auto it = published_.find(job_id);
    return it == published_.end() ? std::vector<PublishedDataset>()
                                  : it->second;
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<StageTimed> stage_timings_ ABSL_GUARDED_BY(mu_);
  std::vector<std::pair<std::string, absl::Duration>> validations_
      ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::vector<PublishedDataset>> published_
      ABSL_GUARDED_BY(mu_);
  int failing_[2] ABSL_GUARDED_BY(mu_) = {0, 0};
  int recovered_[2] ABSL_GUARDED_BY(mu_) = {0, 0};
  bool healthy_[2] ABSL_GUARDED_BY(mu_) = {true, true};
  TransitionHook transition_hook_ ABSL_GUARDED_BY(mu_);
};

// A gate for StagePartition calls of chosen jobs: closed, they wait.
class Gate {
 public:
  void Close(const std::string& job) {
    absl::MutexLock lock(&mu_);
    closed_.insert(job);
  }
  void Open(const std::string& job) {
    absl::MutexLock lock(&mu_);
    closed_.erase(job);
    opened_.SignalAll();
  }
  void OpenAll() {
    absl::MutexLock lock(&mu_);
    closed_.clear();
    opened_.SignalAll();
  }
  void Wait(const std::string& job) {
    absl::MutexLock lock(&mu_);
    while (closed_.count(job) || closed_.count("*")) opened_.Wait(&mu_);
  }

 private:
  absl::Mutex mu_;
  absl::CondVar opened_;
  std::set<std::string> closed_ ABSL_GUARDED_BY(mu_);
};

class JobRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto catalog = LoadPipelineTexts({{"pipeline.yaml", PipelineText()}});
    ASSERT_TRUE(catalog.ok()) << catalog.status();
    catalog_ = std::make_unique<Catalog>(*std::move(catalog));
    engine_.SetHook([this](const Call& call) { return OnCall(call); });
    Start();
  }
  virtual std::string PipelineText() const { return kPipeline; }

  void TearDown() override {
    gate_.OpenAll();
    hold_.OpenAll();
    if (manager_) manager_->Shutdown();
    manager_.reset();
  }

  void Start(int workers = 2) {
    ManagerOptions options;
    options.workers = workers;
    options.max_attempts = 3;
    options.max_queued_jobs = max_queued_jobs_;
    options.max_queued_jobs_source = "the test";
    manager_ = std::make_unique<BackfillManager>(
        catalog_.get(), &store_, &engine_, &clock_, &observer_, options);
    ASSERT_TRUE(manager_->Start().ok());
  }
  // As a restart of the daemon on the same storage.
  void Restart(int workers = 2) {
    manager_->Shutdown();
    manager_.reset();
    engine_.Restart();
    Start(workers);
  }

  absl::Status OnCall(const Call& call) {
    if (call.method == "Rollback") {
      absl::MutexLock lock(&mu_);
      return rollback_fault_;
    }
    if (call.method == "StagePartition") {
      {
        // The order the runner handed partitions out (a call held at the
        // gate may resume after later ones).
        absl::MutexLock lock(&mu_);
        dispatched_.push_back(call.job_id);
      }
      gate_.Wait(call.job_id);
      absl::MutexLock lock(&mu_);
      order_.push_back(call.job_id + "/" + call.dataset + "/" + call.partition);
      auto fail = stage_faults_.find(call.partition);
      if (fail != stage_faults_.end() && fail->second.remaining != 0) {
        if (fail->second.remaining > 0) --fail->second.remaining;
        return fail->second.status;
      }
    }
    return absl::OkStatus();
  }

  // StagePartition of `partition` fails with `status`, `times` times (-1:
  // always).
  void FailStage(const std::string& partition, absl::Status status, int times) {
    absl::MutexLock lock(&mu_);
    stage_faults_[partition] = {std::move(status), times};
  }
  void ClearStageFaults() {
    absl::MutexLock lock(&mu_);
    stage_faults_.clear();
  }
  std::vector<std::string> Order() {
    absl::MutexLock lock(&mu_);
    return order_;
  }
  int StageCount(const std::string& job, const std::string& partition) {
    int n = 0;
    for (const std::string& e : Order()) {
      if (absl::StartsWith(e, job + "/") &&
          absl::EndsWith(e, "/" + partition)) {
        ++n;
      }
    }
    return n;
  }

  BackfillRequest Request(const std::string& dataset, const std::string& from,
                          const std::string& to) {
    BackfillRequest r;
    r.dataset = dataset;
    r.from = from;
    r.to = to;
    r.reason = "test";
    r.exclude_downstream = true;
    return r;
  }
  std::string Submit(const BackfillRequest& r, SubmitOptions o = {}) {
    auto s = manager_->Submit(r, o);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? s->job.id : "";
  }

  Job Get(const std::string& id) {
    auto job = store_.GetJob(id);
    EXPECT_TRUE(job.ok()) << job.status();
    return job.ok() ? *job : Job{};
  }
  // Waits (real time, bounded) until `pred` holds for the job.
  Job WaitFor(const std::string& id,
              const std::function<bool(const Job&)>& pred,
              absl::Duration timeout = absl::Seconds(30)) {
    const absl::Time deadline = absl::Now() + timeout;
    Job job;
    while (absl::Now() < deadline) {
      job = Get(id);
      if (pred(job)) return job;
      absl::SleepFor(absl::Milliseconds(2));
    }
    ADD_FAILURE() << id << " did not get there; it is "
                  << JobStateName(job.state) << ": " << job.message;
    return job;
  }
  Job WaitState(const std::string& id, JobState state) {
    return WaitFor(id, [state](const Job& j) { return j.state == state; });
  }
  // Holds the first write of a waiting job's "waiting for" message (a step
  // of that job in flight): `in_step` is notified when it begins, and it
  // goes on once `release` is.
  void HoldTheFirstWaitingMessage(absl::Notification* in_step,
                                  absl::Notification* release) {
    store_.SetWriteHook([in_step, release](const std::string& method) {
      if (method == "SetJobMessage" && !in_step->HasBeenNotified()) {
        in_step->Notify();
        release->WaitForNotification();
      }
      return absl::OkStatus();
    });
  }
  Job WaitStaged(const std::string& id, int64_t n) {
    return WaitFor(id, [n](const Job& j) { return j.counts.staged >= n; });
  }
  Job WaitEnded(const std::string& id,
                absl::Duration timeout = absl::Seconds(30)) {
    return WaitFor(
        id,
        [](const Job& j) {
          return IsTerminal(j.state) || j.state == JobState::kPaused ||
                 j.state == JobState::kAwaitingApproval;
        },
        timeout);
  }
  // Waits (real time, bounded) until `pred` holds; false on timeout.
  static bool WaitUntil(const std::function<bool()>& pred,
                        absl::Duration timeout = absl::Seconds(30)) {
    const absl::Time deadline = absl::Now() + timeout;
    while (absl::Now() < deadline) {
      if (pred()) return true;
      absl::SleepFor(absl::Milliseconds(1));
    }
    return pred();
  }

  std::unique_ptr<Catalog> catalog_;
  testing::InMemoryStateStore store_;
  testing::FakeEngine engine_;
  ManualClock clock_{absl::FromUnixSeconds(1767225600)};
  RecordingObserver observer_;
  Gate gate_;
  Gate hold_;  // for calls a test holds back by name
  std::unique_ptr<BackfillManager> manager_;
  int64_t max_queued_jobs_ = 1000;

  absl::Mutex mu_;
  std::vector<std::string> order_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> dispatched_ ABSL_GUARDED_BY(mu_);
  struct Fault {
    absl::Status status;
    int remaining = 0;
  };
  std::map<std::string, Fault> stage_faults_ ABSL_GUARDED_BY(mu_);
  absl::Status rollback_fault_ ABSL_GUARDED_BY(mu_);  // Engine::Rollback
};

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
}  // namespace core_job_runner_test
}  // namespace backfill
