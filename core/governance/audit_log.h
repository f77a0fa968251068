// AuditLog: pages of the append-only audit log (every job state change
// with its message: who submitted, approved, rolled back, and why), for
// export (ListAuditEvents, `backfillctl audit`). Events are read oldest
// first, by their sequence number; a page ends where the next one starts
// (the last event's seq), so paging is stable while events are appended.
//
// Stateless free function over the store; thread-safe as far as it is.

#ifndef BACKFILL_CORE_GOVERNANCE_AUDIT_LOG_H_
#define BACKFILL_CORE_GOVERNANCE_AUDIT_LOG_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "core/model/job.h"
#include "core/ports/state_store.h"

namespace backfill {

struct AuditPage {
  std::vector<AuditEvent> events;  // oldest first
  // The after_seq of the next page; 0 when this is the last page.
  int64_t next_after_seq = 0;
};

// The events `query` selects (query.limit of them at most, 1 or more).
// NOT_FOUND naming the job when query.job_id is set and the store has no
// such job; INVALID_ARGUMENT for a limit below 1 or a negative after_seq.
absl::StatusOr<AuditPage> ReadAuditPage(StateStore& store,
                                        const AuditQuery& query);

// Whether a job's audit events (oldest first, StateStore::ListAuditEvents)
// show that its confirmation already ended once (a move to SUCCEEDED or
// DOWNSTREAM_UNHEALTHY): a confirmation asked for again (backfillctl
// confirm) is then no new end of the job, for metrics or for lineage.
bool EndedAConfirmation(const std::vector<AuditEvent>& events);

}  // namespace backfill

#endif  // BACKFILL_CORE_GOVERNANCE_AUDIT_LOG_H_
