// raw_request: how the server receives and parses the request of every RPC
// of a service, so that a request protobuf refuses is INVALID_ARGUMENT with a
// message instead of gRPC's INTERNAL with none.
//
// gRPC C++ parses a request before any application code (or interceptor)
// sees it, and answers a parse failure with INTERNAL and an empty message.
// The usual cause is the client's: a proto3 `string` field holding bytes
// that are not UTF-8. So the service's methods are re-registered, in the
// service's constructor, with handlers from NewUnaryHandler() and
// NewServerStreamingHandler(): gRPC hands them the request as bytes
// (grpc::ByteBuffer); ParseRequest() checks and parses it and only a parsed
// request reaches the typed handler, which stays as thin as before. Nothing
// changes on the wire: the messages, their JSON form and the method names
// are those of the .proto.
//
// Ownership: a handler returned by a New*Handler() function is owned by the
// grpc::Service it is registered with (Service::MarkMethodStreamed); the
// service object it calls must outlive it. Thread-safety: the functions keep
// no state; the handlers may run concurrently, as gRPC runs them.

#ifndef BACKFILL_SERVER_RAW_REQUEST_H_
#define BACKFILL_SERVER_RAW_REQUEST_H_

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/support/method_handler.h"
#include "server/proto_convert.h"

namespace backfill {

// A `string` field holding bytes that are not UTF-8.
struct InvalidUtf8Field {
  // The field's path in proto field names from the request message, with
  // the index of a repeated value: "request.reason", "request.partitions[2]".
  std::string path;
  // Offset and value of the first bad byte in the field's value.
  size_t offset = 0;
  unsigned char byte = 0;
};

// The first `string` field of `wire`, the serialized form of a message of
// type `type`, whose value is not UTF-8 (text/utf8.h's rule), looking
// into sub-messages; nullopt when there is none. Fields `type` does not
// declare are skipped; bytes that are no protobuf message at all are
// ParseRequest()'s business, not this function's (nullopt).
std::optional<InvalidUtf8Field> FindInvalidUtf8(
    const google::protobuf::Descriptor& type, std::string_view wire);

// Parses `wire` into `request` (cleared first). INVALID_ARGUMENT, with a
// message for the client, when a `string` field is not UTF-8:
//   invalid request: field request.reason is not valid UTF-8 (byte 0xff at
//   offset 3); text fields must be UTF-8
// or when the bytes are not a message of the request's type:
//   invalid request: the bytes are not a well-formed
//   backfill.v1.SubmitBackfillRequest
absl::Status ParseRequest(std::string_view wire,
                          google::protobuf::Message* request);

// Reads the one request message of a call from `stream` (a
// grpc::ServerUnaryStreamer or grpc::ServerSplitStreamer reading
// grpc::ByteBuffer) and parses it into `request` with ParseRequest().
template <class Stream>
grpc::Status ReadRequest(grpc::ServerContext* context, Stream* stream,
                         google::protobuf::Message* request);

// Decides whether a call may go on, before its request is read: OK, or the
// status the call ends with (server/call_auth.h). Empty: every call may.
using CallGate = std::function<grpc::Status(grpc::ServerContext*)>;

// A handler of a unary method that asks `admit` about the call, receives its
// request as bytes and then calls `(service->*method)(context, &request,
// &response)`, exactly as gRPC would have called the generated Service's
// virtual method.
template <class Service, class Request, class Response>
grpc::internal::MethodHandler* NewUnaryHandler(
    Service* service,
    grpc::Status (Service::*method)(grpc::ServerContext*, const Request*,
                                    Response*),
    CallGate admit = {});

// A handler of a server-streaming method that asks `admit` about the call,
// receives its request as bytes and then calls `(service->*method)(context,
// &request, write)`; `write` sends one message and returns false once the
// stream is broken.
template <class Service, class Request, class Response>
grpc::internal::MethodHandler* NewServerStreamingHandler(
    Service* service,
    grpc::Status (Service::*method)(
        grpc::ServerContext*, const Request*,
        const std::function<bool(const Response&)>&),
    CallGate admit = {});

// Implementation details follow.

namespace raw_request_internal {

// The bytes of `raw` in one string.
std::string Flatten(const grpc::ByteBuffer& raw);

// The status of a call whose request could not be read: RESOURCE_EXHAUSTED
// when gRPC ended the call (as it does for a request over the receive
// limit, which is what its client is told; a client that cancelled before
// its request arrived counts here too), DEADLINE_EXCEEDED when it ended
// past its deadline, INVALID_ARGUMENT (REQUEST_MISSING) when the call
// carried no request message. Waits up to 100 ms for the end of the call
// to show.
grpc::Status NoRequest(grpc::ServerContext* context);

}  // namespace raw_request_internal

template <class Stream>
grpc::Status ReadRequest(grpc::ServerContext* context, Stream* stream,
                         google::protobuf::Message* request) {
  grpc::ByteBuffer raw;
  if (!stream->Read(&raw)) return raw_request_internal::NoRequest(context);
  return ToGrpcStatus(
      ParseRequest(raw_request_internal::Flatten(raw), request));
}

template <class Service, class Request, class Response>
grpc::internal::MethodHandler* NewUnaryHandler(
    Service* service,
    grpc::Status (Service::*method)(grpc::ServerContext*, const Request*,
                                    Response*),
    CallGate admit) {
  using Stream = grpc::ServerUnaryStreamer<grpc::ByteBuffer, Response>;
  return new grpc::internal::StreamedUnaryHandler<grpc::ByteBuffer, Response>(
      [service, method, admit = std::move(admit)](grpc::ServerContext* context,
                                                  Stream* stream) {
        if (admit) {
          grpc::Status admitted = admit(context);
          if (!admitted.ok()) return admitted;
        }
        Request request;
        grpc::Status status = ReadRequest(context, stream, &request);
        if (!status.ok()) return status;
        Response response;
        status = (service->*method)(context, &request, &response);
        if (status.ok()) stream->Write(response);
        return status;
      });
}

template <class Service, class Request, class Response>
grpc::internal::MethodHandler* NewServerStreamingHandler(
    Service* service,
    grpc::Status (Service::*method)(
        grpc::ServerContext*, const Request*,
        const std::function<bool(const Response&)>&),
    CallGate admit) {
  using Stream = grpc::ServerSplitStreamer<grpc::ByteBuffer, Response>;
  return new grpc::internal::SplitServerStreamingHandler<grpc::ByteBuffer,
                                                         Response>(
      [service, method, admit = std::move(admit)](grpc::ServerContext* context,
                                                  Stream* stream) {
        if (admit) {
          grpc::Status admitted = admit(context);
          if (!admitted.ok()) return admitted;
        }
        Request request;
        grpc::Status status = ReadRequest(context, stream, &request);
        if (!status.ok()) return status;
        return (service->*method)(context, &request,
                                  [stream](const Response& message) {
                                    return stream->Write(message);
                                  });
      });
}

}  // namespace backfill

#endif  // BACKFILL_SERVER_RAW_REQUEST_H_
