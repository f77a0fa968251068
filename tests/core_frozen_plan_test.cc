// Frozen rules in plans (core/plan/frozen_filter.h through Planner): a
// frozen partition is left out and listed with its rule, nothing
// downstream is planned because of it, a dependent's own rule applies to
// it, a request that is all frozen is refused naming the rules, and an
// override keeps the partitions, marked. Expectations are written from
// the partition texts alone.

#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/civil_time.h"
#include "absl/time/time.h"
#include "core/base/clock.h"
#include "core/base/error_details.h"
#include "core/model/pipeline_loader.h"
#include "core/plan/planner.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/fake_engine.h"

namespace backfill {
namespace core_frozen_plan_test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// orders -> daily (frozen before 2025-01-01) -> monthly (rollup, no rule)
//                                            -> recent (identity, frozen
//                                               older than 10 days)
constexpr char kPipeline[] = R"yaml(datasets:
  - name: orders
    kind: source
    table: raw_orders
    partition: {column: day, grain: day}
  - name: daily
    kind: derived
    partition: {column: day, grain: day}
    upstream: [{dataset: orders, mapping: identity}]
    transform: "SELECT day, 1 AS n FROM raw_orders WHERE day = :partition"
    contract: {columns: {day: TEXT, n: INTEGER}}
    frozen: {before: 2025-01-01}
  - name: monthly
    kind: derived
    partition: {column: month, grain: month}
    upstream: [{dataset: daily, mapping: rollup}]
    transform: "SELECT substr(day, 1, 7) AS month, SUM(n) AS n FROM daily WHERE day >= :partition_start AND day < :partition_end GROUP BY 1"
    contract: {columns: {month: TEXT, n: INTEGER}}
  - name: recent
    kind: derived
    partition: {column: day, grain: day}
    upstream: [{dataset: daily, mapping: identity}]
    transform: "SELECT day, n FROM daily WHERE day = :partition"
    contract: {columns: {day: TEXT, n: INTEGER}}
    frozen:
      older_than: 10d
)yaml";

class FrozenPlanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto catalog = LoadPipelineTexts({{"p.yaml", kPipeline}});
    ASSERT_TRUE(catalog.ok()) << catalog.status();
    catalog_ = *std::move(catalog);
  }

  absl::StatusOr<Plan> PlanRange(const std::string& from, const std::string& to,
                                 bool override_frozen = false,
                                 bool exclude_downstream = false) {
    BackfillRequest r;
    r.dataset = "daily";
    r.from = from;
    r.to = to;
    r.override_frozen = override_frozen;
    r.exclude_downstream = exclude_downstream;
    Planner planner(&catalog_, &engine_, {}, nullptr, &clock_);
    return planner.MakePlan(r);
  }

  static std::vector<std::string> PartitionsOf(const Plan& plan,
                                               const std::string& dataset) {
    for (const DatasetPlan& dp : plan.datasets) {
      if (dp.dataset == dataset) return dp.partitions;
    }
    return {};
  }
  static const FrozenPartitions* FrozenOf(const Plan& plan,
                                          const std::string& dataset) {
    for (const FrozenPartitions& f : plan.frozen) {
      if (f.dataset == dataset) return &f;
    }
    return nullptr;
  }

  Catalog catalog_;
  testing::FakeEngine engine_;
  // 2025-01-12 00:00 UTC: `recent` is frozen before 2025-01-02.
  ManualClock clock_{
      absl::FromCivil(absl::CivilDay(2025, 1, 12), absl::UTCTimeZone())};
};

TEST_F(FrozenPlanTest, FrozenPartitionsAreLeftOutWithTheirRule) {
  auto plan = PlanRange("2024-12-30", "2025-01-04");
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(PartitionsOf(*plan, "daily"),
              ElementsAre("2025-01-01", "2025-01-02", "2025-01-03"));
  // December is not planned: only its frozen days would have changed it.
  EXPECT_THAT(PartitionsOf(*plan, "monthly"), ElementsAre("2025-01"));
  // recent's own rule: older than 10 days at 2025-01-12.
  EXPECT_THAT(PartitionsOf(*plan, "recent"),
              ElementsAre("2025-01-02", "2025-01-03"));
  ASSERT_EQ(plan->frozen.size(), 2u);
  const FrozenPartitions* daily = FrozenOf(*plan, "daily");
  ASSERT_NE(daily, nullptr);
  EXPECT_EQ(daily->rule, "frozen.before 2025-01-01");
  EXPECT_THAT(daily->partitions, ElementsAre("2024-12-30", "2024-12-31"));
  EXPECT_FALSE(daily->overridden);
  const FrozenPartitions* recent = FrozenOf(*plan, "recent");
  ASSERT_NE(recent, nullptr);
  EXPECT_EQ(recent->rule, "frozen.older_than 10d");
  EXPECT_THAT(recent->partitions, ElementsAre("2025-01-01"));
  // The clock moves on: a day later 2025-01-02 of recent is frozen too.
  clock_.Advance(absl::Hours(24));
  auto later = PlanRange("2024-12-30", "2025-01-04");
  ASSERT_TRUE(later.ok()) << later.status();
  EXPECT_THAT(PartitionsOf(*later, "recent"), ElementsAre("2025-01-03"));
}

TEST_F(FrozenPlanTest, ARequestThatIsAllFrozenIsRefusedNamingTheRule) {
  for (bool exclude_downstream : {false, true}) {
    auto plan =
        PlanRange("2024-12-01", "2024-12-08", false, exclude_downstream);
    ASSERT_EQ(plan.status().code(), absl::StatusCode::kFailedPrecondition)
        << plan.status();
    EXPECT_EQ(std::string(plan.status().message()),
              "every partition of the request is frozen: daily 2024-12-01, "
              "2024-12-02, 2024-12-03, 2024-12-04, 2024-12-05 and 2 more "
              "(frozen.before 2025-01-01, at p.yaml:12); nothing is planned "
              "(an approver may submit with --override-frozen and a "
              "--reason)");
    EXPECT_EQ(DetailsOf(plan.status()).reason, "PARTITIONS_FROZEN");
  }
}

TEST_F(FrozenPlanTest, AnOverrideKeepsFrozenPartitionsMarked) {
  auto plan = PlanRange("2024-12-31", "2025-01-02", /*override_frozen=*/true);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_FALSE(plan->datasets.empty());
  const DatasetPlan& daily = plan->datasets[0];
  EXPECT_THAT(daily.partitions, ElementsAre("2024-12-31", "2025-01-01"));
  EXPECT_THAT(daily.partition_reasons,
              ElementsAre("requested; frozen by frozen.before 2025-01-01, "
                          "overridden",
                          "requested"));
  EXPECT_THAT(PartitionsOf(*plan, "monthly"),
              ElementsAre("2024-12", "2025-01"));
  EXPECT_THAT(PartitionsOf(*plan, "recent"),
              ElementsAre("2024-12-31", "2025-01-01"));
  for (const FrozenPartitions& f : plan->frozen) EXPECT_TRUE(f.overridden);
  EXPECT_EQ(FrozenOf(*plan, "recent")->partitions,
            std::vector<std::string>({"2024-12-31", "2025-01-01"}));
}

TEST_F(FrozenPlanTest, GeneratedRangesSplitAtTheRulesAsTheirTextSays) {
  std::mt19937 rng(20261207);
  const absl::CivilDay base(2024, 11, 20);
  for (int i = 0; i < 300; ++i) {
    const absl::CivilDay from = base + static_cast<int>(rng() % 70);
    const absl::CivilDay to = from + 1 + static_cast<int>(rng() % 40);
    const bool exclude = rng() % 4 == 0;
    auto plan = PlanRange(absl::FormatCivilTime(from),
                          absl::FormatCivilTime(to), false, exclude);
    // Expected, from the texts: daily keeps days >= "2025-01-01"; monthly
    // the months of those; recent those >= "2025-01-02".
    std::vector<std::string> daily, frozen_daily, recent, frozen_recent;
    std::set<std::string> months;
    for (absl::CivilDay d = from; d < to; ++d) {
      const std::string day = absl::FormatCivilTime(d);
      if (day < "2025-01-01") {
        frozen_daily.push_back(day);
        continue;
      }
      daily.push_back(day);
      months.insert(day.substr(0, 7));
      (day < "2025-01-02" ? frozen_recent : recent).push_back(day);
    }
    SCOPED_TRACE(absl::StrCat(absl::FormatCivilTime(from), " .. ",
                              absl::FormatCivilTime(to)));
    if (daily.empty()) {
      EXPECT_EQ(plan.status().code(), absl::StatusCode::kFailedPrecondition);
      continue;
    }
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_EQ(PartitionsOf(*plan, "daily"), daily);
    const FrozenPartitions* fd = FrozenOf(*plan, "daily");
    EXPECT_EQ(fd ? fd->partitions : std::vector<std::string>{}, frozen_daily);
    if (exclude) {
      EXPECT_THAT(PartitionsOf(*plan, "monthly"), IsEmpty());
      continue;
    }
    EXPECT_EQ(PartitionsOf(*plan, "monthly"),
              std::vector<std::string>(months.begin(), months.end()));
    EXPECT_EQ(PartitionsOf(*plan, "recent"), recent);
    const FrozenPartitions* fr = FrozenOf(*plan, "recent");
    EXPECT_EQ(fr ? fr->partitions : std::vector<std::string>{}, frozen_recent);
  }
}

}  // namespace
}  // namespace core_frozen_plan_test
}  // namespace backfill
