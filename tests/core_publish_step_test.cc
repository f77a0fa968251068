// Tests of the publish step (core/run/publish_step.h) on the fake engine
// and the in-memory store, without a runner: a publish replaces every
// partition of the job at once and records its lineage with the move to
// CONFIRMING; a publication the warehouse committed before a crash is
// recorded, not repeated; a job resumed into PUBLISHING checks that its
// staging is intact first; retention drops the rollback copies its policy
// lets go of, but never those of a job being rolled back.

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "core/run/publish_step.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/step_fixture.h"

namespace backfill {
namespace core_publish_step_test {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

class PublishStepTest : public testing::StepFixture {
 protected:
  // A validated PUBLISHING job of daily over [from, to).
  ActiveJob* Publishing(const std::string& from, const std::string& to) {
    return PublishingJob(Request("daily", from, to));
  }

  int64_t Published(const std::string& job_id) {
    int64_t n = 0;
    for (const testing::FakeEngine::Call& c : engine_.call_log()) {
      n += c.method == "Publish" && c.job_id == job_id;
    }
    return n;
  }
};

TEST_F(PublishStepTest, APublishReplacesThePartitionsAndRecordsLineage) {
  engine_.SetPublishedRows("daily", "2025-01-01", 7);
  ActiveJob* job = Publishing("2025-01-01", "2025-01-03");
  const std::string id = job->job.id;
  ASSERT_TRUE(PublishJob(ctx(), job).ok());
  EXPECT_EQ(Published(id), 1);
  EXPECT_EQ(engine_.PublishedRows("daily", "2025-01-01"), 1);
  EXPECT_EQ(engine_.PublishedRows("daily", "2025-01-02"), 1);
  const Job stored = Stored(id);
  EXPECT_EQ(stored.state, JobState::kConfirming);
  EXPECT_EQ(stored.message, "published 2 partitions (2 rows) atomically");
  for (const char* partition : {"2025-01-01", "2025-01-02"}) {
    absl::StatusOr<std::vector<LineageRecord>> lineage =
        store_.GetLineage("daily", partition);
    ASSERT_TRUE(lineage.ok());
    ASSERT_EQ(lineage->size(), 1u);
    EXPECT_EQ(lineage->front().job_id, id);
    EXPECT_EQ(lineage->front().output_fingerprint,
              std::string("fp:") + partition);
    EXPECT_EQ(lineage->front().reason, "test");
  }
  {
    absl::MutexLock lock(jobs_.mu());
    EXPECT_EQ(job->state, JobState::kConfirming);
  }
  ASSERT_EQ(observer_.published().count(id), 1u);
  const std::vector<JobObserver::PublishedDataset> published =
      observer_.published().at(id);
  ASSERT_EQ(published.size(), 1u);
  EXPECT_EQ(published[0].dataset, "daily");
  EXPECT_EQ(published[0].partitions, 2);
  EXPECT_EQ(published[0].rows, 2);
}

TEST_F(PublishStepTest, APublicationCommittedBeforeACrashIsNotRepeated) {
  ActiveJob* job = Publishing("2025-01-01", "2025-01-03");
  const std::string id = job->job.id;
  engine_.AddMarker(id, "");  // the warehouse committed; the store did not
  ASSERT_TRUE(PublishJob(ctx(), job).ok());
  EXPECT_EQ(Published(id), 0);
  EXPECT_EQ(Stored(id).state, JobState::kConfirming);
  absl::StatusOr<std::vector<LineageRecord>> lineage =
      store_.GetLineage("daily", "2025-01-01");
  ASSERT_TRUE(lineage.ok());
  ASSERT_EQ(lineage->size(), 1u);
  EXPECT_EQ(lineage->front().job_id, id);
}

TEST_F(PublishStepTest, AResumedPublishChecksItsStagingFirst) {
  ActiveJob* job = Publishing("2025-01-01", "2025-01-03");
  const std::string id = job->job.id;
  {
    // Resumed after a restart: this process did not validate it.
    absl::MutexLock lock(jobs_.mu());
    job->validated = false;
  }
  engine_.SetStagedRows(id, "daily", "2025-01-02", 0);
  absl::Status s = PublishJob(ctx(), job);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(),
              HasSubstr("staging changed before publishing: staged rows were "
                        "lost (daily: 2025-01-02 (staged 0, checkpoint 1))"));
  EXPECT_EQ(Published(id), 0);
  EXPECT_EQ(Stored(id).state, JobState::kPublishing);
  EXPECT_THAT(store_.GetLineage("daily", "2025-01-01").value(), IsEmpty());
}

TEST_F(PublishStepTest, RetentionKeepsTheCopiesOfAJobBeingRolledBack) {
  // daily keeps one rollback copy; two jobs published over it.
  ActiveJob* first = Publishing("2025-01-01", "2025-01-02");
  ASSERT_TRUE(PublishJob(ctx(), first).ok());
  clock_.Advance(absl::Hours(1));
  ActiveJob* second = Publishing("2025-01-01", "2025-01-02");
  ASSERT_TRUE(PublishJob(ctx(), second).ok());
  ASSERT_EQ(engine_.ListRollbackCopies()->size(), 2u);
  {
    absl::MutexLock lock(jobs_.mu());
    jobs_.rolling_back().insert(first->job.id);
  }
  absl::StatusOr<int64_t> dropped = EnforceRetention(ctx(), *live_);
  ASSERT_TRUE(dropped.ok()) << dropped.status();
  EXPECT_EQ(*dropped, 0);
  {
    absl::MutexLock lock(jobs_.mu());
    jobs_.rolling_back().clear();
  }
  dropped = EnforceRetention(ctx(), *live_);
  ASSERT_TRUE(dropped.ok());
  EXPECT_EQ(*dropped, 1);
  absl::StatusOr<std::vector<RollbackCopy>> left = engine_.ListRollbackCopies();
  ASSERT_TRUE(left.ok());
  ASSERT_EQ(left->size(), 1u);
  EXPECT_EQ(left->front().job_id, second->job.id);
}

}  // namespace
}  // namespace core_publish_step_test
}  // namespace backfill
