// The affected_by scope: parsing and the predicate's form (core/affected_by),
// and planning with it (Planner::MakePlan, Planner::MapDownstream) against
// the fake engine, whose PartitionsMatching evaluates `COLUMN OP LITERAL`
// over seeded rows. Expected partition sets are written out by hand.

#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "core/plan/affected_by.h"
#include "core/plan/planner.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/fake_engine.h"

namespace backfill {
namespace core_affected_by_test {
namespace {

using ::testing::ElementsAre;
using testing::FakeEngine;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

// ---- Parsing and the predicate's form --------------------------------------

TEST(AffectedByTest, SplitsAtTheFirstColonAndTrims) {
  auto a = ParseAffectedBy("  orders :  refund > 0  ");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->dataset, "orders");
  EXPECT_EQ(a->predicate, "refund > 0");
  EXPECT_EQ(AffectedByText(*a), "orders: refund > 0");

  auto colon = ParseAffectedBy("orders: note = 'a:b'");
  ASSERT_TRUE(colon.ok()) << colon.status();
  EXPECT_EQ(colon->dataset, "orders");
  EXPECT_EQ(colon->predicate, "note = 'a:b'");
}

TEST(AffectedByTest, RefusesMalformedTextNamingTheField) {
  for (const std::string text :
       {"orders refund > 0", ": refund > 0", "orders:", "orders:   \n "}) {
    SCOPED_TRACE(text);
    auto a = ParseAffectedBy(text);
    ASSERT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(a.status().message(), HasSubstr("affected_by"));
  }
}

TEST(AffectedByTest, AcceptsOneExpressionWhateverItsLiteralsHold) {
  for (const std::string& p : std::vector<std::string>{
           "refund > 0",
           "(a > 0 AND (b < 1 OR c = 2))",
           "note = 'a;b) OR (1'",
           "note = 'it''s'",
           "\"odd)name\" = 1",
           "[odd;name] = 1",
           "`odd(name` = 1",
           "x > 0 -- ) ; anything\n AND y < 1",
           "/* ; ) */ x > 0",
           "x > 0 -- trailing comment",
           "x\t>\n0",
       }) {
    SCOPED_TRACE(p);
    EXPECT_TRUE(CheckPredicate(p).ok()) << CheckPredicate(p);
  }
}

TEST(AffectedByTest, RefusesWhatIsNotOneExpression) {
  for (const std::string& p : std::vector<std::string>{
           "1) OR (1",
           ") OR (",
           "(x > 0",
           "x > 0)",
           "1; DROP TABLE t",
           "x > 0;",
           "note = 'open",
           "\"open = 1",
           "[open = 1",
           "`open = 1",
           "x > 0 /* open",
           "x > 0\r",
           std::string("x > 0\0", 6),
           "x\x01 > 0",
           "x > 0\x7f",
       }) {
    SCOPED_TRACE(p);
    absl::Status s = CheckPredicate(p);
    ASSERT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(s.message(), HasSubstr("affected_by: predicate \""));
  }
}

TEST(AffectedByTest, LengthLimitIsInclusive) {
  std::string p = "x > 0";
  p.append(kMaxPredicateBytes - p.size(), ' ');
  p.back() = '1';  // "x > 0 ... 1" is no expression, but its form is fine
  EXPECT_TRUE(CheckPredicate(p).ok());
  p.push_back('1');
  absl::Status s = CheckPredicate(p);
  ASSERT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("4097 bytes; at most 4096"));
}

TEST(AffectedByTest, QuotedPredicateIsCutAtACharacterBoundary) {
  std::string p(199, 'x');
  p += "\xc3\xa9\xc3\xa9";  // "éé": the cut at byte 200 falls inside one
  const std::string quoted = QuotePredicate(p);
  EXPECT_EQ(quoted, "\"" + std::string(199, 'x') + "...\"");
  EXPECT_EQ(QuotePredicate("a > 1"), "\"a > 1\"");
}

// ---- Planning ---------------------------------------------------------------

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

std::string Day(int d) { return absl::StrFormat("2025-01-%02d", d); }

class AffectedByPlanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // orders (day) and customers (unpartitioned) feed daily (identity and
    // all); daily_copy copies daily; summary reads all of daily;
    // returns (day) is read only by returns_daily.
    std::vector<DatasetSpec> specs = {
        Source("orders", Grain::kDay),
        Source("customers", Grain::kNone),
        Source("returns", Grain::kDay),
        Derived("daily", Grain::kDay,
                {{"orders", Mapping::kIdentity}, {"customers", Mapping::kAll}}),
        Derived("daily_copy", Grain::kDay, {{"daily", Mapping::kIdentity}}),
        Derived("summary", Grain::kNone, {{"daily", Mapping::kAll}}),
        Derived("returns_daily", Grain::kDay,
                {{"returns", Mapping::kIdentity}}),
    };
    auto catalog = Catalog::Build(std::move(specs), WarehouseSpec{});
    ASSERT_TRUE(catalog.ok()) << catalog.status();
    catalog_ = *std::move(catalog);
    // Ten days of orders; refunds on days 3 and 7 only (twice on day 7),
    // and on a row of no partition.
    for (int d = 1; d <= 10; ++d) {
      engine_.SetPublishedRows("orders", Day(d), 3);
      std::vector<FakeEngine::Row> rows;
      for (int i = 0; i < 3; ++i) {
        const bool refund = (d == 3 && i == 1) || (d == 7 && i != 0);
        rows.push_back({Day(d),
                        {{"refund", refund ? "2.5" : "0"},
                         {"region", i == 0 ? "EU" : "US"}}});
      }
      engine_.AddRows("orders", std::move(rows));
    }
    engine_.AddRows("orders", {{std::nullopt, {{"refund", "9"}}}});
    engine_.SetPublishedRows("customers", "", 2);
    engine_.AddRows("customers",
                    {{"", {{"region", "EU"}}}, {"", {{"region", "US"}}}});
    // daily was published for days 1..10 (one row each).
    std::vector<FakeEngine::Row> daily;
    for (int d = 1; d <= 10; ++d) {
      engine_.SetPublishedRows("daily", Day(d), 1);
      daily.push_back({Day(d), {{"v", d == 4 ? "-1" : "10"}}});
    }
    engine_.AddRows("daily", std::move(daily));
  }

  BackfillRequest Affected(const std::string& dataset,
                           const std::string& affected_by) {
    BackfillRequest r;
    r.dataset = dataset;
    r.affected_by = affected_by;
    return r;
  }

  const DatasetSpec& Spec(const std::string& name) {
    return *catalog_.Find(name);
  }

  Catalog catalog_;
  FakeEngine engine_;
};

TEST_F(AffectedByPlanTest, DaysWithRefundsAndTheirDependents) {
  Planner planner(&catalog_, &engine_);
  auto plan = planner.MakePlan(Affected("daily", "orders: refund > 0"));
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->datasets.size(), 3u);
  EXPECT_EQ(plan->datasets[0].dataset, "daily");
  EXPECT_EQ(plan->datasets[0].reason,
            "requested: affected by orders: refund > 0");
  EXPECT_THAT(plan->datasets[0].partitions, ElementsAre(Day(3), Day(7)));
  EXPECT_EQ(plan->datasets[1].dataset, "daily_copy");
  EXPECT_EQ(plan->datasets[1].reason, "downstream of daily");
  EXPECT_THAT(plan->datasets[1].partitions, ElementsAre(Day(3), Day(7)));
  EXPECT_EQ(plan->datasets[2].dataset, "summary");
  EXPECT_THAT(plan->datasets[2].partitions, ElementsAre(""));
  // 2 partitions of daily x (3 orders + 2 customers).
  EXPECT_DOUBLE_EQ(plan->datasets[0].cost.backfill, 10);
}

TEST_F(AffectedByPlanTest, ReasonShowsTheTrimmedScope) {
  Planner planner(&catalog_, &engine_);
  BackfillRequest r = Affected("daily", "  orders:refund>0 ");
  r.exclude_downstream = true;
  auto plan = planner.MakePlan(r);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->datasets.size(), 1u);
  EXPECT_EQ(plan->datasets[0].reason,
            "requested: affected by orders: refund>0");
  EXPECT_THAT(plan->datasets[0].partitions, ElementsAre(Day(3), Day(7)));
}

TEST_F(AffectedByPlanTest, TheTargetItselfAndATransitiveUpstream) {
  Planner planner(&catalog_, &engine_);
  auto own = planner.MakePlan(Affected("daily", "daily: v < 0"));
  ASSERT_TRUE(own.ok()) << own.status();
  EXPECT_THAT(own->datasets[0].partitions, ElementsAre(Day(4)));

  auto copy = planner.MakePlan(Affected("daily_copy", "orders: refund > 0"));
  ASSERT_TRUE(copy.ok()) << copy.status();
  ASSERT_EQ(copy->datasets.size(), 1u);
  EXPECT_EQ(copy->datasets[0].dataset, "daily_copy");
  EXPECT_THAT(copy->datasets[0].partitions, ElementsAre(Day(3), Day(7)));
}

TEST_F(AffectedByPlanTest, AWholeTableInputAffectsEveryPartition) {
  Planner planner(&catalog_, &engine_);
  BackfillRequest r = Affected("daily", "customers: region = 'EU'");
  r.exclude_downstream = true;
  auto plan = planner.MakePlan(r);
  ASSERT_TRUE(plan.ok()) << plan.status();
  std::vector<std::string> all;
  for (int d = 1; d <= 10; ++d) all.push_back(Day(d));
  EXPECT_EQ(plan->datasets[0].partitions, all);
}

TEST_F(AffectedByPlanTest, MapDownstreamFollowsEveryPath) {
  Planner planner(&catalog_, &engine_);
  std::vector<std::string> all;
  for (int d = 1; d <= 10; ++d) all.push_back(Day(d));

  auto same = planner.MapDownstream(Spec("orders"), {Day(5), Day(2), Day(5)},
                                    Spec("orders"));
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_THAT(*same, ElementsAre(Day(2), Day(5)));

  auto identity =
      planner.MapDownstream(Spec("orders"), {Day(5), Day(2)}, Spec("daily"));
  ASSERT_TRUE(identity.ok()) << identity.status();
  EXPECT_THAT(*identity, ElementsAre(Day(2), Day(5)));

  auto two_steps =
      planner.MapDownstream(Spec("orders"), {Day(9)}, Spec("daily_copy"));
  ASSERT_TRUE(two_steps.ok()) << two_steps.status();
  EXPECT_THAT(*two_steps, ElementsAre(Day(9)));

  // customers -> daily by `all`, then identity to daily_copy.
  auto whole =
      planner.MapDownstream(Spec("customers"), {""}, Spec("daily_copy"));
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_EQ(*whole, all);

  auto unpartitioned =
      planner.MapDownstream(Spec("orders"), {Day(1)}, Spec("summary"));
  ASSERT_TRUE(unpartitioned.ok()) << unpartitioned.status();
  EXPECT_THAT(*unpartitioned, ElementsAre(""));

  // A dataset that is not downstream is refused, not mapped to nothing.
  auto unrelated =
      planner.MapDownstream(Spec("returns"), {Day(1)}, Spec("daily"));
  EXPECT_EQ(unrelated.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(unrelated.status().message(), HasSubstr("not downstream"));

  auto upward = planner.MapDownstream(Spec("daily"), {Day(1)}, Spec("orders"));
  EXPECT_EQ(upward.status().code(), absl::StatusCode::kInvalidArgument);

  auto nothing = planner.MapDownstream(Spec("orders"), {}, Spec("daily"));
  ASSERT_TRUE(nothing.ok()) << nothing.status();
  EXPECT_THAT(*nothing, IsEmpty());
}

TEST_F(AffectedByPlanTest, AScopeOfItsOwn) {
  Planner planner(&catalog_, &engine_);
  BackfillRequest range = Affected("daily", "orders: refund > 0");
  range.from = Day(1);
  range.to = Day(5);
  BackfillRequest list = Affected("daily", "orders: refund > 0");
  list.partitions = {Day(1)};
  for (const BackfillRequest& r : {range, list}) {
    auto plan = planner.MakePlan(r);
    ASSERT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(plan.status().message(), HasSubstr("scope of its own"));
  }
  EXPECT_EQ(engine_.calls("PartitionsMatching"), 0);
}

TEST_F(AffectedByPlanTest, DatasetMustBeTheTargetOrUpstream) {
  Planner planner(&catalog_, &engine_);
  auto downstream = planner.MakePlan(Affected("daily", "daily_copy: v > 0"));
  ASSERT_EQ(downstream.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(downstream.status().message(),
              HasSubstr("dataset \"daily_copy\" is not upstream of \"daily\""));
  EXPECT_THAT(downstream.status().message(),
              HasSubstr("give \"daily\" or one of its upstreams (customers, "
                        "orders)"));

  auto unrelated = planner.MakePlan(Affected("daily", "returns: x > 0"));
  ASSERT_EQ(unrelated.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(unrelated.status().message(), HasSubstr("\"returns\""));

  auto unknown = planner.MakePlan(Affected("daily", "ordres: refund > 0"));
  ASSERT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(unknown.status().message(),
              HasSubstr("`affected_by`: unknown dataset \"ordres\""));
  EXPECT_EQ(engine_.calls("PartitionsMatching"), 0);
}

TEST_F(AffectedByPlanTest, NoMatchIsNothingToBackfill) {
  Planner planner(&catalog_, &engine_);
  auto plan = planner.MakePlan(Affected("daily", "orders: refund > 100"));
  ASSERT_EQ(plan.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(plan.status().message(),
            "no partition of orders has a row where refund > 100; nothing to "
            "backfill");
  EXPECT_THAT(plan.status().message(), Not(HasSubstr("retry")));

  // Only the row of no partition matches.
  auto junk = planner.MakePlan(Affected("daily", "orders: refund = 9"));
  EXPECT_EQ(junk.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(AffectedByPlanTest, BadPredicatesAreInvalidArgumentNamingThem) {
  Planner planner(&catalog_, &engine_);
  for (const std::string text :
       {"orders: refund >", "orders: nope > 0", "orders: 1) OR (1",
        "orders: 1; DROP TABLE orders", "orders:", "orders refund > 0"}) {
    SCOPED_TRACE(text);
    auto plan = planner.MakePlan(Affected("daily", text));
    ASSERT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument)
        << plan.status();
    EXPECT_THAT(plan.status().message(), HasSubstr("affected_by"));
  }
  auto syntax = planner.MakePlan(Affected("daily", "orders: refund >"));
  EXPECT_THAT(syntax.status().message(), HasSubstr("\"refund >\""));
}

TEST_F(AffectedByPlanTest, TooManyPartitionsIsInvalidArgument) {
  PlannerLimits limits;
  limits.max_partitions = 1;
  Planner planner(&catalog_, &engine_, limits);
  auto plan = planner.MakePlan(Affected("daily", "orders: refund > 0"));
  ASSERT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(plan.status().message(), HasSubstr("at most 1"));
}

TEST_F(AffectedByPlanTest, ExcludeDownstreamKeepsOnlyTheTarget) {
  Planner planner(&catalog_, &engine_);
  BackfillRequest r = Affected("daily", "orders: region = 'EU'");
  r.exclude_downstream = true;
  auto plan = planner.MakePlan(r);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->datasets.size(), 1u);
  std::vector<std::string> all;
  for (int d = 1; d <= 10; ++d) all.push_back(Day(d));
  EXPECT_EQ(plan->datasets[0].partitions, all);
}

}  // namespace
}  // namespace core_affected_by_test
}  // namespace backfill
