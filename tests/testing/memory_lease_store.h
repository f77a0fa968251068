// MemoryLeaseStore: a LeaseStore (core/ports/lease_store.h) held in memory,
// for tests of the core that run a group of replicas without PostgreSQL.
// It has the observable semantics of PgLeaseStore (storage/postgres/state/
// pg_lease_store.h), which the lease store contract suite
// (tests/testing/lease_store_contract.h) checks by running the same cases
// against both:
//   - the store's clock is the Clock given at construction (a ManualClock
//     in tests), read in microseconds as PostgreSQL keeps times; a lease
//     is live while its expiry is after now;
//   - a job's lease is kept when released (no holder) so that its token
//     only grows: 1 for the first claim, one more for each claim that
//     changes hands (a takeover, a claim after a release, a holder
//     claiming its own expired lease); a holder claiming its live lease
//     again keeps token and claim time;
//   - a node's heartbeat never goes back;
//   - listings by name and by job id, in bytewise order;
//   - empty job ids or node names, names holding a NUL character, a ttl
//     below one microsecond or infinite, and a heartbeat without a start
//     time are refused (INVALID_ARGUMENT), changing nothing.
//
// Ownership: borrows the clock, which must outlive the store.
// Thread-safety: thread-safe; one mutex guards the state, and every call
// holds it from start to end (one transaction).

#ifndef BACKFILL_TESTS_TESTING_MEMORY_LEASE_STORE_H_
#define BACKFILL_TESTS_TESTING_MEMORY_LEASE_STORE_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/base/clock.h"
#include "core/ports/lease_store.h"

namespace backfill::testing {

class MemoryLeaseStore : public LeaseStore {
 public:
  explicit MemoryLeaseStore(const Clock* clock);

  MemoryLeaseStore(const MemoryLeaseStore&) = delete;
  MemoryLeaseStore& operator=(const MemoryLeaseStore&) = delete;

  absl::Status Heartbeat(const NodeRecord& node) override
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status Leave(const std::string& node) override ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<std::vector<NodeRecord>> ListNodes() override
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<ClaimResult> Claim(const std::string& job_id,
                                    const std::string& node,
                                    const std::string& step,
                                    absl::Duration ttl) override
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<std::vector<std::string>> Renew(
      const std::string& node, const std::vector<JobLease>& held,
      absl::Duration ttl) override ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status Release(const JobLease& lease) override ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<std::vector<JobLease>> ListLeases() override
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<int64_t> SendRequest(const NodeRequest& request) override
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<std::vector<NodeRequest>> TakeRequests(
      const std::string& node) override ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status AnswerRequest(int64_t id, const NodeAnswer& answer) override
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<std::optional<NodeAnswer>> ReadAnswer(int64_t id,
                                                       bool withdraw) override
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // The clock's now, to the microsecond (rounded down).
  absl::Time Now() const;

  const Clock* const clock_;

  mutable absl::Mutex mu_;
  std::map<std::string, NodeRecord> nodes_ ABSL_GUARDED_BY(mu_);
  // By job id; a released lease has no node and keeps its token. `live`
  // is not kept: it is computed when read.
  std::map<std::string, JobLease> leases_ ABSL_GUARDED_BY(mu_);
  // Requests between replicas, by id.
  struct Request {
    NodeRequest request;
    bool taken = false;
    std::optional<NodeAnswer> answer;
  };
  std::map<int64_t, Request> requests_ ABSL_GUARDED_BY(mu_);
  int64_t next_request_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace backfill::testing

#endif  // BACKFILL_TESTS_TESTING_MEMORY_LEASE_STORE_H_
