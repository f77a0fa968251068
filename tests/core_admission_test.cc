// Admission: per partition, jobs run one at a time in admission order; held
// jobs block nobody and are superseded. Unit cases and a randomized
// simulation checked against an independent model.

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/run/admission.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace backfill {
namespace core_admission_test {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

// "d:p1,d:p2" -> {(d, p1), (d, p2)}.
Scope S(std::initializer_list<std::pair<const char*, const char*>> pairs) {
  Scope scope;
  for (const auto& [d, p] : pairs) scope.insert({d, p});
  return scope;
}

// "id:n" per overlap, for comparing.
std::vector<std::string> Ids(const std::vector<Admission::Overlap>& overlaps) {
  std::vector<std::string> out;
  for (const Admission::Overlap& o : overlaps) {
    out.push_back(absl::StrCat(o.job_id, ":", o.partitions));
  }
  return out;
}

TEST(AdmissionTest, ScopeOfAPlanIsEveryPlannedPair) {
  Plan plan;
  plan.datasets = {{"orders", {"d1", "d2"}, "requested", "", {}},
                   {"revenue", {"d1"}, "downstream", "", {}},
                   {"empty", {}, "", "", {}}};
  EXPECT_THAT(
      ScopeOf(plan),
      ElementsAre(std::pair<std::string, std::string>{"orders", "d1"},
                  std::pair<std::string, std::string>{"orders", "d2"},
                  std::pair<std::string, std::string>{"revenue", "d1"}));
}

TEST(AdmissionTest, LaterOverlappingJobsWaitForEarlierOnes) {
  Admission a;
  a.Add("bf-1", S({{"d", "p1"}, {"d", "p2"}}));
  a.Add("bf-2", S({{"d", "p2"}, {"d", "p3"}}));
  a.Add("bf-3", S({{"d", "p4"}}));
  a.Add("bf-4", S({{"d", "p1"}, {"d", "p3"}, {"e", "p1"}}));
  EXPECT_THAT(Ids(a.Blockers("bf-1")), IsEmpty());
  EXPECT_THAT(Ids(a.Blockers("bf-2")), ElementsAre("bf-1:1"));
  EXPECT_THAT(Ids(a.Blockers("bf-3")), IsEmpty());  // disjoint
  EXPECT_THAT(Ids(a.Blockers("bf-4")), ElementsAre("bf-1:1", "bf-2:1"));
  // Same partition value of another dataset is another partition.
  a.Add("bf-5", S({{"e", "p2"}, {"f", "p1"}}));
  EXPECT_THAT(Ids(a.Blockers("bf-5")), IsEmpty());
  EXPECT_THAT(a.Order(), ElementsAre("bf-1", "bf-2", "bf-3", "bf-4", "bf-5"));
  EXPECT_TRUE(a.Contains("bf-3"));
  EXPECT_FALSE(a.Contains("bf-9"));
  EXPECT_THAT(Ids(a.Blockers("bf-9")), IsEmpty());
}

TEST(AdmissionTest, BlockersComeInAdmissionOrderWithSharedCounts) {
  Admission a;
  // Ids that sort differently from admission order.
  a.Add("z", S({{"d", "1"}, {"d", "2"}, {"d", "3"}}));
  a.Add("m", S({{"d", "3"}, {"d", "4"}}));
  a.Add("a", S({{"d", "4"}}));
  a.Add("new", S({{"d", "1"}, {"d", "2"}, {"d", "3"}, {"d", "4"}}));
  EXPECT_THAT(Ids(a.Blockers("new")), ElementsAre("z:3", "m:2", "a:1"));
  EXPECT_THAT(Ids(a.Blockers("a")), ElementsAre("m:1"));
  EXPECT_THAT(Ids(a.Blockers("m")), ElementsAre("z:1"));
}

TEST(AdmissionTest, HeldJobsBlockNobodyAndAreOverlapsToSupersede) {
  Admission a;
  a.Add("bf-1", S({{"d", "p1"}, {"d", "p2"}}), /*held=*/true);
  a.Add("bf-2", S({{"d", "p2"}}));
  a.Add("bf-3", S({{"d", "p1"}, {"d", "p2"}}));
  a.Add("bf-4", S({{"d", "p1"}}), /*held=*/true);
  EXPECT_TRUE(a.IsHeld("bf-1"));
  EXPECT_FALSE(a.IsHeld("bf-2"));
  EXPECT_FALSE(a.IsHeld("bf-9"));
  EXPECT_THAT(Ids(a.Blockers("bf-2")), IsEmpty());
  EXPECT_THAT(Ids(a.Blockers("bf-3")), ElementsAre("bf-2:1"));
  // Held jobs added before and after, by id.
  EXPECT_THAT(Ids(a.HeldOverlaps("bf-3")), ElementsAre("bf-1:2", "bf-4:1"));
  EXPECT_THAT(Ids(a.HeldOverlaps("bf-2")), ElementsAre("bf-1:1"));
  EXPECT_THAT(Ids(a.HeldOverlaps("bf-1")), ElementsAre("bf-4:1"));

  // It blocks again once no longer held.
  a.SetHeld("bf-1", false);
  EXPECT_THAT(Ids(a.Blockers("bf-2")), ElementsAre("bf-1:1"));
  EXPECT_THAT(Ids(a.Blockers("bf-3")), ElementsAre("bf-1:2", "bf-2:1"));
  EXPECT_THAT(Ids(a.HeldOverlaps("bf-3")), ElementsAre("bf-4:1"));
  a.SetHeld("bf-2", true);
  EXPECT_THAT(Ids(a.Blockers("bf-3")), ElementsAre("bf-1:2"));
  a.SetHeld("bf-9", true);  // unknown: nothing happens
  EXPECT_FALSE(a.Contains("bf-9"));
}

TEST(AdmissionTest, AddingAgainQueuesAtTheEnd) {
  Admission a;
  a.Add("bf-1", S({{"d", "p1"}}), /*held=*/true);  // e.g. FAILED, kept
  a.Add("bf-2", S({{"d", "p1"}, {"d", "p2"}}));
  EXPECT_THAT(Ids(a.Blockers("bf-2")), IsEmpty());
  // bf-1 is retried: it queues behind everything, blocking again.
  a.Add("bf-1", S({{"d", "p1"}, {"d", "p3"}}));
  EXPECT_THAT(a.Order(), ElementsAre("bf-2", "bf-1"));
  EXPECT_FALSE(a.IsHeld("bf-1"));
  EXPECT_THAT(Ids(a.Blockers("bf-1")), ElementsAre("bf-2:1"));
  EXPECT_THAT(Ids(a.Blockers("bf-2")), IsEmpty());
  // With its new scope only.
  ASSERT_NE(a.ScopeOf("bf-1"), nullptr);
  EXPECT_EQ(*a.ScopeOf("bf-1"), S({{"d", "p1"}, {"d", "p3"}}));
  a.Add("bf-3", S({{"d", "p3"}}));
  EXPECT_THAT(Ids(a.Blockers("bf-3")), ElementsAre("bf-1:1"));
}

TEST(AdmissionTest, RemoveUnblocksAndForgets) {
  Admission a;
  a.Add("bf-1", S({{"d", "p1"}}));
  a.Add("bf-2", S({{"d", "p1"}}));
  a.Add("bf-3", S({{"d", "p1"}}));
  EXPECT_THAT(Ids(a.Blockers("bf-3")), ElementsAre("bf-1:1", "bf-2:1"));
  a.Remove("bf-1");
  EXPECT_FALSE(a.Contains("bf-1"));
  EXPECT_EQ(a.ScopeOf("bf-1"), nullptr);
  EXPECT_THAT(Ids(a.Blockers("bf-2")), IsEmpty());
  EXPECT_THAT(Ids(a.Blockers("bf-3")), ElementsAre("bf-2:1"));
  a.Remove("bf-1");  // twice: nothing happens
  a.Remove("bf-9");
  EXPECT_THAT(a.Order(), ElementsAre("bf-2", "bf-3"));
  a.Remove("bf-2");
  a.Remove("bf-3");
  EXPECT_THAT(a.Order(), IsEmpty());
  std::vector<Conflict> conflicts;
  EXPECT_THAT(Ids(a.Overlapping(S({{"d", "p1"}}), &conflicts, 10)), IsEmpty());
  EXPECT_THAT(conflicts, IsEmpty());
}

TEST(AdmissionTest, OverlappingReportsJobsAPlanWouldWaitFor) {
  Admission a;
  a.Add("bf-2", S({{"d", "p1"}, {"d", "p2"}, {"d", "p3"}}));
  a.Add("bf-1", S({{"d", "p3"}, {"e", "p1"}}));
  a.Add("bf-3", S({{"d", "p1"}}), /*held=*/true);
  a.Add("bf-4", S({{"x", "p1"}}));
  const Scope plan = S({{"d", "p1"}, {"d", "p2"}, {"d", "p3"}, {"e", "p1"}});

  std::vector<Conflict> conflicts;
  EXPECT_THAT(Ids(a.Overlapping(plan, &conflicts, 100)),
              ElementsAre("bf-2:3", "bf-1:2"));  // admission order, no held
  ASSERT_EQ(conflicts.size(), 5u);
  std::set<std::string> shared;
  for (const Conflict& c : conflicts) {
    EXPECT_NE(c.job_id, "bf-3");
    shared.insert(absl::StrCat(c.job_id, " ", c.dataset, "/", c.partition));
  }
  EXPECT_THAT(shared, ElementsAre("bf-1 d/p3", "bf-1 e/p1", "bf-2 d/p1",
                                  "bf-2 d/p2", "bf-2 d/p3"));

  // Capped; the overlaps are still complete.
  std::vector<Conflict> capped;
  EXPECT_THAT(Ids(a.Overlapping(plan, &capped, 2)),
              ElementsAre("bf-2:3", "bf-1:2"));
  EXPECT_EQ(capped.size(), 2u);
  std::vector<Conflict> none;
  EXPECT_EQ(a.Overlapping(plan, &none, 0).size(), 2u);
  EXPECT_THAT(none, IsEmpty());
  EXPECT_EQ(a.Overlapping(plan, nullptr, 5).size(), 2u);
  EXPECT_THAT(Ids(a.Overlapping(S({{"y", "p1"}}), nullptr, 5)), IsEmpty());
}

// ---- Randomized -----------------------------------------------------------

// A simulation of the job runner's use: jobs are admitted, start when they
// have no blockers, and finish; some stop held for a decision and are later
// retried (re-added) or cancelled. Checked against a model that knows only
// the rule: a job may start when no job admitted before it, still present
// and not held, shares a partition with it.
TEST(AdmissionPropertyTest, RunningJobsNeverShareAPartitionAndAllRun) {
  std::mt19937 rng(42);
  auto uniform = [&](int lo, int hi) {
    return std::uniform_int_distribution<int>(lo, hi)(rng);
  };
  auto random_scope = [&] {
    Scope scope;
    for (int i = uniform(1, 4); i > 0; --i) {
      scope.insert(
          {absl::StrCat("d", uniform(0, 2)), absl::StrCat("p", uniform(0, 5))});
    }
    return scope;
  };
  auto shares = [](const Scope& x, const Scope& y) {
    for (const auto& key : x) {
      if (y.count(key)) return true;
    }
    return false;
  };

  int started = 0;
  int blocked_checks = 0;
  for (int round = 0; round < 50; ++round) {
    SCOPED_TRACE(absl::StrCat("round ", round));
    Admission a;
    enum class Phase { kWaiting, kRunning, kHeld, kDone };
    struct ModelJob {
      Scope scope;
      Phase phase = Phase::kWaiting;
      uint64_t order = 0;
      int runs = 0;
    };
    std::map<std::string, ModelJob> jobs;
    uint64_t next_order = 0;
    int admitted = 0;
    const int to_admit = uniform(5, 40);

    for (int step = 0; step < 100000; ++step) {
      // The model's blockers of a job: earlier, present, not held, sharing.
      auto blocked = [&](const std::string& id) {
        const ModelJob& j = jobs.at(id);
        for (const auto& [other_id, other] : jobs) {
          if (other_id == id || other.phase == Phase::kDone ||
              other.phase == Phase::kHeld || other.order > j.order) {
            continue;
          }
          if (shares(j.scope, other.scope)) return true;
        }
        return false;
      };
      // Every waiting job's blockers agree with the model.
      std::vector<std::string> runnable;
      for (const auto& [id, j] : jobs) {
        if (j.phase != Phase::kWaiting) continue;
        const bool free = a.Blockers(id).empty();
        ASSERT_EQ(free, !blocked(id)) << id;
        ++blocked_checks;
        if (free) runnable.push_back(id);
      }
      std::vector<std::string> running;
      std::vector<std::string> held;
      for (const auto& [id, j] : jobs) {
        if (j.phase == Phase::kRunning) running.push_back(id);
        if (j.phase == Phase::kHeld) held.push_back(id);
      }
      // No two running jobs share a partition.
      for (size_t x = 0; x < running.size(); ++x) {
        for (size_t y = x + 1; y < running.size(); ++y) {
          ASSERT_FALSE(
              shares(jobs.at(running[x]).scope, jobs.at(running[y]).scope))
              << running[x] << " and " << running[y];
        }
      }
      if (admitted == to_admit && runnable.empty() && running.empty() &&
          held.empty()) {
        break;
      }
      const int action = uniform(0, 9);
      if (action < 3 && admitted < to_admit) {
        const std::string id = absl::StrCat("bf-", ++admitted);
        ModelJob& j = jobs[id];
        j.scope = random_scope();
        j.order = next_order++;
        a.Add(id, j.scope);
      } else if (action < 6 && !runnable.empty()) {
        const std::string& id =
            runnable[uniform(0, static_cast<int>(runnable.size()) - 1)];
        // Starting supersedes held jobs that share a partition with it.
        for (const Admission::Overlap& o : a.HeldOverlaps(id)) {
          ASSERT_EQ(jobs.at(o.job_id).phase, Phase::kHeld);
          ASSERT_TRUE(shares(jobs.at(o.job_id).scope, jobs.at(id).scope));
          jobs.at(o.job_id).phase = Phase::kDone;
          a.Remove(o.job_id);
        }
        jobs.at(id).phase = Phase::kRunning;
        ++jobs.at(id).runs;
        ++started;
      } else if (action < 9 && !running.empty()) {
        const std::string& id =
            running[uniform(0, static_cast<int>(running.size()) - 1)];
        if (uniform(0, 4) == 0) {
          jobs.at(id).phase = Phase::kHeld;  // e.g. FAILED, staging kept
          a.SetHeld(id, true);
        } else {
          jobs.at(id).phase = Phase::kDone;
          a.Remove(id);
        }
      } else if (!held.empty()) {
        const std::string& id =
            held[uniform(0, static_cast<int>(held.size()) - 1)];
        if (uniform(0, 1) == 0) {
          jobs.at(id).phase = Phase::kWaiting;  // retried: queues at the end
          jobs.at(id).order = next_order++;
          a.Add(id, jobs.at(id).scope);
        } else {
          jobs.at(id).phase = Phase::kDone;  // cancelled
          a.Remove(id);
        }
      }
    }
    ASSERT_EQ(admitted, to_admit);
    for (const auto& [id, j] : jobs) {
      EXPECT_EQ(j.phase, Phase::kDone) << id;
      EXPECT_GE(j.runs, 1) << id << " never ran";
    }
    EXPECT_THAT(a.Order(), IsEmpty());
  }
  EXPECT_GT(started, 500);
  EXPECT_GT(blocked_checks, 5000);
}

// Every answer after random adds (new jobs and re-adds), holds, releases
// and removes, checked against a model that keeps each job's pairs as a
// set and intersects them pair by pair. Some scopes are large, so that
// scopes of very different sizes are compared too.
TEST(AdmissionPropertyTest, AnswersMatchAPairByPairModel) {
  std::mt19937 rng(20240611);
  auto uniform = [&](int lo, int hi) {
    return std::uniform_int_distribution<int>(lo, hi)(rng);
  };
  using Pairs = std::set<std::pair<std::string, std::string>>;
  auto random_pairs = [&] {
    Pairs pairs;
    const bool large = uniform(0, 9) == 0;
    const int n = large ? uniform(200, 600) : uniform(0, 12);
    const int range = large ? 800 : 30;
    for (int i = 0; i < n; ++i) {
      pairs.insert({absl::StrCat("d", uniform(0, 3)),
                    absl::StrCat("p", uniform(0, range - 1))});
    }
    return pairs;
  };
  auto scope_of = [&](const Pairs& pairs) {
    Scope scope;
    if (uniform(0, 1) == 0) {
      for (const auto& pair : pairs) scope.insert(pair);
    } else {
      std::map<std::string, std::vector<std::string>> by_dataset;
      for (const auto& [d, p] : pairs) by_dataset[d].push_back(p);
      for (auto& [d, ps] : by_dataset) {
        std::shuffle(ps.begin(), ps.end(), rng);
        scope.insert(d, std::move(ps));
      }
    }
    return scope;
  };
  auto shared = [](const Pairs& x, const Pairs& y) {
    int64_t n = 0;
    for (const auto& pair : x) n += y.count(pair);
    return n;
  };
  const std::vector<std::string> ids = {"bf-1", "bf-10", "bf-2", "a",
                                        "z",    "m",     "bf-9"};

  int checks = 0;
  for (int round = 0; round < 30; ++round) {
    SCOPED_TRACE(absl::StrCat("round ", round));
    struct ModelJob {
      Pairs pairs;
      uint64_t order = 0;
      bool held = false;
    };
    std::map<std::string, ModelJob> model;
    uint64_t next_order = 0;
    Admission a;
    for (int step = 0; step < 150; ++step) {
      const std::string& id = ids[uniform(0, static_cast<int>(ids.size()) - 1)];
      const int action = uniform(0, 9);
      if (action < 4) {  // new or re-added
        ModelJob& j = model[id];
        j.pairs = random_pairs();
        j.order = next_order++;
        j.held = uniform(0, 3) == 0;
        a.Add(id, scope_of(j.pairs), j.held);
      } else if (action < 7) {
        const bool held = uniform(0, 1) == 0;
        if (model.count(id)) model[id].held = held;
        a.SetHeld(id, held);
      } else {
        model.erase(id);
        a.Remove(id);
      }

      std::vector<std::pair<uint64_t, std::string>> in_order;
      for (const auto& [id2, j] : model) in_order.push_back({j.order, id2});
      std::sort(in_order.begin(), in_order.end());
      std::vector<std::string> order;
      for (const auto& [o, id2] : in_order) order.push_back(id2);
      ASSERT_EQ(a.Order(), order);

      for (const std::string& job : ids) {
        SCOPED_TRACE(job);
        ASSERT_EQ(a.Contains(job), model.count(job) > 0);
        if (!model.count(job)) {
          EXPECT_THAT(a.Blockers(job), IsEmpty());
          EXPECT_THAT(a.HeldOverlaps(job), IsEmpty());
          continue;
        }
        const ModelJob& j = model.at(job);
        ASSERT_EQ(a.IsHeld(job), j.held);
        ASSERT_NE(a.ScopeOf(job), nullptr);
        ASSERT_EQ(*a.ScopeOf(job), scope_of(j.pairs));
        std::vector<std::string> blockers;
        for (const auto& [o, other] : in_order) {
          const ModelJob& k = model.at(other);
          const int64_t n = shared(j.pairs, k.pairs);
          if (other != job && k.order < j.order && !k.held && n > 0) {
            blockers.push_back(absl::StrCat(other, ":", n));
          }
        }
        ASSERT_EQ(Ids(a.Blockers(job)), blockers);
        std::vector<std::string> held;
        for (const auto& [other, k] : model) {  // by id
          const int64_t n = shared(j.pairs, k.pairs);
          if (other != job && k.held && n > 0) {
            held.push_back(absl::StrCat(other, ":", n));
          }
        }
        ASSERT_EQ(Ids(a.HeldOverlaps(job)), held);
        ++checks;
      }

      // A plan not admitted: the unheld jobs it shares pairs with, and the
      // shared pairs by pair then admission order, up to the cap (the
      // conflicts given count towards it).
      const Pairs plan =
          uniform(0, 2) == 0
              ? model.empty() ? random_pairs() : model.begin()->second.pairs
              : random_pairs();
      std::vector<std::string> overlapping;
      for (const auto& [o, other] : in_order) {
        const ModelJob& k = model.at(other);
        const int64_t n = shared(plan, k.pairs);
        if (!k.held && n > 0)
          overlapping.push_back(absl::StrCat(other, ":", n));
      }
      const size_t max = static_cast<size_t>(uniform(0, 40));
      std::vector<Conflict> given;
      if (uniform(0, 3) == 0) given.push_back({"x", "y", "z"});
      std::vector<std::string> expected_conflicts;
      for (const Conflict& c : given) {
        expected_conflicts.push_back(
            absl::StrCat(c.job_id, " ", c.dataset, "/", c.partition));
      }
      for (const auto& [d, p] : plan) {
        for (const auto& [o, other] : in_order) {
          const ModelJob& k = model.at(other);
          if (expected_conflicts.size() < max && !k.held &&
              k.pairs.count({d, p})) {
            expected_conflicts.push_back(absl::StrCat(other, " ", d, "/", p));
          }
        }
      }
      std::vector<Conflict> conflicts = given;
      ASSERT_EQ(Ids(a.Overlapping(scope_of(plan), &conflicts, max)),
                overlapping);
      std::vector<std::string> got_conflicts;
      for (const Conflict& c : conflicts) {
        got_conflicts.push_back(
            absl::StrCat(c.job_id, " ", c.dataset, "/", c.partition));
      }
      ASSERT_EQ(got_conflicts, expected_conflicts);
      ASSERT_EQ(Ids(a.Overlapping(scope_of(plan), nullptr, max)), overlapping);
    }
  }
  EXPECT_GT(checks, 10000);
}

// Keyed scopes: a job with keys stages the whole partition, so two jobs on
// one partition wait for each other whatever their keys, supersede each
// other when held, and are conflicts; keys never join two jobs that share
// no partition.
Scope Keyed(std::initializer_list<std::pair<const char*, const char*>> pairs,
            const char* dataset, std::set<std::string> keys) {
  Scope scope = S(pairs);
  scope.SetKeys(dataset, std::move(keys));
  return scope;
}

TEST(AdmissionKeysTest, JobsOnOnePartitionWaitWhateverTheirKeys) {
  Admission a;
  a.Add("bf-1", Keyed({{"d", "p1"}, {"d", "p2"}}, "d", {"c1", "c2"}));
  a.Add("bf-2", Keyed({{"d", "p1"}, {"d", "p2"}}, "d", {"c3"}));  // disjoint
  a.Add("bf-3", Keyed({{"d", "p3"}}, "d", {"c1"}));  // same key, other day
  a.Add("bf-4", S({{"d", "p1"}}));                   // every key
  EXPECT_THAT(Ids(a.Blockers("bf-2")), ElementsAre("bf-1:2"));
  EXPECT_THAT(Ids(a.Blockers("bf-3")), IsEmpty());
  EXPECT_THAT(Ids(a.Blockers("bf-4")), ElementsAre("bf-1:1", "bf-2:1"));

  std::vector<Conflict> conflicts;
  EXPECT_THAT(
      Ids(a.Overlapping(Keyed({{"d", "p3"}}, "d", {"c4"}), &conflicts, 10)),
      ElementsAre("bf-3:1"));
  ASSERT_EQ(conflicts.size(), 1u);
  EXPECT_EQ(conflicts[0].job_id, "bf-3");
  EXPECT_EQ(conflicts[0].partition, "p3");
}

TEST(AdmissionKeysTest, HeldKeyedJobsAreSupersededByAnyJobOnTheirPartitions) {
  Admission a;
  a.Add("bf-1", Keyed({{"d", "p1"}}, "d", {"c1"}), /*held=*/true);
  a.Add("bf-2", Keyed({{"d", "p2"}}, "d", {"c2"}), /*held=*/true);
  a.Add("bf-3", Keyed({{"d", "p1"}}, "d", {"c9"}));
  EXPECT_THAT(Ids(a.HeldOverlaps("bf-3")), ElementsAre("bf-1:1"));
  a.Add("bf-4", S({{"d", "p1"}, {"d", "p2"}}));
  EXPECT_THAT(Ids(a.HeldOverlaps("bf-4")), ElementsAre("bf-1:1", "bf-2:1"));
}

}  // namespace
}  // namespace core_admission_test
}  // namespace backfill
