// Rollup and lookback mappings: how pipeline files declare them, which
// declarations the loader refuses (with file and line), and what one edge
// maps in each direction. Expected partition sets are written out by hand.

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "core/model/catalog.h"
#include "core/model/pipeline_loader.h"
#include "core/model/upstream_mapping.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace backfill {
namespace core_upstream_mapping_test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

absl::StatusOr<Catalog> Load(const std::string& text) {
  return LoadPipelineTexts({{"pipe.yaml", text}});
}

std::string LoadError(const std::string& text) {
  absl::StatusOr<Catalog> c = Load(text);
  EXPECT_FALSE(c.ok()) << text;
  if (c.ok()) return "";
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(c.status().message());
}

// Sources of every grain (lines 1..13), then `derived` from line 14 on.
std::string With(const std::string& derived) {
  return "datasets:\n"                                               // 1
         "  - name: hours\n"                                         // 2
         "    kind: source\n"                                        // 3
         "    partition: {column: h, grain: hour}\n"                 // 4
         "  - name: days\n"                                          // 5
         "    kind: source\n"                                        // 6
         "    partition: {column: ds, grain: day}\n"                 // 7
         "  - name: months\n"                                        // 8
         "    kind: source\n"                                        // 9
         "    partition: {column: m, grain: month}\n"                // 10
         "  - name: dim\n"                                           // 11
         "    kind: source\n"                                        // 12
         "    partition: {column: k, grain: key, keys: [a, b]}\n" +  // 13
         derived;
}

// A derived dataset `d` (declared on line 14) of `grain` with one upstream
// entry (line 17).
std::string Derived(const std::string& grain, const std::string& column,
                    const std::string& upstream_entry,
                    const std::string& transform = "") {
  const std::string keys = grain == "key" ? ", keys: [a, b]" : "";
  return With(
      "  - name: d\n"        // 14
      "    kind: derived\n"  // 15
      "    partition: {column: " +
      column + ", grain: " + grain + keys +
      "}\n"  // 16
      "    upstream: [" +
      upstream_entry +
      "]\n"  // 17
      "    transform: " +
      (transform.empty() ? "SELECT 1 AS " + column : transform) +
      "\n"
      "    contract: {columns: {" +
      column + ": TEXT}}\n");
}

UpstreamEdge EdgeOf(const Catalog& c) {
  const DatasetSpec* d = c.Find("d");
  EXPECT_NE(d, nullptr);
  if (d == nullptr || d->upstream.size() != 1) return {};
  return d->upstream[0];
}

TEST(MappingLoaderTest, AcceptsRollupsFromStrictlyFinerGrains) {
  struct Case {
    std::string grain, column, upstream;
  };
  for (const Case& c : std::vector<Case>{{"day", "ds", "hours"},
                                         {"month", "m", "days"},
                                         {"month", "m", "hours"}}) {
    absl::StatusOr<Catalog> catalog = Load(Derived(
        c.grain, c.column, "{dataset: " + c.upstream + ", mapping: rollup}"));
    ASSERT_TRUE(catalog.ok())
        << c.upstream << " -> " << c.grain << ": " << catalog.status();
    UpstreamEdge e = EdgeOf(*catalog);
    EXPECT_EQ(e.dataset, c.upstream);
    EXPECT_EQ(e.mapping, Mapping::kRollup);
    EXPECT_EQ(e.lookback, 0);
    EXPECT_STREQ(MappingName(e.mapping), "rollup");
  }
}

TEST(MappingLoaderTest, AcceptsTheThreeLookbackForms) {
  for (const std::string& entry :
       {std::string("{dataset: days, mapping: {lookback: 7}}"),
        std::string("{dataset: days, lookback: 7}"),
        std::string("{dataset: days, mapping: lookback, lookback: 7}")}) {
    absl::StatusOr<Catalog> catalog = Load(Derived("day", "ds", entry));
    ASSERT_TRUE(catalog.ok()) << entry << ": " << catalog.status();
    UpstreamEdge e = EdgeOf(*catalog);
    EXPECT_EQ(e.mapping, Mapping::kLookback) << entry;
    EXPECT_EQ(e.lookback, 7) << entry;
    EXPECT_STREQ(MappingName(e.mapping), "lookback");
  }
  // Both ends of the range, and hour and month grains.
  absl::StatusOr<Catalog> one =
      Load(Derived("hour", "h", "{dataset: hours, lookback: 1}"));
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(EdgeOf(*one).lookback, 1);
  absl::StatusOr<Catalog> max =
      Load(Derived("month", "m", "{dataset: months, lookback: 10000}"));
  ASSERT_TRUE(max.ok()) << max.status();
  EXPECT_EQ(EdgeOf(*max).lookback, 10000);
}

TEST(MappingLoaderTest, RefusesRollupsThatAreNotFineToCoarse) {
  struct Case {
    std::string grain, column, upstream, says;
  };
  const std::vector<Case> cases = {
      {"day", "ds", "days", "days is day and d is day"},
      {"day", "ds", "months", "months is month and d is day"},
      {"hour", "h", "days", "days is day and d is hour"},
      {"month", "m", "dim", "dim is key and d is month"},
      {"key", "k", "days", "days is day and d is key"},
  };
  for (const Case& c : cases) {
    std::string msg = LoadError(Derived(
        c.grain, c.column, "{dataset: " + c.upstream + ", mapping: rollup}"));
    EXPECT_THAT(msg, StartsWith("pipe.yaml:14: dataset \"d\": ")) << msg;
    EXPECT_THAT(msg, HasSubstr("mapping rollup to upstream \"" + c.upstream +
                               "\" needs a strictly finer time grain"));
    EXPECT_THAT(msg, HasSubstr("hour -> day, day -> month or hour -> month"));
    EXPECT_THAT(msg, HasSubstr(c.says));
  }
  // From an unpartitioned dataset.
  std::string msg =
      LoadError(With("  - {name: flat, kind: source}\n"
                     "  - name: d\n"  // line 15
                     "    kind: derived\n"
                     "    partition: {column: m, grain: month}\n"
                     "    upstream: [{dataset: flat, mapping: rollup}]\n"
                     "    transform: SELECT 1 AS m\n"
                     "    contract: {columns: {m: TEXT}}\n"));
  EXPECT_THAT(msg, StartsWith("pipe.yaml:15: dataset \"d\": ")) << msg;
  EXPECT_THAT(msg, HasSubstr("flat is unpartitioned and d is month"));
}

TEST(MappingLoaderTest, RefusesLookbacksAcrossGrainsOrWithoutTime) {
  std::string msg =
      LoadError(Derived("month", "m", "{dataset: days, lookback: 3}"));
  EXPECT_THAT(msg, StartsWith("pipe.yaml:14: dataset \"d\": ")) << msg;
  EXPECT_THAT(msg, HasSubstr("mapping lookback to upstream \"days\" needs both "
                             "datasets partitioned by the same time grain"));
  EXPECT_THAT(msg, HasSubstr("d is month and days is day"));
  EXPECT_THAT(msg, HasSubstr("`mapping: rollup`"));

  msg = LoadError(Derived("key", "k", "{dataset: dim, lookback: 3}"));
  EXPECT_THAT(msg, StartsWith("pipe.yaml:14: dataset \"d\": ")) << msg;
  EXPECT_THAT(msg, HasSubstr("d is key and dim is key"));
}

TEST(MappingLoaderTest, RefusesBadLookbackCountsAtTheirLine) {
  for (const std::string n : {"0", "-1", "10001", "seven", "1.5", "[7]"}) {
    std::string msg = LoadError(Derived(
        "day", "ds", "{dataset: days, mapping: {lookback: " + n + "}}"));
    EXPECT_THAT(msg, StartsWith("pipe.yaml:17: ")) << n << ": " << msg;
    EXPECT_THAT(msg, HasSubstr("lookback upstream \"days\" in dataset \"d\" "
                               "must be a whole number of partitions from 1 "
                               "to 10000"))
        << msg;
  }
  std::string msg =
      LoadError(Derived("day", "ds", "{dataset: days, lookback: 0}"));
  EXPECT_THAT(msg, StartsWith("pipe.yaml:17: ")) << msg;
  EXPECT_THAT(msg, HasSubstr("from 1 to 10000"));
}

TEST(MappingLoaderTest, BareLookbackSaysHowToWriteIt) {
  std::string msg =
      LoadError(Derived("day", "ds", "{dataset: days, mapping: lookback}"));
  EXPECT_THAT(msg, StartsWith("pipe.yaml:17: ")) << msg;
  EXPECT_THAT(msg, HasSubstr("mapping lookback upstream \"days\" in dataset "
                             "\"d\" needs the number of previous partitions"));
  EXPECT_THAT(msg, HasSubstr("`mapping: {lookback: 7}`"));
}

TEST(MappingLoaderTest, RefusesOtherMappingShapes) {
  std::string msg =
      LoadError(Derived("day", "ds", "{dataset: days, mapping: {window: 7}}"));
  EXPECT_THAT(msg, StartsWith("pipe.yaml:17: ")) << msg;
  EXPECT_THAT(msg, HasSubstr("must be {lookback: N}"));

  msg = LoadError(
      Derived("month", "m", "{dataset: days, mapping: rollup, lookback: 3}"));
  EXPECT_THAT(msg, StartsWith("pipe.yaml:17: ")) << msg;
  EXPECT_THAT(msg, HasSubstr("but the mapping is rollup"));

  msg = LoadError(Derived("day", "ds", "{dataset: days, mapping: window}"));
  EXPECT_THAT(msg, HasSubstr("unknown mapping \"window\""));
  EXPECT_THAT(msg,
              HasSubstr("expected identity, all, rollup or {lookback: N}"));
}

TEST(MappingLoaderTest, WindowStartOnlyWithALookbackUpstream) {
  const std::string uses =
      "\"SELECT :window_start AS ds WHERE :partition_start > ''\"";
  absl::StatusOr<Catalog> ok =
      Load(Derived("day", "ds", "{dataset: days, lookback: 2}", uses));
  EXPECT_TRUE(ok.ok()) << ok.status();

  std::string msg = LoadError(
      Derived("day", "ds", "{dataset: days, mapping: identity}", uses));
  EXPECT_THAT(msg, StartsWith("pipe.yaml:18: ")) << msg;
  EXPECT_THAT(msg, HasSubstr(":window_start, which is bound only for a "
                             "dataset with a `lookback` upstream"));
  msg = LoadError(Derived("month", "m", "{dataset: days, mapping: rollup}",
                          "SELECT :window_start AS m"));
  EXPECT_THAT(msg, HasSubstr(":window_start"));
}

TEST(MappingLoaderTest, CatalogRefusesInconsistentEdgesBuiltInCode) {
  DatasetSpec src;
  src.name = "days";
  src.table = "days";
  src.partition = PartitionSpec{"ds", Grain::kDay, {}};
  DatasetSpec d;
  d.name = "d";
  d.table = "d";
  d.kind = DatasetKind::kDerived;
  d.partition = PartitionSpec{"ds", Grain::kDay, {}};
  d.transform = "SELECT 1 AS ds";
  d.columns = {{"ds", "TEXT"}};
  d.file = "code";
  d.line = 3;
  d.upstream = {{"days", Mapping::kIdentity, 7}};
  absl::StatusOr<Catalog> c = Catalog::Build({src, d}, WarehouseSpec{});
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("has a lookback of 7 but "
                                              "mapping identity"));
  d.upstream = {{"days", Mapping::kLookback, 0}};
  c = Catalog::Build({src, d}, WarehouseSpec{});
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("lookback 0 to upstream "
                                              "\"days\" is out of range"));
}

// ------------------------------------------------------------ one edge --

const UpstreamEdge kRollup{"u", Mapping::kRollup, 0};
const UpstreamEdge kLookback3{"u", Mapping::kLookback, 3};

std::vector<std::string> Read(const UpstreamEdge& e, Grain up, Grain dep,
                              const std::string& p) {
  auto r = PartitionsRead(e, up, dep, p);
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok() || !r->has_value()) return {"<whole>"};
  return **r;
}

std::vector<std::string> Affected(const UpstreamEdge& e, Grain up, Grain dep,
                                  const std::vector<std::string>& ps) {
  auto r = PartitionsAffected(e, up, dep, ps);
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok() || !r->has_value()) return {"<every>"};
  return **r;
}

TEST(UpstreamMappingTest, ReadsPerMapping) {
  EXPECT_THAT(
      Read({"u", Mapping::kIdentity}, Grain::kDay, Grain::kDay, "2025-03-01"),
      ElementsAre("2025-03-01"));
  EXPECT_THAT(
      Read({"u", Mapping::kAll}, Grain::kNone, Grain::kDay, "2025-03-01"),
      ElementsAre("<whole>"));
  EXPECT_THAT(Read(kRollup, Grain::kHour, Grain::kDay, "2025-03-31"),
              ElementsAre("2025-03-31T00", "2025-03-31T01", "2025-03-31T02",
                          "2025-03-31T03", "2025-03-31T04", "2025-03-31T05",
                          "2025-03-31T06", "2025-03-31T07", "2025-03-31T08",
                          "2025-03-31T09", "2025-03-31T10", "2025-03-31T11",
                          "2025-03-31T12", "2025-03-31T13", "2025-03-31T14",
                          "2025-03-31T15", "2025-03-31T16", "2025-03-31T17",
                          "2025-03-31T18", "2025-03-31T19", "2025-03-31T20",
                          "2025-03-31T21", "2025-03-31T22", "2025-03-31T23"));
  std::vector<std::string> feb =
      Read(kRollup, Grain::kDay, Grain::kMonth, "2024-02");
  ASSERT_EQ(feb.size(), 29u);
  EXPECT_EQ(feb.front(), "2024-02-01");
  EXPECT_EQ(feb.back(), "2024-02-29");
  EXPECT_EQ(Read(kRollup, Grain::kHour, Grain::kMonth, "2025-02").size(),
            28u * 24u);
  EXPECT_THAT(
      Read(kLookback3, Grain::kDay, Grain::kDay, "2025-01-02"),
      ElementsAre("2024-12-30", "2024-12-31", "2025-01-01", "2025-01-02"));
  EXPECT_THAT(Read(kLookback3, Grain::kMonth, Grain::kMonth, "2025-02"),
              ElementsAre("2024-11", "2024-12", "2025-01", "2025-02"));
}

TEST(UpstreamMappingTest, AffectedPerMapping) {
  EXPECT_THAT(Affected({"u", Mapping::kIdentity}, Grain::kDay, Grain::kDay,
                       {"2025-03-02", "2025-03-01", "2025-03-02"}),
              ElementsAre("2025-03-01", "2025-03-02"));
  EXPECT_THAT(
      Affected({"u", Mapping::kAll}, Grain::kDay, Grain::kDay, {"2025-03-01"}),
      ElementsAre("<every>"));
  EXPECT_THAT(Affected(kRollup, Grain::kDay, Grain::kMonth,
                       {"2024-02-29", "2024-03-01", "2024-03-31"}),
              ElementsAre("2024-02", "2024-03"));
  EXPECT_THAT(Affected(kRollup, Grain::kHour, Grain::kDay,
                       {"2025-03-31T23", "2025-04-01T00"}),
              ElementsAre("2025-03-31", "2025-04-01"));
  EXPECT_THAT(Affected(kRollup, Grain::kHour, Grain::kMonth,
                       {"2024-12-31T23", "2025-01-01T00"}),
              ElementsAre("2024-12", "2025-01"));
  EXPECT_THAT(
      Affected(kLookback3, Grain::kDay, Grain::kDay, {"2024-12-30"}),
      ElementsAre("2024-12-30", "2024-12-31", "2025-01-01", "2025-01-02"));
  EXPECT_THAT(
      Affected(kLookback3, Grain::kHour, Grain::kHour, {"2025-02-28T22"}),
      ElementsAre("2025-02-28T22", "2025-02-28T23", "2025-03-01T00",
                  "2025-03-01T01"));
  // A grain mismatch the catalog would refuse is an error, not a guess.
  EXPECT_FALSE(
      PartitionsAffected(kLookback3, Grain::kDay, Grain::kMonth, {"2025-01-01"})
          .ok());
  EXPECT_FALSE(
      PartitionsRead(kRollup, Grain::kDay, Grain::kDay, "2025-01-01").ok());
}

TEST(UpstreamMappingTest, ReasonsNameTheUpstreamAndTheMapping) {
  EXPECT_EQ(DownstreamReason({"u", Mapping::kIdentity}, "orders"),
            "downstream of orders");
  EXPECT_EQ(DownstreamReason({"u", Mapping::kRollup}, "daily"),
            "downstream of daily via rollup");
  EXPECT_EQ(DownstreamReason({"u", Mapping::kLookback, 7}, "daily"),
            "downstream of daily via lookback 7");
  EXPECT_EQ(DownstreamReason({"u", Mapping::kAll}, "dim"),
            "downstream of dim via all");
}

TEST(UpstreamMappingTest, WindowStartIsTheStartOfTheWindowsFirstPartition) {
  DatasetSpec d;
  d.name = "rolling";
  d.partition = PartitionSpec{"ds", Grain::kDay, {}};
  d.upstream = {{"a", Mapping::kLookback, 2},
                {"b", Mapping::kLookback, 7},
                {"c", Mapping::kAll}};
  EXPECT_EQ(MaxLookback(d), 7);
  auto start = WindowStart(d, "2025-01-03");
  ASSERT_TRUE(start.ok()) << start.status();
  EXPECT_EQ(start->value_or("?"), "2024-12-27");
  // Near year 0001 the window starts at the first partition.
  start = WindowStart(d, "0001-01-02");
  ASSERT_TRUE(start.ok()) << start.status();
  EXPECT_EQ(start->value_or("?"), "0001-01-01");

  DatasetSpec hourly;
  hourly.partition = PartitionSpec{"h", Grain::kHour, {}};
  hourly.upstream = {{"a", Mapping::kLookback, 3}};
  start = WindowStart(hourly, "2025-03-01T01");
  ASSERT_TRUE(start.ok()) << start.status();
  EXPECT_EQ(start->value_or("?"), "2025-02-28 22:00:00");

  DatasetSpec monthly;
  monthly.partition = PartitionSpec{"m", Grain::kMonth, {}};
  monthly.upstream = {{"a", Mapping::kLookback, 2}};
  start = WindowStart(monthly, "2025-01");
  ASSERT_TRUE(start.ok()) << start.status();
  EXPECT_EQ(start->value_or("?"), "2024-11-01");

  DatasetSpec plain;
  plain.partition = PartitionSpec{"ds", Grain::kDay, {}};
  plain.upstream = {{"a", Mapping::kIdentity}};
  start = WindowStart(plain, "2025-01-03");
  ASSERT_TRUE(start.ok());
  EXPECT_FALSE(start->has_value());
}

}  // namespace
}  // namespace core_upstream_mapping_test
}  // namespace backfill
