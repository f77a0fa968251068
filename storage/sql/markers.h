// The warehouse's records of the state stores that publish into it, as
// the publish and the rollback of every SQL engine read and write them in
// their own transaction: which store owns the warehouse (Dialect::Meta,
// key owner_store_id), which jobs each store published
// (Dialect::Publications) and which it rolled back (Dialect::Rollbacks).
// Written in the same transaction as the rows, so that a crash between the
// warehouse's commit and the state store's record is recovered without
// publishing or restoring anything twice.
//
// Free functions, in the caller's transaction unless they say otherwise;
// thread-safe as far as the connection is.

#ifndef BACKFILL_STORAGE_SQL_MARKERS_H_
#define BACKFILL_STORAGE_SQL_MARKERS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/ports/engine.h"
#include "storage/sql/connection.h"

namespace backfill::sql {

// Creates the three record tables (and the change signal's,
// change_signal.h) where they do not exist, in the caller's transaction (the
// place they live in must exist: see Dialect::Meta).
absl::Status CreateRecords(Connection* conn);

// The owner, every publication marker and every rollback marker, read in
// one snapshot transaction of its own.
absl::StatusOr<WarehouseInfo> ReadWarehouseInfo(Connection* conn);

// Makes `store_id` the owner, as Engine::Claim says: an unclaimed
// warehouse is claimed and its markers that name no store become
// `store_id`'s (a marker the store wrote under its own id wins over an
// unnamed one); one owned by another store is FAILED_PRECONDITION unless
// `take_over` (then every marker keeps the store that wrote it). A write
// transaction of its own, under Dialect::LockRecords.
absl::Status ClaimWarehouse(Connection* conn, const std::string& store_id,
                            bool take_over);

// True when `store_id` published (rolled back) `job_id`.
absl::StatusOr<bool> HasPublication(Connection* conn,
                                    const std::string& store_id,
                                    const std::string& job_id);
absl::StatusOr<bool> HasRollback(Connection* conn, const std::string& store_id,
                                 const std::string& job_id);

// FAILED_PRECONDITION, its message starting with `what` ("publish of job
// bf-3") and ending "nothing was <undone>", unless `store_id` still owns
// the warehouse. Where the database can, the owner's row stays locked until
// the transaction ends, so that no take over commits in between.
absl::Status CheckOwner(Connection* conn, const std::string& store_id,
                        const std::string& what, const std::string& undone);

// Records that `store_id` published `job_id` (rolled it back as `marker`
// says; marker.store_id is ignored) at `when`. A marker that exists
// already is left as it is.
absl::Status RecordPublication(Connection* conn, const std::string& store_id,
                               const std::string& job_id, absl::Time when);
absl::Status RecordRollback(Connection* conn, const std::string& store_id,
                            const std::string& job_id,
                            const RollbackMarker& marker, absl::Time when);

// The warehouse's fence of a job run by a replica of a group
// (core/ports/lease_store.h): the fencing token of the lease under which
// the job is run now, kept in Dialect::Meta under "fence:<job_id>". A
// replica that claims a job raises its fence before it writes anything
// for it, and the publish and the rollback check it in their own
// transaction (CheckFence), so that a replica whose lease was taken over
// commits nothing more in the warehouse, whether or not the state store is
// in the same database.
//
// Raises the job's fence to `token`, in a write transaction of its own; OK
// when it is `token` already, FAILED_PRECONDITION (reason LEASE_LOST) when
// it is higher (a later claim raised it).
absl::Status AdvanceFence(Connection* conn, const std::string& job_id,
                          int64_t token);

// In the caller's transaction: OK when the job's fence is `token`, else
// FAILED_PRECONDITION (reason LEASE_LOST), the message starting with `what`
// ("publish of job bf-3") and ending "nothing was <undone>". Where the
// database can, the fence's row stays locked (shared) until the
// transaction ends, so that no claim raises it in between.
absl::Status CheckFence(Connection* conn, const std::string& job_id,
                        int64_t token, const std::string& what,
                        const std::string& undone);

}  // namespace backfill::sql

#endif  // BACKFILL_STORAGE_SQL_MARKERS_H_
