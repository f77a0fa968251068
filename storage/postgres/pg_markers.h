// The records a PostgreSQL warehouse keeps about the state stores that
// publish into it: which store owns it, which jobs each store published and
// which it rolled back. The PostgreSQL engine writes a job's publication
// marker (and a rollback's marker) in the same transaction as the rows, so
// that a crash between the warehouse's commit and the state store's record
// is recovered without publishing or restoring anything twice.
//
// They live in the reserved schema `_bf` (kServiceSchema):
//   _bf.meta          (key, value): owner_store_id, the store that claimed
//                     the warehouse
//   _bf.publications  (store_id, job_id, published_at): one row per
//                     published job, naming the store whose job it was (a
//                     recreated state store's "bf-1" is not another store's)
//   _bf.rollbacks     (store_id, job_id, rolled_back_at, requested_by,
//                     reason, forced, with_jobs): one row per rolled-back
//                     job; with_jobs lists the jobs rolled back with it,
//                     newest first, separated by commas
// CreateServiceSchema creates them. Creation and Claim take a transaction-
// scoped advisory lock (kServiceLockKey), so two daemons starting on one
// warehouse at once do not trip over each other's CREATE or claim.
//
// Free functions over a connection the caller owns and serializes; the
// functions that say "in the caller's transaction" run no BEGIN or COMMIT
// of their own, the others run one. Thread-safe as far as the connection is.

#ifndef BACKFILL_STORAGE_POSTGRES_PG_MARKERS_H_
#define BACKFILL_STORAGE_POSTGRES_PG_MARKERS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/ports/engine.h"
#include "storage/postgres/pg_connection.h"

namespace backfill::postgres {

// The schema of the service's own records (and of its rollback copies).
inline constexpr char kServiceSchema[] = "_bf";

// The advisory lock key (pg_advisory_xact_lock) that serializes the
// creation of the service schema and claims: "bf" in ASCII, then a version.
inline constexpr int64_t kServiceLockKey = 0x62660001;

// Creates the `_bf` schema and its tables if they do not exist. Its own
// transaction.
absl::Status CreateServiceSchema(PgConnection* conn);

// The owner, every publication marker and every rollback marker. One
// REPEATABLE READ, READ ONLY transaction of its own, so that the three
// reads see one moment.
absl::StatusOr<WarehouseInfo> ReadWarehouseInfo(PgConnection* conn);

// Makes `store_id` the owner, as Engine::Claim says: an unclaimed warehouse
// is claimed and its markers that name no store are stamped with
// `store_id`; one owned by another store is FAILED_PRECONDITION unless
// `take_over` (then every marker keeps the store that wrote it). Its own
// transaction, under the advisory lock.
absl::Status ClaimWarehouse(PgConnection* conn, const std::string& store_id,
                            bool take_over);

// True when `store_id` published `job_id`.
absl::StatusOr<bool> HasPublication(PgConnection* conn,
                                    const std::string& store_id,
                                    const std::string& job_id);

// In the caller's transaction: FAILED_PRECONDITION, its message starting
// with `what` ("publish of job bf-3"), unless `store_id` still owns the
// warehouse (another store took it over since the claim). Locks the
// owner's row until the transaction ends (FOR SHARE), so that no take over
// commits between this check and the caller's commit.
absl::Status CheckOwner(PgConnection* conn, const std::string& store_id,
                        const std::string& what);

// In the caller's transaction: records that `store_id` published `job_id`
// at `when`. A marker that exists already is left as it is.
absl::Status RecordPublication(PgConnection* conn, const std::string& store_id,
                               const std::string& job_id, absl::Time when);

// In the caller's transaction: records the rollback of `job_id` by
// `store_id` (marker.store_id is ignored) at `when`. A marker that exists
// already is left as it is.
absl::Status RecordRollback(PgConnection* conn, const std::string& store_id,
                            const std::string& job_id,
                            const RollbackMarker& marker, absl::Time when);

}  // namespace backfill::postgres

#endif  // BACKFILL_STORAGE_POSTGRES_PG_MARKERS_H_
