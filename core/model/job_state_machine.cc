#include "core/model/job_state_machine.h"

#include <algorithm>
#include <initializer_list>

#include "absl/strings/str_cat.h"

namespace backfill {
namespace {

using S = JobState;

struct Row {
  S from;
  std::initializer_list<S> to;
};

// The transition table; see the header.
const Row kTable[] = {
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

const Row* RowOf(S from) {
  for (const Row& row : kTable) {
    if (row.from == from) return &row;
  }
  return nullptr;
}

}  // namespace

bool CanTransition(JobState from, JobState to) {
  const Row* row = RowOf(from);
  return row != nullptr &&
         std::find(row->to.begin(), row->to.end(), to) != row->to.end();
}

absl::Status CheckTransition(JobState from, JobState to) {
  if (CanTransition(from, to)) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "a ", JobStateName(from), " job cannot become ", JobStateName(to)));
}

std::vector<JobState> NextStates(JobState from) {
  const Row* row = RowOf(from);
  if (row == nullptr) return {};
  return std::vector<JobState>(row->to.begin(), row->to.end());
}

bool IsFinal(JobState state) { return NextStates(state).empty(); }

bool HoldsPartitions(JobState state) {
  switch (state) {
    case S::kQueued:
    case S::kRunning:
    case S::kPaused:
    case S::kValidating:
    case S::kPublishing:
    case S::kConfirming:
      return true;
    default:
      return false;
  }
}

bool IsHeldForDecision(JobState state) {
  return state == S::kFailed || state == S::kValidationFailed ||
         state == S::kAwaitingApproval;
}

std::vector<JobState> PublishedStates() {
  return {S::kConfirming, S::kSucceeded, S::kDownstreamUnhealthy,
          S::kRolledBack};
}

bool HasPublished(JobState state) {
  const std::vector<JobState> published = PublishedStates();
  return std::find(published.begin(), published.end(), state) !=
         published.end();
}

}  // namespace backfill
