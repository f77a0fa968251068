#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/sql/job_registry.h"

namespace backfill {
namespace storage_sql_job_registry_test {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

class JobRegistryTest : public ::testing::Test {
 protected:
  JobRegistryTest() {
    daily_.name = "daily";
    rollup_.name = "rollup";
  }

  std::shared_ptr<const sql::JobRegistry::Job> Registered(
      std::vector<JobLayout::Item> items) {
    JobLayout layout;
    layout.job_id = "bf-1";
    layout.items = std::move(items);
    registry_.Register(layout, /*keep_pins=*/false);
    absl::StatusOr<std::shared_ptr<const sql::JobRegistry::Job>> job =
        registry_.Find("bf-1");
    EXPECT_TRUE(job.ok()) << job.status();
    return *job;
  }

  DatasetSpec daily_, rollup_;
  sql::JobRegistry registry_;
};

TEST_F(JobRegistryTest, KnowsThePartitionsOfASortedPlan) {
  auto job = Registered({{&daily_, {"2025-01-30", "2025-01-31", "2025-02-01"}},
                         {&rollup_, {"2025-01", "2025-02"}}});
  EXPECT_TRUE(job->Recomputes("daily"));
  EXPECT_FALSE(job->Recomputes("orders"));
  EXPECT_TRUE(job->Has("daily", "2025-01-31"));
  EXPECT_TRUE(job->Has("daily", "2025-02-01"));
  EXPECT_FALSE(job->Has("daily", "2025-01-29"));
  EXPECT_FALSE(job->Has("daily", "2025-02-02"));
  EXPECT_FALSE(job->Has("daily", "2025-01"));  // the rollup's
  EXPECT_FALSE(job->Has("orders", "2025-01-31"));
  EXPECT_THAT(job->Partitions("rollup"), ElementsAre("2025-01", "2025-02"));
  EXPECT_THAT(job->Partitions("orders"), IsEmpty());
}

// A layout's partitions out of order, repeated, or split across two items
// of one dataset: the job has each once, sorted.
TEST_F(JobRegistryTest, SortsPartitionsGivenOutOfOrderOrInTwoItems) {
  auto job = Registered({{&daily_, {"2025-01-03", "2025-01-01", "2025-01-03"}},
                         {&rollup_, {"2025-01"}},
                         {&daily_, {"2025-01-02", "2025-01-01"}}});
  EXPECT_THAT(job->Partitions("daily"),
              ElementsAre("2025-01-01", "2025-01-02", "2025-01-03"));
  for (const char* p : {"2025-01-01", "2025-01-02", "2025-01-03"}) {
    EXPECT_TRUE(job->Has("daily", p)) << p;
  }
  EXPECT_FALSE(job->Has("daily", "2025-01-04"));

  auto sorted_then_unsorted = Registered(
      {{&daily_, {"2025-01-01", "2025-01-05"}}, {&daily_, {"2025-01-03"}}});
  EXPECT_THAT(sorted_then_unsorted->Partitions("daily"),
              ElementsAre("2025-01-01", "2025-01-03", "2025-01-05"));
}

TEST_F(JobRegistryTest, ReleasedPartitionsAreNoLongerTheJobs) {
  auto job = Registered(
      {{&daily_, {"2025-01-01", "2025-01-02", "2025-01-03"}}, {&rollup_, {}}});
  job->Release("daily", {"2025-01-02", "2025-01-09"});
  EXPECT_FALSE(job->Has("daily", "2025-01-02"));
  EXPECT_TRUE(job->Has("daily", "2025-01-03"));
  EXPECT_THAT(job->Partitions("daily"),
              ElementsAre("2025-01-01", "2025-01-03"));
  EXPECT_TRUE(job->Recomputes("rollup"));
  EXPECT_THAT(job->Partitions("rollup"), IsEmpty());
}

}  // namespace
}  // namespace storage_sql_job_registry_test
}  // namespace backfill
