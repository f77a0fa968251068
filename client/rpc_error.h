// RpcError: what a client reads from a failed call beside its code and
// message. backfilld sends a google.rpc.Status in the trailer
// grpc-status-details-bin, with a google.rpc.ErrorInfo (a stable reason in
// the domain "backfilld" and metadata) and, when request fields were
// refused, a google.rpc.BadRequest naming them by their path in the
// request ("request.reason", "partitions[2]").
//
// FromGrpcStatus keeps those bytes as the absl::Status payload under
// kRpcStatusPayloadUrl (the URL of the google.rpc.Status type), so the
// details travel with the status through every layer of a client; the
// functions here read them back.
//
// Pure functions over values; thread-safe.

#ifndef BACKFILL_CLIENT_RPC_ERROR_H_
#define BACKFILL_CLIENT_RPC_ERROR_H_

#include <grpcpp/grpcpp.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "google/rpc/status.pb.h"

namespace backfill {

inline constexpr char kRpcStatusPayloadUrl[] =
    "type.googleapis.com/google.rpc.Status";

// The same code and message; the google.rpc.Status of the call, when the
// server sent one, as a payload.
absl::Status FromGrpcStatus(const grpc::Status& status);

// The google.rpc.Status a status carries (nullopt: none, or not parseable).
std::optional<google::rpc::Status> RpcStatusOf(const absl::Status& status);

struct RpcErrorInfo {
  std::string reason;  // "" when the server sent no ErrorInfo
  std::string domain;
  std::map<std::string, std::string> metadata;
};

// The ErrorInfo detail of a status.
RpcErrorInfo ErrorInfoOf(const absl::Status& status);

struct RpcFieldViolation {
  std::string field;
  std::string description;
};

// The field violations of the BadRequest detail of a status, in order.
std::vector<RpcFieldViolation> FieldViolationsOf(const absl::Status& status);

}  // namespace backfill

#endif  // BACKFILL_CLIENT_RPC_ERROR_H_
