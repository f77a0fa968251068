#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/) into build-fuzz/ with clang,
# AddressSanitizer and UBSan (scripts/build.sh, so ccache is used), then runs
# every target for SECONDS over a copy of its seed corpus (fuzz/corpus/NAME)
# and prints, per target: runs, execs/s, coverage (cov, ft), corpus size,
# CPU seconds and crashes. Exits non-zero when a target crashed (or found a
# leak, a timeout or an out-of-memory input); the input that did is printed.
# Usage: scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]   (default 60, all)
# Environment: BACKFILL_FUZZ_BUILD_DIR (default build-fuzz),
#              BACKFILL_FUZZ_OUT (runs' corpora, logs and crashing inputs;
#                default BUILD_DIR/fuzz-runs; wiped per target),
#              BACKFILL_FUZZ_PARALLEL (targets run at once, default 1),
#              BACKFILL_JOBS (compile jobs, as scripts/build.sh).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
seconds="${1:-60}"
shift || true
if ! [[ $seconds =~ ^[1-9][0-9]*$ ]]; then
  echo "fuzz.sh: SECONDS_PER_TARGET must be a positive whole number" >&2
  exit 2
fi
build="${BACKFILL_FUZZ_BUILD_DIR:-$ROOT/build-fuzz}"
out="${BACKFILL_FUZZ_OUT:-$build/fuzz-runs}"
parallel="${BACKFILL_FUZZ_PARALLEL:-1}"

CXX=clang++ "$ROOT/scripts/build.sh" "$build" -DCMAKE_CXX_COMPILER=clang++ \
  -DBACKFILL_FUZZ=ON -DBACKFILL_FUZZ_OPTIMIZE=O1

targets=("$@")
if ((${#targets[@]} == 0)); then
  for corpus in "$ROOT"/fuzz/corpus/*/; do
    targets+=("$(basename "$corpus")")
  done
fi
for t in "${targets[@]}"; do
  [[ -x $build/bin/$t ]] || {
    echo "fuzz.sh: no fuzz target $t in $build/bin" >&2
    exit 2
  }
done

# A leak is a finding too, when LeakSanitizer works here (see test.sh).
export ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

# run_target NAME: one run; writes $out/NAME/{log,cpu,rc}.
run_target() {
  local t="$1" dir="$out/$1"
  rm -rf "$dir"
  mkdir -p "$dir/corpus"
  cp -R "$ROOT/fuzz/corpus/$t/." "$dir/corpus/"
  local args=(-max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048
    -print_final_stats=1 -artifact_prefix="$dir/")
  [[ -f $ROOT/fuzz/$t.dict ]] && args+=(-dict="$ROOT/fuzz/$t.dict")
  local rc=0 TIMEFORMAT='%U %S'
  { time "$build/bin/$t" "${args[@]}" "$dir/corpus" >"$dir/log" 2>&1 || rc=$?; } \
    2>"$dir/cpu"
  echo "$rc" >"$dir/rc"
}

pids=()
for t in "${targets[@]}"; do
  echo "==> fuzzing $t for ${seconds}s (log: $out/$t/log)"
  run_target "$t" &
  pids+=($!)
  if ((${#pids[@]} >= parallel)); then
    wait "${pids[0]}"
    pids=("${pids[@]:1}")
  fi
done
for pid in "${pids[@]}"; do wait "$pid"; done

echo
echo "==> fuzz summary (${seconds}s per target)"
failed=0
for t in "${targets[@]}"; do
  dir="$out/$t"
  log="$dir/log"
  rc="$(cat "$dir/rc")"
  runs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)"
  speed="$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)"
  # The last status line: "#N ... cov: C ft: F corp: K/SIZE ...".
  status="$(grep -E '^#[0-9]+.*cov: ' "$log" | tail -n 1 || true)"
  cov="$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$status")"
  ft="$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$status")"
  corpus="$(find "$dir/corpus" -type f | wc -l)"
  read -r user sys <"$dir/cpu" || true
  cpu="$(awk -v u="${user:-0}" -v s="${sys:-0}" 'BEGIN { printf "%.0f", u + s }')"
  crashes=0
  artifacts=()
  while IFS= read -r f; do artifacts+=("$f"); done < <(
    find "$dir" -maxdepth 1 -type f \
      \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) |
      sort)
  crashes=${#artifacts[@]}
  if ((rc != 0 && crashes == 0)); then crashes=1; fi
  printf '%-20s runs %s, %s exec/s, cov %s ft %s, corpus %s, cpu %ss, crashes %s\n' \
    "$t" "${runs:-?}" "${speed:-?}" "${cov:-?}" "${ft:-?}" "$corpus" "$cpu" \
    "$crashes"
  if ((crashes > 0)); then
    failed=1
    for f in "${artifacts[@]}"; do echo "  crashing input: $f"; done
    ((${#artifacts[@]} > 0)) || echo "  exit $rc without an input; see $log"
    grep -m 3 -E 'ERROR: |runtime error: |invariant failed' "$log" |
      sed 's/^/  /' || true
  fi
done
exit "$failed"
