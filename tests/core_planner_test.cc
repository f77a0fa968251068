// Planner: scope resolution, downstream propagation and cost, against a
// fake engine that only answers row counts.

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "core/planner.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace backfill {
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
  absl::StatusOr<QueryShape> DescribeQuery(
      const std::string&, const std::vector<const DatasetSpec*>&,
      const DatasetSpec*) override {
    return absl::UnimplementedError("planner does not check transforms");
  }
  absl::StatusOr<std::optional<std::vector<ColumnSpec>>> DescribeTable(
      const DatasetSpec&) override {
    return absl::UnimplementedError("planner does not check transforms");
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
      {half, "both --from and --to"},
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

}  // namespace
}  // namespace backfill
