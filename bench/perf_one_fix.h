// The one-fix rows of the performance suite (backfill_perf --only one-fix):
// how long a one-partition fix takes from SubmitBackfill to SUCCEEDED, as
// the client sees it, against the same transform and publish run as plain
// SQL in one transaction on the same warehouse.
//
// One daemon over the trivial hourly pipeline (bench/perf_fixtures.h) runs
// jobs of one hour partition each, one after the other, each on an hour no
// job published before (so each is recomputed and published, never cut off
// early). Per job the client notes when it sent the submit and when the
// watch said SUCCEEDED; the job's audit events say when it entered each
// state, on the same clock (same machine). The baseline runs the
// transform's SELECT into a table of its own with DELETE and INSERT in one
// transaction, through the SQLite C API with the engine's pragmas (WAL,
// synchronous=NORMAL), for as many other hours.
//
// The rows: the daemon's p50 and p99 against the baseline's, and where the
// daemon's time goes (the medians of submit, queue, recompute, validate,
// publish, confirm, and the watch's notice).
//
// AddOneFixRows owns the daemon it starts: stopped before it returns, also
// on failure. Not thread-safe: one thread calls it.

#ifndef BACKFILL_BENCH_PERF_ONE_FIX_H_
#define BACKFILL_BENCH_PERF_ONE_FIX_H_

#include <filesystem>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "bench/perf_table.h"

namespace backfill::bench {

struct OneFixBenchOptions {
  bool quick = false;         // 20 jobs instead of 200
  std::string backfilld;      // the daemon's binary
  std::filesystem::path dir;  // where the data directory goes
  int workers = 2;            // --workers
};

// Measures the rows above and appends them to `rows`.
absl::Status AddOneFixRows(const OneFixBenchOptions& options,
                           std::vector<Row>* rows);

}  // namespace backfill::bench

#endif  // BACKFILL_BENCH_PERF_ONE_FIX_H_
