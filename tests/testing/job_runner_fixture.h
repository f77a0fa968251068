// JobRunnerTest: the fixture of the job runner's tests (core_job_runner_*
// tests): a manager over the in-memory state store, the fake engine (no
// SQLite) and a manual clock, with a pipeline of five day datasets, an
// observer that records what the runner reports, and gates that hold
// chosen partitions in the engine until a test opens them.
//
// Owned by each test; the gates are thread-safe (the runner's workers wait
// on them), the rest is used by the test's thread.

#ifndef BACKFILL_TESTS_TESTING_JOB_RUNNER_FIXTURE_H_
#define BACKFILL_TESTS_TESTING_JOB_RUNNER_FIXTURE_H_

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

namespace backfill::testing {

using Call = ::backfill::testing::FakeEngine::Call;

// orders (source, by day) -> daily (derived) -> rollup (derived, identity);
// other (derived from orders, disjoint from daily), heavy (max_parallel 1).
inline constexpr char kPipeline[] = R"yaml(
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

}  // namespace backfill::testing

#endif  // BACKFILL_TESTS_TESTING_JOB_RUNNER_FIXTURE_H_
