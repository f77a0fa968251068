// In-process tests of the client library (client/backfill_client.h) against
// a scripted fake BackfillService: status mapping, deadlines, idempotency
// key plumbing and the Watch stream (normal end, early stop, errors).
// Needs no real backfilld, so it exercises the client alone.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/time.h"
#include "backfill/v1/backfill.grpc.pb.h"
#include "client/backfill_client.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"

namespace backfill {
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

}  // namespace
}  // namespace backfill
