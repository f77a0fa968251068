// Tests of the rollback step (core/run/rollback_step.h): which later jobs
// forbid a rollback or go along with --force, and the lineage a rollback
// leaves, on hand-built lineage histories.

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/run/rollback_step.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace backfill {
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

}  // namespace
}  // namespace backfill
