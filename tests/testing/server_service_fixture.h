// ServerServiceTest: the fixture of the in-process gRPC tests of
// BackfillServiceImpl (server_service_*_test.cc): a real SqliteStateStore
// and SqliteEngine on a temporary directory holding a week of generated
// orders, a real BackfillManager, the service on a gRPC server at
// 127.0.0.1:0 and the real BackfillClient; and plain-SQL readers of what
// was published.
//
// Owned by each test; the test's thread drives it.

#ifndef BACKFILL_TESTS_TESTING_SERVER_SERVICE_FIXTURE_H_
#define BACKFILL_TESTS_TESTING_SERVER_SERVICE_FIXTURE_H_

#include <sqlite3.h>
#include <stdlib.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <future>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "client/backfill_client.h"
#include "core/base/clock.h"
#include "core/model/pipeline_loader.h"
#include "core/run/backfill_manager.h"
#include "core/run/job_observer.h"
#include "gmock/gmock.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "gtest/gtest.h"
#include "server/backfill_service_impl.h"
#include "server/proto_convert.h"
#include "storage/sqlite/sqlite_engine.h"
#include "storage/sqlite/state/sqlite_state_store.h"
#include "tests/testing/raw_grpc.h"
#include "tests/testing/revenue_pipeline.h"

namespace backfill::testing {

namespace fs = std::filesystem;

// The full name of SubmitBackfill, for calls with hand-made bytes.
inline constexpr char kSubmitMethod[] =
    "/backfill.v1.BackfillService/SubmitBackfill";

inline constexpr int kDays = 7;  // 2025-03-01 .. 2025-03-07
inline constexpr int kCustomers = 6;

struct Order {
  std::string date;
  int customer;
  double amount;
  double refund;
};

inline std::string RegionOf(int customer) {
  static const char* const kRegions[] = {"emea", "amer", "apac"};
  return kRegions[customer % 3];
}

// The warehouse's raw orders, generated deterministically.
inline std::vector<Order> MakeOrders() {
  std::vector<Order> orders;
  for (int day = 1; day <= kDays; ++day) {
    for (int i = 0; i < 3 + day; ++i) {
      orders.push_back({absl::StrFormat("2025-03-%02d", day),
                        (day * 7 + i) % kCustomers, 10.0 * (i + 1) + day,
                        i % 4 == 0 ? 2.5 : 0.0});
    }
  }
  return orders;
}

inline void Exec(sqlite3* db, const std::string& sql) {
  char* error = nullptr;
  ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error), SQLITE_OK)
      << sql << ": " << (error ? error : "");
  sqlite3_free(error);
}

inline void CreateWarehouse(const std::string& path,
                            const std::vector<Order>& orders) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  Exec(db,
       "CREATE TABLE raw_orders (order_id INTEGER PRIMARY KEY, order_date "
       "TEXT NOT NULL, customer_id INTEGER NOT NULL, amount REAL NOT NULL, "
       "refund REAL NOT NULL);"
       "CREATE TABLE dim_customers (customer_id INTEGER PRIMARY KEY, region "
       "TEXT NOT NULL);");
  std::string sql = "BEGIN;";
  for (int c = 0; c < kCustomers; ++c) {
    absl::StrAppend(&sql, "INSERT INTO dim_customers VALUES (", c, ", '",
                    RegionOf(c), "');");
  }
  for (const Order& o : orders) {
    absl::StrAppendFormat(&sql,
                          "INSERT INTO raw_orders (order_date, customer_id, "
                          "amount, refund) VALUES ('%s', %d, %.2f, %.2f);",
                          o.date, o.customer, o.amount, o.refund);
  }
  absl::StrAppend(&sql, "COMMIT;");
  Exec(db, sql);
  sqlite3_close(db);
}

struct RevenueRow {
  double revenue = 0;
  int64_t orders = 0;
};
using RevenueTable = std::map<std::pair<std::string, std::string>, RevenueRow>;

// What daily_revenue must hold, computed in C++ from the generated orders.
inline RevenueTable ExpectedRevenue(const std::vector<Order>& orders,
                                    const std::string& from,
                                    const std::string& to) {
  RevenueTable table;
  for (const Order& o : orders) {
    if (o.date < from || o.date >= to) continue;
    RevenueRow& row = table[{o.date, RegionOf(o.customer)}];
    row.revenue += o.amount - o.refund;
    row.orders += 1;
  }
  return table;
}

// The published daily_revenue table, read with plain SQL.
inline RevenueTable ReadPublished(const std::string& warehouse) {
  RevenueTable table;
  sqlite3* db = nullptr;
  EXPECT_EQ(
      sqlite3_open_v2(warehouse.c_str(), &db, SQLITE_OPEN_READONLY, nullptr),
      SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(
                db, "SELECT ds, region, revenue, orders FROM daily_revenue", -1,
                &stmt, nullptr),
            SQLITE_OK)
      << sqlite3_errmsg(db);
  while (stmt != nullptr && sqlite3_step(stmt) == SQLITE_ROW) {
    RevenueRow& row =
        table[{reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0)),
               reinterpret_cast<const char*>(sqlite3_column_text(stmt, 1))}];
    row.revenue = sqlite3_column_double(stmt, 2);
    row.orders = sqlite3_column_int64(stmt, 3);
  }
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  return table;
}

inline v1::BackfillRequest RangeRequest(
    const std::string& dataset, const std::string& from, const std::string& to,
    const std::string& reason = "fix refunds") {
  v1::BackfillRequest request;
  request.set_dataset(dataset);
  request.set_from_partition(from);
  request.set_to_partition(to);
  request.set_reason(reason);
  request.set_requested_by("server_service_test");
  return request;
}

class ServerServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl =
        (fs::temp_directory_path() / "backfill-server-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    warehouse_ = (fs::path(dir_) / "warehouse.db").string();
    orders_ = MakeOrders();
    CreateWarehouse(warehouse_, orders_);

    absl::StatusOr<Catalog> catalog =
        LoadPipelineTexts({{"pipeline.yaml", fixtures::RevenuePipelineYaml()}});
    ASSERT_TRUE(catalog.ok()) << catalog.status();
    catalog_ = std::make_unique<Catalog>(*std::move(catalog));

    auto store = SqliteStateStore::Open((fs::path(dir_) / "state.db").string());
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    auto engine = SqliteEngine::Open(warehouse_, 4);
    ASSERT_TRUE(engine.ok()) << engine.status();
    engine_ = *std::move(engine);

    ManagerOptions options;
    options.workers = 2;
    options.retry_backoff = absl::Milliseconds(10);
    manager_ = std::make_unique<BackfillManager>(catalog_.get(), store_.get(),
                                                 engine_.get(), &clock_,
                                                 &observer_, options);
    ASSERT_TRUE(manager_->Start().ok());

    api_ = std::make_unique<BackfillApi>(
        manager_.get(), absl::Milliseconds(200), kMaxListPageBytes, Limits());
    service_ = std::make_unique<BackfillServiceImpl>(api_.get());
    grpc::EnableDefaultHealthCheckService(true);
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_NE(port, 0);
    server_->GetHealthCheckService()->SetServingStatus(
        "backfill.v1.BackfillService", true);
    target_ = absl::StrCat("127.0.0.1:", port);
    client_ = BackfillClient::Connect(target_);
    client_->set_rpc_timeout(absl::Seconds(30));
    ASSERT_TRUE(client_->WaitForReady(absl::Seconds(10)).ok());
  }

  void TearDown() override {
    if (server_) {
      api_->BeginShutdown();
      server_->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(2)));
      server_->Wait();
    }
    if (manager_) manager_->Shutdown();
    client_.reset();
    server_.reset();
    service_.reset();
    manager_.reset();
    engine_.reset();
    store_.reset();
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }

  size_t StoredJobs() {
    JobFilter filter;
    filter.limit = 1000;
    absl::StatusOr<std::vector<Job>> jobs = store_->ListJobs(filter);
    EXPECT_TRUE(jobs.ok()) << jobs.status();
    return jobs.ok() ? jobs->size() : 0;
  }

  // The published daily_revenue is exactly what the orders of [from, to)
  // make, read with plain SQL and computed in C++.
  void ExpectPublishedRevenue(const std::string& from, const std::string& to) {
    const RevenueTable expected = ExpectedRevenue(orders_, from, to);
    const RevenueTable published = ReadPublished(warehouse_);
    ASSERT_EQ(published.size(), expected.size());
    for (const auto& [key, row] : expected) {
      auto it = published.find(key);
      ASSERT_NE(it, published.end()) << key.first << " " << key.second;
      EXPECT_NEAR(it->second.revenue, row.revenue, 1e-6);
      EXPECT_EQ(it->second.orders, row.orders);
    }
  }

  // The service's limits (a test overrides it before SetUp).
  virtual ServiceLimits Limits() const { return {}; }

  // Watches the job to its end; returns every update.
  std::vector<v1::Backfill> WatchToEnd(const std::string& id) {
    std::vector<v1::Backfill> updates;
    absl::Status status = client_->Watch(id, [&](const v1::Backfill& b) {
      updates.push_back(b);
      return true;
    });
    EXPECT_TRUE(status.ok()) << status;
    return updates;
  }

  std::string dir_;
  std::string warehouse_;
  std::string target_;
  std::vector<Order> orders_;
  SystemClock clock_;
  JobObserver observer_;  // no-op
  std::unique_ptr<Catalog> catalog_;
  std::unique_ptr<StateStore> store_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<BackfillManager> manager_;
  std::unique_ptr<BackfillApi> api_;
  std::unique_ptr<BackfillServiceImpl> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<BackfillClient> client_;
};

}  // namespace backfill::testing

#endif  // BACKFILL_TESTS_TESTING_SERVER_SERVICE_FIXTURE_H_
