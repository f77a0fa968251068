#!/usr/bin/env bash
# The replay-policy demo: a late refund lands in the raw orders behind the
# service's back, and backfilld replays the day and its month by itself,
# without anyone typing a backfill. A late row on a frozen day is not
# replayed.
#
#  1. installs missing dependencies and builds (skip with --no-build);
#  2. generates a warehouse of the last 45 days (backfill-demo-gen --start
#     <45 days ago> --days 45: every day up to yesterday, UTC);
#  3. runs backfilld with examples/demo/pipelines-replay, whose daily_revenue
#     declares a replay policy (on input_change and transform_change, window
#     30d, settle 2s, max_cost 10%, approval auto, check_every 1s) and a
#     frozen rule (older_than: 21d), and loads the 45 days and their months
#     once (--override-frozen: the days older than 21 days are closed);
#  4. inserts a late refund row into raw_orders with plain sqlite3, on the
#     day 3 days ago, and waits (polling backfillctl list) for the job the
#     policy submits by itself, requested by policy:daily_revenue, to end;
#  5. inserts a late refund row on the day 25 days ago, inside the window
#     but frozen, and waits until the policy has looked at it: it is never
#     due, `backfillctl policies` lists it as frozen (evaluations
#     nothing_due), and a plan of it is refused by the frozen rule,
#     and no job is submitted;
#  6. checks with plain sqlite3, independently of the service: the day's and
#     the month's published revenue equal what the raw tables give and moved
#     by exactly the refund; every other day and month, the frozen day
#     included, is as the first load published it; the frozen day still
#     lacks its late refund; state.db holds exactly one job of the policy,
#     SUCCEEDED without an approval, whose reason names input_change and
#     whose partitions are that day and that month. The /metrics scrape
#     agrees. Exits non-zero if a check fails.
#
# backfilld is always stopped with SIGTERM at the end (and on any error or
# Ctrl-C), so the demo leaves no process behind; it listens on ports the
# system chooses (127.0.0.1:0), so that several runs may share a machine.
# The data stays in the demo directory.
#
# Usage: scripts/demo_replay.sh [--no-build]
# Environment: BACKFILL_DEMO_DIR (default: build/demo-replay under the
#              repository), BACKFILL_BIN_DIR (default: build/bin).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${BACKFILL_BIN_DIR:-$ROOT/build/bin}"
WORK="${BACKFILL_DEMO_DIR:-$ROOT/build/demo-replay}"
DATA="$WORK/data"
WAREHOUSE="$DATA/warehouse.db"
STATE_DB="$DATA/state.db"
SNAPSHOT="$WORK/published-before.db"
PIPELINES="$ROOT/examples/demo/pipelines-replay"
DATASET=daily_revenue
POLICY="policy:$DATASET"
# The days, counted back from today (UTC) as the pipeline's window and
# frozen rule are: 45 days of orders up to yesterday; a late refund 3 days
# ago (inside the 30-day window, not frozen) and one 25 days ago (inside the
# window, older than 21 days: frozen).
DAYS=45
TODAY="$(date -u +%F)"
START="$(date -u -d "$TODAY - $DAYS days" +%F)"
LATE_DAY="$(date -u -d "$TODAY - 3 days" +%F)"
LATE_MONTH="${LATE_DAY:0:7}"
FROZEN_DAY="$(date -u -d "$TODAY - 25 days" +%F)"
# The refunds recorded late, each a row of its own (amount 0).
REFUND=250.00
FROZEN_REFUND=180.00
# How long the demo waits for the policy each time (it looks every
# second): a demo that fails, fails well within the minute ctest gives it.
WAIT_SECONDS=20
DAEMON_PID=""

build=1
while (($# > 0)); do
  case "$1" in
    --no-build) build=0 ;;
    -h | --help)
      # The comment at the top of this file, up to its first other line.
      awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "${BASH_SOURCE[0]}"
      exit 0
      ;;
    *)
      echo "demo_replay: unknown argument '$1' (try --help)" >&2
      exit 2
      ;;
  esac
  shift
done

DEMO_NAME=demo_replay
# shellcheck source=scripts/demo_lib.sh
source "$ROOT/scripts/demo_lib.sh"

on_exit() {
  local rc=$?
  if [[ -n $DAEMON_PID ]]; then
    echo "demo_replay: stopping backfilld (pid $DAEMON_PID)" >&2
    stop_daemon
  fi
  if ((rc != 0)); then
    echo "demo_replay: FAILED (exit $rc); logs are in $WORK" >&2
  fi
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP
trap 'exit 141' PIPE

# start_daemon LOG: starts backfilld on ports the system chooses and waits
# until it serves; sets ADDR (gRPC) and METRICS (/metrics) from its log.
ADDR=""
METRICS=""
start_daemon() {
  local log="$1"
  : >"$log"
  "$BIN/backfilld" --data-dir "$DATA" --pipelines "$PIPELINES" \
    --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 --workers 2 >"$log" 2>&1 &
  DAEMON_PID=$!
  wait_listening "$log"
  ADDR="$(sed -n 's/.*backfilld listening on \([^ ]*\).*/\1/p;T;q' "$log")"
  METRICS="$(sed -n 's|.* metrics http://\([^/]*\)/metrics.*|\1|p;T;q' "$log")"
  [[ -n $ADDR && -n $METRICS ]] || die "cannot read the addresses from $log"
  echo "backfilld (pid $DAEMON_PID) listening on $ADDR, metrics on http://$METRICS/metrics"
}

ctl() { "$BIN/backfillctl" --server "$ADDR" "$@"; }
# sql QUERY...: plain sqlite3 on the warehouse; state_sql on the daemon's
# state store (read only; the daemon keeps it in WAL mode).
sql() { sqlite3 -batch -bail "$WAREHOUSE" "$@"; }
state_sql() { sqlite3 -batch -bail -readonly "$STATE_DB" "$@"; }
money() { awk -v x="$1" 'BEGIN { printf "%.2f", x }'; }

# metric NAME LABELS: the value of one series of a /metrics scrape, LABELS
# as the daemon prints them (dataset="daily_revenue",result="submitted");
# empty when the series is absent.
metric() {
  curl -sfS --max-time 5 "http://$METRICS/metrics" |
    awk -v want="$1{$2}" '$1 == want && !found { print $2; found = 1 }'
}
# replay_metrics: the policy's series of a scrape, for display.
replay_metrics() {
  curl -sfS --max-time 5 "http://$METRICS/metrics" | grep '^backfill_replay_' | sed 's/^/  /'
}
# evaluations RESULT: how many of the policy's evaluations had RESULT (0
# before the first).
evaluations() {
  local v
  v="$(metric backfill_replay_evaluations_total "dataset=\"$DATASET\",result=\"$1\"")"
  echo "${v:-0}"
}

# policy_job: the newest job requested by the policy, as JSON ("" if none).
policy_job() {
  ctl --json list --dataset "$DATASET" --limit 20 |
    jq -c --arg by "$POLICY" '[.backfills[]? | select(.request.requested_by == $by)][0] // empty'
}

# revenue_sql TABLE COLUMN VALUE: the total revenue of one partition, by
# plain SQL, with 2 decimals.
revenue_sql() {
  sql "SELECT printf('%.2f', COALESCE(SUM(revenue), 0)) FROM $1 WHERE $2 = '$3'"
}
# raw_revenue DAY: what the fixed transform gives for DAY, from raw_orders.
raw_revenue() {
  sql "SELECT printf('%.2f', COALESCE(SUM(amount - refund), 0)) FROM raw_orders WHERE order_date = '$1'"
}
# snap_revenue TABLE COLUMN VALUE: the same as revenue_sql, in the snapshot
# of the first load.
snap_revenue() {
  sqlite3 -batch -bail "$SNAPSHOT" \
    "SELECT printf('%.2f', COALESCE(SUM(revenue), 0)) FROM $1 WHERE $2 = '$3'"
}

if ((build)); then
  step "Installing dependencies and building"
  "$ROOT/scripts/install-deps.sh"
  "$ROOT/scripts/build.sh"
fi
for tool in "$BIN/backfilld" "$BIN/backfillctl" "$BIN/backfill-demo-gen"; do
  [[ -x $tool ]] || die "$tool is missing; run scripts/build.sh first"
done
for tool in sqlite3 jq awk curl; do
  command -v "$tool" >/dev/null || die "$tool is required (scripts/install-deps.sh installs it)"
done

step "Generating a warehouse of the last $DAYS days ($START .. yesterday) in $DATA"
rm -rf "$WORK"
mkdir -p "$WORK"
"$BIN/backfill-demo-gen" --data-dir "$DATA" --start "$START" --days "$DAYS" \
  --refund-start "$START" --refund-days "$DAYS"

step "Starting backfilld with $PIPELINES (a replay policy and a frozen rule on $DATASET)"
start_daemon "$WORK/backfilld.log"
sed -n '/^    replay:/,/^  - name: monthly_revenue/{/^ *#/d;/^  - name/d;p}' "$PIPELINES/demo.yaml"

step "Initial load of $DATASET, $START..$TODAY, and its monthly_revenue rollup"
echo "(days older than 21 days are frozen: the first load opens them once, with --override-frozen)"
ctl --json submit "$DATASET" --from "$START" --to "$TODAY" --override-frozen \
  --reason "initial load" --wait >"$WORK/initial-load.json" || true
load_state="$(jq -r '.state // ""' "$WORK/initial-load.json")"
[[ $load_state == BACKFILL_STATE_SUCCEEDED ]] ||
  die "initial load ended in ${load_state:-an unknown state} (see $WORK/initial-load.json)"
months="$(sql "SELECT COUNT(DISTINCT month) FROM monthly_revenue")"
echo "initial load $(jq -r .id "$WORK/initial-load.json"): SUCCEEDED," \
  "$(jq -r '.partitions.published // 0' "$WORK/initial-load.json") partitions published" \
  "($DAYS days, $months months)"
sqlite3 -batch -bail "$SNAPSHOT" \
  "ATTACH '${WAREHOUSE//\'/\'\'}' AS w;
   CREATE TABLE daily_revenue AS SELECT ds, region, revenue, orders FROM w.daily_revenue;
   CREATE TABLE monthly_revenue AS SELECT month, region, revenue, orders FROM w.monthly_revenue;"
echo "snapshot of what it published: $SNAPSHOT"

step "Nothing changed since: the policy finds nothing due"
nothing_due_before="$(evaluations nothing_due)"
deadline=$((SECONDS + WAIT_SECONDS))
until (($(evaluations nothing_due) > nothing_due_before)); do
  ((SECONDS < deadline)) ||
    die "the policy was not evaluated within $WAIT_SECONDS s (see $WORK/backfilld.log)"
  sleep 0.1
done
replay_metrics
[[ -z $(policy_job) ]] || die "the policy submitted a job although nothing changed"

step "A late refund: $REFUND on $LATE_DAY, inserted into raw_orders with plain sqlite3"
late_customer="$(sql "SELECT MIN(customer_id) FROM raw_orders WHERE order_date = '$LATE_DAY'")"
sql "INSERT INTO raw_orders (order_date, customer_id, amount, refund)
     VALUES ('$LATE_DAY', $late_customer, 0, $REFUND);"
echo "published revenue of $LATE_DAY: $(revenue_sql daily_revenue ds "$LATE_DAY"); raw_orders now give $(raw_revenue "$LATE_DAY")"
echo "nobody submits anything: waiting for the policy (settle 2s, check_every 1s)"
inserted_at=$SECONDS
job_json=""
job_state=""
ended=0
deadline=$((SECONDS + WAIT_SECONDS))
while ((SECONDS < deadline)); do
  job_json="$(policy_job)"
  [[ -n $job_json ]] || {
    sleep 0.2
    continue
  }
  job_state="$(jq -r '.state // ""' <<<"$job_json")"
  # An end, or a wait for an approval that nobody gives here (the checks
  # below then fail).
  case "$job_state" in
    BACKFILL_STATE_SUCCEEDED | BACKFILL_STATE_FAILED | BACKFILL_STATE_CANCELLED | \
      BACKFILL_STATE_VALIDATION_FAILED | BACKFILL_STATE_ROLLED_BACK | \
      BACKFILL_STATE_DOWNSTREAM_UNHEALTHY | BACKFILL_STATE_AWAITING_APPROVAL)
      ended=1
      break
      ;;
  esac
  sleep 0.2
done
[[ -n $job_json ]] || die "the policy submitted no job within $WAIT_SECONDS s (see $WORK/backfilld.log)"
((ended)) || die "the policy's job $(jq -r .id <<<"$job_json") is still ${job_state#BACKFILL_STATE_} after $WAIT_SECONDS s"
JOB="$(jq -r .id <<<"$job_json")"
echo "$JOB, requested by $(jq -r .request.requested_by <<<"$job_json"): ${job_state#BACKFILL_STATE_}," \
  "$((SECONDS - inserted_at)) s after the insert"
ctl status "$JOB" | sed -n '/^Job/,/^Message/p' | grep -v -e '^Idempotency' -e '^Created' -e '^Started' -e '^Updated'
ctl --json status "$JOB" >"$WORK/replay-job.json"

step "A late refund on a frozen day: $FROZEN_REFUND on $FROZEN_DAY (inside the window, older than 21 days)"
frozen_customer="$(sql "SELECT MIN(customer_id) FROM raw_orders WHERE order_date = '$FROZEN_DAY'")"
nothing_due_before="$(evaluations nothing_due)"
sql "INSERT INTO raw_orders (order_date, customer_id, amount, refund)
     VALUES ('$FROZEN_DAY', $frozen_customer, 0, $FROZEN_REFUND);"
echo "waiting until the policy has looked at it twice once settled"
# frozen_listed: whether the policy's last evaluation lists the day as
# frozen (backfillctl policies).
frozen_listed() {
  ctl --json policies |
    jq -e --arg d "$FROZEN_DAY" '[.policies[]?.last_evaluation.frozen_partitions[]?] | index($d) != null' \
      >/dev/null
}
deadline=$((SECONDS + WAIT_SECONDS))
until { (($(evaluations nothing_due) >= nothing_due_before + 2)) && frozen_listed; } ||
  ((SECONDS >= deadline)); do
  sleep 0.1
done
replay_metrics
echo "the policy lists the day as frozen, and submits nothing for it:"
ctl policies | sed 's/^/  /'
frozen_listed && frozen_shown=1 || frozen_shown=0
echo "a plan of it is refused by the frozen rule, as any request is:"
ctl plan "$DATASET" --from "$FROZEN_DAY" --to "$(date -u -d "$FROZEN_DAY + 1 day" +%F)" \
  >"$WORK/frozen-plan.txt" 2>&1 && frozen_plan_rc=0 || frozen_plan_rc=$?
sed 's/^/  /' "$WORK/frozen-plan.txt"

step "Checking with plain sqlite3 ($WAREHOUSE, $STATE_DB)"
# (a) the late day: published rows equal the fixed transform recomputed from
# the raw tables, per region; its total moved by exactly the refund.
mismatch_day="$(sql "
  WITH expected AS (
    SELECT o.order_date AS ds, c.region AS region, SUM(o.amount - o.refund) AS revenue,
           COUNT(*) AS orders
    FROM raw_orders o JOIN dim_customers c ON c.customer_id = o.customer_id
    WHERE o.order_date = '$LATE_DAY' GROUP BY 1, 2)
  SELECT (SELECT COUNT(*) FROM expected e LEFT JOIN daily_revenue d USING (ds, region)
          WHERE d.ds IS NULL OR d.orders <> e.orders OR abs(d.revenue - e.revenue) > 1e-6)
       + (SELECT COUNT(*) FROM daily_revenue d LEFT JOIN expected e USING (ds, region)
          WHERE d.ds = '$LATE_DAY' AND e.ds IS NULL);")"
day_before="$(snap_revenue daily_revenue ds "$LATE_DAY")"
day_after="$(revenue_sql daily_revenue ds "$LATE_DAY")"
day_raw="$(raw_revenue "$LATE_DAY")"
# (b) its month: equals the sum of its published days, and moved by the
# refund.
mismatch_month="$(sql "
  WITH expected AS (
    SELECT substr(ds, 1, 7) AS month, region, SUM(revenue) AS revenue, SUM(orders) AS orders
    FROM daily_revenue WHERE substr(ds, 1, 7) = '$LATE_MONTH' GROUP BY 1, 2)
  SELECT (SELECT COUNT(*) FROM expected e LEFT JOIN monthly_revenue m USING (month, region)
          WHERE m.month IS NULL OR m.orders <> e.orders OR abs(m.revenue - e.revenue) > 1e-6)
       + (SELECT COUNT(*) FROM monthly_revenue m LEFT JOIN expected e USING (month, region)
          WHERE m.month = '$LATE_MONTH' AND e.month IS NULL);")"
month_before="$(snap_revenue monthly_revenue month "$LATE_MONTH")"
month_after="$(revenue_sql monthly_revenue month "$LATE_MONTH")"
# (c) every other day and month, the frozen day and its month included, is
# exactly as the first load published it.
cols="ds, region, revenue, orders"
mcols="month, region, revenue, orders"
snap="ATTACH '${SNAPSHOT//\'/\'\'}' AS snap;"
mismatch_others="$(sql "$snap
  SELECT (SELECT COUNT(*) FROM (
            SELECT $cols FROM main.daily_revenue WHERE ds <> '$LATE_DAY'
            EXCEPT SELECT $cols FROM snap.daily_revenue WHERE ds <> '$LATE_DAY'))
       + (SELECT COUNT(*) FROM (
            SELECT $cols FROM snap.daily_revenue WHERE ds <> '$LATE_DAY'
            EXCEPT SELECT $cols FROM main.daily_revenue WHERE ds <> '$LATE_DAY'))
       + (SELECT COUNT(*) FROM (
            SELECT $mcols FROM main.monthly_revenue WHERE month <> '$LATE_MONTH'
            EXCEPT SELECT $mcols FROM snap.monthly_revenue WHERE month <> '$LATE_MONTH'))
       + (SELECT COUNT(*) FROM (
            SELECT $mcols FROM snap.monthly_revenue WHERE month <> '$LATE_MONTH'
            EXCEPT SELECT $mcols FROM main.monthly_revenue WHERE month <> '$LATE_MONTH'));")"
other_days="$(sql "SELECT COUNT(DISTINCT ds) FROM daily_revenue WHERE ds <> '$LATE_DAY'")"
# (d) the frozen day: as published, so without its late refund.
frozen_published="$(revenue_sql daily_revenue ds "$FROZEN_DAY")"
frozen_raw="$(raw_revenue "$FROZEN_DAY")"
# (e) the policy's jobs in state.db: exactly one, and what it recomputed.
policy_jobs="$(state_sql "SELECT COUNT(*) FROM jobs WHERE requested_by = '$POLICY'")"
IFS='|' read -r db_job db_state db_by db_hold < <(state_sql \
  "SELECT id, state, requested_by, approval_hold FROM jobs
   WHERE requested_by = '$POLICY' ORDER BY seq DESC LIMIT 1") || true
db_reason="$(state_sql "SELECT reason FROM jobs WHERE id = '${db_job:-}'")"
db_tasks="$(state_sql "SELECT group_concat(dataset || ' ' || partition, ', ') FROM
                         (SELECT dataset, partition FROM tasks WHERE job_id = '${db_job:-}'
                          ORDER BY dataset, partition)")"
expected_tasks="$DATASET $LATE_DAY, monthly_revenue $LATE_MONTH"
due_now="$(metric backfill_replay_due_partitions "dataset=\"$DATASET\"")"
submitted="$(evaluations submitted)"
nothing_due="$(evaluations nothing_due)"

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
# moved BEFORE AFTER DELTA: AFTER - BEFORE is DELTA, to the cent.
moved() {
  awk -v b="$1" -v a="$2" -v d="$3" 'BEGIN { x = a - b - d; exit !(x < 0.005 && x > -0.005) }'
}

r=0 && [[ $db_job == "$JOB" && $db_state == SUCCEEDED && $db_by == "$POLICY" && $policy_jobs == 1 ]] || r=1
check "$r" "state.db: exactly one job requested by $POLICY ($JOB), SUCCEEDED; nobody typed a backfill" \
  "$policy_jobs job(s) of the policy, newest ${db_job:-none} in ${db_state:-?} requested by ${db_by:-?}"
r=0 && [[ $db_reason == "replay policy of $DATASET: input_change: "* ]] || r=1
check "$r" "its reason names input_change: \"$db_reason\"" "reason \"$db_reason\""
r=0 && [[ $db_tasks == "$expected_tasks" && -z $db_hold ]] || r=1
check "$r" "it recomputed exactly $expected_tasks, without waiting for an approval (max_cost 10%)" \
  "tasks: $db_tasks; approval hold: \"$db_hold\""
r=0 && ((mismatch_day == 0)) && [[ $day_after == "$day_raw" ]] && moved "$day_before" "$day_after" "-$REFUND" || r=1
check "$r" "(a) $LATE_DAY: revenue $day_before -> $day_after, down by the refund of $REFUND and equal to SUM(amount - refund) of raw_orders ($day_raw): $mismatch_day (day, region) rows differ" \
  "$mismatch_day rows differ, before $day_before, after $day_after, raw $day_raw"
r=0 && ((mismatch_month == 0)) && moved "$month_before" "$month_after" "-$REFUND" || r=1
check "$r" "(b) month $LATE_MONTH: revenue $month_before -> $month_after, down by the same $REFUND and equal to the sum of its published days: $mismatch_month rows differ" \
  "$mismatch_month rows differ, before $month_before, after $month_after"
r=0 && ((mismatch_others == 0 && other_days == DAYS - 1)) || r=1
check "$r" "(c) the other $other_days days and the other months are as the first load published them: $mismatch_others rows differ" \
  "$mismatch_others rows differ over $other_days days"
r=0 && moved "$frozen_published" "$frozen_raw" "-$FROZEN_REFUND" && ((frozen_plan_rc != 0 && frozen_shown)) &&
  grep -q "every partition of the request is frozen" "$WORK/frozen-plan.txt" || r=1
check "$r" "(d) frozen $FROZEN_DAY: its late refund of $FROZEN_REFUND is not replayed: published $frozen_published, raw_orders give $frozen_raw; backfillctl policies lists it as frozen; a plan of it is refused (frozen.older_than 21d)" \
  "published $frozen_published, raw $frozen_raw, listed as frozen: $frozen_shown, plan exit $frozen_plan_rc"
r=0 && [[ ${due_now:-} == 0 && $submitted == 1 ]] && ((nothing_due >= nothing_due_before + 2)) || r=1
check "$r" "/metrics: 0 partitions due (a frozen day is never due), $submitted replay submitted, $((nothing_due - nothing_due_before)) evaluations nothing_due since the frozen row" \
  "due ${due_now:-absent}, submitted $submitted, nothing_due $nothing_due (was $nothing_due_before)"

step "Stopping backfilld (SIGTERM)"
stop_daemon
r=0 && ((STOP_RC == 0)) || r=1
check "$r" "backfilld exited with status 0 after SIGTERM" "exit status $STOP_RC"

cat <<EOT

The data stays in $DATA. To explore it, start the daemon again:
  $BIN/backfilld --data-dir $DATA --pipelines $PIPELINES --listen 127.0.0.1:50551 --metrics-listen 127.0.0.1:9564
  $BIN/backfillctl --server 127.0.0.1:50551 list
and stop it with Ctrl-C or kill -TERM (it drains and exits 0).
EOT
if ((failures > 0)); then
  echo "demo_replay: FAIL ($failures check(s) failed)"
  exit 1
fi
echo "demo_replay: PASS"
