#include "storage/sql/markers.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/status_macros.h"
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

}  // namespace

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
                                        " WHERE key = 'owner_store_id'",
                                        d.LockingRead())));
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

}  // namespace backfill::sql
