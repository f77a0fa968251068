#!/usr/bin/env bash
# The PostgreSQL server a ctest run shares (tests/CMakeLists.txt: the
# fixture `postgres`, tests postgres.start and postgres.stop).
#
#   postgres_fixture.sh start DIR   creates a cluster in DIR/data and starts a
#                                   server on a free port of 127.0.0.1; writes
#                                   the port to DIR/port
#   postgres_fixture.sh stop DIR    stops it and removes DIR
#
# The server is the one PostgresTestServer starts for a test of its own
# (tests/testing/postgres_test_server.cc): trust authentication for the
# superuser `postgres`, durability off, its log in DIR/server.log. Tests
# reach it through BACKFILL_TEST_PG_DIR=DIR and each creates a database of
# its own in it (PostgresTestServer::StartOrShare). PostgreSQL refuses to run
# as root, so as root the programs run as the system user `postgres`.
# BACKFILL_PG_BIN_DIR names the directory of initdb and pg_ctl (default:
# `pg_config --bindir`, else Debian's postgresql-15).
set -euo pipefail

cmd="${1:-}"
dir="${2:-}"
if [[ -z $cmd || -z $dir ]]; then
  echo "usage: $0 start|stop DIR" >&2
  exit 2
fi

bin="${BACKFILL_PG_BIN_DIR:-}"
if [[ -z $bin ]]; then
  for candidate in "$(pg_config --bindir 2>/dev/null || true)" \
    /usr/lib/postgresql/15/bin; do
    if [[ -n $candidate && -x $candidate/initdb && -x $candidate/pg_ctl ]]; then
      bin="$candidate"
      break
    fi
  done
fi
if [[ -z $bin || ! -x $bin/initdb ]]; then
  echo "postgres_fixture: initdb and pg_ctl not found: install postgresql-15" \
    "(scripts/install-deps.sh) or set BACKFILL_PG_BIN_DIR" >&2
  exit 1
fi

# as_server CMD...: runs CMD as the account the server runs as.
as_server() {
  if ((EUID == 0)); then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

case "$cmd" in
start)
  # A server left by an interrupted run of the same build directory.
  if [[ -f $dir/data/postmaster.pid ]]; then
    as_server "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop \
      >/dev/null 2>&1 || true
  fi
  rm -rf "$dir"
  mkdir -p "$dir"
  if ((EUID == 0)); then
    if ! id postgres >/dev/null 2>&1; then
      echo "postgres_fixture: running as root, and there is no system user" \
        "'postgres' to run PostgreSQL as (install postgresql-15)" >&2
      exit 1
    fi
    chown postgres: "$dir"
  fi
  if ! as_server "$bin/initdb" -D "$dir/data" -U postgres -A trust -E UTF8 \
    --locale=C --no-sync >"$dir/initdb.log" 2>&1; then
    echo "postgres_fixture: initdb failed:" >&2
    tail -n 20 "$dir/initdb.log" >&2
    exit 1
  fi
  # A port taken between the choice and the server's bind fails the start:
  # try a few. Many test processes connect at once: room for them.
  for _ in 1 2 3 4 5 6 7 8; do
    port=$((20000 + RANDOM % 30000))
    options="-p $port -k $dir -c listen_addresses=127.0.0.1 -c fsync=off"
    options+=" -c synchronous_commit=off -c full_page_writes=off"
    options+=" -c max_connections=400"
    if as_server "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
      -o "$options" start >>"$dir/pg_ctl.log" 2>&1; then
      echo "$port" >"$dir/port"
      echo "postgres_fixture: server on 127.0.0.1:$port, $dir"
      exit 0
    fi
  done
  echo "postgres_fixture: pg_ctl start failed; the server's log ends:" >&2
  tail -n 20 "$dir/server.log" >&2 || true
  exit 1
  ;;
stop)
  status=0
  if [[ -f $dir/data/postmaster.pid ]]; then
    as_server "$bin/pg_ctl" -D "$dir/data" -m fast -w -t 60 stop \
      >>"$dir/pg_ctl.log" 2>&1 || status=$?
  fi
  rm -rf "$dir"
  exit "$status"
  ;;
*)
  echo "usage: $0 start|stop DIR" >&2
  exit 2
  ;;
esac
