// PlannedPartitions (core/plan/planned_partitions.h): the planner's
// partitions of one dataset with their reasons, built from lists in any
// order, merged, filtered and spelled out, against hand-written lists.

#include <string>
#include <vector>

#include "core/plan/planned_partitions.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace backfill {
namespace core_planned_partitions_test {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

// "partition=reason" of each partition, in order.
std::vector<std::string> Listed(const PlannedPartitions& planned) {
  std::vector<std::string> out;
  for (size_t i = 0; i < planned.size(); ++i) {
    out.push_back(planned.partitions()[i] + "=" + planned.reason(i));
  }
  return out;
}

TEST(PlannedPartitionsTest, OneReasonForPartitionsInAnyOrder) {
  PlannedPartitions planned({"c", "a", "c", "b"}, "requested");
  EXPECT_THAT(Listed(planned),
              ElementsAre("a=requested", "b=requested", "c=requested"));
  EXPECT_THAT(planned.Reasons(),
              ElementsAre("requested", "requested", "requested"));
}

TEST(PlannedPartitionsTest, OwnReasonsTheLastOfARepeatedPartitionWins) {
  PlannedPartitions sorted({"a", "b", "c"}, {"r1", "r1", "r2"});
  EXPECT_THAT(Listed(sorted), ElementsAre("a=r1", "b=r1", "c=r2"));
  PlannedPartitions repeated({"c", "a", "c", "b", "a"},
                             {"c1", "a1", "c2", "b1", "a2"});
  EXPECT_THAT(Listed(repeated), ElementsAre("a=a2", "b=b1", "c=c2"));
}

TEST(PlannedPartitionsTest, AddKeepsTheFirstReasonOfAPartition) {
  PlannedPartitions planned({"b", "d"}, "first");
  EXPECT_EQ(planned.Add({"a", "b", "c", "d", "e"}, "second"), 3u);
  EXPECT_EQ(planned.Add({"e", "b"}, "third"), 0u);  // unsorted, all known
  EXPECT_EQ(planned.Add({}, "fourth"), 0u);
  EXPECT_THAT(Listed(planned), ElementsAre("a=second", "b=first", "c=second",
                                           "d=first", "e=second"));
  PlannedPartitions empty;
  EXPECT_EQ(empty.Add({"x", "x"}, "r"), 1u);
  EXPECT_THAT(Listed(empty), ElementsAre("x=r"));
}

TEST(PlannedPartitionsTest, RemoveAndAppendToReasons) {
  PlannedPartitions planned({"a", "b", "c", "d", "e"}, "one");
  planned.Add({"f"}, "two");
  EXPECT_THAT(planned.Remove({0, 2, 5}), ElementsAre("a", "c", "f"));
  EXPECT_THAT(Listed(planned), ElementsAre("b=one", "d=one", "e=one"));
  planned.Add({"a", "z"}, "three");
  planned.AppendToReasons({0, 2, 4}, "; frozen");
  EXPECT_THAT(Listed(planned),
              ElementsAre("a=three; frozen", "b=one", "d=one; frozen", "e=one",
                          "z=three; frozen"));
  EXPECT_THAT(planned.Remove({}), IsEmpty());
  EXPECT_EQ(planned.size(), 5u);
}

TEST(PlannedPartitionsTest, ReasonsOutliveTakenPartitions) {
  PlannedPartitions planned({"b", "a"}, "requested");
  planned.Add({"c"}, "downstream of x");
  EXPECT_THAT(planned.TakePartitions(), ElementsAre("a", "b", "c"));
  EXPECT_THAT(planned.Reasons(),
              ElementsAre("requested", "requested", "downstream of x"));
}

}  // namespace
}  // namespace core_planned_partitions_test
}  // namespace backfill
