// Scope: partitions per dataset plus an optional entity-key filter, and the
// overlap rule (a shared dataset and partition, whatever the key filters),
// case by case.

#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/plan/scope.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace backfill {
namespace core_scope_test {
namespace {

using ::testing::ElementsAre;
using Pair = Scope::Pair;

Scope S(std::initializer_list<std::pair<const char*, const char*>> pairs) {
  Scope scope;
  for (const auto& [d, p] : pairs) scope.insert({d, p});
  return scope;
}

TEST(ScopeTest, IsASetOfPairsInOrder) {
  Scope s = S({{"b", "p1"}, {"a", "p2"}, {"a", "p1"}, {"a", "p2"}});
  EXPECT_EQ(s.size(), 3u);
  EXPECT_FALSE(s.empty());
  EXPECT_THAT(s,
              ElementsAre(Pair{"a", "p1"}, Pair{"a", "p2"}, Pair{"b", "p1"}));
  EXPECT_EQ(s.count({"a", "p2"}), 1u);
  EXPECT_EQ(s.count({"a", "p3"}), 0u);
  EXPECT_TRUE(Scope().empty());
}

TEST(ScopeTest, InsertKeepsEachDatasetsPartitionsSortedAndUnique) {
  Scope s;
  s.insert({"a", "p5"});
  s.insert({"a", "p1"});  // before the others
  s.insert({"a", "p3"});  // between
  s.insert({"a", "p3"});
  s.insert({"a", "p9"});  // after
  EXPECT_THAT(s, ElementsAre(Pair{"a", "p1"}, Pair{"a", "p3"}, Pair{"a", "p5"},
                             Pair{"a", "p9"}));
  EXPECT_EQ(s.size(), 4u);
}

TEST(ScopeTest, InsertsADatasetsPartitionsAtOnceInAnyOrder) {
  Scope s;
  s.insert("b", {"p3", "p1", "p2", "p1"});
  s.insert("a", {});  // nothing
  EXPECT_THAT(s,
              ElementsAre(Pair{"b", "p1"}, Pair{"b", "p2"}, Pair{"b", "p3"}));
  EXPECT_EQ(s.partitions().count("a"), 0u);
  // Merged with those it has.
  s.insert("b", {"p4", "p0", "p2"});
  s.insert("a", {"p1"});
  EXPECT_THAT(s,
              ElementsAre(Pair{"a", "p1"}, Pair{"b", "p0"}, Pair{"b", "p1"},
                          Pair{"b", "p2"}, Pair{"b", "p3"}, Pair{"b", "p4"}));
  EXPECT_EQ(s.size(), 6u);
  // One at a time or at once: the same scope.
  EXPECT_EQ(s, S({{"b", "p4"},
                  {"b", "p0"},
                  {"b", "p2"},
                  {"b", "p3"},
                  {"b", "p1"},
                  {"a", "p1"}}));
  EXPECT_THAT(s.partitions().at("b"),
              ElementsAre("p0", "p1", "p2", "p3", "p4"));
}

TEST(ScopeTest, IteratesAsDatasetAndPartition) {
  const Scope s = S({{"b", "p1"}, {"a", ""}, {"a", "p2"}});
  std::vector<std::string> seen;
  for (const auto& [dataset, partition] : s) {
    seen.push_back(dataset + "/" + partition);
  }
  EXPECT_THAT(seen, ElementsAre("a/", "a/p2", "b/p1"));
  std::set<Pair> copied(s.begin(), s.end());
  EXPECT_THAT(copied,
              ElementsAre(Pair{"a", ""}, Pair{"a", "p2"}, Pair{"b", "p1"}));
  EXPECT_EQ(s.count({"a", ""}), 1u);
  EXPECT_EQ(s.count({"c", "p1"}), 0u);
  const Scope none;
  EXPECT_TRUE(none.begin() == none.end());
}

TEST(ScopeTest, KeyFilterIsPerDataset) {
  Scope s = S({{"a", "p1"}, {"b", "p1"}});
  EXPECT_FALSE(s.HasKeyFilter());
  EXPECT_EQ(s.KeysOf("a"), nullptr);
  s.SetKeys("a", {"k1", "k2"});
  ASSERT_NE(s.KeysOf("a"), nullptr);
  EXPECT_THAT(*s.KeysOf("a"), ElementsAre("k1", "k2"));
  EXPECT_EQ(s.KeysOf("b"), nullptr);
  EXPECT_TRUE(s.HasKeyFilter());
  s.SetKeys("a", {"k3"});  // replaces
  EXPECT_THAT(*s.KeysOf("a"), ElementsAre("k3"));
}

TEST(ScopeTest, EqualityIncludesKeys) {
  Scope a = S({{"a", "p1"}});
  Scope b = S({{"a", "p1"}});
  EXPECT_EQ(a, b);
  b.SetKeys("a", {"k"});
  EXPECT_FALSE(a == b);
  a.SetKeys("a", {"k"});
  EXPECT_EQ(a, b);
}

TEST(ScopeOverlapTest, NoSharedPartitionNeverOverlaps) {
  EXPECT_FALSE(S({{"a", "p1"}}).Overlaps(S({{"a", "p2"}})));
  // Same partition name, other dataset.
  EXPECT_FALSE(S({{"a", "p1"}}).Overlaps(S({{"b", "p1"}})));
  EXPECT_FALSE(Scope().Overlaps(S({{"a", "p1"}})));
  EXPECT_FALSE(S({{"a", "p1"}}).Overlaps(Scope()));
  EXPECT_FALSE(Scope().Overlaps(Scope()));
}

TEST(ScopeOverlapTest, SharedPartitionWithoutKeysOverlaps) {
  EXPECT_TRUE(S({{"a", "p1"}, {"a", "p2"}}).Overlaps(S({{"a", "p2"}})));
  EXPECT_TRUE(S({{"a", "p2"}}).Overlaps(S({{"a", "p1"}, {"a", "p2"}})));
}

TEST(ScopeOverlapTest, KeyFiltersNeverMakeASharedPartitionDisjoint) {
  // A keyed job stages and checks the whole partition, so another job on
  // the same partition overlaps it whatever the keys of either.
  Scope keyed = S({{"a", "p1"}});
  keyed.SetKeys("a", {"k1"});
  Scope whole = S({{"a", "p1"}});
  EXPECT_TRUE(keyed.Overlaps(whole));
  EXPECT_TRUE(whole.Overlaps(keyed));
  Scope other_keys = S({{"a", "p2"}, {"a", "p1"}});
  other_keys.SetKeys("a", {"k2", "k3"});
  EXPECT_TRUE(keyed.Overlaps(other_keys));
  EXPECT_TRUE(other_keys.Overlaps(keyed));
  Scope no_keys_at_all = S({{"a", "p1"}});
  no_keys_at_all.SetKeys("a", {});
  EXPECT_TRUE(no_keys_at_all.Overlaps(keyed));
}

TEST(ScopeOverlapTest, KeysDoNotJoinScopesWithoutASharedPartition) {
  Scope x = S({{"a", "p1"}});
  x.SetKeys("a", {"k1"});
  Scope y = S({{"a", "p2"}, {"b", "p1"}});
  y.SetKeys("a", {"k1"});
  EXPECT_FALSE(x.Overlaps(y));
  EXPECT_FALSE(y.Overlaps(x));
}

TEST(ScopeOverlapTest, SharedPairsComeInOrderWithTheirCount) {
  const Scope x =
      S({{"a", "p1"}, {"a", "p2"}, {"a", "p4"}, {"b", "p1"}, {"c", "p1"}});
  const Scope y =
      S({{"a", "p2"}, {"a", "p3"}, {"a", "p4"}, {"c", "p1"}, {"d", "p1"}});
  std::vector<std::string> shared;
  x.ForEachShared(y, [&](const std::string& d, const std::string& p) {
    shared.push_back(d + "/" + p);
    return true;
  });
  EXPECT_THAT(shared, ElementsAre("a/p2", "a/p4", "c/p1"));
  EXPECT_EQ(x.SharedCount(y), 3);
  EXPECT_EQ(y.SharedCount(x), 3);
  EXPECT_EQ(x.SharedCount(x), 5);
  EXPECT_EQ(x.SharedCount(Scope()), 0);
  // Stops when told.
  shared.clear();
  y.ForEachShared(x, [&](const std::string& d, const std::string& p) {
    shared.push_back(d + "/" + p);
    return shared.size() < 2;
  });
  EXPECT_THAT(shared, ElementsAre("a/p2", "a/p4"));
}

// A few partitions against many (looked up rather than merged) and many
// against many, checked against a set of pairs.
TEST(ScopeOverlapTest, SharedPairsOfSmallAndLargeScopesMatchASet) {
  std::mt19937 rng(7);
  for (int round = 0; round < 200; ++round) {
    SCOPED_TRACE(round);
    auto random = [&](int n, int range) {
      Scope scope;
      std::set<Pair> pairs;
      std::vector<std::string> batch;
      for (int i = 0; i < n; ++i) {
        Pair pair{std::string(1, static_cast<char>('a' + rng() % 3)),
                  std::to_string(rng() % range)};
        pairs.insert(pair);
        if (rng() % 2 == 0) {
          scope.insert(pair);
        } else {
          scope.insert(pair.first, {pair.second});
        }
      }
      return std::make_pair(scope, pairs);
    };
    const int range = 1 + static_cast<int>(rng() % 3000);
    auto [x, xs] =
        random(static_cast<int>(rng() % (round % 2 ? 8 : 3000)), range);
    auto [y, ys] = random(static_cast<int>(rng() % 3000), range);
    std::vector<Pair> expected;
    for (const Pair& pair : xs) {
      if (ys.count(pair)) expected.push_back(pair);
    }
    for (const auto& [a, b] :
         {std::make_pair(&x, &y), std::make_pair(&y, &x)}) {
      std::vector<Pair> shared;
      a->ForEachShared(*b, [&](const std::string& d, const std::string& p) {
        shared.push_back({d, p});
        return true;
      });
      EXPECT_EQ(shared, expected);
      EXPECT_EQ(a->SharedCount(*b), static_cast<int64_t>(expected.size()));
      EXPECT_EQ(a->Overlaps(*b), !expected.empty());
    }
    EXPECT_EQ(std::vector<Pair>(y.begin(), y.end()),
              std::vector<Pair>(ys.begin(), ys.end()));
    EXPECT_EQ(y.size(), ys.size());
  }
}

}  // namespace
}  // namespace core_scope_test
}  // namespace backfill
