// GrpcServerMetrics: requests and latency of the gRPC server, by method
// and status code, fed by a server interceptor (NewInterceptorFactory())
// that sees every call of every service of the server:
//   grpc_server_handled_total{grpc_service, grpc_method, grpc_type,
//                             grpc_code}            counter
//   grpc_server_handling_seconds{grpc_service, grpc_method, grpc_type,
//                                grpc_code}         histogram
// (the names of the usual gRPC server metrics, so that their dashboards
// work). Labels are bounded: grpc_service/grpc_method are those of a
// method the server's protos declare ("unknown" otherwise), grpc_type
// unary/client_stream/server_stream/bidi_stream, grpc_code a canonical code
// name ("OK", "NOT_FOUND", ...). A stream's latency is its whole life.
//
// Families are registered on the registry given at construction, which
// must outlive this object; the factory must not outlive it either.
// Thread-safe.

#ifndef BACKFILL_SERVER_GRPC_METRICS_H_
#define BACKFILL_SERVER_GRPC_METRICS_H_

#include <memory>
#include <string>

#include "absl/time/time.h"
#include "grpcpp/support/server_interceptor.h"
#include "grpcpp/support/status.h"

namespace prometheus {
class Counter;
template <typename T>
class Family;
class Histogram;
class Registry;
}  // namespace prometheus

namespace backfill {

class GrpcServerMetrics {
 public:
  explicit GrpcServerMetrics(prometheus::Registry* registry);

  GrpcServerMetrics(const GrpcServerMetrics&) = delete;
  GrpcServerMetrics& operator=(const GrpcServerMetrics&) = delete;

  // Records one finished call of `full_method` ("/package.Service/Method"),
  // `type` as grpc_type names it.
  void Record(const std::string& full_method, const std::string& type,
              grpc::StatusCode code, absl::Duration took);

  // An interceptor factory for grpc::ServerBuilder::experimental()
  // .SetInterceptorCreators().
  std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
  NewInterceptorFactory();

 private:
  prometheus::Family<prometheus::Counter>* handled_;
  prometheus::Family<prometheus::Histogram>* handling_;
};

// The canonical name of a gRPC status code ("OK", "INVALID_ARGUMENT", ...;
// "UNKNOWN" for a number outside the canonical codes).
std::string GrpcCodeName(grpc::StatusCode code);

}  // namespace backfill

#endif  // BACKFILL_SERVER_GRPC_METRICS_H_
