// Tests of the diff and approval steps through the manager facade, over the
// in-memory state store and the fake engine: `require_approval` holds a job
// in AWAITING_APPROVAL with its diff stored and nothing published; approve
// publishes it (once), with the approval in the audit log and lineage; a
// VALIDATION_FAILED job needs override (and intact staging), and the
// override survives a restart in PUBLISHING; held jobs are superseded by
// newer overlapping ones and can no longer be approved.

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/base/clock.h"
#include "core/model/pipeline_loader.h"
#include "core/run/backfill_manager.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/fake_engine.h"
#include "tests/testing/memory_state_store.h"

namespace backfill {
namespace core_approval_test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using Call = ::backfill::testing::FakeEngine::Call;

// gated requires approval; daily does not.
constexpr char kPipeline[] = R"yaml(
datasets:
  - name: orders
    kind: source
    table: raw_orders
    partition: {column: day, grain: day}
  - name: daily
    kind: derived
    partition: {column: day, grain: day}
    upstream: [{dataset: orders, mapping: identity}]
    transform: "SELECT day, 1 AS n FROM raw_orders WHERE day = :partition"
    contract: {columns: {day: TEXT, n: INTEGER}, primary_key: [day]}
  - name: gated
    kind: derived
    require_approval: true
    partition: {column: day, grain: day}
    upstream: [{dataset: orders, mapping: identity}]
    transform: "SELECT day, 2 AS n FROM raw_orders WHERE day = :partition"
    contract: {columns: {day: TEXT, n: INTEGER}, primary_key: [day]}
)yaml";

class ApprovalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto catalog = LoadPipelineTexts({{"pipeline.yaml", kPipeline}});
    ASSERT_TRUE(catalog.ok()) << catalog.status();
    catalog_ = std::make_unique<Catalog>(*std::move(catalog));
    engine_.SetHook([this](const Call& call) -> absl::Status {
      absl::MutexLock lock(&mu_);
      if (call.method == "Publish" && !publish_fault_.ok()) {
        return publish_fault_;
      }
      if (call.method == "StagePartition" && call.partition == "2025-01-05") {
        return absl::InvalidArgumentError("a bad row");
      }
      return absl::OkStatus();
    });
    // Three rows per partition staged; two published before.
    engine_.SetRowsFor(
        [](const std::string&, const std::string&) { return int64_t{3}; });
    for (const char* day : {"2025-01-01", "2025-01-02", "2025-01-03"}) {
      engine_.SetPublishedRows("gated", day, 2);
      engine_.SetPublishedRows("daily", day, 2);
    }
    Start();
  }
  void TearDown() override {
    store_.SetWriteHook(nullptr);
    if (manager_) manager_->Shutdown();
    manager_.reset();
  }
  void Start() {
    ManagerOptions options;
    options.workers = 2;
    options.retry_backoff = absl::Milliseconds(1);
    options.max_backoff = absl::Milliseconds(5);
    manager_ = std::make_unique<BackfillManager>(
        catalog_.get(), &store_, &engine_, &clock_, nullptr, options);
    ASSERT_TRUE(manager_->Start().ok());
  }
  void Restart() {
    manager_->Shutdown();
    manager_.reset();
    engine_.Restart();
    Start();
  }
  void FailPublish(absl::Status status) {
    absl::MutexLock lock(&mu_);
    publish_fault_ = std::move(status);
  }

  std::string Submit(const std::string& dataset, const std::string& from,
                     const std::string& to) {
    BackfillRequest r;
    r.dataset = dataset;
    r.from = from;
    r.to = to;
    r.reason = "test";
    r.requested_by = "carol";
    auto s = manager_->Submit(r, {});
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? s->job.id : "";
  }
  Job Get(const std::string& id) {
    auto job = manager_->GetJob(id);
    EXPECT_TRUE(job.ok()) << job.status();
    return job.ok() ? *job : Job{};
  }
  Job WaitState(const std::string& id, JobState state) {
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    Job job;
    while (absl::Now() < deadline) {
      job = Get(id);
      if (job.state == state) return job;
      absl::SleepFor(absl::Milliseconds(2));
    }
    ADD_FAILURE() << id << " is " << JobStateName(job.state) << ", not "
                  << JobStateName(state) << ": " << job.message;
    return job;
  }
  Approval By(const std::string& who, const std::string& reason,
              bool override_validation = false) {
    Approval a;
    a.approved_by = who;
    a.reason = reason;
    a.override_validation = override_validation;
    return a;
  }
  std::vector<std::string> AuditMessages(const std::string& id) {
    std::vector<std::string> out;
    auto events = store_.ListAuditEvents(id);
    EXPECT_TRUE(events.ok()) << events.status();
    if (!events.ok()) return out;
    for (const AuditEvent& e : *events) {
      out.push_back(
          absl::StrCat(e.from_state, "->", e.to_state, ": ", e.message));
    }
    return out;
  }

  std::unique_ptr<Catalog> catalog_;
  testing::InMemoryStateStore store_;
  testing::FakeEngine engine_;
  ManualClock clock_{absl::FromUnixSeconds(1767225600)};
  std::unique_ptr<BackfillManager> manager_;
  absl::Mutex mu_;
  absl::Status publish_fault_ ABSL_GUARDED_BY(mu_);
};

TEST_F(ApprovalTest, RequireApprovalHoldsTheJobWithItsDiffUntilApproved) {
  const std::string id = Submit("gated", "2025-01-01", "2025-01-03");
  Job held = WaitState(id, JobState::kAwaitingApproval);
  EXPECT_THAT(held.message, HasSubstr("gated requires approval"));
  // In the API's terms (the CLI shows its own: cli_terms.h).
  EXPECT_THAT(held.message, HasSubstr(absl::StrCat("`ApproveBackfill` ", id,
                                                   " and a `reason`")));
  EXPECT_THAT(held.message, HasSubstr(absl::StrCat("`DiffBackfill` ", id)));
  EXPECT_THAT(held.message, Not(HasSubstr("backfillctl")));
  EXPECT_EQ(engine_.calls("Publish"), 0);
  EXPECT_EQ(engine_.PublishedRows("gated", "2025-01-01"), 2);
  // The diff is stored: per partition 2 rows before, 3 after.
  ASSERT_EQ(held.diff.size(), 1u);
  EXPECT_EQ(held.diff[0].dataset, "gated");
  EXPECT_EQ(held.diff[0].partitions, 2);
  EXPECT_EQ(held.diff[0].rows_before, 4);
  EXPECT_EQ(held.diff[0].rows_after, 6);
  EXPECT_EQ(held.diff[0].added, 2);
  EXPECT_FALSE(held.approval.has_value());

  // A reason is required.
  auto no_reason = manager_->Approve(id, By("dave", "  "));
  EXPECT_EQ(no_reason.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(no_reason.status().message()), HasSubstr("reason"));
  EXPECT_EQ(Get(id).state, JobState::kAwaitingApproval);

  auto approved = manager_->Approve(id, By("dave", "diff looks right"));
  ASSERT_TRUE(approved.ok()) << approved.status();
  ASSERT_TRUE(approved->approval.has_value());
  EXPECT_EQ(approved->approval->approved_by, "dave");
  Job done = WaitState(id, JobState::kSucceeded);
  EXPECT_EQ(engine_.calls("Publish"), 1);
  EXPECT_EQ(engine_.PublishedRows("gated", "2025-01-01"), 3);
  ASSERT_TRUE(done.approval.has_value());
  EXPECT_EQ(done.approval->reason, "diff looks right");
  EXPECT_EQ(done.approval->from_state, JobState::kAwaitingApproval);
  EXPECT_FALSE(done.approval->override_validation);
  EXPECT_EQ(done.approval->approved_at, clock_.Now());
  EXPECT_THAT(AuditMessages(id),
              ::testing::Contains(
                  "AWAITING_APPROVAL->PUBLISHING: approved by dave: diff looks "
                  "right; publishing"));
  auto lineage = store_.GetLineage("gated", "2025-01-02");
  ASSERT_EQ(lineage->size(), 1u);
  ASSERT_TRUE((*lineage)[0].approval.has_value());
  EXPECT_EQ((*lineage)[0].approval->approved_by, "dave");
  EXPECT_EQ((*lineage)[0].approval->reason, "diff looks right");
  // The diff stays readable after publishing.
  auto diff = manager_->Diff({id, "", 3, 0, 100});
  ASSERT_TRUE(diff.ok()) << diff.status();
  EXPECT_EQ(diff->summaries[0].added, 2);

  // Approving again returns the job; nothing is published twice.
  auto again = manager_->Approve(id, By("erin", "once more"));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->state, JobState::kSucceeded);
  EXPECT_EQ(again->approval->approved_by, "dave");
  EXPECT_EQ(engine_.calls("Publish"), 1);
}

// The creation event keeps who asked for the job, the ticket and why: the
// jobs row can change, the append-only log cannot.
TEST_F(ApprovalTest, TheCreationEventSaysWhoSubmittedWhyAndTheTicket) {
  BackfillRequest r;
  r.dataset = "daily";
  r.from = "2025-01-01";
  r.to = "2025-01-03";
  r.reason = "late orders; re-run";
  r.ticket = "T-9";
  r.requested_by = "frank";
  auto submitted = manager_->Submit(r, {});
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  std::vector<std::string> audit = AuditMessages(submitted->job.id);
  ASSERT_FALSE(audit.empty());
  EXPECT_EQ(audit[0],
            "->QUEUED: queued: 2 partitions in 1 dataset(s); submitted by "
            "frank, ticket T-9, reason: late orders; re-run");
  WaitState(submitted->job.id, JobState::kSucceeded);

  BackfillRequest anonymous;
  anonymous.dataset = "daily";
  anonymous.partitions = {"2025-01-05"};
  anonymous.reason = "no one said";
  submitted = manager_->Submit(anonymous, {});
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  audit = AuditMessages(submitted->job.id);
  ASSERT_FALSE(audit.empty());
  EXPECT_EQ(audit[0],
            "->QUEUED: queued: 1 partitions in 1 dataset(s); submitted by an "
            "unnamed requester, reason: no one said");
}

TEST_F(ApprovalTest, AJobWithoutRequireApprovalPublishesAndCannotBeApproved) {
  const std::string id = Submit("daily", "2025-01-01", "2025-01-02");
  Job done = WaitState(id, JobState::kSucceeded);
  ASSERT_EQ(done.diff.size(), 1u);  // every job computes its diff
  EXPECT_EQ(done.diff[0].rows_after, 3);
  auto approve = manager_->Approve(id, By("dave", "why not"));
  EXPECT_EQ(approve.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(approve.status().message()), HasSubstr("SUCCEEDED"));
  EXPECT_EQ(manager_->Approve("bf-99", By("dave", "x")).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(ApprovalTest, AJobsOwnHoldWaitsForAnApprovalWithItsReason) {
  // A dataset without require_approval, a job that carries its own hold (a
  // replay policy's approval: required).
  BackfillRequest r;
  r.dataset = "daily";
  r.from = "2025-01-01";
  r.to = "2025-01-02";
  r.reason = "replay";
  SubmitOptions options;
  options.approval_hold =
      "the replay policy of daily requires an approval (approval: required)";
  auto submitted = manager_->Submit(r, options);
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  const std::string id = submitted->job.id;
  Job held = WaitState(id, JobState::kAwaitingApproval);
  EXPECT_EQ(
      held.message,
      absl::StrCat("validation passed; nothing was published: the "
                   "replay policy of daily requires an approval "
                   "(approval: required). Read the diff (`DiffBackfill` ",
                   id, "), then publish with `ApproveBackfill` ", id,
                   " and a `reason`, or drop it with `CancelBackfill` ", id));
  EXPECT_EQ(engine_.calls("Publish"), 0);
  auto approved = manager_->Approve(id, By("dave", "diff looks right"));
  ASSERT_TRUE(approved.ok()) << approved.status();
  WaitState(id, JobState::kSucceeded);
}

TEST_F(ApprovalTest, AValidationFailedJobIsPublishedOnlyWithOverride) {
  engine_.SetValidationFailures("daily", {"1 key is not unique"});
  const std::string id = Submit("daily", "2025-01-01", "2025-01-03");
  Job failed = WaitState(id, JobState::kValidationFailed);
  // The diff is there for the operator to read before deciding.
  auto diff = manager_->Diff({id, "daily", 3, 0, 100});
  ASSERT_TRUE(diff.ok()) << diff.status();
  EXPECT_EQ(diff->summaries[0].partitions, 2);

  auto refused = manager_->Approve(id, By("dave", "looks fine"));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(refused.status().message()),
              HasSubstr("VALIDATION_FAILED"));
  EXPECT_THAT(std::string(refused.status().message()),
              HasSubstr("set `override_validation`"));
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("not unique"));
  EXPECT_EQ(Get(id).state, JobState::kValidationFailed);
  EXPECT_EQ(engine_.calls("Publish"), 0);

  auto approved =
      manager_->Approve(id, By("dave", "duplicates are expected here", true));
  ASSERT_TRUE(approved.ok()) << approved.status();
  Job done = WaitState(id, JobState::kSucceeded);
  EXPECT_EQ(engine_.PublishedRows("daily", "2025-01-02"), 3);
  ASSERT_TRUE(done.approval.has_value());
  EXPECT_TRUE(done.approval->override_validation);
  EXPECT_EQ(done.approval->from_state, JobState::kValidationFailed);
  EXPECT_THAT(AuditMessages(id),
              ::testing::Contains(HasSubstr(
                  "VALIDATION_FAILED->PUBLISHING: approved by dave OVERRIDING "
                  "the failed validation")));
  EXPECT_TRUE((*store_.GetLineage("daily", "2025-01-01"))[0]
                  .approval->override_validation);
}

TEST_F(ApprovalTest, AnOverrideNeedsIntactStaging) {
  engine_.SetValidationFailures("daily", {"1 key is not unique"});
  const std::string id = Submit("daily", "2025-01-01", "2025-01-03");
  WaitState(id, JobState::kValidationFailed);
  engine_.SetStagedRows(id, "daily", "2025-01-02", 1);  // rows lost
  auto refused = manager_->Approve(id, By("dave", "publish anyway", true));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(refused.status().message()),
              HasSubstr("no longer holds"));
  EXPECT_EQ(Get(id).state, JobState::kValidationFailed);
  EXPECT_FALSE(Get(id).approval.has_value());
  EXPECT_EQ(engine_.calls("Publish"), 0);
  // Still held: it can be cancelled.
  EXPECT_TRUE(manager_->Cancel(id, "bad staging").ok());
}

TEST_F(ApprovalTest, AnOverrideSurvivesARestartInPublishing) {
  engine_.SetValidationFailures("daily", {"1 key is not unique"});
  const std::string id = Submit("daily", "2025-01-01", "2025-01-03");
  WaitState(id, JobState::kValidationFailed);
  FailPublish(absl::UnavailableError("disk I/O error"));  // retried
  ASSERT_TRUE(
      manager_->Approve(id, By("dave", "expected duplicates", true)).ok());
  ASSERT_TRUE(engine_.WaitForCalls("Publish", 1, absl::Seconds(30)));
  Restart();  // stops while PUBLISHING; the checks still fail
  FailPublish(absl::OkStatus());
  Job done = WaitState(id, JobState::kSucceeded);
  EXPECT_EQ(engine_.PublishedRows("daily", "2025-01-01"), 3);
  EXPECT_TRUE(done.approval->override_validation);
}

TEST_F(ApprovalTest, AHeldJobIsApprovedAfterARestart) {
  const std::string id = Submit("gated", "2025-01-01", "2025-01-02");
  WaitState(id, JobState::kAwaitingApproval);
  Restart();
  EXPECT_EQ(Get(id).state, JobState::kAwaitingApproval);
  ASSERT_TRUE(manager_->Approve(id, By("dave", "after restart")).ok());
  WaitState(id, JobState::kSucceeded);
  EXPECT_EQ(engine_.PublishedRows("gated", "2025-01-01"), 3);
}

TEST_F(ApprovalTest, ANewerOverlappingJobSupersedesAJobAwaitingApproval) {
  const std::string a = Submit("gated", "2025-01-01", "2025-01-03");
  WaitState(a, JobState::kAwaitingApproval);
  // The held job blocks nobody: the newer one runs at once.
  const std::string b = Submit("gated", "2025-01-02", "2025-01-04");
  Job superseded = WaitState(a, JobState::kCancelled);
  EXPECT_THAT(superseded.message, HasSubstr("superseded by " + b));
  WaitState(b, JobState::kAwaitingApproval);
  auto refused = manager_->Approve(a, By("dave", "too late"));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("CANCELLED"));
  EXPECT_THAT(std::string(refused.status().message()),
              HasSubstr("superseded by " + b));
  EXPECT_EQ(engine_.calls("Publish"), 0);
  EXPECT_EQ(engine_.PublishedRows("gated", "2025-01-01"), 2);
  ASSERT_TRUE(manager_->Approve(b, By("dave", "newer")).ok());
  WaitState(b, JobState::kSucceeded);
  EXPECT_EQ(engine_.PublishedRows("gated", "2025-01-01"), 2);  // a's own day
  EXPECT_EQ(engine_.PublishedRows("gated", "2025-01-03"), 3);
}

TEST_F(ApprovalTest, AnApprovalRacingASupersedeNeverPublishesUnderTheNewerJob) {
  const std::string a = Submit("gated", "2025-01-01", "2025-01-03");
  WaitState(a, JobState::kAwaitingApproval);
  // The newer job's start holds while it records the supersede of `a`.
  absl::Notification entered, release;
  bool first = true;
  store_.SetWriteHook([&](const std::string& method) {
    if (method == "TransitionJob" && first) {
      first = false;
      entered.Notify();
      release.WaitForNotification();
    }
    return absl::OkStatus();
  });
  const std::string b = Submit("gated", "2025-01-02", "2025-01-04");
  ASSERT_TRUE(entered.WaitForNotificationWithTimeout(absl::Seconds(30)));
  auto refused = manager_->Approve(a, By("dave", "racing"));
  release.Notify();
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  WaitState(a, JobState::kCancelled);
  WaitState(b, JobState::kAwaitingApproval);
  EXPECT_EQ(engine_.calls("Publish"), 0);
  EXPECT_FALSE(Get(a).approval.has_value());
}

TEST_F(ApprovalTest, OnlyHeldJobsAreApprovedAndDiffsNeedValidation) {
  // A job that failed while recomputing never computed a diff.
  const std::string failed = Submit("gated", "2025-01-05", "2025-01-06");
  Job job = WaitState(failed, JobState::kFailed);
  auto approve = manager_->Approve(failed, By("dave", "early"));
  EXPECT_EQ(approve.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(approve.status().message()), HasSubstr("FAILED"));
  EXPECT_THAT(std::string(approve.status().message()),
              HasSubstr("`RetryBackfill` bf-1"));
  auto diff = manager_->Diff({failed, "", 3, 0, 100});
  EXPECT_EQ(diff.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(diff.status().message()),
              HasSubstr("never reached VALIDATING"));

  const std::string id = Submit("gated", "2025-01-01", "2025-01-02");
  WaitState(id, JobState::kAwaitingApproval);
  auto other = manager_->Diff({id, "daily", 3, 0, 100});
  EXPECT_EQ(other.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(other.status().message()),
              HasSubstr("not in the plan"));
  EXPECT_EQ(manager_->Diff({id, "", 11, 0, 100}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(manager_->Diff({"bf-42", "", 3, 0, 100}).status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace core_approval_test
}  // namespace backfill
