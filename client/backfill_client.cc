#include "client/backfill_client.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"

namespace backfill {
namespace {

// A deadline `timeout` from now, as gRPC wants it.
std::chrono::system_clock::time_point DeadlineAfter(absl::Duration timeout) {
  return std::chrono::system_clock::now() + absl::ToChronoMilliseconds(timeout);
}

}  // namespace

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      status.error_message());
}

std::unique_ptr<BackfillClient> BackfillClient::Connect(
    const std::string& target) {
  return std::make_unique<BackfillClient>(
      grpc::CreateChannel(target, grpc::InsecureChannelCredentials()));
}

BackfillClient::BackfillClient(std::shared_ptr<grpc::Channel> channel)
    : channel_(std::move(channel)),
      stub_(v1::BackfillService::NewStub(channel_)) {}

absl::Status BackfillClient::WaitForReady(absl::Duration timeout) {
  if (channel_->WaitForConnected(DeadlineAfter(timeout))) {
    return absl::OkStatus();
  }
  return absl::UnavailableError(
      absl::StrCat("channel not ready after ", absl::FormatDuration(timeout)));
}

void BackfillClient::SetDeadline(grpc::ClientContext* context) const {
  if (rpc_timeout_ == absl::InfiniteDuration()) return;
  context->set_deadline(DeadlineAfter(rpc_timeout_));
}

absl::StatusOr<v1::PlanBackfillResponse> BackfillClient::Plan(
    const v1::BackfillRequest& request) {
  grpc::ClientContext context;
  SetDeadline(&context);
  v1::PlanBackfillRequest rpc_request;
  *rpc_request.mutable_request() = request;
  v1::PlanBackfillResponse response;
  grpc::Status status = stub_->PlanBackfill(&context, rpc_request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response;
}

absl::StatusOr<v1::SubmitBackfillResponse> BackfillClient::Submit(
    const v1::BackfillRequest& request, const std::string& idempotency_key) {
  grpc::ClientContext context;
  SetDeadline(&context);
  v1::SubmitBackfillRequest rpc_request;
  *rpc_request.mutable_request() = request;
  rpc_request.set_idempotency_key(idempotency_key);
  v1::SubmitBackfillResponse response;
  grpc::Status status = stub_->SubmitBackfill(&context, rpc_request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response;
}

absl::StatusOr<v1::Backfill> BackfillClient::Get(const std::string& id) {
  grpc::ClientContext context;
  SetDeadline(&context);
  v1::GetBackfillRequest rpc_request;
  rpc_request.set_id(id);
  v1::Backfill response;
  grpc::Status status = stub_->GetBackfill(&context, rpc_request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response;
}

absl::StatusOr<v1::ListBackfillsResponse> BackfillClient::List(
    const v1::ListBackfillsRequest& request) {
  grpc::ClientContext context;
  SetDeadline(&context);
  v1::ListBackfillsResponse response;
  grpc::Status status = stub_->ListBackfills(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response;
}

absl::StatusOr<v1::Backfill> BackfillClient::Cancel(const std::string& id,
                                                    const std::string& reason) {
  grpc::ClientContext context;
  SetDeadline(&context);
  v1::CancelBackfillRequest rpc_request;
  rpc_request.set_id(id);
  rpc_request.set_reason(reason);
  v1::Backfill response;
  grpc::Status status = stub_->CancelBackfill(&context, rpc_request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response;
}

absl::StatusOr<v1::ListDatasetsResponse> BackfillClient::ListDatasets() {
  grpc::ClientContext context;
  SetDeadline(&context);
  v1::ListDatasetsResponse response;
  grpc::Status status =
      stub_->ListDatasets(&context, v1::ListDatasetsRequest(), &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response;
}

absl::Status BackfillClient::Watch(
    const std::string& id,
    const std::function<bool(const v1::Backfill&)>& on_update) {
  // No deadline: a job may run for hours. The caller stops the stream by
  // returning false from `on_update`.
  grpc::ClientContext context;
  v1::WatchBackfillRequest rpc_request;
  rpc_request.set_id(id);
  std::unique_ptr<grpc::ClientReader<v1::Backfill>> reader =
      stub_->WatchBackfill(&context, rpc_request);
  v1::Backfill update;
  bool stopped = false;
  while (reader->Read(&update)) {
    if (!on_update(update)) {
      stopped = true;
      context.TryCancel();
      break;
    }
  }
  if (stopped) {
    // Drain whatever is in flight so Finish() does not block, then ignore
    // the CANCELLED status our own cancellation produces.
    while (reader->Read(&update)) {
    }
    (void)reader->Finish();
    return absl::OkStatus();
  }
  return FromGrpcStatus(reader->Finish());
}

}  // namespace backfill
