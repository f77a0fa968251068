// The example pipeline of docs/pipeline-spec.md — orders (source, by day),
// customers (an unpartitioned dimension) and daily_revenue (derived,
// refund-aware) — as YAML text, shared by the tests and the benchmark so that
// they all exercise the same declared example. Header-only; stateless.

#ifndef BACKFILL_TESTS_TESTING_REVENUE_PIPELINE_H_
#define BACKFILL_TESTS_TESTING_REVENUE_PIPELINE_H_

#include <string>

namespace backfill {
namespace fixtures {

// `extra_condition` is ANDed into the transform's WHERE clause (one or more
// whole lines, each starting with "        AND "); `more_datasets` are
// further items of the `datasets:` list (each starting with "  - name:").
inline std::string RevenuePipelineYaml(const std::string& extra_condition = "",
                                       const std::string& more_datasets = "") {
  return std::string(R"yaml(datasets:
  - name: orders
    kind: source
    table: raw_orders
    partition: {column: order_date, grain: day}
  - name: customers
    kind: source
    table: dim_customers
  - name: daily_revenue
    kind: derived
    table: daily_revenue
    partition: {column: ds, grain: day}
    upstream:
      - {dataset: orders, mapping: identity}
      - {dataset: customers, mapping: all}
    transform: |
      SELECT o.order_date AS ds, c.region AS region,
             SUM(o.amount - o.refund) AS revenue, COUNT(*) AS orders
      FROM raw_orders o JOIN dim_customers c ON c.customer_id = o.customer_id
      WHERE o.order_date >= :partition_start AND o.order_date < :partition_end
)yaml") + extra_condition +
         R"yaml(      GROUP BY 1, 2
    contract:
      columns: {ds: TEXT, region: TEXT, revenue: REAL, orders: INTEGER}
      primary_key: [ds, region]
)yaml" + more_datasets;
}

// A derived dataset named `name` whose transform dates every row
// 1999-01-01, outside the partition it computes: a job of it must fail
// and publish nothing. A `datasets:` list item, for `more_datasets`.
inline std::string OutOfPartitionDatasetYaml(const std::string& name) {
  return "  - name: " + name + "\n    kind: derived\n    table: " + name +
         R"yaml(
    partition: {column: ds, grain: day}
    upstream:
      - {dataset: orders, mapping: identity}
    transform: |
      SELECT '1999-01-01' AS ds, COUNT(*) AS n FROM raw_orders
      WHERE order_date >= :partition_start AND order_date < :partition_end
    contract:
      columns: {ds: TEXT, n: INTEGER}
)yaml";
}

// monthly_revenue: daily_revenue rolled up by month (region, revenue,
// orders), a `datasets:` list item, for `more_datasets`.
inline std::string MonthlyRevenueYaml() {
  return R"yaml(  - name: monthly_revenue
    kind: derived
    table: monthly_revenue
    partition: {column: month, grain: month}
    upstream:
      - {dataset: daily_revenue, mapping: rollup}
    transform: |
      SELECT substr(ds, 1, 7) AS month, region, SUM(revenue) AS revenue,
             SUM(orders) AS orders
      FROM daily_revenue
      WHERE ds >= :partition_start AND ds < :partition_end
      GROUP BY 1, 2
    contract:
      columns: {month: TEXT, region: TEXT, revenue: REAL, orders: INTEGER}
      primary_key: [month, region]
)yaml";
}

// Two dependents of daily_revenue, as further `datasets:` items: daily_total
// (per day, identity) and region_totals (unpartitioned, reading all of it),
// so that a backfill of daily_revenue publishes three datasets at once.
inline std::string RevenueDependentsYaml() {
  return R"yaml(  - name: daily_total
    kind: derived
    table: daily_total
    partition: {column: ds, grain: day}
    upstream:
      - {dataset: daily_revenue, mapping: identity}
    transform: |
      SELECT ds, SUM(revenue) AS revenue FROM daily_revenue
      WHERE ds >= :partition_start AND ds < :partition_end GROUP BY ds
    contract:
      columns: {ds: TEXT, revenue: REAL}
      primary_key: [ds]
  - name: region_totals
    kind: derived
    table: region_totals
    upstream:
      - {dataset: daily_revenue, mapping: all}
    transform: |
      SELECT region, SUM(revenue) AS revenue FROM daily_revenue GROUP BY region
    contract:
      columns: {region: TEXT, revenue: REAL}
      primary_key: [region]
)yaml";
}

}  // namespace fixtures
}  // namespace backfill

#endif  // BACKFILL_TESTS_TESTING_REVENUE_PIPELINE_H_
