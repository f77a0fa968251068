#include "storage/sqlite/state/state_governance.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/model/transition_guard.h"
#include "storage/sqlite/state/state_encoding.h"
#include "storage/sqlite/state/state_jobs.h"

namespace backfill::sqlite_state {
namespace {

using sqlite::Statement;

// The seq of the next event of the audit log: one past the last of either
// of its tables (they share one numbering; see migration 18).
constexpr char kNextSeq[] =
    "(SELECT MAX(m) + 1 FROM (SELECT COALESCE(MAX(seq), 0) AS m FROM "
    "audit_events UNION ALL SELECT COALESCE(MAX(seq), 0) FROM "
    "policy_audit_events))";

// The rows of a query that selects seq, job_id, from_state, to_state,
// message, at and subject from audit_events, in its order.
absl::StatusOr<std::vector<AuditEvent>> ReadAuditEvents(Statement& q) {
  std::vector<AuditEvent> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) break;
    AuditEvent e;
    e.seq = q.ColumnInt(0);
    e.job_id = q.ColumnText(1);
    e.from_state = q.ColumnText(2);
    e.to_state = q.ColumnText(3);
    e.message = q.ColumnText(4);
    e.at = ColumnTime(q, 5);
    e.subject = q.ColumnText(6);
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace

absl::Status AppendAudit(const StateDb& db, const std::string& job_id,
                         const std::string& from_state,
                         const std::string& to_state,
                         const std::string& message, absl::Time at) {
  ASSIGN_OR_RETURN(
      Statement q,
      db.db->PrepareCached("INSERT INTO audit_events (seq, job_id, "
                           "from_state, to_state, message, at) VALUES (" +
                           std::string(kNextSeq) + ", ?1, ?2, ?3, ?4, ?5)"));
  RETURN_IF_ERROR(q.BindText(1, job_id));
  RETURN_IF_ERROR(q.BindText(2, from_state));
  RETURN_IF_ERROR(q.BindText(3, to_state));
  RETURN_IF_ERROR(q.BindText(4, message));
  RETURN_IF_ERROR(BindTime(q, 5, at));
  return q.Run();
}

absl::Status SetReplayPolicyPause(const StateDb& db,
                                  const ReplayPolicyPause& pause,
                                  const std::string& message) {
  ASSIGN_OR_RETURN(
      Statement before,
      db.db->PrepareCached(
          "SELECT paused FROM replay_policy_pauses WHERE dataset = ?1"));
  RETURN_IF_ERROR(before.BindText(1, pause.dataset));
  ASSIGN_OR_RETURN(bool found, before.Step());
  const bool was_paused = found && before.ColumnInt(0) != 0;
  ASSIGN_OR_RETURN(
      Statement put,
      db.db->PrepareCached(
          "INSERT INTO replay_policy_pauses (dataset, paused, reason, by, at) "
          "VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (dataset) DO UPDATE SET "
          "paused = excluded.paused, reason = excluded.reason, by = "
          "excluded.by, at = excluded.at"));
  RETURN_IF_ERROR(put.BindText(1, pause.dataset));
  RETURN_IF_ERROR(put.BindInt(2, pause.paused ? 1 : 0));
  RETURN_IF_ERROR(put.BindText(3, pause.reason));
  RETURN_IF_ERROR(put.BindText(4, pause.by));
  RETURN_IF_ERROR(BindTime(put, 5, pause.at));
  RETURN_IF_ERROR(put.Run());
  ASSIGN_OR_RETURN(
      Statement audit,
      db.db->PrepareCached("INSERT INTO policy_audit_events (seq, subject, "
                           "from_state, to_state, message, at) VALUES (" +
                           std::string(kNextSeq) + ", ?1, ?2, ?3, ?4, ?5)"));
  RETURN_IF_ERROR(audit.BindText(1, ReplayPolicySubject(pause.dataset)));
  RETURN_IF_ERROR(audit.BindText(2, was_paused ? "PAUSED" : "RUNNING"));
  RETURN_IF_ERROR(audit.BindText(3, pause.paused ? "PAUSED" : "RUNNING"));
  RETURN_IF_ERROR(audit.BindText(4, message));
  RETURN_IF_ERROR(BindTime(audit, 5, pause.at));
  return audit.Run();
}

absl::StatusOr<std::vector<ReplayPolicyPause>> ListReplayPolicyPauses(
    const StateDb& db) {
  ASSIGN_OR_RETURN(
      Statement q,
      db.db->PrepareCached("SELECT dataset, paused, reason, by, at FROM "
                           "replay_policy_pauses ORDER BY dataset"));
  std::vector<ReplayPolicyPause> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) break;
    ReplayPolicyPause p;
    p.dataset = q.ColumnText(0);
    p.paused = q.ColumnInt(1) != 0;
    p.reason = q.ColumnText(2);
    p.by = q.ColumnText(3);
    p.at = ColumnTime(q, 4);
    out.push_back(std::move(p));
  }
  return out;
}

absl::StatusOr<std::vector<AuditEvent>> ListAuditEvents(
    const StateDb& db, const std::string& job_id) {
  ASSIGN_OR_RETURN(Statement q,
                   db.db->PrepareCached(
                       "SELECT seq, job_id, from_state, to_state, message, at, "
                       "'' FROM audit_events WHERE job_id = ?1 ORDER BY seq"));
  RETURN_IF_ERROR(q.BindText(1, job_id));
  return ReadAuditEvents(q);
}

absl::StatusOr<std::vector<AuditEvent>> ListAuditLog(const StateDb& db,
                                                     const AuditQuery& query) {
  // Both tables in seq order (SQLite merges the two ordered arms); the
  // events of no job only when no job is asked for.
  ASSIGN_OR_RETURN(
      Statement q,
      db.db->PrepareCached(
          "SELECT seq, job_id, from_state, to_state, message, at, '' "
          "FROM audit_events WHERE seq > ?1 AND (?2 = '' OR job_id = ?2) "
          "AND (?3 IS NULL OR at >= ?3) "
          "UNION ALL "
          "SELECT seq, '', from_state, to_state, message, at, subject "
          "FROM policy_audit_events WHERE ?2 = '' AND seq > ?1 "
          "AND (?3 IS NULL OR at >= ?3) "
          "ORDER BY 1 LIMIT ?4"));
  RETURN_IF_ERROR(q.BindInt(1, query.after_seq));
  RETURN_IF_ERROR(q.BindText(2, query.job_id));
  RETURN_IF_ERROR(BindTime(q, 3, query.since));
  RETURN_IF_ERROR(q.BindInt(4, query.limit > 0 ? query.limit : 1));
  return ReadAuditEvents(q);
}

absl::Status ReplaceCheckResults(const StateDb& db, const std::string& job_id,
                                 const std::vector<CheckResult>& results) {
  RETURN_IF_ERROR(StateOf(db, job_id).status());
  RETURN_IF_ERROR(DeleteRowsOfJob(db, "check_results", job_id));
  ASSIGN_OR_RETURN(
      Statement q,
      db.db->PrepareCached(
          "INSERT INTO check_results (job_id, ordinal, check_name, "
          "kind, severity, dataset, \"partition\", passed, summary, "
          "partitions_checked, partitions_failed, observed, allowed, "
          "message, samples) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, "
          "?9, ?10, ?11, ?12, ?13, ?14, ?15)"));
  int64_t ordinal = 0;
  for (const CheckResult& r : results) {
    RETURN_IF_ERROR(q.Reset());
    RETURN_IF_ERROR(q.BindText(1, job_id));
    RETURN_IF_ERROR(q.BindInt(2, ordinal++));
    RETURN_IF_ERROR(q.BindText(3, r.check));
    RETURN_IF_ERROR(q.BindText(4, r.kind));
    RETURN_IF_ERROR(q.BindText(5, CheckSeverityName(r.severity)));
    RETURN_IF_ERROR(q.BindText(6, r.dataset));
    RETURN_IF_ERROR(q.BindText(7, r.partition));
    RETURN_IF_ERROR(q.BindInt(8, r.passed ? 1 : 0));
    RETURN_IF_ERROR(q.BindInt(9, r.summary ? 1 : 0));
    RETURN_IF_ERROR(q.BindInt(10, r.partitions_checked));
    RETURN_IF_ERROR(q.BindInt(11, r.partitions_failed));
    RETURN_IF_ERROR(q.BindText(12, r.observed));
    RETURN_IF_ERROR(q.BindText(13, r.allowed));
    RETURN_IF_ERROR(q.BindText(14, r.message));
    RETURN_IF_ERROR(q.BindText(15, EncodeFields(r.samples)));
    RETURN_IF_ERROR(q.Run());
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<CheckResult>> ListCheckResults(
    const StateDb& db, const std::string& job_id) {
  RETURN_IF_ERROR(StateOf(db, job_id).status());
  return LoadCheckResults(db, job_id);
}

absl::StatusOr<std::vector<CheckResult>> LoadCheckResults(
    const StateDb& db, const std::string& job_id) {
  ASSIGN_OR_RETURN(
      Statement q,
      db.db->PrepareCached(
          "SELECT check_name, kind, severity, dataset, \"partition\", "
          "passed, summary, partitions_checked, partitions_failed, "
          "observed, allowed, message, samples FROM check_results "
          "WHERE job_id = ?1 ORDER BY ordinal"));
  RETURN_IF_ERROR(q.BindText(1, job_id));
  std::vector<CheckResult> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) break;
    CheckResult r;
    r.check = q.ColumnText(0);
    r.kind = q.ColumnText(1);
    ASSIGN_OR_RETURN(r.severity, ParseCheckSeverity(q.ColumnText(2)));
    r.dataset = q.ColumnText(3);
    r.partition = q.ColumnText(4);
    r.passed = q.ColumnInt(5) != 0;
    r.summary = q.ColumnInt(6) != 0;
    r.partitions_checked = q.ColumnInt(7);
    r.partitions_failed = q.ColumnInt(8);
    r.observed = q.ColumnText(9);
    r.allowed = q.ColumnText(10);
    r.message = q.ColumnText(11);
    ASSIGN_OR_RETURN(r.samples, DecodeFields(q.ColumnText(12)));
    out.push_back(std::move(r));
  }
  return out;
}

absl::Status ReplaceConsumerConfirmations(
    const StateDb& db, const std::string& job_id,
    const std::vector<ConsumerFinding>& results) {
  RETURN_IF_ERROR(StateOf(db, job_id).status());
  RETURN_IF_ERROR(DeleteRowsOfJob(db, "consumer_confirmations", job_id));
  ASSIGN_OR_RETURN(Statement q,
                   db.db->PrepareCached(
                       "INSERT INTO consumer_confirmations (job_id, ordinal, "
                       "dataset, consumer, healthy, message, latency_us, at) "
                       "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"));
  int64_t ordinal = 0;
  for (const ConsumerFinding& c : results) {
    RETURN_IF_ERROR(q.Reset());
    RETURN_IF_ERROR(q.BindText(1, job_id));
    RETURN_IF_ERROR(q.BindInt(2, ordinal++));
    RETURN_IF_ERROR(q.BindText(3, c.dataset));
    RETURN_IF_ERROR(q.BindText(4, c.consumer));
    RETURN_IF_ERROR(q.BindInt(5, c.healthy ? 1 : 0));
    RETURN_IF_ERROR(q.BindText(6, c.message));
    RETURN_IF_ERROR(q.BindInt(7, absl::ToInt64Microseconds(c.latency)));
    RETURN_IF_ERROR(BindTime(q, 8, c.at));
    RETURN_IF_ERROR(q.Run());
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<ConsumerFinding>> ListConsumerConfirmations(
    const StateDb& db, const std::string& job_id) {
  RETURN_IF_ERROR(StateOf(db, job_id).status());
  return LoadConsumerConfirmations(db, job_id);
}

absl::StatusOr<std::vector<ConsumerFinding>> LoadConsumerConfirmations(
    const StateDb& db, const std::string& job_id) {
  ASSIGN_OR_RETURN(
      Statement q,
      db.db->PrepareCached(
          "SELECT dataset, consumer, healthy, message, latency_us, at "
          "FROM consumer_confirmations WHERE job_id = ?1 "
          "ORDER BY ordinal"));
  RETURN_IF_ERROR(q.BindText(1, job_id));
  std::vector<ConsumerFinding> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) break;
    ConsumerFinding c;
    c.dataset = q.ColumnText(0);
    c.consumer = q.ColumnText(1);
    c.healthy = q.ColumnInt(2) != 0;
    c.message = q.ColumnText(3);
    c.latency = absl::Microseconds(q.ColumnInt(4));
    c.at = ColumnTime(q, 5);
    out.push_back(std::move(c));
  }
  return out;
}

absl::Status ApproveJob(const StateDb& db, const std::string& job_id,
                        JobState expected_from, JobState to,
                        const Approval& approval, const std::string& message,
                        absl::Time now) {
  ASSIGN_OR_RETURN(JobState from,
                   GuardTransition(job_id, StateOf(db, job_id), expected_from,
                                   to, GuardedMove::kApproval));
  {
    ASSIGN_OR_RETURN(
        Statement q,
        db.db->PrepareCached("SELECT 1 FROM job_approvals WHERE job_id = ?1"));
    RETURN_IF_ERROR(q.BindText(1, job_id));
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (row) {
      return absl::FailedPreconditionError(
          absl::StrCat("job ", job_id, " was approved already"));
    }
  }
  {
    ASSIGN_OR_RETURN(
        Statement q,
        db.db->PrepareCached(
            "INSERT INTO job_approvals (job_id, approved_by, reason, "
            "override, from_state, approved_at) VALUES (?1, ?2, ?3, "
            "?4, ?5, ?6)"));
    RETURN_IF_ERROR(q.BindText(1, job_id));
    RETURN_IF_ERROR(q.BindText(2, approval.approved_by));
    RETURN_IF_ERROR(q.BindText(3, approval.reason));
    RETURN_IF_ERROR(q.BindInt(4, approval.override_validation ? 1 : 0));
    RETURN_IF_ERROR(q.BindText(5, JobStateText(from)));
    RETURN_IF_ERROR(BindTime(q, 6,
                             approval.approved_at == absl::InfinitePast()
                                 ? now
                                 : approval.approved_at));
    RETURN_IF_ERROR(q.Run());
  }
  return WriteTransition(db, job_id, from, to, message, now);
}

absl::StatusOr<std::optional<Approval>> LoadApproval(
    const StateDb& db, const std::string& job_id) {
  ASSIGN_OR_RETURN(
      Statement q,
      db.db->PrepareCached("SELECT approved_by, reason, override, from_state, "
                           "approved_at FROM job_approvals WHERE job_id = ?1"));
  RETURN_IF_ERROR(q.BindText(1, job_id));
  ASSIGN_OR_RETURN(bool row, q.Step());
  if (!row) return std::optional<Approval>();
  Approval approval;
  approval.approved_by = q.ColumnText(0);
  approval.reason = q.ColumnText(1);
  approval.override_validation = q.ColumnInt(2) != 0;
  ASSIGN_OR_RETURN(approval.from_state, ParseJobState(q.ColumnText(3)));
  approval.approved_at = ColumnTime(q, 4);
  return std::optional<Approval>(std::move(approval));
}

}  // namespace backfill::sqlite_state
