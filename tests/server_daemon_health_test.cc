// Health while storage fails: a real Daemon (gRPC server, manager, SQLite
// store and warehouse on a temporary directory) whose state store's disk
// fills up under a running job, through the fault-injecting VFS. gRPC
// health turns NOT_SERVING and the metrics say which storage fails; once
// space returns, health is SERVING again and the job finishes.

#include <sqlite3.h>
#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/backfill_client.h"
#include "core/pipeline_loader.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/daemon.h"
#include "storage/fault_vfs.h"
#include "storage/sqlite_state_store.h"
#include "tests/revenue_pipeline.h"
#include "tests/testing/raw_grpc.h"

namespace backfill {
namespace {

namespace fs = std::filesystem;
using ::backfill::testing::HealthStatus;
using ::testing::HasSubstr;

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

TEST(DaemonHealthTest, NotServingWhileTheStateStoreCannotBeWritten) {
  std::string tmpl =
      (fs::temp_directory_path() / "backfill-daemon-health-XXXXXX").string();
  ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
  const std::string dir = tmpl;
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open((fs::path(dir) / "warehouse.db").c_str(), &db),
              SQLITE_OK);
    std::string sql =
        "CREATE TABLE raw_orders (order_id INTEGER PRIMARY KEY, order_date "
        "TEXT NOT NULL, customer_id INTEGER NOT NULL, amount REAL NOT NULL, "
        "refund REAL NOT NULL);"
        "CREATE TABLE dim_customers (customer_id INTEGER PRIMARY KEY, region "
        "TEXT NOT NULL);"
        "INSERT INTO dim_customers VALUES (1, 'emea');";
    for (int day = 1; day <= 28; ++day) {
      sql +=
          "INSERT INTO raw_orders (order_date, customer_id, amount, "
          "refund) VALUES ('2025-02-" +
          std::string(day < 10 ? "0" : "") + std::to_string(day) +
          "', 1, 10.0, 0.0);";
    }
    ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr),
              SQLITE_OK);
    sqlite3_close(db);
  }
  ASSERT_TRUE(sqlite::FaultVfs::Install().ok());

  // Each partition takes a while, so the job is still running when the disk
  // fills up.
  const std::string spin =
      "        AND (WITH RECURSIVE spin(n) AS (SELECT 1 UNION ALL\n"
      "             SELECT n + 1 FROM spin WHERE n < 100000)\n"
      "             SELECT COUNT(*) FROM spin) > 0\n";
  absl::StatusOr<Catalog> catalog = LoadPipelineTexts(
      {{"pipeline.yaml", fixtures::RevenuePipelineYaml(spin)}});
  ASSERT_TRUE(catalog.ok()) << catalog.status();
  DaemonOptions options;
  options.data_dir = dir;
  options.listen = "127.0.0.1:0";
  options.metrics_listen = "none";
  options.workers = 1;
  absl::StatusOr<std::unique_ptr<Daemon>> daemon =
      Daemon::Start(options, *std::move(catalog));
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  const std::string target = (*daemon)->listen_address();
  EXPECT_EQ(HealthStatus(target, kService), "SERVING");

  std::unique_ptr<BackfillClient> client = BackfillClient::Connect(target);
  v1::BackfillRequest request;
  request.set_dataset("daily_revenue");
  request.set_from_partition("2025-02-01");
  request.set_to_partition("2025-03-01");
  request.set_reason("health under a full disk");
  request.set_requested_by("server_daemon_health_test");
  absl::StatusOr<v1::SubmitBackfillResponse> submitted =
      client->Submit(request, "");
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  const std::string id = submitted->backfill().id();
  ASSERT_TRUE(Eventually([&] {
    absl::StatusOr<v1::Backfill> job = client->Get(id);
    return job.ok() && job->partitions().staged() >= 1;
  }));

  ASSERT_TRUE(
      sqlite::FaultVfs::Set("state.db", sqlite::Fault::DiskFull()).ok());
  EXPECT_TRUE(Eventually([&] {
    return HealthStatus(target, kService) == "NOT_SERVING";
  })) << HealthStatus(target, kService);
  EXPECT_EQ(HealthStatus(target, ""), "NOT_SERVING");
  absl::StatusOr<v1::Backfill> during = client->Get(id);
  ASSERT_TRUE(during.ok()) << during.status();
  EXPECT_EQ(during->state(), v1::BACKFILL_STATE_RUNNING);

  sqlite::FaultVfs::ClearAll();
  EXPECT_TRUE(Eventually([&] {
    return HealthStatus(target, kService) == "SERVING";
  })) << HealthStatus(target, kService);
  EXPECT_TRUE(Eventually(
      [&] {
        absl::StatusOr<v1::Backfill> job = client->Get(id);
        return job.ok() && job->state() == v1::BACKFILL_STATE_SUCCEEDED;
      },
      absl::Seconds(120)));
  (*daemon)->Shutdown();
  daemon->reset();
  std::error_code ec;
  fs::remove_all(dir, ec);
}

TEST(DaemonHealthTest, ShutdownStopsServingFirstAndDrainsToACheckpoint) {
  std::string tmpl =
      (fs::temp_directory_path() / "backfill-daemon-drain-XXXXXX").string();
  ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
  const std::string dir = tmpl;
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open((fs::path(dir) / "warehouse.db").c_str(), &db),
              SQLITE_OK);
    std::string sql =
        "CREATE TABLE raw_orders (order_id INTEGER PRIMARY KEY, order_date "
        "TEXT NOT NULL, customer_id INTEGER NOT NULL, amount REAL NOT NULL, "
        "refund REAL NOT NULL);"
        "CREATE TABLE dim_customers (customer_id INTEGER PRIMARY KEY, region "
        "TEXT NOT NULL);"
        "INSERT INTO dim_customers VALUES (1, 'emea');";
    for (int day = 1; day <= 28; ++day) {
      sql +=
          "INSERT INTO raw_orders (order_date, customer_id, amount, "
          "refund) VALUES ('2025-02-" +
          std::string(day < 10 ? "0" : "") + std::to_string(day) +
          "', 1, 10.0, 0.0);";
    }
    ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr),
              SQLITE_OK);
    sqlite3_close(db);
  }
  const std::string spin =
      "        AND (WITH RECURSIVE spin(n) AS (SELECT 1 UNION ALL\n"
      "             SELECT n + 1 FROM spin WHERE n < 300000)\n"
      "             SELECT COUNT(*) FROM spin) > 0\n";
  absl::StatusOr<Catalog> catalog = LoadPipelineTexts(
      {{"pipeline.yaml", fixtures::RevenuePipelineYaml(spin)}});
  ASSERT_TRUE(catalog.ok()) << catalog.status();
  DaemonOptions options;
  options.data_dir = dir;
  options.listen = "127.0.0.1:0";
  options.metrics_listen = "none";
  options.workers = 1;
  options.shutdown_grace = absl::Milliseconds(200);
  options.drain_timeout = absl::Seconds(60);
  absl::StatusOr<std::unique_ptr<Daemon>> daemon =
      Daemon::Start(options, *std::move(catalog));
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  const std::string target = (*daemon)->listen_address();
  std::unique_ptr<BackfillClient> client = BackfillClient::Connect(target);
  v1::BackfillRequest request;
  request.set_dataset("daily_revenue");
  request.set_from_partition("2025-02-01");
  request.set_to_partition("2025-03-01");
  request.set_reason("drain");
  request.set_requested_by("server_daemon_health_test");
  absl::StatusOr<v1::SubmitBackfillResponse> submitted =
      client->Submit(request, "");
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  const std::string id = submitted->backfill().id();
  ASSERT_TRUE(Eventually([&] {
    absl::StatusOr<v1::Backfill> job = client->Get(id);
    return job.ok() && job->partitions().staged() >= 1;
  }));

  std::thread stopper([&] { (*daemon)->Shutdown(); });
  // Not serving at once: health says so (or the server no longer answers),
  // and a new submit is refused as UNAVAILABLE.
  EXPECT_TRUE(
      Eventually([&] { return HealthStatus(target, kService) != "SERVING"; },
                 absl::Seconds(5)));
  request.set_from_partition("2025-02-01");
  request.set_to_partition("2025-02-02");
  absl::StatusOr<v1::SubmitBackfillResponse> refused =
      client->Submit(request, "");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable)
      << refused.status();
  stopper.join();
  daemon->reset();

  // The running partition finished and checkpointed: nothing is left
  // RUNNING, and the job resumes after a restart.
  absl::StatusOr<std::unique_ptr<SqliteStateStore>> store =
      SqliteStateStore::Open((fs::path(dir) / "state.db").string());
  ASSERT_TRUE(store.ok()) << store.status();
  absl::StatusOr<Job> job = (*store)->GetJob(id);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->state, JobState::kRunning);
  EXPECT_EQ(job->counts.running, 0);
  EXPECT_GE(job->counts.staged, 1);
  EXPECT_LT(job->counts.staged, 28);
  store->reset();
  std::error_code ec;
  fs::remove_all(dir, ec);
}

}  // namespace
}  // namespace backfill
