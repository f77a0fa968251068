#include "client/backfill_client.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <utility>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "grpc/health/v1/health.grpc.pb.h"

namespace backfill {
namespace {

// A deadline `timeout` from now, as gRPC wants it.
std::chrono::system_clock::time_point DeadlineAfter(absl::Duration timeout) {
  return std::chrono::system_clock::now() + absl::ToChronoMilliseconds(timeout);
}

}  // namespace

bool IsRetryableSubmitError(const absl::Status& status) {
  return status.code() == absl::StatusCode::kUnavailable ||
         status.code() == absl::StatusCode::kDeadlineExceeded;
}

absl::StatusOr<v1::SubmitBackfillResponse> SubmitWithRetries(
    const v1::SubmitBackfillRequest& request, const SubmitRetryOptions& options,
    const SubmitFunction& submit) {
  if (request.idempotency_key().empty()) {
    return absl::InvalidArgumentError(
        "a submit is retried only with an idempotency key: without one, an "
        "attempt whose answer was lost and its retry would make two jobs");
  }
  const int max_attempts = std::max(options.max_attempts, 1);
  absl::Duration backoff = options.initial_backoff;
  for (int attempt = 1;; ++attempt) {
    absl::StatusOr<v1::SubmitBackfillResponse> response = submit(request);
    if (response.ok() || !IsRetryableSubmitError(response.status()) ||
        attempt >= max_attempts) {
      return response;
    }
    const absl::Duration wait = std::min(backoff, options.max_backoff);
    if (options.on_retry) {
      SubmitRetry retry;
      retry.attempt = attempt;
      retry.max_attempts = max_attempts;
      retry.status = response.status();
      retry.backoff = wait;
      retry.idempotency_key = request.idempotency_key();
      options.on_retry(retry);
    }
    if (options.sleep) {
      options.sleep(wait);
    } else {
      absl::SleepFor(wait);
    }
    backoff = std::min(backoff * 2, options.max_backoff);
  }
}

std::string NewRandomUuid() {
  // A generator per call, since absl::BitGen is not thread-safe; each is
  // seeded from absl's process-wide pool, itself seeded from the operating
  // system's entropy.
  absl::BitGen bits;
  uint64_t high = absl::Uniform<uint64_t>(bits);
  uint64_t low = absl::Uniform<uint64_t>(bits);
  high = (high & ~uint64_t{0xf000}) | uint64_t{0x4000};          // version 4
  low = (low & ~(uint64_t{0xc} << 60)) | (uint64_t{0x8} << 60);  // variant 10
  return absl::StrFormat("%08x-%04x-%04x-%04x-%012x", high >> 32,
                         (high >> 16) & 0xffff, high & 0xffff, low >> 48,
                         low & uint64_t{0xffffffffffff});
}

std::unique_ptr<BackfillClient> BackfillClient::Connect(
    const std::string& target, const ChannelSecurity& security) {
  std::shared_ptr<grpc::ChannelCredentials> credentials =
      grpc::InsecureChannelCredentials();
  if (security.tls) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = security.ca;
    ssl.pem_cert_chain = security.cert;
    ssl.pem_private_key = security.key;
    credentials = grpc::SslCredentials(ssl);
  }
  return std::make_unique<BackfillClient>(
      grpc::CreateChannel(target, credentials));
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

void BackfillClient::AddCredentials(grpc::ClientContext* context) const {
  if (!token_.empty()) {
    context->AddMetadata("authorization", absl::StrCat("Bearer ", token_));
  }
}

absl::StatusOr<bool> BackfillClient::CheckHealth(const std::string& service) {
  std::unique_ptr<grpc::health::v1::Health::Stub> stub =
      grpc::health::v1::Health::NewStub(channel_);
  grpc::ClientContext context;
  SetDeadline(&context);
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  grpc::health::v1::HealthCheckResponse response;
  grpc::Status status = stub->Check(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  switch (response.status()) {
    case grpc::health::v1::HealthCheckResponse::SERVING:
      return true;
    case grpc::health::v1::HealthCheckResponse::NOT_SERVING:
      return false;
    default:
      return absl::UnknownError(absl::StrCat(
          "health status ",
          grpc::health::v1::HealthCheckResponse::ServingStatus_Name(
              response.status()),
          " for service \"", service, "\""));
  }
}

template <typename Request, typename Response>
absl::StatusOr<Response> BackfillClient::Call(
    UnaryMethod<Request, Response> method, const Request& request) {
  grpc::ClientContext context;
  SetDeadline(&context);
  AddCredentials(&context);
  Response response;
  grpc::Status status = (stub_.get()->*method)(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response;
}

absl::StatusOr<v1::PlanBackfillResponse> BackfillClient::Plan(
    const v1::BackfillRequest& request) {
  v1::PlanBackfillRequest rpc_request;
  *rpc_request.mutable_request() = request;
  return Call(&Stub::PlanBackfill, rpc_request);
}

absl::StatusOr<v1::SubmitBackfillResponse> BackfillClient::Submit(
    const v1::SubmitBackfillRequest& request) {
  return Call(&Stub::SubmitBackfill, request);
}

absl::StatusOr<v1::SubmitBackfillResponse> BackfillClient::Submit(
    const v1::BackfillRequest& request, const std::string& idempotency_key) {
  v1::SubmitBackfillRequest rpc_request;
  *rpc_request.mutable_request() = request;
  rpc_request.set_idempotency_key(idempotency_key);
  return Submit(rpc_request);
}

absl::StatusOr<v1::SubmitBackfillResponse> BackfillClient::SubmitWithRetries(
    const v1::SubmitBackfillRequest& request,
    const SubmitRetryOptions& options) {
  return backfill::SubmitWithRetries(
      request, options, [this](const v1::SubmitBackfillRequest& attempt) {
        return Submit(attempt);
      });
}

absl::StatusOr<v1::Backfill> BackfillClient::Get(const std::string& id,
                                                 v1::BackfillView view) {
  v1::GetBackfillRequest rpc_request;
  rpc_request.set_id(id);
  rpc_request.set_view(view);
  return Call(&Stub::GetBackfill, rpc_request);
}

absl::StatusOr<v1::ListBackfillsResponse> BackfillClient::List(
    const v1::ListBackfillsRequest& request) {
  return Call(&Stub::ListBackfills, request);
}

absl::StatusOr<v1::ListPartitionsResponse> BackfillClient::ListPartitions(
    const v1::ListPartitionsRequest& request) {
  return Call(&Stub::ListPartitions, request);
}

absl::StatusOr<v1::ListDatasetsResponse> BackfillClient::ListDatasets() {
  return Call(&Stub::ListDatasets, v1::ListDatasetsRequest());
}

absl::StatusOr<v1::ListDatasetPartitionsResponse>
BackfillClient::ListDatasetPartitions(
    const v1::ListDatasetPartitionsRequest& request) {
  return Call(&Stub::ListDatasetPartitions, request);
}

absl::StatusOr<v1::Dataset> BackfillClient::GetDataset(
    const std::string& name) {
  v1::GetDatasetRequest request;
  request.set_name(name);
  return Call(&Stub::GetDataset, request);
}

absl::StatusOr<v1::Backfill> BackfillClient::Cancel(const std::string& id,
                                                    const std::string& reason) {
  v1::CancelBackfillRequest rpc_request;
  rpc_request.set_id(id);
  rpc_request.set_reason(reason);
  return Call(&Stub::CancelBackfill, rpc_request);
}

absl::StatusOr<v1::Backfill> BackfillClient::Pause(const std::string& id,
                                                   const std::string& reason) {
  v1::PauseBackfillRequest rpc_request;
  rpc_request.set_id(id);
  rpc_request.set_reason(reason);
  return Call(&Stub::PauseBackfill, rpc_request);
}

absl::StatusOr<v1::Backfill> BackfillClient::Resume(const std::string& id,
                                                    const std::string& reason) {
  v1::ResumeBackfillRequest rpc_request;
  rpc_request.set_id(id);
  rpc_request.set_reason(reason);
  return Call(&Stub::ResumeBackfill, rpc_request);
}

absl::StatusOr<v1::Backfill> BackfillClient::Retry(const std::string& id,
                                                   const std::string& reason) {
  v1::RetryBackfillRequest rpc_request;
  rpc_request.set_id(id);
  rpc_request.set_reason(reason);
  return Call(&Stub::RetryBackfill, rpc_request);
}

absl::StatusOr<v1::Backfill> BackfillClient::Rollback(
    const v1::RollbackBackfillRequest& request) {
  return Call(&Stub::RollbackBackfill, request);
}

absl::StatusOr<v1::Backfill> BackfillClient::Confirm(
    const std::string& id, const std::string& reason) {
  v1::ConfirmBackfillRequest request;
  request.set_id(id);
  request.set_reason(reason);
  return Call(&Stub::ConfirmBackfill, request);
}

absl::StatusOr<v1::Backfill> BackfillClient::Approve(
    const v1::ApproveBackfillRequest& request) {
  return Call(&Stub::ApproveBackfill, request);
}

absl::StatusOr<v1::DiffBackfillResponse> BackfillClient::Diff(
    const v1::DiffBackfillRequest& request) {
  return Call(&Stub::DiffBackfill, request);
}

absl::StatusOr<v1::ExplainPartitionResponse> BackfillClient::ExplainPartition(
    const std::string& dataset, const std::string& partition) {
  v1::ExplainPartitionRequest request;
  request.set_dataset(dataset);
  request.set_partition(partition);
  return Call(&Stub::ExplainPartition, request);
}

absl::StatusOr<v1::ListAuditEventsResponse> BackfillClient::ListAuditEvents(
    const v1::ListAuditEventsRequest& request) {
  return Call(&Stub::ListAuditEvents, request);
}

absl::StatusOr<v1::ListReplayPoliciesResponse>
BackfillClient::ListReplayPolicies() {
  return Call(&Stub::ListReplayPolicies, v1::ListReplayPoliciesRequest());
}

absl::StatusOr<v1::ListNodesResponse> BackfillClient::ListNodes() {
  return Call(&Stub::ListNodes, v1::ListNodesRequest());
}

absl::StatusOr<v1::ReplayEvaluation> BackfillClient::EvaluateReplayPolicy(
    const std::string& dataset, bool submit) {
  v1::EvaluateReplayPolicyRequest request;
  request.set_dataset(dataset);
  request.set_submit(submit);
  return Call(&Stub::EvaluateReplayPolicy, request);
}

absl::StatusOr<v1::ReplayPolicy> BackfillClient::PauseReplayPolicy(
    const std::string& dataset, const std::string& reason,
    const std::string& requested_by) {
  v1::PauseReplayPolicyRequest request;
  request.set_dataset(dataset);
  request.set_reason(reason);
  request.set_requested_by(requested_by);
  return Call(&Stub::PauseReplayPolicy, request);
}

absl::StatusOr<v1::ReplayPolicy> BackfillClient::ResumeReplayPolicy(
    const std::string& dataset, const std::string& requested_by,
    const std::string& reason) {
  v1::ResumeReplayPolicyRequest request;
  request.set_dataset(dataset);
  request.set_requested_by(requested_by);
  request.set_reason(reason);
  return Call(&Stub::ResumeReplayPolicy, request);
}

absl::Status BackfillClient::Watch(
    const std::string& id,
    const std::function<bool(const v1::Backfill&)>& on_update,
    v1::BackfillView view) {
  // No deadline: a job may run for hours. The caller stops the stream by
  // returning false from `on_update`.
  grpc::ClientContext context;
  AddCredentials(&context);
  v1::WatchBackfillRequest rpc_request;
  rpc_request.set_id(id);
  rpc_request.set_view(view);
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
