// Cost estimates and budgets (core/plan/cost_estimator.h,
// core/plan/cost_budget.h): estimates from the history of earlier runs and from
// input row counts, the full-reload figure, and the refusals of --max-cost and
// a dataset's `max_cost`, against hand-computed figures.

#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "core/base/clock.h"
#include "core/model/pipeline_loader.h"
#include "core/plan/cost_budget.h"
#include "core/plan/cost_estimator.h"
#include "core/plan/planner.h"
#include "core/run/backfill_manager.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/fake_engine.h"
#include "tests/testing/memory_state_store.h"

namespace backfill {
namespace core_cost_test {
namespace {

using ::backfill::testing::FakeEngine;
using ::backfill::testing::InMemoryStateStore;
using ::testing::HasSubstr;

constexpr char kPipeline[] = R"yaml(
datasets:
  - name: orders
    kind: source
    table: raw_orders
    partition: {column: order_date, grain: day}
  - name: customers
    kind: source
    table: dim_customers
  - name: daily
    kind: derived
    table: daily
    partition: {column: ds, grain: day}
    upstream:
      - {dataset: orders, mapping: identity}
      - {dataset: customers, mapping: all}
    transform: "SELECT :partition AS ds, 1 AS n"
    contract: {columns: {ds: TEXT, n: INTEGER}}
  - name: daily_copy
    kind: derived
    table: daily_copy
    partition: {column: ds, grain: day}
    upstream: [{dataset: daily, mapping: identity}]
    transform: "SELECT :partition AS ds, 1 AS n"
    contract: {columns: {ds: TEXT, n: INTEGER}}
    max_cost: 2
)yaml";

std::string Day(int d) { return absl::StrFormat("2025-01-%02d", d); }

class CostTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto catalog = LoadPipelineTexts({{"cost.yaml", kPipeline}});
    ASSERT_TRUE(catalog.ok()) << catalog.status();
    catalog_ = *std::move(catalog);
    // Day d of January holds 10*d orders (d = 1..10); 50 customers; daily
    // has 1 published row per day for days 1..4.
    for (int d = 1; d <= 10; ++d) {
      engine_.SetPublishedRows("orders", Day(d), 10 * d);
    }
    engine_.SetPublishedRows("customers", "", 50);
    for (int d = 1; d <= 4; ++d) engine_.SetPublishedRows("daily", Day(d), 1);
  }

  BackfillRequest Daily(int from, int to, bool downstream = false) {
    BackfillRequest r;
    r.dataset = "daily";
    r.from = Day(from);
    r.to = Day(to);
    r.reason = "test";
    r.exclude_downstream = !downstream;
    return r;
  }

  // A job whose task of `dataset`/`partition` ended in `state` having read
  // `rows` input rows (split over two inputs).
  void RecordRun(const std::string& dataset, const std::string& partition,
                 TaskState state, int64_t rows) {
    Job job;
    job.request.dataset = dataset;
    job.request.reason = "history";
    DatasetPlan dp;
    dp.dataset = dataset;
    dp.partitions = {partition};
    job.plan.datasets.push_back(dp);
    auto created = store_.CreateJob(job, absl::Now());
    ASSERT_TRUE(created.ok()) << created.status();
    PartitionTask task;
    task.job_id = created->job.id;
    task.dataset = dataset;
    task.partition = partition;
    task.state = state;
    task.inputs = {{"orders", partition, "f1", rows - 7},
                   {"customers", "", "f2", 7}};
    ASSERT_TRUE(store_.UpdateTask(task).ok());
  }

  Catalog catalog_;
  FakeEngine engine_;
  InMemoryStateStore store_;
};

TEST_F(CostTest, RowCountsWithoutHistory) {
  Planner planner(&catalog_, &engine_, {}, &store_);
  auto plan = planner.MakePlan(Daily(2, 5));
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->datasets.size(), 1u);
  const DatasetPlan& dp = plan->datasets[0];
  // Days 2, 3, 4: (20 + 50) + (30 + 50) + (40 + 50).
  EXPECT_DOUBLE_EQ(dp.cost.backfill, 240);
  // Days 1..10: 10 * (1 + ... + 10) + 10 * 50.
  EXPECT_DOUBLE_EQ(dp.cost.full_reload, 1050);
  EXPECT_EQ(dp.estimate_source, "row_counts");
  EXPECT_EQ(dp.partitions_from_history, 0);
  EXPECT_DOUBLE_EQ(plan->cost.backfill, 240);
  EXPECT_TRUE(plan->cost.refused.empty());
  // Only the planned days were counted exactly; the full reload came from
  // the statistics.
  EXPECT_EQ(engine_.calls("CountRowsByPartition"), 0);
  EXPECT_GE(engine_.calls("CountRowsInPartitions"), 1);
}

TEST_F(CostTest, ALargeScopeIsEstimatedFromTheStatisticsNotCounted) {
  // Days 2..4 hold 3 x 400,000 orders by the statistics: more than
  // kMaxCountedRows, so no partition is counted; the figures are the
  // statistics' (and the dimension's 50 rows per day).
  for (int d = 1; d <= 10; ++d) {
    engine_.SetPublishedRows("orders", Day(d), 400'000);
  }
  ASSERT_GT(3 * 400'000, CostEstimator::kMaxCountedRows);
  Planner planner(&catalog_, &engine_, {}, &store_);
  auto plan = planner.MakePlan(Daily(2, 5));
  ASSERT_TRUE(plan.ok()) << plan.status();
  const DatasetPlan& dp = plan->datasets[0];
  EXPECT_DOUBLE_EQ(dp.cost.backfill, 3 * (400'000 + 50));
  EXPECT_DOUBLE_EQ(dp.cost.full_reload, 10 * (400'000 + 50));
  EXPECT_EQ(dp.estimate_source, "row_counts");
  EXPECT_EQ(engine_.calls("CountRowsInPartitions"), 0);

  // Two days (800,000 rows) are counted again.
  auto small = planner.MakePlan(Daily(2, 4));
  ASSERT_TRUE(small.ok()) << small.status();
  EXPECT_DOUBLE_EQ(small->datasets[0].cost.backfill, 2 * (400'000 + 50));
  EXPECT_EQ(engine_.calls("CountRowsInPartitions"), 1);
}

TEST_F(CostTest, HistoryWinsOverRowCountsPerPartition) {
  // Day 3: an old run read 999, the newest 77 (the newest wins). Day 4 only
  // staged (never published): no history. Another dataset's run of day 2
  // is not daily's history.
  RecordRun("daily", Day(3), TaskState::kPublished, 999);
  RecordRun("daily", Day(3), TaskState::kPublished, 77);
  RecordRun("daily", Day(4), TaskState::kStaged, 555);
  RecordRun("daily_copy", Day(2), TaskState::kPublished, 1234);
  Planner planner(&catalog_, &engine_, {}, &store_);
  auto plan = planner.MakePlan(Daily(2, 5));
  ASSERT_TRUE(plan.ok()) << plan.status();
  const DatasetPlan& dp = plan->datasets[0];
  // Day 2 from rows (20 + 50), day 3 from history (77), day 4 from rows
  // (40 + 50).
  EXPECT_DOUBLE_EQ(dp.cost.backfill, 70 + 77 + 90);
  EXPECT_EQ(dp.partitions_from_history, 1);
  EXPECT_EQ(dp.estimate_source, "mixed");
  // The full reload stays a row-count figure.
  EXPECT_DOUBLE_EQ(dp.cost.full_reload, 1050);

  // Every partition with history: source "history".
  BackfillRequest only3 = Daily(3, 4);
  auto plan3 = planner.MakePlan(only3);
  ASSERT_TRUE(plan3.ok());
  EXPECT_DOUBLE_EQ(plan3->datasets[0].cost.backfill, 77);
  EXPECT_EQ(plan3->datasets[0].estimate_source, "history");
  EXPECT_EQ(plan3->datasets[0].partitions_from_history, 1);

  // Without a store, rows only.
  Planner no_history(&catalog_, &engine_);
  auto plain = no_history.MakePlan(only3);
  ASSERT_TRUE(plain.ok());
  EXPECT_DOUBLE_EQ(plain->datasets[0].cost.backfill, 30 + 50);
}

TEST_F(CostTest, DependentsAreCostedFromTheirOwnInputs) {
  Planner planner(&catalog_, &engine_, {}, &store_);
  auto plan = planner.MakePlan(Daily(2, 5, /*downstream=*/true));
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->datasets.size(), 2u);
  const DatasetPlan& copy = plan->datasets[1];
  EXPECT_EQ(copy.dataset, "daily_copy");
  // daily_copy reads daily's published rows: 1 per day for days 2, 3, 4.
  EXPECT_DOUBLE_EQ(copy.cost.backfill, 3);
  // A full reload of daily_copy covers daily's 4 published days.
  EXPECT_DOUBLE_EQ(copy.cost.full_reload, 4);
  EXPECT_DOUBLE_EQ(plan->cost.backfill, 240 + 3);
  EXPECT_DOUBLE_EQ(plan->cost.full_reload, 1050 + 4);
}

TEST_F(CostTest, DependentsOfPartitionsThePlanCreatesAreNotFree) {
  // Days 6..9 of daily do not exist yet: daily_copy's days 6..8 read rows
  // this job writes. daily's 4 published days hold 1 row each, so each new
  // day is expected to hold 1 row too (the mean of the published ones).
  Planner planner(&catalog_, &engine_, {}, &store_);
  auto plan = planner.MakePlan(Daily(6, 9, /*downstream=*/true));
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->datasets.size(), 2u);
  const DatasetPlan& copy = plan->datasets[1];
  EXPECT_EQ(copy.dataset, "daily_copy");
  EXPECT_DOUBLE_EQ(copy.cost.backfill, 3);
  // A full reload covers daily's 4 published days and the 3 this job adds.
  EXPECT_DOUBLE_EQ(copy.cost.full_reload, 4 + 3);
  EXPECT_LE(copy.cost.backfill, copy.cost.full_reload);
}

TEST_F(CostTest, AFirstLoadEstimatesDependentsFromTheirUpstreamsInputs) {
  // Nothing derived is published: daily's days 2..4 will be computed from
  // orders and customers, so daily_copy reads at most what they read.
  FakeEngine fresh;
  for (int d = 1; d <= 10; ++d) {
    fresh.SetPublishedRows("orders", Day(d), 10 * d);
  }
  fresh.SetPublishedRows("customers", "", 50);
  Planner planner(&catalog_, &fresh, {}, &store_);
  auto plan = planner.MakePlan(Daily(2, 5, /*downstream=*/true));
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->datasets.size(), 2u);
  const DatasetPlan& daily = plan->datasets[0];
  const DatasetPlan& copy = plan->datasets[1];
  EXPECT_DOUBLE_EQ(daily.cost.backfill, 70 + 80 + 90);
  EXPECT_DOUBLE_EQ(copy.cost.backfill, 70 + 80 + 90);
  // A full reload of daily_copy is at least this job's days.
  EXPECT_DOUBLE_EQ(copy.cost.full_reload, 70 + 80 + 90);
  EXPECT_EQ(copy.estimate_source, "row_counts");
  EXPECT_DOUBLE_EQ(plan->cost.backfill, 2 * 240);
}

TEST_F(CostTest, MaxCostOfTheRequest) {
  Planner planner(&catalog_, &engine_, {}, &store_);
  BackfillRequest r = Daily(2, 5);
  r.max_cost = 239;
  auto plan = planner.MakePlan(r);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_DOUBLE_EQ(plan->cost.max_cost, 239);
  EXPECT_EQ(plan->cost.refused,
            "estimated cost 240 input_rows exceeds `max_cost` 239 (a full "
            "reload costs 1,050 input_rows): narrow the scope or raise the "
            "limit");
  r.max_cost = 240;  // at the limit: within it
  plan = planner.MakePlan(r);
  ASSERT_TRUE(plan.ok());
  EXPECT_TRUE(plan->cost.refused.empty());
  r.max_cost = 0;  // no limit
  plan = planner.MakePlan(r);
  ASSERT_TRUE(plan.ok());
  EXPECT_DOUBLE_EQ(plan->cost.max_cost, 0);
  EXPECT_TRUE(plan->cost.refused.empty());

  for (double bad :
       {-1.0, std::nan(""), std::numeric_limits<double>::infinity()}) {
    r.max_cost = bad;
    auto refused = planner.MakePlan(r);
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument)
        << bad;
    EXPECT_THAT(refused.status().message(), HasSubstr("max_cost")) << bad;
  }
}

TEST_F(CostTest, MaxCostOfADatasetAppliesInAnyJob) {
  Planner planner(&catalog_, &engine_, {}, &store_);
  // daily_copy declares max_cost: 2; as a dependent it is estimated at 3.
  auto plan = planner.MakePlan(Daily(2, 5, /*downstream=*/true));
  ASSERT_TRUE(plan.ok()) << plan.status();
  const DatasetPlan& copy = plan->datasets[1];
  EXPECT_DOUBLE_EQ(copy.cost.max_cost, 2);
  EXPECT_EQ(copy.cost.refused,
            "estimated cost of dataset daily_copy 3 input_rows exceeds its "
            "max_cost 2 (declared at cost.yaml:19); a full reload of "
            "daily_copy costs 4 input_rows: narrow the scope, or raise "
            "max_cost in the pipeline file");
  EXPECT_EQ(plan->cost.refused, copy.cost.refused);
  EXPECT_TRUE(plan->datasets[0].cost.refused.empty());
  // Two days of it are within.
  auto two = planner.MakePlan(Daily(2, 4, /*downstream=*/true));
  ASSERT_TRUE(two.ok());
  EXPECT_TRUE(two->cost.refused.empty());
}

TEST_F(CostTest, SubmitOverABudgetIsRefusedAndCreatesNothing) {
  ManualClock clock(absl::FromUnixSeconds(1700000000));
  ManagerOptions options;
  options.workers = 1;
  BackfillManager manager(&catalog_, &store_, &engine_, &clock, nullptr,
                          options);
  ASSERT_TRUE(manager.Start().ok());
  BackfillRequest r = Daily(2, 5);
  r.max_cost = 100;
  auto submitted = manager.Submit(r, SubmitOptions{});
  EXPECT_EQ(submitted.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(submitted.status().message(),
            "estimated cost 240 input_rows exceeds `max_cost` 100 (a full "
            "reload costs 1,050 input_rows): narrow the scope or raise the "
            "limit");
  auto downstream = manager.Submit(Daily(2, 5, true), SubmitOptions{});
  EXPECT_EQ(downstream.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(downstream.status().message(),
              HasSubstr("exceeds its max_cost 2"));
  auto ids = store_.ListJobIds({});
  ASSERT_TRUE(ids.ok());
  EXPECT_TRUE(ids->empty());
  auto info = store_.Info();
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->last_job_number, 0);

  // Within the budget: created, the budget and the estimate kept.
  r.max_cost = 240;
  auto ok = manager.Submit(r, SubmitOptions{});
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_DOUBLE_EQ(ok->job.request.max_cost, 240);
  EXPECT_DOUBLE_EQ(ok->job.plan.cost.max_cost, 240);
  EXPECT_EQ(ok->job.plan.datasets[0].estimate_source, "row_counts");
  manager.Shutdown();
}

TEST(CostFigureTest, GroupsThousandsAndKeepsFractions) {
  EXPECT_EQ(FormatCostFigure(0), "0");
  EXPECT_EQ(FormatCostFigure(999), "999");
  EXPECT_EQ(FormatCostFigure(1000), "1,000");
  EXPECT_EQ(FormatCostFigure(1234000), "1,234,000");
  EXPECT_EQ(FormatCostFigure(3650000), "3,650,000");
  EXPECT_EQ(FormatCostFigure(1.5), "1.5");
  EXPECT_EQ(FormatCostFigure(1234.25), "1,234.25");
  EXPECT_EQ(FormatCostFigure(999.999), "1,000");
}

TEST(MaxCostSpecTest, LoadsOnDerivedDatasetsAndRefusesBadValues) {
  const std::string base = R"yaml(
datasets:
  - name: src
    kind: source
    table: src
    partition: {column: ds, grain: day}
  - name: out
    kind: derived
    table: out
    partition: {column: ds, grain: day}
    upstream: [{dataset: src, mapping: identity}]
    transform: "SELECT :partition AS ds"
    contract: {columns: {ds: TEXT}}
)yaml";
  auto ok = LoadPipelineTexts({{"p.yaml", base + "    max_cost: 1.5e6\n"}});
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_DOUBLE_EQ(ok->Find("out")->max_cost, 1.5e6);
  EXPECT_DOUBLE_EQ(ok->Find("src")->max_cost, 0);

  for (const char* bad : {"0", "-5", "abc", "nan", "inf", "[1]"}) {
    auto loaded = LoadPipelineTexts(
        {{"p.yaml", base + absl::StrFormat("    max_cost: %s\n", bad)}});
    EXPECT_EQ(loaded.status().code(), absl::StatusCode::kInvalidArgument)
        << bad;
    EXPECT_THAT(loaded.status().message(), HasSubstr("max_cost")) << bad;
    EXPECT_THAT(loaded.status().message(), HasSubstr("p.yaml")) << bad;
  }
  std::string on_source = base;
  on_source.insert(on_source.find("  - name: out"), "    max_cost: 10\n");
  auto source = LoadPipelineTexts({{"p.yaml", on_source}});
  EXPECT_EQ(source.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(source.status().message(),
              HasSubstr("only allowed on derived datasets"));
}

}  // namespace
}  // namespace core_cost_test
}  // namespace backfill
