// Warehouse ownership at start: CheckAndClaimWarehouse with the in-memory
// state store and the fake engine, for each way the two can disagree.

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "core/governance/warehouse_ownership.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/fake_engine.h"
#include "tests/testing/memory_state_store.h"

namespace backfill {
namespace core_warehouse_ownership_test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::Pair;
using ::testing::UnorderedElementsAre;

constexpr char kStorePath[] = "/data/state.db";
constexpr char kWarehousePath[] = "/data/warehouse.db";

absl::Time T(int seconds) {
  return absl::FromUnixSeconds(1700000000 + seconds);
}

// A store another replica of a group writes to while the check reads it:
// `before_list` runs before the next ListJobIds answers, `after_list` after
// (each once).
class RacedStore : public testing::InMemoryStateStore {
 public:
  absl::StatusOr<std::vector<std::string>> ListJobIds(
      const std::vector<JobState>& states) override {
    if (before_list) std::exchange(before_list, nullptr)();
    absl::StatusOr<std::vector<std::string>> ids =
        InMemoryStateStore::ListJobIds(states);
    if (after_list) std::exchange(after_list, nullptr)();
    return ids;
  }
  std::function<void()> before_list;
  std::function<void()> after_list;
};

class WarehouseOwnershipTest : public ::testing::Test {
 protected:
  absl::StatusOr<OwnershipResult> Check(bool adopt = false) {
    return CheckAndClaimWarehouse(&store_, &engine_, adopt, kStorePath,
                                  kWarehousePath);
  }
  std::string StoreId() { return store_.Info()->store_id; }

  // A job of the store, moved to `state` along the table (through
  // RecordPublication once it is PUBLISHING).
  // Without `publishes`, its partition came out unchanged: the job reaches
  // its state having published nothing.
  std::string AddJob(JobState state, bool publishes = true) {
    Job job;
    job.request.dataset = "orders";
    job.plan.datasets = {{"orders", {"2025-01-01"}, "requested", "v1", {}}};
    auto created = store_.CreateJob(job, T(0));
    EXPECT_TRUE(created.ok()) << created.status();
    const std::string id = created->job.id;
    if (state == JobState::kQueued) return id;
    const std::vector<JobState> to_publishing = {
        JobState::kRunning, JobState::kValidating, JobState::kPublishing};
    for (JobState s : to_publishing) {
      EXPECT_TRUE(store_.TransitionJob(id, std::nullopt, s, "", T(1)).ok());
      if (s == state) return id;
    }
    // Its partition was staged, so the publication publishes it.
    PartitionTask task;
    task.job_id = id;
    task.dataset = "orders";
    task.partition = "2025-01-01";
    task.state = publishes ? TaskState::kStaged : TaskState::kUnchanged;
    EXPECT_TRUE(store_.UpdateTask(task).ok());
    EXPECT_TRUE(
        store_
            .RecordPublication(id, {}, JobState::kConfirming, "published", T(2))
            .ok());
    if (state == JobState::kSucceeded || state == JobState::kRolledBack) {
      EXPECT_TRUE(
          store_.TransitionJob(id, std::nullopt, JobState::kSucceeded, "", T(3))
              .ok());
    }
    if (state == JobState::kRolledBack) {
      EXPECT_TRUE(
          store_
              .TransitionJob(id, std::nullopt, JobState::kRolledBack, "", T(4))
              .ok());
    }
    EXPECT_EQ(store_.GetJob(id)->state, state);
    return id;
  }

  // Publishes the job's partition of orders through the engine, as the
  // publish step does: the engine writes the marker with the claimed id.
  void PublishInEngine(const std::string& job_id) {
    JobLayout layout;
    layout.job_id = job_id;
    layout.items = {{&orders_, {"2025-01-01"}}};
    ASSERT_TRUE(engine_.PrepareJob(layout).ok());
    ASSERT_TRUE(engine_.StagePartition(job_id, orders_, "2025-01-01", {}).ok());
    ASSERT_TRUE(engine_.Publish(layout).ok());
  }

  // The store's side of a publication, as the publish step records it.
  void RecordPublished(const std::string& id) {
    PartitionTask task;
    task.job_id = id;
    task.dataset = "orders";
    task.partition = "2025-01-01";
    task.state = TaskState::kStaged;
    EXPECT_TRUE(store_.UpdateTask(task).ok());
    EXPECT_TRUE(
        store_
            .RecordPublication(id, {}, JobState::kConfirming, "published", T(2))
            .ok());
  }

  void SetUp() override {
    orders_.name = "orders";
    orders_.table = "raw_orders";
    orders_.partition = PartitionSpec{"order_date", Grain::kDay, {}};
  }

  DatasetSpec orders_;

  RacedStore store_;
  testing::FakeEngine engine_;
};

TEST_F(WarehouseOwnershipTest, AFreshStoreClaimsAFreshWarehouse) {
  auto result = Check();
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->store_id, StoreId());
  EXPECT_EQ(result->adopted, "");
  auto info = engine_.Inspect();
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->owner_store_id, StoreId());
  EXPECT_EQ(engine_.claimed_store_id(), StoreId());
  EXPECT_EQ(engine_.calls("Claim"), 1);
  // No job numbers were reserved.
  EXPECT_EQ(store_.Info()->last_job_number, 0);
  // A restart finds its own warehouse.
  engine_.Restart();
  ASSERT_TRUE(Check().ok());
  EXPECT_EQ(engine_.claimed_store_id(), StoreId());
}

TEST_F(WarehouseOwnershipTest, AWarehouseOfAnotherStoreIsRefused) {
  engine_.SetOwner("0123456789abcdef0123456789abcdef");
  engine_.AddMarker("bf-1", "0123456789abcdef0123456789abcdef");
  auto result = Check();
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(result.status().message(),
              HasSubstr("belongs to state store "
                        "0123456789abcdef0123456789abcdef"));
  EXPECT_THAT(result.status().message(), HasSubstr(StoreId()));
  EXPECT_THAT(result.status().message(), HasSubstr(kStorePath));
  EXPECT_THAT(result.status().message(), HasSubstr(kWarehousePath));
  EXPECT_THAT(result.status().message(), HasSubstr("--adopt-warehouse"));
  // Nothing changed.
  EXPECT_EQ(engine_.calls("Claim"), 0);
  EXPECT_EQ(engine_.Inspect()->owner_store_id,
            "0123456789abcdef0123456789abcdef");
  EXPECT_EQ(engine_.claimed_store_id(), "");
}

TEST_F(WarehouseOwnershipTest, PublishedJobsMissingFromTheWarehouseAreRefused) {
  AddJob(JobState::kSucceeded);                                  // bf-1
  AddJob(JobState::kQueued);                                     // bf-2
  const std::string confirming = AddJob(JobState::kConfirming);  // bf-3
  AddJob(JobState::kRolledBack);                                 // bf-4
  // The warehouse holds only bf-3's publication.
  engine_.AddMarker(confirming, "");
  auto result = Check();
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kFailedPrecondition);
  const std::string message(result.status().message());
  EXPECT_THAT(message, HasSubstr("records 3 published jobs"));
  EXPECT_THAT(message, HasSubstr("no publication of 2 of them (bf-1, bf-4)"));
  EXPECT_THAT(message, Not(HasSubstr("bf-2")));
  EXPECT_THAT(message, HasSubstr("--adopt-warehouse"));
  EXPECT_EQ(engine_.calls("Claim"), 0);
  EXPECT_EQ(engine_.Inspect()->owner_store_id, "");
}

TEST_F(WarehouseOwnershipTest, AJobThatPublishedNothingNeedsNoMarker) {
  const std::string published = AddJob(JobState::kSucceeded);  // bf-1
  AddJob(JobState::kSucceeded, /*publishes=*/false);           // bf-2
  engine_.AddMarker(published, "");
  ASSERT_TRUE(Check().ok());
  engine_.Restart();
  ASSERT_TRUE(Check().ok());
  // A job that did publish is still looked for.
  AddJob(JobState::kSucceeded);  // bf-3
  auto result = Check();
  ASSERT_FALSE(result.ok());
  EXPECT_THAT(result.status().message(),
              HasSubstr("no publication of 1 of them (bf-3)"));
}

TEST_F(WarehouseOwnershipTest,
       AnEmptyWarehouseForAStoreWithPublicationsIsRefused) {
  for (int i = 0; i < 7; ++i) AddJob(JobState::kSucceeded);
  auto result = Check();
  ASSERT_FALSE(result.ok());
  // At most five ids are named, in job number order.
  EXPECT_THAT(result.status().message(),
              HasSubstr("(bf-1, bf-2, bf-3, bf-4, bf-5 and 2 more)"));
}

TEST_F(WarehouseOwnershipTest, PublicationsTheStoreDoesNotRecordAreRefused) {
  ASSERT_TRUE(Check().ok());
  const std::string first = AddJob(JobState::kSucceeded);  // bf-1
  ASSERT_NO_FATAL_FAILURE(PublishInEngine(first));
  // bf-2 and bf-12 were published too, but the state store was restored
  // from a backup that knows bf-2 only as running and bf-12 not at all.
  AddJob(JobState::kRunning);  // bf-2
  ASSERT_NO_FATAL_FAILURE(PublishInEngine("bf-2"));
  ASSERT_NO_FATAL_FAILURE(PublishInEngine("bf-12"));
  engine_.Restart();
  auto result = Check();
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(result.status().message(),
              HasSubstr("holds publications of 2 jobs (bf-2, bf-12)"));
  EXPECT_THAT(result.status().message(), HasSubstr("older than the warehouse"));
  EXPECT_THAT(result.status().message(), HasSubstr("--adopt-warehouse"));
  EXPECT_EQ(engine_.calls("Claim"), 1);  // only the first start claimed
}

TEST_F(WarehouseOwnershipTest,
       MarkersOfOtherStoresInAnOwnedWarehouseDoNotCount) {
  // Markers written by a store the warehouse belonged to before (taken over
  // with --adopt-warehouse) are not this store's.
  ASSERT_TRUE(Check().ok());
  engine_.AddMarker("bf-40", "ffffffffffffffffffffffffffffffff");
  engine_.Restart();
  EXPECT_TRUE(Check().ok());
}

TEST_F(WarehouseOwnershipTest, AJobInPublishingWithAMarkerIsFine) {
  ASSERT_TRUE(Check().ok());
  const std::string done = AddJob(JobState::kSucceeded);  // bf-1
  ASSERT_NO_FATAL_FAILURE(PublishInEngine(done));
  // A crash between the warehouse's commit and the store's record of it.
  const std::string id = AddJob(JobState::kPublishing);  // bf-2
  ASSERT_NO_FATAL_FAILURE(PublishInEngine(id));
  engine_.Restart();
  auto result = Check();
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(engine_.claimed_store_id(), StoreId());
  EXPECT_TRUE(*engine_.IsPublished(id));
  // ... and so is one without its marker yet (the publish did not commit).
  const std::string pending = AddJob(JobState::kPublishing);
  engine_.Restart();
  EXPECT_TRUE(Check().ok());
  EXPECT_FALSE(*engine_.IsPublished(pending));
}

TEST_F(WarehouseOwnershipTest, LegacyMarkersAreAcceptedAndStampedByTheClaim) {
  // Markers of a version that did not name their store, in a warehouse no
  // store has claimed.
  const std::string first = AddJob(JobState::kSucceeded);
  const std::string second = AddJob(JobState::kConfirming);
  engine_.AddMarker(first, "");
  engine_.AddMarker(second, "");
  auto result = Check();
  ASSERT_TRUE(result.ok()) << result.status();
  auto info = engine_.Inspect();
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->owner_store_id, StoreId());
  EXPECT_THAT(
      info->publications,
      UnorderedElementsAre(Pair(first, StoreId()), Pair(second, StoreId())));
  EXPECT_TRUE(*engine_.IsPublished(first));
  // The next start sees them as this store's.
  engine_.Restart();
  EXPECT_TRUE(Check().ok());
}

TEST_F(WarehouseOwnershipTest, LegacyMarkersTheStoreDoesNotRecordAreRefused) {
  engine_.AddMarker("bf-3", "");
  auto result = Check();
  ASSERT_FALSE(result.ok());
  EXPECT_THAT(result.status().message(),
              HasSubstr("holds publications of 1 jobs (bf-3)"));
  EXPECT_EQ(engine_.Inspect()->owner_store_id, "");
  EXPECT_THAT(engine_.Inspect()->publications, ElementsAre(Pair("bf-3", "")));
}

TEST_F(WarehouseOwnershipTest, AdoptClaimsAndNumbersJobsAfterEveryMarker) {
  const std::string other = "0123456789abcdef0123456789abcdef";
  engine_.SetOwner(other);
  engine_.AddMarker("bf-7", other);
  engine_.AddMarker("bf-41", other);
  engine_.AddMarker("bf-9", "");
  engine_.AddMarker("manual-run", other);  // not a job number: ignored
  AddJob(JobState::kSucceeded);            // bf-1, which the warehouse lacks

  auto result = Check(/*adopt=*/true);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->store_id, StoreId());
  EXPECT_THAT(result->adopted, HasSubstr("adopted warehouse"));
  EXPECT_THAT(result->adopted,
              HasSubstr(absl::StrCat("it belonged to state store ", other)));
  EXPECT_THAT(result->adopted, HasSubstr("4 publication markers"));
  EXPECT_THAT(result->adopted, HasSubstr("numbered after bf-41"));

  auto info = engine_.Inspect();
  EXPECT_EQ(info->owner_store_id, StoreId());
  // Markers keep the store that wrote them on a take-over.
  EXPECT_EQ(info->publications.at("bf-41"), other);
  EXPECT_EQ(info->publications.at("bf-9"), "");
  EXPECT_EQ(store_.Info()->last_job_number, 41);
  auto next = store_.CreateJob(Job{}, T(9));
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(next->job.id, "bf-42");
  // The other store's bf-41 does not pass for this store's.
  EXPECT_FALSE(*engine_.IsPublished("bf-41"));
}

TEST_F(WarehouseOwnershipTest, AdoptNeverLowersTheJobCounter) {
  for (int i = 0; i < 5; ++i) AddJob(JobState::kQueued);
  engine_.AddMarker("bf-2", "");
  auto result = Check(/*adopt=*/true);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(result->adopted, HasSubstr("(it had no owner)"));
  EXPECT_THAT(result->adopted, HasSubstr("numbered after bf-5"));
  EXPECT_EQ(store_.Info()->last_job_number, 5);
  EXPECT_EQ(engine_.Inspect()->owner_store_id, StoreId());
}

TEST_F(WarehouseOwnershipTest, FailuresOfTheStoreOrEngineArePassedOn) {
  engine_.SetHook([](const testing::FakeEngine::Call& call) {
    return call.method == "Inspect" ? absl::UnavailableError("disk gone")
                                    : absl::OkStatus();
  });
  auto result = Check();
  EXPECT_EQ(result.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(engine_.calls("Claim"), 0);

  engine_.SetHook(nullptr);
  store_.FailWrites(absl::ResourceExhaustedError("disk full"));
  engine_.AddMarker("bf-3", "");
  result = Check(/*adopt=*/true);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kResourceExhausted);
  // The job numbers were not reserved, so the warehouse was not claimed.
  EXPECT_EQ(engine_.calls("Claim"), 0);
  EXPECT_EQ(engine_.Inspect()->owner_store_id, "");
}

TEST_F(WarehouseOwnershipTest, JobsWithPublicationsIncludePublishing) {
  AddJob(JobState::kQueued);      // bf-1
  AddJob(JobState::kPublishing);  // bf-2
  AddJob(JobState::kSucceeded);   // bf-3
  AddJob(JobState::kRunning);     // bf-4
  AddJob(JobState::kConfirming);  // bf-5
  auto jobs = JobsWithPublications(&store_);
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  EXPECT_THAT(*jobs, ElementsAre("bf-2", "bf-3", "bf-5"));
  EXPECT_THAT(PublishedStates(),
              UnorderedElementsAre(JobState::kConfirming, JobState::kSucceeded,
                                   JobState::kDownstreamUnhealthy,
                                   JobState::kRolledBack));
  testing::InMemoryStateStore empty;
  EXPECT_THAT(*JobsWithPublications(&empty), IsEmpty());
}

// A replica starting while another publishes: between the two reads of
// the store, the job goes from PUBLISHING (its marker committed) to
// published. It is in one of the two lists, whatever the moment.
TEST_F(WarehouseOwnershipTest,
       AJobPublishedByAnotherReplicaDuringTheCheckFits) {
  ASSERT_TRUE(Check().ok());
  const std::string id = AddJob(JobState::kPublishing);
  PublishInEngine(id);
  store_.after_list = [&] { RecordPublished(id); };
  absl::StatusOr<OwnershipResult> checked = Check();
  EXPECT_TRUE(checked.ok()) << checked.status();
  EXPECT_EQ(store_.GetJob(id)->state, JobState::kConfirming);

  // And published in the warehouse and the store after the warehouse was
  // read, before the store was: the marker is looked for again.
  const std::string next = AddJob(JobState::kPublishing);
  store_.before_list = [&] {
    PublishInEngine(next);
    RecordPublished(next);
  };
  checked = Check();
  EXPECT_TRUE(checked.ok()) << checked.status();
  EXPECT_EQ(store_.GetJob(next)->state, JobState::kConfirming);
}

}  // namespace
}  // namespace core_warehouse_ownership_test
}  // namespace backfill
