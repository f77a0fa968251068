// Closed-loop gRPC load for the benchmarks: many clients calling one unary
// method as fast as it answers, measured as calls per second and latency
// percentiles. Two methods are loaded the same way, so that their results
// compare: backfill.v1.BackfillService/GetBackfill in the BASIC view on a
// backfilld, and backfill.bench.Echo/Echo on a backfill_echo_server
// (bench/echo_server.cc), a bare gRPC service with the same message size.
//
// Each client is a thread of its own with a channel of its own (its own TCP
// connection), calling in a loop: a warmup not counted, then the measured
// window. A call counts in the window when it ends in it. The load functions
// create and join their threads and channels before they return; they hold
// nothing afterwards. They are thread-safe, but two loads running at once
// share the machine and measure each other.

#ifndef BACKFILL_BENCH_RPC_LOAD_H_
#define BACKFILL_BENCH_RPC_LOAD_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace backfill::bench {

struct LoadResult {
  int clients = 0;
  double seconds = 0;       // measured window
  int64_t calls = 0;        // successful calls in the window
  int64_t errors = 0;       // failed calls in the window
  std::string first_error;  // of the first failed call in the window
  double qps = 0;           // calls / seconds
  // Latency of the successful calls in the window, in microseconds.
  double p50_us = 0, p99_us = 0, max_us = 0;
};

// Calls GetBackfill (view BACKFILL_VIEW_BASIC) of job `job_id` on the
// backfilld at `target` (HOST:PORT, no TLS, no credentials) from `clients`
// threads for `warmup`, then for `duration` measured. A call counts as a
// success only when its status is OK. An error when the target cannot be
// reached, or when a first call (before the load) fails: its status.
absl::StatusOr<LoadResult> LoadGetBackfill(const std::string& target,
                                           const std::string& job_id,
                                           int clients, absl::Duration warmup,
                                           absl::Duration duration);

// Calls Echo on the backfill_echo_server at `target` with a payload of
// `payload_bytes` bytes, as LoadGetBackfill does. Give it the size of one
// GetBackfill answer (GetBackfillAnswerBytes) so that both loads carry the
// same bytes.
absl::StatusOr<LoadResult> LoadEcho(const std::string& target,
                                    size_t payload_bytes, int clients,
                                    absl::Duration warmup,
                                    absl::Duration duration);

// The size (ByteSizeLong) of the answer to one GetBackfill of `job_id` in
// the BASIC view on the backfilld at `target`; the call's status if it
// fails.
absl::StatusOr<size_t> GetBackfillAnswerBytes(const std::string& target,
                                              const std::string& job_id);

// Calls Echo on `target` until a call succeeds: OK then, or
// DEADLINE_EXCEEDED with the last call's error once `timeout` has passed.
absl::Status WaitForEcho(const std::string& target, absl::Duration timeout);

}  // namespace backfill::bench

#endif  // BACKFILL_BENCH_RPC_LOAD_H_
