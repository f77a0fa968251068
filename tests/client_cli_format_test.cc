// Unit tests of the backfillctl renderings (client/cli_format.h): JSON
// output, timestamps, state names, counts, partition summaries, costs, the
// plan/job/list tables, the --wait progress bar and lines, and the escaping
// of text from the server or users for the terminal. Expectations are
// written from the formats documented in the headers cli_format.h includes
// and the proto contract, not from the implementation.

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

namespace backfill {
namespace cli {
namespace client_cli_format_test {
namespace {

using ::testing::Contains;
using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::MatchesRegex;
using ::testing::Not;
using ::testing::StartsWith;

// 2025-03-01T12:34:56Z.
constexpr int64_t kMarch1At123456 = 1740832496;
// 2025-03-01T12:00:00Z.
constexpr int64_t kMarch1AtNoon = 1740830400;

google::protobuf::RepeatedPtrField<std::string> Partitions(
    std::vector<std::string> values) {
  google::protobuf::RepeatedPtrField<std::string> out;
  for (auto& value : values) out.Add(std::move(value));
  return out;
}

std::vector<std::string> Lines(const std::string& text) {
  return absl::StrSplit(text, '\n', absl::SkipEmpty());
}

// The line of `text` starting with `prefix`, or "" when there is none.
std::string LineStartingWith(const std::string& text,
                             const std::string& prefix) {
  for (const std::string& line : Lines(text)) {
    if (line.rfind(prefix, 0) == 0) return line;
  }
  return "";
}

// The value of a "label  value" line: what follows the label and the run
// of padding spaces.
std::string ValueOf(const std::string& block, const std::string& label) {
  for (const std::string& line : Lines(block)) {
    if (line.rfind(label + "  ", 0) != 0 && line != label) continue;
    std::string rest = line.substr(label.size());
    size_t start = rest.find_first_not_of(' ');
    return start == std::string::npos ? "" : rest.substr(start);
  }
  return "<no line " + label + ">";
}

// Counts top-level JSON values in `text` (strings and escapes respected).
int TopLevelJsonValues(const std::string& text) {
  int depth = 0;
  int values = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      if (depth == 0) ++values;
      ++depth;
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return depth == 0 ? values : -1;
}

v1::CostEstimate Cost(double backfill, double full_reload,
                      v1::CostUnit unit = v1::COST_UNIT_UNSPECIFIED) {
  v1::CostEstimate cost;
  cost.set_unit(unit);
  cost.set_backfill(backfill);
  cost.set_full_reload(full_reload);
  cost.set_ratio(full_reload > 0 ? backfill / full_reload : 0);
  return cost;
}

v1::Backfill Job(const std::string& id, v1::BackfillState state,
                 int64_t published, int64_t staged, int64_t total) {
  v1::Backfill backfill;
  backfill.set_id(id);
  backfill.set_state(state);
  backfill.mutable_partitions()->set_total(total);
  backfill.mutable_partitions()->set_published(published);
  backfill.mutable_partitions()->set_staged(staged);
  backfill.mutable_partitions()->set_pending(total - published - staged);
  return backfill;
}

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

// -------------------------------------------------------------- FormatPlan

v1::PlanBackfillResponse TwoDatasetPlan() {
  v1::PlanBackfillResponse plan;
  v1::DatasetPlan* orders = plan.add_datasets();
  orders->set_dataset("orders");
  orders->set_grain(v1::GRAIN_DAY);
  *orders->mutable_partitions() =
      Partitions({"2025-03-01", "2025-03-02", "2025-03-03"});
  orders->set_reason("requested");
  *orders->mutable_cost() = Cost(1000, 100000);
  v1::DatasetPlan* revenue = plan.add_datasets();
  revenue->set_dataset("daily_revenue");
  revenue->set_grain(v1::GRAIN_DAY);
  *revenue->mutable_partitions() =
      Partitions({"2025-03-01", "2025-03-02", "2025-03-03", "2025-03-04"});
  revenue->set_reason("downstream of orders");
  *revenue->mutable_cost() = Cost(2000, 50000);
  plan.set_total_partitions(7);
  *plan.mutable_cost() = Cost(3000, 150000);
  return plan;
}

TEST(FormatPlanTest, HeadlineRowsCostAndNoConflicts) {
  const std::string out = FormatPlan(TwoDatasetPlan());
  EXPECT_THAT(out, StartsWith("Plan: 7 partitions in 2 datasets\n"));
  EXPECT_THAT(LineStartingWith(out, "DATASET"),
              MatchesRegex("DATASET +GRAIN +PARTITIONS +RANGE +COST +VS FULL "
                           "+WHY"));
  EXPECT_THAT(LineStartingWith(out, "orders "),
              MatchesRegex("orders +day +3 +2025-03-01,2025-03-02,2025-03-03 "
                           "+1000 +1\\.0% +requested"));
  EXPECT_THAT(
      LineStartingWith(out, "daily_revenue "),
      MatchesRegex("daily_revenue +day +4 +2025-03-01,2025-03-02,2025-03-03,"
                   "2025-03-04 +2000 +4\\.0% +downstream of orders"));
  EXPECT_THAT(Lines(out),
              Contains("Cost: 3000 input rows estimated vs 150.0k for a full "
                       "reload (2.0%)"));
  EXPECT_THAT(out, EndsWith("Conflicts: none\n"));
}

TEST(FormatPlanTest, FrozenPartitionsAreListedWithTheirRule) {
  v1::PlanBackfillResponse plan = TwoDatasetPlan();
  EXPECT_THAT(FormatPlan(plan), Not(HasSubstr("Frozen")));
  v1::FrozenPartitions* left = plan.add_frozen();
  left->set_dataset("daily_revenue");
  left->set_rule("frozen.before 2025-03-01");
  for (int d = 17; d <= 28; ++d) {
    left->add_partitions(absl::StrFormat("2025-02-%02d", d));
  }
  v1::FrozenPartitions* kept = plan.add_frozen();
  kept->set_dataset("monthly\x1b[31m");
  kept->set_rule("frozen.older_than 35d");
  kept->add_partitions("2025-01");
  kept->set_overridden(true);
  const std::string out = FormatPlan(plan);
  EXPECT_THAT(Lines(out),
              Contains("Frozen: daily_revenue 2025-02-17, 2025-02-18, "
                       "2025-02-19, 2025-02-20, 2025-02-21, 2025-02-22, "
                       "2025-02-23, 2025-02-24, 2025-02-25, 2025-02-26 and 2 "
                       "more (frozen.before 2025-03-01): left out; an "
                       "approver may add --override-frozen"));
  // Names from the server are shown escaped, as everywhere.
  EXPECT_THAT(Lines(out), Contains("Frozen: monthly\\x1b[31m 2025-01 "
                                   "(frozen.older_than 35d): planned anyway "
                                   "(--override-frozen)"));
}

TEST(FormatPlanTest, EstimateSourcesAndBudgets) {
  v1::PlanBackfillResponse plan = TwoDatasetPlan();
  plan.mutable_datasets(0)->set_estimate_source(v1::ESTIMATE_SOURCE_HISTORY);
  plan.mutable_datasets(0)->set_partitions_from_history(3);
  plan.mutable_datasets(1)->set_estimate_source(v1::ESTIMATE_SOURCE_MIXED);
  plan.mutable_datasets(1)->set_partitions_from_history(1);
  std::string out = FormatPlan(plan);
  EXPECT_THAT(Lines(out),
              Contains("Estimated from: orders history (3/3 partitions), "
                       "daily_revenue mixed (1/4 partitions from history, the "
                       "others from row counts)"));
  // No budget: no budget line.
  EXPECT_THAT(out, Not(HasSubstr("Budget")));

  plan.mutable_cost()->set_unit(v1::COST_UNIT_INPUT_ROWS);
  plan.mutable_cost()->set_max_cost(5000);
  out = FormatPlan(plan);
  EXPECT_THAT(Lines(out),
              Contains("Budget: --max-cost 5000 input_rows (within)"));

  plan.mutable_cost()->set_max_cost(2500);
  plan.mutable_cost()->set_refused("estimated cost 3,000 input_rows exceeds");
  plan.mutable_datasets(1)->mutable_cost()->set_max_cost(1500);
  plan.mutable_datasets(1)->mutable_cost()->set_refused(
      "daily_revenue \x1b[31m over");
  out = FormatPlan(plan);
  EXPECT_THAT(Lines(out),
              Contains("Budget: --max-cost 2500 input_rows, daily_revenue "
                       "max_cost 1500 input rows"));
  EXPECT_THAT(Lines(out),
              Contains("A submit of this plan WOULD BE REFUSED: estimated cost "
                       "3,000 input_rows exceeds"));
  // The dataset's own refusal too, made safe for the terminal.
  EXPECT_THAT(Lines(out), Contains("  also: daily_revenue \\x1b[31m over"));
}

TEST(FormatBackfillTest, BudgetAndCostPerDataset) {
  v1::Backfill backfill = Job("bf-7", v1::BACKFILL_STATE_SUCCEEDED, 3, 0, 3);
  backfill.mutable_request()->set_max_cost(2e6);
  *backfill.mutable_cost_estimate() =
      Cost(1500, 30000, v1::COST_UNIT_INPUT_ROWS);
  v1::DatasetCost* cost = backfill.add_dataset_costs();
  cost->set_dataset("daily_revenue");
  cost->set_estimated(1500);
  cost->set_actual(1620);
  cost->set_source(v1::ESTIMATE_SOURCE_HISTORY);
  const std::string out = FormatBackfill(backfill);
  EXPECT_EQ(ValueOf(out, "Max cost"), "2.00M input_rows");
  EXPECT_EQ(ValueOf(out, "Cost daily_revenue"),
            "estimated 1500 input_rows from history; actual 1620 input_rows");
}

TEST(FormatPlanTest, SingularCountsAndNoFullReload) {
  v1::PlanBackfillResponse plan;
  v1::DatasetPlan* one = plan.add_datasets();
  one->set_dataset("customers");
  *one->mutable_partitions() = Partitions({""});
  *one->mutable_cost() = Cost(42, 0);
  plan.set_total_partitions(1);
  *plan.mutable_cost() = Cost(42, 0);
  const std::string out = FormatPlan(plan);
  EXPECT_THAT(out, StartsWith("Plan: 1 partition in 1 dataset\n"));
  EXPECT_THAT(LineStartingWith(out, "customers "),
              MatchesRegex("customers +- +1 +\\(unpartitioned\\) +42 +- +-"));
  EXPECT_THAT(Lines(out),
              Contains("Cost: 42 input rows estimated vs 0 for a full reload"));
}

TEST(FormatPlanTest, GroupsPartitionReasonsIntoRanges) {
  v1::PlanBackfillResponse plan;
  v1::DatasetPlan* daily = plan.add_datasets();
  daily->set_dataset("daily_revenue");
  daily->set_grain(v1::GRAIN_DAY);
  std::vector<std::string> june;
  for (int d = 1; d <= 30; ++d) {
    june.push_back(absl::StrFormat("2025-06-%02d", d));
    daily->add_partition_reasons("requested");
  }
  *daily->mutable_partitions() = Partitions(june);
  v1::DatasetPlan* monthly = plan.add_datasets();
  monthly->set_dataset("monthly_revenue");
  *monthly->mutable_partitions() = Partitions({"2025-06"});
  monthly->add_partition_reasons("downstream of daily_revenue via rollup");
  v1::DatasetPlan* combined = plan.add_datasets();
  combined->set_dataset("combined");
  *combined->mutable_partitions() =
      Partitions({"2025-06-30", "2025-07-01", "2025-07-02"});
  combined->add_partition_reasons("downstream of daily_copy");
  combined->add_partition_reasons("downstream of rolling7");
  combined->add_partition_reasons("downstream of rolling7");
  // A job planned before reasons were kept has none: no lines for it.
  v1::DatasetPlan* old = plan.add_datasets();
  old->set_dataset("old");
  *old->mutable_partitions() = Partitions({"2025-06-01"});
  plan.set_total_partitions(35);
  const std::string out = FormatPlan(plan);
  EXPECT_THAT(out, HasSubstr("Why each partition:\n"
                             "  daily_revenue\n"
                             "    2025-06-01 .. 2025-06-30  requested (30)\n"
                             "  monthly_revenue\n"
                             "    2025-06  downstream of daily_revenue via "
                             "rollup\n"
                             "  combined\n"
                             "    2025-06-30  downstream of daily_copy\n"
                             "    2025-07-01, 2025-07-02  downstream of "
                             "rolling7\n\n"));
  EXPECT_THAT(out, Not(HasSubstr("  old\n")));
}

TEST(FormatPartitionReasonsTest, ShortRunsWithGapsAreListedNotRanged) {
  // Three months with one reason, not adjacent in the calendar: listed, so
  // that no reader takes them for 2025-03 .. 2025-11.
  v1::DatasetPlan plan;
  for (const char* m : {"2025-03", "2025-08", "2025-11"}) {
    plan.add_partitions(m);
    plan.add_partition_reasons("downstream of daily via rollup");
  }
  EXPECT_EQ(FormatPartitionReasons(plan, "  ", 12),
            "  2025-03, 2025-08, 2025-11  downstream of daily via rollup\n");
  // A fourth makes it a range with its count.
  plan.add_partitions("2025-12");
  plan.add_partition_reasons("downstream of daily via rollup");
  EXPECT_EQ(FormatPartitionReasons(plan, "  ", 12),
            "  2025-03 .. 2025-12  downstream of daily via rollup (4)\n");
}

TEST(FormatPartitionReasonsTest, CapsTheNumberOfRanges) {
  v1::DatasetPlan plan;
  // Alternating reasons: 6 ranges of one partition each.
  for (int d = 1; d <= 6; ++d) {
    plan.add_partitions(absl::StrFormat("2025-01-%02d", d));
    plan.add_partition_reasons(d % 2 ? "requested" : "downstream of x");
  }
  EXPECT_EQ(FormatPartitionReasons(plan, "  ", 4),
            "  2025-01-01  requested\n"
            "  2025-01-02  downstream of x\n"
            "  2025-01-03  requested\n"
            "  2025-01-04  downstream of x\n"
            "  ... and 2 more ranges (--json lists every reason)\n");
  // Misaligned reasons are not shown rather than shown wrong.
  plan.add_partitions("2025-01-07");
  EXPECT_EQ(FormatPartitionReasons(plan, "  "), "");
  // Reasons are terminal text.
  v1::DatasetPlan odd;
  odd.add_partitions("p\x1b[2J");
  odd.add_partition_reasons("downstream of \x1b[31mx");
  EXPECT_EQ(FormatPartitionReasons(odd, ""),
            "p\\x1b[2J  downstream of \\x1b[31mx\n");
}

TEST(FormatDatasetsTest, ShowsLookbackCounts) {
  v1::ListDatasetsResponse response;
  v1::Dataset* d = response.add_datasets();
  d->set_name("rolling7");
  d->set_kind(v1::DATASET_KIND_DERIVED);
  d->set_grain(v1::GRAIN_DAY);
  v1::Upstream* up = d->add_upstream();
  up->set_dataset("daily_revenue");
  up->set_mapping(v1::PARTITION_MAPPING_LOOKBACK);
  up->set_lookback(7);
  v1::Dataset* m = response.add_datasets();
  m->set_name("monthly_revenue");
  m->set_kind(v1::DATASET_KIND_DERIVED);
  v1::Upstream* r = m->add_upstream();
  r->set_dataset("daily_revenue");
  r->set_mapping(v1::PARTITION_MAPPING_ROLLUP);
  const std::string out = FormatDatasets(response);
  EXPECT_THAT(out, HasSubstr("daily_revenue(lookback 7)"));
  EXPECT_THAT(out, HasSubstr("daily_revenue(rollup)"));
}

TEST(FormatDatasetsTest, ShowsATimeByKeyGrainAligned) {
  v1::ListDatasetsResponse response;
  v1::Dataset* d = response.add_datasets();
  d->set_name("revenue_by_region");
  d->set_kind(v1::DATASET_KIND_DERIVED);
  d->set_grain(v1::GRAIN_DAY);
  d->set_partition_column("ds");
  d->set_partition_key_column("region");
  d->add_partition_keys("eu");
  v1::Dataset* t = response.add_datasets();
  t->set_name("daily_total");
  t->set_kind(v1::DATASET_KIND_DERIVED);
  t->set_grain(v1::GRAIN_DAY);
  t->set_partition_column("ds");
  const std::string out = FormatDatasets(response);
  const std::string first = LineStartingWith(out, "revenue_by_region");
  const std::string second = LineStartingWith(out, "daily_total");
  EXPECT_THAT(first, HasSubstr(" day:ds x key:region "));
  EXPECT_THAT(second, HasSubstr(" day:ds "));
  EXPECT_THAT(second, Not(HasSubstr("key:")));
  // The TABLE column starts at the same offset on every line.
  const std::string header = LineStartingWith(out, "NAME");
  EXPECT_EQ(header.find("TABLE"), first.find("-", first.find("key:region")));
  EXPECT_EQ(first.find("-", first.find("key:region")),
            second.find("-", second.find("day:ds")));
}

TEST(FormatPlanTest, ListsConflicts) {
  v1::PlanBackfillResponse plan = TwoDatasetPlan();
  v1::Conflict* first = plan.add_conflicts();
  first->set_backfill_id("bf-7");
  first->set_dataset("orders");
  first->set_partition("2025-03-02");
  v1::Conflict* second = plan.add_conflicts();
  second->set_backfill_id("bf-8");
  second->set_dataset("customers");
  second->set_partition("");
  const std::string out = FormatPlan(plan);
  EXPECT_THAT(out, Not(HasSubstr("Conflicts: none")));
  EXPECT_THAT(LineStartingWith(out, "Conflicts:"), StartsWith("Conflicts: 2 "));
  EXPECT_THAT(Lines(out), Contains("  job bf-7  orders  2025-03-02"));
  EXPECT_THAT(Lines(out), Contains("  job bf-8  customers  (unpartitioned)"));
}

TEST(FormatPlanTest, ManyConflictsAreCappedAtTen) {
  v1::PlanBackfillResponse plan = TwoDatasetPlan();
  for (int i = 1; i <= 12; ++i) {
    v1::Conflict* conflict = plan.add_conflicts();
    conflict->set_backfill_id("bf-" + std::to_string(i));
    conflict->set_dataset("orders");
    conflict->set_partition("p" + std::to_string(i));
  }
  const std::string out = FormatPlan(plan);
  EXPECT_THAT(LineStartingWith(out, "Conflicts:"),
              StartsWith("Conflicts: 12 "));
  EXPECT_THAT(Lines(out), Contains("  job bf-10  orders  p10"));
  EXPECT_THAT(Lines(out), Not(Contains("  job bf-11  orders  p11")));
  EXPECT_THAT(Lines(out), Contains("  ... and 2 more"));
}

// ---------------------------------------------------------- FormatBackfill

v1::Backfill RunningJob() {
  v1::Backfill backfill;
  backfill.set_id("bf-42");
  backfill.set_state(v1::BACKFILL_STATE_RUNNING);
  v1::BackfillRequest* request = backfill.mutable_request();
  request->set_dataset("orders");
  request->set_from_partition("2025-03-01");
  request->set_to_partition("2025-03-08");
  request->set_reason("fix late orders");
  request->set_ticket("OPS-1");
  request->set_requested_by("alice");
  backfill.set_idempotency_key("key-1");
  v1::PartitionCounts* counts = backfill.mutable_partitions();
  counts->set_total(300);
  counts->set_published(100);
  counts->set_staged(35);
  counts->set_running(5);
  counts->set_pending(150);
  counts->set_failed(10);
  v1::DatasetPlan* plan = backfill.add_plan();
  plan->set_dataset("orders");
  *plan->mutable_partitions() = Partitions({"2025-03-01", "2025-03-02"});
  plan->set_reason("requested");
  *backfill.mutable_cost_estimate() = Cost(12300, 345600);
  backfill.set_actual_cost(4567);
  backfill.set_rows_written(1234567);
  backfill.set_message("recomputing");
  backfill.mutable_create_time()->set_seconds(kMarch1AtNoon);
  backfill.mutable_start_time()->set_seconds(kMarch1AtNoon);
  backfill.mutable_update_time()->set_seconds(kMarch1At123456);
  return backfill;
}

TEST(FormatBackfillTest, ShowsTheFirstKeysAndTheirCount) {
  v1::Backfill job = RunningJob();
  EXPECT_EQ(ValueOf(FormatBackfill(job), "Keys"), "<no line Keys>");
  job.mutable_request()->add_keys("c1");
  EXPECT_EQ(ValueOf(FormatBackfill(job), "Keys"), "1 key: c1");
  for (int i = 2; i <= 12; ++i) {
    job.mutable_request()->add_keys(absl::StrCat("c", i));
  }
  EXPECT_EQ(ValueOf(FormatBackfill(job), "Keys"),
            "12 keys: c1, c2, c3, c4, c5, ... (7 more)");
  // Terminal control characters are escaped.
  v1::Backfill hostile = RunningJob();
  hostile.mutable_request()->add_keys("a\x1b[2Jb");
  EXPECT_THAT(FormatBackfill(hostile), Not(HasSubstr("\x1b")));
}

TEST(FormatPlanTest, SaysWhichKeysAreReplaced) {
  v1::PlanBackfillResponse plan = TwoDatasetPlan();
  EXPECT_THAT(FormatPlan(plan), Not(HasSubstr("Only the rows")));
  plan.mutable_datasets(0)->add_keys("c1");
  plan.mutable_datasets(0)->add_keys("c2");
  EXPECT_THAT(FormatPlan(plan),
              HasSubstr("Only the rows of orders with 2 keys: c1, c2 are "
                        "replaced (dependents by partition)"));
}

TEST(FormatDatasetsTest, ShowsTheEntityKey) {
  v1::ListDatasetsResponse response;
  v1::Dataset* d = response.add_datasets();
  d->set_name("customer_revenue");
  d->set_kind(v1::DATASET_KIND_DERIVED);
  d->set_entity_key("customer_id");
  v1::Dataset* e = response.add_datasets();
  e->set_name("daily_total");
  e->set_kind(v1::DATASET_KIND_DERIVED);
  const std::string out = FormatDatasets(response);
  EXPECT_THAT(out, HasSubstr("ENTITY KEY"));
  EXPECT_THAT(out, HasSubstr("customer_id"));
}

TEST(FormatBackfillTest, DescribesTheJob) {
  const std::string out = FormatBackfill(RunningJob());
  EXPECT_EQ(ValueOf(out, "Job"), "bf-42");
  EXPECT_EQ(ValueOf(out, "State"), "RUNNING");
  EXPECT_EQ(ValueOf(out, "Scope"),
            "orders [2025-03-01, 2025-03-08), downstream included");
  EXPECT_EQ(ValueOf(out, "Reason"), "fix late orders  (ticket OPS-1)");
  EXPECT_EQ(ValueOf(out, "Requested by"), "alice");
  EXPECT_EQ(ValueOf(out, "Idempotency"), "key-1");
  EXPECT_EQ(ValueOf(out, "Partitions"),
            "135/300 done: 100 published, 35 staged, 5 running, 150 pending, "
            "10 failed");
  EXPECT_EQ(ValueOf(out, "  orders"),
            "2 partitions  2025-03-01,2025-03-02  requested");
  EXPECT_EQ(ValueOf(out, "Cost"),
            "estimated 12.3k input rows (3.6% of a full reload, 345.6k); "
            "actual 4567 input rows");
  EXPECT_EQ(ValueOf(out, "Rows written"), "1,234,567");
  EXPECT_EQ(ValueOf(out, "Created"), "2025-03-01T12:00:00Z");
  EXPECT_EQ(ValueOf(out, "Started"), "2025-03-01T12:00:00Z");
  EXPECT_EQ(ValueOf(out, "Updated"), "2025-03-01T12:34:56Z");
  EXPECT_EQ(ValueOf(out, "Ended"), "-");
  EXPECT_THAT(out, Not(HasSubstr("Duration")));
  EXPECT_EQ(ValueOf(out, "Message"), "recomputing");
}

TEST(FormatBackfillTest, ScopeShowsAffectedByEscaped) {
  v1::Backfill job = RunningJob();
  job.mutable_request()->clear_from_partition();
  job.mutable_request()->clear_to_partition();
  job.mutable_request()->set_affected_by(
      "raw: refund > 0 AND\nnote = '\x1b[2J'");
  EXPECT_EQ(ValueOf(FormatBackfill(job), "Scope"),
            "orders affected by \"raw: refund > 0 AND\\nnote = '\\x1b[2J'\", "
            "downstream included");
}

TEST(FormatBackfillTest, ScopeShowsAuto) {
  v1::Backfill job = RunningJob();
  job.mutable_request()->clear_from_partition();
  job.mutable_request()->clear_to_partition();
  job.mutable_request()->set_auto_detect(true);
  EXPECT_EQ(ValueOf(FormatBackfill(job), "Scope"),
            "orders auto (lineage no longer matches), downstream included");
}

TEST(FormatBackfillTest, ValuesAreAlignedInOneColumn) {
  const std::string out = FormatBackfill(RunningJob());
  std::vector<std::string> lines = Lines(out);
  ASSERT_THAT(lines, Not(IsEmpty()));
  // "Job" and "Message" are single words: their value starts after the
  // padding, and all those starts coincide.
  auto value_column = [](const std::string& line, size_t label_size) {
    return line.find_first_not_of(' ', label_size);
  };
  const std::string job = LineStartingWith(out, "Job ");
  const std::string message = LineStartingWith(out, "Message ");
  const std::string state = LineStartingWith(out, "State ");
  ASSERT_FALSE(job.empty());
  size_t column = value_column(job, 3);
  EXPECT_EQ(value_column(message, 7), column);
  EXPECT_EQ(value_column(state, 5), column);
  // At least two spaces after the longest label, "Requested by".
  EXPECT_GE(column, std::string("Requested by").size() + 2);
  EXPECT_THAT(out, EndsWith("\n"));
}

TEST(FormatBackfillTest, ShowsWhyEachPartitionIsInTheJob) {
  v1::Backfill backfill;
  backfill.set_id("bf-3");
  v1::DatasetPlan* daily = backfill.add_plan();
  daily->set_dataset("daily_revenue");
  *daily->mutable_partitions() = Partitions({"2025-06-14"});
  daily->add_partition_reasons("requested");
  v1::DatasetPlan* rolling = backfill.add_plan();
  rolling->set_dataset("rolling7");
  std::vector<std::string> days;
  for (int d = 14; d <= 21; ++d) {
    days.push_back(absl::StrFormat("2025-06-%02d", d));
    rolling->add_partition_reasons(
        "downstream of daily_revenue via lookback 7");
  }
  *rolling->mutable_partitions() = Partitions(days);
  const std::string out = FormatBackfill(backfill);
  EXPECT_THAT(out, HasSubstr("Why each partition:\n"
                             "  daily_revenue\n"
                             "    2025-06-14  requested\n"
                             "  rolling7\n"
                             "    2025-06-14 .. 2025-06-21  downstream of "
                             "daily_revenue via lookback 7 (8)\n"));
}

TEST(FormatBackfillTest, FinishedFailedJob) {
  v1::Backfill backfill = RunningJob();
  backfill.set_state(v1::BACKFILL_STATE_FAILED);
  backfill.set_message("partition 2025-03-02: upstream table missing");
  backfill.mutable_end_time()->set_seconds(kMarch1At123456);
  const std::string out = FormatBackfill(backfill);
  EXPECT_EQ(ValueOf(out, "State"), "FAILED");
  EXPECT_EQ(ValueOf(out, "Ended"), "2025-03-01T12:34:56Z");
  EXPECT_EQ(ValueOf(out, "Duration"), "34m56s");
  EXPECT_EQ(ValueOf(out, "Message"),
            "partition 2025-03-02: upstream table missing");
}

TEST(FormatBackfillTest, AMessageInApiTermsIsShownInTheClisTerms) {
  v1::Backfill backfill = RunningJob();
  backfill.set_state(v1::BACKFILL_STATE_AWAITING_APPROVAL);
  backfill.set_message(
      "validation failed, nothing was published: row_change on d. Read its "
      "diff (`DiffBackfill` bf-7); fix the data or the transform and submit "
      "a new backfill, or publish it despite the failed checks with "
      "`ApproveBackfill` bf-7, `override_validation` and a `reason`");
  const std::string expected =
      "validation failed, nothing was published: row_change on d. Read its "
      "diff (backfillctl diff bf-7); fix the data or the transform and "
      "submit a new backfill, or publish it despite the failed checks with "
      "backfillctl approve bf-7, --override and a --reason";
  EXPECT_EQ(ValueOf(FormatBackfill(backfill), "Message"), expected);
  EXPECT_THAT(FormatProgressLine(backfill, 1),
              HasSubstr(absl::StrCat("(", expected, ")")));
}

TEST(FormatBackfillTest, MinimalJobUsesDashesAndOmitsOptionalLines) {
  v1::Backfill backfill;
  backfill.set_id("bf-1");
  backfill.set_state(v1::BACKFILL_STATE_QUEUED);
  backfill.mutable_request()->set_dataset("customers");
  backfill.mutable_request()->set_exclude_downstream(true);
  const std::string out = FormatBackfill(backfill);
  EXPECT_EQ(ValueOf(out, "State"), "QUEUED");
  EXPECT_EQ(ValueOf(out, "Scope"),
            "customers (whole dataset), downstream excluded");
  EXPECT_EQ(ValueOf(out, "Reason"), "-");
  EXPECT_EQ(ValueOf(out, "Requested by"), "-");
  EXPECT_THAT(out, Not(HasSubstr("Idempotency")));
  EXPECT_EQ(ValueOf(out, "Partitions"), "0/0 done");
  EXPECT_EQ(ValueOf(out, "Cost"),
            "estimated 0 input rows; actual 0 input rows");
  EXPECT_EQ(ValueOf(out, "Rows written"), "0");
  EXPECT_EQ(ValueOf(out, "Created"), "-");
  EXPECT_EQ(ValueOf(out, "Message"), "-");
}

TEST(FormatBackfillTest, ListedPartitionsScope) {
  v1::Backfill backfill;
  backfill.set_id("bf-3");
  backfill.mutable_request()->set_dataset("orders");
  *backfill.mutable_request()->mutable_partitions() =
      Partitions({"2025-03-01", "2025-03-05"});
  EXPECT_EQ(ValueOf(FormatBackfill(backfill), "Scope"),
            "orders partitions 2025-03-01,2025-03-05, downstream included");
}

// --------------------------------------------------------- FormatBackfills

TEST(FormatBackfillsTest, OneRowPerJob) {
  v1::ListBackfillsResponse list;
  v1::Backfill* first = list.add_backfills();
  *first = Job("bf-1", v1::BACKFILL_STATE_RUNNING, 100, 35, 300);
  first->mutable_request()->set_dataset("orders");
  first->mutable_request()->set_reason("late data");
  first->mutable_create_time()->set_seconds(kMarch1At123456);
  first->mutable_cost_estimate()->set_unit(v1::COST_UNIT_INPUT_ROWS);
  first->mutable_cost_estimate()->set_backfill(12345);
  first->set_actual_cost(6000);
  v1::Backfill* second = list.add_backfills();
  *second = Job("bf-22", v1::BACKFILL_STATE_SUCCEEDED, 7, 0, 7);
  second->mutable_request()->set_dataset("daily_revenue");
  second->mutable_request()->set_reason(
      "a very long reason that goes on and on past the column limit");

  const std::vector<std::string> lines = Lines(FormatBackfills(list));
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_THAT(lines[0],
              MatchesRegex("ID +STATE +DATASET +PARTITIONS +COST EST/ACTUAL "
                           "+CREATED +REASON"));
  EXPECT_THAT(lines[1], MatchesRegex("bf-1 +RUNNING +orders +135/300 "
                                     "+12\\.3k/6000 input_rows "
                                     "+2025-03-01T12:34:56Z +late data"));
  // Reasons are cut to 40 characters, the cut marked with "...".
  EXPECT_THAT(lines[2],
              MatchesRegex("bf-22 +SUCCEEDED +daily_revenue +7/7 +0/0 input "
                           "rows +- +a very long reason that goes on and "
                           "o\\.\\.\\."));
  // Columns line up: STATE starts at the same column on every line.
  const size_t state_column = lines[0].find("STATE");
  EXPECT_EQ(lines[1].find("RUNNING"), state_column);
  EXPECT_EQ(lines[2].find("SUCCEEDED"), state_column);
}

TEST(FormatBackfillsTest, EmptyList) {
  EXPECT_EQ(FormatBackfills(v1::ListBackfillsResponse()), "no backfills\n");
}

// --------------------------------------------------------- FormatPartitions

TEST(ParsePartitionStateTest, AcceptsShortAndFullNamesRejectsOthers) {
  for (const char* text : {"failed", "FAILED", "partition_state_failed",
                           " PARTITION_STATE_FAILED "}) {
    absl::StatusOr<v1::PartitionState> state = ParsePartitionState(text);
    ASSERT_TRUE(state.ok()) << text << ": " << state.status();
    EXPECT_EQ(*state, v1::PARTITION_STATE_FAILED) << text;
  }
  EXPECT_EQ(*ParsePartitionState("unchanged"), v1::PARTITION_STATE_UNCHANGED);
  EXPECT_EQ(*ParsePartitionState("Skipped"), v1::PARTITION_STATE_SKIPPED);
  for (const char* text : {"", "unspecified", "queued", "nope"}) {
    EXPECT_EQ(ParsePartitionState(text).status().code(),
              absl::StatusCode::kInvalidArgument)
        << text;
  }
  EXPECT_EQ(PartitionStateName(v1::PARTITION_STATE_STAGED), "STAGED");
}

TEST(FormatPartitionsTest, OneRowPerPartitionAndACount) {
  v1::ListPartitionsResponse response;
  v1::BackfillPartition* done = response.add_partitions();
  done->set_dataset("daily_revenue");
  done->set_partition("2025-03-01");
  done->set_state(v1::PARTITION_STATE_PUBLISHED);
  done->set_attempts(1);
  done->set_rows_written(12);
  done->set_duration_seconds(0.25);
  done->mutable_update_time()->set_seconds(kMarch1At123456);
  done->set_reason("requested");
  v1::BackfillPartition* failed = response.add_partitions();
  failed->set_dataset("region_totals");
  failed->set_state(v1::PARTITION_STATE_FAILED);
  failed->set_attempts(3);
  failed->set_reason("downstream of daily_revenue via all");
  failed->set_last_error("no such table: \x1b[2Jdim_customers");
  const std::vector<std::string> lines = Lines(FormatPartitions(response));
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_THAT(lines[0], MatchesRegex("DATASET +PARTITION +STATE +ATTEMPTS "
                                     "+ROWS +SECONDS +UPDATED +REASON +ERROR"));
  EXPECT_THAT(lines[1], MatchesRegex("daily_revenue +2025-03-01 +PUBLISHED +1 "
                                     "+12 +0\\.25 +2025-03-01T12:34:56Z "
                                     "+requested +-"));
  EXPECT_THAT(lines[2], HasSubstr("(unpartitioned)"));
  EXPECT_THAT(lines[2], HasSubstr("FAILED"));
  EXPECT_THAT(lines[2], HasSubstr("no such table: \\x1b[2Jdim_customers"));
  EXPECT_EQ(lines[3], "2 partitions");
  EXPECT_EQ(FormatPartitions(v1::ListPartitionsResponse()), "no partitions\n");
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

// True when `text` holds a byte a terminal acts on: C0 controls other than
// the newlines that end lines, DEL, or the UTF-8 of a C1 control.
bool HasTerminalControl(const std::string& text) {
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if ((c < 0x20 && c != '\n') || c == 0x7f) return true;
    if (c == 0xc2 && i + 1 < text.size() &&
        static_cast<unsigned char>(text[i + 1]) >= 0x80 &&
        static_cast<unsigned char>(text[i + 1]) <= 0x9f) {
      return true;
    }
  }
  return false;
}

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
