// Time x key partitions (core/model/partition_layout.h) and their mappings
// (core/model/upstream_mapping.h): formats, ranges, membership of values, and
// the partitions each edge reads and affects, against hand-computed sets.

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/model/catalog.h"
#include "core/model/partition_layout.h"
#include "core/model/upstream_mapping.h"
#include "core/run/task_graph.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace backfill {
namespace core_partition_layout_test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const PartitionLayout kDayRegion(Grain::kDay, {"eu", "us", "apac"});
const PartitionLayout kHourRegion(Grain::kHour, {"eu", "us"});
const PartitionLayout kMonthRegion(Grain::kMonth, {"eu", "us", "apac"});

std::string Message(const absl::Status& s) { return std::string(s.message()); }

TEST(TimeKeyFormatTest, AcceptsExactlyTimeBarDeclaredKey) {
  EXPECT_TRUE(ValidatePartition(kDayRegion, "2025-03-01|eu").ok());
  EXPECT_TRUE(ValidatePartition(kDayRegion, "2024-02-29|apac").ok());
  EXPECT_TRUE(ValidatePartition(kHourRegion, "2025-03-01T23|us").ok());
  EXPECT_TRUE(ValidatePartition(kHourRegion, "2025-03-01T00|eu").ok());
  EXPECT_TRUE(ValidatePartition(kMonthRegion, "2025-12|us").ok());
}

TEST(TimeKeyFormatTest, RefusesEveryOtherShapeNamingTheFormat) {
  struct Bad {
    PartitionLayout layout;
    std::string value;
    std::string says;
  };
  const std::vector<Bad> bad = {
      {kDayRegion, "2025-03-01",
       "expected YYYY-MM-DD|KEY (KEY one of eu, us, "
       "apac)"},
      {kDayRegion, "2025-03-01|", "is not a declared key"},
      {kDayRegion, "2025-03-01|zz", "\"zz\" is not a declared key"},
      {kDayRegion, "2025-03-01|EU", "is not a declared key"},
      {kDayRegion, "2025-03-01|eu|us", "expected YYYY-MM-DD|KEY"},
      {kDayRegion, "2025-03-01||eu", "expected YYYY-MM-DD|KEY"},
      {kDayRegion, "|eu", "time part"},
      {kDayRegion, "2025-02-30|eu", "time part"},
      {kDayRegion, "2025-03|eu", "time part"},
      {kDayRegion, "2025-03-01 |eu", "time part"},
      {kDayRegion, "eu|2025-03-01", "time part"},
      {kHourRegion, "2025-03-01T24|eu", "time part"},
      {kHourRegion, "2025-03-01|eu", "YYYY-MM-DDTHH|KEY"},
      {kMonthRegion, "2025-13|eu", "time part"},
      {kMonthRegion, "2025-03-01|eu", "YYYY-MM|KEY"},
      // The last partition of year 9999 is not valid, with a key neither.
      {kDayRegion, "9999-12-31|eu", "year 10000"},
      {kMonthRegion, "9999-12|us", "year 10000"},
  };
  for (const Bad& b : bad) {
    absl::Status s = ValidatePartition(b.layout, b.value);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << b.value;
    EXPECT_THAT(Message(s), HasSubstr(b.says)) << b.value;
  }
}

TEST(TimeKeyFormatTest, BoundsAreTheTimePartsAndTheKeySplitsOff) {
  absl::StatusOr<PartitionBounds> b = BoundsOf(kHourRegion, "2025-03-31T23|us");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->start, "2025-03-31 23:00:00");
  EXPECT_EQ(b->end, "2025-04-01 00:00:00");
  b = BoundsOf(kMonthRegion, "2024-02|apac");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->start, "2024-02-01");
  EXPECT_EQ(b->end, "2024-03-01");
  absl::StatusOr<TimeKey> tk = SplitTimeKey(kDayRegion, "2025-03-01|apac");
  ASSERT_TRUE(tk.ok());
  EXPECT_EQ(tk->time, "2025-03-01");
  EXPECT_EQ(tk->key, "apac");
  // A one-dimensional layout behaves as its grain.
  EXPECT_EQ(BoundsOf(PartitionLayout(Grain::kDay), "2025-03-01")->end,
            "2025-03-02");
  EXPECT_FALSE(
      ValidatePartition(PartitionLayout(Grain::kDay), "2025-03-01|eu").ok());
}

TEST(TimeKeyRangeTest, TimesOnlyCoverEveryDeclaredKeyInTextOrder) {
  absl::StatusOr<std::vector<std::string>> r =
      EnumerateRange(kDayRegion, "2025-02-28", "2025-03-02");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(*r,
              ElementsAre("2025-02-28|apac", "2025-02-28|eu", "2025-02-28|us",
                          "2025-03-01|apac", "2025-03-01|eu", "2025-03-01|us"));
}

TEST(TimeKeyRangeTest, OneKeyAtBothEndsCoversThatKeyOnly) {
  absl::StatusOr<std::vector<std::string>> r =
      EnumerateRange(kDayRegion, "2025-03-01|eu", "2025-03-04|eu");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(*r,
              ElementsAre("2025-03-01|eu", "2025-03-02|eu", "2025-03-03|eu"));
  // Hours across a day's end; months across a year's end.
  r = EnumerateRange(kHourRegion, "2025-03-01T22|us", "2025-03-02T01|us");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(*r, ElementsAre("2025-03-01T22|us", "2025-03-01T23|us",
                              "2025-03-02T00|us"));
  r = EnumerateRange(kMonthRegion, "2024-11|apac", "2025-02|apac");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(*r, ElementsAre("2024-11|apac", "2024-12|apac", "2025-01|apac"));
  // The exclusive end may be the last partition of year 9999.
  r = EnumerateRange(kDayRegion, "9999-12-30|eu", "9999-12-31|eu");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(*r, ElementsAre("9999-12-30|eu"));
}

TEST(TimeKeyRangeTest, MixedOrBadEndsAreInvalid) {
  struct Bad {
    std::string from, to, says;
  };
  const std::vector<Bad> bad = {
      {"2025-03-01|eu", "2025-03-04|us", "two keys"},
      {"2025-03-01|eu", "2025-03-04", "a key at one end only"},
      {"2025-03-01", "2025-03-04|eu", "a key at one end only"},
      {"2025-03-01|zz", "2025-03-04|zz", "range start"},
      {"2025-03-01|eu", "2025-03-04|eu|x", "range end"},
      {"2025-03-04|eu", "2025-03-01|eu", "inverted"},
      {"2025-03-01|eu", "2025-03-01|eu", "empty"},
      {"2025-03-04", "2025-03-01", "inverted"},
      {"2025-03-01", "2025-03-32", "range end"},
  };
  for (const Bad& b : bad) {
    absl::StatusOr<std::vector<std::string>> r =
        EnumerateRange(kDayRegion, b.from, b.to);
    ASSERT_FALSE(r.ok()) << b.from << " .. " << b.to;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(Message(r.status()), HasSubstr(b.says))
        << b.from << " .. " << b.to;
  }
}

TEST(TimeKeyRangeTest, TheLimitCountsTimesTimesKeys) {
  // 4 days x 3 keys = 12 partitions.
  EXPECT_TRUE(EnumerateRange(kDayRegion, "2025-03-01", "2025-03-05", 12).ok());
  absl::StatusOr<std::vector<std::string>> r =
      EnumerateRange(kDayRegion, "2025-03-01", "2025-03-05", 11);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(Message(r.status()), HasSubstr("12 partitions"));
}

TEST(TimeKeyMembershipTest, ValuesMapToTimeBarKey) {
  EXPECT_EQ(*PartitionOfValues(Grain::kDay, "2025-03-01 07:30:00", "eu"),
            "2025-03-01|eu");
  EXPECT_EQ(*PartitionOfValues(Grain::kHour, "2025-03-01T07:59:59Z", "7"),
            "2025-03-01T07|7");
  EXPECT_EQ(*PartitionOfValues(Grain::kMonth, "2025-03-31", "us"),
            "2025-03|us");
  // A key value with '|', empty, or with a control character, and a time
  // value of no format, belong to no partition.
  EXPECT_FALSE(PartitionOfValues(Grain::kDay, "2025-03-01", "eu|us").ok());
  EXPECT_FALSE(PartitionOfValues(Grain::kDay, "2025-03-01", "").ok());
  EXPECT_FALSE(PartitionOfValues(Grain::kDay, "2025-03-01", "e\nu").ok());
  EXPECT_FALSE(PartitionOfValues(Grain::kDay, "2025-03-01x", "eu").ok());
  EXPECT_FALSE(PartitionOfValues(Grain::kKey, "eu", "eu").ok());
}

TEST(TimeKeyMembershipTest, DeclaredKeysMayNotHoldTheSeparator) {
  EXPECT_TRUE(ValidateDimensionKey("eu-west").ok());
  EXPECT_THAT(Message(ValidateDimensionKey("eu|west")), HasSubstr("'|'"));
  EXPECT_FALSE(ValidateDimensionKey("").ok());
  EXPECT_FALSE(ValidateDimensionKey(std::string(257, 'k')).ok());
  EXPECT_EQ(LayoutName(kDayRegion), "day x key");
  EXPECT_EQ(LayoutName(PartitionLayout(Grain::kHour)), "hour");
}

// ---------------------------------------------------------------- mappings --

const UpstreamEdge kIdentity{"up", Mapping::kIdentity, 0};
const UpstreamEdge kRollup{"up", Mapping::kRollup, 0};
const UpstreamEdge kLookback2{"up", Mapping::kLookback, 2};
const UpstreamEdge kAll{"up", Mapping::kAll, 0};

std::vector<std::string> Read(const UpstreamEdge& e, const PartitionLayout& up,
                              const PartitionLayout& dep,
                              const std::string& p) {
  auto r = PartitionsRead(e, up, dep, p);
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok() || !r->has_value()) return {"<all>"};
  return **r;
}

std::vector<std::string> Affected(const UpstreamEdge& e,
                                  const PartitionLayout& up,
                                  const PartitionLayout& dep,
                                  const std::vector<std::string>& ps) {
  auto r = PartitionsAffected(e, up, dep, ps);
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok() || !r->has_value()) return {"<all>"};
  return **r;
}

TEST(TimeKeyMappingTest, IdentityBetweenTimeKeyDatasetsKeepsTheKey) {
  const PartitionLayout up(Grain::kDay, {"apac", "eu", "us", "latam"});
  EXPECT_THAT(Read(kIdentity, up, kDayRegion, "2025-03-01|eu"),
              ElementsAre("2025-03-01|eu"));
  // latam is no key of the dependent: backfilling it affects nothing.
  EXPECT_THAT(Affected(kIdentity, up, kDayRegion,
                       {"2025-03-02|us", "2025-03-01|latam", "2025-03-01|eu"}),
              ElementsAre("2025-03-01|eu", "2025-03-02|us"));
}

TEST(TimeKeyMappingTest, TimeUpstreamIsReadByEveryKeyOfTheDependent) {
  const PartitionLayout day(Grain::kDay);
  EXPECT_THAT(Read(kIdentity, day, kDayRegion, "2025-03-01|apac"),
              ElementsAre("2025-03-01"));
  EXPECT_THAT(Affected(kIdentity, day, kDayRegion, {"2025-03-01"}),
              ElementsAre("2025-03-01|apac", "2025-03-01|eu", "2025-03-01|us"));
  // Rollup: hours of a time upstream into day x key.
  const PartitionLayout day_eu(Grain::kDay, {"eu"});
  std::vector<std::string> hours;
  for (int h = 0; h < 24; ++h) {
    hours.push_back(absl::StrCat("2025-03-01T", h < 10 ? "0" : "", h));
  }
  EXPECT_EQ(
      Read(kRollup, PartitionLayout(Grain::kHour), day_eu, "2025-03-01|eu"),
      hours);
  EXPECT_THAT(Affected(kRollup, PartitionLayout(Grain::kHour), kDayRegion,
                       {"2025-03-01T23", "2025-03-02T00"}),
              ElementsAre("2025-03-01|apac", "2025-03-01|eu", "2025-03-01|us",
                          "2025-03-02|apac", "2025-03-02|eu", "2025-03-02|us"));
}

TEST(TimeKeyMappingTest, TimeDependentReadsEveryKeyOfTheUpstream) {
  const PartitionLayout day(Grain::kDay);
  EXPECT_THAT(Read(kIdentity, kDayRegion, day, "2025-03-01"),
              ElementsAre("2025-03-01|apac", "2025-03-01|eu", "2025-03-01|us"));
  EXPECT_THAT(Affected(kIdentity, kDayRegion, day,
                       {"2025-03-01|eu", "2025-03-01|us", "2025-03-03|eu"}),
              ElementsAre("2025-03-01", "2025-03-03"));
  // Rollup day x key -> month: every day of the month, every key.
  std::vector<std::string> read =
      Read(kRollup, kDayRegion, PartitionLayout(Grain::kMonth), "2024-02");
  ASSERT_EQ(read.size(), 29u * 3u);
  EXPECT_EQ(read.front(), "2024-02-01|apac");
  EXPECT_EQ(read.back(), "2024-02-29|us");
}

TEST(TimeKeyMappingTest, RollupAndLookbackKeepTheKey) {
  // Rollup day x key -> month x key.
  EXPECT_THAT(Affected(kRollup, kDayRegion, kMonthRegion,
                       {"2025-03-31|eu", "2025-04-01|eu", "2025-03-15|us"}),
              ElementsAre("2025-03|eu", "2025-03|us", "2025-04|eu"));
  std::vector<std::string> days =
      Read(kRollup, kDayRegion, kMonthRegion, "2025-02|apac");
  ASSERT_EQ(days.size(), 28u);
  EXPECT_EQ(days.front(), "2025-02-01|apac");
  EXPECT_EQ(days.back(), "2025-02-28|apac");
  // Rollup hour x key -> day x key.
  EXPECT_THAT(Affected(kRollup, kHourRegion, kDayRegion, {"2025-03-01T23|us"}),
              ElementsAre("2025-03-01|us"));
  // Lookback 2 of the same key: reads P-2 .. P, affects P .. P+2.
  EXPECT_THAT(Read(kLookback2, kDayRegion, kDayRegion, "2025-03-01|us"),
              ElementsAre("2025-02-27|us", "2025-02-28|us", "2025-03-01|us"));
  EXPECT_THAT(Affected(kLookback2, kDayRegion, kDayRegion,
                       {"2025-03-01|us", "2025-03-01|eu"}),
              ElementsAre("2025-03-01|eu", "2025-03-01|us", "2025-03-02|eu",
                          "2025-03-02|us", "2025-03-03|eu", "2025-03-03|us"));
  // Lookback from a time upstream to day x key.
  EXPECT_THAT(Affected(kLookback2, PartitionLayout(Grain::kDay),
                       PartitionLayout(Grain::kDay, {"eu"}), {"2025-12-31"}),
              ElementsAre("2025-12-31|eu", "2026-01-01|eu", "2026-01-02|eu"));
}

TEST(TimeKeyMappingTest, AllAndBadPartitions) {
  EXPECT_THAT(Read(kAll, kDayRegion, kDayRegion, "2025-03-01|eu"),
              ElementsAre("<all>"));
  EXPECT_THAT(Affected(kAll, PartitionLayout(Grain::kNone), kDayRegion, {""}),
              ElementsAre("<all>"));
  EXPECT_FALSE(
      PartitionsRead(kIdentity, kDayRegion, kDayRegion, "2025-03-01").ok());
  EXPECT_FALSE(PartitionsAffected(kIdentity, kDayRegion,
                                  PartitionLayout(Grain::kDay),
                                  {"2025-03-01|zz"})
                   .ok());
  // A key grain maps to no time x key dataset.
  EXPECT_FALSE(PartitionsRead(kIdentity, PartitionLayout(Grain::kKey),
                              kDayRegion, "2025-03-01|eu")
                   .ok());
}

TEST(TimeKeyMappingTest, WindowStartIsThatOfTheTimePart) {
  DatasetSpec d;
  d.name = "rolling";
  d.kind = DatasetKind::kDerived;
  d.partition = PartitionSpec{"ds", Grain::kDay, {"eu", "us"}, "region"};
  d.upstream = {kLookback2};
  absl::StatusOr<std::optional<std::string>> ws =
      WindowStart(d, "2025-03-01|us");
  ASSERT_TRUE(ws.ok()) << ws.status();
  EXPECT_EQ(**ws, "2025-02-27");
}

// An identity edge between a time dataset and a time x key one orders the
// job's tasks by what is read: T|K after T; T after every T|k.
TEST(TimeKeyTaskGraphTest, IdentityAcrossShapesWaitsForWhatIsRead) {
  const std::map<std::string, PartitionLayout> layouts = {
      {"daily", PartitionLayout(Grain::kDay)},
      {"by_region", PartitionLayout(Grain::kDay, {"eu", "us"})},
      {"total", PartitionLayout(Grain::kDay)}};
  const std::map<std::string, std::vector<UpstreamEdge>> edges = {
      {"by_region", {{"daily", Mapping::kIdentity, 0}}},
      {"total", {{"by_region", Mapping::kIdentity, 0}}}};
  std::vector<TaskGraph::Task> tasks = {{"daily", "2025-03-01"},
                                        {"by_region", "2025-03-01|eu"},
                                        {"by_region", "2025-03-01|us"},
                                        {"total", "2025-03-01"}};
  TaskGraph g(
      tasks,
      [&](const std::string& d) {
        auto it = edges.find(d);
        return it == edges.end() ? std::vector<UpstreamEdge>{} : it->second;
      },
      [&](const std::string& d) { return layouts.at(d); });
  // Only the time upstream is ready.
  std::optional<size_t> first = g.Pop();
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(*first, 0u);
  EXPECT_FALSE(g.Pop().has_value());
  g.Done(0);
  std::optional<size_t> a = g.Pop();
  std::optional<size_t> b = g.Pop();
  ASSERT_TRUE(a && b);
  EXPECT_EQ(*a + *b, 3u);  // tasks 1 and 2
  EXPECT_FALSE(g.Pop().has_value());
  g.Done(*a);
  EXPECT_FALSE(g.Pop().has_value());  // total waits for both keys
  g.Done(*b);
  std::optional<size_t> last = g.Pop();
  ASSERT_TRUE(last.has_value());
  EXPECT_EQ(*last, 3u);
}

}  // namespace
}  // namespace core_partition_layout_test
}  // namespace backfill
