// Conversions for the governance calls (ExplainPartition, ListAuditEvents)
// between the domain model (core/governance/partition_history.h,
// core/governance/audit_log.h) and the backfill.v1 wire messages, and the
// wire-level checks of their requests.
//
// Pure functions over values; they own nothing and keep no state, so they
// are thread-safe.

#ifndef BACKFILL_SERVER_GOVERNANCE_CONVERT_H_
#define BACKFILL_SERVER_GOVERNANCE_CONVERT_H_

#include <cstddef>

#include "absl/status/statusor.h"
#include "backfill/v1/backfill.pb.h"
#include "core/governance/audit_log.h"
#include "core/governance/partition_history.h"

namespace backfill {

// ListAuditEvents page sizes.
inline constexpr int kDefaultAuditPageSize = 100;
inline constexpr int kMaxAuditPageSize = 1000;

v1::ExplainPartitionResponse PartitionHistoryToProto(
    const PartitionHistory& history);

v1::AuditEvent AuditEventToProto(const AuditEvent& event);

// The store query a ListAuditEventsRequest asks for. INVALID_ARGUMENT,
// naming the field, for a backfill_id that is not "bf-<number>", a `since`
// outside 0001-01-01..9999-12-31 or with nanos outside 0..999999999, a
// negative page_size (one over kMaxAuditPageSize is served as
// kMaxAuditPageSize), or a page_token no page returned.
absl::StatusOr<AuditQuery> AuditQueryFromProto(
    const v1::ListAuditEventsRequest& request);

// The hash of the filters of `request` (backfill_id, since) its page
// tokens carry: a token is refused with other filters.
uint64_t AuditFilterHash(const v1::ListAuditEventsRequest& request);

// At most about this many bytes of events per ListAuditEvents page, far
// below the 4 MiB a gRPC client receives by default: reasons and failure
// messages can be long, and a page over a client's limit would fail on
// every retry.
inline constexpr size_t kMaxAuditPageBytes = 1 << 20;

// The page's events while their encoded size stays within `max_bytes`
// (always at least one event, however large). The next page token
// (core/governance/page_token.h, with `filter_hash`) holds the seq of the last
// event returned when events were left out for size, else the page's own (none
// after the last page).
v1::ListAuditEventsResponse AuditPageToProto(
    const AuditPage& page, uint64_t filter_hash,
    size_t max_bytes = kMaxAuditPageBytes);

}  // namespace backfill

#endif  // BACKFILL_SERVER_GOVERNANCE_CONVERT_H_
