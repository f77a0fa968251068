#!/usr/bin/env bash
# Installs the dependencies, builds build/ and runs its tests, then builds
# build-asan/ with AddressSanitizer + UndefinedBehaviorSanitizer and runs the
# tests again, then builds the libFuzzer targets into build-fuzz/ (clang) and
# runs each briefly over its seed corpus (fuzz/; one test per target). Exits
# non-zero if any run fails. The summary gives each suite's count and the
# time of each phase (build, ctest) and in all; the last line is the
# combined count: "N passed, N failed".
# Environment: BACKFILL_JOBS (parallel compile jobs, default: CPUs),
#              BACKFILL_TEST_JOBS (parallel tests, default 2),
#              BACKFILL_FUZZ_SECONDS (seconds per fuzz target, default 20).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

"$ROOT/scripts/install-deps.sh"

test_jobs="${BACKFILL_TEST_JOBS:-2}"
summaries=()
times=()
total_passed=0
total_failed=0

# duration SECONDS: "4m07s".
duration() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }

# run_suite NAME BUILD_DIR [cmake options...]: builds and runs ctest; adds
# the counts of ctest's summary line to the totals (a failed build counts as
# one failure).
run_suite() {
  local name="$1" dir="$2"
  shift 2
  echo "==> [$name] build $dir"
  local start=$SECONDS
  if ! "$ROOT/scripts/build.sh" "$dir" "$@"; then
    summaries+=("[$name] build failed")
    times+=("$(printf '%-12s build %s' "[$name]" "$(duration $((SECONDS - start)))")")
    total_failed=$((total_failed + 1))
    return 0
  fi
  local built=$SECONDS
  echo "==> [$name] ctest"
  local log="$dir/ctest-output.log" rc=0
  ctest --test-dir "$dir" --output-on-failure -j "$test_jobs" 2>&1 | tee "$log" ||
    rc=$?
  times+=("$(printf '%-12s build %s  ctest %s' "[$name]" \
    "$(duration $((built - start)))" "$(duration $((SECONDS - built)))")")
  local line passed=0 failed=0
  line="$(grep -E '^[0-9]+% tests passed, [0-9]+ tests? failed out of [0-9]+' "$log" |
    tail -n 1 || true)"
  if [[ $line =~ ([0-9]+)\ tests?\ failed\ out\ of\ ([0-9]+) ]]; then
    failed=${BASH_REMATCH[1]}
    passed=$((BASH_REMATCH[2] - failed))
  elif ((rc != 0)); then
    failed=1
    line="ctest failed (exit $rc) without a summary"
  else
    line="no tests were found"
  fi
  # A sanitizer report anywhere in the tests' output (including a spawned
  # daemon's, which the e2e tests print) fails the run even if the test
  # process itself survived.
  local full="$dir/Testing/Temporary/LastTest.log"
  if grep -lE 'ERROR: (AddressSanitizer|LeakSanitizer)|runtime error: ' \
    "$log" "$full" >/dev/null 2>&1; then
    echo "==> [$name] sanitizer report found in the test output" >&2
    if ((failed == 0)); then failed=1; passed=$((passed > 0 ? passed - 1 : 0)); fi
    line="$line (sanitizer report found)"
  fi
  if ((rc != 0 && failed == 0)); then failed=1; fi
  summaries+=("[$name] $line")
  # Name the failed tests in the summary too: the summary is what survives
  # when only the end of a long log is kept.
  local failed_test
  while IFS= read -r failed_test; do
    summaries+=("[$name]   failed: ${failed_test#"${failed_test%%[![:space:]]*}"}")
  done < <(sed -n '/^The following tests FAILED:/,/^$/{/^[[:space:]]*[0-9]\+ - /p}' "$log")
  total_passed=$((total_passed + passed))
  total_failed=$((total_failed + failed))
}

run_suite build "$ROOT/build"

# LeakSanitizer needs ptrace-like access to the process (it stops threads
# to scan their stacks). Some containers forbid that, and then every process
# dies with "LeakSanitizer has encountered a fatal error". Probe it with a
# deliberately leaking program: keep leak detection on when LSan works, and
# disable it (with a notice) only where the environment cannot run it.
detect_leaks=1
probe_dir="$(mktemp -d)"
printf '#include <cstdlib>\nvoid* volatile p;\nint main() { p = std::malloc(7); p = nullptr; return 0; }\n' \
  >"$probe_dir/leak.cc"
if c++ -fsanitize=address -g "$probe_dir/leak.cc" -o "$probe_dir/leak" 2>/dev/null; then
  ASAN_OPTIONS=detect_leaks=1 "$probe_dir/leak" >/dev/null 2>"$probe_dir/out" || true
  if ! grep -q 'detected memory leaks' "$probe_dir/out"; then
    detect_leaks=0
    echo "==> LeakSanitizer does not work here (ptrace restricted?); running with detect_leaks=0" >&2
    sed -n 1,3p "$probe_dir/out" >&2
  fi
fi
rm -rf "$probe_dir"

export ASAN_OPTIONS="detect_leaks=$detect_leaks:abort_on_error=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
run_suite build-asan "$ROOT/build-asan" -DBACKFILL_SANITIZE=ON \
  -DBACKFILL_BUILD_BENCH=OFF

# The fuzz targets, with the same sanitizer options: each runs for
# BACKFILL_FUZZ_SECONDS over its seed corpus (scripts/fuzz.sh runs longer).
run_suite build-fuzz "$ROOT/build-fuzz" -DCMAKE_CXX_COMPILER=clang++ \
  -DBACKFILL_FUZZ=ON -DBACKFILL_FUZZ_SECONDS="${BACKFILL_FUZZ_SECONDS:-20}"

echo
echo "==> summary"
for s in "${summaries[@]}"; do echo "$s"; done
echo "==> times ($(nproc 2>/dev/null || echo '?') CPUs, load$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null | sed 's/^/ /'))"
for t in "${times[@]}"; do echo "$t"; done
echo "total        $(duration "$SECONDS")"
echo "$total_passed passed, $total_failed failed"
((total_failed == 0))
