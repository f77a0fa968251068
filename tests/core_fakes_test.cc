// The test fakes themselves: fault injection of InMemoryStateStore (its
// StateStore semantics are checked by the StateStore contract suite,
// tests/testing/state_store_contract.h) and the behaviour of FakeEngine.

#include <atomic>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/fake_engine.h"
#include "tests/testing/memory_state_store.h"

namespace backfill {
namespace core_fakes_test {
namespace {

using ::testing::ElementsAre;
using testing::FakeEngine;
using ::testing::HasSubstr;
using testing::InMemoryStateStore;
using ::testing::IsEmpty;
using ::testing::Pair;

absl::Time T(int seconds) {
  return absl::FromUnixSeconds(1700000000 + seconds);
}

Job MakeJob() {
  Job job;
  job.request.dataset = "orders";
  job.plan.datasets = {{"orders", {"2025-01-01", "2025-01-02"}, "", "", {}}};
  return job;
}

// ---- InMemoryStateStore ----------------------------------------------------

TEST(InMemoryStateStoreTest, AGivenIdentityIsKept) {
  InMemoryStateStore store("00000000000000000000000000000001",
                           absl::FromUnixMillis(1700000000999));
  auto info = store.Info();
  EXPECT_EQ(info->store_id, "00000000000000000000000000000001");
  EXPECT_EQ(info->created_at, absl::FromUnixSeconds(1700000000));
  InMemoryStateStore a, b;
  EXPECT_NE(a.Info()->store_id, b.Info()->store_id);
}

TEST(InMemoryStateStoreTest, FailWritesFailsEveryWriteUntilCleared) {
  InMemoryStateStore store;
  ASSERT_TRUE(store.CreateJob(MakeJob(), T(0)).ok());
  store.FailWrites(absl::ResourceExhaustedError("disk full"));
  EXPECT_EQ(store.CreateJob(MakeJob(), T(1)).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(store
                .TransitionJob("bf-1", JobState::kQueued, JobState::kRunning,
                               "", T(1))
                .code(),
            absl::StatusCode::kResourceExhausted);
  PartitionTask t = (*store.ListTasks("bf-1"))[0];
  t.state = TaskState::kStaged;
  EXPECT_EQ(store.UpdateTask(t).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(store.ReserveJobNumbers(9).code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(store.SetJobMessage("bf-1", JobState::kQueued, "m", T(1)).code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(store
                .UpdateTasksInState("bf-1", {TaskState::kPending},
                                    TaskState::kCancelled, T(1))
                .status()
                .code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(
      store.RetryJob("bf-1", JobState::kFailed, JobState::kQueued, "", T(1))
          .status()
          .code(),
      absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(store.RecordPublication("bf-1", {}, JobState::kConfirming, "", T(1))
                .code(),
            absl::StatusCode::kResourceExhausted);
  // Nothing was written; reads still work.
  auto job = store.GetJob("bf-1");
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->state, JobState::kQueued);
  EXPECT_EQ(job->counts.pending, 2);
  EXPECT_EQ(job->message, "");
  EXPECT_EQ(store.Info()->last_job_number, 1);
  EXPECT_EQ(store.ListAuditEvents("bf-1")->size(), 1u);
  EXPECT_EQ(store.write_calls(), 9);
  EXPECT_EQ(store.failed_writes(), 8);

  store.FailWrites(absl::OkStatus());
  EXPECT_TRUE(store.UpdateTask(t).ok());
  EXPECT_EQ(store.GetJob("bf-1")->counts.staged, 1);
}

TEST(InMemoryStateStoreTest, FailNextWritesFailsACountedNumber) {
  InMemoryStateStore store;
  store.FailNextWrites(2, absl::UnavailableError("busy"));
  EXPECT_EQ(store.CreateJob(MakeJob(), T(0)).status().code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(store.ReserveJobNumbers(3).code(), absl::StatusCode::kUnavailable);
  auto created = store.CreateJob(MakeJob(), T(0));
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ(created->job.id, "bf-1");  // the failed create used no number
  EXPECT_EQ(store.failed_writes(), 2);

  // Counted failures come before a standing one.
  store.FailWrites(absl::DataLossError("io"));
  store.FailNextWrites(1, absl::UnavailableError("busy"));
  EXPECT_EQ(store.ReserveJobNumbers(3).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(store.ReserveJobNumbers(3).code(), absl::StatusCode::kDataLoss);
  store.FailWrites(absl::OkStatus());
  EXPECT_TRUE(store.ReserveJobNumbers(3).ok());
  EXPECT_EQ(store.Info()->last_job_number, 3);
}

TEST(InMemoryStateStoreTest, TheHookSeesEveryWriteAndMayFailIt) {
  InMemoryStateStore store;
  std::vector<std::string> seen;
  store.SetWriteHook([&](const std::string& method) {
    seen.push_back(method);
    return method == "UpdateTask" ? absl::InternalError("no checkpoints")
                                  : absl::OkStatus();
  });
  ASSERT_TRUE(store.CreateJob(MakeJob(), T(0)).ok());
  ASSERT_TRUE(store.GetJob("bf-1").ok());  // reads are not writes
  ASSERT_TRUE(store.ListTasks("bf-1").ok());
  ASSERT_TRUE(store
                  .TransitionJob("bf-1", JobState::kQueued, JobState::kRunning,
                                 "", T(1))
                  .ok());
  PartitionTask t = (*store.ListTasks("bf-1"))[0];
  t.state = TaskState::kStaged;
  EXPECT_EQ(store.UpdateTask(t).code(), absl::StatusCode::kInternal);
  EXPECT_EQ(store.GetJob("bf-1")->counts.staged, 0);
  EXPECT_THAT(seen, ElementsAre("CreateJob", "TransitionJob", "UpdateTask"));
  EXPECT_EQ(store.write_calls("UpdateTask"), 1);
  EXPECT_EQ(store.write_calls("CreateJob"), 1);
  EXPECT_EQ(store.write_calls("GetJob"), 0);
  EXPECT_EQ(store.failed_writes(), 1);
  store.SetWriteHook(nullptr);
  EXPECT_TRUE(store.UpdateTask(t).ok());
  EXPECT_EQ(seen.size(), 3u);
}

TEST(InMemoryStateStoreTest, AHookMayHoldAWriteBackWhileOthersRead) {
  InMemoryStateStore store;
  ASSERT_TRUE(store.CreateJob(MakeJob(), T(0)).ok());
  absl::Notification entered, release;
  store.SetWriteHook([&](const std::string& method) {
    if (method == "TransitionJob") {
      entered.Notify();
      release.WaitForNotification();
    }
    return absl::OkStatus();
  });
  std::thread writer([&] {
    EXPECT_TRUE(store
                    .TransitionJob("bf-1", JobState::kQueued,
                                   JobState::kRunning, "go", T(1))
                    .ok());
  });
  entered.WaitForNotification();
  // Held in the hook: not written yet, and the store still answers.
  EXPECT_EQ(store.GetJob("bf-1")->state, JobState::kQueued);
  EXPECT_TRUE(store.CreateJob(MakeJob(), T(2)).ok());
  release.Notify();
  writer.join();
  EXPECT_EQ(store.GetJob("bf-1")->state, JobState::kRunning);
}

// ---- FakeEngine
// --------------------------------------------------------------

class FakeEngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    orders_.name = "orders";
    orders_.table = "raw_orders";
    orders_.partition = PartitionSpec{"order_date", Grain::kDay, {}};
    customers_.name = "customers";
    customers_.table = "dim_customers";
    revenue_.name = "daily_revenue";
    revenue_.kind = DatasetKind::kDerived;
    revenue_.table = "daily_revenue";
    revenue_.partition = PartitionSpec{"ds", Grain::kDay, {}};
    revenue_.transform_version = "v1";
    revenue_.upstream = {{"orders", Mapping::kIdentity},
                         {"customers", Mapping::kAll}};
    engine_.SetPublishedRows("customers", "", 3);
    engine_.SetPublishedRows("orders", "2025-01-01", 10);
    engine_.SetPublishedRows("orders", "2025-01-02", 20);
  }

  JobLayout Layout(const std::string& job_id,
                   std::vector<std::string> partitions = {"2025-01-01",
                                                          "2025-01-02"}) {
    JobLayout layout;
    layout.job_id = job_id;
    layout.items = {{&revenue_, std::move(partitions)}};
    layout.pinned = {&customers_};
    return layout;
  }
  std::vector<InputRef> InputsOf(const std::string& partition) {
    return {{&orders_, partition}, {&customers_, std::nullopt}};
  }

  DatasetSpec orders_, customers_, revenue_;
  FakeEngine engine_;
};

TEST_F(FakeEngineTest, StagesRowsForPreparedPartitionsOnly) {
  auto unprepared =
      engine_.StagePartition("bf-1", revenue_, "2025-01-01", InputsOf(""));
  EXPECT_EQ(unprepared.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(unprepared.status().message(), HasSubstr("not prepared"));

  ASSERT_TRUE(engine_.PrepareJob(Layout("bf-1")).ok());
  EXPECT_TRUE(engine_.IsPrepared("bf-1"));
  auto staged = engine_.StagePartition("bf-1", revenue_, "2025-01-01",
                                       InputsOf("2025-01-01"));
  ASSERT_TRUE(staged.ok()) << staged.status();
  EXPECT_EQ(staged->rows_written, 1);  // the default
  EXPECT_EQ(engine_.StagedRows("bf-1", "daily_revenue", "2025-01-01"), 1);
  EXPECT_EQ(engine_.StagedRows("bf-1", "daily_revenue", "2025-01-02"),
            std::nullopt);
  ASSERT_EQ(staged->inputs.size(), 2u);
  EXPECT_EQ(staged->inputs[0].dataset, "orders");
  EXPECT_EQ(staged->inputs[0].partition, "2025-01-01");
  EXPECT_EQ(staged->inputs[0].rows, 10);
  EXPECT_EQ(staged->inputs[1].dataset, "customers");
  EXPECT_EQ(staged->inputs[1].partition, "");
  EXPECT_EQ(staged->inputs[1].rows, 3);

  EXPECT_EQ(engine_.StagePartition("bf-1", revenue_, "2025-01-09", {})
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      engine_.StagePartition("bf-1", orders_, "2025-01-01", {}).status().code(),
      absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(engine_
                .StagePartition("bf-1", revenue_, "2025-01-01",
                                {{nullptr, std::nullopt}})
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(FakeEngineTest, PrepareJobChecksTheLayout) {
  EXPECT_EQ(engine_.PrepareJob(Layout("")).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(engine_.PrepareJob(Layout("bf-1", {"2025-02-30"})).code(),
            absl::StatusCode::kInvalidArgument);
  JobLayout null_item = Layout("bf-1");
  null_item.items.push_back({nullptr, {}});
  EXPECT_EQ(engine_.PrepareJob(null_item).code(),
            absl::StatusCode::kInvalidArgument);
  // A pinned input must exist.
  DatasetSpec missing = customers_;
  missing.name = "regions";
  missing.table = "dim_regions";
  JobLayout layout = Layout("bf-1");
  layout.pinned.push_back(&missing);
  absl::Status s = engine_.PrepareJob(layout);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("cannot pin regions"));
  EXPECT_FALSE(engine_.IsPrepared("bf-1"));
  EXPECT_THAT(*engine_.ListJobsWithStaging(), IsEmpty());
}

TEST_F(FakeEngineTest, RowsAreConfigurableAndFingerprintsDeterministic) {
  engine_.SetRowsFor([](const std::string& dataset, const std::string& p) {
    return p == "2025-01-02" ? int64_t{5} : int64_t{2};
  });
  ASSERT_TRUE(engine_.PrepareJob(Layout("bf-1")).ok());
  ASSERT_TRUE(engine_.PrepareJob(Layout("bf-2")).ok());
  auto a = engine_.StagePartition("bf-1", revenue_, "2025-01-01", {});
  auto b = engine_.StagePartition("bf-1", revenue_, "2025-01-02", {});
  auto again = engine_.StagePartition("bf-2", revenue_, "2025-01-01", {});
  ASSERT_TRUE(a.ok() && b.ok() && again.ok());
  EXPECT_EQ(a->rows_written, 2);
  EXPECT_EQ(b->rows_written, 5);
  EXPECT_EQ(a->output_fingerprint, again->output_fingerprint);
  EXPECT_NE(a->output_fingerprint, b->output_fingerprint);
  EXPECT_THAT(a->output_fingerprint, ::testing::EndsWith(":2"));
  // Another transform version computes other rows.
  DatasetSpec v2 = revenue_;
  v2.transform_version = "v2";
  auto other = engine_.StagePartition("bf-2", v2, "2025-01-01", {});
  ASSERT_TRUE(other.ok());
  EXPECT_NE(other->output_fingerprint, a->output_fingerprint);
}

TEST_F(FakeEngineTest, InputsOfTheJobAreReadFromItsStagingAndPinsStay) {
  // orders recomputed by the job too, customers pinned.
  JobLayout layout;
  layout.job_id = "bf-1";
  layout.items = {{&orders_, {"2025-01-01"}}, {&revenue_, {"2025-01-01"}}};
  layout.pinned = {&customers_};
  engine_.SetRowsFor([](const std::string& dataset, const std::string&) {
    return dataset == "orders" ? int64_t{4} : int64_t{1};
  });
  ASSERT_TRUE(engine_.PrepareJob(layout).ok());
  engine_.SetPublishedRows("customers", "", 100);  // after the snapshot
  auto before = engine_.StagePartition("bf-1", revenue_, "2025-01-01",
                                       InputsOf("2025-01-01"));
  ASSERT_TRUE(before.ok());
  EXPECT_EQ(before->inputs[0].rows, 0);  // not staged yet
  EXPECT_EQ(before->inputs[1].rows, 3);  // the snapshot
  ASSERT_TRUE(engine_.StagePartition("bf-1", orders_, "2025-01-01", {}).ok());
  auto after = engine_.StagePartition("bf-1", revenue_, "2025-01-01",
                                      InputsOf("2025-01-01"));
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->inputs[0].rows, 4);
  EXPECT_NE(after->inputs[0].fingerprint, before->inputs[0].fingerprint);
  // A whole-table read of orders: staged rows plus published rows outside
  // the job's partitions.
  auto whole = engine_.StagePartition("bf-1", revenue_, "2025-01-01",
                                      {{&orders_, std::nullopt}});
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ(whole->inputs[0].rows, 4 + 20);
  // The pin survives a restart and a second PrepareJob.
  engine_.Restart();
  ASSERT_TRUE(engine_.PrepareJob(layout).ok());
  auto resumed = engine_.StagePartition("bf-1", revenue_, "2025-01-01",
                                        InputsOf("2025-01-01"));
  ASSERT_TRUE(resumed.ok());
  EXPECT_EQ(resumed->inputs[1].rows, 3);
}

TEST_F(FakeEngineTest, ValidateReportsWhatIsStaged) {
  EXPECT_EQ(engine_.ValidateStaged("bf-1", revenue_).status().code(),
            absl::StatusCode::kFailedPrecondition);
  engine_.SetRowsFor([](const std::string&, const std::string& p) {
    return p == "2025-01-01" ? int64_t{3} : int64_t{0};
  });
  ASSERT_TRUE(engine_.PrepareJob(Layout("bf-1")).ok());
  auto empty = engine_.ValidateStaged("bf-1", revenue_);
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ(empty->rows, 0);
  EXPECT_THAT(empty->rows_by_partition, IsEmpty());
  ASSERT_TRUE(engine_.StagePartition("bf-1", revenue_, "2025-01-01", {}).ok());
  ASSERT_TRUE(engine_.StagePartition("bf-1", revenue_, "2025-01-02", {}).ok());
  auto report = engine_.ValidateStaged("bf-1", revenue_);
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->rows, 3);
  EXPECT_THAT(report->rows_by_partition, ElementsAre(Pair("2025-01-01", 3)));
  EXPECT_THAT(report->failures, IsEmpty());

  // Lost and stray rows, and failures, as a test sets them.
  engine_.SetStagedRows("bf-1", "daily_revenue", "2025-01-01", 1);
  engine_.SetStagedRows("bf-1", "daily_revenue", "1999-01-01", 2);
  engine_.SetValidationFailures("daily_revenue", {"key (x) appears twice"});
  report = engine_.ValidateStaged("bf-1", revenue_);
  EXPECT_EQ(report->rows, 3);
  EXPECT_THAT(report->rows_by_partition,
              ElementsAre(Pair("1999-01-01", 2), Pair("2025-01-01", 1)));
  EXPECT_THAT(report->failures, ElementsAre("key (x) appears twice"));

  // An unpartitioned dataset has one partition, "".
  JobLayout dims;
  dims.job_id = "bf-2";
  dims.items = {{&customers_, {""}}};
  ASSERT_TRUE(engine_.PrepareJob(dims).ok());
  auto none = engine_.ValidateStaged("bf-2", customers_);
  ASSERT_TRUE(none.ok());
  EXPECT_THAT(none->rows_by_partition, ElementsAre(Pair("", 0)));
}

TEST_F(FakeEngineTest, PublishReplacesTheJobsPartitionsAndRecordsAMarker) {
  ASSERT_TRUE(engine_.Claim("store-a", false).ok());
  engine_.SetPublishedRows("daily_revenue", "2025-01-01", 7);
  engine_.SetPublishedRows("daily_revenue", "2025-01-03", 9);
  engine_.SetRowsFor([](const std::string&, const std::string& p) {
    return p == "2025-01-01" ? int64_t{2} : int64_t{0};
  });
  ASSERT_TRUE(engine_.PrepareJob(Layout("bf-1")).ok());
  ASSERT_TRUE(engine_.StagePartition("bf-1", revenue_, "2025-01-01", {}).ok());
  ASSERT_TRUE(engine_.StagePartition("bf-1", revenue_, "2025-01-02", {}).ok());
  EXPECT_FALSE(*engine_.IsPublished("bf-1"));
  ASSERT_TRUE(engine_.Publish(Layout("bf-1")).ok());
  EXPECT_TRUE(*engine_.IsPublished("bf-1"));
  EXPECT_THAT(*engine_.CountRowsByPartition(revenue_),
              ElementsAre(Pair("2025-01-01", 2), Pair("2025-01-03", 9)));
  EXPECT_THAT(engine_.Inspect()->publications,
              ElementsAre(Pair("bf-1", "store-a")));

  // Once published, a repeat is a no-op even if staging changed.
  engine_.SetStagedRows("bf-1", "daily_revenue", "2025-01-01", 50);
  ASSERT_TRUE(engine_.Publish(Layout("bf-1")).ok());
  EXPECT_EQ(engine_.PublishedRows("daily_revenue", "2025-01-01"), 2);

  // Staging kept until dropped; then nothing is left of the job but its
  // publication.
  EXPECT_THAT(*engine_.ListJobsWithStaging(), ElementsAre("bf-1"));
  ASSERT_TRUE(engine_.DropStaging("bf-1").ok());
  EXPECT_THAT(*engine_.ListJobsWithStaging(), IsEmpty());
  EXPECT_FALSE(engine_.IsPrepared("bf-1"));
  EXPECT_TRUE(*engine_.IsPublished("bf-1"));
  // An unpartitioned table is replaced whole; a missing table has no rows.
  EXPECT_THAT(*engine_.CountRowsByPartition(customers_),
              ElementsAre(Pair("", 3)));
  DatasetSpec fresh = customers_;
  fresh.name = "fresh";
  EXPECT_THAT(*engine_.CountRowsByPartition(fresh), ElementsAre(Pair("", 0)));
  EXPECT_THAT(*engine_.CountRowsByPartition(orders_),
              ElementsAre(Pair("2025-01-01", 10), Pair("2025-01-02", 20)));
}

TEST_F(FakeEngineTest, PublishIsAllOrNothing) {
  ASSERT_TRUE(engine_.Claim("store-a", false).ok());
  JobLayout layout;
  layout.job_id = "bf-1";
  layout.items = {{&orders_, {"2025-01-01"}}, {&revenue_, {"2025-01-01"}}};
  ASSERT_TRUE(engine_.PrepareJob(layout).ok());
  ASSERT_TRUE(engine_.StagePartition("bf-1", orders_, "2025-01-01", {}).ok());
  ASSERT_TRUE(engine_.StagePartition("bf-1", revenue_, "2025-01-01", {}).ok());
  // A row of revenue outside the job's partitions refuses the whole publish.
  engine_.SetStagedRows("bf-1", "daily_revenue", "2025-01-05", 1);
  absl::Status s = engine_.Publish(layout);
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(s.message(), HasSubstr("nothing was published"));
  EXPECT_EQ(engine_.PublishedRows("orders", "2025-01-01"), 10);
  EXPECT_FALSE(*engine_.IsPublished("bf-1"));
  // Nothing staged for a dataset: refused.
  JobLayout other = layout;
  other.job_id = "bf-2";
  EXPECT_EQ(engine_.Publish(other).code(),
            absl::StatusCode::kFailedPrecondition);
  // Another store took the warehouse over since the claim.
  engine_.SetStagedRows("bf-1", "daily_revenue", "2025-01-05", 0);
  engine_.SetOwner("store-b");
  s = engine_.Publish(layout);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("no longer belongs"));
  engine_.SetOwner("store-a");
  EXPECT_TRUE(engine_.Publish(layout).ok());
  EXPECT_EQ(engine_.PublishedRows("orders", "2025-01-01"), 1);
  EXPECT_EQ(engine_.PublishedRows("daily_revenue", "2025-01-01"), 1);
}

TEST_F(FakeEngineTest, ClaimFollowsTheOwnershipRules) {
  EXPECT_EQ(engine_.Claim("", false).code(),
            absl::StatusCode::kInvalidArgument);
  engine_.AddMarker("bf-1", "");
  ASSERT_TRUE(engine_.Claim("store-a", false).ok());
  EXPECT_EQ(engine_.Inspect()->owner_store_id, "store-a");
  EXPECT_THAT(engine_.Inspect()->publications,
              ElementsAre(Pair("bf-1", "store-a")));
  ASSERT_TRUE(engine_.Claim("store-a", false).ok());  // again: fine

  absl::Status s = engine_.Claim("store-b", false);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("belongs to state store store-a"));
  EXPECT_EQ(engine_.claimed_store_id(), "store-a");
  ASSERT_TRUE(engine_.Claim("store-b", true).ok());
  EXPECT_EQ(engine_.Inspect()->owner_store_id, "store-b");
  EXPECT_THAT(engine_.Inspect()->publications,
              ElementsAre(Pair("bf-1", "store-a")));
  // store-b does not see store-a's publication of its own "bf-1".
  EXPECT_FALSE(*engine_.IsPublished("bf-1"));
}

TEST_F(FakeEngineTest, RestartForgetsLayoutsAndTheClaimButNotStaging) {
  ASSERT_TRUE(engine_.Claim("store-a", false).ok());
  ASSERT_TRUE(engine_.PrepareJob(Layout("bf-3")).ok());
  ASSERT_TRUE(engine_.StagePartition("bf-3", revenue_, "2025-01-01", {}).ok());
  engine_.Restart();
  EXPECT_EQ(engine_.claimed_store_id(), "");
  EXPECT_FALSE(engine_.IsPrepared("bf-3"));
  EXPECT_EQ(engine_.StagePartition("bf-3", revenue_, "2025-01-02", {})
                .status()
                .code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(engine_.ValidateStaged("bf-3", revenue_)->rows, 1);
  EXPECT_THAT(*engine_.ListJobsWithStaging(), ElementsAre("bf-3"));
  EXPECT_EQ(engine_.Inspect()->owner_store_id, "store-a");
}

TEST_F(FakeEngineTest, ListsOnlyStoreJobIdsWithSomethingLeft) {
  for (const char* id : {"bf-10", "bf-9", "bf-x", "manual", "bf-"}) {
    ASSERT_TRUE(engine_.PrepareJob(Layout(id)).ok()) << id;
  }
  JobLayout pins_only;
  pins_only.job_id = "bf-4";
  pins_only.pinned = {&customers_};
  ASSERT_TRUE(engine_.PrepareJob(pins_only).ok());
  JobLayout nothing;
  nothing.job_id = "bf-5";
  ASSERT_TRUE(engine_.PrepareJob(nothing).ok());
  // String order, as the engine reads them back from table names.
  EXPECT_THAT(*engine_.ListJobsWithStaging(),
              ElementsAre("bf-10", "bf-4", "bf-9"));
}

TEST_F(FakeEngineTest, TheHookCanFailOrHoldACall) {
  ASSERT_TRUE(engine_.PrepareJob(Layout("bf-1")).ok());
  engine_.SetHook([](const FakeEngine::Call& call) {
    if (call.method == "StagePartition" && call.partition == "2025-01-02") {
      return absl::ResourceExhaustedError("warehouse full");
    }
    return absl::OkStatus();
  });
  EXPECT_EQ(engine_.StagePartition("bf-1", revenue_, "2025-01-02", {})
                .status()
                .code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(engine_.StagedRows("bf-1", "daily_revenue", "2025-01-02"),
            std::nullopt);
  EXPECT_TRUE(engine_.StagePartition("bf-1", revenue_, "2025-01-01", {}).ok());
  EXPECT_EQ(engine_.calls("StagePartition"), 2);
  EXPECT_EQ(engine_.calls("PrepareJob"), 1);
  std::vector<FakeEngine::Call> log = engine_.call_log();
  ASSERT_EQ(log.size(), 3u);
  EXPECT_EQ(log[1].method, "StagePartition");
  EXPECT_EQ(log[1].job_id, "bf-1");
  EXPECT_EQ(log[1].dataset, "daily_revenue");
  EXPECT_EQ(log[1].partition, "2025-01-02");

  absl::Notification release;
  engine_.SetHook([&](const FakeEngine::Call& call) {
    if (call.method == "Publish") release.WaitForNotification();
    return absl::OkStatus();
  });
  ASSERT_TRUE(engine_.StagePartition("bf-1", revenue_, "2025-01-02", {}).ok());
  std::thread publisher(
      [&] { EXPECT_TRUE(engine_.Publish(Layout("bf-1")).ok()); });
  ASSERT_TRUE(engine_.WaitForCalls("Publish", 1, absl::Seconds(10)));
  // Held back: nothing published yet; other calls go on.
  EXPECT_FALSE(*engine_.IsPublished("bf-1"));
  EXPECT_EQ(engine_.PublishedRows("daily_revenue", "2025-01-01"), 0);
  release.Notify();
  publisher.join();
  EXPECT_TRUE(*engine_.IsPublished("bf-1"));
  EXPECT_FALSE(engine_.WaitForCalls("Publish", 2, absl::Milliseconds(10)));
  engine_.Interrupt();
  EXPECT_EQ(engine_.interrupts(), 1);
}

TEST_F(FakeEngineTest, ConcurrentStagingKeepsEveryPartition) {
  std::vector<std::string> days;
  for (int d = 1; d <= 28; ++d)
    days.push_back(absl::StrFormat("2025-02-%02d", d));
  ASSERT_TRUE(engine_.PrepareJob(Layout("bf-1", days)).ok());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (size_t i = static_cast<size_t>(t); i < days.size(); i += 4) {
        EXPECT_TRUE(engine_.StagePartition("bf-1", revenue_, days[i], {}).ok());
      }
    });
  }
  for (auto& th : threads) th.join();
  auto report = engine_.ValidateStaged("bf-1", revenue_);
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->rows, 28);
  EXPECT_EQ(report->rows_by_partition.size(), 28u);
  EXPECT_EQ(engine_.calls("StagePartition"), 28);
}

}  // namespace
}  // namespace core_fakes_test
}  // namespace backfill
