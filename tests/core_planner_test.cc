// Planner: scope resolution, downstream propagation and cost, against a
// fake engine that only answers row counts.

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "core/base/error_details.h"
#include "core/plan/planner.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace backfill {
namespace core_planner_test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class CountingEngine : public Engine {
 public:
  std::map<std::string, std::map<std::string, int64_t>> rows;
  int count_calls = 0;

  absl::StatusOr<WarehouseInfo> Inspect() override { return WarehouseInfo{}; }
  absl::Status Claim(const std::string&, bool) override {
    return absl::UnimplementedError("planner must not write");
  }
  absl::StatusOr<std::map<std::string, int64_t>> CountRowsByPartition(
      const DatasetSpec& d) override {
    ++count_calls;
    return rows[d.name];
  }
  absl::StatusOr<std::map<std::string, InputFingerprint>> CurrentFingerprints(
      const DatasetSpec&, const std::vector<std::string>&) override {
    return absl::UnimplementedError("no test here plans --auto");
  }
  absl::Status PrepareJob(const JobLayout&) override {
    return absl::UnimplementedError("planner must not write");
  }
  absl::StatusOr<StageResult> StagePartition(
      const std::string&, const DatasetSpec&, const std::string&,
      const std::vector<InputRef>&) override {
    return absl::UnimplementedError("planner must not write");
  }
  absl::Status ReleasePartitions(const std::string&, const DatasetSpec&,
                                 const std::vector<std::string>&) override {
    return absl::UnimplementedError("planner must not write");
  }
  absl::StatusOr<ValidationReport> ValidateStaged(const std::string&,
                                                  const DatasetSpec&) override {
    return absl::UnimplementedError("planner must not write");
  }
  absl::StatusOr<PartitionDiff> DiffPartition(const std::string&,
                                              const DatasetSpec&,
                                              const std::string&,
                                              int) override {
    return absl::UnimplementedError("planner must not diff");
  }
  absl::StatusOr<bool> IsPublished(const std::string&) override {
    return false;
  }
  absl::Status Publish(const JobLayout&) override {
    return absl::UnimplementedError("planner must not write");
  }
  absl::Status DropStaging(const std::string&) override {
    return absl::UnimplementedError("planner must not write");
  }
  absl::StatusOr<std::vector<std::string>> ListJobsWithStaging() override {
    return std::vector<std::string>{};
  }
  absl::StatusOr<RollbackResult> Rollback(const RollbackSpec&) override {
    return absl::UnimplementedError("planner must not write");
  }
  absl::StatusOr<std::vector<RollbackCopy>> ListRollbackCopies() override {
    return std::vector<RollbackCopy>{};
  }
  absl::Status DropRollbackCopies(const std::vector<RollbackCopy>&) override {
    return absl::UnimplementedError("planner must not write");
  }
  absl::StatusOr<Profile> ProfileStaged(const std::string&, const DatasetSpec&,
                                        const ProfileRequest&) override {
    return absl::UnimplementedError("planner must not validate");
  }
  absl::StatusOr<Profile> ProfilePublished(const std::string&,
                                           const DatasetSpec&,
                                           const ProfileRequest&) override {
    return absl::UnimplementedError("planner must not validate");
  }
  absl::StatusOr<std::map<std::string, CountWithSamples>> RunAssertion(
      const std::string&, const DatasetSpec&, const std::string&,
      int) override {
    return absl::UnimplementedError("planner must not validate");
  }
  absl::StatusOr<SqlValue> QueryValue(const DatasetSpec&, const std::string&,
                                      const std::string&) override {
    return absl::UnimplementedError("planner must not confirm");
  }
  absl::StatusOr<QueryShape> DescribeQuery(
      const std::string&, const std::vector<const DatasetSpec*>&,
      const DatasetSpec*) override {
    return absl::UnimplementedError("planner does not check transforms");
  }
  absl::StatusOr<std::optional<std::vector<ColumnSpec>>> DescribeTable(
      const DatasetSpec&) override {
    return absl::UnimplementedError("planner does not check transforms");
  }
  absl::StatusOr<std::vector<std::string>> PartitionsMatching(
      const DatasetSpec&, const std::string&, size_t) override {
    return absl::UnimplementedError("no test here plans affected_by");
  }
};

DatasetSpec Source(const std::string& name, Grain grain) {
  DatasetSpec d;
  d.name = name;
  d.table = name;
  d.kind = DatasetKind::kSource;
  if (grain != Grain::kNone) d.partition = PartitionSpec{"ds", grain, {}};
  d.file = "test.yaml";
  d.line = 1;
  return d;
}

DatasetSpec Derived(const std::string& name, Grain grain,
                    std::vector<UpstreamEdge> upstream) {
  DatasetSpec d = Source(name, grain);
  d.kind = DatasetKind::kDerived;
  d.upstream = std::move(upstream);
  d.transform = "SELECT 1 AS ds";
  d.transform_version = "v1";
  d.columns = {{"ds", "TEXT"}, {"v", "REAL"}};
  return d;
}

class PlannerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::vector<DatasetSpec> specs = {
        Source("orders", Grain::kDay),
        Source("customers", Grain::kNone),
        Derived("daily", Grain::kDay,
                {{"orders", Mapping::kIdentity}, {"customers", Mapping::kAll}}),
        Derived("daily_copy", Grain::kDay, {{"daily", Mapping::kIdentity}}),
    };
    auto catalog = Catalog::Build(std::move(specs), WarehouseSpec{});
    ASSERT_TRUE(catalog.ok()) << catalog.status();
    catalog_ = *std::move(catalog);
    // 10 days of orders, 100 rows each; 50 customers.
    for (int d = 1; d <= 10; ++d) {
      engine_.rows["orders"][absl::StrFormat("2025-01-%02d", d)] = 100;
    }
    engine_.rows["customers"][""] = 50;
  }

  BackfillRequest Range(const std::string& from, const std::string& to) {
    BackfillRequest r;
    r.dataset = "daily";
    r.from = from;
    r.to = to;
    return r;
  }

  Catalog catalog_;
  CountingEngine engine_;
};

TEST_F(PlannerTest, RangeResolvesToPartitionsAndDependents) {
  Planner planner(&catalog_, &engine_);
  auto plan = planner.MakePlan(Range("2025-01-02", "2025-01-04"));
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->datasets.size(), 2u);
  EXPECT_EQ(plan->datasets[0].dataset, "daily");
  EXPECT_EQ(plan->datasets[0].reason, "requested");
  EXPECT_THAT(plan->datasets[0].partitions,
              ElementsAre("2025-01-02", "2025-01-03"));
  EXPECT_EQ(plan->datasets[1].dataset, "daily_copy");
  EXPECT_EQ(plan->datasets[1].reason, "downstream of daily");
  EXPECT_THAT(plan->datasets[1].partitions,
              ElementsAre("2025-01-02", "2025-01-03"));
  EXPECT_EQ(plan->total_partitions(), 4);
}

TEST_F(PlannerTest, CostCountsIdentityRowsAndWholeDimensionPerPartition) {
  Planner planner(&catalog_, &engine_);
  BackfillRequest r = Range("2025-01-02", "2025-01-04");
  r.exclude_downstream = true;
  auto plan = planner.MakePlan(r);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->datasets.size(), 1u);
  // 2 partitions x (100 orders + 50 customers).
  EXPECT_DOUBLE_EQ(plan->cost.backfill, 300);
  // 10 partitions x (100 + 50).
  EXPECT_DOUBLE_EQ(plan->cost.full_reload, 1500);
  EXPECT_DOUBLE_EQ(plan->cost.ratio(), 0.2);
}

TEST_F(PlannerTest, ExplicitPartitionsAreDeduplicatedAndSorted) {
  Planner planner(&catalog_, &engine_);
  BackfillRequest r;
  r.dataset = "daily";
  r.partitions = {"2025-01-05", "2025-01-01", "2025-01-05"};
  r.exclude_downstream = true;
  auto plan = planner.MakePlan(r);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(plan->datasets[0].partitions,
              ElementsAre("2025-01-01", "2025-01-05"));
}

TEST_F(PlannerTest, RepeatedPartitionsArePlannedAndCostedOnce) {
  Planner planner(&catalog_, &engine_);
  BackfillRequest r;
  r.dataset = "daily";
  r.partitions = {"2025-01-05", "2025-01-01", "2025-01-05", "2025-01-03",
                  "2025-01-01"};
  auto plan = planner.MakePlan(r);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->datasets.size(), 2u);
  const DatasetPlan& daily = plan->datasets[0];
  const DatasetPlan& copy = plan->datasets[1];
  EXPECT_THAT(daily.partitions,
              ElementsAre("2025-01-01", "2025-01-03", "2025-01-05"));
  EXPECT_THAT(daily.partition_reasons,
              ElementsAre("requested", "requested", "requested"));
  EXPECT_THAT(copy.partitions,
              ElementsAre("2025-01-01", "2025-01-03", "2025-01-05"));
  EXPECT_THAT(copy.partition_reasons,
              ElementsAre("downstream of daily", "downstream of daily",
                          "downstream of daily"));
  // daily: 3 days x (100 orders + 50 customers). daily_copy reads daily,
  // which holds nothing yet: each day it reads is expected to hold what
  // daily's estimate of it read (150).
  EXPECT_DOUBLE_EQ(daily.cost.backfill, 450);
  EXPECT_DOUBLE_EQ(copy.cost.backfill, 450);
  // Full reloads: daily's 10 days of orders; daily_copy only the 3 days
  // this plan computes (daily holds none).
  EXPECT_DOUBLE_EQ(daily.cost.full_reload, 1500);
  EXPECT_DOUBLE_EQ(copy.cost.full_reload, 450);
  EXPECT_DOUBLE_EQ(plan->cost.backfill, 900);
  EXPECT_DOUBLE_EQ(plan->cost.full_reload, 1950);
}

TEST_F(PlannerTest, RejectsBadRequestsWithActionableMessages) {
  Planner planner(&catalog_, &engine_);
  struct Case {
    BackfillRequest request;
    std::string message;
  };
  BackfillRequest unknown = Range("2025-01-01", "2025-01-02");
  unknown.dataset = "nope";
  BackfillRequest source = Range("2025-01-01", "2025-01-02");
  source.dataset = "orders";
  BackfillRequest both = Range("2025-01-01", "2025-01-02");
  both.partitions = {"2025-01-01"};
  BackfillRequest none;
  none.dataset = "daily";
  BackfillRequest half = Range("2025-01-01", "");
  BackfillRequest bad_list;
  bad_list.dataset = "daily";
  bad_list.partitions = {"2025-1-1"};
  std::vector<Case> cases = {
      {unknown, "unknown dataset \"nope\""},
      {source, "is a source"},
      {Range("2025-01-05", "2025-01-01"), ""},
      {Range("2025-01-05", "2025-01-05"), ""},
      {Range("2025-01-01", "2025-02-30"), ""},
      {both, "not both"},
      {none, "no scope"},
      {half, "both `from_partition` and `to_partition`"},
      {bad_list, "2025-1-1"},
  };
  for (const Case& c : cases) {
    auto plan = planner.MakePlan(c.request);
    ASSERT_FALSE(plan.ok()) << c.message;
    EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(plan.status().message()), HasSubstr(c.message));
  }
}

TEST_F(PlannerTest, EnforcesPartitionLimit) {
  Planner planner(&catalog_, &engine_, PlannerLimits{5});
  auto plan = planner.MakePlan(Range("2025-01-01", "2025-01-04"));
  ASSERT_FALSE(plan.ok());  // 3 + 3 dependents > 5
  EXPECT_THAT(std::string(plan.status().message()), HasSubstr("at most 5"));
}

// The limit applies to the list as sent: repeating one partition does not
// get a request past it, however few partitions it reduces to.
TEST_F(PlannerTest, PartitionLimitCountsTheItemsAsSentDuplicatesIncluded) {
  BackfillRequest r;
  r.dataset = "daily";
  r.exclude_downstream = true;
  r.partitions.assign(5, "2025-01-01");
  Planner planner(&catalog_, &engine_, PlannerLimits{5});
  auto at_limit = planner.MakePlan(r);
  ASSERT_TRUE(at_limit.ok()) << at_limit.status();
  EXPECT_THAT(at_limit->datasets[0].partitions, ElementsAre("2025-01-01"));

  r.partitions.push_back("2025-01-01");
  auto over = planner.MakePlan(r);
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(over.status().message()),
              HasSubstr("`partitions` holds 6 items; at most 5"));
  const ErrorDetails details = DetailsOf(over.status());
  EXPECT_EQ(details.reason, "PLAN_TOO_LARGE");
  ASSERT_EQ(details.field_violations.size(), 1u);
  EXPECT_EQ(details.field_violations[0].field, "partitions");

  // The default limit (1,000,000) against 1,500,000 copies of one
  // partition.
  r.partitions.assign(1500000, "2025-01-01");
  auto copies = Planner(&catalog_, &engine_).MakePlan(r);
  ASSERT_FALSE(copies.ok());
  EXPECT_EQ(copies.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(copies.status().message()),
              HasSubstr("`partitions` holds 1500000 items; at most 1000000"));
}

TEST_F(PlannerTest, InputsFollowMappings) {
  Planner planner(&catalog_, &engine_);
  std::vector<InputRef> inputs =
      planner.InputsOf(*catalog_.Find("daily"), "2025-01-03");
  ASSERT_EQ(inputs.size(), 2u);
  EXPECT_EQ(inputs[0].dataset->name, "orders");
  EXPECT_EQ(inputs[0].partition.value_or("?"), "2025-01-03");
  EXPECT_EQ(inputs[1].dataset->name, "customers");
  EXPECT_FALSE(inputs[1].partition.has_value());
}

// ------------------------------------------------ rollup and lookback --

UpstreamEdge Edge(const std::string& dataset, Mapping mapping,
                  int lookback = 0) {
  return UpstreamEdge{dataset, mapping, lookback};
}

// A pipeline with every mapping:
//   orders (day) -identity-> daily -rollup-> monthly -lookback 2-> monthly_r
//                            daily -lookback 7-> rolling7
//                            daily -identity-> daily_copy
//   daily_copy, rolling7 -identity-> combined (day)
//   daily -all-> snapshot (day, also orders -identity->)
//   events (hour) -identity-> hourly -rollup-> hour_days, hour_months
class MappingPlannerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::vector<DatasetSpec> specs = {
        Source("orders", Grain::kDay),
        Source("events", Grain::kHour),
        Derived("daily", Grain::kDay, {Edge("orders", Mapping::kIdentity)}),
        Derived("monthly", Grain::kMonth, {Edge("daily", Mapping::kRollup)}),
        Derived("monthly_r", Grain::kMonth,
                {Edge("monthly", Mapping::kLookback, 2)}),
        Derived("rolling7", Grain::kDay,
                {Edge("daily", Mapping::kLookback, 7)}),
        Derived("daily_copy", Grain::kDay, {Edge("daily", Mapping::kIdentity)}),
        Derived("combined", Grain::kDay,
                {Edge("rolling7", Mapping::kIdentity),
                 Edge("daily_copy", Mapping::kIdentity)}),
        Derived(
            "snapshot", Grain::kDay,
            {Edge("orders", Mapping::kIdentity), Edge("daily", Mapping::kAll)}),
        Derived("hourly", Grain::kHour, {Edge("events", Mapping::kIdentity)}),
        Derived("hour_days", Grain::kDay, {Edge("hourly", Mapping::kRollup)}),
        Derived("hour_months", Grain::kMonth,
                {Edge("hourly", Mapping::kRollup)}),
    };
    auto catalog = Catalog::Build(std::move(specs), WarehouseSpec{});
    ASSERT_TRUE(catalog.ok()) << catalog.status();
    catalog_ = *std::move(catalog);
    // Orders: 2025-01-01 .. 2025-01-05, 10 rows each.
    for (int d = 1; d <= 5; ++d) {
      engine_.rows["orders"][absl::StrFormat("2025-01-%02d", d)] = 10;
    }
  }

  const DatasetPlan* Find(const Plan& plan, const std::string& dataset) {
    for (const DatasetPlan& dp : plan.datasets) {
      if (dp.dataset == dataset) return &dp;
    }
    return nullptr;
  }

  // "partition=reason" for every planned partition of `dataset`.
  std::vector<std::string> Reasons(const Plan& plan,
                                   const std::string& dataset) {
    const DatasetPlan* dp = Find(plan, dataset);
    if (dp == nullptr) return {"<not planned>"};
    EXPECT_EQ(dp->partitions.size(), dp->partition_reasons.size());
    std::vector<std::string> out;
    for (size_t i = 0; i < dp->partitions.size(); ++i) {
      out.push_back(dp->partitions[i] + "=" + dp->partition_reasons[i]);
    }
    return out;
  }

  std::vector<std::string> Partitions(const Plan& plan,
                                      const std::string& dataset) {
    const DatasetPlan* dp = Find(plan, dataset);
    return dp == nullptr ? std::vector<std::string>{"<not planned>"}
                         : dp->partitions;
  }

  BackfillRequest Request(const std::string& dataset,
                          std::vector<std::string> partitions) {
    BackfillRequest r;
    r.dataset = dataset;
    r.partitions = std::move(partitions);
    return r;
  }

  Catalog catalog_;
  CountingEngine engine_;
};

TEST_F(MappingPlannerTest, DayRollsUpIntoItsMonthAcrossMonthEnds) {
  Planner planner(&catalog_, &engine_);
  BackfillRequest r;
  r.dataset = "daily";
  r.from = "2025-01-30";
  r.to = "2025-02-02";
  auto plan = planner.MakePlan(r);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(Reasons(*plan, "daily"),
              ElementsAre("2025-01-30=requested", "2025-01-31=requested",
                          "2025-02-01=requested"));
  EXPECT_THAT(Reasons(*plan, "monthly"),
              ElementsAre("2025-01=downstream of daily via rollup",
                          "2025-02=downstream of daily via rollup"));
  // monthly_r reads 2 previous months: 2025-01 affects 01..03, 02 -> 02..04.
  EXPECT_THAT(Reasons(*plan, "monthly_r"),
              ElementsAre("2025-01=downstream of monthly via lookback 2",
                          "2025-02=downstream of monthly via lookback 2",
                          "2025-03=downstream of monthly via lookback 2",
                          "2025-04=downstream of monthly via lookback 2"));
  EXPECT_EQ(Find(*plan, "monthly")->reason, "downstream of daily");
  EXPECT_EQ(Find(*plan, "daily")->reason, "requested");
}

TEST_F(MappingPlannerTest, LeapDayBelongsToFebruary) {
  Planner planner(&catalog_, &engine_);
  BackfillRequest r = Request("daily", {"2024-02-29"});
  auto plan = planner.MakePlan(r);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(Partitions(*plan, "monthly"), ElementsAre("2024-02"));
  plan = planner.MakePlan(Request("daily", {"2024-02-28", "2024-03-01"}));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(Partitions(*plan, "monthly"), ElementsAre("2024-02", "2024-03"));
  // The 7-day window after Feb 28 of a leap year passes through Feb 29.
  plan = planner.MakePlan(Request("daily", {"2024-02-25"}));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(
      Partitions(*plan, "rolling7"),
      ElementsAre("2024-02-25", "2024-02-26", "2024-02-27", "2024-02-28",
                  "2024-02-29", "2024-03-01", "2024-03-02", "2024-03-03"));
}

TEST_F(MappingPlannerTest, HourTwentyThreeRollsUpIntoItsDayAndMonth) {
  Planner planner(&catalog_, &engine_);
  auto plan =
      planner.MakePlan(Request("hourly", {"2025-03-31T23", "2025-04-01T00"}));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(Reasons(*plan, "hour_days"),
              ElementsAre("2025-03-31=downstream of hourly via rollup",
                          "2025-04-01=downstream of hourly via rollup"));
  EXPECT_THAT(Reasons(*plan, "hour_months"),
              ElementsAre("2025-03=downstream of hourly via rollup",
                          "2025-04=downstream of hourly via rollup"));
  // A whole day of hours is one day and one month.
  BackfillRequest r;
  r.dataset = "hourly";
  r.from = "2024-12-31T00";
  r.to = "2025-01-01T00";
  plan = planner.MakePlan(r);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(Partitions(*plan, "hourly").size(), 24u);
  EXPECT_THAT(Partitions(*plan, "hour_days"), ElementsAre("2024-12-31"));
  EXPECT_THAT(Partitions(*plan, "hour_months"), ElementsAre("2024-12"));
}

TEST_F(MappingPlannerTest, LookbackCrossesMonthAndYearEnds) {
  Planner planner(&catalog_, &engine_);
  auto plan = planner.MakePlan(Request("daily", {"2024-12-30"}));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(Reasons(*plan, "rolling7"),
              ElementsAre("2024-12-30=downstream of daily via lookback 7",
                          "2024-12-31=downstream of daily via lookback 7",
                          "2025-01-01=downstream of daily via lookback 7",
                          "2025-01-02=downstream of daily via lookback 7",
                          "2025-01-03=downstream of daily via lookback 7",
                          "2025-01-04=downstream of daily via lookback 7",
                          "2025-01-05=downstream of daily via lookback 7",
                          "2025-01-06=downstream of daily via lookback 7"));
  plan = planner.MakePlan(Request("daily", {"2025-01-28"}));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(
      Partitions(*plan, "rolling7"),
      ElementsAre("2025-01-28", "2025-01-29", "2025-01-30", "2025-01-31",
                  "2025-02-01", "2025-02-02", "2025-02-03", "2025-02-04"));
  // Two requested days whose windows overlap: the union, once.
  plan = planner.MakePlan(Request("daily", {"2025-03-01", "2025-03-03"}));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(
      Partitions(*plan, "rolling7"),
      ElementsAre("2025-03-01", "2025-03-02", "2025-03-03", "2025-03-04",
                  "2025-03-05", "2025-03-06", "2025-03-07", "2025-03-08",
                  "2025-03-09", "2025-03-10"));
  // Month lookback across a year end: 2024-11 affects 2024-11 .. 2025-01.
  plan = planner.MakePlan(Request("monthly", {"2024-11"}));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(Partitions(*plan, "monthly_r"),
              ElementsAre("2024-11", "2024-12", "2025-01"));
}

TEST_F(MappingPlannerTest, SeveralPathsKeepTheFirstUpstreamsReason) {
  Planner planner(&catalog_, &engine_);
  auto plan = planner.MakePlan(Request("daily", {"2025-01-10"}));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(Reasons(*plan, "daily_copy"),
              ElementsAre("2025-01-10=downstream of daily"));
  // combined reads daily_copy and rolling7; daily_copy comes first in the
  // topological order (ties by name), so 01-10, reached by both, says
  // daily_copy; 01-11 .. 01-17 come only through rolling7.
  EXPECT_THAT(Reasons(*plan, "combined"),
              ElementsAre("2025-01-10=downstream of daily_copy",
                          "2025-01-11=downstream of rolling7",
                          "2025-01-12=downstream of rolling7",
                          "2025-01-13=downstream of rolling7",
                          "2025-01-14=downstream of rolling7",
                          "2025-01-15=downstream of rolling7",
                          "2025-01-16=downstream of rolling7",
                          "2025-01-17=downstream of rolling7"));
  EXPECT_EQ(Find(*plan, "combined")->reason, "downstream of daily_copy");
  // `all` still pulls every partition of the dependent (those its identity
  // upstream orders holds).
  EXPECT_THAT(Reasons(*plan, "snapshot"),
              ElementsAre("2025-01-01=downstream of daily via all",
                          "2025-01-02=downstream of daily via all",
                          "2025-01-03=downstream of daily via all",
                          "2025-01-04=downstream of daily via all",
                          "2025-01-05=downstream of daily via all"));
}

TEST_F(MappingPlannerTest, NoDownstreamPlansOnlyTheRequest) {
  Planner planner(&catalog_, &engine_);
  BackfillRequest r = Request("daily", {"2025-01-10"});
  r.exclude_downstream = true;
  auto plan = planner.MakePlan(r);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->datasets.size(), 1u);
  EXPECT_THAT(Reasons(*plan, "daily"), ElementsAre("2025-01-10=requested"));
}

TEST_F(MappingPlannerTest, InputsArePerUpstreamPartition) {
  Planner planner(&catalog_, &engine_);
  std::vector<InputRef> in =
      planner.InputsOf(*catalog_.Find("monthly"), "2024-02");
  ASSERT_EQ(in.size(), 29u);
  for (const InputRef& ref : in) EXPECT_EQ(ref.dataset->name, "daily");
  EXPECT_EQ(in.front().partition.value_or("?"), "2024-02-01");
  EXPECT_EQ(in[14].partition.value_or("?"), "2024-02-15");
  EXPECT_EQ(in.back().partition.value_or("?"), "2024-02-29");

  in = planner.InputsOf(*catalog_.Find("rolling7"), "2025-01-03");
  std::vector<std::string> got;
  for (const InputRef& ref : in) got.push_back(ref.partition.value_or("?"));
  EXPECT_THAT(
      got, ElementsAre("2024-12-27", "2024-12-28", "2024-12-29", "2024-12-30",
                       "2024-12-31", "2025-01-01", "2025-01-02", "2025-01-03"));

  in = planner.InputsOf(*catalog_.Find("snapshot"), "2025-01-03");
  ASSERT_EQ(in.size(), 2u);
  EXPECT_EQ(in[0].partition.value_or("?"), "2025-01-03");
  EXPECT_EQ(in[1].dataset->name, "daily");
  EXPECT_FALSE(in[1].partition.has_value());

  EXPECT_EQ(planner.InputsOf(*catalog_.Find("hour_months"), "2025-02").size(),
            28u * 24u);
}

TEST_F(MappingPlannerTest, CostSumsExactlyThePartitionsRead) {
  // daily holds 2025-01-01 .. 2025-02-28, day d of month m with m*100 + d
  // rows; a row outside any read window must not count.
  for (int d = 1; d <= 31; ++d) {
    engine_.rows["daily"][absl::StrFormat("2025-01-%02d", d)] = 100 + d;
  }
  for (int d = 1; d <= 28; ++d) {
    engine_.rows["daily"][absl::StrFormat("2025-02-%02d", d)] = 200 + d;
  }
  engine_.rows["daily"]["2024-12-31"] = 100000;
  Planner planner(&catalog_, &engine_);
  BackfillRequest r = Request("monthly", {"2025-02"});
  r.exclude_downstream = true;
  auto plan = planner.MakePlan(r);
  ASSERT_TRUE(plan.ok()) << plan.status();
  // February: 28 * 200 + (1 + ... + 28) = 5600 + 406.
  EXPECT_DOUBLE_EQ(plan->cost.backfill, 6006);
  // Full reload: the months the daily partitions fall in: 2024-12
  // (100000), 2025-01 (31 * 100 + 496 = 3596) and 2025-02.
  EXPECT_DOUBLE_EQ(plan->cost.full_reload, 100000 + 3596 + 6006);

  r = Request("rolling7", {"2025-01-03"});
  r.exclude_downstream = true;
  plan = planner.MakePlan(r);
  ASSERT_TRUE(plan.ok()) << plan.status();
  // Window 2024-12-27 .. 2025-01-03: 100000 + 101 + 102 + 103.
  EXPECT_DOUBLE_EQ(plan->cost.backfill, 100306);
}

TEST_F(MappingPlannerTest, CostOfTwoUpstreamsCountsEachOnlyWhereItHasRows) {
  // combined reads rolling7 and daily_copy (identity both). rolling7 holds
  // days 1..4 (10 * d rows), daily_copy days 3..6 (d rows); neither is in
  // the plan.
  for (int d = 1; d <= 4; ++d) {
    engine_.rows["rolling7"][absl::StrFormat("2025-01-%02d", d)] = 10 * d;
  }
  for (int d = 3; d <= 6; ++d) {
    engine_.rows["daily_copy"][absl::StrFormat("2025-01-%02d", d)] = d;
  }
  Planner planner(&catalog_, &engine_);
  BackfillRequest r = Request(
      "combined",
      {"2025-01-09", "2025-01-02", "2025-01-04", "2025-01-02", "2025-01-06"});
  r.exclude_downstream = true;
  auto plan = planner.MakePlan(r);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(Reasons(*plan, "combined"),
              ElementsAre("2025-01-02=requested", "2025-01-04=requested",
                          "2025-01-06=requested", "2025-01-09=requested"));
  // Day 2: 20 + 0; day 4: 40 + 4; day 6: 0 + 6; day 9: nothing.
  EXPECT_DOUBLE_EQ(plan->cost.backfill, 70);
  // Full reload: the days either upstream holds (1..6) and day 9:
  // (10 + 20 + 30 + 40) + (3 + 4 + 5 + 6).
  EXPECT_DOUBLE_EQ(plan->cost.full_reload, 118);
}

TEST_F(MappingPlannerTest, MapDownstreamFollowsEveryPath) {
  Planner planner(&catalog_, &engine_);
  const DatasetSpec& orders = *catalog_.Find("orders");
  const DatasetSpec& daily = *catalog_.Find("daily");
  auto out = planner.MapDownstream(orders, {"2025-01-31", "2025-02-01"},
                                   *catalog_.Find("monthly_r"));
  ASSERT_TRUE(out.ok()) << out.status();
  // orders -> daily (same days) -> monthly (01, 02) -> lookback 2.
  EXPECT_THAT(*out, ElementsAre("2025-01", "2025-02", "2025-03", "2025-04"));

  out =
      planner.MapDownstream(daily, {"2025-01-10"}, *catalog_.Find("combined"));
  ASSERT_TRUE(out.ok()) << out.status();
  // Through daily_copy (01-10) and through rolling7 (01-10 .. 01-17).
  EXPECT_THAT(*out, ElementsAre("2025-01-10", "2025-01-11", "2025-01-12",
                                "2025-01-13", "2025-01-14", "2025-01-15",
                                "2025-01-16", "2025-01-17"));

  out = planner.MapDownstream(*catalog_.Find("events"), {"2025-03-31T23"},
                              *catalog_.Find("hour_months"));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(*out, ElementsAre("2025-03"));

  out = planner.MapDownstream(daily, {"2025-01-02", "2025-01-01", "2025-01-02"},
                              daily);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(*out, ElementsAre("2025-01-01", "2025-01-02"));

  // Through `all`: every partition of the dependent.
  out =
      planner.MapDownstream(daily, {"2025-01-02"}, *catalog_.Find("snapshot"));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(*out, ElementsAre("2025-01-01", "2025-01-02", "2025-01-03",
                                "2025-01-04", "2025-01-05"));
}

TEST_F(MappingPlannerTest, MapDownstreamRefusesWhatItCannotMap) {
  Planner planner(&catalog_, &engine_, PlannerLimits{10});
  const DatasetSpec& daily = *catalog_.Find("daily");
  auto out =
      planner.MapDownstream(*catalog_.Find("monthly"), {"2025-01"}, daily);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(out.status().message()),
              HasSubstr("\"daily\" is not downstream of \"monthly\""));
  // Siblings are not downstream of each other either.
  out = planner.MapDownstream(*catalog_.Find("rolling7"), {"2025-01-01"},
                              *catalog_.Find("daily_copy"));
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);

  out = planner.MapDownstream(daily, {"2025-13-01"}, *catalog_.Find("monthly"));
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(out.status().message()), HasSubstr("2025-13-01"));

  // The bound: 2 days reach 16 rolling7 partitions > 10.
  out = planner.MapDownstream(daily, {"2025-01-01", "2025-02-01"},
                              *catalog_.Find("rolling7"));
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(out.status().message()), HasSubstr("at most 10"));
  std::vector<std::string> many;
  for (int d = 1; d <= 11; ++d)
    many.push_back(absl::StrFormat("2025-01-%02d", d));
  out = planner.MapDownstream(daily, many, daily);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace core_planner_test
}  // namespace backfill
