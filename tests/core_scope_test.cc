// Scope: partitions per dataset plus an optional entity-key filter, and the
// overlap rule (a shared dataset and partition, whatever the key filters),
// case by case.

#include <set>
#include <string>
#include <utility>

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

}  // namespace
}  // namespace core_scope_test
}  // namespace backfill
