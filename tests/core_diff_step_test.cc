// Tests of the diff step (core/run/diff_step.h) on the fake engine: every
// partition's diff lands in its own place, in layout order, whatever the
// number of chunks compared at a time, and no more than a chunk per thread
// is in memory at once; a partition's own failure is kept with it, and a
// storage failure that may pass, or the sink's, fails the step. Recorded
// with the job (RecordDiff), the diff stored is each partition's own diff;
// a failure that may pass is retried until it passes, the diff computed
// again only when computing it failed, the diff stored before read until
// the new one is stored whole, and no file is left behind.

#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/civil_time.h"
#include "absl/time/clock.h"
#include "core/run/diff_step.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/diff_text.h"
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

TEST_F(DiffStepTest, AtMostAChunkPerThreadIsInMemory) {
  for (int parallelism : {1, 2, 3}) {
    SCOPED_TRACE(parallelism);
    // A partition's diff is alive from when the engine computes it until
    // the sink has it (and drops it).
    std::atomic<int64_t> alive{0};
    std::atomic<int64_t> peak{0};
    engine_.SetHook([&](const FakeEngine::Call& call) {
      if (call.method == "DiffPartition") {
        const int64_t now = ++alive;
        int64_t was = peak.load();
        while (now > was && !peak.compare_exchange_weak(was, now)) {
        }
      }
      return absl::OkStatus();
    });
    absl::Mutex mu;
    std::vector<std::string> chunks(5);  // 2500 + 1100 partitions: 3 + 2
    int64_t handed = 0;
    absl::Status diffed = DiffStaging(
        &engine_, layout_, parallelism,
        [&](size_t chunk, size_t dataset,
            std::vector<PartitionDiff>&& partitions) {
          // A slow sink: threads that did not wait for it would run ahead.
          absl::SleepFor(absl::Milliseconds(20));
          absl::MutexLock lock(&mu);
          EXPECT_LT(chunk, chunks.size());
          EXPECT_LE(partitions.size(), kDiffChunk);
          EXPECT_TRUE(chunks[chunk].empty()) << "chunk " << chunk << " twice";
          chunks[chunk] = absl::StrCat(dataset, ":", partitions.front().dataset,
                                       "/", partitions.front().partition, "+",
                                       partitions.size());
          handed += static_cast<int64_t>(partitions.size());
          alive -= static_cast<int64_t>(partitions.size());
          return absl::OkStatus();
        });
    ASSERT_TRUE(diffed.ok()) << diffed;
    EXPECT_EQ(handed, 2500 + 1100);
    EXPECT_LE(peak.load(), parallelism * static_cast<int64_t>(kDiffChunk));
    EXPECT_THAT(chunks, ::testing::ElementsAre(
                            absl::StrCat("0:hourly/", Day(0), "+1024"),
                            absl::StrCat("0:hourly/", Day(1024), "+1024"),
                            absl::StrCat("0:hourly/", Day(2048), "+452"),
                            absl::StrCat("1:daily/", Day(0), "+1024"),
                            absl::StrCat("1:daily/", Day(1024), "+76")));
  }
}

TEST_F(DiffStepTest, TheSinksFailureEndsTheStep) {
  int calls = 0;
  absl::Status diffed = DiffStaging(
      &engine_, layout_, 1, [&](size_t, size_t, std::vector<PartitionDiff>&&) {
        return ++calls == 2 ? absl::ResourceExhaustedError("disk is full")
                            : absl::OkStatus();
      });
  EXPECT_EQ(diffed, absl::ResourceExhaustedError("disk is full"));
  EXPECT_EQ(calls, 2);
  // The chunks after it were not compared.
  EXPECT_EQ(engine_.calls("DiffPartition"), 2 * 1024);
}

class RecordDiffTest : public testing::StepFixture {
 protected:
  void SetUp() override {
    scratch_ = ::testing::TempDir() + "/record_diff_XXXXXX";
    ASSERT_NE(mkdtemp(scratch_.data()), nullptr);
    options().scratch_dir = scratch_;
    options().workers = 3;
  }
  void TearDown() override { std::filesystem::remove_all(scratch_); }

  // A job of daily's 2,500 days from 2020-01-01 (three chunks), each
  // staged with a few rows and, but every third, published with others.
  ActiveJob* LargeJob() {
    const Job created = CreateJob(Request("daily", Day(0), Day(2500)));
    ActiveJob* job = Hold(created, JobPhase::kFinishing);
    EXPECT_EQ(job->layout.items.size(), 1u);
    for (int i = 0; i < 2500; ++i) {
      engine_.SetStagedRows(created.id, "daily", Day(i), i % 7);
      if (i % 3 != 0) engine_.SetPublishedRows("daily", Day(i), i % 5);
    }
    return job;
  }

  // The stored diff of job `id`, one line a partition.
  std::vector<std::string> StoredDiff(const std::string& id) {
    std::vector<std::string> out;
    absl::StatusOr<std::optional<JobDiff>> diff =
        store_.GetJobDiff(id, "", /*with_samples=*/true);
    EXPECT_TRUE(diff.ok()) << diff.status();
    if (!diff.ok() || !diff->has_value()) return out;
    for (const DatasetDiff& d : (*diff)->datasets) {
      for (const PartitionDiff& p : d.partitions)
        out.push_back(testing::PartitionDiffText(p));
    }
    return out;
  }

  std::string scratch_;
};

TEST_F(RecordDiffTest, TheStoredDiffIsEachPartitionsOwnDiff) {
  ActiveJob* job = LargeJob();
  const JobLayout& layout = job->layout;
  ASSERT_EQ(layout.items[0].partitions.size(), 2500u);
  ASSERT_TRUE(RecordDiff(ctx(), job->job.id, layout).ok());

  // Each partition compared on its own, in layout order.
  std::vector<std::string> expected;
  for (const std::string& p : layout.items[0].partitions) {
    absl::StatusOr<PartitionDiff> diff = engine_.DiffPartition(
        job->job.id, *layout.items[0].dataset, p, kDiffStoredSamples);
    ASSERT_TRUE(diff.ok()) << diff.status();
    diff->dataset = "daily";
    diff->partition = p;
    expected.push_back(testing::PartitionDiffText(*diff));
  }
  EXPECT_EQ(StoredDiff(job->job.id), expected);
  absl::StatusOr<std::optional<JobDiff>> diff =
      store_.GetJobDiff(job->job.id, "", false);
  ASSERT_TRUE(diff.ok() && diff->has_value());
  EXPECT_EQ((*diff)->computed_at, clock_.Now());
  // Nothing is left in the scratch directory.
  EXPECT_TRUE(std::filesystem::is_empty(scratch_));
}

TEST_F(RecordDiffTest, AStoreFailureIsRetriedWithoutComputingTheDiffAgain) {
  ActiveJob* job = LargeJob();
  store_.FailNextWrites(2, absl::UnavailableError("disk I/O error"));
  const int64_t before = engine_.calls("DiffPartition");
  ASSERT_TRUE(RecordDiff(ctx(), job->job.id, job->layout).ok());
  EXPECT_EQ(engine_.calls("DiffPartition") - before, 2500);
  EXPECT_EQ(store_.write_calls("ReplaceJobDiff"), 3);
  EXPECT_GE(observer_.failing(JobObserver::Storage::kStateStore), 1);
  EXPECT_EQ(StoredDiff(job->job.id).size(), 2500u);
}

TEST_F(RecordDiffTest, TheDiffStoredBeforeIsReadUntilTheNewOneIsWhole) {
  ActiveJob* job = LargeJob();
  const std::string id = job->job.id;
  JobDiff old;
  old.job_id = id;
  old.computed_at = absl::FromUnixSeconds(1);
  old.datasets.resize(1);
  old.datasets[0].dataset = "daily";
  PartitionDiff only;
  only.partition = Day(0);
  only.added = 42;
  old.datasets[0].partitions = {only};
  ASSERT_TRUE(store_.ReplaceJobDiff(old).ok());
  const std::vector<std::string> stored_before = StoredDiff(id);
  ASSERT_EQ(stored_before.size(), 1u);

  // While the diff is computed (a partition of the last chunk failing
  // once with a full disk), readers see the old one.
  std::atomic<int> failures{1};
  std::atomic<int> reads_of_old{0};
  std::atomic<int> reads_of_other{0};
  engine_.SetHook([&](const FakeEngine::Call& call) -> absl::Status {
    if (call.method != "DiffPartition") return absl::OkStatus();
    if (call.partition == Day(1024) || call.partition == Day(2400)) {
      (StoredDiff(id) == stored_before ? reads_of_old : reads_of_other)++;
    }
    if (call.partition == Day(2400) && failures-- > 0) {
      return absl::ResourceExhaustedError("database or disk is full");
    }
    return absl::OkStatus();
  });
  ASSERT_TRUE(RecordDiff(ctx(), id, job->layout).ok());
  EXPECT_EQ(failures.load(), -1);
  EXPECT_GE(reads_of_old.load(), 3);  // two attempts, each passing both
  EXPECT_EQ(reads_of_other.load(), 0);
  EXPECT_GE(observer_.failing(JobObserver::Storage::kWarehouse), 1);
  EXPECT_EQ(StoredDiff(id).size(), 2500u);
  EXPECT_TRUE(std::filesystem::is_empty(scratch_));
}

class RecordDiffRetryTest : public testing::StepFixture {};

TEST_F(RecordDiffRetryTest,
       AStorageFailureThatMayPassIsRetriedThenTheDiffStored) {
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
