// BackfillServiceImpl: the gRPC handlers of backfill.v1.BackfillService.
//
// Thin by design: each handler checks wire-level input (empty or malformed
// ids, page sizes, unspecified enum values) with INVALID_ARGUMENT, calls the
// BackfillManager, encodes the answer (server/proto_convert.h) and maps the
// absl::Status to a grpc::Status. No SQL, no business rules, no locks.
//
// Every method receives its request as bytes and parses it itself
// (server/raw_request.h), so that a request protobuf refuses, such as one
// with a text field that is not UTF-8, is INVALID_ARGUMENT naming the field
// rather than gRPC's bare INTERNAL. The constructor registers that for every
// method of backfill.v1.BackfillService and aborts if one is missing; the
// handlers below only ever see parsed requests.
//
// Does not own the manager, the replay keeper or the lease store, which must
// outlive the gRPC server this service is registered on. Thread-safe: gRPC
// calls the handlers concurrently; the only state is an atomic "shutting
// down" flag and the count of open WatchBackfill streams per caller
// (server/stream_slots.h), besides what the setters set before the server
// starts.

#ifndef BACKFILL_SERVER_BACKFILL_SERVICE_IMPL_H_
#define BACKFILL_SERVER_BACKFILL_SERVICE_IMPL_H_

#include <atomic>
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "backfill/v1/backfill.grpc.pb.h"
#include "core/ports/lease_store.h"
#include "core/run/backfill_manager.h"
#include "core/run/replay_keeper.h"
#include "server/access_policy.h"
#include "server/call_auth.h"
#include "server/listing_convert.h"
#include "server/raw_request.h"
#include "server/stream_slots.h"

namespace backfill {

// DiffBackfill: partitions per page and sample rows per partition.
inline constexpr int kDefaultDiffPageSize = 100;
inline constexpr int kMaxDiffPageSize = 1000;
inline constexpr int kDefaultDiffSamples = 3;

// WatchBackfill streams one caller may have open at once, by default.
inline constexpr int64_t kDefaultMaxWatchStreamsPerCaller = 16;

// The per-caller limits the service enforces, each refused with
// RESOURCE_EXHAUSTED naming the limit, its value and the backfilld flag
// that sets it.
struct ServiceLimits {
  // Concurrent WatchBackfill streams per caller: the authenticated
  // principal, else the peer's host (--max-watch-streams-per-principal).
  int64_t max_watch_streams_per_caller = kDefaultMaxWatchStreamsPerCaller;
};

// The host of a gRPC peer string: "10.0.0.7" of "ipv4:10.0.0.7:5123",
// "::1" of "ipv6:[::1]:5123"; the whole string for any other form.
std::string PeerHost(std::string_view peer);

class BackfillServiceImpl final : public v1::BackfillService::Service {
 public:
  // `max_page_bytes`: how many bytes of jobs or partitions a page of
  // ListBackfills or ListPartitions holds at most (server/listing_convert.h),
  // and the most a whole job in the answer to a submit or a change of state
  // may take before it is answered in the BASIC view.
  // `auth`: who may call what (server/call_auth.h), asked before each
  // call's request is parsed; null or disabled: every call may, and records
  // the name the client gives. Not owned; must outlive the service.
  explicit BackfillServiceImpl(BackfillManager* manager,
                               absl::Duration watch_poll = absl::Seconds(1),
                               size_t max_page_bytes = kMaxListPageBytes,
                               const CallAuth* auth = nullptr,
                               const ServiceLimits& limits = {});

  // Makes open WatchBackfill streams end (UNAVAILABLE, "shutting down")
  // within one poll interval, so that the server can shut down promptly,
  // and refuses new submits (UNAVAILABLE); clients reconnect elsewhere or
  // later. Idempotent.
  void BeginShutdown() { shutting_down_.store(true); }

  grpc::Status PlanBackfill(grpc::ServerContext* context,
                            const v1::PlanBackfillRequest* request,
                            v1::PlanBackfillResponse* response) override;
  grpc::Status SubmitBackfill(grpc::ServerContext* context,
                              const v1::SubmitBackfillRequest* request,
                              v1::SubmitBackfillResponse* response) override;
  grpc::Status GetBackfill(grpc::ServerContext* context,
                           const v1::GetBackfillRequest* request,
                           v1::Backfill* response) override;
  grpc::Status ListBackfills(grpc::ServerContext* context,
                             const v1::ListBackfillsRequest* request,
                             v1::ListBackfillsResponse* response) override;
  grpc::Status CancelBackfill(grpc::ServerContext* context,
                              const v1::CancelBackfillRequest* request,
                              v1::Backfill* response) override;
  grpc::Status PauseBackfill(grpc::ServerContext* context,
                             const v1::PauseBackfillRequest* request,
                             v1::Backfill* response) override;
  grpc::Status ResumeBackfill(grpc::ServerContext* context,
                              const v1::ResumeBackfillRequest* request,
                              v1::Backfill* response) override;
  grpc::Status RetryBackfill(grpc::ServerContext* context,
                             const v1::RetryBackfillRequest* request,
                             v1::Backfill* response) override;
  grpc::Status RollbackBackfill(grpc::ServerContext* context,
                                const v1::RollbackBackfillRequest* request,
                                v1::Backfill* response) override;
  grpc::Status ListDatasets(grpc::ServerContext* context,
                            const v1::ListDatasetsRequest* request,
                            v1::ListDatasetsResponse* response) override;
  grpc::Status GetDataset(grpc::ServerContext* context,
                          const v1::GetDatasetRequest* request,
                          v1::Dataset* response) override;
  grpc::Status ApproveBackfill(grpc::ServerContext* context,
                               const v1::ApproveBackfillRequest* request,
                               v1::Backfill* response) override;
  grpc::Status DiffBackfill(grpc::ServerContext* context,
                            const v1::DiffBackfillRequest* request,
                            v1::DiffBackfillResponse* response) override;
  grpc::Status ExplainPartition(
      grpc::ServerContext* context, const v1::ExplainPartitionRequest* request,
      v1::ExplainPartitionResponse* response) override;
  grpc::Status ListAuditEvents(grpc::ServerContext* context,
                               const v1::ListAuditEventsRequest* request,
                               v1::ListAuditEventsResponse* response) override;
  grpc::Status ConfirmBackfill(grpc::ServerContext* context,
                               const v1::ConfirmBackfillRequest* request,
                               v1::Backfill* response) override;
  grpc::Status ListPartitions(grpc::ServerContext* context,
                              const v1::ListPartitionsRequest* request,
                              v1::ListPartitionsResponse* response) override;
  grpc::Status ListReplayPolicies(
      grpc::ServerContext* context,
      const v1::ListReplayPoliciesRequest* request,
      v1::ListReplayPoliciesResponse* response) override;
  grpc::Status EvaluateReplayPolicy(
      grpc::ServerContext* context,
      const v1::EvaluateReplayPolicyRequest* request,
      v1::ReplayEvaluation* response) override;
  grpc::Status PauseReplayPolicy(grpc::ServerContext* context,
                                 const v1::PauseReplayPolicyRequest* request,
                                 v1::ReplayPolicy* response) override;
  grpc::Status ResumeReplayPolicy(grpc::ServerContext* context,
                                  const v1::ResumeReplayPolicyRequest* request,
                                  v1::ReplayPolicy* response) override;
  grpc::Status ListNodes(grpc::ServerContext* context,
                         const v1::ListNodesRequest* request,
                         v1::ListNodesResponse* response) override;

  // The keeper of the pipelines' replay policies the replay methods ask
  // (null: none, and they say so). Set before the server starts; not owned.
  void SetReplayKeeper(ReplayKeeper* keeper) { replay_ = keeper; }

  // What ListNodes answers with. `leases`: the LeaseStore of this daemon's
  // group (not owned; must outlive the service), or null for a daemon
  // alone on its data dir's state.db, which answers with itself only.
  // `self`: this replica as it records itself (name, address, version,
  // start). `lease_time`: --lease-seconds; a replica whose last heartbeat
  // is older is not live. May be set once the server serves (the port
  // it bound names the replica); until then ListNodes answers as a daemon
  // alone with an empty record.
  void SetGroup(LeaseStore* leases, NodeRecord self,
                absl::Duration lease_time) {
    absl::MutexLock lock(&group_mu_);
    leases_ = leases;
    self_ = std::move(self);
    lease_time_ = lease_time;
  }

 private:
  // Registers the handlers of server/raw_request.h for every method.
  void ReceiveRequestsAsBytes();

  // What the handler of `method` asks before reading a request.
  CallGate GateFor(std::string_view method) const;

  // The authenticated principal of an admitted call; nullopt with
  // authentication off.
  std::optional<Principal> CallerOf(const grpc::ServerContext& context) const;
  // The caller's name for the audit log: the principal's, "" with
  // authentication off.
  std::string ActorOf(const grpc::ServerContext& context) const;

  // The job a submit or a change of state answers with: whole (FULL) when
  // it fits in max_page_bytes_, else in the BASIC view (Backfill.view says
  // which), so that the answer to a call that did change something never
  // fails for its size. GetBackfill and ListPartitions read the lists.
  v1::Backfill Answer(const Job& job) const;

  // `dataset`'s policy as the replay methods answer with it.
  grpc::Status AnswerPolicy(const std::string& dataset,
                            v1::ReplayPolicy* response);

  // WatchBackfill: sends the job with `write` whenever it changes, until it
  // is terminal; `write` returns false once the client has gone.
  grpc::Status Watch(grpc::ServerContext* context,
                     const v1::WatchBackfillRequest* request,
                     const std::function<bool(const v1::Backfill&)>& write);

  BackfillManager* const manager_;
  ReplayKeeper* replay_ = nullptr;
  mutable absl::Mutex group_mu_;
  LeaseStore* leases_ ABSL_GUARDED_BY(group_mu_) = nullptr;
  NodeRecord self_ ABSL_GUARDED_BY(group_mu_);
  absl::Duration lease_time_ ABSL_GUARDED_BY(group_mu_) = absl::Seconds(10);
  const absl::Duration watch_poll_;
  const size_t max_page_bytes_;
  const CallAuth* const auth_;
  // Updates of one watch are at least this far apart: changes in between are
  // coalesced into the next update (each update reads and sends the whole
  // job, so a job of many fast partitions must not cost a read per
  // partition). A terminal state is still sent, at most this late.
  const absl::Duration watch_min_interval_ = absl::Milliseconds(100);
  std::atomic<bool> shutting_down_{false};
  // Open WatchBackfill streams per caller ("principal:NAME" or
  // "peer:HOST").
  StreamSlots watch_slots_;
};

}  // namespace backfill

#endif  // BACKFILL_SERVER_BACKFILL_SERVICE_IMPL_H_
