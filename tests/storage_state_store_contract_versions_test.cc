// The StateStore contract suite (tests/testing/state_store_contract.h):
// the verified version of each published partition (what the recorded
// history vouches for now, through publishes, early cutoff's UNCHANGED
// tasks, rollbacks and entity keys), and the scope kept with a job of
// --auto.

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "core/ports/state_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/state_store_contract.h"

namespace backfill {
namespace storage_state_store_contract_versions_test {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using testing::MakeJob;
using testing::MakeLineage;
using ::testing::Pair;
using testing::Reach;
using testing::StateStoreContractTest;
using testing::T;

// A job of daily_revenue over `partitions`, planned with `version`.
std::string CreateDailyJob(StateStore* store,
                           const std::vector<std::string>& partitions,
                           const std::string& version, absl::Time at) {
  Job job;
  job.request.dataset = "daily_revenue";
  job.request.reason = "lineage";
  job.request.auto_detect = true;
  DatasetPlan dp;
  dp.dataset = "daily_revenue";
  dp.partitions = partitions;
  dp.transform_version = version;
  job.plan.datasets = {dp};
  auto created = store->CreateJob(job, at);
  EXPECT_TRUE(created.ok()) << created.status();
  return created.ok() ? created->job.id : "";
}

LineageRecord Published(const std::string& partition, const std::string& fp,
                        absl::Time at) {
  LineageRecord rec = MakeLineage("daily_revenue", partition, at);
  rec.inputs = {{"orders", partition, fp, 3}, {"customers", "", "c-" + fp, 5}};
  return rec;
}

void Publish(StateStore* store, const std::string& id,
             std::vector<LineageRecord> lineage, absl::Time at) {
  ASSERT_NO_FATAL_FAILURE(Reach(store, id, JobState::kPublishing, at));
  for (LineageRecord& rec : lineage) rec.job_id = id;
  ASSERT_TRUE(store
                  ->RecordPublication(id, lineage, JobState::kConfirming,
                                      "published", at)
                  .ok());
  ASSERT_TRUE(store
                  ->TransitionJob(id, JobState::kConfirming,
                                  JobState::kSucceeded, "ok", at)
                  .ok());
}

void MarkUnchanged(StateStore* store, const std::string& id,
                   const std::string& partition, const std::string& fp) {
  PartitionTask t;
  t.job_id = id;
  t.dataset = "daily_revenue";
  t.partition = partition;
  t.state = TaskState::kUnchanged;
  t.inputs = {{"orders", partition, fp, 4}};
  ASSERT_TRUE(store->UpdateTask(t).ok());
}

TEST_P(StateStoreContractTest, AutoDetectIsKeptWithTheJob) {
  const std::string id =
      CreateDailyJob(store_.get(), {"2025-01-01"}, "v1", T(0));
  auto job = store_->GetJob(id);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_TRUE(job->request.auto_detect);
  EXPECT_FALSE(store_->GetJob(store_->CreateJob(MakeJob(), T(1))->job.id)
                   ->request.auto_detect);
}

TEST_P(StateStoreContractTest,
       VerifiedVersionsFollowPublishesCutoffsAndRollbacks) {
  const std::string d1 = "2025-01-01", d2 = "2025-01-02", d3 = "2025-01-03";
  auto versions = [&](std::vector<std::string> only = {}) {
    auto v = store_->VerifiedVersions("daily_revenue", only);
    EXPECT_TRUE(v.ok()) << v.status();
    return v.ok() ? *v : std::map<std::string, VerifiedVersion>{};
  };
  EXPECT_THAT(versions(), IsEmpty());

  // bf-1 publishes d1 and d2 with v1.
  const std::string a = CreateDailyJob(store_.get(), {d1, d2}, "v1", T(1));
  ASSERT_NO_FATAL_FAILURE(
      Publish(store_.get(), a,
              {Published(d1, "a1", T(2)), Published(d2, "a2", T(2))}, T(2)));
  auto v = versions();
  ASSERT_EQ(v.size(), 2u);
  EXPECT_EQ(v[d1].job_id, a);
  EXPECT_FALSE(v[d1].unchanged);
  EXPECT_EQ(v[d1].transform_version, "v1");
  ASSERT_EQ(v[d1].inputs.size(), 2u);
  EXPECT_EQ(v[d1].inputs[0].fingerprint, "a1");
  EXPECT_EQ(v[d1].inputs[1].dataset, "customers");
  EXPECT_EQ(v[d1].inputs[1].partition, "");

  // bf-2 (planned with v2) recomputes d1 identical: no lineage, but its
  // UNCHANGED task is the newer verified version once the job's publish
  // committed.
  const std::string b = CreateDailyJob(store_.get(), {d1, d2}, "v2", T(3));
  ASSERT_NO_FATAL_FAILURE(MarkUnchanged(store_.get(), b, d1, "b1"));
  ASSERT_NO_FATAL_FAILURE(Reach(b, JobState::kAwaitingApproval, T(4)));
  EXPECT_EQ(versions()[d1].job_id, a) << "not published yet";
  ASSERT_NO_FATAL_FAILURE(Reach(b, JobState::kConfirming, T(4)));
  EXPECT_EQ(versions()[d1].job_id, b) << "published, confirming";
  ASSERT_NO_FATAL_FAILURE(Reach(b, JobState::kSucceeded, T(4)));
  v = versions();
  EXPECT_EQ(v[d1].job_id, b);
  EXPECT_TRUE(v[d1].unchanged);
  EXPECT_EQ(v[d1].transform_version, "v2");
  ASSERT_EQ(v[d1].inputs.size(), 1u);
  EXPECT_EQ(v[d1].inputs[0].fingerprint, "b1");
  EXPECT_EQ(v[d2].job_id, a);

  // An UNCHANGED d2 in a job that never published vouches for nothing.
  for (JobState end :
       {JobState::kFailed, JobState::kValidationFailed, JobState::kCancelled}) {
    SCOPED_TRACE(JobStateName(end));
    const std::string c = CreateDailyJob(store_.get(), {d2}, "v3", T(5));
    ASSERT_NO_FATAL_FAILURE(MarkUnchanged(store_.get(), c, d2, "c2"));
    ASSERT_NO_FATAL_FAILURE(Reach(c, end, T(5)));
    EXPECT_EQ(versions()[d2].job_id, a);
  }

  // Only the partitions asked for.
  EXPECT_THAT(
      versions({d2, d3}),
      ElementsAre(Pair(d2, ::testing::Field(&VerifiedVersion::job_id, a))));

  // bf-4 publishes d1 and d3, then is rolled back: d3 was empty before, so
  // it has no version; d1 holds bf-1's rows again, and since the rollback
  // was recorded after bf-2 ended, bf-2's UNCHANGED verification is void:
  // bf-1's publish record is current again.
  const std::string d = CreateDailyJob(store_.get(), {d1, d3}, "v4", T(6));
  ASSERT_NO_FATAL_FAILURE(
      Publish(store_.get(), d,
              {Published(d1, "d1", T(7)), Published(d3, "d3", T(7))}, T(7)));
  v = versions();
  EXPECT_EQ(v[d1].job_id, d);
  EXPECT_EQ(v[d3].job_id, d);
  RollbackInfo info;
  info.requested_by = "bob";
  info.reason = "bad";
  LineageRecord r1 = MakeLineage("daily_revenue", d1, T(8));
  r1.job_id = d;
  r1.transform_version = "v1";
  LineageRecord r3 = MakeLineage("daily_revenue", d3, T(8));
  r3.job_id = d;
  r3.transform_version = "";
  ASSERT_TRUE(
      store_->RecordRollback(d, info, {r1, r3}, "rolled back", "", T(8)).ok());
  v = versions();
  EXPECT_EQ(v.count(d3), 0u);
  EXPECT_EQ(v[d1].job_id, a);
  EXPECT_FALSE(v[d1].unchanged);
  EXPECT_EQ(v[d1].inputs[0].fingerprint, "a1");
  EXPECT_EQ(v[d2].job_id, a);
}

// A consumer that still serves old numbers says nothing of the warehouse:
// a job that ended DOWNSTREAM_UNHEALTHY published, and what it found
// unchanged is as current as what it republished. (--auto once planned
// every such partition again after a job whose cache was down.)
TEST_P(StateStoreContractTest, AJobWithAStaleConsumerVouchesForWhatItFound) {
  const std::string d1 = "2025-01-01", d2 = "2025-01-02";
  const std::string a = CreateDailyJob(store_.get(), {d1, d2}, "v1", T(1));
  ASSERT_NO_FATAL_FAILURE(
      Publish(store_.get(), a,
              {Published(d1, "a1", T(2)), Published(d2, "a2", T(2))}, T(2)));
  const std::string b = CreateDailyJob(store_.get(), {d1, d2}, "v2", T(3));
  ASSERT_NO_FATAL_FAILURE(MarkUnchanged(store_.get(), b, d2, "b2"));
  ASSERT_NO_FATAL_FAILURE(Reach(b, JobState::kPublishing, T(4)));
  LineageRecord b1 = Published(d1, "b1", T(4));
  b1.job_id = b;
  ASSERT_TRUE(
      store_
          ->RecordPublication(b, {b1}, JobState::kConfirming, "published", T(4))
          .ok());
  ASSERT_TRUE(store_
                  ->TransitionJob(b, JobState::kConfirming,
                                  JobState::kDownstreamUnhealthy, "stale", T(5))
                  .ok());
  auto v = store_->VerifiedVersions("daily_revenue", {});
  ASSERT_TRUE(v.ok()) << v.status();
  ASSERT_EQ(v->size(), 2u);
  EXPECT_EQ(v->at(d1).job_id, b);
  EXPECT_FALSE(v->at(d1).unchanged);
  EXPECT_EQ(v->at(d2).job_id, b);
  EXPECT_TRUE(v->at(d2).unchanged);
  EXPECT_EQ(v->at(d2).transform_version, "v2");
  EXPECT_EQ(v->at(d2).inputs[0].fingerprint, "b2");
}

TEST_P(StateStoreContractTest, AKeyedJobIsNoVersionOfItsTargetsPartitions) {
  const std::string d1 = "2025-01-01", d2 = "2025-01-02";
  const std::string a = CreateDailyJob(store_.get(), {d1, d2}, "v1", T(1));
  ASSERT_NO_FATAL_FAILURE(
      Publish(store_.get(), a,
              {Published(d1, "a1", T(2)), Published(d2, "a2", T(2))}, T(2)));
  // bf-2 recomputes some customers of d1 (publishing it) and of d2
  // (identical: UNCHANGED), and its dependent totals by partition.
  Job job;
  job.request.dataset = "daily_revenue";
  job.request.reason = "two customers";
  job.request.keys = {"c1", "c2"};
  DatasetPlan dp;
  dp.dataset = "daily_revenue";
  dp.partitions = {d1, d2};
  dp.transform_version = "v2";
  dp.keys = job.request.keys;
  DatasetPlan totals;
  totals.dataset = "totals";
  totals.partitions = {d1};
  totals.transform_version = "t2";
  job.plan.datasets = {dp, totals};
  auto created = store_->CreateJob(job, T(3));
  ASSERT_TRUE(created.ok()) << created.status();
  const std::string b = created->job.id;
  ASSERT_NO_FATAL_FAILURE(MarkUnchanged(store_.get(), b, d2, "b2"));
  LineageRecord total = MakeLineage("totals", d1, T(4));
  total.transform_version = "t2";
  ASSERT_NO_FATAL_FAILURE(
      Publish(store_.get(), b, {Published(d1, "b1", T(4)), total}, T(4)));

  // The other customers' rows of d1 and d2 are still bf-1's computation.
  auto v = store_->VerifiedVersions("daily_revenue", {});
  ASSERT_TRUE(v.ok()) << v.status();
  ASSERT_EQ(v->size(), 2u);
  EXPECT_EQ(v->at(d1).job_id, a);
  EXPECT_EQ(v->at(d1).transform_version, "v1");
  EXPECT_EQ(v->at(d1).inputs[0].fingerprint, "a1");
  EXPECT_EQ(v->at(d2).job_id, a);
  // The dependent was recomputed whole: bf-2 vouches for it.
  auto t = store_->VerifiedVersions("totals", {});
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->size(), 1u);
  EXPECT_EQ(t->at(d1).job_id, b);
  EXPECT_EQ(t->at(d1).transform_version, "t2");
}

}  // namespace
}  // namespace storage_state_store_contract_versions_test
}  // namespace backfill
