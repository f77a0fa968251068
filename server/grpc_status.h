// The gRPC form of an error: an absl::Status becomes a grpc::Status with the
// same canonical code and message, and a google.rpc.Status in the trailer
// grpc-status-details-bin whose details say what a client can act on:
//
//  - google.rpc.ErrorInfo, always: `reason` (the one the core attached, see
//    core/error_details.h, else the code's name, e.g. "NOT_FOUND", which
//    says no finer reason is given), `domain` "backfilld" and the metadata;
//  - google.rpc.BadRequest when fields of the request were refused: one
//    field violation per field, named by its path in the request message.
//
// Pure functions; thread-safe.

#ifndef BACKFILL_SERVER_GRPC_STATUS_H_
#define BACKFILL_SERVER_GRPC_STATUS_H_

#include <grpcpp/grpcpp.h>

#include <string>

#include "absl/status/status.h"
#include "google/rpc/status.pb.h"

namespace backfill {

// `status` as a grpc::Status carrying its details (OK stays OK).
grpc::Status ToGrpcStatus(const absl::Status& status);

// The google.rpc.Status that ToGrpcStatus sends for `status`.
google::rpc::Status ToRpcStatus(const absl::Status& status);

}  // namespace backfill

#endif  // BACKFILL_SERVER_GRPC_STATUS_H_
