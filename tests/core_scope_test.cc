// Scope: partitions per dataset plus an optional entity-key filter, and the
// overlap rule (same dataset and partition, and no filter on either side or
// intersecting key sets), case by case.

#include <set>
#include <string>
#include <utility>

#include "core/scope.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace backfill {
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

TEST(ScopeOverlapTest, KeysOnOneSideOnlyOverlap) {
  Scope keyed = S({{"a", "p1"}});
  keyed.SetKeys("a", {"k1"});
  Scope whole = S({{"a", "p1"}});
  EXPECT_TRUE(keyed.Overlaps(whole));
  EXPECT_TRUE(whole.Overlaps(keyed));
}

TEST(ScopeOverlapTest, DisjointKeysDoNotOverlapIntersectingDo) {
  Scope x = S({{"a", "p1"}, {"a", "p2"}});
  x.SetKeys("a", {"k1", "k2"});
  Scope y = S({{"a", "p2"}, {"a", "p3"}});
  y.SetKeys("a", {"k3"});
  EXPECT_FALSE(x.Overlaps(y));
  EXPECT_FALSE(y.Overlaps(x));
  y.SetKeys("a", {"k3", "k2"});
  EXPECT_TRUE(x.Overlaps(y));
  EXPECT_TRUE(y.Overlaps(x));
}

TEST(ScopeOverlapTest, KeysOfOneDatasetDoNotShieldAnother) {
  // Disjoint keys on the target, but both also recompute the dependent
  // "b/p1" by partition (no filter there): they overlap.
  Scope x = S({{"a", "p1"}, {"b", "p1"}});
  x.SetKeys("a", {"k1"});
  Scope y = S({{"a", "p1"}, {"b", "p1"}});
  y.SetKeys("a", {"k2"});
  EXPECT_TRUE(x.Overlaps(y));
  // Without the shared dependent they do not.
  Scope y2 = S({{"a", "p1"}, {"b", "p2"}});
  y2.SetKeys("a", {"k2"});
  EXPECT_FALSE(x.Overlaps(y2));
}

TEST(ScopeOverlapTest, EmptyKeySetMatchesNothing) {
  Scope x = S({{"a", "p1"}});
  x.SetKeys("a", {});
  Scope y = S({{"a", "p1"}});
  y.SetKeys("a", {"k1"});
  EXPECT_FALSE(x.Overlaps(y));
  // ... but a scope without a filter writes every row, including none.
  EXPECT_TRUE(x.Overlaps(S({{"a", "p1"}})));
}

TEST(ScopeOverlapTest, KeysAreComparedExactly) {
  Scope x = S({{"a", "p1"}});
  x.SetKeys("a", {"K1"});
  Scope y = S({{"a", "p1"}});
  y.SetKeys("a", {"k1", "K1 ", "1"});
  EXPECT_FALSE(x.Overlaps(y));
  y.SetKeys("a", {"K1"});
  EXPECT_TRUE(x.Overlaps(y));
}

TEST(ScopeOverlapTest, RowsMayMeetIsPerDataset) {
  Scope x = S({{"a", "p1"}});
  x.SetKeys("a", {"k1"});
  Scope y = S({{"a", "p1"}});
  y.SetKeys("a", {"k2"});
  EXPECT_FALSE(x.RowsMayMeet("a", y));
  EXPECT_TRUE(x.RowsMayMeet("b", y));  // no filter on "b" on either side
}

}  // namespace
}  // namespace backfill
