#include "bench/perf_postgres.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "absl/time/civil_time.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "backfill/v1/backfill.pb.h"
#include "bench/perf_daemon.h"
#include "bench/perf_fixtures.h"
#include "bench/perf_job_states.h"
#include "bench/perf_process.h"
#include "core/base/status_macros.h"
#include "storage/postgres/pg_connection.h"
#include "tests/testing/postgres_test_server.h"

namespace backfill::bench {
namespace {
// Named too: a unity build joins this file's anonymous namespace with the
// other rows' files'.
namespace postgres_rows {

namespace fs = std::filesystem;
using postgres::PgConnection;
using postgres::PgResult;

struct PostgresSizes {
  int days = 365;
  int64_t orders_per_day = 27'398;  // 10.0 million orders in 365 days
  // The trivial job. 100,000 partitions would take about 5 minutes here
  // (see docs/performance.md); this many fit in about one and a half.
  int64_t hours = 30'000;
  int64_t large_rows = 5'000'000;  // the large partition replaced by hand
  // The partition a job replaces, twice (a first publish, then a
  // replacement of every row): a fifth of the one replaced by hand, so that
  // the two jobs take seconds, not minutes.
  int64_t job_rows = 1'000'000;
};

PostgresSizes QuickPostgresSizes() {
  PostgresSizes s;
  s.days = 30;
  s.orders_per_day = 200;
  s.hours = 200;
  s.large_rows = 20'000;
  s.job_rows = 500;
  return s;
}

constexpr int64_t kFullHours = 100'000;  // the partitions rows' job
constexpr char kPhases[] = "backfill_partition_phase_seconds_total";

void Note(const std::string& what) {
  std::fprintf(stderr, "backfill_perf: %s\n", what.c_str());
}

absl::StatusOr<int64_t> Int(const PgResult& r, size_t row, size_t col) {
  int64_t v = 0;
  if (r.rows.size() <= row || r.rows[row].size() <= col ||
      !r.rows[row][col].has_value() ||
      !absl::SimpleAtoi(*r.rows[row][col], &v)) {
    return absl::InternalError("unexpected answer from PostgreSQL");
  }
  return v;
}

// The time job `id` spent between entering state `from` and state `to`,
// from its audit events.
absl::StatusOr<double> Span(BackfillClient& client, const std::string& id,
                            v1::BackfillState from, v1::BackfillState to) {
  ASSIGN_OR_RETURN(auto entered, StatesEntered(client, id));
  if (entered.count(from) == 0 || entered.count(to) == 0) {
    return absl::InternalError(absl::StrCat(
        "job ", id, " has no audit event into ", v1::BackfillState_Name(from),
        " or ", v1::BackfillState_Name(to)));
  }
  return absl::ToDoubleSeconds(entered[to] - entered[from]);
}

// The revenue transform as psql runs it: its parameters as psql's
// variables, quoted as literals (:'name').
std::string PsqlTransform() {
  return absl::StrReplaceAll(RevenueTransform("orders"),
                             {{":partition_start", ":'partition_start'"},
                              {":partition_end", ":'partition_end'"}});
}

// The psql script replacing each day of `days` (Days()) in direct_revenue
// with the transform's rows, one transaction per day.
std::string PsqlReloadScript(const std::vector<std::string>& days) {
  std::string script =
      "CREATE TABLE direct_revenue (ds TEXT, region TEXT, revenue DOUBLE "
      "PRECISION, orders BIGINT, PRIMARY KEY (ds, region));\n";
  const std::string transform = PsqlTransform();
  for (size_t i = 0; i + 1 < days.size(); ++i) {
    absl::StrAppend(
        &script, "\\set partition_start ", days[i], "\n\\set partition_end ",
        days[i + 1],
        "\nBEGIN;\n"
        "DELETE FROM direct_revenue WHERE ds >= :'partition_start' "
        "AND ds < :'partition_end';\n"
        "INSERT INTO direct_revenue (ds, region, revenue, orders)\n",
        transform, ";\nCOMMIT;\n");
  }
  return script;
}

class PostgresBench {
 public:
  explicit PostgresBench(const PostgresBenchOptions& options)
      : options_(options),
        sizes_(options.quick ? QuickPostgresSizes() : PostgresSizes()) {}

  absl::Status Run(std::vector<Row>* rows) {
    Note("starting a PostgreSQL server");
    ASSIGN_OR_RETURN(server_, testing::PostgresTestServer::Start());
    {
      // pg_stat_statements counts the warehouse's statements per partition.
      ASSIGN_OR_RETURN(std::unique_ptr<PgConnection> admin,
                       PgConnection::Connect(server_->Dsn()));
      RETURN_IF_ERROR(admin->ExecScript(
          "ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'"));
    }
    RETURN_IF_ERROR(server_->Restart());
    ASSIGN_OR_RETURN(admin_, PgConnection::Connect(server_->Dsn()));
    statements_counted_ =
        admin_->ExecScript("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            .ok();
    std::ifstream pid_file(server_->dir() + "/data/postmaster.pid");
    std::string line;
    std::getline(pid_file, line);
    if (!absl::SimpleAtoi(line, &postmaster_)) {
      return absl::InternalError("the PostgreSQL server wrote no pid");
    }
    RETURN_IF_ERROR(ReloadRow(rows));
    RETURN_IF_ERROR(TrivialJobRow(rows));
    RETURN_IF_ERROR(LargePartitionRows(rows));
    return absl::OkStatus();
  }

 private:
  double ServerCpu() const { return ProcessTreeCpuSeconds(postmaster_); }

  // A new database `name` on the server (C collation, the server's own);
  // its connection string.
  absl::StatusOr<std::string> CreateDatabase(const std::string& name) {
    RETURN_IF_ERROR(admin_->ExecScript(absl::StrCat("CREATE DATABASE ", name)));
    return server_->Dsn(name);
  }

  // A data directory `name` whose pipeline file holds `yaml`.
  absl::StatusOr<std::string> DataDir(const std::string& name,
                                      const std::string& yaml) const {
    const fs::path data = options_.dir / name;
    fs::create_directories(data / "pipelines");
    RETURN_IF_ERROR(
        WriteTextFile((data / "pipelines" / "bench.yaml").string(), yaml));
    return data.string();
  }

  absl::StatusOr<std::unique_ptr<BenchDaemon>> StartDaemon(
      const std::string& data_dir) const {
    DaemonOptions o;
    o.binary = options_.backfilld;
    o.data_dir = data_dir;
    o.workers = options_.workers;
    return BenchDaemon::Start(o);
  }

  // The statements run in database `name` since the last ResetStatements().
  absl::StatusOr<std::optional<int64_t>> Statements(const std::string& name) {
    if (!statements_counted_) return std::optional<int64_t>();
    ASSIGN_OR_RETURN(
        PgResult r,
        admin_->Exec("SELECT coalesce(sum(calls), 0)::bigint FROM "
                     "pg_stat_statements WHERE dbid = (SELECT oid FROM "
                     "pg_database WHERE datname = $1)",
                     {name}));
    ASSIGN_OR_RETURN(int64_t n, Int(r, 0, 0));
    return std::optional<int64_t>(n);
  }
  absl::Status ResetStatements() {
    if (!statements_counted_) return absl::OkStatus();
    return admin_->Exec("SELECT pg_stat_statements_reset()").status();
  }

  // Row 1: the full reload through backfilld and through psql.
  absl::Status ReloadRow(std::vector<Row>* rows) {
    const int64_t orders = sizes_.days * sizes_.orders_per_day;
    ASSIGN_OR_RETURN(const std::string dsn, CreateDatabase("reload"));
    ASSIGN_OR_RETURN(std::unique_ptr<PgConnection> conn,
                     PgConnection::Connect(dsn));
    Note(absl::StrCat("loading ", Count(static_cast<double>(orders)),
                      " orders into PostgreSQL"));
    const absl::Time load_start = absl::Now();
    // The rows of AddOrdersTable (perf_fixtures.h): the g-th order (from 0)
    // on day g / per_day.
    RETURN_IF_ERROR(conn->ExecScript(absl::StrFormat(
        R"sql(
CREATE TABLE dim_customers (customer_id INTEGER PRIMARY KEY, region TEXT);
INSERT INTO dim_customers SELECT v, 'r' || (v %% 5) FROM generate_series(1, 500) v;
CREATE TABLE orders (order_id BIGINT, order_date TEXT, customer_id INTEGER,
                     amount DOUBLE PRECISION, refund DOUBLE PRECISION);
INSERT INTO orders
  SELECT g + 1, to_char(DATE '%1$s' + (g / %2$d)::int, 'YYYY-MM-DD'),
         1 + (g * 7919) %% 500, 5 + g %% 97,
         CASE WHEN g %% %2$d %% 10 = 0 THEN 1.5 ELSE 0 END
  FROM generate_series(0::bigint, %3$d) g;
CREATE INDEX orders_date ON orders (order_date);
ANALYZE dim_customers;
)sql",
        kFirstDay, sizes_.orders_per_day, orders - 1)));
    RETURN_IF_ERROR(conn->ExecScript("VACUUM ANALYZE orders"));
    const double load_seconds = absl::ToDoubleSeconds(absl::Now() - load_start);
    const std::vector<std::string> days = Days(sizes_.days);

    // psql first: both read the orders from the server's cache after it.
    const std::string script = (options_.dir / "reload.sql").string();
    RETURN_IF_ERROR(WriteTextFile(script, PsqlReloadScript(days)));
    Note("full reload with psql");
    const double psql_server_before = ServerCpu();
    ASSIGN_OR_RETURN(CommandUsage psql,
                     RunCommand({"psql", "-X", "-q", "-v", "ON_ERROR_STOP=1",
                                 "-d", dsn, "-f", script},
                                "", (options_.dir / "psql.log").string()));
    const double psql_server = ServerCpu() - psql_server_before;
    if (psql.exit_code != 0) {
      return absl::InternalError(absl::StrCat("psql exited ", psql.exit_code,
                                              " (see ", options_.dir.string(),
                                              "/psql.log)"));
    }

    ASSIGN_OR_RETURN(
        std::string data,
        DataDir("pg_reload", PostgresRevenuePipelineYaml(dsn, {"orders"})));
    ASSIGN_OR_RETURN(std::unique_ptr<BenchDaemon> daemon, StartDaemon(data));
    Note("full reload through backfilld");
    const v1::BackfillRequest full = RangeRequest(
        "revenue_orders", days.front(), days.back(), "bench: full reload");
    double server_before = ServerCpu();
    ASSIGN_OR_RETURN(JobRun first, daemon->RunJob(full));
    const double first_server = ServerCpu() - server_before;
    // The result is the same table either way: checked, not assumed.
    ASSIGN_OR_RETURN(
        PgResult same,
        conn->Exec("SELECT (SELECT count(*) FROM (SELECT ds, region, revenue, "
                   "orders FROM revenue_orders EXCEPT SELECT ds, region, "
                   "revenue, orders FROM direct_revenue) a), (SELECT count(*) "
                   "FROM (SELECT ds, region, revenue, orders FROM "
                   "direct_revenue EXCEPT SELECT ds, region, revenue, orders "
                   "FROM revenue_orders) b), (SELECT count(*) FROM "
                   "revenue_orders)"));
    ASSIGN_OR_RETURN(int64_t only_backfilld, Int(same, 0, 0));
    ASSIGN_OR_RETURN(int64_t only_psql, Int(same, 0, 1));
    ASSIGN_OR_RETURN(int64_t result_rows, Int(same, 0, 2));
    if (only_backfilld != 0 || only_psql != 0 || result_rows == 0) {
      return absl::InternalError(absl::StrCat(
          "revenue_orders and direct_revenue differ: ", only_backfilld,
          " rows only in backfilld's, ", only_psql, " only in psql's, ",
          result_rows, " in backfilld's"));
    }
    // A second full reload finds every input's fingerprint kept by the
    // first (early cutoff then publishes nothing): printed beside.
    Note("second full reload through backfilld");
    server_before = ServerCpu();
    ASSIGN_OR_RETURN(JobRun second, daemon->RunJob(full));
    const double second_server = ServerCpu() - server_before;
    daemon->Stop();

    const double wall_ratio = first.wall_seconds / psql.wall_seconds;
    const double b_cpu = first.daemon_cpu_seconds + first_server;
    const double p_cpu = psql.cpu_seconds + psql_server;
    const double cpu_ratio = b_cpu / p_cpu;
    rows->push_back(
        {absl::StrCat("full reload on PostgreSQL (", sizes_.days, " days, ",
                      Count(static_cast<double>(orders)),
                      " orders loaded with generate_series): backfilld, cold "
                      "(no input fingerprint known) / psql running the same "
                      "SQL, one transaction per day, on the same server: wall; "
                      "CPU of daemon + server / psql + server"),
         "<= 1.2x both",
         absl::StrFormat(
             "backfilld %s wall, CPU daemon %.2f s + server %.2f s (%d "
             "workers); psql %s wall, CPU psql %.2f s + server %.2f s; "
             "results identical (EXCEPT both ways, %d rows); a second full "
             "reload (fingerprints known, early cutoff publishes none) %s "
             "wall, CPU %.2f s + %.2f s; load %s",
             Sec(first.wall_seconds), first.daemon_cpu_seconds, first_server,
             options_.workers, Sec(psql.wall_seconds), psql.cpu_seconds,
             psql_server, static_cast<int>(result_rows),
             Sec(second.wall_seconds), second.daemon_cpu_seconds, second_server,
             Sec(load_seconds)),
         absl::StrFormat("wall %.2fx, CPU %.2fx", wall_ratio, cpu_ratio),
         wall_ratio <= 1.2 && cpu_ratio <= 1.2});
    return absl::OkStatus();
  }

  // Row 2: the trivial job of the partitions rows on a PostgreSQL
  // warehouse.
  absl::Status TrivialJobRow(std::vector<Row>* rows) {
    const std::string db = "hours";
    ASSIGN_OR_RETURN(const std::string dsn, CreateDatabase(db));
    {
      ASSIGN_OR_RETURN(std::unique_ptr<PgConnection> conn,
                       PgConnection::Connect(dsn));
      RETURN_IF_ERROR(conn->ExecScript(
          "CREATE TABLE ticks (h TEXT, v INTEGER);"
          "CREATE INDEX ticks_h ON ticks (h); ANALYZE ticks;"));
    }
    ASSIGN_OR_RETURN(
        std::string data,
        DataDir("pg_hours", PostgresTrivialHourlyPipelineYaml(dsn, "ticks")));
    ASSIGN_OR_RETURN(std::unique_ptr<BenchDaemon> daemon, StartDaemon(data));
    const absl::CivilHour start(2000, 1, 1, 0);
    // One partition outside the range first: it creates the published
    // table, which the measured job does not pay for.
    RETURN_IF_ERROR(
        daemon
            ->RunJob(RangeRequest("hourly_ticks", HourPartition(start - 1),
                                  HourPartition(start), "bench: first hour"))
            .status());
    const int64_t n = sizes_.hours;
    Note(absl::StrCat("a job of ", Count(static_cast<double>(n)),
                      " partitions on a PostgreSQL warehouse"));
    RETURN_IF_ERROR(ResetStatements());
    const double server_before = ServerCpu();
    ASSIGN_OR_RETURN(
        JobRun job,
        daemon->RunJob(RangeRequest(
            "hourly_ticks", HourPartition(start), HourPartition(start + n),
            absl::StrCat("bench: ", Count(n), " hours"))));
    const double server = ServerCpu() - server_before;
    ASSIGN_OR_RETURN(std::optional<int64_t> statements, Statements(db));
    ASSIGN_OR_RETURN(ProcessSample sample, daemon->Sample());
    daemon->Stop();
    const double rate = n / job.wall_seconds;
    const std::string per_partition =
        statements ? absl::StrFormat("%.1f", static_cast<double>(*statements) /
                                                 static_cast<double>(n))
                   : std::string("(not counted: no pg_stat_statements)");
    std::string figures = absl::StrFormat(
        "%s wall; CPU per partition: daemon %.0f us, PostgreSQL %.0f us; "
        "warehouse statements per partition %s (pg_stat_statements)",
        Sec(job.wall_seconds), job.daemon_cpu_seconds / n * 1e6,
        server / n * 1e6, per_partition);
    std::string measure = absl::StrCat(
        Count(static_cast<double>(n)),
        "-partition trivial job on a PostgreSQL warehouse, state in state.db, "
        "submit to SUCCEEDED");
    if (n < kFullHours && !options_.quick) {
      absl::StrAppend(&measure, " (", Count(static_cast<double>(n)),
                      " partitions, not ", Count(kFullHours), ": at this rate ",
                      Count(kFullHours), " take ",
                      absl::StrFormat("%.1f", kFullHours / rate / 60),
                      " min, past the suite's time)");
    }
    rows->push_back({measure, "(reported beside SQLite's)", figures,
                     absl::StrFormat("%s partitions/s; %.0f MB", Count(rate),
                                     sample.peak_rss_kb / 1024.0),
                     std::nullopt});
    return absl::OkStatus();
  }

  // Row 3: one partition of job_rows rows replaced by a job, and one of
  // large_rows rows replaced by hand, three ways.
  absl::Status LargePartitionRows(std::vector<Row>* rows) {
    const std::string day = kFirstDay;  // large_rows rows, by hand
    const std::vector<std::string> days = Days(2);
    const std::string next = days[1];  // job_rows rows, by a job
    ASSIGN_OR_RETURN(const std::string dsn, CreateDatabase("large"));
    ASSIGN_OR_RETURN(std::unique_ptr<PgConnection> conn,
                     PgConnection::Connect(dsn));
    Note(absl::StrCat("loading partitions of ",
                      Count(static_cast<double>(sizes_.large_rows)), " and ",
                      Count(static_cast<double>(sizes_.job_rows)), " rows"));
    RETURN_IF_ERROR(conn->ExecScript(absl::StrFormat(
        R"sql(
CREATE TABLE big_src (ds TEXT, id BIGINT, v DOUBLE PRECISION);
INSERT INTO big_src SELECT '%1$s', g, g %% 1000 FROM generate_series(1, %3$d) g;
INSERT INTO big_src SELECT '%2$s', g, g %% 1000 FROM generate_series(1, %4$d) g;
CREATE INDEX big_src_ds ON big_src (ds);
CREATE TABLE big_factor (k DOUBLE PRECISION);
INSERT INTO big_factor VALUES (1);
CREATE TABLE big_copy (ds TEXT, id BIGINT, v DOUBLE PRECISION,
                       PRIMARY KEY (ds, id));
INSERT INTO big_copy SELECT ds, id, v FROM big_src WHERE ds = '%2$s';
)sql",
        day, next, sizes_.large_rows, sizes_.job_rows)));
    RETURN_IF_ERROR(conn->ExecScript("VACUUM ANALYZE big_src"));
    RETURN_IF_ERROR(conn->ExecScript("VACUUM ANALYZE big_copy"));
    const std::string transform =
        "SELECT s.ds, s.id, s.v * f.k AS v FROM big_src s, big_factor f WHERE "
        "s.ds >= :partition_start AND s.ds < :partition_end";
    const std::string yaml = absl::StrCat(
        "warehouse: {engine: postgres, dsn: \"", dsn,
        "\"}\n"
        "datasets:\n"
        "  - name: big_src\n"
        "    kind: source\n"
        "    table: big_src\n"
        "    partition: {column: ds, grain: day}\n"
        "  - name: big_factor\n"
        "    kind: source\n"
        "    table: big_factor\n"
        "  - name: big_copy\n"
        "    kind: derived\n"
        "    table: big_copy\n"
        "    partition: {column: ds, grain: day}\n"
        "    upstream:\n"
        "      - {dataset: big_src, mapping: identity}\n"
        "      - {dataset: big_factor, mapping: all}\n"
        "    transform: \"",
        transform,
        "\"\n"
        "    contract:\n"
        "      columns: {ds: TEXT, id: BIGINT, v: DOUBLE PRECISION}\n"
        "      primary_key: [ds, id]\n");
    ASSIGN_OR_RETURN(std::string data, DataDir("pg_large", yaml));
    ASSIGN_OR_RETURN(std::unique_ptr<BenchDaemon> daemon, StartDaemon(data));
    const v1::BackfillRequest one =
        RangeRequest("big_copy", next, days[2], "bench: one partition");
    // The partition is published already (loaded above, as the transform
    // makes it with the factor 1); the job, after the factor changed,
    // replaces every row of it, as a backfill does.
    Note("a job replacing one partition");
    RETURN_IF_ERROR(conn->ExecScript("UPDATE big_factor SET k = 2"));
    ASSIGN_OR_RETURN(std::string before,
                     ScrapeMetrics(daemon->metrics_address()));
    ASSIGN_OR_RETURN(JobRun job, daemon->RunJob(one));
    ASSIGN_OR_RETURN(std::string after,
                     ScrapeMetrics(daemon->metrics_address()));
    const std::string id = job.job.id();
    ASSIGN_OR_RETURN(double publish,
                     Span(daemon->client(), id, v1::BACKFILL_STATE_PUBLISHING,
                          v1::BACKFILL_STATE_CONFIRMING));
    ASSIGN_OR_RETURN(double validating,
                     Span(daemon->client(), id, v1::BACKFILL_STATE_VALIDATING,
                          v1::BACKFILL_STATE_PUBLISHING));
    daemon->Stop();
    std::map<std::string, double> b = PhaseSamples(before, kPhases);
    std::map<std::string, double> a = PhaseSamples(after, kPhases);
    auto phase = [&](const std::string& name) { return a[name] - b[name]; };
    const double staged = phase("transform");
    rows->push_back(
        {absl::StrCat("one partition of ",
                      Count(static_cast<double>(sizes_.job_rows)),
                      " rows on PostgreSQL replaced by a job (the 5M-row one "
                      "is replaced by hand in the next row): the publish / "
                      "the transform"),
         "(reported)",
         absl::StrFormat(
             "job %s wall: transform %s, fingerprints %s, staging write %s "
             "(phase counters); validating %s (checks and the diff); "
             "publishing %s "
             "(audit events: rollback copy, DELETE, INSERT in one "
             "transaction)",
             Sec(job.wall_seconds), Sec(staged), Sec(phase("fingerprint")),
             Sec(phase("stage_write")), Sec(validating), Sec(publish)),
         absl::StrFormat("%s / %s = %.2fx", Sec(publish), Sec(staged),
                         staged > 0 ? publish / staged : 0.0),
         std::nullopt});
    return SwapRow(
        conn.get(), day, days[1],
        absl::StrReplaceAll(
            transform, {{":partition_start", absl::StrCat("'", day, "'")},
                        {":partition_end", absl::StrCat("'", days[1], "'")}}),
        rows);
  }

  // The replacement of the large partition by hand, the factor changed:
  // the transform into a table; the engine's way of publishing (rollback
  // copy, DELETE, INSERT) into a plain table; and into a declaratively
  // partitioned table, the partition emptied (TRUNCATE, after its rollback
  // copy) and filled, or swapped (DETACH the old partition, kept as the
  // rollback copy; ATTACH the staged table).
  absl::Status SwapRow(PgConnection* conn, const std::string& day,
                       const std::string& next, const std::string& transform,
                       std::vector<Row>* rows) {
    Note("replacing the large partition by hand three ways");
    const std::string columns =
        "(ds TEXT, id BIGINT, v DOUBLE PRECISION, PRIMARY KEY (ds, id))";
    RETURN_IF_ERROR(conn->ExecScript(absl::StrFormat(
        R"sql(
CREATE TABLE swap_plain %3$s;
INSERT INTO swap_plain SELECT * FROM big_src WHERE ds = '%1$s';
CREATE TABLE swap_parted %3$s PARTITION BY RANGE (ds);
CREATE TABLE swap_p1 PARTITION OF swap_parted
  FOR VALUES FROM ('%1$s') TO ('%2$s');
CREATE TABLE swap_p2 PARTITION OF swap_parted
  FOR VALUES FROM ('%2$s') TO ('%2$s~');
INSERT INTO swap_parted SELECT * FROM swap_plain;
UPDATE big_factor SET k = 3;
)sql",
        day, next, columns)));
    for (const char* table : {"swap_plain", "swap_parted"}) {
      RETURN_IF_ERROR(conn->ExecScript(absl::StrCat("VACUUM ANALYZE ", table)));
    }
    auto timed = [&](const std::string& script) -> absl::StatusOr<double> {
      const absl::Time t = absl::Now();
      RETURN_IF_ERROR(conn->ExecScript(script));
      return absl::ToDoubleSeconds(absl::Now() - t);
    };
    ASSIGN_OR_RETURN(double out, timed(absl::StrCat("CREATE TABLE swap_out AS ",
                                                    transform)));
    ASSIGN_OR_RETURN(double staged,
                     timed(absl::StrCat(
                         "CREATE TABLE swap_staged ", columns,
                         "; INSERT INTO swap_staged SELECT * FROM swap_out")));
    RETURN_IF_ERROR(conn->ExecScript("VACUUM ANALYZE swap_staged"));
    const std::string in_day =
        absl::StrFormat("ds >= '%s' AND ds < '%s~'", day, day);
    ASSIGN_OR_RETURN(
        double plain,
        timed(absl::StrCat(
            "BEGIN; CREATE TABLE swap_prev AS SELECT * FROM swap_plain WHERE "
            "false; INSERT INTO swap_prev SELECT * FROM swap_plain WHERE ",
            in_day, "; DELETE FROM swap_plain WHERE ", in_day,
            "; INSERT INTO swap_plain SELECT * FROM swap_staged; COMMIT;")));
    ASSIGN_OR_RETURN(
        double truncate,
        timed("BEGIN; CREATE TABLE swap_prev2 AS SELECT * FROM swap_p1; "
              "TRUNCATE swap_p1; INSERT INTO swap_p1 SELECT * FROM "
              "swap_staged; COMMIT;"));
    ASSIGN_OR_RETURN(
        double swap,
        timed(absl::StrFormat(
            "BEGIN; ALTER TABLE swap_parted DETACH PARTITION swap_p1; ALTER "
            "TABLE swap_parted ATTACH PARTITION swap_staged FOR VALUES FROM "
            "('%s') TO ('%s'); COMMIT;",
            day, next)));
    // The same rows either way.
    ASSIGN_OR_RETURN(
        PgResult same,
        conn->Exec("SELECT (SELECT count(*) FROM (SELECT * FROM swap_plain "
                   "EXCEPT SELECT * FROM swap_parted) a) + (SELECT count(*) "
                   "FROM (SELECT * FROM swap_parted EXCEPT SELECT * FROM "
                   "swap_plain) b)"));
    ASSIGN_OR_RETURN(int64_t differ, Int(same, 0, 0));
    if (differ != 0) {
      return absl::InternalError(absl::StrCat(
          "the partition swap left ", differ, " rows unlike the DELETE's"));
    }
    rows->push_back(
        {absl::StrCat("one partition of ",
                      Count(static_cast<double>(sizes_.large_rows)),
                      " rows replaced by hand on the same server (primary key "
                      "(ds, id)): DETACH + ATTACH PARTITION of a staged table "
                      "/ the engine's publish as SQL (rollback copy, DELETE, "
                      "INSERT)"),
         "(evaluated; not in the engine)",
         absl::StrFormat(
             "the transform into a table %s, then into a table with the "
             "primary key %s; rollback copy + DELETE + INSERT into a plain "
             "table %s (%.2fx the transform); rollback copy + TRUNCATE of a "
             "declarative partition + INSERT %s; DETACH of the old partition "
             "(kept as the rollback copy) + ATTACH of the staged table (its "
             "primary key built when staged; the ATTACH scans it for the "
             "bound) %s; same rows (EXCEPT both ways)",
             Sec(out), Sec(staged), Sec(plain), plain / out, Sec(truncate),
             Sec(swap)),
         absl::StrFormat("%s / %s = %.3fx", Sec(swap), Sec(plain),
                         swap / plain),
         std::nullopt});
    return absl::OkStatus();
  }

  const PostgresBenchOptions options_;
  const PostgresSizes sizes_;
  std::unique_ptr<testing::PostgresTestServer> server_;
  std::unique_ptr<PgConnection> admin_;  // creates the databases
  pid_t postmaster_ = 0;
  bool statements_counted_ = false;  // pg_stat_statements is there
};

}  // namespace postgres_rows
}  // namespace

absl::Status AddPostgresRows(const PostgresBenchOptions& options,
                             std::vector<Row>* rows) {
  postgres_rows::PostgresBench bench(options);
  return bench.Run(rows);
}

}  // namespace backfill::bench
