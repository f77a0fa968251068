// Unit tests of `backfillctl freshness`' rendering (client/freshness_format.h)
// of ListDatasetPartitions, from hand-written responses: the summary line
// with the counts and the frozen rule, the line saying which replay policy
// evaluation DUE comes from, the table with a rollback version, an early
// cutoff's confirmation, the job that holds a partition, frozen partitions
// and stale reasons (escaped), a dataset with nothing published; and the
// parsing of --only's words. Expected texts are worked out from the header
// and TextTable's layout (two spaces between columns), not by the code
// under test.

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "backfill/v1/backfill.pb.h"
#include "client/freshness_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/cli_format_samples.h"

namespace backfill {
namespace client_freshness_format_test {
namespace {

using ::backfill::cli::FormatDatasetPartitions;
using ::backfill::cli::ParseFreshness;
using ::backfill::cli::format_testing::HasTerminalControl;
using ::backfill::cli::format_testing::LineStartingWith;
using ::testing::HasSubstr;
using ::testing::Not;

// 2025-01-01T06:00:00Z.
constexpr int64_t kJan1At6 = 1735711200;
// 2025-03-02T06:00:00Z and a day later.
constexpr int64_t kMarch2At6 = 1740895200;
constexpr int64_t kMarch3At6 = kMarch2At6 + 86400;
// 2025-03-03T10:15:00Z.
constexpr int64_t kMarch3At1015 = kMarch3At6 + 4 * 3600 + 15 * 60;

v1::DatasetPartition* Add(v1::ListDatasetPartitionsResponse* response,
                          const std::string& partition,
                          v1::PartitionFreshness freshness,
                          const std::string& job, int64_t time, int64_t rows) {
  v1::DatasetPartition* p = response->add_partitions();
  p->set_partition(partition);
  p->set_freshness(freshness);
  p->set_backfill_id(job);
  p->set_kind(v1::VERSION_KIND_BACKFILL);
  p->mutable_time()->set_seconds(time);
  p->set_rows(rows);
  p->set_transform_version("3f1c0b6e0a9d2c55");
  return p;
}

// daily_revenue with seven published partitions: five current (one of them
// closed by the frozen rule, one restored by a rollback, one confirmed by a
// later job's early cutoff, one held by an active job), one stale by an
// input (its reason with an escape sequence, held by bf-9) and one due.
v1::ListDatasetPartitionsResponse DailyRevenue() {
  v1::ListDatasetPartitionsResponse r;
  r.set_dataset("daily_revenue");
  r.set_total(7);
  r.set_current(5);
  r.set_stale(1);
  r.set_due(1);
  r.set_frozen(0);
  r.set_frozen_rule("frozen.before 2025-01-01");
  r.mutable_evaluate_time()->set_seconds(kMarch3At1015);
  Add(&r, "2024-12-31", v1::PARTITION_FRESHNESS_CURRENT, "bf-1", kJan1At6, 4)
      ->set_frozen(true);
  Add(&r, "2025-03-01", v1::PARTITION_FRESHNESS_CURRENT, "bf-3", kMarch2At6, 4)
      ->set_kind(v1::VERSION_KIND_ROLLBACK);
  Add(&r, "2025-03-02", v1::PARTITION_FRESHNESS_CURRENT, "bf-3", kMarch2At6, 5)
      ->set_confirmed_by_backfill_id("bf-7");
  v1::DatasetPartition* stale = Add(
      &r, "2025-03-03", v1::PARTITION_FRESHNESS_STALE, "bf-3", kMarch2At6, 6);
  stale->set_stale_reason("input orders/2025-03-03 changed\x1b[2J");
  stale->set_held_by_backfill_id("bf-9");
  Add(&r, "2025-03-04", v1::PARTITION_FRESHNESS_DUE, "bf-4", kMarch3At6, 12)
      ->set_stale_reason("transform version changed");
  Add(&r, "2025-03-05", v1::PARTITION_FRESHNESS_CURRENT, "bf-4", kMarch3At6,
      1234567)
      ->set_held_by_backfill_id("bf-9");
  Add(&r, "2025-03-06", v1::PARTITION_FRESHNESS_CURRENT, "bf-4", kMarch3At6, 0);
  return r;
}

constexpr char kDailyRevenueText[] =
    "daily_revenue: 7 published partitions: 5 current, 1 stale, 1 due for a "
    "replay, 0 frozen (frozen rule: frozen.before 2025-01-01)\n"
    "due for a replay as of the replay policy's evaluation at "
    "2025-03-03T10:15:00Z\n"
    "\n"
    "PARTITION   FRESHNESS         VERSION                 WHEN              "
    "    ROWS     HELD-BY  WHY\n"
    "2024-12-31  current (frozen)  bf-1                    "
    "2025-01-01T06:00:00Z  4        -        -\n"
    "2025-03-01  current           bf-3 (rollback)         "
    "2025-03-02T06:00:00Z  4        -        -\n"
    "2025-03-02  current           bf-3 confirmed by bf-7  "
    "2025-03-02T06:00:00Z  5        -        -\n"
    "2025-03-03  stale             bf-3                    "
    "2025-03-02T06:00:00Z  6        bf-9     input orders/2025-03-03 "
    "changed\\x1b[2J\n"
    "2025-03-04  due               bf-4                    "
    "2025-03-03T06:00:00Z  12       -        transform version changed\n"
    "2025-03-05  current           bf-4                    "
    "2025-03-03T06:00:00Z  1234567  bf-9     -\n"
    "2025-03-06  current           bf-4                    "
    "2025-03-03T06:00:00Z  0        -        -\n";

TEST(FormatDatasetPartitionsTest, SummaryThenATableOfEveryPartition) {
  EXPECT_EQ(FormatDatasetPartitions(DailyRevenue()), kDailyRevenueText);
}

TEST(FormatDatasetPartitionsTest, ControlCharactersFromTheServerAreEscaped) {
  v1::ListDatasetPartitionsResponse r = DailyRevenue();
  r.set_dataset("daily\x1b]0;x\x07_revenue");
  r.set_frozen_rule("frozen.before\r2025-01-01");
  r.mutable_partitions(0)->set_partition("2024-12-31\n");
  r.mutable_partitions(1)->set_backfill_id("bf-3\x9b");
  r.mutable_partitions(2)->set_confirmed_by_backfill_id("bf-7\x1b[31m");
  r.mutable_partitions(3)->set_held_by_backfill_id("bf-9\t");
  const std::string text = FormatDatasetPartitions(r);
  EXPECT_FALSE(HasTerminalControl(text)) << text;
  EXPECT_THAT(text, HasSubstr("daily\\x1b]0;x\\x07_revenue: 7 published"));
  EXPECT_THAT(text, HasSubstr("(frozen rule: frozen.before\\r2025-01-01)"));
  EXPECT_THAT(text, HasSubstr("2024-12-31\\n  current (frozen)"));
  EXPECT_THAT(text, HasSubstr("bf-3\\x9b (rollback)"));
  EXPECT_THAT(text, HasSubstr("bf-3 confirmed by bf-7\\x1b[31m"));
  EXPECT_THAT(text, HasSubstr("bf-9\\t"));
  EXPECT_THAT(text, HasSubstr("changed\\x1b[2J"));
}

TEST(FormatDatasetPartitionsTest, FrozenPartitionsAndTheirCount) {
  v1::ListDatasetPartitionsResponse r;
  r.set_dataset("daily_revenue");
  r.set_total(2);
  r.set_frozen(1);
  r.set_stale(1);
  r.set_frozen_rule("frozen.older_than 365d");
  v1::DatasetPartition* frozen = Add(
      &r, "2024-01-01", v1::PARTITION_FRESHNESS_FROZEN, "bf-1", kJan1At6, 3);
  frozen->set_frozen(true);
  frozen->set_stale_reason("input orders/2024-01-01 changed");
  Add(&r, "2025-03-01", v1::PARTITION_FRESHNESS_STALE, "bf-2", kMarch2At6, 3)
      ->set_stale_reason("transform version changed");
  const std::string text = FormatDatasetPartitions(r);
  EXPECT_THAT(text, HasSubstr("daily_revenue: 2 published partitions: 0 "
                              "current, 1 stale, 0 due for a replay, 1 frozen "
                              "(frozen rule: frozen.older_than 365d)\n"));
  // FROZEN is frozen already: no "(frozen)" after it.
  EXPECT_THAT(LineStartingWith(text, "2024-01-01 "),
              HasSubstr("  frozen     bf-1     "));
  EXPECT_THAT(text, Not(HasSubstr("frozen (frozen)")));
  EXPECT_THAT(LineStartingWith(text, "2025-03-01 "),
              HasSubstr("  stale      bf-2     "));
}

TEST(FormatDatasetPartitionsTest, WithoutAFrozenRuleOrAnEvaluationItSaysSo) {
  v1::ListDatasetPartitionsResponse r;
  r.set_dataset("orders_by_region");
  r.set_total(1);
  r.set_current(1);
  Add(&r, "", v1::PARTITION_FRESHNESS_CURRENT, "bf-2", kMarch2At6, 10);
  EXPECT_EQ(FormatDatasetPartitions(r),
            "orders_by_region: 1 published partition: 1 current, 0 stale, 0 "
            "due for a replay, 0 frozen\n"
            "no replay policy evaluation: none is due (the dataset has no "
            "replay policy, or it was not evaluated yet)\n"
            "\n"
            "PARTITION        FRESHNESS  VERSION  WHEN                  ROWS  "
            "HELD-BY  WHY\n"
            "(unpartitioned)  current    bf-2     2025-03-02T06:00:00Z  10    "
            "-        -\n");
}

TEST(FormatDatasetPartitionsTest, NothingPublishedIsOneLine) {
  v1::ListDatasetPartitionsResponse r;
  r.set_dataset("daily_revenue");
  r.set_frozen_rule("frozen.before 2025-01-01");
  EXPECT_EQ(FormatDatasetPartitions(r),
            "daily_revenue: no published partitions (no job has published any "
            "of it yet)\n");
}

TEST(FormatDatasetPartitionsTest, NoneOfTheFreshnessAskedFor) {
  // --only frozen on a dataset without frozen partitions: the counts of
  // the whole dataset, and no table.
  v1::ListDatasetPartitionsResponse r = DailyRevenue();
  r.clear_partitions();
  const std::string text = FormatDatasetPartitions(r);
  EXPECT_THAT(text, HasSubstr("daily_revenue: 7 published partitions: 5 "
                              "current, 1 stale, 1 due for a replay"));
  EXPECT_THAT(text, ::testing::EndsWith(
                        "\n\nno partitions of the freshness asked for\n"));
  EXPECT_THAT(text, Not(HasSubstr("PARTITION ")));
}

TEST(FormatDatasetPartitionsTest, WordsOfANewerServerAreNotMisread) {
  v1::ListDatasetPartitionsResponse r;
  r.set_dataset("daily_revenue");
  r.set_total(1);
  v1::DatasetPartition* p =
      Add(&r, "2025-03-01", static_cast<v1::PartitionFreshness>(9), "bf-2",
          kMarch2At6, 1);
  p->set_kind(static_cast<v1::VersionKind>(7));
  const std::string line =
      LineStartingWith(FormatDatasetPartitions(r), "2025-03-01 ");
  EXPECT_THAT(line, HasSubstr("  unknown(9)  bf-2 (unknown(7))  "));
}

TEST(ParseFreshnessTest, AcceptsWordsAndFullNamesInAnyCase) {
  const std::pair<const char*, v1::PartitionFreshness> cases[] = {
      {"current", v1::PARTITION_FRESHNESS_CURRENT},
      {"STALE", v1::PARTITION_FRESHNESS_STALE},
      {"Due", v1::PARTITION_FRESHNESS_DUE},
      {"frozen", v1::PARTITION_FRESHNESS_FROZEN},
      {"PARTITION_FRESHNESS_STALE", v1::PARTITION_FRESHNESS_STALE},
      {"partition_freshness_due", v1::PARTITION_FRESHNESS_DUE},
  };
  for (const auto& [text, expected] : cases) {
    absl::StatusOr<v1::PartitionFreshness> parsed = ParseFreshness(text);
    ASSERT_TRUE(parsed.ok()) << text << ": " << parsed.status();
    EXPECT_EQ(*parsed, expected) << text;
  }
}

TEST(ParseFreshnessTest, RefusesOtherWordsNamingTheAcceptedOnes) {
  for (const char* text :
       {"fresh", "", "unspecified", "PARTITION_FRESHNESS_UNSPECIFIED",
        "PARTITION_FRESHNESS_", "3", "stale,due"}) {
    absl::StatusOr<v1::PartitionFreshness> parsed = ParseFreshness(text);
    ASSERT_FALSE(parsed.ok()) << text;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(parsed.status().message(),
              std::string("unknown freshness \"") + text +
                  "\"; use current, stale, due, frozen (any case, or the "
                  "full name, e.g. PARTITION_FRESHNESS_STALE)");
  }
}

}  // namespace
}  // namespace client_freshness_format_test
}  // namespace backfill
