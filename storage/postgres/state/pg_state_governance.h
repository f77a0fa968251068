// Governance records of the PostgreSQL state store: the audit log
// (backfill_state.audit_events and policy_audit_events, append-only, one
// numbering from the sequence audit_seq), check results, consumer
// confirmations and standings, approvals, replay policy pauses, and the
// store's counts (Stats). The SQL of storage/sqlite/state/
// state_governance.h and state_queries.h on PostgreSQL.
//
// Free functions over the connection of the caller's transaction
// (pg_state_sql.h). Ownership: none; the connection is the caller's, for
// the call. Thread-safety: no state of their own; thread-safe as far as
// each connection is used by one thread at a time.

#ifndef BACKFILL_STORAGE_POSTGRES_STATE_PG_STATE_GOVERNANCE_H_
#define BACKFILL_STORAGE_POSTGRES_STATE_PG_STATE_GOVERNANCE_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/model/check_result.h"
#include "core/model/job.h"
#include "core/ports/state_store.h"
#include "storage/postgres/state/pg_state_sql.h"

namespace backfill::pg_state {

// Takes the transaction-level lock under which the history is appended
// to (audit events of both tables, lineage records), held until the
// transaction ends: a seq or lineage id handed out later then commits
// later, so that a reader that saw seq n (ListAuditLog's after_seq,
// Stats) never misses an event with a smaller one committed after it.
absl::Status LockHistory(PgConnection* conn);

// Appends a job's event (under LockHistory, which it takes).
absl::Status AppendAudit(PgConnection* conn, const std::string& job_id,
                         const std::string& from_state,
                         const std::string& to_state,
                         const std::string& message, absl::Time at);
absl::StatusOr<std::vector<AuditEvent>> ListAuditEvents(
    PgConnection* conn, const std::string& job_id);
absl::StatusOr<std::vector<AuditEvent>> ListAuditLog(PgConnection* conn,
                                                     const AuditQuery& query);

absl::Status SetReplayPolicyPause(PgConnection* conn,
                                  const ReplayPolicyPause& pause,
                                  const std::string& message);
absl::StatusOr<std::vector<ReplayPolicyPause>> ListReplayPolicyPauses(
    PgConnection* conn);

absl::Status ReplaceCheckResults(PgConnection* conn, const std::string& job_id,
                                 const std::vector<CheckResult>& results);
absl::StatusOr<std::vector<CheckResult>> ListCheckResults(
    PgConnection* conn, const std::string& job_id);

absl::Status ReplaceConsumerConfirmations(
    PgConnection* conn, const std::string& job_id,
    const std::vector<ConsumerFinding>& results);
absl::StatusOr<std::vector<ConsumerFinding>> ListConsumerConfirmations(
    PgConnection* conn, const std::string& job_id);
absl::StatusOr<std::vector<ConsumerStanding>> ListConsumerStandings(
    PgConnection* conn);

absl::Status ApproveJob(PgConnection* conn, const std::string& job_id,
                        JobState expected_from, JobState to,
                        const Approval& approval, const std::string& message,
                        absl::Time now);
absl::StatusOr<std::optional<Approval>> LoadApproval(PgConnection* conn,
                                                     const std::string& job_id);

absl::StatusOr<StoreStats> Stats(PgConnection* conn);

}  // namespace backfill::pg_state

#endif  // BACKFILL_STORAGE_POSTGRES_STATE_PG_STATE_GOVERNANCE_H_
