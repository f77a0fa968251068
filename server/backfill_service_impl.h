// BackfillServiceImpl: the gRPC handlers of backfill.v1.BackfillService.
//
// Thin by design: each handler takes its caller from the call (the
// principal CallAuth authenticated, the peer, whether the client went
// away), calls the method of the same name of BackfillApi
// (server/backfill_api.h), which the HTTP/JSON handlers call too, and maps
// its absl::Status to a grpc::Status (server/grpc_status.h).
//
// Every method receives its request as bytes and parses it itself
// (server/raw_request.h), so that a request protobuf refuses, such as one
// with a text field that is not UTF-8, is INVALID_ARGUMENT naming the field
// rather than gRPC's bare INTERNAL; and CallAuth admits the call before
// its request is parsed. The constructor registers that for every method
// of backfill.v1.BackfillService and aborts if one is missing, or if a
// method has no role in server/access_policy.cc.
//
// Does not own the API or the authorization, which must outlive the gRPC
// server this service is registered on. Thread-safe: gRPC calls the
// handlers concurrently, and they keep no state.

#ifndef BACKFILL_SERVER_BACKFILL_SERVICE_IMPL_H_
#define BACKFILL_SERVER_BACKFILL_SERVICE_IMPL_H_

#include <string_view>

#include "backfill/v1/backfill.grpc.pb.h"
#include "server/backfill_api.h"
#include "server/call_auth.h"
#include "server/raw_request.h"

namespace backfill {

class BackfillServiceImpl final : public v1::BackfillService::Service {
 public:
  // `auth`: who may call what (server/call_auth.h), asked before each
  // call's request is parsed; null or disabled: every call may, and records
  // the name the client gives. Neither is owned.
  explicit BackfillServiceImpl(BackfillApi* api,
                               const CallAuth* auth = nullptr);

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
  grpc::Status ListDatasetPartitions(
      grpc::ServerContext* context,
      const v1::ListDatasetPartitionsRequest* request,
      v1::ListDatasetPartitionsResponse* response) override;
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

 private:
  // Registers the handlers of server/raw_request.h for every method.
  void ReceiveRequestsAsBytes();

  // What the handler of `method` asks before reading a request.
  CallGate GateFor(std::string_view method) const;

  // The caller of an admitted call.
  Caller CallerOf(grpc::ServerContext* context) const;

  // WatchBackfill, as server/raw_request.h streams it.
  grpc::Status Watch(grpc::ServerContext* context,
                     const v1::WatchBackfillRequest* request,
                     const std::function<bool(const v1::Backfill&)>& write);

  BackfillApi* const api_;
  const CallAuth* const auth_;
};

}  // namespace backfill

#endif  // BACKFILL_SERVER_BACKFILL_SERVICE_IMPL_H_
