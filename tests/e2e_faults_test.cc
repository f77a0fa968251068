// End-to-end tests of faults an operator meets: a lost, recreated or
// restored state.db, a missing, replaced or removed warehouse, a damaged
// state.db, and a full disk (through the storage fault shim of
// backfilld_faults, which is backfilld with tests/testing/fault_vfs.h
// following the control file BACKFILL_TEST_FAULTS names). In every case the
// daemon either refuses to start with a message that says what happened and
// what to do, or keeps the job honest: it never reports SUCCEEDED for a
// publication that did not happen, and a job whose state cannot be written
// keeps its partitions and continues once writes work again. Published data
// is checked with plain SQL against the raw tables.

#include <signal.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/e2e_support.h"
#include "tests/testing/raw_grpc.h"

namespace backfill {
namespace e2e_faults_test {
namespace {

using namespace ::backfill::e2e;  // NOLINT: test support
namespace fs = std::filesystem;
using ::backfill::testing::HealthStatus;
using std::chrono::milliseconds;
using std::chrono::seconds;
using ::testing::HasSubstr;

constexpr char kService[] = "backfill.v1.BackfillService";

class FaultsTest : public E2eTest {
 protected:
  // Loads `days` days through a daemon and stops it cleanly; the job id.
  std::string LoadAndStop(int days, const std::string& reason) {
    Daemon& daemon = NewDaemon();
    EXPECT_TRUE(daemon.Start());
    RunResult r = daemon.CtlJson(
        {"submit", "daily_revenue", "--from", "2025-01-01", "--to",
         absl::StrCat("2025-01-", days < 9 ? "0" : "", days + 1), "--reason",
         reason, "--wait"});
    EXPECT_EQ(r.exit_code, 0) << r;
    ExpectCleanSigterm(daemon);
    return JsonString(r.out, "id");
  }

  // Starts a daemon that must refuse to start; its log.
  std::string ExpectRefusal(const std::vector<std::string>& extra = {}) {
    Daemon& daemon = NewDaemon();
    daemon.set_extra_args(extra);
    std::optional<int> code = daemon.SpawnExpectingExit(seconds(60));
    EXPECT_TRUE(code.has_value()) << "backfilld started; log:\n"
                                  << ReadFile(daemon.log());
    if (code) {
      EXPECT_EQ(*code, 1) << ReadFile(daemon.log());
    }
    return ReadFile(daemon.log());
  }

  // Whether health says SERVING within 10 s.
  static bool WaitUntilServing(const std::string& address) {
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (absl::Now() < deadline) {
      if (HealthStatus(address, kService) == "SERVING") return true;
      absl::SleepFor(absl::Milliseconds(20));
    }
    return false;
  }

  void RemoveDb(const std::string& path) {
    for (const char* suffix : {"", "-wal", "-shm"}) {
      std::error_code ec;
      fs::remove(path + suffix, ec);
    }
  }

  // Writes the fault control file atomically (see tests/testing/fault_vfs.h).
  void SetFaults(const std::string& text) {
    const std::string tmp = faults_ + ".tmp";
    WriteFile(tmp, text);
    fs::rename(tmp, faults_);
  }

  std::string Metrics(Daemon& daemon) {
    return HttpGet(daemon.metrics_port(), "/metrics");
  }

  // Scrapes until the exposition holds `sample` (bounded); the last scrape.
  std::string WaitForMetric(Daemon& daemon, const std::string& sample) {
    std::string metrics;
    const auto deadline = Clock::now() + seconds(60);
    while (Clock::now() < deadline) {
      metrics = Metrics(daemon);
      if (absl::StrContains(metrics, sample)) break;
      std::this_thread::sleep_for(milliseconds(100));
    }
    EXPECT_THAT(metrics, HasSubstr(sample));
    return metrics;
  }

  // A daemon with the storage fault shim following faults_ (no faults yet):
  // backfilld_faults, backfilld with the fault VFS.
  Daemon& FaultableDaemon(int workers) {
    faults_ = root_ + "/faults";
    SetFaults("");
    Daemon& daemon = NewDaemon(workers);
    daemon.set_binary("backfilld_faults");
    daemon.set_env({"BACKFILL_TEST_FAULTS=" + faults_});
    return daemon;
  }

  // Submits daily_revenue for [from, to) without dependents and waits
  // (bounded) until two of its partitions are staged; the job id.
  std::string SubmitAndWaitStaged(Daemon& daemon, const std::string& from,
                                  const std::string& to,
                                  const std::string& reason) {
    RunResult r =
        daemon.CtlJson({"submit", "daily_revenue", "--from", from, "--to", to,
                        "--reason", reason, "--no-downstream"});
    EXPECT_EQ(r.exit_code, 0) << r;
    const std::string job = JsonString(r.out, "id");
    const auto deadline = Clock::now() + seconds(60);
    while (Clock::now() < deadline) {
      RunResult s = daemon.CtlJson({"status", job}, seconds(30));
      if (JsonInt(s.out, "staged") >= 2) break;
      std::this_thread::sleep_for(milliseconds(20));
    }
    return job;
  }

  std::string faults_;
};

TEST_F(FaultsTest, ARecreatedStateStoreIsRefusedAndAdoptionPublishesForReal) {
  ASSERT_NO_FATAL_FAILURE(Prepare(/*days=*/10, 40, false));
  const std::string first = LoadAndStop(10, "initial load");
  ASSERT_EQ(first, "bf-1");

  // state.db is lost: a new one would hand out bf-1 again.
  RemoveDb(data_dir_ + "/state.db");
  const std::string log = ExpectRefusal();
  EXPECT_TRUE(HasStartupError(log, "belongs to state store")) << log;
  EXPECT_TRUE(HasStartupError(log, "--adopt-warehouse")) << log;

  // Taking the warehouse over: the next job publishes for real and is not
  // mistaken for the old bf-1.
  {
    Sqlite raw(warehouse_);
    ASSERT_TRUE(
        raw.Exec("UPDATE raw_orders SET amount = amount + 1 WHERE "
                 "order_date = '2025-01-03'"))
        << raw.error();
  }
  Daemon& daemon = NewDaemon();
  daemon.set_extra_args({"--adopt-warehouse"});
  ASSERT_TRUE(daemon.Start());
  EXPECT_THAT(ReadFile(daemon.log()), HasSubstr("adopted warehouse"));
  RunResult r = daemon.CtlJson({"submit", "daily_revenue", "--partitions",
                                "2025-01-03", "--reason", "after restore",
                                "--no-downstream", "--wait"});
  ASSERT_EQ(r.exit_code, 0) << r;
  const std::string job = JsonString(r.out, "id");
  EXPECT_NE(job, "bf-1");
  EXPECT_EQ(JsonString(r.out, "state"), "BACKFILL_STATE_SUCCEEDED");
  EXPECT_EQ(PublishedRevenue(warehouse_, "2025-01-03", "2025-01-04"),
            ExpectedRevenue(warehouse_, "2025-01-03", "2025-01-04"));
  ExpectCleanSigterm(daemon);
  // From now on the two belong together.
  Daemon& again = NewDaemon();
  ASSERT_TRUE(again.Start());
  ExpectCleanSigterm(again);
}

TEST_F(FaultsTest, AStateStoreRestoredFromAnOlderBackupIsRefused) {
  ASSERT_NO_FATAL_FAILURE(Prepare(/*days=*/6, 40, false));
  LoadAndStop(3, "first");
  fs::copy_file(data_dir_ + "/state.db", root_ + "/state-backup.db");
  {
    Daemon& daemon = NewDaemon();
    ASSERT_TRUE(daemon.Start());
    RunResult r =
        daemon.CtlJson({"submit", "daily_revenue", "--partitions", "2025-01-05",
                        "--reason", "second", "--wait"});
    ASSERT_EQ(r.exit_code, 0) << r;
    ExpectCleanSigterm(daemon);
  }
  RemoveDb(data_dir_ + "/state.db");
  fs::copy_file(root_ + "/state-backup.db", data_dir_ + "/state.db");
  const std::string log = ExpectRefusal();
  EXPECT_TRUE(HasStartupError(log, "holds publications of 1 jobs (bf-2)"))
      << log;
  EXPECT_TRUE(HasStartupError(log, "older than the warehouse")) << log;
}

TEST_F(FaultsTest, AMissingWarehouseIsNotRecreated) {
  ASSERT_NO_FATAL_FAILURE(Prepare(/*days=*/4, 40, false));
  LoadAndStop(4, "initial load");
  RemoveDb(warehouse_);
  const std::string log = ExpectRefusal();
  EXPECT_TRUE(HasStartupError(log, "does not exist")) << log;
  EXPECT_TRUE(HasStartupError(log, "records 1 jobs published into it")) << log;
  EXPECT_FALSE(fs::exists(warehouse_));

  // An empty file in its place is no better, and is refused as it is,
  // before anything is written into it.
  { Sqlite empty(warehouse_); }
  ASSERT_TRUE(fs::exists(warehouse_));
  ASSERT_EQ(fs::file_size(warehouse_), 0u);
  const std::string replaced = ExpectRefusal();
  EXPECT_TRUE(HasStartupError(replaced, "is an empty file (0 bytes)"))
      << replaced;
  EXPECT_TRUE(HasStartupError(replaced, "records 1 jobs published into it"))
      << replaced;
  EXPECT_EQ(fs::file_size(warehouse_), 0u);
  EXPECT_FALSE(fs::exists(warehouse_ + "-wal"));
}

TEST_F(FaultsTest, AWarehouseRemovedWhileRunningFailsTheJob) {
  ASSERT_NO_FATAL_FAILURE(Prepare(/*days=*/60, 100, /*slow=*/true));
  Daemon& daemon = NewDaemon(/*workers=*/1);
  ASSERT_TRUE(daemon.Start());
  RunResult r =
      daemon.CtlJson({"submit", "daily_revenue", "--from", "2025-01-01", "--to",
                      "2025-03-02", "--reason", "long"});
  ASSERT_EQ(r.exit_code, 0) << r;
  const std::string job = JsonString(r.out, "id");
  // Some partitions staged, then the file goes.
  const auto deadline = Clock::now() + seconds(60);
  while (Clock::now() < deadline) {
    RunResult s = daemon.CtlJson({"status", job}, seconds(30));
    if (JsonInt(s.out, "staged") >= 2) break;
    std::this_thread::sleep_for(milliseconds(20));
  }
  RemoveDb(warehouse_);
  const std::string done = WaitTerminal(daemon, job, seconds(120));
  EXPECT_EQ(JsonString(done, "state"), "BACKFILL_STATE_FAILED") << done;
  EXPECT_THAT(done, HasSubstr("was removed while backfilld was running"));
  EXPECT_FALSE(fs::exists(warehouse_)) << "the warehouse was recreated";
  ExpectCleanSigterm(daemon);
}

TEST_F(FaultsTest, ADamagedStateStoreIsRefusedAndNotWritten) {
  ASSERT_NO_FATAL_FAILURE(Prepare(/*days=*/10, 40, false));
  LoadAndStop(10, "initial load");
  const std::string path = data_dir_ + "/state.db";
  ASSERT_FALSE(fs::exists(path + "-wal") && fs::file_size(path + "-wal") > 0)
      << "a clean stop checkpoints the WAL";
  const uintmax_t size = fs::file_size(path);
  ASSERT_GT(size, 4u * 4096u);
  // Scribble over the header of a b-tree page (page 3: a table the
  // schema creates early), as a torn or bit-rotten write would.
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(2 * 4096);
    const std::string junk(16, '\xa5');
    f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
  }
  const std::string before = ReadFile(path);
  const std::string log = ExpectRefusal();
  EXPECT_TRUE(HasStartupError(log, "is damaged")) << log;
  EXPECT_TRUE(HasStartupError(log, "Restore it from a backup")) << log;
  EXPECT_EQ(ReadFile(path), before) << "the damaged state store was written";
}

TEST_F(FaultsTest, AFullDiskKeepsTheJobAndItsPartitionsThenItContinues) {
  ASSERT_NO_FATAL_FAILURE(Prepare(/*days=*/40, 100, /*slow=*/true));
  Daemon& daemon = FaultableDaemon(/*workers=*/1);
  ASSERT_TRUE(daemon.Start());
  const std::string job =
      SubmitAndWaitStaged(daemon, "2025-01-01", "2025-02-10", "disk full");
  ASSERT_FALSE(job.empty());

  // The state store's disk fills up: nothing can be recorded.
  SetFaults("state.db full\n");
  std::string metrics = WaitForMetric(
      daemon, "backfill_storage_failing{storage=\"state_store\"} 1");
  EXPECT_THAT(metrics, HasSubstr("backfill_state_store_up 0"));
  EXPECT_THAT(ReadFile(daemon.log()), HasSubstr("[error]"));
  EXPECT_THAT(ReadFile(daemon.log()), HasSubstr("state store write failing"));
  // The job still holds its partitions: an overlapping plan says so.
  RunResult plan =
      daemon.CtlJson({"plan", "daily_revenue", "--partitions", "2025-01-20"});
  ASSERT_EQ(plan.exit_code, 0) << plan;
  EXPECT_THAT(plan.out, HasSubstr(job));
  // A new job cannot be recorded: refused with the reason, not accepted.
  RunResult refused = daemon.Ctl({"submit", "daily_revenue", "--partitions",
                                  "2025-03-01", "--reason", "x"});
  EXPECT_NE(refused.exit_code, 0) << refused;
  EXPECT_THAT(refused.err, HasSubstr("full")) << refused;
  RunResult status = daemon.CtlJson({"status", job}, seconds(30));
  EXPECT_FALSE(IsTerminalState(JsonString(status.out, "state"))) << status;

  // Space returns: the job continues and publishes everything.
  SetFaults("");
  const std::string done = WaitTerminal(daemon, job, seconds(180));
  EXPECT_EQ(JsonString(done, "state"), "BACKFILL_STATE_SUCCEEDED") << done;
  EXPECT_EQ(PublishedRevenue(warehouse_, "0000", "9999"),
            ExpectedRevenue(warehouse_, "2025-01-01", "2025-02-10"));
  // Reported just after the write that recovered, which may be the last.
  WaitForMetric(daemon, "backfill_storage_failing{storage=\"state_store\"} 0");
  ExpectCleanSigterm(daemon);
}

TEST_F(FaultsTest, AFullWarehouseDiskWaitsWithoutSpendingAttempts) {
  ASSERT_NO_FATAL_FAILURE(Prepare(/*days=*/20, 60, /*slow=*/false));
  Daemon& daemon = FaultableDaemon(/*workers=*/1);
  ASSERT_TRUE(daemon.Start());
  SetFaults("warehouse.db full\n");
  RunResult r = daemon.CtlJson({"submit", "daily_revenue", "--from",
                                "2025-01-01", "--to", "2025-01-11", "--reason",
                                "warehouse full", "--no-downstream"});
  ASSERT_EQ(r.exit_code, 0) << r;
  const std::string job = JsonString(r.out, "id");
  std::string metrics = WaitForMetric(
      daemon, "backfill_storage_failing{storage=\"warehouse\"} 1");
  // Longer than three attempts' backoff: the job has not failed.
  std::this_thread::sleep_for(seconds(2));
  RunResult status = daemon.CtlJson({"status", job}, seconds(30));
  EXPECT_FALSE(IsTerminalState(JsonString(status.out, "state"))) << status;
  EXPECT_EQ(HealthStatus(daemon.address(), kService), "NOT_SERVING");
  SetFaults("");
  const std::string done = WaitTerminal(daemon, job, seconds(180));
  EXPECT_EQ(JsonString(done, "state"), "BACKFILL_STATE_SUCCEEDED") << done;
  EXPECT_EQ(PublishedRevenue(warehouse_, "0000", "9999"),
            ExpectedRevenue(warehouse_, "2025-01-01", "2025-01-11"));
  // Every failure signal has its recovery: the gauge, the log and health.
  WaitForMetric(daemon, "backfill_storage_failing{storage=\"warehouse\"} 0");
  EXPECT_THAT(ReadFile(daemon.log()), HasSubstr("warehouse writes work again"));
  EXPECT_EQ(HealthStatus(daemon.address(), kService), "SERVING");
  ExpectCleanSigterm(daemon);
}

// The disk fills while partitions stage (not before: a write the job
// retries as a whole reported its own recovery even before): health is
// NOT_SERVING while staging waits and SERVING again once a partition
// stages, with the gauge and the log.
TEST_F(FaultsTest, AFullWarehouseDiskDuringStagingRecoversHealth) {
  ASSERT_NO_FATAL_FAILURE(Prepare(/*days=*/20, 60, /*slow=*/true));
  Daemon& daemon = FaultableDaemon(/*workers=*/1);
  ASSERT_TRUE(daemon.Start());
  const std::string job = SubmitAndWaitStaged(
      daemon, "2025-01-01", "2025-01-21", "disk fills while staging");
  ASSERT_FALSE(job.empty());
  SetFaults("warehouse.db full\n");
  WaitForMetric(daemon, "backfill_storage_failing{storage=\"warehouse\"} 1");
  EXPECT_EQ(HealthStatus(daemon.address(), kService), "NOT_SERVING");
  SetFaults("");
  const std::string done = WaitTerminal(daemon, job, seconds(180));
  EXPECT_EQ(JsonString(done, "state"), "BACKFILL_STATE_SUCCEEDED") << done;
  WaitForMetric(daemon, "backfill_storage_failing{storage=\"warehouse\"} 0");
  EXPECT_THAT(ReadFile(daemon.log()), HasSubstr("warehouse writes work again"));
  EXPECT_EQ(HealthStatus(daemon.address(), kService), "SERVING");
  EXPECT_EQ(PublishedRevenue(warehouse_, "0000", "9999"),
            ExpectedRevenue(warehouse_, "2025-01-01", "2025-01-21"));
  ExpectCleanSigterm(daemon);
}

TEST_F(FaultsTest, AWarehouseFileRemovedUnderTheDaemonIsNotServing) {
  ASSERT_NO_FATAL_FAILURE(Prepare(/*days=*/3, 10, /*slow=*/false));
  Daemon& daemon = NewDaemon();
  ASSERT_TRUE(daemon.Start());
  // Calls are answered a moment before health says SERVING (once the jobs
  // resumed).
  EXPECT_TRUE(WaitUntilServing(daemon.address()));
  RemoveDb(warehouse_);
  WaitForMetric(daemon, "backfill_storage_failing{storage=\"warehouse\"} 1");
  EXPECT_EQ(HealthStatus(daemon.address(), kService), "NOT_SERVING");
  EXPECT_THAT(
      ReadFile(daemon.log()),
      HasSubstr("warehouse cannot be used: the warehouse file " + warehouse_ +
                " was removed while backfilld was "
                "running"));
  ExpectCleanSigterm(daemon);
}

TEST_F(FaultsTest, WarehouseIoErrorsAreRetriedAndTheJobFinishes) {
  ASSERT_NO_FATAL_FAILURE(Prepare(/*days=*/20, 60, /*slow=*/false));
  Daemon& daemon = FaultableDaemon(/*workers=*/2);
  ASSERT_TRUE(daemon.Start());
  // Every write to the warehouse fails with an I/O error for a while.
  SetFaults("warehouse.db ioerr-write\n");
  RunResult r = daemon.CtlJson({"submit", "daily_revenue", "--from",
                                "2025-01-01", "--to", "2025-01-21", "--reason",
                                "flaky disk", "--no-downstream"});
  ASSERT_EQ(r.exit_code, 0) << r;
  const std::string job = JsonString(r.out, "id");
  std::string metrics = WaitForMetric(
      daemon, "backfill_storage_failing{storage=\"warehouse\"} 1");
  EXPECT_THAT(ReadFile(daemon.log()), HasSubstr("warehouse write failing"));
  RunResult status = daemon.CtlJson({"status", job}, seconds(30));
  EXPECT_FALSE(IsTerminalState(JsonString(status.out, "state"))) << status;
  // The disk recovers: the job goes on and publishes everything, once.
  SetFaults("");
  const std::string done = WaitTerminal(daemon, job, seconds(180));
  EXPECT_EQ(JsonString(done, "state"), "BACKFILL_STATE_SUCCEEDED") << done;
  EXPECT_EQ(JsonInt(done, "published"), 20) << done;
  EXPECT_EQ(PublishedRevenue(warehouse_, "0000", "9999"),
            ExpectedRevenue(warehouse_, "2025-01-01", "2025-01-21"));
  WaitForMetric(daemon, "backfill_storage_failing{storage=\"warehouse\"} 0");
  ExpectCleanSigterm(daemon);
}

}  // namespace
}  // namespace e2e_faults_test
}  // namespace backfill
