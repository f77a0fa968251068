# shellcheck shell=bash
# shellcheck disable=SC2034 # STOP_RC is read by the scripts that source this file
# What the demo scripts (demo.sh, demo_replay.sh) share: their output and
# how they stop the processes they start. Sourced, not run: the script sets
# DEMO_NAME (the prefix of its messages) first.

if [[ -t 1 ]]; then
  step() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }
else
  step() { printf '\n==> %s\n' "$*"; }
fi
die() {
  echo "$DEMO_NAME: $*" >&2
  exit 1
}

# True while the process runs (a zombie, exited but not reaped, is not
# running).
running() {
  [[ -n $1 && -r /proc/$1/stat ]] && [[ $(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) != Z ]]
}

# stop_pid PID SECONDS WHAT: SIGTERM, wait up to SECONDS for it to exit,
# then SIGKILL (saying so, naming WHAT). Sets STOP_RC to its exit status.
STOP_RC=0
stop_pid() {
  local pid=$1 seconds=$2 what=$3 i
  STOP_RC=0
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < seconds * 10; i++)); do
    running "$pid" || break
    sleep 0.1
  done
  if running "$pid"; then
    echo "$DEMO_NAME: $what (pid $pid) did not exit $seconds s after SIGTERM; killing it" >&2
    kill -KILL "$pid" 2>/dev/null || true
  fi
  wait "$pid" 2>/dev/null || STOP_RC=$?
}

# stop_daemon: stop_pid of $DAEMON_PID (60 s for the drain), which it
# clears. Sets STOP_RC to the daemon's exit status.
stop_daemon() {
  local pid="$DAEMON_PID"
  STOP_RC=0
  [[ -n $pid ]] || return 0
  DAEMON_PID=""
  stop_pid "$pid" 60 backfilld
}

# wait_listening LOG: waits until the backfilld of $DAEMON_PID writes to
# LOG that it listens (at most 60 s); dies with LOG when it exits first or
# does not in time.
wait_listening() {
  local log="$1" i
  for ((i = 0; i < 600; i++)); do
    grep -q 'backfilld listening on' "$log" && return 0
    if ! running "$DAEMON_PID"; then
      local rc=0
      wait "$DAEMON_PID" || rc=$?
      DAEMON_PID=""
      cat "$log" >&2
      die "backfilld exited with status $rc during start-up"
    fi
    sleep 0.1
  done
  cat "$log" >&2
  die "backfilld did not report 'listening' within 60 s"
}
