// ReplayKeeper (core/run/replay_keeper.h) through the manager, over the
// in-memory state store and the fake engine, on a manual clock: late rows
// in a source make exactly their days (and the month over them) replayed by
// a job requested by the policy; a change in a frozen period replays
// nothing; a replay over max_cost waits for an approval; a failed replay is
// not submitted again until something changes again; a paused policy
// submits nothing, and resuming it does.

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/base/clock.h"
#include "core/model/pipeline_loader.h"
#include "core/run/backfill_manager.h"
#include "core/run/replay_keeper.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/fake_engine.h"
#include "tests/testing/memory_state_store.h"

namespace backfill {
namespace core_replay_keeper_test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using Call = ::backfill::testing::FakeEngine::Call;

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
    replay: {on: [input_change], window: 30d, max_cost: 40, check_every: 1m}
    frozen: {before: 2025-12-21}
  - name: monthly
    kind: derived
    partition: {column: month, grain: month}
    upstream: [{dataset: daily, mapping: rollup}]
    transform: "SELECT substr(day, 1, 7) AS month, SUM(n) AS n FROM daily WHERE day >= :partition_start AND day < :partition_end GROUP BY 1"
    contract: {columns: {month: TEXT, n: INTEGER}, primary_key: [month]}
)yaml";

std::string Day(int d) { return absl::StrFormat("2025-12-%02d", d); }

class ReplayKeeperTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto catalog = LoadPipelineTexts({{"pipeline.yaml", kPipeline}});
    ASSERT_TRUE(catalog.ok()) << catalog.status();
    catalog_ = std::make_unique<Catalog>(*std::move(catalog));
    engine_.SetHook([this](const Call& call) -> absl::Status {
      absl::MutexLock lock(&mu_);
      if (call.method == "StagePartition" && failing_.count(call.partition)) {
        return absl::InvalidArgumentError("a bad row");
      }
      return absl::OkStatus();
    });
    for (int d = 15; d <= 31; ++d)
      engine_.SetPublishedRows("orders", Day(d), 5);
    ManagerOptions options;
    options.workers = 2;
    options.max_attempts = 1;
    manager_ = std::make_unique<BackfillManager>(
        catalog_.get(), &store_, &engine_, &clock_, nullptr, options);
    ASSERT_TRUE(manager_->Start().ok());
    keeper_ = std::make_unique<ReplayKeeper>(manager_.get(), &engine_, &store_,
                                             &clock_, ReplayKeeper::Options{});
    // The first load, by a person, closed days included.
    BackfillRequest load;
    load.dataset = "daily";
    load.from = Day(20);
    load.to = "2026-01-01";
    load.reason = "first load";
    load.override_frozen = true;
    auto job = manager_->Submit(load, {});
    ASSERT_TRUE(job.ok()) << job.status();
    ASSERT_EQ(WaitEnd(job->job.id).state, JobState::kSucceeded);
  }
  void TearDown() override {
    keeper_.reset();
    if (manager_) manager_->Shutdown();
  }

  Job WaitEnd(const std::string& id) {
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    Job job;
    while (absl::Now() < deadline) {
      auto got = manager_->GetJob(id);
      EXPECT_TRUE(got.ok()) << got.status();
      if (!got.ok()) return job;
      job = *got;
      if (IsTerminal(job.state) || job.state == JobState::kAwaitingApproval) {
        return job;
      }
      absl::SleepFor(absl::Milliseconds(2));
    }
    ADD_FAILURE() << id << " did not end: " << JobStateName(job.state);
    return job;
  }

  // The next look: a minute later, one evaluation of daily.
  ReplayEvaluation NextTick() {
    clock_.Advance(absl::Minutes(1));
    std::vector<ReplayEvaluation> evs = keeper_->Tick();
    EXPECT_EQ(evs.size(), 1u);
    return evs.empty() ? ReplayEvaluation{} : evs[0];
  }

  size_t JobCount() {
    JobFilter all;
    all.limit = 0;
    auto jobs = manager_->ListJobs(all);
    EXPECT_TRUE(jobs.ok()) << jobs.status();
    return jobs.ok() ? jobs->size() : 0;
  }

  std::unique_ptr<Catalog> catalog_;
  testing::InMemoryStateStore store_;
  testing::FakeEngine engine_;
  // 2026-01-02 00:00 UTC: the window of 30 days starts 2025-12-03.
  ManualClock clock_{absl::FromUnixSeconds(1767312000)};
  std::unique_ptr<BackfillManager> manager_;
  std::unique_ptr<ReplayKeeper> keeper_;
  absl::Mutex mu_;
  std::set<std::string> failing_ ABSL_GUARDED_BY(mu_);
};

TEST_F(ReplayKeeperTest, LateRowsAreReplayedByAJobOfThePolicy) {
  EXPECT_EQ(NextTick().outcome, "nothing due");
  engine_.SetPublishedRows("orders", Day(22), 5 + 2);  // late rows
  engine_.SetPublishedRows("orders", Day(28), 5 + 1);
  ReplayEvaluation ev = NextTick();
  ASSERT_TRUE(ev.created) << ev.outcome;
  EXPECT_EQ(ev.outcome, absl::StrCat("submitted ", ev.job_id));
  EXPECT_EQ(ev.hold, "");
  Job job = WaitEnd(ev.job_id);
  EXPECT_EQ(job.state, JobState::kSucceeded) << job.message;
  EXPECT_EQ(job.request.requested_by, "policy:daily");
  EXPECT_THAT(job.request.reason,
              HasSubstr("replay policy of daily: input_change: 2 partitions "
                        "whose inputs changed"));
  ASSERT_EQ(job.plan.datasets.size(), 2u);
  EXPECT_THAT(job.plan.datasets[0].partitions, ElementsAre(Day(22), Day(28)));
  EXPECT_THAT(job.plan.datasets[1].partitions, ElementsAre("2025-12"));
  // Replayed: nothing is due any more.
  EXPECT_EQ(NextTick().outcome, "nothing due");
  EXPECT_EQ(JobCount(), 2u);
}

TEST_F(ReplayKeeperTest, AChangeInAFrozenPeriodReplaysNothing) {
  engine_.SetPublishedRows("orders", Day(20), 5 + 3);
  ReplayEvaluation ev = NextTick();
  EXPECT_FALSE(ev.created);
  EXPECT_EQ(ev.outcome, "nothing due");
  EXPECT_THAT(ev.due.frozen, ElementsAre(Day(20)));
  EXPECT_EQ(JobCount(), 1u);
  // A change on both sides of the rule: only the open day is replayed.
  engine_.SetPublishedRows("orders", Day(23), 5 + 1);
  ev = NextTick();
  ASSERT_TRUE(ev.created) << ev.outcome;
  EXPECT_THAT(ev.due.frozen, ElementsAre(Day(20)));
  EXPECT_THAT(ev.due.request.partitions, ElementsAre(Day(23)));
}

TEST_F(ReplayKeeperTest, AReplayOverMaxCostWaitsForAnApproval) {
  for (int d = 21; d <= 31; ++d) {
    engine_.SetPublishedRows("orders", Day(d), 5 + 10);
  }
  // The recomputation makes other rows, so there is something to publish.
  engine_.SetRowsFor(
      [](const std::string&, const std::string&) { return int64_t{2}; });
  ReplayEvaluation ev = NextTick();
  ASSERT_TRUE(ev.created) << ev.outcome;
  EXPECT_THAT(ev.hold, HasSubstr("is above the replay policy's max_cost of "
                                 "40 input rows"));
  Job job = WaitEnd(ev.job_id);
  EXPECT_EQ(job.state, JobState::kAwaitingApproval);
  EXPECT_THAT(job.message, HasSubstr(ev.hold));
  EXPECT_EQ(engine_.calls("Publish"), 1);  // the first load's only
}

TEST_F(ReplayKeeperTest, AFailedReplayIsNotSubmittedAgainUntilANewChange) {
  {
    absl::MutexLock lock(&mu_);
    failing_.insert(Day(24));
  }
  engine_.SetPublishedRows("orders", Day(24), 5 + 1);
  ReplayEvaluation ev = NextTick();
  ASSERT_TRUE(ev.created) << ev.outcome;
  EXPECT_EQ(WaitEnd(ev.job_id).state, JobState::kFailed);
  for (int i = 0; i < 5; ++i) {
    ReplayEvaluation again = NextTick();
    EXPECT_FALSE(again.created);
    EXPECT_EQ(again.outcome, "nothing due");
    EXPECT_THAT(again.due.failed, ElementsAre(Day(24)));
  }
  std::vector<ReplayPolicyStatus> policies = keeper_->Policies();
  ASSERT_EQ(policies.size(), 1u);
  ASSERT_TRUE(policies[0].last_job.has_value());
  EXPECT_EQ(policies[0].last_job->id, ev.job_id);
  EXPECT_EQ(policies[0].last_job->state, JobState::kFailed);
  // Nor with another partition whose inputs change meanwhile.
  engine_.SetPublishedRows("orders", Day(25), 5 + 1);
  ReplayEvaluation other = NextTick();
  ASSERT_TRUE(other.created) << other.outcome;
  EXPECT_THAT(other.due.request.partitions, ElementsAre(Day(25)));
  EXPECT_THAT(other.due.failed, ElementsAre(Day(24)));
  EXPECT_EQ(WaitEnd(other.job_id).state, JobState::kSucceeded);
  // A keeper made afresh (a restart) knows nothing of the failure, finds
  // the same job by the change's key, and says why it does nothing.
  keeper_ = std::make_unique<ReplayKeeper>(manager_.get(), &engine_, &store_,
                                           &clock_, ReplayKeeper::Options{});
  ReplayEvaluation found = NextTick();
  EXPECT_FALSE(found.created);
  EXPECT_EQ(found.job_id, ev.job_id);
  // (CANCELLED now: the later job over its month superseded it.)
  EXPECT_THAT(found.outcome,
              HasSubstr(") for these changes; a replay that did "
                        "not succeed is not submitted again: it waits for "
                        "a new change of its inputs, or for an operator "
                        "(backfillctl retry "));
  EXPECT_THAT(NextTick().due.failed, ElementsAre(Day(24)));
  EXPECT_EQ(JobCount(), 3u);
  // What the metrics read.
  std::vector<ReplayPolicyCounters> counters = keeper_->Counters();
  ASSERT_EQ(counters.size(), 1u);
  EXPECT_EQ(counters[0].dataset, "daily");
  EXPECT_EQ(counters[0].due_partitions, 0);
  EXPECT_EQ(counters[0].last_evaluation, clock_.Now());
  EXPECT_EQ(counters[0].evaluations,
            (std::map<std::string, int64_t>{{"already_submitted", 1},
                                            {"nothing_due", 1}}));
  // A new change is a new job.
  {
    absl::MutexLock lock(&mu_);
    failing_.clear();
  }
  engine_.SetPublishedRows("orders", Day(24), 5 + 2);
  ReplayEvaluation next = NextTick();
  ASSERT_TRUE(next.created) << next.outcome;
  EXPECT_NE(next.job_id, ev.job_id);
  EXPECT_EQ(WaitEnd(next.job_id).state, JobState::kSucceeded);
}

TEST_F(ReplayKeeperTest, APausedPolicySubmitsNothingUntilResumed) {
  EXPECT_EQ(keeper_->Pause("daily", "", "alice").code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(keeper_->Pause("daily", "warehouse maintenance", "alice").ok());
  engine_.SetPublishedRows("orders", Day(26), 5 + 1);
  clock_.Advance(absl::Minutes(5));
  EXPECT_THAT(keeper_->Tick(), IsEmpty());
  std::vector<ReplayPolicyStatus> policies = keeper_->Policies();
  ASSERT_EQ(policies.size(), 1u);
  EXPECT_TRUE(policies[0].paused);
  EXPECT_EQ(policies[0].paused_reason,
            "paused by alice: warehouse maintenance");
  EXPECT_EQ(policies[0].frozen, "frozen.before 2025-12-21");
  // A look on demand says what it would do, and does not do it.
  auto look = keeper_->Evaluate("daily", /*submit=*/false);
  ASSERT_TRUE(look.ok()) << look.status();
  EXPECT_EQ(look->outcome, "would submit");
  EXPECT_THAT(look->due.request.partitions, ElementsAre(Day(26)));
  EXPECT_EQ(JobCount(), 1u);

  // A reason too long is refused and changes nothing.
  EXPECT_EQ(keeper_->Resume("daily", "bob", std::string(5000, 'x')).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(keeper_->Policies()[0].paused);
  ASSERT_TRUE(keeper_->Resume("daily", "bob", "maintenance over").ok());
  ReplayEvaluation ev = NextTick();
  ASSERT_TRUE(ev.created) << ev.outcome;
  EXPECT_EQ(WaitEnd(ev.job_id).state, JobState::kSucceeded);
  EXPECT_EQ(keeper_->Pause("orders", "x", "alice").code(),
            absl::StatusCode::kNotFound);

  // Both are in the audit log, as events of the policy.
  AuditQuery query;
  query.limit = 1000;
  auto log = store_.ListAuditLog(query);
  ASSERT_TRUE(log.ok()) << log.status();
  std::vector<std::string> policy_events;
  for (const AuditEvent& e : *log) {
    if (e.subject.empty()) continue;
    policy_events.push_back(absl::StrCat(e.subject, " ", e.from_state, ">",
                                         e.to_state, " ", e.message));
  }
  EXPECT_THAT(policy_events,
              ElementsAre("replay_policy:daily RUNNING>PAUSED replay policy "
                          "of daily paused by alice: warehouse maintenance",
                          "replay_policy:daily PAUSED>RUNNING replay policy "
                          "of daily resumed by bob: maintenance over"));
}

// A pause is kept in the state store: a keeper made afresh over it (a
// restarted daemon) keeps the policy paused, and submits nothing.
TEST_F(ReplayKeeperTest, APauseOutlivesTheKeeper) {
  ASSERT_TRUE(keeper_->Pause("daily", "quarter close", "alice").ok());
  keeper_ = std::make_unique<ReplayKeeper>(manager_.get(), &engine_, &store_,
                                           &clock_, ReplayKeeper::Options{});
  engine_.SetPublishedRows("orders", Day(27), 5 + 1);
  clock_.Advance(absl::Minutes(5));
  EXPECT_THAT(keeper_->Tick(), IsEmpty());
  std::vector<ReplayPolicyStatus> policies = keeper_->Policies();
  ASSERT_EQ(policies.size(), 1u);
  EXPECT_TRUE(policies[0].paused);
  EXPECT_EQ(policies[0].paused_reason, "paused by alice: quarter close");
  EXPECT_EQ(JobCount(), 1u);

  // Resumed, and the daemon restarted again: it runs.
  ASSERT_TRUE(keeper_->Resume("daily", "bob").ok());
  keeper_ = std::make_unique<ReplayKeeper>(manager_.get(), &engine_, &store_,
                                           &clock_, ReplayKeeper::Options{});
  ReplayEvaluation ev = NextTick();
  ASSERT_TRUE(ev.created) << ev.outcome;
  EXPECT_THAT(ev.due.request.partitions, ElementsAre(Day(27)));
}

// --no-replay: every policy starts paused, whatever the store says, until
// resumed; a stored pause adds its reason.
TEST_F(ReplayKeeperTest, NoReplayStartsEveryPolicyPaused) {
  ReplayKeeper::Options paused;
  paused.start_paused = true;
  keeper_ = std::make_unique<ReplayKeeper>(manager_.get(), &engine_, &store_,
                                           &clock_, paused);
  engine_.SetPublishedRows("orders", Day(29), 5 + 1);
  clock_.Advance(absl::Minutes(5));
  EXPECT_THAT(keeper_->Tick(), IsEmpty());
  std::vector<ReplayPolicyStatus> policies = keeper_->Policies();
  ASSERT_EQ(policies.size(), 1u);
  EXPECT_TRUE(policies[0].paused);
  EXPECT_EQ(policies[0].paused_reason, "backfilld started with --no-replay");
  ASSERT_TRUE(keeper_->Resume("daily", "bob").ok());
  ReplayEvaluation ev = NextTick();
  ASSERT_TRUE(ev.created) << ev.outcome;
}

TEST_F(ReplayKeeperTest, TheLoopKeepsThePolicyUntilStopped) {
  keeper_->StartLoop(absl::Milliseconds(5));
  engine_.SetPublishedRows("orders", Day(30), 5 + 1);
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (JobCount() < 2 && absl::Now() < deadline) {
    clock_.Advance(absl::Minutes(1));
    absl::SleepFor(absl::Milliseconds(5));
  }
  keeper_->StopLoop();
  ASSERT_EQ(JobCount(), 2u);
  // Stopped: a new change makes no job.
  engine_.SetPublishedRows("orders", Day(31), 5 + 1);
  clock_.Advance(absl::Minutes(5));
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_EQ(JobCount(), 2u);
}

}  // namespace
}  // namespace core_replay_keeper_test
}  // namespace backfill
