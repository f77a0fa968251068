// What the core can observe of an Engine, run against SqliteEngine (on the
// temporary warehouse of a SqliteWarehouseHarness, with the orders /
// customers / daily_revenue fixture) and against FakeEngine (seeded with
// the same row counts, and told how many rows each transform writes), so
// that the fake the core's tests use follows the real engine's rules:
// ownership and publication markers, the staging life cycle, validation
// reports, publish and row counts.

#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/fake_engine.h"
#include "tests/testing/warehouse_harness.h"

namespace backfill {
namespace storage_engine_contract_test {
namespace {

using ::testing::ElementsAre;
using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Pair;

enum class EngineKind { kSqlite, kFake };

std::string KindName(const ::testing::TestParamInfo<EngineKind>& info) {
  return info.param == EngineKind::kSqlite ? "Sqlite" : "Fake";
}

class EngineContractTest : public ::testing::TestWithParam<EngineKind> {
 protected:
  void SetUp() override {
    orders_.name = "orders";
    orders_.table = "raw_orders";
    orders_.partition = PartitionSpec{"order_date", Grain::kDay, {}};
    customers_.name = "customers";
    customers_.table = "dim_customers";
    regions_.name = "regions";
    regions_.table = "dim_regions";  // never created

    revenue_.name = "daily_revenue";
    revenue_.kind = DatasetKind::kDerived;
    revenue_.table = "daily_revenue";
    revenue_.partition = PartitionSpec{"ds", Grain::kDay, {}};
    revenue_.upstream = {{"orders", Mapping::kIdentity},
                         {"customers", Mapping::kAll}};
    revenue_.transform = R"sql(
      SELECT o.order_date AS ds, c.region AS region,
             SUM(o.amount) AS revenue, COUNT(*) AS orders
      FROM raw_orders o JOIN dim_customers c ON c.customer_id = o.customer_id
      WHERE o.order_date >= :partition_start AND o.order_date < :partition_end
      GROUP BY 1, 2)sql";
    revenue_.transform_version = "v1";
    revenue_.columns = {{"ds", "TEXT"},
                        {"region", "TEXT"},
                        {"revenue", "REAL"},
                        {"orders", "INTEGER"}};
    revenue_.primary_key = {"ds", "region"};

    totals_.name = "region_totals";  // unpartitioned
    totals_.kind = DatasetKind::kDerived;
    totals_.table = "region_totals";
    totals_.upstream = {{"customers", Mapping::kAll}};
    totals_.transform =
        "SELECT region, COUNT(*) AS customers FROM dim_customers GROUP BY 1";
    totals_.columns = {{"region", "TEXT"}, {"customers", "INTEGER"}};
    totals_.primary_key = {"region"};

    if (GetParam() == EngineKind::kSqlite) {
      auto harness = testing::SqliteWarehouseHarness::Create();
      ASSERT_TRUE(harness.ok()) << harness.status();
      sqlite_ = *std::move(harness);
      absl::Status s = sqlite_->Exec(R"sql(
        CREATE TABLE raw_orders (order_id INTEGER PRIMARY KEY,
                                 order_date TEXT, customer_id INTEGER,
                                 amount REAL);
        CREATE TABLE dim_customers (customer_id INTEGER PRIMARY KEY,
                                    region TEXT);
        INSERT INTO dim_customers VALUES (1, 'EU'), (2, 'US'), (3, 'EU');
        INSERT INTO raw_orders VALUES
          (1, '2025-01-01', 1, 10), (2, '2025-01-01', 2, 20),
          (3, '2025-01-01', 3, 30), (4, '2025-01-02', 1, 40),
          (5, '2025-01-02', 2, 50), (6, '2025-01-03', 3, 60),
          (7, '2025-01-03', 1, 70);
      )sql");
      ASSERT_TRUE(s.ok()) << s;
      ASSERT_NO_FATAL_FAILURE(Restart());
    } else {
      // The same warehouse in row counts; the transforms' row counts.
      fake_.SetPublishedRows("orders", "2025-01-01", 3);
      fake_.SetPublishedRows("orders", "2025-01-02", 2);
      fake_.SetPublishedRows("orders", "2025-01-03", 2);
      fake_.SetPublishedRows("customers", "", 3);
      fake_.SetRowsFor([](const std::string& dataset, const std::string& p) {
        if (dataset == "region_totals") return int64_t{2};
        return p == "2025-01-03" ? int64_t{1} : int64_t{2};  // regions
      });
    }
  }

  void TearDown() override { sqlite_.reset(); }

  Engine* engine() {
    return GetParam() == EngineKind::kSqlite ? sqlite_->engine() : &fake_;
  }

  // As a restart of the daemon on the same warehouse.
  void Restart() {
    if (GetParam() == EngineKind::kFake) {
      fake_.Restart();
      return;
    }
    absl::Status s = sqlite_->Restart();
    ASSERT_TRUE(s.ok()) << s;
  }

  // Another process takes the warehouse over for `store_id`.
  void TakeOver(const std::string& store_id) {
    if (GetParam() == EngineKind::kFake) {
      fake_.SetOwner(store_id);
      return;
    }
    auto other = sqlite_->OpenAnother();
    ASSERT_TRUE(other.ok()) << other.status();
    ASSERT_TRUE((*other)->Claim(store_id, /*take_over=*/true).ok());
  }

  // Publication markers of a version that did not name their store.
  void AddLegacyMarkers(const std::vector<std::string>& jobs) {
    if (GetParam() == EngineKind::kFake) {
      for (const std::string& job : jobs) fake_.AddMarker(job, "");
      return;
    }
    absl::Status s = sqlite_->AddLegacyPublications(jobs);
    ASSERT_TRUE(s.ok()) << s;
  }

  JobLayout RevenueLayout(const std::string& job_id,
                          std::vector<std::string> days = {"2025-01-01",
                                                           "2025-01-02"}) {
    JobLayout layout;
    layout.job_id = job_id;
    layout.items = {{&revenue_, std::move(days)}};
    layout.pinned = {&customers_};
    return layout;
  }
  std::vector<InputRef> RevenueInputs(const std::string& day) {
    return {{&orders_, day}, {&customers_, std::nullopt}};
  }
  // Prepares, stages and publishes the revenue of `days`.
  void PublishRevenue(const std::string& job_id,
                      const std::vector<std::string>& days) {
    const JobLayout layout = RevenueLayout(job_id, days);
    ASSERT_TRUE(engine()->PrepareJob(layout).ok());
    for (const std::string& day : days) {
      auto staged =
          engine()->StagePartition(job_id, revenue_, day, RevenueInputs(day));
      ASSERT_TRUE(staged.ok()) << staged.status();
    }
    absl::Status s = engine()->Publish(layout);
    ASSERT_TRUE(s.ok()) << s;
  }

  DatasetSpec orders_, customers_, regions_, revenue_, totals_;
  std::unique_ptr<testing::SqliteWarehouseHarness> sqlite_;
  testing::FakeEngine fake_;
};

INSTANTIATE_TEST_SUITE_P(Engines, EngineContractTest,
                         ::testing::Values(EngineKind::kSqlite,
                                           EngineKind::kFake),
                         KindName);

TEST_P(EngineContractTest, ClaimFollowsTheOwnershipRules) {
  auto fresh = engine()->Inspect();
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  EXPECT_EQ(fresh->owner_store_id, "");
  EXPECT_THAT(fresh->publications, IsEmpty());

  EXPECT_EQ(engine()->Claim("", false).code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(engine()->Claim("store-a", false).ok());
  EXPECT_EQ(engine()->Inspect()->owner_store_id, "store-a");
  ASSERT_TRUE(engine()->Claim("store-a", false).ok());
  absl::Status refused = engine()->Claim("store-b", false);
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.message(), HasSubstr("store-a"));
  EXPECT_EQ(engine()->Inspect()->owner_store_id, "store-a");
  ASSERT_TRUE(engine()->Claim("store-b", true).ok());
  EXPECT_EQ(engine()->Inspect()->owner_store_id, "store-b");
  // The owner survives a restart.
  ASSERT_NO_FATAL_FAILURE(Restart());
  EXPECT_EQ(engine()->Inspect()->owner_store_id, "store-b");
}

TEST_P(EngineContractTest, LegacyMarkersAreStampedByTheFirstClaim) {
  ASSERT_NO_FATAL_FAILURE(AddLegacyMarkers({"bf-1", "bf-2"}));
  EXPECT_THAT(engine()->Inspect()->publications,
              ElementsAre(Pair("bf-1", ""), Pair("bf-2", "")));
  ASSERT_TRUE(engine()->Claim("store-a", false).ok());
  EXPECT_THAT(engine()->Inspect()->publications,
              ElementsAre(Pair("bf-1", "store-a"), Pair("bf-2", "store-a")));
  EXPECT_TRUE(*engine()->IsPublished("bf-2"));
  EXPECT_FALSE(*engine()->IsPublished("bf-3"));
}

TEST_P(EngineContractTest, PublishRecordsAMarkerOfTheClaimingStore) {
  ASSERT_TRUE(engine()->Claim("store-a", false).ok());
  ASSERT_NO_FATAL_FAILURE(PublishRevenue("bf-1", {"2025-01-01"}));
  EXPECT_TRUE(*engine()->IsPublished("bf-1"));
  EXPECT_THAT(engine()->Inspect()->publications,
              ElementsAre(Pair("bf-1", "store-a")));
  // A take-over keeps who wrote the marker; the new owner does not count
  // another store's "bf-1" as its own.
  ASSERT_TRUE(engine()->Claim("store-b", true).ok());
  EXPECT_THAT(engine()->Inspect()->publications,
              ElementsAre(Pair("bf-1", "store-a")));
  EXPECT_FALSE(*engine()->IsPublished("bf-1"));
  // Its own bf-1 (a recreated store's numbering) is published apart.
  ASSERT_TRUE(engine()->DropStaging("bf-1").ok());
  ASSERT_NO_FATAL_FAILURE(PublishRevenue("bf-1", {"2025-01-02"}));
  EXPECT_TRUE(*engine()->IsPublished("bf-1"));
  EXPECT_THAT(*engine()->CountRowsByPartition(revenue_),
              ElementsAre(Pair("2025-01-01", 2), Pair("2025-01-02", 2)));
}

TEST_P(EngineContractTest, AJobGoesThroughStagingValidationAndPublish) {
  ASSERT_TRUE(engine()->Claim("store-a", false).ok());
  const JobLayout layout = RevenueLayout("bf-7");
  ASSERT_TRUE(engine()->PrepareJob(layout).ok());
  EXPECT_THAT(*engine()->ListJobsWithStaging(), ElementsAre("bf-7"));
  auto empty = engine()->ValidateStaged("bf-7", revenue_);
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ(empty->rows, 0);
  EXPECT_THAT(empty->rows_by_partition, IsEmpty());

  for (const char* day : {"2025-01-01", "2025-01-02"}) {
    auto staged =
        engine()->StagePartition("bf-7", revenue_, day, RevenueInputs(day));
    ASSERT_TRUE(staged.ok()) << staged.status();
    EXPECT_EQ(staged->rows_written, 2);
    EXPECT_THAT(staged->output_fingerprint, EndsWith(":2"));
    ASSERT_EQ(staged->inputs.size(), 2u);
    EXPECT_EQ(staged->inputs[0].dataset, "orders");
    EXPECT_EQ(staged->inputs[0].partition, day);
    EXPECT_EQ(staged->inputs[0].rows, std::string(day) == "2025-01-01" ? 3 : 2);
    EXPECT_EQ(staged->inputs[1].dataset, "customers");
    EXPECT_EQ(staged->inputs[1].partition, "");
    EXPECT_EQ(staged->inputs[1].rows, 3);
    EXPECT_THAT(staged->inputs[1].fingerprint, EndsWith(":3"));
  }
  // Staging again replaces the partition's rows.
  ASSERT_TRUE(engine()
                  ->StagePartition("bf-7", revenue_, "2025-01-02",
                                   RevenueInputs("2025-01-02"))
                  .ok());
  auto report = engine()->ValidateStaged("bf-7", revenue_);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->rows, 4);
  EXPECT_THAT(report->rows_by_partition,
              ElementsAre(Pair("2025-01-01", 2), Pair("2025-01-02", 2)));
  EXPECT_THAT(report->failures, IsEmpty());

  EXPECT_FALSE(*engine()->IsPublished("bf-7"));
  ASSERT_TRUE(engine()->Publish(layout).ok());
  EXPECT_TRUE(*engine()->IsPublished("bf-7"));
  EXPECT_THAT(*engine()->CountRowsByPartition(revenue_),
              ElementsAre(Pair("2025-01-01", 2), Pair("2025-01-02", 2)));
  ASSERT_TRUE(engine()->Publish(layout).ok());  // a repeat: no-op
  EXPECT_THAT(*engine()->CountRowsByPartition(revenue_),
              ElementsAre(Pair("2025-01-01", 2), Pair("2025-01-02", 2)));

  ASSERT_TRUE(engine()->DropStaging("bf-7").ok());
  EXPECT_THAT(*engine()->ListJobsWithStaging(), IsEmpty());
  EXPECT_TRUE(*engine()->IsPublished("bf-7"));
  EXPECT_EQ(engine()->ValidateStaged("bf-7", revenue_).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(engine()
                ->StagePartition("bf-7", revenue_, "2025-01-01",
                                 RevenueInputs("2025-01-01"))
                .status()
                .code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(engine()->DropStaging("bf-7").ok());  // again: fine
}

TEST_P(EngineContractTest, PublishReplacesOnlyTheJobsPartitions) {
  ASSERT_TRUE(engine()->Claim("store-a", false).ok());
  ASSERT_NO_FATAL_FAILURE(PublishRevenue("bf-1", {"2025-01-01", "2025-01-03"}));
  ASSERT_NO_FATAL_FAILURE(PublishRevenue("bf-2", {"2025-01-02"}));
  EXPECT_THAT(*engine()->CountRowsByPartition(revenue_),
              ElementsAre(Pair("2025-01-01", 2), Pair("2025-01-02", 2),
                          Pair("2025-01-03", 1)));
  EXPECT_THAT(*engine()->CountRowsByPartition(orders_),
              ElementsAre(Pair("2025-01-01", 3), Pair("2025-01-02", 2),
                          Pair("2025-01-03", 2)));
  EXPECT_THAT(*engine()->CountRowsByPartition(customers_),
              ElementsAre(Pair("", 3)));
  EXPECT_THAT(*engine()->CountRowsByPartition(regions_),
              ElementsAre(Pair("", 0)));  // no table yet
  DatasetSpec unpublished = revenue_;
  unpublished.name = "weekly";
  unpublished.table = "weekly";
  EXPECT_THAT(*engine()->CountRowsByPartition(unpublished), IsEmpty());
}

TEST_P(EngineContractTest, AnUnpartitionedDatasetHasOnePartition) {
  ASSERT_TRUE(engine()->Claim("store-a", false).ok());
  JobLayout layout;
  layout.job_id = "bf-3";
  layout.items = {{&totals_, {""}}};
  layout.pinned = {&customers_};
  ASSERT_TRUE(engine()->PrepareJob(layout).ok());
  auto none = engine()->ValidateStaged("bf-3", totals_);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_THAT(none->rows_by_partition, ElementsAre(Pair("", 0)));
  auto staged = engine()->StagePartition("bf-3", totals_, "",
                                         {{&customers_, std::nullopt}});
  ASSERT_TRUE(staged.ok()) << staged.status();
  EXPECT_EQ(staged->rows_written, 2);
  auto report = engine()->ValidateStaged("bf-3", totals_);
  EXPECT_EQ(report->rows, 2);
  EXPECT_THAT(report->rows_by_partition, ElementsAre(Pair("", 2)));
  ASSERT_TRUE(engine()->Publish(layout).ok());
  EXPECT_THAT(*engine()->CountRowsByPartition(totals_),
              ElementsAre(Pair("", 2)));
}

TEST_P(EngineContractTest, CallsOutsideTheLayoutAreRefused) {
  EXPECT_EQ(engine()
                ->StagePartition("bf-1", revenue_, "2025-01-01",
                                 RevenueInputs("2025-01-01"))
                .status()
                .code(),
            absl::StatusCode::kFailedPrecondition);  // not prepared
  EXPECT_EQ(engine()->ValidateStaged("bf-1", revenue_).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(engine()->PrepareJob(RevenueLayout("")).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(engine()->PrepareJob(RevenueLayout("bf-1", {"2025-13-01"})).code(),
            absl::StatusCode::kInvalidArgument);
  JobLayout pins_missing = RevenueLayout("bf-1");
  pins_missing.pinned.push_back(&regions_);
  absl::Status s = engine()->PrepareJob(pins_missing);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("cannot pin regions"));

  ASSERT_TRUE(engine()->PrepareJob(RevenueLayout("bf-1")).ok());
  EXPECT_EQ(engine()
                ->StagePartition("bf-1", revenue_, "2025-01-03",
                                 RevenueInputs("2025-01-03"))
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);  // not a partition of it
  EXPECT_EQ(engine()->StagePartition("bf-1", totals_, "", {}).status().code(),
            absl::StatusCode::kFailedPrecondition);  // not a dataset of it
  EXPECT_EQ(engine()
                ->StagePartition("bf-1", revenue_, "2025-01-01",
                                 {{nullptr, std::nullopt}})
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_P(EngineContractTest, ARestartKeepsStagingButNeedsPrepareAgain) {
  ASSERT_TRUE(engine()->PrepareJob(RevenueLayout("bf-4")).ok());
  ASSERT_TRUE(engine()
                  ->StagePartition("bf-4", revenue_, "2025-01-01",
                                   RevenueInputs("2025-01-01"))
                  .ok());
  ASSERT_NO_FATAL_FAILURE(Restart());
  EXPECT_THAT(*engine()->ListJobsWithStaging(), ElementsAre("bf-4"));
  EXPECT_EQ(engine()->ValidateStaged("bf-4", revenue_)->rows, 2);
  EXPECT_EQ(engine()
                ->StagePartition("bf-4", revenue_, "2025-01-02",
                                 RevenueInputs("2025-01-02"))
                .status()
                .code(),
            absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(engine()->PrepareJob(RevenueLayout("bf-4")).ok());
  ASSERT_TRUE(engine()
                  ->StagePartition("bf-4", revenue_, "2025-01-02",
                                   RevenueInputs("2025-01-02"))
                  .ok());
  EXPECT_THAT(engine()->ValidateStaged("bf-4", revenue_)->rows_by_partition,
              ElementsAre(Pair("2025-01-01", 2), Pair("2025-01-02", 2)));
}

TEST_P(EngineContractTest, OnlyStoreJobIdsAreListedWithStaging) {
  for (const char* id : {"bf-10", "bf-9", "manual"}) {
    ASSERT_TRUE(engine()->PrepareJob(RevenueLayout(id)).ok()) << id;
  }
  EXPECT_THAT(*engine()->ListJobsWithStaging(), ElementsAre("bf-10", "bf-9"));
  ASSERT_TRUE(engine()->DropStaging("bf-10").ok());
  EXPECT_THAT(*engine()->ListJobsWithStaging(), ElementsAre("bf-9"));
}

TEST_P(EngineContractTest, PublishIsRefusedOnceAnotherStoreTookOver) {
  ASSERT_TRUE(engine()->Claim("store-a", false).ok());
  const JobLayout layout = RevenueLayout("bf-5", {"2025-01-01"});
  ASSERT_TRUE(engine()->PrepareJob(layout).ok());
  ASSERT_TRUE(engine()
                  ->StagePartition("bf-5", revenue_, "2025-01-01",
                                   RevenueInputs("2025-01-01"))
                  .ok());
  ASSERT_NO_FATAL_FAILURE(TakeOver("store-b"));
  absl::Status s = engine()->Publish(layout);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("no longer belongs"));
  EXPECT_FALSE(*engine()->IsPublished("bf-5"));
  EXPECT_THAT(*engine()->CountRowsByPartition(revenue_), IsEmpty());
}

// ---- Rollback ---------------------------------------------------------------

TEST_P(EngineContractTest, RollbackRestoresTheReplacedRowsOnce) {
  ASSERT_TRUE(engine()->Claim("store-a", false).ok());
  ASSERT_NO_FATAL_FAILURE(PublishRevenue("bf-1", {"2025-01-01", "2025-01-02"}));
  // Day 2 loses its US order: one region instead of two.
  if (GetParam() == EngineKind::kSqlite) {
    ASSERT_TRUE(
        sqlite_->Exec("DELETE FROM raw_orders WHERE order_id = 5").ok());
  } else {
    fake_.SetRowsFor([](const std::string&, const std::string& p) {
      return p == "2025-01-01" ? int64_t{2} : int64_t{1};
    });
  }
  ASSERT_NO_FATAL_FAILURE(PublishRevenue("bf-2", {"2025-01-02", "2025-01-03"}));
  ASSERT_THAT(*engine()->CountRowsByPartition(revenue_),
              ElementsAre(Pair("2025-01-01", 2), Pair("2025-01-02", 1),
                          Pair("2025-01-03", 1)));
  auto copies = engine()->ListRollbackCopies();
  ASSERT_TRUE(copies.ok()) << copies.status();
  ASSERT_EQ(copies->size(), 2u);
  EXPECT_EQ((*copies)[0].job_id, "bf-1");
  EXPECT_EQ((*copies)[1].job_id, "bf-2");
  EXPECT_EQ((*copies)[1].dataset, "daily_revenue");

  RollbackSpec spec;
  spec.layout = RevenueLayout("bf-2", {"2025-01-02", "2025-01-03"});
  spec.marker.requested_by = "ann";
  spec.marker.reason = "wrong prices";
  auto result = engine()->Rollback(spec);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_FALSE(result->already);
  EXPECT_EQ(result->rows, 2);
  ASSERT_EQ(result->partitions.size(), 2u);
  EXPECT_EQ(result->partitions[0].partition, "2025-01-02");
  EXPECT_EQ(result->partitions[0].rows, 2);
  EXPECT_EQ(result->partitions[1].partition, "2025-01-03");
  EXPECT_EQ(result->partitions[1].rows, 0);  // did not exist before bf-2
  EXPECT_THAT(*engine()->CountRowsByPartition(revenue_),
              ElementsAre(Pair("2025-01-01", 2), Pair("2025-01-02", 2)));
  auto info = engine()->Inspect();
  ASSERT_TRUE(info.ok()) << info.status();
  ASSERT_EQ(info->rollbacks.count("bf-2"), 1u);
  EXPECT_EQ(info->rollbacks.at("bf-2").store_id, "store-a");
  EXPECT_EQ(info->rollbacks.at("bf-2").reason, "wrong prices");
  EXPECT_EQ(info->rollbacks.at("bf-2").requested_by, "ann");
  // Its copy served and is gone.
  copies = engine()->ListRollbackCopies();
  ASSERT_EQ(copies->size(), 1u);
  EXPECT_EQ((*copies)[0].job_id, "bf-1");

  // A second call (a restart before the store recorded it) restores
  // nothing and reports what the partitions hold.
  ASSERT_NO_FATAL_FAILURE(Restart());
  ASSERT_TRUE(engine()->Claim("store-a", false).ok());
  auto again = engine()->Rollback(spec);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->already);
  EXPECT_EQ(again->rows, 2);
  EXPECT_EQ(again->partitions[0].fingerprint,
            result->partitions[0].fingerprint);
  EXPECT_THAT(*engine()->CountRowsByPartition(revenue_),
              ElementsAre(Pair("2025-01-01", 2), Pair("2025-01-02", 2)));
}

TEST_P(EngineContractTest, RollbackIsRefusedWithoutPublicationOrCopy) {
  ASSERT_TRUE(engine()->Claim("store-a", false).ok());
  ASSERT_NO_FATAL_FAILURE(PublishRevenue("bf-1", {"2025-01-01"}));
  RollbackSpec spec;
  spec.layout = RevenueLayout("bf-9", {"2025-01-01"});
  auto never = engine()->Rollback(spec);
  EXPECT_EQ(never.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(never.status().message(), HasSubstr("no publication"));
  ASSERT_TRUE(engine()->DropRollbackCopies({{"bf-1", "daily_revenue"}}).ok());
  ASSERT_TRUE(engine()->DropRollbackCopies({{"bf-1", "daily_revenue"}}).ok());
  EXPECT_THAT(*engine()->ListRollbackCopies(), IsEmpty());
  spec.layout = RevenueLayout("bf-1", {"2025-01-01"});
  auto gone = engine()->Rollback(spec);
  EXPECT_EQ(gone.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(gone.status().message(), HasSubstr("rollback copy"));
  EXPECT_THAT(*engine()->CountRowsByPartition(revenue_),
              ElementsAre(Pair("2025-01-01", 2)));
  EXPECT_THAT(engine()->Inspect()->rollbacks, IsEmpty());
}

TEST_P(EngineContractTest, RollbackOfAnUnpartitionedDataset) {
  ASSERT_TRUE(engine()->Claim("store-a", false).ok());
  JobLayout layout;
  layout.job_id = "bf-3";
  layout.items = {{&totals_, {""}}};
  layout.pinned = {&customers_};
  ASSERT_TRUE(engine()->PrepareJob(layout).ok());
  ASSERT_TRUE(
      engine()
          ->StagePartition("bf-3", totals_, "", {{&customers_, std::nullopt}})
          .ok());
  ASSERT_TRUE(engine()->Publish(layout).ok());
  ASSERT_THAT(*engine()->CountRowsByPartition(totals_),
              ElementsAre(Pair("", 2)));
  RollbackSpec spec;
  spec.layout = layout;
  auto result = engine()->Rollback(spec);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->partitions.size(), 1u);
  EXPECT_EQ(result->partitions[0].partition, "");
  EXPECT_EQ(result->rows, 0);  // the initial load is undone
  EXPECT_THAT(*engine()->CountRowsByPartition(totals_),
              ElementsAre(Pair("", 0)));
}

}  // namespace
}  // namespace storage_engine_contract_test
}  // namespace backfill

namespace backfill {
namespace storage_engine_contract_test {
namespace {

// ---- Early cutoff ----------------------------------------------------------

TEST_P(EngineContractTest, ReleasedPartitionsLeaveTheJob) {
  ASSERT_TRUE(engine()->Claim("store-a", false).ok());
  const std::vector<std::string> days = {"2025-01-01", "2025-01-02",
                                         "2025-01-03"};
  ASSERT_NO_FATAL_FAILURE(PublishRevenue("bf-1", days));
  const JobLayout layout = RevenueLayout("bf-2", days);
  ASSERT_TRUE(engine()->PrepareJob(layout).ok());
  for (const std::string& day : days) {
    ASSERT_TRUE(engine()
                    ->StagePartition("bf-2", revenue_, day, RevenueInputs(day))
                    .ok());
  }
  // Not prepared: refused.
  EXPECT_EQ(
      engine()->ReleasePartitions("bf-9", revenue_, {"2025-01-01"}).code(),
      absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(engine()->ReleasePartitions("bf-2", revenue_, {"1 Jan"}).code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(
      engine()
          ->ReleasePartitions("bf-2", revenue_, {"2025-01-01", "2025-01-03"})
          .ok());
  // Idempotent.
  ASSERT_TRUE(
      engine()->ReleasePartitions("bf-2", revenue_, {"2025-01-01"}).ok());
  auto report = engine()->ValidateStaged("bf-2", revenue_);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_THAT(report->rows_by_partition, ElementsAre(Pair("2025-01-02", 2)));
  EXPECT_EQ(report->rows, 2);
  // No longer the job's: StagePartition refuses it.
  EXPECT_EQ(engine()
                ->StagePartition("bf-2", revenue_, "2025-01-01",
                                 RevenueInputs("2025-01-01"))
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);

  // A restart between a release and the next PrepareJob: the layout the
  // job prepares with leaves them out, and releasing again cleans up.
  ASSERT_NO_FATAL_FAILURE(Restart());
  ASSERT_TRUE(engine()->Claim("store-a", false).ok());
  const JobLayout kept = RevenueLayout("bf-2", {"2025-01-02"});
  ASSERT_TRUE(engine()->PrepareJob(kept).ok());
  ASSERT_TRUE(
      engine()
          ->ReleasePartitions("bf-2", revenue_, {"2025-01-01", "2025-01-03"})
          .ok());
  // Publish of what is left replaces that partition only, and its rollback
  // copy holds only it.
  ASSERT_TRUE(engine()->Publish(kept).ok());
  EXPECT_THAT(*engine()->CountRowsByPartition(revenue_),
              ElementsAre(Pair("2025-01-01", 2), Pair("2025-01-02", 2),
                          Pair("2025-01-03", 1)));
  RollbackSpec spec;
  spec.layout = kept;
  auto rolled = engine()->Rollback(spec);
  ASSERT_TRUE(rolled.ok()) << rolled.status();
  ASSERT_EQ(rolled->partitions.size(), 1u);
  EXPECT_EQ(rolled->partitions[0].partition, "2025-01-02");
  EXPECT_EQ(rolled->rows, 2);
}

TEST_P(EngineContractTest, AReleasedPartitionIsReadFromThePublishedTable) {
  ASSERT_TRUE(engine()->Claim("store-a", false).ok());
  ASSERT_NO_FATAL_FAILURE(PublishRevenue("bf-1", {"2025-01-01"}));
  // bf-2 recomputes daily_revenue and a dependent of it (identity).
  DatasetSpec dependent = revenue_;
  dependent.name = "revenue_copy";
  dependent.table = "revenue_copy";
  dependent.upstream = {{"daily_revenue", Mapping::kIdentity}};
  dependent.transform =
      "SELECT ds, region, revenue, orders FROM daily_revenue WHERE ds >= "
      ":partition_start AND ds < :partition_end";
  JobLayout layout;
  layout.job_id = "bf-2";
  layout.items = {{&revenue_, {"2025-01-01"}}, {&dependent, {"2025-01-01"}}};
  layout.pinned = {&customers_};
  ASSERT_TRUE(engine()->PrepareJob(layout).ok());
  auto staged = engine()->StagePartition("bf-2", revenue_, "2025-01-01",
                                         RevenueInputs("2025-01-01"));
  ASSERT_TRUE(staged.ok()) << staged.status();
  ASSERT_TRUE(
      engine()->ReleasePartitions("bf-2", revenue_, {"2025-01-01"}).ok());
  // The dependent reads the published rows (2 of them), not the job's
  // (deleted) staging, and fingerprints them as staging did.
  auto read =
      engine()->StagePartition("bf-2", dependent, "2025-01-01",
                               {{&revenue_, std::string("2025-01-01")}});
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->inputs.size(), 1u);
  EXPECT_EQ(read->inputs[0].rows, 2);
  EXPECT_EQ(read->inputs[0].fingerprint, staged->output_fingerprint);
}

// The published fingerprint a rerun compares with is the same hash as the
// staged one: whatever order the transform returns rows in, and for an
// empty partition, and as a rollback measures restored rows.
TEST_P(EngineContractTest, FingerprintsIgnoreRowOrderAndMatchRestoredRows) {
  if (GetParam() != EngineKind::kSqlite) GTEST_SKIP() << "SQLite only";
  ASSERT_TRUE(engine()->Claim("store-a", false).ok());
  DatasetSpec reversed = revenue_;
  reversed.transform = revenue_.transform + " ORDER BY 2 DESC";
  DatasetSpec forward = revenue_;
  forward.transform = revenue_.transform + " ORDER BY 2 ASC";
  ASSERT_TRUE(engine()->PrepareJob(RevenueLayout("bf-1", {"2025-01-01"})).ok());
  ASSERT_TRUE(engine()->PrepareJob(RevenueLayout("bf-2", {"2025-01-01"})).ok());
  auto a = engine()->StagePartition("bf-1", forward, "2025-01-01",
                                    RevenueInputs("2025-01-01"));
  auto b = engine()->StagePartition("bf-2", reversed, "2025-01-01",
                                    RevenueInputs("2025-01-01"));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->rows_written, 2);
  EXPECT_EQ(a->output_fingerprint, b->output_fingerprint);
  ASSERT_TRUE(engine()->Publish(RevenueLayout("bf-1", {"2025-01-01"})).ok());

  // An empty partition (no orders on 01-04).
  ASSERT_TRUE(
      engine()
          ->PrepareJob(RevenueLayout("bf-3", {"2025-01-01", "2025-01-04"}))
          .ok());
  auto empty = engine()->StagePartition("bf-3", revenue_, "2025-01-04",
                                        RevenueInputs("2025-01-04"));
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ(empty->rows_written, 0);
  EXPECT_EQ(empty->output_fingerprint, "0000000000000000:0");
  auto again = engine()->StagePartition("bf-3", revenue_, "2025-01-01",
                                        RevenueInputs("2025-01-01"));
  ASSERT_TRUE(again.ok());
  ASSERT_TRUE(engine()
                  ->Publish(RevenueLayout("bf-3", {"2025-01-01", "2025-01-04"}))
                  .ok());
  // Rolling bf-3 back restores bf-1's rows of 01-01 and the empty 01-04:
  // measured with the same hash as staging gave them.
  RollbackSpec spec;
  spec.layout = RevenueLayout("bf-3", {"2025-01-01", "2025-01-04"});
  auto restored = engine()->Rollback(spec);
  ASSERT_TRUE(restored.ok()) << restored.status();
  ASSERT_EQ(restored->partitions.size(), 2u);
  EXPECT_EQ(restored->partitions[0].fingerprint, a->output_fingerprint);
  EXPECT_EQ(restored->partitions[1].fingerprint, empty->output_fingerprint);
}

TEST_P(EngineContractTest, ProfilesAndDescriptionsFollowTheSameRules) {
  ASSERT_TRUE(engine()->Claim("store-a", false).ok());
  // No table yet: nothing published, no columns.
  auto none = engine()->DescribeTable(revenue_);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->has_value());
  ASSERT_NO_FATAL_FAILURE(PublishRevenue("bf-1", {"2025-01-01"}));
  auto table = engine()->DescribeTable(revenue_);
  ASSERT_TRUE(table.ok() && table->has_value());
  std::vector<std::string> names;
  for (const ColumnSpec& c : **table) names.push_back(c.name);
  EXPECT_THAT(names, ElementsAre("ds", "region", "revenue", "orders"));

  const JobLayout layout = RevenueLayout("bf-2");
  ASSERT_TRUE(engine()->PrepareJob(layout).ok());
  for (const std::string day : {"2025-01-01", "2025-01-02"}) {
    ASSERT_TRUE(engine()
                    ->StagePartition("bf-2", revenue_, day, RevenueInputs(day))
                    .ok());
  }
  ProfileRequest request;
  request.measures = {"revenue"};
  request.null_columns = {"region"};
  auto staged = engine()->ProfileStaged("bf-2", revenue_, request);
  ASSERT_TRUE(staged.ok()) << staged.status();
  auto counted = engine()->ValidateStaged("bf-2", revenue_);
  ASSERT_TRUE(counted.ok()) << counted.status();
  ASSERT_EQ(staged->size(), counted->rows_by_partition.size());
  for (const auto& [day, p] : *staged) {
    EXPECT_EQ(p.rows, counted->rows_by_partition.at(day)) << day;
    EXPECT_TRUE(p.sums().count("revenue")) << day;
    EXPECT_EQ(p.nulls().at("region").count, 0) << day;
  }
  // Published rows of the job's partitions only: 01 was published, 02 not.
  auto published = engine()->ProfilePublished("bf-2", revenue_, request);
  ASSERT_TRUE(published.ok()) << published.status();
  ASSERT_EQ(published->size(), 1u);
  EXPECT_EQ(published->at("2025-01-01").rows,
            engine()->CountRowsByPartition(revenue_)->at("2025-01-01"));
  // Assertions answer per partition of the job.
  auto asserted = engine()->RunAssertion(
      "bf-2", revenue_, "SELECT * FROM daily_revenue WHERE 0", 3);
  ASSERT_TRUE(asserted.ok()) << asserted.status();
  EXPECT_THAT(*asserted, ::testing::SizeIs(2));
  // Calls that need a prepared job refuse another.
  EXPECT_EQ(engine()->ProfileStaged("bf-9", revenue_, request).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace storage_engine_contract_test
}  // namespace backfill
