#include "core/governance/audit_log.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"

namespace backfill {

absl::StatusOr<AuditPage> ReadAuditPage(StateStore& store,
                                        const AuditQuery& query) {
  if (query.limit < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("audit page size ", query.limit, " must be 1 or more"));
  }
  if (query.after_seq < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("audit position ", query.after_seq, " must be 0 or more"));
  }
  if (!query.job_id.empty()) {
    // NOT_FOUND ("no job bf-9") for a job the store never had.
    RETURN_IF_ERROR(store.GetJobProgress(query.job_id).status());
  }
  // One more than asked: whether a next page exists.
  AuditQuery ask = query;
  ask.limit = query.limit + 1;
  ASSIGN_OR_RETURN(std::vector<AuditEvent> events, store.ListAuditLog(ask));
  AuditPage page;
  if (events.size() > static_cast<size_t>(query.limit)) {
    events.resize(static_cast<size_t>(query.limit));
    page.next_after_seq = events.back().seq;
  }
  page.events = std::move(events);
  return page;
}

bool EndedAConfirmation(const std::vector<AuditEvent>& events) {
  for (const AuditEvent& e : events) {
    if (e.to_state == JobStateName(JobState::kSucceeded) ||
        e.to_state == JobStateName(JobState::kDownstreamUnhealthy)) {
      return true;
    }
  }
  return false;
}

}  // namespace backfill
