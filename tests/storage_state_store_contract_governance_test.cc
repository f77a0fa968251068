// The StateStore contract suite (tests/testing/state_store_contract.h):
// what is recorded around a job's decisions — consumer confirmations and
// their standings, the diff computed before publishing, and a reader's
// view of a job with its results.

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "core/ports/state_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/state_store_contract.h"

namespace backfill {
namespace storage_state_store_contract_governance_test {
namespace {

using testing::Confirmation;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using testing::MakeJob;
using testing::StateStoreContractTest;
using testing::T;

std::vector<std::string> Standings(StateStore* store) {
  std::vector<std::string> out;
  absl::StatusOr<std::vector<ConsumerStanding>> standings =
      store->ListConsumerStandings();
  EXPECT_TRUE(standings.ok()) << standings.status();
  if (!standings.ok()) return out;
  for (const ConsumerStanding& s : *standings) {
    out.push_back(absl::StrCat(s.dataset, "/", s.consumer, ":",
                               absl::StrJoin(s.unhealthy_jobs, ",")));
  }
  return out;
}

// A policy paused and resumed: the latest state per dataset is kept, and
// each change is an audit event of no job, between the jobs' events in
// the order written, which a job's own listing leaves out.
TEST_P(StateStoreContractTest, ReplayPolicyPausesAreKeptAndAudited) {
  absl::StatusOr<std::vector<ReplayPolicyPause>> none =
      store_->ListReplayPolicyPauses();
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_THAT(*none, IsEmpty());

  absl::StatusOr<CreateJobResult> job = store_->CreateJob(MakeJob(), T(0));
  ASSERT_TRUE(job.ok()) << job.status();
  ReplayPolicyPause pause;
  pause.dataset = "daily_revenue";
  pause.paused = true;
  pause.reason = "quarter close";
  pause.by = "alice";
  pause.at = T(10);
  ASSERT_TRUE(store_
                  ->SetReplayPolicyPause(pause,
                                         "paused by alice: quarter "
                                         "close")
                  .ok());
  ReplayPolicyPause other = pause;
  other.dataset = "monthly_revenue";
  ASSERT_TRUE(store_->SetReplayPolicyPause(other, "paused by alice").ok());
  ReplayPolicyPause resumed = pause;
  resumed.paused = false;
  resumed.reason = "";
  resumed.by = "bob";
  resumed.at = T(20);
  ASSERT_TRUE(store_->SetReplayPolicyPause(resumed, "resumed by bob").ok());

  absl::StatusOr<std::vector<ReplayPolicyPause>> pauses =
      store_->ListReplayPolicyPauses();
  ASSERT_TRUE(pauses.ok()) << pauses.status();
  ASSERT_EQ(pauses->size(), 2u);
  EXPECT_EQ((*pauses)[0].dataset, "daily_revenue");
  EXPECT_FALSE((*pauses)[0].paused);
  EXPECT_EQ((*pauses)[0].by, "bob");
  EXPECT_EQ((*pauses)[0].at, T(20));
  EXPECT_EQ((*pauses)[1].dataset, "monthly_revenue");
  EXPECT_TRUE((*pauses)[1].paused);
  EXPECT_EQ((*pauses)[1].reason, "quarter close");

  AuditQuery all;
  all.limit = 100;
  absl::StatusOr<std::vector<AuditEvent>> log = store_->ListAuditLog(all);
  ASSERT_TRUE(log.ok()) << log.status();
  std::vector<std::string> seen;
  for (const AuditEvent& e : *log) {
    seen.push_back(absl::StrCat(e.job_id, "|", e.subject, "|", e.from_state,
                                ">", e.to_state, "|", e.message));
  }
  EXPECT_THAT(seen, ElementsAre(absl::StrCat(job->job.id, "||>QUEUED|",
                                             (*log)[0].message),
                                "|replay_policy:daily_revenue|RUNNING>PAUSED|"
                                "paused by alice: quarter close",
                                "|replay_policy:monthly_revenue|RUNNING>PAUSED|"
                                "paused by alice",
                                "|replay_policy:daily_revenue|PAUSED>RUNNING|"
                                "resumed by bob"));
  EXPECT_EQ((*log)[3].at, T(20));

  AuditQuery of_job = all;
  of_job.job_id = job->job.id;
  absl::StatusOr<std::vector<AuditEvent>> job_log =
      store_->ListAuditLog(of_job);
  ASSERT_TRUE(job_log.ok()) << job_log.status();
  EXPECT_EQ(job_log->size(), 1u);
  absl::StatusOr<std::vector<AuditEvent>> events =
      store_->ListAuditEvents(job->job.id);
  ASSERT_TRUE(events.ok()) << events.status();
  EXPECT_EQ(events->size(), 1u);

  AuditQuery since = all;
  since.since = T(15);
  absl::StatusOr<std::vector<AuditEvent>> late = store_->ListAuditLog(since);
  ASSERT_TRUE(late.ok()) << late.status();
  ASSERT_EQ(late->size(), 1u);
  EXPECT_EQ((*late)[0].message, "resumed by bob");
}

TEST_P(StateStoreContractTest, ConsumerConfirmationsAndStandings) {
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(store_->CreateJob(MakeJob(), T(0)).ok());
  }
  EXPECT_THAT(Standings(store_.get()), IsEmpty());
  EXPECT_THAT(*store_->ListConsumerConfirmations("bf-1"), IsEmpty());
  EXPECT_EQ(store_->ReplaceConsumerConfirmations("bf-9", {}).code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->ListConsumerConfirmations("bf-9").status().code(),
            absl::StatusCode::kNotFound);

  ASSERT_NO_FATAL_FAILURE(Reach("bf-1", JobState::kDownstreamUnhealthy, T(1)));
  ASSERT_TRUE(store_
                  ->ReplaceConsumerConfirmations(
                      "bf-1", {Confirmation("daily", "cache_b", false, T(1)),
                               Confirmation("daily", "cache_a", true, T(1))})
                  .ok());
  ASSERT_NO_FATAL_FAILURE(Reach("bf-2", JobState::kSucceeded, T(2)));
  ASSERT_TRUE(store_
                  ->ReplaceConsumerConfirmations(
                      "bf-2", {Confirmation("daily", "cache_b", true, T(2))})
                  .ok());
  ASSERT_NO_FATAL_FAILURE(Reach("bf-3", JobState::kDownstreamUnhealthy, T(3)));
  ASSERT_TRUE(store_
                  ->ReplaceConsumerConfirmations(
                      "bf-3", {Confirmation("monthly", "m", false, T(3)),
                               Confirmation("daily", "cache_b", false, T(3))})
                  .ok());

  // A round trip keeps every field, in the order recorded.
  absl::StatusOr<std::vector<ConsumerFinding>> one =
      store_->ListConsumerConfirmations("bf-1");
  ASSERT_TRUE(one.ok()) << one.status();
  ASSERT_EQ(one->size(), 2u);
  EXPECT_EQ((*one)[0].consumer, "cache_b");
  EXPECT_FALSE((*one)[0].healthy);
  EXPECT_EQ((*one)[0].message, "still serves 1 for x");
  EXPECT_EQ((*one)[0].latency, absl::Microseconds(1500123));
  EXPECT_EQ((*one)[0].at, T(1));
  EXPECT_EQ((*one)[1].consumer, "cache_a");
  EXPECT_TRUE((*one)[1].healthy);

  // cache_b was found unhealthy by two jobs that are still unhealthy; bf-2
  // found it healthy later, which does not clear them.
  EXPECT_THAT(Standings(store_.get()),
              ElementsAre("daily/cache_a:", "daily/cache_b:bf-1,bf-3",
                          "monthly/m:bf-3"));
  // A rollback ends bf-1's claim.
  ASSERT_TRUE(store_
                  ->TransitionJob("bf-1", JobState::kDownstreamUnhealthy,
                                  JobState::kRolledBack, "undo", T(4))
                  .ok());
  EXPECT_THAT(
      Standings(store_.get()),
      ElementsAre("daily/cache_a:", "daily/cache_b:bf-3", "monthly/m:bf-3"));
  // Confirmed again, healthy: the new results replace the old ones.
  ASSERT_TRUE(store_
                  ->TransitionJob("bf-3", JobState::kDownstreamUnhealthy,
                                  JobState::kConfirming, "again", T(5))
                  .ok());
  const std::vector<ConsumerFinding> healthy = {
      Confirmation("monthly", "m", true, T(5)),
      Confirmation("daily", "cache_b", true, T(5))};
  ASSERT_TRUE(store_->ReplaceConsumerConfirmations("bf-3", healthy).ok());
  ASSERT_TRUE(store_->ReplaceConsumerConfirmations("bf-3", healthy).ok());
  ASSERT_TRUE(store_
                  ->TransitionJob("bf-3", JobState::kConfirming,
                                  JobState::kSucceeded, "ok", T(5))
                  .ok());
  EXPECT_EQ(store_->ListConsumerConfirmations("bf-3")->size(), 2u);
  EXPECT_THAT(Standings(store_.get()),
              ElementsAre("daily/cache_a:", "daily/cache_b:", "monthly/m:"));
}

JobDiff MakeDiff(const std::string& job_id, absl::Time at) {
  JobDiff diff;
  diff.job_id = job_id;
  diff.computed_at = at;
  DatasetDiff a;
  a.dataset = "daily_revenue";
  a.columns.by_key = true;
  a.columns.key = {"ds", "region"};
  a.columns.values = {"revenue", "orders", "note"};
  a.columns.measures = {"revenue", "orders"};
  PartitionDiff p2;  // listed first: the store sorts by partition
  p2.partition = "2025-01-02";
  p2.rows_before = 0;
  p2.rows_after = 2;
  p2.added = 2;
  p2.measures = {{"revenue", 0, 0.1 + 0.2}, {"orders", 0, 7}};
  PartitionDiff p1;
  p1.partition = "2025-01-01";
  p1.rows_before = 5;
  p1.rows_after = 4;
  p1.removed = 1;
  p1.changed = 2;
  p1.unchanged = 2;
  p1.measures = {{"revenue", 1234.5, -1e-300}, {"orders", 9, 8}};
  p1.samples = {
      {DiffChange::kChanged,
       {"'2025-01-01'", "'north'"},
       {"12.5", "3", "NULL"},
       {"10", "3", "'it''s: 3:1'"}},
      {DiffChange::kRemoved, {"'2025-01-01'", "'x'"}, {"1", "1", ""}, {}}};
  a.partitions = {p2, p1};
  DatasetDiff b;
  b.dataset = "monthly_revenue";
  b.columns.values = {"month", "total"};
  b.columns.measures = {"total"};
  PartitionDiff m;
  m.partition = "2025-01";
  m.error = "no such column: total";
  m.measures = {{"total", 0, 0}};
  b.partitions = {m};
  diff.datasets = {a, b};
  return diff;
}

// A diff of one partition of `dataset` that gained `rows` rows.
JobDiff OnePartitionDiff(const std::string& job_id, absl::Time at,
                         const std::string& dataset, int64_t rows) {
  PartitionDiff p;
  p.partition = "2025-01-02";
  p.rows_after = rows;
  p.added = rows;
  DatasetDiff only;
  only.dataset = dataset;
  only.partitions = {p};
  JobDiff diff;
  diff.job_id = job_id;
  diff.computed_at = at;
  diff.datasets = {only};
  return diff;
}

TEST_P(StateStoreContractTest, ADiffRoundTripsAndIsReplacedAsAWhole) {
  ASSERT_TRUE(store_->CreateJob(MakeJob(), T(0)).ok());
  auto none = store_->GetJobDiff("bf-1", "", true);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->has_value());
  EXPECT_EQ(store_->GetJobDiff("bf-9", "", true).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->ReplaceJobDiff(MakeDiff("bf-9", T(1))).code(),
            absl::StatusCode::kNotFound);

  ASSERT_TRUE(store_->ReplaceJobDiff(MakeDiff("bf-1", T(1))).ok());
  auto got = store_->GetJobDiff("bf-1", "", true);
  ASSERT_TRUE(got.ok() && got->has_value()) << got.status();
  const JobDiff& diff = **got;
  EXPECT_EQ(diff.computed_at, T(1));
  ASSERT_EQ(diff.datasets.size(), 2u);
  const DatasetDiff& a = diff.datasets[0];
  EXPECT_EQ(a.dataset, "daily_revenue");
  EXPECT_TRUE(a.columns.by_key);
  EXPECT_THAT(a.columns.key, ElementsAre("ds", "region"));
  EXPECT_THAT(a.columns.values, ElementsAre("revenue", "orders", "note"));
  EXPECT_THAT(a.columns.measures, ElementsAre("revenue", "orders"));
  ASSERT_EQ(a.partitions.size(), 2u);
  const PartitionDiff& p1 = a.partitions[0];
  EXPECT_EQ(p1.dataset, "daily_revenue");
  EXPECT_EQ(p1.partition, "2025-01-01");
  EXPECT_EQ(p1.rows_before, 5);
  EXPECT_EQ(p1.rows_after, 4);
  EXPECT_EQ(p1.removed, 1);
  EXPECT_EQ(p1.changed, 2);
  EXPECT_EQ(p1.unchanged, 2);
  ASSERT_EQ(p1.measures.size(), 2u);
  EXPECT_EQ(p1.measures[0].column, "revenue");
  EXPECT_EQ(p1.measures[0].before, 1234.5);
  EXPECT_EQ(p1.measures[0].after, -1e-300);  // doubles kept exactly
  ASSERT_EQ(p1.samples.size(), 2u);
  EXPECT_EQ(p1.samples[0].change, DiffChange::kChanged);
  EXPECT_THAT(p1.samples[0].key, ElementsAre("'2025-01-01'", "'north'"));
  EXPECT_THAT(p1.samples[0].before, ElementsAre("12.5", "3", "NULL"));
  EXPECT_THAT(p1.samples[0].after, ElementsAre("10", "3", "'it''s: 3:1'"));
  EXPECT_EQ(p1.samples[1].change, DiffChange::kRemoved);
  EXPECT_THAT(p1.samples[1].before, ElementsAre("1", "1", ""));
  EXPECT_THAT(p1.samples[1].after, IsEmpty());
  EXPECT_EQ(a.partitions[1].partition, "2025-01-02");
  EXPECT_EQ(a.partitions[1].measures[0].after, 0.1 + 0.2);
  const DatasetDiff& b = diff.datasets[1];
  EXPECT_FALSE(b.columns.by_key);
  EXPECT_THAT(b.columns.key, IsEmpty());
  ASSERT_EQ(b.partitions.size(), 1u);
  EXPECT_EQ(b.partitions[0].error, "no such column: total");

  // One dataset; without samples.
  got = store_->GetJobDiff("bf-1", "monthly_revenue", false);
  ASSERT_TRUE(got.ok() && got->has_value());
  ASSERT_EQ((*got)->datasets.size(), 1u);
  EXPECT_EQ((*got)->datasets[0].dataset, "monthly_revenue");
  got = store_->GetJobDiff("bf-1", "daily_revenue", false);
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_THAT((*got)->datasets[0].partitions[0].samples, IsEmpty());
  got = store_->GetJobDiff("bf-1", "no_such", true);
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_THAT((*got)->datasets, IsEmpty());

  // A new diff replaces everything of the old one.
  ASSERT_TRUE(
      store_->ReplaceJobDiff(OnePartitionDiff("bf-1", T(2), "daily_revenue", 1))
          .ok());
  got = store_->GetJobDiff("bf-1", "", true);
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ((*got)->computed_at, T(2));
  ASSERT_EQ((*got)->datasets.size(), 1u);
  ASSERT_EQ((*got)->datasets[0].partitions.size(), 1u);
  EXPECT_EQ((*got)->datasets[0].partitions[0].added, 1);
  EXPECT_THAT((*got)->datasets[0].partitions[0].measures, IsEmpty());
}

TEST_P(StateStoreContractTest, ADiffListingADatasetOrPartitionTwiceIsRefused) {
  ASSERT_TRUE(store_->CreateJob(MakeJob(), T(0)).ok());
  ASSERT_TRUE(store_->ReplaceJobDiff(MakeDiff("bf-1", T(1))).ok());
  JobDiff twice = MakeDiff("bf-1", T(2));
  twice.datasets.push_back(twice.datasets[0]);
  EXPECT_EQ(store_->ReplaceJobDiff(twice).code(),
            absl::StatusCode::kFailedPrecondition);
  JobDiff partition_twice = MakeDiff("bf-1", T(2));
  partition_twice.datasets[1].partitions.push_back(
      partition_twice.datasets[1].partitions[0]);
  EXPECT_EQ(store_->ReplaceJobDiff(partition_twice).code(),
            absl::StatusCode::kFailedPrecondition);
  // The diff stored before is still the one read.
  auto diff = store_->GetJobDiff("bf-1", "", /*with_samples=*/false);
  ASSERT_TRUE(diff.ok() && diff->has_value()) << diff.status();
  EXPECT_EQ((*diff)->computed_at, T(1));
  ASSERT_EQ((*diff)->datasets.size(), 2u);
  EXPECT_EQ((*diff)->datasets[1].partitions.size(), 1u);
}

TEST_P(StateStoreContractTest, AConfirmationsLatencyIsKeptToTheMicrosecond) {
  ASSERT_TRUE(store_->CreateJob(MakeJob(), T(0)).ok());
  ConsumerFinding c = Confirmation("daily", "cache", true, T(1));
  c.latency = absl::Microseconds(1500) + absl::Nanoseconds(999);
  ASSERT_TRUE(store_->ReplaceConsumerConfirmations("bf-1", {c}).ok());
  auto read = store_->ListConsumerConfirmations("bf-1");
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->size(), 1u);
  EXPECT_EQ((*read)[0].latency, absl::Microseconds(1500));
}

TEST_P(StateStoreContractTest, AReadersJobHasItsResultsInEitherView) {
  ASSERT_TRUE(store_->CreateJob(MakeJob(), T(0)).ok());
  ASSERT_TRUE(store_->CreateJob(MakeJob(), T(0)).ok());
  EXPECT_EQ(store_->GetJobForReader("bf-9", JobView::kBasic).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->GetJobForReader("bf-9", JobView::kFull).status().code(),
            absl::StatusCode::kNotFound);

  // Before any result: the job alone.
  auto fresh = store_->GetJobForReader("bf-1", JobView::kBasic);
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  EXPECT_THAT(fresh->checks, IsEmpty());
  EXPECT_THAT(fresh->consumers, IsEmpty());
  EXPECT_THAT(fresh->diff, IsEmpty());

  CheckResult check;
  check.check = "row_change";
  check.kind = "row_change";
  check.severity = CheckSeverity::kHold;
  check.dataset = "daily";
  check.summary = true;
  check.partitions_checked = 3;
  check.partitions_failed = 1;
  check.observed = "-90.0%";
  ASSERT_TRUE(store_->ReplaceCheckResults("bf-1", {check}).ok());
  ASSERT_NO_FATAL_FAILURE(Reach("bf-1", JobState::kDownstreamUnhealthy, T(1)));
  ASSERT_TRUE(store_
                  ->ReplaceConsumerConfirmations(
                      "bf-1", {Confirmation("daily", "cache_b", false, T(1))})
                  .ok());
  ASSERT_TRUE(store_->ReplaceJobDiff(MakeDiff("bf-1", T(1))).ok());

  // Each view has what the four separate reads give, and no more; the
  // other job has none of bf-1's results.
  for (JobView view : {JobView::kBasic, JobView::kFull}) {
    SCOPED_TRACE(view == JobView::kFull ? "full" : "basic");
    auto got = store_->GetJobForReader("bf-1", view);
    ASSERT_TRUE(got.ok()) << got.status();
    auto job = view == JobView::kFull ? store_->GetJob("bf-1")
                                      : store_->GetJobProgress("bf-1");
    ASSERT_TRUE(job.ok()) << job.status();
    EXPECT_EQ(got->state, job->state);
    EXPECT_EQ(got->counts.total, job->counts.total);
    ASSERT_EQ(got->plan.datasets.size(), job->plan.datasets.size());
    for (size_t i = 0; i < got->plan.datasets.size(); ++i) {
      EXPECT_EQ(got->plan.datasets[i].partitions,
                job->plan.datasets[i].partitions);
    }
    EXPECT_EQ(got->plan.datasets[0].partitions.empty(),
              view == JobView::kBasic);
    ASSERT_EQ(got->checks.size(), 1u);
    EXPECT_EQ(got->checks[0].observed, "-90.0%");
    EXPECT_EQ(got->checks[0].partitions_failed, 1);
    ASSERT_EQ(got->consumers.size(), 1u);
    EXPECT_EQ(got->consumers[0].consumer, "cache_b");
    EXPECT_FALSE(got->consumers[0].healthy);
    auto summary = store_->GetJobDiffSummary("bf-1");
    ASSERT_TRUE(summary.ok() && summary->has_value());
    ASSERT_EQ(got->diff.size(), (*summary)->size());
    ASSERT_EQ(got->diff.size(), 2u);
    for (size_t i = 0; i < got->diff.size(); ++i) {
      EXPECT_EQ(got->diff[i].dataset, (**summary)[i].dataset);
      EXPECT_EQ(got->diff[i].partitions, (**summary)[i].partitions);
      EXPECT_EQ(got->diff[i].rows_after, (**summary)[i].rows_after);
      EXPECT_EQ(got->diff[i].changed, (**summary)[i].changed);
    }
    auto other = store_->GetJobForReader("bf-2", view);
    ASSERT_TRUE(other.ok()) << other.status();
    EXPECT_THAT(other->checks, IsEmpty());
    EXPECT_THAT(other->consumers, IsEmpty());
    EXPECT_THAT(other->diff, IsEmpty());
  }

  // A replaced diff is what the next read shows (no summary kept from
  // before).
  ASSERT_TRUE(
      store_->ReplaceJobDiff(OnePartitionDiff("bf-1", T(2), "daily", 7)).ok());
  auto replaced = store_->GetJobForReader("bf-1", JobView::kBasic);
  ASSERT_TRUE(replaced.ok()) << replaced.status();
  ASSERT_EQ(replaced->diff.size(), 1u);
  EXPECT_EQ(replaced->diff[0].dataset, "daily");
  EXPECT_EQ(replaced->diff[0].rows_after, 7);
  EXPECT_EQ(replaced->diff[0].added, 7);
}

}  // namespace
}  // namespace storage_state_store_contract_governance_test
}  // namespace backfill
