#include "storage/postgres/pg_markers.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/base/status_macros.h"

namespace backfill::postgres {
namespace {

// The advisory lock, for the caller's transaction.
absl::Status LockService(PgConnection* conn) {
  return conn
      ->Exec("SELECT pg_advisory_xact_lock($1::bigint)",
             {std::to_string(kServiceLockKey)})
      .status();
}

// A time as a timestamptz literal in UTC, to microseconds.
std::string TimestampText(absl::Time when) {
  return absl::FormatTime("%Y-%m-%d %H:%M:%E6S+00", when, absl::UTCTimeZone());
}

// Adds what the records were doing to an error, keeping its code.
absl::Status Annotate(const absl::Status& status, std::string_view what) {
  if (status.ok()) return status;
  return absl::Status(status.code(),
                      absl::StrCat(std::string(what), ": ", status.message()));
}

}  // namespace

absl::Status CreateServiceSchema(PgConnection* conn) {
  PgTransaction txn(conn);
  RETURN_IF_ERROR(txn.Begin());
  RETURN_IF_ERROR(LockService(conn));
  static constexpr const char* kStatements[] = {
      "CREATE SCHEMA IF NOT EXISTS _bf",
      "CREATE TABLE IF NOT EXISTS _bf.meta (key TEXT PRIMARY KEY, value TEXT "
      "NOT NULL)",
      "CREATE TABLE IF NOT EXISTS _bf.publications (store_id TEXT NOT NULL, "
      "job_id TEXT NOT NULL, published_at TIMESTAMPTZ NOT NULL, PRIMARY KEY "
      "(store_id, job_id))",
      "CREATE TABLE IF NOT EXISTS _bf.rollbacks (store_id TEXT NOT NULL, "
      "job_id TEXT NOT NULL, rolled_back_at TIMESTAMPTZ NOT NULL, "
      "requested_by TEXT NOT NULL, reason TEXT NOT NULL, forced BOOLEAN NOT "
      "NULL, with_jobs TEXT NOT NULL, PRIMARY KEY (store_id, job_id))",
  };
  for (const char* sql : kStatements) {
    RETURN_IF_ERROR(Annotate(conn->Exec(sql).status(),
                             "creating the warehouse's service schema _bf"));
  }
  return txn.Commit();
}

absl::StatusOr<WarehouseInfo> ReadWarehouseInfo(PgConnection* conn) {
  PgTransaction txn(conn);
  RETURN_IF_ERROR(txn.Begin("ISOLATION LEVEL REPEATABLE READ, READ ONLY"));
  WarehouseInfo info;
  ASSIGN_OR_RETURN(
      PgResult owner,
      conn->Exec("SELECT value FROM _bf.meta WHERE key = 'owner_store_id'"));
  if (!owner.rows.empty() && owner.rows[0][0]) {
    info.owner_store_id = *owner.rows[0][0];
  }
  ASSIGN_OR_RETURN(PgResult published,
                   conn->Exec("SELECT job_id, store_id FROM _bf.publications"));
  for (const std::vector<PgValue>& row : published.rows) {
    info.publications[row[0].value_or("")] = row[1].value_or("");
  }
  ASSIGN_OR_RETURN(
      PgResult rolled,
      conn->Exec("SELECT job_id, store_id, requested_by, reason, forced, "
                 "with_jobs FROM _bf.rollbacks"));
  for (const std::vector<PgValue>& row : rolled.rows) {
    RollbackMarker& m = info.rollbacks[row[0].value_or("")];
    m.store_id = row[1].value_or("");
    m.requested_by = row[2].value_or("");
    m.reason = row[3].value_or("");
    m.forced = row[4].value_or("") == "t";
    m.with_jobs = absl::StrSplit(row[5].value_or(""), ',', absl::SkipEmpty());
  }
  RETURN_IF_ERROR(txn.Commit());
  return info;
}

absl::Status ClaimWarehouse(PgConnection* conn, const std::string& store_id,
                            bool take_over) {
  if (store_id.empty()) {
    return absl::InvalidArgumentError("Claim: empty store id");
  }
  PgTransaction txn(conn);
  RETURN_IF_ERROR(txn.Begin());
  RETURN_IF_ERROR(LockService(conn));
  ASSIGN_OR_RETURN(
      PgResult current,
      conn->Exec("SELECT value FROM _bf.meta WHERE key = 'owner_store_id' "
                 "FOR UPDATE"));
  std::string owner;
  if (!current.rows.empty()) owner = current.rows[0][0].value_or("");
  if (!owner.empty() && owner != store_id && !take_over) {
    return absl::FailedPreconditionError(
        absl::StrCat("the warehouse belongs to state store ", owner,
                     ", not to state store ", store_id));
  }
  if (owner != store_id) {
    RETURN_IF_ERROR(
        conn->Exec("INSERT INTO _bf.meta (key, value) VALUES "
                   "('owner_store_id', $1) ON CONFLICT (key) DO UPDATE SET "
                   "value = EXCLUDED.value",
                   {store_id})
            .status());
  }
  if (owner.empty()) {
    // Markers that name no store (written before the warehouse had an
    // owner) become the first owner's. A marker the store wrote under its
    // own id already wins over the unnamed one.
    RETURN_IF_ERROR(
        conn->Exec("INSERT INTO _bf.publications (store_id, job_id, "
                   "published_at) SELECT $1, job_id, published_at FROM "
                   "_bf.publications WHERE store_id = '' ON CONFLICT DO "
                   "NOTHING",
                   {store_id})
            .status());
    RETURN_IF_ERROR(
        conn->Exec("DELETE FROM _bf.publications WHERE store_id = ''")
            .status());
  }
  return txn.Commit();
}

absl::StatusOr<bool> HasPublication(PgConnection* conn,
                                    const std::string& store_id,
                                    const std::string& job_id) {
  ASSIGN_OR_RETURN(PgResult r,
                   conn->Exec("SELECT 1 FROM _bf.publications WHERE store_id "
                              "= $1 AND job_id = $2",
                              {store_id, job_id}));
  return !r.rows.empty();
}

absl::Status CheckOwner(PgConnection* conn, const std::string& store_id,
                        const std::string& what) {
  ASSIGN_OR_RETURN(
      PgResult r,
      conn->Exec("SELECT value FROM _bf.meta WHERE key = 'owner_store_id' "
                 "FOR SHARE"));
  const std::string owner = r.rows.empty() ? "" : r.rows[0][0].value_or("");
  if (owner != store_id) {
    return absl::FailedPreconditionError(absl::StrCat(
        what, ": the warehouse no longer belongs to this state store (",
        store_id, ") but to ", owner.empty() ? std::string("none") : owner,
        "; nothing was written"));
  }
  return absl::OkStatus();
}

absl::Status RecordPublication(PgConnection* conn, const std::string& store_id,
                               const std::string& job_id, absl::Time when) {
  return conn
      ->Exec(
          "INSERT INTO _bf.publications (store_id, job_id, published_at) "
          "VALUES ($1, $2, $3::timestamptz) ON CONFLICT DO NOTHING",
          {store_id, job_id, TimestampText(when)})
      .status();
}

absl::Status RecordRollback(PgConnection* conn, const std::string& store_id,
                            const std::string& job_id,
                            const RollbackMarker& marker, absl::Time when) {
  return conn
      ->Exec(
          "INSERT INTO _bf.rollbacks (store_id, job_id, rolled_back_at, "
          "requested_by, reason, forced, with_jobs) VALUES ($1, $2, "
          "$3::timestamptz, $4, $5, $6::boolean, $7) ON CONFLICT DO "
          "NOTHING",
          {store_id, job_id, TimestampText(when), marker.requested_by,
           marker.reason, marker.forced ? "true" : "false",
           absl::StrJoin(marker.with_jobs, ",")})
      .status();
}

}  // namespace backfill::postgres
