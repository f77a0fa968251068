// The job state machine: the transition table as the header documents it,
// the refusal messages, and the predicates admission relies on.

#include <deque>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/model/job_state_machine.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace backfill {
namespace core_job_state_machine_test {
namespace {

using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using S = JobState;

std::vector<S> AllStates() {
  std::vector<S> all;
  for (int i = 0; i < kJobStateCount; ++i) all.push_back(static_cast<S>(i));
  return all;
}

// The table of job_state_machine.h, written out independently.
const std::map<S, std::vector<S>>& Documented() {
  static const auto* table = new std::map<S, std::vector<S>>{
      {S::kQueued, {S::kRunning, S::kPaused, S::kCancelled, S::kFailed}},
      {S::kRunning, {S::kValidating, S::kPaused, S::kCancelled, S::kFailed}},
      {S::kPaused, {S::kQueued, S::kCancelled, S::kFailed}},
      {S::kValidating,
       {S::kPublishing, S::kAwaitingApproval, S::kValidationFailed, S::kRunning,
        S::kFailed}},
      {S::kAwaitingApproval, {S::kPublishing, S::kCancelled}},
      {S::kPublishing, {S::kConfirming, S::kFailed}},
      {S::kConfirming, {S::kSucceeded, S::kDownstreamUnhealthy}},
      {S::kDownstreamUnhealthy, {S::kConfirming, S::kRolledBack}},
      {S::kSucceeded, {S::kRolledBack, S::kConfirming}},
      {S::kFailed, {S::kQueued, S::kCancelled}},
      {S::kValidationFailed, {S::kPublishing, S::kCancelled}},
      {S::kCancelled, {}},
      {S::kRolledBack, {}},
  };
  return *table;
}

TEST(JobStateMachineTest, TheDocumentedTableCoversEveryState) {
  EXPECT_EQ(Documented().size(), static_cast<size_t>(kJobStateCount));
}

TEST(JobStateMachineTest, EveryListedMoveIsAllowedAndNoOther) {
  int allowed = 0;
  for (S from : AllStates()) {
    const std::vector<S>& listed = Documented().at(from);
    const std::set<S> to_set(listed.begin(), listed.end());
    for (S to : AllStates()) {
      SCOPED_TRACE(absl::StrCat(JobStateName(from), " -> ", JobStateName(to)));
      EXPECT_EQ(CanTransition(from, to), to_set.count(to) > 0);
      EXPECT_EQ(CheckTransition(from, to).ok(), to_set.count(to) > 0);
      if (CanTransition(from, to)) ++allowed;
    }
    // In the table's order.
    EXPECT_THAT(NextStates(from), ElementsAreArray(listed))
        << JobStateName(from);
  }
  EXPECT_EQ(allowed, 30);
}

TEST(JobStateMachineTest, RefusalsNameBothStates) {
  struct Case {
    S from;
    S to;
  };
  for (const Case& c :
       {Case{S::kQueued, S::kSucceeded}, Case{S::kRunning, S::kPublishing},
        Case{S::kPaused, S::kRunning}, Case{S::kSucceeded, S::kQueued},
        Case{S::kCancelled, S::kQueued}, Case{S::kRolledBack, S::kSucceeded},
        Case{S::kConfirming, S::kFailed}, Case{S::kQueued, S::kQueued}}) {
    absl::Status s = CheckTransition(c.from, c.to);
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(s.message(), HasSubstr(JobStateName(c.from)));
    EXPECT_THAT(s.message(), HasSubstr(JobStateName(c.to)));
    EXPECT_FALSE(CanTransition(c.from, c.to));
  }
  EXPECT_EQ(CheckTransition(S::kPaused, S::kPublishing).message(),
            "a PAUSED job cannot become PUBLISHING");
}

TEST(JobStateMachineTest, NoStateMovesToItself) {
  for (S s : AllStates()) EXPECT_FALSE(CanTransition(s, s)) << JobStateName(s);
}

TEST(JobStateMachineTest, OnlyCancelledAndRolledBackAreFinal) {
  for (S s : AllStates()) {
    const bool final_state = s == S::kCancelled || s == S::kRolledBack;
    EXPECT_EQ(IsFinal(s), final_state) << JobStateName(s);
    EXPECT_EQ(NextStates(s).empty(), final_state) << JobStateName(s);
    if (final_state) {
      for (S to : AllStates()) EXPECT_FALSE(CanTransition(s, to));
    }
  }
}

TEST(JobStateMachineTest, FinalStatesAreTerminal) {
  for (S s : AllStates()) {
    if (IsFinal(s)) {
      EXPECT_TRUE(IsTerminal(s)) << JobStateName(s);
    }
  }
}

TEST(JobStateMachineTest, WhichStatesHoldPartitions) {
  const std::set<S> holds = {S::kQueued,     S::kRunning,    S::kPaused,
                             S::kValidating, S::kPublishing, S::kConfirming};
  const std::set<S> held = {S::kFailed, S::kValidationFailed,
                            S::kAwaitingApproval};
  for (S s : AllStates()) {
    SCOPED_TRACE(JobStateName(s));
    EXPECT_EQ(HoldsPartitions(s), holds.count(s) > 0);
    EXPECT_EQ(IsHeldForDecision(s), held.count(s) > 0);
    // A job either blocks newer jobs, waits to be superseded, or neither.
    EXPECT_FALSE(HoldsPartitions(s) && IsHeldForDecision(s));
    // A job that holds partitions is never over.
    if (HoldsPartitions(s)) {
      EXPECT_FALSE(IsTerminal(s));
    }
  }
}

TEST(JobStateMachineTest, HeldJobsCanBeCancelledWhenSuperseded) {
  for (S s : AllStates()) {
    if (IsHeldForDecision(s)) {
      EXPECT_TRUE(CanTransition(s, S::kCancelled)) << JobStateName(s);
    }
  }
}

// The states reachable from `from`, `from` included.
std::set<S> Reachable(S from) {
  std::set<S> seen = {from};
  std::deque<S> queue = {from};
  while (!queue.empty()) {
    const S s = queue.front();
    queue.pop_front();
    for (S next : NextStates(s)) {
      if (seen.insert(next).second) queue.push_back(next);
    }
  }
  return seen;
}

TEST(JobStateMachineTest, EveryStateCanReachAFinalOne) {
  for (S s : AllStates()) {
    const std::set<S> reachable = Reachable(s);
    EXPECT_TRUE(reachable.count(S::kCancelled) ||
                reachable.count(S::kRolledBack))
        << JobStateName(s) << " cannot end";
  }
}

TEST(JobStateMachineTest, EveryStateIsReachableFromQueued) {
  EXPECT_EQ(Reachable(S::kQueued).size(), static_cast<size_t>(kJobStateCount));
}

// Published states are exactly those a job reaches only through
// PUBLISHING: derived from the transition table, not from the list.
TEST(JobStateMachineTest, PublishedStatesAreThoseOnlyReachedThroughPublishing) {
  std::set<S> without_publishing = {S::kQueued};
  std::deque<S> queue = {S::kQueued};
  while (!queue.empty()) {
    const S s = queue.front();
    queue.pop_front();
    for (S next : NextStates(s)) {
      if (next != S::kPublishing && without_publishing.insert(next).second) {
        queue.push_back(next);
      }
    }
  }
  for (S s : AllStates()) {
    const bool only_through_publishing =
        s != S::kPublishing && without_publishing.count(s) == 0;
    EXPECT_EQ(HasPublished(s), only_through_publishing) << JobStateName(s);
  }
  EXPECT_EQ(PublishedStates().size(), 4u);
}

TEST(JobStateMachineTest, StateNamesRoundTrip) {
  for (S s : AllStates()) {
    auto parsed = ParseJobState(JobStateName(s));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, s);
  }
  EXPECT_EQ(*ParseJobState("awaiting_approval"), S::kAwaitingApproval);
  EXPECT_FALSE(ParseJobState("DONE").ok());
}

}  // namespace
}  // namespace core_job_state_machine_test
}  // namespace backfill
