// backfill_pg_bench: a scoped backfill and a full reload on the PostgreSQL
// warehouse, side by side with the same SQL run directly with psql.
//
// One run starts a throwaway PostgreSQL 15 server (initdb and pg_ctl on a
// temp dir and a free port; durability off, as for tests: both sides run
// on the same server, so the comparison stays fair), loads N days of
// orders with a customers dimension, and measures, best of two runs each:
//   - a full reload of every day of daily_revenue through a BackfillManager
//     over PostgresEngine (staging per partition, checks, one publish
//     transaction, durable checkpoints in a SQLite state store);
//   - the same transform over the same days as one hand-written
//     DELETE + INSERT ... SELECT in one transaction, run by psql;
//   - the same two for the 30 days before the last 30.
// It prints a markdown table: wall time of each, their ratio, and the cost
// in input rows (backfilld's own figure; for psql the rows the range holds).
// Usage: backfill_pg_bench [--days N>=61] [--orders-per-day N] [--workers N]

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "bench/bench_run.h"
#include "core/model/partition.h"
#include "core/model/pipeline_loader.h"
#include "storage/postgres/pg_connection.h"
#include "storage/postgres/pg_engine.h"
#include "tests/testing/postgres_test_server.h"

namespace backfill {
namespace {

using bench::Die;
using bench::RunJob;
using bench::RunResult;
using bench::Seconds;

constexpr char kTransform[] =
    "SELECT o.order_date AS ds, c.region AS region,\n"
    "       SUM(o.amount - o.refund) AS revenue, COUNT(*) AS orders\n"
    "FROM raw_orders o JOIN dim_customers c ON c.customer_id = o.customer_id\n"
    "WHERE o.order_date >= :partition_start AND o.order_date < "
    ":partition_end\n"
    "GROUP BY 1, 2";

std::string PipelineYaml(const std::string& dsn) {
  std::string transform = absl::StrReplaceAll(kTransform, {{"\n", "\n      "}});
  return absl::StrCat("warehouse: {engine: postgres, dsn: \"", dsn, "\"}\n",
                      R"yaml(datasets:
  - {name: orders, kind: source, table: raw_orders, partition: {column: order_date, grain: day}}
  - {name: customers, kind: source, table: dim_customers}
  - name: daily_revenue
    kind: derived
    table: daily_revenue
    partition: {column: ds, grain: day}
    upstream:
      - {dataset: orders, mapping: identity}
      - {dataset: customers, mapping: all}
    transform: |
      )yaml",
                      transform, R"yaml(
    contract:
      columns: {ds: TEXT, region: TEXT, revenue: DOUBLE PRECISION, orders: BIGINT}
      primary_key: [ds, region]
)yaml");
}

void Exec(postgres::PgConnection* conn, const std::string& sql) {
  Die(conn->ExecScript(sql), sql.substr(0, 60).c_str());
}

// The transform over [from, to) as psql runs it by hand: one transaction
// replacing the range in daily_revenue_psql. Returns the wall time.
double RunPsql(const std::string& dsn, const std::filesystem::path& dir,
               const std::string& from, const std::string& to) {
  const std::string body = absl::StrReplaceAll(
      kTransform, {{":partition_start", absl::StrCat("'", from, "'")},
                   {":partition_end", absl::StrCat("'", to, "'")}});
  const std::filesystem::path file = dir / "direct.sql";
  {
    std::ofstream out(file);
    out << "BEGIN;\nDELETE FROM daily_revenue_psql WHERE ds >= '" << from
        << "' AND ds < '" << to << "';\n"
        << "INSERT INTO daily_revenue_psql (ds, region, revenue, orders)\n"
        << body << ";\nCOMMIT;\n";
  }
  const std::string command =
      absl::StrCat("psql -X -q -v ON_ERROR_STOP=1 -d '", dsn, "' -f '",
                   file.string(), "' > /dev/null");
  const auto t0 = std::chrono::steady_clock::now();
  if (std::system(command.c_str()) != 0) {
    std::fprintf(stderr, "backfill_pg_bench: psql failed: %s\n",
                 command.c_str());
    std::exit(1);
  }
  return Seconds(t0);
}

int Main(int argc, char** argv) {
  int days = 365, per_day = 10000, workers = 2;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const int v = std::atoi(argv[i + 1]);
    if (flag == "--days") days = v;
    if (flag == "--orders-per-day") per_day = v;
    if (flag == "--workers") workers = v;
  }
  if (days < 61 || per_day < 1 || workers < 1) {
    std::fprintf(stderr,
                 "usage: backfill_pg_bench [--days N>=61] [--orders-per-day "
                 "N] [--workers N]\n");
    return 2;
  }
  auto server = testing::PostgresTestServer::Start();
  Die(server.status(), "start PostgreSQL");
  const std::string dsn = (*server)->Dsn();
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() /
      absl::StrCat("backfill_pg_bench_", getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);

  std::vector<std::string> all_days =
      EnumerateRange(Grain::kDay, "2025-01-01", "2100-01-01", 100000).value();
  const std::string end = all_days[days];
  all_days.resize(days);
  const std::string scoped_from = all_days[days - 61];
  const std::string scoped_to = all_days[days - 31];

  {
    auto conn = postgres::PgConnection::Connect(dsn);
    Die(conn.status(), "connect");
    const auto t0 = std::chrono::steady_clock::now();
    Exec(conn->get(), absl::StrFormat(
                          R"sql(
CREATE TABLE raw_orders (order_id BIGINT PRIMARY KEY, order_date TEXT NOT NULL,
                         customer_id INTEGER, amount DOUBLE PRECISION,
                         refund DOUBLE PRECISION);
CREATE TABLE dim_customers (customer_id INTEGER PRIMARY KEY, region TEXT);
INSERT INTO dim_customers SELECT g, 'r' || (g %% 5) FROM generate_series(1, 500) g;
INSERT INTO raw_orders
  SELECT g, to_char(DATE '2025-01-01' + (g / %d), 'YYYY-MM-DD'),
         1 + (g::bigint * 7919) %% 500, 5 + (g %% 97), 0
  FROM generate_series(0, %d) g;
CREATE INDEX raw_orders_date ON raw_orders (order_date);
CREATE TABLE daily_revenue_psql (ds TEXT, region TEXT,
                                 revenue DOUBLE PRECISION, orders BIGINT,
                                 PRIMARY KEY (ds, region));
ANALYZE;
)sql",
                          per_day, days * per_day - 1));
    Exec(conn->get(), "VACUUM ANALYZE");
    std::printf("backfill_pg_bench: loaded %d orders over %d days in %.1f s\n",
                days * per_day, days, Seconds(t0));
  }

  auto catalog = LoadPipelineTexts({{"bench.yaml", PipelineYaml(dsn)}});
  Die(catalog.status(), "load pipeline");
  auto engine = postgres::PostgresEngine::Open(dsn, workers + 2);
  Die(engine.status(), "open engine");
  Die(engine->get()->Claim("bench", false), "claim");

  BackfillRequest full;
  full.dataset = "daily_revenue";
  full.from = all_days.front();
  full.to = end;
  full.reason = "bench full reload";
  BackfillRequest scoped = full;
  scoped.from = scoped_from;
  scoped.to = scoped_to;
  scoped.reason = "bench scoped";

  // Best of two of each, alternating the two sides.
  int state = 0;
  auto backfilld = [&](const BackfillRequest& r, RunResult* best) {
    RunResult run =
        RunJob(*catalog, (dir / absl::StrCat("state", ++state, ".db")).string(),
               engine->get(), workers, r);
    if (best->seconds == 0 || run.seconds < best->seconds) *best = run;
  };
  RunResult full_run, scoped_run;
  double psql_full = 0, psql_scoped = 0;
  for (int rep = 0; rep < 2; ++rep) {
    const double f = RunPsql(dsn, dir, full.from, full.to);
    psql_full = rep == 0 ? f : std::min(psql_full, f);
    backfilld(full, &full_run);
    const double s = RunPsql(dsn, dir, scoped.from, scoped.to);
    psql_scoped = rep == 0 ? s : std::min(psql_scoped, s);
    backfilld(scoped, &scoped_run);
  }

  // The result is the same table either way: checked, not assumed.
  {
    auto conn = postgres::PgConnection::Connect(dsn);
    Die(conn.status(), "connect");
    auto differ = (*conn)->Exec(
        "SELECT count(*) FROM (SELECT ds, region, round(revenue::numeric, 6), "
        "orders FROM daily_revenue EXCEPT SELECT ds, region, "
        "round(revenue::numeric, 6), orders FROM daily_revenue_psql) AS d");
    Die(differ.status(), "compare");
    if (differ->rows[0][0].value_or("?") != "0") {
      std::fprintf(stderr,
                   "backfill_pg_bench: daily_revenue differs from psql's "
                   "result in %s rows\n",
                   differ->rows[0][0].value_or("?").c_str());
      return 1;
    }
  }
  const double rows_full = static_cast<double>(days) * per_day;
  const double rows_scoped = 30.0 * per_day;
  std::printf(
      "\nPostgreSQL 15, %d days x %d orders/day, %d workers, best of 2\n\n",
      days, per_day, workers);
  std::printf("| measure | backfilld | psql, same SQL | backfilld / psql |\n");
  std::printf("|---|---:|---:|---:|\n");
  std::printf("| full reload, %d days: wall | %.3f s | %.3f s | %.2fx |\n",
              days, full_run.seconds, psql_full, full_run.seconds / psql_full);
  std::printf("| scoped, 30 days: wall | %.3f s | %.3f s | %.2fx |\n",
              scoped_run.seconds, psql_scoped,
              scoped_run.seconds / psql_scoped);
  std::printf("| scoped / full: wall | %.1f%% | %.1f%% | |\n",
              100.0 * scoped_run.seconds / full_run.seconds,
              100.0 * psql_scoped / psql_full);
  std::printf("| full reload: cost (input rows) | %.0f | %.0f | |\n",
              full_run.job.actual_cost, rows_full);
  std::printf("| scoped: cost (input rows), estimated | %.0f | | |\n",
              scoped_run.job.plan.cost.backfill);
  std::printf("| scoped: cost (input rows) | %.0f | %.0f | |\n",
              scoped_run.job.actual_cost, rows_scoped);
  std::printf("| scoped / full: cost | %.1f%% | %.1f%% | |\n",
              100.0 * scoped_run.job.actual_cost / full_run.job.actual_cost,
              100.0 * rows_scoped / rows_full);
  std::printf("\n(30 of %d days is %.1f%%)\n", days, 100.0 * 30 / days);
  engine->reset();
  std::filesystem::remove_all(dir);
  return 0;
}

}  // namespace
}  // namespace backfill

int main(int argc, char** argv) { return backfill::Main(argc, argv); }
