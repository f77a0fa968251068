// The million rows of the performance suite (backfill_perf --only million):
// a job of 1,000,000 hour partitions (an hourly dataset over 114 years)
// with the trivial transform of the partitions rows (bench/perf_fixtures.h),
// on a daemon started with --max-partitions-per-job 1000000.
//
// The rows:
//   - PlanBackfill of the million partitions as the client waits for it
//     (the median of three, after one not counted), on a daemon of its own;
//   - the job from SubmitBackfill to SUCCEEDED on a fresh daemon: partitions
//     per second, the daemon's peak resident memory (VmHWM), the time in
//     each state (from the job's audit events) and the resident memory at
//     its highest in each (VmRSS sampled every half second);
//   - GetBackfill (BASIC), ListBackfills (a page of 50) and WatchBackfill's
//     first update while that job runs, p50 and p99 (bench/perf_read_probe.h);
//   - a second job of the next million hours, its daemon killed (SIGKILL)
//     once a tenth of it is checkpointed and started again: the time to
//     SERVING and to the job's next checkpoint; the job must then succeed.
//     Its rate with the restart in it and the peak of each of its two
//     processes are printed beside.
// With quick, the same on 20,000 partitions.
//
// AddMillionRows owns the daemons it starts: each is stopped (or killed)
// before it returns, also on failure. Not thread-safe: one thread calls it
// (it runs a read probe and a memory sampler on threads of their own, both
// joined before it returns).

#ifndef BACKFILL_BENCH_PERF_MILLION_H_
#define BACKFILL_BENCH_PERF_MILLION_H_

#include <filesystem>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "bench/perf_table.h"

namespace backfill::bench {

struct MillionBenchOptions {
  bool quick = false;         // 20,000 partitions instead of 1,000,000
  std::string backfilld;      // the daemon's binary
  std::filesystem::path dir;  // where the data directory goes
  int workers = 2;            // --workers
};

// Measures the rows above and appends them to `rows`.
absl::Status AddMillionRows(const MillionBenchOptions& options,
                            std::vector<Row>* rows);

}  // namespace backfill::bench

#endif  // BACKFILL_BENCH_PERF_MILLION_H_
