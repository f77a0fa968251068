// Raw gRPC calls for tests: a unary call whose request is given as bytes,
// through a generic stub, as a client that checks nothing would send it;
// the details of a refusal decoded from its trailer; and
// grpc.health.v1.Health/Check encoded by hand (Debian ships no generated
// health proto). Header-only; each call makes its own channel.

#ifndef BACKFILL_TESTS_TESTING_RAW_GRPC_H_
#define BACKFILL_TESTS_TESTING_RAW_GRPC_H_

#include <cstddef>
#include <future>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "google/protobuf/message.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"

namespace backfill::testing {

// A call of `method` ("/package.Service/Method") whose request is `request`
// as raw bytes, through a generic stub, as a client that checks nothing
// would send it; the response's bytes go to `response_bytes`. Also good
// for a server-streaming method that answers with an error.
// `metadata` is sent with the call (e.g. {"authorization", "Bearer T"}).
inline grpc::Status RawCall(
    const std::string& target, const std::string& method,
    const std::string& request, std::string* response_bytes,
    const std::vector<std::pair<std::string, std::string>>& metadata = {}) {
  auto channel =
      grpc::CreateChannel(target, grpc::InsecureChannelCredentials());
  grpc::GenericStub stub(channel);
  grpc::Slice slice(request);
  grpc::ByteBuffer request_buffer(&slice, 1);
  grpc::ByteBuffer response_buffer;
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  for (const auto& [key, value] : metadata) context.AddMetadata(key, value);
  std::promise<grpc::Status> done;
  stub.UnaryCall(&context, method, grpc::StubOptions(), &request_buffer,
                 &response_buffer,
                 [&done](grpc::Status s) { done.set_value(std::move(s)); });
  grpc::Status status = done.get_future().get();
  response_bytes->clear();
  std::vector<grpc::Slice> slices;
  if (status.ok() && response_buffer.Dump(&slices).ok()) {
    for (const grpc::Slice& s : slices) {
      response_bytes->append(reinterpret_cast<const char*>(s.begin()),
                             s.size());
    }
  }
  return status;
}

// grpc.health.v1.Health/Check through a generic stub: Debian ships no
// generated health proto, so the messages are encoded by hand.
// HealthCheckRequest{service = 1}; HealthCheckResponse{status = 1},
// SERVING = 1.
inline grpc::Status HealthCheck(const std::string& target,
                                const std::string& service,
                                std::string* response_bytes) {
  std::string request;
  if (!service.empty()) {
    request.push_back(0x0a);
    request.push_back(static_cast<char>(service.size()));
    request += service;
  }
  return RawCall(target, "/grpc.health.v1.Health/Check", request,
                 response_bytes);
}

// SERVING, NOT_SERVING, or UNKNOWN (also when the check itself failed).
inline std::string HealthStatus(const std::string& target,
                                const std::string& service) {
  std::string response;
  grpc::Status status = HealthCheck(target, service, &response);
  if (!status.ok() || response.size() < 2 || response[0] != 0x08) {
    return "UNKNOWN";
  }
  switch (response[1]) {
    case 1:
      return "SERVING";
    case 2:
      return "NOT_SERVING";
    default:
      return "UNKNOWN";
  }
}

// What a client reads from a refused call, decoded straight from the
// grpc-status-details-bin bytes (not with the client library): the
// google.rpc.Status repeats the code and the message, an ErrorInfo gives the
// reason in the domain "backfilld", and a BadRequest names the refused
// fields by their path in the request.
struct WireError {
  grpc::StatusCode code = grpc::StatusCode::OK;
  std::string message;
  size_t details_bytes = 0;  // of grpc-status-details-bin, as received
  google::rpc::Status rpc;
  google::rpc::ErrorInfo info;
  int info_count = 0;
  std::vector<std::string> fields;  // BadRequest's violations, in order
};

// A call of `method` of backfill.v1.BackfillService with `request`
// through RawCall (a channel with gRPC's default limits) that must be
// refused; what its refusal holds.
inline WireError Refusal(const std::string& target, const std::string& method,
                         const google::protobuf::Message& request) {
  WireError out;
  std::string response;
  grpc::Status status =
      RawCall(target, absl::StrCat("/backfill.v1.BackfillService/", method),
              request.SerializeAsString(), &response);
  out.code = status.error_code();
  out.message = status.error_message();
  out.details_bytes = status.error_details().size();
  EXPECT_FALSE(status.ok()) << method;
  EXPECT_TRUE(out.rpc.ParseFromString(status.error_details()))
      << method << ": no google.rpc.Status in grpc-status-details-bin";
  EXPECT_EQ(out.rpc.code(), static_cast<int>(status.error_code()));
  EXPECT_EQ(out.rpc.message(), status.error_message());
  for (const google::protobuf::Any& detail : out.rpc.details()) {
    google::rpc::BadRequest bad_request;
    if (detail.UnpackTo(&out.info)) {
      ++out.info_count;
    } else if (detail.UnpackTo(&bad_request)) {
      for (const auto& v : bad_request.field_violations()) {
        EXPECT_FALSE(v.description().empty()) << v.field();
        out.fields.push_back(v.field());
      }
    } else {
      ADD_FAILURE() << method << ": unexpected detail " << detail.type_url();
    }
  }
  EXPECT_EQ(out.info_count, 1) << method << ": " << out.rpc.DebugString();
  EXPECT_EQ(out.info.domain(), "backfilld");
  return out;
}

}  // namespace backfill::testing

#endif  // BACKFILL_TESTS_TESTING_RAW_GRPC_H_
