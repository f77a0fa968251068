// Tests of the rollback step (core/run/rollback_step.h): which later jobs
// forbid a rollback or go along with --force, and the lineage a rollback
// leaves, on hand-built lineage histories; then, on the fake engine and the
// in-memory store, which jobs may be rolled back at all, a rollback's
// restore and record, one refused for an expired rollback copy, and the
// record of a rollback the warehouse committed before a crash.

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/run/confirm_step.h"
#include "core/run/publish_step.h"
#include "core/run/rollback_step.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/step_fixture.h"

namespace backfill {
namespace core_rollback_step_test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

LineageRecord Rec(const std::string& job, const std::string& partition,
                  LineageAction action = LineageAction::kPublish) {
  LineageRecord r;
  r.dataset = "daily_revenue";
  r.partition = partition;
  r.job_id = job;
  r.action = action;
  r.transform_version = absl::StrCat("v-", job);
  return r;
}

Job MakeJob(const std::string& id, std::vector<std::string> partitions,
            JobState state = JobState::kSucceeded) {
  Job job;
  job.id = id;
  job.state = state;
  job.plan.datasets = {
      {"daily_revenue", std::move(partitions), "requested", "v1", {}}};
  return job;
}

class RollbackStepTest : public ::testing::Test {
 protected:
  JobLookup Lookup() {
    return [this](const std::string& id) -> absl::StatusOr<Job> {
      auto it = jobs_.find(id);
      if (it == jobs_.end()) return absl::NotFoundError(id);
      return it->second;
    };
  }
  std::vector<std::string> Ids(const absl::StatusOr<std::vector<Job>>& jobs) {
    std::vector<std::string> out;
    EXPECT_TRUE(jobs.ok()) << jobs.status();
    if (!jobs.ok()) return out;
    for (const Job& j : *jobs) out.push_back(j.id);
    return out;
  }
  std::map<std::string, Job> jobs_;
};

TEST_F(RollbackStepTest, NoLaterPublishNoLaterJobs) {
  const Job a = MakeJob("bf-2", {"d1", "d2"});
  const std::vector<LineageRecord> history = {
      Rec("bf-1", "d1"), Rec("bf-2", "d1"), Rec("bf-2", "d2")};
  EXPECT_THAT(Ids(LaterJobs(a, history, false, Lookup())), IsEmpty());
}

TEST_F(RollbackStepTest, ALaterPublishInForceRefusesNamingTheNewest) {
  const Job a = MakeJob("bf-1", {"d1", "d2", "d3"});
  const std::vector<LineageRecord> history = {
      Rec("bf-1", "d1"), Rec("bf-1", "d2"), Rec("bf-1", "d3"),
      Rec("bf-2", "d2"), Rec("bf-3", "d3")};
  auto later = LaterJobs(a, history, false, Lookup());
  ASSERT_EQ(later.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(later.status().message(),
              HasSubstr("job bf-3 has published partition d3 of "
                        "daily_revenue since bf-1 (later jobs over its "
                        "partitions: bf-3, bf-2)"));
  EXPECT_THAT(later.status().message(), HasSubstr("set `force`"));
}

TEST_F(RollbackStepTest, LaterJobsRolledBackSinceDoNotCount) {
  const Job a = MakeJob("bf-1", {"d1"});
  // bf-2 published over d1 and was rolled back: bf-1's rows are current.
  const std::vector<LineageRecord> history = {
      Rec("bf-1", "d1"), Rec("bf-2", "d1"),
      Rec("bf-2", "d1", LineageAction::kRollback)};
  EXPECT_THAT(Ids(LaterJobs(a, history, false, Lookup())), IsEmpty());
  // A publish before bf-1's is not later.
  const Job b = MakeJob("bf-2", {"d1"});
  const std::vector<LineageRecord> h2 = {Rec("bf-1", "d1"), Rec("bf-2", "d1")};
  EXPECT_THAT(Ids(LaterJobs(b, h2, false, Lookup())), IsEmpty());
}

TEST_F(RollbackStepTest, ForceTakesAlongLaterJobsInsideTheJob) {
  const Job a = MakeJob("bf-1", {"d1", "d2", "d3"});
  jobs_["bf-2"] = MakeJob("bf-2", {"d2"});
  jobs_["bf-3"] = MakeJob("bf-3", {"d2", "d3"}, JobState::kDownstreamUnhealthy);
  // bf-3 buries bf-2's publish of d2: both go along, newest first.
  const std::vector<LineageRecord> history = {
      Rec("bf-1", "d1"), Rec("bf-1", "d2"), Rec("bf-1", "d3"),
      Rec("bf-2", "d2"), Rec("bf-3", "d2"), Rec("bf-3", "d3")};
  EXPECT_THAT(Ids(LaterJobs(a, history, true, Lookup())),
              ElementsAre("bf-3", "bf-2"));
}

TEST_F(RollbackStepTest, ForceIsRefusedOutsideTheJobOrForAnotherState) {
  const Job a = MakeJob("bf-1", {"d1", "d2"});
  jobs_["bf-2"] = MakeJob("bf-2", {"d2", "d3"});
  const std::vector<LineageRecord> history = {
      Rec("bf-1", "d1"), Rec("bf-1", "d2"), Rec("bf-2", "d2")};
  auto later = LaterJobs(a, history, true, Lookup());
  ASSERT_EQ(later.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(later.status().message(),
              HasSubstr("later job bf-2 also published partition d3 of "
                        "daily_revenue, outside bf-1's partitions"));
  jobs_["bf-2"] = MakeJob("bf-2", {"d2"}, JobState::kRolledBack);
  later = LaterJobs(a, history, true, Lookup());
  ASSERT_EQ(later.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(later.status().message(), HasSubstr("bf-2 is ROLLED_BACK"));
}

TEST_F(RollbackStepTest, LineageRecordsTheRestoredVersion) {
  const Job a = MakeJob("bf-3", {"d1", "d2"});
  const Job b = MakeJob("bf-4", {"d2"});
  // d1: bf-1 then bf-2 (rolled back) then bf-3: bf-1's version comes back.
  // d2: first published by bf-3 (an initial load): nothing comes back.
  const std::vector<LineageRecord> history = {
      Rec("bf-1", "d1"),
      Rec("bf-2", "d1"),
      Rec("bf-2", "d1", LineageAction::kRollback),
      Rec("bf-3", "d1"),
      Rec("bf-3", "d2"),
      Rec("bf-4", "d2")};
  const std::vector<RestoredPartition> restored = {
      {"daily_revenue", "d1", 4, "fp1"}, {"daily_revenue", "d2", 0, "fp0"}};
  RollbackInfo info;
  info.reason = "bad";
  info.requested_by = "ann";
  const std::vector<LineageRecord> lineage = RollbackLineage(
      a, {b}, history, restored, info, absl::FromUnixSeconds(5));
  ASSERT_EQ(lineage.size(), 3u);
  EXPECT_EQ(lineage[0].job_id, "bf-4");  // the later job first
  EXPECT_EQ(lineage[0].partition, "d2");
  EXPECT_EQ(lineage[0].row_count, 0);
  EXPECT_EQ(lineage[1].job_id, "bf-3");
  EXPECT_EQ(lineage[1].partition, "d1");
  EXPECT_EQ(lineage[1].transform_version, "v-bf-1");
  EXPECT_EQ(lineage[1].output_fingerprint, "fp1");
  EXPECT_EQ(lineage[1].row_count, 4);
  EXPECT_EQ(lineage[2].partition, "d2");
  EXPECT_EQ(lineage[2].transform_version, "");
  for (const LineageRecord& r : lineage) {
    EXPECT_EQ(r.action, LineageAction::kRollback);
    EXPECT_EQ(r.reason, "bad");
    EXPECT_EQ(r.requested_by, "ann");
    EXPECT_EQ(r.published_at, absl::FromUnixSeconds(5));
  }
}

class RollbackRecordTest : public testing::StepFixture {
 protected:
  void SetUp() override {
    // Markers name the store that claimed the warehouse.
    ASSERT_TRUE(engine_.Claim(store_.Info()->store_id, false).ok());
  }

  // A SUCCEEDED job of daily over [from, to), published over what the
  // warehouse held.
  Job Succeeded(const std::string& from, const std::string& to) {
    ActiveJob* job = PublishingJob(Request("daily", from, to));
    EXPECT_TRUE(PublishJob(ctx(), job).ok());
    EXPECT_TRUE(ConfirmJob(ctx(), job).ok());
    return Stored(job->job.id);
  }

  RollbackRequest Because(const std::string& reason) {
    RollbackRequest request;
    request.reason = reason;
    request.requested_by = "ops";
    return request;
  }
};

TEST_F(RollbackRecordTest, OnlyAJobThatPublishedSomethingMayBeRolledBack) {
  const Job queued = CreateJob(Request("daily", "2025-01-01", "2025-01-02"));
  absl::Status s = CheckRollbackable(ctx(), queued);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("it has not published (yet)"));

  const Job failed = CreateJob(Request("daily", "2025-01-01", "2025-01-02"));
  MoveTo(failed.id, {JobState::kRunning, JobState::kFailed});
  s = CheckRollbackable(ctx(), Stored(failed.id));
  EXPECT_THAT(s.message(), HasSubstr("nothing of it was published"));

  const Job done = Succeeded("2025-01-01", "2025-01-02");
  EXPECT_TRUE(CheckRollbackable(ctx(), done).ok());
  // Every partition came out unchanged: it published nothing.
  for (PartitionTask t : Tasks(done.id)) {
    t.state = TaskState::kUnchanged;
    ASSERT_TRUE(store_.UpdateTask(t).ok());
  }
  s = CheckRollbackable(ctx(), done);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("published nothing"));
}

TEST_F(RollbackRecordTest, ARollbackRestoresTheRowsThenRecordsIt) {
  engine_.SetPublishedRows("daily", "2025-01-01", 7);
  const Job done = Succeeded("2025-01-01", "2025-01-02");
  ASSERT_EQ(engine_.PublishedRows("daily", "2025-01-01"), 1);
  JobState while_restored = JobState::kQueued;
  absl::StatusOr<Job> rolled =
      RollBack(ctx(), *live_, done, Because("bad numbers"), nullptr,
               [&] { while_restored = Stored(done.id).state; });
  ASSERT_TRUE(rolled.ok()) << rolled.status();
  // The rows were back before the store recorded the rollback.
  EXPECT_EQ(while_restored, JobState::kSucceeded);
  EXPECT_EQ(rolled->state, JobState::kRolledBack);
  EXPECT_THAT(rolled->message,
              HasSubstr("rolled back by ops: bad numbers; restored 1 "
                        "partition (7 rows) of 1 dataset to their state "
                        "before " +
                        done.id));
  EXPECT_EQ(engine_.PublishedRows("daily", "2025-01-01"), 7);
  absl::StatusOr<std::vector<LineageRecord>> lineage =
      store_.GetLineage("daily", "2025-01-01");
  ASSERT_TRUE(lineage.ok());
  EXPECT_EQ(lineage->front().action, LineageAction::kRollback);
  EXPECT_EQ(lineage->front().row_count, 7);
  ASSERT_FALSE(observer_.finished().empty());
  EXPECT_EQ(observer_.finished().back().second, JobState::kRolledBack);
}

TEST_F(RollbackRecordTest, ARollbackWhoseCopyExpiredIsRefused) {
  const Job first = Succeeded("2025-01-01", "2025-01-02");
  clock_.Advance(absl::Hours(1));
  Succeeded("2025-01-01", "2025-01-02");
  // daily keeps one rollback copy: the first job's goes.
  ASSERT_EQ(EnforceRetention(ctx(), *live_).value(), 1);
  absl::StatusOr<Job> rolled =
      RollBack(ctx(), *live_, first, Because("bad"), nullptr, nullptr);
  EXPECT_EQ(rolled.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(rolled.status().message(),
              HasSubstr("can no longer be rolled back: its rollback copy of "
                        "daily"));
  EXPECT_EQ(Stored(first.id).state, JobState::kSucceeded);
}

TEST_F(RollbackRecordTest, ARollbackTheWarehouseCommittedIsRecordedAtStart) {
  engine_.SetPublishedRows("daily", "2025-01-01", 7);
  const Job done = Succeeded("2025-01-01", "2025-01-02");
  // The warehouse restored the rows; the process died before the store
  // recorded it.
  RollbackSpec spec;
  bool complete = true;
  spec.layout = LayoutOf(*catalog_, done, &complete).value();
  spec.layout.pinned.clear();
  spec.marker.reason = "bad numbers";
  spec.marker.requested_by = "ops";
  ASSERT_TRUE(engine_.Rollback(spec).ok());
  ASSERT_EQ(Stored(done.id).state, JobState::kSucceeded);

  std::vector<std::string> recovered;
  ASSERT_TRUE(RecoverRollbacks(ctx(), *live_, &recovered).ok());
  EXPECT_THAT(recovered, ElementsAre(done.id));
  const Job stored = Stored(done.id);
  EXPECT_EQ(stored.state, JobState::kRolledBack);
  EXPECT_THAT(stored.message, HasSubstr("rolled back by ops: bad numbers"));
  // The warehouse's marker makes the restore a no-op the second time.
  EXPECT_EQ(engine_.PublishedRows("daily", "2025-01-01"), 7);

  // Recorded once: a second start finds nothing to record.
  recovered.clear();
  ASSERT_TRUE(RecoverRollbacks(ctx(), *live_, &recovered).ok());
  EXPECT_THAT(recovered, IsEmpty());
}

}  // namespace
}  // namespace core_rollback_step_test
}  // namespace backfill
