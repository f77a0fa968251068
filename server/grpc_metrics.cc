#include "server/grpc_metrics.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "google/protobuf/descriptor.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace backfill {
namespace {

struct MethodLabels {
  std::string service;
  std::string method;
  std::string type;  // "" when not known from a proto
};

const char* TypeOf(bool client_streaming, bool server_streaming) {
  if (client_streaming)
    return server_streaming ? "bidi_stream" : "client_stream";
  return server_streaming ? "server_stream" : "unary";
}

// Splits "/package.Service/Method" into a service and a method the
// server's protos declare, with the method's type; {"unknown", "unknown"}
// otherwise, so that a client cannot create series with names of its
// choice.
MethodLabels KnownMethod(const std::string& full) {
  MethodLabels unknown = {"unknown", "unknown", ""};
  std::vector<std::string> parts = absl::StrSplit(full, '/');
  if (parts.size() != 3 || !parts[0].empty() || parts[1].empty() ||
      parts[2].empty()) {
    return unknown;
  }
  // The health service is served by gRPC from its own (non-C++) proto.
  if (parts[1] == "grpc.health.v1.Health" &&
      (parts[2] == "Check" || parts[2] == "Watch")) {
    return {parts[1], parts[2],
            parts[2] == "Watch" ? "server_stream" : "unary"};
  }
  const google::protobuf::MethodDescriptor* method =
      google::protobuf::DescriptorPool::generated_pool()->FindMethodByName(
          parts[1] + "." + parts[2]);
  if (method == nullptr) return unknown;
  return {parts[1], parts[2],
          TypeOf(method->client_streaming(), method->server_streaming())};
}

const char* TypeName(grpc::experimental::ServerRpcInfo::Type type) {
  using Type = grpc::experimental::ServerRpcInfo::Type;
  switch (type) {
    case Type::UNARY:
      return "unary";
    case Type::CLIENT_STREAMING:
      return "client_stream";
    case Type::SERVER_STREAMING:
      return "server_stream";
    case Type::BIDI_STREAMING:
      return "bidi_stream";
  }
  return "unary";
}

class MetricsInterceptor final : public grpc::experimental::Interceptor {
 public:
  MetricsInterceptor(GrpcServerMetrics* metrics, std::string method,
                     std::string type)
      : metrics_(metrics),
        method_(std::move(method)),
        type_(std::move(type)),
        start_(absl::Now()) {}

  // A call that ended without sending a status (the client went away).
  ~MetricsInterceptor() override {
    if (!recorded_) {
      metrics_->Record(method_, type_, grpc::StatusCode::CANCELLED,
                       absl::Now() - start_);
    }
  }

  void Intercept(
      grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_STATUS) &&
        !recorded_) {
      recorded_ = true;
      metrics_->Record(method_, type_, methods->GetSendStatus().error_code(),
                       absl::Now() - start_);
    }
    methods->Proceed();
  }

 private:
  GrpcServerMetrics* const metrics_;
  const std::string method_;
  const std::string type_;
  const absl::Time start_;
  bool recorded_ = false;
};

class MetricsInterceptorFactory final
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit MetricsInterceptorFactory(GrpcServerMetrics* metrics)
      : metrics_(metrics) {}

  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    return new MetricsInterceptor(
        metrics_, info->method() != nullptr ? info->method() : "",
        TypeName(info->type()));
  }

 private:
  GrpcServerMetrics* const metrics_;
};

}  // namespace

std::string GrpcCodeName(grpc::StatusCode code) {
  const int n = static_cast<int>(code);
  if (n < 0 || n > 16) return "UNKNOWN";
  return absl::StatusCodeToString(static_cast<absl::StatusCode>(n));
}

GrpcServerMetrics::GrpcServerMetrics(prometheus::Registry* registry)
    : handled_(&prometheus::BuildCounter()
                    .Name("grpc_server_handled_total")
                    .Help("gRPC calls completed by the server, by service, "
                          "method, type and status code.")
                    .Register(*registry)),
      handling_(&prometheus::BuildHistogram()
                     .Name("grpc_server_handling_seconds")
                     .Help("Time from the arrival of a gRPC call to its status "
                           "(a stream's whole life), by service, method, type "
                           "and status code.")
                     .Register(*registry)) {}

void GrpcServerMetrics::Record(const std::string& full_method,
                               const std::string& type, grpc::StatusCode code,
                               absl::Duration took) {
  // The type as the proto declares it (the call's own may say otherwise
  // for the server's sync and callback methods).
  const MethodLabels known = KnownMethod(full_method);
  prometheus::Labels labels = {
      {"grpc_service", known.service},
      {"grpc_method", known.method},
      {"grpc_type", known.type.empty() ? type : known.type},
      {"grpc_code", GrpcCodeName(code)}};
  handled_->Add(labels).Increment();
  handling_
      ->Add(labels,
            prometheus::Histogram::BucketBoundaries{
                0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                1, 2.5, 5, 10, 30, 60, 300, 3600})
      .Observe(absl::ToDoubleSeconds(took));
}

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
GrpcServerMetrics::NewInterceptorFactory() {
  return std::make_unique<MetricsInterceptorFactory>(this);
}

}  // namespace backfill
