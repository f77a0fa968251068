#include "storage/postgres/state/pg_state_governance.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/model/transition_guard.h"
#include "storage/postgres/state/pg_state_jobs.h"

namespace backfill::pg_state {
namespace {

// The rows of a query that selects seq, job_id, from_state, to_state,
// message, at and subject, in its order.
std::vector<AuditEvent> ReadAuditEvents(const PgResult& r) {
  std::vector<AuditEvent> out;
  out.reserve(r.rows.size());
  for (const Row& row : r.rows) {
    AuditEvent e;
    e.seq = ColInt(row, 0);
    e.job_id = ColText(row, 1);
    e.from_state = ColText(row, 2);
    e.to_state = ColText(row, 3);
    e.message = ColText(row, 4);
    e.at = ColTime(row, 5);
    e.subject = ColText(row, 6);
    out.push_back(std::move(e));
  }
  return out;
}

absl::Status DeleteRowsOfJob(PgConnection* conn, const char* table,
                             const std::string& job_id) {
  // `table` is a constant of this file's callers, never input.
  return conn
      ->Exec(absl::StrCat("DELETE FROM backfill_state.", table,
                          " WHERE job_id = $1"),
             {Text(job_id)})
      .status();
}

}  // namespace

absl::Status LockHistory(PgConnection* conn) {
  // A key of the state store's own (the schema's migration lock is
  // 7378644596).
  return conn->Exec("SELECT pg_advisory_xact_lock(7378644597)").status();
}

absl::Status AppendAudit(PgConnection* conn, const std::string& job_id,
                         const std::string& from_state,
                         const std::string& to_state,
                         const std::string& message, absl::Time at) {
  RETURN_IF_ERROR(LockHistory(conn));
  // seq from the sequence audit_seq (the column's default).
  return conn
      ->Exec(
          "INSERT INTO backfill_state.audit_events (job_id, from_state, "
          "to_state, message, at) VALUES ($1, $2, $3, $4, $5::bigint)",
          {Text(job_id), Text(from_state), Text(to_state), Text(message),
           Time(at)})
      .status();
}

absl::StatusOr<std::vector<AuditEvent>> ListAuditEvents(
    PgConnection* conn, const std::string& job_id) {
  ASSIGN_OR_RETURN(
      PgResult r,
      conn->Exec("SELECT seq, job_id, from_state, to_state, message, at, '' "
                 "FROM backfill_state.audit_events WHERE job_id = $1 ORDER "
                 "BY seq",
                 {Text(job_id)}));
  return ReadAuditEvents(r);
}

absl::StatusOr<std::vector<AuditEvent>> ListAuditLog(PgConnection* conn,
                                                     const AuditQuery& query) {
  ASSIGN_OR_RETURN(
      PgResult r,
      conn->Exec(
          "SELECT seq, job_id, from_state, to_state, message, at, '' "
          "FROM backfill_state.audit_events WHERE seq > $1::bigint AND "
          "($2::text = '' OR job_id = $2::text) AND ($3::bigint IS NULL OR "
          "at >= $3::bigint) "
          "UNION ALL "
          "SELECT seq, '', from_state, to_state, message, at, subject "
          "FROM backfill_state.policy_audit_events WHERE $2::text = '' AND "
          "seq > $1::bigint AND ($3::bigint IS NULL OR at >= $3::bigint) "
          "ORDER BY 1 LIMIT $4::bigint",
          {Int(query.after_seq), Text(query.job_id), Time(query.since),
           Int(query.limit > 0 ? query.limit : 1)}));
  return ReadAuditEvents(r);
}

absl::Status SetReplayPolicyPause(PgConnection* conn,
                                  const ReplayPolicyPause& pause,
                                  const std::string& message) {
  // The row locked (or the dataset's first insert waited for), so that
  // the event's from_state is the state it replaces.
  ASSIGN_OR_RETURN(PgResult before,
                   conn->Exec("SELECT paused FROM "
                              "backfill_state.replay_policy_pauses WHERE "
                              "dataset = $1 FOR UPDATE",
                              {Text(pause.dataset)}));
  const bool was_paused =
      !before.rows.empty() && ColInt(before.rows[0], 0) != 0;
  RETURN_IF_ERROR(
      conn->Exec("INSERT INTO backfill_state.replay_policy_pauses (dataset, "
                 "paused, reason, by, at) VALUES ($1, $2::bigint, $3, $4, "
                 "$5::bigint) ON CONFLICT (dataset) DO UPDATE SET paused = "
                 "excluded.paused, reason = excluded.reason, by = excluded.by, "
                 "at = excluded.at",
                 {Text(pause.dataset), Int(pause.paused ? 1 : 0),
                  Text(pause.reason), Text(pause.by), Time(pause.at)})
          .status());
  RETURN_IF_ERROR(LockHistory(conn));
  return conn
      ->Exec(
          "INSERT INTO backfill_state.policy_audit_events (subject, "
          "from_state, to_state, message, at) VALUES ($1, $2, $3, $4, "
          "$5::bigint)",
          {Text(ReplayPolicySubject(pause.dataset)),
           Text(was_paused ? "PAUSED" : "RUNNING"),
           Text(pause.paused ? "PAUSED" : "RUNNING"), Text(message),
           Time(pause.at)})
      .status();
}

absl::StatusOr<std::vector<ReplayPolicyPause>> ListReplayPolicyPauses(
    PgConnection* conn) {
  ASSIGN_OR_RETURN(PgResult r,
                   conn->Exec("SELECT dataset, paused, reason, by, at FROM "
                              "backfill_state.replay_policy_pauses ORDER BY "
                              "dataset COLLATE \"C\""));
  std::vector<ReplayPolicyPause> out;
  for (const Row& row : r.rows) {
    ReplayPolicyPause p;
    p.dataset = ColText(row, 0);
    p.paused = ColInt(row, 1) != 0;
    p.reason = ColText(row, 2);
    p.by = ColText(row, 3);
    p.at = ColTime(row, 4);
    out.push_back(std::move(p));
  }
  return out;
}

absl::Status ReplaceCheckResults(PgConnection* conn, const std::string& job_id,
                                 const std::vector<CheckResult>& results) {
  RETURN_IF_ERROR(StateOf(conn, job_id, true).status());
  RETURN_IF_ERROR(DeleteRowsOfJob(conn, "check_results", job_id));
  int64_t ordinal = 0;
  for (const CheckResult& r : results) {
    RETURN_IF_ERROR(
        conn->Exec(
                "INSERT INTO backfill_state.check_results (job_id, ordinal, "
                "check_name, kind, severity, dataset, \"partition\", passed, "
                "summary, partitions_checked, partitions_failed, observed, "
                "allowed, message, samples) VALUES ($1, $2::bigint, $3, $4, "
                "$5, $6, $7, $8::bigint, $9::bigint, $10::bigint, "
                "$11::bigint, $12, $13, $14, $15)",
                {Text(job_id), Int(ordinal++), Text(r.check), Text(r.kind),
                 Text(CheckSeverityName(r.severity)), Text(r.dataset),
                 Text(r.partition), Int(r.passed ? 1 : 0),
                 Int(r.summary ? 1 : 0), Int(r.partitions_checked),
                 Int(r.partitions_failed), Text(r.observed), Text(r.allowed),
                 Text(r.message), Text(EncodeFields(r.samples))})
            .status());
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<CheckResult>> ListCheckResults(
    PgConnection* conn, const std::string& job_id) {
  RETURN_IF_ERROR(StateOf(conn, job_id).status());
  ASSIGN_OR_RETURN(
      PgResult r,
      conn->Exec("SELECT check_name, kind, severity, dataset, \"partition\", "
                 "passed, summary, partitions_checked, partitions_failed, "
                 "observed, allowed, message, samples FROM "
                 "backfill_state.check_results WHERE job_id = $1 ORDER BY "
                 "ordinal",
                 {Text(job_id)}));
  std::vector<CheckResult> out;
  for (const Row& row : r.rows) {
    CheckResult c;
    c.check = ColText(row, 0);
    c.kind = ColText(row, 1);
    ASSIGN_OR_RETURN(c.severity, ParseCheckSeverity(ColText(row, 2)));
    c.dataset = ColText(row, 3);
    c.partition = ColText(row, 4);
    c.passed = ColInt(row, 5) != 0;
    c.summary = ColInt(row, 6) != 0;
    c.partitions_checked = ColInt(row, 7);
    c.partitions_failed = ColInt(row, 8);
    c.observed = ColText(row, 9);
    c.allowed = ColText(row, 10);
    c.message = ColText(row, 11);
    ASSIGN_OR_RETURN(c.samples, DecodeFields(ColText(row, 12)));
    out.push_back(std::move(c));
  }
  return out;
}

absl::Status ReplaceConsumerConfirmations(
    PgConnection* conn, const std::string& job_id,
    const std::vector<ConsumerFinding>& results) {
  RETURN_IF_ERROR(StateOf(conn, job_id, true).status());
  RETURN_IF_ERROR(DeleteRowsOfJob(conn, "consumer_confirmations", job_id));
  int64_t ordinal = 0;
  for (const ConsumerFinding& c : results) {
    RETURN_IF_ERROR(
        conn->Exec("INSERT INTO backfill_state.consumer_confirmations "
                   "(job_id, ordinal, dataset, consumer, healthy, message, "
                   "latency_us, at) VALUES ($1, $2::bigint, $3, $4, "
                   "$5::bigint, $6, $7::bigint, $8::bigint)",
                   {Text(job_id), Int(ordinal++), Text(c.dataset),
                    Text(c.consumer), Int(c.healthy ? 1 : 0), Text(c.message),
                    Int(absl::ToInt64Microseconds(c.latency)), Time(c.at)})
            .status());
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<ConsumerFinding>> ListConsumerConfirmations(
    PgConnection* conn, const std::string& job_id) {
  RETURN_IF_ERROR(StateOf(conn, job_id).status());
  ASSIGN_OR_RETURN(
      PgResult r,
      conn->Exec("SELECT dataset, consumer, healthy, message, latency_us, at "
                 "FROM backfill_state.consumer_confirmations WHERE job_id = "
                 "$1 ORDER BY ordinal",
                 {Text(job_id)}));
  std::vector<ConsumerFinding> out;
  for (const Row& row : r.rows) {
    ConsumerFinding c;
    c.dataset = ColText(row, 0);
    c.consumer = ColText(row, 1);
    c.healthy = ColInt(row, 2) != 0;
    c.message = ColText(row, 3);
    c.latency = absl::Microseconds(ColInt(row, 4));
    c.at = ColTime(row, 5);
    out.push_back(std::move(c));
  }
  return out;
}

absl::StatusOr<std::vector<ConsumerStanding>> ListConsumerStandings(
    PgConnection* conn) {
  // One row per (dataset, consumer) ever confirmed, then one per job that
  // holds it unhealthy, by job number.
  ASSIGN_OR_RETURN(
      PgResult r,
      conn->Exec(
          "SELECT c.dataset COLLATE \"C\", c.consumer COLLATE \"C\", "
          "NULL::text, NULL::bigint FROM backfill_state.consumer_confirmations "
          "c GROUP BY c.dataset, c.consumer "
          "UNION ALL "
          "SELECT c.dataset COLLATE \"C\", c.consumer COLLATE \"C\", "
          "c.job_id, j.seq FROM backfill_state.consumer_confirmations c JOIN "
          "backfill_state.jobs j ON j.id = c.job_id WHERE c.healthy = 0 AND "
          "j.state = $1 GROUP BY c.dataset, c.consumer, c.job_id, j.seq "
          "ORDER BY 1, 2, 4 NULLS FIRST",
          {Text(JobStateText(JobState::kDownstreamUnhealthy))}));
  std::vector<ConsumerStanding> out;
  for (const Row& row : r.rows) {
    if (ColIsNull(row, 2)) {
      ConsumerStanding s;
      s.dataset = ColText(row, 0);
      s.consumer = ColText(row, 1);
      out.push_back(std::move(s));
    } else if (!out.empty()) {
      out.back().unhealthy_jobs.push_back(ColText(row, 2));
    }
  }
  return out;
}

absl::Status ApproveJob(PgConnection* conn, const std::string& job_id,
                        JobState expected_from, JobState to,
                        const Approval& approval, const std::string& message,
                        absl::Time now) {
  ASSIGN_OR_RETURN(JobState from,
                   GuardTransition(job_id, StateOf(conn, job_id, true),
                                   expected_from, to, GuardedMove::kApproval));
  ASSIGN_OR_RETURN(PgResult approved,
                   conn->Exec("SELECT 1 FROM backfill_state.job_approvals "
                              "WHERE job_id = $1",
                              {Text(job_id)}));
  if (!approved.rows.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", job_id, " was approved already"));
  }
  RETURN_IF_ERROR(
      conn->Exec(
              "INSERT INTO backfill_state.job_approvals (job_id, "
              "approved_by, reason, override, from_state, approved_at) "
              "VALUES ($1, $2, $3, $4::bigint, $5, $6::bigint)",
              {Text(job_id), Text(approval.approved_by), Text(approval.reason),
               Int(approval.override_validation ? 1 : 0),
               Text(JobStateText(from)),
               Time(approval.approved_at == absl::InfinitePast()
                        ? now
                        : approval.approved_at)})
          .status());
  return WriteTransition(conn, job_id, from, to, message, now);
}

absl::StatusOr<std::optional<Approval>> LoadApproval(
    PgConnection* conn, const std::string& job_id) {
  ASSIGN_OR_RETURN(
      PgResult r,
      conn->Exec("SELECT approved_by, reason, override, from_state, "
                 "approved_at FROM backfill_state.job_approvals WHERE job_id "
                 "= $1",
                 {Text(job_id)}));
  if (r.rows.empty()) return std::optional<Approval>();
  const Row& row = r.rows[0];
  Approval approval;
  approval.approved_by = ColText(row, 0);
  approval.reason = ColText(row, 1);
  approval.override_validation = ColInt(row, 2) != 0;
  ASSIGN_OR_RETURN(approval.from_state, ParseJobState(ColText(row, 3)));
  approval.approved_at = ColTime(row, 4);
  return std::optional<Approval>(std::move(approval));
}

absl::StatusOr<StoreStats> Stats(PgConnection* conn) {
  StoreStats stats;
  {
    ASSIGN_OR_RETURN(PgResult r,
                     conn->Exec("SELECT state, COUNT(*) FROM "
                                "backfill_state.jobs GROUP BY state"));
    for (const Row& row : r.rows) {
      ASSIGN_OR_RETURN(JobState state, ParseJobState(ColText(row, 0)));
      stats.jobs_by_state[static_cast<size_t>(state)] = ColInt(row, 1);
    }
  }
  {
    ASSIGN_OR_RETURN(PgResult r,
                     conn->Exec("SELECT state, SUM(n)::bigint FROM "
                                "backfill_state.task_state_counts GROUP BY "
                                "state"));
    for (const Row& row : r.rows) {
      ASSIGN_OR_RETURN(TaskState state, ParseTaskState(ColText(row, 0)));
      stats.tasks_by_state[static_cast<size_t>(state)] = ColInt(row, 1);
    }
  }
  ASSIGN_OR_RETURN(
      PgResult r,
      conn->Exec(
          "SELECT (SELECT COUNT(*) FROM backfill_state.tasks t JOIN "
          "backfill_state.jobs j ON j.id = t.job_id WHERE j.state = "
          "'RUNNING'), (SELECT COUNT(*) FROM backfill_state.tasks t JOIN "
          "backfill_state.jobs j ON j.id = t.job_id WHERE j.state = "
          "'RUNNING' AND t.state IN ('STAGED', 'PUBLISHED', 'UNCHANGED', "
          "'SKIPPED')), (SELECT COALESCE(MAX(id), 0) FROM "
          "backfill_state.lineage), GREATEST((SELECT COALESCE(MAX(seq), 0) "
          "FROM backfill_state.audit_events), (SELECT COALESCE(MAX(seq), 0) "
          "FROM backfill_state.policy_audit_events))"));
  stats.running_tasks_total = ColInt(r.rows[0], 0);
  stats.running_tasks_done = ColInt(r.rows[0], 1);
  stats.last_lineage_id = ColInt(r.rows[0], 2);
  stats.last_audit_seq = ColInt(r.rows[0], 3);
  return stats;
}

}  // namespace backfill::pg_state
