#include "bench/rpc_load.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "backfill/v1/backfill.grpc.pb.h"
#include "bench/echo.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace backfill::bench {
namespace {

// A call that takes longer has failed: the load must end even when the
// server hangs.
constexpr absl::Duration kCallDeadline = absl::Seconds(30);
// How long each client's channel may take to connect before the load.
constexpr absl::Duration kConnectTimeout = absl::Seconds(10);

absl::Status FromGrpc(const grpc::Status& s) {
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                      s.error_message());
}

// A channel of its own, on a TCP connection of its own: gRPC shares a
// subchannel (a connection) between channels to the same address with equal
// arguments, so each client gets a distinct argument, and a subchannel pool
// that is the channel's alone.
std::shared_ptr<grpc::Channel> NewClientChannel(const std::string& target,
                                                int client) {
  grpc::ChannelArguments args;
  args.SetInt("backfill.bench.client", client);
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(),
                                   args);
}

// Calls GetBackfill in the BASIC view, one call at a time. Not thread-safe:
// one per client thread.
class GetBackfillCaller {
 public:
  GetBackfillCaller(const std::shared_ptr<grpc::Channel>& channel,
                    const std::string& job_id)
      : stub_(v1::BackfillService::NewStub(channel)) {
    request_.set_id(job_id);
    request_.set_view(v1::BACKFILL_VIEW_BASIC);
  }

  grpc::Status Call() {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + kCallDeadline));
    return stub_->GetBackfill(&context, request_, &response_);
  }

  const v1::Backfill& response() const { return response_; }

 private:
  std::unique_ptr<v1::BackfillService::Stub> stub_;
  v1::GetBackfillRequest request_;
  v1::Backfill response_;
};

// Calls Echo with a payload of a given size, one call at a time, and checks
// that the answer carries it back. Not thread-safe: one per client thread.
class EchoCaller {
 public:
  EchoCaller(const std::shared_ptr<grpc::Channel>& channel,
             size_t payload_bytes)
      : stub_(Echo::NewStub(channel)) {
    request_.set_payload(std::string(payload_bytes, 'e'));
  }

  grpc::Status Call() {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + kCallDeadline));
    grpc::Status s = stub_->Echo(&context, request_, &response_);
    if (s.ok() && response_.payload().size() != request_.payload().size()) {
      return grpc::Status(
          grpc::StatusCode::DATA_LOSS,
          absl::StrCat("the echo answered ", response_.payload().size(),
                       " bytes to ", request_.payload().size()));
    }
    return s;
  }

 private:
  std::unique_ptr<Echo::Stub> stub_;
  EchoMessage request_;
  EchoMessage response_;
};

// What one client thread saw in the window. Written by its thread only,
// read after the thread is joined.
struct ClientTally {
  std::vector<int64_t> latencies_ns;  // of the successful calls
  int64_t errors = 0;
  std::string first_error;
  absl::Time first_error_at = absl::InfiniteFuture();
};

// The measured window; written before the clients are let go, read-only
// afterwards.
struct Window {
  absl::Time start;
  absl::Time end;
};

template <typename Caller>
void RunClient(Caller* caller, const absl::Notification* go,
               const Window* window, ClientTally* tally) {
  go->WaitForNotification();
  tally->latencies_ns.reserve(1 << 16);
  while (true) {
    const absl::Time before = absl::Now();
    if (before >= window->end) break;
    const grpc::Status s = caller->Call();
    const absl::Time after = absl::Now();
    if (after < window->start || after >= window->end) continue;
    if (s.ok()) {
      tally->latencies_ns.push_back(absl::ToInt64Nanoseconds(after - before));
    } else {
      if (tally->errors == 0) {
        tally->first_error = FromGrpc(s).ToString();
        tally->first_error_at = after;
      }
      ++tally->errors;
    }
  }
}

// The latency at quantile `q` of sorted `ns` (nearest rank), in
// microseconds.
double QuantileUs(const std::vector<int64_t>& ns, double q) {
  if (ns.empty()) return 0;
  const double rank = std::ceil(q * static_cast<double>(ns.size()));
  const size_t index =
      std::min(ns.size() - 1, static_cast<size_t>(std::max(rank, 1.0)) - 1);
  return static_cast<double>(ns[index]) / 1000.0;
}

// Connects `clients` channels to `target`, makes one Caller on each with
// `make_caller(channel)`, checks one call, then runs the clients for
// `warmup` and `duration` and sums up what they saw.
template <typename MakeCaller>
absl::StatusOr<LoadResult> RunLoad(const std::string& target, int clients,
                                   absl::Duration warmup,
                                   absl::Duration duration,
                                   MakeCaller make_caller) {
  if (clients < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("clients must be at least 1, not ", clients));
  }
  if (warmup < absl::ZeroDuration() || duration <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the warmup (", absl::FormatDuration(warmup),
                     ") cannot be negative and the duration (",
                     absl::FormatDuration(duration), ") must be positive"));
  }
  using Caller = decltype(make_caller(std::shared_ptr<grpc::Channel>()));
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  std::vector<Caller> callers;
  channels.reserve(clients);
  callers.reserve(clients);
  const absl::Time connect_deadline = absl::Now() + kConnectTimeout;
  for (int i = 0; i < clients; ++i) {
    channels.push_back(NewClientChannel(target, i));
    if (!channels.back()->WaitForConnected(
            absl::ToChronoTime(connect_deadline))) {
      return absl::UnavailableError(
          absl::StrCat("client ", i, " cannot connect to ", target, " within ",
                       absl::FormatDuration(kConnectTimeout)));
    }
    callers.push_back(make_caller(channels.back()));
  }
  if (grpc::Status s = callers.front().Call(); !s.ok()) {
    absl::Status status = FromGrpc(s);
    return absl::Status(status.code(), absl::StrCat("first call to ", target,
                                                    ": ", status.message()));
  }

  std::vector<ClientTally> tallies(clients);
  absl::Notification go;
  Window window;
  std::vector<std::thread> threads;
  threads.reserve(clients);
  for (int i = 0; i < clients; ++i) {
    threads.emplace_back(RunClient<Caller>, &callers[i], &go, &window,
                         &tallies[i]);
  }
  window.start = absl::Now() + warmup;
  window.end = window.start + duration;
  go.Notify();
  for (std::thread& thread : threads) thread.join();

  LoadResult result;
  result.clients = clients;
  result.seconds = absl::ToDoubleSeconds(duration);
  std::vector<int64_t> latencies_ns;
  absl::Time first_error_at = absl::InfiniteFuture();
  for (ClientTally& tally : tallies) {
    latencies_ns.insert(latencies_ns.end(), tally.latencies_ns.begin(),
                        tally.latencies_ns.end());
    result.errors += tally.errors;
    if (tally.errors > 0 && tally.first_error_at < first_error_at) {
      first_error_at = tally.first_error_at;
      result.first_error = std::move(tally.first_error);
    }
  }
  std::sort(latencies_ns.begin(), latencies_ns.end());
  result.calls = static_cast<int64_t>(latencies_ns.size());
  result.qps = static_cast<double>(result.calls) / result.seconds;
  result.p50_us = QuantileUs(latencies_ns, 0.50);
  result.p99_us = QuantileUs(latencies_ns, 0.99);
  result.max_us = QuantileUs(latencies_ns, 1.0);
  return result;
}

}  // namespace

absl::StatusOr<LoadResult> LoadGetBackfill(const std::string& target,
                                           const std::string& job_id,
                                           int clients, absl::Duration warmup,
                                           absl::Duration duration) {
  return RunLoad(target, clients, warmup, duration,
                 [&job_id](const std::shared_ptr<grpc::Channel>& channel) {
                   return GetBackfillCaller(channel, job_id);
                 });
}

absl::StatusOr<LoadResult> LoadEcho(const std::string& target,
                                    size_t payload_bytes, int clients,
                                    absl::Duration warmup,
                                    absl::Duration duration) {
  return RunLoad(
      target, clients, warmup, duration,
      [payload_bytes](const std::shared_ptr<grpc::Channel>& channel) {
        return EchoCaller(channel, payload_bytes);
      });
}

absl::StatusOr<size_t> GetBackfillAnswerBytes(const std::string& target,
                                              const std::string& job_id) {
  GetBackfillCaller caller(NewClientChannel(target, 0), job_id);
  if (grpc::Status s = caller.Call(); !s.ok()) return FromGrpc(s);
  return caller.response().ByteSizeLong();
}

absl::Status WaitForEcho(const std::string& target, absl::Duration timeout) {
  // Reconnect soon after a refused connection: the server may come up at
  // any moment, and gRPC's default backoff grows to minutes.
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 50);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 50);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 200);
  std::unique_ptr<Echo::Stub> stub = Echo::NewStub(grpc::CreateCustomChannel(
      target, grpc::InsecureChannelCredentials(), args));
  const absl::Time deadline = absl::Now() + timeout;
  absl::Status last = absl::DeadlineExceededError("no call made");
  while (true) {
    grpc::ClientContext context;
    context.set_wait_for_ready(true);
    context.set_deadline(absl::ToChronoTime(
        std::min(deadline, absl::Now() + absl::Milliseconds(500))));
    EchoMessage request;
    EchoMessage response;
    const grpc::Status s = stub->Echo(&context, request, &response);
    if (s.ok()) return absl::OkStatus();
    last = FromGrpc(s);
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      return absl::DeadlineExceededError(
          absl::StrCat("no answer from the echo server at ", target, " within ",
                       absl::FormatDuration(timeout), ": ", last.ToString()));
    }
    absl::SleepFor(std::min(left, absl::Milliseconds(50)));
  }
}

}  // namespace backfill::bench
