// State governance: what the SQLite state store records about the
// decisions around a job — the audit log (audit_events: one event per
// state change, append-only, which triggers of the schema enforce), the
// validation's check results (check_results), what its confirmations found
// per downstream consumer (consumer_confirmations) and an operator's
// approval of a held job (job_approvals), and whether an operator paused
// each replay policy (replay_policy_pauses, each change an audit event).
//
// Free functions in the caller's transaction (see state_sql.h).

#ifndef BACKFILL_STORAGE_SQLITE_STATE_STATE_GOVERNANCE_H_
#define BACKFILL_STORAGE_SQLITE_STATE_STATE_GOVERNANCE_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/model/check_result.h"
#include "core/model/job.h"
#include "core/ports/state_store.h"
#include "storage/sqlite/state/state_sql.h"

namespace backfill::sqlite_state {

// Appends one event to the audit log ("" as from_state: the job's
// creation).
absl::Status AppendAudit(const StateDb& db, const std::string& job_id,
                         const std::string& from_state,
                         const std::string& to_state,
                         const std::string& message, absl::Time at);

// StateStore::SetReplayPolicyPause (the pause and its audit event) and
// ListReplayPolicyPauses.
absl::Status SetReplayPolicyPause(const StateDb& db,
                                  const ReplayPolicyPause& pause,
                                  const std::string& message);
absl::StatusOr<std::vector<ReplayPolicyPause>> ListReplayPolicyPauses(
    const StateDb& db);

// StateStore::ListAuditEvents and ListAuditLog.
absl::StatusOr<std::vector<AuditEvent>> ListAuditEvents(
    const StateDb& db, const std::string& job_id);
absl::StatusOr<std::vector<AuditEvent>> ListAuditLog(const StateDb& db,
                                                     const AuditQuery& query);

// StateStore::ReplaceCheckResults and ListCheckResults; LoadCheckResults
// reads those of a job known to exist.
absl::Status ReplaceCheckResults(const StateDb& db, const std::string& job_id,
                                 const std::vector<CheckResult>& results);
absl::StatusOr<std::vector<CheckResult>> ListCheckResults(
    const StateDb& db, const std::string& job_id);
absl::StatusOr<std::vector<CheckResult>> LoadCheckResults(
    const StateDb& db, const std::string& job_id);

// StateStore::ReplaceConsumerConfirmations and ListConsumerConfirmations;
// LoadConsumerConfirmations reads those of a job known to exist.
absl::Status ReplaceConsumerConfirmations(
    const StateDb& db, const std::string& job_id,
    const std::vector<ConsumerFinding>& results);
absl::StatusOr<std::vector<ConsumerFinding>> ListConsumerConfirmations(
    const StateDb& db, const std::string& job_id);
absl::StatusOr<std::vector<ConsumerFinding>> LoadConsumerConfirmations(
    const StateDb& db, const std::string& job_id);

// StateStore::ApproveJob: the move (guarded as TransitionJob) with the
// approval; a second approval of a job is refused.
absl::Status ApproveJob(const StateDb& db, const std::string& job_id,
                        JobState expected_from, JobState to,
                        const Approval& approval, const std::string& message,
                        absl::Time now);
// The job's approval, if it has one.
absl::StatusOr<std::optional<Approval>> LoadApproval(const StateDb& db,
                                                     const std::string& job_id);

}  // namespace backfill::sqlite_state

#endif  // BACKFILL_STORAGE_SQLITE_STATE_STATE_GOVERNANCE_H_
