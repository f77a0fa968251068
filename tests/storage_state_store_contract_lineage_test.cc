// The StateStore contract suite (tests/testing/state_store_contract.h):
// lineage — the publish and rollback bookkeeping, the order of the
// recorded versions, and the verified version of each published
// partition.

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "core/state_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/state_store_contract.h"

namespace backfill {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::MakeJob;
using testing::MakeLineage;
using ::testing::Pair;
using testing::Reach;
using testing::StateStoreContractTest;
using testing::T;

TEST_P(StateStoreContractTest, RecordPublicationIsAtomicAndIdempotent) {
  ASSERT_TRUE(store_->CreateJob(MakeJob(), T(0)).ok());
  ASSERT_TRUE(store_
                  ->UpdateTasksInState("bf-1", {TaskState::kPending},
                                       TaskState::kStaged, T(1))
                  .ok());
  ASSERT_NO_FATAL_FAILURE(Reach("bf-1", JobState::kPublishing, T(2)));
  LineageRecord rec = MakeLineage("daily_revenue", "2025-01-01", T(3));
  rec.job_id = "bf-1";
  LineageRecord rec2 = rec;
  rec2.partition = "2025-01-02";

  // A lineage list with a duplicate fails as a whole: nothing changes.
  const size_t events_before = store_->ListAuditEvents("bf-1")->size();
  absl::Status dup = store_->RecordPublication(
      "bf-1", {rec, rec}, JobState::kConfirming, "published", T(3));
  EXPECT_EQ(dup.code(), absl::StatusCode::kFailedPrecondition) << dup;
  EXPECT_EQ(store_->GetJob("bf-1")->state, JobState::kPublishing);
  EXPECT_EQ(store_->GetJob("bf-1")->counts.staged, 3);
  EXPECT_TRUE(store_->GetLineage("daily_revenue", "2025-01-01")->empty());
  EXPECT_EQ(store_->ListAuditEvents("bf-1")->size(), events_before);

  ASSERT_TRUE(store_
                  ->RecordPublication("bf-1", {rec, rec2},
                                      JobState::kConfirming, "published", T(3))
                  .ok());
  auto job = store_->GetJob("bf-1");
  EXPECT_EQ(job->state, JobState::kConfirming);
  EXPECT_EQ(job->message, "published");
  EXPECT_EQ(job->update_time, T(3));
  EXPECT_EQ(job->counts.published, 3);
  EXPECT_EQ((*store_->ListTasks("bf-1"))[0].update_time, T(3));
  auto lineage = store_->GetLineage("daily_revenue", "2025-01-01");
  ASSERT_EQ(lineage->size(), 1u);
  EXPECT_EQ((*lineage)[0].job_id, "bf-1");
  EXPECT_EQ((*lineage)[0].transform_version, "v1");
  ASSERT_EQ((*lineage)[0].inputs.size(), 1u);
  EXPECT_EQ((*lineage)[0].inputs[0].rows, 3);
  EXPECT_EQ((*lineage)[0].output_fingerprint, "out");
  EXPECT_EQ((*lineage)[0].row_count, 2);
  EXPECT_EQ((*lineage)[0].published_at, T(3));
  EXPECT_EQ((*lineage)[0].reason, "fix refunds");
  EXPECT_EQ((*lineage)[0].ticket, "DATA-1");
  EXPECT_EQ((*lineage)[0].requested_by, "alice");
  auto audit = *store_->ListAuditEvents("bf-1");
  EXPECT_EQ(audit.back().from_state, "PUBLISHING");
  EXPECT_EQ(audit.back().to_state, "CONFIRMING");

  // Repeated after a restart: no duplicate lineage, no extra audit event.
  size_t events = store_->ListAuditEvents("bf-1")->size();
  ASSERT_TRUE(store_
                  ->RecordPublication("bf-1", {rec, rec2},
                                      JobState::kConfirming, "published", T(4))
                  .ok());
  EXPECT_EQ(store_->GetLineage("daily_revenue", "2025-01-01")->size(), 1u);
  EXPECT_EQ(store_->ListAuditEvents("bf-1")->size(), events);
  EXPECT_EQ(store_->GetJob("bf-1")->update_time, T(3));
  // Also once the job has moved on.
  ASSERT_NO_FATAL_FAILURE(Reach("bf-1", JobState::kSucceeded, T(5)));
  ASSERT_TRUE(store_
                  ->RecordPublication("bf-1", {rec, rec2},
                                      JobState::kConfirming, "published", T(6))
                  .ok());
  EXPECT_EQ(store_->GetJob("bf-1")->state, JobState::kSucceeded);

  // A later job's version comes first.
  ASSERT_TRUE(store_->CreateJob(MakeJob(), T(10)).ok());
  ASSERT_NO_FATAL_FAILURE(Reach("bf-2", JobState::kPublishing, T(10)));
  rec.published_at = T(11);
  rec.job_id = "ignored: the job published is the argument";
  ASSERT_TRUE(store_
                  ->RecordPublication("bf-2", {rec}, JobState::kConfirming,
                                      "published", T(11))
                  .ok());
  lineage = store_->GetLineage("daily_revenue", "2025-01-01");
  ASSERT_EQ(lineage->size(), 2u);
  EXPECT_EQ((*lineage)[0].job_id, "bf-2");
  EXPECT_EQ((*lineage)[1].job_id, "bf-1");
  EXPECT_THAT(*store_->GetLineage("daily_revenue", "2025-01-03"), IsEmpty());
  EXPECT_EQ(
      store_->RecordPublication("bf-9", {}, JobState::kConfirming, "", T(1))
          .code(),
      absl::StatusCode::kNotFound);
}

TEST_P(StateStoreContractTest, LineageIsNewestRecordedFirstWhateverTheClock) {
  for (int i = 1; i <= 3; ++i) {
    ASSERT_TRUE(store_->CreateJob(MakeJob(), T(0)).ok());
    ASSERT_NO_FATAL_FAILURE(
        Reach(absl::StrCat("bf-", i), JobState::kPublishing, T(0)));
  }
  // Recorded bf-1, bf-3, bf-2: bf-2 was published last but claims the
  // earliest time (a clock stepped back) and is still the newest; bf-1 and
  // bf-3 share one time; a record without a time gets the call's time.
  LineageRecord rec = MakeLineage("daily_revenue", "2025-01-01", T(50));
  ASSERT_TRUE(
      store_->RecordPublication("bf-1", {rec}, JobState::kConfirming, "", T(1))
          .ok());
  ASSERT_TRUE(
      store_->RecordPublication("bf-3", {rec}, JobState::kConfirming, "", T(2))
          .ok());
  rec.published_at = absl::InfinitePast();
  ASSERT_TRUE(
      store_->RecordPublication("bf-2", {rec}, JobState::kConfirming, "", T(10))
          .ok());
  auto lineage = store_->GetLineage("daily_revenue", "2025-01-01");
  ASSERT_TRUE(lineage.ok()) << lineage.status();
  std::vector<std::string> order;
  for (const LineageRecord& r : *lineage) {
    order.push_back(absl::StrCat(
        r.job_id, "@", absl::ToUnixSeconds(r.published_at) - 1700000000));
  }
  EXPECT_THAT(order, ElementsAre("bf-2@10", "bf-3@50", "bf-1@50"));
  ASSERT_EQ(lineage->size(), 3u);
  EXPECT_GT((*lineage)[0].id, (*lineage)[1].id);
  EXPECT_GT((*lineage)[1].id, (*lineage)[2].id);
}

TEST_P(StateStoreContractTest, NewestLineagesAreEachPartitionsNewestRecord) {
  for (int i = 1; i <= 3; ++i) {
    ASSERT_TRUE(store_->CreateJob(MakeJob(), T(0)).ok());
    ASSERT_NO_FATAL_FAILURE(
        Reach(absl::StrCat("bf-", i), JobState::kPublishing, T(0)));
  }
  // 2025-01-01: bf-1 then bf-2 (with an earlier time); 2025-01-02: bf-3
  // only; 2025-01-03 and the other dataset's 2025-01-01: none.
  LineageRecord first = MakeLineage("daily_revenue", "2025-01-01", T(50));
  ASSERT_TRUE(
      store_
          ->RecordPublication("bf-1", {first}, JobState::kConfirming, "", T(1))
          .ok());
  first.published_at = T(5);
  ASSERT_TRUE(
      store_
          ->RecordPublication("bf-2", {first}, JobState::kConfirming, "", T(2))
          .ok());
  LineageRecord second = MakeLineage("daily_revenue", "2025-01-02", T(60));
  ASSERT_TRUE(
      store_
          ->RecordPublication("bf-3", {second}, JobState::kConfirming, "", T(3))
          .ok());
  const std::vector<std::pair<std::string, std::string>> keys = {
      {"daily_revenue", "2025-01-03"}, {"daily_revenue", "2025-01-01"},
      {"other", "2025-01-01"},         {"daily_revenue", "2025-01-02"},
      {"daily_revenue", "2025-01-01"},
  };
  auto newest = store_->NewestLineages(keys);
  ASSERT_TRUE(newest.ok()) << newest.status();
  ASSERT_EQ(newest->size(), keys.size());
  std::vector<std::string> got;
  for (const std::optional<LineageRecord>& r : *newest) {
    got.push_back(
        r ? absl::StrCat(r->dataset, "/", r->partition, "@", r->job_id) : "-");
  }
  EXPECT_THAT(got, ElementsAre("-", "daily_revenue/2025-01-01@bf-2", "-",
                               "daily_revenue/2025-01-02@bf-3",
                               "daily_revenue/2025-01-01@bf-2"));
  // Each as GetLineage's first record.
  for (size_t i = 0; i < keys.size(); ++i) {
    auto lineage = store_->GetLineage(keys[i].first, keys[i].second);
    ASSERT_TRUE(lineage.ok()) << lineage.status();
    ASSERT_EQ(lineage->empty(), !(*newest)[i].has_value()) << i;
    if (lineage->empty()) continue;
    EXPECT_EQ(lineage->front().id, (*newest)[i]->id) << i;
    EXPECT_EQ(lineage->front().output_fingerprint,
              (*newest)[i]->output_fingerprint)
        << i;
  }
  auto none = store_->NewestLineages({});
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->empty());
}

TEST_P(StateStoreContractTest, RecordPublicationOnlyMovesAPublishingJob) {
  LineageRecord rec = MakeLineage("daily_revenue", "2025-01-01", T(3));
  for (JobState state :
       {JobState::kQueued, JobState::kRunning, JobState::kValidating,
        JobState::kAwaitingApproval, JobState::kFailed, JobState::kCancelled,
        JobState::kPaused, JobState::kValidationFailed}) {
    SCOPED_TRACE(JobStateName(state));
    auto created = store_->CreateJob(MakeJob(), T(0));
    ASSERT_TRUE(created.ok()) << created.status();
    const std::string id = created->job.id;
    ASSERT_TRUE(store_
                    ->UpdateTasksInState(id, {TaskState::kPending},
                                         TaskState::kStaged, T(1))
                    .ok());
    if (state != JobState::kQueued) {
      ASSERT_NO_FATAL_FAILURE(Reach(id, state, T(2)));
    }
    const size_t events = store_->ListAuditEvents(id)->size();
    absl::Status s = store_->RecordPublication(id, {rec}, JobState::kConfirming,
                                               "published", T(3));
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
    EXPECT_THAT(s.message(), HasSubstr("not PUBLISHING"));
    // Nothing written: state, tasks, lineage and audit log unchanged.
    auto job = store_->GetJob(id);
    ASSERT_TRUE(job.ok()) << job.status();
    EXPECT_EQ(job->state, state);
    EXPECT_EQ(job->counts.published, 0);
    EXPECT_EQ(job->counts.staged, 3);
    EXPECT_EQ(store_->ListAuditEvents(id)->size(), events);
  }
  EXPECT_TRUE(store_->GetLineage("daily_revenue", "2025-01-01")->empty());

  // A PUBLISHING job moves only where the table allows.
  auto created = store_->CreateJob(MakeJob(), T(0));
  ASSERT_TRUE(created.ok());
  const std::string id = created->job.id;
  ASSERT_NO_FATAL_FAILURE(Reach(id, JobState::kPublishing, T(2)));
  absl::Status s = store_->RecordPublication(id, {rec}, JobState::kQueued,
                                             "published", T(3));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(), HasSubstr("cannot become QUEUED"));
  EXPECT_EQ(store_->GetJob(id)->state, JobState::kPublishing);
  EXPECT_TRUE(store_->GetLineage("daily_revenue", "2025-01-01")->empty());
}

// Publishes `id` (a job of MakeJob()) with one lineage record per partition
// of daily_revenue, and moves it to SUCCEEDED.
void PublishAndSucceed(StateStore* store, const std::string& id,
                       const std::vector<std::string>& partitions,
                       absl::Time at) {
  ASSERT_NO_FATAL_FAILURE(Reach(store, id, JobState::kPublishing, at));
  std::vector<LineageRecord> lineage;
  for (const std::string& p : partitions) {
    lineage.push_back(MakeLineage("daily_revenue", p, at));
  }
  absl::Status s = store->RecordPublication(id, lineage, JobState::kConfirming,
                                            "published", at);
  ASSERT_TRUE(s.ok()) << s;
  s = store->TransitionJob(id, JobState::kConfirming, JobState::kSucceeded,
                           "ok", at);
  ASSERT_TRUE(s.ok()) << s;
}

TEST_P(StateStoreContractTest, RecordRollbackIsAtomicAndIdempotent) {
  for (int i = 1; i <= 3; ++i) {
    ASSERT_TRUE(store_->CreateJob(MakeJob(), T(0)).ok());
  }
  ASSERT_NO_FATAL_FAILURE(PublishAndSucceed(
      store_.get(), "bf-1", {"2025-01-01", "2025-01-02"}, T(1)));
  ASSERT_NO_FATAL_FAILURE(
      PublishAndSucceed(store_.get(), "bf-2", {"2025-01-02"}, T(2)));
  // bf-3 never publishes.
  RollbackInfo info;
  info.requested_by = "bob";
  info.reason = "bad prices";
  info.forced = true;
  info.also_rolled_back = {"bf-2"};
  info.partitions = 2;
  info.rows = 5;
  LineageRecord r1 = MakeLineage("daily_revenue", "2025-01-02", T(5));
  r1.job_id = "bf-2";
  r1.row_count = 3;
  LineageRecord r2 = MakeLineage("daily_revenue", "2025-01-01", T(5));
  r2.job_id = "bf-1";
  LineageRecord r3 = MakeLineage("daily_revenue", "2025-01-02", T(5));
  r3.job_id = "bf-1";

  // A job taken along that did not publish: nothing is written.
  RollbackInfo bad = info;
  bad.also_rolled_back = {"bf-3"};
  absl::Status s = store_->RecordRollback("bf-1", bad, {r2, r3}, "rolled back",
                                          "with", T(5));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(), HasSubstr("bf-3"));
  EXPECT_EQ(store_->GetJob("bf-1")->state, JobState::kSucceeded);
  EXPECT_FALSE(store_->GetJob("bf-1")->rollback.has_value());
  EXPECT_EQ(store_->GetLineage("daily_revenue", "2025-01-01")->size(), 1u);

  s = store_->RecordRollback("bf-1", info, {r1, r2, r3}, "rolled back",
                             "rolled back with bf-1", T(5));
  ASSERT_TRUE(s.ok()) << s;
  auto job = store_->GetJob("bf-1");
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->state, JobState::kRolledBack);
  EXPECT_EQ(job->message, "rolled back");
  EXPECT_EQ(job->end_time, T(5));
  ASSERT_TRUE(job->rollback.has_value());
  EXPECT_EQ(job->rollback->requested_by, "bob");
  EXPECT_EQ(job->rollback->reason, "bad prices");
  EXPECT_EQ(job->rollback->at, T(5));
  EXPECT_TRUE(job->rollback->forced);
  EXPECT_EQ(job->rollback->with_job, "");
  EXPECT_THAT(job->rollback->also_rolled_back, ElementsAre("bf-2"));
  EXPECT_EQ(job->rollback->partitions, 2);
  EXPECT_EQ(job->rollback->rows, 5);
  auto other = store_->GetJob("bf-2");
  EXPECT_EQ(other->state, JobState::kRolledBack);
  EXPECT_EQ(other->message, "rolled back with bf-1");
  ASSERT_TRUE(other->rollback.has_value());
  EXPECT_EQ(other->rollback->with_job, "bf-1");
  EXPECT_EQ(other->rollback->rows, 0);
  EXPECT_EQ(store_->ListAuditEvents("bf-2")->back().to_state, "ROLLED_BACK");

  auto lineage = store_->GetLineage("daily_revenue", "2025-01-02");
  ASSERT_TRUE(lineage.ok()) << lineage.status();
  ASSERT_EQ(lineage->size(), 4u);
  std::vector<std::string> actions;
  for (const LineageRecord& r : *lineage) {
    actions.push_back(absl::StrCat(r.job_id, ":", LineageActionName(r.action)));
  }
  EXPECT_THAT(actions, ElementsAre("bf-1:rollback", "bf-2:rollback",
                                   "bf-2:publish", "bf-1:publish"));

  // Again (a repeat after a restart): nothing more.
  s = store_->RecordRollback("bf-1", info, {r1, r2, r3}, "again", "again",
                             T(6));
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(store_->GetJob("bf-1")->message, "rolled back");
  EXPECT_EQ(store_->GetLineage("daily_revenue", "2025-01-02")->size(), 4u);
  // Unknown job.
  EXPECT_EQ(store_->RecordRollback("bf-9", info, {}, "", "", T(6)).code(),
            absl::StatusCode::kNotFound);
}

TEST_P(StateStoreContractTest, ARollbackRecordCarriesNoApproval) {
  ASSERT_TRUE(store_->CreateJob(MakeJob(), T(0)).ok());
  ASSERT_NO_FATAL_FAILURE(
      PublishAndSucceed(store_.get(), "bf-1", {"2025-01-01"}, T(1)));
  // A rollback restores rows; no approval comes with them, whatever the
  // record handed over says.
  LineageRecord restored = MakeLineage("daily_revenue", "2025-01-01", T(2));
  Approval approval;
  approval.approved_by = "bob";
  approval.reason = "looks right";
  approval.from_state = JobState::kAwaitingApproval;
  approval.approved_at = T(1);
  restored.approval = approval;
  RollbackInfo info;
  info.requested_by = "carol";
  info.reason = "wrong numbers";
  ASSERT_TRUE(
      store_->RecordRollback("bf-1", info, {restored}, "rolled back", "", T(2))
          .ok());
  auto lineage = store_->GetLineage("daily_revenue", "2025-01-01");
  ASSERT_TRUE(lineage.ok()) << lineage.status();
  ASSERT_EQ(lineage->size(), 2u);
  EXPECT_EQ((*lineage)[0].action, LineageAction::kRollback);
  EXPECT_FALSE((*lineage)[0].approval.has_value());
  EXPECT_EQ((*lineage)[1].action, LineageAction::kPublish);
}

TEST_P(StateStoreContractTest, RollbackRecordsOfAnUnknownJobAreRefused) {
  ASSERT_TRUE(store_->CreateJob(MakeJob(), T(0)).ok());
  ASSERT_NO_FATAL_FAILURE(
      PublishAndSucceed(store_.get(), "bf-1", {"2025-01-01"}, T(1)));
  LineageRecord mine = MakeLineage("daily_revenue", "2025-01-01", T(2));
  LineageRecord stray = MakeLineage("daily_revenue", "2025-01-02", T(2));
  stray.job_id = "bf-9";
  RollbackInfo info;
  info.reason = "wrong numbers";
  absl::Status s = store_->RecordRollback("bf-1", info, {mine, stray},
                                          "rolled back", "", T(2));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  // Nothing was written.
  EXPECT_EQ(store_->GetJob("bf-1")->state, JobState::kSucceeded);
  EXPECT_FALSE(store_->GetJob("bf-1")->rollback.has_value());
  EXPECT_EQ(store_->GetLineage("daily_revenue", "2025-01-01")->size(), 1u);
  EXPECT_THAT(*store_->GetLineage("daily_revenue", "2025-01-02"), IsEmpty());
  EXPECT_EQ(store_->ListAuditEvents("bf-1")->back().to_state, "SUCCEEDED");
}

TEST_P(StateStoreContractTest, RecordRollbackNeedsAPublishedJob) {
  for (JobState state :
       {JobState::kQueued, JobState::kRunning, JobState::kFailed,
        JobState::kCancelled, JobState::kPublishing, JobState::kConfirming,
        JobState::kValidationFailed}) {
    SCOPED_TRACE(JobStateName(state));
    auto created = store_->CreateJob(MakeJob(), T(0));
    ASSERT_TRUE(created.ok()) << created.status();
    const std::string id = created->job.id;
    if (state != JobState::kQueued) {
      ASSERT_NO_FATAL_FAILURE(Reach(id, state, T(1)));
    }
    RollbackInfo info;
    info.reason = "r";
    absl::Status s = store_->RecordRollback(
        id, info, {MakeLineage("daily_revenue", "2025-01-01", T(2))}, "m", "",
        T(2));
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
    EXPECT_THAT(s.message(), HasSubstr(JobStateName(state)));
    EXPECT_EQ(store_->GetJob(id)->state, state);
  }
  EXPECT_TRUE(store_->GetLineage("daily_revenue", "2025-01-01")->empty());
}

TEST_P(StateStoreContractTest, LineageOverlappingAndPublicationTimes) {
  for (int i = 1; i <= 3; ++i) {
    ASSERT_TRUE(store_->CreateJob(MakeJob(), T(0)).ok());
  }
  ASSERT_NO_FATAL_FAILURE(PublishAndSucceed(
      store_.get(), "bf-1", {"2025-01-01", "2025-01-02"}, T(30)));
  ASSERT_NO_FATAL_FAILURE(PublishAndSucceed(
      store_.get(), "bf-2", {"2025-01-02", "2025-01-03"}, T(10)));
  ASSERT_NO_FATAL_FAILURE(
      PublishAndSucceed(store_.get(), "bf-3", {"2025-01-03"}, T(20)));
  // bf-1's partitions: 01 (bf-1) and 02 (bf-1, bf-2), in recorded order
  // whatever their times; 03 is not bf-1's.
  auto history = store_->GetLineageOverlapping("bf-1");
  ASSERT_TRUE(history.ok()) << history.status();
  std::vector<std::string> got;
  for (const LineageRecord& r : *history) {
    got.push_back(absl::StrCat(r.job_id, "/", r.partition));
  }
  EXPECT_THAT(
      got, ::testing::UnorderedElementsAre("bf-1/2025-01-01", "bf-1/2025-01-02",
                                           "bf-2/2025-01-02"));
  std::vector<std::string> day2;
  for (const LineageRecord& r : *history) {
    if (r.partition == "2025-01-02") day2.push_back(r.job_id);
  }
  EXPECT_THAT(day2, ElementsAre("bf-1", "bf-2"));
  EXPECT_EQ(store_->GetLineageOverlapping("bf-9").status().code(),
            absl::StatusCode::kNotFound);

  auto times = store_->PublicationTimes({"bf-1", "bf-3", "bf-9"});
  ASSERT_TRUE(times.ok()) << times.status();
  EXPECT_THAT(*times, ElementsAre(Pair("bf-1", T(30)), Pair("bf-3", T(20))));
}

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
}  // namespace backfill
