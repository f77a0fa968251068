// Time x key datasets in pipeline files (loader and catalog errors with
// FILE:LINE) and in plans (scopes and propagation through every kind of
// edge), against hand-computed partition sets.

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "core/model/diff.h"
#include "core/model/pipeline_loader.h"
#include "core/plan/planner.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/fake_engine.h"

namespace backfill {
namespace core_time_key_pipeline_test {
namespace {

using ::backfill::testing::FakeEngine;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// orders (day) -> revenue_by_region (day x region) -> daily_total (day)
//                                                  -> monthly_by_region
//                                                     (month x region,
//                                                     rollup)
//                                                  -> rolling_by_region
//                                                     (day x region,
//                                                     lookback 2)
constexpr char kPipeline[] = R"yaml(
datasets:
  - name: orders
    kind: source
    table: raw_orders
    partition: {column: order_date, grain: day}
  - name: revenue_by_region
    kind: derived
    partition: {column: ds, grain: day, key_column: region, keys: [eu, us, apac]}
    upstream:
      - {dataset: orders, mapping: identity}
    transform: |
      SELECT order_date AS ds, region, SUM(amount) AS revenue FROM raw_orders
      WHERE order_date >= :partition_start AND order_date < :partition_end
        AND region = :partition_key
      GROUP BY 1, 2
    contract:
      columns: {ds: TEXT, region: TEXT, revenue: REAL}
  - name: daily_total
    kind: derived
    partition: {column: ds, grain: day}
    upstream:
      - {dataset: revenue_by_region, mapping: identity}
    transform: |
      SELECT ds, SUM(revenue) AS revenue FROM revenue_by_region
      WHERE ds = :partition GROUP BY 1
    contract:
      columns: {ds: TEXT, revenue: REAL}
  - name: monthly_by_region
    kind: derived
    partition: {column: month, grain: month, key_column: region, keys: [eu, us]}
    upstream:
      - {dataset: revenue_by_region, mapping: rollup}
    transform: |
      SELECT substr(ds, 1, 7) AS month, region, SUM(revenue) AS revenue
      FROM revenue_by_region
      WHERE ds >= :partition_start AND ds < :partition_end
        AND region = :partition_key
      GROUP BY 1, 2
    contract:
      columns: {month: TEXT, region: TEXT, revenue: REAL}
  - name: rolling_by_region
    kind: derived
    partition: {column: ds, grain: day, key_column: region, keys: [us]}
    upstream:
      - {dataset: revenue_by_region, mapping: {lookback: 2}}
    transform: |
      SELECT :partition_end AS ds, region, SUM(revenue) AS revenue
      FROM revenue_by_region
      WHERE ds >= :window_start AND ds < :partition_end
        AND region = :partition_key
      GROUP BY 2
    contract:
      columns: {ds: TEXT, region: TEXT, revenue: REAL}
)yaml";

std::string LoadError(const std::string& text) {
  absl::StatusOr<Catalog> c = LoadPipelineTexts({{"pipe.yaml", text}});
  EXPECT_FALSE(c.ok()) << text;
  if (c.ok()) return "";
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(c.status().message());
}

// kPipeline with `from` replaced by `to` (which must be there once).
std::string With(const std::string& from, const std::string& to) {
  std::string text = kPipeline;
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  EXPECT_EQ(text.find(from, at + 1), std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

TEST(TimeKeyLoaderTest, LoadsTheLayout) {
  absl::StatusOr<Catalog> c = LoadPipelineTexts({{"pipe.yaml", kPipeline}});
  ASSERT_TRUE(c.ok()) << c.status();
  const DatasetSpec* d = c->Find("revenue_by_region");
  ASSERT_NE(d, nullptr);
  EXPECT_TRUE(d->two_dimensional());
  EXPECT_EQ(d->grain(), Grain::kDay);
  EXPECT_EQ(d->partition->key_column, "region");
  EXPECT_THAT(d->partition->keys, ElementsAre("eu", "us", "apac"));
  EXPECT_THAT(d->layout().keys, ElementsAre("eu", "us", "apac"));
  EXPECT_FALSE(c->Find("daily_total")->two_dimensional());
}

TEST(TimeKeyLoaderTest, MisuseIsALoadErrorWithFileAndLine) {
  struct Case {
    std::string from, to, says;
  };
  const std::string p2 =
      "partition: {column: ds, grain: day, key_column: region, keys: [eu, us, "
      "apac]}";
  const std::vector<Case> cases = {
      {p2,
       "partition: {column: ds, grain: key, key_column: region, keys: [eu]}",
       "needs a time grain"},
      {p2, "partition: {column: ds, grain: day, key_column: region}",
       "needs a non-empty `keys:` list"},
      {p2, "partition: {column: ds, grain: day, keys: [eu, us]}",
       "only allowed with grain key, or with a time grain and a "
       "`key_column:`"},
      {p2, "partition: {column: ds, grain: day, key_column: ds, keys: [eu]}",
       "is the time column too"},
      {p2,
       "partition: {column: ds, grain: day, key_column: country, keys: "
       "[eu]}",
       "key_column \"country\" is not a contract column"},
      {p2,
       "partition: {column: ds, grain: day, key_column: region, keys: "
       "[eu, \"a|b\"]}",
       "contains '|'"},
      {p2,
       "partition: {column: ds, grain: day, key_column: region, keys: "
       "[eu, eu]}",
       "\"eu\" is listed twice"},
      {p2,
       "partition: {column: ds, grain: day, key_column: region, keys: "
       "[eu, \"\"]}",
       "not a key"},
      {p2,
       "partition: {column: ds, grain: day, key_column: \"1x\", keys: "
       "[eu]}",
       "must be an identifier"},
      {p2,
       "partition: {column: ds, grain: day, key_column: _bf_r, keys: "
       "[eu]}",
       "_bf_"},
      // The dependent's keys must be among the upstream's.
      {"keys: [eu, us]}", "keys: [eu, latam]}",
       "key(s) latam of monthly_by_region are not keys of revenue_by_region"},
      // A time x key dataset maps to no key grain.
      {"partition: {column: ds, grain: day}\n    upstream:\n      - "
       "{dataset: revenue_by_region, mapping: identity}",
       "partition: {column: ds, grain: key, keys: [eu]}\n    upstream:\n      "
       "- {dataset: revenue_by_region, mapping: identity}",
       "needs the same grain"},
  };
  for (const Case& c : cases) {
    const std::string message = LoadError(With(c.from, c.to));
    EXPECT_THAT(message, HasSubstr(c.says)) << c.to;
    EXPECT_THAT(message, HasSubstr("pipe.yaml:")) << c.to;
  }
}

TEST(TimeKeyLoaderTest, PartitionKeyIsBoundOnlyForTimeKeyDatasets) {
  const std::string message = LoadError(
      With("WHERE ds = :partition GROUP BY 1",
           "WHERE ds = :partition AND :partition_key = 'eu' GROUP BY 1"));
  EXPECT_THAT(message, HasSubstr(":partition_key"));
  EXPECT_THAT(message, HasSubstr("time x key"));
  EXPECT_THAT(message, HasSubstr("pipe.yaml:"));
}

TEST(TimeKeyDiffTest, AnIntegerKeyColumnIsNoMeasure) {
  absl::StatusOr<Catalog> c = LoadPipelineTexts({{"pipe.yaml", R"yaml(
datasets:
  - name: sales
    kind: derived
    partition: {column: ds, grain: day, key_column: store, keys: ["1", "2"]}
    transform: "SELECT :partition_start AS ds, 1 AS store, 2.5 AS revenue"
    contract: {columns: {ds: TEXT, store: INTEGER, revenue: REAL}}
)yaml"}});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_THAT(MeasureColumns(*c->Find("sales")), ElementsAre("revenue"));
}

// ------------------------------------------------------------------ plans --

class TimeKeyPlannerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<Catalog> c = LoadPipelineTexts({{"pipe.yaml", kPipeline}});
    ASSERT_TRUE(c.ok()) << c.status();
    catalog_ = *std::move(c);
    for (const char* day : {"2025-02-27", "2025-02-28", "2025-03-01",
                            "2025-03-02", "2025-03-03"}) {
      engine_.SetPublishedRows("orders", day, 10);
    }
    planner_ = std::make_unique<Planner>(&catalog_, &engine_);
  }

  // Partitions per dataset of a plan.
  std::map<std::string, std::vector<std::string>> Plan(
      const BackfillRequest& r) {
    absl::StatusOr<backfill::Plan> plan = planner_->MakePlan(r);
    EXPECT_TRUE(plan.ok()) << plan.status();
    std::map<std::string, std::vector<std::string>> out;
    if (!plan.ok()) return out;
    for (const DatasetPlan& dp : plan->datasets) {
      out[dp.dataset] = dp.partitions;
      EXPECT_EQ(dp.partition_reasons.size(), dp.partitions.size());
    }
    return out;
  }

  absl::Status PlanError(const BackfillRequest& r) {
    return planner_->MakePlan(r).status();
  }

  Catalog catalog_;
  FakeEngine engine_;
  std::unique_ptr<Planner> planner_;
};

TEST_F(TimeKeyPlannerTest, OnePartitionReachesItsDependentsOnly) {
  BackfillRequest r;
  r.dataset = "revenue_by_region";
  r.partitions = {"2025-03-01|us"};
  auto plan = Plan(r);
  EXPECT_THAT(plan["revenue_by_region"], ElementsAre("2025-03-01|us"));
  EXPECT_THAT(plan["daily_total"], ElementsAre("2025-03-01"));
  EXPECT_THAT(plan["monthly_by_region"], ElementsAre("2025-03|us"));
  EXPECT_THAT(plan["rolling_by_region"],
              ElementsAre("2025-03-01|us", "2025-03-02|us", "2025-03-03|us"));
  EXPECT_EQ(plan.size(), 4u);
}

TEST_F(TimeKeyPlannerTest, AKeyTheDependentsDoNotDeclareStopsThere) {
  BackfillRequest r;
  r.dataset = "revenue_by_region";
  r.from = "2025-02-28|apac";
  r.to = "2025-03-02|apac";
  auto plan = Plan(r);
  EXPECT_THAT(plan["revenue_by_region"],
              ElementsAre("2025-02-28|apac", "2025-03-01|apac"));
  EXPECT_THAT(plan["daily_total"], ElementsAre("2025-02-28", "2025-03-01"));
  EXPECT_EQ(plan.count("monthly_by_region"), 0u);
  EXPECT_EQ(plan.count("rolling_by_region"), 0u);
}

TEST_F(TimeKeyPlannerTest, ATimeRangeIsEveryKeyAndTheTimeUpstreamFansOut) {
  BackfillRequest r;
  r.dataset = "revenue_by_region";
  r.from = "2025-03-01";
  r.to = "2025-03-02";
  r.exclude_downstream = true;
  EXPECT_THAT(Plan(r)["revenue_by_region"],
              ElementsAre("2025-03-01|apac", "2025-03-01|eu", "2025-03-01|us"));

  // affected_by on the time upstream: every key of the day.
  engine_.AddRows("orders", {{"2025-03-02", {{"amount", "-5"}}},
                             {"2025-03-03", {{"amount", "5"}}}});
  BackfillRequest a;
  a.dataset = "monthly_by_region";
  a.affected_by = "orders: amount < 0";
  EXPECT_THAT(Plan(a)["monthly_by_region"],
              ElementsAre("2025-03|eu", "2025-03|us"));
}

TEST_F(TimeKeyPlannerTest, BadScopesAreInvalidAndNameTheFormat) {
  BackfillRequest r;
  r.dataset = "revenue_by_region";
  r.partitions = {"2025-03-01"};
  absl::Status s = PlanError(r);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("YYYY-MM-DD|KEY"));
  r.partitions = {"2025-03-01|zz"};
  EXPECT_THAT(PlanError(r).message(), HasSubstr("not a declared key"));
  r.partitions.clear();
  r.from = "2025-03-01|eu";
  r.to = "2025-03-03|us";
  EXPECT_THAT(PlanError(r).message(), HasSubstr("two keys"));
  r.to = "2025-03-03";
  EXPECT_THAT(PlanError(r).message(), HasSubstr("a key at one end only"));
}

TEST_F(TimeKeyPlannerTest, InputsFollowTheEdges) {
  const DatasetSpec& by_region = *catalog_.Find("revenue_by_region");
  std::vector<InputRef> in = planner_->InputsOf(by_region, "2025-03-01|eu");
  ASSERT_EQ(in.size(), 1u);
  EXPECT_EQ(in[0].dataset->name, "orders");
  EXPECT_EQ(*in[0].partition, "2025-03-01");
  in = planner_->InputsOf(*catalog_.Find("daily_total"), "2025-03-01");
  std::vector<std::string> read;
  for (const InputRef& i : in) read.push_back(*i.partition);
  EXPECT_THAT(read,
              ElementsAre("2025-03-01|apac", "2025-03-01|eu", "2025-03-01|us"));
}

TEST_F(TimeKeyPlannerTest, MapDownstreamAcrossShapes) {
  absl::StatusOr<std::vector<std::string>> m =
      planner_->MapDownstream(*catalog_.Find("orders"), {"2025-03-31"},
                              *catalog_.Find("monthly_by_region"));
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_THAT(*m, ElementsAre("2025-03|eu", "2025-03|us"));
}

}  // namespace
}  // namespace core_time_key_pipeline_test
}  // namespace backfill
