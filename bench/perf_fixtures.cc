#include "bench/perf_fixtures.h"

#include <sqlite3.h>

#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/civil_time.h"

namespace backfill::bench {
namespace {

absl::Status Exec(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  if (sqlite3_open(path.c_str(), &db) != SQLITE_OK) {
    const std::string error = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    return absl::UnavailableError(absl::StrCat("open ", path, ": ", error));
  }
  char* error = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error);
  absl::Status status = absl::OkStatus();
  if (rc != SQLITE_OK) {
    status = absl::InternalError(absl::StrCat(path, ": ", error ? error : ""));
  }
  sqlite3_free(error);
  sqlite3_close(db);
  return status;
}

std::string SqlString(const std::string& s) {
  // Only generated dates reach here; no quote can occur in them.
  return absl::StrCat("'", s, "'");
}

// The trivial hourly pipeline over `warehouse` (the pipeline file's
// warehouse mapping), its count declared as `count_type`.
std::string HourlyPipelineYaml(const std::string& warehouse,
                               const std::string& table,
                               const std::string& count_type) {
  return absl::StrCat(
      "warehouse: ", warehouse,
      "\n"
      "datasets:\n"
      "  - name: ticks\n"
      "    kind: source\n"
      "    table: ",
      table,
      "\n"
      "    partition: {column: h, grain: hour}\n"
      "  - name: hourly_ticks\n"
      "    kind: derived\n"
      "    table: hourly_ticks\n"
      "    partition: {column: h, grain: hour}\n"
      "    upstream: [{dataset: ticks, mapping: identity}]\n"
      "    transform: \"SELECT :partition_start AS h, COUNT(*) AS n FROM ",
      table,
      " WHERE h >= :partition_start AND h < :partition_end\"\n"
      "    contract: {columns: {h: TEXT, n: ",
      count_type, "}, primary_key: [h]}\n");
}

}  // namespace

std::vector<std::string> Days(int days) {
  absl::CivilDay day(2025, 1, 1);
  std::vector<std::string> out;
  for (int i = 0; i <= days; ++i) {
    out.push_back(absl::FormatCivilTime(day + i));
  }
  return out;
}

absl::Status AddOrdersTable(const std::string& path, const std::string& table,
                            int days, int64_t per_day) {
  const std::string sql = absl::StrFormat(
      R"sql(
PRAGMA journal_mode=OFF;
PRAGMA synchronous=OFF;
CREATE TABLE IF NOT EXISTS dim_customers(customer_id INTEGER PRIMARY KEY,
                                         region TEXT);
INSERT OR IGNORE INTO dim_customers
  WITH RECURSIVE s(v) AS (SELECT 1 UNION ALL SELECT v + 1 FROM s WHERE v < 500)
  SELECT v, 'r' || (v %% 5) FROM s;
CREATE TABLE "%1$s"(order_id INTEGER PRIMARY KEY, order_date TEXT,
                    customer_id INTEGER, amount REAL, refund REAL);
CREATE TEMP TABLE bench_days AS
  WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM s WHERE i < %2$d)
  SELECT i, date('%4$s', '+' || i || ' days') AS day FROM s;
INSERT INTO "%1$s"(order_date, customer_id, amount, refund)
  WITH RECURSIVE s(v) AS (SELECT 0 UNION ALL SELECT v + 1 FROM s WHERE v < %3$d)
  SELECT d.day, 1 + ((d.i * %5$d + s.v) * 7919) %% 500,
         5 + ((d.i * %5$d + s.v) %% 97), CASE WHEN s.v %% 10 = 0 THEN 1.5 ELSE 0 END
  FROM bench_days d, s ORDER BY d.i, s.v;
CREATE INDEX "%1$s_date" ON "%1$s"(order_date);
DROP TABLE bench_days;
PRAGMA journal_mode=WAL;
)sql",
      table, days - 1, per_day - 1, kFirstDay, per_day);
  return Exec(path, sql);
}

absl::Status AddEmptyHourTable(const std::string& path,
                               const std::string& table) {
  return Exec(path, absl::StrFormat("CREATE TABLE \"%1$s\"(h TEXT, v INTEGER);"
                                    "CREATE INDEX \"%1$s_h\" ON \"%1$s\"(h);"
                                    "PRAGMA journal_mode=WAL;",
                                    table));
}

std::string RevenueTransform(const std::string& orders_table) {
  return absl::StrCat(
      "SELECT o.order_date AS ds, c.region AS region,\n"
      "       SUM(o.amount - o.refund) AS revenue, COUNT(*) AS orders\n"
      "FROM \"",
      orders_table,
      "\" o JOIN dim_customers c ON c.customer_id = o.customer_id\n"
      "WHERE o.order_date >= :partition_start AND o.order_date < "
      ":partition_end\n"
      "GROUP BY 1, 2");
}

namespace {

// The revenue pipeline over `warehouse` (the pipeline file's warehouse
// mapping), its revenue and orders declared as `real_type` and
// `integer_type`.
std::string RevenueYaml(const std::string& warehouse,
                        const std::vector<std::string>& order_tables,
                        const std::string& real_type,
                        const std::string& integer_type) {
  std::string yaml = absl::StrCat("warehouse: ", warehouse,
                                  "\n"
                                  "datasets:\n"
                                  "  - name: customers\n"
                                  "    kind: source\n"
                                  "    table: dim_customers\n");
  for (const std::string& t : order_tables) {
    std::string transform = RevenueTransform(t);
    absl::StrAppend(&yaml, "  - name: ", t,
                    "\n"
                    "    kind: source\n"
                    "    table: ",
                    t,
                    "\n"
                    "    partition: {column: order_date, grain: day}\n"
                    "  - name: revenue_",
                    t,
                    "\n"
                    "    kind: derived\n"
                    "    table: revenue_",
                    t,
                    "\n"
                    "    partition: {column: ds, grain: day}\n"
                    "    upstream:\n"
                    "      - {dataset: ",
                    t,
                    ", mapping: identity}\n"
                    "      - {dataset: customers, mapping: all}\n"
                    "    transform: |\n");
    for (absl::string_view line : absl::StrSplit(transform, '\n')) {
      absl::StrAppend(&yaml, "      ", line, "\n");
    }
    absl::StrAppend(
        &yaml,
        "    contract:\n"
        "      columns: {ds: TEXT, region: TEXT, revenue: ",
        real_type, ", orders: ", integer_type,
        "}\n"
        "      primary_key: [ds, region]\n"
        "    checks:\n"
        "      - {kind: min_rows, min: 1}\n"
        "      - {kind: not_null, columns: [region]}\n"
        "      - {kind: row_change, max_change: 10%}\n"
        "      - {kind: measure_change, column: revenue, max_change: 25%, "
        "severity: warn}\n");
  }
  return yaml;
}

}  // namespace

std::string RevenuePipelineYaml(const std::vector<std::string>& order_tables) {
  return RevenueYaml("{engine: sqlite, path: warehouse.db}", order_tables,
                     "REAL", "INTEGER");
}

std::string PostgresRevenuePipelineYaml(
    const std::string& dsn, const std::vector<std::string>& order_tables) {
  return RevenueYaml(absl::StrCat("{engine: postgres, dsn: \"", dsn, "\"}"),
                     order_tables, "DOUBLE PRECISION", "BIGINT");
}

std::string TrivialHourlyPipelineYaml(const std::string& table) {
  return HourlyPipelineYaml("{engine: sqlite, path: warehouse.db}", table,
                            "INTEGER");
}

std::string PostgresTrivialHourlyPipelineYaml(const std::string& dsn,
                                              const std::string& table) {
  return HourlyPipelineYaml(
      absl::StrCat("{engine: postgres, dsn: \"", dsn, "\"}"), table, "BIGINT");
}

std::string DirectReloadScript(const std::string& orders_table,
                               const std::string& target,
                               const std::vector<std::string>& days) {
  std::string script = absl::StrCat(
      ".bail on\n"
      "PRAGMA synchronous=NORMAL;\n"
      "CREATE TABLE IF NOT EXISTS \"",
      target,
      "\"(ds TEXT, region TEXT, revenue REAL, orders INTEGER,\n"
      "  PRIMARY KEY (ds, region));\n");
  std::string transform = RevenueTransform(orders_table);
  for (size_t i = 0; i + 1 < days.size(); ++i) {
    absl::StrAppend(&script, ".parameter set :partition_start \"",
                    SqlString(days[i]), "\"\n",
                    ".parameter set :partition_end \"", SqlString(days[i + 1]),
                    "\"\n", "BEGIN;\nDELETE FROM \"", target,
                    "\" WHERE ds >= :partition_start AND ds < "
                    ":partition_end;\nINSERT INTO \"",
                    target, "\"\n", transform, ";\nCOMMIT;\n");
  }
  return script;
}

absl::Status WriteTextFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

}  // namespace backfill::bench
