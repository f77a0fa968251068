// The StateStore contract suite (tests/testing/state_store_contract.h):
// lineage — the publish and rollback bookkeeping and the order of the
// recorded versions.

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
namespace storage_state_store_contract_lineage_test {
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

// Builds one record per task the store hands it, and keeps what it was
// handed.
class RecordingLineage : public PublicationLineage {
 public:
  void Add(std::vector<PartitionTask>&& page,
           std::vector<LineageRecord>* lineage) override {
    page_sizes.push_back(page.size());
    for (PartitionTask& t : page) {
      ordinals.push_back(t.ordinal);
      EXPECT_EQ(t.state, TaskState::kStaged) << t.partition;
      LineageRecord r = MakeLineage(t.dataset, t.partition, T(5));
      r.row_count = t.rows_written;
      lineage->push_back(std::move(r));
    }
  }
  std::string Message() const override {
    return absl::StrCat("published ", ordinals.size());
  }

  std::vector<size_t> page_sizes;
  std::vector<int64_t> ordinals;
};

TEST_P(StateStoreContractTest,
       RecordPublicationBuildsTheLineageOfEveryStagedTaskPageByPage) {
  // More than two pages of tasks, every 1000th settled by the early
  // cutoff (UNCHANGED): those get no record.
  const int n = 2 * StateStore::kPublicationPage + 1100;
  Job job = MakeJob();
  job.plan.datasets.resize(1);
  job.plan.datasets[0].partitions.clear();
  for (int i = 0; i < n; ++i) {
    job.plan.datasets[0].partitions.push_back(absl::StrCat("p", 100000 + i));
  }
  ASSERT_TRUE(store_->CreateJob(job, T(0)).ok());
  ASSERT_TRUE(store_
                  ->UpdateTasksInState("bf-1", {TaskState::kPending},
                                       TaskState::kStaged, T(1))
                  .ok());
  std::vector<int64_t> staged;
  TaskQuery all;
  all.job_id = "bf-1";
  all.limit = 0;
  auto tasks = store_->ListTaskPage(all);
  ASSERT_TRUE(tasks.ok()) << tasks.status();
  ASSERT_EQ(tasks->size(), static_cast<size_t>(n));
  for (PartitionTask& t : *tasks) {
    if (t.ordinal % 1000 == 999) {
      t.state = TaskState::kUnchanged;
      ASSERT_TRUE(store_->UpdateTask(t).ok());
    } else {
      staged.push_back(t.ordinal);
    }
  }
  ASSERT_NO_FATAL_FAILURE(Reach("bf-1", JobState::kPublishing, T(2)));

  RecordingLineage lineage;
  ASSERT_TRUE(
      store_->RecordPublication("bf-1", lineage, JobState::kConfirming, T(3))
          .ok());
  // Each STAGED task once, in ordinal order, in pages of at most
  // kPublicationPage.
  EXPECT_EQ(lineage.ordinals, staged);
  for (size_t size : lineage.page_sizes) {
    EXPECT_LE(size, static_cast<size_t>(StateStore::kPublicationPage));
  }
  EXPECT_GE(lineage.page_sizes.size(), 3u);
  auto after = store_->GetJob("bf-1");
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->state, JobState::kConfirming);
  EXPECT_EQ(after->message, absl::StrCat("published ", staged.size()));
  EXPECT_EQ(after->counts.published, static_cast<int64_t>(staged.size()));
  EXPECT_EQ(after->counts.unchanged, n - static_cast<int64_t>(staged.size()));
  for (int i : {0, StateStore::kPublicationPage - 1,
                StateStore::kPublicationPage, n - 1}) {
    const std::string p = absl::StrCat("p", 100000 + i);
    auto versions = store_->GetLineage("daily_revenue", p);
    ASSERT_TRUE(versions.ok());
    ASSERT_EQ(versions->size(), 1u) << p;
    EXPECT_EQ((*versions)[0].job_id, "bf-1");
  }
  // UNCHANGED tasks have no record.
  EXPECT_TRUE(store_->GetLineage("daily_revenue", "p100999")->empty());

  // A repeat (after a restart) reads and writes nothing.
  RecordingLineage again;
  ASSERT_TRUE(
      store_->RecordPublication("bf-1", again, JobState::kConfirming, T(4))
          .ok());
  EXPECT_TRUE(again.ordinals.empty());
  EXPECT_EQ(store_->GetLineage("daily_revenue", "p100000")->size(), 1u);
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

}  // namespace
}  // namespace storage_state_store_contract_lineage_test
}  // namespace backfill
