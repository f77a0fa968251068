// Tests of SqliteStateStore on a temporary directory.

#include <sqlite3.h>

#include <atomic>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "core/job_state_machine.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/sqlite_state_store.h"

namespace backfill {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class StateStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = ::testing::TempDir() + "/state_store_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/state.db";
    Reopen();
  }
  void TearDown() override {
    store_.reset();
    std::filesystem::remove_all(dir_);
  }
  void Reopen() {
    store_.reset();
    auto store = SqliteStateStore::Open(path_);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
  }

  // Moves a job to `target` along the shortest path of legal transitions.
  void Reach(const std::string& id, JobState target, absl::Time at) {
    auto job = store_->GetJob(id);
    ASSERT_TRUE(job.ok()) << job.status();
    std::map<JobState, JobState> parent;
    std::deque<JobState> queue = {job->state};
    parent[job->state] = job->state;
    while (!queue.empty() && !parent.count(target)) {
      const JobState s = queue.front();
      queue.pop_front();
      for (JobState next : NextStates(s)) {
        if (parent.emplace(next, s).second) queue.push_back(next);
      }
    }
    ASSERT_TRUE(parent.count(target)) << "no path to " << JobStateName(target);
    std::vector<JobState> path;
    for (JobState s = target; s != job->state; s = parent[s]) {
      path.insert(path.begin(), s);
    }
    for (JobState s : path) {
      absl::Status moved =
          store_->TransitionJob(id, std::nullopt, s, "moved", at);
      ASSERT_TRUE(moved.ok()) << moved;
    }
  }

  static Job MakeJob(const std::string& key = "") {
    Job job;
    job.request.dataset = "daily_revenue";
    job.request.from = "2025-01-01";
    job.request.to = "2025-01-03";
    job.request.partitions = {"a:b", "", "x'y\"z;--", "12:"};
    job.request.reason = "fix refunds";
    job.request.ticket = "DATA-1";
    job.request.requested_by = "alice";
    job.request.exclude_downstream = true;
    job.idempotency_key = key;
    job.request_fingerprint = "fp-1";
    job.message = "submitted";
    DatasetPlan a;
    a.dataset = "daily_revenue";
    a.partitions = {"2025-01-01", "2025-01-02"};
    a.reason = "requested";
    a.cost = {20, 100};
    a.transform_version = "3f2a9c0d11aa7b42";
    DatasetPlan b;
    b.dataset = "monthly_revenue";
    b.partitions = {"2025-01"};
    b.reason = "downstream of daily_revenue";
    b.cost = {2, 10};
    job.plan.datasets = {a, b};
    job.plan.cost = {22, 110};
    return job;
  }

  absl::Time T(int seconds) {
    return absl::FromUnixSeconds(1700000000 + seconds);
  }

  std::string dir_;
  std::string path_;
  std::unique_ptr<SqliteStateStore> store_;
};

TEST_F(StateStoreTest, CreateAndGetRoundTrips) {
  auto created = store_->CreateJob(MakeJob(), T(0));
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_TRUE(created->created);
  EXPECT_EQ(created->job.id, "bf-1");

  auto job = store_->GetJob("bf-1");
  ASSERT_TRUE(job.ok()) << job.status();
  Job want = MakeJob();
  EXPECT_EQ(job->state, JobState::kQueued);
  EXPECT_EQ(job->request.dataset, want.request.dataset);
  EXPECT_EQ(job->request.from, want.request.from);
  EXPECT_EQ(job->request.to, want.request.to);
  EXPECT_EQ(job->request.partitions, want.request.partitions);
  EXPECT_EQ(job->request.reason, "fix refunds");
  EXPECT_EQ(job->request.ticket, "DATA-1");
  EXPECT_EQ(job->request.requested_by, "alice");
  EXPECT_TRUE(job->request.exclude_downstream);
  EXPECT_EQ(job->request_fingerprint, "fp-1");
  EXPECT_EQ(job->message, "submitted");
  EXPECT_EQ(job->create_time, T(0));
  EXPECT_EQ(job->update_time, T(0));
  EXPECT_EQ(job->start_time, absl::InfinitePast());
  EXPECT_EQ(job->end_time, absl::InfinitePast());
  ASSERT_EQ(job->plan.datasets.size(), 2u);
  EXPECT_EQ(job->plan.datasets[0].dataset, "daily_revenue");
  EXPECT_THAT(job->plan.datasets[0].partitions,
              ElementsAre("2025-01-01", "2025-01-02"));
  EXPECT_EQ(job->plan.datasets[0].reason, "requested");
  EXPECT_EQ(job->plan.datasets[0].cost.backfill, 20);
  EXPECT_EQ(job->plan.datasets[0].cost.full_reload, 100);
  EXPECT_EQ(job->plan.datasets[0].transform_version, "3f2a9c0d11aa7b42");
  EXPECT_EQ(job->plan.datasets[1].transform_version, "");
  EXPECT_EQ(job->plan.datasets[1].dataset, "monthly_revenue");
  EXPECT_THAT(job->plan.datasets[1].partitions, ElementsAre("2025-01"));
  EXPECT_EQ(job->plan.cost.backfill, 22);
  EXPECT_EQ(job->plan.cost.full_reload, 110);
  EXPECT_EQ(job->counts.total, 3);
  EXPECT_EQ(job->counts.pending, 3);
  EXPECT_EQ(job->actual_cost, 0);

  auto tasks = store_->ListTasks("bf-1");
  ASSERT_TRUE(tasks.ok()) << tasks.status();
  ASSERT_EQ(tasks->size(), 3u);
  EXPECT_EQ((*tasks)[0].partition, "2025-01-01");
  EXPECT_EQ((*tasks)[1].partition, "2025-01-02");
  EXPECT_EQ((*tasks)[2].dataset, "monthly_revenue");
  EXPECT_EQ((*tasks)[2].state, TaskState::kPending);

  EXPECT_EQ(store_->GetJob("bf-404").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->ListTasks("bf-404").status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(StateStoreTest, ProgressReadsLeaveOutOnlyThePartitionLists) {
  ASSERT_TRUE(store_->CreateJob(MakeJob(), T(0)).ok());
  auto whole = store_->GetJob("bf-1");
  auto progress = store_->GetJobProgress("bf-1");
  ASSERT_TRUE(whole.ok() && progress.ok());
  ASSERT_EQ(progress->plan.datasets.size(), whole->plan.datasets.size());
  for (size_t i = 0; i < whole->plan.datasets.size(); ++i) {
    EXPECT_FALSE(whole->plan.datasets[i].partitions.empty());
    EXPECT_TRUE(progress->plan.datasets[i].partitions.empty());
    EXPECT_EQ(progress->plan.datasets[i].dataset,
              whole->plan.datasets[i].dataset);
    EXPECT_EQ(progress->plan.datasets[i].cost.backfill,
              whole->plan.datasets[i].cost.backfill);
  }
  EXPECT_EQ(progress->counts.total, 3);
  EXPECT_EQ(progress->counts.pending, 3);
  EXPECT_EQ(progress->state, whole->state);
  EXPECT_EQ(store_->GetJobProgress("bf-9").status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(StateStoreTest, IdempotencyKeyReturnsTheExistingJob) {
  auto first = store_->CreateJob(MakeJob("key-1"), T(0));
  ASSERT_TRUE(first.ok()) << first.status();
  Job other = MakeJob("key-1");
  other.request.reason = "different";
  auto second = store_->CreateJob(other, T(5));
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_FALSE(second->created);
  EXPECT_EQ(second->job.id, first->job.id);
  EXPECT_EQ(second->job.request.reason, "fix refunds");
  EXPECT_EQ(second->job.idempotency_key, "key-1");

  auto third = store_->CreateJob(MakeJob("key-2"), T(6));
  ASSERT_TRUE(third.ok());
  EXPECT_TRUE(third->created);
  EXPECT_EQ(third->job.id, "bf-2");
  // No key: never deduplicated.
  EXPECT_TRUE(store_->CreateJob(MakeJob(), T(7))->created);
  EXPECT_TRUE(store_->CreateJob(MakeJob(), T(8))->created);
  EXPECT_EQ(store_->ListJobs({})->size(), 4u);
}

TEST_F(StateStoreTest, ConcurrentSubmitsWithOneKeyCreateOneJob) {
  std::atomic<int> created{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&] {
      auto r = store_->CreateJob(MakeJob("same"), T(0));
      ASSERT_TRUE(r.ok()) << r.status();
      if (r->created) ++created;
      EXPECT_EQ(r->job.id, "bf-1");
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(created.load(), 1);
}

TEST_F(StateStoreTest, ListJobsNewestFirstWithFilters) {
  for (int i = 0; i < 3; ++i)
    ASSERT_TRUE(store_->CreateJob(MakeJob(), T(i)).ok());
  Job other = MakeJob();
  other.plan.datasets.resize(1);
  other.plan.datasets[0].dataset = "hourly";
  ASSERT_TRUE(store_->CreateJob(other, T(3)).ok());
  ASSERT_TRUE(store_
                  ->TransitionJob("bf-2", JobState::kQueued, JobState::kRunning,
                                  "go", T(4))
                  .ok());

  auto all = store_->ListJobs({});
  ASSERT_TRUE(all.ok()) << all.status();
  std::vector<std::string> ids;
  for (const Job& j : *all) ids.push_back(j.id);
  EXPECT_THAT(ids, ElementsAre("bf-4", "bf-3", "bf-2", "bf-1"));

  JobFilter running;
  running.states = {JobState::kRunning};
  auto r = store_->ListJobs(running);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].id, "bf-2");

  JobFilter two_states;
  two_states.states = {JobState::kRunning, JobState::kQueued};
  two_states.dataset = "monthly_revenue";
  EXPECT_EQ(store_->ListJobs(two_states)->size(), 3u);

  JobFilter hourly;
  hourly.dataset = "hourly";
  auto h = store_->ListJobs(hourly);
  ASSERT_EQ(h->size(), 1u);
  EXPECT_EQ((*h)[0].id, "bf-4");

  JobFilter limited;
  limited.limit = 2;
  auto l = store_->ListJobs(limited);
  ASSERT_EQ(l->size(), 2u);
  EXPECT_EQ((*l)[0].id, "bf-4");
}

TEST_F(StateStoreTest, TransitionChecksExpectedFromAndRecordsAudit) {
  ASSERT_TRUE(store_->CreateJob(MakeJob(), T(0)).ok());
  absl::Status bad = store_->TransitionJob("bf-1", JobState::kRunning,
                                           JobState::kValidating, "x", T(1));
  EXPECT_EQ(bad.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(bad.message(), HasSubstr("QUEUED"));
  auto job = store_->GetJob("bf-1");
  EXPECT_EQ(job->state, JobState::kQueued);
  EXPECT_EQ(job->update_time, T(0));
  EXPECT_EQ(store_->ListAuditEvents("bf-1")->size(), 1u);
  EXPECT_EQ(
      store_->TransitionJob("bf-7", std::nullopt, JobState::kRunning, "", T(1))
          .code(),
      absl::StatusCode::kNotFound);

  ASSERT_TRUE(store_
                  ->TransitionJob("bf-1", JobState::kQueued, JobState::kRunning,
                                  "started", T(2))
                  .ok());
  ASSERT_TRUE(store_
                  ->TransitionJob("bf-1", std::nullopt, JobState::kPaused,
                                  "paused", T(3))
                  .ok());
  // Not in the table: nothing is written.
  const size_t before = store_->ListAuditEvents("bf-1")->size();
  absl::Status illegal = store_->TransitionJob(
      "bf-1", JobState::kPaused, JobState::kPublishing, "skip", T(4));
  EXPECT_EQ(illegal.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(illegal.message(), HasSubstr("cannot become PUBLISHING"));
  EXPECT_EQ(store_->GetJob("bf-1")->state, JobState::kPaused);
  EXPECT_EQ(store_->ListAuditEvents("bf-1")->size(), before);
  ASSERT_TRUE(store_
                  ->TransitionJob("bf-1", JobState::kPaused, JobState::kQueued,
                                  "resumed", T(4))
                  .ok());
  ASSERT_TRUE(store_
                  ->TransitionJob("bf-1", JobState::kQueued, JobState::kRunning,
                                  "running again", T(4))
                  .ok());
  job = store_->GetJob("bf-1");
  EXPECT_EQ(job->start_time, T(2));  // the first move to RUNNING
  EXPECT_EQ(job->end_time, absl::InfinitePast());
  ASSERT_TRUE(
      store_
          ->TransitionJob("bf-1", std::nullopt, JobState::kFailed, "boom", T(5))
          .ok());
  job = store_->GetJob("bf-1");
  EXPECT_EQ(job->state, JobState::kFailed);
  EXPECT_EQ(job->end_time, T(5));
  EXPECT_EQ(job->message, "boom");

  auto events = store_->ListAuditEvents("bf-1");
  ASSERT_TRUE(events.ok());
  std::vector<std::string> moves;
  for (const AuditEvent& e : *events) {
    moves.push_back(
        absl::StrCat(e.from_state, ">", e.to_state, ":", e.message));
  }
  EXPECT_THAT(
      moves,
      ElementsAre(">QUEUED:submitted", "QUEUED>RUNNING:started",
                  "RUNNING>PAUSED:paused", "PAUSED>QUEUED:resumed",
                  "QUEUED>RUNNING:running again", "RUNNING>FAILED:boom"));
  EXPECT_EQ((*events)[5].at, T(5));
  EXPECT_LT((*events)[0].seq, (*events)[1].seq);
}

TEST_F(StateStoreTest, TasksCheckpointAndCosts) {
  ASSERT_TRUE(store_->CreateJob(MakeJob(), T(0)).ok());
  PartitionTask t;
  t.job_id = "bf-1";
  t.dataset = "daily_revenue";
  t.partition = "2025-01-01";
  t.state = TaskState::kStaged;
  t.attempts = 2;
  t.last_error = "first attempt: busy";
  t.rows_written = 7;
  t.output_fingerprint = "abc:7";
  t.inputs = {{"orders", "2025-01-01", "f1:10", 10},
              {"cust:omers", "", "f2\"'", 5}};
  t.duration_seconds = 1.5;
  t.update_time = T(9);
  ASSERT_TRUE(store_->UpdateTask(t).ok());

  PartitionTask running = t;
  running.partition = "2025-01-02";
  running.state = TaskState::kRunning;
  running.inputs = {{"orders", "2025-01-02", "f3", 1000}};
  ASSERT_TRUE(store_->UpdateTask(running).ok());

  PartitionTask missing = t;
  missing.partition = "2030-01-01";
  EXPECT_EQ(store_->UpdateTask(missing).code(), absl::StatusCode::kNotFound);

  auto job = store_->GetJob("bf-1");
  EXPECT_EQ(job->counts.staged, 1);
  EXPECT_EQ(job->counts.running, 1);
  EXPECT_EQ(job->counts.pending, 1);
  EXPECT_EQ(job->actual_cost, 15);  // only staged / published tasks
  EXPECT_EQ(job->rows_written, 7);

  auto tasks = store_->ListTasks("bf-1");
  const PartitionTask& got = (*tasks)[0];
  EXPECT_EQ(got.state, TaskState::kStaged);
  EXPECT_EQ(got.attempts, 2);
  EXPECT_EQ(got.last_error, "first attempt: busy");
  EXPECT_EQ(got.output_fingerprint, "abc:7");
  ASSERT_EQ(got.inputs.size(), 2u);
  EXPECT_EQ(got.inputs[1].dataset, "cust:omers");
  EXPECT_EQ(got.inputs[1].partition, "");
  EXPECT_EQ(got.inputs[1].fingerprint, "f2\"'");
  EXPECT_EQ(got.inputs[1].rows, 5);
  EXPECT_EQ(got.duration_seconds, 1.5);
  EXPECT_EQ(got.update_time, T(9));

  auto changed = store_->UpdateTasksInState(
      "bf-1", {TaskState::kPending, TaskState::kRunning}, TaskState::kCancelled,
      T(10));
  ASSERT_TRUE(changed.ok());
  EXPECT_EQ(*changed, 2);
  job = store_->GetJob("bf-1");
  EXPECT_EQ(job->counts.cancelled, 2);
  EXPECT_EQ(job->counts.staged, 1);
}

TEST_F(StateStoreTest, RecordPublicationIsAtomicAndIdempotent) {
  ASSERT_TRUE(store_->CreateJob(MakeJob(), T(0)).ok());
  ASSERT_TRUE(store_
                  ->UpdateTasksInState("bf-1", {TaskState::kPending},
                                       TaskState::kStaged, T(1))
                  .ok());
  ASSERT_NO_FATAL_FAILURE(Reach("bf-1", JobState::kPublishing, T(2)));
  LineageRecord rec;
  rec.dataset = "daily_revenue";
  rec.partition = "2025-01-01";
  rec.job_id = "bf-1";
  rec.transform_version = "v1";
  rec.inputs = {{"orders", "2025-01-01", "fp", 3}};
  rec.output_fingerprint = "out";
  rec.row_count = 2;
  rec.reason = "fix refunds";
  rec.ticket = "DATA-1";
  rec.requested_by = "alice";
  rec.published_at = T(3);
  LineageRecord rec2 = rec;
  rec2.partition = "2025-01-02";

  // A lineage list with a duplicate fails as a whole: nothing changes.
  absl::Status dup = store_->RecordPublication(
      "bf-1", {rec, rec}, JobState::kConfirming, "published", T(3));
  EXPECT_FALSE(dup.ok());
  EXPECT_EQ(store_->GetJob("bf-1")->state, JobState::kPublishing);
  EXPECT_EQ(store_->GetJob("bf-1")->counts.staged, 3);
  EXPECT_TRUE(store_->GetLineage("daily_revenue", "2025-01-01")->empty());

  ASSERT_TRUE(store_
                  ->RecordPublication("bf-1", {rec, rec2},
                                      JobState::kConfirming, "published", T(3))
                  .ok());
  auto job = store_->GetJob("bf-1");
  EXPECT_EQ(job->state, JobState::kConfirming);
  EXPECT_EQ(job->counts.published, 3);
  auto lineage = store_->GetLineage("daily_revenue", "2025-01-01");
  ASSERT_EQ(lineage->size(), 1u);
  EXPECT_EQ((*lineage)[0].transform_version, "v1");
  EXPECT_EQ((*lineage)[0].inputs[0].rows, 3);
  EXPECT_EQ((*lineage)[0].published_at, T(3));
  EXPECT_EQ((*lineage)[0].requested_by, "alice");

  // Repeated after a restart: no duplicate lineage, no extra audit event.
  size_t events = store_->ListAuditEvents("bf-1")->size();
  ASSERT_TRUE(store_
                  ->RecordPublication("bf-1", {rec, rec2},
                                      JobState::kConfirming, "published", T(4))
                  .ok());
  EXPECT_EQ(store_->GetLineage("daily_revenue", "2025-01-01")->size(), 1u);
  EXPECT_EQ(store_->ListAuditEvents("bf-1")->size(), events);

  // A later job's version comes first.
  ASSERT_TRUE(store_->CreateJob(MakeJob(), T(10)).ok());
  ASSERT_NO_FATAL_FAILURE(Reach("bf-2", JobState::kPublishing, T(10)));
  rec.published_at = T(11);
  ASSERT_TRUE(store_
                  ->RecordPublication("bf-2", {rec}, JobState::kConfirming,
                                      "published", T(11))
                  .ok());
  lineage = store_->GetLineage("daily_revenue", "2025-01-01");
  ASSERT_EQ(lineage->size(), 2u);
  EXPECT_EQ((*lineage)[0].job_id, "bf-2");
  EXPECT_EQ((*lineage)[1].job_id, "bf-1");
  EXPECT_EQ(
      store_->RecordPublication("bf-9", {}, JobState::kConfirming, "", T(1))
          .code(),
      absl::StatusCode::kNotFound);
}

TEST_F(StateStoreTest, RecordPublicationOnlyMovesAPublishingJob) {
  LineageRecord rec;
  rec.dataset = "daily_revenue";
  rec.partition = "2025-01-01";
  rec.transform_version = "v1";
  rec.output_fingerprint = "fp";
  for (JobState state :
       {JobState::kQueued, JobState::kRunning, JobState::kAwaitingApproval,
        JobState::kFailed, JobState::kCancelled, JobState::kPaused,
        JobState::kValidationFailed}) {
    SCOPED_TRACE(JobStateName(state));
    auto created = store_->CreateJob(MakeJob(), T(0));
    ASSERT_TRUE(created.ok()) << created.status();
    const std::string id = created->job.id;
    ASSERT_TRUE(store_
                    ->UpdateTasksInState(id, {TaskState::kPending},
                                         TaskState::kStaged, T(1))
                    .ok());
    if (state != JobState::kQueued) {
      ASSERT_NO_FATAL_FAILURE(Reach(id, state, T(2)));
    }
    const size_t events = store_->ListAuditEvents(id)->size();
    absl::Status s = store_->RecordPublication(id, {rec}, JobState::kConfirming,
                                               "published", T(3));
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
    EXPECT_THAT(s.message(), HasSubstr("not PUBLISHING"));
    // Nothing written: state, tasks, lineage and audit log unchanged.
    auto job = store_->GetJob(id);
    ASSERT_TRUE(job.ok()) << job.status();
    EXPECT_EQ(job->state, state);
    EXPECT_EQ(job->counts.published, 0);
    EXPECT_EQ(job->counts.staged, 3);
    EXPECT_EQ(store_->ListAuditEvents(id)->size(), events);
  }
  EXPECT_TRUE(store_->GetLineage("daily_revenue", "2025-01-01")->empty());
}

TEST_F(StateStoreTest, Stats) {
  ASSERT_TRUE(store_->CreateJob(MakeJob(), T(0)).ok());
  ASSERT_TRUE(store_->CreateJob(MakeJob(), T(1)).ok());
  ASSERT_TRUE(
      store_->TransitionJob("bf-1", std::nullopt, JobState::kRunning, "", T(2))
          .ok());
  PartitionTask t;
  t.job_id = "bf-1";
  t.dataset = "daily_revenue";
  t.partition = "2025-01-01";
  t.state = TaskState::kStaged;
  ASSERT_TRUE(store_->UpdateTask(t).ok());
  auto stats = store_->Stats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->jobs_by_state[static_cast<int>(JobState::kRunning)], 1);
  EXPECT_EQ(stats->jobs_by_state[static_cast<int>(JobState::kQueued)], 1);
  EXPECT_EQ(stats->tasks_by_state[static_cast<int>(TaskState::kPending)], 5);
  EXPECT_EQ(stats->tasks_by_state[static_cast<int>(TaskState::kStaged)], 1);
  EXPECT_EQ(stats->running_tasks_total, 3);
  EXPECT_EQ(stats->running_tasks_done, 1);
}

TEST_F(StateStoreTest, ReopenKeepsDataAndContinuesIds) {
  ASSERT_TRUE(store_->CreateJob(MakeJob("k"), T(0)).ok());
  Reopen();
  auto job = store_->GetJob("bf-1");
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->idempotency_key, "k");
  EXPECT_FALSE(store_->CreateJob(MakeJob("k"), T(1))->created);
  EXPECT_EQ(store_->CreateJob(MakeJob(), T(2))->job.id, "bf-2");
}

TEST_F(StateStoreTest, RefusesANewerSchema) {
  store_.reset();
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db,
                         absl::StrCat("PRAGMA user_version = ",
                                      SqliteStateStore::SchemaVersion() + 1)
                             .c_str(),
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  auto store = SqliteStateStore::Open(path_);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(store.status().message(), HasSubstr("newer"));
}

TEST_F(StateStoreTest, UsesWalMode) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &stmt, nullptr),
            SQLITE_OK);
  ASSERT_EQ(sqlite3_step(stmt), SQLITE_ROW);
  EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0)),
               "wal");
  sqlite3_finalize(stmt);
  sqlite3_close(db);
}

TEST(StateStoreMemoryTest, InMemoryWorks) {
  auto store = SqliteStateStore::Open(":memory:");
  ASSERT_TRUE(store.ok()) << store.status();
  Job job;
  job.request.dataset = "d";
  auto r = (*store)->CreateJob(job, absl::FromUnixSeconds(1));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->job.id, "bf-1");
}

}  // namespace
}  // namespace backfill
