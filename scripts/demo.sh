#!/usr/bin/env bash
# The backfilld demo: a revenue metric that ignored refunds, fixed by a
# backfill of exactly the 30 affected days and the month that rolls them up.
#
#  1. installs missing dependencies and builds (skip with --no-build);
#  2. generates a one-year warehouse with a refund incident in June 2025;
#  3. runs backfilld with the buggy pipeline (examples/demo/pipelines-v1)
#     and loads daily_revenue for the whole year, with its monthly_revenue
#     rollup (one partition per month, read from the days of the month);
#  4. restarts backfilld with the fixed pipeline (examples/demo/pipelines),
#     finds the days to fix by the rows that are wrong rather than by date
#     (--affected-by "orders: refund > 0": the days with a refund), plans
#     and submits that backfill, which cascades into the month holding them
#     (monthly_revenue 2025-06, via the rollup); daily_revenue requires
#     approval there, so the job stops in AWAITING_APPROVAL: the demo prints
#     its diff, checks it with plain sqlite3 and approves it.
#     Both pipelines declare checks on daily_revenue (min_rows, not_null,
#     row_change, a measure_change of revenue that warns beyond 25%); the
#     initial load and the backfill must pass them all;
#     A small cache (examples/demo/revenue_cache.py) serves each day's
#     revenue in front of daily_revenue, which declares it as a consumer:
#     the demo warms it with the old numbers, and after the publish the job
#     invalidates it and confirms it serves the new ones before it ends
#     SUCCEEDED;
#  5. prints a report and checks the result with plain sqlite3, independent
#     of the service. Exits non-zero if a check fails;
#  6. restarts the cache so that it ignores invalidations, records a late
#     refund on one day and backfills that day: the job publishes but ends
#     DOWNSTREAM_UNHEALTHY, saying which consumer serves what for which day;
#     with a working cache again, backfillctl confirm brings it to SUCCEEDED.
#
# The daemon also serves its browser console (--http-listen); the demo
# prints its address. With --console the demo waits at step 4 for a person
# to read the held job's diff in the console and approve it there, instead
# of approving it itself.
#
# The daemon and the cache are always stopped with SIGTERM at the end (and on
# any error), so the demo leaves no process behind; the data stays in the
# demo directory and the report prints the commands to start them on it
# again.
#
# --engine postgres runs the same incident on a PostgreSQL 15 warehouse: the
# demo starts a server of its own (initdb and pg_ctl, as the postgres user
# when run as root; its cluster in postgres/ under the demo directory,
# listening on 127.0.0.1 on a free port, trust authentication for local
# connections only), creates the database "warehouse" owned by the role
# "backfill", copies the generated raw_orders and dim_customers into it
# (same rows, same values) and runs the PostgreSQL versions of the two
# pipelines (examples/demo/pipelines-postgres-v1 and pipelines-postgres),
# with the server's port filled in their dsn. The cache reads the warehouse
# through one psql session (revenue_cache.py --postgres DSN), the snapshot
# is the schema "snap" of the warehouse, and every check runs with plain
# psql. The server is stopped at the end and on any error, like the daemon
# and the cache.
# PostgreSQL 15's server programs are installed (as root) when missing.
#
# Usage: scripts/demo.sh [--no-build] [--engine sqlite|postgres] [--console]
# Environment: BACKFILL_DEMO_DIR (default: build/demo under the repository),
#              BACKFILL_BIN_DIR (default: build/bin),
#              BACKFILL_PG_BIN_DIR (PostgreSQL's initdb and pg_ctl; default:
#              /usr/lib/postgresql/15/bin).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${BACKFILL_BIN_DIR:-$ROOT/build/bin}"
WORK="${BACKFILL_DEMO_DIR:-$ROOT/build/demo}"
DATA="$WORK/data"
SNAPSHOT="$WORK/daily_revenue-before.db"
FROM=2025-06-01
TO=2025-07-01
MONTH=2025-06
AFFECTED_BY="orders: refund > 0"
DAEMON_PID=""
# The fixed pipeline, with the revenue cache's address filled in.
PIPELINES="$WORK/pipelines"
CACHE="$ROOT/examples/demo/revenue_cache.py"
CACHE_PID=""
CACHE_PORT=""
# The day of the late refund recorded in step 6.
LATE_DAY=2025-06-20
# --engine postgres: the server's programs, and the cluster the demo makes
# in PG_DIR (its data directory, log and Unix socket, owned by the account
# that runs the server); the database and the role the pipelines' dsn
# names, and the dsn once the server listens on PG_PORT.
PG_BIN="${BACKFILL_PG_BIN_DIR:-/usr/lib/postgresql/15/bin}"
PG_DIR="$WORK/postgres"
PG_DB=warehouse
PG_ROLE=backfill
PG_PORT=""
DSN=""

build=1
ENGINE=sqlite
CONSOLE=0
while (($# > 0)); do
  case "$1" in
    --no-build) build=0 ;;
    --console) CONSOLE=1 ;;
    --engine)
      (($# > 1)) || {
        echo "demo: --engine needs a value: sqlite or postgres" >&2
        exit 2
      }
      ENGINE="$2"
      shift
      ;;
    --engine=*) ENGINE="${1#--engine=}" ;;
    -h | --help)
      # The comment at the top of this file, up to its first other line.
      awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "${BASH_SOURCE[0]}"
      exit 0
      ;;
    *)
      echo "demo: unknown argument '$1' (try --help)" >&2
      exit 2
      ;;
  esac
  shift
done
case "$ENGINE" in
  sqlite | postgres) ;;
  *)
    echo "demo: unknown engine '$ENGINE': sqlite or postgres" >&2
    exit 2
    ;;
esac

DEMO_NAME=demo
# shellcheck source=scripts/demo_lib.sh
source "$ROOT/scripts/demo_lib.sh"
# shellcheck source=scripts/demo_postgres_lib.sh
source "$ROOT/scripts/demo_postgres_lib.sh"

# stop_cache: stop_pid of $CACHE_PID (5 s), which it clears; leaves
# STOP_RC (the daemon's) as it was.
stop_cache() {
  local pid="$CACHE_PID" rc=$STOP_RC
  [[ -n $pid ]] || return 0
  CACHE_PID=""
  stop_pid "$pid" 5 "the revenue cache"
  STOP_RC=$rc
}

on_exit() {
  local rc=$?
  if [[ -n $DAEMON_PID ]]; then
    echo "demo: stopping backfilld (pid $DAEMON_PID)" >&2
    stop_daemon
  fi
  if [[ -n $CACHE_PID ]]; then
    echo "demo: stopping the revenue cache (pid $CACHE_PID)" >&2
    stop_cache
  fi
  if [[ $ENGINE == postgres ]] && pg_running; then
    echo "demo: stopping the PostgreSQL server (port ${PG_PORT:-unknown})" >&2
    stop_postgres
  fi
  if ((rc != 0)); then
    echo "demo: FAILED (exit $rc); logs are in $WORK" >&2
  fi
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP
trap 'exit 141' PIPE

# A TCP port on 127.0.0.1 that nothing listens on, from $1 upwards.
free_port() {
  local port="$1"
  while (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do
    port=$((port + 1))
  done
  echo "$port"
}

# start_daemon PIPELINES_DIR LOG: starts backfilld and waits until it serves.
start_daemon() {
  local pipelines="$1" log="$2"
  : >"$log"
  "$BIN/backfilld" --data-dir "$DATA" --pipelines "$pipelines" \
    --listen "127.0.0.1:$PORT" --metrics-listen "127.0.0.1:$METRICS_PORT" \
    --http-listen "127.0.0.1:$HTTP_PORT" --workers 2 >"$log" 2>&1 &
  DAEMON_PID=$!
  wait_listening "$log"
  echo "backfilld (pid $DAEMON_PID): $(grep -m1 'backfilld listening on' "$log")"
  echo "console: http://127.0.0.1:$HTTP_PORT/ui/"
}

ctl() { "$BIN/backfillctl" --server "127.0.0.1:$PORT" "$@"; }

# start_cache LOG [--ignore-invalidations]: starts the revenue cache on
# CACHE_PORT (a free port chosen by the system the first time, the same port
# afterwards: the pipeline names it), reading the engine's warehouse, and
# waits until it serves.
start_cache() {
  local log="$1" i warehouse=(--warehouse "$DATA/warehouse.db")
  shift
  [[ $ENGINE == sqlite ]] || warehouse=(--postgres "$DSN")
  rm -f "$WORK/cache.port"
  python3 "$CACHE" "${warehouse[@]}" --port "${CACHE_PORT:-0}" \
    --port-file "$WORK/cache.port" "$@" >>"$log" 2>&1 &
  CACHE_PID=$!
  for ((i = 0; i < 100; i++)); do
    if [[ -s $WORK/cache.port ]]; then
      CACHE_PORT="$(cat "$WORK/cache.port")"
      echo "revenue cache (pid $CACHE_PID) on 127.0.0.1:$CACHE_PORT$([[ $# -gt 0 ]] && echo ", $*")"
      return 0
    fi
    if ! running "$CACHE_PID"; then
      wait "$CACHE_PID" || true
      CACHE_PID=""
      cat "$log" >&2
      die "the revenue cache exited during start-up${CACHE_PORT:+ (is port $CACHE_PORT taken?)}"
    fi
    sleep 0.1
  done
  die "the revenue cache did not start within 10 s (see $log)"
}

# cache_value DAY: the revenue the cache serves for DAY.
cache_value() {
  curl -sfS --max-time 10 "http://127.0.0.1:$CACHE_PORT/value?day=$1" | jq -r '.revenue'
}

# warm_cache: asks the cache for every day of daily_revenue once (one curl
# for all), so that it holds what is published now.
warm_cache() {
  local days ok
  days="$(sql "SELECT COUNT(DISTINCT ds) FROM daily_revenue")"
  ok="$(sql "SELECT DISTINCT ds FROM daily_revenue ORDER BY ds" |
    awk -v base="http://127.0.0.1:$CACHE_PORT/value?day=" \
      '{ printf "url = \"%s%s\"\noutput = \"/dev/null\"\n", base, $0 }' |
    curl -sS --max-time 120 -K - -w '%{http_code}\n' | grep -c '^200$' || true)"
  ((ok == days)) || die "warming the revenue cache: $ok of $days days answered 200"
  echo "revenue cache warmed: $days days read from the published daily_revenue"
}

# warehouse_value DAY: the day's revenue by plain SQL on the warehouse, as
# the cache must serve it.
warehouse_value() {
  sql "SELECT $(exact_sql "SUM(revenue)") FROM daily_revenue WHERE ds = '$1'"
}

# same_number A B: true when A and B are the same double (both JSON numbers).
# money X: X with two decimals, for display.
money() { awk -v x="$1" 'BEGIN { printf "%.2f", x }'; }

same_number() {
  [[ $(jq -n --argjson a "${1:-null}" --argjson b "${2:-null}" \
    '$a != null and $b != null and $a == $b' 2>/dev/null) == true ]]
}

# json FILE JQ_EXPR: one value of a JSON document. backfillctl --json prints
# every scalar, enum and repeated field, zeros included, but int64 fields as
# strings (hence tonumber) and no sub-message that is unset (hence the //
# defaults, which also cover a document that is missing after an error).
json() { jq -r "$2" "$1"; }

# --- the engine: the few things that differ ------------------------------
# sql QUERY: the query's result on the warehouse, one row a line, columns
# separated by '|'; sql_fields QUERY: separated by spaces; sql_table QUERY:
# a table with a header, for display. MAIN is the published tables' schema
# and ATTACH_SNAP what a query reading the snapshot (schema snap) starts
# with. typeof_sql, fixed_sql N, exact_sql and json_texts_sql spell a SQL
# expression in the engine's dialect: the storage type of a value, a number
# as text with N decimals, a double as text that reads back exactly, and
# the rows of the texts of a JSON array.
if [[ $ENGINE == sqlite ]]; then
  PLAIN="plain sqlite3"
  WAREHOUSE_DESC="$DATA/warehouse.db"
  SNAPSHOT_DESC="$SNAPSHOT"
  PIPELINES_V1_SRC="$ROOT/examples/demo/pipelines-v1"
  PIPELINES_SRC="$ROOT/examples/demo/pipelines"
  MAIN=main
  ATTACH_SNAP="ATTACH '${SNAPSHOT//\'/\'\'}' AS snap;"
  sql() { sqlite3 -batch -bail "$DATA/warehouse.db" "$@"; }
  sql_fields() { sql -separator ' ' "$1"; }
  sql_table() { sql -header -column "$1"; }
  typeof_sql() { echo "typeof($1)"; }
  fixed_sql() { echo "printf('%.$1f', $2)"; }
  exact_sql() { echo "printf('%.17g', $1)"; }
  json_texts_sql() { echo "SELECT value FROM json_each('$1')"; }
  # The diff check: the diff in a table of its own database, the warehouse
  # attached as w.
  ATTACH_W="ATTACH '${DATA//\'/\'\'}/warehouse.db' AS w;"
  W=w
  DIFF="diff"
  diff_sql() { sqlite3 -batch -bail "$WORK/diff-check.db" "$@"; }
  load_diff() {
    diff_sql "
      DROP TABLE IF EXISTS diff;
      CREATE TABLE diff (dataset TEXT, ds TEXT, added INTEGER, removed INTEGER,
                         changed INTEGER, revenue_delta REAL, orders_delta REAL);"
    diff_sql ".mode tabs" ".import '$1' diff"
  }
else
  PLAIN="plain psql"
  WAREHOUSE_DESC="the PostgreSQL warehouse, database $PG_DB"
  SNAPSHOT_DESC="the schema snap of the PostgreSQL warehouse"
  PIPELINES_V1_SRC="$ROOT/examples/demo/pipelines-postgres-v1"
  PIPELINES_SRC="$ROOT/examples/demo/pipelines-postgres"
  MAIN=public
  ATTACH_SNAP=""
  # psql: no ~/.psqlrc, stop at the first error, unaligned and without
  # headers (or aligned with them, for sql_table).
  psql_warehouse() { psql -X -q -v ON_ERROR_STOP=1 -d "$DSN" "$@"; }
  sql() { psql_warehouse -A -t -c "$1"; }
  sql_fields() { psql_warehouse -A -t -F ' ' -c "$1"; }
  sql_table() { psql_warehouse -P footer=off -c "$1"; }
  typeof_sql() { echo "pg_typeof($1)::text"; }
  fixed_sql() { echo "round(($2)::numeric, $1)::text"; }
  # PostgreSQL prints a double precision as the shortest text that reads
  # back as the same number (extra_float_digits 1, the default).
  exact_sql() { echo "($1)::text"; }
  json_texts_sql() { echo "SELECT json_array_elements_text('$1'::json)"; }
  # The diff check: the diff in the warehouse's schema demo_check.
  ATTACH_W=""
  W="$MAIN"
  DIFF=demo_check.diff
  diff_sql() { sql "$1"; }
  load_diff() {
    sql "CREATE SCHEMA demo_check;
         CREATE TABLE demo_check.diff (
           dataset TEXT, ds TEXT, added BIGINT, removed BIGINT, changed BIGINT,
           revenue_delta DOUBLE PRECISION, orders_delta DOUBLE PRECISION);"
    psql_warehouse -c "\copy demo_check.diff FROM '${1//\'/\'\'}'"
  }
fi

# write_pipelines SRC_DIR DIR: the copy in DIR of SRC_DIR/demo.yaml that the
# daemon reads: the revenue cache's address (127.0.0.1:8089 in the file)
# and, on PostgreSQL, the server's port in the dsn (5432 in the file) are
# the real ones.
write_pipelines() {
  mkdir -p "$2"
  sed -e "s/127\.0\.0\.1:8089/127.0.0.1:${CACHE_PORT:-8089}/g" \
    -e "s/ port=5432 / port=${PG_PORT:-5432} /" "$1/demo.yaml" >"$2/demo.yaml"
  if [[ $ENGINE == postgres ]]; then
    (($(grep -cF "dsn: \"$DSN\"" "$2/demo.yaml") == 1)) ||
      die "$2/demo.yaml does not name the warehouse \"$DSN\""
  fi
}

# load_postgres_source SQLITE_FILE: copies the generated source tables
# into the PostgreSQL warehouse: the same rows and values, in the
# PostgreSQL types that hold them exactly (a SQLite REAL is a DOUBLE
# PRECISION; doubles travel as 17 significant digits, which read back as
# the same number), with the primary keys and the index on the partition
# column of the generated tables. The copy is then read back and compared
# with the file, row by row.
load_postgres_source() {
  local src="$1" dir q tables mismatch
  dir="$(dirname "$src")"
  q="${dir//\'/\'\'}"
  tables="$(sqlite3 "$src" "SELECT group_concat(name, ' ') FROM
                              (SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name)")"
  [[ $tables == "dim_customers raw_orders" ]] ||
    die "$src holds the tables '$tables', not the dim_customers and raw_orders this copy knows"
  sqlite3 -batch -bail -csv "$src" \
    "SELECT customer_id, name, region FROM dim_customers" >"$dir/dim_customers.csv"
  sqlite3 -batch -bail -csv "$src" \
    "SELECT order_id, order_date, customer_id, printf('%!.17g', amount),
            printf('%!.17g', refund) FROM raw_orders" >"$dir/raw_orders.csv"
  # order_date is compared bytewise (COLLATE "C") like SQLite's text, so
  # that one index serves both the transforms' ranges and the engine's
  # partition conditions.
  psql_warehouse <<SQL
BEGIN;
CREATE TABLE dim_customers (
  customer_id BIGINT PRIMARY KEY, name TEXT NOT NULL, region TEXT NOT NULL);
CREATE TABLE raw_orders (
  order_id BIGINT PRIMARY KEY, order_date TEXT COLLATE "C" NOT NULL,
  customer_id BIGINT NOT NULL, amount DOUBLE PRECISION NOT NULL,
  refund DOUBLE PRECISION NOT NULL DEFAULT 0);
\copy dim_customers FROM '$q/dim_customers.csv' WITH (FORMAT csv)
\copy raw_orders FROM '$q/raw_orders.csv' WITH (FORMAT csv)
CREATE INDEX raw_orders_by_date ON raw_orders (order_date);
COMMIT;
ANALYZE dim_customers;
ANALYZE raw_orders;
SQL
  psql_warehouse -c "\copy dim_customers TO '$q/dim_customers.pg.csv' WITH (FORMAT csv)"
  psql_warehouse -c "\copy raw_orders TO '$q/raw_orders.pg.csv' WITH (FORMAT csv)"
  mismatch="$(sqlite3 -batch -bail "$src" \
    "CREATE TEMP TABLE pg_dim_customers AS SELECT * FROM main.dim_customers WHERE 0;
     CREATE TEMP TABLE pg_raw_orders AS SELECT * FROM main.raw_orders WHERE 0;" \
    ".import --csv --schema temp '$dir/dim_customers.pg.csv' pg_dim_customers" \
    ".import --csv --schema temp '$dir/raw_orders.pg.csv' pg_raw_orders" \
    "SELECT (SELECT COUNT(*) FROM (SELECT * FROM main.dim_customers
                                   EXCEPT SELECT * FROM temp.pg_dim_customers))
          + (SELECT COUNT(*) FROM (SELECT * FROM temp.pg_dim_customers
                                   EXCEPT SELECT * FROM main.dim_customers))
          + (SELECT COUNT(*) FROM (SELECT * FROM main.raw_orders
                                   EXCEPT SELECT * FROM temp.pg_raw_orders))
          + (SELECT COUNT(*) FROM (SELECT * FROM temp.pg_raw_orders
                                   EXCEPT SELECT * FROM main.raw_orders));")"
  ((mismatch == 0)) || die "the PostgreSQL copy of $src differs from it on $mismatch rows"
  echo "copied to PostgreSQL: $(sql "SELECT COUNT(*) FROM raw_orders") rows of raw_orders and" \
    "$(sql "SELECT COUNT(*) FROM dim_customers") of dim_customers; read back, 0 rows differ from $src"
}

# checks_summary FILE: "N checks, M passed (names)" from a Backfill's stored
# check results; a check passed when every one of its results did.
checks_summary() {
  jq -r '[.checks[]? | {d: .dataset, k: .name, p: .passed}]
         | group_by(.d + "/" + .k) | map({d: .[0].d, k: .[0].k, p: all(.[]; .p)})
         | "\(length) checks, \(map(select(.p)) | length) passed (\(group_by(.d)
             | map(.[0].d + ": " + (map(.k) | join(", "))) | join("; ")))"' "$1"
}
# checks_failing FILE: how many checks of a Backfill did not pass.
checks_failing() {
  jq -r '[.checks[]? | {k: (.dataset + "/" + .name), p: .passed}]
         | group_by(.k) | map(select(all(.[]; .p) | not)) | length' "$1"
}

if ((build)); then
  step "Installing dependencies and building"
  "$ROOT/scripts/install-deps.sh"
  "$ROOT/scripts/build.sh"
fi
for tool in "$BIN/backfilld" "$BIN/backfillctl" "$BIN/backfill-demo-gen"; do
  [[ -x $tool ]] || die "$tool is missing; run scripts/build.sh first"
done
for tool in sqlite3 jq awk curl python3; do
  command -v "$tool" >/dev/null || die "$tool is required (scripts/install-deps.sh installs it)"
done
[[ $ENGINE == sqlite ]] || need_postgres

# A server that a killed earlier run left on the demo's cluster goes first.
if pg_running; then
  echo "demo: stopping the PostgreSQL server an earlier run left on $PG_DIR/data" >&2
  stop_postgres
fi
if [[ $ENGINE == sqlite ]]; then
  step "Generating the demo warehouse in $DATA"
  rm -rf "$WORK"
  mkdir -p "$WORK"
  "$BIN/backfill-demo-gen" --data-dir "$DATA"
  PIPELINES_V1="$PIPELINES_V1_SRC"
else
  step "Generating the demo data in $WORK/source"
  rm -rf "$WORK"
  mkdir -p "$WORK" "$DATA"
  "$BIN/backfill-demo-gen" --data-dir "$WORK/source"

  step "Starting a PostgreSQL server for the warehouse and copying the data into it"
  start_postgres
  load_postgres_source "$WORK/source/warehouse.db"
  PIPELINES_V1="$WORK/pipelines-v1"
  write_pipelines "$PIPELINES_V1_SRC" "$PIPELINES_V1"
  echo "the pipelines' warehouse: {engine: postgres, dsn: \"$DSN\"}"
fi
PORT="$(free_port 50551)"
METRICS_PORT="$(free_port 9564)"
[[ $METRICS_PORT != "$PORT" ]] || METRICS_PORT="$(free_port $((PORT + 1)))"
HTTP_PORT="$(free_port 8480)"
while [[ $HTTP_PORT == "$PORT" || $HTTP_PORT == "$METRICS_PORT" ]]; do
  HTTP_PORT="$(free_port $((HTTP_PORT + 1)))"
done

step "Starting backfilld with the buggy pipeline (revenue = SUM(amount))"
start_daemon "$PIPELINES_V1" "$WORK/backfilld-v1.log"
ctl datasets

step "Initial load of daily_revenue, 2025-01-01..2026-01-01 (and its monthly_revenue rollup)"
ctl --json submit daily_revenue --from 2025-01-01 --to 2026-01-01 \
  --reason "initial load" --wait >"$WORK/initial-load.json" || true
initial_state="$(json "$WORK/initial-load.json" '.state // ""')"
[[ $initial_state == BACKFILL_STATE_SUCCEEDED ]] ||
  die "initial load ended in ${initial_state:-an unknown state}"
echo "initial load $(json "$WORK/initial-load.json" '.id'): $initial_state," \
  "$(json "$WORK/initial-load.json" '.partitions.published // 0') partitions published" \
  "(365 days of daily_revenue, 12 months of monthly_revenue)"
echo "validation: $(checks_summary "$WORK/initial-load.json")"
echo "  (row_change and measure_change compare with the published rows: a first load has none, so they pass)"

step "Stopping backfilld (SIGTERM)"
stop_daemon
((STOP_RC == 0)) || die "backfilld exited with status $STOP_RC after SIGTERM"
echo "backfilld exited with status 0"

step "Snapshotting the published daily_revenue and monthly_revenue to $SNAPSHOT_DESC"
[[ $ENGINE == sqlite ]] || sql "CREATE SCHEMA snap"
sql "$ATTACH_SNAP
     CREATE TABLE snap.daily_revenue AS
       SELECT ds, region, revenue, orders FROM $MAIN.daily_revenue;
     CREATE TABLE snap.monthly_revenue AS
       SELECT month, region, revenue, orders FROM $MAIN.monthly_revenue;"
echo "$(sql "$ATTACH_SNAP SELECT COUNT(*) FROM snap.daily_revenue") rows," \
  "$(sql "$ATTACH_SNAP SELECT COUNT(DISTINCT ds) FROM snap.daily_revenue") days"

step "Starting the revenue cache in front of daily_revenue and warming it with the published numbers"
start_cache "$WORK/revenue-cache.log"
# The fixed pipeline declares the cache as a consumer of daily_revenue at
# 127.0.0.1:8089; the copy the daemon reads names the cache's real port.
write_pipelines "$PIPELINES_SRC" "$PIPELINES"
(($(grep -c "127.0.0.1:$CACHE_PORT/" "$PIPELINES/demo.yaml") == 2)) ||
  die "$PIPELINES/demo.yaml does not name the cache at 127.0.0.1:$CACHE_PORT twice"
warm_cache
CACHE_DAY="$(sql "SELECT MIN(order_date) FROM raw_orders WHERE refund > 0")"
cache_before="$(cache_value "$CACHE_DAY")"
echo "the cache serves $CACHE_DAY: revenue $(money "$cache_before") (the published, buggy number)"

step "Starting backfilld with the fixed pipeline (revenue = SUM(amount - refund))"
start_daemon "$PIPELINES" "$WORK/backfilld.log"
ctl datasets

step "Planning the backfill of the days affected by refunds: --affected-by \"$AFFECTED_BY\""
ctl plan daily_revenue --affected-by "$AFFECTED_BY"
ctl --json plan daily_revenue --affected-by "$AFFECTED_BY" >"$WORK/plan.json"

step "Submitting it (daily_revenue has require_approval: the job stops before publishing)"
ctl --json submit daily_revenue --affected-by "$AFFECTED_BY" \
  --reason "revenue ignored refunds" --ticket DATA-123 --wait \
  >"$WORK/backfill.json" || true
JOB="$(json "$WORK/backfill.json" '.id // ""')"
[[ -n $JOB ]] || die "submit printed no job (see $WORK/backfill.json)"
held_state="$(json "$WORK/backfill.json" '.state // ""')"
[[ $held_state == BACKFILL_STATE_AWAITING_APPROVAL ]] ||
  die "expected $JOB to wait in AWAITING_APPROVAL, it is ${held_state:-in an unknown state}"

cols="ds, region, revenue, $(typeof_sql revenue), orders, $(typeof_sql orders)"
mcols="month, region, revenue, $(typeof_sql revenue), orders, $(typeof_sql orders)"
# Nothing may be published while the job waits: every row of every day is
# as in the snapshot.
mismatch_held="$(sql "
  $ATTACH_SNAP
  SELECT (SELECT COUNT(*) FROM (SELECT $cols FROM $MAIN.daily_revenue
                                EXCEPT SELECT $cols FROM snap.daily_revenue) AS d1)
       + (SELECT COUNT(*) FROM (SELECT $cols FROM snap.daily_revenue
                                EXCEPT SELECT $cols FROM $MAIN.daily_revenue) AS d2)
       + (SELECT COUNT(*) FROM (SELECT $mcols FROM $MAIN.monthly_revenue
                                EXCEPT SELECT $mcols FROM snap.monthly_revenue) AS m1)
       + (SELECT COUNT(*) FROM (SELECT $mcols FROM snap.monthly_revenue
                                EXCEPT SELECT $mcols FROM $MAIN.monthly_revenue) AS m2);")"

step "backfillctl diff $JOB: what publishing would change"
ctl diff "$JOB" --samples 0
ctl diff "$JOB" --samples 2 >"$WORK/diff-samples.txt"
sed -n '/^Sample rows/,$p' "$WORK/diff-samples.txt" | sed -n '1,7p'
echo "  ... (the rest: backfillctl diff $JOB)"
ctl --json diff "$JOB" --samples 0 >"$WORK/diff.json"

# The diff against plain SQL: per day, the rows whose revenue the fixed
# logic changes and the revenue and orders deltas, recomputed from the raw
# tables and the published (old) rows.
jq -r '.partitions[] | [.dataset, .partition, (.added | tonumber),
         (.removed | tonumber), (.changed | tonumber),
         (.measures[] | select(.column == "revenue") | .delta),
         (.measures[] | select(.column == "orders") | .delta)] | @tsv' \
  "$WORK/diff.json" >"$WORK/diff.tsv"
load_diff "$WORK/diff.tsv"
diff_days="$(diff_sql "SELECT COUNT(*) FROM $DIFF WHERE dataset = 'daily_revenue'")"
fixed_sql="SELECT o.order_date AS ds, c.region AS region,
                  SUM(o.amount - o.refund) AS revenue, COUNT(*) AS orders
           FROM $W.raw_orders o JOIN $W.dim_customers c
             ON c.customer_id = o.customer_id
           WHERE o.order_date >= '$FROM' AND o.order_date < '$TO'
           GROUP BY 1, 2"
mismatch_diff="$(diff_sql "
  $ATTACH_W
  WITH fixed AS ($fixed_sql),
       old AS (SELECT ds, region, revenue, orders FROM $W.daily_revenue
               WHERE ds >= '$FROM' AND ds < '$TO'),
       expected AS (
         SELECT f.ds,
                SUM(CASE WHEN abs(f.revenue - o.revenue) > 1e-9
                           OR f.orders <> o.orders THEN 1 ELSE 0 END)
                  AS changed,
                SUM(f.revenue) - SUM(o.revenue) AS revenue_delta,
                SUM(f.orders) - SUM(o.orders) AS orders_delta
         FROM fixed f JOIN old o USING (ds, region) GROUP BY f.ds)
  SELECT COUNT(*) FROM expected e
    LEFT JOIN $DIFF d ON d.ds = e.ds AND d.dataset = 'daily_revenue'
  WHERE d.ds IS NULL OR d.added <> 0
     OR d.removed <> 0 OR d.changed <> e.changed
     OR abs(d.revenue_delta - e.revenue_delta) > 1e-6
     OR d.orders_delta <> 0 OR e.orders_delta <> 0
     OR NOT (d.revenue_delta < 0);")"
down_days="$(diff_sql "
  SELECT COUNT(*) FROM $DIFF WHERE dataset = 'daily_revenue' AND revenue_delta < 0")"
other_days="$(diff_sql "
  SELECT COUNT(*) FROM $DIFF
  WHERE (dataset = 'daily_revenue' AND (ds < '$FROM' OR ds >= '$TO'))
     OR (dataset = 'monthly_revenue' AND ds <> '$MONTH')
     OR dataset NOT IN ('daily_revenue', 'monthly_revenue')")"
# The month's diff is the sum of its days': same revenue delta, no row added
# or removed, orders unchanged.
mismatch_month_diff="$(diff_sql "
  SELECT CAST((SELECT COUNT(*) FROM $DIFF WHERE dataset = 'monthly_revenue') <> 1
      OR (SELECT COUNT(*) FROM $DIFF m
          WHERE m.dataset = 'monthly_revenue' AND m.ds = '$MONTH'
            AND m.added = 0 AND m.removed = 0 AND m.orders_delta = 0
            AND abs(m.revenue_delta -
                    (SELECT SUM(revenue_delta) FROM $DIFF
                     WHERE dataset = 'daily_revenue')) <= 1e-6) <> 1 AS INTEGER);")"
month_delta="$(diff_sql "
  SELECT $(fixed_sql 2 revenue_delta) FROM $DIFF WHERE dataset = 'monthly_revenue'")"
# The days the diff shows revenue down on are exactly the days with refunds.
refund_days_mismatch="$(diff_sql "
  $ATTACH_W
  WITH refund_days AS (SELECT DISTINCT order_date AS ds FROM $W.raw_orders
                       WHERE refund > 0),
       down AS (SELECT ds FROM $DIFF
                WHERE dataset = 'daily_revenue' AND revenue_delta < 0)
  SELECT (SELECT COUNT(*) FROM (SELECT ds FROM refund_days EXCEPT
                                SELECT ds FROM down) AS only_refund)
       + (SELECT COUNT(*) FROM (SELECT ds FROM down EXCEPT
                                SELECT ds FROM refund_days) AS only_down);")"
diff_changed="$(diff_sql "
  SELECT SUM(changed) FROM $DIFF WHERE dataset = 'daily_revenue'")"
diff_revenue="$(jq -r '.datasets[] | select(.dataset == "daily_revenue") | .measures[] | select(.column == "revenue") | .delta' "$WORK/diff.json" |
  awk '{ printf "%.2f", $1 }')"

if ((CONSOLE)); then
  step "Approve $JOB in the console: http://127.0.0.1:$HTTP_PORT/ui/#/backfills/$JOB"
  echo "Read its diff there and approve it with a reason; the demo goes on once it is approved."
  until [[ $(ctl --json status "$JOB" | jq -r '.state') != BACKFILL_STATE_AWAITING_APPROVAL ]]; do
    sleep 1
  done
  echo "$JOB: $(ctl --json status "$JOB" | jq -r '.state'), approved in the console"
else
  step "Approving $JOB after reading the diff"
  ctl approve "$JOB" --reason "diff reviewed: revenue down on the 30 refund days, nothing else" \
    >"$WORK/approve.txt"
  grep -E '^(approved|Approved|State)' "$WORK/approve.txt"
fi
ctl --json watch "$JOB" >"$WORK/backfill.json" || true

step "backfillctl status $JOB"
ctl status "$JOB"
ctl --json status "$JOB" >"$WORK/backfill.json"

step "The revenue cache after $JOB: invalidated by the job and confirmed to serve the new numbers"
confirm_message="$(json "$WORK/backfill.json" '.message // ""')"
echo "job message: $confirm_message"
cache_after="$(cache_value "$CACHE_DAY")"
cache_expected="$(warehouse_value "$CACHE_DAY")"
echo "the cache serves $CACHE_DAY: revenue $(money "$cache_before") before the backfill," \
  "$(money "$cache_after") after; $PLAIN on the warehouse: $(money "$cache_expected")"

# --- the report ---------------------------------------------------------
j="$WORK/backfill.json"
state="$(json "$j" '.state // ""')"
total="$(json "$j" '(.partitions.total // 0) | tonumber')"
published="$(json "$j" '(.partitions.published // 0) | tonumber')"
rows="$(json "$j" '(.rows_written // 0) | tonumber')"
unit="$(json "$j" '(.cost_estimate.unit // "COST_UNIT_INPUT_ROWS") | ltrimstr("COST_UNIT_") | ascii_downcase')"
est="$(json "$j" '(.cost_estimate.backfill // 0) | tonumber')"
full="$(json "$j" '(.cost_estimate.full_reload // 0) | tonumber')"
actual="$(json "$j" '(.actual_cost // 0) | tonumber')"
pct() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.1f%%", 100 * a / b; else print "n/a" }'; }

range="ds >= '$FROM' AND ds < '$TO'"
range_n="n.ds >= '$FROM' AND n.ds < '$TO'"
expected_sql="SELECT o.order_date AS ds, c.region AS region,
                 SUM(o.amount - o.refund) AS revenue, COUNT(*) AS orders
          FROM raw_orders o JOIN dim_customers c ON c.customer_id = o.customer_id
          WHERE o.order_date >= '$FROM' AND o.order_date < '$TO'
          GROUP BY 1, 2"
# (a) the backfilled days equal the fixed logic recomputed from the raw
# tables (revenue to within 1e-6: the sums may add in another order).
mismatch_a="$(sql "
  WITH expected AS ($expected_sql),
       published AS (SELECT ds, region, revenue, orders FROM daily_revenue
                     WHERE $range)
  SELECT (SELECT COUNT(*) FROM expected e LEFT JOIN published p
            ON p.ds = e.ds AND p.region = e.region
          WHERE p.ds IS NULL OR p.orders <> e.orders
             OR abs(p.revenue - e.revenue) > 1e-6)
       + (SELECT COUNT(*) FROM published p LEFT JOIN expected e
            ON p.ds = e.ds AND p.region = e.region
          WHERE e.ds IS NULL);")"
rows_a="$(sql "SELECT COUNT(*) FROM daily_revenue WHERE $range")"
# (b) every other day is exactly as before (same values, same types).
mismatch_b="$(sql "
  $ATTACH_SNAP
  SELECT (SELECT COUNT(*) FROM (
            SELECT $cols FROM $MAIN.daily_revenue WHERE NOT ($range)
            EXCEPT SELECT $cols FROM snap.daily_revenue WHERE NOT ($range)) AS d1)
       + (SELECT COUNT(*) FROM (
            SELECT $cols FROM snap.daily_revenue WHERE NOT ($range)
            EXCEPT SELECT $cols FROM $MAIN.daily_revenue WHERE NOT ($range)) AS d2);")"
rows_b="$(sql "SELECT COUNT(*) FROM daily_revenue WHERE NOT ($range)")"
days_b="$(sql "SELECT COUNT(DISTINCT ds) FROM daily_revenue WHERE NOT ($range)")"
changed="$(sql "
  $ATTACH_SNAP
  SELECT COUNT(*) FROM $MAIN.daily_revenue n JOIN snap.daily_revenue o
    USING (ds, region)
  WHERE $range_n AND n.revenue <> o.revenue;")"
# (e) monthly_revenue: every month equals the sum of its published days
# (plain SQL over both tables); the other 11 months are exactly as before.
mismatch_e="$(sql "
  WITH expected AS (
         SELECT substr(ds, 1, 7) AS month, region, SUM(revenue) AS revenue,
                SUM(orders) AS orders
         FROM daily_revenue GROUP BY 1, 2)
  SELECT (SELECT COUNT(*) FROM expected e LEFT JOIN monthly_revenue m
            USING (month, region)
          WHERE m.month IS NULL OR m.orders <> e.orders
             OR abs(m.revenue - e.revenue) > 1e-6)
       + (SELECT COUNT(*) FROM monthly_revenue m LEFT JOIN expected e
            USING (month, region) WHERE e.month IS NULL);")"
months_e="$(sql "SELECT COUNT(DISTINCT month) FROM monthly_revenue")"
mismatch_other_months="$(sql "
  $ATTACH_SNAP
  SELECT (SELECT COUNT(*) FROM (
            SELECT $mcols FROM $MAIN.monthly_revenue WHERE month <> '$MONTH'
            EXCEPT SELECT $mcols FROM snap.monthly_revenue WHERE month <> '$MONTH') AS m1)
       + (SELECT COUNT(*) FROM (
            SELECT $mcols FROM snap.monthly_revenue WHERE month <> '$MONTH'
            EXCEPT SELECT $mcols FROM $MAIN.monthly_revenue WHERE month <> '$MONTH') AS m2);")"
month_changed="$(sql "
  $ATTACH_SNAP
  SELECT COUNT(*) FROM $MAIN.monthly_revenue n JOIN snap.monthly_revenue o
    USING (month, region)
  WHERE n.month = '$MONTH' AND n.revenue <> o.revenue;")"
# The plan: daily_revenue's partitions are exactly the days plain SQL finds
# a refund on, and monthly_revenue's the one month holding them, via the
# rollup.
plan_days="$(jq -r '.datasets[] | select(.dataset == "daily_revenue") | .partitions[]' "$WORK/plan.json")"
mismatch_plan="$(sql "
  WITH planned(ds) AS ($(json_texts_sql "$(jq -c '[.datasets[] | select(.dataset == "daily_revenue") | .partitions[]]' "$WORK/plan.json")")),
       refund_days AS (SELECT DISTINCT order_date AS ds FROM raw_orders
                       WHERE refund > 0)
  SELECT (SELECT COUNT(*) FROM (SELECT ds FROM planned EXCEPT
                                SELECT ds FROM refund_days) AS only_planned)
       + (SELECT COUNT(*) FROM (SELECT ds FROM refund_days EXCEPT
                                SELECT ds FROM planned) AS only_refund);")"
plan_day_count="$(printf '%s\n' "$plan_days" | grep -c . || true)"
plan_months="$(jq -r '[.datasets[] | select(.dataset == "monthly_revenue") | .partitions[]] | join(",")' "$WORK/plan.json")"
plan_month_reason="$(jq -r '[.datasets[] | select(.dataset == "monthly_revenue") | .partition_reasons[]] | join(",")' "$WORK/plan.json")"
refunds="$(sql "SELECT $(fixed_sql 2 "SUM(refund)") FROM raw_orders
                WHERE order_date >= '$FROM' AND order_date < '$TO'")"
# How far the correction moved revenue, per day (the largest move) and over
# the 30 days, from the snapshot and the published rows: the measure_change
# check warns beyond 25%, which the refunds must not reach.
read -r day_move_max job_move < <(sql_fields "
  $ATTACH_SNAP
  WITH days AS (
    SELECT n.ds, SUM(n.revenue) AS after, SUM(o.revenue) AS before
    FROM $MAIN.daily_revenue n JOIN snap.daily_revenue o USING (ds, region)
    WHERE $range_n GROUP BY n.ds)
  SELECT $(fixed_sql 1 "100 * MAX(abs(after - before) / before)"),
         $(fixed_sql 1 "100 * (SUM(after) - SUM(before)) / SUM(before)")
  FROM days;")
initial_failing="$(checks_failing "$WORK/initial-load.json")"
backfill_failing="$(checks_failing "$j")"

step "Example: revenue before and after, first 3 days of the incident"
sql_table "
  $ATTACH_SNAP
  SELECT n.ds, n.region, $(fixed_sql 2 o.revenue) AS before,
         $(fixed_sql 2 n.revenue) AS after
  FROM $MAIN.daily_revenue n JOIN snap.daily_revenue o USING (ds, region)
  WHERE $range_n ORDER BY n.ds, n.region LIMIT 15;"

failures=0
# check RESULT NAME DETAIL: RESULT 0 is a pass.
check() {
  if (($1 == 0)); then
    printf '  PASS  %s\n' "$2"
  else
    printf '  FAIL  %s (%s)\n' "$2" "$3"
    failures=$((failures + 1))
  fi
}

step "REPORT"
row() { printf '  %-22s %s\n' "$1" "$2"; }
row job "$JOB ($state), reason \"revenue ignored refunds\", ticket DATA-123"
row "partitions recomputed" "$published published of $total planned"
row "rows written" "$rows"
row "scope" "--affected-by \"$AFFECTED_BY\": $plan_day_count days of daily_revenue + monthly_revenue $plan_months ($plan_month_reason)"
row "cost estimate" "$(printf '%.0f' "$est") $unit = $(pct "$est" "$full") of a full reload of all 365 days and 12 months ($(printf '%.0f' "$full") $unit)"
row "actual cost" "$(printf '%.0f' "$actual") $unit = $(pct "$actual" "$full") of the full reload"
row "corrected" "$changed (day, region) rows and $month_changed (month, region) rows changed; refunds of $refunds now subtracted"
row "approval" "$(json "$j" '.approval.approved_by // "-"'): \"$(json "$j" '.approval.reason // "-"')\""
row "validation" "$(checks_summary "$j")"
echo "  checks ($PLAIN on $WAREHOUSE_DESC):"
r=0 && [[ $state == BACKFILL_STATE_SUCCEEDED ]] || r=1
check "$r" "job reached SUCCEEDED" "state ${state:-unknown}"
r=0 && ((mismatch_plan == 0 && plan_day_count == 30)) &&
  [[ $plan_months == "$MONTH" && $plan_month_reason == "downstream of daily_revenue via rollup" ]] || r=1
check "$r" "the plan for --affected-by \"$AFFECTED_BY\" is exactly the $plan_day_count days with a refund (plain SQL) and month $plan_months of monthly_revenue via the rollup" \
  "$plan_day_count days planned, $mismatch_plan differing from the refund days, months '$plan_months' ($plan_month_reason)"
r=0 && ((total == 31 && published == 31)) || r=1
check "$r" "exactly those 30 days and 1 month were recomputed and published" \
  "$published published of $total"
r=0 && ((mismatch_a == 0 && rows_a > 0)) || r=1
check "$r" "(a) $rows_a rows on the 30 days equal SUM(amount - refund) recomputed from raw_orders: $mismatch_a mismatching" \
  "$mismatch_a mismatching rows"
r=0 && ((mismatch_b == 0 && days_b == 335)) || r=1
check "$r" "(b) $rows_b rows on the other $days_b days are unchanged since the snapshot: $mismatch_b differing" \
  "$mismatch_b differing rows over $days_b days"
r=0 && ((mismatch_e == 0 && months_e == 12 && mismatch_other_months == 0 && month_changed > 0)) || r=1
check "$r" "(e) monthly_revenue: each of the $months_e months equals the sum of its published days (plain SQL): $mismatch_e mismatching; $MONTH changed on $month_changed regions, the other 11 months are unchanged since the snapshot: $mismatch_other_months differing" \
  "$mismatch_e mismatching, $months_e months, $mismatch_other_months differing outside $MONTH, $month_changed changed in $MONTH"
echo "  validation on staging, before anything was published:"
r=0 && ((initial_failing == 0 && backfill_failing == 0)) &&
  awk -v m="$day_move_max" 'BEGIN { exit !(m > 0 && m < 25) }' || r=1
check "$r" "(c) the checks of daily_revenue passed on the initial load and on $JOB: revenue moved by at most $day_move_max% on a day and $job_move% over the 30 days (plain SQL), within the 25% at which measure_change(revenue) warns" \
  "$initial_failing failing on the initial load, $backfill_failing on $JOB, largest daily move $day_move_max%"
echo "  before publishing (the job waited in AWAITING_APPROVAL):"
r=0 && ((mismatch_held == 0)) || r=1
check "$r" "nothing was published while $JOB awaited approval: $mismatch_held rows differed from the snapshot" \
  "$mismatch_held differing rows"
r=0 && ((diff_days == 30 && mismatch_diff == 0 && down_days == 30 && other_days == 0 &&
  refund_days_mismatch == 0 && mismatch_month_diff == 0)) || r=1
check "$r" "(d) the diff showed revenue down on exactly the 30 days with refunds ($diff_changed rows changed, revenue $diff_revenue) and on $MONTH by the same amount ($month_delta), no rows added or removed, orders unchanged: $mismatch_diff days differ from plain SQL" \
  "$diff_days days in the diff, $down_days down, $other_days outside the incident, $refund_days_mismatch not refund days, $mismatch_diff differing from plain SQL, month diff mismatch $mismatch_month_diff"
echo "  downstream (the revenue cache in front of daily_revenue):"
r=0 && [[ $state == BACKFILL_STATE_SUCCEEDED &&
  $confirm_message == "published and confirmed downstream: "*revenue_cache* ]] &&
  same_number "$cache_after" "$cache_expected" &&
  ! same_number "$cache_before" "$cache_after" || r=1
check "$r" "(f) $JOB confirmed revenue_cache: on $CACHE_DAY the cache served $(money "$cache_before") before and $(money "$cache_after") after, exactly SUM(revenue) of the published day by $PLAIN" \
  "state ${state:-unknown}, message \"$confirm_message\", cache before $cache_before, after $cache_after, warehouse $cache_expected"

# --- a cache that ignores invalidations ---------------------------------
step "Restarting the revenue cache so that it ignores invalidations, and warming it"
stop_cache
start_cache "$WORK/revenue-cache.log" --ignore-invalidations
warm_cache
late_order="$(sql "SELECT MIN(order_id) FROM raw_orders
                   WHERE order_date = '$LATE_DAY' AND refund = 0")"
stale_value="$(cache_value "$LATE_DAY")"
echo "the cache serves $LATE_DAY: revenue $(money "$stale_value")"

step "A late refund: order $late_order of $LATE_DAY is refunded in full; backfilling that day"
sql "UPDATE raw_orders SET refund = amount WHERE order_id = $late_order;"
ctl --json submit daily_revenue --from "$LATE_DAY" --to "$(date -u -d "$LATE_DAY + 1 day" +%F)" \
  --reason "late refund of order $late_order" --ticket DATA-124 --wait \
  >"$WORK/late-refund.json" || true
JOB2="$(json "$WORK/late-refund.json" '.id // ""')"
[[ -n $JOB2 ]] || die "submit printed no job (see $WORK/late-refund.json)"
[[ $(json "$WORK/late-refund.json" '.state // ""') == BACKFILL_STATE_AWAITING_APPROVAL ]] ||
  die "expected $JOB2 to wait in AWAITING_APPROVAL, it is $(json "$WORK/late-refund.json" '.state // "in an unknown state"')"
ctl approve "$JOB2" --reason "one late refund" >/dev/null
echo "$JOB2 approved; it publishes, then confirms revenue_cache for up to its 5 s timeout"
ctl --json watch "$JOB2" >"$WORK/late-refund.json" || true
state2="$(json "$WORK/late-refund.json" '.state // ""')"
message2="$(json "$WORK/late-refund.json" '.message // ""')"
late_expected="$(warehouse_value "$LATE_DAY")"
late_served="$(cache_value "$LATE_DAY")"
echo "$JOB2: $state2"
echo "job message: $message2"
echo "$PLAIN: the warehouse has $(money "$late_expected") for $LATE_DAY; the cache serves $(money "$late_served")"
# The message names the consumer, the day, what the cache served and what
# the warehouse has; the numbers are read back from it and compared with
# plain SQL and with what the cache served before the backfill.
msg_re='consumer revenue_cache of daily_revenue still serves ([^ ]+) for partition ([^ ]+) where the warehouse has ([^ ]+) after'
msg_served="" msg_day="" msg_expected=""
if [[ $message2 =~ $msg_re ]]; then
  msg_served="${BASH_REMATCH[1]}" msg_day="${BASH_REMATCH[2]}" msg_expected="${BASH_REMATCH[3]}"
fi
# near A B: A and B agree to 6 significant digits (the message may show the
# warehouse's number rounded so).
near() {
  awk -v a="$1" -v b="$2" 'function abs(x) { return x < 0 ? -x : x }
    BEGIN { m = abs(a) > abs(b) ? abs(a) : abs(b)
            exit !(a != "" && b != "" && abs(a - b) <= 5e-6 * m) }'
}

step "Restoring a working cache and running backfillctl confirm $JOB2"
stop_cache
start_cache "$WORK/revenue-cache.log"
ctl confirm "$JOB2" >"$WORK/confirm.txt" && confirm_rc=0 || confirm_rc=$?
grep -E '^(State|Message)' "$WORK/confirm.txt" || cat "$WORK/confirm.txt"
ctl --json status "$JOB2" >"$WORK/late-refund-confirmed.json"
state3="$(json "$WORK/late-refund-confirmed.json" '.state // ""')"
message3="$(json "$WORK/late-refund-confirmed.json" '.message // ""')"
late_after="$(cache_value "$LATE_DAY")"
echo "the cache serves $LATE_DAY: revenue $(money "$late_after"); $PLAIN: $(money "$late_expected")"

echo
echo "  downstream, with a cache that ignores invalidations:"
r=0 && [[ $state2 == BACKFILL_STATE_DOWNSTREAM_UNHEALTHY && $msg_day == "$LATE_DAY" ]] &&
  same_number "$msg_served" "$stale_value" && near "$msg_expected" "$late_expected" &&
  same_number "$late_served" "$stale_value" && ! same_number "$stale_value" "$late_expected" || r=1
check "$r" "(g) $JOB2 published the late refund and ended DOWNSTREAM_UNHEALTHY, its message saying revenue_cache still served $msg_served (the number it held before: $(money "$stale_value")) for $msg_day where the warehouse has $msg_expected ($PLAIN: $(money "$late_expected"))" \
  "state ${state2:-unknown}, message \"$message2\", cache served $late_served, before $stale_value, warehouse $late_expected"
r=0 && ((confirm_rc == 0)) && [[ $state3 == BACKFILL_STATE_SUCCEEDED &&
  $message3 == "published and confirmed downstream: "*revenue_cache* ]] &&
  same_number "$late_after" "$late_expected" || r=1
check "$r" "(h) with a working cache, backfillctl confirm $JOB2 ended SUCCEEDED and the cache serves $(money "$late_after") for $LATE_DAY, exactly as $PLAIN computes" \
  "confirm exit $confirm_rc, state ${state3:-unknown}, message \"$message3\", cache $late_after, warehouse $late_expected"

if [[ $ENGINE == sqlite ]]; then
  step "Stopping backfilld and the revenue cache (SIGTERM)"
else
  step "Stopping backfilld and the revenue cache (SIGTERM), then the PostgreSQL server"
fi
stop_cache
stop_daemon
((STOP_RC == 0)) || {
  echo "demo: backfilld exited with status $STOP_RC after SIGTERM" >&2
  failures=$((failures + 1))
}
echo "backfilld exited with status $STOP_RC"

if [[ $ENGINE == sqlite ]]; then
  cat <<EOT

The data stays in $DATA. To explore it, start the revenue cache and the daemon again:
  python3 $CACHE --warehouse $DATA/warehouse.db --port $CACHE_PORT &
  $BIN/backfilld --data-dir $DATA --pipelines $PIPELINES --listen 127.0.0.1:$PORT --metrics-listen 127.0.0.1:$METRICS_PORT --http-listen 127.0.0.1:$HTTP_PORT
  $BIN/backfillctl --server 127.0.0.1:$PORT list
and open the console at http://127.0.0.1:$HTTP_PORT/ui/; stop it with Ctrl-C or kill -TERM (it drains and exits 0).
EOT
else
  stop_postgres
  echo "PostgreSQL server stopped"
  pg_ctl_start="$PG_BIN/pg_ctl -D $PG_DIR/data -l $PG_DIR/server.log -o '-p $PG_PORT' start"
  ((EUID != 0)) || pg_ctl_start="runuser -u postgres -- $pg_ctl_start"
  cat <<EOT

The warehouse stays in the PostgreSQL cluster $PG_DIR/data, the daemon's state in $DATA.
To explore them, start the server, the revenue cache and the daemon again:
  $pg_ctl_start
  python3 $CACHE --postgres "$DSN" --port $CACHE_PORT &
  $BIN/backfilld --data-dir $DATA --pipelines $PIPELINES --listen 127.0.0.1:$PORT --metrics-listen 127.0.0.1:$METRICS_PORT --http-listen 127.0.0.1:$HTTP_PORT
  $BIN/backfillctl --server 127.0.0.1:$PORT list
  psql "$DSN"
and stop the daemon with Ctrl-C or kill -TERM (it drains and exits 0), the server with
pg_ctl -D $PG_DIR/data stop (as the same user).
EOT
fi
if ((failures > 0)); then
  echo "demo: FAIL ($failures check(s) failed)"
  exit 1
fi
echo "demo: PASS"
