#!/usr/bin/env bash
# The performance suite: builds backfilld and the suite in Release into
# build-release/ and runs build-release/bin/backfill_perf, which prints one
# markdown table of every performance goal with the figures it was measured
# from (see docs/performance.md). Takes about 14 minutes and ~12 GB of
# temporary disk at full size on a 2-core machine: about 5 minutes for
# the SQLite rows, 3 for the replicas rows and 4 for the postgres rows
# (both start a PostgreSQL server of their own), and 4 minutes and ~2 GB
# for the million rows.
# Usage: scripts/bench.sh [--quick] [backfill_perf options...]
#   --quick       small data: proves the suite runs, measures nothing
#   --only G,...  some groups of rows: one-fix, cost, partitions, plan-size,
#                 replicas, postgres (a PostgreSQL warehouse against psql),
#                 million (a job of 1,000,000 partitions)
#   --work-dir D  where the generated data goes (default: $TMPDIR or /tmp)
#   --keep        keep the generated data
# Environment: BACKFILL_JOBS (default: number of CPUs).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="$ROOT/build-release"

"$ROOT/scripts/install-deps.sh"

jobs="${BACKFILL_JOBS:-$(nproc 2>/dev/null || echo 2)}"
launcher=()
if command -v ccache >/dev/null 2>&1; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
cmake -S "$ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release \
  -DBACKFILL_BUILD_TESTS=OFF -DBACKFILL_BUILD_BENCH=ON "${launcher[@]}" >/dev/null
cmake --build "$BUILD_DIR" -j "$jobs" --target backfilld backfill_perf \
  backfill_echo_server

exec "$BUILD_DIR/bin/backfill_perf" "$@"
