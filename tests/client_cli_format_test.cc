// Unit tests of the backfillctl renderings (client/cli_format.h) of values:
// JSON output, timestamps, state names, counts, partition summaries, costs,
// the --wait progress bar and lines, and the escaping of text from the
// server or users for the terminal. Expectations are written from the
// formats documented in the headers cli_format.h includes and the proto
// contract, not from the implementation.

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <iterator>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "backfill/v1/backfill.pb.h"
#include "client/cli_format.h"
#include "gmock/gmock.h"
#include "google/protobuf/repeated_ptr_field.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "tests/testing/cli_format_samples.h"

namespace backfill {
namespace cli {
namespace client_cli_format_test {
namespace {

using namespace ::backfill::cli::format_testing;  // NOLINT: test samples
using ::testing::Contains;
using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::MatchesRegex;
using ::testing::Not;
using ::testing::StartsWith;

// ---------------------------------------------------------------- ToJson

TEST(FormatProgressLineTest, AnEtaFromTheNetworkIsShownBounded) {
  v1::Backfill b;
  b.set_id("bf-1");
  for (double bad :
       {std::nan(""), 1e300, std::numeric_limits<double>::infinity()}) {
    b.mutable_eta()->set_remaining_seconds(bad);
    EXPECT_THAT(FormatProgressLine(b, 1), HasSubstr("ETA more than 30 years"));
  }
  b.mutable_eta()->set_remaining_seconds(-5);
  EXPECT_THAT(FormatProgressLine(b, 1), HasSubstr("ETA 0s"));
}

TEST(FormatProgressBarTest, FitsTheTerminalWidth) {
  v1::Backfill b;
  b.set_id("bf-1");
  b.set_state(v1::BACKFILL_STATE_RUNNING);
  b.mutable_partitions()->set_total(280000);
  b.mutable_partitions()->set_staged(50000);
  b.mutable_partitions()->set_failed(3);
  b.mutable_eta()->set_remaining_seconds(7000);
  const std::string wide = FormatProgressBar(b, 0);
  ASSERT_GT(wide.size(), 79u) << wide;  // the case that wrapped
  for (int columns : {200, 80, 60, 40, 10, 1}) {
    const std::string line = FormatProgressBarFitting(b, 0, columns);
    EXPECT_LT(line.size(), static_cast<size_t>(std::max(columns, 2))) << line;
    EXPECT_FALSE(line.empty());
  }
  EXPECT_EQ(FormatProgressBarFitting(b, 0, 200), wide);
  // At 80 columns the bar narrows before anything is cut.
  EXPECT_THAT(FormatProgressBarFitting(b, 0, 80), HasSubstr("3 failed"));
}

TEST(FormatConfirmationsTest, ListsEachConsumerWithItsResult) {
  v1::Backfill b;
  EXPECT_EQ(FormatConfirmations(b), "");
  v1::ConsumerConfirmation* bad = b.add_confirmations();
  bad->set_dataset("daily_revenue");
  bad->set_consumer("revenue_cache");
  bad->set_healthy(false);
  bad->set_message(
      "consumer revenue_cache of daily_revenue still serves 1 for partition "
      "2025-06-20\x1b[2J");
  v1::ConsumerConfirmation* good = b.add_confirmations();
  good->set_dataset("daily_revenue");
  good->set_consumer("bi_extract");
  good->set_healthy(true);
  good->set_message(
      "consumer bi_extract of daily_revenue serves the new numbers (2 "
      "partitions probed)");
  EXPECT_EQ(FormatConfirmations(b),
            "Consumers 2 consumers: 1 healthy, 1 unhealthy\n"
            "  UNHEALTHY  consumer revenue_cache of daily_revenue still "
            "serves 1 for partition 2025-06-20\\x1b[2J\n"
            "  HEALTHY    consumer bi_extract of daily_revenue serves the new "
            "numbers (2 partitions probed)\n");
  EXPECT_THAT(FormatBackfill(b), HasSubstr("Consumers 2 consumers"));
}

TEST(ToJsonTest, UsesProtoFieldNamesAndPrintsZeroAndFalseFields) {
  v1::SubmitBackfillResponse response;
  response.mutable_backfill()->set_id("bf-1");
  response.mutable_backfill()->mutable_request()->set_dataset("orders");
  response.set_created(false);

  absl::StatusOr<std::string> json = ToJson(response);
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_THAT(*json, HasSubstr("\"created\": false"));
  EXPECT_THAT(*json, HasSubstr("\"id\": \"bf-1\""));
  EXPECT_THAT(*json, HasSubstr("\"dataset\": \"orders\""));
  // Proto (snake_case) names, not the lowerCamel JSON names.
  EXPECT_THAT(*json, HasSubstr("\"idempotency_key\": \"\""));
  EXPECT_THAT(*json, HasSubstr("\"exclude_downstream\": false"));
  EXPECT_THAT(*json, HasSubstr("\"actual_cost\": 0"));
  EXPECT_THAT(*json, Not(HasSubstr("idempotencyKey")));
  EXPECT_THAT(*json, Not(HasSubstr("excludeDownstream")));
  EXPECT_THAT(*json, Not(HasSubstr("actualCost")));
  // Zero int64 printed, as a JSON string (proto3 JSON mapping).
  EXPECT_THAT(*json, HasSubstr("\"rows_written\": \"0\""));
  // Zero enum printed by name.
  EXPECT_THAT(*json, HasSubstr("\"state\": \"BACKFILL_STATE_UNSPECIFIED\""));
}

TEST(ToJsonTest, PrintsEnumsByNameAndInt64AsStrings) {
  v1::Backfill backfill = Job("bf-9", v1::BACKFILL_STATE_RUNNING, 2, 1, 7);
  backfill.set_rows_written(1234567);

  absl::StatusOr<std::string> json = ToJson(backfill);
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_THAT(*json, HasSubstr("\"state\": \"BACKFILL_STATE_RUNNING\""));
  EXPECT_THAT(*json, HasSubstr("\"rows_written\": \"1234567\""));
  EXPECT_THAT(*json, HasSubstr("\"total\": \"7\""));
  EXPECT_THAT(*json, HasSubstr("\"published\": \"2\""));
  EXPECT_THAT(*json, HasSubstr("\"failed\": \"0\""));
}

TEST(ToJsonTest, PlanWithZeroTotalsPrintsThem) {
  v1::PlanBackfillResponse plan;
  absl::StatusOr<std::string> json = ToJson(plan);
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_THAT(*json, HasSubstr("\"total_partitions\": \"0\""));
  EXPECT_THAT(*json, Not(HasSubstr("totalPartitions")));
}

TEST(ToJsonTest, IsExactlyOneDocumentThatRoundTrips) {
  v1::ListBackfillsResponse list;
  *list.add_backfills() = Job("bf-1", v1::BACKFILL_STATE_SUCCEEDED, 3, 0, 3);
  *list.add_backfills() = Job("bf-2", v1::BACKFILL_STATE_QUEUED, 0, 0, 5);
  list.mutable_backfills(1)->set_message("brace } and \"quote\" in text");

  absl::StatusOr<std::string> json = ToJson(list);
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_THAT(*json, StartsWith("{"));
  EXPECT_EQ(TopLevelJsonValues(*json), 1) << *json;

  v1::ListBackfillsResponse parsed;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(*json, &parsed).ok());
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(parsed, list));
}

// ------------------------------------------------------- FormatTimestamp

TEST(FormatTimestampTest, SetTimestampIsUtcIso8601) {
  google::protobuf::Timestamp timestamp;
  timestamp.set_seconds(kMarch1At123456);
  EXPECT_EQ(FormatTimestamp(timestamp), "2025-03-01T12:34:56Z");
}

TEST(FormatTimestampTest, SubSecondPartIsDropped) {
  google::protobuf::Timestamp timestamp;
  timestamp.set_seconds(kMarch1At123456);
  timestamp.set_nanos(999000000);
  EXPECT_EQ(FormatTimestamp(timestamp), "2025-03-01T12:34:56Z");
}

TEST(FormatTimestampTest, UnsetTimestampIsDash) {
  EXPECT_EQ(FormatTimestamp(google::protobuf::Timestamp()), "-");
}

// ------------------------------------------------- StateName / ParseState

TEST(StateNameTest, StripsPrefix) {
  EXPECT_EQ(StateName(v1::BACKFILL_STATE_RUNNING), "RUNNING");
  EXPECT_EQ(StateName(v1::BACKFILL_STATE_AWAITING_APPROVAL),
            "AWAITING_APPROVAL");
  EXPECT_EQ(StateName(v1::BACKFILL_STATE_DOWNSTREAM_UNHEALTHY),
            "DOWNSTREAM_UNHEALTHY");
}

TEST(StateNameTest, UnknownNumberIsStillPrintable) {
  EXPECT_EQ(StateName(static_cast<v1::BackfillState>(99)), "STATE_99");
}

TEST(ParseStateTest, AcceptsShortLowerUpperAndFullNames) {
  for (const char* text :
       {"running", "RUNNING", "Running", "BACKFILL_STATE_RUNNING",
        "backfill_state_running", "  running  "}) {
    absl::StatusOr<v1::BackfillState> state = ParseState(text);
    ASSERT_TRUE(state.ok()) << text << ": " << state.status();
    EXPECT_EQ(*state, v1::BACKFILL_STATE_RUNNING) << text;
  }
}

TEST(ParseStateTest, AcceptsEveryNamedState) {
  EXPECT_EQ(*ParseState("rolled_back"), v1::BACKFILL_STATE_ROLLED_BACK);
  EXPECT_EQ(*ParseState("VALIDATION_FAILED"),
            v1::BACKFILL_STATE_VALIDATION_FAILED);
  EXPECT_EQ(*ParseState("awaiting_approval"),
            v1::BACKFILL_STATE_AWAITING_APPROVAL);
  EXPECT_EQ(*ParseState("queued"), v1::BACKFILL_STATE_QUEUED);
}

TEST(ParseStateTest, RejectsUnknownNameListingTheKnownOnes) {
  absl::StatusOr<v1::BackfillState> state = ParseState("nope");
  ASSERT_FALSE(state.ok());
  EXPECT_EQ(state.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string message(state.status().message());
  EXPECT_THAT(message, HasSubstr("nope"));
  for (const char* name :
       {"QUEUED", "RUNNING", "VALIDATING", "AWAITING_APPROVAL", "PUBLISHING",
        "CONFIRMING", "SUCCEEDED", "FAILED", "CANCELLED", "PAUSED",
        "ROLLED_BACK", "VALIDATION_FAILED", "DOWNSTREAM_UNHEALTHY"}) {
    EXPECT_THAT(message, HasSubstr(name)) << message;
  }
  EXPECT_THAT(message, Not(HasSubstr("UNSPECIFIED")));
}

TEST(ParseStateTest, RejectsUnspecifiedAndEmpty) {
  EXPECT_EQ(ParseState("unspecified").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseState("BACKFILL_STATE_UNSPECIFIED").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseState("").status().code(), absl::StatusCode::kInvalidArgument);
}

// ------------------------------------------------------------- IsTerminal

TEST(IsTerminalTest, EveryState) {
  struct Case {
    v1::BackfillState state;
    bool terminal;
  };
  const Case cases[] = {
      {v1::BACKFILL_STATE_UNSPECIFIED, false},
      {v1::BACKFILL_STATE_QUEUED, false},
      {v1::BACKFILL_STATE_RUNNING, false},
      {v1::BACKFILL_STATE_VALIDATING, false},
      {v1::BACKFILL_STATE_AWAITING_APPROVAL, false},
      {v1::BACKFILL_STATE_PUBLISHING, false},
      {v1::BACKFILL_STATE_CONFIRMING, false},
      {v1::BACKFILL_STATE_SUCCEEDED, true},
      {v1::BACKFILL_STATE_FAILED, true},
      {v1::BACKFILL_STATE_CANCELLED, true},
      {v1::BACKFILL_STATE_PAUSED, false},
      {v1::BACKFILL_STATE_ROLLED_BACK, true},
      {v1::BACKFILL_STATE_VALIDATION_FAILED, true},
      {v1::BACKFILL_STATE_DOWNSTREAM_UNHEALTHY, true},
  };
  // Every enum value is covered by the table above.
  ASSERT_EQ(std::size(cases),
            static_cast<size_t>(v1::BackfillState_descriptor()->value_count()));
  for (const Case& c : cases) {
    EXPECT_EQ(IsTerminal(c.state), c.terminal)
        << v1::BackfillState_Name(c.state);
  }
}

// --------------------------------------------------------- DonePartitions

TEST(DonePartitionsTest, StagedPlusPublished) {
  v1::PartitionCounts counts;
  counts.set_total(30);
  counts.set_published(2);
  counts.set_staged(10);
  counts.set_running(3);
  counts.set_pending(13);
  counts.set_failed(2);
  EXPECT_EQ(DonePartitions(counts), 12);
}

// ------------------------------------------------------------- HumanCount

TEST(HumanCountTest, Boundaries) {
  EXPECT_EQ(HumanCount(0), "0");
  EXPECT_EQ(HumanCount(999), "999");
  EXPECT_EQ(HumanCount(1000), "1000");
  EXPECT_EQ(HumanCount(1234), "1234");
  EXPECT_EQ(HumanCount(9999), "9999");
  EXPECT_EQ(HumanCount(10000), "10.0k");
  EXPECT_EQ(HumanCount(12345), "12.3k");
  EXPECT_EQ(HumanCount(345600), "345.6k");
  EXPECT_EQ(HumanCount(1000000), "1.00M");
  EXPECT_EQ(HumanCount(4567890), "4.57M");
  EXPECT_EQ(HumanCount(1.2e9), "1.20G");
  EXPECT_EQ(HumanCount(-12345), "-12.3k");
}

// Rounding must not produce "1000.0k" / "1000.00M": a value that rounds up
// to the next unit is shown in that unit.
TEST(HumanCountTest, RoundingUpMovesToTheNextUnit) {
  EXPECT_EQ(HumanCount(999999), "1.00M");
  EXPECT_EQ(HumanCount(999999999), "1.00G");
}

// ---------------------------------------------------- SummarizePartitions

TEST(SummarizePartitionsTest, ShortListIsListedInFull) {
  EXPECT_EQ(SummarizePartitions(Partitions({"2025-03-01", "2025-03-02"})),
            "2025-03-01,2025-03-02");
  EXPECT_EQ(SummarizePartitions(Partitions(
                {"2025-03-01", "2025-03-02", "2025-03-03", "2025-03-04"})),
            "2025-03-01,2025-03-02,2025-03-03,2025-03-04");
}

TEST(SummarizePartitionsTest, LongListIsFirstDotDotLastWithCount) {
  EXPECT_EQ(SummarizePartitions(Partitions(
                {"2025-03-01", "2025-03-02", "2025-03-03", "2025-03-04",
                 "2025-03-05", "2025-03-06", "2025-03-07"})),
            "2025-03-01..2025-03-07 (7)");
}

TEST(SummarizePartitionsTest, LongUnsortedListUsesSortedEnds) {
  EXPECT_EQ(
      SummarizePartitions(Partitions({"2025-03-05", "2025-03-01", "2025-03-09",
                                      "2025-03-03", "2025-03-02"})),
      "2025-03-01..2025-03-09 (5)");
}

TEST(SummarizePartitionsTest, MaxListedIsHonoured) {
  EXPECT_EQ(SummarizePartitions(Partitions({"a", "b"}), 2), "a,b");
  EXPECT_EQ(SummarizePartitions(Partitions({"a", "b", "c"}), 2), "a..c (3)");
}

TEST(SummarizePartitionsTest, UnpartitionedAndEmpty) {
  EXPECT_EQ(SummarizePartitions(Partitions({""})), "(unpartitioned)");
  EXPECT_EQ(SummarizePartitions(Partitions({})), "-");
}

// -------------------------------------------------------------- FormatCost

TEST(FormatCostTest, WithFullReloadShowsPercentage) {
  EXPECT_EQ(FormatCost(Cost(12300, 345600)),
            "12.3k input rows (3.6% of a full reload, 345.6k)");
  EXPECT_EQ(FormatCost(Cost(50, 100, v1::COST_UNIT_INPUT_ROWS)),
            "50 input_rows (50.0% of a full reload, 100)");
  // A unit from a newer server is shown as its number, never as a wrong
  // word.
  EXPECT_EQ(FormatCost(Cost(50, 100, static_cast<v1::CostUnit>(9))),
            "50 unknown(9) (50.0% of a full reload, 100)");
  EXPECT_EQ(FormatCost(Cost(4567890, 4567890)),
            "4.57M input rows (100.0% of a full reload, 4.57M)");
}

TEST(FormatCostTest, TinyShareIsNotShownAsZero) {
  EXPECT_EQ(FormatCost(Cost(5, 10000)),
            "5 input rows (0.05% of a full reload, 10.0k)");
}

TEST(FormatCostTest, NoFullReloadHasNoPercentage) {
  EXPECT_EQ(FormatCost(Cost(12345, 0)), "12.3k input rows");
  EXPECT_EQ(FormatCost(v1::CostEstimate()), "0 input rows");
}

// ------------------------------------------------------- FormatProgressBar

TEST(FormatProgressBarTest, ZeroPercent) {
  EXPECT_EQ(
      FormatProgressBar(Job("bf-1", v1::BACKFILL_STATE_RUNNING, 0, 0, 300), 0),
      "[....................]   0%  0/300 partitions  RUNNING  0.0 s");
}

TEST(FormatProgressBarTest, FortyFivePercent) {
  EXPECT_EQ(FormatProgressBar(
                Job("bf-1", v1::BACKFILL_STATE_RUNNING, 100, 35, 300), 12.34),
            "[#########...........]  45%  135/300 partitions  RUNNING  12.3 s");
}

TEST(FormatProgressBarTest, HundredPercent) {
  EXPECT_EQ(FormatProgressBar(
                Job("bf-1", v1::BACKFILL_STATE_SUCCEEDED, 300, 0, 300), 60),
            "[####################] 100%  300/300 partitions  SUCCEEDED  "
            "60.0 s");
}

TEST(FormatProgressBarTest, CustomWidthAndFailedCount) {
  v1::Backfill backfill = Job("bf-1", v1::BACKFILL_STATE_RUNNING, 5, 0, 10);
  backfill.mutable_partitions()->set_failed(3);
  backfill.mutable_partitions()->set_pending(2);
  EXPECT_EQ(FormatProgressBar(backfill, 1.25, 10),
            "[#####.....]  50%  5/10 partitions  RUNNING  1.2 s  3 failed");
}

TEST(FormatProgressBarTest, BarHasExactWidthAndFloorFill) {
  for (int width : {1, 7, 20, 33}) {
    for (int done = 0; done <= 100; ++done) {
      const std::string out = FormatProgressBar(
          Job("bf-1", v1::BACKFILL_STATE_RUNNING, done, 0, 100), 0, width);
      ASSERT_THAT(out, StartsWith("["));
      const size_t close = out.find(']');
      ASSERT_EQ(close, static_cast<size_t>(width) + 1)
          << "width " << width << " done " << done << ": " << out;
      const std::string bar = out.substr(1, width);
      const size_t filled = bar.find_first_not_of('#');
      const size_t expected_filled = static_cast<size_t>(done * width / 100);
      EXPECT_EQ(filled == std::string::npos ? bar.size() : filled,
                expected_filled)
          << out;
      EXPECT_EQ(bar.find_first_not_of('.', expected_filled), std::string::npos)
          << out;
    }
  }
}

// The percentage is the exact integer share: 29 of 100 done is 29%, not a
// floating-point truncation to 28%.
TEST(FormatProgressBarTest, PercentageIsExact) {
  for (int done = 0; done <= 100; ++done) {
    const std::string out = FormatProgressBar(
        Job("bf-1", v1::BACKFILL_STATE_RUNNING, done, 0, 100), 0);
    char expected[8];
    std::snprintf(expected, sizeof expected, "] %3d%%", done);
    EXPECT_THAT(out, HasSubstr(expected)) << out;
  }
}

TEST(FormatProgressBarTest, NoPartitionsDoesNotDivideByZero) {
  EXPECT_EQ(
      FormatProgressBar(Job("bf-1", v1::BACKFILL_STATE_QUEUED, 0, 0, 0), 0.5),
      "[....................]   0%  0/0 partitions  QUEUED  0.5 s");
  EXPECT_EQ(
      FormatProgressBar(Job("bf-1", v1::BACKFILL_STATE_SUCCEEDED, 0, 0, 0), 2),
      "[####################] 100%  0/0 partitions  SUCCEEDED  2.0 s");
}

TEST(FormatProgressBarTest, MoreDoneThanTotalIsClamped) {
  EXPECT_THAT(
      FormatProgressBar(Job("bf-1", v1::BACKFILL_STATE_RUNNING, 12, 0, 10), 0),
      StartsWith("[####################] 100%  12/10 partitions"));
}

TEST(FormatProgressBarTest, NoLineEndings) {
  const std::string out = FormatProgressBar(
      Job("bf-1", v1::BACKFILL_STATE_RUNNING, 100, 35, 300), 1);
  EXPECT_EQ(out.find('\n'), std::string::npos);
  EXPECT_EQ(out.find('\r'), std::string::npos);
}

// ------------------------------------------------------ FormatProgressLine

TEST(FormatProgressLineTest, Running) {
  EXPECT_EQ(FormatProgressLine(
                Job("bf-1", v1::BACKFILL_STATE_RUNNING, 100, 35, 300), 12.34),
            "job bf-1: RUNNING  135/300 partitions  45%  12.3 s");
}

// A running job with its ETA (200 s), cost so far and current step.
v1::Backfill RunningWithProgress() {
  v1::Backfill backfill = Job("bf-3", v1::BACKFILL_STATE_RUNNING, 0, 4, 10);
  backfill.mutable_eta()->set_remaining_seconds(199.2);
  backfill.mutable_eta()->set_partition_seconds(33.2);
  backfill.mutable_eta()->set_parallelism(1);
  backfill.mutable_cost_estimate()->set_backfill(3000);
  backfill.mutable_cost_estimate()->set_unit(v1::COST_UNIT_INPUT_ROWS);
  backfill.set_actual_cost(1200);
  backfill.set_current_step("steps 2-3 of 6, recompute in staging");
  return backfill;
}

TEST(FormatProgressLineTest, EtaCostAndCurrentStep) {
  EXPECT_EQ(FormatProgressLine(RunningWithProgress(), 2),
            "job bf-3: RUNNING  4/10 partitions  40%  2.0 s  ETA 3m20s  "
            "cost 1200/3000 input_rows  now: steps 2-3 of 6, recompute in "
            "staging");
}

TEST(FormatProgressBarTest, EtaAndCostButNoStep) {
  EXPECT_EQ(FormatProgressBar(RunningWithProgress(), 2, 10),
            "[####......]  40%  4/10 partitions  RUNNING  2.0 s  ETA 3m20s  "
            "cost 1200/3000 input_rows");
}

TEST(FormatProgressLineTest, EtaInHoursAndSeconds) {
  v1::Backfill backfill = RunningWithProgress();
  backfill.clear_current_step();
  backfill.clear_cost_estimate();
  backfill.set_actual_cost(0);
  backfill.mutable_eta()->set_remaining_seconds(2 * 3600 + 5 * 60 + 1);
  EXPECT_EQ(FormatProgressLine(backfill, 1),
            "job bf-3: RUNNING  4/10 partitions  40%  1.0 s  ETA 2h05m");
  backfill.mutable_eta()->set_remaining_seconds(0.2);
  EXPECT_EQ(FormatProgressLine(backfill, 1),
            "job bf-3: RUNNING  4/10 partitions  40%  1.0 s  ETA 1s");
}

TEST(FormatProgressLineTest, FailedCountAndMessage) {
  v1::Backfill backfill = Job("bf-7", v1::BACKFILL_STATE_FAILED, 2, 1, 10);
  backfill.mutable_partitions()->set_failed(4);
  backfill.mutable_partitions()->set_pending(3);
  backfill.set_message("upstream missing");
  EXPECT_EQ(FormatProgressLine(backfill, 3),
            "job bf-7: FAILED  3/10 partitions  30%  3.0 s  4 failed  "
            "(upstream missing)");
}

TEST(FormatProgressLineTest, NoPartitions) {
  EXPECT_EQ(
      FormatProgressLine(Job("bf-1", v1::BACKFILL_STATE_QUEUED, 0, 0, 0), 0),
      "job bf-1: QUEUED  0/0 partitions  0%  0.0 s");
}

// The line and the bar report the same percentage for the same job.
TEST(FormatProgressLineTest, AgreesWithProgressBar) {
  std::vector<v1::Backfill> jobs;
  for (int done = 0; done <= 100; ++done) {
    jobs.push_back(Job("bf-1", v1::BACKFILL_STATE_RUNNING, done, 0, 100));
  }
  for (const v1::Backfill& job : jobs) {
    const std::string bar = FormatProgressBar(job, 0);
    const std::string line = FormatProgressLine(job, 0);
    const size_t bar_pct_end = bar.find('%');
    const size_t bar_pct_start = bar.rfind(' ', bar_pct_end) + 1;
    const std::string bar_pct =
        bar.substr(bar_pct_start, bar_pct_end - bar_pct_start + 1);
    EXPECT_THAT(line, HasSubstr("partitions  " + bar_pct + "  "))
        << "bar: " << bar << "\nline: " << line;
  }
}

// A finished job with no partitions is complete: the bar shows 100% for it
// and so should the line.
TEST(FormatProgressLineTest, SucceededWithNoPartitionsIsHundredPercent) {
  EXPECT_EQ(
      FormatProgressLine(Job("bf-1", v1::BACKFILL_STATE_SUCCEEDED, 0, 0, 0), 2),
      "job bf-1: SUCCEEDED  0/0 partitions  100%  2.0 s");
}

// ----------------------------------------------------------- TerminalText

TEST(TerminalTextTest, EscapesControlCharacters) {
  EXPECT_EQ(TerminalText("a\nb\rc\td"), "a\\nb\\rc\\td");
  EXPECT_EQ(TerminalText("\x1b[31mred\x1b[0m"), "\\x1b[31mred\\x1b[0m");
  EXPECT_EQ(TerminalText("bell\x07 nul"), "bell\\x07 nul");
  EXPECT_EQ(TerminalText(std::string("a\0b", 3)), "a\\x00b");
  EXPECT_EQ(TerminalText("del\x7f"), "del\\x7f");
  EXPECT_EQ(TerminalText("\x1b]0;owned\x07"), "\\x1b]0;owned\\x07");
}

TEST(TerminalTextTest, EscapesInvisibleUnicodeControls) {
  // U+009B (CSI in 8-bit form), U+0085 (next line).
  EXPECT_EQ(TerminalText("\xc2\x9b"
                         "2J"),
            "\\u009B2J");
  EXPECT_EQ(TerminalText("a\xc2\x85"
                         "b"),
            "a\\u0085b");
  // Line separator, right-to-left override, first strong isolate.
  EXPECT_EQ(TerminalText("a\xe2\x80\xa8"
                         "b"),
            "a\\u2028b");
  EXPECT_EQ(TerminalText("abc\xe2\x80\xae"
                         "fed"),
            "abc\\u202Efed");
  EXPECT_EQ(TerminalText("\xe2\x81\xa8x"), "\\u2068x");
}

TEST(TerminalTextTest, EscapesBytesThatAreNotUtf8) {
  EXPECT_EQ(TerminalText("caf\xe9"), "caf\\xe9");
  EXPECT_EQ(TerminalText("\xff\xfe"), "\\xff\\xfe");
  EXPECT_EQ(TerminalText("\xc0\xaf"), "\\xc0\\xaf");           // overlong
  EXPECT_EQ(TerminalText("\xe4\xbf"), "\\xe4\\xbf");           // truncated
  EXPECT_EQ(TerminalText("\xed\xa0\x80"), "\\xed\\xa0\\x80");  // surrogate
}

TEST(TerminalTextTest, KeepsPrintableTextInAnyLanguageAsItIs) {
  for (const std::string text :
       {"", "fix refunds (DATA-123)", "r\xc3\xa9parer les remboursements",
        "\xe4\xbf\xae\xe6\xad\xa3", "\xf0\x9f\x93\x88 up", "C:\\data\\x1b",
        "tab\\t is two characters", "\xc2\xa0non-breaking"}) {
    EXPECT_EQ(TerminalText(text), text);
  }
}

TEST(TerminalTextTest, JobFieldsAreEscapedInTheStatusBlock) {
  v1::Backfill backfill = RunningJob();
  backfill.mutable_request()->set_reason("fix\x1b[2J\nrefunds");
  backfill.mutable_request()->set_ticket("OPS-1\r");
  backfill.mutable_request()->set_requested_by("mallory\x1b]0;x\x07");
  backfill.set_idempotency_key("k\x08");
  backfill.set_message("failed:\n\x1b[1A\x1b[Kdone\xc2\x9b");
  const std::string out = FormatBackfill(backfill);
  EXPECT_FALSE(HasTerminalControl(out)) << out;
  EXPECT_EQ(ValueOf(out, "Reason"), "fix\\x1b[2J\\nrefunds  (ticket OPS-1\\r)");
  EXPECT_EQ(ValueOf(out, "Requested by"), "mallory\\x1b]0;x\\x07");
  EXPECT_EQ(ValueOf(out, "Idempotency"), "k\\x08");
  EXPECT_EQ(ValueOf(out, "Message"), "failed:\\n\\x1b[1A\\x1b[Kdone\\u009B");
}

TEST(TerminalTextTest, PartitionsAndDatasetsAreEscaped) {
  v1::Backfill backfill;
  backfill.set_id("bf-3");
  backfill.mutable_request()->set_dataset("orders");
  *backfill.mutable_request()->mutable_partitions() =
      Partitions({"new\nyork", "z\xc3\xbcrich"});
  v1::DatasetPlan* plan = backfill.add_plan();
  plan->set_dataset("by\x1b[0mcity");
  *plan->mutable_partitions() = Partitions({"new\nyork", "z\xc3\xbcrich"});
  plan->set_reason("requested");
  const std::string out = FormatBackfill(backfill);
  EXPECT_FALSE(HasTerminalControl(out)) << out;
  EXPECT_EQ(ValueOf(out, "Scope"),
            "orders partitions new\\nyork,z\xc3\xbcrich, downstream included");
  EXPECT_EQ(ValueOf(out, "  by\\x1b[0mcity"),
            "2 partitions  new\\nyork,z\xc3\xbcrich  requested");
}

TEST(TerminalTextTest, ListReasonsAreEscapedAndCutOnCharacters) {
  v1::ListBackfillsResponse list;
  v1::Backfill* first = list.add_backfills();
  *first = Job("bf-1", v1::BACKFILL_STATE_RUNNING, 0, 0, 1);
  first->mutable_request()->set_dataset("orders\x1b[8m");
  first->mutable_request()->set_reason("late\ndata\x1b[31m");
  v1::Backfill* second = list.add_backfills();
  *second = Job("bf-2", v1::BACKFILL_STATE_QUEUED, 0, 0, 1);
  second->mutable_request()->set_dataset("orders");
  std::string accents;
  for (int i = 0; i < 50; ++i) accents += "\xc3\xa9";  // "é"
  second->mutable_request()->set_reason(accents);
  v1::Backfill* third = list.add_backfills();
  *third = Job("bf-3", v1::BACKFILL_STATE_QUEUED, 0, 0, 1);
  third->mutable_request()->set_dataset("orders");
  // The cut falls inside the escape of the ESC: the escape goes whole.
  third->mutable_request()->set_reason(std::string(35, 'x') + "\x1b[31m");

  const std::string out = FormatBackfills(list);
  EXPECT_FALSE(HasTerminalControl(out)) << out;
  const std::vector<std::string> lines = Lines(out);
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_THAT(lines[1], HasSubstr("orders\\x1b[8m"));
  EXPECT_THAT(lines[1], EndsWith("late\\ndata\\x1b[31m"));
  // 40 characters: 37 of them and "...", never half a character.
  std::string cut;
  for (int i = 0; i < 37; ++i) cut += "\xc3\xa9";
  EXPECT_THAT(lines[2], EndsWith("  " + cut + "..."));
  EXPECT_THAT(lines[3], EndsWith("  " + std::string(35, 'x') + "..."));
}

TEST(TerminalTextTest, ProgressLineMessageIsEscaped) {
  v1::Backfill backfill = Job("bf-7", v1::BACKFILL_STATE_QUEUED, 0, 0, 10);
  backfill.set_message("waiting\r\x1b[2Kfor bf-1");
  const std::string line = FormatProgressLine(backfill, 0);
  EXPECT_FALSE(HasTerminalControl(line)) << line;
  EXPECT_EQ(line,
            "job bf-7: QUEUED  0/10 partitions  0%  0.0 s  "
            "(waiting\\r\\x1b[2Kfor bf-1)");
}

TEST(TerminalTextTest, PlanTextIsEscaped) {
  v1::PlanBackfillResponse plan = TwoDatasetPlan();
  plan.mutable_datasets(0)->set_reason("requested\x1b[5m");
  *plan.mutable_datasets(0)->mutable_partitions() = Partitions({"a\tb", "c"});
  v1::Conflict* conflict = plan.add_conflicts();
  conflict->set_backfill_id("bf-7");
  conflict->set_dataset("orders");
  conflict->set_partition("a\tb");
  const std::string out = FormatPlan(plan);
  EXPECT_FALSE(HasTerminalControl(out)) << out;
  EXPECT_THAT(LineStartingWith(out, "orders "),
              MatchesRegex("orders +day +2 +a\\\\tb,c +1000 +1\\.0% "
                           "+requested\\\\x1b\\[5m"));
  EXPECT_THAT(Lines(out), Contains("  job bf-7  orders  a\\tb"));
}

// ------------------------------------------- the queueing rule, priorities

TEST(FormatPlanTest, ConflictsSayASubmitWouldWaitForTheirJobs) {
  v1::PlanBackfillResponse plan = TwoDatasetPlan();
  for (const auto& [id, partition] :
       std::vector<std::pair<std::string, std::string>>{
           {"bf-7", "2025-03-01"},
           {"bf-8", "2025-03-02"},
           {"bf-7", "2025-03-03"}}) {
    v1::Conflict* conflict = plan.add_conflicts();
    conflict->set_backfill_id(id);
    conflict->set_dataset("orders");
    conflict->set_partition(partition);
  }
  EXPECT_EQ(LineStartingWith(FormatPlan(plan), "Conflicts:"),
            "Conflicts: 3 (a submit would wait for jobs bf-7, bf-8 to finish; "
            "with --no-wait it would be refused)");
  plan.mutable_conflicts()->DeleteSubrange(1, 2);
  EXPECT_EQ(LineStartingWith(FormatPlan(plan), "Conflicts:"),
            "Conflicts: 1 (a submit would wait for job bf-7 to finish; with "
            "--no-wait it would be refused)");
}

TEST(FormatBackfillTest, PriorityAndMaxParallelWhenSet) {
  v1::Backfill backfill = RunningJob();
  std::string out = FormatBackfill(backfill);
  EXPECT_THAT(out, Not(HasSubstr("Priority")));
  EXPECT_THAT(out, Not(HasSubstr("Max parallel")));
  backfill.mutable_request()->set_priority(-20);
  backfill.mutable_request()->set_max_parallel(4);
  out = FormatBackfill(backfill);
  EXPECT_EQ(ValueOf(out, "Priority"), "-20");
  EXPECT_EQ(ValueOf(out, "Max parallel"), "4 partitions at once");
  backfill.mutable_request()->set_max_parallel(1);
  EXPECT_EQ(ValueOf(FormatBackfill(backfill), "Max parallel"),
            "1 partition at once");
}

// ------------------------------------------------------------ Early cutoff

// A job whose recompute found 30 partitions identical to the published
// ones and skipped 12 dependents, 3 partitions published.
v1::Backfill CutoffJob(v1::BackfillState state) {
  v1::Backfill backfill = Job("bf-9", state, 3, 0, 45);
  backfill.mutable_partitions()->set_unchanged(30);
  backfill.mutable_partitions()->set_skipped(12);
  backfill.mutable_partitions()->set_pending(0);
  return backfill;
}

TEST(EarlyCutoffFormatTest, UnchangedAndSkippedCountAsDone) {
  const v1::Backfill job = CutoffJob(v1::BACKFILL_STATE_SUCCEEDED);
  EXPECT_EQ(DonePartitions(job.partitions()), 45);
  EXPECT_EQ(ValueOf(FormatBackfill(job), "Partitions"),
            "45/45 done: 3 published, 30 unchanged, 12 skipped");
  EXPECT_EQ(FormatProgressLine(job, 2),
            "job bf-9: SUCCEEDED  45/45 partitions  100%  2.0 s"
            "  (30 unchanged, 12 skipped)");
  EXPECT_THAT(FormatProgressBar(job, 2, 10),
              HasSubstr("45/45 partitions  SUCCEEDED  2.0 s  (30 unchanged, "
                        "12 skipped)"));
  v1::ListBackfillsResponse list;
  *list.add_backfills() = job;
  const std::vector<std::string> lines = Lines(FormatBackfills(list));
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_THAT(lines[1], HasSubstr("45/45 (30 unchanged, 12 skipped)"));
  // JSON carries the proto field names.
  absl::StatusOr<std::string> json = ToJson(job);
  ASSERT_TRUE(json.ok());
  EXPECT_THAT(*json, HasSubstr("\"unchanged\": \"30\""));
  EXPECT_THAT(*json, HasSubstr("\"skipped\": \"12\""));
}

TEST(EarlyCutoffFormatTest, OnlyNonZeroCutoffCountsAreShown) {
  v1::Backfill job = CutoffJob(v1::BACKFILL_STATE_RUNNING);
  job.mutable_partitions()->set_skipped(0);
  job.mutable_partitions()->set_pending(12);
  EXPECT_EQ(ValueOf(FormatBackfill(job), "Partitions"),
            "33/45 done: 3 published, 30 unchanged, 12 pending");
  EXPECT_EQ(FormatProgressLine(job, 1),
            "job bf-9: RUNNING  33/45 partitions  73%  1.0 s  (30 unchanged)");
}

// A plan too large to list its partitions (the server left the lists out):
// the count comes from partition_count, the range is not made up.
TEST(FormatPlanTest, APlanWithoutItsListsShowsTheirCounts) {
  v1::PlanBackfillResponse plan = TwoDatasetPlan();
  plan.mutable_datasets(1)->clear_partitions();
  plan.mutable_datasets(1)->set_partition_count(1000000);
  plan.set_total_partitions(1000003);
  const std::string out = FormatPlan(plan);
  EXPECT_THAT(LineStartingWith(out, "daily_revenue "),
              MatchesRegex("daily_revenue +day +1000000 +\\(not listed\\) "
                           "+2000 .*"));
  EXPECT_THAT(LineStartingWith(out, "orders "),
              MatchesRegex("orders +day +3 +2025-03-01,2025-03-02,2025-03-03 "
                           ".*"));
  EXPECT_EQ(LineStartingWith(out, "The plan is too large"),
            "The plan is too large to list its partitions; a submitted job "
            "lists them page by page (backfillctl partitions)");
  EXPECT_EQ(
      LineStartingWith(FormatPlan(TwoDatasetPlan()), "The plan is too large"),
      "");
}

TEST(EarlyCutoffFormatTest, ThePlanSaysWhatHappensToUnchangedPartitions) {
  const std::string out = FormatPlan(TwoDatasetPlan());
  EXPECT_EQ(LineStartingWith(out, "Early cutoff:"),
            "Early cutoff: a partition recomputed identical to its published "
            "version is not republished, and a dependent reading only such "
            "partitions is skipped (counted as unchanged / skipped)");
}

}  // namespace
}  // namespace client_cli_format_test
}  // namespace cli
}  // namespace backfill
