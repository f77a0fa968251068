// The StateStore contract suite (tests/testing/state_store_contract.h):
// a job's moves — transitions checked against the expected state and the
// state machine's table, their times and audit events, messages, retries
// and approvals.

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "core/model/job_state_machine.h"
#include "core/ports/state_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/state_store_contract.h"

namespace backfill {
namespace storage_state_store_contract_moves_test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::MakeJob;
using testing::MakeLineage;
using testing::StateStoreContractTest;
using testing::T;

TEST_P(StateStoreContractTest, TransitionChecksExpectedFromAndRecordsAudit) {
  ASSERT_TRUE(store_->CreateJob(MakeJob(), T(0)).ok());
  absl::Status bad = store_->TransitionJob("bf-1", JobState::kRunning,
                                           JobState::kValidating, "x", T(1));
  EXPECT_EQ(bad.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(bad.message(), HasSubstr("QUEUED"));
  EXPECT_THAT(bad.message(), HasSubstr("not RUNNING"));
  auto job = store_->GetJob("bf-1");
  EXPECT_EQ(job->state, JobState::kQueued);
  EXPECT_EQ(job->update_time, T(0));
  EXPECT_EQ(job->message, "submitted");
  EXPECT_EQ(store_->ListAuditEvents("bf-1")->size(), 1u);
  EXPECT_EQ(
      store_->TransitionJob("bf-7", std::nullopt, JobState::kRunning, "", T(1))
          .code(),
      absl::StatusCode::kNotFound);

  ASSERT_TRUE(store_
                  ->TransitionJob("bf-1", JobState::kQueued, JobState::kRunning,
                                  "started", T(2))
                  .ok());
  ASSERT_TRUE(store_
                  ->TransitionJob("bf-1", std::nullopt, JobState::kPaused,
                                  "paused", T(3))
                  .ok());
  // Not in the table: nothing is written.
  const size_t before = store_->ListAuditEvents("bf-1")->size();
  absl::Status illegal = store_->TransitionJob(
      "bf-1", JobState::kPaused, JobState::kPublishing, "skip", T(4));
  EXPECT_EQ(illegal.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(illegal.message(), HasSubstr("cannot become PUBLISHING"));
  EXPECT_EQ(store_->GetJob("bf-1")->state, JobState::kPaused);
  EXPECT_EQ(store_->GetJob("bf-1")->update_time, T(3));
  EXPECT_EQ(store_->ListAuditEvents("bf-1")->size(), before);
  // Not even to the state it is in.
  EXPECT_EQ(
      store_->TransitionJob("bf-1", std::nullopt, JobState::kPaused, "", T(4))
          .code(),
      absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(store_
                  ->TransitionJob("bf-1", JobState::kPaused, JobState::kQueued,
                                  "resumed", T(4))
                  .ok());
  ASSERT_TRUE(store_
                  ->TransitionJob("bf-1", JobState::kQueued, JobState::kRunning,
                                  "running again", T(4))
                  .ok());
  job = store_->GetJob("bf-1");
  EXPECT_EQ(job->start_time, T(2));  // the first move to RUNNING
  EXPECT_EQ(job->end_time, absl::InfinitePast());
  ASSERT_TRUE(
      store_
          ->TransitionJob("bf-1", std::nullopt, JobState::kFailed, "boom", T(5))
          .ok());
  job = store_->GetJob("bf-1");
  EXPECT_EQ(job->state, JobState::kFailed);
  EXPECT_EQ(job->end_time, T(5));
  EXPECT_EQ(job->update_time, T(5));
  EXPECT_EQ(job->message, "boom");

  auto events = store_->ListAuditEvents("bf-1");
  ASSERT_TRUE(events.ok());
  std::vector<std::string> moves;
  for (const AuditEvent& e : *events) {
    moves.push_back(
        absl::StrCat(e.from_state, ">", e.to_state, ":", e.message));
  }
  EXPECT_THAT(
      moves,
      ElementsAre(">QUEUED:submitted", "QUEUED>RUNNING:started",
                  "RUNNING>PAUSED:paused", "PAUSED>QUEUED:resumed",
                  "QUEUED>RUNNING:running again", "RUNNING>FAILED:boom"));
  EXPECT_EQ((*events)[5].at, T(5));
  for (size_t i = 1; i < events->size(); ++i) {
    EXPECT_LT((*events)[i - 1].seq, (*events)[i].seq);
  }
}

TEST_P(StateStoreContractTest, EveryTableMoveIsAcceptedAndNoOtherOne) {
  // For every state: reach it, then try every target on a fresh job.
  for (int from = 0; from < kJobStateCount; ++from) {
    for (int to = 0; to < kJobStateCount; ++to) {
      const JobState f = static_cast<JobState>(from);
      const JobState t = static_cast<JobState>(to);
      SCOPED_TRACE(absl::StrCat(JobStateName(f), " -> ", JobStateName(t)));
      auto created = store_->CreateJob(MakeJob(), T(0));
      ASSERT_TRUE(created.ok()) << created.status();
      const std::string id = created->job.id;
      ASSERT_NO_FATAL_FAILURE(Reach(id, f, T(1)));
      const size_t events = store_->ListAuditEvents(id)->size();
      absl::Status moved = store_->TransitionJob(id, f, t, "try", T(2));
      if (CanTransition(f, t)) {
        EXPECT_TRUE(moved.ok()) << moved;
        EXPECT_EQ(store_->GetJob(id)->state, t);
        EXPECT_EQ(store_->ListAuditEvents(id)->size(), events + 1);
      } else {
        EXPECT_EQ(moved.code(), absl::StatusCode::kFailedPrecondition);
        EXPECT_EQ(store_->GetJob(id)->state, f);
        EXPECT_EQ(store_->ListAuditEvents(id)->size(), events);
      }
    }
  }
}

TEST_P(StateStoreContractTest, EndTimeIsSetByEveryMoveToATerminalState) {
  ASSERT_TRUE(store_->CreateJob(MakeJob(), T(0)).ok());
  ASSERT_NO_FATAL_FAILURE(Reach("bf-1", JobState::kSucceeded, T(1)));
  auto job = store_->GetJob("bf-1");
  EXPECT_EQ(job->start_time, T(1));
  EXPECT_EQ(job->end_time, T(1));
  ASSERT_TRUE(store_
                  ->TransitionJob("bf-1", JobState::kSucceeded,
                                  JobState::kRolledBack, "rolled back", T(7))
                  .ok());
  job = store_->GetJob("bf-1");
  EXPECT_EQ(job->state, JobState::kRolledBack);
  EXPECT_EQ(job->end_time, T(7));
  EXPECT_EQ(job->start_time, T(1));
  // A job cancelled while queued never started.
  ASSERT_TRUE(store_->CreateJob(MakeJob(), T(0)).ok());
  ASSERT_TRUE(store_
                  ->TransitionJob("bf-2", JobState::kQueued,
                                  JobState::kCancelled, "no", T(3))
                  .ok());
  job = store_->GetJob("bf-2");
  EXPECT_EQ(job->start_time, absl::InfinitePast());
  EXPECT_EQ(job->end_time, T(3));
}

TEST_P(StateStoreContractTest, TimesAreKeptToTheMicrosecond) {
  const absl::Time base = absl::FromUnixMicros(1700000000123456);
  ASSERT_TRUE(store_->CreateJob(MakeJob(), base + absl::Nanoseconds(999)).ok());
  auto job = store_->GetJob("bf-1");
  EXPECT_EQ(job->create_time, base);
  EXPECT_EQ((*store_->ListAuditEvents("bf-1"))[0].at, base);
  // Before 1970, rounded down too.
  const absl::Time early = absl::FromUnixMicros(-5);
  ASSERT_TRUE(store_
                  ->TransitionJob("bf-1", std::nullopt, JobState::kRunning, "",
                                  early - absl::Nanoseconds(1))
                  .ok());
  EXPECT_EQ(store_->GetJob("bf-1")->start_time, early - absl::Microseconds(1));
  // An infinite time reads back as "not yet".
  PartitionTask t = (*store_->ListTasks("bf-1"))[0];
  t.update_time = absl::InfiniteFuture();
  ASSERT_TRUE(store_->UpdateTask(t).ok());
  EXPECT_EQ((*store_->ListTasks("bf-1"))[0].update_time, absl::InfinitePast());
  t.update_time = base + absl::Nanoseconds(1500);
  ASSERT_TRUE(store_->UpdateTask(t).ok());
  EXPECT_EQ((*store_->ListTasks("bf-1"))[0].update_time,
            base + absl::Microseconds(1));
}

TEST_P(StateStoreContractTest, SetJobMessageKeepsTheStateAndTheAuditLog) {
  ASSERT_TRUE(store_->CreateJob(MakeJob(), T(0)).ok());
  ASSERT_TRUE(
      store_->SetJobMessage("bf-1", JobState::kQueued, "waits for bf-0", T(3))
          .ok());
  auto job = store_->GetJob("bf-1");
  EXPECT_EQ(job->message, "waits for bf-0");
  EXPECT_EQ(job->update_time, T(3));
  EXPECT_EQ(job->state, JobState::kQueued);
  EXPECT_EQ(store_->ListAuditEvents("bf-1")->size(), 1u);

  absl::Status wrong =
      store_->SetJobMessage("bf-1", JobState::kRunning, "nope", T(4));
  EXPECT_EQ(wrong.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(wrong.message(), HasSubstr("is QUEUED, not RUNNING"));
  EXPECT_EQ(store_->GetJob("bf-1")->message, "waits for bf-0");
  EXPECT_EQ(store_->GetJob("bf-1")->update_time, T(3));
  EXPECT_EQ(store_->SetJobMessage("bf-2", JobState::kQueued, "x", T(4)).code(),
            absl::StatusCode::kNotFound);
}

TEST_P(StateStoreContractTest, RetryResetsFailedCancelledAndRunningTasks) {
  ASSERT_TRUE(store_->CreateJob(MakeJob(), T(0)).ok());
  ASSERT_TRUE(store_->CreateJob(MakeJob(), T(0)).ok());
  auto tasks = *store_->ListTasks("bf-1");
  const TaskState states[] = {TaskState::kStaged, TaskState::kFailed,
                              TaskState::kRunning};
  for (size_t i = 0; i < tasks.size(); ++i) {
    tasks[i].state = states[i];
    tasks[i].attempts = 3;
    tasks[i].last_error = "disk on fire";
    tasks[i].update_time = T(1);
    ASSERT_TRUE(store_->UpdateTask(tasks[i]).ok());
  }
  ASSERT_NO_FATAL_FAILURE(Reach("bf-1", JobState::kFailed, T(2)));
  const size_t events = store_->ListAuditEvents("bf-1")->size();

  // Refused: wrong expected state, or a move outside the table.
  auto wrong = store_->RetryJob("bf-1", JobState::kPaused, JobState::kQueued,
                                "retry", T(3));
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(wrong.status().message(), HasSubstr("is FAILED, not PAUSED"));
  auto illegal = store_->RetryJob("bf-1", JobState::kFailed, JobState::kRunning,
                                  "retry", T(3));
  EXPECT_EQ(illegal.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(illegal.status().message(), HasSubstr("cannot become RUNNING"));
  EXPECT_EQ(store_->GetJob("bf-1")->counts.failed, 1);
  EXPECT_EQ(store_->ListAuditEvents("bf-1")->size(), events);
  EXPECT_EQ(
      store_->RetryJob("bf-9", JobState::kFailed, JobState::kQueued, "", T(3))
          .status()
          .code(),
      absl::StatusCode::kNotFound);

  auto reset = store_->RetryJob("bf-1", JobState::kFailed, JobState::kQueued,
                                "retry", T(4));
  ASSERT_TRUE(reset.ok()) << reset.status();
  EXPECT_EQ(*reset, 2);
  auto job = store_->GetJob("bf-1");
  EXPECT_EQ(job->state, JobState::kQueued);
  EXPECT_EQ(job->message, "retry");
  // Running again: it has not ended any more.
  EXPECT_EQ(job->end_time, absl::InfinitePast());
  EXPECT_EQ(job->counts.staged, 1);
  EXPECT_EQ(job->counts.pending, 2);
  tasks = *store_->ListTasks("bf-1");
  EXPECT_EQ(tasks[0].state, TaskState::kStaged);
  EXPECT_EQ(tasks[0].attempts, 3);
  EXPECT_EQ(tasks[0].update_time, T(1));
  for (size_t i : {1, 2}) {
    EXPECT_EQ(tasks[i].state, TaskState::kPending);
    EXPECT_EQ(tasks[i].attempts, 0);
    EXPECT_EQ(tasks[i].last_error, "disk on fire");
    EXPECT_EQ(tasks[i].update_time, T(4));
  }
  auto audit = *store_->ListAuditEvents("bf-1");
  EXPECT_EQ(audit.back().from_state, "FAILED");
  EXPECT_EQ(audit.back().to_state, "QUEUED");
  EXPECT_EQ(audit.back().message, "retry");
  // The other job is untouched.
  EXPECT_EQ(store_->GetJob("bf-2")->counts.pending, 3);
}

TEST_P(StateStoreContractTest, ApproveJobRecordsTheApprovalWithTheMove) {
  ASSERT_TRUE(store_->CreateJob(MakeJob(), T(0)).ok());
  ASSERT_TRUE(store_
                  ->UpdateTasksInState("bf-1", {TaskState::kPending},
                                       TaskState::kStaged, T(1))
                  .ok());
  Approval approval;
  approval.approved_by = "bob";
  approval.reason = "diff reviewed";
  approval.override_validation = true;
  approval.approved_at = T(5) + absl::Nanoseconds(1500);
  // Not held for approval: refused, nothing written.
  const size_t events = store_->ListAuditEvents("bf-1")->size();
  absl::Status early =
      store_->ApproveJob("bf-1", JobState::kAwaitingApproval,
                         JobState::kPublishing, approval, "approved", T(5));
  EXPECT_EQ(early.code(), absl::StatusCode::kFailedPrecondition) << early;
  EXPECT_FALSE(store_->GetJob("bf-1")->approval.has_value());
  EXPECT_EQ(store_->ListAuditEvents("bf-1")->size(), events);
  EXPECT_EQ(store_
                ->ApproveJob("bf-9", JobState::kAwaitingApproval,
                             JobState::kPublishing, approval, "approved", T(5))
                .code(),
            absl::StatusCode::kNotFound);

  ASSERT_NO_FATAL_FAILURE(Reach("bf-1", JobState::kValidationFailed, T(2)));
  ASSERT_TRUE(store_
                  ->ApproveJob("bf-1", JobState::kValidationFailed,
                               JobState::kPublishing, approval,
                               "approved by bob", T(5))
                  .ok());
  auto job = store_->GetJob("bf-1");
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->state, JobState::kPublishing);
  EXPECT_EQ(job->message, "approved by bob");
  ASSERT_TRUE(job->approval.has_value());
  EXPECT_EQ(job->approval->approved_by, "bob");
  EXPECT_EQ(job->approval->reason, "diff reviewed");
  EXPECT_TRUE(job->approval->override_validation);
  EXPECT_EQ(job->approval->from_state, JobState::kValidationFailed);
  EXPECT_EQ(job->approval->approved_at, T(5) + absl::Microseconds(1));
  auto audit = *store_->ListAuditEvents("bf-1");
  EXPECT_EQ(audit.back().from_state, "VALIDATION_FAILED");
  EXPECT_EQ(audit.back().to_state, "PUBLISHING");
  EXPECT_EQ(audit.back().message, "approved by bob");
  EXPECT_EQ(store_->ListJobs({})->at(0).approval->approved_by, "bob");

  // The lineage the job publishes carries the approval.
  LineageRecord rec = MakeLineage("daily_revenue", "2025-01-01", T(6));
  rec.approval = job->approval;
  LineageRecord plain = MakeLineage("daily_revenue", "2025-01-02", T(6));
  ASSERT_TRUE(store_
                  ->RecordPublication("bf-1", {rec, plain},
                                      JobState::kConfirming, "published", T(6))
                  .ok());
  auto lineage = store_->GetLineage("daily_revenue", "2025-01-01");
  ASSERT_EQ(lineage->size(), 1u);
  ASSERT_TRUE((*lineage)[0].approval.has_value());
  EXPECT_EQ((*lineage)[0].approval->approved_by, "bob");
  EXPECT_EQ((*lineage)[0].approval->reason, "diff reviewed");
  EXPECT_TRUE((*lineage)[0].approval->override_validation);
  EXPECT_EQ((*lineage)[0].approval->from_state, JobState::kValidationFailed);
  EXPECT_EQ((*lineage)[0].approval->approved_at, T(5) + absl::Microseconds(1));
  EXPECT_FALSE(
      (*store_->GetLineage("daily_revenue", "2025-01-02"))[0].approval);

  // A second approval of another held job is recorded apart; approving the
  // same job twice is refused.
  ASSERT_TRUE(store_->CreateJob(MakeJob(), T(10)).ok());
  ASSERT_NO_FATAL_FAILURE(Reach("bf-2", JobState::kAwaitingApproval, T(10)));
  approval.override_validation = false;
  ASSERT_TRUE(store_
                  ->ApproveJob("bf-2", JobState::kAwaitingApproval,
                               JobState::kPublishing, approval, "ok", T(11))
                  .ok());
  EXPECT_EQ(store_->GetJob("bf-2")->approval->from_state,
            JobState::kAwaitingApproval);
  ASSERT_NO_FATAL_FAILURE(Reach("bf-2", JobState::kFailed, T(12)));
  ASSERT_NO_FATAL_FAILURE(Reach("bf-2", JobState::kQueued, T(12)));
  ASSERT_NO_FATAL_FAILURE(Reach("bf-2", JobState::kAwaitingApproval, T(12)));
  EXPECT_EQ(store_
                ->ApproveJob("bf-2", JobState::kAwaitingApproval,
                             JobState::kPublishing, approval, "again", T(13))
                .code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(store_->GetJob("bf-2")->state, JobState::kAwaitingApproval);
}

}  // namespace
}  // namespace storage_state_store_contract_moves_test
}  // namespace backfill
