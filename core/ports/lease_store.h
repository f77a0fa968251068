// LeaseStore: who in a group of replicas runs which job. Replicas started
// with the same state store (backfilld --state-dsn) form a group with no
// leader: each records itself (Heartbeat) and claims jobs with work to do
// (Claim). A claim is a lease: it lasts `ttl` from the store's clock and
// its holder renews it while it works (Renew, every third of it). A lease
// whose holder stopped renewing expires, and any replica may then claim the
// job: a takeover. The new holder resumes the job from its checkpoints.
//
// Fencing tokens. Every claim that changes hands (a first claim, a
// takeover, a claim after a release) gives the job's lease a larger token,
// never reused. Writes made for the job under the lease carry the token,
// and the state store checks it in the same transaction (LeaseFence): a
// replica that lost its lease (frozen past it, cut off from the store) can
// never write for the job again, even if it wakes in the middle of a step.
//
// Times (expiry, heartbeats) are the store's clock, so that replicas on
// machines whose clocks differ agree on what expired.
//
// Implementations: storage/postgres/state/pg_lease_store.h (the tables
// `nodes` and `job_leases` of the state schema) and the in-memory fake of
// the tests, both proven by the lease store contract suite. Implementations
// are thread-safe; every method is one transaction.

#ifndef BACKFILL_CORE_PORTS_LEASE_STORE_H_
#define BACKFILL_CORE_PORTS_LEASE_STORE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace backfill {

// A replica of the group, as it last recorded itself.
struct NodeRecord {
  std::string name;     // --node-name: unique in the group
  std::string address;  // where clients reach its gRPC port (HOST:PORT)
  std::string version;  // its backfilld version
  absl::Time started_at = absl::InfinitePast();
  // Set by the store (its clock) at each Heartbeat; ignored on input.
  absl::Time last_heartbeat = absl::InfinitePast();
  // It is stopping: it takes no new work and hands back what it holds.
  bool draining = false;
};

// A job's lease.
struct JobLease {
  std::string job_id;
  std::string node;   // its holder
  int64_t token = 0;  // the fencing token, >= 1
  // What the holder does under it, for operators: "run" (preparing and
  // recomputing partitions), "validate", "publish", "confirm", "rollback".
  std::string step;
  absl::Time claimed_at = absl::InfinitePast();  // when this holder took it
  absl::Time expires_at = absl::InfinitePast();
  // Whether it had not expired when read (by the store's clock).
  bool live = false;
};

struct ClaimResult {
  bool claimed = false;  // the caller holds the lease now
  // The lease after the call: the caller's when claimed, else the live
  // lease of the replica that holds it.
  JobLease lease;
  // Claimed over another replica's expired lease: that replica's name ("":
  // not a takeover).
  std::string taken_from;
};

// A decision on a job (cancel, pause, resume, retry, approve) that the
// replica asked sends to the replica that runs the job: any replica
// answers every call. `body` is the decision's arguments, JSON.
struct NodeRequest {
  int64_t id = 0;    // assigned by SendRequest
  std::string node;  // the replica that is to take it
  std::string job_id;
  std::string kind;
  std::string body;
};

// What the replica that took a request answered.
struct NodeAnswer {
  absl::StatusCode code = absl::StatusCode::kOk;
  std::string message;
};

class LeaseStore {
 public:
  virtual ~LeaseStore() = default;

  // Records `node` alive now: creates or replaces its record (address,
  // version, start, draining) and sets its heartbeat to the store's clock.
  virtual absl::Status Heartbeat(const NodeRecord& node) = 0;

  // Removes `node`'s record and releases every lease it holds (a clean
  // stop; the tokens stay, so a later claim gets a larger one).
  virtual absl::Status Leave(const std::string& node) = 0;

  // Every replica that recorded itself, by name, with its last heartbeat.
  virtual absl::StatusOr<std::vector<NodeRecord>> ListNodes() = 0;

  // Claims `job_id` for `node`, for `ttl` from now, doing `step`. Succeeds
  // when the job has no lease, its lease was released or expired (a
  // takeover: ClaimResult::taken_from), or `node` holds it already (then it
  // is extended and keeps its token; the step is replaced). Otherwise
  // claims nothing and returns the holder's live lease.
  virtual absl::StatusOr<ClaimResult> Claim(const std::string& job_id,
                                            const std::string& node,
                                            const std::string& step,
                                            absl::Duration ttl) = 0;

  // Extends to now + `ttl` each lease of `held` that `node` still holds
  // with the same token, and records the node's heartbeat; returns the job
  // ids of those it no longer holds (taken over after they expired, or
  // released).
  virtual absl::StatusOr<std::vector<std::string>> Renew(
      const std::string& node, const std::vector<JobLease>& held,
      absl::Duration ttl) = 0;

  // Gives the lease back if `lease.node` still holds it with `lease.token`;
  // otherwise does nothing. The token stays.
  virtual absl::Status Release(const JobLease& lease) = 0;

  // Every lease held (live or expired, not released), by job id.
  virtual absl::StatusOr<std::vector<JobLease>> ListLeases() = 0;

  // --- Requests between replicas ---
  // Queues `request` for request.node; returns its id.
  virtual absl::StatusOr<int64_t> SendRequest(const NodeRequest& request) = 0;
  // The requests queued for `node` that nobody took yet, oldest first,
  // marked taken: each is returned once.
  virtual absl::StatusOr<std::vector<NodeRequest>> TakeRequests(
      const std::string& node) = 0;
  // Records the answer to request `id`.
  virtual absl::Status AnswerRequest(int64_t id, const NodeAnswer& answer) = 0;
  // The answer to request `id`, once there is one (the request is then
  // forgotten); nullopt until then. With `withdraw`, a request nobody took
  // yet is withdrawn (forgotten, never taken): then NOT_FOUND. A request
  // that is unknown (answered and read before) is NOT_FOUND too.
  virtual absl::StatusOr<std::optional<NodeAnswer>> ReadAnswer(
      int64_t id, bool withdraw) = 0;
};

// What a state store asks before each write that concerns a job: under
// which lease token this process writes for it. The state store then
// checks, in the write's own transaction, that the job's lease still has
// that token, and refuses the write otherwise (ABORTED, reason
// LEASE_LOST), changing nothing.
class LeaseFence {
 public:
  virtual ~LeaseFence() = default;
  // nullopt: this process holds no lease on the job and writes unfenced
  // (a new job, a decision on a job nobody runs). A token: the token the
  // job's lease must still have; 0 for a lease this process lost, which
  // no write may pass.
  virtual std::optional<int64_t> TokenFor(const std::string& job_id) const = 0;
};

}  // namespace backfill

#endif  // BACKFILL_CORE_PORTS_LEASE_STORE_H_
