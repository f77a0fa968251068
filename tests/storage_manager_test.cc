// BackfillManager over the real SQLite state store and warehouse engine:
// the playbook end to end in-process — recompute, validate, publish
// atomically, lineage — plus idempotency, conflicts, cancel, failures and
// resuming after a restart. Expectations are computed with plain SQL over
// the raw tables, independently of the service.

#include <sqlite3.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "core/model/pipeline_loader.h"
#include "core/run/backfill_manager.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/sqlite/sqlite_engine.h"
#include "storage/sqlite/state/sqlite_state_store.h"
#include "tests/testing/forwarding_engine.h"
#include "tests/testing/revenue_pipeline.h"

namespace backfill {
namespace storage_manager_test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// Datasets beyond the documented example pipeline: a dependent of
// daily_revenue, and two transforms that are wrong on purpose.
std::string MoreDatasets() {
  return fixtures::RevenueDependentsYaml() + R"yaml(  - name: dup_keys
    kind: derived
    table: dup_keys
    partition: {column: ds, grain: day}
    upstream:
      - {dataset: orders, mapping: identity}
    transform: |
      SELECT order_date AS ds, 'x' AS k FROM raw_orders
      WHERE order_date >= :partition_start AND order_date < :partition_end
    contract:
      columns: {ds: TEXT, k: TEXT}
      primary_key: [ds, k]
)yaml";
}

std::string Pipeline() {
  return fixtures::RevenuePipelineYaml(
      "", MoreDatasets() + fixtures::OutOfPartitionDatasetYaml("broken"));
}

// Runs SQL on the warehouse file directly (never through the engine).
class RawDb {
 public:
  explicit RawDb(const std::string& path) {
    EXPECT_EQ(sqlite3_open(path.c_str(), &db_), SQLITE_OK);
    sqlite3_busy_timeout(db_, 10000);
  }
  ~RawDb() { sqlite3_close(db_); }
  void Exec(const std::string& sql) {
    char* err = nullptr;
    ASSERT_EQ(sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err), SQLITE_OK)
        << (err ? err : "") << " in " << sql;
  }
  // Rows as "a|b|c" strings, in the query's order.
  std::vector<std::string> Rows(const std::string& sql) {
    std::vector<std::string> out;
    sqlite3_stmt* st = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db_, sql.c_str(), -1, &st, nullptr), SQLITE_OK)
        << sqlite3_errmsg(db_) << " in " << sql;
    while (st != nullptr && sqlite3_step(st) == SQLITE_ROW) {
      std::string row;
      for (int i = 0; i < sqlite3_column_count(st); ++i) {
        if (i) row += "|";
        const unsigned char* t = sqlite3_column_text(st, i);
        row += t ? reinterpret_cast<const char*>(t) : "NULL";
      }
      out.push_back(row);
    }
    sqlite3_finalize(st);
    return out;
  }
  int64_t Count(const std::string& sql) {
    std::vector<std::string> rows = Rows(sql);
    return rows.empty() ? -1 : std::stoll(rows[0]);
  }

 private:
  sqlite3* db_ = nullptr;
};

// An engine whose StagePartition can be held back, to observe running jobs.
class GatedEngine : public testing::ForwardingEngine {
 public:
  explicit GatedEngine(Engine* inner) : ForwardingEngine(inner) {}
  void Close() {
    absl::MutexLock l(&mu_);
    open_ = false;
  }
  void Open() {
    absl::MutexLock l(&mu_);
    open_ = true;
  }
  // Lets `n` more partitions through while closed.
  void Allow(int n) {
    absl::MutexLock l(&mu_);
    allowance_ += n;
  }
  int staged() const { return staged_.load(); }

  absl::StatusOr<StageResult> StagePartition(
      const std::string& job, const DatasetSpec& d, const std::string& p,
      const std::vector<InputRef>& in) override {
    {
      absl::MutexLock l(&mu_);
      mu_.Await(absl::Condition(
          +[](GatedEngine* e) ABSL_NO_THREAD_SAFETY_ANALYSIS {
            return e->open_ || e->allowance_ > 0;
          },
          this));
      if (!open_) --allowance_;
    }
    auto r = inner()->StagePartition(job, d, p, in);
    if (r.ok()) ++staged_;
    return r;
  }
  // Runs `fn` just before the next validation (before every one with
  // `every`).
  void BeforeValidate(std::function<void()> fn, bool every = false) {
    absl::MutexLock l(&mu_);
    before_validate_ = std::move(fn);
    every_validate_ = every;
  }
  void FailDropStaging(bool fail) { fail_drop_ = fail; }

  absl::StatusOr<ValidationReport> ValidateStaged(
      const std::string& job, const DatasetSpec& d) override {
    std::function<void()> fn;
    {
      absl::MutexLock l(&mu_);
      fn = before_validate_;
      if (!every_validate_) before_validate_ = nullptr;
    }
    if (fn) fn();
    return inner()->ValidateStaged(job, d);
  }
  absl::Status DropStaging(const std::string& job) override {
    if (fail_drop_) return absl::UnavailableError("database is locked");
    return inner()->DropStaging(job);
  }

 private:
  absl::Mutex mu_;
  bool open_ ABSL_GUARDED_BY(mu_) = true;
  std::function<void()> before_validate_ ABSL_GUARDED_BY(mu_);
  bool every_validate_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<bool> fail_drop_{false};
  int allowance_ ABSL_GUARDED_BY(mu_) = 0;
  std::atomic<int> staged_{0};
};

class ManagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           absl::StrCat(
               "bf_manager_test_", getpid(), "_",
               ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    warehouse_path_ = (dir_ / "warehouse.db").string();
    {
      RawDb raw(warehouse_path_);
      raw.Exec(
          "CREATE TABLE raw_orders(order_id INTEGER PRIMARY KEY, order_date "
          "TEXT, customer_id INTEGER, amount REAL, refund REAL);"
          "CREATE TABLE dim_customers(customer_id INTEGER PRIMARY KEY, "
          "region TEXT);");
      raw.Exec(
          "INSERT INTO dim_customers SELECT value, CASE value % 3 WHEN 0 "
          "THEN 'north' WHEN 1 THEN 'south' ELSE 'west' END FROM "
          "(WITH RECURSIVE s(value) AS (SELECT 1 UNION ALL SELECT value + 1 "
          "FROM s WHERE value < 30) SELECT value FROM s);");
      // 20 days of January, 40 orders a day; refunds on some.
      raw.Exec(
          "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n "
          "WHERE i < 799) INSERT INTO raw_orders(order_date, customer_id, "
          "amount, refund) SELECT date('2025-01-01', '+' || (i / 40) || ' "
          "days'), 1 + (i * 7) % 30, 10 + (i % 13), CASE WHEN i % 5 = 0 "
          "THEN 2.5 ELSE 0 END FROM n;");
    }
    auto catalog = LoadPipelineTexts({{"test.yaml", Pipeline()}});
    ASSERT_TRUE(catalog.ok()) << catalog.status();
    catalog_ = *std::move(catalog);
    OpenStorage();
    StartManager();
  }

  void TearDown() override {
    manager_.reset();
    gate_.reset();
    engine_.reset();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }

  void OpenStorage() {
    auto store = SqliteStateStore::Open((dir_ / "state.db").string());
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    auto engine = SqliteEngine::Open(warehouse_path_, 3);
    ASSERT_TRUE(engine.ok()) << engine.status();
    engine_ = *std::move(engine);
    gate_ = std::make_unique<GatedEngine>(engine_.get());
  }

  void StartManager(int workers = 2) {
    ManagerOptions options;
    options.workers = workers;
    options.retry_backoff = absl::Milliseconds(1);
    manager_ = std::make_unique<BackfillManager>(
        &catalog_, store_.get(), gate_.get(), &clock_, nullptr, options);
    ASSERT_TRUE(manager_->Start().ok());
  }

  BackfillRequest Request(const std::string& dataset, const std::string& from,
                          const std::string& to) {
    BackfillRequest r;
    r.dataset = dataset;
    r.from = from;
    r.to = to;
    r.reason = "test";
    r.requested_by = "tester";
    return r;
  }

  Job WaitTerminal(const std::string& id) {
    uint64_t version = 0;
    const absl::Time give_up = absl::Now() + absl::Seconds(60);
    while (absl::Now() < give_up) {
      auto job =
          manager_->WaitForChange(id, &version, absl::Now() + absl::Seconds(1));
      EXPECT_TRUE(job.ok()) << job.status();
      if (!job.ok()) return Job{};
      if (IsTerminal(job->state)) return *job;
    }
    ADD_FAILURE() << "job " << id << " did not finish";
    return Job{};
  }

  // Waits until the store shows at least `n` staged partitions.
  void WaitStaged(const std::string& id, int64_t n) {
    const absl::Time give_up = absl::Now() + absl::Seconds(30);
    while (absl::Now() < give_up) {
      auto job = manager_->GetJob(id);
      if (job.ok() && job->counts.staged >= n) return;
      absl::SleepFor(absl::Milliseconds(5));
    }
    ADD_FAILURE() << "fewer than " << n << " partitions staged";
  }

  // Submits 20 days of daily_revenue, lets `staged` partitions through,
  // then stops the manager while the rest are pending (as a restart would).
  void StopWhileRunning(int staged, std::string* id) {
    gate_->Close();
    BackfillRequest r = Request("daily_revenue", "2025-01-01", "2025-01-21");
    r.exclude_downstream = true;
    auto a = manager_->Submit(r, SubmitOptions{});
    ASSERT_TRUE(a.ok()) << a.status();
    *id = a->job.id;
    gate_->Allow(staged);
    WaitStaged(*id, staged);
    std::thread opener([this] {
      absl::SleepFor(absl::Milliseconds(50));
      gate_->Open();
    });
    manager_->Shutdown();
    opener.join();
    manager_.reset();
  }

  // The new logic computed independently over the raw tables.
  std::vector<std::string> Expected(const std::string& from,
                                    const std::string& to) {
    RawDb raw(warehouse_path_);
    return raw.Rows(absl::StrFormat(
        "SELECT o.order_date, c.region, printf('%%.4f', SUM(o.amount - "
        "o.refund)), COUNT(*) FROM raw_orders o JOIN dim_customers c USING "
        "(customer_id) WHERE o.order_date >= '%s' AND o.order_date < '%s' "
        "GROUP BY 1, 2 ORDER BY 1, 2",
        from, to));
  }
  std::vector<std::string> Published(const std::string& from,
                                     const std::string& to) {
    RawDb raw(warehouse_path_);
    return raw.Rows(absl::StrFormat(
        "SELECT ds, region, printf('%%.4f', revenue), orders FROM "
        "daily_revenue WHERE ds >= '%s' AND ds < '%s' ORDER BY 1, 2",
        from, to));
  }

  std::filesystem::path dir_;
  std::string warehouse_path_;
  Catalog catalog_;
  ManualClock clock_{absl::FromUnixSeconds(1767225600)};
  std::unique_ptr<SqliteStateStore> store_;
  std::unique_ptr<SqliteEngine> engine_;
  std::unique_ptr<GatedEngine> gate_;
  std::unique_ptr<BackfillManager> manager_;
};

TEST_F(ManagerTest, PublishesExactlyTheNewLogicWithDependentsAndLineage) {
  auto submitted = manager_->Submit(
      Request("daily_revenue", "2025-01-01", "2025-01-21"), SubmitOptions{});
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  EXPECT_TRUE(submitted->created);
  Job done = WaitTerminal(submitted->job.id);
  ASSERT_EQ(done.state, JobState::kSucceeded) << done.message;
  // 20 days of daily_revenue and of daily_total, and region_totals' one
  // (whole-table) partition.
  EXPECT_EQ(done.counts.total, 41);
  EXPECT_EQ(done.counts.published, 41);
  // Estimate: 20 partitions x (40 orders + 30 customers); the dependents
  // have nothing published yet, so they are estimated at 0. Actually read:
  // the same, plus the 3 staged rows per day that daily_total read, plus
  // the 60 staged rows that region_totals read.
  EXPECT_DOUBLE_EQ(done.plan.datasets[0].cost.backfill, 1400);
  EXPECT_DOUBLE_EQ(done.actual_cost, 1400 + 20 * 3 + 60);
  EXPECT_EQ(done.rows_written, 20 * 3 + 20 + 3);

  EXPECT_EQ(Published("2025-01-01", "2025-01-21"),
            Expected("2025-01-01", "2025-01-21"));
  // The dependent read the staged (not yet published) upstream in the same
  // job: its totals equal the new logic's per-day sums.
  RawDb raw(warehouse_path_);
  EXPECT_EQ(
      raw.Rows("SELECT ds, printf('%.4f', revenue) FROM daily_total ORDER BY "
               "1"),
      raw.Rows("SELECT order_date, printf('%.4f', SUM(amount - refund)) FROM "
               "raw_orders GROUP BY 1 ORDER BY 1"));
  // No staging left behind.
  EXPECT_EQ(raw.Count("SELECT COUNT(*) FROM sqlite_master WHERE name LIKE "
                      "'_bf_stage_%'"),
            0);

  auto lineage = store_->GetLineage("daily_revenue", "2025-01-05");
  ASSERT_TRUE(lineage.ok());
  ASSERT_EQ(lineage->size(), 1u);
  EXPECT_EQ((*lineage)[0].job_id, done.id);
  EXPECT_EQ((*lineage)[0].reason, "test");
  EXPECT_EQ((*lineage)[0].row_count, 3);  // three regions
  EXPECT_EQ((*lineage)[0].transform_version,
            catalog_.Find("daily_revenue")->transform_version);
  EXPECT_EQ((*lineage)[0].inputs.size(), 2u);
}

TEST_F(ManagerTest, SecondBackfillReplacesOnlyItsPartitions) {
  auto first = manager_->Submit(
      Request("daily_revenue", "2025-01-01", "2025-01-21"), SubmitOptions{});
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(WaitTerminal(first->job.id).state, JobState::kSucceeded);
  RawDb raw(warehouse_path_);
  std::vector<std::string> before = Published("2025-01-01", "2025-01-21");
  raw.Exec(
      "UPDATE raw_orders SET refund = amount WHERE order_date = "
      "'2025-01-10'");
  BackfillRequest r = Request("daily_revenue", "2025-01-10", "2025-01-11");
  r.exclude_downstream = true;
  auto second = manager_->Submit(r, SubmitOptions{});
  ASSERT_TRUE(second.ok()) << second.status();
  Job done = WaitTerminal(second->job.id);
  ASSERT_EQ(done.state, JobState::kSucceeded) << done.message;
  EXPECT_EQ(done.counts.total, 1);
  EXPECT_EQ(Published("2025-01-10", "2025-01-11"),
            Expected("2025-01-10", "2025-01-11"));
  std::vector<std::string> after = Published("2025-01-01", "2025-01-21");
  // Every other day is unchanged.
  std::vector<std::string> before_other, after_other;
  for (const auto& row : before) {
    if (row.rfind("2025-01-10", 0) != 0) before_other.push_back(row);
  }
  for (const auto& row : after) {
    if (row.rfind("2025-01-10", 0) != 0) after_other.push_back(row);
  }
  EXPECT_EQ(before_other, after_other);
  EXPECT_EQ(store_->GetLineage("daily_revenue", "2025-01-10")->size(), 2u);
  // The replaced rows, and only those, are kept for rollback.
  std::vector<std::string> replaced;
  for (const auto& row : before) {
    if (row.rfind("2025-01-10", 0) == 0) replaced.push_back(row);
  }
  EXPECT_EQ(raw.Rows("SELECT ds, region, printf('%.4f', revenue), orders "
                     "FROM \"_bf_prev_bf_2_daily_revenue\" ORDER BY 1, 2"),
            replaced);
  // Publishing indexes the partition column, so replacing a partition
  // costs the rows replaced, not the table.
  EXPECT_EQ(raw.Count("SELECT COUNT(*) FROM sqlite_master WHERE type = "
                      "'index' AND tbl_name = 'daily_revenue' AND name = "
                      "'_bf_idx_daily_revenue'"),
            1);
}

TEST_F(ManagerTest, IdempotencyKeyReturnsSameJobOrRejectsADifferentRequest) {
  BackfillRequest r = Request("daily_revenue", "2025-01-01", "2025-01-03");
  auto a = manager_->Submit(r, SubmitOptions{"key-1"});
  ASSERT_TRUE(a.ok()) << a.status();
  auto b = manager_->Submit(r, SubmitOptions{"key-1"});
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_FALSE(b->created);
  EXPECT_EQ(a->job.id, b->job.id);
  BackfillRequest other = Request("daily_revenue", "2025-01-01", "2025-01-04");
  auto c = manager_->Submit(other, SubmitOptions{"key-1"});
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(c.status().message()), HasSubstr(a->job.id));
  WaitTerminal(a->job.id);
  EXPECT_EQ(manager_->ListJobs(JobFilter{})->size(), 1u);
}

TEST_F(ManagerTest, OverlappingSubmitConflictsWhileRunningAndCancelDropsAll) {
  gate_->Close();
  auto a = manager_->Submit(
      Request("daily_revenue", "2025-01-01", "2025-01-11"), SubmitOptions{});
  ASSERT_TRUE(a.ok()) << a.status();
  gate_->Allow(2);
  WaitStaged(a->job.id, 2);

  auto plan = manager_->PlanBackfill(
      Request("daily_revenue", "2025-01-10", "2025-01-12"));
  ASSERT_TRUE(plan.ok());
  EXPECT_FALSE(plan->conflicts.empty());
  SubmitOptions no_wait;
  no_wait.no_wait = true;
  auto b = manager_->Submit(
      Request("daily_revenue", "2025-01-10", "2025-01-12"), no_wait);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(b.status().message()), HasSubstr(a->job.id));

  auto cancelled = manager_->Cancel(a->job.id, "wrong range");
  ASSERT_TRUE(cancelled.ok()) << cancelled.status();
  EXPECT_EQ(cancelled->state, JobState::kCancelled);
  gate_->Open();
  Job done = WaitTerminal(a->job.id);
  EXPECT_EQ(done.state, JobState::kCancelled);
  absl::SleepFor(absl::Milliseconds(100));  // let in-flight tasks settle
  RawDb raw(warehouse_path_);
  EXPECT_EQ(raw.Count("SELECT COUNT(*) FROM sqlite_master WHERE name = "
                      "'daily_revenue'"),
            0);  // nothing was ever published
  EXPECT_EQ(raw.Count("SELECT COUNT(*) FROM sqlite_master WHERE name LIKE "
                      "'_bf_stage_%'"),
            0);
  // A retried cancel answers with the cancelled job.
  auto again = manager_->Cancel(a->job.id, "");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->state, JobState::kCancelled);
  // The range is free again.
  EXPECT_TRUE(manager_
                  ->Submit(Request("daily_revenue", "2025-01-10", "2025-01-12"),
                           SubmitOptions{})
                  .ok());
}

TEST_F(ManagerTest, RowsOutsideThePartitionFailTheJobAndPublishNothing) {
  auto a = manager_->Submit(Request("broken", "2025-01-01", "2025-01-03"),
                            SubmitOptions{});
  ASSERT_TRUE(a.ok()) << a.status();
  Job done = WaitTerminal(a->job.id);
  EXPECT_EQ(done.state, JobState::kFailed);
  EXPECT_THAT(done.message, HasSubstr("outside"));
  RawDb raw(warehouse_path_);
  EXPECT_EQ(
      raw.Count("SELECT COUNT(*) FROM sqlite_master WHERE name = 'broken'"), 0);
}

TEST_F(ManagerTest, DuplicateKeysFailValidationAndPublishNothing) {
  auto a = manager_->Submit(Request("dup_keys", "2025-01-01", "2025-01-03"),
                            SubmitOptions{});
  ASSERT_TRUE(a.ok()) << a.status();
  Job done = WaitTerminal(a->job.id);
  EXPECT_EQ(done.state, JobState::kValidationFailed);
  EXPECT_THAT(done.message, HasSubstr("dup_keys"));
  RawDb raw(warehouse_path_);
  EXPECT_EQ(
      raw.Count("SELECT COUNT(*) FROM sqlite_master WHERE name = 'dup_keys'"),
      0);
}

TEST_F(ManagerTest, ResumesFromCheckpointsAfterRestartAndPublishesOnce) {
  std::string id;
  ASSERT_NO_FATAL_FAILURE(StopWhileRunning(5, &id));
  const int staged_before_restart = gate_->staged();
  OpenStorage();
  StartManager();
  Job done = WaitTerminal(id);
  ASSERT_EQ(done.state, JobState::kSucceeded) << done.message;
  EXPECT_EQ(Published("2025-01-01", "2025-01-21"),
            Expected("2025-01-01", "2025-01-21"));
  // Checkpointed partitions were not recomputed.
  EXPECT_LE(gate_->staged(), 20 - staged_before_restart + 1);
  for (int d = 1; d <= 20; ++d) {
    auto lineage =
        store_->GetLineage("daily_revenue", absl::StrFormat("2025-01-%02d", d));
    ASSERT_TRUE(lineage.ok());
    EXPECT_EQ(lineage->size(), 1u) << d;
  }
}

TEST_F(ManagerTest, ResumeRefusesToMixTwoVersionsOfTheLogic) {
  std::string id;
  ASSERT_NO_FATAL_FAILURE(StopWhileRunning(3, &id));
  // The logic changes while the daemon is down.
  std::string changed = Pipeline();
  const std::string from = "SUM(o.amount - o.refund)";
  changed.replace(changed.find(from), from.size(), "SUM(o.amount)");
  auto catalog = LoadPipelineTexts({{"test.yaml", changed}});
  ASSERT_TRUE(catalog.ok()) << catalog.status();
  catalog_ = *std::move(catalog);
  OpenStorage();
  StartManager();
  auto job = manager_->GetJob(id);
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->state, JobState::kFailed);
  EXPECT_THAT(job->message, HasSubstr("changed since the job was planned"));
  RawDb raw(warehouse_path_);
  EXPECT_EQ(raw.Count("SELECT COUNT(*) FROM sqlite_master WHERE name = "
                      "'daily_revenue'"),
            0);
}

TEST_F(ManagerTest, AJobThatPublishedNeverEndsFailed) {
  // Cleanup after the warehouse committed fails: the job still succeeds and
  // the leftover staging is swept at the next start.
  gate_->FailDropStaging(true);
  BackfillRequest r = Request("daily_revenue", "2025-01-01", "2025-01-04");
  r.exclude_downstream = true;
  auto a = manager_->Submit(r, SubmitOptions{});
  ASSERT_TRUE(a.ok()) << a.status();
  Job done = WaitTerminal(a->job.id);
  EXPECT_EQ(done.state, JobState::kSucceeded) << done.message;
  EXPECT_EQ(Published("2025-01-01", "2025-01-04"),
            Expected("2025-01-01", "2025-01-04"));
  RawDb raw(warehouse_path_);
  EXPECT_GT(raw.Count("SELECT COUNT(*) FROM sqlite_master WHERE name LIKE "
                      "'\\_bf\\_stage\\_%' ESCAPE '\\'"),
            0);
  manager_.reset();
  OpenStorage();  // a fresh engine wrapper: cleanup works again
  StartManager();
  EXPECT_EQ(
      raw.Count("SELECT COUNT(*) FROM sqlite_master WHERE type = "
                "'table' AND name LIKE '\\_bf\\_%' ESCAPE '\\' AND "
                "name NOT IN ('_bf_publications', '_bf_meta', '_bf_rollbacks', "
                "'_bf_partition_stats', '_bf_partition_stats_meta', "
                "'_bf_change_tables', '_bf_change_counts', "
                "'_bf_fingerprints') AND "
                "name NOT "
                "LIKE '\\_bf\\_prev\\_%' ESCAPE '\\'"),
      0);
}

TEST_F(ManagerTest, LostStagingIsRecomputedBeforePublishing) {
  BackfillRequest r = Request("daily_revenue", "2025-01-01", "2025-01-11");
  r.exclude_downstream = true;
  auto first = manager_->Submit(r, SubmitOptions{});
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(WaitTerminal(first->job.id).state, JobState::kSucceeded);
  // The orders are corrected, so that every partition changes (the early
  // cutoff would not republish identical ones).
  RawDb(warehouse_path_)
      .Exec(
          "UPDATE raw_orders SET amount = amount + 1 WHERE order_date < "
          "'2025-01-11'");

  // Staged rows vanish before validation (as after a power loss): the job
  // recomputes those partitions and publishes complete ones.
  gate_->BeforeValidate([this] {
    RawDb raw(warehouse_path_);
    raw.Exec(
        "DELETE FROM \"_bf_stage_bf_2_daily_revenue\" WHERE ds < "
        "'2025-01-05'");
  });
  r.reason = "again";
  auto second = manager_->Submit(r, SubmitOptions{});
  ASSERT_TRUE(second.ok()) << second.status();
  ASSERT_EQ(second->job.id, "bf-2");
  Job done = WaitTerminal(second->job.id);
  EXPECT_EQ(done.state, JobState::kSucceeded) << done.message;
  EXPECT_EQ(Published("2025-01-01", "2025-01-11"),
            Expected("2025-01-01", "2025-01-11"));
  auto audit = store_->ListAuditEvents("bf-2");
  ASSERT_TRUE(audit.ok());
  bool recomputed = false;
  for (const AuditEvent& e : *audit) {
    if (e.from_state == "VALIDATING" && e.to_state == "RUNNING") {
      recomputed = true;
      EXPECT_THAT(e.message, HasSubstr("4 partitions lost staged rows"));
      EXPECT_THAT(e.message, HasSubstr("2025-01-01 (staged 0, checkpoint"));
    }
  }
  EXPECT_TRUE(recomputed);
}

TEST_F(ManagerTest, StagingLostEveryTimeFailsValidationAndKeepsPublishedRows) {
  BackfillRequest r = Request("daily_revenue", "2025-01-01", "2025-01-11");
  r.exclude_downstream = true;
  auto first = manager_->Submit(r, SubmitOptions{});
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(WaitTerminal(first->job.id).state, JobState::kSucceeded);
  const std::vector<std::string> before = Published("2025-01-01", "2025-01-11");
  ASSERT_FALSE(before.empty());
  RawDb(warehouse_path_)
      .Exec(
          "UPDATE raw_orders SET amount = amount + 1 WHERE order_date < "
          "'2025-01-11'");

  gate_->BeforeValidate(
      [this] {
        RawDb raw(warehouse_path_);
        raw.Exec(
            "DELETE FROM \"_bf_stage_bf_2_daily_revenue\" WHERE ds < "
            "'2025-01-05'");
      },
      /*every=*/true);
  r.reason = "again";
  auto second = manager_->Submit(r, SubmitOptions{});
  ASSERT_TRUE(second.ok()) << second.status();
  Job done = WaitTerminal(second->job.id);
  EXPECT_EQ(done.state, JobState::kValidationFailed);
  EXPECT_THAT(done.message, HasSubstr("staged rows were lost"));
  EXPECT_THAT(done.message, HasSubstr("even after recomputing them 2 times"));
  EXPECT_THAT(done.message, Not(HasSubstr("submit")));
  EXPECT_THAT(done.message, Not(HasSubstr("again")));
  EXPECT_EQ(Published("2025-01-01", "2025-01-11"), before);
}

TEST_F(ManagerTest, AWholeTableDependentWaitsForEveryUpstreamPartition) {
  auto a = manager_->Submit(
      Request("daily_revenue", "2025-01-01", "2025-01-21"), SubmitOptions{});
  ASSERT_TRUE(a.ok()) << a.status();
  Job done = WaitTerminal(a->job.id);
  ASSERT_EQ(done.state, JobState::kSucceeded) << done.message;
  ASSERT_EQ(done.plan.datasets.size(), 3u);
  EXPECT_EQ(done.plan.datasets[2].dataset, "region_totals");
  EXPECT_EQ(done.plan.datasets[2].reason, "downstream of daily_revenue");
  RawDb raw(warehouse_path_);
  EXPECT_EQ(
      raw.Rows("SELECT region, printf('%.4f', revenue) FROM region_totals "
               "ORDER BY 1"),
      raw.Rows("SELECT c.region, printf('%.4f', SUM(o.amount - o.refund)) "
               "FROM raw_orders o JOIN dim_customers c USING (customer_id) "
               "GROUP BY 1 ORDER BY 1"));
}

TEST_F(ManagerTest, BadRequestsChangeNothing) {
  BackfillRequest no_reason =
      Request("daily_revenue", "2025-01-01", "2025-01-02");
  no_reason.reason = "  ";
  EXPECT_EQ(manager_->Submit(no_reason, SubmitOptions{}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(manager_
                ->Submit(Request("orders", "2025-01-01", "2025-01-02"),
                         SubmitOptions{})
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(manager_
                ->Submit(Request("daily_revenue", "2025-01-02", "2025-01-01"),
                         SubmitOptions{})
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(manager_->GetJob("bf-999").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_TRUE(manager_->ListJobs(JobFilter{})->empty());
}

}  // namespace
}  // namespace storage_manager_test
}  // namespace backfill
