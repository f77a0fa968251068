#include "server/backfill_service_impl.h"

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/access_policy.h"
#include "server/grpc_status.h"

namespace backfill {
namespace {

// A wrong method table is a programming error: say so (on stderr, whatever
// the logger) and stop.
void CheckMethod(bool ok, const std::string& what) {
  if (ok) return;
  std::fprintf(stderr, "BackfillServiceImpl: %s\n", what.c_str());
  std::abort();
}

}  // namespace

BackfillServiceImpl::BackfillServiceImpl(BackfillApi* api, const CallAuth* auth)
    : api_(api), auth_(auth) {
  ReceiveRequestsAsBytes();
}

CallGate BackfillServiceImpl::GateFor(std::string_view method) const {
  if (auth_ == nullptr || !auth_->enabled()) return {};
  return [auth = auth_,
          method = std::string(method)](grpc::ServerContext* context) {
    return auth->Admit(*context, method);
  };
}

Caller BackfillServiceImpl::CallerOf(grpc::ServerContext* context) const {
  Caller caller;
  if (auth_ != nullptr) {
    // Admit() authenticated the call already; this repeats one hash.
    absl::StatusOr<std::optional<Principal>> who =
        auth_->Authenticate(*context);
    if (who.ok()) caller.principal = *who;
  }
  caller.peer = context->peer();
  caller.cancelled = [context] { return context->IsCancelled(); };
  return caller;
}

void BackfillServiceImpl::ReceiveRequestsAsBytes() {
  // The generated Service adds its methods in the order of the .proto, so a
  // method's index there is its index in the service's descriptor.
  const google::protobuf::ServiceDescriptor* service =
      v1::PlanBackfillRequest::descriptor()->file()->FindServiceByName(
          "BackfillService");
  CheckMethod(service != nullptr, "no backfill.v1.BackfillService");
  std::vector<bool> registered(service->method_count(), false);
  const auto receive_as_bytes =
      [&](const char* name, const google::protobuf::Descriptor* request_type,
          grpc::internal::MethodHandler* handler) {
        const google::protobuf::MethodDescriptor* method =
            service->FindMethodByName(name);
        CheckMethod(method != nullptr && method->input_type() == request_type,
                    absl::StrCat("no method ", name, " taking ",
                                 request_type->full_name()));
        // Every method has a decision on who may call it, or none but an
        // admin could (server/access_policy.h): say so now, not at a refusal.
        CheckMethod(RequiredRole(name).has_value(),
                    absl::StrCat("method ", name,
                                 " has no role in server/access_policy.cc"));
        MarkMethodStreamed(method->index(), handler);
        registered[method->index()] = true;
      };
  const auto unary = [&](const char* name,
                         const google::protobuf::Descriptor* request_type,
                         auto method) {
    receive_as_bytes(name, request_type,
                     NewUnaryHandler(this, method, GateFor(name)));
  };
  const auto streaming = [&](const char* name,
                             const google::protobuf::Descriptor* request_type,
                             auto method) {
    receive_as_bytes(name, request_type,
                     NewServerStreamingHandler(this, method, GateFor(name)));
  };
  unary("PlanBackfill", v1::PlanBackfillRequest::descriptor(),
        &BackfillServiceImpl::PlanBackfill);
  unary("SubmitBackfill", v1::SubmitBackfillRequest::descriptor(),
        &BackfillServiceImpl::SubmitBackfill);
  unary("GetBackfill", v1::GetBackfillRequest::descriptor(),
        &BackfillServiceImpl::GetBackfill);
  unary("ListBackfills", v1::ListBackfillsRequest::descriptor(),
        &BackfillServiceImpl::ListBackfills);
  streaming("WatchBackfill", v1::WatchBackfillRequest::descriptor(),
            &BackfillServiceImpl::Watch);
  unary("CancelBackfill", v1::CancelBackfillRequest::descriptor(),
        &BackfillServiceImpl::CancelBackfill);
  unary("PauseBackfill", v1::PauseBackfillRequest::descriptor(),
        &BackfillServiceImpl::PauseBackfill);
  unary("ResumeBackfill", v1::ResumeBackfillRequest::descriptor(),
        &BackfillServiceImpl::ResumeBackfill);
  unary("RetryBackfill", v1::RetryBackfillRequest::descriptor(),
        &BackfillServiceImpl::RetryBackfill);
  unary("RollbackBackfill", v1::RollbackBackfillRequest::descriptor(),
        &BackfillServiceImpl::RollbackBackfill);
  unary("ListDatasets", v1::ListDatasetsRequest::descriptor(),
        &BackfillServiceImpl::ListDatasets);
  unary("GetDataset", v1::GetDatasetRequest::descriptor(),
        &BackfillServiceImpl::GetDataset);
  unary("ListDatasetPartitions", v1::ListDatasetPartitionsRequest::descriptor(),
        &BackfillServiceImpl::ListDatasetPartitions);
  unary("ApproveBackfill", v1::ApproveBackfillRequest::descriptor(),
        &BackfillServiceImpl::ApproveBackfill);
  unary("DiffBackfill", v1::DiffBackfillRequest::descriptor(),
        &BackfillServiceImpl::DiffBackfill);
  unary("ExplainPartition", v1::ExplainPartitionRequest::descriptor(),
        &BackfillServiceImpl::ExplainPartition);
  unary("ListAuditEvents", v1::ListAuditEventsRequest::descriptor(),
        &BackfillServiceImpl::ListAuditEvents);
  unary("ConfirmBackfill", v1::ConfirmBackfillRequest::descriptor(),
        &BackfillServiceImpl::ConfirmBackfill);
  unary("ListPartitions", v1::ListPartitionsRequest::descriptor(),
        &BackfillServiceImpl::ListPartitions);
  unary("ListReplayPolicies", v1::ListReplayPoliciesRequest::descriptor(),
        &BackfillServiceImpl::ListReplayPolicies);
  unary("EvaluateReplayPolicy", v1::EvaluateReplayPolicyRequest::descriptor(),
        &BackfillServiceImpl::EvaluateReplayPolicy);
  unary("PauseReplayPolicy", v1::PauseReplayPolicyRequest::descriptor(),
        &BackfillServiceImpl::PauseReplayPolicy);
  unary("ResumeReplayPolicy", v1::ResumeReplayPolicyRequest::descriptor(),
        &BackfillServiceImpl::ResumeReplayPolicy);
  unary("ListNodes", v1::ListNodesRequest::descriptor(),
        &BackfillServiceImpl::ListNodes);
  std::vector<std::string> missing;
  for (int i = 0; i < service->method_count(); ++i) {
    if (!registered[i]) missing.push_back(service->method(i)->name());
  }
  CheckMethod(missing.empty(), absl::StrCat("gRPC would parse the request of ",
                                            absl::StrJoin(missing, ", "),
                                            ": register every method of "
                                            "backfill.v1.BackfillService in "
                                            "ReceiveRequestsAsBytes()"));
}

grpc::Status BackfillServiceImpl::PlanBackfill(
    grpc::ServerContext* context, const v1::PlanBackfillRequest* request,
    v1::PlanBackfillResponse* response) {
  return ToGrpcStatus(
      api_->PlanBackfill(CallerOf(context), *request, response));
}

grpc::Status BackfillServiceImpl::SubmitBackfill(
    grpc::ServerContext* context, const v1::SubmitBackfillRequest* request,
    v1::SubmitBackfillResponse* response) {
  return ToGrpcStatus(
      api_->SubmitBackfill(CallerOf(context), *request, response));
}

grpc::Status BackfillServiceImpl::GetBackfill(
    grpc::ServerContext* context, const v1::GetBackfillRequest* request,
    v1::Backfill* response) {
  return ToGrpcStatus(api_->GetBackfill(CallerOf(context), *request, response));
}

grpc::Status BackfillServiceImpl::ListBackfills(
    grpc::ServerContext* context, const v1::ListBackfillsRequest* request,
    v1::ListBackfillsResponse* response) {
  return ToGrpcStatus(
      api_->ListBackfills(CallerOf(context), *request, response));
}

grpc::Status BackfillServiceImpl::CancelBackfill(
    grpc::ServerContext* context, const v1::CancelBackfillRequest* request,
    v1::Backfill* response) {
  return ToGrpcStatus(
      api_->CancelBackfill(CallerOf(context), *request, response));
}

grpc::Status BackfillServiceImpl::PauseBackfill(
    grpc::ServerContext* context, const v1::PauseBackfillRequest* request,
    v1::Backfill* response) {
  return ToGrpcStatus(
      api_->PauseBackfill(CallerOf(context), *request, response));
}

grpc::Status BackfillServiceImpl::ResumeBackfill(
    grpc::ServerContext* context, const v1::ResumeBackfillRequest* request,
    v1::Backfill* response) {
  return ToGrpcStatus(
      api_->ResumeBackfill(CallerOf(context), *request, response));
}

grpc::Status BackfillServiceImpl::RetryBackfill(
    grpc::ServerContext* context, const v1::RetryBackfillRequest* request,
    v1::Backfill* response) {
  return ToGrpcStatus(
      api_->RetryBackfill(CallerOf(context), *request, response));
}

grpc::Status BackfillServiceImpl::RollbackBackfill(
    grpc::ServerContext* context, const v1::RollbackBackfillRequest* request,
    v1::Backfill* response) {
  return ToGrpcStatus(
      api_->RollbackBackfill(CallerOf(context), *request, response));
}

grpc::Status BackfillServiceImpl::ListDatasets(
    grpc::ServerContext* context, const v1::ListDatasetsRequest* request,
    v1::ListDatasetsResponse* response) {
  return ToGrpcStatus(
      api_->ListDatasets(CallerOf(context), *request, response));
}

grpc::Status BackfillServiceImpl::GetDataset(
    grpc::ServerContext* context, const v1::GetDatasetRequest* request,
    v1::Dataset* response) {
  return ToGrpcStatus(api_->GetDataset(CallerOf(context), *request, response));
}

grpc::Status BackfillServiceImpl::ListDatasetPartitions(
    grpc::ServerContext* context,
    const v1::ListDatasetPartitionsRequest* request,
    v1::ListDatasetPartitionsResponse* response) {
  return ToGrpcStatus(
      api_->ListDatasetPartitions(CallerOf(context), *request, response));
}

grpc::Status BackfillServiceImpl::ApproveBackfill(
    grpc::ServerContext* context, const v1::ApproveBackfillRequest* request,
    v1::Backfill* response) {
  return ToGrpcStatus(
      api_->ApproveBackfill(CallerOf(context), *request, response));
}

grpc::Status BackfillServiceImpl::DiffBackfill(
    grpc::ServerContext* context, const v1::DiffBackfillRequest* request,
    v1::DiffBackfillResponse* response) {
  return ToGrpcStatus(
      api_->DiffBackfill(CallerOf(context), *request, response));
}

grpc::Status BackfillServiceImpl::ExplainPartition(
    grpc::ServerContext* context, const v1::ExplainPartitionRequest* request,
    v1::ExplainPartitionResponse* response) {
  return ToGrpcStatus(
      api_->ExplainPartition(CallerOf(context), *request, response));
}

grpc::Status BackfillServiceImpl::ListAuditEvents(
    grpc::ServerContext* context, const v1::ListAuditEventsRequest* request,
    v1::ListAuditEventsResponse* response) {
  return ToGrpcStatus(
      api_->ListAuditEvents(CallerOf(context), *request, response));
}

grpc::Status BackfillServiceImpl::ConfirmBackfill(
    grpc::ServerContext* context, const v1::ConfirmBackfillRequest* request,
    v1::Backfill* response) {
  return ToGrpcStatus(
      api_->ConfirmBackfill(CallerOf(context), *request, response));
}

grpc::Status BackfillServiceImpl::ListPartitions(
    grpc::ServerContext* context, const v1::ListPartitionsRequest* request,
    v1::ListPartitionsResponse* response) {
  return ToGrpcStatus(
      api_->ListPartitions(CallerOf(context), *request, response));
}

grpc::Status BackfillServiceImpl::ListReplayPolicies(
    grpc::ServerContext* context, const v1::ListReplayPoliciesRequest* request,
    v1::ListReplayPoliciesResponse* response) {
  return ToGrpcStatus(
      api_->ListReplayPolicies(CallerOf(context), *request, response));
}

grpc::Status BackfillServiceImpl::EvaluateReplayPolicy(
    grpc::ServerContext* context,
    const v1::EvaluateReplayPolicyRequest* request,
    v1::ReplayEvaluation* response) {
  return ToGrpcStatus(
      api_->EvaluateReplayPolicy(CallerOf(context), *request, response));
}

grpc::Status BackfillServiceImpl::PauseReplayPolicy(
    grpc::ServerContext* context, const v1::PauseReplayPolicyRequest* request,
    v1::ReplayPolicy* response) {
  return ToGrpcStatus(
      api_->PauseReplayPolicy(CallerOf(context), *request, response));
}

grpc::Status BackfillServiceImpl::ResumeReplayPolicy(
    grpc::ServerContext* context, const v1::ResumeReplayPolicyRequest* request,
    v1::ReplayPolicy* response) {
  return ToGrpcStatus(
      api_->ResumeReplayPolicy(CallerOf(context), *request, response));
}

grpc::Status BackfillServiceImpl::ListNodes(grpc::ServerContext* context,
                                            const v1::ListNodesRequest* request,
                                            v1::ListNodesResponse* response) {
  return ToGrpcStatus(api_->ListNodes(CallerOf(context), *request, response));
}

grpc::Status BackfillServiceImpl::Watch(
    grpc::ServerContext* context, const v1::WatchBackfillRequest* request,
    const std::function<bool(const v1::Backfill&)>& write) {
  return ToGrpcStatus(api_->WatchBackfill(CallerOf(context), *request, write));
}

}  // namespace backfill
