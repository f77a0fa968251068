#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "absl/time/civil_time.h"
#include "core/model/partition.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace backfill {
namespace core_partition_test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string Message(const absl::Status& s) { return std::string(s.message()); }

TEST(GrainTest, NamesRoundTrip) {
  for (Grain g : {Grain::kHour, Grain::kDay, Grain::kMonth, Grain::kKey}) {
    absl::StatusOr<Grain> parsed = ParseGrain(GrainName(g));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, g);
  }
  EXPECT_STREQ(GrainName(Grain::kNone), "");
  EXPECT_STREQ(GrainName(Grain::kHour), "hour");
  EXPECT_EQ(ParseGrain("week").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(ParseGrain("Day").status()), HasSubstr("hour, day"));
  EXPECT_FALSE(ParseGrain("").ok());
}

TEST(GrainTest, IsTimeGrain) {
  EXPECT_TRUE(IsTimeGrain(Grain::kHour));
  EXPECT_TRUE(IsTimeGrain(Grain::kDay));
  EXPECT_TRUE(IsTimeGrain(Grain::kMonth));
  EXPECT_FALSE(IsTimeGrain(Grain::kKey));
  EXPECT_FALSE(IsTimeGrain(Grain::kNone));
}

TEST(ValidatePartitionTest, AcceptsWellFormedValues) {
  EXPECT_TRUE(ValidatePartition(Grain::kDay, "2025-03-01").ok());
  EXPECT_TRUE(ValidatePartition(Grain::kDay, "2024-02-29").ok());  // leap
  EXPECT_TRUE(ValidatePartition(Grain::kDay, "2000-02-29").ok());  // 400 rule
  EXPECT_TRUE(ValidatePartition(Grain::kHour, "2025-03-01T00").ok());
  EXPECT_TRUE(ValidatePartition(Grain::kHour, "2025-12-31T23").ok());
  EXPECT_TRUE(ValidatePartition(Grain::kMonth, "2025-12").ok());
  EXPECT_TRUE(ValidatePartition(Grain::kMonth, "2025-01").ok());
  EXPECT_TRUE(ValidatePartition(Grain::kKey, "eu-west").ok());
  EXPECT_TRUE(ValidatePartition(Grain::kNone, "").ok());
}

TEST(ValidatePartitionTest, RejectsMalformedDays) {
  for (const char* bad :
       {"2025-02-30", "2025-02-29", "1900-02-29", "2025-04-31", "2025-3-1",
        "2025-03-1", "25-03-01", "2025-03-01 ", " 2025-03-01", "2025/03/01",
        "2025-03-01T00", "2025-13-01", "2025-00-10", "2025-01-00", "+025-03-01",
        "2025-0a-01", "", "20250301", "0000-01-01"}) {
    absl::Status s = ValidatePartition(Grain::kDay, bad);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(Message(s), HasSubstr("expected YYYY-MM-DD")) << bad;
  }
  EXPECT_EQ(Message(ValidatePartition(Grain::kDay, "2025-3-1")),
            "partition \"2025-3-1\" is not a day; expected YYYY-MM-DD");
}

TEST(ValidatePartitionTest, RejectsMalformedHours) {
  for (const char* bad :
       {"2025-03-01T24", "2025-03-01T7", "2025-03-01 07", "2025-03-01T07:00",
        "2025-02-30T00", "2025-03-01", "2025-03-01t07", "2025-03-01T-1"}) {
    absl::Status s = ValidatePartition(Grain::kHour, bad);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(Message(s), HasSubstr("expected YYYY-MM-DDTHH")) << bad;
  }
  EXPECT_THAT(Message(ValidatePartition(Grain::kHour, "x")),
              HasSubstr("is not an hour"));
}

TEST(ValidatePartitionTest, RejectsMalformedMonths) {
  for (const char* bad :
       {"2025-13", "2025-00", "2025-3", "2025-03-01", "202503", "2025-1a"}) {
    absl::Status s = ValidatePartition(Grain::kMonth, bad);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(Message(s), HasSubstr("expected YYYY-MM")) << bad;
  }
}

// Every field combination around the calendar's edges, against the
// Gregorian rule written out here: a day is valid when its month is 1..12
// and its day within that month's length; an hour when its day is and the
// hour is 0..23; the last value of each grain is refused (its end bound
// falls in year 10000). A valid value is its own partition.
TEST(ValidatePartitionTest, CalendarEdgesFollowTheGregorianRule) {
  auto leap = [](int y) {
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  };
  auto days_in = [&](int y, int m) {
    static const int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    return m == 2 && leap(y) ? 29 : kDays[m - 1];
  };
  for (int y : {1, 4, 100, 400, 1900, 2000, 2023, 2024, 2025, 9998, 9999}) {
    for (int m = 0; m <= 13; ++m) {
      const std::string month = absl::StrFormat("%04d-%02d", y, m);
      const bool month_ok = m >= 1 && m <= 12 && month != "9999-12";
      EXPECT_EQ(ValidatePartition(Grain::kMonth, month).ok(), month_ok)
          << month;
      for (int d = 0; d <= 32; ++d) {
        const std::string day = absl::StrFormat("%s-%02d", month, d);
        const bool day_real = m >= 1 && m <= 12 && d >= 1 && d <= days_in(y, m);
        const bool day_ok = day_real && day != "9999-12-31";
        EXPECT_EQ(ValidatePartition(Grain::kDay, day).ok(), day_ok) << day;
        if (day_ok) {
          absl::StatusOr<std::string> p = PartitionOfValue(Grain::kDay, day);
          EXPECT_TRUE(p.ok() && *p == day) << day;
        }
        for (int h : {0, 23, 24, 99}) {
          const std::string hour = absl::StrFormat("%sT%02d", day, h);
          const bool hour_ok = day_real && h <= 23 && hour != "9999-12-31T23";
          EXPECT_EQ(ValidatePartition(Grain::kHour, hour).ok(), hour_ok)
              << hour;
          if (hour_ok) {
            absl::StatusOr<std::string> p =
                PartitionOfValue(Grain::kHour, hour);
            EXPECT_TRUE(p.ok() && *p == hour) << hour;
          }
        }
      }
    }
  }
}

TEST(ValidatePartitionTest, KeysAndUnpartitioned) {
  EXPECT_FALSE(ValidatePartition(Grain::kKey, "").ok());
  EXPECT_FALSE(ValidatePartition(Grain::kKey, "a\nb").ok());
  EXPECT_FALSE(ValidatePartition(Grain::kKey, std::string("a\0b", 3)).ok());
  EXPECT_TRUE(ValidatePartition(Grain::kKey, std::string(256, 'k')).ok());
  EXPECT_FALSE(ValidatePartition(Grain::kKey, std::string(257, 'k')).ok());
  EXPECT_FALSE(ValidatePartition(Grain::kNone, "2025-03-01").ok());
}

TEST(ValidatePartitionTest, ErrorEscapesControlCharacters) {
  std::string msg = Message(ValidatePartition(Grain::kDay, "2025\n03"));
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  EXPECT_THAT(msg, HasSubstr("\\n"));
}

// The partition of a value and the bounds of a partition, over generated
// hours of every supported year (the first and last years included),
// against the text printf's fixed-width fields give for the same civil
// time.
TEST(PartitionOfValueTest, CanonicalFormsMatchFixedWidthFieldsInEveryYear) {
  std::mt19937 rng(7);
  std::vector<absl::CivilHour> hours = {
      absl::CivilHour(1, 1, 1, 0),      absl::CivilHour(9, 12, 31, 23),
      absl::CivilHour(999, 6, 30, 9),   absl::CivilHour(1000, 1, 1, 0),
      absl::CivilHour(2024, 2, 29, 23), absl::CivilHour(9999, 12, 30, 22)};
  for (int i = 0; i < 2000; ++i) {
    hours.push_back(absl::CivilHour(1, 1, 1, 0) +
                    std::uniform_int_distribution<int64_t>(
                        0, 24 * 365 * int64_t{9998})(rng));
  }
  for (const absl::CivilHour& h : hours) {
    const std::string hour = absl::StrFormat("%04d-%02d-%02dT%02d", h.year(),
                                             h.month(), h.day(), h.hour());
    const std::string day =
        absl::StrFormat("%04d-%02d-%02d", h.year(), h.month(), h.day());
    const std::string month = absl::StrFormat("%04d-%02d", h.year(), h.month());
    const std::string value =
        absl::StrFormat("%04d-%02d-%02d %02d:%02d:07", h.year(), h.month(),
                        h.day(), h.hour(), static_cast<int>(h.year() % 60));
    SCOPED_TRACE(value);
    EXPECT_EQ(PartitionOfValue(Grain::kHour, value).value_or("?"), hour);
    EXPECT_EQ(PartitionOfValue(Grain::kDay, value).value_or("?"), day);
    EXPECT_EQ(PartitionOfValue(Grain::kDay, day).value_or("?"), day);
    // The last month's end would fall in year 10000: refused.
    const std::string month_or_refused =
        h.year() == 9999 && h.month() == 12 ? "?" : month;
    EXPECT_EQ(PartitionOfValue(Grain::kMonth, value).value_or("?"),
              month_or_refused);
    EXPECT_EQ(PartitionOfValue(Grain::kMonth, month).value_or("?"),
              month_or_refused);
    absl::StatusOr<PartitionBounds> b = BoundsOf(Grain::kHour, hour);
    ASSERT_TRUE(b.ok()) << b.status();
    const absl::CivilHour next = h + 1;
    EXPECT_EQ(b->start, absl::StrFormat("%04d-%02d-%02d %02d:00:00", h.year(),
                                        h.month(), h.day(), h.hour()));
    EXPECT_EQ(b->end, absl::StrFormat("%04d-%02d-%02d %02d:00:00", next.year(),
                                      next.month(), next.day(), next.hour()));
  }
  // Not calendar values: refused, not normalized into another partition.
  for (const char* bad :
       {"2025-02-29", "2025-13-01", "0000-01-01", "2025-04-31", "2025-00-10"}) {
    EXPECT_FALSE(PartitionOfValue(Grain::kDay, bad).ok()) << bad;
  }
}

TEST(BoundsOfTest, ExactFormats) {
  absl::StatusOr<PartitionBounds> b = BoundsOf(Grain::kDay, "2025-03-01");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->start, "2025-03-01");
  EXPECT_EQ(b->end, "2025-03-02");

  b = BoundsOf(Grain::kHour, "2025-03-01T07");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->start, "2025-03-01 07:00:00");
  EXPECT_EQ(b->end, "2025-03-01 08:00:00");

  b = BoundsOf(Grain::kMonth, "2025-03");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->start, "2025-03-01");
  EXPECT_EQ(b->end, "2025-04-01");

  b = BoundsOf(Grain::kKey, "eu");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->start, "eu");
  EXPECT_EQ(b->end, "eu");

  b = BoundsOf(Grain::kNone, "");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->start, "");
  EXPECT_EQ(b->end, "");
}

TEST(BoundsOfTest, CrossesMonthYearAndDayEnds) {
  EXPECT_EQ(BoundsOf(Grain::kDay, "2024-02-28")->end, "2024-02-29");
  EXPECT_EQ(BoundsOf(Grain::kDay, "2024-02-29")->end, "2024-03-01");
  EXPECT_EQ(BoundsOf(Grain::kDay, "2025-02-28")->end, "2025-03-01");
  EXPECT_EQ(BoundsOf(Grain::kDay, "2025-12-31")->end, "2026-01-01");
  EXPECT_EQ(BoundsOf(Grain::kHour, "2025-12-31T23")->end,
            "2026-01-01 00:00:00");
  EXPECT_EQ(BoundsOf(Grain::kHour, "2024-02-28T23")->end,
            "2024-02-29 00:00:00");
  EXPECT_EQ(BoundsOf(Grain::kMonth, "2025-12")->start, "2025-12-01");
  EXPECT_EQ(BoundsOf(Grain::kMonth, "2025-12")->end, "2026-01-01");
}

TEST(BoundsOfTest, RejectsInvalidValues) {
  EXPECT_EQ(BoundsOf(Grain::kDay, "2025-02-30").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(BoundsOf(Grain::kHour, "2025-03-01").ok());
  EXPECT_FALSE(BoundsOf(Grain::kMonth, "2025-03-01").ok());
  EXPECT_FALSE(BoundsOf(Grain::kKey, "").ok());
  EXPECT_FALSE(BoundsOf(Grain::kNone, "x").ok());
}

// The last partition of year 9999 would end in year 10000: "10000-01-01"
// sorts before "9999-12-31" as text, so every row would be outside it.
TEST(BoundsOfTest, RejectsTheLastPartitionOfYear9999) {
  const std::pair<Grain, const char*> last[] = {{Grain::kHour, "9999-12-31T23"},
                                                {Grain::kDay, "9999-12-31"},
                                                {Grain::kMonth, "9999-12"}};
  for (const auto& [grain, value] : last) {
    SCOPED_TRACE(value);
    absl::Status s = ValidatePartition(grain, value);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(Message(s),
                HasSubstr("its end bound would fall in year 10000"));
    EXPECT_EQ(BoundsOf(grain, value).status().code(),
              absl::StatusCode::kInvalidArgument);
  }
  EXPECT_THAT(Message(ValidatePartition(Grain::kDay, "9999-12-31")),
              HasSubstr("the last supported day is 9999-12-30"));

  // The partitions just before are fine, and their end still sorts after
  // their start.
  const std::pair<Grain, const char*> allowed[] = {
      {Grain::kHour, "9999-12-31T22"},
      {Grain::kDay, "9999-12-30"},
      {Grain::kMonth, "9999-11"},
      {Grain::kDay, "0001-01-01"}};
  for (const auto& [grain, value] : allowed) {
    SCOPED_TRACE(value);
    EXPECT_TRUE(ValidatePartition(grain, value).ok());
    absl::StatusOr<PartitionBounds> b = BoundsOf(grain, value);
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_LT(b->start, b->end);
  }
  EXPECT_EQ(BoundsOf(Grain::kDay, "9999-12-30")->end, "9999-12-31");
  EXPECT_EQ(BoundsOf(Grain::kMonth, "9999-11")->end, "9999-12-01");
  EXPECT_EQ(BoundsOf(Grain::kHour, "9999-12-31T22")->end,
            "9999-12-31 23:00:00");

  // As the exclusive end of a range it is fine: it is not enumerated.
  auto days = EnumerateRange(Grain::kDay, "9999-12-29", "9999-12-31");
  ASSERT_TRUE(days.ok()) << days.status();
  EXPECT_THAT(*days, ElementsAre("9999-12-29", "9999-12-30"));
  auto months = EnumerateRange(Grain::kMonth, "9999-10", "9999-12");
  ASSERT_TRUE(months.ok()) << months.status();
  EXPECT_THAT(*months, ElementsAre("9999-10", "9999-11"));

  // Column values never map to it.
  EXPECT_FALSE(PartitionOfValue(Grain::kDay, "9999-12-31 10:00").ok());
  EXPECT_FALSE(PartitionOfValue(Grain::kMonth, "9999-12").ok());
  EXPECT_FALSE(PartitionOfValue(Grain::kMonth, "9999-12-05").ok());
  EXPECT_FALSE(PartitionOfValue(Grain::kHour, "9999-12-31T23:30").ok());
  EXPECT_EQ(*PartitionOfValue(Grain::kHour, "9999-12-31T22:30"),
            "9999-12-31T22");
}

TEST(EnumerateRangeTest, DaysAcrossMonthEndAndLeapDay) {
  absl::StatusOr<std::vector<std::string>> r =
      EnumerateRange(Grain::kDay, "2024-02-27", "2024-03-02");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(
      *r, ElementsAre("2024-02-27", "2024-02-28", "2024-02-29", "2024-03-01"));
  r = EnumerateRange(Grain::kDay, "2025-02-27", "2025-03-02");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(*r, ElementsAre("2025-02-27", "2025-02-28", "2025-03-01"));
}

TEST(EnumerateRangeTest, DaysAcrossYearEnd) {
  absl::StatusOr<std::vector<std::string>> r =
      EnumerateRange(Grain::kDay, "2025-12-30", "2026-01-02");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(*r, ElementsAre("2025-12-30", "2025-12-31", "2026-01-01"));
  r = EnumerateRange(Grain::kDay, "2024-01-01", "2025-01-01");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->size(), 366u);  // leap year
  EXPECT_EQ(r->back(), "2024-12-31");
}

TEST(EnumerateRangeTest, Hours) {
  absl::StatusOr<std::vector<std::string>> r =
      EnumerateRange(Grain::kHour, "2025-12-31T22", "2026-01-01T02");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(*r, ElementsAre("2025-12-31T22", "2025-12-31T23", "2026-01-01T00",
                              "2026-01-01T01"));
  r = EnumerateRange(Grain::kHour, "2024-02-29T00", "2024-03-01T00");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->size(), 24u);
  EXPECT_EQ(r->front(), "2024-02-29T00");
  EXPECT_EQ(r->back(), "2024-02-29T23");
}

TEST(EnumerateRangeTest, MonthsAcrossYearEnd) {
  absl::StatusOr<std::vector<std::string>> r =
      EnumerateRange(Grain::kMonth, "2025-11", "2026-03");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(*r, ElementsAre("2025-11", "2025-12", "2026-01", "2026-02"));
}

TEST(EnumerateRangeTest, SinglePartition) {
  absl::StatusOr<std::vector<std::string>> r =
      EnumerateRange(Grain::kDay, "2025-03-01", "2025-03-02");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(*r, ElementsAre("2025-03-01"));
}

TEST(EnumerateRangeTest, EmptyAndInvertedRanges) {
  absl::Status s =
      EnumerateRange(Grain::kDay, "2025-03-01", "2025-03-01").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(s), HasSubstr("empty"));
  s = EnumerateRange(Grain::kDay, "2025-03-02", "2025-03-01").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(s), HasSubstr("inverted"));
  EXPECT_FALSE(EnumerateRange(Grain::kMonth, "2026-01", "2025-12").ok());
}

TEST(EnumerateRangeTest, MalformedEndpoints) {
  absl::Status s =
      EnumerateRange(Grain::kDay, "2025-02-30", "2025-03-05").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(s), HasSubstr("range start"));
  EXPECT_THAT(Message(s), HasSubstr("YYYY-MM-DD"));
  s = EnumerateRange(Grain::kDay, "2025-03-01", "2025-03").status();
  EXPECT_THAT(Message(s), HasSubstr("range end"));
  // A day is not an hour.
  EXPECT_FALSE(EnumerateRange(Grain::kHour, "2025-03-01", "2025-03-02").ok());
}

TEST(EnumerateRangeTest, NonTimeGrains) {
  EXPECT_FALSE(EnumerateRange(Grain::kKey, "a", "b").ok());
  EXPECT_THAT(Message(EnumerateRange(Grain::kNone, "", "").status()),
              HasSubstr("time grain"));
}

TEST(EnumerateRangeTest, Limit) {
  EXPECT_TRUE(EnumerateRange(Grain::kDay, "2025-01-01", "2025-01-11", 10).ok());
  absl::Status s =
      EnumerateRange(Grain::kDay, "2025-01-01", "2025-01-12", 10).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(s), HasSubstr("11 day partitions"));
  EXPECT_THAT(Message(s), HasSubstr("at most 10"));
  // The default limit stops absurd hour ranges before allocating them.
  EXPECT_FALSE(
      EnumerateRange(Grain::kHour, "0001-01-01T00", "9999-01-01T00").ok());
}

TEST(PartitionOfValueTest, Days) {
  EXPECT_EQ(*PartitionOfValue(Grain::kDay, "2025-03-01"), "2025-03-01");
  EXPECT_EQ(*PartitionOfValue(Grain::kDay, "2025-03-01 23:59:59"),
            "2025-03-01");
  EXPECT_EQ(*PartitionOfValue(Grain::kDay, "2025-03-01T07"), "2025-03-01");
  EXPECT_EQ(*PartitionOfValue(Grain::kDay, "2025-03-01 07:30"), "2025-03-01");
  EXPECT_FALSE(PartitionOfValue(Grain::kDay, "2025-03").ok());
  EXPECT_FALSE(PartitionOfValue(Grain::kDay, "2025-02-30").ok());
  EXPECT_FALSE(PartitionOfValue(Grain::kDay, "2025-03-01 24:00").ok());
  EXPECT_FALSE(PartitionOfValue(Grain::kDay, "2025-03-01 07").ok());
  EXPECT_FALSE(PartitionOfValue(Grain::kDay, "2025-03-01X").ok());
  EXPECT_FALSE(PartitionOfValue(Grain::kDay, "").ok());
}

TEST(PartitionOfValueTest, HoursAndMonths) {
  EXPECT_EQ(*PartitionOfValue(Grain::kHour, "2025-03-01 07:59:59.999"),
            "2025-03-01T07");
  EXPECT_EQ(*PartitionOfValue(Grain::kHour, "2025-03-01T07"), "2025-03-01T07");
  EXPECT_EQ(*PartitionOfValue(Grain::kHour, "2025-03-01T07:15:00Z"),
            "2025-03-01T07");
  EXPECT_EQ(*PartitionOfValue(Grain::kHour, "2025-03-01"), "2025-03-01T00");
  EXPECT_EQ(*PartitionOfValue(Grain::kMonth, "2025-03"), "2025-03");
  EXPECT_EQ(*PartitionOfValue(Grain::kMonth, "2025-03-31"), "2025-03");
  EXPECT_EQ(*PartitionOfValue(Grain::kMonth, "2025-12-31 23:00:00"), "2025-12");
  EXPECT_FALSE(PartitionOfValue(Grain::kMonth, "2025-13").ok());
  EXPECT_FALSE(PartitionOfValue(Grain::kHour, "2025-03-01 07:60").ok());
}

}  // namespace
}  // namespace core_partition_test
}  // namespace backfill
