// Unit tests of the backfillctl renderings (client/cli_format.h) of plans
// and jobs: the plan with its costs, reasons, frozen partitions, conflicts
// and keys; the datasets; one job; the lists of jobs and partitions.
// Expectations are written from the formats documented in the headers and
// the proto contract, not from the implementation.

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
namespace client_cli_plan_format_test {
namespace {

using namespace ::backfill::cli::format_testing;  // NOLINT: test samples
using ::testing::Contains;
using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::MatchesRegex;
using ::testing::Not;
using ::testing::StartsWith;

// -------------------------------------------------------------- FormatPlan

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

// The basic view (a submit's answer for a large job, or status of a job too
// large to receive whole) leaves the lists out: the plan's line shows the
// count the server kept, not an empty list.
TEST(FormatBackfillTest, TheBasicViewShowsThePlannedCounts) {
  v1::Backfill job = RunningJob();
  job.set_view(v1::BACKFILL_VIEW_BASIC);
  job.mutable_plan(0)->clear_partitions();
  job.mutable_plan(0)->set_partition_count(1000000);
  EXPECT_EQ(ValueOf(FormatBackfill(job), "  orders"),
            "1000000 partitions  (not listed)  requested");
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

}  // namespace
}  // namespace client_cli_plan_format_test
}  // namespace cli
}  // namespace backfill
