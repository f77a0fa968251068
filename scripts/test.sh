#!/usr/bin/env bash
# Installs the dependencies, then runs three suites, each a build directory
# of its own:
#   build       every test (scripts/build.sh's optimised build)
#   build-asan  AddressSanitizer + UndefinedBehaviorSanitizer (-Og): the core,
#               storage and server tests, the crash harness and the
#               end-to-end fault tests (-DBACKFILL_TEST_SET=sanitize)
#   build-fuzz  the libFuzzer targets (clang), each run briefly over its seed
#               corpus (fuzz/; one test per target)
# Once the first suite is built, the other builds run one after the other at
# low priority (nice) beside the tests: the tests wait on daemons, servers
# and timers more than they compute. Exits non-zero if any run fails. The summary gives each suite's
# count and the time of each phase (build, ctest) and in all; the last line
# is the combined count: "N passed, N failed". docs/testing.md has more.
# Environment: BACKFILL_JOBS (parallel compile jobs, default: CPUs),
#              BACKFILL_TEST_JOBS (parallel tests, default 4),
#              BACKFILL_FUZZ_SECONDS (seconds per fuzz target, default 10),
#              BACKFILL_OVERLAP=0 (build each suite only after the previous
#              suite's tests).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

"$ROOT/scripts/install-deps.sh"
# The console's browser tests drive Debian's chromium with puppeteer-core,
# installed from npm as tests/browser/package-lock.json pins it.
if ! command -v npm >/dev/null 2>&1; then
  echo "==> installing Node.js and npm for the console's browser tests"
  apt-get update -q && apt-get install -y -q --no-install-recommends nodejs npm
fi
if [[ ! -f tests/browser/node_modules/.package-lock.json ||
  tests/browser/package-lock.json -nt tests/browser/node_modules/.package-lock.json ]]; then
  (cd tests/browser && npm ci --no-audit --no-fund)
fi

test_jobs="${BACKFILL_TEST_JOBS:-4}"
overlap="${BACKFILL_OVERLAP:-1}"
summaries=()
times=()
total_passed=0
total_failed=0

# duration SECONDS: "4m07s".
duration() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }

# LeakSanitizer needs ptrace-like access to the process (it stops threads
# to scan their stacks). Some containers forbid that, and then every process
# dies with "LeakSanitizer has encountered a fatal error". Probe it with a
# deliberately leaking program: keep leak detection on when LSan works, and
# disable it (with a notice) only where the environment cannot run it.
# Before any build: the sanitizer builds run their tests to list them.
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

# The suites: name, build directory, cmake options.
suite_names=(build build-asan build-fuzz)
declare -A suite_options=(
  [build]=""
  [build-asan]="-DBACKFILL_SANITIZE=ON -DBACKFILL_TEST_SET=sanitize -DBACKFILL_BUILD_BENCH=OFF"
  # Each fuzz target runs for BACKFILL_FUZZ_SECONDS over its seed corpus
  # (scripts/fuzz.sh runs longer).
  [build-fuzz]="-DCMAKE_CXX_COMPILER=clang++ -DBACKFILL_FUZZ=ON -DBACKFILL_FUZZ_OPTIMIZE=O0 -DBACKFILL_FUZZ_SECONDS=${BACKFILL_FUZZ_SECONDS:-10}"
)
declare -A build_pid=() build_start=() build_end=() build_rc=()

# start_build NAME [nice [AFTER]]: configures and builds NAME's directory in
# the background, in a process group of its own, its output in
# DIR/build-output.log; with AFTER (a suite whose build was started), only
# once that build has ended. DIR/build-start records when it began.
start_build() {
  local name="$1" prio="${2:-0}" dir="$ROOT/$1" after_pid=""
  if [[ -n ${3:-} ]]; then after_pid="${build_pid[$3]}"; fi
  mkdir -p "$dir"
  rm -f "$dir/build-start"
  echo "==> [$name] build $dir${2:+ (in the background, nice $prio)}${3:+, after the build of $3}"
  build_start[$name]=$(date +%s)
  # shellcheck disable=SC2016,SC2086 # the script is the inner shell's; the options are words
  setsid -w nice -n "$prio" bash -c '
    while [[ -n $1 ]] && kill -0 "$1" 2>/dev/null; do sleep 1; done
    date +%s >"$2/build-start"
    shift 2
    exec "$@"' _ "$after_pid" "$dir" "$ROOT/scripts/build.sh" "$dir" ${suite_options[$name]} \
    >"$dir/build-output.log" 2>&1 &
  build_pid[$name]=$!
}
# A build still running when this script ends (interrupted) ends with it.
stop_builds() {
  local pid
  for pid in "${build_pid[@]}"; do kill -- "-$pid" 2>/dev/null || true; done
}
trap stop_builds EXIT

# finish_build NAME: raises NAME's build to normal priority (nothing else
# runs beside it now), waits for it and shows how it ended.
finish_build() {
  local name="$1" dir="$ROOT/$1" rc=0
  renice -n 0 -g "${build_pid[$name]}" >/dev/null 2>&1 || true
  wait "${build_pid[$name]}" || rc=$?
  unset "build_pid[$name]"
  build_rc[$name]=$rc
  if [[ -s $dir/build-start ]]; then build_start[$name]=$(<"$dir/build-start"); fi
  # When the build itself ended (its log's last write), which for a build
  # beside the tests may be well before they end.
  build_end[$name]=$(stat -c %Y "$dir/build-output.log" 2>/dev/null || date +%s)
  if ((rc != 0)); then
    echo "==> [$name] build failed (exit $rc); the end of $dir/build-output.log:" >&2
    grep -E -B2 -A20 'error|FAILED' "$dir/build-output.log" | tail -n 80 >&2 ||
      tail -n 80 "$dir/build-output.log" >&2
  else
    echo "==> [$name] built in $(duration $((build_end[$name] - build_start[$name])))"
    tail -n 3 "$dir/build-output.log"
  fi
}

# run_tests NAME: runs ctest in NAME's directory; adds the counts of ctest's
# summary line to the totals (a failed build counts as one failure).
run_tests() {
  local name="$1" dir="$ROOT/$1"
  local build_time=$((build_end[$name] - build_start[$name]))
  if ((build_rc[$name] != 0)); then
    summaries+=("[$name] build failed")
    times+=("$(printf '%-12s build %s' "[$name]" "$(duration "$build_time")")")
    total_failed=$((total_failed + 1))
    return 0
  fi
  echo "==> [$name] ctest"
  local start=$SECONDS log="$dir/ctest-output.log" rc=0
  ctest --test-dir "$dir" --output-on-failure -j "$test_jobs" 2>&1 | tee "$log" ||
    rc=$?
  times+=("$(printf '%-12s build %s  ctest %s' "[$name]" \
    "$(duration "$build_time")" "$(duration $((SECONDS - start)))")")
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

# Each suite's tests; the other suites' builds, one after the other, beside
# them at the lowest priority from the end of the first build on
# (BACKFILL_OVERLAP=0: each build after the previous suite's tests).
start_build "${suite_names[0]}"
finish_build "${suite_names[0]}"
if [[ $overlap == 1 ]]; then
  previous=""
  for name in "${suite_names[@]:1}"; do
    start_build "$name" 19 "$previous"
    previous="$name"
  done
fi
for i in "${!suite_names[@]}"; do
  name="${suite_names[$i]}"
  next="${suite_names[$((i + 1))]:-}"
  run_tests "$name"
  if [[ -n $next ]]; then
    if [[ $overlap != 1 ]]; then start_build "$next"; fi
    finish_build "$next"
  fi
done

echo
echo "==> summary"
for s in "${summaries[@]}"; do echo "$s"; done
echo "==> times ($(nproc 2>/dev/null || echo '?') CPUs, load at the end$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null | sed 's/^/ /'))"
for t in "${times[@]}"; do echo "$t"; done
if [[ $overlap == 1 ]]; then
  echo "(build-asan, then build-fuzz, built beside the tests once build was built)"
fi
echo "total        $(duration "$SECONDS")"
echo "$total_passed passed, $total_failed failed"
((total_failed == 0))
