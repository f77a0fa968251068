// The daemon's log: a real Daemon (gRPC server, manager, SQLite store and
// warehouse on a temporary directory) whose log is captured. A job cancelled
// with a reason that tries to forge log lines: whatever the reason holds,
// the job's log record stays one line. The warning of a daemon without
// authentication names the port it listens on, not the 0 it was given.

#include <sqlite3.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/backfill_client.h"
#include "core/model/pipeline_loader.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/daemon.h"
#include "spdlog/sinks/ringbuffer_sink.h"
#include "spdlog/spdlog.h"
#include "tests/testing/revenue_pipeline.h"

namespace backfill {
namespace server_daemon_log_test {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

void Exec(sqlite3* db, const char* sql) {
  char* error = nullptr;
  ASSERT_EQ(sqlite3_exec(db, sql, nullptr, nullptr, &error), SQLITE_OK)
      << sql << ": " << (error ? error : "");
  sqlite3_free(error);
}

class DaemonLogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl =
        (fs::temp_directory_path() / "backfill-daemon-log-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    ASSERT_EQ(
        sqlite3_open((fs::path(dir_) / "warehouse.db").c_str(), &warehouse_),
        SQLITE_OK);
    Exec(warehouse_,
         "CREATE TABLE raw_orders (order_id INTEGER PRIMARY KEY, order_date "
         "TEXT NOT NULL, customer_id INTEGER NOT NULL, amount REAL NOT NULL, "
         "refund REAL NOT NULL);"
         "CREATE TABLE dim_customers (customer_id INTEGER PRIMARY KEY, region "
         "TEXT NOT NULL);"
         "INSERT INTO dim_customers VALUES (1, 'emea');"
         "INSERT INTO raw_orders (order_date, customer_id, amount, refund) "
         "VALUES ('2025-03-01', 1, 10.0, 0.0);");

    previous_logger_ = spdlog::default_logger();
    log_ = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(1000);
    spdlog::set_default_logger(
        std::make_shared<spdlog::logger>("backfilld", log_));
    spdlog::set_level(spdlog::level::info);
  }

  void TearDown() override {
    if (daemon_ != nullptr) daemon_->Shutdown();
    daemon_.reset();
    spdlog::set_default_logger(previous_logger_);
    if (warehouse_ != nullptr) sqlite3_close(warehouse_);
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }

  // Every log line so far (a record whose text held a newline would span
  // several).
  std::vector<std::string> LogLines() {
    std::vector<std::string> lines;
    for (const std::string& record : log_->last_formatted()) {
      for (absl::string_view line :
           absl::StrSplit(record, '\n', absl::SkipEmpty())) {
        lines.emplace_back(line);
      }
    }
    return lines;
  }

  bool LogHas(absl::string_view text) {
    for (const std::string& line : LogLines()) {
      if (absl::StrContains(line, text)) return true;
    }
    return false;
  }

  std::string dir_;
  sqlite3* warehouse_ = nullptr;
  std::shared_ptr<spdlog::logger> previous_logger_;
  std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> log_;
  std::unique_ptr<Daemon> daemon_;
};

TEST_F(DaemonLogTest, ACancelReasonCannotForgeALogLine) {
  absl::StatusOr<Catalog> catalog =
      LoadPipelineTexts({{"pipeline.yaml", fixtures::RevenuePipelineYaml()}});
  ASSERT_TRUE(catalog.ok()) << catalog.status();
  DaemonOptions options;
  options.data_dir = dir_;
  options.listen = "127.0.0.1:0";
  options.metrics_listen = "none";
  options.workers = 1;
  options.shutdown_grace = absl::Seconds(1);
  absl::StatusOr<std::unique_ptr<Daemon>> daemon =
      Daemon::Start(options, *std::move(catalog));
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  daemon_ = *std::move(daemon);
  std::unique_ptr<BackfillClient> client =
      BackfillClient::Connect(daemon_->listen_address());
  client->set_rpc_timeout(absl::Seconds(30));

  // Holding the warehouse's write lock keeps the job QUEUED (it cannot
  // prepare its staging), so that it is still there to cancel.
  Exec(warehouse_, "BEGIN EXCLUSIVE");
  v1::BackfillRequest request;
  request.set_dataset("daily_revenue");
  request.set_from_partition("2025-03-01");
  request.set_to_partition("2025-03-02");
  request.set_reason("fix refunds");
  request.set_requested_by("server_daemon_log_test");
  absl::StatusOr<v1::SubmitBackfillResponse> submitted =
      client->Submit(request, "");
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  const std::string id = submitted->backfill().id();

  const std::string forged =
      "[2025-01-01 00:00:00.000] [backfilld] [info] job bf-999: RUNNING -> "
      "SUCCEEDED: FORGED";
  // Newlines and tabs are the control characters a reason may hold.
  const std::string reason = "wrong range\n" + forged + "\n\tend";
  std::future<absl::StatusOr<v1::Backfill>> cancelled = std::async(
      std::launch::async, [&] { return client->Cancel(id, reason); });
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (!LogHas("-> CANCELLED") && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  Exec(warehouse_, "ROLLBACK");
  ASSERT_EQ(cancelled.wait_for(std::chrono::seconds(30)),
            std::future_status::ready);
  absl::StatusOr<v1::Backfill> job = cancelled.get();
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->state(), v1::BACKFILL_STATE_CANCELLED);

  // The record is one line, the reason escaped in it.
  const std::vector<std::string> lines = LogLines();
  ASSERT_FALSE(lines.empty());
  bool found = false;
  for (const std::string& line : lines) {
    EXPECT_TRUE(absl::StartsWith(line, "[")) << "a line of its own: " << line;
    EXPECT_FALSE(absl::StartsWith(line, forged)) << line;
    EXPECT_EQ(line.find('\t'), std::string::npos) << line;
    if (absl::StrContains(line, "-> CANCELLED")) {
      found = true;
      EXPECT_THAT(
          line, HasSubstr("cancelled: wrong range\\n" + forged + "\\n\\tend"));
    }
  }
  EXPECT_TRUE(found);
}

// Without --auth-tokens the daemon warns who may call it, naming the
// address it listens on: with port 0 in --listen, the port the system
// chose, the one clients must use.
TEST_F(DaemonLogTest, TheAuthenticationWarningNamesTheBoundPort) {
  absl::StatusOr<Catalog> catalog =
      LoadPipelineTexts({{"pipeline.yaml", fixtures::RevenuePipelineYaml()}});
  ASSERT_TRUE(catalog.ok()) << catalog.status();
  DaemonOptions options;
  options.data_dir = dir_;
  options.listen = "127.0.0.1:0";
  options.metrics_listen = "none";
  options.workers = 1;
  absl::StatusOr<std::unique_ptr<Daemon>> daemon =
      Daemon::Start(options, *std::move(catalog));
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  daemon_ = *std::move(daemon);
  const std::string bound = daemon_->listen_address();
  ASSERT_NE(bound, "127.0.0.1:0");
  ASSERT_TRUE(absl::StartsWith(bound, "127.0.0.1:")) << bound;

  std::vector<std::string> warnings;
  for (const std::string& line : LogLines()) {
    if (absl::StrContains(line, "authentication off")) warnings.push_back(line);
  }
  ASSERT_EQ(warnings.size(), 1u) << absl::StrJoin(LogLines(), "\n");
  EXPECT_THAT(warnings[0],
              HasSubstr(absl::StrCat("[warning] authentication off (no "
                                     "--auth-tokens): whoever reaches ",
                                     bound, " may call every method")));
  EXPECT_FALSE(LogHas("127.0.0.1:0 "));
}

}  // namespace
}  // namespace server_daemon_log_test
}  // namespace backfill
