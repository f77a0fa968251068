// The replicas rows of the performance suite (backfill_perf --only
// replicas): backfilld keeping its state in PostgreSQL (--state-dsn), as one
// replica and as a group of three, beside one replica keeping it in
// state.db. One throwaway PostgreSQL server (the test support's
// PostgresTestServer) holds every warehouse and state store, each case in
// databases of its own, and every case publishes into a PostgreSQL
// warehouse, so that the state stores are compared on equal terms. Measured
// side by side in one run:
//   - the partitions rows' trivial job (bench/perf_fixtures.h) from submit
//     to SUCCEEDED, in partitions per second, with the peak resident memory
//     of the replica that ran it: one replica with state.db, one with
//     --state-dsn, and three with --state-dsn (the job submitted on one);
//   - three such jobs on disjoint partitions, submitted at once: all to one
//     replica, and one to each replica of three;
//   - failover: the replica running a job killed with SIGKILL; the time
//     from the kill to the job's next claim by another replica
//     (backfill_state.job_leases) and to its next checkpoint (a task's state
//     in backfill_state.tasks), with --lease-seconds 2 and 10.
//
// AddReplicaRows owns the server and every daemon it starts: all of them are
// stopped (or killed) and the server's directory removed before it
// returns, also on failure. Not thread-safe: one thread calls it (it runs
// threads of its own, which end before it returns).

#ifndef BACKFILL_BENCH_PERF_REPLICAS_H_
#define BACKFILL_BENCH_PERF_REPLICAS_H_

#include <filesystem>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "bench/perf_table.h"

namespace backfill::bench {

struct ReplicaBenchOptions {
  bool quick = false;         // small sizes: proves the rows run
  std::string backfilld;      // the daemon's binary
  std::filesystem::path dir;  // where the replicas' data dirs go
  int workers = 2;            // each replica's --workers
};

// Measures the rows above and appends them to `rows`.
absl::Status AddReplicaRows(const ReplicaBenchOptions& options,
                            std::vector<Row>* rows);

}  // namespace backfill::bench

#endif  // BACKFILL_BENCH_PERF_REPLICAS_H_
