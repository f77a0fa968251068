// BackfillApi: the calls of backfill.v1.BackfillService, whatever carries
// them. The gRPC handlers (server/backfill_service_impl.h) and the HTTP/JSON
// handlers (server/http_api.h) both decode a request, authenticate its
// caller, and then call the method of the same name here, which checks
// wire-level input (empty or malformed ids, page sizes, unspecified enum
// values) with INVALID_ARGUMENT, calls the BackfillManager and encodes the
// answer (server/proto_convert.h). No SQL, no business rules, no locks:
// those are the core's.
//
// Errors are absl::Status with the details the core attached (reason,
// field violations; core/base/error_details.h); each transport maps them
// to its own form (server/grpc_status.h, server/http_status.h).
//
// Does not own the manager, the replay keeper or the lease store, which
// must outlive it. Thread-safe: the methods are called concurrently; the
// only state is an atomic "shutting down" flag and the count of open
// watches per caller (server/stream_slots.h), besides what the setters set
// before the servers start.

#ifndef BACKFILL_SERVER_BACKFILL_API_H_
#define BACKFILL_SERVER_BACKFILL_API_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "backfill/v1/backfill.pb.h"
#include "backfill/v1/nodes.pb.h"
#include "core/ports/lease_store.h"
#include "core/run/backfill_manager.h"
#include "core/run/replay_keeper.h"
#include "server/access_policy.h"
#include "server/listing_convert.h"
#include "server/stream_slots.h"

namespace backfill {

// DiffBackfill: partitions per page and sample rows per partition.
inline constexpr int kDefaultDiffPageSize = 100;
inline constexpr int kMaxDiffPageSize = 1000;
inline constexpr int kDefaultDiffSamples = 3;

// WatchBackfill streams one caller may have open at once, by default.
inline constexpr int64_t kDefaultMaxWatchStreamsPerCaller = 16;

// The per-caller limits the API enforces, each refused with
// RESOURCE_EXHAUSTED naming the limit, its value and the backfilld flag
// that sets it.
struct ServiceLimits {
  // Concurrent WatchBackfill streams per caller: the authenticated
  // principal, else the peer's host (--max-watch-streams-per-principal),
  // counted over gRPC and HTTP together.
  int64_t max_watch_streams_per_caller = kDefaultMaxWatchStreamsPerCaller;
  // Updates of one watch are at least this far apart: changes in between are
  // coalesced into the next update (each update reads and sends the whole
  // job, so a job of many fast partitions must not cost a read per
  // partition). The end of a job this daemon runs is sent at once; of one
  // another replica runs, at most this late.
  absl::Duration watch_min_interval = absl::Milliseconds(100);
  // The largest answer to PlanBackfill that lists every planned partition;
  // a larger plan is answered with the partitions and their reasons left
  // out, as in a job's BASIC view (DatasetPlan.partition_count still says
  // how many). gRPC clients refuse a message over 4 MiB unless told
  // otherwise: a plan of about 150,000 hour partitions would reach none.
  size_t max_plan_answer_bytes = size_t{4} << 20;
};

// The host of a peer string: "10.0.0.7" of "ipv4:10.0.0.7:5123", "::1" of
// "ipv6:[::1]:5123"; the whole string for any other form.
std::string PeerHost(std::string_view peer);

// Who makes a call, as its transport established it.
struct Caller {
  // The authenticated principal; nullopt with authentication off.
  std::optional<Principal> principal;
  // The client's address, gRPC's form: "ipv4:10.0.0.7:5123",
  // "ipv6:[::1]:5123".
  std::string peer;
  // Whether the client has gone away (null: it cannot tell).
  std::function<bool()> cancelled;

  // The principal's name for the audit log; "" with authentication off.
  std::string Actor() const {
    return principal.has_value() ? principal->name : "";
  }
  bool Cancelled() const { return cancelled != nullptr && cancelled(); }
};

class BackfillApi {
 public:
  // `watch_poll`: how long a watch waits for a change before it looks
  // again (at cancellation and shutdown). `max_page_bytes`: how many bytes
  // of jobs or partitions a page of ListBackfills or ListPartitions holds at
  // most (server/listing_convert.h), and the most a whole job in the answer
  // to a submit or a change of state may take before it is answered in the
  // BASIC view.
  explicit BackfillApi(BackfillManager* manager,
                       absl::Duration watch_poll = absl::Seconds(1),
                       size_t max_page_bytes = kMaxListPageBytes,
                       const ServiceLimits& limits = {});

  BackfillApi(const BackfillApi&) = delete;
  BackfillApi& operator=(const BackfillApi&) = delete;

  // Makes open watches end (UNAVAILABLE, "shutting down") within one poll
  // interval, so that the servers can shut down promptly, and refuses new
  // submits (UNAVAILABLE); clients reconnect elsewhere or later.
  // Idempotent.
  void BeginShutdown() { shutting_down_.store(true); }

  absl::Status PlanBackfill(const Caller& caller,
                            const v1::PlanBackfillRequest& request,
                            v1::PlanBackfillResponse* response);
  absl::Status SubmitBackfill(const Caller& caller,
                              const v1::SubmitBackfillRequest& request,
                              v1::SubmitBackfillResponse* response);
  absl::Status GetBackfill(const Caller& caller,
                           const v1::GetBackfillRequest& request,
                           v1::Backfill* response);
  absl::Status ListBackfills(const Caller& caller,
                             const v1::ListBackfillsRequest& request,
                             v1::ListBackfillsResponse* response);
  // Sends the job with `write` whenever it changes, until it is terminal;
  // `write` returns false once the client has gone (then CANCELLED).
  absl::Status WatchBackfill(
      const Caller& caller, const v1::WatchBackfillRequest& request,
      const std::function<bool(const v1::Backfill&)>& write);
  absl::Status CancelBackfill(const Caller& caller,
                              const v1::CancelBackfillRequest& request,
                              v1::Backfill* response);
  absl::Status PauseBackfill(const Caller& caller,
                             const v1::PauseBackfillRequest& request,
                             v1::Backfill* response);
  absl::Status ResumeBackfill(const Caller& caller,
                              const v1::ResumeBackfillRequest& request,
                              v1::Backfill* response);
  absl::Status RetryBackfill(const Caller& caller,
                             const v1::RetryBackfillRequest& request,
                             v1::Backfill* response);
  absl::Status RollbackBackfill(const Caller& caller,
                                const v1::RollbackBackfillRequest& request,
                                v1::Backfill* response);
  absl::Status ListDatasets(const Caller& caller,
                            const v1::ListDatasetsRequest& request,
                            v1::ListDatasetsResponse* response);
  absl::Status GetDataset(const Caller& caller,
                          const v1::GetDatasetRequest& request,
                          v1::Dataset* response);
  absl::Status ListDatasetPartitions(
      const Caller& caller, const v1::ListDatasetPartitionsRequest& request,
      v1::ListDatasetPartitionsResponse* response);
  absl::Status ApproveBackfill(const Caller& caller,
                               const v1::ApproveBackfillRequest& request,
                               v1::Backfill* response);
  absl::Status DiffBackfill(const Caller& caller,
                            const v1::DiffBackfillRequest& request,
                            v1::DiffBackfillResponse* response);
  absl::Status ExplainPartition(const Caller& caller,
                                const v1::ExplainPartitionRequest& request,
                                v1::ExplainPartitionResponse* response);
  absl::Status ListAuditEvents(const Caller& caller,
                               const v1::ListAuditEventsRequest& request,
                               v1::ListAuditEventsResponse* response);
  absl::Status ConfirmBackfill(const Caller& caller,
                               const v1::ConfirmBackfillRequest& request,
                               v1::Backfill* response);
  absl::Status ListPartitions(const Caller& caller,
                              const v1::ListPartitionsRequest& request,
                              v1::ListPartitionsResponse* response);
  absl::Status ListReplayPolicies(const Caller& caller,
                                  const v1::ListReplayPoliciesRequest& request,
                                  v1::ListReplayPoliciesResponse* response);
  absl::Status EvaluateReplayPolicy(
      const Caller& caller, const v1::EvaluateReplayPolicyRequest& request,
      v1::ReplayEvaluation* response);
  absl::Status PauseReplayPolicy(const Caller& caller,
                                 const v1::PauseReplayPolicyRequest& request,
                                 v1::ReplayPolicy* response);
  absl::Status ResumeReplayPolicy(const Caller& caller,
                                  const v1::ResumeReplayPolicyRequest& request,
                                  v1::ReplayPolicy* response);
  absl::Status ListNodes(const Caller& caller,
                         const v1::ListNodesRequest& request,
                         v1::ListNodesResponse* response);

  // The keeper of the pipelines' replay policies the replay methods ask
  // (null: none, and they say so). Set before the servers start; not
  // owned.
  void SetReplayKeeper(ReplayKeeper* keeper) { replay_ = keeper; }

  // What ListNodes answers with. `leases`: the LeaseStore of this daemon's
  // group (not owned; must outlive the API), or null for a daemon alone on
  // its data dir's state.db, which answers with itself only. `self`: this
  // replica as it records itself (name, address, version, start).
  // `lease_time`: --lease-seconds; a replica whose last heartbeat is older
  // is not live. May be set once the servers serve (the port it bound
  // names the replica); until then ListNodes answers as a daemon alone
  // with an empty record.
  void SetGroup(LeaseStore* leases, NodeRecord self,
                absl::Duration lease_time) {
    absl::MutexLock lock(&group_mu_);
    leases_ = leases;
    self_ = std::move(self);
    lease_time_ = lease_time;
  }

 private:
  // The job a submit or a change of state answers with: whole (FULL) when
  // it fits in max_page_bytes_, else in the BASIC view (Backfill.view says
  // which), so that the answer to a call that did change something never
  // fails for its size. GetBackfill and ListPartitions read the lists.
  v1::Backfill Answer(const Job& job) const;

  // Cancel, pause, resume, retry: `decide` (a BackfillManager method taking
  // the id, the reason and the actor) on a checked id.
  absl::Status Decide(absl::StatusOr<Job> (BackfillManager::*decide)(
                          const std::string&, const std::string&,
                          const std::string&),
                      const std::string& id, const std::string& reason,
                      const Caller& caller, v1::Backfill* response);

  // `dataset`'s policy as the replay methods answer with it.
  absl::Status AnswerPolicy(const std::string& dataset,
                            v1::ReplayPolicy* response);

  BackfillManager* const manager_;
  ReplayKeeper* replay_ = nullptr;
  mutable absl::Mutex group_mu_;
  LeaseStore* leases_ ABSL_GUARDED_BY(group_mu_) = nullptr;
  NodeRecord self_ ABSL_GUARDED_BY(group_mu_);
  absl::Duration lease_time_ ABSL_GUARDED_BY(group_mu_) = absl::Seconds(10);
  const absl::Duration watch_poll_;
  const size_t max_page_bytes_;
  // ServiceLimits::max_plan_answer_bytes.
  const size_t max_plan_answer_bytes_;
  // ServiceLimits::watch_min_interval.
  const absl::Duration watch_min_interval_;
  std::atomic<bool> shutting_down_{false};
  // Open watches per caller ("principal:NAME" or "peer:HOST").
  StreamSlots watch_slots_;
};

}  // namespace backfill

#endif  // BACKFILL_SERVER_BACKFILL_API_H_
