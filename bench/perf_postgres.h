// The postgres rows of the performance suite (backfill_perf --only
// postgres): backfilld on a PostgreSQL warehouse against the same SQL run
// by hand on the same server. One throwaway PostgreSQL server (the test
// support's PostgresTestServer, with pg_stat_statements loaded) holds each
// case in a database of its own (C collation); every daemon keeps its state
// in state.db. Measured side by side in one run:
//   - a full reload of the demo's daily revenue (10 million orders over 365
//     days) through backfilld against psql running the same SQL, one
//     transaction per day: wall time, and CPU (the daemon's and the
//     server's during the job against psql's and the server's during
//     psql's run); the two results compared with EXCEPT both ways first;
//   - the partitions rows' trivial job (bench/perf_fixtures.h) on a
//     PostgreSQL warehouse: partitions per second, and the warehouse
//     statements per partition (pg_stat_statements);
//   - one partition replaced by a job: the publish's time (the job's audit
//     events) beside the transform's (the daemon's phase counters), on
//     5,000 rows (the validation's diff grows with the square of a
//     partition's rows); and one of 5 million rows replaced by hand: the
//     engine's publish as SQL (rollback copy, DELETE, INSERT), TRUNCATE of
//     a declarative partition + INSERT, and DETACH + ATTACH PARTITION of a
//     staged table.
//
// AddPostgresRows owns the server and every daemon it starts: all of them
// are stopped and the server's directory removed before it returns, also
// on failure. Not thread-safe: one thread calls it.

#ifndef BACKFILL_BENCH_PERF_POSTGRES_H_
#define BACKFILL_BENCH_PERF_POSTGRES_H_

#include <filesystem>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "bench/perf_table.h"

namespace backfill::bench {

struct PostgresBenchOptions {
  bool quick = false;         // small sizes: proves the rows run
  std::string backfilld;      // the daemon's binary
  std::filesystem::path dir;  // where the data dirs and scripts go
  int workers = 2;            // the daemon's --workers
};

// Measures the rows above and appends them to `rows`.
absl::Status AddPostgresRows(const PostgresBenchOptions& options,
                             std::vector<Row>* rows);

}  // namespace backfill::bench

#endif  // BACKFILL_BENCH_PERF_POSTGRES_H_
