// Tests of the diff step (core/run/diff_step.h) on the fake engine: every
// partition's diff lands in its own place, in layout order, whatever the
// number of chunks compared at a time; a partition's own failure is kept
// with it, and a storage failure that may pass fails the step; recorded
// with the job (RecordDiff), such a failure is retried until it passes.

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/civil_time.h"
#include "core/run/diff_step.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/fake_engine.h"
#include "tests/testing/step_fixture.h"

namespace backfill {
namespace core_diff_step_test {
namespace {

using testing::FakeEngine;
using ::testing::HasSubstr;

// The i-th day from 2020-01-01, as a day partition.
std::string Day(int i) {
  return absl::FormatCivilTime(absl::CivilDay(2020, 1, 1) + i);
}

class DiffStepTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Two datasets, each larger than a chunk and not a multiple of one.
    const int sizes[] = {2500, 1100};
    const char* names[] = {"hourly", "daily"};
    for (int d = 0; d < 2; ++d) {
      specs_[d].name = names[d];
      specs_[d].table = names[d];
      specs_[d].kind = DatasetKind::kDerived;
      specs_[d].partition = PartitionSpec{"ds", Grain::kDay, {}};
      JobLayout::Item item;
      item.dataset = &specs_[d];
      for (int i = 0; i < sizes[d]; ++i) {
        const std::string p = Day(i);
        item.partitions.push_back(p);
        engine_.SetStagedRows("bf-1", names[d], p, After(d, i));
        if (Before(d, i) > 0)
          engine_.SetPublishedRows(names[d], p, Before(d, i));
      }
      layout_.items.push_back(std::move(item));
    }
    layout_.job_id = "bf-1";
  }
  static int64_t After(int d, int i) { return (i + d) % 7; }
  static int64_t Before(int d, int i) { return (i * 3 + d) % 5; }

  DatasetSpec specs_[2];
  JobLayout layout_;
  FakeEngine engine_;
};

TEST_F(DiffStepTest, EveryPartitionInItsPlaceWhateverTheParallelism) {
  for (int parallelism : {1, 2, 4, 16}) {
    absl::StatusOr<JobDiff> diff =
        DiffStaging(&engine_, layout_, absl::FromUnixSeconds(7), parallelism);
    ASSERT_TRUE(diff.ok()) << diff.status();
    EXPECT_EQ(diff->job_id, "bf-1");
    EXPECT_EQ(diff->computed_at, absl::FromUnixSeconds(7));
    ASSERT_EQ(diff->datasets.size(), 2u);
    for (int d = 0; d < 2; ++d) {
      const DatasetDiff& ds = diff->datasets[d];
      EXPECT_EQ(ds.dataset, specs_[d].name);
      ASSERT_EQ(ds.partitions.size(), layout_.items[d].partitions.size());
      for (size_t i = 0; i < ds.partitions.size(); ++i) {
        const PartitionDiff& p = ds.partitions[i];
        const int64_t after = After(d, static_cast<int>(i));
        const int64_t before = Before(d, static_cast<int>(i));
        ASSERT_EQ(p.partition, Day(static_cast<int>(i)))
            << "parallelism " << parallelism;
        EXPECT_EQ(p.dataset, specs_[d].name);
        EXPECT_EQ(p.rows_after, after) << p.partition;
        EXPECT_EQ(p.rows_before, before) << p.partition;
        EXPECT_EQ(p.added, std::max<int64_t>(0, after - before));
        EXPECT_EQ(p.removed, std::max<int64_t>(0, before - after));
        EXPECT_TRUE(p.error.empty()) << p.error;
      }
    }
  }
  // Each partition compared once per run.
  EXPECT_EQ(engine_.calls("DiffPartition"), 4 * (2500 + 1100));
}

TEST_F(DiffStepTest, APartitionsOwnFailureStaysWithIt) {
  engine_.SetHook([](const FakeEngine::Call& call) -> absl::Status {
    if (call.method == "DiffPartition" && call.dataset == "daily" &&
        call.partition == Day(1050)) {
      return absl::InvalidArgumentError("cannot compare this one");
    }
    return absl::OkStatus();
  });
  absl::StatusOr<JobDiff> diff =
      DiffStaging(&engine_, layout_, absl::FromUnixSeconds(7), 3);
  ASSERT_TRUE(diff.ok()) << diff.status();
  const PartitionDiff& bad = diff->datasets[1].partitions[1050];
  EXPECT_EQ(bad.partition, Day(1050));
  EXPECT_EQ(bad.dataset, "daily");
  EXPECT_EQ(bad.error, "cannot compare this one");
  EXPECT_EQ(diff->datasets[1].partitions[1049].rows_after, After(1, 1049));
  EXPECT_TRUE(diff->datasets[1].partitions[1051].error.empty());
}

TEST_F(DiffStepTest, AStorageFailureThatMayPassFailsTheStep) {
  for (absl::StatusCode code :
       {absl::StatusCode::kResourceExhausted, absl::StatusCode::kUnavailable}) {
    engine_.SetHook([code](const FakeEngine::Call& call) -> absl::Status {
      if (call.method == "DiffPartition" && call.partition == Day(2100)) {
        return absl::Status(code, "database or disk is full");
      }
      return absl::OkStatus();
    });
    absl::StatusOr<JobDiff> diff =
        DiffStaging(&engine_, layout_, absl::FromUnixSeconds(7), 4);
    ASSERT_FALSE(diff.ok());
    EXPECT_EQ(diff.status().code(), code);
    EXPECT_THAT(diff.status().message(), HasSubstr("disk is full"));
  }
}

class RecordDiffTest : public testing::StepFixture {};

TEST_F(RecordDiffTest, AStorageFailureThatMayPassIsRetriedThenTheDiffStored) {
  engine_.SetPublishedRows("daily", "2025-01-01", 3);
  const Job created = CreateJob(Request("daily", "2025-01-01", "2025-01-03"));
  ActiveJob* job = Hold(created, JobPhase::kFinishing);
  engine_.SetStagedRows(created.id, "daily", "2025-01-01", 5);
  engine_.SetStagedRows(created.id, "daily", "2025-01-02", 1);
  int failures = 2;
  engine_.SetHook([&failures](const FakeEngine::Call& call) {
    if (call.method == "DiffPartition" && failures > 0) {
      --failures;
      return absl::ResourceExhaustedError("database or disk is full");
    }
    return absl::OkStatus();
  });
  ASSERT_TRUE(RecordDiff(ctx(), created.id, job->layout).ok());
  EXPECT_EQ(failures, 0);
  EXPECT_GE(observer_.failing(JobObserver::Storage::kWarehouse), 1);
  absl::StatusOr<std::optional<JobDiff>> diff =
      store_.GetJobDiff(created.id, "", false);
  ASSERT_TRUE(diff.ok() && diff->has_value());
  ASSERT_EQ((*diff)->datasets.size(), 1u);
  const std::vector<PartitionDiff>& partitions =
      (*diff)->datasets[0].partitions;
  ASSERT_EQ(partitions.size(), 2u);
  EXPECT_EQ(partitions[0].partition, "2025-01-01");
  EXPECT_EQ(partitions[0].added, 2);  // 3 published, 5 staged
  EXPECT_EQ(partitions[1].added, 1);
}

}  // namespace
}  // namespace core_diff_step_test
}  // namespace backfill
