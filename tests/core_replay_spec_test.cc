// A derived dataset's `replay:` and `frozen:` (replay_spec_yaml.h,
// replay_policy.h): the declarations of docs/pipeline-spec.md load as
// written; each wrong value is a load error naming the file, the line and
// the reason; and FrozenRule::Freezes agrees, over generated partitions of
// every time grain and generated cutoffs, with a comparison of the
// partition's first instant and the cutoff written as text.

#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "absl/time/civil_time.h"
#include "absl/time/time.h"
#include "core/model/catalog.h"
#include "core/model/pipeline_loader.h"
#include "core/model/replay_policy.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace backfill {
namespace core_replay_spec_test {
namespace {

using ::testing::HasSubstr;

// orders (source, by day) -> daily (derived, by day) with `$EXTRA` keys
// (each line indented four spaces) on daily; its name is line 7.
std::string Pipeline(const std::string& extra,
                     const std::string& grain = "day") {
  return absl::StrReplaceAll(
      R"yaml(datasets:
  - name: orders
    kind: source
    table: raw_orders
    partition: {column: day, grain: day}

  - name: daily
    kind: derived
    partition: {column: day, grain: $GRAIN}
    upstream: [{dataset: orders, mapping: $MAPPING}]
    transform: "SELECT day, 1 AS n FROM raw_orders WHERE day = :partition"
    contract: {columns: {day: TEXT, n: INTEGER}}
$EXTRA)yaml",
      {{"$EXTRA", extra},
       {"$GRAIN", grain},
       {"$MAPPING", grain == "day" ? "identity" : "all"}});
}

absl::StatusOr<Catalog> Load(const std::string& text) {
  return LoadPipelineTexts({{"p.yaml", text}});
}

TEST(ReplaySpecTest, TheDocumentedDeclarationLoads) {
  auto c = Load(Pipeline(R"yaml(    replay:
      on: [input_change, transform_change]
      window: 90d
      settle: 30m
      max_cost: 10%
      approval: auto
      check_every: 5m
    frozen:
      before: 2025-01-01
      older_than: 35d
)yaml"));
  ASSERT_TRUE(c.ok()) << c.status();
  const DatasetSpec* daily = c->Find("daily");
  ASSERT_NE(daily, nullptr);
  ASSERT_TRUE(daily->replay.has_value());
  const ReplayPolicy& r = *daily->replay;
  EXPECT_TRUE(r.on_input_change);
  EXPECT_TRUE(r.on_transform_change);
  EXPECT_EQ(r.window, absl::Hours(24 * 90));
  EXPECT_EQ(r.settle, absl::Minutes(30));
  ASSERT_TRUE(r.max_cost.has_value());
  EXPECT_DOUBLE_EQ(r.max_cost->fraction.value_or(-1), 0.10);
  EXPECT_FALSE(r.max_cost->input_rows.has_value());
  EXPECT_FALSE(r.approval_required);
  EXPECT_EQ(r.check_every, absl::Minutes(5));
  EXPECT_EQ(r.line, 14);
  ASSERT_TRUE(daily->frozen.has_value());
  EXPECT_EQ(daily->frozen->before, absl::CivilDay(2025, 1, 1));
  EXPECT_EQ(daily->frozen->older_than, absl::Hours(24 * 35));
  EXPECT_EQ(daily->frozen->Describe(),
            "frozen.before 2025-01-01 and frozen.older_than 35d");
  EXPECT_EQ(daily->frozen->line, 21);
}

TEST(ReplaySpecTest, DefaultsAndTheOtherForms) {
  auto c = Load(Pipeline(
      R"yaml(    replay: {on: [transform_change], window: 12h, max_cost: 2000000, approval: required}
    frozen: {older_than: 90m}
)yaml",
      "hour"));
  ASSERT_TRUE(c.ok()) << c.status();
  const DatasetSpec* daily = c->Find("daily");
  ASSERT_NE(daily, nullptr);
  EXPECT_FALSE(daily->replay->on_input_change);
  EXPECT_TRUE(daily->replay->on_transform_change);
  EXPECT_EQ(daily->replay->settle, absl::ZeroDuration());
  EXPECT_EQ(daily->replay->check_every, kDefaultCheckEvery);
  EXPECT_EQ(daily->replay->max_cost->input_rows.value_or(-1), 2000000);
  EXPECT_TRUE(daily->replay->approval_required);
  EXPECT_FALSE(daily->frozen->before.has_value());
  EXPECT_EQ(daily->frozen->Describe(), "frozen.older_than 90m");
  // Neither declared: none.
  auto plain = Load(Pipeline(""));
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_FALSE(plain->Find("daily")->replay.has_value());
  EXPECT_FALSE(plain->Find("daily")->frozen.has_value());
}

TEST(ReplaySpecTest, EachWrongValueIsALoadErrorWithItsLine) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"    replay: {on: [input_change], window: 90}\n",
       "p.yaml:13: `window` in the replay policy of dataset \"daily\" is "
       "\"90\"; expected a whole number of seconds, minutes, hours or days "
       "such as 90d, 12h, 30m or 45s"},
      {"    replay: {on: [input_change], window: 90d, max_cost: 120%}\n",
       "p.yaml:13: `max_cost` in the replay policy of dataset \"daily\" is "
       "\"120%\"; a share of a full reload is above 0% and at most 100%"},
      {"    replay: {on: [input_change], window: 90d, max_cost: lots}\n",
       "`max_cost` in the replay policy of dataset \"daily\" is \"lots\"; "
       "expected a share of a full reload such as 10% or a whole number of "
       "input rows such as 2000000"},
      {"    replay: {on: [input_change], window: 90d, max_cost: -5}\n",
       "is \"-5\"; expected a share of a full reload"},
      {"    replay: {on: [tuesday], window: 90d}\n",
       "p.yaml:13: `on` in the replay policy of dataset \"daily\" names "
       "\"tuesday\"; expected input_change or transform_change"},
      {"    replay: {on: [input_change, input_change], window: 90d}\n",
       "names input_change twice"},
      {"    replay: {on: input_change, window: 90d}\n",
       "`on` in the replay policy of dataset \"daily\" must be a list"},
      {"    replay: {window: 90d}\n",
       "p.yaml:13: missing `on:` in the replay policy of dataset \"daily\""},
      {"    replay: {on: [input_change]}\n",
       "missing `window:` in the replay policy of dataset \"daily\""},
      {"    replay: {on: [input_change], window: 90d, approval: maybe}\n",
       "`approval` in the replay policy of dataset \"daily\" is \"maybe\"; "
       "expected auto or required"},
      {"    replay: {on: [input_change], window: 90d, check_every: 2d}\n",
       "`check_every` in the replay policy of dataset \"daily\" is \"2d\"; "
       "expected from 1s to 1d"},
      {"    replay: {on: [input_change], window: 90d, every: 5m}\n",
       "unknown key \"every\" in the replay policy of dataset \"daily\"; "
       "expected one of: on, window, settle, max_cost, approval, "
       "check_every"},
      {"    replay: [input_change]\n",
       "`replay` in dataset \"daily\" must be a map"},
      {"    frozen: {before: 2025-02-30}\n",
       "p.yaml:13: `before` in the frozen rule of dataset \"daily\" is "
       "\"2025-02-30\"; expected a day YYYY-MM-DD such as 2025-01-01"},
      {"    frozen: {before: 2025-1-1}\n", "is \"2025-1-1\"; expected a day"},
      {"    frozen: {before: yesterday}\n", "is \"yesterday\"; expected a day"},
      {"    frozen: {older_than: 35}\n",
       "`older_than` in the frozen rule of dataset \"daily\" is \"35\"; "
       "expected a whole number"},
      {"    frozen: {}\n",
       "`frozen` in dataset \"daily\" needs `before:`, `older_than:` or both"},
      {"    frozen:\n      before: 2025-01-01\n      after: 2026-01-01\n",
       "p.yaml:15: unknown key \"after\" in the frozen rule of dataset "
       "\"daily\"; expected one of: before, older_than"},
  };
  for (const auto& [extra, error] : cases) {
    SCOPED_TRACE(extra);
    auto c = Load(Pipeline(extra));
    ASSERT_FALSE(c.ok());
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(c.status().message(), HasSubstr(error));
  }
}

TEST(ReplaySpecTest, OnlyDerivedDatasetsPartitionedInTime) {
  auto on_source = Load(absl::StrReplaceAll(
      Pipeline(""), {{"    partition: {column: day, grain: day}\n\n",
                      "    partition: {column: day, grain: day}\n"
                      "    frozen: {before: 2025-01-01}\n\n"}}));
  ASSERT_FALSE(on_source.ok());
  EXPECT_THAT(on_source.status().message(),
              HasSubstr("p.yaml:6: `frozen` in dataset \"orders\" is only "
                        "allowed on derived datasets"));
  auto by_key = Load(absl::StrReplaceAll(
      Pipeline("    replay: {on: [input_change], window: 1d}\n"),
      {{"grain: day}\n    upstream: [{dataset: orders, mapping: identity}]",
        "grain: key, keys: [eu, us]}\n    upstream: [{dataset: orders, "
        "mapping: all}]"}}));
  ASSERT_FALSE(by_key.ok());
  EXPECT_THAT(by_key.status().message(),
              HasSubstr("`replay` in dataset \"daily\" needs a dataset "
                        "partitioned by hour, day or month"));
}

// The first instant of `partition` of `grain`, as "YYYY-MM-DDTHH:MM:SS",
// written from the text of the partition alone.
std::string FirstInstantText(const std::string& grain,
                             const std::string& partition) {
  if (grain == "hour") return partition + ":00:00";
  if (grain == "day") return partition + "T00:00:00";
  return partition + "-01T00:00:00";
}

TEST(ReplaySpecTest, FreezesAgreesWithTheCutoffWrittenAsText) {
  std::mt19937 rng(20261207);
  const absl::TimeZone utc = absl::UTCTimeZone();
  int frozen = 0;
  int open = 0;
  for (int i = 0; i < 5000; ++i) {
    // Around month and year ends and hour 23 on purpose: days 1, 28-31.
    const int year = 2023 + static_cast<int>(rng() % 3);
    const int month = 1 + static_cast<int>(rng() % 12);
    const int days[] = {1, 2, 15, 28, 29, 30, 31};
    const absl::CivilDay day(year, month, days[rng() % 7]);  // normalised
    const int hour = rng() % 2 == 0 ? 23 : static_cast<int>(rng() % 24);
    const std::string grain =
        std::vector<std::string>{"hour", "day", "month"}[rng() % 3];
    std::string partition;
    PartitionLayout layout(Grain::kDay);
    if (grain == "hour") {
      partition = absl::StrFormat("%s T%02d", absl::FormatCivilTime(day), hour);
      partition.erase(10, 1);
      layout = PartitionLayout(Grain::kHour);
    } else if (grain == "day") {
      partition = absl::FormatCivilTime(day);
    } else {
      partition = absl::FormatCivilTime(absl::CivilMonth(day));
      layout = PartitionLayout(Grain::kMonth);
    }
    FrozenRule rule;
    if (rng() % 2 == 0) {
      rule.before = absl::CivilDay(year, 1 + static_cast<int>(rng() % 12),
                                   1 + static_cast<int>(rng() % 31));
    }
    const absl::Time now = absl::FromCivil(
        absl::CivilSecond(year, month, 1 + static_cast<int>(rng() % 28),
                          static_cast<int>(rng() % 24), 0, 0) +
            static_cast<int>(rng() % 3600),
        utc);
    if (!rule.before || rng() % 2 == 0) {
      rule.older_than = absl::Hours(static_cast<int>(rng() % (24 * 60)) + 1);
    }
    // The cutoff: the later of the two, as text that sorts as time does.
    std::string cutoff = "0000";
    if (rule.before) {
      cutoff = absl::FormatCivilTime(*rule.before) + "T00:00:00";
    }
    if (rule.older_than > absl::ZeroDuration()) {
      cutoff = std::max(cutoff, absl::FormatTime("%Y-%m-%dT%H:%M:%S",
                                                 now - rule.older_than, utc));
    }
    const bool expected = FirstInstantText(grain, partition) < cutoff;
    absl::StatusOr<bool> got = rule.Freezes(layout, partition, now);
    ASSERT_TRUE(got.ok()) << got.status() << " " << partition;
    EXPECT_EQ(*got, expected) << partition << " cutoff " << cutoff;
    (*got ? frozen : open)++;
  }
  // Both answers were exercised.
  EXPECT_GT(frozen, 500);
  EXPECT_GT(open, 500);
}

TEST(ReplaySpecTest, FreezesReadsTheTimeOfATimeKeyPartition) {
  FrozenRule rule;
  rule.before = absl::CivilDay(2025, 1, 1);
  const PartitionLayout layout(Grain::kDay, {"eu", "us"});
  const absl::Time now = absl::FromUnixSeconds(1767225600);  // 2026-01-01
  EXPECT_EQ(rule.Freezes(layout, "2024-12-31|eu", now).value_or(false), true);
  EXPECT_EQ(rule.Freezes(layout, "2025-01-01|us", now).value_or(true), false);
  EXPECT_FALSE(rule.Freezes(layout, "2025-01-01|fr", now).ok());
  EXPECT_FALSE(
      rule.Freezes(PartitionLayout(Grain::kDay), "2025-02-30", now).ok());
}

// The span a window and a frozen rule measure a partition by, against
// civil-time arithmetic: generated hours, days and months around the
// boundaries (hour 23, month ends, Feb 28/29, year ends), each partition
// from its first instant to the first of the next, UTC.
TEST(SpanOfTest, EveryPartitionEndsWhereTheNextBegins) {
  std::mt19937 rng(2718);
  const absl::CivilDay anchors[] = {
      absl::CivilDay(2024, 2, 28), absl::CivilDay(2024, 2, 29),
      absl::CivilDay(2025, 2, 28), absl::CivilDay(2024, 12, 31),
      absl::CivilDay(2025, 1, 31), absl::CivilDay(2025, 4, 30)};
  int checked = 0;
  for (int round = 0; round < 300; ++round) {
    const absl::CivilDay day = anchors[rng() % 6] + static_cast<int>(rng() % 3);
    const absl::CivilHour hour(day.year(), day.month(), day.day(),
                               rng() % 2 ? 23 : static_cast<int>(rng() % 24));
    const absl::CivilMonth month(day);
    struct Case {
      Grain grain;
      std::string text;
      absl::CivilSecond start, end;
    };
    const Case cases[] = {
        {Grain::kHour, absl::FormatCivilTime(hour).substr(0, 13), hour,
         hour + 1},
        {Grain::kDay, absl::FormatCivilTime(day), day, day + 1},
        {Grain::kMonth, absl::FormatCivilTime(month), month, month + 1},
    };
    for (const Case& c : cases) {
      auto span = SpanOf(PartitionLayout(c.grain), c.text);
      ASSERT_TRUE(span.ok()) << c.text << ": " << span.status();
      EXPECT_EQ(span->start, absl::FromCivil(c.start, absl::UTCTimeZone()))
          << c.text;
      EXPECT_EQ(span->end, absl::FromCivil(c.end, absl::UTCTimeZone()))
          << c.text;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 900);
  // A partition its layout refuses has no span.
  EXPECT_FALSE(SpanOf(PartitionLayout(Grain::kHour), "2025-02-28T24").ok());
  EXPECT_FALSE(SpanOf(PartitionLayout(Grain::kDay), "2025-02-29").ok());
}

}  // namespace
}  // namespace core_replay_spec_test
}  // namespace backfill
