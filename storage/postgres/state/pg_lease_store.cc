#include "storage/postgres/state/pg_lease_store.h"

#include <algorithm>
#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "storage/postgres/state/pg_state_schema.h"
#include "storage/postgres/state/pg_state_sql.h"

namespace backfill {
namespace {

namespace ps = pg_state;

using postgres::PgConnection;
using postgres::PgPool;
using postgres::PgResult;
using postgres::PgTransaction;

// Connections of a store of its own: a replica's lease keeper and the
// readers of its status page share them.
constexpr int kLeaseConnections = 2;
// Runs of a transaction that the server aborted (deadlock, serialization).
constexpr int kLeaseAttempts = 3;
// Times Claim finds the job without a lease row and then loses the race to
// insert it (each time another claim inserted it first and holds it).
constexpr int kLeaseInsertRaces = 3;

constexpr const char* kLeaseWriteMode = ps::kWriteMode;
constexpr const char* kLeaseReadMode = ps::kReadMode;

// The server's clock when the statement evaluates it, in microseconds
// since the epoch.
constexpr char kServerNow[] =
    "(extract(epoch FROM clock_timestamp()) * 1000000)::bigint";

// A job id or a node's name: not empty (`may_be_empty` for a step), and
// without a NUL character (which a bound value cannot hold).
absl::Status CheckLeaseName(const char* what, const std::string& value,
                            bool may_be_empty = false) {
  if (value.empty() && !may_be_empty) {
    return absl::InvalidArgumentError(
        absl::StrCat("lease store: ", what, " must not be empty"));
  }
  if (value.find('\0') != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("lease store: ", what, " must hold no NUL character"));
  }
  return absl::OkStatus();
}

// A lease's duration in microseconds: at least one, and finite.
absl::StatusOr<int64_t> TtlMicros(absl::Duration ttl) {
  if (ttl == absl::InfiniteDuration() || ttl < absl::Microseconds(1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("lease store: a lease's ttl must be positive and finite "
                     "(at least 1us), not ",
                     absl::FormatDuration(ttl)));
  }
  return absl::ToInt64Microseconds(ttl);
}

// A PostgreSQL array literal of `values` ({"a","b\"c"}), bound as one
// parameter and cast by the statement (text[], bigint[]).
std::string ArrayLiteral(const std::vector<std::string>& values) {
  std::string out = "{";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i) out += ',';
    out += '"';
    for (char ch : values[i]) {
      if (ch == '"' || ch == '\\') out += '\\';
      out += ch;
    }
    out += '"';
  }
  out += '}';
  return out;
}

// A lease from the columns job_id, node, token, step, claimed_at,
// expires_at and whether it is live.
JobLease ReadLease(const ps::Row& row) {
  JobLease lease;
  lease.job_id = ps::ColText(row, 0);
  lease.node = ps::ColText(row, 1);
  lease.token = ps::ColInt(row, 2);
  lease.step = ps::ColText(row, 3);
  lease.claimed_at = ps::ColTime(row, 4);
  lease.expires_at = ps::ColTime(row, 5);
  lease.live = ps::ColText(row, 6) == "t";
  return lease;
}

absl::StatusOr<ClaimResult> ClaimIn(PgConnection* c, const std::string& job_id,
                                    const std::string& node,
                                    const std::string& step, int64_t ttl_us) {
  for (int race = 0; race < kLeaseInsertRaces; ++race) {
    // The job's row, locked until the transaction ends: claims of the job
    // by any process take turns from here.
    ASSIGN_OR_RETURN(PgResult locked,
                     c->Exec("SELECT job_id, node, token, step, claimed_at, "
                             "expires_at, TRUE FROM backfill_state.job_leases "
                             "WHERE job_id = $1 FOR UPDATE",
                             {ps::Text(job_id)}));
    ClaimResult result;
    if (locked.rows.empty()) {
      // The first claim of the job. A claim of another transaction that
      // inserted the row meanwhile makes this one insert nothing; the row
      // is then locked and decided on as any other.
      ASSIGN_OR_RETURN(
          PgResult inserted,
          c->Exec(absl::StrCat("INSERT INTO backfill_state.job_leases (job_id, "
                               "node, token, step, claimed_at, expires_at) "
                               "SELECT $1, $2, 1, $3, n.us, n.us + $4::bigint "
                               "FROM (SELECT ",
                               kServerNow,
                               " AS us) n ON CONFLICT (job_id) DO NOTHING "
                               "RETURNING job_id, node, token, step, "
                               "claimed_at, expires_at, TRUE"),
                  {ps::Text(job_id), ps::Text(node), ps::Text(step),
                   ps::Int(ttl_us)}));
      if (inserted.rows.empty()) continue;
      result.claimed = true;
      result.lease = ReadLease(inserted.rows[0]);
      return result;
    }
    const JobLease before = ReadLease(locked.rows[0]);
    // Free (released), expired, or the caller's own: the caller's now.
    // Its own live lease keeps its token and claim time; any other claim
    // changes hands and takes the next token.
    ASSIGN_OR_RETURN(
        PgResult updated,
        c->Exec(
            absl::StrCat(
                "UPDATE backfill_state.job_leases AS l SET token = CASE WHEN "
                "l.node = $2 AND l.expires_at > n.us THEN l.token ELSE "
                "l.token + 1 END, claimed_at = CASE WHEN l.node = $2 AND "
                "l.expires_at > n.us THEN l.claimed_at ELSE n.us END, node = "
                "$2, step = $3, expires_at = n.us + $4::bigint FROM (SELECT ",
                kServerNow,
                " AS us) n WHERE l.job_id = $1 AND (l.node = '' OR l.node = $2 "
                "OR l.expires_at <= n.us) RETURNING l.job_id, l.node, "
                "l.token, l.step, l.claimed_at, l.expires_at, TRUE"),
            {ps::Text(job_id), ps::Text(node), ps::Text(step),
             ps::Int(ttl_us)}));
    if (updated.rows.empty()) {
      // Another replica's live lease (the row stays locked since it was
      // read: it is still what was read).
      result.lease = before;
      result.lease.live = true;
      return result;
    }
    result.claimed = true;
    result.lease = ReadLease(updated.rows[0]);
    if (!before.node.empty() && before.node != node) {
      result.taken_from = before.node;
    }
    return result;
  }
  return absl::AbortedError(
      absl::StrCat("lease store: the lease of job ", job_id,
                   " was created and could not be read back; try again"));
}

}  // namespace

PgLeaseStore::PgLeaseStore(std::unique_ptr<PgPool> pool)
    : owned_pool_(std::move(pool)), pool_(owned_pool_.get()) {}

PgLeaseStore::PgLeaseStore(PgPool* pool) : pool_(pool) {}

PgLeaseStore::~PgLeaseStore() = default;

absl::StatusOr<std::unique_ptr<PgLeaseStore>> PgLeaseStore::Open(
    const std::string& dsn, absl::Duration idle_in_transaction_timeout) {
  postgres::PgPoolOptions options;
  options.application_name = "backfilld-leases";
  options.idle_in_transaction_timeout = idle_in_transaction_timeout;
  ASSIGN_OR_RETURN(std::unique_ptr<PgPool> pool,
                   PgPool::Open(dsn, kLeaseConnections, options));
  {
    ASSIGN_OR_RETURN(PgPool::Lease conn, pool->Acquire());
    absl::Status migrated = postgres::MigrateStateSchema(conn.get());
    if (!migrated.ok()) {
      return absl::Status(migrated.code(),
                          absl::StrCat("lease store: ", migrated.message()));
    }
  }
  return std::unique_ptr<PgLeaseStore>(new PgLeaseStore(std::move(pool)));
}

template <typename Body>
auto PgLeaseStore::InTransaction(const char* mode, Body&& body) {
  return ps::InTransaction(pool_, mode, kLeaseAttempts,
                           std::forward<Body>(body));
}

absl::Status PgLeaseStore::Heartbeat(const NodeRecord& node) {
  RETURN_IF_ERROR(CheckLeaseName("a node's name", node.name));
  if (node.started_at == absl::InfinitePast() ||
      node.started_at == absl::InfiniteFuture()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "lease store: node ", node.name, " has no start time (started_at)"));
  }
  return InTransaction(kLeaseWriteMode, [&](PgConnection* c) {
    return c
        ->Exec(absl::StrCat(
                   "INSERT INTO backfill_state.nodes AS n (name, address, "
                   "version, started_at, heartbeat_at, draining) VALUES ($1, "
                   "$2, $3, $4::bigint, ",
                   kServerNow,
                   ", $5::boolean) ON CONFLICT (name) DO UPDATE SET address = "
                   "EXCLUDED.address, version = EXCLUDED.version, started_at "
                   "= EXCLUDED.started_at, draining = EXCLUDED.draining, "
                   "heartbeat_at = GREATEST(n.heartbeat_at, "
                   "EXCLUDED.heartbeat_at)"),
               {ps::Text(node.name), ps::Text(node.address),
                ps::Text(node.version), ps::Time(node.started_at),
                ps::Text(node.draining ? "true" : "false")})
        .status();
  });
}

absl::Status PgLeaseStore::Leave(const std::string& node) {
  RETURN_IF_ERROR(CheckLeaseName("a node's name", node));
  return InTransaction(kLeaseWriteMode, [&](PgConnection* c) -> absl::Status {
    RETURN_IF_ERROR(c->Exec("UPDATE backfill_state.job_leases SET node = '', "
                            "step = '' WHERE node = $1",
                            {ps::Text(node)})
                        .status());
    return c
        ->Exec("DELETE FROM backfill_state.nodes WHERE name = $1",
               {ps::Text(node)})
        .status();
  });
}

absl::StatusOr<std::vector<NodeRecord>> PgLeaseStore::ListNodes() {
  return InTransaction(
      kLeaseReadMode,
      [&](PgConnection* c) -> absl::StatusOr<std::vector<NodeRecord>> {
        ASSIGN_OR_RETURN(
            PgResult r,
            c->Exec("SELECT name, address, version, started_at, heartbeat_at, "
                    "draining FROM backfill_state.nodes ORDER BY name "
                    "COLLATE \"C\""));
        std::vector<NodeRecord> out;
        out.reserve(r.rows.size());
        for (const ps::Row& row : r.rows) {
          NodeRecord node;
          node.name = ps::ColText(row, 0);
          node.address = ps::ColText(row, 1);
          node.version = ps::ColText(row, 2);
          node.started_at = ps::ColTime(row, 3);
          node.last_heartbeat = ps::ColTime(row, 4);
          node.draining = ps::ColText(row, 5) == "t";
          out.push_back(std::move(node));
        }
        return out;
      });
}

absl::StatusOr<ClaimResult> PgLeaseStore::Claim(const std::string& job_id,
                                                const std::string& node,
                                                const std::string& step,
                                                absl::Duration ttl) {
  RETURN_IF_ERROR(CheckLeaseName("a job id", job_id));
  RETURN_IF_ERROR(CheckLeaseName("a node's name", node));
  RETURN_IF_ERROR(CheckLeaseName("a step", step, /*may_be_empty=*/true));
  ASSIGN_OR_RETURN(int64_t ttl_us, TtlMicros(ttl));
  return InTransaction(kLeaseWriteMode, [&](PgConnection* c) {
    return ClaimIn(c, job_id, node, step, ttl_us);
  });
}

absl::StatusOr<std::vector<std::string>> PgLeaseStore::Renew(
    const std::string& node, const std::vector<JobLease>& held,
    absl::Duration ttl) {
  RETURN_IF_ERROR(CheckLeaseName("a node's name", node));
  for (const JobLease& lease : held) {
    RETURN_IF_ERROR(CheckLeaseName("a job id", lease.job_id));
  }
  ASSIGN_OR_RETURN(int64_t ttl_us, TtlMicros(ttl));
  std::vector<std::string> ids;
  std::vector<std::string> tokens;
  for (const JobLease& lease : held) {
    ids.push_back(lease.job_id);
    tokens.push_back(absl::StrCat(lease.token));
  }
  return InTransaction(
      kLeaseWriteMode,
      [&](PgConnection* c) -> absl::StatusOr<std::vector<std::string>> {
        std::set<std::pair<std::string, int64_t>> renewed;
        if (!held.empty()) {
          ASSIGN_OR_RETURN(
              PgResult r,
              c->Exec(absl::StrCat(
                          "UPDATE backfill_state.job_leases AS l SET "
                          "expires_at = n.us + $4::bigint FROM (SELECT ",
                          kServerNow,
                          " AS us) n, unnest($2::text[], $3::bigint[]) AS "
                          "h (job_id, token) WHERE l.job_id = h.job_id AND "
                          "l.token = h.token AND l.node = $1 RETURNING "
                          "l.job_id, l.token"),
                      {ps::Text(node), ArrayLiteral(ids), ArrayLiteral(tokens),
                       ps::Int(ttl_us)}));
          for (const ps::Row& row : r.rows) {
            renewed.emplace(ps::ColText(row, 0), ps::ColInt(row, 1));
          }
        }
        RETURN_IF_ERROR(
            c->Exec(absl::StrCat("UPDATE backfill_state.nodes SET "
                                 "heartbeat_at = GREATEST(heartbeat_at, ",
                                 kServerNow, ") WHERE name = $1"),
                    {ps::Text(node)})
                .status());
        std::vector<std::string> lost;
        for (const JobLease& lease : held) {
          if (!renewed.count({lease.job_id, lease.token})) {
            lost.push_back(lease.job_id);
          }
        }
        return lost;
      });
}

absl::Status PgLeaseStore::Release(const JobLease& lease) {
  RETURN_IF_ERROR(CheckLeaseName("a job id", lease.job_id));
  RETURN_IF_ERROR(CheckLeaseName("a node's name", lease.node));
  return InTransaction(kLeaseWriteMode, [&](PgConnection* c) {
    return c
        ->Exec(
            "UPDATE backfill_state.job_leases SET node = '', step = '' "
            "WHERE job_id = $1 AND node = $2 AND token = $3::bigint",
            {ps::Text(lease.job_id), ps::Text(lease.node),
             ps::Int(lease.token)})
        .status();
  });
}

absl::StatusOr<std::vector<JobLease>> PgLeaseStore::ListLeases() {
  return InTransaction(
      kLeaseReadMode,
      [&](PgConnection* c) -> absl::StatusOr<std::vector<JobLease>> {
        ASSIGN_OR_RETURN(
            PgResult r,
            c->Exec(absl::StrCat("SELECT job_id, node, token, step, "
                                 "claimed_at, expires_at, expires_at > ",
                                 kServerNow,
                                 " FROM backfill_state.job_leases WHERE node "
                                 "<> '' ORDER BY job_id COLLATE \"C\"")));
        std::vector<JobLease> out;
        out.reserve(r.rows.size());
        for (const ps::Row& row : r.rows) out.push_back(ReadLease(row));
        return out;
      });
}

// ---- requests between replicas ---------------------------------------------

absl::StatusOr<int64_t> PgLeaseStore::SendRequest(const NodeRequest& request) {
  RETURN_IF_ERROR(CheckLeaseName("a node's name", request.node));
  RETURN_IF_ERROR(CheckLeaseName("a job id", request.job_id));
  RETURN_IF_ERROR(CheckLeaseName("a request's kind", request.kind));
  RETURN_IF_ERROR(
      CheckLeaseName("a request's body", request.body, /*may_be_empty=*/true));
  return InTransaction(
      kLeaseWriteMode, [&](PgConnection* c) -> absl::StatusOr<int64_t> {
        ASSIGN_OR_RETURN(
            PgResult r,
            c->Exec(absl::StrCat("INSERT INTO backfill_state.node_requests "
                                 "(node, job_id, kind, body, created_at) "
                                 "VALUES ($1, $2, $3, $4, ",
                                 kServerNow, ") RETURNING id"),
                    {ps::Text(request.node), ps::Text(request.job_id),
                     ps::Text(request.kind), ps::Text(request.body)}));
        return ps::ColInt(r.rows.at(0), 0);
      });
}

absl::StatusOr<std::vector<NodeRequest>> PgLeaseStore::TakeRequests(
    const std::string& node) {
  RETURN_IF_ERROR(CheckLeaseName("a node's name", node));
  return InTransaction(
      kLeaseWriteMode,
      [&](PgConnection* c) -> absl::StatusOr<std::vector<NodeRequest>> {
        ASSIGN_OR_RETURN(
            PgResult r,
            c->Exec(absl::StrCat("UPDATE backfill_state.node_requests SET "
                                 "taken_at = ",
                                 kServerNow,
                                 " WHERE node = $1 AND taken_at IS NULL "
                                 "RETURNING id, node, job_id, kind, body"),
                    {ps::Text(node)}));
        std::vector<NodeRequest> out;
        for (const ps::Row& row : r.rows) {
          NodeRequest request;
          request.id = ps::ColInt(row, 0);
          request.node = ps::ColText(row, 1);
          request.job_id = ps::ColText(row, 2);
          request.kind = ps::ColText(row, 3);
          request.body = ps::ColText(row, 4);
          out.push_back(std::move(request));
        }
        std::sort(out.begin(), out.end(),
                  [](const NodeRequest& a, const NodeRequest& b) {
                    return a.id < b.id;
                  });
        return out;
      });
}

absl::Status PgLeaseStore::AnswerRequest(int64_t id, const NodeAnswer& answer) {
  RETURN_IF_ERROR(CheckLeaseName("an answer's message", answer.message,
                                 /*may_be_empty=*/true));
  return InTransaction(kLeaseWriteMode, [&](PgConnection* c) {
    return c
        ->Exec(absl::StrCat("UPDATE backfill_state.node_requests SET "
                            "answered_at = ",
                            kServerNow,
                            ", code = $2::integer, message = $3 WHERE id = "
                            "$1::bigint AND answered_at IS NULL"),
               {ps::Int(id), ps::Int(static_cast<int64_t>(answer.code)),
                ps::Text(answer.message)})
        .status();
  });
}

absl::StatusOr<std::optional<NodeAnswer>> PgLeaseStore::ReadAnswer(
    int64_t id, bool withdraw) {
  // What the transaction found; a withdrawal is said after it committed.
  struct Found {
    bool withdrawn = false;
    std::optional<NodeAnswer> answer;
  };
  ASSIGN_OR_RETURN(
      Found found,
      InTransaction(
          kLeaseWriteMode, [&](PgConnection* c) -> absl::StatusOr<Found> {
            ASSIGN_OR_RETURN(
                PgResult r,
                c->Exec("SELECT taken_at IS NOT NULL, answered_at IS NOT "
                        "NULL, code, message FROM "
                        "backfill_state.node_requests WHERE id = $1::bigint "
                        "FOR UPDATE",
                        {ps::Int(id)}));
            if (r.rows.empty()) {
              return absl::NotFoundError(
                  absl::StrCat("no request ", id, " is waiting for an answer"));
            }
            const bool taken = ps::ColText(r.rows[0], 0) == "t";
            const bool answered = ps::ColText(r.rows[0], 1) == "t";
            Found out;
            if (!answered && !(withdraw && !taken)) return out;
            RETURN_IF_ERROR(
                c->Exec("DELETE FROM backfill_state.node_requests WHERE id "
                        "= $1::bigint",
                        {ps::Int(id)})
                    .status());
            if (!answered) {
              out.withdrawn = true;
              return out;
            }
            NodeAnswer answer;
            answer.code =
                static_cast<absl::StatusCode>(ps::ColInt(r.rows[0], 2));
            answer.message = ps::ColText(r.rows[0], 3);
            out.answer = std::move(answer);
            return out;
          }));
  if (found.withdrawn) {
    return absl::NotFoundError(
        absl::StrCat("request ", id, " was withdrawn before anyone took it"));
  }
  return found.answer;
}

}  // namespace backfill
