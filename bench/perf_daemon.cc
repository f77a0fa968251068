#include "bench/perf_daemon.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/base/status_macros.h"
#include "core/ports/http_client.h"
#include "grpcpp/grpcpp.h"
#include "platform/curl_http_client.h"
#include "tests/testing/prometheus_text.h"

namespace backfill::bench {

// GET http://<address>/metrics, through the daemon's own HTTP client.
absl::StatusOr<std::string> ScrapeMetrics(const std::string& address) {
  CurlHttpClient http;
  HttpRequest request;
  request.url = absl::StrCat("http://", address, "/metrics");
  request.max_response_bytes = size_t{64} << 20;
  ASSIGN_OR_RETURN(HttpResponse response, http.Send(request));
  if (response.status != 200) {
    return absl::UnavailableError(
        absl::StrCat("GET ", request.url, ": HTTP ", response.status));
  }
  return std::move(response.body);
}

// The values of family `name` by its `phase` label, read with the tests'
// parser of the exposition format.
std::map<std::string, double> PhaseSamples(const std::string& text,
                                           const std::string& name) {
  std::map<std::string, double> out;
  for (const testing::PromSample& sample : testing::ParseSamples(text)) {
    if (sample.name != name) continue;
    auto phase = sample.labels.find("phase");
    if (phase != sample.labels.end()) out[phase->second] = sample.value;
  }
  return out;
}

absl::StatusOr<std::unique_ptr<BenchDaemon>> BenchDaemon::Start(
    const DaemonOptions& options, absl::Duration timeout) {
  std::unique_ptr<BenchDaemon> daemon(new BenchDaemon());
  daemon->target_ = absl::StrCat("127.0.0.1:", FreePort());
  daemon->metrics_address_ = absl::StrCat("127.0.0.1:", FreePort());
  std::vector<std::string> argv = {options.binary,
                                   "--data-dir",
                                   options.data_dir,
                                   "--listen",
                                   daemon->target_,
                                   "--metrics-listen",
                                   daemon->metrics_address_,
                                   "--workers",
                                   absl::StrCat(options.workers),
                                   "--log-level",
                                   "warn"};
  argv.insert(argv.end(), options.extra_args.begin(), options.extra_args.end());
  const std::string log = options.log_path.empty()
                              ? absl::StrCat(options.data_dir, "/backfilld.log")
                              : options.log_path;
  absl::StatusOr<std::unique_ptr<ChildProcess>> process =
      ChildProcess::Start(argv, log);
  if (!process.ok()) return process.status();
  daemon->process_ = std::move(*process);
  // A refused connection (the daemon not listening yet) puts a channel's
  // connection into gRPC's reconnect backoff, a second and more, which
  // would count as start-up time: each probe has a channel of its own, with
  // a connection of its own, and the one that sees SERVING is kept.
  const absl::Time deadline = daemon->process_->started() + timeout;
  while (true) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    auto client = std::make_unique<BackfillClient>(grpc::CreateCustomChannel(
        daemon->target_, grpc::InsecureChannelCredentials(), args));
    client->set_rpc_timeout(absl::Minutes(5));
    absl::StatusOr<bool> serving =
        client->CheckHealth("backfill.v1.BackfillService");
    const absl::Time now = absl::Now();
    if (serving.ok() && *serving) {
      daemon->seconds_to_serving_ =
          absl::ToDoubleSeconds(now - daemon->process_->started());
      daemon->client_ = std::move(client);
      return daemon;
    }
    if (absl::StatusOr<ProcessSample> alive = daemon->process_->Sample();
        !alive.ok() || now > deadline) {
      return absl::UnavailableError(
          absl::StrCat("backfilld did not start serving on ", daemon->target_,
                       " (see ", log, ")"));
    }
    absl::SleepFor(absl::Milliseconds(2));
  }
}

BenchDaemon::~BenchDaemon() = default;

absl::StatusOr<v1::Backfill> BenchDaemon::WaitForJob(const std::string& id) {
  v1::Backfill last;
  absl::Status watched = client_->Watch(
      id,
      [&last](const v1::Backfill& update) {
        last = update;
        return true;
      },
      v1::BACKFILL_VIEW_BASIC);
  if (!watched.ok()) return watched;
  if (last.state() != v1::BACKFILL_STATE_SUCCEEDED) {
    return absl::AbortedError(absl::StrCat("job ", id, " ended ",
                                           v1::BackfillState_Name(last.state()),
                                           ": ", last.message()));
  }
  return last;
}

absl::StatusOr<JobRun> BenchDaemon::RunJob(const v1::BackfillRequest& request) {
  absl::StatusOr<ProcessSample> before = Sample();
  if (!before.ok()) return before.status();
  const absl::Time start = absl::Now();
  absl::StatusOr<v1::SubmitBackfillResponse> submitted =
      client_->Submit(request, "");
  if (!submitted.ok()) return submitted.status();
  absl::StatusOr<v1::Backfill> ended = WaitForJob(submitted->backfill().id());
  if (!ended.ok()) return ended.status();
  JobRun run;
  run.wall_seconds = absl::ToDoubleSeconds(absl::Now() - start);
  absl::StatusOr<ProcessSample> after = Sample();
  if (!after.ok()) return after.status();
  run.daemon_cpu_seconds = after->cpu_seconds - before->cpu_seconds;
  run.job = *std::move(ended);
  return run;
}

int BenchDaemon::Stop() { return process_->Stop(absl::Minutes(1)); }

void BenchDaemon::Kill() { process_->Kill(); }

}  // namespace backfill::bench
