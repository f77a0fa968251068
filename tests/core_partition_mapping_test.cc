#include <algorithm>
#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "absl/time/civil_time.h"
#include "core/model/partition.h"
#include "core/model/partition_mapping.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace backfill {
namespace core_partition_mapping_test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

using Strings = std::vector<std::string>;

std::string Message(const absl::Status& s) { return std::string(s.message()); }

// ------------------------------------------------------------ oracle --
// Independent of the code under test: formats with its own StrFormat and
// steps with absl civil time in plain loops.

std::string Fmt(absl::CivilHour h) {
  return absl::StrFormat("%04d-%02d-%02dT%02d", h.year(), h.month(), h.day(),
                         h.hour());
}
std::string Fmt(absl::CivilDay d) {
  return absl::StrFormat("%04d-%02d-%02d", d.year(), d.month(), d.day());
}
std::string Fmt(absl::CivilMonth m) {
  return absl::StrFormat("%04d-%02d", m.year(), m.month());
}

// Valid partitions: year 0001 onwards, before the last one of year 9999.
bool InRange(absl::CivilHour h) {
  return h.year() >= 1 && h < absl::CivilHour(9999, 12, 31, 23);
}
bool InRange(absl::CivilDay d) {
  return d.year() >= 1 && d < absl::CivilDay(9999, 12, 31);
}
bool InRange(absl::CivilMonth m) {
  return m.year() >= 1 && m < absl::CivilMonth(9999, 12);
}

template <typename C>
Strings OracleWindow(C lo, C hi) {
  Strings out;
  for (C c = lo; c <= hi; ++c) {
    if (InRange(c)) out.push_back(Fmt(c));
  }
  return out;
}

bool Contains(const Strings& values, const std::string& value) {
  return std::find(values.begin(), values.end(), value) != values.end();
}

bool SortedUnique(const Strings& values) {
  return std::adjacent_find(values.begin(), values.end(),
                            [](const std::string& a, const std::string& b) {
                              return a >= b;
                            }) == values.end();
}

// ------------------------------------------------------- rollup: errors --

TEST(PartitionMappingRollupTest, ValidGrainPairs) {
  EXPECT_TRUE(ValidateRollup(Grain::kHour, Grain::kDay).ok());
  EXPECT_TRUE(ValidateRollup(Grain::kDay, Grain::kMonth).ok());
  EXPECT_TRUE(ValidateRollup(Grain::kHour, Grain::kMonth).ok());
}

TEST(PartitionMappingRollupTest, InvalidGrainPairsAreInvalidArgument) {
  const std::pair<Grain, Grain> bad[] = {
      {Grain::kDay, Grain::kDay},     {Grain::kHour, Grain::kHour},
      {Grain::kMonth, Grain::kMonth}, {Grain::kDay, Grain::kHour},
      {Grain::kMonth, Grain::kDay},   {Grain::kMonth, Grain::kHour},
      {Grain::kKey, Grain::kDay},     {Grain::kHour, Grain::kKey},
      {Grain::kNone, Grain::kMonth},  {Grain::kDay, Grain::kNone},
      {Grain::kKey, Grain::kKey}};
  for (const auto& [fine, coarse] : bad) {
    absl::Status s = ValidateRollup(fine, coarse);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument)
        << GrainName(fine) << " -> " << GrainName(coarse);
    EXPECT_THAT(Message(s),
                HasSubstr("hour -> day, day -> month or hour -> month"));
    EXPECT_EQ(RollupParent(fine, coarse, "2025-03-31").status().code(),
              absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(RollupChildren(fine, coarse, "2025-03").status().code(),
              absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(RollupAffectedPartitions(fine, coarse, {}).status().code(),
              absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(RollupInputPartitions(fine, coarse, {}).status().code(),
              absl::StatusCode::kInvalidArgument);
  }
  EXPECT_THAT(Message(ValidateRollup(Grain::kDay, Grain::kDay)),
              HasSubstr("day -> day is not one"));
  EXPECT_THAT(Message(ValidateRollup(Grain::kMonth, Grain::kDay)),
              HasSubstr("month -> day is not one"));
  EXPECT_THAT(Message(ValidateRollup(Grain::kNone, Grain::kMonth)),
              HasSubstr("none -> month"));
  EXPECT_THAT(Message(ValidateRollup(Grain::kKey, Grain::kDay)),
              HasSubstr("key -> day"));
}

TEST(PartitionMappingRollupTest, InvalidPartitionValuesAreInvalidArgument) {
  struct Case {
    Grain grain;
    const char* value;
  };
  // Fine partitions.
  for (const auto& [fine, value] :
       {Case{Grain::kDay, "2025-02-29"}, Case{Grain::kDay, "1900-02-29"},
        Case{Grain::kDay, "2025-03-31T23"}, Case{Grain::kDay, "2025-3-31"},
        Case{Grain::kDay, "9999-12-31"}, Case{Grain::kDay, "0000-12-31"},
        Case{Grain::kHour, "2025-03-31T24"}, Case{Grain::kHour, "2025-03-31"},
        Case{Grain::kHour, "9999-12-31T23"}}) {
    absl::StatusOr<std::string> parent =
        RollupParent(fine, Grain::kMonth, value);
    EXPECT_EQ(parent.status().code(), absl::StatusCode::kInvalidArgument)
        << value;
    EXPECT_EQ(Message(parent.status()), Message(ValidatePartition(fine, value)))
        << value;
    EXPECT_EQ(
        RollupAffectedPartitions(fine, Grain::kMonth, {"2025-01-01", value})
            .status()
            .code(),
        absl::StatusCode::kInvalidArgument)
        << value;
  }
  // Coarse partitions.
  for (const auto& [coarse, value] :
       {Case{Grain::kMonth, "2025-13"}, Case{Grain::kMonth, "2025-00"},
        Case{Grain::kMonth, "9999-12"}, Case{Grain::kMonth, "2025-03-01"},
        Case{Grain::kDay, "2023-02-29"}, Case{Grain::kDay, "9999-12-31"}}) {
    absl::StatusOr<Strings> children =
        RollupChildren(Grain::kHour, coarse, value);
    EXPECT_EQ(children.status().code(), absl::StatusCode::kInvalidArgument)
        << value;
    EXPECT_EQ(Message(children.status()),
              Message(ValidatePartition(coarse, value)))
        << value;
  }
  EXPECT_THAT(
      Message(RollupParent(Grain::kDay, Grain::kMonth, "2025-02-30").status()),
      HasSubstr("YYYY-MM-DD"));
}

// ------------------------------------------------------- rollup: parent --

TEST(PartitionMappingRollupTest, ParentAtBoundaries) {
  auto parent = [](Grain fine, Grain coarse, const char* value) {
    absl::StatusOr<std::string> p = RollupParent(fine, coarse, value);
    EXPECT_TRUE(p.ok()) << value << ": " << p.status();
    return p.ok() ? *p : std::string("<error>");
  };
  EXPECT_EQ(parent(Grain::kDay, Grain::kMonth, "2025-03-31"), "2025-03");
  EXPECT_EQ(parent(Grain::kDay, Grain::kMonth, "2025-03-01"), "2025-03");
  EXPECT_EQ(parent(Grain::kHour, Grain::kDay, "2025-03-31T23"), "2025-03-31");
  EXPECT_EQ(parent(Grain::kHour, Grain::kDay, "2025-03-31T00"), "2025-03-31");
  EXPECT_EQ(parent(Grain::kHour, Grain::kMonth, "2025-03-31T23"), "2025-03");
  EXPECT_EQ(parent(Grain::kHour, Grain::kDay, "2024-12-31T23"), "2024-12-31");
  EXPECT_EQ(parent(Grain::kHour, Grain::kMonth, "2024-12-31T23"), "2024-12");
  EXPECT_EQ(parent(Grain::kHour, Grain::kMonth, "2025-01-01T00"), "2025-01");
  EXPECT_EQ(parent(Grain::kDay, Grain::kMonth, "2024-02-29"), "2024-02");
  EXPECT_EQ(parent(Grain::kDay, Grain::kMonth, "2000-02-29"), "2000-02");
  EXPECT_EQ(parent(Grain::kDay, Grain::kMonth, "1900-02-28"), "1900-02");
  EXPECT_EQ(parent(Grain::kHour, Grain::kDay, "2024-02-29T23"), "2024-02-29");
  EXPECT_EQ(parent(Grain::kHour, Grain::kDay, "0001-01-01T00"), "0001-01-01");
  EXPECT_EQ(parent(Grain::kHour, Grain::kMonth, "0001-01-01T00"), "0001-01");
  EXPECT_EQ(parent(Grain::kDay, Grain::kMonth, "0001-01-01"), "0001-01");
  EXPECT_EQ(parent(Grain::kHour, Grain::kDay, "9999-12-30T23"), "9999-12-30");
  EXPECT_EQ(parent(Grain::kHour, Grain::kMonth, "9999-11-30T23"), "9999-11");
  EXPECT_EQ(parent(Grain::kDay, Grain::kMonth, "9999-11-30"), "9999-11");
}

TEST(PartitionMappingRollupTest, ParentBeyondYear9999IsOutOfRange) {
  // Valid fine partitions whose coarse partition is the last of year 9999.
  for (const auto& [fine, coarse, value] :
       {std::tuple{Grain::kDay, Grain::kMonth, "9999-12-30"},
        std::tuple{Grain::kDay, Grain::kMonth, "9999-12-01"},
        std::tuple{Grain::kHour, Grain::kMonth, "9999-12-01T00"},
        std::tuple{Grain::kHour, Grain::kDay, "9999-12-31T00"},
        std::tuple{Grain::kHour, Grain::kDay, "9999-12-31T22"}}) {
    ASSERT_TRUE(ValidatePartition(fine, value).ok()) << value;
    absl::StatusOr<std::string> p = RollupParent(fine, coarse, value);
    EXPECT_EQ(p.status().code(), absl::StatusCode::kOutOfRange) << value;
    EXPECT_THAT(Message(p.status()), HasSubstr("beyond the last supported"));
  }
}

// ----------------------------------------------------- rollup: children --

TEST(PartitionMappingRollupTest, DaysOfFebruaryInLeapAndNonLeapYears) {
  struct Case {
    const char* month;
    size_t days;
    const char* last;
  };
  for (const Case& c :
       {Case{"2024-02", 29, "2024-02-29"}, Case{"2025-02", 28, "2025-02-28"},
        Case{"1900-02", 28, "1900-02-28"}, Case{"2000-02", 29, "2000-02-29"}}) {
    absl::StatusOr<Strings> days =
        RollupChildren(Grain::kDay, Grain::kMonth, c.month);
    ASSERT_TRUE(days.ok()) << days.status();
    ASSERT_EQ(days->size(), c.days) << c.month;
    EXPECT_EQ(days->front(), std::string(c.month) + "-01");
    EXPECT_EQ(days->back(), c.last);
  }
}

TEST(PartitionMappingRollupTest, DaysOfMonthsAtMonthAndYearEnds) {
  absl::StatusOr<Strings> days =
      RollupChildren(Grain::kDay, Grain::kMonth, "2025-04");
  ASSERT_TRUE(days.ok());
  EXPECT_EQ(days->size(), 30u);
  EXPECT_EQ(days->back(), "2025-04-30");

  days = RollupChildren(Grain::kDay, Grain::kMonth, "2024-12");
  ASSERT_TRUE(days.ok());
  EXPECT_EQ(days->size(), 31u);
  EXPECT_EQ(days->back(), "2024-12-31");

  days = RollupChildren(Grain::kDay, Grain::kMonth, "0001-01");
  ASSERT_TRUE(days.ok());
  EXPECT_EQ(days->size(), 31u);
  EXPECT_EQ(days->front(), "0001-01-01");

  days = RollupChildren(Grain::kDay, Grain::kMonth, "9999-11");
  ASSERT_TRUE(days.ok());
  EXPECT_EQ(days->size(), 30u);
  EXPECT_EQ(days->back(), "9999-11-30");
}

TEST(PartitionMappingRollupTest, HoursOfADay) {
  absl::StatusOr<Strings> hours =
      RollupChildren(Grain::kHour, Grain::kDay, "2025-03-31");
  ASSERT_TRUE(hours.ok()) << hours.status();
  ASSERT_EQ(hours->size(), 24u);
  EXPECT_EQ(hours->front(), "2025-03-31T00");
  EXPECT_EQ((*hours)[9], "2025-03-31T09");
  EXPECT_EQ((*hours)[10], "2025-03-31T10");
  EXPECT_EQ(hours->back(), "2025-03-31T23");

  hours = RollupChildren(Grain::kHour, Grain::kDay, "2024-02-29");
  ASSERT_TRUE(hours.ok());
  EXPECT_EQ(hours->size(), 24u);
  EXPECT_EQ(hours->back(), "2024-02-29T23");

  hours = RollupChildren(Grain::kHour, Grain::kDay, "0001-01-01");
  ASSERT_TRUE(hours.ok());
  EXPECT_EQ(hours->front(), "0001-01-01T00");

  hours = RollupChildren(Grain::kHour, Grain::kDay, "9999-12-30");
  ASSERT_TRUE(hours.ok());
  EXPECT_EQ(hours->size(), 24u);
  EXPECT_EQ(hours->back(), "9999-12-30T23");
}

TEST(PartitionMappingRollupTest, HoursOfAMonth) {
  struct Case {
    const char* month;
    size_t hours;
    const char* last;
  };
  for (const Case& c : {Case{"2024-02", 29 * 24, "2024-02-29T23"},
                        Case{"2025-02", 28 * 24, "2025-02-28T23"},
                        Case{"1900-02", 28 * 24, "1900-02-28T23"},
                        Case{"2000-02", 29 * 24, "2000-02-29T23"},
                        Case{"2025-01", 31 * 24, "2025-01-31T23"},
                        Case{"2025-04", 30 * 24, "2025-04-30T23"},
                        Case{"9999-11", 30 * 24, "9999-11-30T23"}}) {
    absl::StatusOr<Strings> hours =
        RollupChildren(Grain::kHour, Grain::kMonth, c.month);
    ASSERT_TRUE(hours.ok()) << hours.status();
    ASSERT_EQ(hours->size(), c.hours) << c.month;
    EXPECT_EQ(hours->front(), std::string(c.month) + "-01T00");
    EXPECT_EQ(hours->back(), c.last);
    EXPECT_TRUE(SortedUnique(*hours));
  }
}

// -------------------------------------------------------- rollup: batch --

TEST(PartitionMappingRollupTest, AffectedPartitionsAreSortedDistinct) {
  absl::StatusOr<Strings> affected = RollupAffectedPartitions(
      Grain::kHour, Grain::kDay,
      {"2025-04-01T00", "2025-03-31T23", "2025-03-31T00", "9999-12-31T22",
       "2025-03-31T23"});
  ASSERT_TRUE(affected.ok()) << affected.status();
  // "9999-12-31T22" is in day "9999-12-31", which is not produced.
  EXPECT_THAT(*affected, ElementsAre("2025-03-31", "2025-04-01"));

  affected = RollupAffectedPartitions(
      Grain::kDay, Grain::kMonth,
      {"2025-01-01", "2024-12-31", "2024-02-29", "2024-12-01"});
  ASSERT_TRUE(affected.ok());
  EXPECT_THAT(*affected, ElementsAre("2024-02", "2024-12", "2025-01"));

  affected = RollupAffectedPartitions(Grain::kDay, Grain::kMonth, {});
  ASSERT_TRUE(affected.ok());
  EXPECT_THAT(*affected, IsEmpty());
}

TEST(PartitionMappingRollupTest, InputPartitionsAreSortedDistinct) {
  absl::StatusOr<Strings> inputs = RollupInputPartitions(
      Grain::kDay, Grain::kMonth, {"2025-02", "2024-02", "2025-02"});
  ASSERT_TRUE(inputs.ok()) << inputs.status();
  ASSERT_EQ(inputs->size(), 29u + 28u);
  EXPECT_EQ(inputs->front(), "2024-02-01");
  EXPECT_EQ((*inputs)[28], "2024-02-29");
  EXPECT_EQ((*inputs)[29], "2025-02-01");
  EXPECT_EQ(inputs->back(), "2025-02-28");
  EXPECT_TRUE(SortedUnique(*inputs));

  inputs = RollupInputPartitions(Grain::kHour, Grain::kDay,
                                 {"2025-01-01", "2024-12-31"});
  ASSERT_TRUE(inputs.ok());
  ASSERT_EQ(inputs->size(), 48u);
  EXPECT_EQ((*inputs)[23], "2024-12-31T23");
  EXPECT_EQ((*inputs)[24], "2025-01-01T00");

  inputs = RollupInputPartitions(Grain::kHour, Grain::kDay, {});
  ASSERT_TRUE(inputs.ok());
  EXPECT_THAT(*inputs, IsEmpty());

  EXPECT_EQ(
      RollupInputPartitions(Grain::kDay, Grain::kMonth, {"2025-01", "2025-13"})
          .status()
          .code(),
      absl::StatusCode::kInvalidArgument);
}

// ----------------------------------------------------- lookback: errors --

TEST(PartitionMappingLookbackTest, InvalidLookbackIsInvalidArgument) {
  for (int n : {0, -1, kMaxLookback + 1}) {
    absl::Status s = ValidateLookback(Grain::kDay, n);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << n;
    EXPECT_THAT(Message(s), HasSubstr("1 to 10000"));
    EXPECT_EQ(LookbackInputs(Grain::kDay, n, "2025-03-01").status().code(),
              absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(LookbackAffected(Grain::kDay, n, "2025-03-01").status().code(),
              absl::StatusCode::kInvalidArgument);
  }
  EXPECT_TRUE(ValidateLookback(Grain::kHour, 1).ok());
  EXPECT_TRUE(ValidateLookback(Grain::kMonth, kMaxLookback).ok());
  for (Grain g : {Grain::kKey, Grain::kNone}) {
    absl::Status s = ValidateLookback(g, 1);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(Message(s), HasSubstr("needs a time grain"));
    EXPECT_EQ(LookbackInputPartitions(g, 1, {}).status().code(),
              absl::StatusCode::kInvalidArgument);
  }
}

TEST(PartitionMappingLookbackTest, InvalidPartitionIsInvalidArgument) {
  for (const char* value :
       {"2025-02-29", "9999-12-31", "2025-03-01T00", "", "0000-01-01"}) {
    absl::StatusOr<Strings> inputs = LookbackInputs(Grain::kDay, 1, value);
    EXPECT_EQ(inputs.status().code(), absl::StatusCode::kInvalidArgument)
        << value;
    EXPECT_EQ(Message(inputs.status()),
              Message(ValidatePartition(Grain::kDay, value)));
    EXPECT_EQ(LookbackAffected(Grain::kDay, 1, value).status().code(),
              absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(LookbackAffectedPartitions(Grain::kDay, 1, {"2025-01-01", value})
                  .status()
                  .code(),
              absl::StatusCode::kInvalidArgument);
  }
}

// ---------------------------------------------------- lookback: N = 1 --

Strings Inputs(Grain grain, int n, const char* value) {
  absl::StatusOr<Strings> out = LookbackInputs(grain, n, value);
  EXPECT_TRUE(out.ok()) << value << ": " << out.status();
  return out.ok() ? *out : Strings{"<error>"};
}

Strings Affected(Grain grain, int n, const char* value) {
  absl::StatusOr<Strings> out = LookbackAffected(grain, n, value);
  EXPECT_TRUE(out.ok()) << value << ": " << out.status();
  return out.ok() ? *out : Strings{"<error>"};
}

TEST(PartitionMappingLookbackTest, OneDayAcrossYearEnd) {
  EXPECT_THAT(Inputs(Grain::kDay, 1, "2025-01-01"),
              ElementsAre("2024-12-31", "2025-01-01"));
  EXPECT_THAT(Affected(Grain::kDay, 1, "2024-12-31"),
              ElementsAre("2024-12-31", "2025-01-01"));
  EXPECT_THAT(Inputs(Grain::kHour, 1, "2025-01-01T00"),
              ElementsAre("2024-12-31T23", "2025-01-01T00"));
  EXPECT_THAT(Affected(Grain::kHour, 1, "2024-12-31T23"),
              ElementsAre("2024-12-31T23", "2025-01-01T00"));
  EXPECT_THAT(Inputs(Grain::kMonth, 1, "2025-01"),
              ElementsAre("2024-12", "2025-01"));
  EXPECT_THAT(Affected(Grain::kMonth, 1, "2024-12"),
              ElementsAre("2024-12", "2025-01"));
}

TEST(PartitionMappingLookbackTest, OneDayAcrossFebruaryEnd) {
  EXPECT_THAT(Inputs(Grain::kDay, 1, "2024-03-01"),
              ElementsAre("2024-02-29", "2024-03-01"));
  EXPECT_THAT(Inputs(Grain::kDay, 1, "2025-03-01"),
              ElementsAre("2025-02-28", "2025-03-01"));
  EXPECT_THAT(Inputs(Grain::kDay, 1, "1900-03-01"),
              ElementsAre("1900-02-28", "1900-03-01"));
  EXPECT_THAT(Inputs(Grain::kDay, 1, "2000-03-01"),
              ElementsAre("2000-02-29", "2000-03-01"));
  EXPECT_THAT(Affected(Grain::kDay, 1, "2024-02-28"),
              ElementsAre("2024-02-28", "2024-02-29"));
  EXPECT_THAT(Affected(Grain::kDay, 1, "2025-02-28"),
              ElementsAre("2025-02-28", "2025-03-01"));
  EXPECT_THAT(Affected(Grain::kDay, 1, "1900-02-28"),
              ElementsAre("1900-02-28", "1900-03-01"));
  EXPECT_THAT(Affected(Grain::kDay, 1, "2000-02-28"),
              ElementsAre("2000-02-28", "2000-02-29"));
  EXPECT_THAT(Inputs(Grain::kHour, 1, "2024-03-01T00"),
              ElementsAre("2024-02-29T23", "2024-03-01T00"));
  EXPECT_THAT(Inputs(Grain::kHour, 1, "2025-03-01T00"),
              ElementsAre("2025-02-28T23", "2025-03-01T00"));
  EXPECT_THAT(Affected(Grain::kHour, 1, "2025-03-31T23"),
              ElementsAre("2025-03-31T23", "2025-04-01T00"));
}

// -------------------------------------------------- lookback: larger N --

TEST(PartitionMappingLookbackTest, LargerNAcrossMonthEnd) {
  EXPECT_THAT(
      Inputs(Grain::kDay, 7, "2025-03-03"),
      ElementsAre("2025-02-24", "2025-02-25", "2025-02-26", "2025-02-27",
                  "2025-02-28", "2025-03-01", "2025-03-02", "2025-03-03"));
  EXPECT_THAT(
      Inputs(Grain::kDay, 7, "2024-03-03"),
      ElementsAre("2024-02-25", "2024-02-26", "2024-02-27", "2024-02-28",
                  "2024-02-29", "2024-03-01", "2024-03-02", "2024-03-03"));
  EXPECT_THAT(
      Affected(Grain::kDay, 7, "2025-01-28"),
      ElementsAre("2025-01-28", "2025-01-29", "2025-01-30", "2025-01-31",
                  "2025-02-01", "2025-02-02", "2025-02-03", "2025-02-04"));
  EXPECT_THAT(
      Affected(Grain::kDay, 3, "2025-12-30"),
      ElementsAre("2025-12-30", "2025-12-31", "2026-01-01", "2026-01-02"));

  Strings hours = Inputs(Grain::kHour, 30, "2025-04-01T05");
  ASSERT_EQ(hours.size(), 31u);
  EXPECT_EQ(hours.front(), "2025-03-30T23");
  EXPECT_EQ(hours[1], "2025-03-31T00");
  EXPECT_EQ(hours[25], "2025-04-01T00");
  EXPECT_EQ(hours.back(), "2025-04-01T05");

  Strings months = Inputs(Grain::kMonth, 13, "2025-01");
  ASSERT_EQ(months.size(), 14u);
  EXPECT_EQ(months.front(), "2023-12");
  EXPECT_EQ(months[1], "2024-01");
  EXPECT_EQ(months.back(), "2025-01");

  Strings days = Inputs(Grain::kDay, kMaxLookback, "2025-03-01");
  ASSERT_EQ(days.size(), static_cast<size_t>(kMaxLookback) + 1);
  // 10000 days before 2025-03-01 is 1997-10-14.
  EXPECT_EQ(days.front(), "1997-10-14");
  EXPECT_TRUE(SortedUnique(days));
}

// --------------------------------------------- lookback: year limits --

TEST(PartitionMappingLookbackTest, Year0001StartIsNotCrossed) {
  EXPECT_THAT(Inputs(Grain::kDay, 3, "0001-01-02"),
              ElementsAre("0001-01-01", "0001-01-02"));
  EXPECT_THAT(Inputs(Grain::kDay, kMaxLookback, "0001-01-01"),
              ElementsAre("0001-01-01"));
  EXPECT_THAT(Inputs(Grain::kHour, 1, "0001-01-01T00"),
              ElementsAre("0001-01-01T00"));
  EXPECT_THAT(Inputs(Grain::kMonth, 5, "0001-03"),
              ElementsAre("0001-01", "0001-02", "0001-03"));
  EXPECT_THAT(Affected(Grain::kDay, 2, "0001-01-01"),
              ElementsAre("0001-01-01", "0001-01-02", "0001-01-03"));
}

TEST(PartitionMappingLookbackTest, Year9999EndIsNotCrossed) {
  EXPECT_THAT(Affected(Grain::kDay, 3, "9999-12-29"),
              ElementsAre("9999-12-29", "9999-12-30"));
  EXPECT_THAT(Affected(Grain::kDay, kMaxLookback, "9999-12-30"),
              ElementsAre("9999-12-30"));
  EXPECT_THAT(Affected(Grain::kHour, 5, "9999-12-31T21"),
              ElementsAre("9999-12-31T21", "9999-12-31T22"));
  EXPECT_THAT(Affected(Grain::kMonth, 4, "9999-10"),
              ElementsAre("9999-10", "9999-11"));
  EXPECT_THAT(Inputs(Grain::kDay, 2, "9999-12-30"),
              ElementsAre("9999-12-28", "9999-12-29", "9999-12-30"));
}

// ---------------------------------------------------- lookback: batch --

TEST(PartitionMappingLookbackTest, BatchMergesOverlappingAndAdjacentWindows) {
  absl::StatusOr<Strings> inputs = LookbackInputPartitions(
      Grain::kDay, 2, {"2025-03-05", "2025-03-01", "2025-03-02", "2025-03-01"});
  ASSERT_TRUE(inputs.ok()) << inputs.status();
  EXPECT_THAT(*inputs, ElementsAre("2025-02-27", "2025-02-28", "2025-03-01",
                                   "2025-03-02", "2025-03-03", "2025-03-04",
                                   "2025-03-05"));

  inputs =
      LookbackInputPartitions(Grain::kDay, 1, {"2025-03-10", "2025-03-01"});
  ASSERT_TRUE(inputs.ok());
  EXPECT_THAT(*inputs, ElementsAre("2025-02-28", "2025-03-01", "2025-03-09",
                                   "2025-03-10"));

  absl::StatusOr<Strings> affected = LookbackAffectedPartitions(
      Grain::kDay, 1, {"9999-12-30", "2025-12-31", "2025-12-31"});
  ASSERT_TRUE(affected.ok()) << affected.status();
  EXPECT_THAT(*affected, ElementsAre("2025-12-31", "2026-01-01", "9999-12-30"));

  affected = LookbackAffectedPartitions(Grain::kHour, 3, {});
  ASSERT_TRUE(affected.ok());
  EXPECT_THAT(*affected, IsEmpty());
}

// ---------------------------------------------------------- properties --

// Every partition of a window of each grain around the interesting
// boundaries, stepped with absl civil time.
template <typename C>
std::vector<C> Window(C from, int count) {
  std::vector<C> out;
  for (C c = from; static_cast<int>(out.size()) < count && c.year() <= 9999;
       ++c) {
    if (InRange(c)) out.push_back(c);
  }
  return out;
}

template <typename C>
std::vector<C> Samples(int window) {
  std::vector<C> out;
  for (C from : {C(1, 1, 1), C(1899, 12, 15), C(1900, 2, 10), C(2000, 2, 10),
                 C(2023, 12, 20), C(2024, 2, 10), C(2025, 2, 10),
                 C(9999, 12, 31) - window}) {
    std::vector<C> w = Window(from, window);
    out.insert(out.end(), w.begin(), w.end());
  }
  // Plus pseudo-random ones over the whole valid range.
  std::mt19937_64 rng(20250331);
  const C first(1, 1, 1);
  const C last(9999, 12, 31, 23);  // Truncated to C's alignment.
  std::uniform_int_distribution<int64_t> offset(0, (last - first) - 1);
  for (int i = 0; i < 200; ++i) out.push_back(first + offset(rng));
  return out;
}

template <typename Fine, typename Coarse>
void CheckRollupRoundTrip(Grain fine, Grain coarse) {
  for (Fine f : Samples<Fine>(60)) {
    const std::string value = Fmt(f);
    const Coarse c(f);
    absl::StatusOr<std::string> parent = RollupParent(fine, coarse, value);
    if (!InRange(c)) {
      EXPECT_EQ(parent.status().code(), absl::StatusCode::kOutOfRange) << value;
      continue;
    }
    ASSERT_TRUE(parent.ok()) << value << ": " << parent.status();
    EXPECT_EQ(*parent, Fmt(c)) << value;
    absl::StatusOr<Strings> children = RollupChildren(fine, coarse, *parent);
    ASSERT_TRUE(children.ok()) << *parent << ": " << children.status();
    EXPECT_TRUE(Contains(*children, value)) << value << " in " << *parent;
    // The oracle: every fine partition from the coarse one's start up to
    // the next coarse one's start.
    Strings expected;
    for (Fine x = Fine(c); x < Fine(c + 1); ++x) expected.push_back(Fmt(x));
    EXPECT_EQ(*children, expected) << *parent;
  }
}

TEST(PartitionMappingPropertyTest, RollupChildrenOfParentContainsPartition) {
  CheckRollupRoundTrip<absl::CivilHour, absl::CivilDay>(Grain::kHour,
                                                        Grain::kDay);
  CheckRollupRoundTrip<absl::CivilDay, absl::CivilMonth>(Grain::kDay,
                                                         Grain::kMonth);
  CheckRollupRoundTrip<absl::CivilHour, absl::CivilMonth>(Grain::kHour,
                                                          Grain::kMonth);
}

template <typename Fine, typename Coarse>
void CheckRollupBatch(Grain fine, Grain coarse) {
  std::vector<Fine> samples = Samples<Fine>(40);
  Strings values;
  std::set<std::string> parents;
  for (Fine f : samples) {
    values.push_back(Fmt(f));
    if (InRange(Coarse(f))) parents.insert(Fmt(Coarse(f)));
  }
  absl::StatusOr<Strings> affected =
      RollupAffectedPartitions(fine, coarse, values);
  ASSERT_TRUE(affected.ok()) << affected.status();
  EXPECT_EQ(*affected, Strings(parents.begin(), parents.end()));

  Strings coarse_values(parents.begin(), parents.end());
  std::reverse(coarse_values.begin(), coarse_values.end());
  absl::StatusOr<Strings> inputs =
      RollupInputPartitions(fine, coarse, coarse_values);
  ASSERT_TRUE(inputs.ok()) << inputs.status();
  std::set<std::string> expected;
  for (const std::string& p : parents) {
    Coarse c;
    ASSERT_TRUE(absl::ParseCivilTime(p, &c)) << p;
    for (Fine x = Fine(c); x < Fine(c + 1); ++x) expected.insert(Fmt(x));
  }
  EXPECT_EQ(*inputs, Strings(expected.begin(), expected.end()));
}

TEST(PartitionMappingPropertyTest, RollupBatchIsSortedUnionOfSingles) {
  CheckRollupBatch<absl::CivilHour, absl::CivilDay>(Grain::kHour, Grain::kDay);
  CheckRollupBatch<absl::CivilDay, absl::CivilMonth>(Grain::kDay,
                                                     Grain::kMonth);
  CheckRollupBatch<absl::CivilHour, absl::CivilMonth>(Grain::kHour,
                                                      Grain::kMonth);
}

// For lookback n over each window: Inputs(P) is the oracle's P-n .. P (in
// range), Affected(P) is P .. P+n, and Q in Affected(P) iff P in Inputs(Q).
template <typename C>
void CheckLookbackInverse(Grain grain, int n) {
  for (C from : {C(1, 1, 1), C(1900, 2, 10), C(2000, 2, 10), C(2024, 2, 10),
                 C(2024, 12, 20), C(9999, 12, 31) - 40}) {
    const std::vector<C> window = Window(from, 40);
    std::vector<Strings> inputs, affected;
    for (C p : window) {
      const std::string value = Fmt(p);
      absl::StatusOr<Strings> in = LookbackInputs(grain, n, value);
      absl::StatusOr<Strings> out = LookbackAffected(grain, n, value);
      ASSERT_TRUE(in.ok()) << value << ": " << in.status();
      ASSERT_TRUE(out.ok()) << value << ": " << out.status();
      EXPECT_EQ(*in, OracleWindow(p - n, p)) << value << " n=" << n;
      EXPECT_EQ(*out, OracleWindow(p, p + n)) << value << " n=" << n;
      inputs.push_back(*std::move(in));
      affected.push_back(*std::move(out));
    }
    for (size_t i = 0; i < window.size(); ++i) {
      for (size_t j = 0; j < window.size(); ++j) {
        const std::string p = Fmt(window[i]);
        const std::string q = Fmt(window[j]);
        EXPECT_EQ(Contains(affected[i], q), Contains(inputs[j], p))
            << "P=" << p << " Q=" << q << " n=" << n;
      }
    }
  }
  // Pseudo-random partitions over the whole range: every Q in Affected(P)
  // has P among its inputs, and every Q in Inputs(P) has P among the
  // partitions it affects.
  for (C p : Samples<C>(1)) {
    const std::string value = Fmt(p);
    absl::StatusOr<Strings> out = LookbackAffected(grain, n, value);
    absl::StatusOr<Strings> in = LookbackInputs(grain, n, value);
    ASSERT_TRUE(out.ok() && in.ok()) << value;
    for (const std::string& q : *out) {
      absl::StatusOr<Strings> q_in = LookbackInputs(grain, n, q);
      ASSERT_TRUE(q_in.ok()) << q;
      EXPECT_TRUE(Contains(*q_in, value)) << value << " -> " << q;
    }
    for (const std::string& q : *in) {
      absl::StatusOr<Strings> q_out = LookbackAffected(grain, n, q);
      ASSERT_TRUE(q_out.ok()) << q;
      EXPECT_TRUE(Contains(*q_out, value)) << q << " -> " << value;
    }
  }
}

TEST(PartitionMappingPropertyTest, LookbackDirectionsAreInverse) {
  for (int n : {1, 2, 7, 31}) {
    CheckLookbackInverse<absl::CivilHour>(Grain::kHour, n);
    CheckLookbackInverse<absl::CivilDay>(Grain::kDay, n);
    CheckLookbackInverse<absl::CivilMonth>(Grain::kMonth, n);
  }
}

// The batch helpers equal the sorted, de-duplicated union of the singles.
template <typename C>
void CheckLookbackBatch(Grain grain, int n) {
  std::vector<C> samples = Samples<C>(25);
  Strings values;
  std::set<std::string> inputs, affected;
  for (C p : samples) {
    values.push_back(Fmt(p));
    for (const std::string& v : OracleWindow(p - n, p)) inputs.insert(v);
    for (const std::string& v : OracleWindow(p, p + n)) affected.insert(v);
  }
  absl::StatusOr<Strings> batch_in = LookbackInputPartitions(grain, n, values);
  ASSERT_TRUE(batch_in.ok()) << batch_in.status();
  EXPECT_EQ(*batch_in, Strings(inputs.begin(), inputs.end())) << "n=" << n;
  absl::StatusOr<Strings> batch_out =
      LookbackAffectedPartitions(grain, n, values);
  ASSERT_TRUE(batch_out.ok()) << batch_out.status();
  EXPECT_EQ(*batch_out, Strings(affected.begin(), affected.end())) << "n=" << n;
}

TEST(PartitionMappingPropertyTest, LookbackBatchIsSortedUnionOfSingles) {
  for (int n : {1, 3, 24, 400}) {
    CheckLookbackBatch<absl::CivilHour>(Grain::kHour, n);
    CheckLookbackBatch<absl::CivilDay>(Grain::kDay, n);
    CheckLookbackBatch<absl::CivilMonth>(Grain::kMonth, n);
  }
}

}  // namespace
}  // namespace core_partition_mapping_test
}  // namespace backfill
