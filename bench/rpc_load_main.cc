// backfill_rpc_load: runs the loads of bench/rpc_load.h by hand, against a
// running backfilld and/or a running backfill_echo_server.
//
// Usage: backfill_rpc_load [--target HOST:PORT --job ID]
//                          [--echo-target HOST:PORT] [--clients N]
//                          [--seconds S] [--warmup-seconds S]
//                          [--payload-bytes N]
// Prints one line per load (qps, p50, p99, max, errors), then the ratio of
// the two rates when both ran. The echo payload is, unless --payload-bytes
// is given, the size of one GetBackfill answer of --job (else 1024 bytes).
// Exits 1 when a load cannot run or a call failed, 2 on bad flags.

#include <cstdint>
#include <cstdio>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "bench/rpc_load.h"

namespace backfill::bench {
namespace {

// Prints `r` as one line; false when a call failed.
bool PrintResult(const std::string& name, const LoadResult& r) {
  absl::PrintF(
      "%-12s clients %d  qps %9.0f  p50 %7.0f us  p99 %7.0f us  max %8.0f us  "
      "errors %d\n",
      name, r.clients, r.qps, r.p50_us, r.p99_us, r.max_us, r.errors);
  if (r.errors > 0) {
    absl::FPrintF(stderr, "%s: first error: %s\n", name, r.first_error);
  }
  return r.errors == 0;
}

int Main(int argc, char** argv) {
  std::string target;
  std::string job;
  std::string echo_target;
  int clients = 32;
  double seconds = 5;
  double warmup_seconds = 1;
  int64_t payload_bytes = -1;

  CLI::App app{"backfill_rpc_load: GetBackfill and echo load by hand",
               "backfill_rpc_load"};
  CLI::Option* target_option =
      app.add_option("--target", target, "backfilld address, HOST:PORT");
  CLI::Option* job_option =
      app.add_option("--job", job, "Job whose GetBackfill (BASIC) is called");
  target_option->needs(job_option);
  job_option->needs(target_option);
  app.add_option("--echo-target", echo_target,
                 "backfill_echo_server address, HOST:PORT");
  app.add_option("--clients", clients, "Concurrent clients")
      ->check(CLI::Range(1, 10000))
      ->capture_default_str();
  app.add_option("--seconds", seconds, "Measured seconds per load")
      ->check(CLI::Range(0.001, 3600.0))
      ->capture_default_str();
  app.add_option("--warmup-seconds", warmup_seconds,
                 "Seconds of calls not counted, before each measure")
      ->check(CLI::Range(0.0, 3600.0))
      ->capture_default_str();
  app.add_option("--payload-bytes", payload_bytes,
                 "Echo payload size; default: one GetBackfill answer's size")
      ->check(CLI::Range(0, 4 << 20));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);  // prints help or the error
    return code == 0 ? 0 : 2;
  }
  if (target.empty() && echo_target.empty()) {
    std::fprintf(stderr,
                 "backfill_rpc_load: give --target and --job, or "
                 "--echo-target, or both\n");
    return 2;
  }
  const absl::Duration warmup = absl::Seconds(warmup_seconds);
  const absl::Duration duration = absl::Seconds(seconds);

  bool ok = true;
  double backfill_qps = 0;
  if (!target.empty()) {
    absl::StatusOr<size_t> answer_bytes = GetBackfillAnswerBytes(target, job);
    if (!answer_bytes.ok()) {
      absl::FPrintF(stderr, "backfill_rpc_load: GetBackfill %s on %s: %s\n",
                    job, target, answer_bytes.status().ToString());
      return 1;
    }
    if (payload_bytes < 0) payload_bytes = static_cast<int64_t>(*answer_bytes);
    absl::PrintF("GetBackfill BASIC answer: %d bytes\n", *answer_bytes);
    absl::StatusOr<LoadResult> r =
        LoadGetBackfill(target, job, clients, warmup, duration);
    if (!r.ok()) {
      absl::FPrintF(stderr, "backfill_rpc_load: GetBackfill: %s\n",
                    r.status().ToString());
      return 1;
    }
    ok = PrintResult("GetBackfill", *r) && ok;
    backfill_qps = r->qps;
  }
  if (!echo_target.empty()) {
    if (payload_bytes < 0) payload_bytes = 1024;
    if (absl::Status s = WaitForEcho(echo_target, absl::Seconds(10)); !s.ok()) {
      absl::FPrintF(stderr, "backfill_rpc_load: %s\n", s.ToString());
      return 1;
    }
    absl::StatusOr<LoadResult> r =
        LoadEcho(echo_target, static_cast<size_t>(payload_bytes), clients,
                 warmup, duration);
    if (!r.ok()) {
      absl::FPrintF(stderr, "backfill_rpc_load: Echo: %s\n",
                    r.status().ToString());
      return 1;
    }
    ok = PrintResult(absl::StrFormat("Echo %dB", payload_bytes), *r) && ok;
    if (!target.empty() && r->qps > 0) {
      absl::PrintF("GetBackfill / Echo qps: %.2fx\n", backfill_qps / r->qps);
    }
  }
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace backfill::bench

int main(int argc, char** argv) { return backfill::bench::Main(argc, argv); }
