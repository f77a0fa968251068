// Pipeline files the end-to-end tests give the real backfilld: orders (a
// source by day), daily_revenue (revenue per day and region) and day_totals
// (one row per day, read from daily_revenue), on the warehouse.db of the
// daemon's data dir. Header-only; stateless.

#ifndef BACKFILL_TESTS_TESTING_E2E_PIPELINES_H_
#define BACKFILL_TESTS_TESTING_E2E_PIPELINES_H_

#include <string>

namespace backfill {
namespace e2e {

// `daily_revenue_extra` is added to daily_revenue's item (whole lines
// indented by four spaces, e.g. "    retention: {versions: 3}\n");
// `more_datasets` are further items of the `datasets:` list.
inline std::string OrdersToDayTotalsYaml(
    const std::string& daily_revenue_extra = "",
    const std::string& more_datasets = "") {
  return std::string(R"yaml(warehouse: {engine: sqlite, path: warehouse.db}
datasets:
  - name: orders
    kind: source
    table: raw_orders
    partition: {column: order_date, grain: day}
  - name: daily_revenue
    kind: derived
    table: daily_revenue
    partition: {column: day, grain: day}
    upstream:
      - {dataset: orders, mapping: identity}
    transform: |
      SELECT order_date AS day, region, TOTAL(amount) AS revenue,
             COUNT(*) AS orders
      FROM raw_orders
      WHERE order_date = :partition
      GROUP BY order_date, region
    contract:
      columns: {day: TEXT, region: TEXT, revenue: REAL, orders: INTEGER}
      primary_key: [day, region]
)yaml") + daily_revenue_extra +
         R"yaml(  - name: day_totals
    kind: derived
    table: day_totals
    partition: {column: day, grain: day}
    upstream:
      - {dataset: daily_revenue, mapping: identity}
    transform: |
      SELECT day, TOTAL(revenue) AS revenue, SUM(orders) AS orders
      FROM daily_revenue WHERE day = :partition GROUP BY day
    contract:
      columns: {day: TEXT, revenue: REAL, orders: INTEGER}
      primary_key: [day]
)yaml" + more_datasets;
}

}  // namespace e2e
}  // namespace backfill

#endif  // BACKFILL_TESTS_TESTING_E2E_PIPELINES_H_
