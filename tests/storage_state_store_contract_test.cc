// The StateStore contract suite (tests/testing/state_store_contract.h),
// instantiated for every store: SqliteStateStore on a temporary file,
// PgStateStore on a database of its own per test, and InMemoryStateStore,
// the in-memory store the core's tests use. The cases of jobs (creation,
// reads, listings, identity) are here; the others are in
// storage_state_store_contract_*_test.cc. Tests of what only the SQLite
// file has (migrations, integrity check, WAL, reopening) are in
// storage_state_store_test.cc.

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/base/error_details.h"
#include "core/model/job_state_machine.h"
#include "core/ports/state_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/postgres/pg_connection.h"
#include "storage/postgres/state/pg_state_store.h"
#include "storage/sqlite/state/sqlite_state_store.h"
#include "tests/testing/memory_state_store.h"
#include "tests/testing/postgres_test_server.h"
#include "tests/testing/state_store_contract.h"

namespace backfill {
namespace storage_state_store_contract_test {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::MakeJob;
using testing::PostgresTestServer;
using testing::StateStoreAgreementTest;
using testing::StateStoreContractTest;
using testing::T;

// The stores the suite proves: one factory and one instantiation each.

testing::StateStoreFactory SqliteStore() {
  return {"Sqlite",
          [](const std::string& dir)
              -> absl::StatusOr<std::unique_ptr<StateStore>> {
            auto store = SqliteStateStore::Open(dir + "/state.db");
            if (!store.ok()) return store.status();
            return std::unique_ptr<StateStore>(*std::move(store));
          }};
}

// PgStateStore on a database of its own per store (about 0.1 s each), on
// the ctest run's shared server (or one this process starts, stopped at
// exit). A store is closed before the next is opened (the fixture's
// TearDown), so the previous store's database is dropped then; the last
// one at exit.
class PgStateDatabases {
 public:
  ~PgStateDatabases() { (void)DropLast(); }

  absl::StatusOr<std::string> Fresh() {
    if (server_ == nullptr) {
      auto server = PostgresTestServer::StartOrShare();
      if (!server.ok()) return server.status();
      server_ = *std::move(server);
    }
    if (absl::Status s = DropLast(); !s.ok()) return s;
    // Names no other test process uses: the shared server's database of
    // this process, numbered.
    auto database = server_->CreateDatabase(absl::StrCat("pgstate_", ++next_));
    if (!database.ok()) return database.status();
    last_ = *database;
    return server_->Dsn(last_);
  }

 private:
  absl::Status DropLast() {
    if (last_.empty() || server_ == nullptr) return absl::OkStatus();
    absl::Status dropped = server_->DropDatabase(last_);
    last_.clear();
    return dropped;
  }

  std::unique_ptr<PostgresTestServer> server_;
  std::string last_;
  int next_ = 0;
};

testing::StateStoreFactory PostgresStore() {
  return {
      "Postgres",
      [](const std::string&) -> absl::StatusOr<std::unique_ptr<StateStore>> {
        static PgStateDatabases databases;
        absl::StatusOr<std::string> dsn = databases.Fresh();
        if (!dsn.ok()) return dsn.status();
        auto store = PgStateStore::Open(*dsn);
        if (!store.ok()) return store.status();
        return std::unique_ptr<StateStore>(*std::move(store));
      }};
}

testing::StateStoreFactory InMemoryStore() {
  return {
      "InMemory",
      [](const std::string&) -> absl::StatusOr<std::unique_ptr<StateStore>> {
        return std::make_unique<testing::InMemoryStateStore>();
      }};
}

INSTANTIATE_TEST_SUITE_P(Sqlite, StateStoreContractTest,
                         ::testing::Values(SqliteStore()),
                         testing::StateStoreParamName);
INSTANTIATE_TEST_SUITE_P(Postgres, StateStoreContractTest,
                         ::testing::Values(PostgresStore()),
                         testing::StateStoreParamName);
INSTANTIATE_TEST_SUITE_P(InMemory, StateStoreContractTest,
                         ::testing::Values(InMemoryStore()),
                         testing::StateStoreParamName);
// The random history compared with the in-memory store, for the durable
// stores.
INSTANTIATE_TEST_SUITE_P(Sqlite, StateStoreAgreementTest,
                         ::testing::Values(SqliteStore()),
                         testing::StateStoreParamName);
INSTANTIATE_TEST_SUITE_P(Postgres, StateStoreAgreementTest,
                         ::testing::Values(PostgresStore()),
                         testing::StateStoreParamName);

// ---- jobs: creation, reads, listings, identity ------------------------------

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

TEST_P(StateStoreContractTest, AnOverrideAndAnApprovalHoldAreKept) {
  Job with = MakeJob();
  with.request.override_frozen = true;
  with.approval_hold = "replay policy of daily_revenue: approval: required";
  ASSERT_TRUE(store_->CreateJob(with, T(0)).ok());
  ASSERT_TRUE(store_->CreateJob(MakeJob(), T(1)).ok());
  for (auto read : {+[](StateStore* s) { return s->GetJob("bf-1"); },
                    +[](StateStore* s) { return s->GetJobProgress("bf-1"); },
                    +[](StateStore* s) {
                      return s->GetJobForReader("bf-1", JobView::kBasic);
                    }}) {
    auto job = read(store_.get());
    ASSERT_TRUE(job.ok()) << job.status();
    EXPECT_TRUE(job->request.override_frozen);
    EXPECT_EQ(job->approval_hold,
              "replay policy of daily_revenue: approval: required");
  }
  auto plain = store_->GetJob("bf-2");
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_FALSE(plain->request.override_frozen);
  EXPECT_EQ(plain->approval_hold, "");
  // A move keeps them (and the record's checksum holds).
  ASSERT_TRUE(store_
                  ->TransitionJob("bf-1", JobState::kQueued, JobState::kRunning,
                                  "started", T(2))
                  .ok());
  auto moved = store_->GetJob("bf-1");
  ASSERT_TRUE(moved.ok()) << moved.status();
  EXPECT_TRUE(moved->request.override_frozen);
  EXPECT_FALSE(moved->approval_hold.empty());
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

TEST_P(StateStoreContractTest, AnUnknownJobIsNotFoundWithItsReason) {
  ASSERT_TRUE(store_->CreateJob(MakeJob(), T(0)).ok());
  const std::string id = "bf-404";
  TaskQuery page;
  page.job_id = id;
  JobDiff diff;
  diff.job_id = id;
  const std::vector<std::pair<std::string, absl::Status>> calls = {
      {"GetJob", store_->GetJob(id).status()},
      {"GetJobProgress", store_->GetJobProgress(id).status()},
      {"GetJobForReader",
       store_->GetJobForReader(id, JobView::kBasic).status()},
      {"ListTasks", store_->ListTasks(id).status()},
      {"ListTaskPage", store_->ListTaskPage(page).status()},
      {"TransitionJob",
       store_->TransitionJob(id, std::nullopt, JobState::kRunning, "", T(1))},
      {"RetryJob",
       store_->RetryJob(id, JobState::kFailed, JobState::kQueued, "", T(1))
           .status()},
      {"SetJobMessage",
       store_->SetJobMessage(id, JobState::kQueued, "waits", T(1))},
      {"ApproveJob",
       store_->ApproveJob(id, JobState::kAwaitingApproval,
                          JobState::kPublishing, Approval(), "", T(1))},
      {"RecordPublication",
       store_->RecordPublication(id, {}, JobState::kConfirming, "", T(1))},
      {"RecordRollback",
       store_->RecordRollback(id, RollbackInfo(), {}, "", "", T(1))},
      {"ReplaceJobDiff", store_->ReplaceJobDiff(diff)},
      {"GetJobDiff", store_->GetJobDiff(id, "", false).status()},
      {"GetJobDiffSummary", store_->GetJobDiffSummary(id).status()},
      {"ReplaceCheckResults", store_->ReplaceCheckResults(id, {})},
      {"ListCheckResults", store_->ListCheckResults(id).status()},
      {"ReplaceConsumerConfirmations",
       store_->ReplaceConsumerConfirmations(id, {})},
      {"ListConsumerConfirmations",
       store_->ListConsumerConfirmations(id).status()},
      {"GetLineageOverlapping", store_->GetLineageOverlapping(id).status()},
  };
  for (const auto& [call, status] : calls) {
    SCOPED_TRACE(call);
    EXPECT_EQ(status.code(), absl::StatusCode::kNotFound) << status;
    EXPECT_THAT(status.message(), HasSubstr(id));
    const ErrorDetails details = DetailsOf(status);
    EXPECT_EQ(details.reason, "BACKFILL_NOT_FOUND");
    EXPECT_EQ(details.metadata,
              (std::map<std::string, std::string>{{"backfill_id", id}}));
  }
  // Nothing was written: the known job is as it was.
  EXPECT_EQ(store_->Info()->last_job_number, 1);
  EXPECT_EQ(store_->ListAuditEvents("bf-1")->size(), 1u);
  EXPECT_THAT(*store_->ListAuditEvents(id), IsEmpty());
}

TEST_P(StateStoreContractTest, EntityKeysAreKeptInOrderOnTheTargetOnly) {
  Job job = MakeJob("keyed");
  job.request.keys = {"c'1", "c2;--", "\xc3\xa9t\xc3\xa9"};
  job.plan.datasets[0].keys = job.request.keys;
  job.plan.datasets[1].keys = job.request.keys;  // not the target: dropped
  auto created = store_->CreateJob(job, T(0));
  ASSERT_TRUE(created.ok()) << created.status();
  ASSERT_TRUE(store_->CreateJob(MakeJob("plain"), T(1)).ok());
  for (const auto& read :
       {store_->GetJob("bf-1"), store_->GetJobProgress("bf-1"),
        absl::StatusOr<Job>(created->job)}) {
    ASSERT_TRUE(read.ok()) << read.status();
    EXPECT_THAT(read->request.keys,
                ElementsAre("c'1", "c2;--", "\xc3\xa9t\xc3\xa9"));
    ASSERT_EQ(read->plan.datasets.size(), 2u);
    EXPECT_EQ(read->plan.datasets[0].keys, read->request.keys);
    EXPECT_THAT(read->plan.datasets[1].keys, IsEmpty());
  }
  auto plain = store_->GetJob("bf-2");
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_THAT(plain->request.keys, IsEmpty());
  EXPECT_THAT(plain->plan.datasets[0].keys, IsEmpty());
  auto listed = store_->ListJobs({});
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), 2u);
  EXPECT_EQ((*listed)[1].request.keys.size(), 3u);
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
  const std::string other_dir = testing::MakeStateStoreDir();
  auto other = GetParam().open(other_dir);
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

}  // namespace
}  // namespace storage_state_store_contract_test
}  // namespace backfill
