// TaskGraph: dependencies from identity and whole-table edges, the ready
// queue's order, failures, reopening lost work, and a randomized check
// against an independent model of which tasks may run.

#include <algorithm>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/model/partition_layout.h"
#include "core/model/upstream_mapping.h"
#include "core/run/task_graph.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace backfill {
namespace core_task_graph_test {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::IsEmpty;
using Node = TaskGraph::Node;

using Plan = std::vector<std::pair<std::string, std::vector<std::string>>>;
using Edges = std::map<std::string, std::vector<UpstreamEdge>>;

UpstreamEdge Identity(const std::string& dataset) {
  return {dataset, Mapping::kIdentity};
}
UpstreamEdge All(const std::string& dataset) {
  return {dataset, Mapping::kAll};
}

// A graph that remembers its tasks' partitions, which TaskGraph keeps only
// while it is built.
class NamedGraph : public TaskGraph {
 public:
  NamedGraph(const std::vector<Task>& tasks,
             const std::function<std::vector<UpstreamEdge>(
                 const std::string& dataset)>& upstream_of,
             const std::function<PartitionLayout(const std::string& dataset)>&
                 grain_of = nullptr)
      : TaskGraph(tasks, upstream_of, grain_of) {
    for (const Task& t : tasks) partitions_.push_back(t.partition);
  }

  const std::string& partition(size_t i) const { return partitions_[i]; }

 private:
  std::vector<std::string> partitions_;
};

std::function<std::vector<UpstreamEdge>(const std::string&)> EdgesOf(
    const Edges& edges) {
  return [edges](const std::string& dataset) {
    auto it = edges.find(dataset);
    return it == edges.end() ? std::vector<UpstreamEdge>() : it->second;
  };
}

// Tasks in plan order: datasets in the given order, then partitions.
std::vector<TaskGraph::Task> TasksOf(const Plan& plan) {
  std::vector<TaskGraph::Task> tasks;
  for (const auto& [dataset, partitions] : plan) {
    for (const std::string& p : partitions) {
      tasks.push_back({dataset, p, Node::kPending});
    }
  }
  return tasks;
}

NamedGraph Make(const Plan& plan, const Edges& edges) {
  return NamedGraph(TasksOf(plan), EdgesOf(edges));
}

std::string Name(const NamedGraph& g, size_t i) {
  return absl::StrCat(g.dataset(i), "/", g.partition(i));
}

size_t Find(const NamedGraph& g, const std::string& name) {
  for (size_t i = 0; i < g.size(); ++i) {
    if (Name(g, i) == name) return i;
  }
  ADD_FAILURE() << "no task " << name;
  return g.size();
}

// The ready queue in order, left as it was (popped, then returned to the
// front in reverse).
std::vector<std::string> Ready(NamedGraph& g) {
  std::vector<size_t> popped;
  while (std::optional<size_t> i = g.Pop()) popped.push_back(*i);
  for (auto it = popped.rbegin(); it != popped.rend(); ++it) g.Return(*it);
  std::vector<std::string> names;
  for (size_t i : popped) names.push_back(Name(g, i));
  return names;
}

// Pops `name`, which must be ready, and marks it done.
void RunTask(NamedGraph& g, const std::string& name) {
  std::optional<size_t> i = g.Pop([&](size_t j) { return Name(g, j) == name; });
  ASSERT_TRUE(i.has_value()) << name << " is not ready";
  g.Done(*i);
}

TEST(TaskGraphTest, IdentityChainsAcrossDatasets) {
  NamedGraph g =
      Make({{"a", {"p1", "p2"}}, {"b", {"p1", "p2"}}, {"c", {"p1", "p2"}}},
           {{"b", {Identity("a")}}, {"c", {Identity("b")}}});
  EXPECT_EQ(g.size(), 6u);
  EXPECT_EQ(g.remaining(), 6u);
  EXPECT_THAT(Ready(g), ElementsAre("a/p1", "a/p2"));

  ASSERT_NO_FATAL_FAILURE(RunTask(g, "a/p1"));
  EXPECT_THAT(Ready(g), ElementsAre("a/p2", "b/p1"));
  ASSERT_NO_FATAL_FAILURE(RunTask(g, "b/p1"));
  // c/p1 needs only b/p1; the other partition's chain is independent.
  EXPECT_THAT(Ready(g), ElementsAre("a/p2", "c/p1"));
  ASSERT_NO_FATAL_FAILURE(RunTask(g, "c/p1"));
  ASSERT_NO_FATAL_FAILURE(RunTask(g, "a/p2"));
  ASSERT_NO_FATAL_FAILURE(RunTask(g, "b/p2"));
  EXPECT_THAT(Ready(g), ElementsAre("c/p2"));
  ASSERT_NO_FATAL_FAILURE(RunTask(g, "c/p2"));
  EXPECT_TRUE(g.AllDone());
  EXPECT_EQ(g.CountIn(Node::kDone), 6u);
  EXPECT_THAT(Ready(g), IsEmpty());
}

TEST(TaskGraphTest, IdentityEdgesOnlyWaitForTasksOfTheJob) {
  // b/p3 has no a/p3 in the job, and z is not in the job at all: they read
  // published data and wait for nothing.
  NamedGraph g = Make({{"a", {"p1"}}, {"b", {"p1", "p3"}}},
                      {{"b", {Identity("a"), Identity("z"), All("y")}}});
  EXPECT_THAT(Ready(g), ElementsAre("a/p1", "b/p3"));
  ASSERT_NO_FATAL_FAILURE(RunTask(g, "a/p1"));
  EXPECT_THAT(Ready(g), ElementsAre("b/p3", "b/p1"));
}

TEST(TaskGraphTest, WholeTableEdgesWaitForEveryUpstreamTask) {
  NamedGraph g = Make({{"customers", {""}},
                       {"orders", {"d1", "d2", "d3"}},
                       {"revenue", {"d1", "d2", "d3"}},
                       {"summary", {""}}},
                      {{"revenue", {Identity("orders"), All("customers")}},
                       {"summary", {All("revenue")}}});
  EXPECT_THAT(Ready(g),
              ElementsAre("customers/", "orders/d1", "orders/d2", "orders/d3"));
  ASSERT_NO_FATAL_FAILURE(RunTask(g, "orders/d1"));
  ASSERT_NO_FATAL_FAILURE(RunTask(g, "orders/d2"));
  // revenue/d1 has its orders partition but not the whole customers table.
  EXPECT_THAT(Ready(g), ElementsAre("customers/", "orders/d3"));
  ASSERT_NO_FATAL_FAILURE(RunTask(g, "customers/"));
  EXPECT_THAT(Ready(g), ElementsAre("orders/d3", "revenue/d1", "revenue/d2"));
  ASSERT_NO_FATAL_FAILURE(RunTask(g, "revenue/d1"));
  ASSERT_NO_FATAL_FAILURE(RunTask(g, "revenue/d2"));
  ASSERT_NO_FATAL_FAILURE(RunTask(g, "orders/d3"));
  // summary waits for the last revenue task.
  EXPECT_THAT(Ready(g), ElementsAre("revenue/d3"));
  ASSERT_NO_FATAL_FAILURE(RunTask(g, "revenue/d3"));
  EXPECT_THAT(Ready(g), ElementsAre("summary/"));
}

TEST(TaskGraphTest,
     ReadyOrderIsPlanOrderThenOrderOfReadinessAndReturnsGoFirst) {
  NamedGraph g = Make({{"a", {"p1", "p2", "p3"}}, {"b", {"p1", "p2", "p3"}}},
                      {{"b", {Identity("a")}}});
  std::optional<size_t> first = g.Pop();
  std::optional<size_t> second = g.Pop();
  std::optional<size_t> third = g.Pop();
  ASSERT_TRUE(first && second && third);
  EXPECT_EQ(Name(g, *first), "a/p1");
  EXPECT_EQ(Name(g, *second), "a/p2");
  EXPECT_EQ(Name(g, *third), "a/p3");
  EXPECT_EQ(g.running(), 3u);
  EXPECT_EQ(g.ready(), 0u);
  // Done out of plan order: dependents queue in the order they got ready.
  g.Done(*third);
  g.Done(*first);
  EXPECT_THAT(Ready(g), ElementsAre("b/p3", "b/p1"));
  // A task put back goes to the front.
  g.Return(*second);
  EXPECT_EQ(g.running(), 0u);
  EXPECT_EQ(g.state(*second), Node::kPending);
  EXPECT_THAT(Ready(g), ElementsAre("a/p2", "b/p3", "b/p1"));
  EXPECT_EQ(g.remaining(), 4u);
}

TEST(TaskGraphTest, CallsOnTasksThatAreNotRunningChangeNothing) {
  NamedGraph g =
      Make({{"a", {"p1", "p2"}}, {"b", {"p1"}}}, {{"b", {Identity("a")}}});
  const size_t a1 = Find(g, "a/p1");
  g.Done(a1);  // pending, not running
  g.Fail(a1);
  g.Return(a1);
  EXPECT_EQ(g.state(a1), Node::kPending);
  EXPECT_EQ(g.remaining(), 3u);
  EXPECT_THAT(Ready(g), ElementsAre("a/p1", "a/p2"));
  ASSERT_NO_FATAL_FAILURE(RunTask(g, "a/p1"));
  g.Done(a1);  // already done
  g.Return(a1);
  EXPECT_EQ(g.state(a1), Node::kDone);
  EXPECT_EQ(g.remaining(), 2u);
  EXPECT_THAT(Ready(g), ElementsAre("a/p2", "b/p1"));
}

TEST(TaskGraphTest, FailedTasksBlockTheirDependentsUntilReset) {
  NamedGraph g = Make({{"a", {"p1", "p2"}}, {"b", {"p1", "p2"}}},
                      {{"b", {Identity("a")}}});
  std::optional<size_t> a1 = g.Pop();
  ASSERT_TRUE(a1.has_value());
  g.Fail(*a1);
  EXPECT_EQ(g.state(*a1), Node::kFailed);
  EXPECT_EQ(g.running(), 0u);
  EXPECT_EQ(g.CountIn(Node::kFailed), 1u);
  ASSERT_NO_FATAL_FAILURE(RunTask(g, "a/p2"));
  ASSERT_NO_FATAL_FAILURE(RunTask(g, "b/p2"));
  // b/p1 never becomes ready; the job cannot finish.
  EXPECT_THAT(Ready(g), IsEmpty());
  EXPECT_FALSE(g.AllDone());
  EXPECT_EQ(g.remaining(), 2u);

  g.ResetFailed();
  EXPECT_EQ(g.state(*a1), Node::kPending);
  EXPECT_EQ(g.CountIn(Node::kFailed), 0u);
  EXPECT_EQ(g.CountIn(Node::kDone), 2u);
  EXPECT_THAT(Ready(g), ElementsAre("a/p1"));
  ASSERT_NO_FATAL_FAILURE(RunTask(g, "a/p1"));
  ASSERT_NO_FATAL_FAILURE(RunTask(g, "b/p1"));
  EXPECT_TRUE(g.AllDone());
}

TEST(TaskGraphTest, ResetKeepsRunningTasksRunning) {
  NamedGraph g = Make({{"a", {"p1", "p2"}}}, {});
  std::optional<size_t> a1 = g.Pop();
  std::optional<size_t> a2 = g.Pop();
  ASSERT_TRUE(a1 && a2);
  g.Fail(*a1);
  g.ResetFailed();
  EXPECT_EQ(g.running(), 1u);
  EXPECT_EQ(g.state(*a2), Node::kRunning);
  EXPECT_THAT(Ready(g), ElementsAre("a/p1"));
  g.Done(*a2);
  EXPECT_EQ(g.remaining(), 1u);
}

TEST(TaskGraphTest, ReopenReopensEveryTaskThatReadTheLostOnes) {
  NamedGraph g =
      Make({{"a", {"p1", "p2"}},
            {"b", {"p1", "p2"}},
            {"c", {"p1", "p2"}},
            {"d", {"x", "y"}}},
           {{"b", {Identity("a")}}, {"c", {Identity("b")}}, {"d", {All("c")}}});
  while (std::optional<size_t> i = g.Pop()) g.Done(*i);
  ASSERT_TRUE(g.AllDone());

  g.Reopen({Find(g, "a/p1")});
  // a/p1 -> b/p1 -> c/p1 (identity), and every d task reads all of c.
  for (const char* name : {"a/p1", "b/p1", "c/p1", "d/x", "d/y"}) {
    EXPECT_EQ(g.state(Find(g, name)), Node::kPending) << name;
  }
  for (const char* name : {"a/p2", "b/p2", "c/p2"}) {
    EXPECT_EQ(g.state(Find(g, name)), Node::kDone) << name;
  }
  EXPECT_EQ(g.remaining(), 5u);
  EXPECT_THAT(Ready(g), ElementsAre("a/p1"));
  ASSERT_NO_FATAL_FAILURE(RunTask(g, "a/p1"));
  ASSERT_NO_FATAL_FAILURE(RunTask(g, "b/p1"));
  EXPECT_THAT(Ready(g), ElementsAre("c/p1"));
  ASSERT_NO_FATAL_FAILURE(RunTask(g, "c/p1"));
  EXPECT_THAT(Ready(g), ElementsAre("d/x", "d/y"));
}

TEST(TaskGraphTest, ReopenOfALeafReopensOnlyIt) {
  NamedGraph g = Make({{"a", {"p1", "p2"}}, {"b", {"p1", "p2"}}},
                      {{"b", {Identity("a")}}});
  while (std::optional<size_t> i = g.Pop()) g.Done(*i);
  g.Reopen({Find(g, "b/p2"), Find(g, "b/p1")});
  EXPECT_EQ(g.remaining(), 2u);
  EXPECT_EQ(g.CountIn(Node::kDone), 2u);
  // Requeued in plan order.
  EXPECT_THAT(Ready(g), ElementsAre("b/p1", "b/p2"));
}

TEST(TaskGraphTest, PopTakesTheFirstAcceptedTaskAndLeavesTheOthers) {
  NamedGraph g = Make({{"a", {"p1", "p2", "p3"}}}, {});
  std::optional<size_t> none = g.Pop([](size_t) { return false; });
  EXPECT_FALSE(none.has_value());
  EXPECT_EQ(g.ready(), 3u);
  EXPECT_EQ(g.running(), 0u);

  std::optional<size_t> not_p1 =
      g.Pop([&](size_t i) { return g.partition(i) != "p1"; });
  ASSERT_TRUE(not_p1.has_value());
  EXPECT_EQ(Name(g, *not_p1), "a/p2");
  EXPECT_EQ(g.state(*not_p1), Node::kRunning);
  EXPECT_THAT(Ready(g), ElementsAre("a/p1", "a/p3"));
  std::optional<size_t> next = g.Pop();
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(Name(g, *next), "a/p1");
}

TEST(TaskGraphTest, ClearReadyForgetsTheQueueAndRequeueRebuildsIt) {
  NamedGraph g = Make({{"a", {"p1", "p2", "p3"}}, {"b", {"p1"}}},
                      {{"b", {Identity("a")}}});
  std::optional<size_t> running = g.Pop();
  ASSERT_TRUE(running.has_value());
  g.ClearReady();
  EXPECT_EQ(g.ready(), 0u);
  EXPECT_FALSE(g.Pop().has_value());
  EXPECT_EQ(g.CountIn(Node::kPending), 3u);
  EXPECT_EQ(g.running(), 1u);

  g.Requeue();
  EXPECT_THAT(Ready(g), ElementsAre("a/p2", "a/p3"));
  g.Done(*running);
  EXPECT_THAT(Ready(g), ElementsAre("a/p2", "a/p3", "b/p1"));
  // Requeue puts the ready tasks back in plan order.
  g.Requeue();
  EXPECT_THAT(Ready(g), ElementsAre("a/p2", "a/p3", "b/p1"));
}

TEST(TaskGraphTest, TasksStateGivenAtConstructionIsKept) {
  // A job resumed from checkpoints: staged tasks come in done.
  std::vector<TaskGraph::Task> tasks = {{"a", "p1", Node::kDone},
                                        {"a", "p2", Node::kPending},
                                        {"b", "p1", Node::kPending},
                                        {"b", "p2", Node::kPending}};
  NamedGraph g(tasks, [](const std::string& d) {
    return d == "b" ? std::vector<UpstreamEdge>{Identity("a")}
                    : std::vector<UpstreamEdge>();
  });
  EXPECT_EQ(g.remaining(), 3u);
  EXPECT_THAT(Ready(g), ElementsAre("a/p2", "b/p1"));
}

// ---- Rollup and lookback -----------------------------------------------

using Grains = std::map<std::string, PartitionLayout>;

NamedGraph MakeWithGrains(const Plan& plan, const Edges& edges,
                          const Grains& grains) {
  return NamedGraph(TasksOf(plan), EdgesOf(edges),
                    [grains](const std::string& dataset) {
                      auto it = grains.find(dataset);
                      return it == grains.end() ? Grain::kNone : it->second;
                    });
}

UpstreamEdge Rollup(const std::string& dataset) {
  return {dataset, Mapping::kRollup, 0};
}
UpstreamEdge Lookback(const std::string& dataset, int n) {
  return {dataset, Mapping::kLookback, n};
}

TEST(TaskGraphTest, RollupWaitsForEveryChildInTheJob) {
  const Grains grains = {{"daily", Grain::kDay}, {"monthly", Grain::kMonth}};
  NamedGraph g =
      MakeWithGrains({{"daily", {"2025-01-30", "2025-01-31", "2025-02-01"}},
                      {"monthly", {"2025-01", "2025-02", "2025-03"}}},
                     {{"monthly", {Rollup("daily")}}}, grains);
  // 2025-03 has no day in the job: it reads published days only.
  EXPECT_THAT(Ready(g), ElementsAre("daily/2025-01-30", "daily/2025-01-31",
                                    "daily/2025-02-01", "monthly/2025-03"));
  ASSERT_NO_FATAL_FAILURE(RunTask(g, "daily/2025-01-30"));
  ASSERT_NO_FATAL_FAILURE(RunTask(g, "daily/2025-02-01"));
  // February had its only day in the job; January still waits for the 31st.
  EXPECT_THAT(Ready(g), ElementsAre("daily/2025-01-31", "monthly/2025-03",
                                    "monthly/2025-02"));
  ASSERT_NO_FATAL_FAILURE(RunTask(g, "daily/2025-01-31"));
  EXPECT_THAT(Ready(g), ElementsAre("monthly/2025-03", "monthly/2025-02",
                                    "monthly/2025-01"));
}

TEST(TaskGraphTest, HourRollupIntoDayAndMonth) {
  const Grains grains = {{"hourly", Grain::kHour},
                         {"days", Grain::kDay},
                         {"months", Grain::kMonth}};
  NamedGraph g = MakeWithGrains(
      {{"hourly", {"2025-03-31T22", "2025-03-31T23", "2025-04-01T00"}},
       {"days", {"2025-03-31", "2025-04-01"}},
       {"months", {"2025-03", "2025-04"}}},
      {{"days", {Rollup("hourly")}}, {"months", {Rollup("hourly")}}}, grains);
  ASSERT_NO_FATAL_FAILURE(RunTask(g, "hourly/2025-04-01T00"));
  EXPECT_THAT(Ready(g),
              ElementsAre("hourly/2025-03-31T22", "hourly/2025-03-31T23",
                          "days/2025-04-01", "months/2025-04"));
  ASSERT_NO_FATAL_FAILURE(RunTask(g, "hourly/2025-03-31T23"));
  EXPECT_THAT(Ready(g), ElementsAre("hourly/2025-03-31T22", "days/2025-04-01",
                                    "months/2025-04"));
  ASSERT_NO_FATAL_FAILURE(RunTask(g, "hourly/2025-03-31T22"));
  EXPECT_THAT(Ready(g), ElementsAre("days/2025-04-01", "months/2025-04",
                                    "days/2025-03-31", "months/2025-03"));
}

TEST(TaskGraphTest, LookbackWaitsForItsWindowInTheJob) {
  const Grains grains = {{"daily", Grain::kDay}, {"rolling", Grain::kDay}};
  // rolling reads P-2 .. P.
  NamedGraph g =
      MakeWithGrains({{"daily", {"2024-12-31", "2025-01-01", "2025-01-02"}},
                      {"rolling",
                       {"2024-12-31", "2025-01-01", "2025-01-02", "2025-01-03",
                        "2025-01-04", "2025-01-05"}}},
                     {{"rolling", {Lookback("daily", 2)}}}, grains);
  // 01-05 reads 01-03 .. 01-05: none in the job.
  EXPECT_THAT(Ready(g), ElementsAre("daily/2024-12-31", "daily/2025-01-01",
                                    "daily/2025-01-02", "rolling/2025-01-05"));
  ASSERT_NO_FATAL_FAILURE(RunTask(g, "daily/2025-01-02"));
  // 01-04 reads 01-02 .. 01-04: only 01-02 is in the job.
  EXPECT_THAT(Ready(g),
              ElementsAre("daily/2024-12-31", "daily/2025-01-01",
                          "rolling/2025-01-05", "rolling/2025-01-04"));
  ASSERT_NO_FATAL_FAILURE(RunTask(g, "daily/2025-01-01"));
  // 01-03 reads 01-01 .. 01-03; 01-01 and 01-02 still wait for 12-31.
  EXPECT_THAT(Ready(g),
              ElementsAre("daily/2024-12-31", "rolling/2025-01-05",
                          "rolling/2025-01-04", "rolling/2025-01-03"));
  ASSERT_NO_FATAL_FAILURE(RunTask(g, "daily/2024-12-31"));
  EXPECT_THAT(Ready(g),
              ElementsAre("rolling/2025-01-05", "rolling/2025-01-04",
                          "rolling/2025-01-03", "rolling/2024-12-31",
                          "rolling/2025-01-01", "rolling/2025-01-02"));
}

TEST(TaskGraphTest, ReopenFollowsRollupAndLookbackReaders) {
  const Grains grains = {{"daily", Grain::kDay},
                         {"monthly", Grain::kMonth},
                         {"monthly_r", Grain::kMonth},
                         {"rolling", Grain::kDay}};
  NamedGraph g =
      MakeWithGrains({{"daily", {"2025-01-31", "2025-02-01"}},
                      {"monthly", {"2025-01", "2025-02"}},
                      {"monthly_r", {"2025-01", "2025-02", "2025-03"}},
                      {"rolling", {"2025-01-31", "2025-02-01", "2025-02-02"}}},
                     {{"monthly", {Rollup("daily")}},
                      {"monthly_r", {Lookback("monthly", 1)}},
                      {"rolling", {Lookback("daily", 1)}}},
                     grains);
  while (std::optional<size_t> i = g.Pop()) g.Done(*i);
  ASSERT_TRUE(g.AllDone());
  g.Reopen({Find(g, "daily/2025-01-31")});
  // daily 01-31 -> monthly 01 -> monthly_r 01, 02; and rolling 01-31, 02-01.
  for (const char* name :
       {"daily/2025-01-31", "monthly/2025-01", "monthly_r/2025-01",
        "monthly_r/2025-02", "rolling/2025-01-31", "rolling/2025-02-01"}) {
    EXPECT_EQ(g.state(Find(g, name)), Node::kPending) << name;
  }
  for (const char* name : {"daily/2025-02-01", "monthly/2025-02",
                           "monthly_r/2025-03", "rolling/2025-02-02"}) {
    EXPECT_EQ(g.state(Find(g, name)), Node::kDone) << name;
  }
  EXPECT_EQ(g.remaining(), 6u);
  EXPECT_THAT(Ready(g), ElementsAre("daily/2025-01-31"));
}

TEST(TaskGraphTest, RollupWithoutGrainsWaitsForTheWholeUpstream) {
  NamedGraph g = Make({{"daily", {"2025-01-31", "2025-02-01"}},
                       {"monthly", {"2025-01", "2025-02"}}},
                      {{"monthly", {Rollup("daily")}}});
  EXPECT_THAT(Ready(g), ElementsAre("daily/2025-01-31", "daily/2025-02-01"));
  ASSERT_NO_FATAL_FAILURE(RunTask(g, "daily/2025-02-01"));
  EXPECT_THAT(Ready(g), ElementsAre("daily/2025-01-31"));
  ASSERT_NO_FATAL_FAILURE(RunTask(g, "daily/2025-01-31"));
  EXPECT_THAT(Ready(g), ElementsAre("monthly/2025-01", "monthly/2025-02"));
}

// ---- Randomized ---------------------------------------------------------

struct RandomJob {
  Plan plan;
  Edges edges;
};

RandomJob MakeRandomJob(std::mt19937& rng) {
  auto uniform = [&](int lo, int hi) {
    return std::uniform_int_distribution<int>(lo, hi)(rng);
  };
  RandomJob job;
  const int datasets = uniform(1, 6);
  for (int d = 0; d < datasets; ++d) {
    const std::string name = absl::StrCat("d", d);
    std::vector<std::string> partitions;
    if (uniform(0, 4) == 0) {
      partitions = {""};  // unpartitioned
    } else {
      for (int p = 0; p < 5; ++p) {
        if (uniform(0, 2) > 0) partitions.push_back(absl::StrCat("p", p));
      }
    }
    job.plan.push_back({name, partitions});
    // Upstream edges to earlier datasets (a DAG), and to one outside.
    for (int u = 0; u < d; ++u) {
      if (uniform(0, 2) != 0) continue;
      job.edges[name].push_back(uniform(0, 3) == 0
                                    ? All(absl::StrCat("d", u))
                                    : Identity(absl::StrCat("d", u)));
    }
    if (uniform(0, 4) == 0) job.edges[name].push_back(Identity("outside"));
  }
  return job;
}

// What the graph should do, computed from the plan and edges alone.
class Model {
 public:
  Model(const NamedGraph& g, const Edges& edges) : g_(g), edges_(edges) {
    for (size_t i = 0; i < g.size(); ++i) {
      by_name_[{g.dataset(i), g.partition(i)}] = i;
      by_dataset_[g.dataset(i)].push_back(i);
      state_.push_back(g.state(i));
    }
  }

  // Every input of task i that is in the job is done.
  bool InputsDone(size_t i) const {
    auto it = edges_.find(g_.dataset(i));
    if (it == edges_.end()) return true;
    for (const UpstreamEdge& e : it->second) {
      if (e.mapping == Mapping::kIdentity) {
        auto u = by_name_.find({e.dataset, g_.partition(i)});
        if (u != by_name_.end() && state_[u->second] != Node::kDone) {
          return false;
        }
      } else {
        auto tasks = by_dataset_.find(e.dataset);
        if (tasks == by_dataset_.end()) continue;
        for (size_t u : tasks->second) {
          if (state_[u] != Node::kDone) return false;
        }
      }
    }
    return true;
  }

  size_t ReadyCount() const {
    size_t n = 0;
    for (size_t i = 0; i < state_.size(); ++i) {
      if (state_[i] == Node::kPending && InputsDone(i)) ++n;
    }
    return n;
  }
  size_t Count(Node s) const {
    return static_cast<size_t>(std::count(state_.begin(), state_.end(), s));
  }

  // Tasks that read task i (identity) or its dataset (all).
  std::vector<size_t> Readers(size_t i) const {
    std::vector<size_t> out;
    for (size_t j = 0; j < state_.size(); ++j) {
      auto it = edges_.find(g_.dataset(j));
      if (it == edges_.end()) continue;
      for (const UpstreamEdge& e : it->second) {
        if (e.dataset != g_.dataset(i)) continue;
        if (e.mapping == Mapping::kAll || g_.partition(j) == g_.partition(i)) {
          out.push_back(j);
        }
      }
    }
    return out;
  }

  // Done tasks among `lost` and everything that read them become pending.
  void Reopen(const std::vector<size_t>& lost) {
    std::vector<size_t> stack = lost;
    std::set<size_t> seen;
    while (!stack.empty()) {
      const size_t i = stack.back();
      stack.pop_back();
      if (!seen.insert(i).second) continue;
      if (state_[i] == Node::kDone) state_[i] = Node::kPending;
      for (size_t r : Readers(i)) stack.push_back(r);
    }
  }

  std::vector<Node>& state() { return state_; }

 private:
  const NamedGraph& g_;
  const Edges& edges_;
  std::map<std::pair<std::string, std::string>, size_t> by_name_;
  std::map<std::string, std::vector<size_t>> by_dataset_;
  std::vector<Node> state_;
};

// Checks the graph's counters against the model.
void ExpectAgrees(const NamedGraph& g, const Model& model) {
  EXPECT_EQ(g.ready(), model.ReadyCount());
  EXPECT_EQ(g.running(), model.Count(Node::kRunning));
  EXPECT_EQ(g.remaining(), g.size() - model.Count(Node::kDone));
  for (Node s : {Node::kPending, Node::kRunning, Node::kDone}) {
    EXPECT_EQ(g.CountIn(s), model.Count(s));
  }
}

// A graph built over a job's task table (its partitions read in place, its
// states mapped by NodeOf and OutcomeOf) is the graph built from the same
// tasks given one by one.
TEST(TaskGraphPropertyTest, AGraphOverATaskTableIsTheGraphOfItsTasks) {
  static constexpr TaskState kStates[] = {
      TaskState::kPending, TaskState::kRunning,   TaskState::kStaged,
      TaskState::kFailed,  TaskState::kUnchanged, TaskState::kSkipped};
  for (uint32_t seed = 1; seed <= 200; ++seed) {
    SCOPED_TRACE(absl::StrCat("seed ", seed));
    std::mt19937 rng(seed);
    const RandomJob job = MakeRandomJob(rng);
    std::vector<PartitionTask> rows;
    std::vector<TaskGraph::Task> tasks;
    for (const auto& [dataset, partitions] : job.plan) {
      for (const std::string& p : partitions) {
        PartitionTask row;
        row.job_id = "bf-1";
        row.dataset = dataset;
        row.partition = p;
        // Mostly pending, so that readiness depends on the edges.
        row.state = rng() % 3 == 0 ? kStates[rng() % 6] : TaskState::kPending;
        rows.push_back(row);
        tasks.push_back({dataset, p, TaskGraph::NodeOf(row.state),
                         TaskGraph::OutcomeOf(row.state)});
      }
    }
    const TaskTable table(rows);
    TaskGraph from_table(table, EdgesOf(job.edges));
    TaskGraph from_tasks(tasks, EdgesOf(job.edges));
    ASSERT_EQ(from_table.size(), from_tasks.size());
    for (size_t i = 0; i < from_tasks.size(); ++i) {
      EXPECT_EQ(from_table.dataset(i), from_tasks.dataset(i)) << i;
      EXPECT_EQ(from_table.state(i), from_tasks.state(i)) << i;
      EXPECT_EQ(from_table.outcome(i), from_tasks.outcome(i)) << i;
      EXPECT_EQ(from_table.ReadsOnlyUnchanged(i),
                from_tasks.ReadsOnlyUnchanged(i))
          << i;
      const auto a = from_table.IdentityInputs(i);
      const auto b = from_tasks.IdentityInputs(i);
      EXPECT_EQ(std::vector<uint32_t>(a.begin(), a.end()),
                std::vector<uint32_t>(b.begin(), b.end()))
          << i;
    }
    EXPECT_EQ(from_table.remaining(), from_tasks.remaining());
    // The same tasks become ready in the same order as tasks finish.
    while (true) {
      std::optional<size_t> a = from_table.Pop();
      std::optional<size_t> b = from_tasks.Pop();
      ASSERT_EQ(a, b);
      if (!a) break;
      from_table.Done(*a);
      from_tasks.Done(*b);
    }
  }
}

TEST(TaskGraphPropertyTest, NoTaskRunsBeforeItsInputsAndEachRunsOnce) {
  std::mt19937 rng(20250101);
  auto uniform = [&](int lo, int hi) {
    return std::uniform_int_distribution<int>(lo, hi)(rng);
  };
  int total_tasks = 0;
  for (int round = 0; round < 300; ++round) {
    SCOPED_TRACE(absl::StrCat("round ", round));
    RandomJob job = MakeRandomJob(rng);
    NamedGraph g = Make(job.plan, job.edges);
    Model model(g, job.edges);
    total_tasks += static_cast<int>(g.size());
    std::vector<int> handed_out(g.size(), 0);
    std::vector<size_t> running;
    int steps = 0;
    while (!g.AllDone()) {
      ASSERT_LT(++steps, 10000) << "no progress";
      if (running.empty() || uniform(0, 2) == 0) {
        // Pop, sometimes refusing one partition.
        const std::string refused =
            uniform(0, 3) == 0 ? absl::StrCat("p", uniform(0, 4)) : "-";
        std::optional<size_t> i =
            g.Pop([&](size_t j) { return g.partition(j) != refused; });
        if (!i.has_value()) {
          if (refused == "-") {
            // Nothing ready: something must still be running.
            ASSERT_EQ(model.ReadyCount(), 0u);
            ASSERT_FALSE(running.empty()) << "stuck with tasks left";
          }
          continue;
        }
        ASSERT_NE(g.partition(*i), refused);
        ASSERT_EQ(model.state()[*i], Node::kPending) << Name(g, *i);
        ASSERT_TRUE(model.InputsDone(*i))
            << Name(g, *i) << " handed out before its inputs were done";
        model.state()[*i] = Node::kRunning;
        ++handed_out[*i];
        running.push_back(*i);
      } else {
        // Finish a random running task.
        const size_t k = static_cast<size_t>(
            uniform(0, static_cast<int>(running.size()) - 1));
        const size_t i = running[k];
        running.erase(running.begin() + static_cast<long>(k));
        g.Done(i);
        model.state()[i] = Node::kDone;
      }
      ExpectAgrees(g, model);
      if (::testing::Test::HasFailure()) return;
    }
    for (size_t i = 0; i < g.size(); ++i) {
      EXPECT_EQ(handed_out[i], 1) << Name(g, i);
    }
  }
  EXPECT_GT(total_tasks, 1000);
}

TEST(TaskGraphPropertyTest, ReturnsAndReopensNeverLetATaskRunEarly) {
  std::mt19937 rng(7);
  auto uniform = [&](int lo, int hi) {
    return std::uniform_int_distribution<int>(lo, hi)(rng);
  };
  int reopened = 0;
  int returned = 0;
  for (int round = 0; round < 200; ++round) {
    SCOPED_TRACE(absl::StrCat("round ", round));
    RandomJob job = MakeRandomJob(rng);
    NamedGraph g = Make(job.plan, job.edges);
    Model model(g, job.edges);
    std::vector<size_t> running;
    std::vector<bool> ever_done(g.size(), false);
    int reopens_left = 3;
    int steps = 0;
    while (!g.AllDone() || !running.empty()) {
      ASSERT_LT(++steps, 20000) << "no progress";
      const int action = uniform(0, 9);
      if (action < 4 || running.empty()) {
        std::optional<size_t> i = g.Pop();
        if (!i.has_value()) {
          ASSERT_EQ(model.ReadyCount(), 0u);
          if (running.empty()) {
            ASSERT_TRUE(g.AllDone()) << "stuck with tasks left";
          }
          continue;
        }
        ASSERT_EQ(model.state()[*i], Node::kPending);
        ASSERT_TRUE(model.InputsDone(*i))
            << Name(g, *i) << " handed out before its inputs were done";
        model.state()[*i] = Node::kRunning;
        running.push_back(*i);
      } else if (action < 8) {
        const size_t k = static_cast<size_t>(
            uniform(0, static_cast<int>(running.size()) - 1));
        const size_t i = running[k];
        running.erase(running.begin() + static_cast<long>(k));
        g.Done(i);
        model.state()[i] = Node::kDone;
        ever_done[i] = true;
      } else if (action == 8) {
        const size_t k = static_cast<size_t>(
            uniform(0, static_cast<int>(running.size()) - 1));
        const size_t i = running[k];
        running.erase(running.begin() + static_cast<long>(k));
        g.Return(i);
        model.state()[i] = Node::kPending;
        ++returned;
      } else if (reopens_left > 0) {
        std::vector<size_t> done;
        for (size_t i = 0; i < g.size(); ++i) {
          if (model.state()[i] == Node::kDone) done.push_back(i);
        }
        if (done.empty()) continue;
        std::vector<size_t> lost = {
            done[uniform(0, static_cast<int>(done.size()) - 1)]};
        g.Reopen(lost);
        model.Reopen(lost);
        --reopens_left;
        ++reopened;
      }
      ExpectAgrees(g, model);
      if (::testing::Test::HasFailure()) return;
    }
    for (size_t i = 0; i < g.size(); ++i) {
      EXPECT_TRUE(ever_done[i]) << Name(g, i);
      EXPECT_EQ(g.state(i), Node::kDone) << Name(g, i);
    }
  }
  EXPECT_GT(reopened, 100);
  EXPECT_GT(returned, 100);
}

// ---- Early cutoff: which ready tasks read only unchanged or skipped ones --

// Pops `name`, which must be ready, and marks it done with `outcome`.
void Settle(NamedGraph& g, const std::string& name,
            TaskGraph::Outcome outcome) {
  std::optional<size_t> i = g.Pop([&](size_t j) { return Name(g, j) == name; });
  ASSERT_TRUE(i.has_value()) << name << " is not ready";
  g.Done(*i, outcome);
}
using Outcome = TaskGraph::Outcome;

TEST(TaskGraphCutoffTest, IdentityDependentsFollowTheirOwnPartition) {
  NamedGraph g = Make({{"daily", {"d1", "d2"}}, {"total", {"d1", "d2"}}},
                      {{"total", {Identity("daily")}}});
  // Not while its input is not done.
  EXPECT_FALSE(g.ReadsOnlyUnchanged(Find(g, "total/d1")));
  Settle(g, "daily/d1", Outcome::kUnchanged);
  Settle(g, "daily/d2", Outcome::kChanged);
  EXPECT_TRUE(g.ReadsOnlyUnchanged(Find(g, "total/d1")));
  EXPECT_FALSE(g.ReadsOnlyUnchanged(Find(g, "total/d2")));
  // A task that reads nothing in the job is never a candidate.
  EXPECT_FALSE(g.ReadsOnlyUnchanged(Find(g, "daily/d1")));
  EXPECT_THAT(g.IdentityInputs(Find(g, "total/d1")),
              ElementsAre(Find(g, "daily/d1")));
}

TEST(TaskGraphCutoffTest, SkippedInputsCountAsUnchangedDownAChain) {
  NamedGraph g = Make({{"a", {"p"}}, {"b", {"p"}}, {"c", {"p"}}},
                      {{"b", {Identity("a")}}, {"c", {Identity("b")}}});
  Settle(g, "a/p", Outcome::kUnchanged);
  EXPECT_TRUE(g.ReadsOnlyUnchanged(Find(g, "b/p")));
  Settle(g, "b/p", Outcome::kSkipped);
  EXPECT_TRUE(g.ReadsOnlyUnchanged(Find(g, "c/p")));
  EXPECT_TRUE(g.AllDone() == false);
  Settle(g, "c/p", Outcome::kSkipped);
  EXPECT_TRUE(g.AllDone());
}

TEST(TaskGraphCutoffTest, TwoInputsOneChangedMeansItRuns) {
  // mixed reads daily and total partition by partition.
  NamedGraph g = Make({{"daily", {"d1", "d2"}},
                       {"total", {"d1", "d2"}},
                       {"mixed", {"d1", "d2"}}},
                      {{"total", {Identity("daily")}},
                       {"mixed", {Identity("daily"), Identity("total")}}});
  Settle(g, "daily/d1", Outcome::kChanged);
  Settle(g, "daily/d2", Outcome::kUnchanged);
  Settle(g, "total/d1", Outcome::kUnchanged);  // ran, came out identical
  Settle(g, "total/d2", Outcome::kSkipped);
  EXPECT_FALSE(g.ReadsOnlyUnchanged(Find(g, "mixed/d1")));  // daily changed
  EXPECT_TRUE(g.ReadsOnlyUnchanged(Find(g, "mixed/d2")));
}

TEST(TaskGraphCutoffTest, WholeTableReadersNeedEveryTaskOfTheDataset) {
  NamedGraph g = Make({{"daily", {"d1", "d2", "d3"}}, {"region", {""}}},
                      {{"region", {All("daily")}}});
  const size_t region = Find(g, "region/");
  Settle(g, "daily/d1", Outcome::kUnchanged);
  Settle(g, "daily/d2", Outcome::kSkipped);
  EXPECT_FALSE(g.ReadsOnlyUnchanged(region));  // d3 not done yet
  Settle(g, "daily/d3", Outcome::kUnchanged);
  EXPECT_TRUE(g.ReadsOnlyUnchanged(region));

  NamedGraph h = Make({{"daily", {"d1", "d2"}}, {"region", {""}}},
                      {{"region", {All("daily")}}});
  Settle(h, "daily/d1", Outcome::kUnchanged);
  Settle(h, "daily/d2", Outcome::kChanged);
  EXPECT_FALSE(h.ReadsOnlyUnchanged(Find(h, "region/")));
}

TEST(TaskGraphCutoffTest, WholeTableAndIdentityInputsTogether) {
  NamedGraph g =
      Make({{"dim", {"x1", "x2"}}, {"daily", {"d1"}}, {"joined", {"d1"}}},
           {{"joined", {Identity("daily"), All("dim")}}});
  const size_t joined = Find(g, "joined/d1");
  Settle(g, "daily/d1", Outcome::kUnchanged);
  Settle(g, "dim/x1", Outcome::kUnchanged);
  Settle(g, "dim/x2", Outcome::kChanged);
  EXPECT_FALSE(g.ReadsOnlyUnchanged(joined));
}

TEST(TaskGraphCutoffTest, OutcomesSurviveARebuildAndReopenClearsThem) {
  // As loaded after a restart: settled tasks come in done, with outcomes.
  std::vector<TaskGraph::Task> tasks = {
      {"daily", "d1", Node::kDone, Outcome::kUnchanged},
      {"daily", "d2", Node::kDone, Outcome::kChanged},
      {"region", "", Node::kPending, Outcome::kChanged},
      {"total", "d1", Node::kDone, Outcome::kSkipped},
      {"total", "d2", Node::kPending, Outcome::kChanged}};
  Edges edges = {{"region", {All("daily")}}, {"total", {Identity("daily")}}};
  NamedGraph g(tasks, [edges](const std::string& d) {
    auto it = edges.find(d);
    return it == edges.end() ? std::vector<UpstreamEdge>() : it->second;
  });
  EXPECT_FALSE(g.ReadsOnlyUnchanged(Find(g, "region/")));  // d2 changed
  EXPECT_FALSE(g.ReadsOnlyUnchanged(Find(g, "total/d2")));
  EXPECT_EQ(g.remaining(), 2u);
  // d2's staged rows were lost: it and what read it run again; once d2
  // comes out unchanged, region reads only unchanged tasks.
  g.Reopen({Find(g, "daily/d2")});
  EXPECT_EQ(g.state(Find(g, "daily/d2")), Node::kPending);
  Settle(g, "daily/d2", Outcome::kUnchanged);
  EXPECT_TRUE(g.ReadsOnlyUnchanged(Find(g, "region/")));
  EXPECT_TRUE(g.ReadsOnlyUnchanged(Find(g, "total/d2")));
  // Reopening an unchanged task clears its outcome.
  g.Reopen({Find(g, "daily/d1")});
  EXPECT_EQ(g.outcome(Find(g, "daily/d1")), Outcome::kChanged);
  EXPECT_EQ(g.state(Find(g, "total/d1")), Node::kPending);
  EXPECT_FALSE(g.ReadsOnlyUnchanged(Find(g, "total/d1")));
}

// ---- What the graph keeps of a task's partition ---------------------------

TEST(TaskGraphTest, InterleavedDatasetsKeepTheirTasksApart) {
  // Tasks of two datasets in alternation, as a store may list them.
  std::vector<TaskGraph::Task> tasks = {{"a", "p1"}, {"b", "p1"}, {"a", "p2"},
                                        {"b", "p2"}, {"b", "p3"}, {"a", "p3"},
                                        {"c", ""},   {"a", "p4"}};
  NamedGraph g(tasks, EdgesOf({{"b", {Identity("a")}}, {"c", {All("b")}}}));
  EXPECT_EQ(g.dataset(0), "a");
  EXPECT_EQ(g.dataset(4), "b");
  EXPECT_EQ(g.dataset(6), "c");
  EXPECT_EQ(g.dataset(7), "a");
  EXPECT_THAT(g.IdentityInputs(4), ElementsAre(5u));  // b/p3 reads a/p3
  EXPECT_THAT(g.IdentityInputs(7), IsEmpty());
  EXPECT_THAT(Ready(g), ElementsAre("a/p1", "a/p2", "a/p3", "a/p4"));
  ASSERT_NO_FATAL_FAILURE(RunTask(g, "a/p3"));
  ASSERT_NO_FATAL_FAILURE(RunTask(g, "a/p1"));
  EXPECT_THAT(Ready(g), ElementsAre("a/p2", "a/p4", "b/p3", "b/p1"));
  ASSERT_NO_FATAL_FAILURE(RunTask(g, "a/p2"));
  ASSERT_NO_FATAL_FAILURE(RunTask(g, "b/p1"));
  ASSERT_NO_FATAL_FAILURE(RunTask(g, "b/p2"));
  // c waits for b/p3 only; a/p4 is not read by anything.
  EXPECT_THAT(Ready(g), ElementsAre("a/p4", "b/p3"));
  ASSERT_NO_FATAL_FAILURE(RunTask(g, "b/p3"));
  EXPECT_THAT(Ready(g), ElementsAre("a/p4", "c/"));
  g.Reopen({Find(g, "a/p2")});
  for (const char* name : {"a/p2", "b/p2", "c/"}) {
    EXPECT_EQ(g.state(Find(g, name)), Node::kPending) << name;
  }
  EXPECT_EQ(g.CountIn(Node::kDone), 4u);
}

TEST(TaskGraphTest, AnUpstreamWithoutTasksInTheJobIsNotWaitedFor) {
  // "empty" is planned with no partition: it has no task in the job.
  const Grains grains = {{"empty", Grain::kDay}, {"monthly", Grain::kMonth}};
  NamedGraph g =
      MakeWithGrains({{"empty", {}}, {"monthly", {"2025-01", "2025-02"}}},
                     {{"monthly",
                       {Rollup("empty"), Identity("empty"), All("empty"),
                        Lookback("empty", 1)}}},
                     grains);
  EXPECT_EQ(g.size(), 2u);
  EXPECT_THAT(Ready(g), ElementsAre("monthly/2025-01", "monthly/2025-02"));
  EXPECT_THAT(g.IdentityInputs(0), IsEmpty());
  // It reads nothing in the job: never a candidate for the cutoff.
  EXPECT_FALSE(g.ReadsOnlyUnchanged(0));
  ASSERT_NO_FATAL_FAILURE(RunTask(g, "monthly/2025-01"));
  ASSERT_NO_FATAL_FAILURE(RunTask(g, "monthly/2025-02"));
  EXPECT_TRUE(g.AllDone());
}

TEST(TaskGraphTest, APartitionTheRollupCannotMapWaitsForTheWholeUpstream) {
  const Grains grains = {{"daily", Grain::kDay}, {"monthly", Grain::kMonth}};
  NamedGraph g = MakeWithGrains({{"daily", {"2025-01-31", "2025-02-01"}},
                                 {"monthly", {"2025-01", "bogus"}}},
                                {{"monthly", {Rollup("daily")}}}, grains);
  EXPECT_THAT(g.IdentityInputs(Find(g, "monthly/2025-01")),
              ElementsAre(Find(g, "daily/2025-01-31")));
  EXPECT_THAT(g.IdentityInputs(Find(g, "monthly/bogus")), IsEmpty());
  Settle(g, "daily/2025-01-31", Outcome::kUnchanged);
  EXPECT_THAT(Ready(g), ElementsAre("daily/2025-02-01", "monthly/2025-01"));
  EXPECT_TRUE(g.ReadsOnlyUnchanged(Find(g, "monthly/2025-01")));
  EXPECT_FALSE(g.ReadsOnlyUnchanged(Find(g, "monthly/bogus")));
  Settle(g, "daily/2025-02-01", Outcome::kUnchanged);
  EXPECT_THAT(Ready(g), ElementsAre("monthly/2025-01", "monthly/bogus"));
  EXPECT_TRUE(g.ReadsOnlyUnchanged(Find(g, "monthly/bogus")));
  ASSERT_NO_FATAL_FAILURE(RunTask(g, "monthly/2025-01"));
  ASSERT_NO_FATAL_FAILURE(RunTask(g, "monthly/bogus"));
  // Losing February reopens the task that read all of daily, not January.
  g.Reopen({Find(g, "daily/2025-02-01")});
  EXPECT_EQ(g.state(Find(g, "monthly/bogus")), Node::kPending);
  EXPECT_EQ(g.state(Find(g, "monthly/2025-01")), Node::kDone);
  EXPECT_EQ(g.remaining(), 2u);
}

TEST(TaskGraphTest, EdgesAndGrainsAreAskedForOncePerDataset) {
  std::map<std::string, int> upstream_calls;
  std::map<std::string, int> grain_calls;
  std::vector<TaskGraph::Task> tasks;
  for (int p = 0; p < 50; ++p) {
    const std::string day =
        absl::StrCat("2025-01-", p % 28 + 1 < 10 ? "0" : "", p % 28 + 1);
    tasks.push_back({"daily", day});
    tasks.push_back({"rolling", day});
  }
  TaskGraph g(
      tasks,
      [&](const std::string& d) {
        ++upstream_calls[d];
        return d == "rolling" ? std::vector<UpstreamEdge>{Lookback("daily", 2)}
                              : std::vector<UpstreamEdge>{};
      },
      [&](const std::string& d) {
        ++grain_calls[d];
        return PartitionLayout(Grain::kDay);
      });
  EXPECT_EQ(upstream_calls,
            (std::map<std::string, int>{{"daily", 1}, {"rolling", 1}}));
  EXPECT_EQ(grain_calls,
            (std::map<std::string, int>{{"daily", 1}, {"rolling", 1}}));
  EXPECT_EQ(g.size(), 100u);
}

// ---- Against a reference implementation ----------------------------------

// The graph's contract computed naively from the tasks and edges: scans over
// every task, the ready queue kept as the contract describes it.
class Reference {
 public:
  Reference(const std::vector<TaskGraph::Task>& tasks, const Edges& edges,
            const Grains* grains)
      : tasks_(tasks), inputs_(tasks.size()), whole_(tasks.size()) {
    auto layout = [&](const std::string& d) -> PartitionLayout {
      auto it = grains->find(d);
      return it == grains->end() ? PartitionLayout(Grain::kNone) : it->second;
    };
    auto tasks_of = [&](const std::string& d, const std::string& p) {
      std::vector<size_t> out;
      for (size_t k = 0; k < tasks_.size(); ++k) {
        if (tasks_[k].dataset == d && tasks_[k].partition == p) {
          out.push_back(k);
        }
      }
      return out;
    };
    for (size_t j = 0; j < tasks_.size(); ++j) {
      const std::string& d = tasks_[j].dataset;
      auto it = edges.find(d);
      if (it == edges.end()) continue;
      for (const UpstreamEdge& e : it->second) {
        if (TasksOf(e.dataset).empty()) continue;
        const bool same_shape =
            grains == nullptr ||
            layout(e.dataset).two_dimensional() == layout(d).two_dimensional();
        std::vector<std::string> read;
        if (e.mapping == Mapping::kIdentity && same_shape) {
          read = {tasks_[j].partition};
        } else if (e.mapping != Mapping::kAll && grains != nullptr) {
          absl::StatusOr<std::optional<std::vector<std::string>>> r =
              PartitionsRead(e, layout(e.dataset), layout(d),
                             tasks_[j].partition);
          if (!r.ok() || !r->has_value()) {
            whole_[j].push_back(e.dataset);
            continue;
          }
          read = **r;
        } else {
          whole_[j].push_back(e.dataset);
          continue;
        }
        for (const std::string& p : read) {
          for (size_t k : tasks_of(e.dataset, p)) inputs_[j].push_back(k);
        }
      }
    }
    Requeue();
  }

  const std::vector<size_t>& inputs(size_t j) const { return inputs_[j]; }
  bool ReadsWhole(size_t j) const { return !whole_[j].empty(); }
  Node state(size_t j) const { return tasks_[j].state; }
  Outcome outcome(size_t j) const { return tasks_[j].outcome; }
  const std::deque<size_t>& ready() const { return ready_; }
  size_t Count(Node s) const {
    size_t n = 0;
    for (const TaskGraph::Task& t : tasks_) n += t.state == s ? 1 : 0;
    return n;
  }

  std::vector<size_t> TasksOf(const std::string& d) const {
    std::vector<size_t> out;
    for (size_t k = 0; k < tasks_.size(); ++k) {
      if (tasks_[k].dataset == d) out.push_back(k);
    }
    return out;
  }

  // Inputs of j not done, each whole dataset with a task not done counting
  // once per edge.
  int Waiting(size_t j) const {
    int n = 0;
    for (size_t k : inputs_[j]) n += tasks_[k].state != Node::kDone ? 1 : 0;
    for (const std::string& d : whole_[j]) n += AllDone(d) ? 0 : 1;
    return n;
  }
  bool AllDone(const std::string& d) const {
    for (size_t k : TasksOf(d)) {
      if (tasks_[k].state != Node::kDone) return false;
    }
    return true;
  }
  bool Queued(size_t j) const {
    return std::find(ready_.begin(), ready_.end(), j) != ready_.end();
  }

  bool ReadsOnlyUnchanged(size_t j) const {
    if (inputs_[j].empty() && whole_[j].empty()) return false;
    auto unchanged = [&](size_t k) {
      return tasks_[k].state == Node::kDone &&
             tasks_[k].outcome != Outcome::kChanged;
    };
    for (size_t k : inputs_[j]) {
      if (!unchanged(k)) return false;
    }
    for (const std::string& d : whole_[j]) {
      for (size_t k : TasksOf(d)) {
        if (!unchanged(k)) return false;
      }
    }
    return true;
  }

  std::optional<size_t> Pop(const std::function<bool(size_t)>& accept) {
    for (auto it = ready_.begin(); it != ready_.end(); ++it) {
      if (!accept(*it)) continue;
      const size_t i = *it;
      ready_.erase(it);
      tasks_[i].state = Node::kRunning;
      return i;
    }
    return std::nullopt;
  }

  // Tasks that became ready queue in the order they became ready: those
  // waiting only for i by partition first, then those that read i's
  // dataset whole if i was its last task not done; each group in plan
  // order.
  void Done(size_t i, Outcome outcome) {
    if (tasks_[i].state != Node::kRunning) return;
    std::vector<int> before(tasks_.size());
    for (size_t j = 0; j < tasks_.size(); ++j) before[j] = Waiting(j);
    tasks_[i].state = Node::kDone;
    tasks_[i].outcome = outcome;
    const std::string& d = tasks_[i].dataset;
    const bool completed = AllDone(d);
    std::vector<size_t> by_partition, by_dataset;
    for (size_t j = 0; j < tasks_.size(); ++j) {
      if (tasks_[j].state != Node::kPending || Queued(j) || before[j] == 0 ||
          Waiting(j) != 0) {
        continue;
      }
      const bool whole = std::count(whole_[j].begin(), whole_[j].end(), d) > 0;
      (completed && whole ? by_dataset : by_partition).push_back(j);
    }
    ready_.insert(ready_.end(), by_partition.begin(), by_partition.end());
    ready_.insert(ready_.end(), by_dataset.begin(), by_dataset.end());
  }

  void Return(size_t i) {
    if (tasks_[i].state != Node::kRunning) return;
    tasks_[i].state = Node::kPending;
    if (Waiting(i) == 0 && !Queued(i)) ready_.push_front(i);
  }
  void Fail(size_t i) {
    if (tasks_[i].state == Node::kRunning) tasks_[i].state = Node::kFailed;
  }
  void ResetFailed() {
    for (TaskGraph::Task& t : tasks_) {
      if (t.state == Node::kFailed) t.state = Node::kPending;
    }
    Requeue();
  }
  void Reopen(const std::vector<size_t>& lost) {
    std::vector<size_t> stack = lost;
    std::set<size_t> seen;
    while (!stack.empty()) {
      const size_t i = stack.back();
      stack.pop_back();
      if (!seen.insert(i).second) continue;
      if (tasks_[i].state == Node::kDone) {
        tasks_[i].state = Node::kPending;
        tasks_[i].outcome = Outcome::kChanged;
      }
      for (size_t j = 0; j < tasks_.size(); ++j) {
        const bool reads =
            std::count(inputs_[j].begin(), inputs_[j].end(), i) > 0 ||
            std::count(whole_[j].begin(), whole_[j].end(), tasks_[i].dataset) >
                0;
        if (reads) stack.push_back(j);
      }
    }
    Requeue();
  }
  void ClearReady() { ready_.clear(); }
  void Requeue() {
    ready_.clear();
    for (size_t j = 0; j < tasks_.size(); ++j) {
      if (tasks_[j].state == Node::kPending && Waiting(j) == 0) {
        ready_.push_back(j);
      }
    }
  }

 private:
  std::vector<TaskGraph::Task> tasks_;
  // Per task: the tasks it reads by partition, and the datasets it reads
  // whole (once per edge).
  std::vector<std::vector<size_t>> inputs_;
  std::vector<std::vector<std::string>> whole_;
  std::deque<size_t> ready_;
};

struct GeneratedJob {
  std::vector<TaskGraph::Task> tasks;
  Edges edges;
  Grains grains;
  bool with_grains = true;
};

// Datasets of every shape with identity, rollup, lookback and whole-table
// edges between them (some the layouts do not allow, some to datasets
// without tasks in the job), a partition now and then no mapping can read,
// tasks in plan order or interleaved, and states as a resumed job has them.
GeneratedJob GenerateJob(std::mt19937& rng) {
  auto uniform = [&](int lo, int hi) {
    return std::uniform_int_distribution<int>(lo, hi)(rng);
  };
  struct Shape {
    PartitionLayout layout;
    std::vector<std::string> partitions;
  };
  const std::vector<Shape> shapes = {
      {Grain::kHour,
       {"2025-01-31T22", "2025-01-31T23", "2025-02-01T00", "2025-02-01T01"}},
      {Grain::kDay, {"2025-01-30", "2025-01-31", "2025-02-01", "2025-02-02"}},
      {Grain::kMonth, {"2025-01", "2025-02", "2025-03"}},
      {PartitionLayout(Grain::kDay, {"eu", "us"}),
       {"2025-01-31|eu", "2025-01-31|us", "2025-02-01|eu", "2025-02-01|us"}},
      {Grain::kNone, {""}},
  };
  GeneratedJob job;
  job.with_grains = uniform(0, 3) > 0;
  const int datasets = uniform(1, 6);
  for (int d = 0; d < datasets; ++d) {
    const std::string name = absl::StrCat("d", d);
    const Shape& shape = shapes[static_cast<size_t>(
        uniform(0, static_cast<int>(shapes.size()) - 1))];
    job.grains[name] = shape.layout;
    for (const std::string& p : shape.partitions) {
      if (uniform(0, 2) > 0) job.tasks.push_back({name, p});
    }
    if (uniform(0, 7) == 0) job.tasks.push_back({name, "bogus"});
    for (int u = 0; u < d; ++u) {
      if (uniform(0, 2) != 0) continue;
      const std::string up = absl::StrCat("d", u);
      UpstreamEdge e;
      switch (uniform(0, 5)) {
        case 0:
          e = All(up);
          break;
        case 1:
          e = Rollup(up);
          break;
        case 2:
          e = Lookback(up, uniform(1, 2));
          break;
        default:
          e = Identity(up);
      }
      job.edges[name].push_back(e);
      if (uniform(0, 9) == 0) job.edges[name].push_back(e);  // twice
    }
    if (uniform(0, 4) == 0) job.edges[name].push_back(Identity("outside"));
    if (uniform(0, 6) == 0) job.edges[name].push_back(All("outside"));
  }
  if (uniform(0, 1) == 0) std::shuffle(job.tasks.begin(), job.tasks.end(), rng);
  for (TaskGraph::Task& t : job.tasks) {
    const int s = uniform(0, 9);
    if (s >= 6 && s <= 8) {
      t.state = Node::kDone;
      t.outcome = static_cast<Outcome>(uniform(0, 2));
    } else if (s == 9) {
      t.state = uniform(0, 1) == 0 ? Node::kFailed : Node::kRunning;
    }
  }
  return job;
}

// Every observable of the graph against the reference.
void ExpectSame(const NamedGraph& g, const Reference& ref) {
  for (size_t i = 0; i < g.size(); ++i) {
    ASSERT_EQ(g.state(i), ref.state(i)) << Name(g, i);
    ASSERT_EQ(g.outcome(i), ref.outcome(i)) << Name(g, i);
    ASSERT_EQ(g.ReadsOnlyUnchanged(i), ref.ReadsOnlyUnchanged(i)) << Name(g, i);
  }
  ASSERT_EQ(g.remaining(), g.size() - ref.Count(Node::kDone));
  ASSERT_EQ(g.AllDone(), ref.Count(Node::kDone) == g.size());
  ASSERT_EQ(g.running(), ref.Count(Node::kRunning));
  for (Node s : {Node::kPending, Node::kRunning, Node::kDone, Node::kFailed}) {
    ASSERT_EQ(g.CountIn(s), ref.Count(s));
  }
  // The queue's order, read off a copy.
  TaskGraph copy = g;
  std::vector<size_t> order;
  while (std::optional<size_t> i = copy.Pop()) order.push_back(*i);
  ASSERT_THAT(order, ::testing::ElementsAreArray(ref.ready()));
  ASSERT_EQ(g.ready(), ref.ready().size());
}

TEST(TaskGraphReferenceTest, EveryStepAgreesWithTheReference) {
  std::mt19937 rng(31337);
  auto uniform = [&](int lo, int hi) {
    return std::uniform_int_distribution<int>(lo, hi)(rng);
  };
  std::map<std::string, int> seen;  // how often each case came up
  for (int round = 0; round < 400; ++round) {
    SCOPED_TRACE(absl::StrCat("round ", round));
    GeneratedJob job = GenerateJob(rng);
    NamedGraph g = job.with_grains ? NamedGraph(job.tasks, EdgesOf(job.edges),
                                                [&](const std::string& d) {
                                                  auto it = job.grains.find(d);
                                                  return it == job.grains.end()
                                                             ? PartitionLayout()
                                                             : it->second;
                                                })
                                   : NamedGraph(job.tasks, EdgesOf(job.edges));
    Reference ref(job.tasks, job.edges,
                  job.with_grains ? &job.grains : nullptr);
    for (size_t i = 0; i < g.size(); ++i) {
      ASSERT_THAT(g.IdentityInputs(i), ElementsAreArray(ref.inputs(i)))
          << Name(g, i);
      if (!ref.inputs(i).empty()) ++seen["partition inputs"];
      if (ref.ReadsWhole(i)) ++seen["whole inputs"];
      if (ref.ReadsWhole(i) && g.partition(i) == "bogus") {
        ++seen["unmapped partition read whole"];
      }
    }
    ASSERT_NO_FATAL_FAILURE(ExpectSame(g, ref));
    std::vector<size_t> running;
    for (size_t i = 0; i < g.size(); ++i) {
      if (ref.state(i) == Node::kRunning) running.push_back(i);
    }
    auto take_running = [&]() {
      const size_t k =
          static_cast<size_t>(uniform(0, static_cast<int>(running.size()) - 1));
      const size_t i = running[k];
      running.erase(running.begin() + static_cast<long>(k));
      return i;
    };
    for (int step = 0; step < 120; ++step) {
      const int action = uniform(0, 19);
      if (action < 7 || (running.empty() && action < 14)) {
        // Pop, now and then refusing some tasks.
        const int refuse = uniform(0, 2) == 0 ? uniform(0, 2) : -1;
        auto accept = [refuse](size_t j) {
          return static_cast<int>(j % 3) != refuse;
        };
        std::optional<size_t> i = g.Pop(accept);
        ASSERT_EQ(i, ref.Pop(accept));
        if (i) running.push_back(*i);
        ++seen["pop"];
      } else if (action < 14) {
        const size_t i = take_running();
        const Outcome o = static_cast<Outcome>(uniform(0, 2));
        g.Done(i, o);
        ref.Done(i, o);
        ++seen["done"];
      } else if (action < 16 && !running.empty()) {
        const size_t i = take_running();
        g.Return(i);
        ref.Return(i);
        ++seen["return"];
      } else if (action == 16 && !running.empty()) {
        const size_t i = take_running();
        g.Fail(i);
        ref.Fail(i);
        ++seen["fail"];
      } else if (action == 17 && uniform(0, 2) == 0) {
        g.ResetFailed();
        ref.ResetFailed();
        ++seen["reset"];
      } else if (action == 18 && g.size() > 0) {
        // Any tasks, done or not (a task not done is not reopened, but its
        // readers are).
        std::vector<size_t> lost;
        for (int k = uniform(1, 2); k > 0; --k) {
          lost.push_back(
              static_cast<size_t>(uniform(0, static_cast<int>(g.size()) - 1)));
        }
        g.Reopen(lost);
        ref.Reopen(lost);
        ++seen["reopen"];
      } else if (action == 19) {
        if (uniform(0, 1) == 0) {
          g.ClearReady();
          ref.ClearReady();
          ++seen["clear"];
        } else {
          g.Requeue();
          ref.Requeue();
          ++seen["requeue"];
        }
      }
      // Tasks that were running and are no more (reopened, reset): the
      // reference says which.
      running.erase(std::remove_if(running.begin(), running.end(),
                                   [&](size_t i) {
                                     return ref.state(i) != Node::kRunning;
                                   }),
                    running.end());
      ASSERT_NO_FATAL_FAILURE(ExpectSame(g, ref)) << "step " << step;
      for (size_t i = 0; i < g.size(); ++i) {
        if (ref.ReadsOnlyUnchanged(i) && ref.state(i) == Node::kPending) {
          ++seen["pending, reading only unchanged"];
          break;
        }
      }
    }
  }
  for (const char* c :
       {"partition inputs", "whole inputs", "unmapped partition read whole",
        "pop", "done", "pending, reading only unchanged", "return", "fail",
        "reset", "reopen", "clear", "requeue"}) {
    EXPECT_GT(seen[c], 20) << c;
  }
}

}  // namespace
}  // namespace core_task_graph_test
}  // namespace backfill
