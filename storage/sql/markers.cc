#include "storage/sql/markers.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/base/error_details.h"
#include "core/base/status_macros.h"
#include "storage/sql/change_signal.h"
#include "storage/sql/dialect.h"

namespace backfill::sql {
namespace {

absl::StatusOr<bool> HasMarker(Connection* conn, const Relation& markers,
                               const std::string& store_id,
                               const std::string& job_id) {
  const Dialect& d = conn->dialect();
  ASSIGN_OR_RETURN(
      Result r, conn->Exec(absl::StrCat("SELECT 1 FROM ", d.Name(markers),
                                        " WHERE store_id = ", d.Placeholder(1),
                                        " AND job_id = ", d.Placeholder(2)),
                           {store_id, job_id}));
  return !r.rows.empty();
}

constexpr char kOwnerKey[] = "'owner_store_id'";

}  // namespace

absl::Status CreateRecords(Connection* conn) {
  const Dialect& d = conn->dialect();
  const std::string statements[] = {
      absl::StrCat("CREATE TABLE IF NOT EXISTS ", d.Name(d.Meta()),
                   " (key TEXT PRIMARY KEY, value TEXT NOT NULL)"),
      absl::StrCat("CREATE TABLE IF NOT EXISTS ", d.Name(d.Publications()),
                   " (store_id TEXT NOT NULL, job_id TEXT NOT NULL, "
                   "published_at ",
                   d.TimeType(), " NOT NULL, PRIMARY KEY (store_id, job_id))"),
      absl::StrCat("CREATE TABLE IF NOT EXISTS ", d.Name(d.Rollbacks()),
                   " (store_id TEXT NOT NULL, job_id TEXT NOT NULL, "
                   "rolled_back_at ",
                   d.TimeType(),
                   " NOT NULL, requested_by TEXT NOT NULL, reason TEXT NOT "
                   "NULL, forced ",
                   d.BoolType(),
                   " NOT NULL, with_jobs TEXT NOT NULL, PRIMARY KEY "
                   "(store_id, job_id))"),
  };
  for (const std::string& sql : statements) {
    RETURN_IF_ERROR(conn->Exec(sql).status());
  }
  return CreateChangeSignalTables(conn);
}

absl::StatusOr<WarehouseInfo> ReadWarehouseInfo(Connection* conn) {
  const Dialect& d = conn->dialect();
  ASSIGN_OR_RETURN(Transaction txn,
                   Transaction::Begin(conn, TxnMode::kSnapshot));
  WarehouseInfo info;
  ASSIGN_OR_RETURN(Result owner, conn->Exec(absl::StrCat(
                                     "SELECT value FROM ", d.Name(d.Meta()),
                                     " WHERE key = ", kOwnerKey)));
  if (!owner.rows.empty()) info.owner_store_id = owner.rows[0][0].text;
  ASSIGN_OR_RETURN(Result published,
                   conn->Exec(absl::StrCat("SELECT job_id, store_id FROM ",
                                           d.Name(d.Publications()))));
  for (const Row& row : published.rows) {
    info.publications[row[0].text] = row[1].text;
  }
  ASSIGN_OR_RETURN(
      Result rolled,
      conn->Exec(absl::StrCat("SELECT job_id, store_id, requested_by, reason, "
                              "forced, with_jobs FROM ",
                              d.Name(d.Rollbacks()))));
  for (const Row& row : rolled.rows) {
    RollbackMarker& m = info.rollbacks[row[0].text];
    m.store_id = row[1].text;
    m.requested_by = row[2].text;
    m.reason = row[3].text;
    m.forced = d.ReadBool(row[4]);
    m.with_jobs = absl::StrSplit(row[5].text, ',', absl::SkipEmpty());
  }
  RETURN_IF_ERROR(txn.Commit());
  return info;
}

absl::Status ClaimWarehouse(Connection* conn, const std::string& store_id,
                            bool take_over) {
  if (store_id.empty()) {
    return absl::InvalidArgumentError("Claim: empty store id");
  }
  const Dialect& d = conn->dialect();
  ASSIGN_OR_RETURN(Transaction txn, Transaction::Begin(conn, TxnMode::kWrite));
  RETURN_IF_ERROR(d.LockRecords(conn));
  ASSIGN_OR_RETURN(Result current, conn->Exec(absl::StrCat(
                                       "SELECT value FROM ", d.Name(d.Meta()),
                                       " WHERE key = ", kOwnerKey,
                                       d.LockingRead(/*exclusive=*/true))));
  const std::string owner = current.rows.empty() ? "" : current.rows[0][0].text;
  if (!owner.empty() && owner != store_id && !take_over) {
    return absl::FailedPreconditionError(
        absl::StrCat("the warehouse belongs to state store ", owner,
                     ", not to state store ", store_id));
  }
  if (owner != store_id) {
    RETURN_IF_ERROR(
        conn->Exec(absl::StrCat("INSERT INTO ", d.Name(d.Meta()),
                                " (key, value) VALUES (", kOwnerKey, ", ",
                                d.Placeholder(1),
                                ") ON CONFLICT (key) DO UPDATE SET value = "
                                "excluded.value"),
                   {store_id})
            .status());
  }
  if (owner.empty()) {
    // Markers that name no store (written before the warehouse had an
    // owner) become the first owner's. A marker the store wrote under its
    // own id already wins over the unnamed one.
    const std::string publications = d.Name(d.Publications());
    RETURN_IF_ERROR(
        conn->Exec(absl::StrCat("INSERT INTO ", publications,
                                " (store_id, job_id, published_at) SELECT ",
                                d.Placeholder(1),
                                ", job_id, published_at FROM ", publications,
                                " WHERE store_id = '' ON CONFLICT DO NOTHING"),
                   {store_id})
            .status());
    RETURN_IF_ERROR(conn->Exec(absl::StrCat("DELETE FROM ", publications,
                                            " WHERE store_id = ''"))
                        .status());
  }
  return txn.Commit();
}

absl::StatusOr<bool> HasPublication(Connection* conn,
                                    const std::string& store_id,
                                    const std::string& job_id) {
  return HasMarker(conn, conn->dialect().Publications(), store_id, job_id);
}

absl::StatusOr<bool> HasRollback(Connection* conn, const std::string& store_id,
                                 const std::string& job_id) {
  return HasMarker(conn, conn->dialect().Rollbacks(), store_id, job_id);
}

absl::Status CheckOwner(Connection* conn, const std::string& store_id,
                        const std::string& what, const std::string& undone) {
  const Dialect& d = conn->dialect();
  ASSIGN_OR_RETURN(
      Result r, conn->Exec(absl::StrCat("SELECT value FROM ", d.Name(d.Meta()),
                                        " WHERE key = ", kOwnerKey,
                                        d.LockingRead(/*exclusive=*/false))));
  const std::string owner = r.rows.empty() ? "" : r.rows[0][0].text;
  if (owner != store_id) {
    return absl::FailedPreconditionError(absl::StrCat(
        what, ": the warehouse no longer belongs to this state store (",
        store_id, ") but to ", owner.empty() ? std::string("none") : owner,
        "; nothing was ", undone));
  }
  return absl::OkStatus();
}

absl::Status RecordPublication(Connection* conn, const std::string& store_id,
                               const std::string& job_id, absl::Time when) {
  const Dialect& d = conn->dialect();
  return conn
      ->Exec(absl::StrCat("INSERT INTO ", d.Name(d.Publications()),
                          " (store_id, job_id, published_at) VALUES (",
                          d.Placeholder(1), ", ", d.Placeholder(2), ", ",
                          d.TimePlaceholder(3), ") ON CONFLICT DO NOTHING"),
             {store_id, job_id, d.TimeValue(when)})
      .status();
}

absl::Status RecordRollback(Connection* conn, const std::string& store_id,
                            const std::string& job_id,
                            const RollbackMarker& marker, absl::Time when) {
  const Dialect& d = conn->dialect();
  return conn
      ->Exec(absl::StrCat("INSERT INTO ", d.Name(d.Rollbacks()),
                          " (store_id, job_id, rolled_back_at, requested_by, "
                          "reason, forced, with_jobs) VALUES (",
                          d.Placeholder(1), ", ", d.Placeholder(2), ", ",
                          d.TimePlaceholder(3), ", ", d.Placeholder(4), ", ",
                          d.Placeholder(5), ", ", d.BoolPlaceholder(6), ", ",
                          d.Placeholder(7), ") ON CONFLICT DO NOTHING"),
             {store_id, job_id, d.TimeValue(when), marker.requested_by,
              marker.reason, d.BoolValue(marker.forced),
              absl::StrJoin(marker.with_jobs, ",")})
      .status();
}

namespace {

std::string FenceKey(const std::string& job_id) {
  return absl::StrCat("fence:", job_id);
}

// The job's fence (0: none yet), read in the caller's transaction.
absl::StatusOr<int64_t> ReadFence(Connection* conn, const std::string& job_id,
                                  bool lock) {
  const Dialect& d = conn->dialect();
  ASSIGN_OR_RETURN(
      Result r,
      conn->Exec(absl::StrCat("SELECT value FROM ", d.Name(d.Meta()),
                              " WHERE key = ", d.Placeholder(1),
                              lock ? d.LockingRead(/*exclusive=*/false) : ""),
                 {FenceKey(job_id)}));
  int64_t token = 0;
  if (!r.rows.empty() && !absl::SimpleAtoi(r.rows[0][0].text, &token)) {
    return absl::DataLossError(absl::StrCat("the warehouse's fence of job ",
                                            job_id, " is not a number: \"",
                                            r.rows[0][0].text, "\""));
  }
  return token;
}

absl::Status FenceLost(const std::string& job_id, const std::string& what,
                       int64_t fence, int64_t token,
                       const std::string& undone) {
  return WithReason(
      absl::FailedPreconditionError(absl::StrCat(
          what, ": this replica's lease on job ", job_id, " (token ", token,
          ") was taken over (the warehouse's fence is ", fence,
          "); nothing was ", undone)),
      "LEASE_LOST", {{"backfill_id", job_id}});
}

}  // namespace

absl::Status AdvanceFence(Connection* conn, const std::string& job_id,
                          int64_t token) {
  const Dialect& d = conn->dialect();
  ASSIGN_OR_RETURN(Transaction txn, Transaction::Begin(conn, TxnMode::kWrite));
  // Raised only: claims that race (the row's first insert included) leave
  // the highest token, whatever order they commit in.
  const std::string table = Dialect::Quote(d.Meta().name);
  RETURN_IF_ERROR(
      conn->Exec(
              absl::StrCat(
                  "INSERT INTO ", d.Name(d.Meta()), " (key, value) VALUES (",
                  d.Placeholder(1), ", ", d.Placeholder(2),
                  ") ON CONFLICT (key) DO UPDATE SET value = excluded.value "
                  "WHERE CAST(",
                  table, ".value AS BIGINT) < CAST(excluded.value AS BIGINT)"),
              {FenceKey(job_id), absl::StrCat(token)})
          .status());
  ASSIGN_OR_RETURN(int64_t fence, ReadFence(conn, job_id, /*lock=*/false));
  if (fence > token) {
    return FenceLost(job_id, absl::StrCat("claim of job ", job_id), fence,
                     token, "changed");
  }
  return txn.Commit();
}

absl::Status CheckFence(Connection* conn, const std::string& job_id,
                        int64_t token, const std::string& what,
                        const std::string& undone) {
  ASSIGN_OR_RETURN(int64_t fence, ReadFence(conn, job_id, /*lock=*/true));
  if (fence == token && token > 0) return absl::OkStatus();
  return FenceLost(job_id, what, fence, token, undone);
}

}  // namespace backfill::sql
