// --auto (core/plan/stale_lineage.h through Planner::MakePlan): jobs run
// against the fake engine and the in-memory store record real lineage; then the
// published inputs change (rows added, rows edited in place, a dimension
// corrected, a new transform version) and the plan must name exactly the
// hand-picked stale partitions, each with its reason, plus their
// dependents. Early cutoff's UNCHANGED recomputations count as verified
// versions.

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/civil_time.h"
#include "core/base/clock.h"
#include "core/governance/dataset_freshness.h"
#include "core/model/pipeline_loader.h"
#include "core/plan/planner.h"
#include "core/plan/replay_due.h"
#include "core/plan/stale_lineage.h"
#include "core/plan/stale_reason.h"
#include "core/run/backfill_manager.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/fake_engine.h"
#include "tests/testing/memory_state_store.h"

namespace backfill {
namespace core_stale_lineage_test {
namespace {

using ::backfill::testing::FakeEngine;
using ::backfill::testing::InMemoryStateStore;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// `daily_extra`: more keys of daily, each line indented four spaces.
std::string Pipeline(const std::string& daily_version,
                     const std::string& daily_extra = "") {
  return absl::StrFormat(R"yaml(
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
    version: %s
    contract: {columns: {ds: TEXT, n: INTEGER}}
%s  - name: monthly
    kind: derived
    table: monthly
    partition: {column: month, grain: month}
    upstream: [{dataset: daily, mapping: rollup}]
    transform: "SELECT substr(:partition, 1, 7) AS month, 1 AS n"
    contract: {columns: {month: TEXT, n: INTEGER}}
)yaml",
                         daily_version, daily_extra);
}

std::string Day(int d) { return absl::StrFormat("2025-01-%02d", d); }

class StaleLineageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(Load("v1"));
    for (int d = 1; d <= 6; ++d) engine_.SetPublishedRows("orders", Day(d), d);
    engine_.SetPublishedRows("customers", "", 50);
  }

  void Load(const std::string& version, const std::string& daily_extra = "") {
    auto catalog =
        LoadPipelineTexts({{"p.yaml", Pipeline(version, daily_extra)}});
    ASSERT_TRUE(catalog.ok()) << catalog.status();
    catalog_ = *std::move(catalog);
  }

  // Runs a job of `dataset` over `partitions` as the runner would: stages
  // each with the planner's inputs and records the task; partitions in
  // `unchanged` end UNCHANGED (released, not published), the others are
  // published with lineage. The job ends in `end` (SUCCEEDED or FAILED).
  void RunJob(const std::string& dataset,
              const std::vector<std::string>& partitions,
              const std::set<std::string>& unchanged = {},
              JobState end = JobState::kSucceeded) {
    const DatasetSpec* spec = catalog_.Find(dataset);
    ASSERT_NE(spec, nullptr);
    Planner planner(&catalog_, &engine_, {}, &store_);
    Job job;
    job.request.dataset = dataset;
    job.request.reason = "test";
    DatasetPlan dp;
    dp.dataset = dataset;
    dp.partitions = partitions;
    dp.transform_version = spec->transform_version;
    job.plan.datasets = {dp};
    auto created = store_.CreateJob(job, Now());
    ASSERT_TRUE(created.ok()) << created.status();
    const std::string id = created->job.id;
    JobLayout layout;
    layout.job_id = id;
    layout.items = {{spec, partitions}};
    for (const UpstreamEdge& e : spec->upstream) {
      if (e.mapping == Mapping::kAll) {
        layout.pinned.push_back(catalog_.Find(e.dataset));
      }
    }
    ASSERT_TRUE(engine_.PrepareJob(layout).ok());
    ASSERT_TRUE(
        store_.TransitionJob(id, std::nullopt, JobState::kRunning, "run", Now())
            .ok());
    std::vector<LineageRecord> lineage;
    std::vector<std::string> released, published;
    for (const std::string& p : partitions) {
      auto staged =
          engine_.StagePartition(id, *spec, p, planner.InputsOf(*spec, p));
      ASSERT_TRUE(staged.ok()) << staged.status();
      PartitionTask task;
      task.job_id = id;
      task.dataset = dataset;
      task.partition = p;
      task.state =
          unchanged.count(p) ? TaskState::kUnchanged : TaskState::kStaged;
      task.inputs = staged->inputs;
      task.output_fingerprint = staged->output_fingerprint;
      task.rows_written = staged->rows_written;
      ASSERT_TRUE(store_.UpdateTask(task).ok());
      if (unchanged.count(p)) {
        released.push_back(p);
        continue;
      }
      published.push_back(p);
      LineageRecord rec;
      rec.dataset = dataset;
      rec.partition = p;
      rec.job_id = id;
      rec.transform_version = spec->transform_version;
      rec.inputs = staged->inputs;
      rec.output_fingerprint = staged->output_fingerprint;
      rec.row_count = staged->rows_written;
      lineage.push_back(std::move(rec));
    }
    if (end == JobState::kFailed) {
      ASSERT_TRUE(store_
                      .TransitionJob(id, std::nullopt, JobState::kFailed,
                                     "failed", Now())
                      .ok());
      return;
    }
    if (!released.empty()) {
      ASSERT_TRUE(engine_.ReleasePartitions(id, *spec, released).ok());
    }
    layout.items = {{spec, published}};
    ASSERT_TRUE(engine_.Publish(layout).ok());
    for (JobState s : {JobState::kValidating, JobState::kPublishing}) {
      ASSERT_TRUE(
          store_.TransitionJob(id, std::nullopt, s, "step", Now()).ok());
    }
    ASSERT_TRUE(store_
                    .RecordPublication(id, lineage, JobState::kConfirming,
                                       "published", Now())
                    .ok());
    ASSERT_TRUE(
        store_
            .TransitionJob(id, std::nullopt, JobState::kSucceeded, "ok", Now())
            .ok());
  }

  absl::Time Now() { return absl::FromUnixSeconds(1700000000 + ++tick_); }

  absl::StatusOr<Plan> PlanAuto(const std::string& dataset,
                                bool downstream = true) {
    Planner planner(&catalog_, &engine_, {}, &store_);
    BackfillRequest r;
    r.dataset = dataset;
    r.reason = "auto";
    r.auto_detect = true;
    r.exclude_downstream = !downstream;
    return planner.MakePlan(r);
  }

  // dataset -> partition -> reason.
  static std::map<std::string, std::map<std::string, std::string>> Scope(
      const Plan& plan) {
    std::map<std::string, std::map<std::string, std::string>> out;
    for (const DatasetPlan& dp : plan.datasets) {
      for (size_t i = 0; i < dp.partitions.size(); ++i) {
        out[dp.dataset][dp.partitions[i]] = dp.partition_reasons[i];
      }
    }
    return out;
  }

  void PublishEverything() {
    std::vector<std::string> days;
    for (int d = 1; d <= 6; ++d) days.push_back(Day(d));
    ASSERT_NO_FATAL_FAILURE(RunJob("daily", days));
    ASSERT_NO_FATAL_FAILURE(RunJob("monthly", {"2025-01"}));
  }

  int tick_ = 0;
  Catalog catalog_;
  FakeEngine engine_;
  InMemoryStateStore store_;
};

TEST_F(StaleLineageTest, NothingPublishedOrNothingChangedIsNothingToDo) {
  auto none = PlanAuto("daily");
  EXPECT_EQ(none.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(none.status().message(), HasSubstr("no partition of daily"));

  ASSERT_NO_FATAL_FAILURE(PublishEverything());
  // What the stages recorded equals what the engine reports now.
  for (const char* ds : {"daily", "monthly"}) {
    auto plan = PlanAuto(ds);
    EXPECT_EQ(plan.status().code(), absl::StatusCode::kFailedPrecondition)
        << ds;
    EXPECT_EQ(plan.status().message(),
              std::string("nothing to backfill: every published partition "
                          "of ") +
                  ds + " matches its lineage");
  }
}

TEST_F(StaleLineageTest, LateAndEditedRowsPickTheirDaysAndTheMonth) {
  ASSERT_NO_FATAL_FAILURE(PublishEverything());
  engine_.SetPublishedRows("orders", Day(2), 2 + 3);  // late rows
  engine_.EditPublishedRows("orders", Day(5));        // same count, new values
  auto plan = PlanAuto("daily");
  ASSERT_TRUE(plan.ok()) << plan.status();
  auto scope = Scope(*plan);
  EXPECT_THAT(
      scope["daily"],
      ElementsAre(std::make_pair(Day(2), "input orders/2025-01-02 changed"),
                  std::make_pair(Day(5), "input orders/2025-01-05 changed")));
  EXPECT_THAT(scope["monthly"],
              ElementsAre(std::make_pair(std::string("2025-01"),
                                         "downstream of daily via rollup")));
  EXPECT_EQ(plan->datasets[0].reason, kAutoDatasetReason);

  // Without dependents: only the days.
  auto alone = PlanAuto("daily", /*downstream=*/false);
  ASSERT_TRUE(alone.ok());
  EXPECT_EQ(alone->datasets.size(), 1u);

  // Once those two days are recomputed and published, nothing is stale.
  ASSERT_NO_FATAL_FAILURE(RunJob("daily", {Day(2), Day(5)}));
  ASSERT_NO_FATAL_FAILURE(RunJob("monthly", {"2025-01"}));
  EXPECT_EQ(PlanAuto("daily").status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(StaleLineageTest, ACorrectedDimensionMakesEveryReaderStale) {
  ASSERT_NO_FATAL_FAILURE(PublishEverything());
  engine_.EditPublishedRows("customers", "");
  engine_.EditPublishedRows("orders", Day(3));
  auto plan = PlanAuto("daily");
  ASSERT_TRUE(plan.ok()) << plan.status();
  auto scope = Scope(*plan);
  ASSERT_EQ(scope["daily"].size(), 6u);
  for (int d = 1; d <= 6; ++d) {
    // Inputs in the order the task read them: orders, then customers.
    EXPECT_EQ(scope["daily"][Day(d)],
              d == 3 ? "input orders/2025-01-03 changed (+1 more)"
                     : "input customers changed")
        << d;
  }
  // monthly reads daily only: itself not stale until daily is republished.
  EXPECT_EQ(PlanAuto("monthly").status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(StaleLineageTest, ANewTransformVersionMakesEveryPartitionStale) {
  ASSERT_NO_FATAL_FAILURE(PublishEverything());
  engine_.SetPublishedRows("orders", Day(4), 40);
  ASSERT_NO_FATAL_FAILURE(Load("v2"));
  auto plan = PlanAuto("daily");
  ASSERT_TRUE(plan.ok()) << plan.status();
  auto scope = Scope(*plan);
  ASSERT_EQ(scope["daily"].size(), 6u);
  for (const auto& [p, why] : scope["daily"]) {
    EXPECT_EQ(why, kVersionChangedReason) << p;
  }
  EXPECT_EQ(plan->datasets[0].transform_version, "v2");
}

TEST_F(StaleLineageTest, AnUnchangedRecomputationIsAVerifiedVersion) {
  ASSERT_NO_FATAL_FAILURE(PublishEverything());
  engine_.EditPublishedRows("orders", Day(1));
  engine_.EditPublishedRows("orders", Day(6));
  // Day 1 recomputed identical (early cutoff) in a job that FAILED later:
  // not verified. Day 6 in a job that SUCCEEDED: verified, with the inputs
  // it read.
  ASSERT_NO_FATAL_FAILURE(
      RunJob("daily", {Day(1)}, {Day(1)}, JobState::kFailed));
  ASSERT_NO_FATAL_FAILURE(RunJob("daily", {Day(6)}, {Day(6)}));
  auto plan = PlanAuto("daily", /*downstream=*/false);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(
      Scope(*plan)["daily"],
      ElementsAre(std::make_pair(Day(1), "input orders/2025-01-01 changed")));
}

TEST_F(StaleLineageTest, AutoIsAScopeOfItsOwn) {
  ASSERT_NO_FATAL_FAILURE(PublishEverything());
  Planner planner(&catalog_, &engine_, {}, &store_);
  BackfillRequest r;
  r.dataset = "daily";
  r.auto_detect = true;
  r.from = Day(1);
  r.to = Day(2);
  auto plan = planner.MakePlan(r);
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(plan.status().message(), HasSubstr("scope of its own"));
  r.from = r.to = "";
  r.affected_by = "orders: amount > 0";
  EXPECT_EQ(planner.MakePlan(r).status().code(),
            absl::StatusCode::kInvalidArgument);
  // No state store: no lineage to compare with.
  Planner no_store(&catalog_, &engine_);
  r.affected_by = "";
  EXPECT_EQ(no_store.MakePlan(r).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(StaleLineageTest, SubmitKeepsAutoAndItIsPartOfTheIdempotencyKey) {
  ASSERT_NO_FATAL_FAILURE(PublishEverything());
  engine_.EditPublishedRows("orders", Day(4));
  ManualClock clock(absl::FromUnixSeconds(1800000000));
  ManagerOptions options;
  options.workers = 1;
  BackfillManager manager(&catalog_, &store_, &engine_, &clock, nullptr,
                          options);
  ASSERT_TRUE(manager.Start().ok());
  BackfillRequest r;
  r.dataset = "daily";
  r.reason = "stale";
  r.auto_detect = true;
  r.exclude_downstream = true;
  SubmitOptions key;
  key.idempotency_key = "auto-1";
  auto submitted = manager.Submit(r, key);
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  EXPECT_TRUE(submitted->job.request.auto_detect);
  ASSERT_EQ(submitted->job.plan.datasets.size(), 1u);
  EXPECT_THAT(submitted->job.plan.datasets[0].partitions, ElementsAre(Day(4)));
  auto stored = store_.GetJob(submitted->job.id);
  ASSERT_TRUE(stored.ok());
  EXPECT_TRUE(stored->request.auto_detect);
  // The same key for the same request: the same job, whatever is stale now.
  auto again = manager.Submit(r, key);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->job.id, submitted->job.id);
  // The same key without --auto is another request.
  BackfillRequest ranged = r;
  ranged.auto_detect = false;
  ranged.partitions = {Day(4)};
  auto other = manager.Submit(ranged, key);
  EXPECT_EQ(other.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(other.status().message(), HasSubstr("different request"));
  manager.Shutdown();
}

TEST(InputChangedReasonTest, NamesTheFirstAndCountsTheRest) {
  EXPECT_EQ(InputChangedReason({"orders", "2025-03-01", "f", 1}, 0),
            "input orders/2025-03-01 changed");
  EXPECT_EQ(InputChangedReason({"customers", "", "f", 1}, 0),
            "input customers changed");
  EXPECT_EQ(InputChangedReason({"orders", "2025-03-01", "f", 1}, 2),
            "input orders/2025-03-01 changed (+2 more)");
}

// ReplayDueFinder (core/plan/replay_due.h) over the same history: what a
// replay policy of daily finds due, on a manual clock.
class ReplayDueTest : public StaleLineageTest {
 protected:
  void LoadPolicy(const std::string& version, const std::string& policy) {
    ASSERT_NO_FATAL_FAILURE(Load(version, "    replay: " + policy + "\n"));
  }

  absl::StatusOr<ReplayDue> Find() {
    return finder_.Find(catalog_, *catalog_.Find("daily"));
  }

  std::set<std::string> held_;
  // 2025-01-10 12:00 UTC.
  ManualClock clock_{absl::FromCivil(absl::CivilSecond(2025, 1, 10, 12, 0, 0),
                                     absl::UTCTimeZone())};
  ReplayDueFinder finder_{&engine_, &store_, &clock_,
                          [this](const std::string&) { return held_; }};
};

TEST_F(ReplayDueTest, ChangedInputsAreDueOnceTheyHaveSettled) {
  ASSERT_NO_FATAL_FAILURE(
      LoadPolicy("v1", "{on: [input_change], window: 30d, settle: 30m}"));
  auto nothing = Find();  // nothing published yet
  ASSERT_TRUE(nothing.ok()) << nothing.status();
  EXPECT_THAT(nothing->due, ::testing::IsEmpty());
  EXPECT_THAT(nothing->request.partitions, ::testing::IsEmpty());

  ASSERT_NO_FATAL_FAILURE(PublishEverything());
  engine_.SetPublishedRows("orders", Day(2), 2 + 3);  // late rows
  engine_.EditPublishedRows("orders", Day(5));
  auto first = Find();
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_THAT(first->due, ::testing::IsEmpty());
  EXPECT_THAT(first->unsettled, ElementsAre(Day(2), Day(5)));

  clock_.Advance(absl::Minutes(29));
  EXPECT_THAT(Find()->unsettled, ElementsAre(Day(2), Day(5)));
  clock_.Advance(absl::Minutes(1));
  auto settled = Find();
  ASSERT_TRUE(settled.ok()) << settled.status();
  ASSERT_EQ(settled->due.size(), 2u);
  EXPECT_EQ(settled->due[0].partition, Day(2));
  EXPECT_EQ(settled->due[1].partition, Day(5));
  EXPECT_THAT(settled->request.partitions, ElementsAre(Day(2), Day(5)));
  EXPECT_EQ(settled->request.dataset, "daily");
  EXPECT_EQ(settled->request.requested_by, "policy:daily");
  EXPECT_EQ(settled->request.reason,
            "replay policy of daily: input_change: 2 partitions whose inputs "
            "changed since their last publish (first 2025-01-02: input "
            "orders/2025-01-02 changed)");
  EXPECT_THAT(settled->idempotency_key, ::testing::StartsWith("policy-daily-"));
  // The same changes, seen again: the same key.
  EXPECT_EQ(Find()->idempotency_key, settled->idempotency_key);

  // Day 2 changes again: it waits anew, day 5 alone is due, under a new key.
  engine_.SetPublishedRows("orders", Day(2), 2 + 4);
  auto again = Find();
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_THAT(again->unsettled, ElementsAre(Day(2)));
  EXPECT_THAT(again->request.partitions, ElementsAre(Day(5)));
  EXPECT_NE(again->idempotency_key, settled->idempotency_key);

  // Held by an active job: not due.
  held_ = {Day(5)};
  EXPECT_THAT(Find()->held, ElementsAre(Day(5)));
}

TEST_F(ReplayDueTest, TheWindowAndTheTriggersChooseWhatIsDue) {
  ASSERT_NO_FATAL_FAILURE(LoadPolicy("v1", "{on: [input_change], window: 8d}"));
  ASSERT_NO_FATAL_FAILURE(PublishEverything());
  for (int d = 1; d <= 6; ++d) engine_.EditPublishedRows("orders", Day(d));
  // 2025-01-10 12:00 minus 8 days is 2025-01-02 12:00: day 1 ended before
  // it, day 2 ends after it.
  auto window = Find();
  ASSERT_TRUE(window.ok()) << window.status();
  EXPECT_THAT(window->outside_window, ElementsAre(Day(1)));
  EXPECT_THAT(window->request.partitions,
              ElementsAre(Day(2), Day(3), Day(4), Day(5), Day(6)));

  // A new transform version: not a trigger of this policy...
  ASSERT_NO_FATAL_FAILURE(LoadPolicy("v2", "{on: [input_change], window: 8d}"));
  auto ignored = Find();
  ASSERT_TRUE(ignored.ok()) << ignored.status();
  EXPECT_THAT(ignored->due, ::testing::IsEmpty());
  EXPECT_EQ(ignored->not_a_trigger.size(), 6u);
  // ... of this one, at once (settle is for inputs).
  ASSERT_NO_FATAL_FAILURE(
      LoadPolicy("v2", "{on: [transform_change], window: 8d, settle: 1h}"));
  auto versions = Find();
  ASSERT_TRUE(versions.ok()) << versions.status();
  EXPECT_THAT(versions->request.partitions,
              ElementsAre(Day(2), Day(3), Day(4), Day(5), Day(6)));
  EXPECT_EQ(versions->request.reason,
            "replay policy of daily: transform_change: 5 partitions made by "
            "another transform version than v2");
}

}  // namespace
}  // namespace core_stale_lineage_test
}  // namespace backfill

namespace backfill {
namespace core_stale_lineage_test {
namespace {

// --auto over a time x key dataset: orders (day) -> by_region (day x
// region) -> total (day). Each partition's recorded inputs are per
// partition value, so late rows of one day make exactly that day's keys
// stale, and an edited (day, region) makes exactly its day's total stale.
constexpr char kTimeKeyPipeline[] = R"yaml(
datasets:
  - name: orders
    kind: source
    table: raw_orders
    partition: {column: order_date, grain: day}
  - name: by_region
    kind: derived
    table: by_region
    partition: {column: ds, grain: day, key_column: region, keys: [eu, us]}
    upstream: [{dataset: orders, mapping: identity}]
    transform: "SELECT :partition_start AS ds, :partition_key AS region"
    contract: {columns: {ds: TEXT, region: TEXT}}
  - name: total
    kind: derived
    table: total
    partition: {column: ds, grain: day}
    upstream: [{dataset: by_region, mapping: identity}]
    transform: "SELECT :partition AS ds"
    contract: {columns: {ds: TEXT}}
)yaml";

class TimeKeyStaleLineageTest : public StaleLineageTest {
 protected:
  void SetUp() override {
    StaleLineageTest::SetUp();
    auto catalog = LoadPipelineTexts({{"p.yaml", kTimeKeyPipeline}});
    ASSERT_TRUE(catalog.ok()) << catalog.status();
    catalog_ = *std::move(catalog);
  }
};

TEST_F(TimeKeyStaleLineageTest, LateRowsOfADayPickItsKeysAndEditsTheirTotal) {
  std::vector<std::string> cells, days;
  for (int d = 1; d <= 3; ++d) {
    days.push_back(Day(d));
    for (const char* k : {"eu", "us"}) {
      cells.push_back(absl::StrCat(Day(d), "|", k));
    }
  }
  ASSERT_NO_FATAL_FAILURE(RunJob("by_region", cells));
  ASSERT_NO_FATAL_FAILURE(RunJob("total", days));
  EXPECT_EQ(PlanAuto("by_region").status().code(),
            absl::StatusCode::kFailedPrecondition);

  engine_.SetPublishedRows("orders", Day(2), 2 + 5);  // late rows of day 2
  auto plan = PlanAuto("by_region");
  ASSERT_TRUE(plan.ok()) << plan.status();
  auto scope = Scope(*plan);
  EXPECT_THAT(scope["by_region"],
              ElementsAre(std::make_pair(std::string("2025-01-02|eu"),
                                         "input orders/2025-01-02 changed"),
                          std::make_pair(std::string("2025-01-02|us"),
                                         "input orders/2025-01-02 changed")));
  EXPECT_THAT(scope["total"],
              ElementsAre(std::make_pair(Day(2), "downstream of by_region")));

  // total reads each (day, region): one edited cell makes its day stale.
  engine_.EditPublishedRows("by_region", "2025-01-03|us");
  auto totals = PlanAuto("total");
  ASSERT_TRUE(totals.ok()) << totals.status();
  EXPECT_THAT(Scope(*totals)["total"],
              ElementsAre(std::make_pair(
                  Day(3), "input by_region/2025-01-03|us changed")));
}

// ---- a dataset's partitions and how current each is ---------------------
// (core/governance/dataset_freshness.h, over the same recorded lineage)

class DatasetFreshnessTest : public StaleLineageTest {
 protected:
  absl::StatusOr<FreshnessPage> Read(const std::string& dataset,
                                     FreshnessContext context = {},
                                     std::vector<Freshness> only = {},
                                     std::string after = "", int limit = 100) {
    FreshnessQuery query;
    query.dataset = dataset;
    query.only = std::move(only);
    query.after = std::move(after);
    query.limit = limit;
    if (context.now == absl::InfinitePast()) {
      context.now =
          absl::FromCivil(absl::CivilDay(2025, 2, 1), absl::UTCTimeZone());
    }
    return ReadDatasetFreshness(catalog_, engine_, store_, context, query);
  }

  // partition -> freshness name, over every page of `limit`.
  std::map<std::string, std::string> Standings(const std::string& dataset,
                                               FreshnessContext context = {}) {
    std::map<std::string, std::string> out;
    auto page = Read(dataset, std::move(context));
    EXPECT_TRUE(page.ok()) << page.status();
    if (!page.ok()) return out;
    for (const PartitionFreshness& f : page->partitions) {
      out[f.partition] = FreshnessName(f.freshness);
    }
    return out;
  }

  std::string JobOf(const std::string& dataset, const std::string& partition) {
    auto lineage = store_.GetLineage(dataset, partition);
    EXPECT_TRUE(lineage.ok() && !lineage->empty());
    return lineage.ok() && !lineage->empty() ? lineage->front().job_id : "";
  }
};

TEST_F(DatasetFreshnessTest, UnknownSourceAndUnpublishedDatasets) {
  EXPECT_EQ(Read("nope").status().code(), absl::StatusCode::kNotFound);
  auto source = Read("orders");
  EXPECT_EQ(source.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(source.status().message(), HasSubstr("source dataset"));
  auto empty = Read("daily");
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_TRUE(empty->partitions.empty());
  EXPECT_TRUE(empty->last.empty());
  EXPECT_THAT(empty->counts, ElementsAre(0, 0, 0, 0));
}

TEST_F(DatasetFreshnessTest,
       EachPartitionSaysWhoPublishedItAndWhetherItIsStale) {
  ASSERT_NO_FATAL_FAILURE(PublishEverything());
  engine_.SetPublishedRows("orders", Day(2), 2 + 3);  // late rows
  engine_.EditPublishedRows("orders", Day(5));
  auto page = Read("daily");
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->partitions.size(), 6u);
  EXPECT_THAT(page->counts, ElementsAre(4, 2, 0, 0));
  EXPECT_TRUE(page->last.empty());
  for (int d = 1; d <= 6; ++d) {
    const PartitionFreshness& f = page->partitions[d - 1];
    SCOPED_TRACE(f.partition);
    EXPECT_EQ(f.partition, Day(d));
    auto lineage = store_.GetLineage("daily", Day(d));
    ASSERT_TRUE(lineage.ok());
    ASSERT_EQ(lineage->size(), 1u);
    EXPECT_EQ(f.job_id, lineage->front().job_id);
    EXPECT_EQ(f.action, LineageAction::kPublish);
    EXPECT_EQ(f.rows, lineage->front().row_count);
    EXPECT_EQ(f.recorded_at, lineage->front().published_at);
    EXPECT_EQ(f.transform_version, catalog_.Find("daily")->transform_version);
    EXPECT_TRUE(f.confirmed_by.empty());
    EXPECT_FALSE(f.frozen);
    EXPECT_TRUE(f.held_by.empty());
    if (d == 2 || d == 5) {
      EXPECT_EQ(f.freshness, Freshness::kStale);
      EXPECT_EQ(f.stale_reason,
                absl::StrCat("input orders/", Day(d), " changed"));
    } else {
      EXPECT_EQ(f.freshness, Freshness::kCurrent);
      EXPECT_EQ(f.stale_reason, "");
    }
  }
  // The month read the days as published: current until they change.
  EXPECT_THAT(Standings("monthly"),
              ElementsAre(std::make_pair(std::string("2025-01"), "current")));

  // Republished: current again, by the new job.
  ASSERT_NO_FATAL_FAILURE(RunJob("daily", {Day(2), Day(5)}));
  auto after = Read("daily");
  ASSERT_TRUE(after.ok());
  EXPECT_THAT(after->counts, ElementsAre(6, 0, 0, 0));
  EXPECT_EQ(after->partitions[1].job_id, JobOf("daily", Day(2)));
  EXPECT_NE(after->partitions[1].job_id, after->partitions[0].job_id);
}

TEST_F(DatasetFreshnessTest, DueComesFromThePolicyOnlyForStalePartitions) {
  ASSERT_NO_FATAL_FAILURE(PublishEverything());
  engine_.SetPublishedRows("orders", Day(2), 9);
  engine_.SetPublishedRows("orders", Day(5), 9);
  FreshnessContext context;
  // Day 3 was due at an earlier evaluation but is current now: current.
  context.due = {Day(2), Day(3)};
  context.held = {{Day(5), "bf-99"}};
  EXPECT_THAT(
      Standings("daily", context),
      ElementsAre(
          std::make_pair(Day(1), "current"), std::make_pair(Day(2), "due"),
          std::make_pair(Day(3), "current"), std::make_pair(Day(4), "current"),
          std::make_pair(Day(5), "stale"), std::make_pair(Day(6), "current")));
  auto page = Read("daily", context);
  ASSERT_TRUE(page.ok());
  EXPECT_THAT(page->counts, ElementsAre(4, 1, 1, 0));
  EXPECT_EQ(page->partitions[4].held_by, "bf-99");
  EXPECT_EQ(page->partitions[1].held_by, "");
}

TEST_F(DatasetFreshnessTest, TheFrozenRuleClosesOldPartitionsStaleOrNot) {
  ASSERT_NO_FATAL_FAILURE(PublishEverything());
  ASSERT_NO_FATAL_FAILURE(Load("v1", "    frozen: {before: 2025-01-04}\n"));
  engine_.SetPublishedRows("orders", Day(2), 9);  // stale, frozen
  engine_.SetPublishedRows("orders", Day(4), 9);  // stale, open
  FreshnessContext context;
  context.due = {Day(2), Day(4)};  // a frozen partition is never due
  auto page = Read("daily", context);
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_EQ(page->frozen_rule, "frozen.before 2025-01-04");
  std::vector<std::pair<std::string, bool>> frozen;
  for (const PartitionFreshness& f : page->partitions) {
    frozen.emplace_back(FreshnessName(f.freshness), f.frozen);
  }
  EXPECT_THAT(frozen, ElementsAre(std::make_pair("current", true),
                                  std::make_pair("frozen", true),
                                  std::make_pair("current", true),
                                  std::make_pair("due", false),
                                  std::make_pair("current", false),
                                  std::make_pair("current", false)));
  EXPECT_THAT(page->counts, ElementsAre(4, 0, 1, 1));
}

TEST_F(DatasetFreshnessTest, EarlyCutoffNamesTheJobThatConfirmedTheRows) {
  ASSERT_NO_FATAL_FAILURE(PublishEverything());
  const std::string first = JobOf("daily", Day(3));
  ASSERT_NO_FATAL_FAILURE(RunJob("daily", {Day(3), Day(4)}, {Day(3)}));
  const std::string second = JobOf("daily", Day(4));
  ASSERT_NE(first, second);
  auto page = Read("daily");
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(page->partitions[2].job_id, first);  // its rows are first's
  EXPECT_EQ(page->partitions[2].confirmed_by, second);
  EXPECT_EQ(page->partitions[3].job_id, second);
  EXPECT_EQ(page->partitions[3].confirmed_by, "");
}

TEST_F(DatasetFreshnessTest, PagesFollowThePartitionOrderAndTheFilter) {
  ASSERT_NO_FATAL_FAILURE(PublishEverything());
  engine_.SetPublishedRows("orders", Day(2), 9);
  engine_.SetPublishedRows("orders", Day(6), 9);
  // Every page size over every partition: each exactly once, in order.
  for (int limit = 1; limit <= 7; ++limit) {
    SCOPED_TRACE(limit);
    std::vector<std::string> seen;
    std::string after;
    for (int pages = 0; pages < 10; ++pages) {
      auto page = Read("daily", {}, {}, after, limit);
      ASSERT_TRUE(page.ok());
      EXPECT_LE(static_cast<int>(page->partitions.size()), limit);
      for (const auto& f : page->partitions) seen.push_back(f.partition);
      if (page->last.empty()) break;
      EXPECT_EQ(page->last, seen.back());
      after = page->last;
    }
    EXPECT_THAT(seen,
                ElementsAre(Day(1), Day(2), Day(3), Day(4), Day(5), Day(6)));
  }
  // Only the stale ones, one a page; the counts stay the whole dataset's.
  auto first = Read("daily", {}, {Freshness::kStale}, "", 1);
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(first->partitions.size(), 1u);
  EXPECT_EQ(first->partitions[0].partition, Day(2));
  EXPECT_EQ(first->last, Day(2));
  EXPECT_THAT(first->counts, ElementsAre(4, 2, 0, 0));
  auto second = Read("daily", {}, {Freshness::kStale}, first->last, 1);
  ASSERT_TRUE(second.ok());
  ASSERT_EQ(second->partitions.size(), 1u);
  EXPECT_EQ(second->partitions[0].partition, Day(6));
  EXPECT_EQ(second->last, "");  // nothing stale follows
  auto due = Read("daily", {}, {Freshness::kDue, Freshness::kFrozen});
  ASSERT_TRUE(due.ok());
  EXPECT_TRUE(due->partitions.empty());
}

TEST_F(DatasetFreshnessTest,
       APartitionPublishedBetweenPagesNeitherRepeatsNorShifts) {
  ASSERT_NO_FATAL_FAILURE(RunJob("daily", {Day(1), Day(2), Day(4), Day(5)}));
  auto first = Read("daily", {}, {}, "", 2);
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(first->last, Day(2));
  ASSERT_NO_FATAL_FAILURE(RunJob("daily", {Day(3)}));
  auto second = Read("daily", {}, {}, first->last, 2);
  ASSERT_TRUE(second.ok());
  std::vector<std::string> got;
  for (const auto& f : second->partitions) got.push_back(f.partition);
  EXPECT_THAT(got, ElementsAre(Day(3), Day(4)));
  EXPECT_EQ(second->last, Day(4));
  EXPECT_EQ(second->counts[0], 5);
}

}  // namespace
}  // namespace core_stale_lineage_test
}  // namespace backfill
