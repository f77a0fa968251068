// StepFixture: what a test of one unit of a job's run (core/run/) works
// with, without a runner: a catalog of one pipeline, the in-memory state
// store, the fake engine, a manual clock, an observer that records what it
// is told, a job table and the StepContext over them. Jobs are created in
// the store from a real plan and held in the table as the runner holds
// them (AddJob), and moved through the store's states as a run would have
// (MoveTo). The pipeline:
//
//   orders (source, by day) -> daily (derived, identity, retention of one
//   version) -> rollup (derived from daily, identity);
//   approved (derived from orders, require_approval).
//
// Thread-safety: the fixture is used from the test's thread; what it owns
// is as thread-safe as its own documentation says.

#ifndef BACKFILL_TESTS_TESTING_STEP_FIXTURE_H_
#define BACKFILL_TESTS_TESTING_STEP_FIXTURE_H_

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/base/clock.h"
#include "core/model/catalog.h"
#include "core/model/job.h"
#include "core/model/live_catalog.h"
#include "core/model/pipeline_loader.h"
#include "core/plan/planner.h"
#include "core/run/active_job.h"
#include "core/run/admission.h"
#include "core/run/job_observer.h"
#include "core/run/job_table.h"
#include "core/run/step_context.h"
#include "gtest/gtest.h"
#include "tests/testing/fake_engine.h"
#include "tests/testing/memory_state_store.h"

namespace backfill::testing {

inline constexpr char kStepPipeline[] = R"yaml(
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
    retention: {versions: 1}
  - name: rollup
    kind: derived
    partition: {column: day, grain: day}
    upstream: [{dataset: daily, mapping: identity}]
    transform: "SELECT day, n FROM daily WHERE day = :partition"
    contract: {columns: {day: TEXT, n: INTEGER}}
  - name: approved
    kind: derived
    require_approval: true
    partition: {column: day, grain: day}
    upstream: [{dataset: orders, mapping: identity}]
    transform: "SELECT day, 2 AS n FROM raw_orders WHERE day = :partition"
    contract: {columns: {day: TEXT, n: INTEGER}}
)yaml";

// Records what a step tells the observer.
class RecordingStepObserver : public JobObserver {
 public:
  struct Transition {
    std::string job_id;
    JobState from;
    JobState to;
  };
  void OnJobTransition(const std::string& job_id, JobState from, JobState to,
                       const std::string& message) override {
    absl::MutexLock lock(&mu_);
    transitions_.push_back({job_id, from, to});
  }
  void OnPartitionCheckpointed(const std::string& dataset, TaskState state,
                               int64_t rows) override {
    absl::MutexLock lock(&mu_);
    ++checkpointed_[state];
  }
  void OnJobValidationTime(const std::string& job_id,
                           absl::Duration duration) override {
    absl::MutexLock lock(&mu_);
    ++validations_;
  }
  void OnJobPublished(const std::string& job_id,
                      const std::vector<PublishedDataset>& datasets) override {
    absl::MutexLock lock(&mu_);
    published_[job_id] = datasets;
  }
  void OnJobFinished(const std::string& job_id, JobState state,
                     double estimated_cost, double actual_cost) override {
    absl::MutexLock lock(&mu_);
    finished_.push_back({job_id, state});
  }
  void OnStorageFailing(Storage storage, const std::string& what,
                        const absl::Status& status) override {
    absl::MutexLock lock(&mu_);
    ++failing_[static_cast<int>(storage)];
  }
  void OnStorageRecovered(Storage storage) override {
    absl::MutexLock lock(&mu_);
    ++recovered_[static_cast<int>(storage)];
  }

  std::vector<Transition> transitions() const {
    absl::MutexLock lock(&mu_);
    return transitions_;
  }
  int checkpointed(TaskState state) const {
    absl::MutexLock lock(&mu_);
    auto it = checkpointed_.find(state);
    return it == checkpointed_.end() ? 0 : it->second;
  }
  int validations() const {
    absl::MutexLock lock(&mu_);
    return validations_;
  }
  std::map<std::string, std::vector<PublishedDataset>> published() const {
    absl::MutexLock lock(&mu_);
    return published_;
  }
  std::vector<std::pair<std::string, JobState>> finished() const {
    absl::MutexLock lock(&mu_);
    return finished_;
  }
  int failing(Storage s) const {
    absl::MutexLock lock(&mu_);
    return failing_[static_cast<int>(s)];
  }
  int recovered(Storage s) const {
    absl::MutexLock lock(&mu_);
    return recovered_[static_cast<int>(s)];
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<Transition> transitions_ ABSL_GUARDED_BY(mu_);
  std::map<TaskState, int> checkpointed_ ABSL_GUARDED_BY(mu_);
  int validations_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, std::vector<PublishedDataset>> published_
      ABSL_GUARDED_BY(mu_);
  std::vector<std::pair<std::string, JobState>> finished_ ABSL_GUARDED_BY(mu_);
  int failing_[2] ABSL_GUARDED_BY(mu_) = {0, 0};
  int recovered_[2] ABSL_GUARDED_BY(mu_) = {0, 0};
};

class StepFixture : public ::testing::Test {
 protected:
  StepFixture() {
    absl::StatusOr<Catalog> catalog =
        LoadPipelineTexts({{"pipeline.yaml", kStepPipeline}});
    EXPECT_TRUE(catalog.ok()) << catalog.status();
    catalog_ = std::make_shared<const Catalog>(*std::move(catalog));
    live_ = LiveCatalog::Borrowing(catalog_.get());
  }

  // The options the context is built with (set before ctx() is first
  // used).
  RunnerOptions& options() { return options_; }
  const StepContext& ctx() {
    if (ctx_ == nullptr) {
      ctx_ = std::make_unique<StepContext>(&store_, &engine_, &clock_,
                                           &observer_, options_, &jobs_);
    }
    return *ctx_;
  }
  // Marks the table started, as the runner's Start does.
  void StartTable() {
    absl::MutexLock lock(jobs_.mu());
    jobs_.SetStartedLocked();
  }

  BackfillRequest Request(const std::string& dataset, const std::string& from,
                          const std::string& to, bool downstream = false) {
    BackfillRequest r;
    r.dataset = dataset;
    r.from = from;
    r.to = to;
    r.reason = "test";
    r.exclude_downstream = !downstream;
    return r;
  }

  // Creates a job of `request` in the store (QUEUED) and returns it.
  Job CreateJob(const BackfillRequest& request) {
    absl::StatusOr<Plan> plan =
        Planner(catalog_.get(), &engine_).MakePlan(request);
    EXPECT_TRUE(plan.ok()) << plan.status();
    Job job;
    job.state = JobState::kQueued;
    job.request = request;
    job.plan = plan.ok() ? *std::move(plan) : Plan();
    absl::StatusOr<CreateJobResult> created =
        store_.CreateJob(job, clock_.Now());
    EXPECT_TRUE(created.ok()) << created.status();
    return created.ok() ? created->job : Job();
  }

  // Moves job `id` in the store along `states`, one transition each.
  void MoveTo(const std::string& id, const std::vector<JobState>& states) {
    for (JobState to : states) {
      ASSERT_TRUE(
          store_.TransitionJob(id, std::nullopt, to, "test", clock_.Now()).ok())
          << "to " << JobStateName(to);
    }
  }

  // Holds job `stored` in the table as the runner would: admitted (held
  // when `phase` is kHeld), in `phase`, loaded (tasks, layout, graph) and
  // its staging prepared when `prepare`.
  ActiveJob* Hold(const Job& stored, JobPhase phase, bool prepare = true) {
    auto active = std::make_unique<ActiveJob>();
    active->catalog = catalog_;
    active->job = stored;
    active->state = stored.state;
    active->phase = phase;
    ActiveJob* job;
    {
      absl::MutexLock lock(jobs_.mu());
      jobs_.admission().Add(stored.id, ScopeOf(stored.plan),
                            phase == JobPhase::kHeld);
      job = jobs_.AddLocked(std::move(active));
    }
    EXPECT_TRUE(LoadJob(&store_, jobs_.mu(), job).ok());
    if (prepare) {
      EXPECT_TRUE(engine_.PrepareJob(job->layout).ok());
      absl::MutexLock lock(jobs_.mu());
      job->prepared = true;
    }
    return job;
  }

  // A job of `request` whose partitions are all staged (one row each, in
  // the engine) and checkpointed (in the store and in memory), moved in
  // the store through RUNNING to `states` (VALIDATING, ...), in kFinishing.
  ActiveJob* StagedJob(const BackfillRequest& request,
                       const std::vector<JobState>& states) {
    const Job created = CreateJob(request);
    MoveTo(created.id, {JobState::kRunning});
    ActiveJob* job = Hold(Stored(created.id), JobPhase::kRunning);
    {
      absl::MutexLock lock(jobs_.mu());
      job->graph->Requeue();
      while (std::optional<size_t> i = job->graph->Pop()) {
        PartitionTask t = job->tasks.Task(*i);
        t.state = TaskState::kStaged;
        t.rows_written = 1;
        t.attempts = 1;
        t.output_fingerprint = "fp:" + t.partition;
        engine_.SetStagedRows(created.id, t.dataset, t.partition, 1);
        EXPECT_TRUE(store_.UpdateTask(t).ok());
        job->tasks.Set(*i, t);
        job->graph->Done(*i);
      }
    }
    MoveTo(created.id, states);
    absl::MutexLock lock(jobs_.mu());
    job->phase = JobPhase::kFinishing;
    job->state = states.empty() ? JobState::kRunning : states.back();
    return job;
  }

  // A validated PUBLISHING job of `request` (StagedJob).
  ActiveJob* PublishingJob(const BackfillRequest& request) {
    ActiveJob* job =
        StagedJob(request, {JobState::kValidating, JobState::kPublishing});
    absl::MutexLock lock(jobs_.mu());
    job->validated = true;
    return job;
  }

  Job Stored(const std::string& id) {
    absl::StatusOr<Job> job = store_.GetJob(id);
    EXPECT_TRUE(job.ok()) << job.status();
    return job.ok() ? *job : Job();
  }
  std::vector<PartitionTask> Tasks(const std::string& id) {
    absl::StatusOr<std::vector<PartitionTask>> tasks = store_.ListTasks(id);
    EXPECT_TRUE(tasks.ok()) << tasks.status();
    return tasks.ok() ? *tasks : std::vector<PartitionTask>();
  }
  JobPhase PhaseOf(ActiveJob* job) {
    absl::MutexLock lock(jobs_.mu());
    return job->phase;
  }

  std::shared_ptr<const Catalog> catalog_;
  std::unique_ptr<LiveCatalog> live_;
  InMemoryStateStore store_;
  FakeEngine engine_;
  ManualClock clock_{absl::FromUnixSeconds(1767225600)};
  RecordingStepObserver observer_;
  JobTable jobs_{&store_};
  RunnerOptions options_;
  std::unique_ptr<StepContext> ctx_;
};

}  // namespace backfill::testing

#endif  // BACKFILL_TESTS_TESTING_STEP_FIXTURE_H_
