#include "client/rpc_error.h"

#include "absl/strings/cord.h"
#include "google/rpc/error_details.pb.h"

namespace backfill {

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  absl::Status out(static_cast<absl::StatusCode>(status.error_code()),
                   status.error_message());
  if (!status.error_details().empty()) {
    out.SetPayload(kRpcStatusPayloadUrl, absl::Cord(status.error_details()));
  }
  return out;
}

std::optional<google::rpc::Status> RpcStatusOf(const absl::Status& status) {
  auto bytes = status.GetPayload(kRpcStatusPayloadUrl);
  if (!bytes.has_value()) return std::nullopt;
  google::rpc::Status rpc;
  if (!rpc.ParseFromString(std::string(*bytes))) return std::nullopt;
  return rpc;
}

RpcErrorInfo ErrorInfoOf(const absl::Status& status) {
  RpcErrorInfo out;
  std::optional<google::rpc::Status> rpc = RpcStatusOf(status);
  if (!rpc.has_value()) return out;
  for (const google::protobuf::Any& detail : rpc->details()) {
    google::rpc::ErrorInfo info;
    if (!detail.UnpackTo(&info)) continue;
    out.reason = info.reason();
    out.domain = info.domain();
    out.metadata.insert(info.metadata().begin(), info.metadata().end());
    break;
  }
  return out;
}

std::vector<RpcFieldViolation> FieldViolationsOf(const absl::Status& status) {
  std::vector<RpcFieldViolation> out;
  std::optional<google::rpc::Status> rpc = RpcStatusOf(status);
  if (!rpc.has_value()) return out;
  for (const google::protobuf::Any& detail : rpc->details()) {
    google::rpc::BadRequest bad_request;
    if (!detail.UnpackTo(&bad_request)) continue;
    for (const auto& violation : bad_request.field_violations()) {
      out.push_back({violation.field(), violation.description()});
    }
  }
  return out;
}

}  // namespace backfill
