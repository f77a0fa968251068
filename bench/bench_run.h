// What the benchmarks share: timing, dying on an error, and running one
// backfill through a real BackfillManager (with a fresh SQLite state store)
// until it ends. Header-only; not thread-safe (one benchmark thread).

#ifndef BACKFILL_BENCH_BENCH_RUN_H_
#define BACKFILL_BENCH_BENCH_RUN_H_

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "core/base/clock.h"
#include "core/run/backfill_manager.h"
#include "storage/sqlite/state/sqlite_state_store.h"

namespace backfill::bench {

inline double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since)
      .count();
}

// Exits the benchmark with `what` and the status when it is not OK.
inline void Die(const absl::Status& s, const char* what) {
  if (s.ok()) return;
  std::fprintf(stderr, "benchmark: %s: %s\n", what, s.ToString().c_str());
  std::exit(1);
}

struct RunResult {
  double seconds = 0;  // submit to the job's end, wall time
  Job job;
};

// Runs `r` on `engine` with `workers` workers and a new state store at
// `state_path`; exits unless the job SUCCEEDED.
inline RunResult RunJob(const Catalog& catalog, const std::string& state_path,
                        Engine* engine, int workers, const BackfillRequest& r) {
  auto store = SqliteStateStore::Open(state_path);
  Die(store.status(), "open state store");
  SystemClock clock;
  ManagerOptions options;
  options.workers = workers;
  BackfillManager manager(&catalog, store->get(), engine, &clock, nullptr,
                          options);
  Die(manager.Start(), "start");
  const auto start = std::chrono::steady_clock::now();
  auto submitted = manager.Submit(r, SubmitOptions{});
  Die(submitted.status(), "submit");
  uint64_t version = 0;
  RunResult result;
  while (true) {
    auto job = manager.WaitForChange(submitted->job.id, &version,
                                     absl::Now() + absl::Seconds(1));
    Die(job.status(), "watch");
    if (IsTerminal(job->state)) {
      result.job = *job;
      break;
    }
    // Read at most every millisecond, as a watching client would (bounded
    // rate), so the watcher's reads do not dominate what is measured.
    absl::SleepFor(absl::Milliseconds(1));
  }
  result.seconds = Seconds(start);
  if (result.job.state != JobState::kSucceeded) {
    std::fprintf(stderr, "benchmark: job ended %s: %s\n",
                 JobStateName(result.job.state), result.job.message.c_str());
    std::exit(1);
  }
  return result;
}

}  // namespace backfill::bench

#endif  // BACKFILL_BENCH_BENCH_RUN_H_
