// The data of the performance suite, generated deterministically: a SQLite
// warehouse of orders (the demo's schema at a chosen size), the pipeline
// files the daemon loads, and the sqlite3 script that runs the same
// transform without backfilld.
//
// Free functions; thread-safe as far as each call writes its own files.

#ifndef BACKFILL_BENCH_PERF_FIXTURES_H_
#define BACKFILL_BENCH_PERF_FIXTURES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace backfill::bench {

// The first day of every generated table of orders.
inline constexpr char kFirstDay[] = "2025-01-01";

// `days` consecutive days from kFirstDay ("YYYY-MM-DD"), plus the day after
// the last as the last element (the exclusive end of a range).
std::vector<std::string> Days(int days);

// Adds a table `table` of `days` x `per_day` orders (the demo's raw_orders
// columns, indexed on order_date, rows in date order) to the SQLite file at
// `path`, and the customers dimension dim_customers (500 customers in 5
// regions) if it is missing. The file is in WAL mode afterwards.
absl::Status AddOrdersTable(const std::string& path, const std::string& table,
                            int days, int64_t per_day);

// Adds an empty hourly source table `table` (h TEXT, indexed) to `path`.
absl::Status AddEmptyHourTable(const std::string& path,
                               const std::string& table);

// A pipeline file: for each orders table in `order_tables`, a source
// dataset named as the table, and a derived dataset (and table)
// `revenue_<table>` with the demo's daily revenue transform and checks
// (min_rows, not_null, row_change, measure_change as a warning); plus the
// customers dimension.
std::string RevenuePipelineYaml(const std::vector<std::string>& order_tables);

// The same pipeline on the PostgreSQL warehouse `dsn` (a libpq connection
// string): the same datasets, transform and checks; revenue and orders
// declared DOUBLE PRECISION and BIGINT, the types SUM and COUNT give there.
std::string PostgresRevenuePipelineYaml(
    const std::string& dsn, const std::vector<std::string>& order_tables);

// A pipeline file of an hourly source `ticks` (table `table`) and a derived
// hourly dataset `hourly_ticks` whose transform is trivial (one row per
// hour: the number of ticks, all tables empty).
std::string TrivialHourlyPipelineYaml(const std::string& table);

// The same pipeline on the PostgreSQL warehouse `dsn` (a libpq connection
// string): the same datasets and transform; the count's contract type is
// BIGINT, COUNT's type there.
std::string PostgresTrivialHourlyPipelineYaml(const std::string& dsn,
                                              const std::string& table);

// The transform of the derived datasets of RevenuePipelineYaml over
// `orders_table`, with the :partition_start and :partition_end parameters.
std::string RevenueTransform(const std::string& orders_table);

// A sqlite3 script that creates `target` with the derived datasets'
// columns and primary key and, per day of `days` (as Days() returns
// them), replaces that day's rows with the transform's in one
// transaction, binding :partition_start and :partition_end as backfilld
// does: the same SQL, run directly.
std::string DirectReloadScript(const std::string& orders_table,
                               const std::string& target,
                               const std::vector<std::string>& days);

absl::Status WriteTextFile(const std::string& path, const std::string& text);

}  // namespace backfill::bench

#endif  // BACKFILL_BENCH_PERF_FIXTURES_H_
