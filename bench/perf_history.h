// Finished jobs written straight into a daemon's state store, so that a
// restart can be measured over a state.db the size years of use leave
// behind without running every one of those partitions first.
//
// Each job is made the way the daemon makes one: planned by the Planner
// over the daemon's own pipelines and warehouse, created by the state
// store (one PENDING task per partition), then moved through the job state
// machine's states RUNNING, VALIDATING, PUBLISHING and CONFIRMING to
// SUCCEEDED with its tasks STAGED and then PUBLISHED, and published by the
// engine with an empty staging: the warehouse records the publication, and
// the job's partitions hold no rows (for the trivial pipeline these are
// made for, what a run of an empty source would leave). The daemon must not
// run meanwhile.
//
// A free function; not thread-safe against other writers of the store.

#ifndef BACKFILL_BENCH_PERF_HISTORY_H_
#define BACKFILL_BENCH_PERF_HISTORY_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/model/job.h"

namespace backfill::bench {

// Records one finished job per request in <data_dir>/state.db, planned over
// the pipelines in <data_dir>/pipelines and the warehouse they name.
absl::Status RecordFinishedJobs(const std::string& data_dir,
                                const std::vector<BackfillRequest>& requests);

}  // namespace backfill::bench

#endif  // BACKFILL_BENCH_PERF_HISTORY_H_
