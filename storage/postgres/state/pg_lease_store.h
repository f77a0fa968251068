// PgLeaseStore: the LeaseStore (core/ports/lease_store.h) on PostgreSQL, in
// the tables `nodes` and `job_leases` of the state store's schema
// `backfill_state` (pg_state_schema.h), so that the replicas sharing a
// state store (backfilld --state-dsn) also share their leases. Proven by
// the lease store contract suite (tests/testing/lease_store_contract.h).
//
// Every time is the server's clock, read inside the statement that uses it
// (clock_timestamp(), in microseconds since the epoch as every time of the
// schema): replicas whose own clocks differ agree on what expired. A
// node's heartbeat never goes back, even when the server's clock does.
//
// A job's lease is one row, kept when released (node '') so that its token
// only grows: a first claim inserts token 1, a claim that changes hands (a
// takeover, a claim after a release, a holder claiming again its own
// expired lease) adds one; a holder claiming its live lease again keeps
// it. Claim locks the job's row (SELECT ... FOR UPDATE) before deciding,
// so that however many processes claim a job at once, one wins and the
// others are told who did. The state store checks a write's token against
// the same row (SELECT node, token ... FOR SHARE) in the write's own
// transaction.
//
// Each call is one transaction in READ COMMITTED (reads: REPEATABLE READ,
// READ ONLY) on a connection of the pool; a transaction the server aborted
// (a deadlock, a serialization failure) is run again, up to three times in
// all. Values are always bound, never spliced.
//
// Ownership: Open() makes a pool of its own, which the store owns; a store
// made on a pool of the caller's borrows it (the pool must outlive the
// store). Thread-safety: thread-safe; each call leases a connection of its
// own.

#ifndef BACKFILL_STORAGE_POSTGRES_STATE_PG_LEASE_STORE_H_
#define BACKFILL_STORAGE_POSTGRES_STATE_PG_LEASE_STORE_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/ports/lease_store.h"
#include "storage/postgres/pg_pool.h"

namespace backfill {

class PgLeaseStore : public LeaseStore {
 public:
  // Connects to `dsn` (a libpq connection string) with a pool of two
  // connections (application_name "backfilld-leases") and creates or
  // upgrades the state store's schema (MigrateStateSchema), whether or not
  // a state store was opened on the database before.
  static absl::StatusOr<std::unique_ptr<PgLeaseStore>> Open(
      const std::string& dsn,
      absl::Duration idle_in_transaction_timeout = absl::ZeroDuration());

  // A store on `pool`, which it borrows: the pool must outlive it, and its
  // database must hold the state store's schema at its latest version
  // (MigrateStateSchema, as PgStateStore::Open and Open() run it).
  explicit PgLeaseStore(postgres::PgPool* pool);

  ~PgLeaseStore() override;
  PgLeaseStore(const PgLeaseStore&) = delete;
  PgLeaseStore& operator=(const PgLeaseStore&) = delete;

  absl::Status Heartbeat(const NodeRecord& node) override;
  absl::Status Leave(const std::string& node) override;
  absl::StatusOr<std::vector<NodeRecord>> ListNodes() override;
  absl::StatusOr<ClaimResult> Claim(const std::string& job_id,
                                    const std::string& node,
                                    const std::string& step,
                                    absl::Duration ttl) override;
  absl::StatusOr<std::vector<std::string>> Renew(
      const std::string& node, const std::vector<JobLease>& held,
      absl::Duration ttl) override;
  absl::Status Release(const JobLease& lease) override;
  absl::StatusOr<std::vector<JobLease>> ListLeases() override;
  absl::StatusOr<int64_t> SendRequest(const NodeRequest& request) override;
  absl::StatusOr<std::vector<NodeRequest>> TakeRequests(
      const std::string& node) override;
  absl::Status AnswerRequest(int64_t id, const NodeAnswer& answer) override;
  absl::StatusOr<std::optional<NodeAnswer>> ReadAnswer(int64_t id,
                                                       bool withdraw) override;

 private:
  explicit PgLeaseStore(std::unique_ptr<postgres::PgPool> pool);

  // Runs `body(conn)` in one transaction of `mode` on a leased
  // connection, committed when it succeeds; again (up to three times in
  // all) when the server aborted it.
  template <typename Body>
  auto InTransaction(const char* mode, Body&& body);

  std::unique_ptr<postgres::PgPool> owned_pool_;  // null when borrowed
  postgres::PgPool* pool_;
};

}  // namespace backfill

#endif  // BACKFILL_STORAGE_POSTGRES_STATE_PG_LEASE_STORE_H_
