#include "server/grpc_status.h"

#include <iterator>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/base/error_details.h"
#include "google/rpc/error_details.pb.h"

namespace backfill {
namespace {

// `text` cut to `max_bytes` (at a character boundary) with "..." when it is
// longer.
std::string CutText(const std::string& text, size_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  return absl::StrCat(Utf8Prefix(text, max_bytes), "...");
}

// The message cut to `max_bytes`, saying that it was and how long it is.
std::string CutMessage(const std::string& message, size_t max_bytes) {
  if (message.size() <= max_bytes) return message;
  return absl::StrCat(Utf8Prefix(message, max_bytes),
                      "... (cut: ", message.size(), " bytes in all)");
}

google::rpc::Status Encode(absl::StatusCode code, const std::string& message,
                           const ErrorDetails& details) {
  google::rpc::Status rpc;
  rpc.set_code(static_cast<int>(code));
  rpc.set_message(message);
  google::rpc::ErrorInfo info;
  info.set_reason(details.reason.empty() ? absl::StatusCodeToString(code)
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

// What the error takes in the trailers: the message, then the details.
size_t ErrorBytes(const google::rpc::Status& rpc) {
  return rpc.message().size() + rpc.ByteSizeLong();
}

}  // namespace

google::rpc::Status ToRpcStatus(const absl::Status& status) {
  if (status.ok()) {
    google::rpc::Status rpc;
    rpc.set_message(std::string(status.message()));
    return rpc;
  }
  ErrorDetails details = DetailsOf(status);
  std::string message(status.message());
  google::rpc::Status rpc = Encode(status.code(), message, details);
  if (ErrorBytes(rpc) <= kMaxErrorBytes) return rpc;
  // Too large: the lists and values of the details first (the message is
  // what a person reads), then the message, then whole entries.
  for (auto& [key, value] : details.metadata) {
    value = CutText(value, kMaxErrorDetailBytes);
  }
  for (FieldViolation& violation : details.field_violations) {
    violation.field = CutText(violation.field, kMaxErrorDetailBytes);
    violation.description =
        CutText(violation.description, kMaxErrorDetailBytes);
  }
  rpc = Encode(status.code(), message, details);
  if (ErrorBytes(rpc) <= kMaxErrorBytes) return rpc;
  message = CutMessage(message, kMaxCutErrorMessageBytes);
  rpc = Encode(status.code(), message, details);
  while (ErrorBytes(rpc) > kMaxErrorBytes &&
         (!details.field_violations.empty() || !details.metadata.empty())) {
    if (!details.field_violations.empty()) {
      details.field_violations.pop_back();
    } else {
      details.metadata.erase(std::prev(details.metadata.end()));
    }
    rpc = Encode(status.code(), message, details);
  }
  return rpc;
}

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  const google::rpc::Status rpc = ToRpcStatus(status);
  // absl::StatusCode and grpc::StatusCode share the canonical numbering.
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      rpc.message(), rpc.SerializeAsString());
}

}  // namespace backfill
