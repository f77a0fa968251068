// Engine conformance of what jobs leave in the warehouse besides the
// published rows, on every warehouse of ConformanceWarehouses(): the jobs
// with staging and the rollback copies are listed for the state store's
// job ids ("bf-<digits>") only, copies by job number then dataset;
// DropStaging removes a job's staging and keeps its rollback copies;
// DropRollbackCopies drops exactly the copies named, skipping those
// already gone. What exists is read with plain SQL through the harness.

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/ports/engine.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/engine_conformance.h"

namespace backfill {
namespace storage_engine_conformance_artifacts_test {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::Not;

class ArtifactsConformanceTest : public testing::ConformanceTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(testing::ConformanceTest::SetUp());
    Exec(
        "CREATE TABLE events (day TEXT NOT NULL, v BIGINT NOT NULL); "
        "INSERT INTO events VALUES ('2025-01-01', 1), ('2025-01-01', 2), "
        "('2025-01-02', 5)");
    events_.name = "events";
    events_.kind = DatasetKind::kSource;
    events_.table = "events";
    events_.partition = PartitionSpec{"day", Grain::kDay, {}};

    daily_.name = "daily";
    daily_.kind = DatasetKind::kDerived;
    daily_.table = "daily";
    daily_.partition = PartitionSpec{"ds", Grain::kDay, {}};
    daily_.upstream = {{"events", Mapping::kIdentity}};
    daily_.transform =
        "SELECT day AS ds, SUM(v) AS total FROM events WHERE day >= "
        ":partition_start AND day < :partition_end GROUP BY day";
    daily_.columns = {{"ds", "TEXT"}, {"total", "BIGINT"}};
    daily_.primary_key = {"ds"};
  }

  // Prepares, stages and publishes `day` of daily for `job`.
  void Run(const std::string& job, const std::string& day) {
    JobLayout layout;
    layout.job_id = job;
    layout.items.push_back({&daily_, {day}});
    ASSERT_TRUE(engine()->PrepareJob(layout).ok());
    auto staged = engine()->StagePartition(job, daily_, day, {{&events_, day}});
    ASSERT_TRUE(staged.ok()) << staged.status();
    const absl::Status published = engine()->Publish(layout);
    ASSERT_TRUE(published.ok()) << published;
  }

  bool CopyExists(const std::string& job) {
    return Exists(warehouse().RollbackCopyTable(job, "daily"));
  }

  DatasetSpec events_, daily_;
};

INSTANTIATE_TEST_SUITE_P(Warehouses, ArtifactsConformanceTest,
                         ::testing::ValuesIn(testing::ConformanceWarehouses()),
                         testing::WarehouseParamName);

TEST_P(ArtifactsConformanceTest, StagingAndCopiesAreListedAndDroppedByJob) {
  ASSERT_NO_FATAL_FAILURE(Run("bf-10", "2025-01-01"));
  ASSERT_NO_FATAL_FAILURE(Run("bf-2", "2025-01-01"));
  ASSERT_NO_FATAL_FAILURE(Run("adhoc-1", "2025-01-02"));
  EXPECT_THAT(Rows("SELECT ds, total FROM daily ORDER BY 1"),
              ElementsAre("2025-01-01|3", "2025-01-02|5"));
  ASSERT_TRUE(CopyExists("bf-10"));
  ASSERT_TRUE(CopyExists("bf-2"));
  ASSERT_TRUE(CopyExists("adhoc-1"));
  ASSERT_THAT(StagingObjects("adhoc-1"), Not(IsEmpty()));

  auto jobs = engine()->ListJobsWithStaging();
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  EXPECT_THAT(*jobs, ElementsAre("bf-10", "bf-2"));
  auto copies = engine()->ListRollbackCopies();
  ASSERT_TRUE(copies.ok()) << copies.status();
  ASSERT_EQ(copies->size(), 2u);
  EXPECT_EQ((*copies)[0].job_id, "bf-2");
  EXPECT_EQ((*copies)[1].job_id, "bf-10");
  EXPECT_EQ((*copies)[0].dataset, "daily");
  EXPECT_EQ((*copies)[1].dataset, "daily");

  // The staging goes; the rollback copy stays for Rollback.
  ASSERT_TRUE(engine()->DropStaging("bf-2").ok());
  EXPECT_THAT(StagingObjects("bf-2"), IsEmpty());
  EXPECT_THAT(StagingObjects("bf-10"), Not(IsEmpty()));
  EXPECT_TRUE(CopyExists("bf-2"));
  jobs = engine()->ListJobsWithStaging();
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  EXPECT_THAT(*jobs, ElementsAre("bf-10"));

  // Exactly the copies named; one already gone is skipped.
  ASSERT_TRUE(engine()
                  ->DropRollbackCopies({{"bf-2", "daily"}, {"bf-7", "daily"}})
                  .ok());
  EXPECT_FALSE(CopyExists("bf-2"));
  EXPECT_TRUE(CopyExists("bf-10"));
  EXPECT_TRUE(CopyExists("adhoc-1"));
  copies = engine()->ListRollbackCopies();
  ASSERT_TRUE(copies.ok()) << copies.status();
  ASSERT_EQ(copies->size(), 1u);
  EXPECT_EQ((*copies)[0].job_id, "bf-10");
  EXPECT_EQ(Count("daily"), 2);
}

}  // namespace
}  // namespace storage_engine_conformance_artifacts_test
}  // namespace backfill
