// What a published version of a partition shows of its job's validation
// (core/governance/version_checks.h, and ExplainPartition over the
// in-memory store): the partition's own failing result; "passed" derived
// from a summary whose failing partitions were all kept; the summary alone
// when failures were left out (more than 100), for a failing partition that
// was not kept as for a passing one; results about the whole dataset; no
// results of another dataset; none for a rollback version or a job without
// results; each job's results read once. Expected results are written out
// by hand from the stored results.

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/governance/partition_history.h"
#include "core/governance/version_checks.h"
#include "core/model/pipeline_loader.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/memory_state_store.h"

namespace backfill {
namespace core_version_checks_test {
namespace {

using ::backfill::testing::InMemoryStateStore;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

// Every field of a result, in one line.
std::string Text(const CheckResult& r) {
  return absl::StrCat(r.dataset, "|", r.check, "|", r.kind, "|",
                      CheckSeverityName(r.severity), "|", r.partition, "|",
                      r.passed ? "passed" : "FAILED", "|",
                      r.summary ? "summary" : "-", "|", r.partitions_checked,
                      "/", r.partitions_failed, "|", r.observed, "|", r.allowed,
                      "|", r.message, "|", absl::StrJoin(r.samples, ";"));
}

std::vector<std::string> Texts(const std::vector<CheckResult>& results) {
  std::vector<std::string> out;
  for (const CheckResult& r : results) out.push_back(Text(r));
  return out;
}

CheckResult Summary(const std::string& dataset, const std::string& check,
                    CheckSeverity severity, int64_t checked, int64_t failed) {
  CheckResult r;
  r.check = check;
  r.kind = "row_change";
  r.severity = severity;
  r.dataset = dataset;
  r.summary = true;
  r.passed = failed == 0;
  r.partitions_checked = checked;
  r.partitions_failed = failed;
  r.observed = absl::StrCat(failed, " of ", checked, " partitions failed");
  r.allowed = "a change of at most 20%";
  r.message = absl::StrCat(check, " on ", dataset, ": ", r.observed);
  return r;
}

CheckResult Failure(const std::string& dataset, const std::string& check,
                    CheckSeverity severity, const std::string& partition) {
  CheckResult r;
  r.check = check;
  r.kind = "row_change";
  r.severity = severity;
  r.dataset = dataset;
  r.partition = partition;
  r.passed = false;
  r.observed = "120 rows, -60.0% vs 300 published";
  r.allowed = "a change of at most 20%";
  r.message = "the row count falls by 60%";
  r.samples = {"(ds='" + partition + "', n=1)", "(ds='" + partition + "')"};
  return r;
}

CheckResult Whole(const std::string& dataset, const std::string& check,
                  bool passed) {
  CheckResult r;
  r.check = check;
  r.kind = check;
  r.severity = CheckSeverity::kError;
  r.dataset = dataset;
  r.passed = passed;
  r.observed = passed ? "every staged key is unique" : "2 duplicate keys";
  r.allowed = "primary key (ds) unique and not NULL";
  r.message = passed ? "the primary key is unique" : "2 duplicate keys";
  if (!passed) r.samples = {"(ds='2025-01-01')"};
  return r;
}

// The result derived for `partition` from a complete summary of `check`.
std::string Passed(const std::string& dataset, const std::string& check,
                   const std::string& severity, const std::string& partition) {
  return absl::StrCat(dataset, "|", check, "|row_change|", severity, "|",
                      partition,
                      "|passed|-|0/0||a change of at most 20%|passed|");
}

TEST(VersionChecksTest, OwnFailureOrPassedFromACompleteSummary) {
  const std::vector<CheckResult> job = {
      Summary("daily", "row_change", CheckSeverity::kHold, 3, 1),
      Failure("daily", "row_change", CheckSeverity::kHold, "2025-01-02"),
  };
  EXPECT_THAT(Texts(VersionChecks(job, "daily", "2025-01-01")),
              ElementsAre(Passed("daily", "row_change", "hold", "2025-01-01")));
  // The failure as stored, its sample rows kept.
  EXPECT_THAT(
      Texts(VersionChecks(job, "daily", "2025-01-02")),
      ElementsAre("daily|row_change|row_change|hold|2025-01-02|FAILED|-|0/0|"
                  "120 rows, -60.0% vs 300 published|a change of at most "
                  "20%|the row count falls by 60%|(ds='2025-01-02', "
                  "n=1);(ds='2025-01-02')"));
}

TEST(VersionChecksTest, TruncatedFailuresLeaveTheSummaryForUnlistedOnes) {
  // 101 of 400 partitions failed; the job kept 100 of them (d001..d100).
  std::vector<CheckResult> job = {
      Summary("daily", "no_negative", CheckSeverity::kWarn, 400, 101)};
  for (int i = 1; i <= 100; ++i) {
    job.push_back(Failure("daily", "no_negative", CheckSeverity::kWarn,
                          absl::StrFormat("d%03d", i)));
  }
  const std::string summary =
      "daily|no_negative|row_change|warn||FAILED|summary|400/101|101 of 400 "
      "partitions failed|a change of at most 20%|no_negative on daily: 101 "
      "of 400 partitions failed|";
  // The 101st failing partition and a passing one: both unknown.
  EXPECT_THAT(Texts(VersionChecks(job, "daily", "d101")), ElementsAre(summary));
  EXPECT_THAT(Texts(VersionChecks(job, "daily", "d300")), ElementsAre(summary));
  // A kept failure is still the partition's own.
  const std::vector<CheckResult> d050 = VersionChecks(job, "daily", "d050");
  ASSERT_EQ(d050.size(), 1u);
  EXPECT_EQ(d050[0].partition, "d050");
  EXPECT_FALSE(d050[0].passed);
  EXPECT_FALSE(d050[0].summary);
  EXPECT_THAT(d050[0].samples, ElementsAre("(ds='d050', n=1)", "(ds='d050')"));
}

TEST(VersionChecksTest, ExactlyTheKeptMaximumIsComplete) {
  // 100 failed and 100 kept: every failure is known, the rest passed.
  std::vector<CheckResult> job = {
      Summary("daily", "row_change", CheckSeverity::kError, 150, 100)};
  for (int i = 1; i <= 100; ++i) {
    job.push_back(Failure("daily", "row_change", CheckSeverity::kError,
                          absl::StrFormat("d%03d", i)));
  }
  EXPECT_THAT(Texts(VersionChecks(job, "daily", "d120")),
              ElementsAre(Passed("daily", "row_change", "error", "d120")));
}

TEST(VersionChecksTest, WholeDatasetResultsKeptOtherDatasetsLeftOut) {
  const std::vector<CheckResult> job = {
      Summary("daily", "row_change", CheckSeverity::kHold, 2, 0),
      Summary("totals", "row_change", CheckSeverity::kHold, 2, 1),
      Whole("totals", "primary_key", false),
      Failure("totals", "row_change", CheckSeverity::kHold, "2025-01-01"),
      Whole("daily", "primary_key", true),
      Summary("daily", "min_rows", CheckSeverity::kWarn, 2, 1),
      Whole("daily", "schema", false),
      Failure("daily", "min_rows", CheckSeverity::kWarn, "2025-01-02"),
  };
  // In stored order: row_change, primary_key (whole), min_rows, schema
  // (whole); nothing of totals, though it failed on the same partition.
  EXPECT_THAT(
      Texts(VersionChecks(job, "daily", "2025-01-01")),
      ElementsAre(Passed("daily", "row_change", "hold", "2025-01-01"),
                  "daily|primary_key|primary_key|error||passed|-|0/0|every "
                  "staged key is unique|primary key (ds) unique and not "
                  "NULL|the primary key is unique|",
                  Passed("daily", "min_rows", "warn", "2025-01-01"),
                  "daily|schema|schema|error||FAILED|-|0/0|2 duplicate "
                  "keys|primary key (ds) unique and not NULL|2 duplicate "
                  "keys|(ds='2025-01-01')"));
  EXPECT_THAT(VersionChecks(job, "weekly", "2025-01-01"), IsEmpty());
  EXPECT_THAT(VersionChecks({}, "daily", "2025-01-01"), IsEmpty());
}

TEST(VersionChecksTest, NoPartitionCheckedLeavesTheSummary) {
  // A check that could not look at partitions (its referenced dataset is
  // unknown): 0 checked, and a failure about the whole dataset.
  CheckResult refs = Summary("daily", "refs", CheckSeverity::kError, 0, 0);
  CheckResult unknown = Whole("daily", "refs", false);
  const std::vector<CheckResult> got =
      VersionChecks({refs, unknown}, "daily", "2025-01-01");
  ASSERT_EQ(got.size(), 2u);
  EXPECT_TRUE(got[0].summary);
  EXPECT_EQ(got[0].partitions_checked, 0);
  EXPECT_EQ(got[0].partition, "");
  EXPECT_FALSE(got[1].summary);
  EXPECT_FALSE(got[1].passed);
  EXPECT_EQ(got[1].observed, "2 duplicate keys");
}

TEST(VersionChecksTest, UnpartitionedDatasetHasEachResultOnce) {
  // An unpartitioned dataset's one partition is "": its failure is stored
  // with partition "" and comes once, after the summary it belongs to.
  const std::vector<CheckResult> failed = {
      Summary("dim", "row_change", CheckSeverity::kWarn, 1, 1),
      Failure("dim", "row_change", CheckSeverity::kWarn, ""),
  };
  const std::vector<CheckResult> got = VersionChecks(failed, "dim", "");
  ASSERT_EQ(got.size(), 2u);
  EXPECT_TRUE(got[0].summary);
  EXPECT_EQ(got[0].partitions_failed, 1);
  EXPECT_FALSE(got[1].summary);
  EXPECT_FALSE(got[1].passed);
  EXPECT_EQ(got[1].samples.size(), 2u);

  const std::vector<CheckResult> passed = {
      Summary("dim", "row_change", CheckSeverity::kWarn, 1, 0)};
  EXPECT_THAT(Texts(VersionChecks(passed, "dim", "")),
              ElementsAre(Passed("dim", "row_change", "warn", "")));
}

// ---- ExplainPartition over the in-memory store ------------------------------

constexpr char kPipeline[] = R"yaml(datasets:
  - name: orders
    kind: source
    table: raw_orders
    partition: {column: order_date, grain: day}
  - name: daily
    kind: derived
    table: daily
    partition: {column: ds, grain: day}
    upstream:
      - {dataset: orders, mapping: identity}
    transform: "SELECT :partition AS ds, 1 AS n"
    contract: {columns: {ds: TEXT, n: INTEGER}}
)yaml";

// Counts the check results read, per job; GetLineage adds `extra_lineage`
// after what the store holds (two publish versions of one job).
class CountingStore : public InMemoryStateStore {
 public:
  absl::StatusOr<std::vector<CheckResult>> ListCheckResults(
      const std::string& job_id) override {
    ++reads[job_id];
    return InMemoryStateStore::ListCheckResults(job_id);
  }
  absl::StatusOr<std::vector<LineageRecord>> GetLineage(
      const std::string& dataset, const std::string& partition) override {
    absl::StatusOr<std::vector<LineageRecord>> lineage =
        InMemoryStateStore::GetLineage(dataset, partition);
    if (lineage.ok()) {
      lineage->insert(lineage->end(), extra_lineage.begin(),
                      extra_lineage.end());
    }
    return lineage;
  }
  std::map<std::string, int> reads;
  std::vector<LineageRecord> extra_lineage;
};

class ExplainChecksTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto catalog = LoadPipelineTexts({{"p.yaml", kPipeline}});
    ASSERT_TRUE(catalog.ok()) << catalog.status();
    catalog_ = *std::move(catalog);
  }

  absl::Time Now() { return absl::FromUnixSeconds(1700000000 + ++tick_); }

  // A job that publishes `partitions` of daily, with `checks` stored.
  std::string Publish(const std::vector<std::string>& partitions,
                      const std::vector<CheckResult>& checks) {
    Job job;
    job.request.dataset = "daily";
    job.request.reason = "test";
    DatasetPlan dp;
    dp.dataset = "daily";
    dp.partitions = partitions;
    job.plan.datasets = {dp};
    auto created = store_.CreateJob(job, Now());
    EXPECT_TRUE(created.ok()) << created.status();
    if (!created.ok()) return "";
    const std::string id = created->job.id;
    for (JobState s :
         {JobState::kRunning, JobState::kValidating, JobState::kPublishing}) {
      EXPECT_TRUE(store_.TransitionJob(id, std::nullopt, s, "", Now()).ok());
    }
    if (!checks.empty()) {
      EXPECT_TRUE(store_.ReplaceCheckResults(id, checks).ok());
    }
    const absl::Time at = Now();
    std::vector<LineageRecord> lineage;
    for (const std::string& p : partitions) {
      LineageRecord rec;
      rec.dataset = "daily";
      rec.partition = p;
      rec.job_id = id;
      rec.published_at = at;
      rec.output_fingerprint = "fp-" + id;
      rec.row_count = 1;
      lineage.push_back(rec);
    }
    EXPECT_TRUE(store_
                    .RecordPublication(id, lineage, JobState::kConfirming,
                                       "published", at)
                    .ok());
    EXPECT_TRUE(
        store_
            .TransitionJob(id, std::nullopt, JobState::kSucceeded, "ok", Now())
            .ok());
    return id;
  }

  void Rollback(const std::string& id,
                const std::vector<std::string>& partitions) {
    RollbackInfo info;
    info.requested_by = "erin";
    info.reason = "undo";
    info.at = Now();
    std::vector<LineageRecord> lineage;
    for (const std::string& p : partitions) {
      LineageRecord rec;
      rec.dataset = "daily";
      rec.partition = p;
      rec.job_id = id;
      rec.action = LineageAction::kRollback;
      rec.published_at = info.at;
      lineage.push_back(rec);
    }
    ASSERT_TRUE(
        store_.RecordRollback(id, info, lineage, "rolled back", "", info.at)
            .ok());
  }

  int tick_ = 0;
  Catalog catalog_;
  CountingStore store_;
};

TEST_F(ExplainChecksTest, EachPublishShowsItsJobsChecksRollbacksNone) {
  // bf-1: no check results (validation never stored any).
  const std::string first = Publish({"2025-01-01", "2025-01-02"}, {});
  // bf-2: row_change held 2025-01-02 only; a result of the whole dataset.
  const std::string second = Publish(
      {"2025-01-01", "2025-01-02"},
      {Summary("daily", "row_change", CheckSeverity::kHold, 2, 1),
       Whole("daily", "primary_key", true),
       Failure("daily", "row_change", CheckSeverity::kHold, "2025-01-02")});
  ASSERT_NO_FATAL_FAILURE(Rollback(second, {"2025-01-01", "2025-01-02"}));

  auto day1 = ExplainPartition(catalog_, store_, "daily", "2025-01-01");
  ASSERT_TRUE(day1.ok()) << day1.status();
  ASSERT_EQ(day1->versions.size(), 3u);
  // Newest first: the rollback of bf-2, bf-2's publish, bf-1's publish.
  EXPECT_EQ(day1->versions[0].record.action, LineageAction::kRollback);
  EXPECT_EQ(day1->versions[0].record.job_id, second);
  EXPECT_THAT(day1->versions[0].checks, IsEmpty());
  EXPECT_EQ(day1->versions[1].record.job_id, second);
  EXPECT_THAT(Texts(day1->versions[1].checks),
              ElementsAre(Passed("daily", "row_change", "hold", "2025-01-01"),
                          "daily|primary_key|primary_key|error||passed|-|0/0|"
                          "every staged key is unique|primary key (ds) "
                          "unique and not NULL|the primary key is unique|"));
  EXPECT_EQ(day1->versions[2].record.job_id, first);
  EXPECT_THAT(day1->versions[2].checks, IsEmpty());
  // bf-2 made two versions and was read once; bf-1 once.
  EXPECT_EQ(store_.reads,
            (std::map<std::string, int>{{first, 1}, {second, 1}}));

  store_.reads.clear();
  auto day2 = ExplainPartition(catalog_, store_, "daily", "2025-01-02");
  ASSERT_TRUE(day2.ok()) << day2.status();
  ASSERT_EQ(day2->versions.size(), 3u);
  ASSERT_EQ(day2->versions[1].checks.size(), 2u);
  const CheckResult& held = day2->versions[1].checks[0];
  EXPECT_EQ(held.partition, "2025-01-02");
  EXPECT_FALSE(held.passed);
  EXPECT_FALSE(held.summary);
  EXPECT_EQ(held.severity, CheckSeverity::kHold);
  EXPECT_EQ(held.observed, "120 rows, -60.0% vs 300 published");
  EXPECT_THAT(held.samples,
              ElementsAre("(ds='2025-01-02', n=1)", "(ds='2025-01-02')"));
  EXPECT_EQ(day2->versions[1].checks[1].check, "primary_key");
  EXPECT_EQ(store_.reads.size(), 2u);
  EXPECT_EQ(store_.reads[second], 1);
}

TEST_F(ExplainChecksTest, TwoPublishVersionsOfOneJobReadItsResultsOnce) {
  const std::string id =
      Publish({"2025-01-01"},
              {Summary("daily", "row_change", CheckSeverity::kWarn, 1, 0)});
  auto lineage = store_.InMemoryStateStore::GetLineage("daily", "2025-01-01");
  ASSERT_TRUE(lineage.ok()) << lineage.status();
  ASSERT_EQ(lineage->size(), 1u);
  store_.extra_lineage = {lineage->front()};
  auto history = ExplainPartition(catalog_, store_, "daily", "2025-01-01");
  ASSERT_TRUE(history.ok()) << history.status();
  ASSERT_EQ(history->versions.size(), 2u);
  for (const PartitionVersion& v : history->versions) {
    EXPECT_THAT(Texts(v.checks), ElementsAre(Passed("daily", "row_change",
                                                    "warn", "2025-01-01")));
  }
  EXPECT_EQ(store_.reads, (std::map<std::string, int>{{id, 1}}));
}

}  // namespace
}  // namespace core_version_checks_test
}  // namespace backfill
