// backfill_bench: what the service costs on top of the work it schedules.
//
// One run builds a demo-sized warehouse (365 days of orders, a customers
// dimension) in a temp dir and measures, side by side:
//   - the engine alone staging every partition (no manager, no state store);
//   - the manager running the same job end to end (checkpoints, publish);
//   - the manager with an engine that does nothing, i.e. the scheduling and
//     checkpoint overhead per partition;
//   - a 30-day scoped backfill against a full reload of all 365 days;
//   - plan time for the same 30-day request against table size: with ten
//     times the orders per day (estimated from row counts, which cost the
//     rows in scope, and from the history of an earlier run, which costs
//     nothing per row), and over a table ten times as long;
//   - plan time for 100,000 hour partitions.
// Usage: backfill_bench [--days N] [--orders-per-day N] [--workers N]

#include <sqlite3.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "bench/bench_run.h"
#include "core/model/partition.h"
#include "core/model/pipeline_loader.h"
#include "core/run/backfill_manager.h"
#include "storage/sqlite/sqlite_engine.h"
#include "storage/sqlite/state/sqlite_state_store.h"
#include "tests/testing/revenue_pipeline.h"

namespace backfill {
namespace {

using bench::Die;
using bench::RunJob;
using bench::RunResult;
using bench::Seconds;

void MakeWarehouse(const std::string& path, int days, int per_day) {
  sqlite3* db = nullptr;
  if (sqlite3_open(path.c_str(), &db) != SQLITE_OK) std::exit(1);
  const std::string sql = absl::StrFormat(
      "PRAGMA journal_mode=WAL;"
      "CREATE TABLE raw_orders(order_id INTEGER PRIMARY KEY, order_date TEXT,"
      " customer_id INTEGER, amount REAL, refund REAL);"
      "CREATE INDEX raw_orders_date ON raw_orders(order_date);"
      "CREATE TABLE dim_customers(customer_id INTEGER PRIMARY KEY, region "
      "TEXT);"
      "WITH RECURSIVE s(value) AS (SELECT 1 UNION ALL SELECT value + 1 FROM s "
      "WHERE value < 500) INSERT INTO dim_customers SELECT value, 'r' || "
      "(value %% 5) FROM s;"
      "INSERT INTO raw_orders(order_date, customer_id, amount, refund) "
      "WITH RECURSIVE s(value) AS (SELECT 0 UNION ALL SELECT value + 1 FROM s "
      "WHERE value < %d) SELECT date('2025-01-01', '+' || (value / %d) || ' "
      "days'), 1 + (value * 7919) %% 500, 5 + (value %% 97), 0 FROM s;",
      days * per_day - 1, per_day);
  char* err = nullptr;
  if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    std::fprintf(stderr, "backfill_bench: %s\n", err);
    std::exit(1);
  }
  sqlite3_close(db);
}

// An engine that does no work: isolates the manager's own overhead.
class NullEngine : public Engine {
 public:
  absl::StatusOr<WarehouseInfo> Inspect() override { return WarehouseInfo{}; }
  absl::Status Claim(const std::string&, bool) override {
    return absl::OkStatus();
  }
  absl::StatusOr<std::map<std::string, int64_t>> CountRowsByPartition(
      const DatasetSpec&) override {
    return std::map<std::string, int64_t>{};
  }
  absl::StatusOr<std::map<std::string, InputFingerprint>> CurrentFingerprints(
      const DatasetSpec& dataset,
      const std::vector<std::string>& partitions) override {
    // As StagePartition below records every input: fingerprint "0", 1 row.
    std::map<std::string, InputFingerprint> out;
    for (const std::string& p : partitions) {
      out[p] = InputFingerprint{dataset.name, p, "0", 1};
    }
    return out;
  }
  absl::Status PrepareJob(const JobLayout&) override {
    return absl::OkStatus();
  }
  absl::StatusOr<StageResult> StagePartition(
      const std::string&, const DatasetSpec&, const std::string&,
      const std::vector<InputRef>& inputs) override {
    StageResult r;
    r.rows_written = 0;  // stages nothing, so validation finds 0 rows
    r.output_fingerprint = "0";
    for (const InputRef& in : inputs) {
      r.inputs.push_back({in.dataset->name, in.partition.value_or(""), "0", 1});
    }
    return r;
  }
  absl::StatusOr<ValidationReport> ValidateStaged(const std::string&,
                                                  const DatasetSpec&) override {
    return ValidationReport{};
  }
  absl::StatusOr<PartitionDiff> DiffPartition(const std::string&,
                                              const DatasetSpec& dataset,
                                              const std::string& partition,
                                              int) override {
    PartitionDiff diff;
    diff.dataset = dataset.name;
    diff.partition = partition;
    return diff;
  }
  absl::StatusOr<bool> IsPublished(const std::string&) override {
    return false;
  }
  absl::Status Publish(const JobLayout&) override { return absl::OkStatus(); }
  absl::Status ReleasePartitions(const std::string&, const DatasetSpec&,
                                 const std::vector<std::string>&) override {
    return absl::OkStatus();
  }
  absl::Status DropStaging(const std::string&) override {
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<std::string>> ListJobsWithStaging() override {
    return std::vector<std::string>{};
  }
  absl::StatusOr<RollbackResult> Rollback(const RollbackSpec&) override {
    return absl::UnimplementedError("the benchmark never rolls back");
  }
  absl::StatusOr<std::vector<RollbackCopy>> ListRollbackCopies() override {
    return std::vector<RollbackCopy>{};
  }
  absl::Status DropRollbackCopies(const std::vector<RollbackCopy>&) override {
    return absl::OkStatus();
  }
  absl::StatusOr<Profile> ProfileStaged(const std::string&, const DatasetSpec&,
                                        const ProfileRequest&) override {
    return Profile{};
  }
  absl::StatusOr<Profile> ProfilePublished(const std::string&,
                                           const DatasetSpec&,
                                           const ProfileRequest&) override {
    return Profile{};
  }
  absl::StatusOr<std::map<std::string, CountWithSamples>> RunAssertion(
      const std::string&, const DatasetSpec&, const std::string&,
      int) override {
    return std::map<std::string, CountWithSamples>{};
  }
  absl::StatusOr<SqlValue> QueryValue(const DatasetSpec&, const std::string&,
                                      const std::string&) override {
    return SqlValue{};
  }
  // Every transform outputs exactly its contract.
  absl::StatusOr<QueryShape> DescribeQuery(
      const std::string& sql, const std::vector<const DatasetSpec*>& stand_ins,
      const DatasetSpec*) override {
    QueryShape shape;
    for (const DatasetSpec* ds : stand_ins) {
      if (ds->transform != sql) continue;
      for (const ColumnSpec& c : ds->columns) shape.columns.push_back(c.name);
      break;
    }
    return shape;
  }
  absl::StatusOr<std::optional<std::vector<ColumnSpec>>> DescribeTable(
      const DatasetSpec&) override {
    return std::optional<std::vector<ColumnSpec>>();
  }
  // It holds no rows, so no predicate matches.
  absl::StatusOr<std::vector<std::string>> PartitionsMatching(
      const DatasetSpec&, const std::string&, size_t) override {
    return std::vector<std::string>{};
  }
};

int Main(int argc, char** argv) {
  int days = 365, per_day = 300, workers = 2;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const int v = std::atoi(argv[i + 1]);
    if (flag == "--days") days = v;
    if (flag == "--orders-per-day") per_day = v;
    if (flag == "--workers") workers = v;
  }
  if (days < 31 || per_day < 1 || workers < 1) {
    std::fprintf(stderr,
                 "usage: backfill_bench [--days N>=31] [--orders-per-day N] "
                 "[--workers N]\n");
    return 2;
  }
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    absl::StrCat("backfill_bench_", getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string warehouse = (dir / "warehouse.db").string();
  MakeWarehouse(warehouse, days, per_day);
  auto catalog =
      LoadPipelineTexts({{"bench.yaml", fixtures::RevenuePipelineYaml()}});
  Die(catalog.status(), "load pipeline");
  const DatasetSpec& spec = *catalog->Find("daily_revenue");
  std::vector<std::string> all_days =
      EnumerateRange(Grain::kDay, "2025-01-01", "2100-01-01", 100000).value();
  const std::string last_exclusive = all_days[days];
  all_days.resize(days);

  auto engine = SqliteEngine::Open(warehouse, workers + 1);
  Die(engine.status(), "open engine");

  // 1. Plan latency for the full range.
  Planner planner(&*catalog, engine->get());
  BackfillRequest full;
  full.dataset = "daily_revenue";
  full.from = "2025-01-01";
  full.to = last_exclusive;
  full.reason = "bench full reload";
  auto t = std::chrono::steady_clock::now();
  const int plan_reps = 20;
  for (int i = 0; i < plan_reps; ++i)
    Die(planner.MakePlan(full).status(), "plan");
  const double plan_seconds = Seconds(t) / plan_reps;

  // 2. The engine alone, one thread, every partition.
  JobLayout layout;
  layout.job_id = "bf-900000";
  layout.items.push_back({&spec, all_days});
  layout.pinned.push_back(catalog->Find("customers"));
  Die(engine->get()->PrepareJob(layout), "prepare");
  t = std::chrono::steady_clock::now();
  for (const std::string& day : all_days) {
    Die(engine->get()
            ->StagePartition(layout.job_id, spec, day,
                             planner.InputsOf(spec, day))
            .status(),
        "stage");
  }
  const double engine_seconds = Seconds(t);
  Die(engine->get()->DropStaging(layout.job_id), "drop");

  // 2b. One StagePartition call in a 1-partition job vs in a job of
  //     ~300k hour partitions: the engine's per-call cost must not grow with
  //     the job.
  DatasetSpec hourly;
  hourly.name = "hourly";
  hourly.kind = DatasetKind::kDerived;
  hourly.table = "hourly";
  hourly.partition = PartitionSpec{"h", Grain::kHour, {}};
  hourly.transform = "SELECT :partition_start AS h, 1 AS n";
  hourly.columns = {{"h", "TEXT"}, {"n", "INTEGER"}};
  std::vector<std::string> hours =
      EnumerateRange(Grain::kHour, "1990-01-01T00", "2024-03-24T00", 400000)
          .value();
  const std::string probe = hours[hours.size() / 2];
  JobLayout small_job;
  small_job.job_id = "bf-900001";
  small_job.items.push_back({&hourly, {probe}});
  JobLayout big_job;
  big_job.job_id = "bf-900002";
  big_job.items.push_back({&hourly, hours});
  Die(engine->get()->PrepareJob(small_job), "prepare small");
  Die(engine->get()->PrepareJob(big_job), "prepare big");
  auto stage_seconds = [&](const std::string& job_id) {
    const int reps = 200;
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; ++i) {
      Die(engine->get()->StagePartition(job_id, hourly, probe, {}).status(),
          "stage hourly");
    }
    return Seconds(t0) / reps;
  };
  stage_seconds(small_job.job_id);  // warm up
  const double small_stage = stage_seconds(small_job.job_id);
  const double big_stage = stage_seconds(big_job.job_id);
  Die(engine->get()->DropStaging(small_job.job_id), "drop");
  Die(engine->get()->DropStaging(big_job.job_id), "drop");

  // 3. The manager end to end on one worker (same work + checkpoints +
  //    validation + atomic publish + lineage).
  RunResult managed =
      RunJob(*catalog, (dir / "state1.db").string(), engine->get(), 1, full);
  // 4. The manager over a null engine: pure scheduling + checkpoint cost.
  NullEngine null_engine;
  RunResult overhead =
      RunJob(*catalog, (dir / "state2.db").string(), &null_engine, 1, full);
  // 5. A 30-day scoped backfill vs the full reload just measured.
  BackfillRequest scoped = full;
  scoped.from = all_days[days - 61];
  scoped.to = all_days[days - 31];
  scoped.reason = "bench scoped";
  RunResult scoped_run = RunJob(*catalog, (dir / "state3.db").string(),
                                engine->get(), workers, scoped);
  RunResult full_run = RunJob(*catalog, (dir / "state4.db").string(),
                              engine->get(), workers, full);

  // 6. Plan time against table size: the same 30-day request over the
  //    warehouse above and over one with ten times the orders per day. A
  //    plan should cost what its scope costs, not what the table holds.
  auto plan_time = [&](Planner& p, const BackfillRequest& request) {
    Die(p.MakePlan(request).status(), "plan");  // warm up
    const int reps = 10;
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; ++i) Die(p.MakePlan(request).status(), "plan");
    return Seconds(t0) / reps;
  };
  const double plan_scoped_small = plan_time(planner, scoped);
  const std::string big_warehouse = (dir / "warehouse10.db").string();
  MakeWarehouse(big_warehouse, days, per_day * 10);
  auto big_engine = SqliteEngine::Open(big_warehouse, 1);
  Die(big_engine.status(), "open engine");
  Planner big_planner(&*catalog, big_engine->get());
  const double plan_scoped_big = plan_time(big_planner, scoped);
  // 6b. The same plans once the 30 days ran before: each partition is
  //     estimated from the input rows its last run read (the history in
  //     the state store), so nothing is counted.
  RunResult big_scoped_run = RunJob(*catalog, (dir / "state5.db").string(),
                                    big_engine->get(), workers, scoped);
  auto small_history = SqliteStateStore::Open((dir / "state3.db").string());
  Die(small_history.status(), "open state store");
  auto big_history = SqliteStateStore::Open((dir / "state5.db").string());
  Die(big_history.status(), "open state store");
  Planner small_history_planner(&*catalog, engine->get(), {},
                                small_history->get());
  Planner big_history_planner(&*catalog, big_engine->get(), {},
                              big_history->get());
  const double plan_history_small = plan_time(small_history_planner, scoped);
  const double plan_history_big = plan_time(big_history_planner, scoped);
  auto history_plan = big_history_planner.MakePlan(scoped);
  Die(history_plan.status(), "plan");
  // 6c. Table size alone: the same 30 days (same rows in scope) over a
  //     table ten times as long (3650 days of 300 orders).
  const std::string long_warehouse = (dir / "warehouse_long.db").string();
  MakeWarehouse(long_warehouse, days * 10, per_day);
  auto long_engine = SqliteEngine::Open(long_warehouse, 1);
  Die(long_engine.status(), "open engine");
  Planner long_planner(&*catalog, long_engine->get());
  const double plan_scoped_long = plan_time(long_planner, scoped);

  // 7. Plan time at 100,000 partitions: an hourly dataset over an hourly
  //    source (empty tables), 100,000 hours requested.
  auto hourly_catalog = LoadPipelineTexts({{"hourly.yaml", R"yaml(
datasets:
  - name: events
    kind: source
    table: bench_events
    partition: {column: h, grain: hour}
  - name: hourly_counts
    kind: derived
    table: bench_hourly_counts
    partition: {column: h, grain: hour}
    upstream: [{dataset: events, mapping: identity}]
    transform: "SELECT h, COUNT(*) AS n FROM bench_events WHERE h >= :partition_start AND h < :partition_end GROUP BY h"
    contract: {columns: {h: TEXT, n: INTEGER}, primary_key: [h]}
)yaml"}});
  Die(hourly_catalog.status(), "load hourly pipeline");
  {
    sqlite3* db = nullptr;
    if (sqlite3_open(big_warehouse.c_str(), &db) != SQLITE_OK ||
        sqlite3_exec(db, "CREATE TABLE bench_events (h TEXT)", nullptr, nullptr,
                     nullptr) != SQLITE_OK) {
      std::fprintf(stderr, "backfill_bench: create bench_events\n");
      return 1;
    }
    sqlite3_close(db);
  }
  Planner hourly_planner(&*hourly_catalog, big_engine->get());
  BackfillRequest many;
  many.dataset = "hourly_counts";
  many.from = hours[0];
  many.to = hours[100000];
  many.reason = "bench 100k partitions";
  const double plan_100k = plan_time(hourly_planner, many);

  const double n = days;
  std::printf(
      "backfill_bench: %d daily partitions, %d orders/day, %d "
      "workers\n\n",
      days, per_day, workers);
  std::printf("%-52s %14s\n", "measure", "value");
  std::printf("%-52s %14s\n", std::string(52, '-').c_str(),
              std::string(14, '-').c_str());
  std::printf("%-52s %11.1f us\n", "plan 365-day request (incl. row counts)",
              plan_seconds * 1e6);
  std::printf("%-52s %11.1f us\n", "engine alone: stage one partition",
              engine_seconds / n * 1e6);
  std::printf("%-52s %11.1f us\n",
              "manager end to end, 1 worker: per partition",
              managed.seconds / n * 1e6);
  std::printf("%-52s %11.1f us\n",
              "manager over null engine: overhead per partition",
              overhead.seconds / n * 1e6);
  std::printf("%-52s %13.1f%%\n", "overhead / engine work per partition",
              100.0 * overhead.seconds / engine_seconds);
  std::printf("%-52s %11.1f us\n", "engine: stage in a 1-partition job",
              small_stage * 1e6);
  std::printf(
      "%-52s %11.1f us\n",
      absl::StrFormat("engine: stage in a %d-partition job", hours.size())
          .c_str(),
      big_stage * 1e6);
  std::printf("%-52s %13.2fx\n", "large job / small job, per call",
              big_stage / small_stage);
  std::printf("%-52s %14.0f\n", "scoped 30 days: estimated cost (input rows)",
              scoped_run.job.plan.cost.backfill);
  std::printf("%-52s %14.0f\n", "scoped 30 days: actual cost (input rows)",
              scoped_run.job.actual_cost);
  std::printf("%-52s %14.0f\n", "full reload: actual cost (input rows)",
              full_run.job.actual_cost);
  std::printf("%-52s %13.1f%%\n", "scoped / full reload, cost",
              100.0 * scoped_run.job.actual_cost / full_run.job.actual_cost);
  std::printf("%-52s %11.3f s\n", "scoped 30 days: wall time",
              scoped_run.seconds);
  std::printf("%-52s %11.3f s\n", "full reload: wall time", full_run.seconds);
  std::printf("%-52s %13.1f%%\n", "scoped / full reload, wall time",
              100.0 * scoped_run.seconds / full_run.seconds);
  std::printf(
      "%-52s %11.1f us\n",
      absl::StrFormat("plan 30-day request, %d orders/day", per_day).c_str(),
      plan_scoped_small * 1e6);
  std::printf(
      "%-52s %11.1f us\n",
      absl::StrFormat("plan 30-day request, %d orders/day", per_day * 10)
          .c_str(),
      plan_scoped_big * 1e6);
  std::printf("%-52s %13.2fx\n", "10x table / 1x table, plan time",
              plan_scoped_big / plan_scoped_small);
  std::printf("%-52s %11.1f us\n",
              absl::StrFormat("  from history, %d orders/day", per_day).c_str(),
              plan_history_small * 1e6);
  std::printf(
      "%-52s %11.1f us\n",
      absl::StrFormat("  from history, %d orders/day", per_day * 10).c_str(),
      plan_history_big * 1e6);
  std::printf("%-52s %13.2fx\n", "  10x table / 1x table, plan time",
              plan_history_big / plan_history_small);
  std::printf("%-52s %14.0f\n", "  estimate from history (input rows)",
              history_plan->cost.backfill);
  std::printf("%-52s %14.0f\n", "  actual of the run it comes from",
              big_scoped_run.job.actual_cost);
  std::printf("%-52s %11.1f us\n",
              absl::StrFormat("plan 30-day request, %d days x %d orders",
                              days * 10, per_day)
                  .c_str(),
              plan_scoped_long * 1e6);
  std::printf("%-52s %13.2fx\n", "10x longer table / 1x table, plan time",
              plan_scoped_long / plan_scoped_small);
  std::printf("%-52s %11.3f s\n", "plan 100000 hour partitions (empty tables)",
              plan_100k);
  std::filesystem::remove_all(dir);
  return 0;
}

}  // namespace
}  // namespace backfill

int main(int argc, char** argv) { return backfill::Main(argc, argv); }
