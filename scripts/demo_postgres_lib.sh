# shellcheck shell=bash
# shellcheck disable=SC2034 # DSN and the ports are read by demo.sh
# The PostgreSQL server of `demo.sh --engine postgres`: installing its
# programs when missing, a cluster of its own under PG_DIR on PG_PORT,
# and stopping it. Sourced by demo.sh after demo_lib.sh; uses its PG_DIR,
# PG_BIN, PG_PORT and the other settings it names.

# as_pg_owner COMMAND...: runs COMMAND in PG_DIR as the account that owns
# the cluster: the postgres user when we are root (the server refuses to run
# as root), else ourselves.
as_pg_owner() {
  if ((EUID == 0)); then
    (cd "$PG_DIR" && runuser -u postgres -- "$@")
  else
    (cd "$PG_DIR" && "$@")
  fi
}

# pg_running: true while a server runs on the demo's cluster.
pg_running() {
  [[ -f $PG_DIR/data/postmaster.pid && -x $PG_BIN/pg_ctl ]] &&
    as_pg_owner "$PG_BIN/pg_ctl" -D "$PG_DIR/data" status >/dev/null 2>&1
}

# stop_postgres: pg_ctl stop in fast mode (open transactions roll back,
# clients are disconnected), waiting up to 60 s; then immediate mode.
stop_postgres() {
  pg_running || return 0
  as_pg_owner "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -m fast -w -t 60 stop \
    >>"$PG_DIR/pg_ctl.log" 2>&1 && return 0
  echo "demo: the PostgreSQL server did not stop within 60 s; stopping it in immediate mode" >&2
  as_pg_owner "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -m immediate -w -t 60 stop \
    >>"$PG_DIR/pg_ctl.log" 2>&1 || true
}

# need_postgres: PostgreSQL's server programs and psql, installed with
# scripts/install-deps.sh when missing and we are root.
need_postgres() {
  if [[ ! -x $PG_BIN/initdb || ! -x $PG_BIN/pg_ctl ]] || ! command -v psql >/dev/null; then
    if ((EUID == 0)) && [[ -z ${BACKFILL_PG_BIN_DIR:-} ]]; then
      step "Installing PostgreSQL 15"
      "$ROOT/scripts/install-deps.sh" postgresql-15
    fi
  fi
  [[ -x $PG_BIN/initdb && -x $PG_BIN/pg_ctl ]] ||
    die "--engine postgres needs PostgreSQL's initdb and pg_ctl, not found in $PG_BIN: install the Debian package postgresql-15 (as root: apt-get install --no-install-recommends postgresql-15) or set BACKFILL_PG_BIN_DIR to their directory"
  command -v psql >/dev/null ||
    die "--engine postgres needs psql: install the Debian package postgresql-client-15"
  if ((EUID == 0)); then
    id postgres >/dev/null 2>&1 ||
      die "as root, --engine postgres runs the server as the user postgres, which does not exist (the postgresql-15 package creates it)"
    command -v runuser >/dev/null || die "runuser is required (Debian package util-linux)"
  fi
}

# start_postgres: a new cluster in PG_DIR (initdb: UTF8, locale C, trust
# authentication), started on a free port of 127.0.0.1 with its Unix socket
# in PG_DIR, and in it the role PG_ROLE owning the database PG_DB. Sets
# PG_PORT and DSN.
start_postgres() {
  # A Unix socket's path has at most 107 bytes.
  ((${#PG_DIR} + 18 <= 107)) ||
    die "$PG_DIR is too long a path for PostgreSQL's socket in it; set BACKFILL_DEMO_DIR to a shorter directory"
  mkdir -p "$PG_DIR"
  chmod 0700 "$PG_DIR"
  if ((EUID == 0)); then
    chown postgres:postgres "$PG_DIR"
  fi
  as_pg_owner test -w "$PG_DIR" ||
    die "the user postgres cannot write to $PG_DIR (can it search every directory above it?); set BACKFILL_DEMO_DIR to a directory it can reach"
  as_pg_owner "$PG_BIN/initdb" -D "$PG_DIR/data" -U postgres -A trust -E UTF8 \
    --locale=C --no-sync >"$PG_DIR/initdb.log" 2>&1 || {
    cat "$PG_DIR/initdb.log" >&2
    die "initdb failed (see $PG_DIR/initdb.log)"
  }
  # Only this machine can connect: the server listens on 127.0.0.1 and its
  # socket, and trusts exactly those. A throwaway cluster: no fsync.
  printf '%s\n' "local all all trust" "host all all 127.0.0.1/32 trust" |
    as_pg_owner tee "$PG_DIR/data/pg_hba.conf" >/dev/null
  printf '%s\n' "listen_addresses = '127.0.0.1'" \
    "unix_socket_directories = '${PG_DIR//\'/\'\'}'" \
    "fsync = off" "synchronous_commit = off" "full_page_writes = off" |
    as_pg_owner tee -a "$PG_DIR/data/postgresql.conf" >/dev/null
  # A port taken between free_port and the server's start fails the start:
  # try a few.
  for _ in 1 2 3 4 5; do
    PG_PORT="$(free_port $((55432 + RANDOM % 1000)))"
    if as_pg_owner "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/server.log" \
      -w -t 60 -o "-p $PG_PORT" start >>"$PG_DIR/pg_ctl.log" 2>&1; then
      break
    fi
    PG_PORT=""
  done
  if [[ -z $PG_PORT ]]; then
    tail -n 20 "$PG_DIR/server.log" >&2 || true
    die "the PostgreSQL server did not start (5 attempts; see $PG_DIR/server.log)"
  fi
  psql -X -q -v ON_ERROR_STOP=1 -d "host=127.0.0.1 port=$PG_PORT dbname=postgres user=postgres" \
    -c "CREATE ROLE $PG_ROLE LOGIN" -c "CREATE DATABASE $PG_DB OWNER $PG_ROLE"
  DSN="host=127.0.0.1 port=$PG_PORT dbname=$PG_DB user=$PG_ROLE"
  echo "PostgreSQL $(sql "SHOW server_version") on 127.0.0.1:$PG_PORT (cluster $PG_DIR/data," \
    "log $PG_DIR/server.log): database $PG_DB owned by role $PG_ROLE"
}
