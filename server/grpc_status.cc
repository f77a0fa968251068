#include "server/grpc_status.h"

#include "core/error_details.h"
#include "google/rpc/error_details.pb.h"

namespace backfill {

google::rpc::Status ToRpcStatus(const absl::Status& status) {
  google::rpc::Status rpc;
  rpc.set_code(static_cast<int>(status.code()));
  rpc.set_message(std::string(status.message()));
  if (status.ok()) return rpc;
  const ErrorDetails details = DetailsOf(status);
  google::rpc::ErrorInfo info;
  info.set_reason(details.reason.empty()
                      ? absl::StatusCodeToString(status.code())
                      : details.reason);
  info.set_domain(kErrorDomain);
  for (const auto& [key, value] : details.metadata) {
    (*info.mutable_metadata())[key] = value;
  }
  rpc.add_details()->PackFrom(info);
  if (!details.field_violations.empty()) {
    google::rpc::BadRequest bad_request;
    for (const FieldViolation& violation : details.field_violations) {
      google::rpc::BadRequest::FieldViolation* v =
          bad_request.add_field_violations();
      v->set_field(violation.field);
      v->set_description(violation.description);
    }
    rpc.add_details()->PackFrom(bad_request);
  }
  return rpc;
}

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  // absl::StatusCode and grpc::StatusCode share the canonical numbering.
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      std::string(status.message()),
                      ToRpcStatus(status).SerializeAsString());
}

}  // namespace backfill
