// Entity keys (`entity_key:` on a dataset, `keys` on a request): the YAML
// rules with FILE:LINE errors, the request's validation and normalization,
// the planner putting the key filter on the target only, the idempotency
// fingerprint, and a submit of keys being refused while changing nothing.

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/base/clock.h"
#include "core/base/error_details.h"
#include "core/model/entity_keys.h"
#include "core/model/pipeline_loader.h"
#include "core/plan/planner.h"
#include "core/run/admission.h"
#include "core/run/backfill_manager.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/fake_engine.h"
#include "tests/testing/memory_state_store.h"

namespace backfill {
namespace core_entity_keys_test {
namespace {

using ::backfill::testing::FakeEngine;
using ::backfill::testing::InMemoryStateStore;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// Line numbers matter: errors are checked against them.
constexpr char kPipeline[] = R"yaml(datasets:
  - name: orders
    kind: source
    table: raw_orders
    partition: {column: order_date, grain: day}
  - name: customer_revenue
    kind: derived
    table: customer_revenue
    partition: {column: ds, grain: day}
    upstream: [{dataset: orders, mapping: identity}]
    transform: "SELECT :partition AS ds, 'c1' AS customer_id, 1.0 AS revenue"
    contract: {columns: {ds: TEXT, customer_id: TEXT, revenue: REAL}}
    entity_key: customer_id
  - name: daily_total
    kind: derived
    table: daily_total
    partition: {column: ds, grain: day}
    upstream: [{dataset: customer_revenue, mapping: identity}]
    transform: "SELECT :partition AS ds, 1.0 AS revenue"
    contract: {columns: {ds: TEXT, revenue: REAL}}
)yaml";

Catalog Load() {
  auto catalog = LoadPipelineTexts({{"keys.yaml", kPipeline}});
  EXPECT_TRUE(catalog.ok()) << catalog.status();
  return catalog.ok() ? *std::move(catalog) : Catalog();
}

TEST(EntityKeySpecTest, LoadsAndIsShownOnTheDataset) {
  Catalog catalog = Load();
  ASSERT_NE(catalog.Find("customer_revenue"), nullptr);
  EXPECT_EQ(catalog.Find("customer_revenue")->entity_key, "customer_id");
  EXPECT_EQ(catalog.Find("daily_total")->entity_key, "");
  EXPECT_EQ(catalog.Find("orders")->entity_key, "");
}

TEST(EntityKeySpecTest, RefusesWithFileAndLine) {
  std::string text = kPipeline;
  auto with = [&](const std::string& from, const std::string& to) {
    std::string t = text;
    t.replace(t.find(from), from.size(), to);
    return LoadPipelineTexts({{"keys.yaml", t}});
  };
  // Not a contract column (line 13 holds entity_key).
  auto missing = with("entity_key: customer_id", "entity_key: customer");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(missing.status().message(), HasSubstr("keys.yaml:13"));
  EXPECT_THAT(missing.status().message(),
              HasSubstr("\"customer\", which is not a contract column; "
                        "contract columns: ds, customer_id, revenue"));
  // The partition column.
  auto partition = with("entity_key: customer_id", "entity_key: ds");
  EXPECT_EQ(partition.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(partition.status().message(), HasSubstr("keys.yaml:13"));
  EXPECT_THAT(partition.status().message(), HasSubstr("the partition column"));
  // The key column of a time x key partition.
  text.replace(text.find("partition: {column: ds, grain: day}"),
               std::string("partition: {column: ds, grain: day}").size(),
               "partition: {column: ds, grain: day, key_column: customer_id, "
               "keys: [c1, c2]}");
  auto key_column = with("entity_key: customer_id", "entity_key: customer_id");
  EXPECT_EQ(key_column.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(key_column.status().message(), HasSubstr("keys.yaml:13"));
  EXPECT_THAT(key_column.status().message(),
              HasSubstr("the partition's key column"));
  text = kPipeline;
  // A list.
  auto list = with("entity_key: customer_id", "entity_key: [customer_id]");
  EXPECT_EQ(list.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(list.status().message(), HasSubstr("entity_key"));
  // On a source (line 6 is after the source's last key: line 5).
  auto source = with("    partition: {column: order_date, grain: day}\n",
                     "    partition: {column: order_date, grain: day}\n"
                     "    entity_key: order_date\n");
  EXPECT_EQ(source.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(source.status().message(), HasSubstr("keys.yaml:6"));
  EXPECT_THAT(source.status().message(),
              HasSubstr("only allowed on derived datasets"));
}

TEST(NormalizeEntityKeysTest, SortsAndRemovesDuplicates) {
  Catalog catalog = Load();
  const DatasetSpec& d = *catalog.Find("customer_revenue");
  auto keys = NormalizeEntityKeys(d, {"c3", "c1", "c3", "C1", "10", "9"});
  ASSERT_TRUE(keys.ok()) << keys.status();
  EXPECT_THAT(*keys, ElementsAre("10", "9", "C1", "c1", "c3"));
  // Exactly at the limits.
  std::vector<std::string> many;
  for (size_t i = 0; i < kMaxEntityKeys; ++i) many.push_back(absl::StrCat(i));
  many.push_back("0");  // a duplicate does not count
  auto at_limit = NormalizeEntityKeys(d, many);
  ASSERT_TRUE(at_limit.ok()) << at_limit.status();
  EXPECT_EQ(at_limit->size(), kMaxEntityKeys);
  EXPECT_TRUE(
      NormalizeEntityKeys(d, {std::string(kMaxEntityKeyBytes, 'k')}).ok());
  // UTF-8 text is fine.
  EXPECT_TRUE(NormalizeEntityKeys(d, {"Zürich", "東京"}).ok());
}

TEST(NormalizeEntityKeysTest, RefusesBadKeysNamingTheField) {
  Catalog catalog = Load();
  const DatasetSpec& d = *catalog.Find("customer_revenue");
  auto refused = [&](const std::vector<std::string>& keys) {
    auto r = NormalizeEntityKeys(d, keys);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(r.status().message(), HasSubstr("`keys`:"));
    const ErrorDetails details = DetailsOf(r.status());
    EXPECT_FALSE(details.reason.empty());
    EXPECT_EQ(details.field_violations.size(), 1u);
    return std::string(r.status().message());
  };
  EXPECT_THAT(refused({}), HasSubstr("no key given"));
  EXPECT_THAT(refused({"c1", ""}), HasSubstr("key 2 is empty"));
  EXPECT_THAT(refused({std::string(kMaxEntityKeyBytes + 1, 'k')}),
              HasSubstr("257 bytes; at most 256"));
  EXPECT_THAT(refused({"a\nb"}), HasSubstr("control character (byte 10)"));
  EXPECT_THAT(refused({"a\tb"}), HasSubstr("control character"));
  EXPECT_THAT(refused({std::string("a\0b", 3)}),
              HasSubstr("control character (byte 0)"));
  EXPECT_THAT(refused({"a\x7f"}), HasSubstr("byte 127"));
  std::vector<std::string> many;
  for (size_t i = 0; i <= kMaxEntityKeys; ++i) many.push_back(absl::StrCat(i));
  EXPECT_THAT(refused(many), HasSubstr("10001 distinct keys; at most 10000"));
  // A dataset without entity_key, named.
  auto none = NormalizeEntityKeys(*catalog.Find("daily_total"), {"c1"});
  EXPECT_EQ(none.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(none.status().message(),
              HasSubstr("dataset \"daily_total\" declares no entity_key"));
}

TEST(DescribeEntityKeysTest, FirstFewAndACount) {
  EXPECT_EQ(DescribeEntityKeys({"a"}), "a");
  EXPECT_EQ(DescribeEntityKeys({"a", "b", "c"}), "a, b, c");
  EXPECT_EQ(DescribeEntityKeys({"a", "b", "c", "d", "e"}),
            "a, b, c and 2 more");
}

class EntityKeysPlanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    catalog_ = Load();
    for (int d = 1; d <= 5; ++d) {
      engine_.SetPublishedRows("orders", absl::StrFormat("2025-01-%02d", d),
                               10);
    }
  }
  BackfillRequest Request(std::vector<std::string> keys) {
    BackfillRequest r;
    r.dataset = "customer_revenue";
    r.from = "2025-01-02";
    r.to = "2025-01-04";
    r.reason = "fix two customers";
    r.keys = std::move(keys);
    return r;
  }
  Catalog catalog_;
  FakeEngine engine_;
  InMemoryStateStore store_;
};

TEST_F(EntityKeysPlanTest, KeysFilterTheTargetOnlyDependentsByPartition) {
  Planner planner(&catalog_, &engine_);
  auto plan = planner.MakePlan(Request({"c2", "c1", "c2"}));
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->datasets.size(), 2u);
  EXPECT_EQ(plan->datasets[0].dataset, "customer_revenue");
  EXPECT_THAT(plan->datasets[0].partitions,
              ElementsAre("2025-01-02", "2025-01-03"));
  EXPECT_THAT(plan->datasets[0].keys, ElementsAre("c1", "c2"));
  EXPECT_EQ(plan->datasets[1].dataset, "daily_total");
  EXPECT_THAT(plan->datasets[1].partitions,
              ElementsAre("2025-01-02", "2025-01-03"));
  EXPECT_THAT(plan->datasets[1].keys, IsEmpty());

  Scope scope = ScopeOf(*plan);
  ASSERT_NE(scope.KeysOf("customer_revenue"), nullptr);
  EXPECT_THAT(*scope.KeysOf("customer_revenue"), ElementsAre("c1", "c2"));
  EXPECT_EQ(scope.KeysOf("daily_total"), nullptr);

  // Without keys: no filter anywhere.
  auto whole = planner.MakePlan(Request({}));
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_THAT(whole->datasets[0].keys, IsEmpty());
  EXPECT_FALSE(ScopeOf(*whole).HasKeyFilter());
}

TEST_F(EntityKeysPlanTest, KeysOnADatasetWithoutEntityKeyAreRefused) {
  Planner planner(&catalog_, &engine_);
  BackfillRequest r = Request({"c1"});
  r.dataset = "daily_total";
  auto plan = planner.MakePlan(r);
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(plan.status().message(), HasSubstr("\"daily_total\""));
  // Keys still need a partition scope on a partitioned dataset.
  BackfillRequest no_scope = Request({"c1"});
  no_scope.from.clear();
  no_scope.to.clear();
  auto unscoped = planner.MakePlan(no_scope);
  EXPECT_EQ(unscoped.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(EntityKeysPlanTest, FingerprintIgnoresKeyOrderButNotKeys) {
  BackfillRequest a = Request({"c1", "c2"});
  BackfillRequest b = Request({"c2", "c1", "c1"});
  BackfillRequest c = Request({"c1", "c3"});
  BackfillRequest none = Request({});
  EXPECT_EQ(RequestFingerprint(a), RequestFingerprint(b));
  EXPECT_NE(RequestFingerprint(a), RequestFingerprint(c));
  EXPECT_NE(RequestFingerprint(a), RequestFingerprint(none));
  // Keys are not a partition list: {"c1"} as keys differs from no keys
  // with partitions c1.
  BackfillRequest as_partitions = Request({});
  as_partitions.partitions = {"c1"};
  EXPECT_NE(RequestFingerprint(Request({"c1"})),
            RequestFingerprint(as_partitions));
}

TEST_F(EntityKeysPlanTest, ASubmittedKeyedJobRunsWithItsKeysOnTheTargetOnly) {
  ManualClock clock(absl::FromUnixSeconds(1700000000));
  ManagerOptions options;
  options.workers = 1;
  BackfillManager manager(&catalog_, &store_, &engine_, &clock, nullptr,
                          options);
  ASSERT_TRUE(manager.Start().ok());
  SubmitOptions submit;
  submit.idempotency_key = "k-1";
  auto job = manager.Submit(Request({"c2", "c1", "c2"}), submit);
  ASSERT_TRUE(job.ok()) << job.status();
  // Stored normalized, read back by a fresh load.
  auto stored = store_.GetJob(job->job.id);
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_THAT(stored->request.keys, ElementsAre("c1", "c2"));
  Job done;
  for (int i = 0; i < 2000; ++i) {
    auto now = manager.GetJob(job->job.id);
    ASSERT_TRUE(now.ok()) << now.status();
    done = *now;
    if (IsTerminal(done.state)) break;
    absl::SleepFor(absl::Milliseconds(5));
  }
  ASSERT_EQ(done.state, JobState::kSucceeded) << done.message;
  // The engine was given the keys for the target, and none for its
  // dependents, which are recomputed by partition.
  EXPECT_THAT(engine_.PreparedKeys(job->job.id, "customer_revenue"),
              ElementsAre("c1", "c2"));
  for (const DatasetPlan& dp : done.plan.datasets) {
    if (dp.dataset == "customer_revenue") continue;
    EXPECT_THAT(engine_.PreparedKeys(job->job.id, dp.dataset), IsEmpty())
        << dp.dataset;
  }
  manager.Shutdown();
}

}  // namespace
}  // namespace core_entity_keys_test
}  // namespace backfill
