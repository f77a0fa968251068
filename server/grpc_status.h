// The gRPC form of an error: an absl::Status becomes a grpc::Status with the
// same canonical code and message, and a google.rpc.Status in the trailer
// grpc-status-details-bin whose details say what a client can act on:
//
//  - google.rpc.ErrorInfo, always: `reason` (the one the core attached, see
//    core/base/error_details.h, else the code's name, e.g. "NOT_FOUND", which
//    says no finer reason is given), `domain` "backfilld" and the metadata;
//  - google.rpc.BadRequest when fields of the request were refused: one
//    field violation per field, named by its path in the request message.
//
// Every error the service sends passes through here, so this is where its
// size is bounded: the message and the details together take at most
// kMaxErrorBytes (see below), whatever a request held or a list grew to.
//
// Pure functions; thread-safe.

#ifndef BACKFILL_SERVER_GRPC_STATUS_H_
#define BACKFILL_SERVER_GRPC_STATUS_H_

#include <grpcpp/grpcpp.h>

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "google/rpc/status.pb.h"

namespace backfill {

// The most bytes an error takes in the trailers of a response: its message
// (grpc-message) plus its details (grpc-status-details-bin, a
// google.rpc.Status that holds the message a second time), counted before
// their encoding for HTTP/2. Encoded (the message percent-encoded, the
// details in base64) that stays well under the 8 KiB of metadata a gRPC
// client accepts by default; an error over it would reach the client as
// RESOURCE_EXHAUSTED "received initial metadata size exceeds limit" instead
// of itself.
inline constexpr size_t kMaxErrorBytes = 2048;

// When an error would be larger, in this order until it fits: each metadata
// value and field violation description is cut to this many bytes...
inline constexpr size_t kMaxErrorDetailBytes = 256;
// ...the message to this many...
inline constexpr size_t kMaxCutErrorMessageBytes = 640;
// ...and the last field violations, then the last metadata entries, are
// left out. The code, the reason and the domain are always kept. A cut
// text ends with "..." and a cut message also says its whole size.

// `status` as a grpc::Status carrying its details (OK stays OK), bounded as
// above.
grpc::Status ToGrpcStatus(const absl::Status& status);

// The google.rpc.Status that ToGrpcStatus sends for `status`; its message
// is the grpc::Status's message.
google::rpc::Status ToRpcStatus(const absl::Status& status);

}  // namespace backfill

#endif  // BACKFILL_SERVER_GRPC_STATUS_H_
