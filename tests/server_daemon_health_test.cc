// Health of a real Daemon (gRPC server, manager, SQLite store and warehouse
// on a temporary directory): while its state store's disk is full (through
// the fault-injecting VFS) gRPC health is NOT_SERVING and the job waits;
// once space returns, health is SERVING again and the job finishes. On
// shutdown it stops serving first and drains running partitions to their
// checkpoints.

#include <sqlite3.h>
#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/backfill_client.h"
#include "core/model/pipeline_loader.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/daemon.h"
#include "storage/sqlite/state/sqlite_state_store.h"
#include "tests/testing/fault_vfs.h"
#include "tests/testing/raw_grpc.h"
#include "tests/testing/revenue_pipeline.h"

namespace backfill {
namespace server_daemon_health_test {
namespace {

namespace fs = std::filesystem;
using ::backfill::testing::HealthStatus;

constexpr char kService[] = "backfill.v1.BackfillService";

// Waits (bounded) until `done` holds; false when it never did.
template <typename F>
bool Eventually(F done, absl::Duration timeout = absl::Seconds(60)) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    if (done()) return true;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return done();
}

class DaemonHealthTest : public ::testing::Test {
 protected:
  // A warehouse with one order a day in February 2025.
  void SetUp() override {
    std::string tmpl =
        (fs::temp_directory_path() / "backfill-daemon-health-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open((fs::path(dir_) / "warehouse.db").c_str(), &db),
              SQLITE_OK);
    std::string sql =
        "CREATE TABLE raw_orders (order_id INTEGER PRIMARY KEY, order_date "
        "TEXT NOT NULL, customer_id INTEGER NOT NULL, amount REAL NOT NULL, "
        "refund REAL NOT NULL);"
        "CREATE TABLE dim_customers (customer_id INTEGER PRIMARY KEY, region "
        "TEXT NOT NULL);"
        "INSERT INTO dim_customers VALUES (1, 'emea');";
    for (int day = 1; day <= 28; ++day) {
      absl::StrAppend(&sql,
                      "INSERT INTO raw_orders (order_date, customer_id, "
                      "amount, refund) VALUES ('2025-02-",
                      day < 10 ? "0" : "", day, "', 1, 10.0, 0.0);");
    }
    const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr);
    sqlite3_close(db);
    ASSERT_EQ(rc, SQLITE_OK);
  }

  void TearDown() override {
    if (daemon_ != nullptr) daemon_->Shutdown();
    daemon_.reset();
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }

  // Starts the daemon with one worker; each partition counts to `spin`
  // first, so that it takes a while.
  void StartDaemon(int spin, DaemonOptions options = {}) {
    const std::string condition = absl::StrCat(
        "        AND (WITH RECURSIVE spin(n) AS (SELECT 1 UNION ALL\n"
        "             SELECT n + 1 FROM spin WHERE n < ",
        spin, ")\n             SELECT COUNT(*) FROM spin) > 0\n");
    absl::StatusOr<Catalog> catalog = LoadPipelineTexts(
        {{"pipeline.yaml", fixtures::RevenuePipelineYaml(condition)}});
    ASSERT_TRUE(catalog.ok()) << catalog.status();
    options.data_dir = dir_;
    options.listen = "127.0.0.1:0";
    options.metrics_listen = "none";
    options.workers = 1;
    absl::StatusOr<std::unique_ptr<Daemon>> daemon =
        Daemon::Start(options, *std::move(catalog));
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = *std::move(daemon);
    target_ = daemon_->listen_address();
    client_ = BackfillClient::Connect(target_);
  }

  v1::BackfillRequest February(const std::string& reason) {
    v1::BackfillRequest request;
    request.set_dataset("daily_revenue");
    request.set_from_partition("2025-02-01");
    request.set_to_partition("2025-03-01");
    request.set_reason(reason);
    request.set_requested_by("server_daemon_health_test");
    return request;
  }

  // Submits February and waits until a partition is staged; the job id.
  std::string SubmitAndWaitStaged(const std::string& reason) {
    absl::StatusOr<v1::SubmitBackfillResponse> submitted =
        client_->Submit(February(reason), "");
    EXPECT_TRUE(submitted.ok()) << submitted.status();
    if (!submitted.ok()) return "";
    const std::string id = submitted->backfill().id();
    EXPECT_TRUE(Eventually([&] {
      absl::StatusOr<v1::Backfill> job = client_->Get(id);
      return job.ok() && job->partitions().staged() >= 1;
    }));
    return id;
  }

  std::string dir_;
  std::unique_ptr<Daemon> daemon_;
  std::string target_;
  std::unique_ptr<BackfillClient> client_;
};

TEST_F(DaemonHealthTest, NotServingWhileTheStateStoreCannotBeWritten) {
  ASSERT_TRUE(sqlite::FaultVfs::Install().ok());
  ASSERT_NO_FATAL_FAILURE(StartDaemon(/*spin=*/100000));
  EXPECT_EQ(HealthStatus(target_, kService), "SERVING");
  const std::string id = SubmitAndWaitStaged("health under a full disk");
  ASSERT_FALSE(id.empty());

  ASSERT_TRUE(
      sqlite::FaultVfs::Set("state.db", sqlite::Fault::DiskFull()).ok());
  EXPECT_TRUE(Eventually([&] {
    return HealthStatus(target_, kService) == "NOT_SERVING";
  })) << HealthStatus(target_, kService);
  // The server's overall status follows the service's a moment later.
  EXPECT_TRUE(Eventually([&] {
    return HealthStatus(target_, "") == "NOT_SERVING";
  })) << HealthStatus(target_, "");
  absl::StatusOr<v1::Backfill> during = client_->Get(id);
  ASSERT_TRUE(during.ok()) << during.status();
  EXPECT_EQ(during->state(), v1::BACKFILL_STATE_RUNNING);

  sqlite::FaultVfs::ClearAll();
  EXPECT_TRUE(Eventually([&] {
    return HealthStatus(target_, kService) == "SERVING";
  })) << HealthStatus(target_, kService);
  EXPECT_TRUE(Eventually(
      [&] {
        absl::StatusOr<v1::Backfill> job = client_->Get(id);
        return job.ok() && job->state() == v1::BACKFILL_STATE_SUCCEEDED;
      },
      absl::Seconds(120)));
}

// A full warehouse disk makes health NOT_SERVING while staging waits; the
// first partition staged after it makes health SERVING again.
TEST_F(DaemonHealthTest, ServingAgainOnceTheWarehouseCanBeWrittenAgain) {
  ASSERT_TRUE(sqlite::FaultVfs::Install().ok());
  ASSERT_NO_FATAL_FAILURE(StartDaemon(/*spin=*/20000));
  const std::string id = SubmitAndWaitStaged("warehouse disk full");
  ASSERT_FALSE(id.empty());
  ASSERT_TRUE(
      sqlite::FaultVfs::Set("warehouse.db", sqlite::Fault::DiskFull()).ok());
  EXPECT_TRUE(Eventually([&] {
    return HealthStatus(target_, kService) == "NOT_SERVING";
  })) << HealthStatus(target_, kService);
  sqlite::FaultVfs::ClearAll();
  EXPECT_TRUE(Eventually(
      [&] {
        absl::StatusOr<v1::Backfill> job = client_->Get(id);
        return job.ok() && job->state() == v1::BACKFILL_STATE_SUCCEEDED;
      },
      absl::Seconds(120)));
  EXPECT_TRUE(Eventually([&] {
    return HealthStatus(target_, kService) == "SERVING";
  })) << HealthStatus(target_, kService);
  EXPECT_EQ(HealthStatus(target_, ""), "SERVING");
}

// The warehouse file removed or truncated under the daemon: health says
// NOT_SERVING although no write met it yet.
TEST_F(DaemonHealthTest, NotServingOnceTheWarehouseFileIsTruncatedOrRemoved) {
  ASSERT_NO_FATAL_FAILURE(StartDaemon(/*spin=*/1));
  EXPECT_EQ(HealthStatus(target_, kService), "SERVING");
  const fs::path warehouse = fs::path(dir_) / "warehouse.db";
  fs::resize_file(warehouse, 0);
  EXPECT_TRUE(Eventually([&] {
    return HealthStatus(target_, kService) == "NOT_SERVING";
  })) << HealthStatus(target_, kService);
  fs::remove(warehouse);
  absl::SleepFor(absl::Seconds(3));
  EXPECT_EQ(HealthStatus(target_, kService), "NOT_SERVING");
}

TEST_F(DaemonHealthTest, ShutdownStopsServingFirstAndDrainsToACheckpoint) {
  DaemonOptions options;
  options.shutdown_grace = absl::Milliseconds(200);
  options.drain_timeout = absl::Seconds(60);
  ASSERT_NO_FATAL_FAILURE(StartDaemon(/*spin=*/300000, options));
  const std::string id = SubmitAndWaitStaged("drain");
  ASSERT_FALSE(id.empty());

  std::thread stopper([this] { daemon_->Shutdown(); });
  // Not serving at once: health says so (or the server no longer answers),
  // and a new submit is refused as UNAVAILABLE: by the service, or by gRPC
  // once the server stopped; a call gRPC had taken but not yet handed to
  // the service when it stopped ends CANCELLED. None creates a job.
  EXPECT_TRUE(
      Eventually([&] { return HealthStatus(target_, kService) != "SERVING"; },
                 absl::Seconds(5)));
  absl::StatusOr<v1::SubmitBackfillResponse> refused =
      client_->Submit(February("too late"), "");
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().code(),
              ::testing::AnyOf(absl::StatusCode::kUnavailable,
                               absl::StatusCode::kCancelled))
      << refused.status();
  stopper.join();
  daemon_.reset();

  // The running partition finished and checkpointed: nothing is left
  // RUNNING, and the job resumes after a restart.
  absl::StatusOr<std::unique_ptr<SqliteStateStore>> store =
      SqliteStateStore::Open((fs::path(dir_) / "state.db").string());
  ASSERT_TRUE(store.ok()) << store.status();
  absl::StatusOr<Job> job = (*store)->GetJob(id);
  ASSERT_TRUE(job.ok()) << job.status();
  absl::StatusOr<std::vector<std::string>> ids = (*store)->ListJobIds(
      {JobState::kQueued, JobState::kRunning, JobState::kPaused,
       JobState::kSucceeded, JobState::kFailed, JobState::kCancelled});
  ASSERT_TRUE(ids.ok()) << ids.status();
  EXPECT_THAT(*ids, ::testing::ElementsAre(id)) << "the refused submit";
  EXPECT_EQ(job->state, JobState::kRunning);
  EXPECT_EQ(job->counts.running, 0);
  EXPECT_GE(job->counts.staged, 1);
  EXPECT_LT(job->counts.staged, 28);
}

}  // namespace
}  // namespace server_daemon_health_test
}  // namespace backfill
