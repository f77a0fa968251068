// The StateStore contract: the same cases run against SqliteStateStore (on a
// temporary file) and against InMemoryStateStore, so that the in-memory
// store the core's tests use behaves as the durable one does. A randomized
// test applies the same operations to both and compares everything they
// return. Tests of what only the SQLite file has (migrations, integrity
// check, WAL, reopening) are in storage_state_store_test.cc.

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/job_state_machine.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/sqlite/state/sqlite_state_store.h"
#include "tests/testing/memory_state_store.h"

namespace backfill {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Pair;

enum class StoreKind { kSqlite, kMemory };

std::string MakeTempDir() {
  std::string tmpl = ::testing::TempDir() + "/state_store_contract_XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr) return "";
  return tmpl;
}

absl::StatusOr<std::unique_ptr<StateStore>> OpenStore(StoreKind kind,
                                                      const std::string& dir) {
  if (kind == StoreKind::kMemory) {
    return std::make_unique<testing::InMemoryStateStore>();
  }
  auto store = SqliteStateStore::Open(dir + "/state.db");
  if (!store.ok()) return store.status();
  return std::unique_ptr<StateStore>(*std::move(store));
}

std::string KindName(const ::testing::TestParamInfo<StoreKind>& info) {
  return info.param == StoreKind::kSqlite ? "Sqlite" : "InMemory";
}

absl::Time T(int seconds) {
  return absl::FromUnixSeconds(1700000000 + seconds);
}

Job MakeJob(const std::string& key = "") {
  Job job;
  job.request.dataset = "daily_revenue";
  job.request.from = "2025-01-01";
  job.request.to = "2025-01-03";
  job.request.partitions = {"a:b", "", "x'y\"z;--", "12:"};
  job.request.reason = "fix refunds";
  job.request.ticket = "DATA-1";
  job.request.requested_by = "alice";
  job.request.exclude_downstream = true;
  job.request.priority = 7;
  job.request.max_parallel = 2;
  job.request.affected_by = "orders: note = 'a:b' -- \"x\"";
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

// Moves a job to `target` along the shortest path of legal transitions.
void Reach(StateStore* store, const std::string& id, JobState target,
           absl::Time at) {
  auto job = store->GetJob(id);
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
    absl::Status moved = store->TransitionJob(id, std::nullopt, s, "moved", at);
    ASSERT_TRUE(moved.ok()) << moved;
  }
}

LineageRecord MakeLineage(const std::string& dataset,
                          const std::string& partition, absl::Time at) {
  LineageRecord rec;
  rec.dataset = dataset;
  rec.partition = partition;
  rec.transform_version = "v1";
  rec.inputs = {{"orders", partition, "fp", 3}};
  rec.output_fingerprint = "out";
  rec.row_count = 2;
  rec.reason = "fix refunds";
  rec.ticket = "DATA-1";
  rec.requested_by = "alice";
  rec.published_at = at;
  return rec;
}

class StateStoreContractTest : public ::testing::TestWithParam<StoreKind> {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir();
    ASSERT_FALSE(dir_.empty());
    auto store = OpenStore(GetParam(), dir_);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
  }
  void TearDown() override {
    store_.reset();
    std::filesystem::remove_all(dir_);
  }

  void Reach(const std::string& id, JobState target, absl::Time at) {
    backfill::Reach(store_.get(), id, target, at);
  }

  std::string dir_;
  std::unique_ptr<StateStore> store_;
};

INSTANTIATE_TEST_SUITE_P(Stores, StateStoreContractTest,
                         ::testing::Values(StoreKind::kSqlite,
                                           StoreKind::kMemory),
                         KindName);

TEST_P(StateStoreContractTest, CreateAndGetRoundTrips) {
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
  EXPECT_EQ(job->request.priority, 7);
  EXPECT_EQ(job->request.max_parallel, 2);
  EXPECT_EQ(job->request.affected_by, "orders: note = 'a:b' -- \"x\"");
  EXPECT_FALSE(job->request.auto_detect);
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
  EXPECT_EQ(job->rows_written, 0);

  auto tasks = store_->ListTasks("bf-1");
  ASSERT_TRUE(tasks.ok()) << tasks.status();
  ASSERT_EQ(tasks->size(), 3u);
  EXPECT_EQ((*tasks)[0].job_id, "bf-1");
  EXPECT_EQ((*tasks)[0].partition, "2025-01-01");
  EXPECT_EQ((*tasks)[1].partition, "2025-01-02");
  EXPECT_EQ((*tasks)[2].dataset, "monthly_revenue");
  EXPECT_EQ((*tasks)[2].state, TaskState::kPending);
  EXPECT_EQ((*tasks)[2].update_time, T(0));

  EXPECT_EQ(store_->GetJob("bf-404").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->ListTasks("bf-404").status().code(),
            absl::StatusCode::kNotFound);
}

TEST_P(StateStoreContractTest, CreateIgnoresWhatTheStoreAssigns) {
  Job job = MakeJob();
  job.id = "bf-99";
  job.state = JobState::kRunning;
  job.counts.total = 42;
  job.actual_cost = 5;
  job.rows_written = 6;
  job.start_time = T(1);
  job.end_time = T(2);
  job.plan.conflicts = {{"bf-7", "daily_revenue", "2025-01-01"}};
  auto created = store_->CreateJob(job, T(3));
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ(created->job.id, "bf-1");
  EXPECT_EQ(created->job.state, JobState::kQueued);
  EXPECT_EQ(created->job.counts.total, 3);
  EXPECT_EQ(created->job.actual_cost, 0);
  EXPECT_EQ(created->job.rows_written, 0);
  EXPECT_EQ(created->job.create_time, T(3));
  EXPECT_EQ(created->job.start_time, absl::InfinitePast());
  EXPECT_EQ(created->job.end_time, absl::InfinitePast());
  EXPECT_THAT(created->job.plan.conflicts, IsEmpty());
  EXPECT_EQ(store_->GetJob("bf-99").status().code(),
            absl::StatusCode::kNotFound);
}

TEST_P(StateStoreContractTest, AJobWithoutMessageIsAuditedAsCreated) {
  Job job = MakeJob();
  job.message.clear();
  ASSERT_TRUE(store_->CreateJob(job, T(0)).ok());
  auto events = store_->ListAuditEvents("bf-1");
  ASSERT_TRUE(events.ok()) << events.status();
  ASSERT_EQ(events->size(), 1u);
  EXPECT_EQ((*events)[0].job_id, "bf-1");
  EXPECT_EQ((*events)[0].from_state, "");
  EXPECT_EQ((*events)[0].to_state, "QUEUED");
  EXPECT_EQ((*events)[0].message, "created");
  EXPECT_EQ((*events)[0].at, T(0));
  EXPECT_EQ(store_->GetJob("bf-1")->message, "");
  EXPECT_THAT(*store_->ListAuditEvents("bf-404"), IsEmpty());
}

TEST_P(StateStoreContractTest, APlanListingAPartitionTwiceIsRefused) {
  Job job = MakeJob("dup");
  job.plan.datasets[0].partitions = {"2025-01-01", "2025-01-01"};
  auto created = store_->CreateJob(job, T(0));
  EXPECT_EQ(created.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(created.status().message(),
              HasSubstr("partition '2025-01-01' of daily_revenue twice"));
  // Nothing was written: no job, no key, no job number used.
  EXPECT_THAT(*store_->ListJobs({}), IsEmpty());
  EXPECT_EQ(store_->Info()->last_job_number, 0);
  auto next = store_->CreateJob(MakeJob("dup"), T(1));
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_TRUE(next->created);
  EXPECT_EQ(next->job.id, "bf-1");
}

TEST_P(StateStoreContractTest, ADatasetPlannedTwiceGetsItsTasksOnce) {
  // Two plan entries of one dataset with distinct partitions: both entries
  // are kept; the partitions are read back from the tasks.
  Job job = MakeJob();
  job.plan.datasets[1].dataset = "daily_revenue";
  job.plan.datasets[1].partitions = {"2025-01-03"};
  auto created = store_->CreateJob(job, T(0));
  ASSERT_TRUE(created.ok()) << created.status();
  ASSERT_EQ(created->job.plan.datasets.size(), 2u);
  EXPECT_THAT(created->job.plan.datasets[0].partitions, IsEmpty());
  EXPECT_THAT(created->job.plan.datasets[1].partitions,
              ElementsAre("2025-01-01", "2025-01-02", "2025-01-03"));
  EXPECT_EQ(created->job.counts.total, 3);
}

TEST_P(StateStoreContractTest, ProgressReadsLeaveOutOnlyThePartitionLists) {
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
    EXPECT_EQ(progress->plan.datasets[i].transform_version,
              whole->plan.datasets[i].transform_version);
  }
  EXPECT_EQ(progress->counts.total, 3);
  EXPECT_EQ(progress->counts.pending, 3);
  EXPECT_EQ(progress->state, whole->state);
  EXPECT_EQ(progress->request.partitions, whole->request.partitions);
  EXPECT_EQ(store_->GetJobProgress("bf-9").status().code(),
            absl::StatusCode::kNotFound);
}

TEST_P(StateStoreContractTest, PartitionReasonsAreKeptWithTheTasks) {
  Job job = MakeJob();
  job.plan.datasets[0].partition_reasons = {"requested", "requested"};
  job.plan.datasets[1].partition_reasons = {
      "downstream of daily_revenue via rollup"};
  auto created = store_->CreateJob(job, T(0));
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_THAT(created->job.plan.datasets[1].partition_reasons,
              ElementsAre("downstream of daily_revenue via rollup"));
  auto got = store_->GetJob("bf-1");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_THAT(got->plan.datasets[0].partition_reasons,
              ElementsAre("requested", "requested"));
  EXPECT_THAT(got->plan.datasets[1].partition_reasons,
              ElementsAre("downstream of daily_revenue via rollup"));
  // Reads without the partition lists have no reasons either.
  auto progress = store_->GetJobProgress("bf-1");
  ASSERT_TRUE(progress.ok()) << progress.status();
  EXPECT_THAT(progress->plan.datasets[1].partition_reasons, IsEmpty());
  // A plan without reasons reads back with empty ones, still aligned.
  ASSERT_TRUE(store_->CreateJob(MakeJob(), T(1)).ok());
  got = store_->GetJob("bf-2");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_THAT(got->plan.datasets[0].partition_reasons, ElementsAre("", ""));
  EXPECT_THAT(got->plan.datasets[1].partition_reasons, ElementsAre(""));
}

TEST_P(StateStoreContractTest, IdempotencyKeyReturnsTheExistingJob) {
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
  EXPECT_EQ(second->job.create_time, T(0));
  EXPECT_EQ(store_->ListAuditEvents(first->job.id)->size(), 1u);

  auto third = store_->CreateJob(MakeJob("key-2"), T(6));
  ASSERT_TRUE(third.ok());
  EXPECT_TRUE(third->created);
  EXPECT_EQ(third->job.id, "bf-2");
  // No key: never deduplicated.
  EXPECT_TRUE(store_->CreateJob(MakeJob(), T(7))->created);
  EXPECT_TRUE(store_->CreateJob(MakeJob(), T(8))->created);
  EXPECT_EQ(store_->ListJobs({})->size(), 4u);
  // The key still finds its job after the job moved on.
  ASSERT_NO_FATAL_FAILURE(Reach("bf-1", JobState::kCancelled, T(9)));
  auto again = store_->CreateJob(MakeJob("key-1"), T(10));
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->created);
  EXPECT_EQ(again->job.state, JobState::kCancelled);
}

TEST_P(StateStoreContractTest, ConcurrentSubmitsWithOneKeyCreateOneJob) {
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
  EXPECT_EQ(store_->Info()->last_job_number, 1);
}

TEST_P(StateStoreContractTest, ConcurrentWritesAreAllKept) {
  constexpr int kThreads = 4;
  constexpr int kJobsPerThread = 5;
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&] {
      for (int j = 0; j < kJobsPerThread; ++j) {
        auto r = store_->CreateJob(MakeJob(), T(0));
        ASSERT_TRUE(r.ok()) << r.status();
        auto tasks = store_->ListTasks(r->job.id);
        ASSERT_TRUE(tasks.ok()) << tasks.status();
        for (PartitionTask t : *tasks) {
          t.state = TaskState::kStaged;
          t.rows_written = 2;
          t.inputs = {{"orders", t.partition, "f", 5}};
          ASSERT_TRUE(store_->UpdateTask(t).ok());
        }
        ASSERT_TRUE(store_
                        ->TransitionJob(r->job.id, JobState::kQueued,
                                        JobState::kRunning, "go", T(1))
                        .ok());
      }
    });
  }
  for (auto& t : threads) t.join();
  auto jobs = store_->ListJobs({{}, "", 0});
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  ASSERT_EQ(jobs->size(), size_t{kThreads * kJobsPerThread});
  std::set<std::string> ids;
  for (const Job& job : *jobs) {
    ids.insert(job.id);
    EXPECT_EQ(job.state, JobState::kRunning);
    EXPECT_EQ(job.counts.staged, 3);
    EXPECT_EQ(job.rows_written, 6);
    EXPECT_EQ(job.actual_cost, 15);
  }
  EXPECT_EQ(ids.size(), size_t{kThreads * kJobsPerThread});
  auto stats = store_->Stats();
  EXPECT_EQ(stats->running_tasks_total, 3 * kThreads * kJobsPerThread);
  EXPECT_EQ(stats->running_tasks_done, 3 * kThreads * kJobsPerThread);
}

TEST_P(StateStoreContractTest, ListJobsNewestFirstWithFilters) {
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(store_->CreateJob(MakeJob(), T(i)).ok());
  }
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
  EXPECT_THAT((*all)[0].plan.datasets[0].partitions,
              ElementsAre("2025-01-01", "2025-01-02"));

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

  JobFilter none;
  none.dataset = "nothing";
  EXPECT_THAT(*store_->ListJobs(none), IsEmpty());

  JobFilter limited;
  limited.limit = 2;
  auto l = store_->ListJobs(limited);
  ASSERT_EQ(l->size(), 2u);
  EXPECT_EQ((*l)[0].id, "bf-4");
  EXPECT_EQ((*l)[1].id, "bf-3");

  // The limit applies after the filter.
  JobFilter queued_one;
  queued_one.states = {JobState::kQueued};
  queued_one.limit = 3;
  ids.clear();
  auto queued = store_->ListJobs(queued_one);
  ASSERT_TRUE(queued.ok()) << queued.status();
  for (const Job& j : *queued) ids.push_back(j.id);
  EXPECT_THAT(ids, ElementsAre("bf-4", "bf-3", "bf-1"));

  JobFilter unlimited;
  unlimited.limit = 0;
  EXPECT_EQ(store_->ListJobs(unlimited)->size(), 4u);
}

TEST_P(StateStoreContractTest, ListJobsBeforeANumberAndWithoutLists) {
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(store_->CreateJob(MakeJob(), T(i)).ok());
  }
  auto ids_of = [](const std::vector<Job>& jobs) {
    std::vector<std::string> ids;
    for (const Job& j : jobs) ids.push_back(j.id);
    return ids;
  };
  JobFilter after_page;
  after_page.before_number = 4;
  after_page.limit = 2;
  auto page = store_->ListJobs(after_page);
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_THAT(ids_of(*page), ElementsAre("bf-3", "bf-2"));
  after_page.before_number = 2;
  EXPECT_THAT(ids_of(*store_->ListJobs(after_page)), ElementsAre("bf-1"));
  after_page.before_number = 1;
  EXPECT_THAT(*store_->ListJobs(after_page), IsEmpty());
  // A job created since does not come before an earlier job's number.
  ASSERT_TRUE(store_->CreateJob(MakeJob(), T(9)).ok());
  after_page.before_number = 4;
  EXPECT_THAT(ids_of(*store_->ListJobs(after_page)),
              ElementsAre("bf-3", "bf-2"));

  // The basic view: no partition lists, every count.
  JobFilter basic;
  basic.view = JobView::kBasic;
  basic.limit = 1;
  auto jobs = store_->ListJobs(basic);
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  ASSERT_EQ(jobs->size(), 1u);
  const Job& b = (*jobs)[0];
  EXPECT_EQ(b.id, "bf-6");
  EXPECT_EQ(b.counts.total, 3);
  EXPECT_EQ(b.request.partitions.size(), 4u);  // the request stays whole
  ASSERT_EQ(b.plan.datasets.size(), 2u);
  EXPECT_THAT(b.plan.datasets[0].partitions, IsEmpty());
  EXPECT_THAT(b.plan.datasets[0].partition_reasons, IsEmpty());
  EXPECT_EQ(b.plan.datasets[0].partition_count, 2);
  EXPECT_EQ(b.plan.datasets[1].partition_count, 1);
  JobFilter full;
  full.limit = 1;
  const Job f = (*store_->ListJobs(full))[0];
  EXPECT_THAT(f.plan.datasets[0].partitions,
              ElementsAre("2025-01-01", "2025-01-02"));
  EXPECT_EQ(f.plan.datasets[0].partition_count, 2);
  EXPECT_EQ(store_->GetJobProgress("bf-6")->plan.datasets[1].partition_count,
            1);
}

// A plan's order is its own (datasets upstream first, partitions as
// planned), not the order of names the store keys its tasks by: a job
// reads back, and lists its tasks, in the order it was planned.
TEST_P(StateStoreContractTest, TasksAndPlanReadBackInPlanOrderNotNameOrder) {
  Job job = MakeJob();
  job.plan.datasets.resize(2);
  job.plan.datasets[0].dataset = "zz_upstream";
  job.plan.datasets[0].partitions = {"2025-03-01", "2025-01-01", "2025-02-01",
                                     "2024-12-31"};
  job.plan.datasets[0].partition_reasons = {"r3", "r1", "r2", "r0"};
  job.plan.datasets[1].dataset = "aa_downstream";
  job.plan.datasets[1].partitions = {"2025-02", "2025-01"};
  job.plan.datasets[1].partition_reasons = {"m2", "m1"};
  job.request.dataset = "zz_upstream";
  ASSERT_TRUE(store_->CreateJob(job, T(0)).ok());
  auto read = store_->GetJob("bf-1");
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->plan.datasets.size(), 2u);
  EXPECT_EQ(read->plan.datasets[0].dataset, "zz_upstream");
  EXPECT_THAT(
      read->plan.datasets[0].partitions,
      ElementsAre("2025-03-01", "2025-01-01", "2025-02-01", "2024-12-31"));
  EXPECT_THAT(read->plan.datasets[0].partition_reasons,
              ElementsAre("r3", "r1", "r2", "r0"));
  EXPECT_EQ(read->plan.datasets[1].dataset, "aa_downstream");
  EXPECT_THAT(read->plan.datasets[1].partitions,
              ElementsAre("2025-02", "2025-01"));
  EXPECT_THAT(read->plan.datasets[1].partition_reasons,
              ElementsAre("m2", "m1"));
  auto tasks = store_->ListTasks("bf-1");
  ASSERT_TRUE(tasks.ok()) << tasks.status();
  std::vector<std::string> listed;
  for (const PartitionTask& t : *tasks) {
    listed.push_back(absl::StrCat(t.ordinal, " ", t.dataset, "/", t.partition,
                                  " ", t.reason));
  }
  EXPECT_THAT(
      listed,
      ElementsAre("0 zz_upstream/2025-03-01 r3", "1 zz_upstream/2025-01-01 r1",
                  "2 zz_upstream/2025-02-01 r2", "3 zz_upstream/2024-12-31 r0",
                  "4 aa_downstream/2025-02 m2", "5 aa_downstream/2025-01 m1"));
}

TEST_P(StateStoreContractTest, ListTaskPageSelectsInPlanOrder) {
  Job job = MakeJob();
  job.plan.datasets[0].partition_reasons = {"requested", "requested too"};
  job.plan.datasets[1].partition_reasons = {"downstream of daily_revenue"};
  ASSERT_TRUE(store_->CreateJob(job, T(0)).ok());
  PartitionTask failed = (*store_->ListTasks("bf-1"))[1];
  failed.state = TaskState::kFailed;
  failed.last_error = "boom";
  ASSERT_TRUE(store_->UpdateTask(failed).ok());

  auto describe = [](const std::vector<PartitionTask>& tasks) {
    std::vector<std::string> out;
    for (const PartitionTask& t : tasks) {
      out.push_back(absl::StrCat(t.ordinal, " ", t.dataset, "/", t.partition,
                                 " ", TaskStateName(t.state), " ", t.reason));
    }
    return out;
  };
  TaskQuery all;
  all.job_id = "bf-1";
  auto page = store_->ListTaskPage(all);
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_THAT(describe(*page),
              ElementsAre("0 daily_revenue/2025-01-01 PENDING requested",
                          "1 daily_revenue/2025-01-02 FAILED requested too",
                          "2 monthly_revenue/2025-01 PENDING downstream of "
                          "daily_revenue"));
  EXPECT_EQ((*page)[1].last_error, "boom");
  EXPECT_THAT(describe(*store_->ListTasks("bf-1")),
              ElementsAreArray(describe(*page)));

  TaskQuery after = all;
  after.after_ordinal = 0;
  after.limit = 1;
  EXPECT_THAT(describe(*store_->ListTaskPage(after)),
              ElementsAre("1 daily_revenue/2025-01-02 FAILED requested too"));
  after.after_ordinal = 2;
  EXPECT_THAT(*store_->ListTaskPage(after), IsEmpty());

  TaskQuery one_dataset = all;
  one_dataset.dataset = "monthly_revenue";
  EXPECT_THAT(describe(*store_->ListTaskPage(one_dataset)),
              ElementsAre("2 monthly_revenue/2025-01 PENDING downstream of "
                          "daily_revenue"));
  TaskQuery states = all;
  states.states = {TaskState::kFailed, TaskState::kPublished};
  EXPECT_THAT(describe(*store_->ListTaskPage(states)),
              ElementsAre("1 daily_revenue/2025-01-02 FAILED requested too"));
  states.dataset = "monthly_revenue";
  EXPECT_THAT(*store_->ListTaskPage(states), IsEmpty());

  TaskQuery unknown = all;
  unknown.job_id = "bf-9";
  EXPECT_EQ(store_->ListTaskPage(unknown).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_P(StateStoreContractTest, ListJobIdsInJobNumberOrder) {
  for (int i = 0; i < 12; ++i) {
    ASSERT_TRUE(store_->CreateJob(MakeJob(), T(i)).ok());
  }
  for (const char* id : {"bf-2", "bf-10", "bf-11"}) {
    ASSERT_NO_FATAL_FAILURE(Reach(id, JobState::kRunning, T(20)));
  }
  ASSERT_NO_FATAL_FAILURE(Reach("bf-3", JobState::kSucceeded, T(21)));
  EXPECT_THAT(*store_->ListJobIds({JobState::kRunning}),
              ElementsAre("bf-2", "bf-10", "bf-11"));
  EXPECT_THAT(*store_->ListJobIds({JobState::kSucceeded, JobState::kRunning}),
              ElementsAre("bf-2", "bf-3", "bf-10", "bf-11"));
  EXPECT_EQ(store_->ListJobIds({JobState::kQueued})->size(), 8u);
  EXPECT_THAT(*store_->ListJobIds({}), IsEmpty());
  EXPECT_THAT(*store_->ListJobIds({JobState::kPaused}), IsEmpty());
}

TEST_P(StateStoreContractTest, InfoHasAStableIdentityAndTheJobCounter) {
  const absl::Time before = absl::Now();
  auto info = store_->Info();
  const absl::Time after = absl::Now();
  ASSERT_TRUE(info.ok()) << info.status();
  ASSERT_EQ(info->store_id.size(), 32u);
  for (char c : info->store_id) {
    EXPECT_TRUE(absl::ascii_isxdigit(c) && !absl::ascii_isupper(c))
        << info->store_id;
  }
  // Created with the store, to the second.
  EXPECT_EQ(info->created_at,
            absl::FromUnixSeconds(absl::ToUnixSeconds(info->created_at)));
  EXPECT_GE(info->created_at, before - absl::Seconds(2));
  EXPECT_LE(info->created_at, after);
  EXPECT_EQ(info->last_job_number, 0);

  ASSERT_TRUE(store_->CreateJob(MakeJob(), T(0)).ok());
  ASSERT_TRUE(store_->CreateJob(MakeJob(), T(0)).ok());
  auto later = store_->Info();
  EXPECT_EQ(later->store_id, info->store_id);
  EXPECT_EQ(later->created_at, info->created_at);
  EXPECT_EQ(later->last_job_number, 2);

  // Another store has another id.
  const std::string other_dir = MakeTempDir();
  auto other = OpenStore(GetParam(), other_dir);
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_NE((*other)->Info()->store_id, info->store_id);
  other->reset();
  std::filesystem::remove_all(other_dir);
}

TEST_P(StateStoreContractTest, ReserveJobNumbersOnlyRaisesTheCounter) {
  ASSERT_TRUE(store_->CreateJob(MakeJob(), T(0)).ok());
  ASSERT_TRUE(store_->ReserveJobNumbers(10).ok());
  EXPECT_EQ(store_->Info()->last_job_number, 10);
  EXPECT_EQ(store_->CreateJob(MakeJob(), T(1))->job.id, "bf-11");
  ASSERT_TRUE(store_->ReserveJobNumbers(5).ok());
  ASSERT_TRUE(store_->ReserveJobNumbers(11).ok());
  EXPECT_EQ(store_->Info()->last_job_number, 11);
  EXPECT_EQ(store_->CreateJob(MakeJob(), T(2))->job.id, "bf-12");
  EXPECT_THAT(*store_->ListJobIds({JobState::kQueued}),
              ElementsAre("bf-1", "bf-11", "bf-12"));
}

TEST_P(StateStoreContractTest, TransitionChecksExpectedFromAndRecordsAudit) {
  ASSERT_TRUE(store_->CreateJob(MakeJob(), T(0)).ok());
  absl::Status bad = store_->TransitionJob("bf-1", JobState::kRunning,
                                           JobState::kValidating, "x", T(1));
  EXPECT_EQ(bad.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(bad.message(), HasSubstr("QUEUED"));
  EXPECT_THAT(bad.message(), HasSubstr("not RUNNING"));
  auto job = store_->GetJob("bf-1");
  EXPECT_EQ(job->state, JobState::kQueued);
  EXPECT_EQ(job->update_time, T(0));
  EXPECT_EQ(job->message, "submitted");
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
  EXPECT_EQ(store_->GetJob("bf-1")->update_time, T(3));
  EXPECT_EQ(store_->ListAuditEvents("bf-1")->size(), before);
  // Not even to the state it is in.
  EXPECT_EQ(
      store_->TransitionJob("bf-1", std::nullopt, JobState::kPaused, "", T(4))
          .code(),
      absl::StatusCode::kFailedPrecondition);
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
  EXPECT_EQ(job->update_time, T(5));
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
  for (size_t i = 1; i < events->size(); ++i) {
    EXPECT_LT((*events)[i - 1].seq, (*events)[i].seq);
  }
}

TEST_P(StateStoreContractTest, EveryTableMoveIsAcceptedAndNoOtherOne) {
  // For every state: reach it, then try every target on a fresh job.
  for (int from = 0; from < kJobStateCount; ++from) {
    for (int to = 0; to < kJobStateCount; ++to) {
      const JobState f = static_cast<JobState>(from);
      const JobState t = static_cast<JobState>(to);
      SCOPED_TRACE(absl::StrCat(JobStateName(f), " -> ", JobStateName(t)));
      auto created = store_->CreateJob(MakeJob(), T(0));
      ASSERT_TRUE(created.ok()) << created.status();
      const std::string id = created->job.id;
      ASSERT_NO_FATAL_FAILURE(Reach(id, f, T(1)));
      const size_t events = store_->ListAuditEvents(id)->size();
      absl::Status moved = store_->TransitionJob(id, f, t, "try", T(2));
      if (CanTransition(f, t)) {
        EXPECT_TRUE(moved.ok()) << moved;
        EXPECT_EQ(store_->GetJob(id)->state, t);
        EXPECT_EQ(store_->ListAuditEvents(id)->size(), events + 1);
      } else {
        EXPECT_EQ(moved.code(), absl::StatusCode::kFailedPrecondition);
        EXPECT_EQ(store_->GetJob(id)->state, f);
        EXPECT_EQ(store_->ListAuditEvents(id)->size(), events);
      }
    }
  }
}

TEST_P(StateStoreContractTest, EndTimeIsSetByEveryMoveToATerminalState) {
  ASSERT_TRUE(store_->CreateJob(MakeJob(), T(0)).ok());
  ASSERT_NO_FATAL_FAILURE(Reach("bf-1", JobState::kSucceeded, T(1)));
  auto job = store_->GetJob("bf-1");
  EXPECT_EQ(job->start_time, T(1));
  EXPECT_EQ(job->end_time, T(1));
  ASSERT_TRUE(store_
                  ->TransitionJob("bf-1", JobState::kSucceeded,
                                  JobState::kRolledBack, "rolled back", T(7))
                  .ok());
  job = store_->GetJob("bf-1");
  EXPECT_EQ(job->state, JobState::kRolledBack);
  EXPECT_EQ(job->end_time, T(7));
  EXPECT_EQ(job->start_time, T(1));
  // A job cancelled while queued never started.
  ASSERT_TRUE(store_->CreateJob(MakeJob(), T(0)).ok());
  ASSERT_TRUE(store_
                  ->TransitionJob("bf-2", JobState::kQueued,
                                  JobState::kCancelled, "no", T(3))
                  .ok());
  job = store_->GetJob("bf-2");
  EXPECT_EQ(job->start_time, absl::InfinitePast());
  EXPECT_EQ(job->end_time, T(3));
}

ConsumerFinding Confirmation(const std::string& dataset,
                             const std::string& consumer, bool healthy,
                             absl::Time at) {
  ConsumerFinding c;
  c.dataset = dataset;
  c.consumer = consumer;
  c.healthy = healthy;
  c.message = healthy ? "serves the new numbers" : "still serves 1 for x";
  c.latency = absl::Microseconds(1500123);
  c.at = at;
  return c;
}

std::vector<std::string> Standings(StateStore* store) {
  std::vector<std::string> out;
  absl::StatusOr<std::vector<ConsumerStanding>> standings =
      store->ListConsumerStandings();
  EXPECT_TRUE(standings.ok()) << standings.status();
  if (!standings.ok()) return out;
  for (const ConsumerStanding& s : *standings) {
    out.push_back(absl::StrCat(s.dataset, "/", s.consumer, ":",
                               absl::StrJoin(s.unhealthy_jobs, ",")));
  }
  return out;
}

TEST_P(StateStoreContractTest, ConsumerConfirmationsAndStandings) {
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(store_->CreateJob(MakeJob(), T(0)).ok());
  }
  EXPECT_THAT(Standings(store_.get()), IsEmpty());
  EXPECT_THAT(*store_->ListConsumerConfirmations("bf-1"), IsEmpty());
  EXPECT_EQ(store_->ReplaceConsumerConfirmations("bf-9", {}).code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->ListConsumerConfirmations("bf-9").status().code(),
            absl::StatusCode::kNotFound);

  ASSERT_NO_FATAL_FAILURE(Reach("bf-1", JobState::kDownstreamUnhealthy, T(1)));
  ASSERT_TRUE(store_
                  ->ReplaceConsumerConfirmations(
                      "bf-1", {Confirmation("daily", "cache_b", false, T(1)),
                               Confirmation("daily", "cache_a", true, T(1))})
                  .ok());
  ASSERT_NO_FATAL_FAILURE(Reach("bf-2", JobState::kSucceeded, T(2)));
  ASSERT_TRUE(store_
                  ->ReplaceConsumerConfirmations(
                      "bf-2", {Confirmation("daily", "cache_b", true, T(2))})
                  .ok());
  ASSERT_NO_FATAL_FAILURE(Reach("bf-3", JobState::kDownstreamUnhealthy, T(3)));
  ASSERT_TRUE(store_
                  ->ReplaceConsumerConfirmations(
                      "bf-3", {Confirmation("monthly", "m", false, T(3)),
                               Confirmation("daily", "cache_b", false, T(3))})
                  .ok());

  // A round trip keeps every field, in the order recorded.
  absl::StatusOr<std::vector<ConsumerFinding>> one =
      store_->ListConsumerConfirmations("bf-1");
  ASSERT_TRUE(one.ok()) << one.status();
  ASSERT_EQ(one->size(), 2u);
  EXPECT_EQ((*one)[0].consumer, "cache_b");
  EXPECT_FALSE((*one)[0].healthy);
  EXPECT_EQ((*one)[0].message, "still serves 1 for x");
  EXPECT_EQ((*one)[0].latency, absl::Microseconds(1500123));
  EXPECT_EQ((*one)[0].at, T(1));
  EXPECT_EQ((*one)[1].consumer, "cache_a");
  EXPECT_TRUE((*one)[1].healthy);

  // cache_b was found unhealthy by two jobs that are still unhealthy; bf-2
  // found it healthy later, which does not clear them.
  EXPECT_THAT(Standings(store_.get()),
              ElementsAre("daily/cache_a:", "daily/cache_b:bf-1,bf-3",
                          "monthly/m:bf-3"));
  // A rollback ends bf-1's claim.
  ASSERT_TRUE(store_
                  ->TransitionJob("bf-1", JobState::kDownstreamUnhealthy,
                                  JobState::kRolledBack, "undo", T(4))
                  .ok());
  EXPECT_THAT(
      Standings(store_.get()),
      ElementsAre("daily/cache_a:", "daily/cache_b:bf-3", "monthly/m:bf-3"));
  // Confirmed again, healthy: the new results replace the old ones.
  ASSERT_TRUE(store_
                  ->TransitionJob("bf-3", JobState::kDownstreamUnhealthy,
                                  JobState::kConfirming, "again", T(5))
                  .ok());
  const std::vector<ConsumerFinding> healthy = {
      Confirmation("monthly", "m", true, T(5)),
      Confirmation("daily", "cache_b", true, T(5))};
  ASSERT_TRUE(store_->ReplaceConsumerConfirmations("bf-3", healthy).ok());
  ASSERT_TRUE(store_->ReplaceConsumerConfirmations("bf-3", healthy).ok());
  ASSERT_TRUE(store_
                  ->TransitionJob("bf-3", JobState::kConfirming,
                                  JobState::kSucceeded, "ok", T(5))
                  .ok());
  EXPECT_EQ(store_->ListConsumerConfirmations("bf-3")->size(), 2u);
  EXPECT_THAT(Standings(store_.get()),
              ElementsAre("daily/cache_a:", "daily/cache_b:", "monthly/m:"));
}

TEST_P(StateStoreContractTest, TimesAreKeptToTheMicrosecond) {
  const absl::Time base = absl::FromUnixMicros(1700000000123456);
  ASSERT_TRUE(store_->CreateJob(MakeJob(), base + absl::Nanoseconds(999)).ok());
  auto job = store_->GetJob("bf-1");
  EXPECT_EQ(job->create_time, base);
  EXPECT_EQ((*store_->ListAuditEvents("bf-1"))[0].at, base);
  // Before 1970, rounded down too.
  const absl::Time early = absl::FromUnixMicros(-5);
  ASSERT_TRUE(store_
                  ->TransitionJob("bf-1", std::nullopt, JobState::kRunning, "",
                                  early - absl::Nanoseconds(1))
                  .ok());
  EXPECT_EQ(store_->GetJob("bf-1")->start_time, early - absl::Microseconds(1));
  // An infinite time reads back as "not yet".
  PartitionTask t = (*store_->ListTasks("bf-1"))[0];
  t.update_time = absl::InfiniteFuture();
  ASSERT_TRUE(store_->UpdateTask(t).ok());
  EXPECT_EQ((*store_->ListTasks("bf-1"))[0].update_time, absl::InfinitePast());
  t.update_time = base + absl::Nanoseconds(1500);
  ASSERT_TRUE(store_->UpdateTask(t).ok());
  EXPECT_EQ((*store_->ListTasks("bf-1"))[0].update_time,
            base + absl::Microseconds(1));
}

TEST_P(StateStoreContractTest, SetJobMessageKeepsTheStateAndTheAuditLog) {
  ASSERT_TRUE(store_->CreateJob(MakeJob(), T(0)).ok());
  ASSERT_TRUE(
      store_->SetJobMessage("bf-1", JobState::kQueued, "waits for bf-0", T(3))
          .ok());
  auto job = store_->GetJob("bf-1");
  EXPECT_EQ(job->message, "waits for bf-0");
  EXPECT_EQ(job->update_time, T(3));
  EXPECT_EQ(job->state, JobState::kQueued);
  EXPECT_EQ(store_->ListAuditEvents("bf-1")->size(), 1u);

  absl::Status wrong =
      store_->SetJobMessage("bf-1", JobState::kRunning, "nope", T(4));
  EXPECT_EQ(wrong.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(wrong.message(), HasSubstr("is QUEUED, not RUNNING"));
  EXPECT_EQ(store_->GetJob("bf-1")->message, "waits for bf-0");
  EXPECT_EQ(store_->GetJob("bf-1")->update_time, T(3));
  EXPECT_EQ(store_->SetJobMessage("bf-2", JobState::kQueued, "x", T(4)).code(),
            absl::StatusCode::kNotFound);
}

TEST_P(StateStoreContractTest, TasksCheckpointAndCosts) {
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
  running.rows_written = 100;
  running.inputs = {{"orders", "2025-01-02", "f3", 1000}};
  ASSERT_TRUE(store_->UpdateTask(running).ok());

  PartitionTask missing = t;
  missing.partition = "2030-01-01";
  EXPECT_EQ(store_->UpdateTask(missing).code(), absl::StatusCode::kNotFound);
  missing = t;
  missing.job_id = "bf-2";
  EXPECT_EQ(store_->UpdateTask(missing).code(), absl::StatusCode::kNotFound);
  missing = t;
  missing.dataset = "monthly_revenue";
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
  EXPECT_EQ(got.rows_written, 7);
  EXPECT_EQ(got.output_fingerprint, "abc:7");
  ASSERT_EQ(got.inputs.size(), 2u);
  EXPECT_EQ(got.inputs[0].fingerprint, "f1:10");
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
  tasks = store_->ListTasks("bf-1");
  EXPECT_EQ((*tasks)[1].update_time, T(10));
  EXPECT_EQ((*tasks)[1].rows_written, 100);  // only the state changes
  EXPECT_EQ((*tasks)[0].update_time, T(9));

  EXPECT_EQ(*store_->UpdateTasksInState("bf-1", {}, TaskState::kPending, T(11)),
            0);
  EXPECT_EQ(*store_->UpdateTasksInState("bf-9", {TaskState::kCancelled},
                                        TaskState::kPending, T(11)),
            0);
  EXPECT_EQ(store_->GetJob("bf-1")->counts.cancelled, 2);
}

TEST_P(StateStoreContractTest, LastRunInputRowsIsTheNewestSuccessfulRun) {
  // Jobs bf-1..bf-3 each plan daily_revenue 2025-01-01 and 2025-01-02.
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(store_->CreateJob(MakeJob(), T(0)).ok());
  }
  auto run = [&](const std::string& job, const std::string& partition,
                 TaskState state, int64_t rows) {
    PartitionTask t;
    t.job_id = job;
    t.dataset = "daily_revenue";
    t.partition = partition;
    t.state = state;
    t.inputs = {{"orders", partition, "f", rows}};
    t.update_time = T(1);
    ASSERT_TRUE(store_->UpdateTask(t).ok());
  };
  // 01: bf-1 published 10, bf-2 found it unchanged reading 20, bf-3
  // failed reading 30 (not a successful run). 02: only staged by bf-1.
  ASSERT_NO_FATAL_FAILURE(run("bf-1", "2025-01-01", TaskState::kPublished, 10));
  ASSERT_NO_FATAL_FAILURE(run("bf-2", "2025-01-01", TaskState::kUnchanged, 20));
  ASSERT_NO_FATAL_FAILURE(run("bf-3", "2025-01-01", TaskState::kFailed, 30));
  ASSERT_NO_FATAL_FAILURE(run("bf-1", "2025-01-02", TaskState::kStaged, 40));

  auto both =
      store_->LastRunInputRows("daily_revenue", {"2025-01-02", "2025-01-01"});
  ASSERT_TRUE(both.ok()) << both.status();
  EXPECT_THAT(*both, ElementsAre(Pair("2025-01-01", 20)));
  // Only what was asked for, even where the range between the smallest
  // and the largest asked covers more.
  auto around =
      store_->LastRunInputRows("daily_revenue", {"2024-12-31", "2025-01-02"});
  ASSERT_TRUE(around.ok()) << around.status();
  EXPECT_THAT(*around, IsEmpty());
  auto none = store_->LastRunInputRows("daily_revenue", {});
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_THAT(*none, IsEmpty());
  auto other = store_->LastRunInputRows("monthly_revenue", {"2025-01-01"});
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_THAT(*other, IsEmpty());
}

TEST_P(StateStoreContractTest, CutoffStatesAreCountedKeptAndNotPublished) {
  // Three tasks: 2025-01-01 and 2025-01-02 of daily_revenue, 2025-01 of
  // monthly_revenue.
  ASSERT_TRUE(store_->CreateJob(MakeJob(), T(0)).ok());
  auto tasks = *store_->ListTasks("bf-1");
  ASSERT_EQ(tasks.size(), 3u);
  tasks[0].state = TaskState::kUnchanged;
  tasks[0].rows_written = 4;
  tasks[0].output_fingerprint = "same:4";
  tasks[0].inputs = {{"orders", "2025-01-01", "f", 10}};
  tasks[1].state = TaskState::kStaged;
  tasks[1].rows_written = 3;
  tasks[1].inputs = {{"orders", "2025-01-02", "g", 20}};
  tasks[2].state = TaskState::kSkipped;
  tasks[2].output_fingerprint = "kept:9";
  for (const PartitionTask& t : tasks) ASSERT_TRUE(store_->UpdateTask(t).ok());

  auto job = store_->GetJob("bf-1");
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->counts.total, 3);
  EXPECT_EQ(job->counts.unchanged, 1);
  EXPECT_EQ(job->counts.skipped, 1);
  EXPECT_EQ(job->counts.staged, 1);
  // The unchanged partition was recomputed (its inputs read) but writes
  // nothing to the warehouse; the skipped one neither.
  EXPECT_EQ(job->actual_cost, 30);
  EXPECT_EQ(job->rows_written, 3);
  EXPECT_EQ(store_->GetJobProgress("bf-1")->counts.unchanged, 1);
  auto read = *store_->ListTasks("bf-1");
  EXPECT_EQ(read[0].state, TaskState::kUnchanged);
  EXPECT_EQ(read[0].output_fingerprint, "same:4");
  EXPECT_EQ(read[2].state, TaskState::kSkipped);
  EXPECT_EQ(read[2].output_fingerprint, "kept:9");

  // A retry keeps them, as it keeps staged tasks.
  ASSERT_NO_FATAL_FAILURE(Reach("bf-1", JobState::kFailed, T(1)));
  auto reset = store_->RetryJob("bf-1", JobState::kFailed, JobState::kQueued,
                                "retry", T(2));
  ASSERT_TRUE(reset.ok()) << reset.status();
  EXPECT_EQ(*reset, 0);
  // The publication marks only the staged task published.
  ASSERT_NO_FATAL_FAILURE(Reach("bf-1", JobState::kPublishing, T(3)));
  ASSERT_TRUE(store_
                  ->RecordPublication(
                      "bf-1",
                      {MakeLineage("daily_revenue", "2025-01-02", T(4))},
                      JobState::kConfirming, "published", T(4))
                  .ok());
  job = store_->GetJob("bf-1");
  EXPECT_EQ(job->counts.published, 1);
  EXPECT_EQ(job->counts.unchanged, 1);
  EXPECT_EQ(job->counts.skipped, 1);
  // Stats count them by state.
  auto stats = store_->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->tasks_by_state[static_cast<size_t>(TaskState::kUnchanged)],
            1);
  EXPECT_EQ(stats->tasks_by_state[static_cast<size_t>(TaskState::kSkipped)], 1);
}

TEST_P(StateStoreContractTest, RetryResetsFailedCancelledAndRunningTasks) {
  ASSERT_TRUE(store_->CreateJob(MakeJob(), T(0)).ok());
  ASSERT_TRUE(store_->CreateJob(MakeJob(), T(0)).ok());
  auto tasks = *store_->ListTasks("bf-1");
  const TaskState states[] = {TaskState::kStaged, TaskState::kFailed,
                              TaskState::kRunning};
  for (size_t i = 0; i < tasks.size(); ++i) {
    tasks[i].state = states[i];
    tasks[i].attempts = 3;
    tasks[i].last_error = "disk on fire";
    tasks[i].update_time = T(1);
    ASSERT_TRUE(store_->UpdateTask(tasks[i]).ok());
  }
  ASSERT_NO_FATAL_FAILURE(Reach("bf-1", JobState::kFailed, T(2)));
  const size_t events = store_->ListAuditEvents("bf-1")->size();

  // Refused: wrong expected state, or a move outside the table.
  auto wrong = store_->RetryJob("bf-1", JobState::kPaused, JobState::kQueued,
                                "retry", T(3));
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(wrong.status().message(), HasSubstr("is FAILED, not PAUSED"));
  auto illegal = store_->RetryJob("bf-1", JobState::kFailed, JobState::kRunning,
                                  "retry", T(3));
  EXPECT_EQ(illegal.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(illegal.status().message(), HasSubstr("cannot become RUNNING"));
  EXPECT_EQ(store_->GetJob("bf-1")->counts.failed, 1);
  EXPECT_EQ(store_->ListAuditEvents("bf-1")->size(), events);
  EXPECT_EQ(
      store_->RetryJob("bf-9", JobState::kFailed, JobState::kQueued, "", T(3))
          .status()
          .code(),
      absl::StatusCode::kNotFound);

  auto reset = store_->RetryJob("bf-1", JobState::kFailed, JobState::kQueued,
                                "retry", T(4));
  ASSERT_TRUE(reset.ok()) << reset.status();
  EXPECT_EQ(*reset, 2);
  auto job = store_->GetJob("bf-1");
  EXPECT_EQ(job->state, JobState::kQueued);
  EXPECT_EQ(job->message, "retry");
  // Running again: it has not ended any more.
  EXPECT_EQ(job->end_time, absl::InfinitePast());
  EXPECT_EQ(job->counts.staged, 1);
  EXPECT_EQ(job->counts.pending, 2);
  tasks = *store_->ListTasks("bf-1");
  EXPECT_EQ(tasks[0].state, TaskState::kStaged);
  EXPECT_EQ(tasks[0].attempts, 3);
  EXPECT_EQ(tasks[0].update_time, T(1));
  for (size_t i : {1, 2}) {
    EXPECT_EQ(tasks[i].state, TaskState::kPending);
    EXPECT_EQ(tasks[i].attempts, 0);
    EXPECT_EQ(tasks[i].last_error, "disk on fire");
    EXPECT_EQ(tasks[i].update_time, T(4));
  }
  auto audit = *store_->ListAuditEvents("bf-1");
  EXPECT_EQ(audit.back().from_state, "FAILED");
  EXPECT_EQ(audit.back().to_state, "QUEUED");
  EXPECT_EQ(audit.back().message, "retry");
  // The other job is untouched.
  EXPECT_EQ(store_->GetJob("bf-2")->counts.pending, 3);
}

TEST_P(StateStoreContractTest, RecordPublicationIsAtomicAndIdempotent) {
  ASSERT_TRUE(store_->CreateJob(MakeJob(), T(0)).ok());
  ASSERT_TRUE(store_
                  ->UpdateTasksInState("bf-1", {TaskState::kPending},
                                       TaskState::kStaged, T(1))
                  .ok());
  ASSERT_NO_FATAL_FAILURE(Reach("bf-1", JobState::kPublishing, T(2)));
  LineageRecord rec = MakeLineage("daily_revenue", "2025-01-01", T(3));
  rec.job_id = "bf-1";
  LineageRecord rec2 = rec;
  rec2.partition = "2025-01-02";

  // A lineage list with a duplicate fails as a whole: nothing changes.
  const size_t events_before = store_->ListAuditEvents("bf-1")->size();
  absl::Status dup = store_->RecordPublication(
      "bf-1", {rec, rec}, JobState::kConfirming, "published", T(3));
  EXPECT_EQ(dup.code(), absl::StatusCode::kFailedPrecondition) << dup;
  EXPECT_EQ(store_->GetJob("bf-1")->state, JobState::kPublishing);
  EXPECT_EQ(store_->GetJob("bf-1")->counts.staged, 3);
  EXPECT_TRUE(store_->GetLineage("daily_revenue", "2025-01-01")->empty());
  EXPECT_EQ(store_->ListAuditEvents("bf-1")->size(), events_before);

  ASSERT_TRUE(store_
                  ->RecordPublication("bf-1", {rec, rec2},
                                      JobState::kConfirming, "published", T(3))
                  .ok());
  auto job = store_->GetJob("bf-1");
  EXPECT_EQ(job->state, JobState::kConfirming);
  EXPECT_EQ(job->message, "published");
  EXPECT_EQ(job->update_time, T(3));
  EXPECT_EQ(job->counts.published, 3);
  EXPECT_EQ((*store_->ListTasks("bf-1"))[0].update_time, T(3));
  auto lineage = store_->GetLineage("daily_revenue", "2025-01-01");
  ASSERT_EQ(lineage->size(), 1u);
  EXPECT_EQ((*lineage)[0].job_id, "bf-1");
  EXPECT_EQ((*lineage)[0].transform_version, "v1");
  ASSERT_EQ((*lineage)[0].inputs.size(), 1u);
  EXPECT_EQ((*lineage)[0].inputs[0].rows, 3);
  EXPECT_EQ((*lineage)[0].output_fingerprint, "out");
  EXPECT_EQ((*lineage)[0].row_count, 2);
  EXPECT_EQ((*lineage)[0].published_at, T(3));
  EXPECT_EQ((*lineage)[0].reason, "fix refunds");
  EXPECT_EQ((*lineage)[0].ticket, "DATA-1");
  EXPECT_EQ((*lineage)[0].requested_by, "alice");
  auto audit = *store_->ListAuditEvents("bf-1");
  EXPECT_EQ(audit.back().from_state, "PUBLISHING");
  EXPECT_EQ(audit.back().to_state, "CONFIRMING");

  // Repeated after a restart: no duplicate lineage, no extra audit event.
  size_t events = store_->ListAuditEvents("bf-1")->size();
  ASSERT_TRUE(store_
                  ->RecordPublication("bf-1", {rec, rec2},
                                      JobState::kConfirming, "published", T(4))
                  .ok());
  EXPECT_EQ(store_->GetLineage("daily_revenue", "2025-01-01")->size(), 1u);
  EXPECT_EQ(store_->ListAuditEvents("bf-1")->size(), events);
  EXPECT_EQ(store_->GetJob("bf-1")->update_time, T(3));
  // Also once the job has moved on.
  ASSERT_NO_FATAL_FAILURE(Reach("bf-1", JobState::kSucceeded, T(5)));
  ASSERT_TRUE(store_
                  ->RecordPublication("bf-1", {rec, rec2},
                                      JobState::kConfirming, "published", T(6))
                  .ok());
  EXPECT_EQ(store_->GetJob("bf-1")->state, JobState::kSucceeded);

  // A later job's version comes first.
  ASSERT_TRUE(store_->CreateJob(MakeJob(), T(10)).ok());
  ASSERT_NO_FATAL_FAILURE(Reach("bf-2", JobState::kPublishing, T(10)));
  rec.published_at = T(11);
  rec.job_id = "ignored: the job published is the argument";
  ASSERT_TRUE(store_
                  ->RecordPublication("bf-2", {rec}, JobState::kConfirming,
                                      "published", T(11))
                  .ok());
  lineage = store_->GetLineage("daily_revenue", "2025-01-01");
  ASSERT_EQ(lineage->size(), 2u);
  EXPECT_EQ((*lineage)[0].job_id, "bf-2");
  EXPECT_EQ((*lineage)[1].job_id, "bf-1");
  EXPECT_THAT(*store_->GetLineage("daily_revenue", "2025-01-03"), IsEmpty());
  EXPECT_EQ(
      store_->RecordPublication("bf-9", {}, JobState::kConfirming, "", T(1))
          .code(),
      absl::StatusCode::kNotFound);
}

TEST_P(StateStoreContractTest, LineageIsNewestRecordedFirstWhateverTheClock) {
  for (int i = 1; i <= 3; ++i) {
    ASSERT_TRUE(store_->CreateJob(MakeJob(), T(0)).ok());
    ASSERT_NO_FATAL_FAILURE(
        Reach(absl::StrCat("bf-", i), JobState::kPublishing, T(0)));
  }
  // Recorded bf-1, bf-3, bf-2: bf-2 was published last but claims the
  // earliest time (a clock stepped back) and is still the newest; bf-1 and
  // bf-3 share one time; a record without a time gets the call's time.
  LineageRecord rec = MakeLineage("daily_revenue", "2025-01-01", T(50));
  ASSERT_TRUE(
      store_->RecordPublication("bf-1", {rec}, JobState::kConfirming, "", T(1))
          .ok());
  ASSERT_TRUE(
      store_->RecordPublication("bf-3", {rec}, JobState::kConfirming, "", T(2))
          .ok());
  rec.published_at = absl::InfinitePast();
  ASSERT_TRUE(
      store_->RecordPublication("bf-2", {rec}, JobState::kConfirming, "", T(10))
          .ok());
  auto lineage = store_->GetLineage("daily_revenue", "2025-01-01");
  ASSERT_TRUE(lineage.ok()) << lineage.status();
  std::vector<std::string> order;
  for (const LineageRecord& r : *lineage) {
    order.push_back(absl::StrCat(
        r.job_id, "@", absl::ToUnixSeconds(r.published_at) - 1700000000));
  }
  EXPECT_THAT(order, ElementsAre("bf-2@10", "bf-3@50", "bf-1@50"));
  ASSERT_EQ(lineage->size(), 3u);
  EXPECT_GT((*lineage)[0].id, (*lineage)[1].id);
  EXPECT_GT((*lineage)[1].id, (*lineage)[2].id);
}

TEST_P(StateStoreContractTest, NewestLineagesAreEachPartitionsNewestRecord) {
  for (int i = 1; i <= 3; ++i) {
    ASSERT_TRUE(store_->CreateJob(MakeJob(), T(0)).ok());
    ASSERT_NO_FATAL_FAILURE(
        Reach(absl::StrCat("bf-", i), JobState::kPublishing, T(0)));
  }
  // 2025-01-01: bf-1 then bf-2 (with an earlier time); 2025-01-02: bf-3
  // only; 2025-01-03 and the other dataset's 2025-01-01: none.
  LineageRecord first = MakeLineage("daily_revenue", "2025-01-01", T(50));
  ASSERT_TRUE(
      store_
          ->RecordPublication("bf-1", {first}, JobState::kConfirming, "", T(1))
          .ok());
  first.published_at = T(5);
  ASSERT_TRUE(
      store_
          ->RecordPublication("bf-2", {first}, JobState::kConfirming, "", T(2))
          .ok());
  LineageRecord second = MakeLineage("daily_revenue", "2025-01-02", T(60));
  ASSERT_TRUE(
      store_
          ->RecordPublication("bf-3", {second}, JobState::kConfirming, "", T(3))
          .ok());
  const std::vector<std::pair<std::string, std::string>> keys = {
      {"daily_revenue", "2025-01-03"}, {"daily_revenue", "2025-01-01"},
      {"other", "2025-01-01"},         {"daily_revenue", "2025-01-02"},
      {"daily_revenue", "2025-01-01"},
  };
  auto newest = store_->NewestLineages(keys);
  ASSERT_TRUE(newest.ok()) << newest.status();
  ASSERT_EQ(newest->size(), keys.size());
  std::vector<std::string> got;
  for (const std::optional<LineageRecord>& r : *newest) {
    got.push_back(
        r ? absl::StrCat(r->dataset, "/", r->partition, "@", r->job_id) : "-");
  }
  EXPECT_THAT(got, ElementsAre("-", "daily_revenue/2025-01-01@bf-2", "-",
                               "daily_revenue/2025-01-02@bf-3",
                               "daily_revenue/2025-01-01@bf-2"));
  // Each as GetLineage's first record.
  for (size_t i = 0; i < keys.size(); ++i) {
    auto lineage = store_->GetLineage(keys[i].first, keys[i].second);
    ASSERT_TRUE(lineage.ok()) << lineage.status();
    ASSERT_EQ(lineage->empty(), !(*newest)[i].has_value()) << i;
    if (lineage->empty()) continue;
    EXPECT_EQ(lineage->front().id, (*newest)[i]->id) << i;
    EXPECT_EQ(lineage->front().output_fingerprint,
              (*newest)[i]->output_fingerprint)
        << i;
  }
  auto none = store_->NewestLineages({});
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->empty());
}

TEST_P(StateStoreContractTest, RecordPublicationOnlyMovesAPublishingJob) {
  LineageRecord rec = MakeLineage("daily_revenue", "2025-01-01", T(3));
  for (JobState state :
       {JobState::kQueued, JobState::kRunning, JobState::kValidating,
        JobState::kAwaitingApproval, JobState::kFailed, JobState::kCancelled,
        JobState::kPaused, JobState::kValidationFailed}) {
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

  // A PUBLISHING job moves only where the table allows.
  auto created = store_->CreateJob(MakeJob(), T(0));
  ASSERT_TRUE(created.ok());
  const std::string id = created->job.id;
  ASSERT_NO_FATAL_FAILURE(Reach(id, JobState::kPublishing, T(2)));
  absl::Status s = store_->RecordPublication(id, {rec}, JobState::kQueued,
                                             "published", T(3));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(), HasSubstr("cannot become QUEUED"));
  EXPECT_EQ(store_->GetJob(id)->state, JobState::kPublishing);
  EXPECT_TRUE(store_->GetLineage("daily_revenue", "2025-01-01")->empty());
}

// Publishes `id` (a job of MakeJob()) with one lineage record per partition
// of daily_revenue, and moves it to SUCCEEDED.
void PublishAndSucceed(StateStore* store, const std::string& id,
                       const std::vector<std::string>& partitions,
                       absl::Time at) {
  ASSERT_NO_FATAL_FAILURE(Reach(store, id, JobState::kPublishing, at));
  std::vector<LineageRecord> lineage;
  for (const std::string& p : partitions) {
    lineage.push_back(MakeLineage("daily_revenue", p, at));
  }
  absl::Status s = store->RecordPublication(id, lineage, JobState::kConfirming,
                                            "published", at);
  ASSERT_TRUE(s.ok()) << s;
  s = store->TransitionJob(id, JobState::kConfirming, JobState::kSucceeded,
                           "ok", at);
  ASSERT_TRUE(s.ok()) << s;
}

TEST_P(StateStoreContractTest, RecordRollbackIsAtomicAndIdempotent) {
  for (int i = 1; i <= 3; ++i) {
    ASSERT_TRUE(store_->CreateJob(MakeJob(), T(0)).ok());
  }
  ASSERT_NO_FATAL_FAILURE(PublishAndSucceed(
      store_.get(), "bf-1", {"2025-01-01", "2025-01-02"}, T(1)));
  ASSERT_NO_FATAL_FAILURE(
      PublishAndSucceed(store_.get(), "bf-2", {"2025-01-02"}, T(2)));
  // bf-3 never publishes.
  RollbackInfo info;
  info.requested_by = "bob";
  info.reason = "bad prices";
  info.forced = true;
  info.also_rolled_back = {"bf-2"};
  info.partitions = 2;
  info.rows = 5;
  LineageRecord r1 = MakeLineage("daily_revenue", "2025-01-02", T(5));
  r1.job_id = "bf-2";
  r1.row_count = 3;
  LineageRecord r2 = MakeLineage("daily_revenue", "2025-01-01", T(5));
  r2.job_id = "bf-1";
  LineageRecord r3 = MakeLineage("daily_revenue", "2025-01-02", T(5));
  r3.job_id = "bf-1";

  // A job taken along that did not publish: nothing is written.
  RollbackInfo bad = info;
  bad.also_rolled_back = {"bf-3"};
  absl::Status s = store_->RecordRollback("bf-1", bad, {r2, r3}, "rolled back",
                                          "with", T(5));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(), HasSubstr("bf-3"));
  EXPECT_EQ(store_->GetJob("bf-1")->state, JobState::kSucceeded);
  EXPECT_FALSE(store_->GetJob("bf-1")->rollback.has_value());
  EXPECT_EQ(store_->GetLineage("daily_revenue", "2025-01-01")->size(), 1u);

  s = store_->RecordRollback("bf-1", info, {r1, r2, r3}, "rolled back",
                             "rolled back with bf-1", T(5));
  ASSERT_TRUE(s.ok()) << s;
  auto job = store_->GetJob("bf-1");
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->state, JobState::kRolledBack);
  EXPECT_EQ(job->message, "rolled back");
  EXPECT_EQ(job->end_time, T(5));
  ASSERT_TRUE(job->rollback.has_value());
  EXPECT_EQ(job->rollback->requested_by, "bob");
  EXPECT_EQ(job->rollback->reason, "bad prices");
  EXPECT_EQ(job->rollback->at, T(5));
  EXPECT_TRUE(job->rollback->forced);
  EXPECT_EQ(job->rollback->with_job, "");
  EXPECT_THAT(job->rollback->also_rolled_back, ElementsAre("bf-2"));
  EXPECT_EQ(job->rollback->partitions, 2);
  EXPECT_EQ(job->rollback->rows, 5);
  auto other = store_->GetJob("bf-2");
  EXPECT_EQ(other->state, JobState::kRolledBack);
  EXPECT_EQ(other->message, "rolled back with bf-1");
  ASSERT_TRUE(other->rollback.has_value());
  EXPECT_EQ(other->rollback->with_job, "bf-1");
  EXPECT_EQ(other->rollback->rows, 0);
  EXPECT_EQ(store_->ListAuditEvents("bf-2")->back().to_state, "ROLLED_BACK");

  auto lineage = store_->GetLineage("daily_revenue", "2025-01-02");
  ASSERT_TRUE(lineage.ok()) << lineage.status();
  ASSERT_EQ(lineage->size(), 4u);
  std::vector<std::string> actions;
  for (const LineageRecord& r : *lineage) {
    actions.push_back(absl::StrCat(r.job_id, ":", LineageActionName(r.action)));
  }
  EXPECT_THAT(actions, ElementsAre("bf-1:rollback", "bf-2:rollback",
                                   "bf-2:publish", "bf-1:publish"));

  // Again (a repeat after a restart): nothing more.
  s = store_->RecordRollback("bf-1", info, {r1, r2, r3}, "again", "again",
                             T(6));
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(store_->GetJob("bf-1")->message, "rolled back");
  EXPECT_EQ(store_->GetLineage("daily_revenue", "2025-01-02")->size(), 4u);
  // Unknown job.
  EXPECT_EQ(store_->RecordRollback("bf-9", info, {}, "", "", T(6)).code(),
            absl::StatusCode::kNotFound);
}

TEST_P(StateStoreContractTest, RecordRollbackNeedsAPublishedJob) {
  for (JobState state :
       {JobState::kQueued, JobState::kRunning, JobState::kFailed,
        JobState::kCancelled, JobState::kPublishing, JobState::kConfirming,
        JobState::kValidationFailed}) {
    SCOPED_TRACE(JobStateName(state));
    auto created = store_->CreateJob(MakeJob(), T(0));
    ASSERT_TRUE(created.ok()) << created.status();
    const std::string id = created->job.id;
    if (state != JobState::kQueued) {
      ASSERT_NO_FATAL_FAILURE(Reach(id, state, T(1)));
    }
    RollbackInfo info;
    info.reason = "r";
    absl::Status s = store_->RecordRollback(
        id, info, {MakeLineage("daily_revenue", "2025-01-01", T(2))}, "m", "",
        T(2));
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
    EXPECT_THAT(s.message(), HasSubstr(JobStateName(state)));
    EXPECT_EQ(store_->GetJob(id)->state, state);
  }
  EXPECT_TRUE(store_->GetLineage("daily_revenue", "2025-01-01")->empty());
}

TEST_P(StateStoreContractTest, LineageOverlappingAndPublicationTimes) {
  for (int i = 1; i <= 3; ++i) {
    ASSERT_TRUE(store_->CreateJob(MakeJob(), T(0)).ok());
  }
  ASSERT_NO_FATAL_FAILURE(PublishAndSucceed(
      store_.get(), "bf-1", {"2025-01-01", "2025-01-02"}, T(30)));
  ASSERT_NO_FATAL_FAILURE(PublishAndSucceed(
      store_.get(), "bf-2", {"2025-01-02", "2025-01-03"}, T(10)));
  ASSERT_NO_FATAL_FAILURE(
      PublishAndSucceed(store_.get(), "bf-3", {"2025-01-03"}, T(20)));
  // bf-1's partitions: 01 (bf-1) and 02 (bf-1, bf-2), in recorded order
  // whatever their times; 03 is not bf-1's.
  auto history = store_->GetLineageOverlapping("bf-1");
  ASSERT_TRUE(history.ok()) << history.status();
  std::vector<std::string> got;
  for (const LineageRecord& r : *history) {
    got.push_back(absl::StrCat(r.job_id, "/", r.partition));
  }
  EXPECT_THAT(
      got, ::testing::UnorderedElementsAre("bf-1/2025-01-01", "bf-1/2025-01-02",
                                           "bf-2/2025-01-02"));
  std::vector<std::string> day2;
  for (const LineageRecord& r : *history) {
    if (r.partition == "2025-01-02") day2.push_back(r.job_id);
  }
  EXPECT_THAT(day2, ElementsAre("bf-1", "bf-2"));
  EXPECT_EQ(store_->GetLineageOverlapping("bf-9").status().code(),
            absl::StatusCode::kNotFound);

  auto times = store_->PublicationTimes({"bf-1", "bf-3", "bf-9"});
  ASSERT_TRUE(times.ok()) << times.status();
  EXPECT_THAT(*times, ElementsAre(Pair("bf-1", T(30)), Pair("bf-3", T(20))));
}

TEST_P(StateStoreContractTest, FindJobByKey) {
  EXPECT_FALSE(store_->FindJobByKey("k")->has_value());
  EXPECT_FALSE(store_->FindJobByKey("")->has_value());
  ASSERT_TRUE(store_->CreateJob(MakeJob("k"), T(0)).ok());
  ASSERT_TRUE(store_->CreateJob(MakeJob(), T(1)).ok());
  auto found = store_->FindJobByKey("k");
  ASSERT_TRUE(found.ok());
  ASSERT_TRUE(found->has_value());
  EXPECT_EQ((*found)->id, "bf-1");
  EXPECT_EQ((*found)->idempotency_key, "k");
  EXPECT_EQ((*found)->counts.total, 3);
  EXPECT_FALSE(store_->FindJobByKey("K")->has_value());
}

TEST_P(StateStoreContractTest, Stats) {
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
  t.partition = "2025-01-02";
  t.state = TaskState::kFailed;
  ASSERT_TRUE(store_->UpdateTask(t).ok());
  auto stats = store_->Stats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->jobs_by_state[static_cast<int>(JobState::kRunning)], 1);
  EXPECT_EQ(stats->jobs_by_state[static_cast<int>(JobState::kQueued)], 1);
  EXPECT_EQ(stats->jobs_by_state[static_cast<int>(JobState::kFailed)], 0);
  EXPECT_EQ(stats->tasks_by_state[static_cast<int>(TaskState::kPending)], 4);
  EXPECT_EQ(stats->tasks_by_state[static_cast<int>(TaskState::kStaged)], 1);
  EXPECT_EQ(stats->tasks_by_state[static_cast<int>(TaskState::kFailed)], 1);
  EXPECT_EQ(stats->running_tasks_total, 3);
  EXPECT_EQ(stats->running_tasks_done, 1);
}

// ---- Both stores, one random history ------------------------------------

std::string Time(absl::Time t) {
  if (t == absl::InfinitePast()) return "-inf";
  if (t == absl::InfiniteFuture()) return "+inf";
  return absl::StrCat(absl::ToUnixMicros(t), "us",
                      t == absl::FromUnixMicros(absl::ToUnixMicros(t))
                          ? ""
                          : "+sub-microsecond");
}

std::string Inputs(const std::vector<InputFingerprint>& inputs) {
  std::vector<std::string> parts;
  for (const InputFingerprint& in : inputs) {
    parts.push_back(absl::StrCat("{", in.dataset, "|", in.partition, "|",
                                 in.fingerprint, "|", in.rows, "}"));
  }
  return absl::StrJoin(parts, ",");
}

std::string Describe(const Job& j) {
  std::string out = absl::StrCat(
      j.id, " ", JobStateName(j.state), " req={", j.request.dataset, "|",
      j.request.from, "|", j.request.to, "|[",
      absl::StrJoin(j.request.partitions, "|"), "]|", j.request.reason, "|",
      j.request.ticket, "|", j.request.requested_by, "|",
      j.request.exclude_downstream, "|", j.request.priority, "|",
      j.request.max_parallel, "} key=", j.idempotency_key,
      " fp=", j.request_fingerprint, " msg=", j.message,
      absl::StrFormat(" cost=%.17g/%.17g", j.plan.cost.backfill,
                      j.plan.cost.full_reload),
      " conflicts=", j.plan.conflicts.size());
  absl::StrAppend(&out, " affected_by=", j.request.affected_by,
                  " auto=", j.request.auto_detect);
  for (const DatasetPlan& dp : j.plan.datasets) {
    absl::StrAppend(&out, " ds={", dp.dataset, "|", dp.reason, "|",
                    dp.transform_version,
                    absl::StrFormat("|%.17g/%.17g|[", dp.cost.backfill,
                                    dp.cost.full_reload),
                    absl::StrJoin(dp.partitions, ","), "]}");
  }
  const PartitionCounts& c = j.counts;
  absl::StrAppend(&out, " counts=", c.total, "/", c.pending, "/", c.running,
                  "/", c.staged, "/", c.published, "/", c.failed, "/",
                  c.cancelled, absl::StrFormat(" actual=%.17g", j.actual_cost),
                  " rows=", j.rows_written, " times=", Time(j.create_time), ",",
                  Time(j.update_time), ",", Time(j.start_time), ",",
                  Time(j.end_time));
  return out;
}

std::string Describe(const PartitionTask& t) {
  return absl::StrCat(t.job_id, " ", t.dataset, "/", t.partition, " ",
                      TaskStateName(t.state), " attempts=", t.attempts,
                      " err=", t.last_error, " rows=", t.rows_written,
                      " out=", t.output_fingerprint, " in=", Inputs(t.inputs),
                      absl::StrFormat(" took=%.17g", t.duration_seconds),
                      " at=", Time(t.update_time));
}

std::string Describe(const LineageRecord& r) {
  return absl::StrCat(r.dataset, "/", r.partition, " ", r.job_id, " ",
                      r.transform_version, " in=", Inputs(r.inputs),
                      " out=", r.output_fingerprint, " rows=", r.row_count, " ",
                      r.reason, "|", r.ticket, "|", r.requested_by,
                      " at=", Time(r.published_at));
}

std::string Describe(const AuditEvent& e) {
  return absl::StrCat(e.seq, " ", e.job_id, " ", e.from_state, ">", e.to_state,
                      ":", e.message, " at=", Time(e.at));
}

std::string Describe(const std::string& s) { return s; }
std::string Describe(int64_t n) { return absl::StrCat(n); }
std::string Describe(const CreateJobResult& r) {
  return absl::StrCat(r.created ? "created " : "existing ", Describe(r.job));
}
std::string Describe(const StoreStats& s) {
  return absl::StrCat("jobs=[", absl::StrJoin(s.jobs_by_state, ","),
                      "] tasks=[", absl::StrJoin(s.tasks_by_state, ","),
                      "] running=", s.running_tasks_done, "/",
                      s.running_tasks_total);
}
std::string Describe(const absl::Status& s) {
  return s.ok() ? "ok"
                : absl::StrCat("error ", absl::StatusCodeToString(s.code()));
}

template <typename T>
std::string Describe(const std::vector<T>& items) {
  std::vector<std::string> parts;
  for (const T& item : items) parts.push_back(Describe(item));
  return absl::StrCat("[", absl::StrJoin(parts, "\n "), "]");
}

template <typename T>
std::string Describe(const absl::StatusOr<T>& result) {
  if (!result.ok()) {
    return absl::StrCat("error ",
                        absl::StatusCodeToString(result.status().code()));
  }
  return Describe(*result);
}

// Everything a store tells about itself, for comparing two stores.
std::string Snapshot(
    StateStore* store, int max_job,
    const std::set<std::pair<std::string, std::string>>& lineage_keys) {
  std::string out;
  JobFilter all;
  all.limit = 0;
  absl::StrAppend(&out, "jobs: ", Describe(store->ListJobs(all)), "\n");
  for (int n = 1; n <= max_job + 1; ++n) {
    const std::string id = absl::StrCat("bf-", n);
    absl::StrAppend(&out, id, " tasks: ", Describe(store->ListTasks(id)),
                    "\n progress: ", Describe(store->GetJobProgress(id)),
                    "\n audit: ", Describe(store->ListAuditEvents(id)), "\n");
  }
  for (const auto& [dataset, partition] : lineage_keys) {
    absl::StrAppend(&out, "lineage ", dataset, "/", partition, ": ",
                    Describe(store->GetLineage(dataset, partition)), "\n");
  }
  for (int s = 0; s < kJobStateCount; ++s) {
    absl::StrAppend(&out, JobStateName(static_cast<JobState>(s)), ": ",
                    Describe(store->ListJobIds({static_cast<JobState>(s)})),
                    "\n");
  }
  absl::StrAppend(&out, "stats: ", Describe(store->Stats()), "\n");
  absl::StrAppend(&out, "last job: ", store->Info()->last_job_number, "\n");
  return out;
}

// Random operations on both stores; every result and, now and then, all
// that the stores hold must be the same.
class History {
 public:
  explicit History(uint32_t seed) : rng_(seed) {}

  // One random operation, applied to each store; returns its description
  // and what each store answered.
  std::string Step(StateStore* a, StateStore* b, std::string* out_a,
                   std::string* out_b) {
    const int op = Uniform(0, 99);
    const absl::Time now = RandomTime();
    if (op < 15) {
      Job job = RandomJob();
      *out_a = Describe(a->CreateJob(job, now));
      *out_b = Describe(b->CreateJob(job, now));
      return "CreateJob";
    }
    const std::string id = RandomId(a);
    if (op < 40) {
      std::optional<JobState> expected;
      if (Uniform(0, 3) > 0) {
        auto job = a->GetJob(id);
        expected = job.ok() && Uniform(0, 4) > 0 ? job->state : RandomState();
      }
      JobState to = RandomState();
      if (Uniform(0, 2) > 0) {
        // Mostly moves the table allows, to get far.
        auto job = a->GetJob(id);
        if (job.ok() && !NextStates(job->state).empty()) {
          std::vector<JobState> next = NextStates(job->state);
          to = next[Uniform(0, static_cast<int>(next.size()) - 1)];
        }
      }
      const std::string msg = RandomText();
      *out_a = Describe(a->TransitionJob(id, expected, to, msg, now));
      *out_b = Describe(b->TransitionJob(id, expected, to, msg, now));
      return absl::StrCat("TransitionJob ", id, " to ", JobStateName(to));
    }
    if (op < 45) {
      const JobState from =
          Uniform(0, 2) > 0 ? JobState::kFailed : RandomState();
      const JobState to = Uniform(0, 2) > 0 ? JobState::kQueued : RandomState();
      *out_a = Describe(a->RetryJob(id, from, to, "retry", now));
      *out_b = Describe(b->RetryJob(id, from, to, "retry", now));
      return absl::StrCat("RetryJob ", id);
    }
    if (op < 50) {
      const JobState state = RandomState();
      const std::string msg = RandomText();
      *out_a = Describe(a->SetJobMessage(id, state, msg, now));
      *out_b = Describe(b->SetJobMessage(id, state, msg, now));
      return absl::StrCat("SetJobMessage ", id);
    }
    if (op < 75) {
      PartitionTask t = RandomTask(a, id);
      *out_a = Describe(a->UpdateTask(t));
      *out_b = Describe(b->UpdateTask(t));
      return absl::StrCat("UpdateTask ", Describe(t));
    }
    if (op < 83) {
      std::vector<TaskState> from;
      for (int s = 0; s < kTaskStateCount; ++s) {
        if (Uniform(0, 2) == 0) from.push_back(static_cast<TaskState>(s));
      }
      const TaskState to = RandomTaskState();
      *out_a = Describe(a->UpdateTasksInState(id, from, to, now));
      *out_b = Describe(b->UpdateTasksInState(id, from, to, now));
      return absl::StrCat("UpdateTasksInState ", id);
    }
    if (op < 95) {
      std::vector<LineageRecord> lineage;
      auto tasks = a->ListTasks(id);
      if (tasks.ok()) {
        for (const PartitionTask& t : *tasks) {
          if (Uniform(0, 2) == 0) continue;
          LineageRecord rec = MakeLineage(
              t.dataset, t.partition,
              Uniform(0, 3) == 0 ? absl::InfinitePast() : RandomTime());
          rec.row_count = Uniform(0, 1000);
          lineage_keys_.insert({t.dataset, t.partition});
          lineage.push_back(rec);
          if (Uniform(0, 20) == 0) lineage.push_back(rec);  // a duplicate
        }
      }
      const JobState to =
          Uniform(0, 3) > 0 ? JobState::kConfirming : RandomState();
      *out_a =
          Describe(a->RecordPublication(id, lineage, to, "published", now));
      *out_b =
          Describe(b->RecordPublication(id, lineage, to, "published", now));
      return absl::StrCat("RecordPublication ", id, " (", lineage.size(),
                          " records) to ", JobStateName(to));
    }
    const int64_t n = Uniform(0, max_job(a) + 3);
    *out_a = Describe(a->ReserveJobNumbers(n));
    *out_b = Describe(b->ReserveJobNumbers(n));
    return absl::StrCat("ReserveJobNumbers ", n);
  }

  int max_job(StateStore* store) {
    return static_cast<int>(store->Info()->last_job_number);
  }
  const std::set<std::pair<std::string, std::string>>& lineage_keys() const {
    return lineage_keys_;
  }

 private:
  int Uniform(int lo, int hi) {
    return std::uniform_int_distribution<int>(lo, hi)(rng_);
  }

  absl::Time RandomTime() {
    switch (Uniform(0, 9)) {
      case 0:
        return absl::InfiniteFuture();
      case 1:
        return absl::FromUnixNanos(-Uniform(1, 5000));
      default:
        return T(Uniform(0, 100)) + absl::Nanoseconds(Uniform(0, 2999));
    }
  }

  JobState RandomState() {
    return static_cast<JobState>(Uniform(0, kJobStateCount - 1));
  }
  TaskState RandomTaskState() {
    return static_cast<TaskState>(Uniform(0, kTaskStateCount - 1));
  }

  std::string RandomText() {
    static const char* const kTexts[] = {"",    "a",        "x:y", "3:abc",
                                         "ünï", "quote'\"", "12:", ":"};
    return kTexts[Uniform(0, 7)];
  }

  // Mostly a job that exists, sometimes none.
  std::string RandomId(StateStore* store) {
    const int last = static_cast<int>(store->Info()->last_job_number);
    return absl::StrCat("bf-", Uniform(0, last + 2));
  }

  Job RandomJob() {
    static const char* const kDatasets[] = {"a", "b", "c:d", "e"};
    static const char* const kParts[] = {"2025-01-01", "2025-01-02", "", "k:1",
                                         "2025-02"};
    Job job;
    job.request.dataset = kDatasets[Uniform(0, 3)];
    job.request.from = RandomText();
    job.request.to = RandomText();
    for (int i = Uniform(0, 3); i > 0; --i) {
      job.request.partitions.push_back(RandomText());
    }
    job.request.reason = RandomText();
    job.request.ticket = RandomText();
    job.request.requested_by = RandomText();
    job.request.exclude_downstream = Uniform(0, 1) == 1;
    job.request.priority = Uniform(-3, 3);
    job.request.max_parallel = Uniform(0, 4);
    if (Uniform(0, 1) == 0) job.request.affected_by = RandomText();
    if (Uniform(0, 2) == 0) job.idempotency_key = RandomText() + "k";
    job.request_fingerprint = RandomText();
    job.message = RandomText();
    for (int d = Uniform(0, 3); d > 0; --d) {
      DatasetPlan dp;
      dp.dataset = kDatasets[Uniform(0, 3)];
      dp.reason = RandomText();
      dp.transform_version = RandomText();
      dp.cost = {Uniform(0, 100) / 8.0, Uniform(0, 1000) / 3.0};
      for (int p = 0; p < 5; ++p) {
        if (Uniform(0, 1) == 0) dp.partitions.push_back(kParts[p]);
      }
      job.plan.datasets.push_back(dp);
    }
    job.plan.cost = {Uniform(0, 100) * 1.25, Uniform(0, 100) * 0.1};
    return job;
  }

  PartitionTask RandomTask(StateStore* store, const std::string& id) {
    PartitionTask t;
    auto tasks = store->ListTasks(id);
    if (tasks.ok() && !tasks->empty() && Uniform(0, 9) > 0) {
      t = (*tasks)[Uniform(0, static_cast<int>(tasks->size()) - 1)];
    } else {
      t.job_id = id;
      t.dataset = "a";
      t.partition = "nowhere";
    }
    t.state = RandomTaskState();
    t.attempts = Uniform(0, 5);
    t.last_error = RandomText();
    t.rows_written = Uniform(0, 1000000);
    t.output_fingerprint = RandomText();
    t.inputs.clear();
    for (int i = Uniform(0, 3); i > 0; --i) {
      t.inputs.push_back(
          {RandomText(), RandomText(), RandomText(), Uniform(0, 100000)});
    }
    t.duration_seconds = Uniform(0, 10000) / 7.0;
    t.update_time = RandomTime();
    return t;
  }

  std::mt19937 rng_;
  std::set<std::pair<std::string, std::string>> lineage_keys_;
};

TEST(StateStoreContractRandomTest, BothStoresGiveTheSameAnswers) {
  for (uint32_t seed : {1u, 2u, 3u, 4u}) {
    SCOPED_TRACE(absl::StrCat("seed ", seed));
    const std::string dir = MakeTempDir();
    ASSERT_FALSE(dir.empty());
    auto sqlite = OpenStore(StoreKind::kSqlite, dir);
    ASSERT_TRUE(sqlite.ok()) << sqlite.status();
    testing::InMemoryStateStore memory;
    History history(seed);
    int compared_snapshots = 0;
    for (int step = 0; step < 300; ++step) {
      std::string out_sqlite, out_memory;
      const std::string op =
          history.Step(sqlite->get(), &memory, &out_sqlite, &out_memory);
      ASSERT_EQ(out_sqlite, out_memory) << "step " << step << ": " << op;
      if (step % 25 == 24 || step == 299) {
        const int max_job = history.max_job(sqlite->get());
        ASSERT_EQ(Snapshot(sqlite->get(), max_job, history.lineage_keys()),
                  Snapshot(&memory, max_job, history.lineage_keys()))
            << "after step " << step << ": " << op;
        ++compared_snapshots;
      }
    }
    EXPECT_EQ(compared_snapshots, 12);
    // The history went somewhere: jobs, moves and publications happened.
    auto stats = memory.Stats();
    int64_t jobs = 0, moved = 0;
    for (int s = 0; s < kJobStateCount; ++s) {
      jobs += stats->jobs_by_state[s];
      if (s != static_cast<int>(JobState::kQueued)) {
        moved += stats->jobs_by_state[s];
      }
    }
    EXPECT_GT(jobs, 10);
    EXPECT_GT(moved, 3);
    EXPECT_FALSE(history.lineage_keys().empty());
    sqlite->reset();
    std::filesystem::remove_all(dir);
  }
}

// ---- approvals and diffs ---------------------------------------------------

namespace {

JobDiff MakeDiff(const std::string& job_id, absl::Time at) {
  JobDiff diff;
  diff.job_id = job_id;
  diff.computed_at = at;
  DatasetDiff a;
  a.dataset = "daily_revenue";
  a.columns.by_key = true;
  a.columns.key = {"ds", "region"};
  a.columns.values = {"revenue", "orders", "note"};
  a.columns.measures = {"revenue", "orders"};
  PartitionDiff p2;  // listed first: the store sorts by partition
  p2.partition = "2025-01-02";
  p2.rows_before = 0;
  p2.rows_after = 2;
  p2.added = 2;
  p2.measures = {{"revenue", 0, 0.1 + 0.2}, {"orders", 0, 7}};
  PartitionDiff p1;
  p1.partition = "2025-01-01";
  p1.rows_before = 5;
  p1.rows_after = 4;
  p1.removed = 1;
  p1.changed = 2;
  p1.unchanged = 2;
  p1.measures = {{"revenue", 1234.5, -1e-300}, {"orders", 9, 8}};
  p1.samples = {
      {DiffChange::kChanged,
       {"'2025-01-01'", "'north'"},
       {"12.5", "3", "NULL"},
       {"10", "3", "'it''s: 3:1'"}},
      {DiffChange::kRemoved, {"'2025-01-01'", "'x'"}, {"1", "1", ""}, {}}};
  a.partitions = {p2, p1};
  DatasetDiff b;
  b.dataset = "monthly_revenue";
  b.columns.values = {"month", "total"};
  b.columns.measures = {"total"};
  PartitionDiff m;
  m.partition = "2025-01";
  m.error = "no such column: total";
  m.measures = {{"total", 0, 0}};
  b.partitions = {m};
  diff.datasets = {a, b};
  return diff;
}

// A diff of one partition of `dataset` that gained `rows` rows.
JobDiff OnePartitionDiff(const std::string& job_id, absl::Time at,
                         const std::string& dataset, int64_t rows) {
  PartitionDiff p;
  p.partition = "2025-01-02";
  p.rows_after = rows;
  p.added = rows;
  DatasetDiff only;
  only.dataset = dataset;
  only.partitions = {p};
  JobDiff diff;
  diff.job_id = job_id;
  diff.computed_at = at;
  diff.datasets = {only};
  return diff;
}

}  // namespace

TEST_P(StateStoreContractTest, ADiffRoundTripsAndIsReplacedAsAWhole) {
  ASSERT_TRUE(store_->CreateJob(MakeJob(), T(0)).ok());
  auto none = store_->GetJobDiff("bf-1", "", true);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->has_value());
  EXPECT_EQ(store_->GetJobDiff("bf-9", "", true).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->ReplaceJobDiff(MakeDiff("bf-9", T(1))).code(),
            absl::StatusCode::kNotFound);

  ASSERT_TRUE(store_->ReplaceJobDiff(MakeDiff("bf-1", T(1))).ok());
  auto got = store_->GetJobDiff("bf-1", "", true);
  ASSERT_TRUE(got.ok() && got->has_value()) << got.status();
  const JobDiff& diff = **got;
  EXPECT_EQ(diff.computed_at, T(1));
  ASSERT_EQ(diff.datasets.size(), 2u);
  const DatasetDiff& a = diff.datasets[0];
  EXPECT_EQ(a.dataset, "daily_revenue");
  EXPECT_TRUE(a.columns.by_key);
  EXPECT_THAT(a.columns.key, ElementsAre("ds", "region"));
  EXPECT_THAT(a.columns.values, ElementsAre("revenue", "orders", "note"));
  EXPECT_THAT(a.columns.measures, ElementsAre("revenue", "orders"));
  ASSERT_EQ(a.partitions.size(), 2u);
  const PartitionDiff& p1 = a.partitions[0];
  EXPECT_EQ(p1.dataset, "daily_revenue");
  EXPECT_EQ(p1.partition, "2025-01-01");
  EXPECT_EQ(p1.rows_before, 5);
  EXPECT_EQ(p1.rows_after, 4);
  EXPECT_EQ(p1.removed, 1);
  EXPECT_EQ(p1.changed, 2);
  EXPECT_EQ(p1.unchanged, 2);
  ASSERT_EQ(p1.measures.size(), 2u);
  EXPECT_EQ(p1.measures[0].column, "revenue");
  EXPECT_EQ(p1.measures[0].before, 1234.5);
  EXPECT_EQ(p1.measures[0].after, -1e-300);  // doubles kept exactly
  ASSERT_EQ(p1.samples.size(), 2u);
  EXPECT_EQ(p1.samples[0].change, DiffChange::kChanged);
  EXPECT_THAT(p1.samples[0].key, ElementsAre("'2025-01-01'", "'north'"));
  EXPECT_THAT(p1.samples[0].before, ElementsAre("12.5", "3", "NULL"));
  EXPECT_THAT(p1.samples[0].after, ElementsAre("10", "3", "'it''s: 3:1'"));
  EXPECT_EQ(p1.samples[1].change, DiffChange::kRemoved);
  EXPECT_THAT(p1.samples[1].before, ElementsAre("1", "1", ""));
  EXPECT_THAT(p1.samples[1].after, IsEmpty());
  EXPECT_EQ(a.partitions[1].partition, "2025-01-02");
  EXPECT_EQ(a.partitions[1].measures[0].after, 0.1 + 0.2);
  const DatasetDiff& b = diff.datasets[1];
  EXPECT_FALSE(b.columns.by_key);
  EXPECT_THAT(b.columns.key, IsEmpty());
  ASSERT_EQ(b.partitions.size(), 1u);
  EXPECT_EQ(b.partitions[0].error, "no such column: total");

  // One dataset; without samples.
  got = store_->GetJobDiff("bf-1", "monthly_revenue", false);
  ASSERT_TRUE(got.ok() && got->has_value());
  ASSERT_EQ((*got)->datasets.size(), 1u);
  EXPECT_EQ((*got)->datasets[0].dataset, "monthly_revenue");
  got = store_->GetJobDiff("bf-1", "daily_revenue", false);
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_THAT((*got)->datasets[0].partitions[0].samples, IsEmpty());
  got = store_->GetJobDiff("bf-1", "no_such", true);
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_THAT((*got)->datasets, IsEmpty());

  // A new diff replaces everything of the old one.
  ASSERT_TRUE(
      store_->ReplaceJobDiff(OnePartitionDiff("bf-1", T(2), "daily_revenue", 1))
          .ok());
  got = store_->GetJobDiff("bf-1", "", true);
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ((*got)->computed_at, T(2));
  ASSERT_EQ((*got)->datasets.size(), 1u);
  ASSERT_EQ((*got)->datasets[0].partitions.size(), 1u);
  EXPECT_EQ((*got)->datasets[0].partitions[0].added, 1);
  EXPECT_THAT((*got)->datasets[0].partitions[0].measures, IsEmpty());
}

TEST_P(StateStoreContractTest, AReadersJobHasItsResultsInEitherView) {
  ASSERT_TRUE(store_->CreateJob(MakeJob(), T(0)).ok());
  ASSERT_TRUE(store_->CreateJob(MakeJob(), T(0)).ok());
  EXPECT_EQ(store_->GetJobForReader("bf-9", JobView::kBasic).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->GetJobForReader("bf-9", JobView::kFull).status().code(),
            absl::StatusCode::kNotFound);

  // Before any result: the job alone.
  auto fresh = store_->GetJobForReader("bf-1", JobView::kBasic);
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  EXPECT_THAT(fresh->checks, IsEmpty());
  EXPECT_THAT(fresh->consumers, IsEmpty());
  EXPECT_THAT(fresh->diff, IsEmpty());

  CheckResult check;
  check.check = "row_change";
  check.kind = "row_change";
  check.severity = CheckSeverity::kHold;
  check.dataset = "daily";
  check.summary = true;
  check.partitions_checked = 3;
  check.partitions_failed = 1;
  check.observed = "-90.0%";
  ASSERT_TRUE(store_->ReplaceCheckResults("bf-1", {check}).ok());
  ASSERT_NO_FATAL_FAILURE(Reach("bf-1", JobState::kDownstreamUnhealthy, T(1)));
  ASSERT_TRUE(store_
                  ->ReplaceConsumerConfirmations(
                      "bf-1", {Confirmation("daily", "cache_b", false, T(1))})
                  .ok());
  ASSERT_TRUE(store_->ReplaceJobDiff(MakeDiff("bf-1", T(1))).ok());

  // Each view has what the four separate reads give, and no more; the
  // other job has none of bf-1's results.
  for (JobView view : {JobView::kBasic, JobView::kFull}) {
    SCOPED_TRACE(view == JobView::kFull ? "full" : "basic");
    auto got = store_->GetJobForReader("bf-1", view);
    ASSERT_TRUE(got.ok()) << got.status();
    auto job = view == JobView::kFull ? store_->GetJob("bf-1")
                                      : store_->GetJobProgress("bf-1");
    ASSERT_TRUE(job.ok()) << job.status();
    EXPECT_EQ(got->state, job->state);
    EXPECT_EQ(got->counts.total, job->counts.total);
    ASSERT_EQ(got->plan.datasets.size(), job->plan.datasets.size());
    for (size_t i = 0; i < got->plan.datasets.size(); ++i) {
      EXPECT_EQ(got->plan.datasets[i].partitions,
                job->plan.datasets[i].partitions);
    }
    EXPECT_EQ(got->plan.datasets[0].partitions.empty(),
              view == JobView::kBasic);
    ASSERT_EQ(got->checks.size(), 1u);
    EXPECT_EQ(got->checks[0].observed, "-90.0%");
    EXPECT_EQ(got->checks[0].partitions_failed, 1);
    ASSERT_EQ(got->consumers.size(), 1u);
    EXPECT_EQ(got->consumers[0].consumer, "cache_b");
    EXPECT_FALSE(got->consumers[0].healthy);
    auto summary = store_->GetJobDiffSummary("bf-1");
    ASSERT_TRUE(summary.ok() && summary->has_value());
    ASSERT_EQ(got->diff.size(), (*summary)->size());
    ASSERT_EQ(got->diff.size(), 2u);
    for (size_t i = 0; i < got->diff.size(); ++i) {
      EXPECT_EQ(got->diff[i].dataset, (**summary)[i].dataset);
      EXPECT_EQ(got->diff[i].partitions, (**summary)[i].partitions);
      EXPECT_EQ(got->diff[i].rows_after, (**summary)[i].rows_after);
      EXPECT_EQ(got->diff[i].changed, (**summary)[i].changed);
    }
    auto other = store_->GetJobForReader("bf-2", view);
    ASSERT_TRUE(other.ok()) << other.status();
    EXPECT_THAT(other->checks, IsEmpty());
    EXPECT_THAT(other->consumers, IsEmpty());
    EXPECT_THAT(other->diff, IsEmpty());
  }

  // A replaced diff is what the next read shows (no summary kept from
  // before).
  ASSERT_TRUE(
      store_->ReplaceJobDiff(OnePartitionDiff("bf-1", T(2), "daily", 7)).ok());
  auto replaced = store_->GetJobForReader("bf-1", JobView::kBasic);
  ASSERT_TRUE(replaced.ok()) << replaced.status();
  ASSERT_EQ(replaced->diff.size(), 1u);
  EXPECT_EQ(replaced->diff[0].dataset, "daily");
  EXPECT_EQ(replaced->diff[0].rows_after, 7);
  EXPECT_EQ(replaced->diff[0].added, 7);
}

TEST_P(StateStoreContractTest, ApproveJobRecordsTheApprovalWithTheMove) {
  ASSERT_TRUE(store_->CreateJob(MakeJob(), T(0)).ok());
  ASSERT_TRUE(store_
                  ->UpdateTasksInState("bf-1", {TaskState::kPending},
                                       TaskState::kStaged, T(1))
                  .ok());
  Approval approval;
  approval.approved_by = "bob";
  approval.reason = "diff reviewed";
  approval.override_validation = true;
  approval.approved_at = T(5) + absl::Nanoseconds(1500);
  // Not held for approval: refused, nothing written.
  const size_t events = store_->ListAuditEvents("bf-1")->size();
  absl::Status early =
      store_->ApproveJob("bf-1", JobState::kAwaitingApproval,
                         JobState::kPublishing, approval, "approved", T(5));
  EXPECT_EQ(early.code(), absl::StatusCode::kFailedPrecondition) << early;
  EXPECT_FALSE(store_->GetJob("bf-1")->approval.has_value());
  EXPECT_EQ(store_->ListAuditEvents("bf-1")->size(), events);
  EXPECT_EQ(store_
                ->ApproveJob("bf-9", JobState::kAwaitingApproval,
                             JobState::kPublishing, approval, "approved", T(5))
                .code(),
            absl::StatusCode::kNotFound);

  ASSERT_NO_FATAL_FAILURE(Reach("bf-1", JobState::kValidationFailed, T(2)));
  ASSERT_TRUE(store_
                  ->ApproveJob("bf-1", JobState::kValidationFailed,
                               JobState::kPublishing, approval,
                               "approved by bob", T(5))
                  .ok());
  auto job = store_->GetJob("bf-1");
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->state, JobState::kPublishing);
  EXPECT_EQ(job->message, "approved by bob");
  ASSERT_TRUE(job->approval.has_value());
  EXPECT_EQ(job->approval->approved_by, "bob");
  EXPECT_EQ(job->approval->reason, "diff reviewed");
  EXPECT_TRUE(job->approval->override_validation);
  EXPECT_EQ(job->approval->from_state, JobState::kValidationFailed);
  EXPECT_EQ(job->approval->approved_at, T(5) + absl::Microseconds(1));
  auto audit = *store_->ListAuditEvents("bf-1");
  EXPECT_EQ(audit.back().from_state, "VALIDATION_FAILED");
  EXPECT_EQ(audit.back().to_state, "PUBLISHING");
  EXPECT_EQ(audit.back().message, "approved by bob");
  EXPECT_EQ(store_->ListJobs({})->at(0).approval->approved_by, "bob");

  // The lineage the job publishes carries the approval.
  LineageRecord rec = MakeLineage("daily_revenue", "2025-01-01", T(6));
  rec.approval = job->approval;
  LineageRecord plain = MakeLineage("daily_revenue", "2025-01-02", T(6));
  ASSERT_TRUE(store_
                  ->RecordPublication("bf-1", {rec, plain},
                                      JobState::kConfirming, "published", T(6))
                  .ok());
  auto lineage = store_->GetLineage("daily_revenue", "2025-01-01");
  ASSERT_EQ(lineage->size(), 1u);
  ASSERT_TRUE((*lineage)[0].approval.has_value());
  EXPECT_EQ((*lineage)[0].approval->approved_by, "bob");
  EXPECT_EQ((*lineage)[0].approval->reason, "diff reviewed");
  EXPECT_TRUE((*lineage)[0].approval->override_validation);
  EXPECT_EQ((*lineage)[0].approval->from_state, JobState::kValidationFailed);
  EXPECT_EQ((*lineage)[0].approval->approved_at, T(5) + absl::Microseconds(1));
  EXPECT_FALSE(
      (*store_->GetLineage("daily_revenue", "2025-01-02"))[0].approval);

  // A second approval of another held job is recorded apart; approving the
  // same job twice is refused.
  ASSERT_TRUE(store_->CreateJob(MakeJob(), T(10)).ok());
  ASSERT_NO_FATAL_FAILURE(Reach("bf-2", JobState::kAwaitingApproval, T(10)));
  approval.override_validation = false;
  ASSERT_TRUE(store_
                  ->ApproveJob("bf-2", JobState::kAwaitingApproval,
                               JobState::kPublishing, approval, "ok", T(11))
                  .ok());
  EXPECT_EQ(store_->GetJob("bf-2")->approval->from_state,
            JobState::kAwaitingApproval);
  ASSERT_NO_FATAL_FAILURE(Reach("bf-2", JobState::kFailed, T(12)));
  ASSERT_NO_FATAL_FAILURE(Reach("bf-2", JobState::kQueued, T(12)));
  ASSERT_NO_FATAL_FAILURE(Reach("bf-2", JobState::kAwaitingApproval, T(12)));
  EXPECT_EQ(store_
                ->ApproveJob("bf-2", JobState::kAwaitingApproval,
                             JobState::kPublishing, approval, "again", T(13))
                .code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(store_->GetJob("bf-2")->state, JobState::kAwaitingApproval);
}

}  // namespace
}  // namespace backfill

namespace backfill {
namespace {

// A job of daily_revenue over `partitions`, planned with `version`.
std::string CreateDailyJob(StateStore* store,
                           const std::vector<std::string>& partitions,
                           const std::string& version, absl::Time at) {
  Job job;
  job.request.dataset = "daily_revenue";
  job.request.reason = "lineage";
  job.request.auto_detect = true;
  DatasetPlan dp;
  dp.dataset = "daily_revenue";
  dp.partitions = partitions;
  dp.transform_version = version;
  job.plan.datasets = {dp};
  auto created = store->CreateJob(job, at);
  EXPECT_TRUE(created.ok()) << created.status();
  return created.ok() ? created->job.id : "";
}

LineageRecord Published(const std::string& partition, const std::string& fp,
                        absl::Time at) {
  LineageRecord rec = MakeLineage("daily_revenue", partition, at);
  rec.inputs = {{"orders", partition, fp, 3}, {"customers", "", "c-" + fp, 5}};
  return rec;
}

void Publish(StateStore* store, const std::string& id,
             std::vector<LineageRecord> lineage, absl::Time at) {
  ASSERT_NO_FATAL_FAILURE(Reach(store, id, JobState::kPublishing, at));
  for (LineageRecord& rec : lineage) rec.job_id = id;
  ASSERT_TRUE(store
                  ->RecordPublication(id, lineage, JobState::kConfirming,
                                      "published", at)
                  .ok());
  ASSERT_TRUE(store
                  ->TransitionJob(id, JobState::kConfirming,
                                  JobState::kSucceeded, "ok", at)
                  .ok());
}

void MarkUnchanged(StateStore* store, const std::string& id,
                   const std::string& partition, const std::string& fp) {
  PartitionTask t;
  t.job_id = id;
  t.dataset = "daily_revenue";
  t.partition = partition;
  t.state = TaskState::kUnchanged;
  t.inputs = {{"orders", partition, fp, 4}};
  ASSERT_TRUE(store->UpdateTask(t).ok());
}

TEST_P(StateStoreContractTest, AutoDetectIsKeptWithTheJob) {
  const std::string id =
      CreateDailyJob(store_.get(), {"2025-01-01"}, "v1", T(0));
  auto job = store_->GetJob(id);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_TRUE(job->request.auto_detect);
  EXPECT_FALSE(store_->GetJob(store_->CreateJob(MakeJob(), T(1))->job.id)
                   ->request.auto_detect);
}

TEST_P(StateStoreContractTest,
       VerifiedVersionsFollowPublishesCutoffsAndRollbacks) {
  const std::string d1 = "2025-01-01", d2 = "2025-01-02", d3 = "2025-01-03";
  auto versions = [&](std::vector<std::string> only = {}) {
    auto v = store_->VerifiedVersions("daily_revenue", only);
    EXPECT_TRUE(v.ok()) << v.status();
    return v.ok() ? *v : std::map<std::string, VerifiedVersion>{};
  };
  EXPECT_THAT(versions(), IsEmpty());

  // bf-1 publishes d1 and d2 with v1.
  const std::string a = CreateDailyJob(store_.get(), {d1, d2}, "v1", T(1));
  ASSERT_NO_FATAL_FAILURE(
      Publish(store_.get(), a,
              {Published(d1, "a1", T(2)), Published(d2, "a2", T(2))}, T(2)));
  auto v = versions();
  ASSERT_EQ(v.size(), 2u);
  EXPECT_EQ(v[d1].job_id, a);
  EXPECT_FALSE(v[d1].unchanged);
  EXPECT_EQ(v[d1].transform_version, "v1");
  ASSERT_EQ(v[d1].inputs.size(), 2u);
  EXPECT_EQ(v[d1].inputs[0].fingerprint, "a1");
  EXPECT_EQ(v[d1].inputs[1].dataset, "customers");
  EXPECT_EQ(v[d1].inputs[1].partition, "");

  // bf-2 (planned with v2) recomputes d1 identical: no lineage, but its
  // UNCHANGED task is the newer verified version once the job's publish
  // committed.
  const std::string b = CreateDailyJob(store_.get(), {d1, d2}, "v2", T(3));
  ASSERT_NO_FATAL_FAILURE(MarkUnchanged(store_.get(), b, d1, "b1"));
  ASSERT_NO_FATAL_FAILURE(Reach(b, JobState::kAwaitingApproval, T(4)));
  EXPECT_EQ(versions()[d1].job_id, a) << "not published yet";
  ASSERT_NO_FATAL_FAILURE(Reach(b, JobState::kConfirming, T(4)));
  EXPECT_EQ(versions()[d1].job_id, b) << "published, confirming";
  ASSERT_NO_FATAL_FAILURE(Reach(b, JobState::kSucceeded, T(4)));
  v = versions();
  EXPECT_EQ(v[d1].job_id, b);
  EXPECT_TRUE(v[d1].unchanged);
  EXPECT_EQ(v[d1].transform_version, "v2");
  ASSERT_EQ(v[d1].inputs.size(), 1u);
  EXPECT_EQ(v[d1].inputs[0].fingerprint, "b1");
  EXPECT_EQ(v[d2].job_id, a);

  // An UNCHANGED d2 in a job that never published vouches for nothing.
  for (JobState end :
       {JobState::kFailed, JobState::kValidationFailed, JobState::kCancelled}) {
    SCOPED_TRACE(JobStateName(end));
    const std::string c = CreateDailyJob(store_.get(), {d2}, "v3", T(5));
    ASSERT_NO_FATAL_FAILURE(MarkUnchanged(store_.get(), c, d2, "c2"));
    ASSERT_NO_FATAL_FAILURE(Reach(c, end, T(5)));
    EXPECT_EQ(versions()[d2].job_id, a);
  }

  // Only the partitions asked for.
  EXPECT_THAT(
      versions({d2, d3}),
      ElementsAre(Pair(d2, ::testing::Field(&VerifiedVersion::job_id, a))));

  // bf-4 publishes d1 and d3, then is rolled back: d3 was empty before, so
  // it has no version; d1 holds bf-1's rows again, and since the rollback
  // was recorded after bf-2 ended, bf-2's UNCHANGED verification is void:
  // bf-1's publish record is current again.
  const std::string d = CreateDailyJob(store_.get(), {d1, d3}, "v4", T(6));
  ASSERT_NO_FATAL_FAILURE(
      Publish(store_.get(), d,
              {Published(d1, "d1", T(7)), Published(d3, "d3", T(7))}, T(7)));
  v = versions();
  EXPECT_EQ(v[d1].job_id, d);
  EXPECT_EQ(v[d3].job_id, d);
  RollbackInfo info;
  info.requested_by = "bob";
  info.reason = "bad";
  LineageRecord r1 = MakeLineage("daily_revenue", d1, T(8));
  r1.job_id = d;
  r1.transform_version = "v1";
  LineageRecord r3 = MakeLineage("daily_revenue", d3, T(8));
  r3.job_id = d;
  r3.transform_version = "";
  ASSERT_TRUE(
      store_->RecordRollback(d, info, {r1, r3}, "rolled back", "", T(8)).ok());
  v = versions();
  EXPECT_EQ(v.count(d3), 0u);
  EXPECT_EQ(v[d1].job_id, a);
  EXPECT_FALSE(v[d1].unchanged);
  EXPECT_EQ(v[d1].inputs[0].fingerprint, "a1");
  EXPECT_EQ(v[d2].job_id, a);
}

// A consumer that still serves old numbers says nothing of the warehouse:
// a job that ended DOWNSTREAM_UNHEALTHY published, and what it found
// unchanged is as current as what it republished. (--auto once planned
// every such partition again after a job whose cache was down.)
TEST_P(StateStoreContractTest, AJobWithAStaleConsumerVouchesForWhatItFound) {
  const std::string d1 = "2025-01-01", d2 = "2025-01-02";
  const std::string a = CreateDailyJob(store_.get(), {d1, d2}, "v1", T(1));
  ASSERT_NO_FATAL_FAILURE(
      Publish(store_.get(), a,
              {Published(d1, "a1", T(2)), Published(d2, "a2", T(2))}, T(2)));
  const std::string b = CreateDailyJob(store_.get(), {d1, d2}, "v2", T(3));
  ASSERT_NO_FATAL_FAILURE(MarkUnchanged(store_.get(), b, d2, "b2"));
  ASSERT_NO_FATAL_FAILURE(Reach(b, JobState::kPublishing, T(4)));
  LineageRecord b1 = Published(d1, "b1", T(4));
  b1.job_id = b;
  ASSERT_TRUE(
      store_
          ->RecordPublication(b, {b1}, JobState::kConfirming, "published", T(4))
          .ok());
  ASSERT_TRUE(store_
                  ->TransitionJob(b, JobState::kConfirming,
                                  JobState::kDownstreamUnhealthy, "stale", T(5))
                  .ok());
  auto v = store_->VerifiedVersions("daily_revenue", {});
  ASSERT_TRUE(v.ok()) << v.status();
  ASSERT_EQ(v->size(), 2u);
  EXPECT_EQ(v->at(d1).job_id, b);
  EXPECT_FALSE(v->at(d1).unchanged);
  EXPECT_EQ(v->at(d2).job_id, b);
  EXPECT_TRUE(v->at(d2).unchanged);
  EXPECT_EQ(v->at(d2).transform_version, "v2");
  EXPECT_EQ(v->at(d2).inputs[0].fingerprint, "b2");
}

TEST_P(StateStoreContractTest, AKeyedJobIsNoVersionOfItsTargetsPartitions) {
  const std::string d1 = "2025-01-01", d2 = "2025-01-02";
  const std::string a = CreateDailyJob(store_.get(), {d1, d2}, "v1", T(1));
  ASSERT_NO_FATAL_FAILURE(
      Publish(store_.get(), a,
              {Published(d1, "a1", T(2)), Published(d2, "a2", T(2))}, T(2)));
  // bf-2 recomputes some customers of d1 (publishing it) and of d2
  // (identical: UNCHANGED), and its dependent totals by partition.
  Job job;
  job.request.dataset = "daily_revenue";
  job.request.reason = "two customers";
  job.request.keys = {"c1", "c2"};
  DatasetPlan dp;
  dp.dataset = "daily_revenue";
  dp.partitions = {d1, d2};
  dp.transform_version = "v2";
  dp.keys = job.request.keys;
  DatasetPlan totals;
  totals.dataset = "totals";
  totals.partitions = {d1};
  totals.transform_version = "t2";
  job.plan.datasets = {dp, totals};
  auto created = store_->CreateJob(job, T(3));
  ASSERT_TRUE(created.ok()) << created.status();
  const std::string b = created->job.id;
  ASSERT_NO_FATAL_FAILURE(MarkUnchanged(store_.get(), b, d2, "b2"));
  LineageRecord total = MakeLineage("totals", d1, T(4));
  total.transform_version = "t2";
  ASSERT_NO_FATAL_FAILURE(
      Publish(store_.get(), b, {Published(d1, "b1", T(4)), total}, T(4)));

  // The other customers' rows of d1 and d2 are still bf-1's computation.
  auto v = store_->VerifiedVersions("daily_revenue", {});
  ASSERT_TRUE(v.ok()) << v.status();
  ASSERT_EQ(v->size(), 2u);
  EXPECT_EQ(v->at(d1).job_id, a);
  EXPECT_EQ(v->at(d1).transform_version, "v1");
  EXPECT_EQ(v->at(d1).inputs[0].fingerprint, "a1");
  EXPECT_EQ(v->at(d2).job_id, a);
  // The dependent was recomputed whole: bf-2 vouches for it.
  auto t = store_->VerifiedVersions("totals", {});
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->size(), 1u);
  EXPECT_EQ(t->at(d1).job_id, b);
  EXPECT_EQ(t->at(d1).transform_version, "t2");
}

}  // namespace
}  // namespace backfill
