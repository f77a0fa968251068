// backfill_echo_server: a bare synchronous gRPC server of backfill.bench.Echo
// (bench/echo.proto) that answers every call with its request unchanged. It
// is the yardstick of the GetBackfill load (bench/rpc_load.h): the same kind
// of service as backfilld's (synchronous) with the ServerBuilder settings of
// server/daemon.cc that bear on throughput (the largest message received),
// and nothing else: no authentication, no interceptors, no health service.
//
// Usage: backfill_echo_server --listen HOST:PORT [--threads N]
//                             [--max-message-bytes N]
// Prints nothing but errors (on stderr): a caller knows it serves when a
// call succeeds (WaitForEcho in bench/rpc_load.h). SIGTERM or SIGINT shuts
// it down and it exits 0; it exits 1 when it cannot listen, 2 on bad flags.

#include <pthread.h>
#include <signal.h>

#include <chrono>
#include <cstdint>
#include <iostream>
#include <memory>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/synchronization/mutex.h"
#include "bench/echo.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/resource_quota.h"

namespace backfill::bench {
namespace {

class EchoService final : public Echo::Service {
 public:
  grpc::Status Echo(grpc::ServerContext* context, const EchoMessage* request,
                    EchoMessage* response) override {
    response->set_payload(request->payload());
    return grpc::Status::OK;
  }
};

int Main(int argc, char** argv) {
  std::string listen;
  int threads = 0;
  // backfilld's default --max-message-bytes (server/daemon_options.h).
  int64_t max_message_bytes = 4 << 20;

  CLI::App app{"backfill_echo_server: a bare gRPC echo service",
               "backfill_echo_server"};
  app.add_option("--listen", listen, "Address to serve on, HOST:PORT")
      ->required();
  app.add_option("--threads", threads,
                 "Most threads gRPC may run the server with; 0: gRPC's own "
                 "limit, as in backfilld")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--max-message-bytes", max_message_bytes,
                 "Largest request message received, as backfilld's flag")
      ->check(CLI::Range(int64_t{1}, int64_t{INT32_MAX}))
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);  // prints help or the error
    return code == 0 ? 0 : 2;
  }

  // Blocked before gRPC starts a thread, so that only sigwait() below sees
  // them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  // As backfilld runs (server/main.cc): without Abseil's lock-order check,
  // which would otherwise cost gRPC's own locks here as well.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);

  EchoService service;
  grpc::ServerBuilder builder;
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.SetMaxReceiveMessageSize(static_cast<int>(max_message_bytes));
  if (threads > 0) {
    grpc::ResourceQuota quota("backfill_echo_server");
    quota.SetMaxThreads(threads);
    builder.SetResourceQuota(quota);
  }
  int port = 0;
  builder.AddListeningPort(listen, grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    std::cerr << "backfill_echo_server: cannot listen on --listen " << listen
              << " (address in use, not local, or malformed; use HOST:PORT)"
              << std::endl;
    return 1;
  }

  int signal = 0;
  sigwait(&stop_signals, &signal);
  // Calls in flight get a moment to finish; then they are cancelled.
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  server->Wait();
  return 0;
}

}  // namespace
}  // namespace backfill::bench

int main(int argc, char** argv) { return backfill::bench::Main(argc, argv); }
