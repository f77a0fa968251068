// In-process tests of the client library (client/backfill_client.h).
// Against a scripted fake BackfillService: status mapping, deadlines,
// idempotency key plumbing and the Watch stream (normal end, early stop,
// errors), the client alone. Against the real service (BackfillServiceImpl
// over a real BackfillManager, SQLite state store and warehouse in a
// temporary directory): pause and resume, concurrent submits with one
// idempotency key, and queueing behind an overlapping job.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "backfill/v1/backfill.grpc.pb.h"
#include "client/backfill_client.h"
#include "core/base/clock.h"
#include "core/model/pipeline_loader.h"
#include "core/run/backfill_manager.h"
#include "core/run/job_observer.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "server/backfill_service_impl.h"
#include "storage/sqlite/sqlite_engine.h"
#include "storage/sqlite/state/sqlite_state_store.h"
#include "tests/testing/forwarding_engine.h"
#include "tests/testing/revenue_pipeline.h"

namespace backfill {
namespace server_client_cli_test {
namespace {

class FakeService final : public v1::BackfillService::Service {
 public:
  grpc::Status PlanBackfill(grpc::ServerContext*,
                            const v1::PlanBackfillRequest* request,
                            v1::PlanBackfillResponse* response) override {
    if (request->request().dataset() == "foo") {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "unknown dataset \"foo\"; known datasets: orders");
    }
    response->set_total_partitions(request->request().partitions_size());
    return grpc::Status::OK;
  }

  grpc::Status SubmitBackfill(grpc::ServerContext*,
                              const v1::SubmitBackfillRequest* request,
                              v1::SubmitBackfillResponse* response) override {
    response->mutable_backfill()->set_id("bf-1");
    response->mutable_backfill()->set_idempotency_key(
        request->idempotency_key());
    *response->mutable_backfill()->mutable_request() = request->request();
    response->set_created(request->idempotency_key() != "seen");
    return grpc::Status::OK;
  }

  grpc::Status GetBackfill(grpc::ServerContext*,
                           const v1::GetBackfillRequest* request,
                           v1::Backfill* response) override {
    if (request->id() != "bf-1") {
      return grpc::Status(grpc::StatusCode::NOT_FOUND, "no backfill");
    }
    response->set_id("bf-1");
    response->set_state(v1::BACKFILL_STATE_RUNNING);
    return grpc::Status::OK;
  }

  grpc::Status ListDatasets(grpc::ServerContext* context,
                            const v1::ListDatasetsRequest*,
                            v1::ListDatasetsResponse* response) override {
    // Slow on purpose so a short client deadline expires.
    for (int i = 0; i < 50 && !context->IsCancelled(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    response->add_datasets()->set_name("orders");
    return grpc::Status::OK;
  }

  grpc::Status WatchBackfill(
      grpc::ServerContext* context, const v1::WatchBackfillRequest* request,
      grpc::ServerWriter<v1::Backfill>* writer) override {
    if (request->id() != "bf-1") {
      return grpc::Status(grpc::StatusCode::NOT_FOUND, "no backfill");
    }
    for (int done = 0; done <= 10 && !context->IsCancelled(); ++done) {
      v1::Backfill update;
      update.set_id("bf-1");
      update.set_state(done == 10 ? v1::BACKFILL_STATE_SUCCEEDED
                                  : v1::BACKFILL_STATE_RUNNING);
      update.mutable_partitions()->set_total(10);
      update.mutable_partitions()->set_published(done);
      if (!writer->Write(update)) break;
      ++writes_;
    }
    return grpc::Status::OK;
  }

  std::atomic<int> writes_{0};
};

class ClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_GT(port, 0);
    client_ = BackfillClient::Connect("127.0.0.1:" + std::to_string(port));
  }
  void TearDown() override { server_->Shutdown(); }

  FakeService service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<BackfillClient> client_;
};

TEST_F(ClientTest, WaitForReadyConnects) {
  EXPECT_TRUE(client_->WaitForReady(absl::Seconds(5)).ok());
}

TEST_F(ClientTest, ServerErrorKeepsCodeAndMessage) {
  v1::BackfillRequest request;
  request.set_dataset("foo");
  auto plan = client_->Plan(request);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(plan.status().message(),
            "unknown dataset \"foo\"; known datasets: orders");
}

TEST_F(ClientTest, PlanSendsTheRequest) {
  v1::BackfillRequest request;
  request.set_dataset("orders");
  request.add_partitions("2025-03-01");
  request.add_partitions("2025-03-02");
  auto plan = client_->Plan(request);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->total_partitions(), 2);
}

TEST_F(ClientTest, SubmitSendsIdempotencyKey) {
  v1::BackfillRequest request;
  request.set_dataset("orders");
  request.set_reason("fix");
  auto first = client_->Submit(request, "k1");
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(first->created());
  EXPECT_EQ(first->backfill().idempotency_key(), "k1");
  EXPECT_EQ(first->backfill().request().reason(), "fix");
  auto again = client_->Submit(request, "seen");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE(again->created());
}

TEST_F(ClientTest, GetUnknownIsNotFound) {
  EXPECT_TRUE(client_->Get("bf-1").ok());
  EXPECT_EQ(client_->Get("nope").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(ClientTest, UnaryCallsHaveADeadline) {
  client_->set_rpc_timeout(absl::Milliseconds(50));
  auto datasets = client_->ListDatasets();
  EXPECT_EQ(datasets.status().code(), absl::StatusCode::kDeadlineExceeded);
  client_->set_rpc_timeout(absl::Seconds(10));
  EXPECT_TRUE(client_->ListDatasets().ok());
}

TEST_F(ClientTest, WatchReadsTheWholeStream) {
  std::vector<int64_t> published;
  absl::Status status = client_->Watch("bf-1", [&](const v1::Backfill& job) {
    published.push_back(job.partitions().published());
    return true;
  });
  EXPECT_TRUE(status.ok()) << status;
  ASSERT_EQ(published.size(), 11u);
  EXPECT_EQ(published.back(), 10);
}

TEST_F(ClientTest, WatchStopsWhenTheCallbackSaysSo) {
  int updates = 0;
  absl::Status status = client_->Watch(
      "bf-1", [&](const v1::Backfill&) { return ++updates < 3; });
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_EQ(updates, 3);
}

TEST_F(ClientTest, WatchUnknownJobIsNotFound) {
  absl::Status status =
      client_->Watch("nope", [](const v1::Backfill&) { return true; });
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
}

TEST(ClientWithoutServerTest, UnreachableServerIsUnavailable) {
  // Bind and release a port so nothing listens on it.
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in address = {};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)),
            0);
  socklen_t length = sizeof(address);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length), 0);
  int port = ntohs(address.sin_port);
  close(fd);
  auto client = BackfillClient::Connect("127.0.0.1:" + std::to_string(port));
  EXPECT_EQ(client->WaitForReady(absl::Milliseconds(200)).code(),
            absl::StatusCode::kUnavailable);
  client->set_rpc_timeout(absl::Seconds(5));
  EXPECT_EQ(client->Get("bf-1").status().code(),
            absl::StatusCode::kUnavailable);
}

TEST(FromGrpcStatusTest, MapsCodeAndMessage) {
  EXPECT_TRUE(FromGrpcStatus(grpc::Status::OK).ok());
  absl::Status status = FromGrpcStatus(
      grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "conflict"));
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(status.message(), "conflict");
}

// ------------------------------------------------ against the real service

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// An engine that holds every partition recompute at a gate until it opens,
// so that a test sees a job RUNNING for as long as it needs.
class GatedEngine final : public backfill::testing::ForwardingEngine {
 public:
  using ForwardingEngine::ForwardingEngine;

  absl::StatusOr<StageResult> StagePartition(
      const std::string& job_id, const DatasetSpec& dataset,
      const std::string& partition,
      const std::vector<InputRef>& inputs) override {
    {
      absl::MutexLock lock(&mu_);
      ++entered_;
      mu_.Await(absl::Condition(&open_));
    }
    return inner()->StagePartition(job_id, dataset, partition, inputs);
  }
  void Interrupt() override {
    Open();
    ForwardingEngine::Interrupt();
  }

  void Open() {
    absl::MutexLock lock(&mu_);
    open_ = true;
  }
  // True once `count` recomputes have reached the gate.
  bool AwaitEntered(int count, absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    auto reached = [this, count]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return entered_ >= count;
    };
    return mu_.AwaitWithTimeout(absl::Condition(&reached), timeout);
  }

 private:
  absl::Mutex mu_;
  bool open_ ABSL_GUARDED_BY(mu_) = false;
  int entered_ ABSL_GUARDED_BY(mu_) = 0;
};

void Exec(sqlite3* db, const std::string& sql) {
  char* error = nullptr;
  ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error), SQLITE_OK)
      << sql << ": " << (error ? error : "");
  sqlite3_free(error);
}

// raw_orders for 2025-03-01 .. 2025-03-07 and dim_customers, for the
// revenue pipeline.
void CreateWarehouse(const std::string& path) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  std::string sql =
      "CREATE TABLE raw_orders (order_id INTEGER PRIMARY KEY, order_date "
      "TEXT NOT NULL, customer_id INTEGER NOT NULL, amount REAL NOT NULL, "
      "refund REAL NOT NULL);"
      "CREATE TABLE dim_customers (customer_id INTEGER PRIMARY KEY, region "
      "TEXT NOT NULL);"
      "BEGIN;"
      "INSERT INTO dim_customers VALUES (0, 'emea'), (1, 'amer');";
  for (int day = 1; day <= 7; ++day) {
    for (int i = 0; i < 4; ++i) {
      absl::StrAppendFormat(&sql,
                            "INSERT INTO raw_orders (order_date, customer_id, "
                            "amount, refund) VALUES ('2025-03-%02d', %d, "
                            "%d.5, 0);",
                            day, i % 2, 10 * (i + 1));
    }
  }
  absl::StrAppend(&sql, "COMMIT;");
  Exec(db, sql);
  sqlite3_close(db);
}

v1::BackfillRequest Range(const std::string& from, const std::string& to) {
  v1::BackfillRequest request;
  request.set_dataset("daily_revenue");
  request.set_from_partition(from);
  request.set_to_partition(to);
  request.set_reason("fix refunds");
  request.set_requested_by("server_client_cli_test");
  return request;
}

class ClientAgainstServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl =
        (fs::temp_directory_path() / "backfill-client-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    const std::string warehouse = (fs::path(dir_) / "warehouse.db").string();
    ASSERT_NO_FATAL_FAILURE(CreateWarehouse(warehouse));

    absl::StatusOr<Catalog> catalog =
        LoadPipelineTexts({{"pipeline.yaml", fixtures::RevenuePipelineYaml()}});
    ASSERT_TRUE(catalog.ok()) << catalog.status();
    catalog_ = std::make_unique<Catalog>(*std::move(catalog));
    auto store = SqliteStateStore::Open((fs::path(dir_) / "state.db").string());
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    auto engine = SqliteEngine::Open(warehouse, 4);
    ASSERT_TRUE(engine.ok()) << engine.status();
    engine_ = *std::move(engine);
    gated_ = std::make_unique<GatedEngine>(engine_.get());

    ManagerOptions options;
    options.workers = 2;
    options.retry_backoff = absl::Milliseconds(10);
    manager_ = std::make_unique<BackfillManager>(catalog_.get(), store_.get(),
                                                 gated_.get(), &clock_,
                                                 &observer_, options);
    ASSERT_TRUE(manager_->Start().ok());
    api_ =
        std::make_unique<BackfillApi>(manager_.get(), absl::Milliseconds(100));
    service_ = std::make_unique<BackfillServiceImpl>(api_.get());
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    target_ = absl::StrCat("127.0.0.1:", port);
    client_ = BackfillClient::Connect(target_);
    client_->set_rpc_timeout(absl::Seconds(30));
    ASSERT_TRUE(client_->WaitForReady(absl::Seconds(10)).ok());
  }

  void TearDown() override {
    if (gated_) gated_->Open();
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
    gated_.reset();
    engine_.reset();
    store_.reset();
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }

  // Polls the job until `done` holds for it (true) or `timeout` passes.
  bool AwaitJob(const std::string& id,
                const std::function<bool(const v1::Backfill&)>& done,
                absl::Duration timeout = absl::Seconds(30)) {
    const absl::Time deadline = absl::Now() + timeout;
    while (absl::Now() < deadline) {
      absl::StatusOr<v1::Backfill> job = client_->Get(id);
      if (job.ok() && done(*job)) return true;
      absl::SleepFor(absl::Milliseconds(10));
    }
    return false;
  }

  // Follows the job to its end; returns its last state.
  v1::Backfill WatchToEnd(const std::string& id) {
    v1::Backfill last;
    absl::Status status = client_->Watch(id, [&](const v1::Backfill& job) {
      last = job;
      return true;
    });
    EXPECT_TRUE(status.ok()) << status;
    return last;
  }

  std::string dir_;
  std::string target_;
  SystemClock clock_;
  JobObserver observer_;  // no-op
  std::unique_ptr<Catalog> catalog_;
  std::unique_ptr<StateStore> store_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<GatedEngine> gated_;
  std::unique_ptr<BackfillManager> manager_;
  std::unique_ptr<BackfillApi> api_;
  std::unique_ptr<BackfillServiceImpl> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<BackfillClient> client_;
};

TEST_F(ClientAgainstServerTest, PauseThenResumeARunningJob) {
  absl::StatusOr<v1::SubmitBackfillResponse> submitted =
      client_->Submit(Range("2025-03-01", "2025-03-08"), NewRandomUuid());
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  const std::string id = submitted->backfill().id();
  // Two workers: two partitions are being recomputed, held at the gate.
  ASSERT_TRUE(gated_->AwaitEntered(2, absl::Seconds(30)));
  ASSERT_TRUE(AwaitJob(id, [](const v1::Backfill& job) {
    return job.state() == v1::BACKFILL_STATE_RUNNING;
  }));

  absl::StatusOr<v1::Backfill> paused = client_->Pause(id, "disk maintenance");
  ASSERT_TRUE(paused.ok()) << paused.status();
  EXPECT_EQ(paused->id(), id);
  EXPECT_EQ(paused->state(), v1::BACKFILL_STATE_PAUSED);
  EXPECT_THAT(paused->message(), HasSubstr("disk maintenance"));

  // The two running partitions finish and checkpoint; nothing else starts.
  gated_->Open();
  ASSERT_TRUE(AwaitJob(id, [](const v1::Backfill& job) {
    return job.partitions().running() == 0 && job.partitions().staged() == 2;
  })) << client_->Get(id)->DebugString();
  absl::SleepFor(absl::Milliseconds(200));
  absl::StatusOr<v1::Backfill> still = client_->Get(id);
  ASSERT_TRUE(still.ok()) << still.status();
  EXPECT_EQ(still->state(), v1::BACKFILL_STATE_PAUSED);
  EXPECT_EQ(still->partitions().staged(), 2);
  EXPECT_EQ(still->partitions().pending(), 5);
  // Pausing again answers with the paused job.
  absl::StatusOr<v1::Backfill> again = client_->Pause(id, "");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->state(), v1::BACKFILL_STATE_PAUSED);

  absl::StatusOr<v1::Backfill> resumed =
      client_->Resume(id, "maintenance done");
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_EQ(resumed->id(), id);
  // The job as it is after the resume: it may already have moved on (its
  // message too), but it is no longer paused.
  EXPECT_NE(resumed->state(), v1::BACKFILL_STATE_PAUSED);
  const v1::Backfill last = WatchToEnd(id);
  EXPECT_EQ(last.state(), v1::BACKFILL_STATE_SUCCEEDED) << last.message();
  EXPECT_EQ(last.partitions().published(), 7);

  // A finished job can be neither paused, resumed nor retried.
  EXPECT_EQ(client_->Pause(id, "").status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(client_->Resume(id, "").status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(client_->Retry(id, "").status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(client_->Pause("bf-999", "").status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(ClientAgainstServerTest, ConcurrentSubmitsWithOneKeyMakeOneJob) {
  constexpr int kSubmitters = 50;
  const std::string key = NewRandomUuid();
  const v1::BackfillRequest request = Range("2025-03-01", "2025-03-04");
  std::vector<absl::StatusOr<v1::SubmitBackfillResponse>> answers(
      kSubmitters, absl::UnknownError("not run"));
  absl::Notification go;
  std::vector<std::thread> threads;
  for (int i = 0; i < kSubmitters; ++i) {
    threads.emplace_back([&, i] {
      // A client (and channel) per thread, as separate processes would.
      std::unique_ptr<BackfillClient> client = BackfillClient::Connect(target_);
      client->set_rpc_timeout(absl::Seconds(60));
      go.WaitForNotification();
      answers[i] = client->Submit(request, key);
    });
  }
  go.Notify();
  for (std::thread& thread : threads) thread.join();

  std::set<std::string> ids;
  int created = 0;
  for (const auto& answer : answers) {
    ASSERT_TRUE(answer.ok()) << answer.status();
    ids.insert(answer->backfill().id());
    EXPECT_EQ(answer->backfill().idempotency_key(), key);
    if (answer->created()) ++created;
  }
  EXPECT_EQ(ids.size(), 1u);
  EXPECT_EQ(created, 1);
  absl::StatusOr<v1::ListBackfillsResponse> listed =
      client_->List(v1::ListBackfillsRequest());
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->backfills_size(), 1);
  EXPECT_EQ(listed->backfills(0).id(), *ids.begin());
  gated_->Open();
  EXPECT_EQ(WatchToEnd(*ids.begin()).state(), v1::BACKFILL_STATE_SUCCEEDED);
}

TEST_F(ClientAgainstServerTest, OverlappingSubmitWaitsOrWithNoWaitIsRefused) {
  absl::StatusOr<v1::SubmitBackfillResponse> first =
      client_->Submit(Range("2025-03-01", "2025-03-05"), NewRandomUuid());
  ASSERT_TRUE(first.ok()) << first.status();
  const std::string first_id = first->backfill().id();
  ASSERT_TRUE(gated_->AwaitEntered(1, absl::Seconds(30)));

  // The plan names the job a submit would wait for.
  absl::StatusOr<v1::PlanBackfillResponse> plan =
      client_->Plan(Range("2025-03-03", "2025-03-07"));
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->conflicts_size(), 2);  // 2025-03-03 and 2025-03-04
  EXPECT_EQ(plan->conflicts(0).backfill_id(), first_id);
  EXPECT_EQ(plan->conflicts(1).backfill_id(), first_id);

  // With no_wait: refused, and no job is made.
  v1::SubmitBackfillRequest refused;
  *refused.mutable_request() = Range("2025-03-03", "2025-03-07");
  refused.set_idempotency_key(NewRandomUuid());
  refused.set_no_wait(true);
  absl::StatusOr<v1::SubmitBackfillResponse> no_wait = client_->Submit(refused);
  EXPECT_EQ(no_wait.status().code(), absl::StatusCode::kFailedPrecondition)
      << no_wait.status();
  EXPECT_THAT(no_wait.status().message(), HasSubstr(first_id));

  // Without: it waits in QUEUED, its message naming the first job.
  absl::StatusOr<v1::SubmitBackfillResponse> second =
      client_->Submit(Range("2025-03-03", "2025-03-07"), NewRandomUuid());
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_TRUE(second->created());
  const std::string second_id = second->backfill().id();
  EXPECT_NE(second_id, first_id);
  EXPECT_EQ(second->backfill().state(), v1::BACKFILL_STATE_QUEUED);
  EXPECT_THAT(second->backfill().message(), HasSubstr(first_id));
  absl::SleepFor(absl::Milliseconds(200));
  absl::StatusOr<v1::Backfill> waiting = client_->Get(second_id);
  ASSERT_TRUE(waiting.ok()) << waiting.status();
  EXPECT_EQ(waiting->state(), v1::BACKFILL_STATE_QUEUED);
  EXPECT_THAT(waiting->message(), HasSubstr(first_id));

  absl::StatusOr<v1::ListBackfillsResponse> listed =
      client_->List(v1::ListBackfillsRequest());
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_EQ(listed->backfills_size(), 2);

  // Both finish, the waiting one after the first.
  gated_->Open();
  const v1::Backfill first_end = WatchToEnd(first_id);
  const v1::Backfill second_end = WatchToEnd(second_id);
  EXPECT_EQ(first_end.state(), v1::BACKFILL_STATE_SUCCEEDED)
      << first_end.message();
  EXPECT_EQ(second_end.state(), v1::BACKFILL_STATE_SUCCEEDED)
      << second_end.message();
}

}  // namespace
}  // namespace server_client_cli_test
}  // namespace backfill
