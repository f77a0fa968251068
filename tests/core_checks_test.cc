// Tests of validation checks in the core, over the fake engine and the
// in-memory state store (no SQLite): the `checks:` keys of pipeline files
// and their load errors (file:line and the reason), each check unit's
// verdict on profiles the fake engine reports, the storage policy (one
// summary per check and dataset, at most 100 failing partitions each), and
// the severities in the job runner: error ends VALIDATION_FAILED, hold
// AWAITING_APPROVAL, warn publishes; results are stored with the job.

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/civil_time.h"
#include "absl/time/time.h"
#include "core/base/clock.h"
#include "core/model/check_result.h"
#include "core/model/pipeline_loader.h"
#include "core/plan/static_check.h"
#include "core/run/backfill_manager.h"
#include "core/run/crash_point.h"
#include "core/run/job_observer.h"
#include "core/run/validate_step.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/fake_engine.h"
#include "tests/testing/memory_state_store.h"

namespace backfill {
namespace core_checks_test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string PipelineWith(const std::string& checks,
                         const std::string& columns =
                             "{day: TEXT, region: TEXT, revenue: REAL, "
                             "customer_id: INTEGER}") {
  return absl::StrCat(R"yaml(datasets:
  - name: orders
    kind: source
    table: raw_orders
    partition: {column: day, grain: day}
  - name: customers
    kind: source
    table: dim_customers
    contract: {columns: {customer_id: INTEGER, region: TEXT}}
  - name: daily
    kind: derived
    partition: {column: day, grain: day}
    upstream:
      - {dataset: orders, mapping: identity}
      - {dataset: customers, mapping: all}
    transform: "SELECT day, region, revenue, customer_id FROM raw_orders WHERE day = :partition"
    contract:
      columns: )yaml",
                      columns, R"yaml(
      primary_key: [day, region]
    checks:
)yaml",
                      checks);
}

absl::StatusOr<Catalog> Load(const std::string& checks) {
  return LoadPipelineTexts({{"p.yaml", PipelineWith(checks)}});
}

// ---- Pipeline files
// ----------------------------------------------------------

TEST(CheckSpecTest, TheIssueExampleLoads) {
  absl::StatusOr<Catalog> catalog = Load(
      R"yaml(      - {kind: row_change, max_change: 20%}
      - {kind: min_rows, min: 1}
      - {kind: measure_change, column: revenue, max_change: 30%, severity: hold}
      - {kind: references, column: customer_id, dataset: customers, key: customer_id, max_orphans: 0}
      - {kind: not_null, columns: [region]}
      - {kind: assert, name: no_negative, sql: "SELECT * FROM daily WHERE revenue < 0", severity: warn}
)yaml");
  ASSERT_TRUE(catalog.ok()) << catalog.status();
  const DatasetSpec* d = catalog->Find("daily");
  ASSERT_EQ(d->checks.size(), 6u);
  EXPECT_EQ(d->checks[0].name, "row_change");
  EXPECT_DOUBLE_EQ(d->checks[0].max_change, 0.2);
  EXPECT_EQ(d->checks[0].severity, CheckSeverity::kError);
  EXPECT_EQ(d->checks[0].line, 21);
  EXPECT_EQ(d->checks[1].min, 1);
  EXPECT_EQ(d->checks[2].name, "measure_change(revenue)");
  EXPECT_EQ(d->checks[2].severity, CheckSeverity::kHold);
  EXPECT_EQ(d->checks[3].name, "references(customer_id)");
  EXPECT_EQ(d->checks[3].dataset, "customers");
  EXPECT_EQ(d->checks[4].columns, std::vector<std::string>{"region"});
  EXPECT_EQ(d->checks[5].name, "no_negative");
  EXPECT_EQ(d->checks[5].severity, CheckSeverity::kWarn);
  EXPECT_EQ(d->checks[5].sql, "SELECT * FROM daily WHERE revenue < 0");
  EXPECT_EQ(d->checks[2].text,
            "{kind: measure_change, column: revenue, max_change: 30%, "
            "severity: hold}");
}

struct BadSpec {
  std::string checks;
  std::string error;  // expected in the message after "p.yaml:<line>: "
  int line;
};

TEST(CheckSpecTest, BadSpecsAreLoadErrorsWithFileLineAndReason) {
  const std::vector<BadSpec> cases = {
      {"      - {kind: row_change, max_change: 20%, colour: red}\n",
       "unknown key \"colour\" in the row_change check of dataset \"daily\"",
       21},
      {"      - {kind: row_count, max_change: 20%}\n",
       "check kind \"row_count\" is not valid", 21},
      {"      - {kind: row_change, max_change: 20}\n",
       "`max_change` in the row_change check of dataset \"daily\" is \"20\"; "
       "expected a percentage",
       21},
      {"      - {kind: row_change, max_change: -5%}\n", "expected a percentage",
       21},
      {"      - {kind: row_change}\n", "missing `max_change:`", 21},
      {"      - {kind: min_rows, min: 1, max_change: 20%}\n",
       "unknown key \"max_change\" in the min_rows check", 21},
      {"      - {kind: min_rows, min: 1, severity: fatal}\n",
       "severity \"fatal\" is not valid; expected error, hold or warn", 21},
      {"      - {kind: not_null, columns: [regoin]}\n",
       "check \"not_null(regoin)\" (not_null): column \"regoin\" is not a "
       "contract column",
       21},
      {"      - {kind: not_null, columns: []}\n", "non-empty list", 21},
      {"      - {kind: measure_change, column: region, max_change: 5%}\n",
       "column \"region\" has type TEXT, which is not numeric", 21},
      {"      - {kind: references, column: customer_id, dataset: clients, "
       "key: customer_id}\n",
       "dataset \"clients\" is not a declared dataset", 21},
      {"      - {kind: references, column: customer_id, dataset: customers, "
       "key: id}\n",
       "key \"id\" is not a contract column of dataset \"customers\"", 21},
      {"      - {kind: references, column: customer_id, dataset: daily, key: "
       "day}\n",
       "a dataset cannot reference itself", 21},
      {"      - {kind: assert, sql: \"SELECT 1\"}\n", "missing `name:`", 21},
      {"      - {kind: assert, name: wipe, sql: \"DELETE FROM daily\"}\n",
       "must be one SELECT", 21},
      {"      - {kind: assert, name: p, sql: \"SELECT * FROM daily WHERE day = "
       ":day\"}\n",
       "the parameter :day", 21},
      {"      - {kind: min_rows, min: 1}\n      - {kind: min_rows, min: 2}\n",
       "a check of this name is already declared at line 21", 22},
      {"      - {kind: assert, name: \"no negative\", sql: \"SELECT 1\"}\n",
       "must be an identifier", 21},
  };
  for (const BadSpec& c : cases) {
    absl::StatusOr<Catalog> catalog = Load(c.checks);
    ASSERT_FALSE(catalog.ok()) << c.checks;
    EXPECT_EQ(catalog.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(catalog.status().message()),
                HasSubstr(absl::StrCat("p.yaml:", c.line, ": ")))
        << c.checks;
    EXPECT_THAT(std::string(catalog.status().message()), HasSubstr(c.error))
        << c.checks;
  }
}

TEST(CheckSpecTest, ChecksOnASourceAreRefused) {
  absl::StatusOr<Catalog> catalog = LoadPipelineTexts({{"s.yaml", R"yaml(
datasets:
  - name: orders
    kind: source
    checks:
      - {kind: min_rows, min: 1}
)yaml"}});
  ASSERT_FALSE(catalog.ok());
  EXPECT_THAT(std::string(catalog.status().message()),
              HasSubstr("s.yaml:6: dataset \"orders\": check \"min_rows\" "
                        "(min_rows): checks are only allowed on derived"));
}

// ---- Check units over the fake engine
// ----------------------------------------

class CheckUnitTest : public ::testing::Test {
 protected:
  // Prepares job bf-1 over `days` of daily, staging `staged[day]` rows
  // (1 when absent).
  void Stage(const std::string& checks, const std::vector<std::string>& days,
             std::map<std::string, int64_t> staged) {
    absl::StatusOr<Catalog> catalog = Load(checks);
    ASSERT_TRUE(catalog.ok()) << catalog.status();
    catalog_ = std::make_unique<Catalog>(*std::move(catalog));
    const DatasetSpec* daily = catalog_->Find("daily");
    layout_.job_id = "bf-1";
    layout_.items = {{daily, days}};
    layout_.pinned = {catalog_->Find("customers")};
    engine_.SetPublishedRows("customers", "", 40);
    ASSERT_TRUE(engine_.PrepareJob(layout_).ok());
    engine_.SetRowsFor([staged](const std::string&, const std::string& p) {
      auto it = staged.find(p);
      return it == staged.end() ? int64_t{1} : it->second;
    });
    tasks_.clear();
    for (const std::string& day : days) {
      absl::StatusOr<StageResult> r =
          engine_.StagePartition("bf-1", *daily, day, {});
      ASSERT_TRUE(r.ok()) << r.status();
      PartitionTask t;
      t.job_id = "bf-1";
      t.dataset = "daily";
      t.partition = day;
      t.state = TaskState::kStaged;
      t.rows_written = r->rows_written;
      tasks_.push_back(t);
    }
  }

  ValidationOutcome Validate() {
    ValidateOptions options;
    options.catalog = catalog_.get();
    absl::StatusOr<ValidationOutcome> out =
        ValidateStaging(&engine_, layout_, tasks_, options);
    EXPECT_TRUE(out.ok()) << out.status();
    return out.value_or(ValidationOutcome{});
  }

  // The results of one check, summary first.
  static std::vector<CheckResult> Of(const ValidationOutcome& out,
                                     const std::string& check) {
    std::vector<CheckResult> results;
    for (const CheckResult& r : out.results) {
      if (r.check == check) results.push_back(r);
    }
    return results;
  }

  testing::FakeEngine engine_;
  std::unique_ptr<Catalog> catalog_;
  JobLayout layout_;
  std::vector<PartitionTask> tasks_;
};

TEST_F(CheckUnitTest, RowChangeFailsBeyondTheLimitAndPassesNewPartitions) {
  engine_.SetPublishedRows("daily", "2025-01-01", 10);
  engine_.SetPublishedRows("daily", "2025-01-02", 10);
  // 01: 10 -> 8 (-20%, allowed); 02: 10 -> 7 (-30%); 03: new.
  ASSERT_NO_FATAL_FAILURE(
      Stage("      - {kind: row_change, max_change: 20%}\n",
            {"2025-01-01", "2025-01-02", "2025-01-03"},
            {{"2025-01-01", 8}, {"2025-01-02", 7}, {"2025-01-03", 5}}));
  ValidationOutcome out = Validate();
  std::vector<CheckResult> rc = Of(out, "row_change");
  ASSERT_EQ(rc.size(), 2u);
  EXPECT_TRUE(rc[0].summary);
  EXPECT_EQ(rc[0].partitions_checked, 3);
  EXPECT_EQ(rc[0].partitions_failed, 1);
  EXPECT_FALSE(rc[1].passed);
  EXPECT_EQ(rc[1].partition, "2025-01-02");
  EXPECT_EQ(rc[1].observed, "7 rows, -30.0% vs 10 published");
  ASSERT_EQ(out.failures.size(), 1u);
  EXPECT_THAT(out.failures[0], HasSubstr("row_change on daily 2025-01-02"));
}

TEST_F(CheckUnitTest, MinRowsNamesTheShortPartition) {
  ASSERT_NO_FATAL_FAILURE(Stage("      - {kind: min_rows, min: 3}\n",
                                {"2025-01-01", "2025-01-02"},
                                {{"2025-01-01", 3}, {"2025-01-02", 0}}));
  ValidationOutcome out = Validate();
  std::vector<CheckResult> r = Of(out, "min_rows");
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[1].partition, "2025-01-02");
  EXPECT_EQ(r[1].observed, "0 rows");
  EXPECT_EQ(r[1].allowed, "at least 3 rows per partition");
}

TEST_F(CheckUnitTest, MeasureChangePerPartitionAndOverTheJob) {
  const std::string checks =
      "      - {kind: measure_change, column: revenue, max_change: 30%}\n";
  // Published: 10 rows of revenue 1 on each day (the fake's default sums).
  engine_.SetPublishedRows("daily", "2025-01-01", 10);
  engine_.SetPublishedRows("daily", "2025-01-02", 10);
  engine_.SetMeasureFor(
      [](const std::string&, const std::string& p, const std::string&) {
        return p == "2025-01-02" ? 1.5 : 1.0;  // +50% on the 2nd
      });
  ASSERT_NO_FATAL_FAILURE(Stage(checks, {"2025-01-01", "2025-01-02"},
                                {{"2025-01-01", 10}, {"2025-01-02", 10}}));
  ValidationOutcome out = Validate();
  std::vector<CheckResult> r = Of(out, "measure_change(revenue)");
  // Summary, job total (20 -> 25: +25%, passes), the failing day.
  ASSERT_EQ(r.size(), 3u);
  EXPECT_TRUE(r[1].passed);
  EXPECT_EQ(r[1].partition, "");
  EXPECT_THAT(r[1].observed, HasSubstr("20 -> 25 (+25.0%)"));
  EXPECT_FALSE(r[2].passed);
  EXPECT_EQ(r[2].partition, "2025-01-02");
  EXPECT_EQ(r[2].observed, "SUM(revenue) 10 -> 15 (+50.0%)");
}

TEST_F(CheckUnitTest, ReferencesAndNotNullReadTheProfile) {
  engine_.SetProfileEdit(
      [](const std::string&, const std::string& p, PartitionProfile* profile) {
        if (p != "2025-01-02") return;
        profile->mutable_orphans()[0] = {
            2, {"(customer_id=99)", "(customer_id=98)"}};
        profile->mutable_nulls()["region"] = {1, {"(region=NULL)"}};
      });
  ASSERT_NO_FATAL_FAILURE(Stage(
      "      - {kind: references, column: customer_id, dataset: customers, "
      "key: customer_id, max_orphans: 1}\n"
      "      - {kind: not_null, columns: [region], severity: warn}\n",
      {"2025-01-01", "2025-01-02"}, {{"2025-01-01", 4}, {"2025-01-02", 4}}));
  ValidationOutcome out = Validate();
  std::vector<CheckResult> refs = Of(out, "references(customer_id)");
  ASSERT_EQ(refs.size(), 2u);
  EXPECT_EQ(refs[1].partition, "2025-01-02");
  EXPECT_EQ(refs[1].samples.size(), 2u);
  EXPECT_THAT(refs[1].message, HasSubstr("2 rows of 4"));
  std::vector<CheckResult> nn = Of(out, "not_null(region)");
  ASSERT_EQ(nn.size(), 2u);
  EXPECT_EQ(nn[1].severity, CheckSeverity::kWarn);
  EXPECT_EQ(out.warnings.size(), 1u);
  EXPECT_EQ(out.failures.size(), 1u);
}

TEST_F(CheckUnitTest, AssertFailsWherePartitionsReturnRows) {
  engine_.SetAssertionRows(
      [](const std::string&, const std::string& sql, const std::string& p) {
        return sql == "SELECT 1 FROM daily" && p == "2025-01-01" ? 5 : 0;
      });
  ASSERT_NO_FATAL_FAILURE(
      Stage("      - {kind: assert, name: none, sql: \"SELECT 1 FROM daily\", "
            "severity: hold}\n",
            {"2025-01-01", "2025-01-02"}, {}));
  ValidationOutcome out = Validate();
  std::vector<CheckResult> r = Of(out, "none");
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[1].observed, "5 rows returned");
  EXPECT_EQ(r[1].samples.size(), 3u);  // at most kMaxSampleRows
  EXPECT_TRUE(out.failures.empty());
  ASSERT_EQ(out.holds.size(), 1u);
}

TEST_F(CheckUnitTest, SchemaDriftNamesTheColumns) {
  ASSERT_NO_FATAL_FAILURE(Stage("", {"2025-01-01"}, {}));
  const DatasetSpec* daily = catalog_->Find("daily");
  QueryShape extra;
  extra.columns = {"day", "region", "revenue", "customer_id", "bonus"};
  engine_.SetQueryShape(daily->transform, extra);
  engine_.SetPublishedColumns("daily", {{"day", "TEXT"},
                                        {"region", "TEXT"},
                                        {"revenue", "INTEGER"},
                                        {"customer", "INTEGER"}});
  engine_.SetProfileEdit(
      [](const std::string&, const std::string&, PartitionProfile* p) {
        p->mutable_type_mismatches()["revenue"] = {1, {"(revenue='n/a')"}};
      });
  ValidationOutcome out = Validate();
  const std::string all = absl::StrJoin(out.failures, "\n");
  EXPECT_THAT(all, HasSubstr("not in the contract: \"bonus\""));
  EXPECT_THAT(all, HasSubstr("instead of contract column \"customer_id\""));
  EXPECT_THAT(all, HasSubstr("\"revenue\" is INTEGER, the contract says REAL"));
  EXPECT_THAT(all, HasSubstr("1 row with a revenue value that is not REAL"));
}

TEST_F(CheckUnitTest, StoredResultsAreBoundedPerCheck) {
  std::vector<std::string> days;
  std::map<std::string, int64_t> staged;
  for (int i = 0; i < 150; ++i) {
    const std::string day =
        absl::FormatCivilTime(absl::CivilDay(2025, 1, 1) + i);
    days.push_back(day);
    staged[day] = 0;
  }
  ASSERT_NO_FATAL_FAILURE(
      Stage("      - {kind: min_rows, min: 1}\n", days, staged));
  ValidationOutcome out = Validate();
  std::vector<CheckResult> r = Of(out, "min_rows");
  ASSERT_EQ(r.size(), 1u + kMaxFailedResultsPerCheck);
  EXPECT_EQ(r[0].partitions_failed, 150);
  // The report shows 5 and counts the rest, stored or not.
  ASSERT_EQ(out.failures.size(), 6u);
  EXPECT_EQ(out.failures.back(), "and 145 more");
  // Passing checks store one summary each, however many partitions.
  EXPECT_EQ(Of(out, "schema").size(), 2u);  // summary + transform columns
}

// ---- Static check
// --------------------------------------------------------------

TEST(StaticCheckTest, ProblemsNameFileLineAndDataset) {
  absl::StatusOr<Catalog> catalog =
      Load("      - {kind: assert, name: a, sql: \"SELECT x FROM daily\"}\n");
  ASSERT_TRUE(catalog.ok()) << catalog.status();
  testing::FakeEngine engine;
  const DatasetSpec* daily = catalog->Find("daily");
  engine.SetQueryShape(daily->transform,
                       absl::InvalidArgumentError("no such column: revenue"));
  QueryShape writes;
  writes.read_only = false;
  writes.parameters = {":day"};
  engine.SetQueryShape("SELECT x FROM daily", writes);
  absl::StatusOr<std::vector<std::string>> problems =
      CheckPipelineSql(*catalog, &engine);
  ASSERT_TRUE(problems.ok()) << problems.status();
  ASSERT_EQ(problems->size(), 3u);
  EXPECT_EQ((*problems)[0],
            "p.yaml:16: dataset \"daily\": the transform does not compile: no "
            "such column: revenue");
  EXPECT_THAT((*problems)[1], HasSubstr("p.yaml:21: dataset \"daily\": check "
                                        "\"a\": the assertion is not a "
                                        "read-only SELECT"));
  EXPECT_THAT((*problems)[2], HasSubstr("the parameter :day"));
  // An unavailable warehouse is an error, not a problem of the pipeline.
  engine.SetHook([](const testing::FakeEngine::Call& call) {
    return call.method == "DescribeQuery"
               ? absl::UnavailableError("warehouse busy")
               : absl::OkStatus();
  });
  EXPECT_EQ(CheckPipelineSql(*catalog, &engine).status().code(),
            absl::StatusCode::kUnavailable);
}

// ---- Severities in the runner
// --------------------------------------------------

// Each failed check the runner reports, with the state the store records
// for the job at that moment ("min_rows VALIDATION_FAILED").
class CheckFailuresObserver : public JobObserver {
 public:
  explicit CheckFailuresObserver(StateStore* store) : store_(store) {}
  void OnJobTransition(const std::string& job_id, JobState, JobState,
                       const std::string&) override {
    absl::MutexLock lock(&mu_);
    job_id_ = job_id;
  }
  void OnCheckFailed(const std::string&, const std::string& kind,
                     CheckSeverity) override {
    std::string id;
    {
      absl::MutexLock lock(&mu_);
      id = job_id_;
    }
    absl::StatusOr<Job> job = store_->GetJob(id);
    absl::MutexLock lock(&mu_);
    reports_.push_back(absl::StrCat(
        kind, " ", job.ok() ? JobStateName(job->state) : "no job"));
  }
  std::vector<std::string> reports() {
    absl::MutexLock lock(&mu_);
    return reports_;
  }

 private:
  StateStore* store_;
  absl::Mutex mu_;
  std::string job_id_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> reports_ ABSL_GUARDED_BY(mu_);
};

class SeverityTest : public ::testing::Test {
 protected:
  void Start(const std::string& checks) {
    absl::StatusOr<Catalog> catalog = Load(checks);
    ASSERT_TRUE(catalog.ok()) << catalog.status();
    catalog_ = std::make_unique<Catalog>(*std::move(catalog));
    engine_.SetPublishedRows("customers", "", 40);
    ManagerOptions options;
    options.retry_backoff = absl::ZeroDuration();
    manager_ = std::make_unique<BackfillManager>(
        catalog_.get(), &store_, &engine_, &clock_, &observer_, options);
    ASSERT_TRUE(manager_->Start().ok());
  }

  Job RunToEnd(const std::string& from, const std::string& to) {
    BackfillRequest r;
    r.dataset = "daily";
    r.from = from;
    r.to = to;
    r.reason = "test";
    absl::StatusOr<SubmitResult> submitted =
        manager_->Submit(r, SubmitOptions{});
    EXPECT_TRUE(submitted.ok()) << submitted.status();
    uint64_t version = 0;
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (absl::Now() < deadline) {
      absl::StatusOr<Job> job = manager_->WaitForChange(
          submitted->job.id, &version, absl::Now() + absl::Milliseconds(200));
      if (job.ok() && (IsTerminal(job->state) ||
                       job->state == JobState::kAwaitingApproval)) {
        return *manager_->GetJob(submitted->job.id);
      }
    }
    ADD_FAILURE() << "job did not end";
    return Job{};
  }

  testing::FakeEngine engine_;
  testing::InMemoryStateStore store_;
  CheckFailuresObserver observer_{&store_};
  SystemClock clock_;
  std::unique_ptr<Catalog> catalog_;
  std::unique_ptr<BackfillManager> manager_;
};

// A failed check is counted once the state that follows from it is
// recorded, never while the job is still VALIDATING (a validation
// interrupted there runs again after a restart and would count twice).
TEST_F(SeverityTest, FailedChecksAreReportedOnceTheirOutcomeIsRecorded) {
  struct Case {
    const char* severity;
    const char* state;
  };
  for (const Case& c :
       {Case{"error", "VALIDATION_FAILED"}, Case{"hold", "AWAITING_APPROVAL"},
        Case{"warn", "PUBLISHING"}}) {
    SCOPED_TRACE(c.severity);
    if (manager_) manager_->Shutdown();
    manager_.reset();
    ASSERT_NO_FATAL_FAILURE(Start(absl::StrCat(
        "      - {kind: min_rows, min: 2, severity: ", c.severity, "}\n")));
    const size_t before = observer_.reports().size();
    RunToEnd("2025-01-01", "2025-01-02");
    // The runner reports after it records the state a waiter sees; its
    // worker has reported by the time Shutdown has joined it.
    manager_->Shutdown();
    std::vector<std::string> reports = observer_.reports();
    reports.erase(reports.begin(), reports.begin() + before);
    EXPECT_THAT(reports,
                ::testing::ElementsAre(absl::StrCat("min_rows ", c.state)));
  }
}

TEST_F(SeverityTest, ErrorFailsValidationAndPublishesNothing) {
  ASSERT_NO_FATAL_FAILURE(Start("      - {kind: min_rows, min: 2}\n"));
  Job job = RunToEnd("2025-01-01", "2025-01-03");
  EXPECT_EQ(job.state, JobState::kValidationFailed);
  EXPECT_THAT(job.message, HasSubstr("min_rows on daily 2025-01-01"));
  EXPECT_THAT(job.message, HasSubstr("min_rows on daily 2025-01-02"));
  EXPECT_EQ(engine_.PublishedRows("daily", "2025-01-01"), 0);
  EXPECT_FALSE(job.checks.empty());
}

TEST_F(SeverityTest, HoldWaitsForApprovalWithItsResultsStored) {
  ASSERT_NO_FATAL_FAILURE(
      Start("      - {kind: min_rows, min: 2, severity: hold}\n"));
  Job job = RunToEnd("2025-01-01", "2025-01-02");
  EXPECT_EQ(job.state, JobState::kAwaitingApproval);
  EXPECT_THAT(job.message, HasSubstr("min_rows on daily 2025-01-01"));
  EXPECT_EQ(engine_.PublishedRows("daily", "2025-01-01"), 0);
  EXPECT_TRUE(engine_.StagedRows(job.id, "daily", "2025-01-01").has_value());
  absl::StatusOr<std::vector<CheckResult>> stored =
      store_.ListCheckResults(job.id);
  ASSERT_TRUE(stored.ok());
  bool held = false;
  for (const CheckResult& r : *stored) {
    held |= !r.passed && r.severity == CheckSeverity::kHold;
  }
  EXPECT_TRUE(held);
  // Cancelling it drops its staging (the runner does so as the job ends,
  // after Cancel has answered).
  absl::StatusOr<Job> cancelled = manager_->Cancel(job.id, "no");
  ASSERT_TRUE(cancelled.ok()) << cancelled.status();
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (engine_.StagedRows(job.id, "daily", "2025-01-01").has_value() &&
         absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(2));
  }
  EXPECT_FALSE(engine_.StagedRows(job.id, "daily", "2025-01-01").has_value());
}

TEST_F(SeverityTest, ACancelWhileTheHoldingWorkerStillPinsTheJobEndsIt) {
  // The operator cancels the moment the job is held, before the worker that
  // held it has let go: whichever of them is last must drop the staging and
  // forget the job.
  ASSERT_NO_FATAL_FAILURE(
      Start("      - {kind: min_rows, min: 2, severity: hold}\n"));
  absl::Notification submitted;
  absl::Notification cancel_answered;
  std::string id;
  absl::StatusOr<Job> cancelled = absl::UnknownError("never cancelled");
  SetCrashPointHookForTest([&](std::string_view point) {
    if (point != "hold.before_release") return;
    ASSERT_TRUE(submitted.WaitForNotificationWithTimeout(absl::Seconds(30)));
    cancelled = manager_->Cancel(id, "at once");
    cancel_answered.Notify();
  });
  struct Unhook {
    ~Unhook() { SetCrashPointHookForTest(nullptr); }
  } unhook;
  BackfillRequest r;
  r.dataset = "daily";
  r.from = "2025-01-01";
  r.to = "2025-01-02";
  r.reason = "race";
  absl::StatusOr<SubmitResult> result = manager_->Submit(r, SubmitOptions{});
  ASSERT_TRUE(result.ok()) << result.status();
  id = result->job.id;
  submitted.Notify();
  ASSERT_TRUE(
      cancel_answered.WaitForNotificationWithTimeout(absl::Seconds(30)));
  ASSERT_TRUE(cancelled.ok()) << cancelled.status();
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (engine_.StagedRows(id, "daily", "2025-01-01").has_value()) {
    ASSERT_LT(absl::Now(), deadline)
        << "the staging of cancelled job " << id << " was never dropped";
    absl::SleepFor(absl::Milliseconds(2));
  }
  EXPECT_EQ(cancelled->state, JobState::kCancelled);
  absl::StatusOr<Job> stored = manager_->GetJob(id);
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(stored->state, JobState::kCancelled);
  EXPECT_EQ(engine_.PublishedRows("daily", "2025-01-01"), 0);
}

TEST_F(SeverityTest, WarnPublishesAndRecordsTheWarning) {
  ASSERT_NO_FATAL_FAILURE(
      Start("      - {kind: min_rows, min: 2, severity: warn}\n"));
  Job job = RunToEnd("2025-01-01", "2025-01-02");
  EXPECT_EQ(job.state, JobState::kSucceeded);
  EXPECT_EQ(engine_.PublishedRows("daily", "2025-01-01"), 1);
  bool warned = false;
  for (const CheckResult& r : job.checks) {
    warned |= !r.passed && r.severity == CheckSeverity::kWarn &&
              r.partition == "2025-01-01";
  }
  EXPECT_TRUE(warned);
  // The audit log keeps the warning with the move to PUBLISHING.
  absl::StatusOr<std::vector<AuditEvent>> audit =
      store_.ListAuditEvents(job.id);
  ASSERT_TRUE(audit.ok());
  bool logged = false;
  for (const AuditEvent& e : *audit) {
    logged |= e.to_state == "PUBLISHING" &&
              absl::StrContains(e.message, "warnings: min_rows");
  }
  EXPECT_TRUE(logged);
}

TEST_F(SeverityTest, ARevalidationReplacesTheResults) {
  ASSERT_NO_FATAL_FAILURE(Start(""));
  Job job = RunToEnd("2025-01-01", "2025-01-02");
  ASSERT_EQ(job.state, JobState::kSucceeded);
  const size_t n = job.checks.size();
  ASSERT_GT(n, 0u);
  ASSERT_TRUE(store_.ReplaceCheckResults(job.id, job.checks).ok());
  ASSERT_TRUE(store_.ReplaceCheckResults(job.id, job.checks).ok());
  EXPECT_EQ(store_.ListCheckResults(job.id)->size(), n);
  EXPECT_EQ(store_.ReplaceCheckResults("bf-99", {}).code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace core_checks_test
}  // namespace backfill
