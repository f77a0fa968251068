#!/usr/bin/env bash
# Configures and builds backfilld into build/ (binaries in build/bin/).
# Usage: scripts/build.sh [BUILD_DIR [extra cmake -D options...]]
# Environment: BACKFILL_BUILD_TYPE (default RelWithDebInfo: -O2 with line
#              tables, see BACKFILL_FULL_DEBUG_INFO in CMakeLists.txt),
#              BACKFILL_JOBS (default: number of CPUs).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${1:-$ROOT/build}"
shift || true

jobs="${BACKFILL_JOBS:-$(nproc 2>/dev/null || echo 2)}"
launcher=()
if command -v ccache >/dev/null 2>&1; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  # Cache keys from paths relative to the repository, without the build
  # directory's own path: two clones (or worktrees) share their results.
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$ROOT}"
  export CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"
fi

cmake -S "$ROOT" -B "$BUILD_DIR" \
  -DCMAKE_BUILD_TYPE="${BACKFILL_BUILD_TYPE:-RelWithDebInfo}" \
  "${launcher[@]}" "$@"
cmake --build "$BUILD_DIR" -j "$jobs"
